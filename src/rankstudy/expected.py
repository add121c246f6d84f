"""Expected results: a finished run's headline table cells against the values pinned in a file.

As Anserini's regressions: a YAML file per config (config/expected/default.yaml,
tests/config/expected/tiny.yaml) pins every numeric cell of the study's tables, with an absolute
tolerance per measure; ``check`` lists each cell that drifted and fails; ``update`` rewrites the file
after an intended change (its diff shows in review). File format: docs/claims.md.

The claims scoreboard (results/claims.csv) is pinned the same way where a file names it under ``tables:``
(each claim's means, p and, compared as text, its outcome): a claim that flips is a drift, not a quiet change of
the README's table (``rankstudy.report.readme_table`` reads the pinned scoreboards).

A file records the CPU it was pinned on (``machine``). On another CPU the trained models' cells may differ (the
same kernels are pinned, ``rankstudy.cpu_isa``, but a vendor's library may still take its own code path, and
training amplifies a last bit into another optimum): their drift is reported, not failed; the first stage's
(Lucene, exact anywhere) always fails.
"""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from rankstudy.atomic import atomic_open
from rankstudy.cpu_isa import cpu_model
from rankstudy.errors import StudyError

# the columns that name a row, per table (results/tables/{name}.csv); an expected file may add its own
ROW_KEYS = {
    "first_stage": ["dataset", "split", "system"],
    "tk_table2": ["dataset", "run"],
    "tkl_table1": ["system"],
    "tkl_table2": ["system"],
    "tkl_evidence": ["evidence starts"],
    "tkl_regions": ["region"],
    "socialformer_table1": ["system"],
    "socialformer_table2": ["system"],
    "choppy_table1": ["run", "method"],
    "claims": ["id", "B"],  # results/claims.csv: pinned where the file's tables: names it
}
# the tables pinned by a list of columns (numbers, and text compared exactly) rather than every numeric column
COLUMNS = {"claims": (["mean A", "mean B", "difference", "p", "queries", "pooled p"],
                      ["outcome", "seeds", "pooled outcome"])}
# timings differ between machines; p-values and significance letters follow from the pinned means' runs
SKIP = ["docs/ms*", "p *", "* sig"]
TOLERANCE = {"*": 1.0e-6}  # CPU runs are deterministic (neural.threads 1); loosen per measure for other machines
HEADER = ("# Expected headline table cells (python -m rankstudy check-expected; docs/claims.md).\n"
          "# After an intended change: python -m rankstudy check-expected --expected THIS_FILE --tables-dir "
          "results/tables --update\n")


