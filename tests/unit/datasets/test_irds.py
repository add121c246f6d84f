"""The ir_datasets source, on small datasets registered from local files (offline)."""

from __future__ import annotations

import logging
import uuid
from typing import NamedTuple

import pytest

ir_datasets = pytest.importorskip("ir_datasets")

from rankstudy import formats  # noqa: E402
from rankstudy.datasets import irds  # noqa: E402
from rankstudy.errors import StudyError  # noqa: E402

DOCS = "d1\thello world\nd2\tsecond document\nd3\tthird\nd4\tfourth\nd5\tfifth\n"
QUERIES = "q1\tfirst query\nq2\tsecond query\nq3\tnever judged\n"
QRELS = "q1 0 d1 2\nq1 0 d3 0\nq2 0 d2 1\nq9 0 d1 1\n"  # q9 is not a query: dropped


def register(tmp_path, docs=DOCS, queries=QUERIES, qrels=QRELS):
    """Register a dataset built from local files under a unique id; returns (id, dataset)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    files = {}
    for key, name, text in (("docs_tsv", "docs.tsv", docs), ("queries_tsv", "queries.tsv", queries),
                            ("qrels_trec", "qrels.txt", qrels)):
        if text is not None:
            (tmp_path / name).write_text(text)
            files[key] = str(tmp_path / name)
    dataset = ir_datasets.create_dataset(**files)
    dataset_id = f"rankstudy-test/{uuid.uuid4().hex}"
    ir_datasets.registry.register(dataset_id, dataset)
    return dataset_id, dataset


def test_export_writes_the_contract_layout(tmp_path, caplog):
    dataset_id, _ = register(tmp_path)
    out = tmp_path / "data" / "ds"
    with caplog.at_level(logging.WARNING):
        irds.export("ds", {"docs": dataset_id, "splits": {"test": dataset_id, "dev": dataset_id}}, out)

    assert sorted(p.name for p in out.iterdir()) == [
        "collection.tsv", "qrels.dev.txt", "qrels.test.txt", "queries.dev.tsv", "queries.test.tsv",
    ]
    assert (out / "collection.tsv").read_text() == DOCS
    assert (out / "queries.test.tsv").read_text() == QUERIES
    assert (out / "qrels.test.txt").read_text() == "q1 0 d1 2\nq1 0 d3 0\nq2 0 d2 1\n"
    assert (out / "queries.dev.tsv").read_text() == QUERIES
    assert list((tmp_path / "data").iterdir()) == [out]  # no temporary left over
    assert "dropped 1 qrels" in caplog.text
    assert "1 of 3 queries have no judgments" in caplog.text


def test_documents_are_streamed(tmp_path, monkeypatch):
    """Each document reaches the writer before the next one is taken from docs_iter()."""
    dataset_id, dataset = register(tmp_path)
    original = dataset.docs_iter
    taken = 0

    def counting_docs_iter():
        nonlocal taken
        for doc in original():
            taken += 1
            yield doc

    taken_when_written = []

    def spy_write_collection(path, docs):
        def watched():
            for pair in docs:
                taken_when_written.append(taken)
                yield pair
        return formats.write_collection(path, watched())

    monkeypatch.setattr(dataset, "docs_iter", counting_docs_iter)
    monkeypatch.setattr(irds, "write_collection", spy_write_collection)
    irds.export("ds", {"docs": dataset_id, "splits": {"test": dataset_id}}, tmp_path / "out")
    assert taken_when_written == [1, 2, 3, 4, 5]
    assert (tmp_path / "out" / "collection.tsv").read_text() == DOCS


def test_text_without_default_text_joins_string_fields():
    class Doc(NamedTuple):
        doc_id: str
        title: str
        body: str
        year: int
        url: str

    assert irds._text(Doc("d1", "A title", "the body", 1999, ""), "doc_id") == "A title the body"


def test_unknown_id_fails_naming_it(tmp_path):
    with pytest.raises(StudyError, match=r"rankstudy-test/no-such-dataset.*IR_DATASETS_HOME"):
        irds.export("ds", {"docs": "rankstudy-test/no-such-dataset", "splits": {"test": "x"}}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_split_without_qrels_fails(tmp_path):
    docs_id, _ = register(tmp_path)
    split_id, _ = register(tmp_path / "split", docs=None, qrels=None)
    with pytest.raises(StudyError, match="provides no qrels"):
        irds.export("ds", {"docs": docs_id, "splits": {"test": split_id}}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_split_without_judgments_fails(tmp_path):
    dataset_id, _ = register(tmp_path, qrels="q9 0 d1 1\n")
    with pytest.raises(StudyError, match="no judgments"):
        irds.export("ds", {"docs": dataset_id, "splits": {"test": dataset_id}}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_negative_grades_are_written_as_judged_non_relevant(tmp_path, caplog):
    """The study's qrels reader refuses negative grades (docs/formats.md); ir_datasets collections
    such as the Web tracks' use -2 for spam, so the export writes them as 0."""
    dataset_id, _ = register(tmp_path, qrels="q1 0 d1 2\nq1 0 d2 -2\n")
    out = tmp_path / "data" / "ds"
    with caplog.at_level(logging.WARNING):
        irds.export("ds", {"docs": dataset_id, "splits": {"test": dataset_id}}, out)
    assert formats.read_qrels(out / "qrels.test.txt") == {"q1": {"d1": 2, "d2": 0}}
    assert "1 negative grades" in caplog.text


