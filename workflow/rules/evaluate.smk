rule evaluate:
    localrule: True
    input: run="runs/{dataset}/{system}.{split}.run", qrels="data/{dataset}/qrels.{split}.txt"
    output: "results/metrics/{dataset}/{system}.{split}.csv"
    log: "logs/evaluate/{dataset}/{system}.{split}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/evaluate/{dataset}/{system}.{split}.tsv"
    wildcard_constraints: system=r"[A-Za-z0-9_.-]+"
    params:
        measures=PLAN.measures,
        threshold=lambda wc: PLAN.rel_threshold(wc.dataset, wc.split),
    resources: mem_mb=2000, runtime=30
    shell:
        "python -m rankstudy evaluate --run {input.run} --qrels {input.qrels} --out {output}"
        " --measures {params.measures:q} --rel-threshold {params.threshold} --dataset {wildcards.dataset}"
        " --system {wildcards.system} --split {wildcards.split} 2> {log}"
