import json
import os
import shlex

from snakemake.logging import logger
from snakemake.utils import min_version, validate

from rankstudy.study import StudyPlan, system_run
from rankstudy.study.checks import check_renamed_keys

min_version("9.0")


check_renamed_keys(config)
validate(config, "../schemas/config.schema.yaml")

# What the config asks for, validated: every path, name and setting the rules read (rankstudy.study, tested
# there without Snakemake). The rules below reach it through a few short names.
PLAN = StudyPlan.from_config(config)
for idle in PLAN.idle_runs():  # e.g. a run trained on a dataset that first_stage.datasets leaves out
    logger.warning(f"config: {idle}")
# Short names of its parts; the rules read the config through PLAN and these only.
FIRST_STAGE = PLAN.first_stage  # systems, search settings, Anserini's threads
RUN = PLAN.runs  # neural.runs, inheritance resolved: RUN[name].seeds, .model_dir(seed), .embeddings, .system
TEXT = PLAN.text
TK = PLAN.tk
TK_VIEW = TK.view_run()
QUERY_TABLES = TK.query_tables()
LEARNING_CURVE = TK.learning_curve()  # neural.learning_curve's points and baselines ({} without any)
TKL = PLAN.tkl
SOCIALFORMER = PLAN.socialformer
CHOPPY = PLAN.choppy
# the docs/ms column's benchmark, where the config measures speed (neural.efficiency.enabled; docs/resources.md)
EFFICIENCY_CSV = "results/efficiency.csv" if PLAN.measures_speed else []
REPRODUCTION = PLAN.reproduction  # docs/claims.md
FOLDS = PLAN.folds  # query folds (rankstudy.study.folds): fold datasets, their inputs, the runs trained on them
FOLD_PATTERNS = FOLDS.patterns()
DEV_TEST = PLAN.dev_test_patterns()  # the runs and datasets whose dev and test re-rank in one job


# Seconds-long bookkeeping jobs (evaluation, depths, tables, figures, claims) say `localrule: True`: they run
# where Snakemake runs, not as cluster jobs (each Slurm job pays for a Snakemake start-up); the profile's
# resources apply to the rest.

wildcard_constraints:
    dataset=r"[A-Za-z0-9_-]+",
    split=r"[A-Za-z0-9_-]+",
    seed=r"\d+",
    repeat=r"\d+",
    name=r"[A-Za-z0-9_-]+",


def as_json(value):
    return json.dumps(value, sort_keys=True)


def gpus(device):
    """The ``gpu`` resource of a job that trains or scores on ``device``: 1 for cuda[:n], 0 for cpu
    and auto (auto uses a GPU only where the job finds one). docs/cluster.md."""
    return 1 if str(device).startswith("cuda") else 0


def efficiency_arg(wildcards, input):
    """A table command's --efficiency option: the docs/ms column, where the config measures speed."""
    return f"--efficiency {input.efficiency}" if input.efficiency else ""


def system_alternatives(*models):
    """A wildcard pattern matching the first-stage systems of these models; one that matches nothing if none."""
    return "|".join(PLAN.first_stage.names(*models)) or "(?!)"


def full_task_depth(wildcards, input):
    """apply-depth's depth: tuned on dev (the depth JSON), else the run's fixed rerank_depth."""
    if input.depth:
        return f"--depth-json {input.depth}"
    return f"--depth {PLAN.rerank_depth(system_run(wildcards.system))}"


def report_study_time(log):
    """At the end of a run (the Snakefile's onsuccess; not a dry run): the study's job-minutes against
    study_time.goal_job_minutes, printed and in logs/study_time.md. A report that fails warns: the study succeeded."""
    os.makedirs("logs", exist_ok=True)
    with open("logs/study_time.config.json", "w") as handle:
        json.dump(config, handle)
    try:
        shell("python -m rankstudy study-time --config-json logs/study_time.config.json --benchmarks benchmarks "
              "--efficiency results/efficiency.csv --log {log:q} --cores {workflow.cores} --out logs/study_time.md")
    except Exception as error:
        logger.warning(f"the study's time report failed ({error}); the study's outputs are complete")


# Scheduling on a few cores (bench/results/study_time.md). Snakemake runs the ready job of highest priority
# first, and a rule's priority does not pass to the jobs it waits on. Preparation (datasets, indexes,
# candidates, tokens, word vectors, training examples) goes first: every training waits on the word vectors,
# which wait on every dataset, and a report or a Choppy job that ran first left one core idle beside them.
# Then the long chain study encoder -> warm start (encoder_from) -> the runs that start from it, or the
# warm start waits behind independent runs and the Socialformer runs finish last, one core idle. Then every
# other training, before the re-ranking and evaluation of the finished ones: the long jobs first, the short
# ones fill the end (config/msmarco-passages.yaml's last TK training started 43 minutes in, behind the
# re-ranking of the first ones, and ran alone at the end; docs/msmarco.md, Time).
PREPARATION_PRIORITY = 20
CHAIN_PRIORITY = 10
TRAINING_PRIORITY = 1


def chain_priority(run):
    """Scheduling priority of a run's training: CHAIN_PRIORITY for runs that other runs start from, else
    TRAINING_PRIORITY raised by the run's own hint (``priority``, 0-8: a long training that would otherwise
    start after shorter ones)."""
    return CHAIN_PRIORITY if RUN[run].starts_others else TRAINING_PRIORITY + RUN[run].priority


def dense_priority(system):
    """A dense first stage's encoding is preparation only where a training validates on its lists (the
    Socialformer paper's ANCE): a zero-shot reference encoded first delayed every training behind it."""
    return PREPARATION_PRIORITY if system in PLAN.training_first_stages() else 0
