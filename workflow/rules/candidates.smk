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
        system="|".join(LUCENE_SYSTEMS),
    threads: FIRST_STAGE["threads"]
    params:
        model=lambda wc: SYSTEMS[wc.system]["model"],
        settings=lambda wc: as_json({k: v for k, v in SYSTEMS[wc.system].items() if k not in ("model", "splits", "hits")}),
        hits=lambda wc: SYSTEMS[wc.system].get("hits", FIRST_STAGE["hits"]),
        timing="benchmarks/anserini/first_stage.{dataset}.{system}.{split}.json",
    resources:
        mem_mb=4000,
        runtime=240,
    shell:
        "python -m rankstudy search --index {input.index} --queries {input.queries} --out {output}"
        " --model {params.model} --params {params.settings:q} --hits {params.hits}"
        " --threads {threads} --timing {params.timing} 2> {log}"


# An irds split's own candidate lists (ir_datasets scoreddocs, e.g. TREC DL's official top 1,000)
rule official_candidates:
    input:
        queries="data/{dataset}/queries.{split}.tsv",
    output:
        "runs/{dataset}/{system}.{split}.run",
    log:
        "logs/first_stage/{dataset}/{system}.{split}.log",
    conda:
        "../../environment.yml"
    wildcard_constraints:
        system="|".join(OFFICIAL_SYSTEMS) or "(?!)",  # no official system: matches nothing
    params:
        ids=lambda wc: " ".join(shlex.quote(i) for i in irds_split_ids(wc.dataset, wc.split)),
        hits=lambda wc: SYSTEMS[wc.system].get("hits", FIRST_STAGE["hits"]),
    resources:
        mem_mb=4000,
        runtime=120,
    shell:
        "python -m rankstudy official-candidates --ids {params.ids} --queries {input.queries} --hits {params.hits}"
        " --out {output} --tag {wildcards.system} 2> {log}"
