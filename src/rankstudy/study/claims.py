"""The config's ``claims:`` (docs/claims.md) resolved to the per-query files this config produces, checked
when the DAG is built; rankstudy.report.claims evaluates the rows (rule claims)."""

from __future__ import annotations

from typing import Any, Mapping

from rankstudy.config import ConfigError
from rankstudy.papers.choppy.plan import MEASURES as CHOPPY_MEASURES
from rankstudy.report.columns import SPEED_MEASURE as SPEED

Ref = dict[str, Any]
EFFICIENCY_CSV = "results/efficiency.csv"


def _error(claim: Mapping[str, Any], message: str) -> ConfigError:
    return ConfigError(f"config: claims: claim {claim['id']!r}: {message}")


def _metric_ref(plan, claim, ref) -> tuple[Ref, str | None]:
    """{label, path, dataset, system, split} of a metric-CSV reference, and why this config does not produce
    it (None when it does); unknown names are errors."""
    dataset, split = claim["dataset"], claim["split"]
    if "run" in ref:
        if ref["run"] not in plan.runs:
            raise _error(claim, f"run {ref['run']!r} is not a key of neural.runs")
        run = plan.runs[ref["run"]]
        system = run.system + ("-full" if ref.get("task") == "full" else "")
        produced = dataset in run.datasets
        if produced and split not in plan.eval_splits(dataset, run.name):
            evaluated = " and ".join(plan.eval_splits(dataset, run.name))
            raise _error(claim, f"run {run.name!r} is evaluated on {evaluated}, not {split!r}")
    else:
        system = ref["system"]
        neural = {name for run in plan.runs.values() for name in run.systems}  # any seed, both tasks
        if system not in plan.systems and system not in neural:
            raise _error(claim, f"system {system!r} is neither a first_stage system ({', '.join(plan.systems)}) "
                                "nor a neural run's metric-file system (or name the run: {run: NAME})")
        produced = ((system in plan.systems and dataset in plan.studied)
                    or (dataset, system) in plan.neural_systems())
    reason = None if produced else f"{system} is not evaluated on {dataset} in this config"
    resolved = {"label": ref.get("label", system), "path": f"results/metrics/{dataset}/{system}.{split}.csv",
                "dataset": dataset, "system": system, "split": split}
    seeds = run.seed_systems("-full" if ref.get("task") == "full" else "") if "run" in ref else {}
    if len(seeds) > 1:  # the claim is judged per seed and pooled too (docs/claims.md, "Seeds")
        resolved["seeds"] = {str(seed): {"path": f"results/metrics/{dataset}/{name}.{split}.csv", "system": name}
                             for seed, name in seeds.items()}
    return resolved, reason


def _choppy_ref(plan, claim, ref) -> tuple[Ref, str | None]:
    name = claim["choppy"]
    if "method" not in ref:
        raise _error(claim, "a choppy claim compares methods ({method: ...}) or a value")
    if ref["method"] not in plan.choppy.methods:
        raise _error(claim, f"method {ref['method']!r} is not a truncation method "
                            f"({', '.join(plan.choppy.methods)})")
    reason = None if name in plan.choppy.names() else f"choppy run {name!r} is not part of this config"
    return {"label": ref.get("label", f"{ref['method']} ({name})"), "method": ref["method"],
            "path": f"results/choppy/{name}/per_query.csv"}, reason


def _speed_ref(plan, claim, ref) -> tuple[Ref, str | None]:
    if "model" not in ref:
        raise _error(claim, f"a {SPEED} claim compares efficiency models ({{model: NAME}})")
    models = plan.config["neural"].get("efficiency", {}).get("models", {})
    if ref["model"] not in models:
        raise _error(claim, f"model {ref['model']!r} is not a key of neural.efficiency.models")
    return {"label": ref.get("label", ref["model"]), "model": ref["model"], "path": EFFICIENCY_CSV}, None


def _ref(plan, claim, ref) -> tuple[Ref, str | None]:
    if "value" in ref:
        return {"label": ref.get("label", f"{ref['value']:g}"), "value": ref["value"]}, None
    if claim["measure"] == SPEED:
        return _speed_ref(plan, claim, ref)
    if "model" in ref:
        raise _error(claim, f"{{model: ...}} is an efficiency model: the claim's measure must be {SPEED}")
    if "choppy" in claim:
        return _choppy_ref(plan, claim, ref)
    if "method" in ref:
        raise _error(claim, "{method: ...} needs the claim's choppy key")
    return _metric_ref(plan, claim, ref)


