"""Re-ranking: scoring candidates, re-ranking depth (apply and tune), ensembles, the best seed, merged folds,
and their CLI commands."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from helpers import TOPICS, FakeStore, train_here, write_training_inputs
from rankstudy import cli
from rankstudy.errors import StudyError
from rankstudy.formats import read_qrels, read_run, write_qrels, write_queries, write_run
from rankstudy.rerank import score_candidates
from rankstudy.runs import best_validated, ensemble, merge_disjoint, rerank_to_depth, tune_depth
from rankstudy.train.examples import read_groups, read_triples


class SumRanker(nn.Module):
    """Dot product of sum-pooled embeddings (padding id 0 embeds to zero)."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(20, 4, padding_idx=0)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.randn(20, 4, generator=torch.Generator().manual_seed(0)))
            self.embedding.weight[0] = 0

    def forward(self, query, document):
        return (self.embedding(query).sum(1) * self.embedding(document).sum(1)).sum(-1)


def test_score_candidates_scores_the_top_depth():
    queries = FakeStore({"q1": [1, 2], "q2": [3]})
    docs = FakeStore({f"d{i}": list(range(1 + i % 5, 4 + i % 7)) for i in range(8)})
    run = {"q1": [(f"d{i}", 10.0 - i) for i in range(5)], "q2": [(f"d{i}", 1.0 + i) for i in range(3, 8)]}
    model = SumRanker()
    model.train()
    result = score_candidates(model, run, queries, docs, depth=3, batch_size=2, max_query_length=5,
                              max_doc_length=10, device="cpu", progress=False)
    assert not model.training
    assert {d for d, _ in result["q1"]} == {"d0", "d1", "d2"} and {d for d, _ in result["q2"]} == {"d7", "d6", "d5"}
    for qid, ranking in result.items():
        assert [s for _, s in ranking] == sorted((s for _, s in ranking), reverse=True)
        for docid, score in ranking:
            q = torch.tensor(queries.batch([qid], 5))
            d = torch.tensor(docs.batch([docid], 10))
            assert score == pytest.approx(model(q, d).item(), rel=1e-5)
    wide = score_candidates(model, run, queries, docs, 3, 100, 5, 10, torch.device("cpu"), progress=False)
    assert all(dict(wide[q]) == pytest.approx(dict(result[q]), rel=1e-5) for q in run)  # batching is invisible


class WidthRecorder(SumRanker):
    def __init__(self):
        super().__init__()
        self.widths = []

    def forward(self, query, document):
        self.widths.append(document.shape[1])
        return super().forward(query, document)


def test_batches_hold_documents_of_similar_length():
    queries = FakeStore({"q1": [1, 2], "q2": [3]})
    docs = FakeStore({f"d{i}": [1] * (1 + (i * 7) % 12) for i in range(12)})  # lengths 1..12, shuffled
    run = {"q1": [(f"d{i}", 10.0 - i) for i in range(6)], "q2": [(f"d{i}", 10.0 - i) for i in range(6, 12)]}
    model = WidthRecorder()
    result = score_candidates(model, run, queries, docs, 6, 4, 5, 10, "cpu", progress=False)
    assert model.widths == [4, 8, 10]  # sorted by length (capped at 10): 3 batches padded to 4, 8, 10 tokens
    for qid, ranking in result.items():
        for docid, score in ranking:  # each score still belongs to its own pair
            expected = model(torch.tensor(queries.batch([qid], 5)), torch.tensor(docs.batch([docid], 10)))
            assert score == pytest.approx(expected.item(), rel=1e-6)


FIRST = {"q1": [("d1", 5.0), ("d2", 4.0), ("d3", 3.0), ("d4", 2.0), ("d5", 1.0)],
         "q2": [("e1", 5.0), ("e2", 4.0), ("e3", 3.0), ("e4", 2.0), ("e5", 1.0)]}
NEURAL = {"q1": [("d4", 0.95), ("d3", 0.9), ("d1", 0.5), ("d2", 0.4), ("d5", 0.1)],
          "q2": [("e2", 0.8), ("e1", 0.2), ("e3", 0.1), ("e4", 0.05), ("e5", 0.0)]}
