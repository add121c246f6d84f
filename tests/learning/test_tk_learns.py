"""End to end on generated data: TK trained by the shared loop beats BM25 (slow)."""

from __future__ import annotations

import torch

from rankstudy import formats
from rankstudy.evaluate import aggregate, evaluate_run
from rankstudy.lucene import build_index, search
from rankstudy.models import build_model
from rankstudy.rerank import score_candidates
from rankstudy.significance import wilcoxon_p
from rankstudy.store import TokenStore
from rankstudy.text.embeddings import train_embeddings
from rankstudy.text.vocab import build_vocabulary
from rankstudy.text.word_store import build_store
from rankstudy.train.examples import make_triples
from rankstudy.train.loop import TrainConfig, make_validator, train



def test_trained_tk_beats_bm25_on_synthetic_passages(tmp_path, passage_data):
    """The default study's passage data, TK as configured there, fewer training steps."""
    data = passage_data
    data.write(tmp_path / "data")
    d = tmp_path / "data"
    build_index(d / "collection.tsv", tmp_path / "index", threads=2)
    runs = {}
    for split in ("train", "dev", "test"):
        search(tmp_path / "index", d / f"queries.{split}.tsv", tmp_path / f"bm25.{split}.run", "bm25",
               {"k1": 0.9, "b": 0.4}, hits=100, threads=2)
        runs[split] = formats.read_run(tmp_path / f"bm25.{split}.run")
    vocab = build_vocabulary(d / "collection.tsv", 5)
    build_store(d / "collection.tsv", vocab, tmp_path / "docs")
    stores = {}
    for split in ("train", "dev", "test"):
        build_store(d / f"queries.{split}.tsv", vocab, tmp_path / f"q.{split}", kind="queries")
        stores[split] = TokenStore(tmp_path / f"q.{split}")
    docs = TokenStore(tmp_path / "docs")
    embeddings = train_embeddings(docs, vocab, "word2vec", 64, 15, 5, seed=1)
    cfg = TrainConfig(loss="pairwise", max_steps=1500, validate_every=250, patience=3, metric="RR@10",
                      validation_depth=50, batch_size=32, learning_rates={"contextualizer": 1e-4, "default": 1e-3},
                      device="cpu")
    torch.manual_seed(1)
    model = build_model("tk", {"layers": 1, "heads": 4, "ff_dim": 64, "train_embeddings": False}, embeddings)
    triples = make_triples(data.qrels["train"], runs["train"], 1, 100, 20, seed=1)
    validate = make_validator(runs["dev"], data.qrels["dev"], stores["dev"], docs, cfg)
    summary = train(model, triples, stores["train"], docs, validate, cfg, tmp_path / "model", seed=1)
    losses = [float(line.split(",")[1]) for line in (tmp_path / "model" / "log.csv").read_text().splitlines()[2:]]
    # (row 1 is step 0: the untrained model's validation, no loss)
    assert losses[-1] < losses[0] * 0.8, losses  # training reduces the loss

    tk_run = score_candidates(model.eval(), runs["test"], stores["test"], docs, 100, 64, 30, 200, torch.device("cpu"),
                              progress=False)
    per_query = {name: evaluate_run(run, data.qrels["test"], ["nDCG@10"]) for name, run in
                 (("tk", tk_run), ("bm25", runs["test"]))}
    means = {name: float(aggregate(rows)["value"].iloc[0]) for name, rows in per_query.items()}
    values = {name: dict(zip(rows["qid"], rows["value"])) for name, rows in per_query.items()}
    assert means["tk"] > means["bm25"] + 0.03, (means, summary)
    assert wilcoxon_p(values["tk"], values["bm25"]) < 0.05, means
