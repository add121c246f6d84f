"""Paired significance tests on per-query metric values (reused by every table of the study).

The papers test with a paired two-sided test at p < 0.05; we use the Wilcoxon signed-rank test
(scipy), which makes no normality assumption about per-query differences. Queries are paired
by id; a query missing from one system is an error, not silently dropped.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from rankstudy.errors import StudyError


def paired_values(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))[:5]
        raise StudyError(f"paired test: the systems were evaluated on different queries (e.g. {', '.join(only)})")
    qids = sorted(a)
    return np.array([a[q] for q in qids], dtype=float), np.array([b[q] for q in qids], dtype=float)


def wilcoxon_p(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Two-sided p-value that per-query values ``a`` and ``b`` differ (1.0 if they never do)."""
    x, y = paired_values(a, b)
    if not np.any(x != y):
        return 1.0
    return float(stats.wilcoxon(x, y, zero_method="wilcox", alternative="two-sided").pvalue)


def row_letters(count: int) -> list[str]:
    """The papers' row labels: a, b, c, ..."""
    if count > 26:
        raise StudyError(f"significance letters label at most 26 rows, got {count}")
    return [chr(ord("a") + i) for i in range(count)]


def significance_letters(systems: Sequence[Mapping[str, float]], alpha: float = 0.05) -> list[str]:
    """For each system (a table row, labelled a, b, c, ... in order), the letters of the rows it is
    significantly better than: higher mean and a paired Wilcoxon p < ``alpha`` (TKL and
    Socialformer papers' superscripts). ``systems`` are per-query values of one measure."""
    labels = row_letters(len(systems))
    means = [float(np.mean(list(values.values()))) if values else float("nan") for values in systems]
    letters = []
    for i, values in enumerate(systems):
        better = [labels[j] for j, other in enumerate(systems)
                  if j != i and means[i] > means[j] and wilcoxon_p(values, other) < alpha]
        letters.append("".join(better))
    return letters
