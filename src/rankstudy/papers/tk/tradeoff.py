"""The TK paper's effectiveness-efficiency trade-off and a learning curve over the number of training queries.

- ``tradeoff_figure``: the paper's argument for TK is that it sits between BM25 and BERT: much more effective than
  the first stage at a small fraction of a large model's cost. The figure shows it from Table 2's CSV
  (``report.table2``): per dataset, each run with a throughput (docs/ms, log scale) as a labelled point at its
  effectiveness, the first stage as a solid horizontal line, reference systems without a throughput as dotted ones.
- ``learning_curve``: how test effectiveness grows with the training queries a run saw (the scaled-down study
  trains on far fewer queries than the paper): per dataset and series, the mean, min and max over seeds of a test
  measure at each number of training queries, against baselines (horizontal lines), with the paired Wilcoxon p of
  the seeds' per-query mean against the first baseline. Written as a table (PREFIX.csv/md/tex) and a figure.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib import ticker

from rankstudy.errors import StudyError
from rankstudy.evaluate import read_metrics
from rankstudy.report.columns import speed_column
from rankstudy.report.figures import plt, save_figure
from rankstudy.report.tables import mean_value, metric_rows, per_query_values, write_table
from rankstudy.significance import wilcoxon_p

LEARNING_CAPTION = ("Learning curve: test {measure} by the number of training queries; mean, min and max over the "
                    "seeds of each point. {p}")
P_NOTE = "p: paired Wilcoxon signed-rank test of the seeds' per-query mean against {label} on the same dataset. "


def _label_line(axis, y: float, label: str, style: str) -> None:
    """A horizontal line at ``y``, labelled at its left end."""
    axis.axhline(y, color="grey", linestyle=style, linewidth=1)
    axis.text(0.02, y, label, transform=axis.get_yaxis_transform(), fontsize=7, va="bottom", color="dimgrey")


def tradeoff_figure(table2_csv: str | os.PathLike, out_prefix: str | os.PathLike,
                    measure: str = "test re-rank nDCG@10") -> None:
    """Per dataset (subplots side by side, shared y): ``measure`` against docs/ms (log x) of Table 2's runs."""
    try:
        table = pd.read_csv(table2_csv, dtype={"dataset": str, "run": str})
    except (OSError, ValueError) as error:
        raise StudyError(f"{table2_csv}: cannot read the Table 2 CSV: {error}") from None
    speed = next((speed_column(device) for device in ("cpu", "cuda") if speed_column(device) in table.columns), None)
    if measure not in table.columns or speed is None:
        missing = measure if measure not in table.columns else f"{speed_column('cpu')} or {speed_column('cuda')}"
        raise StudyError(f"{table2_csv}: no column {missing!r} for the trade-off figure")
    if table[speed].isna().all():
        raise StudyError(f"{table2_csv}: no run has a {speed} value to draw")
    p_columns = [column for column in table.columns if column.startswith("p vs ")]
    no_p = table[p_columns[0]].isna() if p_columns else pd.Series(True, index=table.index)
    datasets = list(dict.fromkeys(table["dataset"]))
    figure, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.8), sharey=True,
                                layout="constrained", squeeze=False)
    for axis, dataset in zip(axes[0], datasets, strict=True):
        rows = table[table["dataset"] == dataset]
        first_stage = rows.index[no_p[rows.index]][0] if no_p[rows.index].any() else None
        for index, row in rows[rows[measure].notna()].iterrows():
            if index == first_stage:
                _label_line(axis, row[measure], row["run"], "-")
            elif pd.notna(row[speed]):
                axis.scatter(row[speed], row[measure], zorder=3)
                axis.annotate(row["run"], (row[speed], row[measure]), xytext=(4, 4), textcoords="offset points",
                              fontsize=8)
            else:
                _label_line(axis, row[measure], row["run"], ":")
        axis.set_xscale("log")
        axis.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))  # 0.1, not 10^-1
        axis.xaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
        axis.margins(x=0.15)  # room for the labels of the outermost points
        axis.set(title=dataset, xlabel=speed)
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel(measure)
    save_figure(figure, out_prefix)


def _values(metrics: pd.DataFrame, entry: Mapping[str, Any], keys: Sequence[str], measure: str, what: str,
            files: Sequence) -> tuple[float, dict[str, float]]:
    """(mean, per-query values) of ``entry``'s system on its dataset's test split; errors name ``what``."""
    missing = [key for key in keys if key not in entry]
    if missing:
        raise StudyError(f"learning curve: {what} {dict(entry)} lacks {', '.join(missing)}")
    try:
        rows = metric_rows(metrics, entry["dataset"], entry["system"], "test")
        return mean_value(rows, measure), per_query_values(rows, measure)
    except StudyError as error:
        raise StudyError(f"learning curve: {what} {dict(entry)}: {error} in {', '.join(map(str, files))}") from None


