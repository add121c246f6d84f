"""Evaluate runs with ir_measures (never hand-rolled metrics); per-query values in long format.

Conventions, those of ``trec_eval -c``:

* The evaluated queries are those of the qrels with at least one judgment; a query judged
  only non-relevant counts, with value 0. A judged query missing from the run scores 0 on
  every measure; run queries without judgments are ignored. The mean of the per-query
  rows therefore equals trec_eval -c's "all".
* Measures with a ``rel`` parameter (AP, P, RR, R, ...) count grades >= ``rel_threshold``
  as relevant unless the measure string sets ``rel`` itself (``AP@100`` with threshold 2
  becomes ``AP(rel=2)@100``); graded measures (nDCG) use the grades as gains.
* Documents are ranked by score, ties broken by docid descending, as trec_eval does, for
  every measure: ir_measures' providers disagree on ties (its msmarco provider, used for
  RR@k, breaks them ascending), so they are given tie-free rank-derived scores. The rank
  column of a run file is ignored.
"""

from __future__ import annotations

import logging
import os
from typing import Iterable, Mapping, Sequence

import ir_measures
import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.formats import read_qrels, read_run

log = logging.getLogger(__name__)

COLUMNS = ["dataset", "system", "split", "measure", "qid", "value"]
ALL = "all"  # the qid of the mean rows in metric CSVs


def parse_measures(measures: Sequence[str], rel_threshold: int = 1) -> dict[str, object]:
    """Map each configured measure string to its ir_measures measure, ``rel`` filled in."""
    if not measures:
        raise StudyError("no measures to evaluate")
    if rel_threshold < 1:
        raise StudyError(f"the relevance threshold must be at least 1, got {rel_threshold}")
    parsed: dict[str, object] = {}
    for name in measures:
        if name in parsed:
            raise StudyError(f"measure {name!r} is listed twice")
        try:
            measure = ir_measures.parse_measure(name)
        except Exception as error:  # ir_measures raises NameError, ValueError, AssertionError
            raise StudyError(f"unknown measure {name!r}: {error}") from None
        if "rel" in measure.SUPPORTED_PARAMS and "rel" not in measure.params:
            measure = measure(rel=rel_threshold)
        parsed[name] = measure
    return parsed


def _tie_free(ranking: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Scores n, n-1, ..., 1 in trec_eval's order: score descending, then docid descending."""
    ordered = sorted(ranking, key=lambda item: (item[1], item[0]), reverse=True)
    return {docid: float(len(ordered) - i) for i, (docid, _) in enumerate(ordered)}


def evaluate_run(
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Sequence[str],
    rel_threshold: int = 1,
) -> pd.DataFrame:
    """Per-query values: columns ``measure, qid, value``, sorted by measure order then qid."""
    parsed = parse_measures(measures, rel_threshold)
    judged = {qid: dict(docs) for qid, docs in qrels.items() if docs}
    ranked = {qid: _tie_free(run[qid]) for qid in judged if qid in run}
    if judged and not ranked:
        log.warning("the run has none of the %d judged queries: every value is 0", len(judged))
    elif len(ranked) < len(judged):
        log.info("%d of %d judged queries are missing from the run (value 0)", len(judged) - len(ranked), len(judged))
    values = {}
    if judged:
        try:
            for metric in ir_measures.iter_calc(list(dict.fromkeys(parsed.values())), judged, ranked):
                values[metric.measure, metric.query_id] = float(metric.value)
        except (ValueError, AssertionError) as error:
            raise StudyError(f"ir_measures cannot compute {', '.join(measures)}: {error}") from None
    rows = [(name, qid, values.get((measure, qid), 0.0)) for name, measure in parsed.items() for qid in sorted(judged)]
    return pd.DataFrame(rows, columns=["measure", "qid", "value"])


def aggregate(per_query: pd.DataFrame) -> pd.DataFrame:
    """Mean over queries per measure (columns ``measure, value``, measure order kept)."""
    return per_query.groupby("measure", sort=False, as_index=False)["value"].mean()


def evaluate_to_csv(
    run_path: str | os.PathLike,
    qrels_path: str | os.PathLike,
    out_path: str | os.PathLike,
    measures: Sequence[str],
    rel_threshold: int,
    dataset: str,
    system: str,
    split: str,
) -> pd.DataFrame:
    """Evaluate a run file into a long CSV (``COLUMNS``): per-query rows, then ``qid == "all"`` means."""
    qrels = read_qrels(qrels_path)
    run = read_run(run_path)
    if ALL in qrels:
        raise StudyError(f"{qrels_path}: query id {ALL!r} is reserved for the mean rows")
    per_query = evaluate_run(run, qrels, measures, rel_threshold)
    if per_query.empty:
        raise StudyError(f"{qrels_path}: no judged queries to evaluate")
    means = aggregate(per_query)
    table = pd.concat([per_query, means.assign(qid=ALL)], ignore_index=True)
    table = table.assign(dataset=dataset, system=system, split=split)[COLUMNS]
    with atomic_open(out_path) as out:
        table.to_csv(out, index=False)
    summary = ", ".join(f"{m}={v:.4f}" for m, v in zip(means["measure"], means["value"]))
    log.info("%s %s %s (%d queries): %s", dataset, split, system, per_query["qid"].nunique(), summary)
    return table


def read_metrics(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Concatenate metric CSVs written by ``evaluate_to_csv`` (ids kept as strings)."""
    frames = []
    for path in paths:
        try:
            frame = pd.read_csv(path, dtype={c: str for c in COLUMNS[:-1]}, keep_default_na=False)
        except (OSError, ValueError) as error:  # pandas' parser errors are ValueErrors
            raise StudyError(f"{path}: cannot read metrics CSV: {error}") from None
        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            raise StudyError(f"{path}: not a metrics CSV, missing column(s) {', '.join(missing)}")
        try:
            frame["value"] = pd.to_numeric(frame["value"])
        except ValueError as error:
            raise StudyError(f"{path}: non-numeric value: {error}") from None
        frames.append(frame[COLUMNS])
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    return pd.concat(frames, ignore_index=True)
