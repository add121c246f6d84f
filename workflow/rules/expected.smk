# Expected results (docs/claims.md): the run's headline table cells against the config's `expected`
# file, at the end of the DAG. A missing file is reported ("no expectations", with the command that
# creates it) and does not fail the run: a config nobody has pinned yet still finishes; `make check`
# (no --missing-ok) fails on it instead. The claims scoreboard is checked where the file pins it.


rule check_expected:
    localrule: True
    input: PLAN.headline_tables() + (["results/claims.csv"] if PLAN.claim_inputs() else [])
    output: "results/check_expected.txt"
    log: "logs/report/check_expected.log"
    conda: "../../environment.yml"
    params: expected=PLAN.expected
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy check-expected --expected {params.expected:q} --tables {input:q} --missing-ok"
        " --out {output} > {log} 2>&1"