QRELS = {"q1": {"d3": 1, "d1": 0}, "q2": {"e1": 1}}


def test_rerank_to_depth():
    result = rerank_to_depth(FIRST, NEURAL, 3)
    assert [d for d, _ in result["q1"]] == ["d3", "d1", "d2", "d4", "d5"]
    assert [s for _, s in result["q1"]] == pytest.approx([0.9, 0.5, 0.4, 0.4 - 1, 0.4 - 2])
    assert [d for d, _ in rerank_to_depth(FIRST, NEURAL, 0)["q2"]] == ["e1", "e2", "e3", "e4", "e5"]
    assert [d for d, _ in rerank_to_depth(FIRST, NEURAL, 10)["q1"]] == ["d4", "d3", "d1", "d2", "d5"]
    with pytest.raises(StudyError, match="q1: candidate d3 .top 3. has no neural score"):
        rerank_to_depth(FIRST, {"q1": NEURAL["q1"][:1] + NEURAL["q1"][2:]}, 3)


def test_rerank_to_depth_survives_writing_the_run(tmp_path):
    write_run(tmp_path / "r.run", rerank_to_depth(FIRST, NEURAL, 2), "x")
    assert [d for d, _ in read_run(tmp_path / "r.run")["q1"]] == ["d1", "d2", "d3", "d4", "d5"]
    assert [d for d, _ in read_run(tmp_path / "r.run")["q2"]] == ["e2", "e1", "e3", "e4", "e5"]


def test_tune_depth_hand_computed():
    # RR@10 per depth: q1 (relevant d3) and q2 (relevant e1)
    expected = {1: (1 / 3 + 1) / 2, 2: (1 / 3 + 1 / 2) / 2, 3: (1 + 1 / 2) / 2, 4: (1 / 2 + 1 / 2) / 2, 5: 0.5}
    best, table = tune_depth(FIRST, NEURAL, QRELS, [5, 4, 3, 2, 1], "RR@10", rel_threshold=1)
    assert best == 3
    assert table["depth"].tolist() == [1, 2, 3, 4, 5]
    assert table["value"].tolist() == pytest.approx([expected[d] for d in range(1, 6)])
    assert tune_depth(FIRST, NEURAL, QRELS, [5, 4], "RR@10")[0] == 4  # tie: the smallest depth
    assert tune_depth(FIRST, NEURAL, QRELS, [1, 2], "RR@10")[0] == 1  # re-ranking hurts: keep the first stage
    with pytest.raises(StudyError):
        tune_depth(FIRST, NEURAL, QRELS, [], "RR@10")


@pytest.mark.parametrize("measure", ["RR@10", "nDCG@10", "P@3", "AP@100", "R@5"])
def test_tune_depth_at_a_cutoff_equals_evaluating_every_depth(measure):
    """The cutoff path (distinct top lists) gives exactly the means of evaluating rerank_to_depth at each depth:
    ties in neural and first-stage scores, a query without candidates, one the run lacks, one judged only 0, one
    without judgments, depths from 0 to past the lists' end."""
    import random

    from rankstudy.evaluate import aggregate, evaluate_run

    rng = random.Random(measure)
    first = {f"q{q}": [(f"d{q}_{i}", float(rng.randrange(8))) for i in range(rng.randrange(1, 40))] for q in range(30)}
    first["q_empty"] = []
    neural = {qid: [(docid, round(rng.random(), 1)) for docid, _ in ranking] for qid, ranking in first.items()}
    qrels = {qid: {docid: rng.choice([0, 0, 1, 2]) for docid, _ in ranking if rng.random() < 0.2}
             for qid, ranking in first.items()}
    qrels.update(q_missing={"x": 1}, q_zero={"d0_0": 0}, q_empty={"y": 1})
    depths = [0, 1, 2, 3, 5, 8, 13, 21, 34, 60]
    judged = {qid: ranking for qid, ranking in first.items() if qid in qrels}
    expected = []
    for depth in depths:
        per_query = evaluate_run(rerank_to_depth(judged, neural, depth), qrels, [measure], 1)
        expected.append(float(aggregate(per_query)["value"].iloc[0]))
    best, table = tune_depth(first, neural, qrels, depths, measure)
    assert table["value"].tolist() == expected  # bit for bit: the same means, so the same best depth
    assert best == depths[max(range(len(depths)), key=lambda i: (expected[i], -i))]
    with pytest.raises(StudyError, match=r"query q0: candidate d0_\d+ \(top \d+\) has no neural score"):
        tune_depth(first, {**neural, "q0": neural["q0"][:-1]}, qrels, depths, measure)


