"""Small builders shared by test modules (tests/conftest.py puts tests/ on sys.path, whichever tier folder a
module is in)."""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def with_schema_defaults(settings: dict, override: str = "", schema: Path = SCHEMA) -> dict:
    """``settings`` with a YAML ``override`` merged in as Snakemake merges --configfile, validated against the
    workflow's schema with its defaults filled in: what common.smk hands ``StudyPlan.from_config``."""
    import yaml
    from snakemake.utils import update_config, validate

    update_config(settings, yaml.safe_load(override) or {})
    validate(settings, str(schema))
    return settings


def config_file(path: Path, override: str = "") -> dict:
    """The config file at ``path`` (``with_schema_defaults``)."""
    import yaml

    return with_schema_defaults(yaml.safe_load(Path(path).read_text()), override)


def metric_csv(path, system, split, values, measures=("AP", "nDCG@10", "RR@10", "P@10"), dataset="d"):
    """A long-format metrics CSV (as rankstudy evaluate writes) with the same per-query values for every measure."""
    rows = []
    for measure in measures:
        for qid, value in values.items():
            rows.append((dataset, system, split, measure, qid, value))
        rows.append((dataset, system, split, measure, "all", float(np.mean(list(values.values())))))
    pd.DataFrame(rows, columns=["dataset", "system", "split", "measure", "qid", "value"]).to_csv(path, index=False)
    return path


@contextmanager
def single_thread():
    """torch on one intra-op thread: tiny models only pay for a second thread's synchronisation
    (and stay polite on a shared machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def loss_before_and_after(model, optimizer, loss, steps=5):
    """(loss in eval mode, loss in eval mode after ``steps`` training steps on it)."""
    model.eval()
    with torch.no_grad():
        before = loss().item()
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        after = loss().item()
    return before, after


class FakeStore:
    """In-memory stand-in for ``rankstudy.store.TokenStore``: id -> token ids."""

    def __init__(self, texts: dict[str, list[int]]):
        self.texts = texts

    def lengths(self, ids, max_length: int | None = None) -> np.ndarray:
        return np.array([min(len(self.texts[i]), max_length or len(self.texts[i])) for i in ids], dtype=np.int64)

    def batch(self, ids, max_length: int) -> np.ndarray:
        rows = [self.texts[i][:max_length] for i in ids]
        out = np.zeros((len(rows), max(1, max(len(r) for r in rows))), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i, :len(row)] = row
        return out


def assert_drawn(png, pdf=None):
    """A figure was drawn, not just written: the PNG decodes to an image of some size with more than one
    colour (an empty canvas is a single colour), and the PDF, if given, is a PDF."""
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.ndim == 3 and min(pixels.shape[:2]) >= 100, f"{png}: {pixels.shape}"
    assert float(pixels[..., :3].std()) > 0.01, f"{png} is a blank canvas"
    if pdf is not None:
        with open(pdf, "rb") as handle:
            assert handle.read(5) == b"%PDF-", f"{pdf} is not a PDF"


# ---- Choppy's toy ranked lists (unit and learning tests) -----------------------------------------
GAP = 0.05  # scores of relevant documents lie in (0.55, 1), the others in (0, 0.45)
SMALL_CHOPPY = dict(d_model=32, heads=4, layers=2, ff_dim=64, dropout=0.0, max_length=32)


def toy_lists(n: int, rng: np.random.Generator, width: int = 20):
    """Lists whose relevant documents are exactly those scoring above 0.5; F1 tables from the labels."""
    scores = np.zeros((n, width), np.float32)
    tables = np.zeros((n, width), np.float32)
    lengths = rng.integers(8, width + 1, n)
    for q, length in enumerate(lengths):
        relevant = rng.integers(1, length)
        high = np.sort(rng.uniform(0.5 + GAP, 1.0, relevant))[::-1]
        low = np.sort(rng.uniform(0.0, 0.5 - GAP, length - relevant))[::-1]
        scores[q, :length] = np.concatenate([high, low])
        scores[q, length:] = scores[q, length - 1]
        labels = np.arange(length) < relevant
        hits = np.cumsum(labels)
        cut = np.arange(1, length + 1)
        tables[q, :length] = 2 * hits / (cut + labels.sum())  # F1 = 2·tp / (k + |relevant|)
        tables[q, length:] = tables[q, length - 1]
    return scores, tables, lengths


def offset_lists(n: int, rng: np.random.Generator, width: int = 30, relevant=None, level=None):
    """BM25-like lists: each at its own level (5 to 40) with a drop of 3 after its k relevant documents.

    The level says nothing about the cut; only the shape does (the failure of issue 19: a Choppy fed raw
    scores next to N(0, 1) positional embeddings learned one cut for every list)."""
    relevant = rng.integers(1, 16, n) if relevant is None else np.asarray(relevant)
    level = rng.uniform(5, 40, (n, 1)) if level is None else np.full((n, 1), level)
    scores = level + np.where(np.arange(width)[None, :] < relevant[:, None], 3.0, 0.0) + rng.normal(0, 0.3, (n, width))
    scores = -np.sort(-scores, axis=1)
    labels = np.arange(width)[None, :] < relevant[:, None]
    tables = 2 * np.cumsum(labels, 1) / (np.arange(1, width + 1)[None, :] + relevant[:, None])
    return scores.astype(np.float32), tables.astype(np.float32), np.full(n, width), relevant


# ---- embeddings and settings that model tests share --------------------------------------------
def unit_vectors(angles_deg):
    """Embedding rows 0 (pad) and 1 (OOV) zero, then 2-d unit vectors at the given angles."""
    rows = [[0.0, 0.0], [0.0, 0.0]] + [[math.cos(math.radians(a)), math.sin(math.radians(a))] for a in angles_deg]
    return np.array(rows, dtype=np.float32)


def random_embeddings(vocab=60, dim=16, seed=0):
    matrix = np.random.default_rng(seed).normal(size=(vocab, dim)).astype(np.float32)
    matrix[:2] = 0
    return matrix


def dense_reference(query, key, value, layout):
    """Dense attention under a block-sparse layout's mask (what rankstudy.nn.block_sparse must equal)."""
    scores = query @ key.transpose(-1, -2) / math.sqrt(query.shape[-1])
    return torch.softmax(scores.masked_fill(~layout.dense_mask().unsqueeze(1), float("-inf")), -1) @ value


