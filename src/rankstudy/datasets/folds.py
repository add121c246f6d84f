"""Query folds: one judged query set split into k folds, each fold a dataset of its own for cross-validation.

A dataset with one set of judged queries (e.g. TREC DL 2020's 54 passage queries, config
``datasets.<name>.folds``) cannot give a model queries to train on that it is not tested on. Its judged
queries are dealt into ``k`` folds (seeded); fold ``i`` is the dataset ``<name>-fold<i>`` whose

* ``test`` split is fold i (the queries it re-ranks),
* ``dev`` split is the next fold, i + 1 mod k (validation and early stopping),
* ``train`` split is the other k - 2 folds,

so a model trains on k - 1 folds, one of them held out from the gradient for validation, and every query
is re-ranked exactly once, by the model of the fold that held it out (the cross-validation of Robust04
studies). The folds' test runs are merged into one run of the whole split (``rankstudy.runs.merge_disjoint``).

The queries, their text and judgments come from the source dataset's split. Only the train split's
judgments are restricted to documents of the collection, since a training positive must have text; dev and
test keep every judgment (a pool's full judgments: nDCG's ideal ranking and recall need them).
"""

from __future__ import annotations

import logging
import os
from typing import Iterable, Sequence

import numpy as np

from rankstudy.atomic import atomic_path
from rankstudy.errors import StudyError
from rankstudy.formats import Qrels, iter_collection, read_qrels, read_queries, write_qrels, write_queries

log = logging.getLogger(__name__)

ROLES = ("train", "dev", "test")
MIN_FOLDS = 3  # a test fold, a dev fold and at least one fold to train on


def assign_folds(qids: Iterable[str], k: int, seed: int) -> list[list[str]]:
    """The queries dealt into ``k`` folds of sizes differing by at most one: sorted, shuffled with ``seed``,
    then dealt in turn; each fold sorted. The same ids, k and seed give the same folds in any input order."""
    ids = sorted(set(qids))
    if k < MIN_FOLDS:
        raise StudyError(f"folds: k must be at least {MIN_FOLDS} (a test, a dev and a training fold), got {k}")
    if len(ids) < k:
        raise StudyError(f"folds: {len(ids)} judged queries cannot fill {k} folds")
    order = np.random.default_rng(seed).permutation(len(ids))
    return [sorted(ids[j] for j in order[i::k]) for i in range(k)]


def fold_roles(k: int, fold: int) -> dict[str, list[int]]:
    """The folds (0-based) of each split of fold dataset ``fold``: test = itself, dev = the next one, train =
    the rest."""
    if not 0 <= fold < k:
        raise StudyError(f"folds: fold {fold} is not one of 0..{k - 1}")
    dev = (fold + 1) % k
    return {"train": [i for i in range(k) if i not in (fold, dev)], "dev": [dev], "test": [fold]}


def fold_splits(folds: Sequence[Sequence[str]], fold: int) -> dict[str, list[str]]:
    """The query ids of each split (train, dev, test) of fold dataset ``fold``."""
    roles = fold_roles(len(folds), fold)
    return {role: sorted(qid for i in indices for qid in folds[i]) for role, indices in roles.items()}


def _subset(qrels: Qrels, qids: Iterable[str], docids: set[str] | None = None) -> Qrels:
    """The judgments of ``qids``, only of documents in ``docids`` where it is given; queries left empty drop."""
    chosen = {qid: {d: g for d, g in qrels[qid].items() if docids is None or d in docids} for qid in qids}
    return {qid: judged for qid, judged in chosen.items() if judged}


def export_folds(queries_path: str | os.PathLike, qrels_path: str | os.PathLike,
                 collection_path: str | os.PathLike, k: int, seed: int, outs: Sequence[str | os.PathLike]) -> None:
    """Write the ``k`` fold datasets of one split (its queries and qrels files) into ``outs`` (one directory per
    fold, in order): ``queries.{train,dev,test}.tsv`` and ``qrels.{train,dev,test}.txt`` each."""
    if len(outs) != k:
        raise StudyError(f"folds: {k} folds need {k} output directories, got {len(outs)}")
    queries, qrels = read_queries(queries_path), read_qrels(qrels_path)
    judged = [qid for qid in queries if qid in qrels]
    if len(judged) < len(queries):
        log.warning("%s: %d of %d queries have no judgments and are in no fold", queries_path,
                    len(queries) - len(judged), len(queries))
    docids = {docid for docid, _ in iter_collection(collection_path)}
    folds = assign_folds(judged, k, seed)
    for fold, out in enumerate(outs):
        splits = fold_splits(folds, fold)
        with atomic_path(out, directory=True) as tmp:
            for role, qids in splits.items():
                write_queries(tmp / f"queries.{role}.tsv", {qid: queries[qid] for qid in qids})
                write_qrels(tmp / f"qrels.{role}.txt", _subset(qrels, qids, docids if role == "train" else None))
        log.info("fold %d of %d -> %s: %s", fold + 1, k, out,
                 ", ".join(f"{role} {len(qids)} queries" for role, qids in splits.items()))
    without_text = sum(docid not in docids for qid in judged for docid in qrels[qid])
    if without_text:
        log.info("%d judgments are of documents without text: kept in dev and test, left out of train", without_text)
