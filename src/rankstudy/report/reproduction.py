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

A table may also give the paper's significance superscripts: ``letters`` (the paper's rows in its own order,
so that a is the first) and ``significance`` (per row, one string of letters per column, as printed: "a-fh" is
a, b, c, d, e, f and h; "" none; null not legible). The report names the rows a cell is significantly better
than in the paper ("paper sig") and in our table (its "COLUMN sig" letters, a, b, ... in our row order), and
whether the two sets agree.

A config whose data is not the papers' (the default, synthetic study) compares no numbers; it lists the paper
claims of the scoreboard (``results/claims.csv``, claims with ``source: paper``) with whether each holds here,
i.e. whether its direction agrees with the paper's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.expected import ROW_KEYS, table_cells
from rankstudy.report.replicability import seed_agreement_markdown
from rankstudy.significance import row_letters

COLUMNS = ["paper", "paper table", "table", "row", "column", "reported", "ours", "difference", "our sd", "within sd",
           "margin", "reproduced", "paper sig", "our sig", "sig agrees", "status"]
DIRECTION_COLUMNS = ["id", "paper", "claim", "outcome", "direction agrees"]
EFFECT_COLUMNS = ["id", "paper", "claim", "A", "B", "paper A vs B", "ours A vs B", "ER", "ΔRI", "outcome"]
COMPARED, NOT_REPORTED, NOT_RUN = "compared", "not reported", "not run"
NOT_COMPARABLE = ("This config does not run the papers' datasets, so its numbers are not comparable with the "
                  "papers' reported values and none are compared. The paper "
                  "configs (config/paper/*.yaml) run the papers' datasets; their reported cells are in "
                  "config/paper/reported/. The direction of each paper claim can be compared: below, every claim of "
                  "the scoreboard whose source is a paper, with whether it holds on this config's data.")


def expand_letters(text: str) -> list[str]:
    """A paper's significance superscript as letters: "a-fhj" -> a, b, c, d, e, f, h, j."""
    letters, i = [], 0
    while i < len(text):
        if i + 2 < len(text) and text[i + 1] == "-":
            if not text[i] < text[i + 2]:
                raise ValueError(f"range {text[i:i + 3]!r} does not ascend")
            letters += [chr(c) for c in range(ord(text[i]), ord(text[i + 2]) + 1)]
            i += 3
        else:
            letters.append(text[i])
            i += 1
    if not all("a" <= letter <= "z" for letter in letters):
        raise ValueError(f"{text!r}: expected letters a-z and ranges such as a-f")
    return letters


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
        _check_significance(spec, where)
    return data


def _check_significance(spec: Mapping[str, Any], where: str) -> None:
    """``letters`` (the paper's rows in order) and ``significance`` (row: a superscript or null per column)."""
    significance = spec.get("significance")
    if significance is None:
        return
    letters = spec.get("letters")
    if not isinstance(letters, list) or not letters or not all(isinstance(name, str) for name in letters):
        raise StudyError(f"{where}: significance needs letters: the paper's row names in its order (a, b, ...)")
    if not isinstance(significance, dict):
        raise StudyError(f"{where}: significance: expected a mapping row: superscripts")
    for row, marks in significance.items():
        if row not in spec["rows"]:
            raise StudyError(f"{where}: significance: row {row!r} is not one of rows")
        if not isinstance(marks, list) or len(marks) != len(spec["columns"]) or \
                not all(mark is None or isinstance(mark, str) for mark in marks):
            raise StudyError(f"{where}: significance: row {row!r}: expected {len(spec['columns'])} strings or null, "
                             f"one per column, got {marks!r}")
        for mark in marks:
            try:
                unknown = [letter for letter in expand_letters(mark or "") if ord(letter) - ord("a") >= len(letters)]
            except ValueError as error:
                raise StudyError(f"{where}: significance: row {row!r}: {error}") from None
            if unknown:
                raise StudyError(f"{where}: significance: row {row!r}: letter {unknown[0]!r} names no row of letters "
                                 f"({len(letters)} rows)")


