"""The dense first stage, offline end to end: encode a small collection with the MiniLM shipped in a package,
pyserini's FAISS flat index, FaissSearcher, then evaluation with ir-measures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("faiss")

from rankstudy import cli, formats  # noqa: E402
from rankstudy.config import ConfigError  # noqa: E402
from rankstudy.dense import DenseConfig  # noqa: E402

DOCS = {
    "d1": "the cat sat on the mat and purred",
    "d2": "stock markets fell sharply as investors sold shares",
    "d3": "a recipe for chocolate cake with eggs, flour and sugar",
    "d4": "the football team won the championship final",
    "d5": "a new vaccine trial shows promise against the virus",
    "d6": "how to bake bread at home with yeast",
}
QUERIES = {"q1": "baking a chocolate cake", "q2": "stock market crash", "q3": "vaccine clinical trial results"}
QRELS = {"q1": {"d3": 1}, "q2": {"d2": 1}, "q3": {"d5": 1}}
CONFIG = '{"encoder": "minilm", "pooling": "mean", "l2_norm": true, "max_length": 64, "batch_size": 4}'


def test_encode_index_search_evaluate(tmp_path, capsys):
    formats.write_collection(tmp_path / "collection.tsv", DOCS.items())
    formats.write_queries(tmp_path / "queries.tsv", QUERIES)
    formats.write_qrels(tmp_path / "qrels.txt", QRELS)
    index = tmp_path / "index"
    assert cli.main(["dense-index", "--collection", str(tmp_path / "collection.tsv"), "--config", CONFIG,
                     "--out", str(index), "--device", "cpu"]) == 0
    assert sorted(path.name for path in index.iterdir()) == ["docid", "index"]
    # every document once, encoded shortest first (one window of SORT_WINDOW batches here): batches of 4 then 2
    assert (index / "docid").read_text().split() == sorted(DOCS, key=lambda docid: len(DOCS[docid]))
    run_path = tmp_path / "dense.run"
    assert cli.main(["dense-search", "--index", str(index), "--queries", str(tmp_path / "queries.tsv"),
                     "--config", CONFIG, "--hits", "3", "--out", str(run_path), "--tag", "dense",
                     "--device", "cpu"]) == 0
    run = formats.read_run(run_path)
    assert set(run) == set(QUERIES) and all(len(ranking) == 3 for ranking in run.values())
    # a sentence encoder puts each query's one relevant document first; cosine scores (unit vectors) <= 1
    assert {qid: ranking[0][0] for qid, ranking in run.items()} == {"q1": "d3", "q2": "d2", "q3": "d5"}
    assert all(-1.0 <= score <= 1.0 + 1e-6 for ranking in run.values() for _, score in ranking)
    assert cli.main(["evaluate", "--run", str(run_path), "--qrels", str(tmp_path / "qrels.txt"),
                     "--measures", "RR@10", "--out", str(tmp_path / "metrics.csv"), "--dataset", "toy",
                     "--system", "dense", "--split", "test"]) == 0
    assert "RR@10" in (tmp_path / "metrics.csv").read_text()

    # a directory that is not a dense index, and a bad setting, fail with a message naming them
    assert cli.main(["dense-search", "--index", str(tmp_path), "--queries", str(tmp_path / "queries.tsv"),
                     "--config", CONFIG, "--out", str(tmp_path / "x.run"), "--tag", "x", "--device", "cpu"]) != 0
    assert not (tmp_path / "x.run").exists()
    # an index or docid file cut short or emptied (issue 43): one line naming the index, nothing written
    capsys.readouterr()
    for name, cut in (("index", 0.5), ("index", 0), ("docid", 0.5)):
        damaged = Path(shutil.copytree(index, tmp_path / f"{name}{cut}"))
        whole = (index / name).read_bytes()
        (damaged / name).write_bytes(whole[:int(len(whole) * cut)])
        assert cli.main(["dense-search", "--index", str(damaged), "--queries", str(tmp_path / "queries.tsv"),
                         "--config", CONFIG, "--out", str(tmp_path / "x.run"), "--tag", "x", "--device", "cpu"]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and f"{damaged}: not a readable dense index" in errors[0]
        assert not (tmp_path / "x.run").exists()


def test_dense_settings_are_checked():
    with pytest.raises(ValueError, match="kind must be one of auto, ance"):
        DenseConfig(encoder="minilm", kind="colbert")
    with pytest.raises(ValueError, match="pooling must be cls or mean"):
        DenseConfig(encoder="minilm", pooling="max")
    with pytest.raises(ConfigError, match="unknown key"):
        cli.first_stage._dense_config('{"encoder": "minilm", "hits": 3}')


def _ance_directory(path: Path) -> Path:
    """A random small ANCE checkpoint (pyserini's AnceEncoder: RoBERTa, a 768-d head, LayerNorm) with a byte-level
    BPE tokenizer, as castorini/ance-msmarco-doc-firstp is laid out."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaTokenizer

    from rankstudy.dense import _pyserini

    _pyserini()
    from pyserini.encode._ance import AnceEncoder

    path.mkdir()
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([*DOCS.values(), *QUERIES.values()], vocab_size=400, min_frequency=1, show_progress=False,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(path))
    tokenizer = RobertaTokenizer(vocab_file=str(path / "vocab.json"), merges_file=str(path / "merges.txt"))
    tokenizer.save_pretrained(str(path))
    torch.manual_seed(0)
    AnceEncoder(RobertaConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                              intermediate_size=32, max_position_embeddings=66, pad_token_id=tokenizer.pad_token_id,
                              bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
                ).save_pretrained(str(path))
    return path


def test_an_ance_checkpoint_encodes_and_searches(tmp_path):
    """kind ance (the Socialformer paper config's first stage): pyserini 1.6.0's AnceEncoder skips post_init, which
    transformers 5's from_pretrained needs ('AnceEncoder' object has no attribute 'all_tied_weights_keys');
    rankstudy.dense makes it call post_init, so a checkpoint loads with its saved weights."""
    import torch
    from safetensors.torch import load_file

    encoder = _ance_directory(tmp_path / "ance")
    config = ('{"encoder": "%s", "kind": "ance", "max_length": 64, "batch_size": 4}' % encoder)
    formats.write_collection(tmp_path / "collection.tsv", DOCS.items())
    formats.write_queries(tmp_path / "queries.tsv", QUERIES)
    assert cli.main(["dense-index", "--collection", str(tmp_path / "collection.tsv"), "--config", config,
                     "--out", str(tmp_path / "index"), "--device", "cpu"]) == 0
    assert cli.main(["dense-search", "--index", str(tmp_path / "index"), "--queries", str(tmp_path / "queries.tsv"),
                     "--config", config, "--hits", "3", "--out", str(tmp_path / "ance.run"), "--tag", "ance",
                     "--device", "cpu"]) == 0
    run = formats.read_run(tmp_path / "ance.run")
    assert set(run) == set(QUERIES) and all(len(ranking) == 3 for ranking in run.values())

    from pyserini.encode import AnceQueryEncoder

    saved = load_file(str(encoder / "model.safetensors"))
    loaded = AnceQueryEncoder(str(encoder), device="cpu").model.state_dict()
    assert all(torch.equal(loaded[name], value) for name, value in saved.items() if name in loaded)
    assert {"embeddingHead.weight", "norm.weight"} <= set(saved) & set(loaded)
