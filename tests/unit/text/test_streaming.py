"""The corpus-scale steps stream the collection (docs/streaming.md).

Two kinds of check. *Memory*: a step runs on a small and on a ten times larger collection under
tracemalloc, and the peak of traced memory may grow by only a small fraction of a document's
size per extra document: holding the texts would cost at least their size. What may grow is
per-document bookkeeping of a few integers and, where the collection is read with its duplicate
check, the docid dictionary of ``formats.iter_collection`` (about 130 bytes a document).
*Order*: where a consumer takes its documents from an iterator, a single-use iterator shows that
it reads the collection once and never runs ahead of its writer by more than one batch.
"""

from __future__ import annotations

import hashlib
import tracemalloc
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

from rankstudy import formats, lucene, store
from rankstudy.datasets import local, synthetic
from rankstudy.text.vocab import Vocabulary, build_vocabulary
from rankstudy.text.word_store import build_store

WORDS = [f"word{index:02d}{'x' * 12}" for index in range(97)]  # 18 characters: few tokens per KB
TEXT_WORDS = 230  # about 4.4 KB a document
SMALL, LARGE = 600, 2400  # SMALL fills every fixed-size buffer (a store batch is 256 texts)
# Allowed growth of peak memory per extra document: 10 % of a document (docid bookkeeping fits).
MAX_BYTES_PER_DOCUMENT = 400


def text_of(number: int) -> str:
    return " ".join(WORDS[(number * 7 + k) % len(WORDS)] for k in range(TEXT_WORDS))


def write_tsv(path: Path, count: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for number in range(count):
            out.write(f"d{number:06d}\t{text_of(number)}\n")
    return path


def traced_peak(run: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def growth(run: Callable[[int], object]) -> float:
    """Extra peak bytes per extra document of ``run(LARGE)`` over ``run(SMALL)``, after an untraced
    warm-up run (first calls import modules and fill caches)."""
    run(SMALL)
    return (traced_peak(lambda: run(LARGE)) - traced_peak(lambda: run(SMALL))) / (LARGE - SMALL)


def growth_per_document(tmp_path: Path, step: Callable[[Path, Path], object]) -> float:
    """``growth`` of ``step(collection, out)`` on collections of SMALL and LARGE documents."""
    collections = {count: write_tsv(tmp_path / f"in{count}" / "collection.tsv", count) for count in (SMALL, LARGE)}
    runs = iter(range(3))
    return growth(lambda count: step(collections[count], tmp_path / f"out{next(runs)}"))


def test_a_document_is_much_larger_than_the_allowed_growth():
    assert len(text_of(0).encode()) > 10 * MAX_BYTES_PER_DOCUMENT


def vocabulary(collection: Path, out: Path) -> None:
    build_vocabulary(collection)


def vocab_store(collection: Path, out: Path) -> None:
    vocab = Vocabulary(["<pad>", "<oov>", *WORDS], [0, 0, *[1] * len(WORDS)], [0, 0, *[1] * len(WORDS)], 1)
    build_store(collection, vocab, out, chunk_tokens=1 << 14)


def export_local(collection: Path, out: Path) -> None:
    (collection.parent / "queries.tsv").write_text("q1\tw1 w2\n")
    (collection.parent / "qrels.txt").write_text("q1 0 d000001 1\n")
    local.export("ds", {"path": str(collection.parent),
                        "splits": {"test": {"queries": "queries.tsv", "qrels": "qrels.txt"}}}, out)


def json_collection(collection: Path, out: Path) -> None:
    out.mkdir()
    lucene.write_json_collection(collection, out, shards=2)


@pytest.mark.parametrize("step", [vocabulary, vocab_store, export_local, json_collection],
                         ids=["vocabulary", "token store", "local export", "index input"])
def test_memory_does_not_grow_with_the_collection(tmp_path, step):
    assert growth_per_document(tmp_path, step) < MAX_BYTES_PER_DOCUMENT


def test_materialising_the_collection_would_be_caught(tmp_path):
    """The measurement itself: a step that lists the collection grows by more than a document each."""
    assert growth_per_document(tmp_path, lambda c, out: list(formats.iter_collection(c))) > len(text_of(0))


class SingleUse:
    """An iterator of documents that may be iterated once; counts what has been taken."""

    def __init__(self, count: int):
        self.count, self.taken, self.started = count, 0, False

    def __iter__(self) -> Iterator[tuple[str, str]]:
        if self.started:
            raise AssertionError("the collection was read twice")
        self.started = True
        for number in range(self.count):
            self.taken += 1
            yield f"d{number}", text_of(number)


def test_token_store_reads_once_and_at_most_one_batch_ahead(tmp_path, monkeypatch):
    docs = SingleUse(50)
    monkeypatch.setattr(store, "iter_collection", lambda path: iter(docs))
    encoded = 0
    ahead = []

    def encode(texts: list[str]) -> list[np.ndarray]:
        nonlocal encoded
        encoded += len(texts)
        ahead.append(docs.taken - encoded)
        return [np.arange(3, dtype=np.int32) for _ in texts]

    count = store.build_store_with(tmp_path / "unused.tsv", encode, tmp_path / "store", batch_texts=8,
                                   chunk_tokens=16)
    assert count == 50 and docs.taken == 50
    # islice takes exactly one batch before encoding it; nothing is read beyond
    assert max(ahead) == 0
    loaded = store.TokenStore(tmp_path / "store")
    assert len(loaded) == 50 and loaded.tokens("d49").tolist() == [0, 1, 2]


def test_index_input_reads_the_collection_once(tmp_path, monkeypatch):
    docs = SingleUse(20)
    monkeypatch.setattr(formats, "iter_collection", lambda path: iter(docs))
    (tmp_path / "json").mkdir()
    counts = lucene.write_json_collection(tmp_path / "unused.tsv", tmp_path / "json", shards=3)
    assert counts["lines"] == docs.taken == 20
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "json").iterdir())
    assert lines == 20


def small_synthetic(background: int) -> dict:
    return dict(train_queries=10, dev_queries=3, test_queries=3, concepts=100, filler_vocabulary=500,
                context_vocabulary=200, background_documents=background)


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_streaming_synthetic_export_writes_the_same_bytes_as_the_in_memory_dataset(tmp_path):
    settings = small_synthetic(200)
    synthetic.export("ds", settings, tmp_path / "streamed", seed=5)
    synthetic.generate(synthetic.SyntheticConfig(**settings), seed=5).write(tmp_path / "in-memory")
    assert digest(tmp_path / "streamed") == digest(tmp_path / "in-memory")  # no spool file left either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in-memory", "streamed"]  # nor a temporary


def test_synthetic_export_keeps_integers_not_texts(tmp_path):
    def export(background: int) -> None:
        synthetic.export("ds", small_synthetic(background), tmp_path / str(background), seed=5)

    per_document = growth(export)
    text_bytes = (tmp_path / str(LARGE) / "collection.tsv").stat().st_size / LARGE
    # an offset, the shuffle and its inverse: 8 bytes each (plus temporaries); a text is ~460 bytes
    assert per_document < 64 < text_bytes / 4


def test_spool_reads_texts_back_in_any_order(tmp_path):
    spool = synthetic._Spool(tmp_path / "spool")
    texts = ["first", "zweite Zeile: äöü", "", "fourth"]
    for text in texts:
        spool.append(text)
    assert len(spool) == 4
    assert list(spool.texts([3, 1, 0, 2])) == [texts[3], texts[1], texts[0], texts[2]]
    spool.close()
    assert not (tmp_path / "spool").exists()
