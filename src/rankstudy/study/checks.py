"""Checks across a config's sections, run when the DAG is built: the JSON schema checks each value, these
check that the names one section uses are defined by another and that every table and run has the data
it reads. Each failure is a ConfigError naming the key path and what was expected."""

from __future__ import annotations

from typing import Any, Mapping

from rankstudy.config import ConfigError
from rankstudy.study.folds import DEFAULTS as FOLD_DEFAULTS, fold_names


# sections named after a paper since issue 17; an old config fails naming the new key instead of the
# schema's "'longdoc' was unexpected"
RENAMED_SECTIONS = {"longdoc": "tkl", "truncation": "choppy (and its `choppy:` settings are now `model:`)"}


def check_renamed_keys(config: Mapping[str, Any]) -> None:
    """Keys of an older config that have a new name, before the schema sees them."""
    for old, new in RENAMED_SECTIONS.items():
        if old in config:
            raise ConfigError(f"config: section {old!r} is now called {new}")
    for claim in config.get("claims") or []:
        if isinstance(claim, Mapping) and "truncation" in claim:
            raise ConfigError(f"config: claims: claim {claim.get('id')!r}: key 'truncation' is now called 'choppy'")


def check_references(config: Mapping[str, Any]) -> None:
    """Dataset and system names used before the runs are planned."""
    datasets, neural = config["datasets"], config["neural"]
    for name in config["first_stage"]["datasets"]:
        if name not in datasets:
            raise ConfigError(f"config: first_stage.datasets names {name!r}, which is not a key of datasets "
                              f"(known: {', '.join(datasets) or 'none'})")
    for emb, spec in neural["embeddings"].items():
        for name in ([spec["dataset"]] if "dataset" in spec else []) + spec.get("corpus", []):
            if name not in datasets:
                raise ConfigError(f"config: neural.embeddings.{emb} names dataset {name!r}, "
                                  "which is not a key of datasets")
    for name, spec in datasets.items():
        folds = spec.get("folds")
        if folds is None:
            continue
        taken = [fold for fold in fold_names(name, folds.get("k", FOLD_DEFAULTS["k"])) if fold in datasets]
        if taken:
            raise ConfigError(f"config: datasets.{name}.folds makes the fold datasets {name}-fold1 ...; "
                              f"{', '.join(taken)} is already a key of datasets")
    _check_teachers(neural)
    systems = config["first_stage"]["systems"]
    if neural["rerank"]["first_stage"] not in systems:
        raise ConfigError(f"config: neural.rerank.first_stage names {neural['rerank']['first_stage']!r}, which is "
                          f"not a first_stage system ({', '.join(systems)})")
    for name, dataset in datasets.items():
        if dataset.get("rerank_from", neural["rerank"]["first_stage"]) not in systems:
            raise ConfigError(f"config: datasets.{name}.rerank_from names {dataset['rerank_from']!r}, which is not a "
                              f"first_stage system ({', '.join(systems)})")


def _check_teachers(neural: Mapping[str, Any]) -> None:
    """An ensemble's members are encoder teachers; every training's ``teacher: {scores: NAME}`` names a teacher."""
    teachers = neural.get("teachers", {})
    encoders = [name for name, spec in teachers.items() if "members" not in spec]
    for name, spec in teachers.items():
        for member in spec.get("members", []):
            if member not in encoders:
                raise ConfigError(f"config: neural.teachers.{name}.members names {member!r}, which is not an encoder "
                                  f"entry of neural.teachers (known: {', '.join(encoders) or 'none'})")
    trainings = [("neural.training", neural["training"])] + [
        (f"neural.runs.{run}.training", spec.get("training", {})) for run, spec in neural["runs"].items()]
    for where, training in trainings:
        scores = (training.get("teacher") or {}).get("scores")
        if scores is not None and scores not in teachers:
            raise ConfigError(f"config: {where}.teacher.scores names {scores!r}, which is not a key of "
                              f"neural.teachers (known: {', '.join(teachers) or 'none'})")


