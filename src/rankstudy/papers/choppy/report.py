"""The Choppy paper's Table 1 and Figures 1-2 from the truncation study's outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.report.figures import plt, save_figure
from rankstudy.report.tables import write_table
from rankstudy.significance import wilcoxon_p
from rankstudy.truncation.methods import BICUT, GREEDY, METRIC_NAMES, METRICS, ORDER, method_name
from rankstudy.truncation.repeats import query_key


def table1(study_dirs: Sequence[Path], names: Sequence[str], out_prefix: Path) -> pd.DataFrame:
    """Methods x (run type, metric): mean test value, the spread of the per-query cuts, the paired test
    against Greedy-k, and every method's relative gain over BiCut on F1; the caption lists every setting."""
    frames, settings = [], []
    for name, directory in zip(names, study_dirs):
        results = pd.read_csv(Path(directory) / "results.csv")
        per_query = pd.read_csv(Path(directory) / "per_query.csv", dtype={"qid": str})
        for frame in (results, per_query):
            frame["method"] = frame["method"].map(method_name)
        wide = results.pivot(index="method", columns="metric", values="value").rename(columns=METRIC_NAMES)
        repeated = results.get("repeats", pd.Series([1])).max() > 1
        columns = (("value_sd", "sd"),) if repeated else ()
        for column, label in columns + (("mean_cut", "mean cut"), ("cut_sd", "cut sd"), ("cut_rho_oracle", "cut rho")):
            spread = results.pivot(index="method", columns="metric", values=column)
            wide = wide.join(spread.rename(columns={m: f"{label} ({METRIC_NAMES[m]})" for m in spread.columns}))
        for metric in results["metric"].unique():
            wide[f"p vs {GREEDY} ({METRIC_NAMES[metric]})"] = _p_against(per_query, metric, GREEDY)
            if repeated:
                wide[f"repeats above {GREEDY} ({METRIC_NAMES[metric]})"] = _repeats_above(per_query, metric, GREEDY)
        bicut = wide.loc[BICUT, "F1"] if BICUT in wide.index else None
        wide[f"F1 gain over {BICUT} (%)"] = (wide["F1"] / bicut - 1) * 100 if bicut else None
        frames.append(wide.reset_index().assign(run=name))
        settings.append(f"{name}: {settings_caption(json.loads((Path(directory) / 'settings.json').read_text()))}")
    if not frames:
        raise StudyError("Choppy Table 1: no truncation results")
    columns = ["run", "method", "F1", "sd (F1)", "DCG", "sd (DCG)", f"F1 gain over {BICUT} (%)",
               f"p vs {GREEDY} (F1)", f"p vs {GREEDY} (DCG)", f"repeats above {GREEDY} (F1)",
               f"repeats above {GREEDY} (DCG)", "mean cut (F1)", "cut sd (F1)", "cut rho (F1)", "mean cut (DCG)",
               "cut sd (DCG)", "cut rho (DCG)"]
    table = pd.concat(frames, ignore_index=True)
    table = table.reindex(columns=[column for column in columns if column in table.columns])
    table["_order"] = table["method"].map(lambda m: next((i for i, start in enumerate(ORDER) if m.startswith(start)),
                                                          len(ORDER)))
    table = table.sort_values(["run", "_order", "method"], key=lambda c: c.map(_natural) if c.name == "method" else c)
    table = table.drop(columns="_order").reset_index(drop=True)
    write_table(table, out_prefix, "Choppy paper Table 1: mean F1 and penalised DCG on the test queries when "
                "each method cuts the ranked lists (BiCut: F1 only, as the paper); Greedy-k's k is its mean cut; "
                "with repeats (settings): each cell is the mean over the repeats, sd its standard deviation over "
                "them, p pools every repeat's test queries (pairs of one repeat and query), and 'repeats above' "
                "counts the repeats whose mean beats Greedy-k's; "
                "cut sd: the standard deviation of the per-query cuts (0: the same cut for every query); cut rho: "
                "Spearman's correlation of the per-query cuts with the Oracle's; "
                "p: paired Wilcoxon test against Greedy-k. Settings, " + "; ".join(settings) + ".")
    return table


def _p_against(per_query: pd.DataFrame, metric: str, baseline: str) -> pd.Series:
    """Per method, the paired Wilcoxon p-value of its per-query values against ``baseline``'s (pairs of one
    repeat and query when the study has repeats)."""
    rows = per_query[per_query["metric"] == metric]
    keys = query_key(rows)
    values = {method: dict(zip(keys[group.index], group["value"])) for method, group in rows.groupby("method")}
    if baseline not in values:
        return pd.Series(dtype=float)
    return pd.Series({method: wilcoxon_p(v, values[baseline]) for method, v in values.items() if method != baseline})


def _repeats_above(per_query: pd.DataFrame, metric: str, baseline: str) -> pd.Series:
    """Per method, in how many repeats its mean test value is above ``baseline``'s."""
    means = per_query[per_query["metric"] == metric].groupby(["method", "repeat"])["value"].mean().unstack()
    if baseline not in means.index:
        return pd.Series(dtype=float)
    return (means > means.loc[baseline]).sum(axis=1).drop(baseline)


