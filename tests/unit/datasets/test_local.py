"""The local dataset source: validation of a directory of TSV/TREC files and its export."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rankstudy.config import ConfigError
from rankstudy.datasets import local
from rankstudy.errors import StudyError

COLLECTION = b"d1\thello world\nd2\t\nd3\ta third document\n"
QUERIES = b"q1\tfirst query\nq2\tsecond query\nq3\tnever judged\n"
QRELS = b"q1 0 d1 2\nq1 0 d3 0\nq2 0 d2 1\n"
SETTINGS = {"path": "src", "splits": {"test": {"queries": "queries.tsv", "qrels": "qrels.txt"}}}


def make_source(root: Path, **files: bytes) -> Path:
    """Write a good source directory, with ``files`` (name without extension) overriding its files."""
    src = root / "src"
    src.mkdir()
    contents = {"collection": COLLECTION, "queries": QUERIES, "qrels": QRELS, **files}
    (src / "collection.tsv").write_bytes(contents["collection"])
    (src / "queries.tsv").write_bytes(contents["queries"])
    (src / "qrels.txt").write_bytes(contents["qrels"])
    return src


def test_good_directory_exports_the_contract_layout(tmp_path, monkeypatch, caplog):
    make_source(tmp_path)
    (tmp_path / "src" / "dev_q.tsv").write_bytes(b"q7\tdev query\n")
    (tmp_path / "src" / "dev_qrels.txt").write_bytes(b"q7 0 d3 3\n")
    monkeypatch.chdir(tmp_path)  # a relative path is relative to the working directory
    settings = {"path": "src", "splits": {**SETTINGS["splits"], "dev": {"queries": "dev_q.tsv", "qrels": "dev_qrels.txt"}}}
    out = tmp_path / "data" / "ds"
    with caplog.at_level(logging.WARNING):
        local.export("ds", settings, out)

    assert sorted(p.name for p in out.iterdir()) == [
        "collection.tsv", "qrels.dev.txt", "qrels.test.txt", "queries.dev.tsv", "queries.test.tsv",
    ]
    assert (out / "collection.tsv").read_bytes() == COLLECTION
    assert (out / "queries.test.tsv").read_bytes() == QUERIES
    assert (out / "qrels.test.txt").read_bytes() == QRELS
    assert (out / "queries.dev.tsv").read_bytes() == b"q7\tdev query\n"
    assert (out / "qrels.dev.txt").read_bytes() == b"q7 0 d3 3\n"
    assert list((tmp_path / "data").iterdir()) == [out]  # no temporary left over
    assert "1 of 3 queries have no judgments" in caplog.text
    assert "1 empty document(s)" in caplog.text


BAD_CASES = {
    "duplicate docid": ({"collection": b"d1\ta\nd2\tb\nd3\tc\nd2\tagain\n"}, "collection.tsv:4", "unique docid"),
    "duplicate qid": ({"queries": b"q1\ta\nq2\tb\nq1\tc\n"}, "queries.tsv:3", "unique qid"),
    "unknown query": ({"qrels": b"q1 0 d1 1\nq9 0 d1 1\n"}, "qrels.txt:2", "'q9'"),
    "unknown document": ({"qrels": b"q1 0 d1 1\nq2 0 d1 0\nq2 0 d9 1\n"}, "qrels.txt:3", "'d9'"),
    "missing tab in collection": ({"collection": b"d1\ta\nd2 no tab here\nd3\tc\n"}, "collection.tsv:2", "tab"),
    "missing tab in queries": ({"queries": b"q1 no tab\n"}, "queries.tsv:1", "tab"),
    "non-integer grade": ({"qrels": b"q1 0 d1 1\nq1 0 d2 high\n"}, "qrels.txt:2", "integer relevance"),
    "judged twice": ({"qrels": b"q1 0 d1 1\nq1 0 d1 2\n"}, "qrels.txt:2", "judged twice"),
    "NUL byte": ({"collection": b"d1\ta\nd2\tb\x00\n"}, "collection.tsv:2", "without a NUL byte"),
    "negative grade": ({"qrels": b"q1 0 d1 1\nq2 0 d2 -1\n"}, "qrels.txt:2", "grade >= 0"),
    "empty collection": ({"collection": b""}, "collection.tsv:1", "at least one document"),
}


@pytest.mark.parametrize("files, where, what", BAD_CASES.values(), ids=BAD_CASES.keys())
def test_bad_input_fails_naming_file_and_line_and_leaves_no_output(tmp_path, files, where, what):
    src = make_source(tmp_path, **files)
    out = tmp_path / "data" / "ds"
    with pytest.raises(StudyError) as caught:
        local.export("ds", {**SETTINGS, "path": str(src)}, out)
    message = str(caught.value)
    assert where in message and what in message
    assert str(src) in message  # the full path of the offending file
    assert not out.exists()
    assert not any((tmp_path / "data").iterdir())  # nor any temporary directory


def test_a_byte_order_mark_is_stripped(tmp_path):
    src = make_source(tmp_path, collection=b"\xef\xbb\xbf" + COLLECTION, queries=b"\xef\xbb\xbf" + QUERIES,
                      qrels=b"\xef\xbb\xbf" + QRELS)
    local.export("ds", {**SETTINGS, "path": str(src)}, tmp_path / "out")
    assert (tmp_path / "out" / "collection.tsv").read_bytes() == COLLECTION
    assert (tmp_path / "out" / "qrels.test.txt").read_bytes() == QRELS


def test_split_without_judgments_fails(tmp_path):
    src = make_source(tmp_path, qrels=b"\n")
    out = tmp_path / "out"
    with pytest.raises(StudyError, match=r"qrels\.txt:2: expected at least one judgment"):
        local.export("ds", {**SETTINGS, "path": str(src)}, out)
    assert not out.exists()


def test_missing_files_are_all_named(tmp_path):
    src = make_source(tmp_path)
    (src / "queries.tsv").unlink()
    (src / "qrels.txt").unlink()
    with pytest.raises(StudyError, match="missing file") as caught:
        local.export("ds", {**SETTINGS, "path": str(src)}, tmp_path / "out")
    assert "queries.tsv" in str(caught.value) and "qrels.txt" in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("settings", [
    {**SETTINGS, "colection": "x.tsv"},
    {**SETTINGS, "splits": {}},
    {**SETTINGS, "splits": {"test": {"queries": "queries.tsv"}}},
    {**SETTINGS, "splits": {"a/b": {"queries": "queries.tsv", "qrels": "qrels.txt"}}},
])
def test_bad_config_is_a_config_error(tmp_path, settings):
    make_source(tmp_path)
    with pytest.raises(ConfigError):
        local.export("ds", {**settings, "path": str(tmp_path / "src")}, tmp_path / "out")


RUN = b"q1 Q0 d3 1 9.5 bm25\nq1 Q0 d1 2 7.0 bm25\nq2 Q0 d2 1 3.0 bm25\n"


def test_a_given_candidate_run_is_exported_for_the_official_route(tmp_path):
    src = make_source(tmp_path)
    (src / "bm25.run").write_bytes(RUN)
    local.export("ds", {**SETTINGS, "path": str(src), "candidates": "bm25.run"}, tmp_path / "out")
    assert (tmp_path / "out" / "candidates.run").read_text().splitlines() == [
        "q1 Q0 d3 1 9.5 candidates", "q1 Q0 d1 2 7 candidates", "q2 Q0 d2 1 3 candidates"]


@pytest.mark.parametrize("run, message", [
    (b"q9 Q0 d1 1 1.0 x\n", "ranks 1 queries that no split lists \\(e.g. 'q9'\\)"),
    (b"q1 Q0 d9 1 1.0 x\n",
     "1 ranked documents are not in .*collection.tsv \\(e.g. 'd9'\\); a candidate needs its text"),
])
def test_a_candidate_run_must_rank_known_queries_and_documents(tmp_path, run, message):
    src = make_source(tmp_path)
    (src / "bm25.run").write_bytes(run)
    with pytest.raises(StudyError, match=message):
        local.export("ds", {**SETTINGS, "path": str(src), "candidates": "bm25.run"}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_judgments_beyond_the_collection_are_kept_only_when_asked(tmp_path):
    from rankstudy.formats import read_qrels

    src = make_source(tmp_path, qrels=QRELS + b"q1 0 unseen 3\n")
    with pytest.raises(StudyError, match="qrels.txt:4: expected a docid listed in"):
        local.export("ds", {**SETTINGS, "path": str(src)}, tmp_path / "out")
    local.export("ds", {**SETTINGS, "path": str(src), "qrels_beyond_collection": True}, tmp_path / "out")
    assert read_qrels(tmp_path / "out" / "qrels.test.txt")["q1"] == {"d1": 2, "d3": 0, "unseen": 3}


def test_the_official_route_reads_a_splits_lists_from_the_given_run(tmp_path, caplog):
    from rankstudy import cli
    from rankstudy.formats import read_run

    src = make_source(tmp_path)
    (src / "bm25.run").write_bytes(RUN)
    out = tmp_path / "data"
    local.export("ds", {**SETTINGS, "path": str(src), "candidates": "bm25.run"}, out)
    args = ["official-candidates", "--run", str(out / "candidates.run"), "--queries", str(out / "queries.test.tsv"),
            "--hits", "1", "--out", str(tmp_path / "bm25.test.run"), "--tag", "bm25"]
    with caplog.at_level(logging.WARNING):
        assert cli.main(args) == 0
    # each query's top 1 by score; q3 has no list (logged)
    assert read_run(tmp_path / "bm25.test.run") == {"q1": [("d3", 9.5)], "q2": [("d2", 3.0)]}
    assert "1 of 3 queries have no candidates" in caplog.text
    (tmp_path / "none.tsv").write_text("q7\tseventh\n")
    assert cli.main(args[:3] + ["--queries", str(tmp_path / "none.tsv")] + args[5:]) == 2  # ranks none of them


def test_a_pool_joins_other_folders_passages_text_only(tmp_path, caplog):
    """pool: another folder's passages join the collection (its judgments never do); a docid already there keeps
    the collection's own text, and the copies are logged."""
    src = make_source(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "collection.tsv").write_bytes(b"d1\tanother rendering of d1\nx1\tpooled passage\n")
    (other / "qrels.txt").write_bytes(b"q1 0 x1 3\n")  # never read
    with caplog.at_level(logging.WARNING):
        local.export("ds", {**SETTINGS, "path": str(src), "pool": [str(other)]}, tmp_path / "out")
    assert (tmp_path / "out" / "collection.tsv").read_bytes() == COLLECTION + b"x1\tpooled passage\n"
    assert (tmp_path / "out" / "qrels.test.txt").read_bytes() == QRELS
    assert "1 documents already in the collection, kept with the first text" in caplog.text


