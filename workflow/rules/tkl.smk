# The TKL paper's tables and figures (docs/tkl.md); its runs are neural.runs entries.

rule tkl_table:
    localrule: True
    input:
        metrics=lambda wc: TKL.table_metrics(wc.table),
        efficiency=EFFICIENCY_CSV,
    output:
        report("results/tables/tkl_{table}.csv", caption="../report/tkl_tables.rst", category="4. TKL"),
        "results/tables/tkl_{table}.md",
        "results/tables/tkl_{table}.tex",
    log: "logs/report/tkl_{table}.log"
    conda: "../../environment.yml"
    wildcard_constraints: table="table1|table2"
    params:
        spec=lambda wc: as_json(TKL.table_spec(wc.table)),
        efficiency=efficiency_arg,
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    shell:
        "python -m rankstudy tkl-report table --metrics {input.metrics:q} {params.efficiency}"
        " --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"


rule tkl_evidence:
    localrule: True
    input:
        runs=lambda wc: list(TKL.test_runs().values()),
        qrels=lambda wc: f"data/{TKL.dataset}/qrels.test.txt",
        truth=lambda wc: f"data/{TKL.dataset}/truth.json",
    output:
        report("results/tables/tkl_evidence.csv", caption="../report/tkl_evidence.rst", category="4. TKL"),
        "results/tables/tkl_evidence.md",
        "results/tables/tkl_evidence.tex",
    log: "logs/report/tkl_evidence.log"
    conda: "../../environment.yml"
    params:
        spec=lambda wc: as_json(TKL.evidence_spec()),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    shell:
        "python -m rankstudy tkl-report evidence --qrels {input.qrels} --truth {input.truth} --spec {params.spec:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule tkl_fig1:
    localrule: True
    input:
        runs=lambda wc: list(TKL.test_runs().values()),
        qrels=lambda wc: f"data/{TKL.dataset}/qrels.test.txt",
        store=lambda wc: TKL.run_stores(list(TKL.section["compare"].values())[0])["documents"],
    output:
        report("results/figures/tkl_fig1.png", caption="../report/tkl_figures.rst", category="4. TKL"),
        "results/figures/tkl_fig1.pdf",
        "results/figures/tkl_fig1.csv",
    log: "logs/report/tkl_fig1.log"
    conda: "../../environment.yml"
    params:
        spec=lambda wc: as_json(TKL.fig1_spec()),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    shell:
        "python -m rankstudy tkl-report fig1 --qrels {input.qrels} --store {input.store} --spec {params.spec:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule tkl_fig2:
    localrule: True
    input: metrics=lambda wc: TKL.fig2_metrics()
    output:
        report("results/figures/tkl_fig2.png", caption="../report/tkl_figures.rst", category="4. TKL"),
        "results/figures/tkl_fig2.pdf",
        "results/figures/tkl_fig2.csv",
    log: "logs/report/tkl_fig2.log"
    conda: "../../environment.yml"
    params:
        spec=lambda wc: as_json(TKL.fig2_spec()),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    shell:
        "python -m rankstudy tkl-report fig2 --metrics {input.metrics:q} --spec {params.spec:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule tkl_regions:
    input:
        unpack(lambda wc: TKL.run_stores(TKL.section["regions"])),
        run=lambda wc: f"runs/{TKL.dataset}/{RUN[TKL.section['regions']].system}.test.run",
    output: "results/tkl/regions.csv"
    log: "logs/report/tkl_regions.log"
    conda: "../../environment.yml"
    threads: PLAN.threads
    params:
        depth=TKL.section["region_depth"],
        device=PLAN.device,
        model_dir=lambda wildcards, input: os.path.dirname(input.model),
    resources: gpu=gpus(PLAN.device)
    shell:
        "python -m rankstudy regions --model-dir {params.model_dir} --embeddings {input.embeddings}"
        " --queries {input.queries} --documents {input.documents} --run {input.run} --out {output}"
        " --depth {params.depth} --device {params.device} --threads {threads} 2> {log}"


rule tkl_fig3:
    localrule: True
    input: "results/tkl/regions.csv"
    output:
        report("results/figures/tkl_fig3.png", caption="../report/tkl_figures.rst", category="4. TKL"),
        "results/figures/tkl_fig3.pdf",
        "results/figures/tkl_fig3.csv",
        "results/tables/tkl_regions.csv",
        multiext("results/tables/tkl_regions", ".md", ".tex"),
    log: "logs/report/tkl_fig3.log"
    conda: "../../environment.yml"
    params:
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
        table=lambda wildcards, output: output[3].removesuffix(".csv"),
    shell:
        "python -m rankstudy tkl-report fig3 --regions {input} --out-prefix {params.prefix}"
        " --table-prefix {params.table} 2> {log}"
