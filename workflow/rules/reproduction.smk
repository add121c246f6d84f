# The reproduction report (docs/claims.md, "Reproduction"): the papers' reported table cells
# (config reproduction.reported) beside this run's tables, by rankstudy.report.reproduction. A config
# whose data is not the papers' (reproduction.comparable: false, the synthetic default) says so. Both list the
# paper claims of the scoreboard with whether their direction agrees with the paper's.


rule reproduction:
    localrule: True
    input:
        reported=REPRODUCTION["reported"],
        tables=PLAN.headline_tables() if REPRODUCTION["comparable"] else [],
        claims=rules.claims.output[0] if PLAN.claim_inputs() else [],
    output:
        report("results/reproduction.csv", caption="../report/reproduction.rst", category="1. Claims"),
        "results/reproduction.md",
    log: "logs/report/reproduction.log"
    conda: "../../environment.yml"
    params:
        comparable="" if REPRODUCTION["comparable"] else "--not-comparable",
        claims=lambda wildcards, input: f"--claims {input.claims}" if input.claims else "",
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy reproduction --reported {input.reported:q} --tables-dir results/tables {params.comparable} {params.claims}"
        " --out-prefix {params.prefix} 2> {log}"