def test_ensemble_averages_scores():
    a = {"q1": [("x", 1.0), ("y", 2.0)], "q2": [("z", 1.0)]}
    b = {"q1": [("y", 0.0), ("x", 3.0)], "q2": [("z", 3.0)]}
    assert ensemble([a, b]) == {"q1": [("x", 2.0), ("y", 1.0)], "q2": [("z", 2.0)]}
    assert ensemble([a]) == {"q1": [("y", 2.0), ("x", 1.0)], "q2": [("z", 1.0)]}
    with pytest.raises(StudyError, match="q1: runs 0 and 1 differ in documents \\['y'\\]"):
        ensemble([a, {"q1": [("x", 1.0)], "q2": [("z", 1.0)]}])
    with pytest.raises(StudyError, match="other queries"):
        ensemble([a, {"q1": a["q1"]}])


def test_the_best_validated_seed(tmp_path):
    logs = {"s1": "step,loss,metric,best\n250,0.9,0.20,0.20\n500,0.8,0.25,0.25\n750,0.7,0.24,0.25\n",
            "s2": "step,loss,metric,best\n250,0.9,0.26,0.26\n500,0.8,0.22,0.26\n",
            "s3": "step,loss,metric,best\n250,0.9,0.26,0.26\n"}
    runs = []
    for index, (name, text) in enumerate(logs.items()):
        (tmp_path / f"{name}.csv").write_text(text)
        write_run(tmp_path / f"{name}.run", {"q1": [("d1", float(index)), ("d2", 0.5)]}, name)
        runs.append(str(tmp_path / f"{name}.run"))
    # the peak counts, not the last validation; a tie goes to the first seed
    args = ["select-seed", "--logs", *(str(tmp_path / f"{name}.csv") for name in logs), "--runs", *runs,
            "--out", str(tmp_path / "best.run"), "--tag", "tk.p1.best"]
    assert cli.main(args) == 0
    assert read_run(tmp_path / "best.run") == {"q1": [("d1", 1.0), ("d2", 0.5)]}
    assert "tk.p1.best" in (tmp_path / "best.run").read_text()
    (tmp_path / "s3.csv").write_text("step,loss,metric,best\n250,0.9,,\n")
    with pytest.raises(StudyError, match="s3.csv: no validation metric"):
        best_validated([pd.read_csv(tmp_path / f"{name}.csv") for name in logs], [str(tmp_path / "s3.csv")] * 3)
    assert cli.main(args[:-4] + ["--runs", *runs[:2], "--out", str(tmp_path / "x.run"), "--tag", "x"]) != 0


def test_cross_validation_folds_merge_into_one_run(tmp_path):
    folds = [({"q1": [("a", 2.0), ("b", 1.0)]}, {"q1": {"a": 1}}), ({"q2": [("c", 0.5)]}, {"q2": {"c": 0, "d": 2}})]
    paths = []
    for index, (run, qrels) in enumerate(folds):
        write_run(tmp_path / f"f{index}.run", run, f"drmm{index}")
        write_qrels(tmp_path / f"f{index}.qrels", qrels)
        paths.append((str(tmp_path / f"f{index}.run"), str(tmp_path / f"f{index}.qrels")))
    args = ["merge-folds", "--runs", *(run for run, _ in paths), "--qrels", *(qrels for _, qrels in paths),
            "--out-run", str(tmp_path / "cv.run"), "--out-qrels", str(tmp_path / "cv.qrels"), "--tag", "drmm"]
    assert cli.main(args) == 0
    assert read_run(tmp_path / "cv.run") == {"q1": [("a", 2.0), ("b", 1.0)], "q2": [("c", 0.5)]}
    assert read_qrels(tmp_path / "cv.qrels") == {"q1": {"a": 1}, "q2": {"c": 0, "d": 2}}
    # a query in two folds is a wrong split, never silently merged
    with pytest.raises(StudyError, match=r"f1.run: query 'q1' is also in .*f0.run"):
        merge_disjoint([folds[0][0], folds[0][0]], [paths[0][0], paths[1][0]])
    write_run(tmp_path / "f1.run", {"q1": [("a", 1.0)]}, "drmm1")
    assert cli.main(args[:-2] + ["--tag", "x"]) != 0


