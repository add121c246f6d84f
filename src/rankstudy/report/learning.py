"""The learning audit (issue 41): did every trained run learn, and does it beat the first stage where it can?

One row per trained run and seed, on the test split of the dataset it trained on (a run trained on a dataset it is
not evaluated on, e.g. MS MARCO's training queries: on each dataset it is evaluated on):

* its learning curve in two numbers — the untrained model's validation value (``log.csv``'s step 0) and the
  best validation value of the trained states, with its step (a best no higher than the untrained value:
  training never improved on the initialisation);
* its test measure beside the first stage's (the candidates it re-ranks), on all test queries and on the
  queries it *can read*: those with a relevant document whose evidence starts before the length the run
  reads (synthetic datasets, ``truth.json``; elsewhere every query), each with the paired Wilcoxon p;
* flags: ``never improved`` (best validation <= initial), ``below first stage`` (lower on the readable
  queries with p < 0.05);
* on synthetic data, its word vectors and the share of concept forms with a synonym among their 10 nearest
  words (report/synonyms.py): what a model on frozen vectors can know of the synonymy.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from rankstudy.evaluate import read_metrics
from rankstudy.report.claims import evidence_queries
from rankstudy.report.curves import read_log
from rankstudy.report.synonyms import NEIGHBOURS, synonyms_in_neighbours
from rankstudy.report.tables import metric_rows, per_query_values, write_table
from rankstudy.significance import wilcoxon_p

ALPHA = 0.05
NEVER_IMPROVED, BELOW = "never improved", "below first stage"
CAPTION = ("Learning audit: every trained run and seed on the test split of the dataset it trained on (else of each "
           "dataset it is evaluated on). initial / best "
           "validation: its validation measure untrained (step 0) and at its best (step). {measure} against the "
           "first stage it re-ranks, on all test queries and on those it can read (a relevant document's evidence "
           "starts within the tokens it reads: the synthetic data's truth.json; elsewhere every query); p: paired "
           "Wilcoxon. flags: never improved (best validation <= initial), below first stage (on the readable queries, "
           "p < 0.05). synonyms in {k} NN: the share of the synthetic language's concept forms whose {k} nearest "
           "words in the run's word vectors hold a synonym.")
SYNONYMS = f"synonyms in {NEIGHBOURS} NN"


def _mean(values: Mapping[str, float]) -> float:
    return sum(values.values()) / len(values) if values else math.nan


def audit_row(entry: Mapping[str, Any], measure: str) -> dict[str, Any]:
    """``entry``: run, seed, dataset, system, first_stage (system), log, metrics, first_stage_metrics,
    qrels, truth (None: every query is readable), length (the tokens the run reads)."""
    log = read_log(entry["log"]).dropna(subset=["metric"])
    metrics = read_metrics([entry["metrics"], entry["first_stage_metrics"]])
    model = per_query_values(metric_rows(metrics, entry["dataset"], entry["system"], "test"), measure)
    first_stage = per_query_values(metric_rows(metrics, entry["dataset"], entry["first_stage"], "test"), measure)
    queries = sorted(first_stage)
    readable = (sorted(evidence_queries(entry["qrels"], entry["truth"], entry["length"], late=False)
                       & set(queries)) if entry.get("truth") else queries)
    trained = log[log["step"] > 0]
    row: dict[str, Any] = {"run": entry["run"], "seed": entry["seed"], "dataset": entry["dataset"],
                           "validations": len(trained),
                           # a log without step 0 (written before it was logged): its first validation
                           "initial validation": float(log["metric"].iloc[0]) if len(log) else math.nan}
    if len(trained):
        best = trained["metric"].idxmax()
        row.update({"best validation": float(trained["metric"][best]), "best step": int(trained["step"][best])})
    else:
        row.update({"best validation": math.nan, "best step": None})
    for subset, chosen in (("all", queries), ("readable", readable)):
        # a query the run left out scores 0
        a, b = {q: model.get(q, 0.0) for q in chosen}, {q: first_stage[q] for q in chosen}
        row.update({f"{subset} queries": len(chosen), f"{subset} {measure}": _mean(a),
                    f"{subset} first stage": _mean(b), f"{subset} p": wilcoxon_p(a, b) if chosen else math.nan})
    flags = []
    if len(trained) and not row["best validation"] > row["initial validation"]:
        flags.append(NEVER_IMPROVED)
    if row[f"readable {measure}"] < row["readable first stage"] and row["readable p"] < ALPHA:
        flags.append(BELOW)
    row["flags"] = ", ".join(flags)
    return row


def learning_audit(entries: Sequence[Mapping[str, Any]], measure: str, out_prefix: str | os.PathLike) -> pd.DataFrame:
    """The audit of every entry; writes PREFIX.{csv,md,tex}. An entry's ``vectors`` (name, vocab, embeddings; or
    None) with its ``truth`` add the synonym probe, once per set of vectors."""
    probes: dict[str, float] = {}
    rows = []
    for entry in entries:
        row, vectors = audit_row(entry, measure), entry.get("vectors")
        if vectors and entry.get("truth"):
            name = vectors["name"]
            if name not in probes:
                probes[name] = synonyms_in_neighbours(vectors["vocab"], vectors["embeddings"], entry["truth"])
            row.update({"vectors": name, SYNONYMS: probes[name]})
        rows.append(row)
    table = pd.DataFrame(rows)
    write_table(table, Path(out_prefix), CAPTION.format(measure=measure, k=NEIGHBOURS))
    return table