TRAIN_QUERIES = "".join(f"t{i}\tquery {i}\n" for i in range(10)).encode()
TRAIN_QRELS = "".join(f"t{i} 0 d{1 + i % 3} 1\n" for i in range(10)).encode()
TRAIN = {"path": "src", "splits": {"train": {"queries": "queries.tsv", "qrels": "qrels.txt"}}}


def test_a_held_out_split_is_a_seeded_disjoint_choice_of_judged_queries(tmp_path):
    src = make_source(tmp_path, queries=TRAIN_QUERIES, qrels=TRAIN_QRELS)
    settings = {**TRAIN, "path": str(src), "held_out": {"from": "train", "split": "dev", "queries": 3}}
    chosen = []
    for seed, out in ((1, "a"), (1, "b"), (2, "c")):
        local.export("ds", settings, tmp_path / out, seed=seed)
        dev = (tmp_path / out / "queries.dev.tsv").read_text().splitlines()
        train = (tmp_path / out / "queries.train.tsv").read_text().splitlines()
        assert len(dev) == 3 and len(train) == 7 and not set(dev) & set(train)
        assert sorted(dev + train) == sorted(TRAIN_QUERIES.decode().splitlines())
        dev_qids = {line.split()[0] for line in (tmp_path / out / "qrels.dev.txt").read_text().splitlines()}
        assert dev_qids == {line.split("\t")[0] for line in dev}
        chosen.append(dev)
    assert chosen[0] == chosen[1] and chosen[0] != chosen[2]  # the seed alone decides
    assert local.splits(settings) == ["train", "dev"]