def test_a_split_may_be_the_union_of_several_ids(tmp_path):
    """Cross-validation folds: the training split of a fold is the union of the other folds' queries."""
    first, _ = register(tmp_path / "a")
    second, _ = register(tmp_path / "b", queries="q4\tfourth query\nq1\tfirst query\n", qrels="q4 0 d4 1\nq1 0 d5 1\n")
    out = tmp_path / "data" / "cv"
    irds.export("cv", {"docs": first, "splits": {"train": [first, second], "test": second}}, out)
    assert formats.read_queries(out / "queries.train.tsv") == {
        "q1": "first query", "q2": "second query", "q3": "never judged", "q4": "fourth query"}
    assert formats.read_qrels(out / "qrels.train.txt") == {
        "q1": {"d1": 2, "d3": 0, "d5": 1}, "q2": {"d2": 1}, "q4": {"d4": 1}}
    assert formats.read_queries(out / "queries.test.tsv") == {"q4": "fourth query", "q1": "first query"}

    clash, _ = register(tmp_path / "c", queries="q1\tanother text\n", qrels="q1 0 d1 1\n")
    with pytest.raises(StudyError, match=r"query 'q1' has another text in"):
        irds.export("cv", {"docs": first, "splits": {"train": [first, clash]}}, tmp_path / "data" / "bad")
    assert not (tmp_path / "data" / "bad").exists()


def register_scoreddocs(tmp_path, scoreddocs):
    """A dataset that provides only candidate lists (TREC run format), like TREC DL's official top 1,000."""
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecScoredDocs
    from ir_datasets.util import LocalDownload

    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "scoreddocs.txt").write_text(scoreddocs)
    dataset_id = f"rankstudy-test/{uuid.uuid4().hex}"
    ir_datasets.registry.register(dataset_id, Dataset(TrecScoredDocs(LocalDownload(tmp_path / "scoreddocs.txt"))))
    return dataset_id


def test_official_candidates_are_the_splits_own_lists(tmp_path, caplog):
    from rankstudy import cli

    first = register_scoreddocs(tmp_path / "a", "q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 3.0 bm25\nq1 Q0 d3 3 1.0 bm25\n"
                                                "q9 Q0 d1 1 5.0 bm25\n")
    second = register_scoreddocs(tmp_path / "b", "q2 Q0 d4 1 1.5 bm25\n")
    (tmp_path / "q.tsv").write_text("q1\tfirst\nq2\tsecond\nq3\tthird\n")
    args = ["official-candidates", "--ids", first, second, "--queries", str(tmp_path / "q.tsv"), "--hits", "2",
            "--out", str(tmp_path / "official.run"), "--tag", "official"]
    with caplog.at_level(logging.WARNING):
        assert cli.main(args) == 0
    # the top 2 by score of the split's queries (q9 is not one of them), from the union of the ids
    assert formats.read_run(tmp_path / "official.run") == {"q1": [("d2", 3.0), ("d1", 2.0)], "q2": [("d4", 1.5)]}
    assert "1 of 3 queries have no official candidates" in caplog.text
    (tmp_path / "none.tsv").write_text("q7\tseventh\n")
    assert cli.main(args[:4] + ["--queries", str(tmp_path / "none.tsv")] + args[6:]) != 0
    assert irds.official_candidates(first, {"q1"}, 1) == {"q1": [("d2", 3.0)]}
    with pytest.raises(StudyError, match="provides no scoreddocs"):
        irds.official_candidates(register(tmp_path / "c")[0], {"q1"}, 10)


def test_official_candidates_keep_the_queries_files_order(tmp_path):
    """The run's bytes are the same in every process: its queries in the queries file's order (they followed a set's
    order, which string hashing changes from process to process: a Slurm run differed from the local one)."""
    from rankstudy import cli

    qids = [f"q{number}" for number in (17, 3, 25, 8, 11, 30, 1, 22, 14, 5, 27, 19, 2, 9, 24, 13, 6, 29, 16, 21)]
    dataset_id = register_scoreddocs(tmp_path, "".join(f"{qid} Q0 d1 1 1.0 bm25\n" for qid in sorted(qids)))
    (tmp_path / "q.tsv").write_text("".join(f"{qid}\ttext\n" for qid in qids))
    assert cli.main(["official-candidates", "--ids", dataset_id, "--queries", str(tmp_path / "q.tsv"), "--hits", "1",
                     "--out", str(tmp_path / "official.run"), "--tag", "official"]) == 0
    assert [line.split()[0] for line in (tmp_path / "official.run").read_text().splitlines()] == qids


def test_official_candidates_without_scores_keep_the_files_order(tmp_path, caplog):
    """MS MARCO passage's scoreddocs are "qid pid" pairs (ir_datasets scores each 0): the written run ranks them in
    the file's order with distinct scores, so an evaluation (ties by docid) sees the order the depth cut takes."""
    dataset_id = register_scoreddocs(tmp_path, "q1\td3\nq1\td1\nq1\td2\nq2\td5\n")
    with caplog.at_level(logging.WARNING):
        run = irds.official_candidates(dataset_id, {"q1", "q2"}, 2)
    assert run == {"q1": [("d3", 3.0), ("d1", 2.0)], "q2": [("d5", 0.0)]}
    assert "1 of 2 queries' official candidates carry no scores" in caplog.text
