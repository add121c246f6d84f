rule index:
    input: "data/{dataset}/collection.tsv"
    output: directory("index/{dataset}")
    log: "logs/index/{dataset}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/index/{dataset}.tsv"
    threads: FIRST_STAGE.threads
    params:
        stats=lambda wc: as_json(FIRST_STAGE.index_stats(wc.dataset)),
        tolerance=FIRST_STAGE.terms_tolerance,
        timing="benchmarks/anserini/index.{dataset}.json",
    resources: mem_mb=8000, runtime=600
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy index --collection {input} --out {output} --threads {threads}"
        " --expected-stats {params.stats:q} --terms-tolerance {params.tolerance} --timing {params.timing} 2> {log}"
