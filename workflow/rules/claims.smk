# The claims scoreboard (docs/claims.md): the claims resolved by the plan (PLAN.claims, rankstudy.study.claims), evaluated by
# rankstudy.report.claims.

rule claims:
    localrule: True
    input: PLAN.claim_inputs()
    output:
        report("results/claims.csv", caption="../report/claims.rst", category="1. Claims"),
        "results/claims.md",
    log: "logs/report/claims.log"
    conda: "../../environment.yml"
    params:
        spec=as_json({"claims": PLAN.claims}),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources: mem_mb=2000, runtime=15
    shell:
        "python -m rankstudy claims --spec {params.spec:q} --out-prefix {params.prefix} 2> {log}"
