rule first_stage:
    input: index="index/{dataset}", queries="data/{dataset}/queries.{split}.tsv"
    output: "runs/{dataset}/{system}.{split}.run"
    log: "logs/first_stage/{dataset}/{system}.{split}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/first_stage/{dataset}/{system}.{split}.tsv"
    wildcard_constraints: system=system_alternatives("bm25", "ql")
    threads: FIRST_STAGE.threads
    params:
        model=lambda wc: FIRST_STAGE.model(wc.system),
        settings=lambda wc: as_json(FIRST_STAGE.search_params(wc.system)),
        hits=lambda wc: FIRST_STAGE.hits(wc.system),
        timing="benchmarks/anserini/first_stage.{dataset}.{system}.{split}.json",
    resources: mem_mb=4000, runtime=240
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy search --index {input.index} --queries {input.queries} --out {output}"
        " --model {params.model} --params {params.settings:q} --hits {params.hits} --threads {threads}"
        " --timing {params.timing} 2> {log}"


# A dataset's own candidate lists: an irds split's (ir_datasets scoreddocs, e.g. TREC DL's official top 1,000) or
# a local folder's given run (local.candidates, e.g. BM25's top 100 with the passages' text)
rule official_candidates:
    input: queries="data/{dataset}/queries.{split}.tsv", given=lambda wc: FIRST_STAGE.official_run(wc.dataset)
    output: "runs/{dataset}/{system}.{split}.run"
    log: "logs/first_stage/{dataset}/{system}.{split}.log"
    conda: "../../environment.yml"
    wildcard_constraints: system=system_alternatives("official")
    params:
        source=lambda wc: FIRST_STAGE.official_source(wc.dataset, wc.split),
        hits=lambda wc: FIRST_STAGE.hits(wc.system),
    resources: mem_mb=4000, runtime=120
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy official-candidates {params.source} --queries {input.queries} --hits {params.hits}"
        " --out {output} --tag {wildcards.system} 2> {log}"


# A dense first stage (pyserini): the collection encoded once per system into a FAISS flat index
rule dense_index:
    input: "data/{dataset}/collection.tsv"
    output: directory("index/{dataset}.{system}")
    log: "logs/index/{dataset}.{system}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/index/{dataset}.{system}.tsv"
    wildcard_constraints: system=system_alternatives("dense")
    params:
        config=lambda wc: as_json(FIRST_STAGE.dense_settings(wc.system)),
        device=lambda wc: FIRST_STAGE.device(wc.system),
    resources: mem_mb=8000, runtime=1440, gpu=lambda wc: gpus(FIRST_STAGE.device(wc.system))
    priority: lambda wc: dense_priority(wc.system)
    shell:
        "python -m rankstudy dense-index --collection {input} --config {params.config:q} --out {output}"
        " --device {params.device} 2> {log}"


rule dense_search:
    input:
        index="index/{dataset}.{system}",
        queries="data/{dataset}/queries.{split}.tsv",
        rescored=lambda wc: FIRST_STAGE.rescored(wc.dataset, wc.system, wc.split),  # rescore: another's lists
    output: "runs/{dataset}/{system}.{split}.run"
    log: "logs/first_stage/{dataset}/{system}.{split}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/first_stage/{dataset}/{system}.{split}.tsv"
    wildcard_constraints: system=system_alternatives("dense")
    threads: FIRST_STAGE.threads
    params:
        config=lambda wc: as_json(FIRST_STAGE.dense_settings(wc.system)),
        device=lambda wc: FIRST_STAGE.device(wc.system),
        hits=lambda wc: FIRST_STAGE.hits(wc.system),
        rescore=lambda wc, input: f"--rescore {input.rescored}" if input.rescored else "",
    resources: mem_mb=8000, runtime=240, gpu=lambda wc: gpus(FIRST_STAGE.device(wc.system))
    priority: lambda wc: dense_priority(wc.system)
    shell:
        "python -m rankstudy dense-search --index {input.index} --queries {input.queries} --config {params.config:q}"
        " --hits {params.hits} --out {output} --tag {wildcards.system} --device {params.device} --threads {threads}"
        " {params.rescore} 2> {log}"
