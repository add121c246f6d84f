# Text pipeline, embeddings, training examples, training and re-ranking (docs/neural.md).


rule vocabulary:
    input: unpack(lambda wc: TEXT.vocabulary_inputs(wc.emb))
    output: directory("text/{emb}/vocab")
    log: "logs/text/{emb}/vocab.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/text/{emb}/vocab.tsv"
    params: min_count=lambda wc: TEXT.min_count(wc.emb)
    resources: mem_mb=4000, runtime=60
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy vocab --collection {input.collection} --queries {input.queries}"
        " --min-count {params.min_count} --out {output} 2> {log}"


rule store_collection:
    input:
        unpack(lambda wc: TEXT.store_inputs(wc.emb)),
        collection="data/{dataset}/collection.tsv",
    output: directory("text/{emb}/{dataset}/collection")
    log: "logs/text/{emb}/{dataset}/collection.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/text/{emb}/{dataset}/collection.tsv"
    params: tokens=lambda wc: TEXT.tokens_arg(wc.emb, wc.dataset)
    resources: mem_mb=4000, runtime=120
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy store --input {input.collection} --kind collection {params.tokens} --out {output} 2> {log}"


rule store_queries:
    input:
        unpack(lambda wc: TEXT.store_inputs(wc.emb)),
        queries="data/{dataset}/queries.{split}.tsv",
    output: directory("text/{emb}/{dataset}/queries.{split}")
    log: "logs/text/{emb}/{dataset}/queries.{split}.log"
    conda: "../../environment.yml"
    params: tokens=lambda wc: TEXT.tokens_arg(wc.emb, wc.dataset)
    resources: mem_mb=1000, runtime=30
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy store --input {input.queries} --kind queries {params.tokens} --out {output} 2> {log}"


rule embeddings:
    input: unpack(lambda wc: TEXT.vectors_inputs(wc.emb))
    output: "text/{emb}/embeddings.npy"
    log: "logs/text/{emb}/embeddings.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/text/{emb}/embeddings.tsv"
    priority: PREPARATION_PRIORITY
    params:
        settings=lambda wc: as_json(TEXT.vectors_settings(wc.emb)),
        inputs=lambda wc, input: f"--store {input.store} --vocab {input.vocab}" if input.vocab else "",
        seed=PLAN.seed,
    resources: mem_mb=4000, runtime=120
    shell:
        "python -m rankstudy embeddings {params.inputs} --config {params.settings:q} --seed {params.seed}"
        " --out {output} 2> {log}"


rule pretrain_encoder:
    input: unpack(lambda wc: TEXT.encoder_inputs(wc.name))
    output: directory("encoders/{name}")
    log: "logs/text/encoder.{name}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/text/encoder.{name}.tsv"
    priority: CHAIN_PRIORITY
    threads: PLAN.threads
    params:
        settings=lambda wc: as_json(TEXT.encoder_settings(wc.name)),
        seed=PLAN.seed,
    resources: mem_mb=4000, runtime=60
    shell:
        "python -m rankstudy pretrain-encoder --collection {input.collection} --vocab {input.vocab}"
        " --embeddings {input.embeddings} --config {params.settings:q} --seed {params.seed} --threads {threads}"
        " --out {output} 2> {log}"


rule examples:
    input: qrels="data/{dataset}/qrels.train.txt", candidates="runs/{dataset}/bm25.train.run"
    output: "train/{dataset}/{kind}.tsv"
    log: "logs/train/{dataset}/examples.{kind}.log"
    conda: "../../environment.yml"
    params:
        per_query=PLAN.examples["per_query"],
        depth=PLAN.examples["negatives_depth"],
        threshold=lambda wc: PLAN.train_min_grade(wc.dataset),
        negatives=PLAN.examples["group_negatives"],
        options=("--judged-negatives " if PLAN.examples.get("judged_negatives") else "")
        + f"--negatives-from {PLAN.examples['negatives_from']}",
        seed=PLAN.seed,
    wildcard_constraints: kind="triples|groups"
    resources: mem_mb=2000, runtime=30
    priority: PREPARATION_PRIORITY
    shell:
        "python -m rankstudy examples --qrels {input.qrels} --candidates {input.candidates} --out {output}"
        " --kind {wildcards.kind} --rel-threshold {params.threshold} --negatives-depth {params.depth}"
        " --per-query {params.per_query} --negatives {params.negatives} {params.options} --seed {params.seed} 2> {log}"