def check_plan(plan) -> None:
    """Everything the planned runs need, then each paper's section (its plan's ``check``); a StudyPlan
    without its claims."""
    _check_settings(plan)
    _check_folds(plan)
    _check_splits(plan)
    for paper in (plan.tk, plan.tkl, plan.socialformer, plan.choppy):
        paper.check()


def _check_settings(plan) -> None:
    """Model settings and each run's merged training settings through their dataclasses
    (rankstudy.config_check): a typo or a value out of range stops the run before any job."""
    try:
        from rankstudy.config_check import model_problems, training_problem
    except ImportError:  # snakemake outside the study's environment (no torch): the jobs check them
        return
    neural = plan.config["neural"]
    problems = model_problems(neural["models"]) + model_problems(neural["efficiency"]["models"],
                                                                 "neural.efficiency.models")
    for name, run in plan.runs.items():
        if "model" in run.spec:
            settings = {key: value for key, value in run.training.items() if key != "device"}
            problems.append(training_problem(settings, f"neural.runs.{name}.training (with neural.training)"))
    problems = [problem for problem in problems if problem]
    if problems:
        raise ConfigError("config: " + "\n  ".join(problems))


def _check_folds(plan) -> None:
    """A dataset's folds share out one of its splits; a run trained on folds has one model per fold, so it
    re-ranks only its own dataset's held-out folds, and has no one best seed or encoder to hand on."""
    for parent in plan.folds.parents:
        split = plan.folds.split(parent)
        if split not in plan.dataset_splits(parent):
            raise ConfigError(f"config: datasets.{parent}.folds.split is {split!r}, which is not a split of "
                              f"{parent!r} (its splits: {', '.join(plan.dataset_splits(parent))})")
    for name in plan.folds.runs():
        run = plan.runs[name]
        others = [dataset for dataset in run.datasets if dataset != run.train]
        if others:
            raise ConfigError(f"config: neural.runs.{name} trains one model per query fold of {run.train!r}, so it "
                              f"re-ranks only {run.train!r}'s held-out folds, not {', '.join(others)}")
        if run.selects_best_seed:
            raise ConfigError(f"config: neural.runs.{name}: select: best_validation needs one model per seed; "
                              f"a run trained on the query folds of {run.train!r} has one per fold")
        if run.starts_others:
            raise ConfigError(f"config: neural.runs.{name} trains on the query folds of {run.train!r}: its "
                              "encoder (one per fold) cannot warm-start another run (encoder_from)")


def _check_splits(plan) -> None:
    """A run trains on its dataset's train split and validates on its dev split; the full task tunes
    its depth on each evaluated dataset's dev split unless the run re-ranks a fixed rerank_depth."""
    for name, run in plan.runs.items():
        if not run.datasets:
            continue
        spec = run.spec
        if "model" in spec and spec["train"] not in plan.folds.parents:  # folds: train and dev splits of their own
            splits = plan.dataset_splits(spec["train"])
            missing = [split for split in ("train", "dev") if split not in splits]
            if missing:
                raise ConfigError(
                    f"config: neural.runs.{name} trains on dataset {spec['train']!r}, which has no "
                    f"{' and no '.join(repr(s) for s in missing)} split (its splits: {', '.join(splits)}); "
                    f"train on a dataset that has them and apply the model here with `reuse:`")
        for dataset in run.datasets:
            if "test" not in plan.dataset_splits(dataset):
                raise ConfigError(f"config: neural.runs.{name} evaluates dataset {dataset!r}, which has no 'test' split")
            system = plan.rerank_system(dataset)
            covered = plan.system_splits(system, dataset)
            uncovered = [split for split in plan.eval_splits(dataset, name) if split not in covered]
            if uncovered:
                raise ConfigError(f"config: neural.runs.{name} re-ranks {system!r} candidates, which {dataset!r} has "
                                  f"no {' or '.join(uncovered)} lists of (neural.rerank.first_stage, or the "
                                  "dataset's rerank_from)")
            if "dev" not in plan.eval_splits(dataset, name) and not run.is_ensemble and "rerank_depth" not in spec:
                raise ConfigError(
                    f"config: neural.runs.{name} is not evaluated on a 'dev' split of {dataset!r} to tune "
                    f"the full task's re-ranking depth on; give the run a fixed `rerank_depth`")