def compare(reported: Mapping[str, Any], tables_dir) -> list[dict[str, Any]]:
    """One row per reported cell: the paper's value, ours (from ``tables_dir/{table}.csv``) and the outcome."""
    rows = []
    for table, spec in reported["tables"].items():
        path = Path(tables_dir) / f"{table}.csv"
        ours = table_cells(path, ROW_KEYS[table], []) if path.is_file() else {}
        our_marks = _our_significance(path, ROW_KEYS[table]) if path.is_file() else {}
        paper_marks = spec.get("significance") or {}
        for row, values in spec["rows"].items():
            for i, (column, value) in enumerate(zip(spec["columns"], values)):
                mine = ours.get(row, {})
                cell = _cell(reported["paper"], spec, table, row, column, value, mine.get(column),
                             mine.get(f"sd ({column})"))
                paper_mark = paper_marks.get(row, [None] * len(values))[i]
                cell.update(_significance(None if paper_mark is None else
                                          [spec["letters"][ord(c) - ord("a")] for c in expand_letters(paper_mark)],
                                          our_marks.get(row, {}).get(column)))
                rows.append(cell)
    return rows


def _our_significance(path: Path, keys: list[str]) -> dict[str, dict[str, list[str]]]:
    """{row: {column: names of the rows it is significantly better than}} from a table's "COLUMN sig" letters
    (a, b, ... in the table's row order)."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    columns = [c for c in table.columns if c.endswith(" sig")]
    if not columns:  # a table without significance letters (e.g. Choppy's Table 1, of any length)
        return {}
    names = table[keys].agg(" | ".join, axis=1).tolist()
    by_letter = dict(zip(row_letters(len(names)), names))
    marks = {}
    for column in columns:
        for name, letters in zip(names, table[column]):
            marks.setdefault(name, {})[column[:-len(" sig")]] = [by_letter[letter] for letter in letters]
    return marks


def _significance(paper: list[str] | None, ours: list[str] | None) -> dict[str, str]:
    shown = lambda names: "" if names is None else (", ".join(names) or "none")  # noqa: E731
    agrees = "" if paper is None or ours is None else ("yes" if set(paper) == set(ours) else "no")
    return {"paper sig": shown(paper), "our sig": shown(ours), "sig agrees": agrees}


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


def _scoreboard(claims_csv, needed: set[str]) -> pd.DataFrame:
    try:
        claims = pd.read_csv(claims_csv, keep_default_na=False)
    except (OSError, ValueError) as error:
        raise StudyError(f"{claims_csv}: cannot read the claims scoreboard: {error}") from None
    missing = needed - set(claims.columns)
    if missing:
        raise StudyError(f"{claims_csv}: not a claims scoreboard (no column {', '.join(sorted(missing))})")
    return claims


def claim_directions(claims_csv) -> pd.DataFrame:
    """The paper claims of a scoreboard (results/claims.csv), one row per claim: its outcome and whether its
    direction agrees with the paper's on every comparison ("no" if one disagrees, "" if none was run)."""
    claims = _scoreboard(claims_csv, {"id", "paper", "source", "claim", "outcome", "direction agrees"})
    rows = []
    for claim_id, part in claims[claims["source"] == "paper"].groupby("id", sort=False):
        agrees = [value for value in part["direction agrees"] if value]
        outcomes = set(part["outcome"])
        rows.append({"id": claim_id, "paper": part["paper"].iloc[0], "claim": part["claim"].iloc[0],
                     "outcome": outcomes.pop() if len(outcomes) == 1 else ", ".join(part["outcome"]),
                     "direction agrees": "" if not agrees else "yes" if all(v == "yes" for v in agrees) else "no"})
    return pd.DataFrame(rows, columns=DIRECTION_COLUMNS)