def settings_caption(settings: dict) -> str:
    """The settings a study's models were trained with (settings.json), in words."""
    split = settings["split"]
    parts = [f"top {settings['n']}, {split['train']}/{split.get('dev', 0)}/{split['test']} train/dev/test queries"
             + ("" if split.get("dev") else " (no dev set: every model trains all its epochs and keeps the last)")]
    repeats = settings.get("repeats", 1)
    if repeats > 1:
        fixed = settings.get("split_from") == "query-id files"
        parts.append(f"{repeats} repeats ({'the split of the query-id files' if fixed else 'a random split each'}, "
                     f"trained with seeds seed + 0..{repeats - 1})")
    models = [settings[f"choppy_{m}"] for m in METRICS if f"choppy_{m}" in settings]
    if models:
        def value(key: str) -> str:
            """One value, or one per metric ("a/b" for F1/DCG) where the metrics' Choppys differ."""
            values = [str(model.get(key, "")) for model in models]
            return values[0] if len(set(values)) == 1 else "/".join(values)

        ff = "the paper's single ReLU layer" if value("ff_layers") == "1" else f"ff {value('ff_dim')}"
        parts.append(f"Choppy d={value('d_model')}, {value('heads')} heads, {value('layers')} layers, {ff}, "
                     f"dropout {value('dropout')} (attention {value('attention_dropout')}), Adam lr {value('lr')}, "
                     f"batch {value('batch_size')}, at most {value('epochs')} epochs (patience {value('patience')}; "
                     f"ran {value('epochs_run')}; a/b: F1/DCG), scores {value('score_scaling')}, position init sd "
                     f"{value('position_init_std')}")
    bicut = settings.get("bicut")
    if bicut:
        tried = ", ".join(f"{alpha}" for alpha in bicut["f1_by_alpha"])
        parts.append(f"BiCut hidden {bicut['hidden']}, {bicut['layers']} layer(s), {bicut['epochs']} epochs, alpha "
                     f"{bicut['alpha']} (chosen on {bicut['alpha_chosen_on']} F1 from {tried})")
    return ", ".join(parts)


def _natural(method: str):
    """Fixed-5 before Fixed-10."""
    prefix, _, number = method.partition("-")
    return (prefix, int(number)) if number.isdigit() else (prefix, 0)


CUT_BINS = [1, 2, 6, 11, 21, 51, 101, 301, 1001]  # left edges: 1, 2-5, 6-10, ..., 301-1000


def cut_histograms(study_dirs: Sequence[Path], names: Sequence[str]) -> pd.DataFrame:
    """Per run, metric and method: how many test queries each method cuts in each range of ranks."""
    rows = []
    labels = [f"{low}" if high - low == 1 else f"{low}-{high - 1}" for low, high in zip(CUT_BINS, CUT_BINS[1:])]
    for name, directory in zip(names, study_dirs):
        per_query = pd.read_csv(Path(directory) / "per_query.csv", dtype={"qid": str})
        for (metric, method), group in per_query.groupby(["metric", "method"], sort=False):
            counts = pd.cut(group["cut"], CUT_BINS, right=False, labels=labels).value_counts(sort=False)
            rows.append({"run": name, "metric": metric, "method": method, **counts.to_dict()})
    return pd.DataFrame(rows)


def figure1(study_dirs: Sequence[Path], names: Sequence[str], out_prefix: Path) -> None:
    """Per metric: the metric at each cut for three training queries of the first study, above Choppy's
    distribution; PREFIX.csv: every method's histogram of test cuts in every study."""
    with atomic_open(Path(f"{out_prefix}.csv")) as out:
        cut_histograms(study_dirs, names).to_csv(out, index=False)
    fig1 = json.loads((Path(study_dirs[0]) / "fig1.json").read_text())
    metrics = [m for m in METRICS if m in fig1]
    figure, axes = plt.subplots(2 * len(metrics), 3, figsize=(12, 3.2 * len(metrics) * 2), squeeze=False,
                                constrained_layout=True)
    for row, metric in enumerate(metrics):
        data = fig1[metric]
        for column, qid in enumerate(data["qids"]):
            length = data["lengths"][column]
            positions = range(1, length + 1)
            axes[2 * row, column].plot(positions, data["tables"][column][:length])
            axes[2 * row, column].set_title(f"query {qid}: {METRIC_NAMES[metric]} by cut")
            axes[2 * row + 1, column].bar(positions, data["probabilities"][column][:length])
            axes[2 * row + 1, column].set_title("Choppy's cut distribution")
            axes[2 * row + 1, column].set_xlabel("cut position")
    save_figure(figure, out_prefix)


def figure2(study_dirs: Sequence[Path], names: Sequence[str], out_prefix: Path) -> None:
    """Heat maps of test F1 and DCG over the d x heads grid (3 layers), one row per run type."""
    grids = [(name, pd.read_csv(Path(d) / "grid.csv")) for name, d in zip(names, study_dirs)]
    grids = [(name, grid) for name, grid in grids if not grid.empty]
    if not grids:
        raise StudyError("Choppy Fig. 2: no grid results (set choppy.grid_d and grid_heads)")
    figure, axes = plt.subplots(len(grids), 2, figsize=(9, 3.6 * len(grids)), squeeze=False, constrained_layout=True)
    for row, (name, grid) in enumerate(grids):
        for column, metric in enumerate(METRICS):
            cell = grid[grid["metric"] == metric].pivot(index="d_model", columns="heads", values="value")
            axis = axes[row, column]
            image = axis.imshow(cell.to_numpy(), cmap="viridis", aspect="auto")
            axis.set_xticks(range(len(cell.columns)), cell.columns)
            axis.set_yticks(range(len(cell.index)), cell.index)
            axis.set_xlabel("heads")
            axis.set_ylabel("d")
            axis.set_title(f"{name}: test {METRIC_NAMES[metric]}")
            for (i, j), value in pd.DataFrame(cell.to_numpy()).stack().items():
                axis.text(j, i, f"{value:.3f}", ha="center", va="center", color="white", fontsize=8)
            figure.colorbar(image, ax=axis)
    save_figure(figure, out_prefix)
