"""DVC's view of the study's results (dvc.yaml stage ``summary``; docs/cluster.md).

Reads the evaluation CSVs (results/metrics/{dataset}/{system}.{split}.csv, one row per query and
one ``all`` row per measure) and writes

* ``metrics.json``: {dataset: {split: {system: {measure: value}}}} over all queries, for
  ``dvc metrics show`` / ``dvc metrics diff``;
* ``test.csv``: one row per dataset/system on the test split, for ``dvc plots show``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError


def summarise(metrics: str | os.PathLike) -> dict:
    """The ``all`` rows of every metric CSV under ``metrics``, nested dataset → split → system."""
    summary: dict = {}
    for path in sorted(Path(metrics).glob("*/*.csv")):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if row["qid"] == "all":
                    systems = summary.setdefault(row["dataset"], {}).setdefault(row["split"], {})
                    systems.setdefault(row["system"], {})[row["measure"]] = float(row["value"])
    return summary


def test_rows(summary: dict) -> tuple[list[str], list[dict]]:
    """(columns, rows) of the test split: one row per dataset/system, one column per measure."""
    measures: list[str] = []
    rows = []
    for dataset, splits in sorted(summary.items()):
        for system, values in sorted(splits.get("test", {}).items()):
            measures += [measure for measure in values if measure not in measures]
            rows.append({"run": f"{dataset}/{system}", **values})
    return ["run", *measures], rows


def write_summary(metrics: str | os.PathLike, out_dir: str | os.PathLike) -> None:
    summary = summarise(metrics)
    if not summary:
        raise StudyError(f"{metrics}: no evaluation results (expected {{dataset}}/{{system}}.{{split}}.csv files)")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_open(out_dir / "metrics.json") as out:
        out.write(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    fields, rows = test_rows(summary)
    with atomic_open(out_dir / "test.csv", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
