"""The claims scoreboard: each paper's headline claims tested on the study's per-query values.

A claim (config ``claims:``, docs/claims.md) compares system A with system B, or with a fixed value,
on one measure, with a paired test (``rankstudy.significance``) at level alpha:

- ``better``: A's mean is higher and the two-sided paired test has p < alpha (the tables' "sig" rule).
- ``not_worse``: non-inferiority with a stated margin: the one-sided paired test that
  A + margin > B has p < alpha, and mean A >= mean B - margin (a margin of 0.01 nDCG@10 says
  "at most 0.01 worse").
- ``bounds``: A >= B on every query (an upper bound such as the Oracle's; no test, no p).

Each claim names its source: ``paper`` (the paper says it; ``quote`` holds its sentence) or ``study`` (the
study's own check, e.g. one the synthetic data makes possible). Besides the outcome, the scoreboard says
whether the direction agrees (A above B, within the margin for not_worse) whatever the test's p: the
default study's data is not the papers', so for it the direction is what compares with the paper.

The workflow resolves every reference to a file and marks a claim "not run" when this config does
not produce its systems; this module only reads the per-query values and decides. A claim that fails
is reported failing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.evaluate import read_metrics
from rankstudy.formats import read_qrels
from rankstudy.report.columns import SPEED_MEASURE
from rankstudy.report.effects import effect_cells, reported_numbers
from rankstudy.report.tables import docs_per_ms, metric_rows, per_query_values
from rankstudy.significance import TESTS
from rankstudy.truncation.repeats import method_name, query_key

HOLDS, FAILS, NOT_RUN = "holds", "fails", "not run"
COLUMNS = ["id", "paper", "source", "claim", "measure", "on", "A", "B", "mean A", "mean B", "difference", "test", "p",
           "alpha", "margin", "queries", "outcome", "direction agrees", "seeds", "pooled p", "pooled outcome",
           "paper A vs B", "ER", "ΔRI", "note", "quote"]
SOURCES = ("paper", "study")
TOLERANCE = 1e-12  # "bounds": ties within float noise are not violations


def reference_values(ref: Mapping[str, Any], measure: str) -> dict[str, float]:
    """Per-query values of one side of a claim: a metric CSV's system or a truncation method."""
    if "value" in ref:
        raise StudyError("a fixed value has no per-query values")
    path = ref["path"]
    if "model" in ref:  # results/efficiency.csv: one measured throughput, not per query
        if measure != SPEED_MEASURE:
            raise StudyError(f"{path}: the efficiency benchmark measures {SPEED_MEASURE}, not {measure}")
        _, speed = docs_per_ms(path)
        if ref["model"] not in speed:
            raise StudyError(f"{path}: no docs/ms of model {ref['model']!r} (models: {', '.join(sorted(speed))})")
        return {"benchmark": float(speed[ref["model"]])}
    if "method" in ref:  # results/choppy/{name}/per_query.csv: metric, method, qid, value, cut[, repeat]
        try:
            rows = pd.read_csv(path, dtype={"qid": str})
        except (OSError, ValueError) as error:
            raise StudyError(f"{path}: cannot read truncation per-query CSV: {error}") from None
        methods = rows["method"].map(method_name)
        chosen = rows[(methods == ref["method"]) & (rows["metric"] == measure)]
        if chosen.empty:
            raise StudyError(f"{path}: no {measure} values of method {ref['method']!r} "
                             f"(methods: {', '.join(sorted(set(methods)))})")
        return dict(zip(query_key(chosen), chosen["value"].astype(float)))  # repeats pooled: one pair per repeat
    rows = metric_rows(read_metrics([path]), ref["dataset"], ref["system"], ref["split"])
    values = per_query_values(rows, measure)
    if not values:
        raise StudyError(f"{path}: no per-query {measure} values")
    return values


def evidence_queries(qrels_path, truth_path, boundary: int, late: bool, rel_threshold: int = 1) -> set[str]:
    """Queries whose relevant documents' evidence (synthetic truth.json) all starts at token
    ``boundary`` or later (``late``), or those with some evidence before it: a model that reads the
    first ``boundary`` tokens sees no evidence for a late query."""
    truth = json.loads(Path(truth_path).read_text(encoding="utf-8"))
    if "relevant" not in truth:
        raise StudyError(f"{truth_path}: expected a synthetic dataset's truth.json with 'relevant'")
    chosen = set()
    for qid, judged in read_qrels(qrels_path).items():
        starts = [truth["relevant"][qid][docid]["evidence_start"] for docid, grade in judged.items()
                  if grade >= rel_threshold]
        if starts and (min(starts) >= boundary) == late:
            chosen.add(qid)
    return chosen


