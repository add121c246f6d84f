rule first_stage:
    input:
        index="index/{dataset}",
        queries="data/{dataset}/queries.{split}.tsv",
    output:
        "runs/{dataset}/{system}.{split}.run",
    log:
        "logs/first_stage/{dataset}/{system}.{split}.log",
    conda:
        "../../environment.yml"
    benchmark:
        "benchmarks/first_stage/{dataset}/{system}.{split}.tsv"
    wildcard_constraints:
        system="|".join(SYSTEMS),
    threads: FIRST_STAGE["threads"]
    params:
        model=lambda wc: SYSTEMS[wc.system]["model"],
        settings=lambda wc: as_json({k: v for k, v in SYSTEMS[wc.system].items() if k != "model"}),
        hits=FIRST_STAGE["hits"],
        timing="benchmarks/anserini/first_stage.{dataset}.{system}.{split}.json",
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "python -m rankstudy search --index {input.index} --queries {input.queries} --out {output}"
        " --model {params.model} --params {params.settings:q} --hits {params.hits}"
        " --threads {threads} --timing {params.timing} 2> {log}"