def training_queries(examples_path: str | os.PathLike) -> int:
    """How many queries a training examples file (triples, a teacher's scored triples or groups: ``qid`` first)
    has examples of."""
    from rankstudy.train.examples import read_groups, read_scored_triples, read_triples

    name = Path(examples_path).name
    read = (read_groups if name.startswith("groups") else read_scored_triples if name.startswith("teacher.")
            else read_triples)
    return len({example[0] for example in read(examples_path)})


def learning_curve(metric_csvs: Sequence[str | os.PathLike], points: Sequence[Mapping[str, Any]],
                   out_prefix: str | os.PathLike, figure_prefix: str | os.PathLike,
                   baselines: Sequence[Mapping[str, Any]] = (), measure: str = "nDCG@10",
                   caption: str = "") -> pd.DataFrame:
    """``points``: dicts with series, queries (training queries), dataset, system; those sharing (series, queries,
    dataset) are seeds of one point. ``baselines``: dicts with label, dataset, system (rows with queries empty,
    horizontal lines in the figure); p is against the first baseline's label on each dataset."""
    metrics = read_metrics(metric_csvs)
    reference = baselines[0]["label"] if baselines else None
    p_column = f"p vs {reference}"
    base = {}  # (label, dataset) -> (mean, per-query values)
    for entry in baselines:
        found = _values(metrics, entry, ("label", "dataset", "system"), measure, "baseline", metric_csvs)
        base[entry["label"], entry["dataset"]] = found
    seeds: dict[tuple, list] = {}
    for entry in points:
        found = _values(metrics, entry, ("series", "queries", "dataset", "system"), measure, "point", metric_csvs)
        seeds.setdefault((entry["dataset"], entry["series"], int(entry["queries"])), []).append(found)
    order = {series: rank for rank, series in enumerate(dict.fromkeys(series for _, series, _ in seeds))}

    def p_value(dataset: str, per_query: dict[str, float]) -> float | None:
        found = base.get((reference, dataset))
        return wilcoxon_p(per_query, found[1]) if found else None

    records = []
    for dataset in dict.fromkeys([d for _, d in base] + [d for d, _, _ in seeds]):
        for (label, where), (mean, per_query) in base.items():
            if where == dataset:
                records.append({"dataset": dataset, "series": label, "training queries": None, "seeds": None,
                                f"{measure} mean": mean, f"{measure} min": None, f"{measure} max": None,
                                p_column: None if label == reference else p_value(dataset, per_query)})
        for (where, series, queries), found in sorted(seeds.items(), key=lambda kv: (order[kv[0][1]], kv[0][2])):
            if where != dataset:
                continue
            means = [mean for mean, _ in found]
            if any(set(per_query) != set(found[0][1]) for _, per_query in found):
                raise StudyError(f"learning curve: the seeds of {series} at {queries} queries on {dataset} were "
                                 f"evaluated on different queries")
            query_mean = {q: float(np.mean([per_query[q] for _, per_query in found])) for q in found[0][1]}
            records.append({"dataset": dataset, "series": series, "training queries": queries, "seeds": len(found),
                            f"{measure} mean": float(np.mean(means)), f"{measure} min": min(means),
                            f"{measure} max": max(means), p_column: p_value(dataset, query_mean)})
    table = pd.DataFrame.from_records(records)
    table = table.astype({"training queries": "Int64", "seeds": "Int64"})
    if reference is None:
        table = table.drop(columns=[p_column])
    intro = LEARNING_CAPTION.format(measure=measure, p=P_NOTE.format(label=reference) if reference else "")
    write_table(table, out_prefix, (intro + caption).strip())
    _learning_figure(table, measure, figure_prefix)
    return table


def _learning_figure(table: pd.DataFrame, measure: str, figure_prefix) -> None:
    datasets = list(dict.fromkeys(table["dataset"]))
    figure, axes = plt.subplots(1, len(datasets), figsize=(4.5 * len(datasets), 3.8), sharey=True,
                                layout="constrained", squeeze=False)
    for axis, dataset in zip(axes[0], datasets, strict=True):
        rows = table[table["dataset"] == dataset]
        curve = rows[rows["training queries"].notna()]
        for series, part in curve.groupby("series", sort=False):
            x, y = part["training queries"].astype(float), part[f"{measure} mean"]
            spread = [y - part[f"{measure} min"], part[f"{measure} max"] - y] if (part["seeds"] > 1).any() else None
            axis.errorbar(x, y, yerr=spread, marker="o", capsize=3, label=series)
        for _, row in rows[rows["training queries"].isna()].iterrows():
            _label_line(axis, row[f"{measure} mean"], row["series"], "--")
        axis.set_xscale("log", base=2)
        counts = sorted(set(curve["training queries"]))
        axis.set_xticks(counts, [str(count) for count in counts])
        axis.minorticks_off()
        axis.set(title=dataset, xlabel="training queries")
        axis.grid(alpha=0.3)
        if len(curve):
            axis.legend(fontsize=7)
    axes[0][0].set_ylabel(f"test {measure}")
    save_figure(figure, figure_prefix)