def test_cli_commands(tmp_path):
    write_qrels(tmp_path / "qrels.txt", QRELS)
    write_run(tmp_path / "first.run", FIRST, "bm25")
    write_run(tmp_path / "neural.run", NEURAL, "tk")
    base = ["--qrels", str(tmp_path / "qrels.txt"), "--candidates", str(tmp_path / "first.run"),
            "--negatives-depth", "5", "--per-query", "3", "--seed", "1"]
    assert cli.main(["examples", *base, "--kind", "triples", "--out", str(tmp_path / "triples.tsv")]) == 0
    triples = read_triples(tmp_path / "triples.tsv")
    assert len(triples) == 6 and all(p in {"d3", "e1"} and n not in {"d3", "e1"} for _, p, n in triples)
    assert cli.main(["examples", *base, "--kind", "groups", "--negatives", "2", "--out", str(tmp_path / "g.tsv")]) == 0
    assert all(len(set(n)) == 2 for _, _, n in read_groups(tmp_path / "g.tsv"))

    runs = ["--first-stage", str(tmp_path / "first.run"), "--neural", str(tmp_path / "neural.run")]
    assert cli.main(["tune-depth", *runs, "--qrels", str(tmp_path / "qrels.txt"), "--measure", "RR@10",
                     "--depths", "1", "5", "1", "--out-json", str(tmp_path / "depth.json")]) == 0
    tuned = json.loads((tmp_path / "depth.json").read_text())
    assert tuned["depth"] == 3 and [row["depth"] for row in tuned["table"]] == [1, 2, 3, 4, 5]
    assert cli.main(["apply-depth", *runs, "--depth-json", str(tmp_path / "depth.json"), "--out",
                     str(tmp_path / "final.run"), "--tag", "tk"]) == 0
    assert [d for d, _ in read_run(tmp_path / "final.run")["q1"]] == ["d3", "d1", "d2", "d4", "d5"]

    assert cli.main(["ensemble", "--runs", str(tmp_path / "neural.run"), str(tmp_path / "first.run"),
                     "--out", str(tmp_path / "ens.run"), "--tag", "p3"]) == 0
    assert dict(read_run(tmp_path / "ens.run")["q1"])["d1"] == pytest.approx((5.0 + 0.5) / 2)
    write_run(tmp_path / "short.run", {"q1": FIRST["q1"][:2], "q2": FIRST["q2"]}, "x")
    assert cli.main(["ensemble", "--runs", str(tmp_path / "first.run"), str(tmp_path / "short.run"),
                     "--out", str(tmp_path / "bad.run"), "--tag", "x"]) == 2
    assert not (tmp_path / "bad.run").exists()


