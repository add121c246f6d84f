"""The Choppy paper's Table 1 and Figures 1-2 from the truncation study's outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import pandas as pd

from rankstudy.errors import StudyError
from rankstudy.report.figures import plt, save_figure
from rankstudy.report.tables import write_table

METRIC_NAMES = {"f1": "F1", "dcg": "DCG"}


def table1(study_dirs: Sequence[Path], names: Sequence[str], out_prefix: Path, caption_note: str = "") -> pd.DataFrame:
    """Methods x (run type, metric), with Choppy's and every method's relative gain over BiCut on F1."""
    frames = []
    for name, directory in zip(names, study_dirs):
        results = pd.read_csv(Path(directory) / "results.csv")
        results["method"] = results["method"].str.replace(r"^Greedy-k.*", "Greedy-k", regex=True)
        values = results.pivot(index="method", columns="metric", values="value").rename(columns=METRIC_NAMES)
        cuts = results.pivot(index="method", columns="metric", values="mean_cut")
        wide = values.join(cuts.rename(columns={m: f"mean cut ({METRIC_NAMES[m]})" for m in cuts.columns}))
        bicut = wide.loc["BiCut", "F1"] if "BiCut" in wide.index else None
        wide["F1 gain over BiCut (%)"] = (wide["F1"] / bicut - 1) * 100 if bicut else None
        frames.append(wide.reset_index().assign(run=name))
    if not frames:
        raise StudyError("Choppy Table 1: no truncation results")
    columns = ["run", "method", "F1", "DCG", "F1 gain over BiCut (%)", "mean cut (F1)", "mean cut (DCG)"]
    table = pd.concat(frames, ignore_index=True).reindex(columns=columns)
    order = {m: i for i, m in enumerate(["Oracle", "Fixed", "Greedy", "BiCut", "Choppy"])}
    table["_order"] = table["method"].map(lambda m: next((v for k, v in order.items() if m.startswith(k)), 9))
    table = table.sort_values(["run", "_order", "method"], key=lambda c: c.map(_natural) if c.name == "method" else c)
    table = table.drop(columns="_order").reset_index(drop=True)
    write_table(table, out_prefix, "Choppy paper Table 1: mean F1 and penalised DCG on the test queries when "
                "each method cuts the ranked lists (BiCut: F1 only, as the paper); Greedy-k's k is its mean cut. "
                + caption_note)
    return table


def _natural(method: str):
    """Fixed-5 before Fixed-10."""
    prefix, _, number = method.partition("-")
    return (prefix, int(number)) if number.isdigit() else (prefix, 0)


def figure1(study_dir: Path, out_prefix: Path) -> None:
    """Per metric: the metric at each cut for three training queries, above Choppy's distribution."""
    fig1 = json.loads((Path(study_dir) / "fig1.json").read_text())
    metrics = [m for m in ("f1", "dcg") if m in fig1]
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
        raise StudyError("Choppy Fig. 2: no grid results (set truncation.grid_d and grid_heads)")
    figure, axes = plt.subplots(len(grids), 2, figsize=(9, 3.6 * len(grids)), squeeze=False, constrained_layout=True)
    for row, (name, grid) in enumerate(grids):
        for column, metric in enumerate(("f1", "dcg")):
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
