"""Paired significance tests on per-query metric values (reused by every table of the study).

The papers test with a paired two-sided test at p < 0.05; we use the Wilcoxon signed-rank test
(scipy), which makes no normality assumption about per-query differences. Queries are paired
by id; a query missing from one system is an error, not silently dropped.
"""

from __future__ import annotations

from typing import Mapping

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