# Margin-MSE teachers (rankstudy.train.teachers): each encoder's vectors of the collection and queries, once;
# then the training triples with the teacher's scores, and the harder negatives it mines over the pool
rule teacher_vectors:
    input:
        collection="data/{dataset}/collection.tsv",
        queries=["data/{dataset}/queries.train.tsv", "data/{dataset}/queries.dev.tsv"],
    output: directory("teachers/{dataset}/{teacher}")
    log: "logs/teachers/{dataset}/{teacher}.vectors.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/teachers/{dataset}/{teacher}.vectors.tsv"
    priority: PREPARATION_PRIORITY
    threads: PLAN.threads
    params: settings=lambda wc: as_json(PLAN.teachers.encoder_settings(wc.teacher))
    resources: mem_mb=10000, runtime=120  # splade-tiny over the 19k-passage pool peaked at 9.1 GB (docs/msmarco.md)
    shell:
        "python -m rankstudy teacher-vectors --config {params.settings:q} --collection {input.collection}"
        " --queries {input.queries} --threads {threads} --out {output} 2> {log}"


rule teacher_triples:
    input:
        vectors=lambda wc: PLAN.teachers.vectors(wc.dataset, wc.teacher),
        triples="train/{dataset}/triples.tsv", qrels="data/{dataset}/qrels.train.txt",
        dev_run=lambda wc: f"runs/{wc.dataset}/{PLAN.rerank_system(wc.dataset)}.dev.run",
        dev_qrels="data/{dataset}/qrels.dev.txt",
    output: triples="train/{dataset}/teacher.{teacher}.tsv", summary="train/{dataset}/teacher.{teacher}.json"
    log: "logs/train/{dataset}/teacher.{teacher}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/teachers/{dataset}/{teacher}.triples.tsv"
    priority: PREPARATION_PRIORITY
    params: settings=lambda wc: PLAN.teachers.triples_args(wc.dataset, wc.teacher)
    resources: mem_mb=6000, runtime=60
    shell:
        "python -m rankstudy teacher-triples --vectors {input.vectors} --triples {input.triples} --qrels {input.qrels}"
        " --dev-run {input.dev_run} --dev-qrels {input.dev_qrels} {params.settings}"
        " --out {output.triples} --summary {output.summary} 2> {log}"


rule train:
    input: unpack(lambda wc: PLAN.train_inputs(wc.dataset, wc.run, wc.seed))
    output: multiext("models/{dataset}/{model}/{run}/seed{seed}/", model="model.pt", log_csv="log.csv")
    log: "logs/train/{dataset}/{model}.{run}.s{seed}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/train/{dataset}/{model}.{run}.s{seed}.tsv"
    priority: lambda wc: chain_priority(wc.run)
    threads: PLAN.threads
    params:
        name=lambda wc: PLAN.models[wc.model]["model"],
        model=lambda wc: as_json(PLAN.model_settings(wc.run, wc.seed)),
        training=lambda wc: as_json(PLAN.training_settings(wc.run)),
        out=lambda wildcards, output: os.path.dirname(output.model),
    resources: mem_mb=8000, runtime=240, gpu=gpus(PLAN.device)
    shell:
        "python -m rankstudy train --model {params.name} --model-config {params.model:q}"
        " --train-config {params.training:q} --embeddings {input.embeddings} --examples {input.examples}"
        " --train-queries {input.train_queries} --documents {input.documents} --dev-queries {input.dev_queries}"
        " --dev-run {input.dev_run} --dev-qrels {input.dev_qrels} --out {params.out} --seed {wildcards.seed}"
        " --threads {threads} 2> {log}"


rule export_encoder:
    input:
        model=lambda wc: f"{RUN[wc.run].model_dir(wc.seed)}/model.pt",
        embeddings=lambda wc: f"text/{RUN[wc.run].embeddings}/embeddings.npy",
    output: directory("models/encoders/{run}.s{seed}")
    log: "logs/train/export_encoder.{run}.s{seed}.log"
    conda: "../../environment.yml"
    priority: CHAIN_PRIORITY
    params: model_dir=lambda wildcards, input: os.path.dirname(input.model)
    shell:
        "python -m rankstudy export-encoder --model-dir {params.model_dir} --embeddings {input.embeddings}"
        " --out {output} 2> {log}"


rule rerank:
    input: unpack(lambda wc: PLAN.rerank_split_inputs(wc.dataset, wc.run, wc.seed, [wc.split]))
    output: "runs/{dataset}/{model}.{run}.s{seed}.{split}.run"
    log: "logs/rerank/{dataset}/{model}.{run}.s{seed}.{split}.log"
    conda: "../../environment.yml"
    benchmark: "benchmarks/rerank/{dataset}/{model}.{run}.s{seed}.{split}.tsv"
    threads: PLAN.threads
    params:
        tag=lambda wc: f"{wc.model}.{wc.run}.s{wc.seed}",
        depth=lambda wc: PLAN.rerank_depth(wc.run),
        scoring=lambda wc: PLAN.rerank_options(wc.run),
        device=PLAN.device,
        precision=PLAN.precision,
        model_dir=lambda wildcards, input: os.path.dirname(input.model),
    resources: mem_mb=4000, runtime=120, gpu=gpus(PLAN.device)
    shell:
        "python -m rankstudy rerank --model-dir {params.model_dir} --embeddings {input.embeddings}"
        " --queries {input.queries} --documents {input.documents} --candidates {input.candidates} --out {output}"
        " --tag {params.tag} --depth {params.depth} {params.scoring} --device {params.device}"
        " --precision {params.precision} --threads {threads} 2> {log}"