def claim_effects(claims_csv) -> pd.DataFrame:
    """The comparisons of a scoreboard that name the paper's own pair (a claim's ``reported``), one row per (claim,
    B): the paper's A vs B, this run's, the effect ratio ER and ΔRI (rankstudy.report.effects, as the scoreboard
    computed them) and the outcome (pooled over seeds where the claim pools them)."""
    claims = _scoreboard(claims_csv, {"id", "paper", "claim", "A", "B", "mean A", "mean B", "outcome",
                                      "paper A vs B", "ER", "ΔRI"})
    rows = []
    for _, row in claims[claims["paper A vs B"] != ""].iterrows():
        ours = f"{float(row['mean A']):.3f} vs {float(row['mean B']):.3f}" if row["mean A"] != "" else ""
        pooled = row.get("pooled outcome", "")
        rows.append({"id": row["id"], "paper": row["paper"], "claim": row["claim"], "A": row["A"], "B": row["B"],
                     "paper A vs B": row["paper A vs B"], "ours A vs B": ours, "ER": row["ER"], "ΔRI": row["ΔRI"],
                     "outcome": f"{pooled} (pooled over seeds)" if pooled else row["outcome"]})
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def reproduction(reported_paths: Sequence[str | Path], tables_dir, comparable: bool = True) -> pd.DataFrame:
    if not comparable:
        return pd.DataFrame(columns=COLUMNS)
    rows = [cell for path in reported_paths for cell in compare(read_reported(path), tables_dir)]
    return pd.DataFrame(rows, columns=COLUMNS)


def write_reproduction(table: pd.DataFrame, out_prefix, comparable: bool, directions: pd.DataFrame | None,
                       effects: pd.DataFrame, seeds: pd.DataFrame) -> None:
    """PREFIX.csv (full precision) and PREFIX.md (a count per status, then a table per paper, then the paper
    claims' directions when ``directions`` is given, then the effect sizes, also PREFIX_effects.csv, and the seeds'
    agreement, also PREFIX_seeds.csv), atomically."""
    prefix = Path(out_prefix)
    for name, frame in ((prefix.name, table), (f"{prefix.name}_effects", effects), (f"{prefix.name}_seeds", seeds)):
        with atomic_open(prefix.parent / f"{name}.csv") as out:
            frame.to_csv(out, index=False)
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
    if directions is not None:
        counts = directions["direction agrees"].value_counts()
        text += (f"\n## The papers' claims: does the direction agree?\n\nEvery claim of the scoreboard "
                 f"(results/claims.md) whose source is a paper: {counts.get('yes', 0)} agree, {counts.get('no', 0)} "
                 "disagree, the others were not run. \"direction agrees\": A is above B (within the claim's margin) "
                 "on each of its comparisons, whatever the test's p; the outcome adds the test.\n\n"
                 f"{directions.to_markdown(index=False)}\n")
    text += effects_markdown(effects) + seed_agreement_markdown(seeds)
    with atomic_open(prefix.parent / f"{prefix.name}.md") as out:
        out.write(text)


def effects_markdown(effects: pd.DataFrame) -> str:
    """The report's section on how large each reproduced effect is beside the paper's."""
    text = ("\n## How large each effect is beside the paper's\n\nEvery comparison of the scoreboard that names the "
            "paper's own A and B cells (docs/claims.md, \"How large the reproduced effect is\"): ER = (A - B, ours) / "
            "(A - B, the paper's), 1 the paper's effect, 0 none, negative the opposite direction; ΔRI = RI(paper) - "
            "RI(ours) with RI = (A - B) / B, 0 the paper's relative improvement, positive a smaller one. \"—\": "
            "undefined (no effect in the paper's pair; ΔRI: a baseline not above 0). The measures are made for "
            "comparing across collections, so the paper's data need not be this run's.\n\n")
    if effects.empty:
        return text + "No claim of this config names the paper's cells (a claim's `reported`).\n"
    return text + effects.to_markdown(index=False) + "\n"