def test_rerank_scores_several_splits_with_the_model_loaded_once(tmp_path, capsys):
    """rerank with two (queries, candidates, out) triples writes the runs that two one-split calls write (the
    workflow re-ranks a run's dev and test in one job)."""
    data = write_training_inputs(tmp_path)
    train_here(data, data / "model")
    dev = read_run(data / "dev.run")
    write_run(data / "test.run", {qid: ranking[::-1] for qid, ranking in list(dev.items())[:3]}, "bm25")
    model = ["rerank", "--model-dir", str(data / "model"), "--embeddings", str(data / "embeddings.npy"),
             "--documents", str(data / "docs"), "--tag", "knrm", "--depth", "4", "--device", "cpu"]
    for split in ("dev", "test"):
        assert cli.main([*model, "--queries", str(data / "queries"), "--candidates", str(data / f"{split}.run"),
                         "--out", str(tmp_path / f"one.{split}.run")]) == 0
    assert cli.main([*model, "--queries", str(data / "queries"), str(data / "queries"), "--candidates",
                     str(data / "dev.run"), str(data / "test.run"), "--out", str(tmp_path / "both.dev.run"),
                     str(tmp_path / "both.test.run")]) == 0
    for split in ("dev", "test"):
        assert (tmp_path / f"both.{split}.run").read_bytes() == (tmp_path / f"one.{split}.run").read_bytes()
    assert len(read_run(tmp_path / "both.test.run")) == 3
    assert cli.main([*model, "--queries", str(data / "queries"), "--candidates", str(data / "dev.run"),
                     str(data / "test.run"), "--out", str(tmp_path / "x.run"), str(tmp_path / "y.run")]) == 2
    assert "one file per split each; got 1, 2 and 2" in capsys.readouterr().err
    assert not (tmp_path / "x.run").exists()


def test_rerank_reads_queries_to_the_length_asked_for(tmp_path, capsys):
    """--max-query-length: a model applied to long queries reads that many of their tokens instead of its
    training's max_query_length."""
    from rankstudy.text.vocab import Vocabulary
    from rankstudy.text.word_store import build_store

    data = write_training_inputs(tmp_path)
    train_here(data, data / "model")
    # two-word queries: the second word is the one that tells the documents apart
    write_queries(data / "long.tsv", {f"q{i}": f"note {topic}" for i, topic in enumerate(TOPICS)})
    build_store(data / "long.tsv", Vocabulary.load(data / "vocab"), data / "long", kind="queries")
    model = ["rerank", "--model-dir", str(data / "model"), "--embeddings", str(data / "embeddings.npy"),
             "--documents", str(data / "docs"), "--queries", str(data / "long"), "--candidates",
             str(data / "dev.run"), "--tag", "knrm", "--depth", "4", "--device", "cpu"]
    assert cli.main([*model, "--out", str(tmp_path / "one.run"), "--max-query-length", "1"]) == 0
    assert cli.main([*model, "--out", str(tmp_path / "all.run")]) == 0
    assert read_run(tmp_path / "one.run") != read_run(tmp_path / "all.run")
    assert cli.main([*model, "--out", str(tmp_path / "none.run"), "--max-query-length", "0"]) == 2
    assert "the query length must be a positive number of tokens, not 0" in capsys.readouterr().err
    assert not (tmp_path / "none.run").exists()


def test_tk_view_shows_the_best_validated_seed(tmp_path, monkeypatch):
    import rankstudy.experiment
    import rankstudy.papers.tk.view
    import rankstudy.text.vocab

    for name, peak in (("s42", 0.30), ("s43", 0.35), ("s44", 0.33)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "log.csv").write_text(f"step,loss,metric,best\n250,0.9,{peak},{peak}\n")
    loaded = []
    monkeypatch.setattr(rankstudy.experiment, "load_trained",
                        lambda path, *rest: (loaded.append(path.name), rankstudy.experiment.InputSpec(30, 200)))
    monkeypatch.setattr(rankstudy.papers.tk.view, "render", lambda *args: None)
    monkeypatch.setattr(rankstudy.text.vocab.Vocabulary, "load", lambda path: None)
    files = ["--embeddings", "e", "--vocab", "v", "--collection", "c", "--queries", "q", "--qrels", "r",
             "--first-stage", "f", "--neural", "n", "--out", "o"]
    assert cli.main(["tk-view", "--model-dir", *(str(tmp_path / name) for name in ("s42", "s43", "s44")), *files]) == 0
    assert cli.main(["tk-view", "--model-dir", str(tmp_path / "s44"), *files]) == 0
    assert loaded == ["s43", "s44"]  # as select-seed chose the run; one model: that one


