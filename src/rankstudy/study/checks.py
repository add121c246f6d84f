"""Checks across a config's sections, run when the DAG is built: the JSON schema checks each value, these
check that the names one section uses are defined by another and that every table and run has the data
it reads. Each failure is a ConfigError naming the key path and what was expected."""

from __future__ import annotations

from typing import Any, Mapping

from rankstudy.config import ConfigError


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
    systems = config["first_stage"]["systems"]
    if neural["rerank"]["first_stage"] not in systems:
        raise ConfigError(f"config: neural.rerank.first_stage names {neural['rerank']['first_stage']!r}, which is "
                          f"not a first_stage system ({', '.join(systems)})")


def check_plan(plan) -> None:
    """Everything the planned runs and the papers' outputs need (a StudyPlan without its claims)."""
    _check_settings(plan)
    _check_splits(plan)
    _check_tk(plan)
    _check_longdoc(plan)
    _check_socialformer(plan)


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


def _check_splits(plan) -> None:
    """A run trains on its dataset's train split and validates on its dev split; the full task tunes
    its depth on each evaluated dataset's dev split unless the run re-ranks a fixed rerank_depth."""
    for name, run in plan.runs.items():
        if not run.datasets:
            continue
        spec = run.spec
        if "model" in spec:
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
            covered = plan.system_splits(plan.rerank_from, dataset)
            uncovered = [split for split in plan.eval_splits(dataset, name) if split not in covered]
            if uncovered:
                raise ConfigError(f"config: neural.runs.{name} re-ranks {plan.rerank_from!r} candidates, which "
                                  f"{dataset!r} has no {' or '.join(uncovered)} lists of (neural.rerank.first_stage)")
            if "dev" not in plan.eval_splits(dataset, name) and not run.is_ensemble and "rerank_depth" not in spec:
                raise ConfigError(
                    f"config: neural.runs.{name} is not evaluated on a 'dev' split of {dataset!r} to tune "
                    f"the full task's re-ranking depth on; give the run a fixed `rerank_depth`")


def _check_tk(plan) -> None:
    for key in ("table2_runs", "query_tables"):
        for name in plan.config["neural"].get(key, []):
            if name not in plan.runs:
                raise ConfigError(f"config: neural.{key} names {name!r}, which is not a key of neural.runs")


def _check_named_runs(plan, section: str, names: list[str]) -> None:
    dataset = plan.config[section]["dataset"]
    for name in names:
        if name not in plan.runs or dataset not in plan.runs[name].datasets:
            raise ConfigError(f"config: {section} names run {name!r}, which is not a neural.runs entry evaluated "
                              f"on {dataset!r}")


def longdoc_runs(longdoc: Mapping[str, Any]) -> list[str]:
    """Every run the long-document outputs name (tables, Fig. 2, comparison, regions)."""
    named = [row["run"] for key in ("table1", "saturation", "lengths") for row in longdoc[key]]
    return named + list(longdoc["compare"].values()) + ([longdoc["regions"]] if "regions" in longdoc else [])


def socialformer_runs(social: Mapping[str, Any]) -> list[str]:
    """Every run the Socialformer outputs name (tables, Fig. 6, the graph figures' model)."""
    named = [row["run"] for key in ("table1", "table2") for row in social[key]] + list(social["fig6"]["runs"].values())
    return named + ([social["graph_run"]] if "graph_run" in social else [])


def socialformer_columns(social: Mapping[str, Any], table: str) -> Mapping[str, list[str]]:
    """A table's {split: measures}: its own (``table2_columns``) or the shared ``columns``."""
    return social.get(f"{table}_columns") or social["columns"]


def _check_longdoc(plan) -> None:
    longdoc = plan.config["longdoc"]
    if "dataset" in longdoc and longdoc["dataset"] in plan.studied:
        _check_named_runs(plan, "longdoc", longdoc_runs(longdoc))


def _check_socialformer(plan) -> None:
    social = plan.config["socialformer"]
    if not ("dataset" in social and social["dataset"] in plan.studied):
        return
    _check_named_runs(plan, "socialformer", socialformer_runs(social))
    for table in ("table1", "table2"):
        for row in social[table]:
            for split in socialformer_columns(social, table):
                if split not in plan.eval_splits(social["dataset"], row["run"]):
                    raise ConfigError(f"config: socialformer.{table} shows {split} columns, but run {row['run']!r} "
                                      f"is not evaluated on {split} (neural.runs.{row['run']}.splits)")
    for name in social["curves"].values():
        if name not in plan.runs or "model" not in plan.runs[name].spec:
            raise ConfigError(f"config: socialformer.curves names {name!r}, which is not a trained neural.runs entry")
    measures = [social["fig6"]["measure"]] + [measure for table in ("table1", "table2")
                                              for measures in socialformer_columns(social, table).values()
                                              for measure in measures]
    for measure in measures:
        if measure not in plan.config["evaluation"]["measures"]:
            raise ConfigError(f"config: socialformer uses measure {measure!r}, which is not in evaluation.measures")
    if "graph_run" in social and plan.models[plan.runs[social["graph_run"]].model]["model"] != "socialformer":
        raise ConfigError(f"config: socialformer.graph_run {social['graph_run']!r} is not a Socialformer run")