def evaluate(claim: Mapping[str, Any], a: Mapping[str, float], b: Mapping[str, float] | float) -> dict[str, Any]:
    """Outcome of one claim on per-query values ``a`` and ``b`` (or a fixed value ``b``)."""
    if not isinstance(b, Mapping):
        b = {qid: float(b) for qid in a}
    result: dict[str, Any] = {"queries": len(a), "mean A": float(np.mean(list(a.values()))) if a else None,
                              "mean B": float(np.mean(list(b.values()))) if b else None}
    if not a:
        return {**result, "outcome": NOT_RUN, "note": "no queries to compare"}
    result["difference"] = result["mean A"] - result["mean B"]
    direction, test = claim["direction"], claim.get("test", "wilcoxon")
    alpha = claim.get("alpha", 0.05)
    if direction == "bounds":
        below = sum(a[qid] < b[qid] - TOLERANCE for qid in a)
        return {**result, "outcome": HOLDS if below == 0 else FAILS, "direction agrees": "yes" if below == 0 else "no",
                "note": f"{below} of {len(a)} queries below B"}
    if test not in TESTS:
        raise StudyError(f"claim {claim['id']}: unknown test {test!r}; expected one of {', '.join(TESTS)}")
    if direction == "better":
        p = TESTS[test](a, b)
        agrees = result["difference"] > 0
    elif direction == "not_worse":
        margin = claim["margin"]
        p = TESTS[test]({qid: value + margin for qid, value in a.items()}, b, alternative="greater")
        # the mean too: Wilcoxon's ranks let many small wins outvote one query lost entirely
        agrees = result["difference"] >= -margin
    else:
        raise StudyError(f"claim {claim['id']}: unknown direction {direction!r}; expected better, not_worse or bounds")
    return {**result, "p": p, "outcome": HOLDS if agrees and p < alpha else FAILS,
            "direction agrees": "yes" if agrees else "no"}


def claim_row(claim: Mapping[str, Any]) -> dict[str, Any]:
    """One scoreboard row: the claim's resolved spec (see the rule ``claims``), evaluated."""
    if claim.get("source") not in SOURCES:
        raise StudyError(f"claim {claim['id']}: source must be one of {', '.join(SOURCES)}, "
                         f"got {claim.get('source')!r}")
    row = {"id": claim["id"], "paper": claim["paper"], "source": claim["source"], "quote": claim.get("quote", ""),
           "claim": claim["statement"], "measure": claim["measure"],
           "on": claim.get("on", ""), "A": claim["a"]["label"], "B": claim["b"]["label"],
           "test": "" if claim["direction"] == "bounds" else claim.get("test", "wilcoxon"),
           "alpha": claim.get("alpha", 0.05), "margin": claim.get("margin")}
    if claim.get("not_run"):
        return {**row, "outcome": NOT_RUN, "note": claim["not_run"]}
    subset = claim.get("subset")
    chosen = evidence_queries(subset["qrels"], subset["truth"], subset["boundary"], subset["evidence"] == "late",
                              subset.get("rel_threshold", 1)) if subset else None

    def side(ref: Mapping[str, Any], seed: str | None = None) -> Mapping[str, float] | float:
        """One side's values (those of ``seed`` where it has several), restricted to the subset."""
        if "value" in ref:
            return ref["value"]
        values = reference_values({**ref, **ref["seeds"][seed]} if seed else ref, claim["measure"])
        return values if chosen is None else {qid: value for qid, value in values.items() if qid in chosen}

    row.update(evaluate(claim, side(claim["a"]), side(claim["b"])))
    seeds = seeds_of(claim)
    if seeds:
        per_seed = {seed: (side(claim["a"], seed if "seeds" in claim["a"] else None),
                           side(claim["b"], seed if "seeds" in claim["b"] else None)) for seed in seeds}
        holding = sum(evaluate(claim, a, b)["outcome"] == HOLDS for a, b in per_seed.values())
        pooled = evaluate(claim, *(_pool({seed: pair[i] for seed, pair in per_seed.items()}) for i in (0, 1)))
        row.update({"seeds": f"{holding} of {len(seeds)}", "pooled p": pooled.get("p"),
                    "pooled outcome": pooled["outcome"]})
    if "reported" in claim:
        paper, row["paper A vs B"] = reported_numbers(claim["reported"], Path.cwd())
        row["ER"], row["ΔRI"] = effect_cells(paper, row["mean A"], row["mean B"])
    return row


