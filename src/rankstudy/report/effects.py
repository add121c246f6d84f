"""How large a reproduced effect is beside the paper's: the effect ratio and the delta of relative improvement of
Breuer et al., "How to Measure the Reproducibility of System-oriented IR Experiments" (SIGIR 2020), made for
comparisons across collections (the repro_eval package computes them over run files):

    ER  = (mean of A − mean of B, reproduced) / (mean of A − mean of B, original)
    RI  = (mean of A − mean of B) / mean of B
    ΔRI = RI(original) − RI(reproduced)

for an advanced system A over a baseline B (the mean of the per-topic improvements is the difference of the means,
so the two means of each side are all they need). ER 1 is the paper's effect size, 0 no effect, negative the
opposite direction; ΔRI 0 is the paper's relative improvement, positive a smaller one, negative a larger one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from rankstudy.errors import StudyError
from rankstudy.report.reproduction import read_reported


@dataclass(frozen=True)
class Effect:
    """ER and ΔRI of a reproduced pair against the original one; None where undefined: ER without an effect in the
    original pair, ΔRI where a baseline is not positive (a relative improvement over 0 or a negative score, such as
    Choppy's penalised DCG, has no meaning)."""

    effect_ratio: float | None
    delta_ri: float | None


def effect(original_a: float, original_b: float, reproduced_a: float, reproduced_b: float) -> Effect:
    """ER and ΔRI of the reproduced means of A and B against the original ones."""
    original, reproduced = original_a - original_b, reproduced_a - reproduced_b
    if original == 0:
        return Effect(None, None)
    if original_b <= 0 or reproduced_b <= 0:
        return Effect(reproduced / original, None)
    return Effect(reproduced / original, original / original_b - reproduced / reproduced_b)


def reported_numbers(spec: Mapping[str, Any] | None, root: Path) -> tuple[tuple[float, float] | None, str]:
    """The paper's A and B cells of a reported-cells file and their text, e.g. '0.634 vs 0.594 (TREC DL 2019
    documents)' (``spec``: file, table, column, a, b, where; or none: why the paper has no such cells); no pair
    where the paper gives none."""
    if "none" in spec:
        return None, f"— ({spec['none']})"
    path = root / spec["file"]
    table = read_reported(path)["tables"].get(spec["table"])
    if not table or spec["column"] not in table["columns"]:
        raise StudyError(f"{path}: no table {spec['table']!r} with column {spec['column']!r}")
    column = table["columns"].index(spec["column"])
    values = []
    for side in ("a", "b"):
        row = table["rows"].get(spec[side])
        if row is None:
            raise StudyError(f"{path}: {spec['table']} has no row {spec[side]!r}")
        values.append(row[column])
    if None in values:
        return None, f"— (not legible in the paper's text: {spec['file']})"
    return (values[0], values[1]), f"{values[0]:g} vs {values[1]:g} ({spec['where']})"


def effect_cells(paper: tuple[float, float] | None, mean_a: float | None, mean_b: float | None) -> tuple[str, str]:
    """(ER, ΔRI) as table cells, e.g. ("1.93", "-0.359"); "—" where there is no pair or the measure is undefined."""
    if paper is None or mean_a is None or mean_b is None:
        return "—", "—"
    result = effect(*paper, mean_a, mean_b)
    ratio = "—" if result.effect_ratio is None else f"{result.effect_ratio:.2f}"
    delta = "—" if result.delta_ri is None else f"{result.delta_ri:+.3f}"
    return ratio, delta
