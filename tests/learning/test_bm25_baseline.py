"""Anserini index + BM25/QL on the synthetic data: index checks, and BM25 is a real baseline.

BM25 must be neither trivial nor hopeless on the test split, and expanding each query with the
true synonym sets must beat plain BM25 by a clear margin (the lexical-mismatch gap that learned
matching can close).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rankstudy import formats
from rankstudy.errors import StudyError
from rankstudy.evaluate import aggregate, evaluate_run
from rankstudy.lucene import AnseriniError, build_index, estimate_terms, search



def _ndcg10(tmp_path, index, queries, qrels, name):
    path = tmp_path / f"{name}.tsv"
    formats.write_queries(path, queries)
    search(index, path, tmp_path / f"{name}.run", model="bm25", params={"k1": 0.9, "b": 0.4}, hits=100, threads=2)
    per_query = evaluate_run(formats.read_run(tmp_path / f"{name}.run"), qrels, ["nDCG@10"])
    return float(aggregate(per_query).set_index("measure").loc["nDCG@10", "value"])


@pytest.mark.parametrize("fixture", ["passage_data", "document_data"])
def test_bm25_is_a_real_baseline_and_synonyms_matter(fixture, tmp_path, request):
    data = request.getfixturevalue(fixture)
    data.write(tmp_path / "data")
    stats = build_index(tmp_path / "data" / "collection.tsv", tmp_path / "index", threads=2)
    assert stats["documents"] == len(data.docs)
    # pseudo-words are single Lucene terms, so the check is exact here
    assert stats["total_terms"] == sum(len(text.split()) for _, text in data.docs)

    queries = data.queries["test"]
    qrels = data.qrels["test"]
    expanded = {qid: data.truth["queries"][qid]["expansion"] for qid in queries}
    plain = _ndcg10(tmp_path, tmp_path / "index", queries, qrels, "plain")
    with_synonyms = _ndcg10(tmp_path, tmp_path / "index", expanded, qrels, "expanded")
    assert 0.15 < plain < 0.6, "BM25 should be neither trivial nor hopeless"
    assert with_synonyms > plain + 0.1, (plain, with_synonyms)


def test_search_writes_a_sorted_tagged_run(tmp_path):
    docs = [("d1", "apple banana"), ("d2", "apple apple cherry"), ("d3", "durian"), ("d4", "")]
    formats.write_collection(tmp_path / "c.tsv", docs)
    stats = build_index(tmp_path / "c.tsv", tmp_path / "idx", threads=1, timing_path=tmp_path / "t.json")
    assert stats["documents"] == 3  # the empty document is not indexed (Anserini skips it)
    assert set(json.loads((tmp_path / "t.json").read_text())) == {"anserini_s", "pipeline_s", "total_s"}
    formats.write_queries(tmp_path / "q.tsv", {"q1": "apple", "q2": "durian banana"})
    for model, params in (("bm25", {"k1": 0.9, "b": 0.4}), ("ql", {"mu": 1000})):
        search(tmp_path / "idx", tmp_path / "q.tsv", tmp_path / f"{model}.run", model=model, params=params, hits=10)
        run = formats.read_run(tmp_path / f"{model}.run")
        assert [d for d, _ in run["q1"]][0] == "d2"  # more apples
        assert {d for d, _ in run["q2"]} == {"d1", "d3"}
        assert (tmp_path / f"{model}.run").read_text().split("\n")[0].endswith(f" {model}")


def test_index_check_fails_loudly_and_leaves_nothing(tmp_path):
    formats.write_collection(tmp_path / "c.tsv", [("d1", "apple banana"), ("d2", "cherry")])
    with pytest.raises(AnseriniError, match="documents = 2, expected 5"):
        build_index(tmp_path / "c.tsv", tmp_path / "idx", expected_stats={"documents": 5})
    assert not (tmp_path / "idx").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["c.tsv"]


def test_search_errors_are_clear(tmp_path):
    with pytest.raises(Exception, match="Lucene index directory"):
        search(tmp_path / "nope", tmp_path / "q.tsv", tmp_path / "r.run", model="bm25", params={})
    (tmp_path / "idx").mkdir()
    with pytest.raises(Exception, match="unknown parameter"):
        search(tmp_path / "idx", tmp_path / "q.tsv", tmp_path / "r.run", model="ql", params={"k1": 1})


def test_a_damaged_index_is_a_one_line_error_naming_it(tmp_path):
    """An index cut short, emptied, or without its segments file (issue 43): Lucene's exception in one line."""
    formats.write_collection(tmp_path / "c.tsv", [("d1", "apple banana"), ("d2", "apple apple cherry")])
    build_index(tmp_path / "c.tsv", tmp_path / "idx", threads=1)
    formats.write_queries(tmp_path / "q.tsv", {"q1": "apple"})
    for how in ("cut short", "emptied", "no segments file"):
        index = Path(shutil.copytree(tmp_path / "idx", tmp_path / how))
        for path in index.iterdir():
            if how == "cut short" and path.suffix == ".si":
                path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
            elif how == "emptied" or (how == "no segments file" and path.name.startswith("segments")):
                path.unlink() if how == "no segments file" else path.write_bytes(b"")
        with pytest.raises(StudyError) as error:
            search(index, tmp_path / "q.tsv", tmp_path / "r.run", model="bm25", params={})
        assert str(error.value).startswith(f"{index}: not a readable Lucene index (") and "\n" not in str(error.value)
        assert not (tmp_path / "r.run").exists()


def test_term_estimate_matches_lucene_on_tricky_text(tmp_path):
    texts = ["The cat and THE dog", "U.S.A. isn't e-mail, 3.5 km", "Müller's café: naïve_test 42nd", "to be or not to be"]
    formats.write_collection(tmp_path / "c.tsv", [(f"d{i}", t) for i, t in enumerate(texts)])
    stats = build_index(tmp_path / "c.tsv", tmp_path / "idx", terms_tolerance=0.0)
    assert stats["total_terms"] == sum(estimate_terms(t) for t in texts)
    assert estimate_terms("The cat and THE dog") == 2  # stop words removed, case folded