def seeds_of(claim: Mapping[str, Any]) -> list[str]:
    """The seeds a claim is judged on one by one: those of the side(s) trained with several (both sides':
    the seeds they share); none when neither side has several."""
    sides = [claim[key]["seeds"] for key in ("a", "b") if "seeds" in claim[key]]
    if not sides:
        return []
    shared = [seed for seed in sides[0] if all(seed in other for other in sides[1:])]
    if not shared:
        raise StudyError(f"claim {claim['id']}: A and B were trained with no seed in common")
    return shared


def _pool(values_by_seed: Mapping[str, Mapping[str, float] | float]) -> Mapping[str, float] | float:
    """Per-query values of several seeds as one sample of (seed, query) pairs; a fixed value stays one."""
    first = next(iter(values_by_seed.values()))
    if not isinstance(first, Mapping):
        return first
    return {f"{seed}/{qid}": value for seed, values in values_by_seed.items() for qid, value in values.items()}


def scoreboard(claims: list[Mapping[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([claim_row(claim) for claim in claims], columns=COLUMNS)


def write_scoreboard(table: pd.DataFrame, out_prefix) -> None:
    """PREFIX.csv (full precision) and PREFIX.md (a count of outcomes, then the table), atomically."""
    prefix = Path(out_prefix)
    table = table.reindex(columns=COLUMNS)
    with atomic_open(prefix.parent / f"{prefix.name}.csv") as out:
        table.to_csv(out, index=False)
    counts = []
    for source in SOURCES:
        outcomes = table.loc[table["source"] == source, "outcome"]
        if len(outcomes):
            counts.append(f"{source} claims: "
                          + ", ".join(f"{(outcomes == o).sum()} {o}" for o in (HOLDS, FAILS, NOT_RUN)))
    summary = "; ".join(counts) or "no claims"
    shown = table.drop(columns=["test", "alpha", "margin", "quote"]).copy()
    for column in ("p", "pooled p"):
        shown[column] = [f"{p:.2g}" if pd.notna(p) else "" for p in table[column]]
    shown["queries"] = [f"{int(n)}" if pd.notna(n) else "" for n in table["queries"]]
    shown["claim"] = [f"{text} ({_test_words(row)})" for text, (_, row) in zip(table["claim"], table.iterrows())]
    shown = shown.astype(object).where(shown.notna(), None)  # tabulate shows None, not NaN, as missingval
    markdown = shown.to_markdown(index=False, floatfmt=".4f", missingval="")
    with atomic_open(prefix.parent / f"{prefix.name}.md") as out:
        out.write(f"Claims scoreboard: {summary} (config `claims:`, docs/claims.md). A claim that fails is "
                  f"reported failing; \"not run\": this config does not produce its systems. source: paper, a claim "
                  f"the paper makes (its sentence in results/claims.csv, quote), or study, the study's own check; "
                  f"direction agrees: A is above B (within the margin) whatever the test says; seeds: where a side "
                  f"was trained with several seeds, in how many of them the claim holds; pooled p / outcome: one "
                  f"paired test over (seed, query) pairs (docs/claims.md, \"Seeds\"); paper A vs B: the paper's own "
                  f"cells, where the claim names them (reported), and ER / ΔRI, the size of this pair's effect against "
                  f"the paper's (docs/claims.md, \"How large the reproduced effect is\").\n\n{markdown}\n")


def _test_words(row: pd.Series) -> str:
    """How a claim was tested, in words (the scoreboard's claim column)."""
    if row["test"] == "":
        return "A >= B on every query"
    test = {"wilcoxon": "Wilcoxon", "t": "t-test"}.get(row["test"], row["test"])
    if pd.notna(row["margin"]):
        return f"paired {test}, one-sided, margin {row['margin']:g}, alpha {row['alpha']:g}"
    return f"paired {test}, alpha {row['alpha']:g}"