@pytest.mark.parametrize("held_out, message", [
    ({"from": "dev", "split": "x", "queries": 2}, "held_out.from: 'dev' is not one of the splits"),
    ({"from": "train", "split": "train", "queries": 2}, "held_out.split: expected a new split name"),
    ({"from": "train", "split": "dev", "queries": 0}, "held_out: expected"),
])
def test_a_bad_held_out_setting_is_a_config_error(tmp_path, held_out, message):
    src = make_source(tmp_path, queries=TRAIN_QUERIES, qrels=TRAIN_QRELS)
    with pytest.raises(ConfigError, match=message):
        local.export("ds", {**TRAIN, "path": str(src), "held_out": held_out}, tmp_path / "out")


def test_holding_out_every_judged_query_fails(tmp_path):
    src = make_source(tmp_path, queries=TRAIN_QUERIES, qrels=TRAIN_QRELS)
    with pytest.raises(StudyError, match="cannot hold out 10 of 10 judged queries"):
        local.export("ds", {**TRAIN, "path": str(src), "held_out": {"from": "train", "split": "dev", "queries": 10}},
                     tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_given_negatives_become_grade_0_judgments(tmp_path):
    src = make_source(tmp_path)
    (src / "negatives.tsv").write_bytes(b"q1\td2\nq3\td1\n")
    splits = {"test": {**SETTINGS["splits"]["test"], "negatives": "negatives.tsv"}}
    local.export("ds", {**SETTINGS, "path": str(src), "splits": splits}, tmp_path / "out")
    assert (tmp_path / "out" / "qrels.test.txt").read_text().splitlines() == [
        "q1 0 d1 2", "q1 0 d3 0", "q1 0 d2 0", "q2 0 d2 1", "q3 0 d1 0"]


@pytest.mark.parametrize("negatives, message", [
    (b"q1\td2\nq9\td1\n", r"negatives.tsv:2: expected a qid of the split's queries; got 'q9'"),
    (b"q1\td9\n", r"negatives.tsv:1: expected a docid of the collection"),
    (b"q1\td1\n", r"negatives.tsv:1: expected a document not judged relevant to the query"),
])
def test_bad_given_negatives_name_the_line(tmp_path, negatives, message):
    src = make_source(tmp_path)
    (src / "negatives.tsv").write_bytes(negatives)
    splits = {"test": {**SETTINGS["splits"]["test"], "negatives": "negatives.tsv"}}
    with pytest.raises(StudyError, match=message):
        local.export("ds", {**SETTINGS, "path": str(src), "splits": splits}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def split_into_parts(src: Path, *parts: bytes) -> None:
    """Replace ``src``'s collection.tsv by the files collection.part1.tsv ... with ``parts``."""
    (src / "collection.tsv").unlink()
    for number, content in enumerate(parts, start=1):
        (src / f"collection.part{number}.tsv").write_bytes(content)


def test_a_collection_in_parts_is_read_in_numeric_order(tmp_path, caplog):
    src = make_source(tmp_path)
    lines = [f"d{i}\ttext {i}\n".encode() for i in range(1, 12)]
    # eleven parts: part10 and part11 sort before part2 as names, not as numbers
    split_into_parts(src, *lines)
    out = tmp_path / "data" / "ds"
    with caplog.at_level(logging.INFO):
        local.export("ds", {**SETTINGS, "path": str(src)}, out)
    assert (out / "collection.tsv").read_bytes() == b"".join(lines)
    assert "collection.part1.tsv (and its other 10 parts)" in caplog.text


def test_a_docid_repeated_in_another_part_names_both_places(tmp_path):
    src = make_source(tmp_path)
    split_into_parts(src, b"d1\ta\nd2\tb\n", b"d3\tc\nd1\tagain\n")
    out = tmp_path / "data" / "ds"
    with pytest.raises(StudyError) as caught:
        local.export("ds", {**SETTINGS, "path": str(src)}, out)
    assert f"{src / 'collection.part2.tsv'}:2" in str(caught.value)
    assert f"first seen at {src / 'collection.part1.tsv'}:1" in str(caught.value)
    assert not out.exists()


def test_a_malformed_line_in_a_part_names_that_part_and_writes_nothing(tmp_path):
    src = make_source(tmp_path)
    split_into_parts(src, b"d1\ta\n", b"d2\tb\nd3 no tab\n")
    out = tmp_path / "data" / "ds"
    with pytest.raises(StudyError, match=r"collection\.part2\.tsv:2: expected 2 tab-separated fields"):
        local.export("ds", {**SETTINGS, "path": str(src)}, out)
    assert not any((tmp_path / "data").iterdir())


def test_a_gap_in_the_part_numbers_is_an_error(tmp_path):
    src = make_source(tmp_path)
    split_into_parts(src, b"d1\ta\n", b"d2\tb\n", b"d3\tc\n")
    (src / "collection.part2.tsv").unlink()
    with pytest.raises(StudyError, match=r"numbered 1 to N without gaps; found part numbers \[1, 3\]"):
        local.export("ds", {**SETTINGS, "path": str(src)}, tmp_path / "data" / "ds")


def test_a_pooled_folder_may_hold_its_collection_in_parts(tmp_path):
    src = make_source(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "collection.part1.tsv").write_bytes(b"p1\tpooled one\n")
    (other / "collection.part2.tsv").write_bytes(b"p2\tpooled two\n")
    out = tmp_path / "data" / "ds"
    local.export("ds", {**SETTINGS, "path": str(src), "pool": [str(other)]}, out)
    assert (out / "collection.tsv").read_bytes() == COLLECTION + b"p1\tpooled one\np2\tpooled two\n"
