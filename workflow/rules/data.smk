# One rule per configured dataset: each writes collection.tsv and, per split, queries and qrels
# (synthetic data also its truth.json).
for _name, _dataset in PLAN.datasets.items():

    rule:
        name:
            f"dataset_{_name.replace('-', '_')}"
        output:
            collection=f"data/{_name}/collection.tsv",
            queries=[f"data/{_name}/queries.{split}.tsv" for split in PLAN.dataset_splits(_name)],
            qrels=[f"data/{_name}/qrels.{split}.txt" for split in PLAN.dataset_splits(_name)],
            truth=[f"data/{_name}/truth.json"] if _dataset["source"] == "synthetic" else [],
            candidates=FIRST_STAGE.official_run(_name),  # a local folder's given candidate run
        log:
            f"logs/data/{_name}.log",
        conda:
            "../../environment.yml"
        benchmark:
            f"benchmarks/data/{_name}.tsv"
        params:
            name=_name,
            section=as_json(_dataset),
            seed=PLAN.seed,
            out=lambda wildcards, output: os.path.dirname(output.collection),
        resources:
            mem_mb=8000,
            runtime=240,
        priority: PREPARATION_PRIORITY
        shell:
            "python -m rankstudy dataset --name {params.name} --config {params.section:q}"
            " --seed {params.seed} --out {params.out} 2> {log}"
