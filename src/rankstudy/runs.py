"""Operations on runs that need no model: re-ranking to a depth and tuning it, score ensembles, the best
seed by validation, a given run's lists of a split's queries, cross-validation folds merged. Kept apart from
``rankstudy.rerank`` so that the workflow's many small jobs (apply-depth, tune-depth, ensemble, select-seed) do
not import torch."""

from __future__ import annotations

import bisect
import logging
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from rankstudy.errors import StudyError
from rankstudy.evaluate import aggregate, evaluate_run, parse_measures
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
    """Mean ``measure`` of ``rerank_to_depth`` for each depth; the best depth (ties: the smallest).

    A measure with a cutoff k (RR@10, nDCG@10) sees a ranking's top k only, and a query's top k changes at few
    depths (where a candidate enters its k best): each distinct top k is evaluated once, in one ir_measures call,
    instead of every query at every depth (the TK notebook's 1,000 depths on MS MARCO's 6,980 dev queries: ~16 s
    a depth, hours a run). Either way the means are those of evaluating ``rerank_to_depth``'s run at each depth."""
    depths = sorted(set(depths))
    if not depths:
        raise StudyError("no depths to evaluate")
    if depths[0] < 0:
        raise StudyError(f"depth must be >= 0, got {depths[0]}")
    judged = {qid: ranking for qid, ranking in first_stage_run.items() if qid in qrels}
    cutoff = parse_measures([measure], rel_threshold)[measure].params.get("cutoff")
    if cutoff is None:
        values = means_at_every_depth(judged, neural_run, qrels, depths, measure, rel_threshold)
    else:
        values = _means_at_cutoff(judged, neural_run, qrels, depths, measure, rel_threshold, cutoff)
    table = pd.DataFrame({"depth": depths, "value": values})
    best = depths[max(range(len(depths)), key=lambda i: (values[i], -i))]
    log.info("best re-ranking depth for %s: %d (%.4f)", measure, best, max(values))
    return best, table


def means_at_every_depth(judged: Mapping[str, Sequence[tuple[str, float]]],
                         neural_run: Mapping[str, Sequence[tuple[str, float]]], qrels: Qrels, depths: Sequence[int],
                         measure: str, rel_threshold: int = 1) -> list[float]:
    """``tune_depth``'s mean per depth the direct way: ``rerank_to_depth``'s whole run evaluated at each depth."""
    values = []
    for depth in depths:
        per_query = evaluate_run(rerank_to_depth(judged, neural_run, depth), qrels, [measure], rel_threshold)
        values.append(float(aggregate(per_query)["value"].iloc[0]) if len(per_query) else 0.0)
    return values


def _top_lists(qid: str, ranking: Sequence[tuple[str, float]], neural: Mapping[str, float], depths: Sequence[int],
               cutoff: int) -> tuple[list[list[str]], list[int]]:
    """The distinct top ``cutoff`` docids of ``rerank_to_depth``'s ranking of one query as evaluated (neural score,
    then docid, descending; then the first stage's rest), and for each of the ascending ``depths`` the index of
    its list."""
    ranking = ranked(ranking)
    best: list[tuple[float, str]] = []  # the re-ranked candidates' k best (neural score, docid), ascending
    lists: list[list[str]] = []
    at_depth: list[int] = []
    position, changed = 0, True
    for depth in depths:
        while position < min(depth, len(ranking)):
            docid = ranking[position][0]
            if docid not in neural:
                raise StudyError(f"query {qid}: candidate {docid} (top {depth}) has no neural score")
            key = (neural[docid], docid)
            if len(best) < cutoff or key > best[0]:
                bisect.insort(best, key)
                del best[:-cutoff]
                changed = True
            position += 1
        if changed:
            top = [docid for _, docid in reversed(best)]
            lists.append(top + [docid for docid, _ in ranking[position:position + cutoff - len(top)]])
            changed = False
        at_depth.append(len(lists) - 1)
    return lists, at_depth


def _means_at_cutoff(judged: Mapping[str, Sequence[tuple[str, float]]],
                     neural_run: Mapping[str, Sequence[tuple[str, float]]], qrels: Qrels, depths: Sequence[int],
                     measure: str, rel_threshold: int, cutoff: int) -> list[float]:
    """``tune_depth``'s mean per depth from each query's distinct top lists (``_top_lists``), evaluated as pseudo
    queries of one run; averaged as ``aggregate`` averages one depth's evaluation (queries in id order)."""
    evaluated = sorted(qid for qid, docs in qrels.items() if docs)  # as evaluate_run: a query without a list scores 0
    if not evaluated:
        return [0.0] * len(depths)
    pseudo_run: dict[str, list[tuple[str, float]]] = {}
    pseudo_qrels: dict[str, Mapping[str, int]] = {}
    columns = []
    for qid in evaluated:
        if qid not in judged:
            columns.append(np.full(len(depths), -1))  # the 0 appended below
            continue
        lists, at_depth = _top_lists(qid, judged[qid], dict(neural_run.get(qid, ())), depths, cutoff)
        first = len(pseudo_run)
        for offset, top in enumerate(lists):
            pseudo_run[str(first + offset)] = [(docid, float(len(top) - rank)) for rank, docid in enumerate(top)]
            pseudo_qrels[str(first + offset)] = qrels[qid]
        columns.append(first + np.asarray(at_depth))
    per_list = evaluate_run(pseudo_run, pseudo_qrels, [measure], rel_threshold)
    value_of = dict(zip(per_list["qid"], per_list["value"]))
    values = np.array([value_of[str(i)] for i in range(len(pseudo_run))] + [0.0])[np.stack(columns, axis=1)]
    frame = pd.DataFrame({"depth": np.repeat(depths, len(evaluated)), "value": values.ravel()})
    return frame.groupby("depth", sort=False)["value"].mean().tolist()


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

