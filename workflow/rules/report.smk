# Reports shared by the papers: the first-stage table and the throughput benchmark (docs/ms in the
# TK and TKL tables).

rule first_stage_table:
    localrule: True
    input: FIRST_STAGE.metrics()
    output:
        report(
            "results/tables/first_stage.csv",
            caption="../report/first_stage.rst",
            category="2. First stage",
        ),
        "results/tables/first_stage.md",
        "results/tables/first_stage.tex",
    log: "logs/report/first_stage_table.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/report/first_stage_table.tsv"
    params:
        measures=PLAN.measures,
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy first-stage-table --metrics {input:q} --measures {params.measures:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule learning_audit:
    input: PLAN.learning_audit_inputs()
    output:
        report("results/tables/learning.csv", caption="../report/learning.rst", category="1. Claims"),
        "results/tables/learning.md",
        "results/tables/learning.tex",
    log: "logs/report/learning_audit.log"
    conda: "../../environment.yml"
    params:
        spec=as_json(PLAN.learning_audit()),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources: mem_mb=2000, runtime=15
    shell:
        "python -m rankstudy learning-audit --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"


rule efficiency:
    output: report("results/efficiency.csv", caption="../report/efficiency.rst", category="7. Efficiency")
    log: "logs/report/efficiency.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/report/efficiency.tsv"
    threads: PLAN.efficiency["setup"]["threads"]
    params:
        models=as_json(PLAN.efficiency["models"]),
        setup=as_json(PLAN.efficiency["setup"]),
    resources: mem_mb=8000, runtime=60, gpu=gpus(PLAN.device)
    shell:
        "python -m rankstudy efficiency --models {params.models:q} --setup {params.setup:q} --out {output} 2> {log}"
