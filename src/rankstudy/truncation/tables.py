"""Per-query metric tables for ranked-list truncation.

A query's ranking is truncated to its top N documents; its table C has one entry per cut
position: ``C[i-1]`` is the metric of the list cut after its i-th document (i = 1..N).
Labels are binary: ``y_j = 1`` when the j-th document's qrels grade is ``>= threshold``,
else 0 (unjudged documents count as non-relevant).

F1 (with ``rel_i = sum_{j<=i} y_j`` and R the recall base)::

    P_i = rel_i / i,   R_i = rel_i / R,   F1_i = 2 P_i R_i / (P_i + R_i) = 2 rel_i / (i + R)

and F1_i = 0 when P_i + R_i = 0 or R = 0. The recall base R is, by default
(``recall_base="qrels"``), the number of documents judged relevant (grade >= threshold) for
the query in the qrels, retrieved or not; with ``recall_base="top_n"`` it is the number of
relevant documents within the top N of the ranking (so F1 can reach 1 within the list).

Penalised DCG (the Choppy paper's DCG, which rewards stopping before non-relevant documents)::

    DCG_i = sum_{j<=i} y'_j / log2(j + 1),   y'_j = +1 if relevant, -1 otherwise

Lists shorter than N: a query with only L < N documents has L real table entries.
``pad_table`` extends the table to N entries by repeating its last value, because cutting
beyond the end of the list is the same as keeping the whole list; the scores are padded the
same way (with the last score), and ``lengths[q] = L`` records the real length so models can
mask padded positions. A query whose list is empty is an error naming the query.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import numpy as np

from rankstudy.config import is_int
from rankstudy.errors import StudyError
from rankstudy.truncation.methods import F1, METRICS

log = logging.getLogger(__name__)

RECALL_BASES = ("qrels", "top_n")


def relevance_labels(ranking: Sequence[tuple[str, float]], judged: Mapping[str, int], threshold: int,
                     n: int | None = None) -> np.ndarray:
    """Binary labels (int8) of the top ``n`` documents (all when ``n`` is None); unjudged = 0."""
    top = ranking if n is None else ranking[:n]
    return np.array([1 if docid in judged and judged[docid] >= threshold else 0 for docid, _ in top],
                    dtype=np.int8)


def _check_labels(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"expected a non-empty 1-d label array, got shape {labels.shape}")
    return labels


def f1_table(labels, total_relevant: int) -> np.ndarray:
    """F1_i = 2 rel_i / (i + R) for i = 1..len(labels), R = ``total_relevant`` (0 when R = 0).

    ``total_relevant`` is the recall base: the query's relevant documents in the qrels
    (``recall_base="qrels"``, the default of ``build_tables``) or within the top N
    (``recall_base="top_n"``, i.e. ``labels.sum()``); it may not be below ``labels.sum()``.
    """
    labels = _check_labels(labels)
    found = np.cumsum(labels, dtype=np.float64)
    if total_relevant < found[-1]:
        raise ValueError(f"total_relevant={total_relevant} is below the {int(found[-1])} relevant labels")
    if total_relevant == 0:
        return np.zeros(labels.size)
    positions = np.arange(1, labels.size + 1, dtype=np.float64)
    precision, recall = found / positions, found / total_relevant
    denominator = precision + recall
    return np.where(denominator > 0, 2 * precision * recall / np.where(denominator > 0, denominator, 1.0), 0.0)


def dcg_table(labels) -> np.ndarray:
    """Penalised DCG_i = sum_{j<=i} (+1 if relevant else -1) / log2(j + 1)."""
    labels = _check_labels(labels)
    gains = np.where(labels > 0, 1.0, -1.0)
    return np.cumsum(gains / np.log2(np.arange(2, labels.size + 2, dtype=np.float64)))


def pad_table(table, n: int) -> np.ndarray:
    """The first ``n`` entries of ``table``, padded to ``n`` with its last value."""
    table = np.asarray(table)
    if table.ndim != 1 or table.size == 0:
        raise ValueError(f"expected a non-empty 1-d table, got shape {table.shape}")
    if table.size >= n:
        return table[:n].copy()
    return np.concatenate([table, np.full(n - table.size, table[-1], dtype=table.dtype)])


def _recall_base(labels: np.ndarray, judged: Mapping[str, int], threshold: int, recall_base: str) -> int:
    if recall_base == "top_n":
        return int(labels.sum())
    return sum(1 for grade in judged.values() if grade >= threshold)


def _check_args(n: int, metric: str = F1, recall_base: str = "qrels") -> None:
    if not is_int(n) or n < 1:
        raise StudyError(f"truncation depth n must be a positive integer, got {n!r}")
    if metric not in METRICS:
        raise StudyError(f"unknown truncation metric {metric!r}; expected one of {', '.join(METRICS)}")
    if recall_base not in RECALL_BASES:
        raise StudyError(f"unknown recall_base {recall_base!r}; expected one of {', '.join(RECALL_BASES)}")


def _judged_qids(run: Mapping[str, Sequence], qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Queries of the run (in the run's order) that have at least one judgment; empty lists are errors."""
    qids, skipped = [], 0
    for qid, ranking in run.items():
        if not ranking:
            raise StudyError(f"query {qid}: the run has no documents for it; cannot build a truncation table")
        if qrels.get(qid):
            qids.append(qid)
        else:
            skipped += 1
    if skipped:
        log.info("truncation tables: skipped %d of %d run queries without judgments", skipped, len(run))
    if not qids:
        raise StudyError("no query of the run has judgments in the qrels")
    return qids


def build_tables(run: Mapping[str, Sequence[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]],
                 n: int, metric: str = F1, threshold: int = 1, recall_base: str = "qrels"):
    """Tables for the run's judged queries, in the run's order (rankings sorted by score, descending).

    Returns ``(qids, scores[Q, N] float32, tables[Q, N] float32, lengths[Q] int64)``: scores and
    tables are padded with their last value beyond each list's real length ``lengths[q]``.
    Queries without any judgment are skipped (and counted in a log line).
    """
    _check_args(n, metric, recall_base)
    qids = _judged_qids(run, qrels)
    scores = np.empty((len(qids), n), dtype=np.float32)
    tables = np.empty((len(qids), n), dtype=np.float32)
    lengths = np.empty(len(qids), dtype=np.int64)
    for row, qid in enumerate(qids):
        ranking, judged = run[qid], qrels[qid]
        labels = relevance_labels(ranking, judged, threshold, n)
        if metric == F1:
            table = f1_table(labels, _recall_base(labels, judged, threshold, recall_base))
        else:
            table = dcg_table(labels)
        lengths[row] = labels.size
        tables[row] = pad_table(table, n)
        scores[row] = pad_table(np.array([score for _, score in ranking[:n]], dtype=np.float64), n)
    return qids, scores, tables, lengths


def build_labels(run: Mapping[str, Sequence[tuple[str, float]]], qrels: Mapping[str, Mapping[str, int]],
                 qids: Sequence[str], n: int, threshold: int = 1) -> np.ndarray:
    """Labels[Q, N] (int8) of the top ``n`` of each query in ``qids``; padded positions are 0."""
    _check_args(n)
    labels = np.zeros((len(qids), n), dtype=np.int8)
    for row, qid in enumerate(qids):
        if not run.get(qid):
            raise StudyError(f"query {qid}: the run has no documents for it")
        top = relevance_labels(run[qid], qrels.get(qid, {}), threshold, n)
        labels[row, : top.size] = top
    return labels
