"""Truncation baselines over metric tables ``tables[Q, N]`` (see ``tables``; padded rows).

Cuts are 1-based: cut k keeps the top k documents, so its value is ``tables[q, k-1]``. A cut
beyond N (or beyond a short list's length) keeps the whole list, which the padding encodes.
"""

from __future__ import annotations

import numpy as np


def _tables(tables) -> np.ndarray:
    tables = np.asarray(tables, dtype=np.float64)
    if tables.ndim != 2 or tables.shape[1] == 0:
        raise ValueError(f"expected tables of shape [queries, N >= 1], got {tables.shape}")
    return tables


def evaluate_cuts(tables, cuts) -> np.ndarray:
    """Per-query metric ``tables[q, min(cuts[q], N) - 1]``; cuts must be >= 1."""
    tables = _tables(tables)
    cuts = np.asarray(cuts, dtype=np.int64)
    if cuts.shape != (tables.shape[0],):
        raise ValueError(f"expected {tables.shape[0]} cuts, got shape {cuts.shape}")
    if (cuts < 1).any():
        raise ValueError("cuts are 1-based and must be >= 1")
    return tables[np.arange(tables.shape[0]), np.minimum(cuts, tables.shape[1]) - 1]


def fixed_k(tables, k: int) -> float:
    """Mean metric when every list is cut at k (k beyond a list's end keeps the whole list)."""
    tables = _tables(tables)
    return float(evaluate_cuts(tables, np.full(tables.shape[0], k)).mean())


def greedy_k(train_tables) -> int:
    """The 1-based k with the best mean metric over the (training) tables; ties: the smallest k."""
    return int(np.argmax(_tables(train_tables).mean(axis=0))) + 1


def oracle(tables) -> tuple[np.ndarray, np.ndarray]:
    """``(best value per query, its 1-based cut)``; ties: the smallest cut (within the real list)."""
    tables = _tables(tables)
    best = np.argmax(tables, axis=1)
    return tables[np.arange(tables.shape[0]), best], best + 1
