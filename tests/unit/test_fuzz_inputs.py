"""Property-based fuzzing of every input reader (issue 16): any byte string either parses or raises
the project's ``FILE:LINE: expected ...`` error — never another exception, never a partial output.

Examples are bounded and derandomised (the same inputs on every run, no example database), so the
suite runs among the quick tests; raise ``FUZZ_EXAMPLES`` to search longer.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankstudy import formats
from rankstudy.datasets import local
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError
from rankstudy.train import examples

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

# Tokens that sit at the readers' edges: separators, numbers and non-numbers, ids with odd characters.
TOKENS = ["q1", "d1", "d2", "Q0", "0", "1", "-1", "2", "3.5", "1e309", "nan", "-inf", "1_0", "٣", "x",
          "a,b", "\ufeff", "\x00", "\u2028", "\x85", "é", "", " ", "\t", "\r"]
field = st.one_of(st.sampled_from(TOKENS), st.text(max_size=5))
line = st.lists(field, max_size=7).flatmap(
    lambda fields: st.sampled_from(["\t", " ", "  "]).map(lambda sep: sep.join(fields)))
# Well-formed lines of each format (ids from a small pool, so that repeats happen), mixed with noise.
printable = st.characters(whitelist_categories=("L", "N", "P", "S"))
ident = st.one_of(st.sampled_from(["q1", "q2", "d1", "d2", "d3", "x-9", "é"]), st.text(printable, min_size=1, max_size=4))
integer = st.one_of(*[st.integers(0, 1000).map(str)] * 4, st.integers(-2, -1).map(str), st.sampled_from(TOKENS))
score = st.one_of(*[st.floats(-1e6, 1e6).map(repr)] * 4, st.floats().map(repr), st.sampled_from(TOKENS))
VALID = {
    "collection": st.builds(lambda i, t: f"{i}\t{t}", ident, st.one_of(*[st.text(st.one_of(printable, st.just(" ")), max_size=8)] * 3, st.text(max_size=8))),
    "qrels": st.builds(lambda q, d, g: f"{q} 0 {d} {g}", ident, ident, integer),
    "run": st.builds(lambda q, d, r, s: f"{q} Q0 {d} {r} {s} tag", ident, ident, integer, score),
    "ids": ident,
    "triples": st.builds(lambda q, p, n: f"{q}\t{p}\t{n}", ident, ident, ident),
    "groups": st.builds(lambda q, p, n: f"{q}\t{p}\t{','.join(n)}", ident, ident, st.lists(ident, min_size=1, max_size=3)),
}
VALID["queries"] = VALID["collection"]
# what must not repeat within a file (an id, a judged pair, a ranked pair): drawn unique in valid files
KEY = {"collection": lambda l: l.split("\t")[0], "queries": lambda l: l.split("\t")[0], "ids": lambda l: l,
       "qrels": lambda l: tuple(l.split(" ")[::2]), "run": lambda l: tuple(l.split(" ")[::2])}


def text_file(kind: str | None = None):
    """A file of well-formed ``kind`` lines (mostly), or of lines mixed with noise."""
    valid = st.lists(VALID[kind], min_size=1, max_size=5, unique_by=KEY.get(kind)) if kind else st.nothing()
    noisy = st.lists(st.one_of(VALID[kind], line) if kind else line, max_size=6)
    return st.tuples(st.booleans(), st.one_of(valid, valid, valid, noisy), st.sampled_from(["\n", "\r\n"])).map(
        lambda t: ("\ufeff" if t[0] else "") + t[2].join(t[1]) + (t[2] if t[1] else ""))


def raw(kind: str | None = None):
    """Mostly text of the format ``kind``; sometimes random bytes, or text with bytes appended."""
    text = text_file(kind)
    encoded = text.map(lambda s: s.encode("utf-8"))
    return st.one_of(encoded, encoded, encoded, st.binary(max_size=120),
                     st.tuples(text, st.binary(max_size=4)).map(lambda t: t[0].encode() + t[1]))


READERS = {
    "collection": lambda p: list(formats.iter_collection(p)),
    "queries": formats.read_queries,
    "qrels": formats.read_qrels,
    "run": formats.read_run,
    "ids": formats.read_ids,
    "triples": examples.read_triples,
    "groups": examples.read_groups,
}


def assert_located(error: FormatError, path: Path) -> None:
    """The project's error: the file, a 1-based line number, what was expected."""
    assert error.path == str(path) and isinstance(error.line, int) and error.line >= 1, str(error)
    assert re.match(rf"{re.escape(str(path))}:{error.line}: expected ", str(error)), str(error)


