# The Socialformer paper's tables and figures (docs/socialformer.md); its runs are neural.runs entries.

rule socialformer_table:
    localrule: True
    input: metrics=lambda wc: SOCIALFORMER.table_metrics(wc.table)
    output:
        report("results/tables/socialformer_{table}.csv", caption="../report/socialformer_tables.rst",
               category="5. Socialformer"),
        "results/tables/socialformer_{table}.md",
        "results/tables/socialformer_{table}.tex",
    log: "logs/report/socialformer_{table}.log"
    conda: "../../environment.yml"
    wildcard_constraints: table="table1|table2"
    params:
        spec=lambda wc: as_json(SOCIALFORMER.table_spec(wc.table)),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    shell:
        "python -m rankstudy socialformer-report {wildcards.table} --metrics {input.metrics:q} --spec {params.spec:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule socialformer_fig4:
    input: unpack(lambda wc: SOCIALFORMER.graph_inputs())
    output:
        report("results/figures/socialformer_fig4.png", caption="../report/socialformer_figures.rst",
               category="5. Socialformer"),
        "results/figures/socialformer_fig4.pdf",
        "results/figures/socialformer_fig4.csv",
        "results/figures/socialformer_fig4.edges.csv",
    log: "logs/report/socialformer_fig4.log"
    conda: "../../environment.yml"
    threads: 1
    resources: mem_mb=4000, runtime=60  # the collection's IDF (memory-mapped tokens) and the encoder
    params:
        spec=lambda wc: as_json(SOCIALFORMER.graph_spec("fig4")),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    shell:
        "python -m rankstudy socialformer-report fig4 --collection {input.collection} --queries {input.queries}"
        " --qrels {input.qrels} --threads {threads} --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"


rule socialformer_fig5:
    input: unpack(lambda wc: SOCIALFORMER.graph_inputs())
    output:
        report("results/figures/socialformer_fig5.png", caption="../report/socialformer_figures.rst",
               category="5. Socialformer"),
        "results/figures/socialformer_fig5.pdf",
        "results/figures/socialformer_fig5.csv",
    log: "logs/report/socialformer_fig5.log"
    conda: "../../environment.yml"
    threads: 1
    resources: mem_mb=4000, runtime=60  # the collection's IDF (memory-mapped tokens) and the encoder
    params:
        spec=lambda wc: as_json(SOCIALFORMER.graph_spec("fig5")),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    shell:
        "python -m rankstudy socialformer-report fig5 --collection {input.collection} --queries {input.queries}"
        " --qrels {input.qrels} --threads {threads} --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"


rule socialformer_fig6:
    localrule: True
    input:
        metrics=lambda wc: SOCIALFORMER.fig6_metrics(),
        qrels=lambda wc: f"data/{SOCIALFORMER.dataset}/qrels.{SOCIALFORMER.section['fig6']['split']}.txt",
        collection=lambda wc: SOCIALFORMER.stores(list(SOCIALFORMER.section["fig6"]["runs"].values())[0])["collection"],
    output:
        report("results/figures/socialformer_fig6.png", caption="../report/socialformer_figures.rst",
               category="5. Socialformer"),
        "results/figures/socialformer_fig6.pdf",
        "results/figures/socialformer_fig6.csv",
    log: "logs/report/socialformer_fig6.log"
    conda: "../../environment.yml"
    params:
        spec=lambda wc: as_json(SOCIALFORMER.fig6_spec()),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    shell:
        "python -m rankstudy socialformer-report fig6 --metrics {input.metrics:q} --qrels {input.qrels}"
        " --collection {input.collection} --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"


rule socialformer_curves:
    input: logs=lambda wc: SOCIALFORMER.curve_logs()
    output:
        report("results/figures/socialformer_curves.png", caption="../report/socialformer_figures.rst",
               category="5. Socialformer"),
        "results/figures/socialformer_curves.pdf",
        "results/figures/socialformer_curves.csv",
    log: "logs/report/socialformer_curves.log"
    conda: "../../environment.yml"
    params:
        spec=lambda wc: as_json(SOCIALFORMER.curves_spec()),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    shell:
        "python -m rankstudy socialformer-report curves --logs {input.logs:q} --spec {params.spec:q}"
        " --out-prefix {params.prefix} 2> {log}"
