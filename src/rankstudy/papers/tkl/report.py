"""The TKL paper's tables and figures (long-document re-ranking), from metrics, runs and regions.

- ``system_table``: systems x (split, measure) means with the paper's significance letters
  (TKL Table 1 and the saturation ablation, Table 2): ``tables.system_frame``, written.
- ``evidence_table``: where relevant documents land, by where their evidence starts
  (synthetic data only: ``truth.json``), to show what reading past token 200 buys.
- ``length_figure`` (Fig. 1): P(relevant) and P(ranked in the top 30) by document length.
- ``max_length_figure`` (Fig. 2): a measure by the maximum document length a model reads.
- ``region_figure`` (Fig. 3): where TKL's top regions start, log-log; ``region_shares``: how often each
  starts after the 500th word (the numbers the paper's text gives for Fig. 3: 24.5, 41.5, 46.4 %).
Every figure also writes the plotted numbers as PREFIX.csv.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.evaluate import ALL, read_metrics
from rankstudy.formats import Qrels, read_qrels, read_run
from rankstudy.report.columns import REGIONS_AFTER, TKL_MEASURES as MEASURES
from rankstudy.report.figures import plt, save_figure
from rankstudy.report.tables import docs_per_ms, mean_value, metric_rows, system_frame, write_table

LENGTH_EDGES = (0, 250, 500, 1000, 2000, 4000)


def system_table(metric_csvs: Sequence[str | os.PathLike], rows: Sequence[Mapping[str, Any]],
                 splits: Sequence[str], out_prefix, caption: str, measures: Sequence[str] = MEASURES,
                 efficiency_csv=None) -> pd.DataFrame:
    """``system_frame`` over every split x measure, written as a table; rows may name a model
    (the key of its docs/ms column, read from ``efficiency_csv``)."""
    columns = [(split, measure) for split in splits for measure in measures]
    metrics = read_metrics(metric_csvs)
    table = system_frame(metrics, rows, columns)
    caption = f"{caption} {_query_counts(metrics, rows[0], splits)}"
    if efficiency_csv:
        speed_column, speed = docs_per_ms(efficiency_csv)
        table[speed_column] = [speed.get(row.get("model")) for row in rows]
    write_table(table, out_prefix, caption)
    return table


def _query_counts(metrics: pd.DataFrame, row: Mapping[str, Any], splits: Sequence[str]) -> str:
    """'Queries: test 238, dev 225.': the queries the first row (BM25's candidates) is evaluated on, per split."""
    counts = []
    for split in splits:
        rows = metric_rows(metrics, row["dataset"], row["system"], split)
        counts.append(f"{split} {rows.loc[rows['qid'] != ALL, 'qid'].nunique():,}")
    return f"Queries: {', '.join(counts)}."


def _ranks(run_path) -> dict[str, dict[str, int]]:
    return {qid: {docid: rank for rank, (docid, _) in enumerate(ranking, 1)}
            for qid, ranking in read_run(run_path).items()}


def _relevant(qrels: Qrels, threshold: int) -> list[tuple[str, str]]:
    return [(qid, docid) for qid, judged in sorted(qrels.items()) for docid, grade in sorted(judged.items())
            if grade >= threshold]


def evidence_table(runs: Mapping[str, str | os.PathLike], qrels_path, truth_path, out_prefix, caption: str,
                   boundary: int = 200, top: int = 10, rel_threshold: int = 1) -> pd.DataFrame:
    """Share of relevant documents ranked in the top ``top`` by each run, for documents whose
    evidence starts before / after token ``boundary``; ``gain`` = last run minus first."""
    truth = json.loads(open(truth_path, encoding="utf-8").read())
    if "relevant" not in truth:
        raise StudyError(f"{truth_path}: expected a synthetic dataset's truth.json with 'relevant'")
    ranks = {label: _ranks(path) for label, path in runs.items()}
    queries = set.intersection(*(set(r) for r in ranks.values()))
    records = []
    for early in (True, False):
        docs = [(qid, docid) for qid, docid in _relevant(read_qrels(qrels_path), rel_threshold)
                if qid in queries and (truth["relevant"][qid][docid]["evidence_start"] < boundary) == early]
        record: dict[str, Any] = {"evidence starts": f"before token {boundary}" if early else f"at token {boundary} or later",
                                  "relevant documents": len(docs)}
        for label, rank in ranks.items():
            inside = [rank[qid].get(docid, math.inf) <= top for qid, docid in docs]
            record[f"{label} in top {top}"] = float(np.mean(inside)) if docs else None
        labels = list(runs)
        if docs and len(labels) > 1:
            record["gain"] = record[f"{labels[-1]} in top {top}"] - record[f"{labels[0]} in top {top}"]
        records.append(record)
    table = pd.DataFrame.from_records(records)
    write_table(table, out_prefix, caption)
    return table


def _bucket_labels(edges: Sequence[int]) -> list[str]:
    return [f"{low}-{high}" for low, high in zip(edges, edges[1:])] + [f">{edges[-1]}"]


def length_figure(runs: Mapping[str, str | os.PathLike], qrels_path, lengths: Mapping[str, int], out_prefix,
                  top: int = 30, edges: Sequence[int] = LENGTH_EDGES, rel_threshold: int = 1) -> pd.DataFrame:
    """TKL Fig. 1: over the re-ranked candidates (query, document pairs of the first run), per
    document-length bucket, the probability that a pair is relevant and, per run, that it is
    ranked in the top ``top``."""
    qrels = read_qrels(qrels_path)
    ranks = {label: _ranks(path) for label, path in runs.items()}
    pool = next(iter(ranks.values()))
    labels = _bucket_labels(edges)
    rows = []
    for qid, ranking in pool.items():
        for docid in ranking:
            if docid not in lengths:
                raise StudyError(f"{next(iter(runs.values()))}: document {docid} has no length in the token store")
            bucket = labels[int(np.searchsorted(edges, lengths[docid], side="right")) - 1]
            row = {"bucket": bucket, "relevant": qrels.get(qid, {}).get(docid, 0) >= rel_threshold}
            row.update({label: rank[qid].get(docid, math.inf) <= top for label, rank in ranks.items()})
            rows.append(row)
    pairs = pd.DataFrame(rows)
    summary = pairs.groupby("bucket", sort=False).agg(pairs=("relevant", "size"), **{
        "P(relevant)": ("relevant", "mean"), **{f"P(top {top} | {label})": (label, "mean") for label in runs}})
    summary = summary.reindex([label for label in labels if label in summary.index]).reset_index()
    with atomic_open(f"{out_prefix}.csv") as out:
        summary.to_csv(out, index=False)
    figure, axis = plt.subplots(figsize=(6.5, 3.5), layout="constrained")
    series = [column for column in summary.columns if column.startswith("P(")]
    width = 0.8 / len(series)
    for i, column in enumerate(series):
        axis.bar(np.arange(len(summary)) + (i - (len(series) - 1) / 2) * width, summary[column], width, label=column)
    axis.set_xticks(range(len(summary)), [f"{b}\n(n={n})" for b, n in zip(summary["bucket"], summary["pairs"])])
    axis.set_xlabel("document length (tokens)")
    axis.set_ylabel("probability")
    axis.legend(fontsize="small")
    save_figure(figure, out_prefix)
    return summary


def max_length_figure(metric_csvs: Sequence[str | os.PathLike], points: Sequence[Mapping[str, Any]], out_prefix,
                      measure: str = "nDCG@10", split: str = "test") -> pd.DataFrame:
    """TKL Fig. 2: ``points`` are dicts with model (series), length, dataset and system."""
    metrics = read_metrics(metric_csvs)
    table = pd.DataFrame([{"model": p["model"], "max length": int(p["length"]),
                           measure: mean_value(metric_rows(metrics, p["dataset"], p["system"], split), measure)}
                          for p in points]).sort_values(["model", "max length"], kind="stable")
    with atomic_open(f"{out_prefix}.csv") as out:
        table.to_csv(out, index=False)
    figure, axis = plt.subplots(figsize=(5, 3.5), layout="constrained")
    for model, part in table.groupby("model", sort=False):
        axis.plot(part["max length"], part[measure], marker="o", label=model)
    axis.set_xscale("log")
    lengths = sorted(table["max length"].unique())
    axis.set_xticks(lengths, [str(v) for v in lengths])
    axis.set_xticks([], minor=True)  # the log axis' own minor labels (3×10², …) would overlap the lengths
    axis.set_xlabel("maximum document length (tokens)")
    axis.set_ylabel(f"{measure} ({split})")
    axis.legend()
    save_figure(figure, out_prefix)
    return table


def _read_regions(regions_csv) -> pd.DataFrame:
    regions = pd.read_csv(regions_csv)
    regions = regions[regions["start"] >= 0]
    if regions.empty:
        raise StudyError(f"{regions_csv}: no regions to plot")
    return regions


def region_shares(regions_csv, out_prefix, after: int = REGIONS_AFTER) -> pd.DataFrame:
    """Per top region (1st, 2nd, 3rd): how many were found and the share that starts at word ``after`` or later
    (0-based token positions: the paper's "after the 500th word")."""
    regions = _read_regions(regions_csv)
    table = regions.groupby("region")["start"].agg(
        regions="size", share=lambda starts: float((starts >= after).mean())).reset_index()
    table = table.rename(columns={"share": f"share after {after}"})
    table["region"] = table["region"].astype(str)
    write_table(table, out_prefix, f"TKL's top regions (Fig. 3): the share of each that starts after word {after} "
                                   f"(paper: 24.5, 41.5 and 46.4 % after the 500th word).")
    return table


def region_figure(regions_csv, out_prefix, bins: int = 20) -> pd.DataFrame:
    """TKL Fig. 3: how often each top region (1st, 2nd, 3rd) starts at a document position, log-log."""
    regions = _read_regions(regions_csv)
    edges = np.unique(np.logspace(0, np.log10(regions["start"].max() + 2), bins).astype(int))
    records = []
    figure, axis = plt.subplots(figsize=(5, 3.5), layout="constrained")
    for region, part in regions.groupby("region"):
        counts, _ = np.histogram(part["start"] + 1, bins=edges)
        density = counts / np.diff(edges)  # occurrences per token position
        axis.plot(edges[:-1][counts > 0], density[counts > 0], marker=".", label=f"region {region}")
        records += [{"region": region, "from": int(a) - 1, "to": int(b) - 1, "count": int(c)}
                    for a, b, c in zip(edges[:-1], edges[1:], counts)]
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("region start (token position + 1)")
    axis.set_ylabel("occurrences per position")
    axis.legend()
    table = pd.DataFrame(records)
    with atomic_open(f"{out_prefix}.csv") as out:
        table.to_csv(out, index=False)
    save_figure(figure, out_prefix)
    return table
