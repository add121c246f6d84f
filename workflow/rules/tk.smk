# The TK paper's tables and interpretability view (docs/neural.md); its runs are neural.runs entries.

rule tk_table2:
    localrule: True
    input:
        metrics=TK.table2_metrics(),
        efficiency=EFFICIENCY_CSV,
    output:
        report("results/tables/tk_table2.csv", caption="../report/tk_table2.rst", category="3. TK"),
        "results/tables/tk_table2.md",
        "results/tables/tk_table2.tex",
    log: "logs/report/tk_table2.log"
    conda: "../../environment.yml"
    params:
        rows=as_json(TK.table2_rows()),
        depth=PLAN.rerank["depth"],
        scaled=PLAN.caption_note,
        data=PLAN.data_description(row["dataset"] for row in TK.table2_rows()),
        efficiency=efficiency_arg,
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy tk-table2 --metrics {input.metrics:q} {params.efficiency}"
        " --rows {params.rows:q} --depth {params.depth} --scaled={params.scaled:q} --data={params.data:q} --out-prefix {params.prefix}"
        " 2> {log}"


rule tk_table3_4:
    localrule: True
    input:
        metrics=lambda wc: [f"results/metrics/{table['dataset']}/{table['system']}.test.csv" for table in QUERY_TABLES],
        queries=lambda wc: [f"data/{table['dataset']}/queries.test.tsv" for table in QUERY_TABLES],
        qrels=lambda wc: [f"data/{table['dataset']}/qrels.test.txt" for table in QUERY_TABLES],
    output:
        report("results/tables/tk_table3_4.csv", caption="../report/tk_table3_4.rst", category="3. TK"),
        "results/tables/tk_table3_4.md",
        "results/tables/tk_table3_4.tex",
    log: "logs/report/tk_table3_4.log"
    conda: "../../environment.yml"
    params: prefix=lambda wildcards, output: output[0].removesuffix(".csv")
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy tk-queries --metrics {input.metrics} --queries {input.queries} --qrels {input.qrels}"
        " --first-table 3 --out-prefix {params.prefix} 2> {log}"


rule tk_view:
    input: unpack(lambda wc: TK.view_inputs())
    output: report("results/tk_view.html", caption="../report/tk_view.rst", category="3. TK")
    log: "logs/report/tk_view.log"
    conda: "../../environment.yml"
    params: model_dirs=lambda wildcards, input: [os.path.dirname(path) for path in input.models]
    resources: mem_mb=2000, runtime=30
    shell:
        "python -m rankstudy tk-view --model-dir {params.model_dirs} --embeddings {input.embeddings}"
        " --vocab {input.vocab} --collection {input.collection} --queries {input.queries} --qrels {input.qrels}"
        " --first-stage {input.first_stage} --neural {input.neural} --out {output} 2> {log}"