# small encoders of the long-document BERT baselines (unit tests; the CUDA check runs the same)
PASSAGES = {"encoder_layers": 1, "passage_length": 8, "passage_stride": 6, "max_passages": 5}
SPARSE = {"encoder_layers": 1, "max_length": 64, "window": 2, "attention_dropout": 0.0}
ENCODER_SETTINGS = {
    "firstp": {"encoder_layers": 1, "passage_length": 8},
    "maxp": PASSAGES,
    "parade": PASSAGES,
    "idcm": {**PASSAGES, "selected_passages": 2, "selector_dim": 16},
    "longformer": {**SPARSE, "pattern": "longformer"},
    "bigbird": {**SPARSE, "pattern": "bigbird", "random_keys": 3},
    "qds": {**SPARSE, "pattern": "qds", "qds_block": 4, "qds_global_blocks": 1},
}


# A ``rankstudy train`` step small enough for unit tests: a KNRM on six one-word topics
TRAINING = {"loss": "pairwise", "max_steps": 30, "validate_every": 10, "patience": 10, "metric": "RR@10",
            "validation_depth": 4, "batch_size": 4, "max_query_length": 4, "max_doc_length": 8,
            "learning_rates": {"default": 0.01, "embeddings": 0.01}, "device": "cpu"}
TOPICS = ["apple", "river", "guitar", "solar", "pepper", "violin"]


def write_training_inputs(folder: Path) -> Path:
    """The files of that train step in ``folder``: collection, queries, vocabulary, token stores, word vectors,
    triples, a dev run and its qrels."""
    from rankstudy import formats
    from rankstudy.text.embeddings import save_embeddings
    from rankstudy.text.vocab import build_vocabulary
    from rankstudy.text.word_store import build_store
    from rankstudy.train.examples import write_triples

    docs = {f"d{i}": f"{t} {t} note about the {t}" for i, t in enumerate(TOPICS)}
    formats.write_collection(folder / "docs.tsv", docs.items())
    formats.write_queries(folder / "queries.tsv", {f"q{i}": t for i, t in enumerate(TOPICS)})
    vocab = build_vocabulary(folder / "docs.tsv")
    vocab.save(folder / "vocab")
    build_store(folder / "docs.tsv", vocab, folder / "docs")
    build_store(folder / "queries.tsv", vocab, folder / "queries", kind="queries")
    save_embeddings(folder / "embeddings.npy",
                    np.random.default_rng(0).normal(size=(len(vocab), 8)).astype(np.float32))
    n = len(TOPICS)
    write_triples(folder / "triples.tsv", [(f"q{i}", f"d{i}", f"d{(i + k) % n}") for i in range(n) for k in (1, 2)])
    formats.write_run(folder / "dev.run", {f"q{i}": [(f"d{(i + k) % n}", 1.0 - 0.1 * k) for k in range(1, n + 1)]
                                           for i in range(n)}, "bm25")
    formats.write_qrels(folder / "qrels.txt", {f"q{i}": {f"d{i}": 1} for i in range(n)})
    return folder


def train_args(data: Path, out: Path, examples: str = "triples.tsv") -> list[str]:
    import json

    return ["train", "--model", "knrm", "--model-config", "{}", "--train-config", json.dumps(TRAINING),
            "--embeddings", str(data / "embeddings.npy"), "--examples", str(data / examples),
            "--train-queries", str(data / "queries"), "--documents", str(data / "docs"),
            "--dev-queries", str(data / "queries"), "--dev-run", str(data / "dev.run"),
            "--dev-qrels", str(data / "qrels.txt"), "--out", str(out), "--seed", "3"]


def train_here(data: Path, out: Path, examples: str = "triples.tsv") -> None:
    from rankstudy.cli import main

    assert main(train_args(data, out, examples)) == 0
