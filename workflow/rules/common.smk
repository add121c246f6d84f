import json
import os
import shlex

from snakemake.utils import min_version, validate

from rankstudy.study import StudyPlan, system_run
from rankstudy.study.checks import check_renamed_keys

min_version("9.0")


check_renamed_keys(config)
validate(config, "../schemas/config.schema.yaml")

# what the config asks for, validated (rankstudy.study; tested there)
PLAN = StudyPlan.from_config(config)
PLAN_RUNS = PLAN.runs
DATASETS = config["datasets"]
FIRST_STAGE = config["first_stage"]
SYSTEMS = FIRST_STAGE["systems"]
dataset_splits = PLAN.dataset_splits
rel_threshold = PLAN.rel_threshold
system_splits = PLAN.system_splits
eval_splits = PLAN.eval_splits
neural_systems = PLAN.neural_systems


wildcard_constraints:
    dataset=r"[A-Za-z0-9_-]+",
    split=r"[A-Za-z0-9_-]+",


# Lucene systems search the index; official ones are an irds split's own candidate lists (scoreddocs)
LUCENE_SYSTEMS = [name for name, spec in SYSTEMS.items() if spec["model"] in ("bm25", "ql")]
OFFICIAL_SYSTEMS = [name for name, spec in SYSTEMS.items() if spec["model"] == "official"]
# dense systems: pyserini's dense retrieval over a FAISS index of the collection (rankstudy.dense)
DENSE_SYSTEMS = [name for name, spec in SYSTEMS.items() if spec["model"] == "dense"]
DENSE_KEYS = ("encoder", "kind", "pooling", "l2_norm", "max_length", "batch_size")


def dense_config(system):
    """The DenseConfig JSON of a dense system (its encoder settings, no first-stage keys)."""
    return as_json({key: value for key, value in SYSTEMS[system].items() if key in DENSE_KEYS})


def irds_split_ids(dataset, split):
    """The ir_datasets id(s) of an irds dataset's split."""
    ids = DATASETS[dataset]["irds"]["splits"][split]
    return [ids] if isinstance(ids, str) else ids


def first_stage_metrics():
    return [
        f"results/metrics/{dataset}/{system}.{split}.csv"
        for dataset in FIRST_STAGE["datasets"]
        for system in SYSTEMS
        for split in system_splits(system, dataset)
    ]


def as_json(value):
    return json.dumps(value, sort_keys=True)


def gpus(device):
    """The ``gpu`` resource of a job that trains or scores on ``device``: 1 for cuda[:n], 0 for cpu
    and auto (auto uses a GPU only where the job finds one). docs/cluster.md."""
    return 1 if str(device).startswith("cuda") else 0


# ---- neural runs -------------------------------------------------------------------------
NEURAL = config["neural"]
EMBEDDINGS = NEURAL["embeddings"]
ENCODERS = NEURAL["encoders"]
RUNS = NEURAL["runs"]
# the first-stage system whose candidates the runs re-rank (training examples come from bm25's train lists)
RERANK_FROM = PLAN.rerank_from
encoder_location = PLAN.encoder_location
encoder_build = PLAN.encoder_build


def is_wordpiece(emb):
    """Text of this entry is a pre-trained encoder's WordPiece ids (no vocabulary, no word vectors)."""
    return EMBEDDINGS[emb].get("method") == "wordpiece"


def embeddings_corpus(emb):
    """The datasets whose collections train a word-vector set (default: its vocabulary's dataset)."""
    return EMBEDDINGS[emb].get("corpus") or [EMBEDDINGS[emb]["dataset"]]


def vocab_input(wildcards):
    return [] if is_wordpiece(wildcards.emb) else f"text/{wildcards.emb}/vocab"


def store_encoder_input(wildcards):
    return encoder_build(EMBEDDINGS[wildcards.emb]["encoder"]) if is_wordpiece(wildcards.emb) else []


def store_tokens_arg(wildcards, input):
    if is_wordpiece(wildcards.emb):
        return f"--encoder {shlex.quote(encoder_location(EMBEDDINGS[wildcards.emb]['encoder']))}"
    return f"--vocab {input.vocab}"


def run_seeds(run):
    return list(PLAN_RUNS[run].seeds)


def run_embeddings(run):
    return PLAN_RUNS[run].embeddings


def training_settings(run):
    return dict(PLAN_RUNS[run].training)


encoder_input = PLAN.encoder_inputs


def tuning_depths(run):
    return PLAN_RUNS[run].tuning_depths(NEURAL["rerank"]["depths"])


def full_task_depth(wildcards, input):
    """apply-depth's depth: tuned on dev (the depth JSON), else the run's fixed rerank_depth."""
    if input.depth:
        return f"--depth-json {input.depth}"
    return f"--depth {RUNS[system_run(wildcards.system)]['rerank_depth']}"


def model_dir(run, seed):
    return PLAN_RUNS[run].model_dir(seed)


def neural_metrics():
    return [f"results/metrics/{dataset}/{system}.{split}.csv"
            for dataset, system in neural_systems() for split in eval_splits(dataset, system_run(system))]


# Scheduling on a few cores (bench/results/study_time.md). Snakemake runs the ready job of highest priority
# first, and a rule's priority does not pass to the jobs it waits on. Preparation (datasets, indexes,
# candidates, tokens, word vectors, training examples) goes first: every training waits on the word vectors,
# which wait on every dataset, and a report or a Choppy job that ran first left one core idle beside them.
# Then the long chain study encoder -> warm start (encoder_from) -> the runs that start from it, or the
# warm start waits behind independent runs and the Socialformer runs finish last, one core idle.
PREPARATION_PRIORITY = 20
CHAIN_PRIORITY = 10


def chain_priority(run):
    """Scheduling priority of a run's training: CHAIN_PRIORITY for runs that other runs start from."""
    return CHAIN_PRIORITY if PLAN_RUNS[run].starts_others else 0


def example_kind(run):
    return PLAN_RUNS[run].example_kind


def view_seeds(run):
    return list(PLAN_RUNS[run].view_seeds)


def run_system(run):
    return PLAN_RUNS[run].system


# ---- the papers' outputs (rankstudy.study.{tk,tkl,socialformer,choppy}; tested there) ----------------
TK = PLAN.tk
TK_VIEW = TK.view_run()
QUERY_TABLES = TK.query_tables()
TKL = PLAN.tkl
SOCIALFORMER = PLAN.socialformer
CHOPPY = PLAN.choppy


# ---- the reproduction report (docs/claims.md) ----------------------------------------------------
REPRODUCTION = {"reported": [], "comparable": True, **config["reproduction"]}
