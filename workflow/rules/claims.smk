# The claims scoreboard (docs/claims.md): config `claims:` resolved to the per-query files this config
# produces, checked when the DAG is built; rankstudy.report.claims evaluates them.

CLAIMS = config["claims"]
TRUNCATION_METHODS = ["Oracle", "Greedy-k", "BiCut", "Choppy"] + [f"Fixed-{k}" for k in TRUNCATION["fixed_k"]]
TRUNCATION_MEASURES = ["f1", "dcg"]


def _claim_error(claim, message):
    return ValueError(f"config: claims: claim {claim['id']!r}: {message}")


def _metric_ref(claim, ref):
    """{label, path, dataset, system, split} of a metric-CSV reference, or (.., reason) when this config
    does not produce it; unknown names are errors."""
    dataset, split = claim["dataset"], claim["split"]
    if "run" in ref:
        if ref["run"] not in RUNS:
            raise _claim_error(claim, f"run {ref['run']!r} is not a key of neural.runs")
        if ref.get("task") == "full" and "ensemble" in RUNS[ref["run"]]:
            raise _claim_error(claim, f"run {ref['run']!r} is an ensemble: it has no full task")
        system = run_system(ref["run"]) + ("-full" if ref.get("task") == "full" else "")
        produced = dataset in run_datasets(ref["run"])
        if produced and split not in ("dev", "test"):
            raise _claim_error(claim, f"neural runs are evaluated on dev and test, not {split!r}")
    else:
        system = ref["system"]
        neural = {name for variant in RUNS for name in _run_system_names(variant)}
        if system not in SYSTEMS and system not in neural:
            raise _claim_error(claim, f"system {system!r} is neither a first_stage system ({', '.join(SYSTEMS)}) nor "
                                      "a neural run's metric-file system (or name the run: {run: NAME})")
        produced = (system in SYSTEMS and dataset in FIRST_STAGE["datasets"]) or (dataset, system) in neural_systems()
    label = ref.get("label", system)
    reason = None if produced else f"{system} is not evaluated on {dataset} in this config"
    return {"label": label, "path": f"results/metrics/{dataset}/{system}.{split}.csv", "dataset": dataset,
            "system": system, "split": split}, reason


def _run_system_names(variant):
    """Every metric-file system name a neural run can have (any seed, both tasks)."""
    if "ensemble" in RUNS[variant]:
        return [f"{run_model(variant)}.{variant}.ens"]
    return [f"{run_model(variant)}.{variant}.s{seed}{task}" for seed in run_seeds(variant) for task in ("", "-full")]


def _truncation_ref(claim, ref):
    name = claim["truncation"]
    if "method" not in ref:
        raise _claim_error(claim, "a truncation claim compares methods ({method: ...}) or a value")
    if ref["method"] not in TRUNCATION_METHODS:
        raise _claim_error(claim, f"method {ref['method']!r} is not a truncation method ({', '.join(TRUNCATION_METHODS)})")
    reason = None if name in truncation_names() else f"truncation run {name!r} is not part of this config"
    return {"label": ref.get("label", f"{ref['method']} ({name})"), "method": ref["method"],
            "path": f"results/truncation/{name}/per_query.csv"}, reason


def _claim_ref(claim, ref):
    if "value" in ref:
        return {"label": ref.get("label", f"{ref['value']:g}"), "value": ref["value"]}, None
    if "truncation" in claim:
        return _truncation_ref(claim, ref)
    if "method" in ref:
        raise _claim_error(claim, "{method: ...} needs the claim's truncation key")
    return _metric_ref(claim, ref)


def _claim_where(claim):
    """The claim's dataset and split (or truncation run) and query subset, checked; a not-run reason or None."""
    if "truncation" in claim:
        if claim["truncation"] not in TRUNCATION["runs"]:
            raise _claim_error(claim, f"truncation {claim['truncation']!r} is not a key of truncation.runs")
        if claim["measure"] not in TRUNCATION_MEASURES:
            raise _claim_error(claim, f"measure {claim['measure']!r}: a truncation claim measures f1 or dcg")
        if "subset" in claim or "dataset" in claim:
            raise _claim_error(claim, "a truncation claim has no dataset or subset (its run fixes them)")
        return f"{claim['truncation']} lists, test queries", None
    if "dataset" not in claim:
        raise _claim_error(claim, "needs a dataset (or a truncation run)")
    dataset = claim["dataset"]
    if dataset not in DATASETS:
        raise _claim_error(claim, f"dataset {dataset!r} is not a key of datasets")
    if claim["measure"] not in config["evaluation"]["measures"]:
        raise _claim_error(claim, f"measure {claim['measure']!r} is not in evaluation.measures")
    if claim["split"] not in dataset_splits(dataset):
        raise _claim_error(claim, f"split {claim['split']!r} is not a split of {dataset}")
    where = f"{dataset} {claim['split']}"
    if "subset" in claim:
        if DATASETS[dataset]["source"] != "synthetic":
            raise _claim_error(claim, "an evidence subset needs a synthetic dataset (its truth.json)")
        subset = claim["subset"]
        where += f", queries whose evidence starts {'at' if subset['evidence'] == 'late' else 'before'} " \
                 f"token {subset['boundary']}{' or later' if subset['evidence'] == 'late' else ''}"
    reason = None if dataset in FIRST_STAGE["datasets"] else f"dataset {dataset} is not part of this config"
    return where, reason


def resolved_claims():
    """One row per (claim, B): what rankstudy claims evaluates; "not_run" says why a row cannot be."""
    rows, seen = [], set()
    for claim in CLAIMS:
        if claim["id"] in seen:
            raise _claim_error(claim, "the id is used twice")
        seen.add(claim["id"])
        if (claim["direction"] == "not_worse") != ("margin" in claim):
            raise _claim_error(claim, "a margin goes with direction not_worse, and only with it")
        where, reason = _claim_where(claim)
        a, reason_a = _claim_ref(claim, claim["a"])
        if "value" in a:
            raise _claim_error(claim, "a is a system; only b may be a fixed value")
        for b_ref in claim["b"] if isinstance(claim["b"], list) else [claim["b"]]:
            b, reason_b = _claim_ref(claim, b_ref)
            row = {key: claim[key] for key in ("id", "paper", "statement", "measure", "direction", "test", "alpha",
                                               "margin") if key in claim}
            row.update(on=where, a=a, b=b, not_run="; ".join(r for r in (reason, reason_a, reason_b) if r) or None)
            if "subset" in claim:
                dataset, split = claim["dataset"], claim["split"]
                row["subset"] = {**claim["subset"], "qrels": f"data/{dataset}/qrels.{split}.txt",
                                 "truth": f"data/{dataset}/truth.json", "rel_threshold": rel_threshold(dataset)}
            rows.append(row)
    return rows


CLAIM_ROWS = resolved_claims()


def claims_inputs():
    """The files of every claim row this config can evaluate."""
    paths = []
    for row in CLAIM_ROWS:
        if not row["not_run"]:
            paths += [ref["path"] for ref in (row["a"], row["b"]) if "path" in ref]
            paths += [row["subset"][key] for key in ("qrels", "truth") if "subset" in row]
    return sorted(set(paths))


rule claims:
    input:
        claims_inputs(),
    output:
        report("results/claims.csv", caption="../report/claims.rst", category="1. Claims"),
        "results/claims.md",
    log:
        "logs/report/claims.log",
    conda:
        "../../environment.yml"
    params:
        spec=as_json({"claims": CLAIM_ROWS}),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "python -m rankstudy claims --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"
