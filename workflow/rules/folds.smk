# Query folds (datasets.<name>.folds; docs/trec-dl.md): a dataset's judged queries dealt into k fold datasets
# NAME-fold<i> by one job; their candidates are NAME's lists of their queries; a run that trains on NAME trains
# and re-ranks each fold with rules train and rerank, and NAME's run is the union of the held-out folds' runs.

for _parent in FOLDS.parents:

    rule:
        name:
            f"folds_{_parent.replace('-', '_')}"
        input:
            **FOLDS.inputs(_parent),
        output:
            FOLDS.outputs(_parent),
        log:
            f"logs/data/{_parent}.folds.log",
        conda:
            "../../environment.yml"
        localrule: True
        params:
            k=FOLDS.settings(_parent)["k"],
            seed=FOLDS.settings(_parent)["seed"],
            out=" ".join(f"data/{fold}" for fold in FOLDS.names(_parent)),
        resources:
            mem_mb=2000,
            runtime=15,
        priority: PREPARATION_PRIORITY
        shell:
            "python -m rankstudy folds --queries {input.queries} --qrels {input.qrels} --collection {input.collection}"
            " --k {params.k} --seed {params.seed} --out {params.out} 2> {log}"


# A fold's candidates: its parent's lists of the fold's queries, of any first-stage system
rule fold_candidates:
    input: run=lambda wc: FOLDS.candidates_input(wc.dataset, wc.system), queries="data/{dataset}/queries.{split}.tsv"
    output: "runs/{dataset}/{system}.{split}.run"
    log: "logs/first_stage/{dataset}/{system}.{split}.log"
    conda: "../../environment.yml"
    localrule: True
    wildcard_constraints: dataset=FOLD_PATTERNS["fold"], system=FOLD_PATTERNS["system"]
    params: hits=lambda wc: FIRST_STAGE.hits(wc.system)
    resources: mem_mb=1000, runtime=15
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy official-candidates --run {input.run} --queries {input.queries} --hits {params.hits}"
        " --out {output} --tag {wildcards.system} 2> {log}"


# A run trained on folds: every query re-ranked by the model of the fold that held it out (disjoint queries)
rule fold_merge:
    input: lambda wc: FOLDS.merge_inputs(wc.dataset, f"{wc.model}.{wc.run}.s{wc.seed}")
    output: "runs/{dataset}/{model}.{run}.s{seed}.{split}.run"
    log: "logs/rerank/{dataset}/{model}.{run}.s{seed}.{split}.log"
    conda: "../../environment.yml"
    localrule: True
    wildcard_constraints: dataset=FOLD_PATTERNS["parent"], run=FOLD_PATTERNS["run"], split=FOLD_PATTERNS["split"]
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy merge-runs --runs {input} --out {output}"
        " --tag {wildcards.model}.{wildcards.run}.s{wildcards.seed} 2> {log}"


# a fold dataset's lists and a folded dataset's neural runs come from the rules above, not from a search or a model
ruleorder: fold_candidates > first_stage
ruleorder: fold_candidates > official_candidates
ruleorder: fold_candidates > dense_search
ruleorder: fold_merge > rerank
