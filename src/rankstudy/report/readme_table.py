"""The README's first table: each paper's central claims, the paper's number beside the study's, holds or fails.

Nothing in it is written by hand. A spec (docs/headline-claims.yaml) names, per row, a claim of the scoreboard
(``id`` and ``B``) in one or more pinned scoreboards, and where the paper's own numbers are (a table row and column
of its reported cells, config/paper/reported/*.yaml, or none). A pinned scoreboard is an expected-results file
that pins the ``claims`` table (``rankstudy.expected``): the default study's own, config/expected/default.yaml,
which every default run checks, or one pinned from a run on real data (docs/scoreboards/*.yaml; such a config
keeps ``expected: ""``, since it must run on another folder of the same layout unchanged).
Beside each pair, how large the study's effect is against the paper's: the effect ratio ER and ΔRI
(``rankstudy.report.effects``), from the pinned means the row shows; "—" where the paper gives no pair, and where
the study's data is not the papers' kind (a study's ``magnitudes``: why its magnitudes do not compare, e.g. the
synthetic data). The outcome leads with the verdict the claim is decided by: for a claim judged over several
seeds, the test pooled over the seeds, then in how many seeds it holds alone.
``python -m rankstudy readme-table`` rewrites the README between its markers; ``--check`` fails if it differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.expected import read_expected
from rankstudy.report.effects import effect_cells, reported_numbers

BEGIN = "<!-- headline-claims: begin (python -m rankstudy readme-table writes this table; do not edit) -->"
END = "<!-- headline-claims: end -->"


def _read_yaml(path: Path, what: str) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise StudyError(f"{path}: cannot read {what}: {error}") from None


def pinned_claims(path: Path) -> dict[str, dict[str, Any]] | None:
    """The pinned scoreboard of an expected-results file ({'id | B': cells}); None if the file does not exist."""
    if not path.is_file():
        return None
    claims = read_expected(path).get("cells", {}).get("claims")
    if claims is None:
        raise StudyError(f"{path}: pins no claims table (pin it with: python -m rankstudy check-expected "
                         f"--expected {path} --tables results/claims.csv ... --update)")
    return claims


def _number(value: float) -> str:
    return f"{value:.3f}" if abs(value) >= 0.1 else f"{value:.3g}"


def study_numbers(cells: Mapping[str, Any]) -> tuple[str, str]:
    """(the study's A vs B with p, and pooled p where the claim is judged over seeds; the outcome) of one pinned
    claim. A claim judged over several seeds is decided by the pooled test: the outcome leads with it, then says
    in how many seeds the claim holds alone."""
    tests = [f"p {cells['p']:.2g}"] if cells.get("p") is not None else []
    outcome = f"**{cells['outcome']}**"
    if cells.get("seeds"):
        if cells.get("pooled p") is not None:
            tests.append(f"pooled p {cells['pooled p']:.2g}")
        holding, seeds = cells["seeds"].split(" of ")
        outcome = f"**{cells['pooled outcome']}** (pooled over {seeds} seeds; {holding} of {seeds} seeds alone)"
    numbers = f"{_number(cells['mean A'])} vs {_number(cells['mean B'])}" + (f" ({'; '.join(tests)})" if tests else "")
    return numbers, outcome


def effect_columns(paper: tuple[float, float] | None, cells: Mapping[str, Any] | None,
                   magnitudes: str | None) -> tuple[str, str]:
    """(ER, ΔRI) cells: the study's pinned means against the paper's pair; "—" without a pair or where the study's
    magnitudes do not compare (``magnitudes``: why)."""
    if magnitudes:
        return f"— ({magnitudes})", "—"
    if cells is None:
        return "—", "—"
    return effect_cells(paper, cells["mean A"], cells["mean B"])


def headline_table(spec_path: Path, root: Path) -> str:
    """The table's markdown: one line per row and study result."""
    spec = _read_yaml(spec_path, "the headline claims spec")
    try:
        return _table(spec, spec_path, root)
    except (KeyError, TypeError, AttributeError) as error:
        raise StudyError(f"{spec_path}: expected studies (data, config, scoreboard) and rows (paper, claim, results: "
                         f"study, id, b; reported: file, table, column, a, b, where); missing or wrong: {error}") from None


def _table(spec: Mapping[str, Any], spec_path: Path, root: Path) -> str:
    studies = spec["studies"]
    pinned = {name: pinned_claims(root / study["scoreboard"]) for name, study in studies.items()}
    lines = ["| paper | claim | the paper's number | data (config) | the study's number | ER | ΔRI | outcome |",
             "|---|---|---|---|---|---|---|---|"]
    for row in spec["rows"]:
        for result in row["results"]:
            paper, paper_number = reported_numbers(result.get("reported", row["reported"]), root)
            study = studies[result["study"]]
            data = f"{result.get('data', study['data'])} (`{study['config']}`)"
            claims = pinned[result["study"]]
            key = f"{result['id']} | {result['b']}"
            if claims is None:
                numbers, outcome = "not pinned yet", f"run it, then pin `{study['scoreboard']}` (docs/claims.md)"
            elif key not in claims:
                raise StudyError(f"{root / study['scoreboard']}: no claim {key!r} (named by {spec_path})")
            else:
                numbers, outcome = study_numbers(claims[key])
            ratio, delta = effect_columns(paper, claims and claims.get(key), study.get("magnitudes"))
            lines.append(f"| {row['paper']} | {row['claim']} | {paper_number} | {data} | {numbers} | {ratio} | {delta} "
                         f"| {outcome} |")
    return "\n".join(lines) + "\n"


def with_table(readme: str, table: str, readme_path: Path) -> str:
    """``readme`` with the text between its markers replaced by ``table``."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise StudyError(f"{readme_path}: expected one pair of markers:\n{BEGIN}\n{END}")
    before, rest = readme.split(BEGIN)
    return before + BEGIN + "\n" + table + END + rest.split(END, 1)[1]


def write_readme_table(spec_path: Path, readme_path: Path, root: Path, check: bool = False) -> bool:
    """Rewrite the README's table (or, with ``check``, only compare); True if the README was already current."""
    readme = readme_path.read_text(encoding="utf-8")
    updated = with_table(readme, headline_table(spec_path, root), readme_path)
    if updated != readme and not check:
        with atomic_open(readme_path) as out:
            out.write(updated)
    return updated == readme