def _where(plan, claim) -> tuple[str, str | None]:
    """The claim's dataset and split (or choppy run) and query subset in words, checked; a not-run
    reason or None."""
    if claim["measure"] == SPEED:
        if "choppy" in claim or "dataset" in claim or "subset" in claim:
            raise _error(claim, f"a {SPEED} claim compares efficiency models; it has no dataset, subset or choppy run")
        if claim["direction"] != "bounds":
            raise _error(claim, f"a {SPEED} claim compares one measured number each: direction bounds (A >= B)")
        # the benchmark runs for the tables that show docs/ms (TK's Table 2, TKL's tables), not for a claim alone
        measured = plan.measures_speed and (bool(plan.tk.table2_rows()) or plan.tkl.active)
        return "the efficiency benchmark", None if measured else "no table of this config measures docs/ms"
    if "choppy" in claim:
        if claim["choppy"] not in plan.choppy.section["runs"]:
            raise _error(claim, f"choppy {claim['choppy']!r} is not a key of choppy.runs")
        if claim["measure"] not in CHOPPY_MEASURES:
            raise _error(claim, f"measure {claim['measure']!r}: a choppy claim measures f1 or dcg")
        if "subset" in claim or "dataset" in claim:
            raise _error(claim, "a choppy claim has no dataset or subset (its run fixes them)")
        return f"{claim['choppy']} lists, test queries", None
    if "dataset" not in claim:
        raise _error(claim, "needs a dataset (or a choppy run)")
    dataset = claim["dataset"]
    if dataset not in plan.datasets:
        raise _error(claim, f"dataset {dataset!r} is not a key of datasets")
    if claim["measure"] not in plan.config["evaluation"]["measures"]:
        raise _error(claim, f"measure {claim['measure']!r} is not in evaluation.measures")
    if claim["split"] not in plan.dataset_splits(dataset):
        raise _error(claim, f"split {claim['split']!r} is not a split of {dataset}")
    where = f"{dataset} {claim['split']}"
    if "subset" in claim:
        if plan.datasets[dataset]["source"] != "synthetic":
            raise _error(claim, "an evidence subset needs a synthetic dataset (its truth.json)")
        subset = claim["subset"]
        late = subset["evidence"] == "late"
        where += f", queries whose evidence starts {'at' if late else 'before'} token {subset['boundary']}" \
                 f"{' or later' if late else ''}"
    reason = None if dataset in plan.studied else f"dataset {dataset} is not part of this config"
    return where, reason


def _reported_b(claim: Mapping[str, Any], count: int) -> list[str]:
    """The paper's B row for each of the claim's ``count`` B sides: ``reported.b`` is one row for one B, a list of
    rows (in the order of the claim's b) for several."""
    b = claim["reported"]["b"]
    rows = [b] if isinstance(b, str) and count == 1 else b
    if not isinstance(rows, list) or len(rows) != count or not all(isinstance(row, str) for row in rows):
        raise _error(claim, f"reported.b: expected one row of the paper's table per B ({count}, in the order of b), "
                            f"got {b!r}")
    return rows


def resolve_claims(plan) -> list[dict[str, Any]]:
    """One row per (claim, B): what rankstudy claims evaluates; ``not_run`` says why a row cannot be."""
    rows, seen = [], set()
    for claim in plan.config["claims"]:
        if claim["id"] in seen:
            raise _error(claim, "the id is used twice")
        seen.add(claim["id"])
        if (claim["direction"] == "not_worse") != ("margin" in claim):
            raise _error(claim, "a margin goes with direction not_worse, and only with it")
        b_refs = claim["b"] if isinstance(claim["b"], list) else [claim["b"]]
        reported_b = _reported_b(claim, len(b_refs)) if "reported" in claim else None
        dataset = claim.get("dataset") or plan.choppy.section["runs"].get(claim.get("choppy"), {}).get("dataset")
        if "reported" in claim and plan.datasets.get(dataset, {}).get("source") == "synthetic":
            raise _error(claim, "on synthetic data an effect's size does not compare with the paper's: no reported "
                                "cells")
        where, reason = _where(plan, claim)
        a, reason_a = _ref(plan, claim, claim["a"])
        if "value" in a:
            raise _error(claim, "a is a system; only b may be a fixed value")
        for i, b_ref in enumerate(b_refs):
            b, reason_b = _ref(plan, claim, b_ref)
            row = {key: claim[key] for key in ("id", "paper", "source", "quote", "statement", "measure", "direction",
                                               "test", "alpha", "margin") if key in claim}
            if reported_b:
                row["reported"] = {**claim["reported"], "b": reported_b[i]}
            row.update(on=where, a=a, b=b, not_run="; ".join(r for r in (reason, reason_a, reason_b) if r) or None)
            if "subset" in claim:
                dataset, split = claim["dataset"], claim["split"]
                row["subset"] = {**claim["subset"], "qrels": f"data/{dataset}/qrels.{split}.txt",
                                 "truth": f"data/{dataset}/truth.json",
                                 "rel_threshold": plan.rel_threshold(dataset, split)}
            rows.append(row)
    return rows
