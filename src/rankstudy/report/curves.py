"""Learning curves: training loss and validation metric per step, from runs' ``log.csv`` files.

``log.csv`` (``rankstudy.train.loop``) holds one row per validation: ``step``, ``loss`` (the mean
training loss since the previous validation), ``metric`` (the validation measure) and ``best``.
A study encoder's ``pretrain.csv`` (masked-LM loss per step) may be added as a loss-only curve.
The figure has two panels (loss, validation metric), one line per run; the plotted numbers go to
PREFIX.csv (run, step, loss, metric).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.report.figures import plt, save_figure


def read_log(path: str | os.PathLike) -> pd.DataFrame:
    """A run's log.csv (or an encoder's pretrain.csv) with at least ``step`` and ``loss``."""
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise StudyError(f"{path}: cannot read a training log ({error})") from None
    missing = {"step", "loss"} - set(frame.columns)
    if missing:
        raise StudyError(f"{path}: a training log needs the columns step and loss; missing {', '.join(sorted(missing))}")
    if "metric" not in frame.columns:
        frame["metric"] = float("nan")
    return frame[["step", "loss", "metric"]]


def learning_curves(logs: Mapping[str, str | os.PathLike], out_prefix, metric: str = "validation metric") -> None:
    """Plot each labelled log's loss and validation metric against the step; write PREFIX.{png,pdf,csv}."""
    if not logs:
        raise StudyError("learning curves: no run logs given")
    frames = {label: read_log(path) for label, path in logs.items()}
    figure, (loss_axis, metric_axis) = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, frame in frames.items():
        loss_axis.plot(frame["step"], frame["loss"], marker="o" if len(frame) < 30 else None, ms=3, label=label)
        if frame["metric"].notna().any():
            metric_axis.plot(frame["step"], frame["metric"], marker="o", ms=3, label=label)
    loss_axis.set(xlabel="training step", ylabel="training loss", title="loss")
    metric_axis.set(xlabel="training step", ylabel=metric, title=f"validation {metric}")
    for axis in (loss_axis, metric_axis):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    save_figure(figure, out_prefix)
    with atomic_open(Path(str(out_prefix) + ".csv")) as out:
        pd.concat([frame.assign(run=label) for label, frame in frames.items()])[
            ["run", "step", "loss", "metric"]].to_csv(out, index=False)
