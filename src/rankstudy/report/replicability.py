"""How closely a trained run's seeds agree with each other, topic by topic: the per-topic replicability measures of
Breuer et al., "How to Measure the Reproducibility of System-oriented IR Experiments" (SIGIR 2020), as their
repro_eval package computes them, with the run of the first seed as the "original" and each other seed's as a
"replication":

* KTU, Kendall's τ Union: Kendall's τ between the two rankings of a topic over the union of their documents, the
  mean over topics (1: the same order);
* RBO, rank-biased overlap (p 0.95, depth 1000, repro_eval's defaults), the mean over topics (1: the same
  ranking);
* RMSE of each measure's per-topic values (0: every topic scores the same).

repro_eval's KTU, RBO and RMSE are used as they are; this module reads the study's run and metric files into
their format (a run is {topic: {document: score}} in rank order; scores {topic: {measure: value}}).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import pandas as pd

from rankstudy.errors import StudyError
from rankstudy.evaluate import ALL, read_metrics
from rankstudy.formats import read_run

with warnings.catch_warnings():  # repro_eval imports scipy.stats.stats, deprecated by scipy
    warnings.simplefilter("ignore", DeprecationWarning)
    from repro_eval import RBO_DEPTH, RBO_P
    from repro_eval.measure.document_order import KTU, RBO
    from repro_eval.measure.effectiveness import RMSE

KEYS = ["run", "dataset", "split", "original seed", "other seed", "queries", "KTU", "RBO"]


def _ranking(path) -> dict[str, dict[str, float]]:
    """A run file as repro_eval reads one: per topic, documents by descending score (repro_eval breaks ties)."""
    return {qid: dict(ranking) for qid, ranking in read_run(path).items()}


def _per_topic(path) -> dict[str, dict[str, float]]:
    frame = read_metrics([path])
    frame = frame[frame["qid"] != ALL]
    return {qid: dict(zip(part["measure"], part["value"])) for qid, part in frame.groupby("qid", sort=False)}


def seed_agreement(groups: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (run, dataset, split, other seed) of ``groups`` (each: run, dataset, split, and seeds: a list of
    {seed, run: run file, metrics: metric file}, the first the original; StudyPlan.seed_groups): the topics both
    seeds ranked, KTU, RBO and one "RMSE MEASURE" column per measure of the metric files."""
    rows = []
    for group in groups:
        original, *others = group["seeds"]
        original_seed = original["seed"]
        original_run, original_scores = _ranking(original["run"]), _per_topic(original["metrics"])
        for files in others:
            seed = files["seed"]
            run, scores = _ranking(files["run"]), _per_topic(files["metrics"])
            topics = sorted(set(original_run) & set(run))
            judged = sorted(set(original_scores) & set(scores))
            if not topics or not judged:
                raise StudyError(f"{files['run']}: no topic in common with {original['run']} (seeds {original_seed} "
                                 f"and {seed} of run {group['run']})")
            first = {qid: original_run[qid] for qid in topics}
            other = {qid: run[qid] for qid in topics}
            row = {"run": group["run"], "dataset": group["dataset"], "split": group["split"],
                   "original seed": original_seed, "other seed": seed, "queries": len(topics),
                   "KTU": KTU(first, other),
                   "RBO": RBO(first, other, p=RBO_P, depth=RBO_DEPTH, pbar=False, per_topic=False)}
            errors = RMSE({qid: original_scores[qid] for qid in judged}, {qid: scores[qid] for qid in judged})
            row.update({f"RMSE {measure}": value for measure, value in errors.items()})
            rows.append(row)
    return pd.DataFrame(rows, columns=KEYS + sorted({k for row in rows for k in row} - set(KEYS), key=str))


def seed_agreement_markdown(table: pd.DataFrame) -> str:
    """The report's section on the seeds' agreement."""
    text = ("\n## Across seeds: how closely a run's seeds agree, topic by topic\n\nFor every trained run with "
            "several seeds, the first seed's run against each other seed's on the test queries (Breuer et al., SIGIR "
            "2020, computed by repro_eval): KTU, Kendall's τ over the union of each topic's two rankings; RBO, "
            f"rank-biased overlap (p {RBO_P}, depth {RBO_DEPTH}); RMSE, of each measure's per-topic values. KTU and "
            "RBO 1 and RMSE 0: the seeds rank and score every topic alike.\n\n")
    if table.empty:
        return text + "No run of this config is trained with several seeds.\n"
    return text + table.to_markdown(index=False, floatfmt=".3f") + "\n"
