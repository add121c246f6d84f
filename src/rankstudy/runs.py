"""Operations on runs that need no model: re-ranking to a depth and tuning it, score ensembles, the best
seed by validation, a given run's lists of a split's queries, cross-validation folds merged. Kept apart from
``rankstudy.rerank`` so that the workflow's many small jobs (apply-depth, tune-depth, ensemble, select-seed) do
not import torch."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from rankstudy.errors import StudyError
from rankstudy.evaluate import aggregate, evaluate_run
from rankstudy.formats import Qrels, Run

log = logging.getLogger(__name__)


def ranked(ranking: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Sorted by score, descending; ties keep their order."""
    return sorted(ranking, key=lambda item: -item[1])


def rerank_to_depth(first_stage_run: Mapping[str, Sequence[tuple[str, float]]],
                    neural_run: Mapping[str, Sequence[tuple[str, float]]], depth: int) -> Run:
    """Each query's top ``depth`` first-stage candidates by neural score, then the rest in
    first-stage order, scored ``min(neural) - 1, min(neural) - 2, ...`` so a score sort keeps
    this order. Every re-ranked candidate needs a neural score."""
    if depth < 0:
        raise StudyError(f"depth must be >= 0, got {depth}")
    result: Run = {}
    for qid, ranking in first_stage_run.items():
        ranking = ranked(ranking)
        neural = dict(neural_run.get(qid, ()))
        head = []
        for docid, _ in ranking[:depth]:
            if docid not in neural:
                raise StudyError(f"query {qid}: candidate {docid} (top {depth}) has no neural score")
            head.append((docid, neural[docid]))
        head = ranked(head)
        floor = min((score for _, score in head), default=0.0)
        tail = [(docid, floor - i) for i, (docid, _) in enumerate(ranking[depth:], start=1)]
        result[qid] = head + tail
    return result


def tune_depth(first_stage_run: Mapping[str, Sequence[tuple[str, float]]],
               neural_run: Mapping[str, Sequence[tuple[str, float]]], qrels: Qrels, depths: Iterable[int],
               measure: str, rel_threshold: int = 1) -> tuple[int, pd.DataFrame]:
    """Mean ``measure`` of ``rerank_to_depth`` for each depth; the best depth (ties: the smallest)."""
    depths = sorted(set(depths))
    if not depths:
        raise StudyError("no depths to evaluate")
    judged = {qid: ranking for qid, ranking in first_stage_run.items() if qid in qrels}
    values = []
    for depth in depths:
        per_query = evaluate_run(rerank_to_depth(judged, neural_run, depth), qrels, [measure], rel_threshold)
        values.append(float(aggregate(per_query)["value"].iloc[0]) if len(per_query) else 0.0)
    table = pd.DataFrame({"depth": depths, "value": values})
    best = depths[max(range(len(depths)), key=lambda i: (values[i], -i))]
    log.info("best re-ranking depth for %s: %d (%.4f)", measure, best, max(values))
    return best, table


def best_validated(logs: Sequence[pd.DataFrame], names: Sequence[str]) -> int:
    """Index of the training log (``step``, ``metric`` per validation) whose validation metric peaked highest;
    ties go to the first. The TK notebook submits the best validation run of several initialisations."""
    best = []
    for frame, name in zip(logs, names, strict=True):
        metric = frame.loc[frame["step"] > 0, "metric"].dropna()  # step 0: the untrained model
        if metric.empty:
            raise StudyError(f"{name}: no validation metric in the training log")
        best.append(float(metric.max()))
    chosen = int(np.argmax(best))
    log.info("best validation metric per seed: %s -> %s", ", ".join(f"{value:.4f}" for value in best), names[chosen])
    return chosen


def split_lists(run: Mapping[str, Sequence[tuple[str, float]]], qids: Iterable[str], hits: int) -> Run:
    """The top ``hits`` of each query of ``qids`` in a given run (a local folder's candidates, a fold's share of its
    dataset's run); a query the run does not rank keeps an empty list (logged), none ranked is an error."""
    result: Run = {qid: ranked(run.get(qid, ()))[:hits] for qid in qids}
    missing = sorted(qid for qid, ranking in result.items() if not ranking)
    if result and len(missing) == len(result):
        raise StudyError(f"the run ranks none of the split's {len(result)} queries")
    if missing:
        log.warning("%d of %d queries have no candidates (e.g. %s)", len(missing), len(result), missing[0])
    return result


def merge_disjoint(parts: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """One mapping qid -> value from parts with disjoint query ids (cross-validation folds' test runs or
    qrels, named by ``names`` in errors)."""
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for part, name in zip(parts, names, strict=True):
        for qid, value in part.items():
            if qid in merged:
                raise StudyError(f"{name}: query {qid!r} is also in {owner[qid]}: folds must not share queries")
            merged[qid], owner[qid] = value, name
    return merged


def ensemble(runs: Sequence[Mapping[str, Sequence[tuple[str, float]]]]) -> Run:
    """Average each (qid, docid)'s score over ``runs``; every run must hold the same pairs."""
    if not runs:
        raise StudyError("no runs to ensemble")
    first = runs[0]
    result: Run = {}
    for index, run in enumerate(runs[1:], start=1):
        if set(run) != set(first):
            raise StudyError(f"run {index} has other queries than run 0: "
                             f"{sorted(set(run) ^ set(first))[:5]}")
    for qid, ranking in first.items():
        totals = dict(ranking)
        for index, run in enumerate(runs[1:], start=1):
            scores = dict(run[qid])
            if set(scores) != set(totals):
                missing = sorted(set(scores) ^ set(totals))[:5]
                raise StudyError(f"query {qid}: runs 0 and {index} differ in documents {missing}")
            for docid, score in scores.items():
                totals[docid] += score
        result[qid] = ranked((docid, total / len(runs)) for docid, total in totals.items())
    return result

