# The TK paper's tables and interpretability view (docs/neural.md); its runs are neural.runs entries.

rule tk_table2:
    localrule: True
    input:
        metrics=TK.table2_metrics(),
        efficiency=EFFICIENCY_CSV,
        data=[f"data/{name}/collection.tsv" for name in TK.caption_datasets()],  # the caption's counts
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
        data=PLAN.data_description(TK.caption_datasets()),
        efficiency=efficiency_arg,
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
        data_dirs=lambda wildcards, input: [os.path.dirname(path) for path in input.data],
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy tk-table2 --metrics {input.metrics:q} {params.efficiency} --rows {params.rows:q}"
        " --depth {params.depth} --scaled={params.scaled:q} --data={params.data:q} --data-dirs {params.data_dirs:q}"
        " --out-prefix {params.prefix}"
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


# The TK paper's effectiveness-efficiency trade-off: Table 2's nDCG@10 against docs/ms (neural.tradeoff_figure)
rule tk_tradeoff:
    localrule: True
    input: "results/tables/tk_table2.csv"
    output:
        report("results/figures/tk_tradeoff.png", caption="../report/tk_tradeoff.rst", category="3. TK"),
        "results/figures/tk_tradeoff.pdf",
    log: "logs/report/tk_tradeoff.log"
    conda: "../../environment.yml"
    params: prefix=lambda wildcards, output: output[0].removesuffix(".png")
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy tk-tradeoff --table {input} --out-prefix {params.prefix} 2> {log}"


# Test effectiveness by the number of training queries (neural.learning_curve)
rule tk_learning_curve:
    localrule: True
    input: unpack(lambda wc: TK.learning_curve_inputs())
    output:
        report("results/tables/learning_curve.csv", caption="../report/learning_curve.rst", category="3. TK"),
        "results/tables/learning_curve.md",
        "results/tables/learning_curve.tex",
        multiext("results/figures/learning_curve", ".png", ".pdf"),
    log: "logs/report/tk_learning_curve.log"
    conda: "../../environment.yml"
    params:
        points=lambda wc: as_json(LEARNING_CURVE["points"]),
        baselines=lambda wc: as_json(LEARNING_CURVE["baselines"]),
        caption=lambda wc: f"{PLAN.data_description(TK.caption_datasets())}. {PLAN.caption_note}",
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy tk-learning-curve --metrics {input.metrics:q} --points {params.points:q}"
        " --baselines {params.baselines:q} --caption {params.caption:q} --out-prefix results/tables/learning_curve"
        " --figure-prefix results/figures/learning_curve 2> {log}"
