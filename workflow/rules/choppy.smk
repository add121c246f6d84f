# The Choppy paper (docs/choppy.md): ranked lists merged from folds, BiCut and Choppy trained and
# compared per run type (config choppy.runs), Table 1 and Figs. 1-2.

rule choppy_folds:
    input: unpack(lambda wc: CHOPPY.fold_inputs(wc.name, wc.split))
    output:
        # a folder per merged run: no first-stage run (runs/DATASET/SYSTEM.SPLIT.run) can have its name
        run="runs/folds/{name}/{split}.run",
        qrels="runs/folds/{name}/qrels.{split}.txt",
    log: "logs/choppy/{name}.folds.{split}.log"
    conda: "../../environment.yml"
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy merge-folds --runs {input.runs} --qrels {input.qrels} --out-run {output.run}"
        " --out-qrels {output.qrels} --tag {wildcards.name} 2> {log}"


# One repeat of a run type's study: its split and its models' training use the seed + repeat (choppy.repeats)
rule choppy_study:
    input: unpack(lambda wc: CHOPPY.inputs(wc.name))
    output:
        results="results/choppy/{name}/repeat{repeat}/results.csv",
        per_query="results/choppy/{name}/repeat{repeat}/per_query.csv",
        fig1="results/choppy/{name}/repeat{repeat}/fig1.json",
        settings="results/choppy/{name}/repeat{repeat}/settings.json",
    log: "logs/choppy/{name}.repeat{repeat}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/choppy/{name}.repeat{repeat}.tsv"
    threads: PLAN.threads
    params:
        settings=as_json(CHOPPY.settings()),
        seed=PLAN.seed,
        qids=lambda wc: CHOPPY.qid_args(wc.name),
        target=lambda wildcards, output, threads:
            f"--repeat {wildcards.repeat} --threads {threads} --out {os.path.dirname(output.results)}",
    resources: mem_mb=2000, runtime=60, gpu=gpus(CHOPPY.device)
    shell:
        "python -m rankstudy choppy-study --run {input.run:q} --qrels {input.qrels:q} --config {params.settings:q}"
        " --seed {params.seed} {params.target} {params.qids} 2> {log}"


# The repeats side by side: mean and sd over repeats, every (repeat, query) value
rule choppy_pool:
    localrule: True
    input: lambda wc: CHOPPY.repeat_files(wc.name)
    output:
        results="results/choppy/{name}/results.csv",
        per_query="results/choppy/{name}/per_query.csv",
        fig1="results/choppy/{name}/fig1.json",
        settings="results/choppy/{name}/settings.json",
    log: "logs/choppy/{name}.pool.log"
    conda: "../../environment.yml"
    params:
        repeats=lambda wc: CHOPPY.repeat_dirs(wc.name),
        out=lambda wildcards, output: os.path.dirname(output.results),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy choppy-pool --repeats {params.repeats} --out {params.out} 2> {log}"


# Fig. 2 only, for the run types of choppy.grid_runs: Choppy over the d x heads grid on the same split (not needed
# by Table 1); the grid point of the configured d and heads is repeat 0's Choppy, read from its outputs
use rule choppy_study as choppy_grid with:
    input: unpack(lambda wc: {**CHOPPY.inputs(wc.name), "study": CHOPPY.study_files(CHOPPY.repeat_dirs(wc.name)[0])})
    output: "results/choppy/{name}/grid.csv"
    log: "logs/choppy/{name}.grid.log"
    benchmark: "benchmarks/choppy/{name}.grid.tsv"
    params:
        target=lambda wildcards, output, threads:
            f"--threads {threads} --grid-out {output} --grid-study {CHOPPY.repeat_dirs(wildcards.name)[0]}",


rule choppy_table1:
    localrule: True
    input:
        expand("results/choppy/{name}/{file}", name=CHOPPY.names(),
               file=["results.csv", "per_query.csv", "settings.json"]),
    output:
        report("results/tables/choppy_table1.csv", caption="../report/choppy.rst", category="6. Choppy"),
        "results/tables/choppy_table1.md",
        "results/tables/choppy_table1.tex",
    log: "logs/report/choppy_table1.log"
    conda: "../../environment.yml"
    params:
        studies=expand("results/choppy/{name}", name=CHOPPY.names()),
        names=CHOPPY.names(),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy choppy-report table1 --studies {params.studies:q} --names {params.names:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule choppy_fig1:
    localrule: True
    input: expand("results/choppy/{name}/{file}", name=CHOPPY.names(), file=["fig1.json", "per_query.csv"])
    output:
        report(multiext("results/figures/choppy_fig1", ".png", ".pdf"), caption="../report/choppy.rst",
               category="6. Choppy"),
        "results/figures/choppy_fig1.csv",
    log: "logs/report/choppy_fig1.log"
    conda: "../../environment.yml"
    params:
        studies=expand("results/choppy/{name}", name=CHOPPY.names()),
        names=CHOPPY.names(),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    resources: mem_mb=2000, runtime=15
    shell:
        "python -m rankstudy choppy-report fig1 --studies {params.studies:q} --names {params.names:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule choppy_fig2:
    localrule: True
    input: expand("results/choppy/{name}/grid.csv", name=CHOPPY.grid_names())
    output:
        report(multiext("results/figures/choppy_fig2", ".png", ".pdf"), caption="../report/choppy.rst",
               category="6. Choppy"),
    log: "logs/report/choppy_fig2.log"
    conda: "../../environment.yml"
    params:
        studies=expand("results/choppy/{name}", name=CHOPPY.grid_names()),
        names=CHOPPY.grid_names(),
        prefix=lambda wildcards, output: output[0].removesuffix(".png"),
    resources: mem_mb=2000, runtime=15
    shell:
        "python -m rankstudy choppy-report fig2 --studies {params.studies:q} --names {params.names:q}"
        " --out-prefix {params.prefix} 2> {log}"