# A run evaluated on dev and test re-ranks both in one job: one start-up (torch; transformers for a BERT) and one
# loading of the model and the collection instead of two (docs/neural.md)
use rule rerank as rerank_dev_test with:
    input: unpack(lambda wc: PLAN.rerank_split_inputs(wc.dataset, wc.run, wc.seed, ["dev", "test"]))
    output: "runs/{dataset}/{model}.{run}.s{seed}.dev.run", "runs/{dataset}/{model}.{run}.s{seed}.test.run"
    log: "logs/rerank/{dataset}/{model}.{run}.s{seed}.dev-test.log"
    benchmark: "benchmarks/rerank/{dataset}/{model}.{run}.s{seed}.dev-test.tsv"
    wildcard_constraints: dataset=DEV_TEST["dataset"], run=DEV_TEST["run"]
    resources: mem_mb=4000, runtime=240, gpu=gpus(PLAN.device)

ruleorder: rerank_dev_test > rerank


rule tune_depth:
    localrule: True
    input:
        first_stage=lambda wc: f"runs/{wc.dataset}/{PLAN.rerank_system(wc.dataset)}.dev.run",
        neural="runs/{dataset}/{system}.dev.run",
        qrels="data/{dataset}/qrels.dev.txt",
    output: "runs/{dataset}/{system}.depth.json"
    log: "logs/rerank/{dataset}/{system}.depth.log"
    conda: "../../environment.yml"
    wildcard_constraints:
        system=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.(s\d+|ens|best)",  # a seed, the seeds' ensemble or best seed
    params:
        measure=lambda wc: RUN[system_run(wc.system)].training["metric"],
        threshold=lambda wc: PLAN.rel_threshold(wc.dataset, "dev"),
        depths=lambda wc: PLAN.tuning_depths(system_run(wc.system)),
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy tune-depth --first-stage {input.first_stage} --neural {input.neural} --qrels {input.qrels}"
        " --measure {params.measure:q} --rel-threshold {params.threshold} --depths {params.depths} --out-json {output}"
        " 2> {log}"


rule full_task:
    localrule: True
    input:
        first_stage=lambda wc: f"runs/{wc.dataset}/{PLAN.rerank_system(wc.dataset)}.{wc.split}.run",
        neural="runs/{dataset}/{system}.{split}.run",
        # not evaluated on dev (a test-only collection, or splits: [test]): the run's fixed rerank_depth
        # (rankstudy.study.checks)
        depth=lambda wc: (f"runs/{wc.dataset}/{wc.system}.depth.json"
                          if "dev" in PLAN.eval_splits(wc.dataset, system_run(wc.system)) else []),
    output: "runs/{dataset}/{system}-full.{split}.run"
    log: "logs/rerank/{dataset}/{system}-full.{split}.log"
    conda: "../../environment.yml"
    wildcard_constraints:
        system=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.(s\d+|ens|best)",  # a seed, the seeds' ensemble or best seed
    params: depth=full_task_depth
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy apply-depth --first-stage {input.first_stage} --neural {input.neural} {params.depth}"
        " --out {output} --tag {wildcards.system}-full 2> {log}"


rule select_seed:
    """The seed whose training reached the best validation metric (the TK notebook's submitted run)."""
    input:
        logs=lambda wc: [f"{RUN[wc.run].model_dir(seed)}/log.csv" for seed in RUN[wc.run].seeds],
        runs=lambda wc: [f"runs/{wc.dataset}/{wc.model}.{wc.run}.s{seed}.{wc.split}.run"
                         for seed in RUN[wc.run].seeds],
    output: "runs/{dataset}/{model}.{run}.best.{split}.run"
    log: "logs/rerank/{dataset}/{model}.{run}.best.{split}.log"
    conda: "../../environment.yml"
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy select-seed --logs {input.logs} --runs {input.runs} --out {output}"
        " --tag {wildcards.model}.{wildcards.run}.best 2> {log}"


rule ensemble:
    localrule: True
    input:
        lambda wc: [f"runs/{wc.dataset}/{wc.model}.{RUN[wc.run].spec['ensemble']}.s{seed}.{wc.split}.run"
                    for seed in RUN[wc.run].seeds],
    output: "runs/{dataset}/{model}.{run}.ens.{split}.run"
    log: "logs/rerank/{dataset}/{model}.{run}.ens.{split}.log"
    conda: "../../environment.yml"
    resources: mem_mb=1000, runtime=15
    shell:
        "python -m rankstudy ensemble --runs {input} --out {output} --tag {wildcards.model}.{wildcards.run} 2> {log}"
