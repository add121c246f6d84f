rule first_stage_table:
    input:
        first_stage_metrics(),
    output:
        report(
            "results/tables/first_stage.csv",
            caption="../report/first_stage.rst",
            category="2. First stage",
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
    resources:
        mem_mb=1000,
        runtime=15,
    shell:
        "python -m rankstudy first-stage-table --metrics {input:q} --measures {params.measures:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule tk_table2:
    input:
        metrics=TK.table2_metrics(),
        efficiency="results/efficiency.csv",
    output:
        report("results/tables/tk_table2.csv", caption="../report/tk_table2.rst", category="3. TK"),
        "results/tables/tk_table2.md",
        "results/tables/tk_table2.tex",
    log:
        "logs/report/tk_table2.log",
    conda:
        "../../environment.yml"
    params:
        rows=as_json(TK.table2_rows()),
        depth=NEURAL["rerank"]["depth"],
        scaled=NEURAL["caption_note"],
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources:
        mem_mb=1000,
        runtime=15,
    shell:
        "python -m rankstudy tk-table2 --metrics {input.metrics:q} --efficiency {input.efficiency} --rows {params.rows:q} --depth {params.depth}"
        " --scaled={params.scaled:q} --out-prefix {params.prefix} 2> {log}"


rule tk_table3_4:
    input:
        metrics=lambda wc: [f"results/metrics/{table['dataset']}/{table['system']}.test.csv" for table in QUERY_TABLES],
        queries=lambda wc: [f"data/{table['dataset']}/queries.test.tsv" for table in QUERY_TABLES],
        qrels=lambda wc: [f"data/{table['dataset']}/qrels.test.txt" for table in QUERY_TABLES],
    output:
        report("results/tables/tk_table3_4.csv", caption="../report/tk_table3_4.rst", category="3. TK"),
        "results/tables/tk_table3_4.md",
        "results/tables/tk_table3_4.tex",
    log:
        "logs/report/tk_table3_4.log",
    conda:
        "../../environment.yml"
    params:
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources:
        mem_mb=1000,
        runtime=15,
    shell:
        "python -m rankstudy tk-queries --metrics {input.metrics} --queries {input.queries} --qrels {input.qrels}"
        " --first-table 3 --out-prefix {params.prefix} 2> {log}"


rule tk_view:
    input:
        models=lambda wc: [f"{model_dir(TK_VIEW['run'], seed)}/model.pt" for seed in view_seeds(TK_VIEW["run"])],
        embeddings=lambda wc: f"text/{run_embeddings(TK_VIEW['run'])}/embeddings.npy",
        vocab=lambda wc: f"text/{run_embeddings(TK_VIEW['run'])}/vocab",
        collection=lambda wc: f"data/{TK_VIEW['dataset']}/collection.tsv",
        queries=lambda wc: f"data/{TK_VIEW['dataset']}/queries.test.tsv",
        qrels=lambda wc: f"data/{TK_VIEW['dataset']}/qrels.test.txt",
        first_stage=lambda wc: f"runs/{TK_VIEW['dataset']}/{RERANK_FROM}.test.run",
        neural=lambda wc: f"runs/{TK_VIEW['dataset']}/{TK_VIEW['system']}.test.run",
    output:
        report("results/tk_view.html", caption="../report/tk_view.rst", category="3. TK"),
    log:
        "logs/report/tk_view.log",
    conda:
        "../../environment.yml"
    params:
        model_dirs=lambda wildcards, input: [os.path.dirname(path) for path in input.models],
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "python -m rankstudy tk-view --model-dir {params.model_dirs} --embeddings {input.embeddings}"
        " --vocab {input.vocab} --collection {input.collection} --queries {input.queries} --qrels {input.qrels}"
        " --first-stage {input.first_stage} --neural {input.neural} --out {output} 2> {log}"


rule efficiency:
    output:
        report("results/efficiency.csv", caption="../report/efficiency.rst", category="7. Efficiency"),
    log:
        "logs/report/efficiency.log",
    conda:
        "../../environment.yml"
    benchmark:
        "benchmarks/report/efficiency.tsv"
    threads: NEURAL["efficiency"]["setup"].get("threads", 2)
    params:
        models=as_json(NEURAL["efficiency"]["models"]),
        setup=as_json(NEURAL["efficiency"]["setup"]),
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=gpus(NEURAL["device"]),
    shell:
        "python -m rankstudy efficiency --models {params.models:q} --setup {params.setup:q} --out {output} 2> {log}"


rule merge_folds:
    input:
        unpack(lambda wc: CHOPPY.fold_inputs(wc.name, wc.split)),
    output:
        # a folder per merged run: no first-stage run (runs/DATASET/SYSTEM.SPLIT.run) can have its name
        run="runs/folds/{name}/{split}.run",
        qrels="runs/folds/{name}/qrels.{split}.txt",
    log:
        "logs/truncation/{name}.folds.{split}.log",
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=15,
    shell:
        "python -m rankstudy merge-folds --runs {input.runs} --qrels {input.qrels} --out-run {output.run}"
        " --out-qrels {output.qrels} --tag {wildcards.name} 2> {log}"


rule truncation:
    input:
        unpack(lambda wc: CHOPPY.inputs(wc.name)),
    output:
        results="results/truncation/{name}/results.csv",
        per_query="results/truncation/{name}/per_query.csv",
        fig1="results/truncation/{name}/fig1.json",
        settings="results/truncation/{name}/settings.json",
    log:
        "logs/truncation/{name}.log",
    conda:
        "../../environment.yml"
    benchmark:
        "benchmarks/truncation/{name}.tsv"
    threads: NEURAL["threads"]
    params:
        settings=as_json({k: v for k, v in TRUNCATION.items() if k != "runs"}),
        seed=config["seed"],
        qids=lambda wc: truncation_qid_args(wc.name),
        out=lambda wildcards, output: os.path.dirname(output.results),
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=gpus(TRUNCATION.get("device", "auto")),
    shell:
        "python -m rankstudy truncation --run {input.run:q} --qrels {input.qrels:q} --config {params.settings:q}"
        " --seed {params.seed} --threads {threads} --out {params.out} {params.qids} 2> {log}"


# Fig. 2 only: Choppy over the d x heads grid on the same split (not needed by Table 1)
rule truncation_grid:
    input:
        unpack(lambda wc: CHOPPY.inputs(wc.name)),
    output:
        "results/truncation/{name}/grid.csv",
    log:
        "logs/truncation/{name}.grid.log",
    conda:
        "../../environment.yml"
    benchmark:
        "benchmarks/truncation/{name}.grid.tsv"
    threads: NEURAL["threads"]
    params:
        settings=as_json({k: v for k, v in TRUNCATION.items() if k != "runs"}),
        seed=config["seed"],
        qids=lambda wc: truncation_qid_args(wc.name),
    resources:
        mem_mb=2000,
        runtime=60,
        gpu=gpus(TRUNCATION.get("device", "auto")),
    shell:
        "python -m rankstudy truncation --run {input.run:q} --qrels {input.qrels:q} --config {params.settings:q}"
        " --seed {params.seed} --threads {threads} --grid-out {output} {params.qids} 2> {log}"


rule choppy_table1:
    input:
        expand("results/truncation/{name}/{file}", name=CHOPPY.names(),
               file=["results.csv", "per_query.csv", "settings.json"]),
    output:
        report("results/tables/choppy_table1.csv", caption="../report/choppy.rst", category="6. Choppy"),
        "results/tables/choppy_table1.md",
        "results/tables/choppy_table1.tex",
    log:
        "logs/report/choppy_table1.log",
    conda:
        "../../environment.yml"
    params:
        studies=expand("results/truncation/{name}", name=CHOPPY.names()),
        names=CHOPPY.names(),
        prefix=lambda wildcards, output: output[0].removesuffix(".csv"),
    resources:
        mem_mb=1000,
        runtime=15,
    shell:
        "python -m rankstudy choppy-report table1 --studies {params.studies:q} --names {params.names:q}"
        " --out-prefix {params.prefix} 2> {log}"


rule choppy_fig1:
    input:
        expand("results/truncation/{name}/{file}", name=CHOPPY.names(), file=["fig1.json", "per_query.csv"]),
    output:
        report(multiext("results/figures/choppy_fig1", ".png", ".pdf"), caption="../report/choppy.rst",
               category="6. Choppy"),
        "results/figures/choppy_fig1.csv",
    log:
        "logs/report/choppy_fig1.log",
    conda:
        "../../environment.yml"
    params:
        studies=expand("results/truncation/{name}", name=CHOPPY.names()),
        names=CHOPPY.names(),
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "python -m rankstudy choppy-report fig1 --studies {params.studies:q} --names {params.names:q}"
        " --out-prefix results/figures/choppy_fig1 2> {log}"


rule choppy_fig2:
    input:
        expand("results/truncation/{name}/grid.csv", name=CHOPPY.names()),
    output:
        report(multiext("results/figures/choppy_fig2", ".png", ".pdf"), caption="../report/choppy.rst",
               category="6. Choppy"),
    log:
        "logs/report/choppy_fig2.log",
    conda:
        "../../environment.yml"
    params:
        studies=expand("results/truncation/{name}", name=CHOPPY.names()),
        names=CHOPPY.names(),
    resources:
        mem_mb=2000,
        runtime=15,
    shell:
        "python -m rankstudy choppy-report fig2 --studies {params.studies:q} --names {params.names:q}"
        " --out-prefix results/figures/choppy_fig2 2> {log}"
