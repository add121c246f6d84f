"""The names a truncation study writes (``experiment.write_study``: results.csv, per_query.csv) and the study plan,
the claims and the reports read: the measures a cut is scored by and the methods' names, in one place. Plain
constants, no imports: the plan reads them when the DAG is built."""

from __future__ import annotations

from typing import Iterable

F1, DCG = "f1", "dcg"
METRICS = (F1, DCG)  # F1 and the penalised DCG (truncation.tables)
METRIC_NAMES = {F1: "F1", DCG: "DCG"}  # as the tables and figures name them

ORACLE, GREEDY, BICUT, CHOPPY, FIXED = "Oracle", "Greedy-k", "BiCut", "Choppy", "Fixed"
ORDER = (ORACLE, FIXED, GREEDY, BICUT, CHOPPY)  # Table 1's rows: each method's name starts with one of these


def fixed(k: int) -> str:
    """The Fixed-k baseline's name for one k: ``Fixed-5``."""
    return f"{FIXED}-{k}"


def greedy(k: int) -> str:
    """Greedy-k's name in one study, with the k chosen on its training queries: ``Greedy-k (k=55)``."""
    return f"{GREEDY} (k={k})"


def method_name(method: str) -> str:
    """A study's method name without the chosen k (``Greedy-k (k=55)`` -> ``Greedy-k``): k varies by split."""
    return GREEDY if method.startswith(GREEDY) else method


def methods(fixed_k: Iterable[int]) -> list[str]:
    """Table 1's methods with these Fixed-k baselines: the oracle, the baselines, BiCut, Choppy."""
    return [ORACLE, GREEDY, BICUT, CHOPPY] + [fixed(k) for k in fixed_k]
