# The reproduction report (docs/claims.md, "Reproduction"): the papers' reported table cells
# (config reproduction.reported) beside this run's tables, by rankstudy.report.reproduction. A config
# whose data is not the papers' (reproduction.comparable: false, the synthetic default) says so. Both list the
# paper claims of the scoreboard with whether their direction agrees with the paper's, the effect sizes beside the
# paper's (ER, ΔRI: _effects.csv) and how closely each run's seeds agree, topic by topic (_seeds.csv).


rule reproduction:
    localrule: True
    input:
        reported=REPRODUCTION["reported"],
        tables=PLAN.headline_tables() if REPRODUCTION["comparable"] else [],
        claims=rules.claims.output[0] if PLAN.claim_inputs() else [],
        seeds=PLAN.seed_group_inputs(),
    output:
        report("results/reproduction.csv", caption="../report/reproduction.rst", category="1. Claims"),
        "results/reproduction.md",
        "results/reproduction_effects.csv",
        "results/reproduction_seeds.csv",
    log: "logs/report/reproduction.log"
    conda: "../../environment.yml"
    params:
        comparable="" if REPRODUCTION["comparable"] else "--not-comparable",
        claims=lambda wildcards, input: f"--claims {input.claims}" if input.claims else "",
        seeds=as_json(PLAN.seed_groups()),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy reproduction --reported {input.reported:q} --tables-dir results/tables {params.comparable} {params.claims}"
        " --seeds {params.seeds:q} --out-prefix results/reproduction 2> {log}"