@pytest.mark.parametrize("name", READERS)
@FUZZ
@given(data=st.data())
def test_a_reader_parses_or_names_the_line(name, data):
    data = data.draw(raw(name))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input"
        path.write_bytes(data)
        try:
            parsed = READERS[name](path)
        except FormatError as error:
            assert_located(error, path)
            return
    assert parsed  # an empty file is an error, not an empty result
    ids = {"collection": lambda: [d for d, _ in parsed], "queries": lambda: list(parsed),
           "qrels": lambda: [i for q, judged in parsed.items() for i in (q, *judged)],
           "run": lambda: [i for q, ranking in parsed.items() for i in (q, *(d for d, _ in ranking))],
           "ids": lambda: parsed, "triples": lambda: [i for t in parsed for i in t],
           "groups": lambda: [i for q, p, n in parsed for i in (q, p, *n)]}[name]()
    assert all(i and not re.search(r"\s|\x00", i) and not i.startswith("\ufeff") for i in ids), ids
    if name == "qrels":
        assert all(grade >= 0 for judged in parsed.values() for grade in judged.values())


@FUZZ
@given(collection=raw("collection"), queries=raw("queries"), qrels=raw("qrels"))
def test_the_local_loader_exports_everything_or_nothing(collection, queries, qrels):
    with tempfile.TemporaryDirectory() as tmp:
        src, data = Path(tmp) / "src", Path(tmp) / "data"
        src.mkdir()
        for name, content in (("collection.tsv", collection), ("queries.tsv", queries), ("qrels.txt", qrels)):
            (src / name).write_bytes(content)
        splits = {"test": {"queries": "queries.tsv", "qrels": "qrels.txt"}}
        try:
            local.export("ds", {"path": str(src), "splits": splits}, data / "ds")
        except FormatError as error:
            assert error.path in {str(src / n) for n in ("collection.tsv", "queries.tsv", "qrels.txt")}
            assert_located(error, Path(error.path))
            assert not data.exists() or not any(data.iterdir())  # no output, no temporary
            return
        written = sorted(p.name for p in (data / "ds").iterdir())
        assert written == ["collection.tsv", "qrels.test.txt", "queries.test.tsv"]
        # what was written reads back as it was read
        assert formats.read_qrels(data / "ds" / "qrels.test.txt") == formats.read_qrels(src / "qrels.txt")


ir_datasets = pytest.importorskip("ir_datasets")


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(docs=text_file("collection"), queries=text_file("queries"), qrels=text_file("qrels"))
def test_the_irds_loader_exports_everything_or_fails_cleanly(docs, queries, qrels):
    """ir_datasets parses these files itself (no line numbers to give): the loader either exports
    or raises a StudyError, never another exception and never a partial directory."""
    from rankstudy.datasets import irds

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, content in (("docs.tsv", docs), ("queries.tsv", queries), ("qrels.txt", qrels)):
            (root / name).write_text(content, encoding="utf-8")
        dataset = ir_datasets.create_dataset(docs_tsv=str(root / "docs.tsv"), queries_tsv=str(root / "queries.tsv"),
                                             qrels_trec=str(root / "qrels.txt"))
        dataset_id = f"rankstudy-fuzz/{uuid.uuid4().hex}"
        ir_datasets.registry.register(dataset_id, dataset)
        out = root / "data" / "ds"
        try:
            irds.export("ds", {"docs": dataset_id, "splits": {"test": dataset_id}}, out)
        except StudyError:
            assert not out.parent.exists() or not any(out.parent.iterdir())
            return
        # every exported file reads back under the study's own readers
        list(formats.iter_collection(out / "collection.tsv"))
        formats.read_queries(out / "queries.test.tsv")
        assert all(g >= 0 for judged in formats.read_qrels(out / "qrels.test.txt").values() for g in judged.values())


