# Expected results (docs/claims.md): the run's headline table cells against the config's `expected`
# file, at the end of the DAG. A missing file is reported ("no expectations", with the command that
# creates it) and does not fail the run: a config nobody has pinned yet still finishes; `make check`
# (no --missing-ok) fails on it instead.


def headline_tables():
    """The table CSVs this config writes (the ones rule all asks for)."""
    tables = ["results/tables/first_stage.csv"]
    tables += ["results/tables/tk_table2.csv"] if table2_rows() else []
    tables += [path for path in longdoc_outputs() + socialformer_outputs() if path.startswith("results/tables/")]
    tables += ["results/tables/choppy_table1.csv"] if truncation_names() else []
    return tables


rule check_expected:
    input:
        headline_tables(),
    output:
        "results/check_expected.txt",
    log:
        "logs/report/check_expected.log",
    conda:
        "../../environment.yml"
    params:
        expected=config["expected"],
    resources:
        mem_mb=1000,
        runtime=15,
    shell:
        "python -m rankstudy check-expected --expected {params.expected:q} --tables {input:q} --missing-ok"
        " --out {output} > {log} 2>&1"
