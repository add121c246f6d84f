"""Repeated splits of one truncation study (``choppy.repeats``; docs/choppy.md, "On the paper's data").

The Choppy paper reports one random 80/20 split of 250 topics. Repeat ``r`` of a study splits the queries
and trains every model with the seed ``seed + r`` (repeat 0 is the single study), so all methods of a
repeat share its split; with query-id files the split is fixed and only the training seed changes.
``pool`` puts the repeats side by side: each method's mean test value over the repeats with its standard
deviation (the split-to-split spread the paper does not have), and every (repeat, query) value, which the
table's and the claims' paired tests pool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from rankstudy.errors import StudyError
from rankstudy.truncation.methods import GREEDY, method_name

__all__ = ["method_name", "pool", "query_key", "read_study", "repeat_seed"]  # method_name: report.claims reads it here


def repeat_seed(seed: int, repeat: int) -> int:
    """The seed of repeat ``repeat`` (its split and its models' training)."""
    if repeat < 0:
        raise StudyError(f"a repeat is a number >= 0, got {repeat}")
    return seed + repeat


def read_study(directory: Path) -> dict[str, Any]:
    """One study's outputs (``experiment.write_study``)."""
    directory = Path(directory)
    try:
        return {"results": pd.read_csv(directory / "results.csv"),
                "per_query": pd.read_csv(directory / "per_query.csv", dtype={"qid": str}),
                "fig1": json.loads((directory / "fig1.json").read_text(encoding="utf-8")),
                "settings": json.loads((directory / "settings.json").read_text(encoding="utf-8"))}
    except (OSError, ValueError) as error:
        raise StudyError(f"{directory}: cannot read a truncation study's outputs: {error}") from None


def pool(studies: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The repeats of one study (in repeat order) as one study: ``results`` per metric and method with the
    mean over repeats of ``value``, ``mean_cut``, ``cut_sd`` and ``cut_rho_oracle``, plus ``value_sd`` (over
    repeats, NaN for one) and ``repeats``; ``per_query`` with a ``repeat`` column; Fig. 1 from repeat 0; the
    settings of repeat 0 with each repeat's split sizes and Greedy-k's k."""
    if not studies:
        raise StudyError("no truncation studies to pool")
    results, per_query, greedy = [], [], {}
    for repeat, study in enumerate(studies):
        rows = study["results"].copy()
        for _, row in rows[rows["method"].str.startswith(GREEDY)].iterrows():
            greedy.setdefault(row["metric"], []).append(int(round(row["mean_cut"])))
        rows["method"] = rows["method"].map(method_name)
        results.append(rows.assign(repeat=repeat))
        queries = study["per_query"].copy()
        queries["method"] = queries["method"].map(method_name)
        per_query.append(queries.assign(repeat=repeat))
    stacked = pd.concat(results, ignore_index=True)
    grouped = stacked.groupby(["metric", "method"], sort=False)
    pooled = grouped[["value", "mean_cut", "cut_sd", "cut_rho_oracle"]].mean()
    pooled.insert(1, "value_sd", grouped["value"].std(ddof=1))
    pooled["repeats"] = grouped["value"].size()
    if (pooled["repeats"] != len(studies)).any():
        raise StudyError("the repeats of a truncation study compare different methods")
    settings = {**studies[0]["settings"], "repeats": len(studies),
                "splits": [study["settings"]["split"] for study in studies], "greedy_k": greedy}
    return {"results": pooled.reset_index(), "per_query": pd.concat(per_query, ignore_index=True),
            "fig1": studies[0]["fig1"], "settings": settings}


def query_key(rows: pd.DataFrame) -> pd.Series:
    """The key of a per-query value: ``repeat/qid`` (a query is in the test set of several repeats)."""
    if "repeat" not in rows.columns:
        return rows["qid"].astype(str)
    return rows["repeat"].astype(str) + "/" + rows["qid"].astype(str)