def document_encoding_models():
    """TK (both branches, its windowed pooling, published OOV matching) and TKL (each saturation), randomly
    initialised over a 40-word vocabulary of 8-d vectors."""
    from rankstudy.models.tk import TK, TKConfig
    from rankstudy.models.tkl import TKL, TKLConfig

    vectors = np.random.default_rng(3).normal(size=(40, 8)).astype(np.float32)
    vectors[:2] = 0
    small = dict(heads=2, layers=2, ff_dim=16)
    torch.manual_seed(0)
    return {
        "TK": TK(TKConfig(**small), vectors),
        "TK oov_matches, offset": TK(TKConfig(**small, oov_matches=True, document_position_offset=500), vectors),
        "TK windows (d3)": TK(TKConfig(**small, branches="log", window_sizes=[4, 7], top_windows=2), vectors),
        **{f"TKL {kind}": TKL(TKLConfig(**small, saturation=kind, chunk_size=10, overlap=2, saturation_window=6,
                                        cpu_slice_tokens=120), vectors)
           for kind in ("embedding", "log", "linear")},
    }


@pytest.mark.parametrize("name", list(document_encoding_models()))
def test_reusing_a_documents_encoding_scores_as_the_pairs_do(name):
    """Each document encoded once and scored against every query that ranks it gives the pairwise scores (up to
    float rounding), whatever the batching, with one encoding per distinct document."""
    model = document_encoding_models()[name]
    rng = np.random.default_rng(1)
    # lengths 1 to 90 (TKL: up to 9 chunks, some cut at max_doc_length), id 1 (OOV) among them
    docs = FakeStore({f"d{i}": rng.integers(1, 40, size=int(rng.integers(1, 90))).tolist() for i in range(15)})
    queries = FakeStore({f"q{i}": rng.integers(1, 40, size=int(rng.integers(1, 6))).tolist() for i in range(6)})
    # every query ranks 8 of the 15 documents: each document recurs in several lists
    run = {qid: [(f"d{d}", float(-rank)) for rank, d in enumerate(rng.permutation(15)[:8])] for qid in queries.texts}
    encoded = []
    original = model.encode_documents
    model.encode_documents = lambda ids: encoded.append(ids.shape[0]) or original(ids)
    pairwise = score_candidates(model, run, queries, docs, 8, 5, 6, 80, "cpu", progress=False)
    for batch_size in (3, 64):
        encoded.clear()
        reused = score_candidates(model, run, queries, docs, 8, batch_size, 6, 80, "cpu", progress=False,
                                  reuse_documents=True)
        assert sum(encoded) == len({docid for ranking in run.values() for docid, _ in ranking}) < 6 * 8
        for qid in run:
            assert dict(reused[qid]) == pytest.approx(dict(pairwise[qid]), rel=1e-5, abs=1e-6)


def test_a_model_that_reads_the_document_with_its_query_is_scored_pair_by_pair():
    queries = FakeStore({"q1": [1, 2], "q2": [3]})
    docs = FakeStore({f"d{i}": list(range(1 + i % 5, 4 + i % 7)) for i in range(8)})
    run = {"q1": [(f"d{i}", 10.0 - i) for i in range(5)], "q2": [(f"d{i}", 1.0 + i) for i in range(3, 8)]}
    model = SumRanker()
    assert not getattr(model, "DOCUMENT_ENCODING", False)
    assert (score_candidates(model, run, queries, docs, 5, 2, 5, 10, "cpu", progress=False, reuse_documents=True)
            == score_candidates(model, run, queries, docs, 5, 2, 5, 10, "cpu", progress=False))


def test_the_log_counts_the_texts_longer_than_the_model_reads(caplog):
    queries = FakeStore({"q1": [1, 2, 3, 4, 5, 6], "q2": [3]})
    docs = FakeStore({"d1": [2] * 30, "d2": [2] * 8, "d3": [2] * 50})
    run = {"q1": [("d1", 2.0), ("d2", 1.0)], "q2": [("d1", 2.0), ("d3", 1.0)]}
    with caplog.at_level("INFO", logger="rankstudy.rerank"):
        score_candidates(SumRanker(), run, queries, docs, 2, 4, 5, 10, "cpu", progress=False)
    assert "1 of 2 queries are longer than the 5 tokens the model reads: each is cut to its first 5" in caplog.text
    assert "2 of 3 documents are longer than the 10 tokens the model reads" in caplog.text
    assert "(their median length 40 tokens)" in caplog.text