_TENSOR_FILE = None


def _tensor_file_bytes() -> bytes:
    """A real .pt file (as training writes one), made once."""
    global _TENSOR_FILE
    if _TENSOR_FILE is None:
        import torch

        from rankstudy.tensorfile import save_tensors

        with tempfile.TemporaryDirectory() as folder:
            save_tensors({"model": {"w": torch.arange(2000.0).view(40, 50)}, "step": 7}, Path(folder) / "m.pt")
            _TENSOR_FILE = (Path(folder) / "m.pt").read_bytes()
    return _TENSOR_FILE


@FUZZ
@given(data=st.data())
def test_a_tensor_file_cut_or_damaged_anywhere_is_a_clear_error(data):
    """Binary artefacts (model files, checkpoints): a .pt cut at any offset, or with a byte changed, loads
    intact or raises the StudyError that names the file, never another exception."""
    from rankstudy.tensorfile import load_tensors

    whole = _tensor_file_bytes()
    damaged = whole[:data.draw(st.integers(0, len(whole) - 1), label="cut at")]
    if data.draw(st.booleans(), label="flip a byte too") and damaged:
        at = data.draw(st.integers(0, len(damaged) - 1), label="flipped byte")
        damaged = damaged[:at] + bytes([damaged[at] ^ 0xFF]) + damaged[at + 1:]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt"
        path.write_bytes(damaged)
        with pytest.raises(StudyError, match=re.escape(f"{path}: not a readable .pt file")):
            load_tensors(path)


_ARTEFACTS = None


def _word_artefacts() -> Path:
    """A vocabulary, a token store and word vectors (as the study writes them), made once."""
    global _ARTEFACTS
    if _ARTEFACTS is None:
        import numpy as np

        from rankstudy.text.embeddings import save_embeddings
        from rankstudy.text.vocab import build_vocabulary
        from rankstudy.text.word_store import build_store

        _ARTEFACTS = Path(tempfile.mkdtemp(prefix="artefacts"))
        formats.write_collection(_ARTEFACTS / "c.tsv",
                                 [(f"d{i}", f"apple river {i} guitar" * (i + 1)) for i in range(9)])
        vocab = build_vocabulary(_ARTEFACTS / "c.tsv")
        vocab.save(_ARTEFACTS / "vocab")
        build_store(_ARTEFACTS / "c.tsv", vocab, _ARTEFACTS / "store")
        save_embeddings(_ARTEFACTS / "embeddings.npy", np.ones((len(vocab), 8), dtype=np.float32))
    return _ARTEFACTS


def _read_artefact(path: Path) -> None:
    from rankstudy.store import TokenStore
    from rankstudy.text.embeddings import load_embeddings
    from rankstudy.text.vocab import Vocabulary

    if path.name == "embeddings.npy":
        load_embeddings(path, Vocabulary.load(path.parent / "vocab"))
    elif path.parent.name == "vocab":
        Vocabulary.load(path.parent)
    else:
        store = TokenStore(path.parent)
        [store.tokens(qid) for qid in store.ids]


@pytest.mark.parametrize("name", ["embeddings.npy", "vocab/vocab.tsv", "vocab/vocab.json", "store/tokens.npy",
                                  "store/offsets.npy", "store/ids.txt"])
@FUZZ
@given(data=st.data())
def test_a_word_artefact_cut_anywhere_is_a_clear_error(name, data):
    """Word vectors, a vocabulary and a token store, one file cut at any offset: a StudyError naming the file or its
    directory, never another exception, never a silently shorter artefact."""
    whole_dir = _word_artefacts()
    whole = (whole_dir / name).read_bytes()
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "copy"
        shutil.copytree(whole_dir, copy)
        cut = whole[:data.draw(st.integers(0, len(whole) - 1), label="cut at")]
        (copy / name).write_bytes(cut)
        if name.endswith(".json") and cut.rstrip() == whole.rstrip():  # only the last newline gone: intact
            return _read_artefact(copy / name)
        with pytest.raises(StudyError, match=re.escape(str(copy / name.split("/")[0]))):
            _read_artefact(copy / name)