def read_expected(path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise StudyError(f"{path}: not YAML: {error}") from None
    unknown = set(data) - {"machine", "tables", "skip", "tolerance", "cells"}
    if not isinstance(data, dict) or unknown:
        raise StudyError(f"{path}: expected the keys machine, tables, skip, tolerance, cells "
                         f"(got {', '.join(sorted(unknown))})")
    for key, kind in (("tables", dict), ("skip", list), ("tolerance", dict), ("cells", dict)):
        if not isinstance(data.get(key, kind()), kind):
            raise StudyError(f"{path}: {key}: expected a {kind.__name__ if kind is list else 'mapping'}")
    for pattern, tolerance in data.get("tolerance", {}).items():
        if not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise StudyError(f"{path}: tolerance {pattern!r}: expected a number >= 0, got {tolerance!r}")
    return data


def table_cells(csv_path, keys: Sequence[str], skip: Sequence[str],
                listed: tuple[list[str], list[str]] | None = None) -> dict[str, dict[str, float | str | None]]:
    """{row name: {column: value}} of a table's numeric cells, or of the ``listed`` (numeric, text) columns that it
    has; the row name joins its key columns."""
    try:
        table = pd.read_csv(csv_path)
    except (OSError, ValueError) as error:
        raise StudyError(f"{csv_path}: cannot read table: {error}") from None
    missing = [key for key in keys if key not in table.columns]
    if missing:
        raise StudyError(f"{csv_path}: no row key column(s) {', '.join(missing)} (columns: {', '.join(table.columns)})")
    text = listed[1] if listed else []
    columns = [c for c in table.columns if c not in keys and not any(fnmatch.fnmatchcase(c, p) for p in skip)
               and (c in listed[0] + text if listed else pd.api.types.is_numeric_dtype(table[c]))]
    names = table[list(keys)].astype(str).agg(" | ".join, axis=1)
    repeated = names[names.duplicated()]
    if not repeated.empty:
        raise StudyError(f"{csv_path}: rows are not unique by {', '.join(keys)} (e.g. {repeated.iloc[0]!r})")
    return {name: {c: (None if pd.isna(v) else str(v) if c in text else float(v)) for c, v in zip(columns, row)}
            for name, row in zip(names, table[columns].itertuples(index=False))}


def tolerance_for(column: str, tolerances: Mapping[str, float]) -> float:
    """The first tolerance pattern (fnmatch, in file order) that matches the column; none: 0."""
    return next((float(t) for pattern, t in tolerances.items() if fnmatch.fnmatchcase(column, pattern)), 0.0)


def _run_cells(expected: Mapping[str, Any], table_csvs: Sequence[str | Path]) -> dict[str, dict]:
    keys = {**ROW_KEYS, **expected.get("tables", {})}
    cells = {}
    for path in table_csvs:
        name = Path(path).stem
        if name not in keys:
            raise StudyError(f"{path}: no row key known for table {name!r}: add it under tables: in the expected file")
        cells[name] = table_cells(path, keys[name], expected.get("skip", SKIP), COLUMNS.get(name))
    return cells


def drifts(expected: Mapping[str, Any], got: Mapping[str, Mapping[str, Mapping[str, float | None]]]) -> list[str]:
    """One line per cell that differs: beyond its tolerance, missing from the run, or not pinned."""
    lines = []
    tolerances = expected.get("tolerance", TOLERANCE)
    pinned = expected.get("cells", {})
    for table in sorted(set(pinned) | set(got)):
        if table not in got:
            lines.append(f"{table}: the run has no such table (expected {len(pinned[table])} rows)")
            continue
        want, have = pinned.get(table, {}), got[table]
        for row in list(want) + [r for r in have if r not in want]:
            for column in list(want.get(row, {})) + [c for c in have.get(row, {}) if c not in want.get(row, {})]:
                where = f"{table} | {row} | {column}"
                tolerance = tolerance_for(column, tolerances)
                if row not in want or column not in want[row]:
                    lines.append(f"{where}: not pinned (got {have[row][column]}); run with --update if intended")
                elif row not in have or column not in have[row]:
                    lines.append(f"{where}: missing from the run (expected {want[row][column]})")
                elif not _close(want[row][column], have[row][column], tolerance):
                    lines.append(f"{where}: expected {want[row][column]}, got {have[row][column]}, "
                                 f"tolerance {tolerance:g}")
    return lines


def _close(want: float | str | None, got: float | str | None, tolerance: float) -> bool:
    if isinstance(want, str) or isinstance(got, str):
        return want == got
    if want is None or got is None or math.isnan(want) or math.isnan(got):
        return (want is None or math.isnan(want)) and (got is None or math.isnan(got))
    return abs(got - want) <= tolerance


def tables_in(directory, expected_path) -> list[Path]:
    """The table CSVs of ``directory`` to check: those the expected file pins, else (no file yet) every
    CSV whose row key is known (``ROW_KEYS``)."""
    path = Path(expected_path)
    names = list(read_expected(path).get("tables", {})) if path.is_file() else []
    if names:
        return [_table_csv(directory, name) for name in names]
    found = sorted(p for p in Path(directory).glob("*.csv") if p.stem in ROW_KEYS)
    found += [_table_csv(directory, "claims")] if _table_csv(directory, "claims").is_file() else []
    if not found:
        raise StudyError(f"{directory}: no table CSVs of a finished run ({', '.join(ROW_KEYS)})")
    return found


def _table_csv(directory, name: str) -> Path:
    """A table's CSV in the tables folder; the scoreboard beside it (results/claims.csv)."""
    return Path(directory).parent / "claims.csv" if name == "claims" else Path(directory) / f"{name}.csv"


def update(expected_path, table_csvs: Sequence[str | Path]) -> int:
    """Rewrite the expected file from the run's tables, keeping its keys, skip and tolerance; the cell count."""
    path = Path(expected_path)
    expected = read_expected(path) if path.is_file() else {}
    got = _run_cells(expected, table_csvs)
    data = {"machine": cpu_model(), "tables": {**expected.get("tables", {}), **{t: expected.get("tables", {}).get(t, ROW_KEYS[t])
                                                         for t in got if t in ROW_KEYS}},
            "skip": expected.get("skip", SKIP), "tolerance": expected.get("tolerance", TOLERANCE), "cells": got}
    with atomic_open(path) as out:
        out.write(HEADER)
        yaml.safe_dump(data, out, sort_keys=False, allow_unicode=True, width=120)
    return sum(len(row) for table in got.values() for row in table.values())


MACHINE_INDEPENDENT = {"first_stage"}  # Lucene's BM25 and QL: the same cells on every machine


def fatal(expected_path, lines: Sequence[str]) -> list[str]:
    """The drift lines that fail a check: all of them on the machine the file was pinned on (or a file that names
    none); on another, those of the tables every machine computes alike."""
    pinned_on = read_expected(expected_path).get("machine") if Path(expected_path).is_file() else None
    if not pinned_on or pinned_on == cpu_model():
        return list(lines)
    return [line for line in lines if line.split(" | ", 1)[0] in MACHINE_INDEPENDENT]


def check(expected_path, table_csvs: Sequence[str | Path], missing_ok: bool = False) -> tuple[str, list[str]]:
    """(summary, drift lines) of a run's tables against the expected file (``fatal``: which of them fail). A missing
    file is an error unless ``missing_ok`` (the workflow's rule: a config nobody pinned yet), which reports it."""
    path = Path(expected_path)
    how = f"python -m rankstudy check-expected --expected {path} --tables-dir results/tables --update"
    if not path.is_file():
        if missing_ok:
            return f"no expectations: {path} does not exist; create it from a finished run with: {how}", []
        raise StudyError(f"{path}: no expected results for this config; create them from a finished run with: {how}")
    expected = read_expected(path)
    # a file pinned before the scoreboard was (config/expected/extended.yaml) checks only its tables
    table_csvs = [csv for csv in table_csvs if Path(csv).stem != "claims" or "claims" in expected.get("tables", {})]
    lines = drifts(expected, _run_cells(expected, table_csvs))
    count = sum(len(row) for table in expected.get("cells", {}).values() for row in table.values())
    if lines and len(fatal(path, lines)) < len(lines):
        return (f"{len(lines)} of {count} expected cells of {path} drifted on this machine ({cpu_model()}; pinned on "
                f"{expected['machine']}): trained models may land elsewhere on another CPU, so only the first stage's "
                f"{len(fatal(path, lines))} fail the check (docs/claims.md, 'Another machine')"), lines
    if lines:
        return f"{len(lines)} of {count} expected cells of {path} drifted", lines
    return f"all {count} expected cells of {path} within tolerance", []
