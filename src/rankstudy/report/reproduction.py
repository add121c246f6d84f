"""The reproduction report: the papers' reported table cells beside this run's (results/reproduction.{csv,md}).

Each paper's reported cells are data (``config/paper/reported/{tk,tkl,socialformer,choppy}.yaml``; format
in docs/claims.md): per study table (``results/tables/{table}.csv``), the paper's table it reproduces,
its columns, and per row the values the paper reports in that order (``null``: the paper gives no value,
or it has not been read in yet). A table's optional ``margin`` is the absolute difference within which
a cell counts as reproduced, where the paper gives one (e.g. its significance margin); without it the
report shows the difference only.

Rows and columns are named as in the study's own tables (the config's labels), and read with the
expected-results reader, so a reported file names cells exactly as ``config/expected/*.yaml`` does.
Where our table gives a cell's spread over repeats (a column "sd (COLUMN)", Choppy's repeated splits), the
report shows it and whether the paper's value lies within one sd of ours.
A config whose data is not the papers' (the default, synthetic study) says so plainly and compares nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.expected import ROW_KEYS, table_cells

COLUMNS = ["paper", "paper table", "table", "row", "column", "reported", "ours", "difference", "our sd", "within sd",
           "margin", "reproduced", "status"]
COMPARED, NOT_REPORTED, NOT_RUN = "compared", "not reported", "not run"
NOT_COMPARABLE = ("This config does not run the papers' datasets (the default study's collections are synthetic), "
                  "so its numbers are not comparable with the papers' reported values and none are compared. The paper "
                  "configs (config/paper/*.yaml) run the papers' datasets; their reported cells are in "
                  "config/paper/reported/.")


def read_reported(path) -> dict[str, Any]:
    """A reported-cells file, checked: every row holds one value (a number or null) per column."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise StudyError(f"{path}: cannot read the reported cells: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("paper"), str) or not isinstance(data.get("tables"), dict):
        raise StudyError(f"{path}: expected a mapping with paper (the citation) and tables (table: its cells)")
    for table, spec in data["tables"].items():
        where = f"{path}: tables: {table}"
        if not isinstance(spec, dict) or not isinstance(spec.get("columns"), list) or \
                not isinstance(spec.get("rows"), dict):
            raise StudyError(f"{where}: expected a mapping with columns (a list) and rows (row: values)")
        if table not in ROW_KEYS:
            raise StudyError(f"{where}: not a table the study writes ({', '.join(ROW_KEYS)})")
        margin = spec.get("margin")
        if margin is not None and (not isinstance(margin, (int, float)) or margin < 0):
            raise StudyError(f"{where}: margin: expected a number >= 0 or null, got {margin!r}")
        for row, values in spec["rows"].items():
            if not isinstance(values, list) or len(values) != len(spec["columns"]) or \
                    not all(v is None or isinstance(v, (int, float)) for v in values):
                raise StudyError(f"{where}: row {row!r}: expected {len(spec['columns'])} values (numbers or null), "
                                 f"one per column {spec['columns']}, got {values!r}")
    return data


def compare(reported: Mapping[str, Any], tables_dir) -> list[dict[str, Any]]:
    """One row per reported cell: the paper's value, ours (from ``tables_dir/{table}.csv``) and the outcome."""
    rows = []
    for table, spec in reported["tables"].items():
        path = Path(tables_dir) / f"{table}.csv"
        ours = table_cells(path, ROW_KEYS[table], []) if path.is_file() else {}
        for row, values in spec["rows"].items():
            for column, value in zip(spec["columns"], values):
                mine = ours.get(row, {})
                rows.append(_cell(reported["paper"], spec, table, row, column, value, mine.get(column),
                                  mine.get(f"sd ({column})")))
    return rows


def _cell(paper: str, spec: Mapping[str, Any], table: str, row: str, column: str,
          value: float | None, ours: float | None, our_sd: float | None = None) -> dict[str, Any]:
    """``our_sd``: the spread of our value over repeats (a table's "sd (COLUMN)", e.g. Choppy's repeated splits)."""
    margin = spec.get("margin")
    status = NOT_REPORTED if value is None else NOT_RUN if ours is None else COMPARED
    difference = ours - value if status == COMPARED else None
    reproduced = "" if difference is None or margin is None else ("yes" if abs(difference) <= margin else "no")
    within = "" if difference is None or our_sd is None else ("yes" if abs(difference) <= our_sd else "no")
    return {"paper": paper, "paper table": spec.get("paper_table", ""), "table": table, "row": row, "column": column,
            "reported": value, "ours": ours, "difference": difference, "our sd": our_sd, "within sd": within,
            "margin": margin, "reproduced": reproduced, "status": status}


def reproduction(reported_paths: Sequence[str | Path], tables_dir, comparable: bool = True) -> pd.DataFrame:
    if not comparable:
        return pd.DataFrame(columns=COLUMNS)
    rows = [cell for path in reported_paths for cell in compare(read_reported(path), tables_dir)]
    return pd.DataFrame(rows, columns=COLUMNS)


def write_reproduction(table: pd.DataFrame, out_prefix, comparable: bool = True) -> None:
    """PREFIX.csv (full precision) and PREFIX.md (a count per status, then a table per paper), atomically."""
    prefix = Path(out_prefix)
    with atomic_open(prefix.parent / f"{prefix.name}.csv") as out:
        table.to_csv(out, index=False)
    if not comparable:
        text = f"# Reproduction\n\n{NOT_COMPARABLE}\n"
    else:
        counts = table["status"].value_counts()
        summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in (COMPARED, NOT_REPORTED, NOT_RUN))
        text = (f"# Reproduction\n\nThe papers' reported table cells beside this run's: {summary}. \"not reported\": "
                "the reported file holds no value for the cell; \"not run\": this run's table has no such cell. "
                "difference = ours - reported.\n")
        for paper, cells in table.groupby("paper", sort=False):
            shown = cells.drop(columns=["paper"]).astype(object)
            shown = shown.where(shown.notna(), None)  # tabulate shows None, not NaN, as missingval
            text += f"\n## {paper}\n\n{shown.to_markdown(index=False, floatfmt='.4f', missingval='')}\n"
    with atomic_open(prefix.parent / f"{prefix.name}.md") as out:
        out.write(text)
