"""Query folds (rankstudy.datasets.folds): every judged query tested exactly once and never trained or validated
on in its own fold, the same folds from the same seed, and the fold datasets written from a split."""

from __future__ import annotations

import pytest

from rankstudy.datasets.folds import assign_folds, export_folds, fold_roles, fold_splits
from rankstudy.errors import StudyError
from rankstudy.formats import read_qrels, read_queries

QIDS = [f"q{i}" for i in range(23)]


@pytest.mark.parametrize("k", [3, 5, 7])
def test_every_query_is_tested_exactly_once_and_never_trained_on(k):
    folds = assign_folds(QIDS, k, seed=1)
    tested = []
    for fold in range(k):
        splits = fold_splits(folds, fold)
        assert set(splits["test"]).isdisjoint(splits["train"]) and set(splits["test"]).isdisjoint(splits["dev"])
        assert set(splits["dev"]).isdisjoint(splits["train"])
        assert sorted(splits["train"] + splits["dev"] + splits["test"]) == sorted(QIDS)  # k - 1 folds learn
        tested += splits["test"]
    assert sorted(tested) == sorted(QIDS)  # the union of the held-out folds is the whole set, once each
    assert max(map(len, folds)) - min(map(len, folds)) <= 1


def test_folds_depend_on_the_seed_only():
    folds = assign_folds(QIDS, 5, seed=7)
    assert assign_folds(reversed(QIDS), 5, seed=7) == folds  # not on the input order
    assert assign_folds(QIDS, 5, seed=8) != folds
    assert all(fold == sorted(fold) for fold in folds)


def test_each_fold_validates_on_the_next():
    assert fold_roles(5, 0) == {"train": [2, 3, 4], "dev": [1], "test": [0]}
    assert fold_roles(5, 4) == {"train": [1, 2, 3], "dev": [0], "test": [4]}
    assert fold_roles(3, 1) == {"train": [0], "dev": [2], "test": [1]}


@pytest.mark.parametrize("qids, k, message", [
    (QIDS, 2, "k must be at least 3"),
    (QIDS[:4], 5, "4 judged queries cannot fill 5 folds"),
])
def test_impossible_folds_are_refused(qids, k, message):
    with pytest.raises(StudyError, match=message):
        assign_folds(qids, k, seed=1)
    with pytest.raises(StudyError, match="fold 3 is not one of 0..2"):
        fold_roles(3, 3)


def test_fold_datasets_hold_the_judged_queries_and_train_on_documents_with_text(tmp_path):
    (tmp_path / "queries.tsv").write_text("".join(f"q{i}\tquery {i}\n" for i in range(7)))
    # q6 is not judged; every query has a judgment of d_out, a document without text
    (tmp_path / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 2\nq{i} 0 d_out 1\n" for i in range(6)))
    (tmp_path / "collection.tsv").write_text("".join(f"d{i}\ttext {i}\n" for i in range(6)))
    outs = [tmp_path / f"fold{i}" for i in range(1, 4)]
    export_folds(tmp_path / "queries.tsv", tmp_path / "qrels.txt", tmp_path / "collection.tsv", 3, 42, outs)
    tested = []
    for out in outs:
        queries = {role: read_queries(out / f"queries.{role}.tsv") for role in ("train", "dev", "test")}
        qrels = {role: read_qrels(out / f"qrels.{role}.txt") for role in ("train", "dev", "test")}
        assert sum(len(q) for q in queries.values()) == 6 and "q6" not in str(queries)
        assert all(text == f"query {qid[1:]}" for qid, text in queries["test"].items())  # the source's text
        assert set(qrels["test"]) == set(queries["test"]) and set(qrels["dev"]) == set(queries["dev"])
        assert all("d_out" in judged for judged in qrels["test"].values())  # dev and test keep every judgment
        assert all("d_out" in judged for judged in qrels["dev"].values())
        assert not any("d_out" in judged for judged in qrels["train"].values())  # a positive needs text
        tested += list(queries["test"])
    assert sorted(tested) == [f"q{i}" for i in range(6)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["collection.tsv", "fold1", "fold2", "fold3", "qrels.txt",
                                                          "queries.tsv"]  # no temporary left over
