"""The TK paper's tables: Table 2 (runs x tasks) and Tables 3-4 (best and worst test queries)."""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import pandas as pd

from rankstudy.errors import StudyError
from rankstudy.evaluate import ALL, read_metrics
from rankstudy.formats import read_qrels, read_queries
from rankstudy.report.columns import SPEED_NOTE
from rankstudy.report.columns import TK_DEV_MEASURES as DEV_MEASURES, TK_TEST_MEASURES as TEST_MEASURES
from rankstudy.report.tables import docs_per_ms, mean_value, metric_rows, per_query_values, write_table
from rankstudy.significance import wilcoxon_p

TABLE2_CAPTION = (
    "TK paper Table 2 on {data}. {tasks} and re-rank task (all top-{depth} {first_stage} candidates). "
    "nDCG: over the whole ranking (the notebook's measure); AP: MAP. "
    "p: paired Wilcoxon signed-rank test of test re-rank nDCG@10 against {first_stage}. {speed}{scaled}"
)


def table2(metric_csvs: Sequence[str | os.PathLike], rows: Sequence[Mapping[str, Any]], out_prefix, depth: int,
           scaled: str = "", efficiency_csv=None, data: str = "") -> pd.DataFrame:
    """``rows``: dicts with run, model, dataset, rerank (system), full (system or None), baseline (system); the
    first stage's own row (rerank = baseline) names it in the caption and the p column (BM25 by default).
    ``data``: what the datasets are, in words (StudyPlan.data_description; default: their names)."""
    metrics = read_metrics(metric_csvs)
    first_stage = next((row["run"] for row in rows if row["rerank"] == row["baseline"]), "BM25")
    speed_column, speed = docs_per_ms(efficiency_csv) if efficiency_csv else (None, {})
    records = []
    for row in rows:
        dataset, rerank, full = row["dataset"], row["rerank"], row.get("full")
        record: dict[str, Any] = {"dataset": dataset, "run": row["run"]}
        # a dataset without a dev split (a test-only collection; query folds) has no dev columns
        dev = metrics[(metrics["dataset"] == dataset) & (metrics["system"] == rerank) & (metrics["split"] == "dev")]
        for measure in DEV_MEASURES:
            record[f"dev {measure}"] = mean_value(dev, measure) if len(dev) else None
        test = metric_rows(metrics, dataset, rerank, "test")
        for task, system in (("full", full), ("re-rank", rerank)):
            for measure in TEST_MEASURES:
                record[f"test {task} {measure}"] = (
                    mean_value(metric_rows(metrics, dataset, system, "test"), measure) if system else None)
        baseline = metric_rows(metrics, dataset, row["baseline"], "test")
        if speed:
            record[speed_column] = speed.get(row.get("model"))
        record[f"p vs {first_stage}"] = (None if rerank == row["baseline"] else
                               wilcoxon_p(per_query_values(test, "nDCG@10"), per_query_values(baseline, "nDCG@10")))
        records.append(record)
    table = pd.DataFrame.from_records(records)
    no_dev = [f"dev {measure}" for measure in DEV_MEASURES if table[f"dev {measure}"].isna().all()]
    table = table.drop(columns=no_dev)
    tasks = ("test: full task (first stage, then re-ranking to each run's fixed depth: no dev split to tune it on)"
             if no_dev else
             "dev: re-rank task; test: full task (first stage, then re-ranking to the depth tuned on dev)")
    data = data or " and ".join(dict.fromkeys(row["dataset"] for row in rows))
    write_table(table, out_prefix, TABLE2_CAPTION.format(data=data, tasks=tasks, depth=depth, scaled=scaled,
                                                         first_stage=first_stage,
                                                         speed=SPEED_NOTE if efficiency_csv else ""))
    return table


def best_worst_queries(metric_csvs: Sequence, queries_paths: Sequence, qrels_paths: Sequence, out_prefix,
                       count: int = 5, measure: str = "AP", first_table: int = 3) -> pd.DataFrame:
    """TK paper Tables 3-4: the ``count`` best and worst test queries by ``measure`` of each run (one metric
    CSV with its queries and qrels per table, numbered from ``first_table``: the notebook's Table 3 is the
    passage run, Table 4 the document run)."""
    if not len(metric_csvs) == len(queries_paths) == len(qrels_paths) > 0:
        raise StudyError(f"best and worst queries: one queries and one qrels file per metric CSV, got "
                         f"{len(metric_csvs)}, {len(queries_paths)}, {len(qrels_paths)}")
    parts = []
    systems = []
    for number, (metric_csv, queries_path, qrels_path) in enumerate(zip(metric_csvs, queries_paths, qrels_paths),
                                                                    start=first_table):
        metrics = read_metrics([metric_csv])
        per_query = metrics[(metrics["qid"] != ALL) & (metrics["measure"] == measure)].sort_values(
            ["value", "qid"], ascending=[False, True])
        if per_query.empty:
            raise StudyError(f"{metric_csv}: no per-query {measure} values")
        texts, qrels = read_queries(queries_path), read_qrels(qrels_path)
        systems.append(f"Table {number}: {per_query['system'].iloc[0]}")
        for label, chosen in (("best", per_query.head(count)), ("worst", per_query.tail(count).iloc[::-1])):
            parts.append(pd.DataFrame({
                "paper table": f"Table {number}", "dataset": chosen["dataset"].to_numpy(),
                "system": chosen["system"].to_numpy(), "table": label, "qid": chosen["qid"].to_numpy(),
                measure: chosen["value"].to_numpy(),
                "relevant": [sum(g > 0 for g in qrels.get(q, {}).values()) for q in chosen["qid"]],
                "query": [texts.get(q, "") for q in chosen["qid"]],
            }))
    table = pd.concat(parts, ignore_index=True)
    write_table(table, out_prefix,
                f"TK paper Tables 3-4: best and worst test queries by {measure} ({', '.join(systems)}).")
    return table
