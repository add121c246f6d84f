rule first_stage_table:
    input:
        first_stage_metrics(),
    output:
        report(
            "results/tables/first_stage.csv",
            caption="../report/first_stage.rst",
            category="First stage",
        ),
        "results/tables/first_stage.md",
        "results/tables/first_stage.tex",
    log:
        "logs/report/first_stage_table.log",
    conda:
        "../../environment.yml"
    benchmark:
        "benchmarks/report/first_stage_table.tsv"
    params:
        measures=config["evaluation"]["measures"],
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    shell:
        "python -m rankstudy first-stage-table --metrics {input:q} --measures {params.measures:q}"
        " --out-prefix {params.prefix} 2> {log}"
