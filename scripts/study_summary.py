"""DVC's view of the study's results (dvc.yaml stage ``summary``; docs/cluster.md).

Reads the evaluation CSVs (results/metrics/{dataset}/{system}.{split}.csv, one row per query and
one ``all`` row per measure) and writes

* ``summary/metrics.json``: {dataset: {split: {system: {measure: value}}}} over all queries, for
  ``dvc metrics show`` / ``dvc metrics diff``;
* ``summary/test.csv``: one row per dataset/system on the test split, for ``dvc plots show``.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def summarise(metrics: Path) -> dict:
    summary: dict = {}
    for path in sorted(metrics.glob("*/*.csv")):
        with path.open(newline="") as handle:
            for row in csv.DictReader(handle):
                if row["qid"] == "all":
                    systems = summary.setdefault(row["dataset"], {}).setdefault(row["split"], {})
                    systems.setdefault(row["system"], {})[row["measure"]] = float(row["value"])
    return summary


def test_rows(summary: dict) -> tuple[list[str], list[dict]]:
    measures: list[str] = []
    rows = []
    for dataset, splits in sorted(summary.items()):
        for system, values in sorted(splits.get("test", {}).items()):
            measures += [measure for measure in values if measure not in measures]
            rows.append({"run": f"{dataset}/{system}", **values})
    return ["run", *measures], rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics", type=Path, default=Path("results/metrics"))
    parser.add_argument("--out", type=Path, default=Path("summary"))
    args = parser.parse_args(argv)
    summary = summarise(args.metrics)
    if not summary:
        raise SystemExit(f"no evaluation results under {args.metrics}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    fields, rows = test_rows(summary)
    with (args.out / "test.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
