"""Paired significance tests on per-query metric values (reused by every table of the study).

The papers test with a paired two-sided test at p < 0.05. The default is the Wilcoxon signed-rank
test (scipy), which makes no normality assumption about per-query differences; ``test="t"`` is the
paired t-test the Socialformer paper uses. Queries are paired by id; a query missing from one
system is an error, not silently dropped.
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


# Up to this many pairs (zeros included) scipy's Wilcoxon is exact: with ties or zeros it enumerates the 2**n
# sign flips in a permutation test, calling its statistic once per flip (~2 s a test at 13 pairs)
EXACT_SIGN_FLIPS = 13


def wilcoxon_p(a: Mapping[str, float], b: Mapping[str, float], alternative: str = "two-sided") -> float:
    """p-value that per-query values ``a`` and ``b`` differ (1.0 if they never do); ``alternative``
    as scipy's: "greater" tests a > b one-sided (the claims' non-inferiority test)."""
    x, y = paired_values(a, b)
    if not np.any(x != y):
        return 1.0
    if 2 <= len(x) <= EXACT_SIGN_FLIPS:  # one pair: scipy's exact test, without a permutation
        return signed_rank_exact_p(x - y, alternative)
    return float(stats.wilcoxon(x, y, zero_method="wilcox", alternative=alternative).pvalue)


def signed_rank_exact_p(differences: np.ndarray, alternative: str = "two-sided") -> float:
    """The signed-rank test's exact p-value over every sign flip of ``differences`` (zeros dropped from the
    ranks, Wilcoxon's way; ties at their average rank): scipy's own small-sample permutation test, given the
    statistic vectorized over the flips (the same p-value as ``stats.wilcoxon``, in milliseconds)."""
    ranks = np.zeros_like(differences)
    nonzero = differences != 0
    ranks[nonzero] = stats.rankdata(np.abs(differences[nonzero]))

    def positive_rank_sum(flipped: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum((flipped > 0) * ranks, axis=axis)

    return float(stats.permutation_test((differences,), positive_rank_sum, permutation_type="samples",
                                        vectorized=True, alternative=alternative).pvalue)


def paired_t_p(a: Mapping[str, float], b: Mapping[str, float], alternative: str = "two-sided") -> float:
    """Paired t-test p-value (1.0 if the values never differ); ``alternative`` as in ``wilcoxon_p``."""
    x, y = paired_values(a, b)
    if not np.any(x != y):
        return 1.0
    return float(stats.ttest_rel(x, y, alternative=alternative).pvalue)


TESTS = {"wilcoxon": wilcoxon_p, "t": paired_t_p}


def row_letters(count: int) -> list[str]:
    """The papers' row labels: a, b, c, ..."""
    if count > 26:
        raise StudyError(f"significance letters label at most 26 rows, got {count}")
    return [chr(ord("a") + i) for i in range(count)]


def significance_letters(systems: Sequence[Mapping[str, float]], alpha: float = 0.05,
                         test: str = "wilcoxon") -> list[str]:
    """For each system (a table row, labelled a, b, c, ... in order), the letters of the rows it is
    significantly better than: higher mean and a paired ``test`` (``TESTS``: Wilcoxon or t) p <
    ``alpha`` (TKL and Socialformer papers' superscripts). ``systems`` are per-query values of one measure."""
    if test not in TESTS:
        raise StudyError(f"unknown significance test {test!r}; expected one of {', '.join(TESTS)}")
    p_value = TESTS[test]
    labels = row_letters(len(systems))
    means = [float(np.mean(list(values.values()))) if values else float("nan") for values in systems]
    letters = []
    for i, values in enumerate(systems):
        better = [labels[j] for j, other in enumerate(systems)
                  if j != i and means[i] > means[j] and p_value(values, other) < alpha]
        letters.append("".join(better))
    return letters
