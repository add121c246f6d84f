"""The neural runs of a study (config ``neural.runs``) as value objects: what each run trains, on which
data, from which warm start, where its models live and which systems it contributes to the tables.

A run either trains (``model``, ``embeddings``, ``train``) or stands on another run: ``reuse`` (the same
models, other settings, e.g. another re-ranking depth) or ``ensemble`` (the average of its seeds). Its
*base* is the run that trained the models it uses; seeds, model, embeddings and training settings come
from the base. The workflow (workflow/rules/common.smk) reads every path and name from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rankstudy.config import ConfigError


@dataclass(frozen=True)
class Run:
    """One ``neural.runs`` entry, its inheritance resolved."""

    name: str
    spec: Mapping[str, Any]  # the entry as written
    base: str  # the run that trained the models this one uses (itself unless reuse/ensemble)
    seeds: tuple[int, ...]
    model: str  # a neural.models key
    embeddings: str  # a neural.embeddings key
    train: str  # the dataset the base trains on
    training: Mapping[str, Any]  # neural.training, the base's overrides, the device
    encoder_from: str | None  # the base run whose exported encoder the base starts from
    datasets: tuple[str, ...]  # evaluated on (those the study runs; none if its training data is not run)
    starts_others: bool  # another run's encoder_from names it (its training goes first: CHAIN_PRIORITY)
    priority: int = 0  # the base's scheduling hint for its training (``priority``: the long ones first)

    @property
    def is_ensemble(self) -> bool:
        return "ensemble" in self.spec

    @property
    def selects_best_seed(self) -> bool:
        return self.spec.get("select", "first_seed") == "best_validation"

    @property
    def example_kind(self) -> str:
        """Training examples: groups (1 positive + negatives) for the listwise loss, a teacher's scored triples
        (``teacher.NAME``) where the run's teacher names ``scores``, else triples."""
        if self.training["loss"] == "listwise":
            return "groups"
        scores = (self.training.get("teacher") or {}).get("scores")
        return f"teacher.{scores}" if scores else "triples"

    def model_dir(self, seed: int, dataset: str | None = None) -> str:
        """Where a seed's model lives; ``dataset``: the fold of the train dataset it trained on (query folds)."""
        return f"models/{dataset or self.train}/{self.model}/{self.base}/seed{seed}"

    def encoder_dir(self, seed: int) -> str | None:
        """The exported fine-tuned encoder the run starts from (its ``encoder_from`` run's), else None."""
        return f"models/encoders/{self.encoder_from}.s{seed}" if self.encoder_from else None

    def tuning_depths(self, depths: tuple[int, int, int]) -> list[int]:
        """[start, stop, step] of the depths tuned on dev (``neural.rerank.depths``), up to the depth the run
        re-ranks."""
        start, stop, step = depths
        stop = min(stop, self.spec.get("rerank_depth", stop))
        return [min(start, stop), stop, step]

    @property
    def view_seeds(self) -> tuple[int, ...]:
        """The seeds whose models tk-view chooses from: all where the run is its best-validated seed."""
        return self.seeds if self.selects_best_seed else self.seeds[:1]

    @property
    def system(self) -> str:
        """The system that stands for the run in tables and claims, as in run and metric file names: its
        ensemble, its best-validated seed (select: best_validation) or its first seed."""
        suffix = "ens" if self.is_ensemble else "best" if self.selects_best_seed else f"s{self.seeds[0]}"
        return f"{self.model}.{self.name}.{suffix}"

    def seed_systems(self, task: str = "") -> dict[int, str]:
        """The system of each seed the run trained (none for an ensemble: it is one system); ``task``
        "-full" for the depth tuned on dev."""
        return {} if self.is_ensemble else {seed: f"{self.model}.{self.name}.s{seed}{task}" for seed in self.seeds}

    @property
    def systems(self) -> tuple[str, ...]:
        """Every system the run evaluates: per seed (and its best seed) or its ensemble, each re-ranking the
        candidates at the run's depth and (``-full``) at the depth tuned on dev."""
        if self.is_ensemble:
            return f"{self.model}.{self.name}.ens", f"{self.model}.{self.name}.ens-full"
        seeds = [f"s{seed}" for seed in self.seeds] + (["best"] if self.selects_best_seed else [])
        return tuple(f"{self.model}.{self.name}.{seed}{task}" for seed in seeds for task in ("", "-full"))


def system_run(system: str) -> str:
    """The neural.runs key in a system name (MODEL.RUN.{sSEED,best,ens}[-full])."""
    return system.split(".")[-2]


def _problems(spec: Mapping[str, Any], known: Mapping[str, Mapping]) -> list[str]:
    problems = [f"{key} {spec[key]!r} is not defined" for key in ("model", "embeddings", "train", "reuse", "ensemble",
                                                                    "encoder_from")
                if key in spec and spec[key] not in known[key]]
    problems += [f"evaluate dataset {name!r} is not defined" for name in spec.get("evaluate", [])
                 if name not in known["train"]]
    if not ({"model", "embeddings", "train"} <= set(spec) or "reuse" in spec or "ensemble" in spec):
        problems.append("needs model, embeddings and train (or reuse / ensemble)")
    return problems


def plan_runs(config: Mapping[str, Any]) -> dict[str, Run]:
    """Every ``neural.runs`` entry of a (schema-validated) config as a ``Run``; a ConfigError names the first
    entry that refers to something the config does not define."""
    neural = config["neural"]
    entries = neural["runs"]
    known = {"model": neural["models"], "embeddings": neural["embeddings"], "train": config["datasets"],
             "reuse": entries, "ensemble": entries, "encoder_from": entries}
    for name, spec in entries.items():
        problems = _problems(spec, known)
        if problems:
            raise ConfigError(f"config: neural.runs.{name}: " + "; ".join(problems))
    studied = config["first_stage"]["datasets"]

    def base_of(name: str, seen: tuple[str, ...] = ()) -> str:
        if name in seen:
            circle = " -> ".join(seen + (name,))
            raise ConfigError(f"config: neural.runs.{seen[0]}: reuse/ensemble runs in a circle ({circle})")
        spec = entries[name]
        parent = spec.get("reuse") or spec.get("ensemble")
        return base_of(parent, seen + (name,)) if parent else name

    sources = {spec.get("encoder_from") for spec in entries.values()}
    # validation scores as re-ranking does; named only where on, so the default study's settings stay as pinned
    validation_reuse = {"reuse_documents": True} if neural.get("rerank", {}).get("reuse_documents") else {}
    runs = {}
    for name, spec in entries.items():
        base_name = base_of(name)
        base = entries[base_name]
        source = base.get("encoder_from")
        datasets = [] if base["train"] not in studied else [d for d in spec.get("evaluate", []) if d in studied]
        runs[name] = Run(name=name, spec=spec, base=base_name, seeds=tuple(base.get("seeds", [config["seed"]])),
                         model=base["model"], embeddings=base["embeddings"], train=base["train"],
                         training={**neural["training"], **base.get("training", {}), "device": neural["device"],
                                   "precision": neural["precision"], **validation_reuse},
                         encoder_from=base_of(source) if source else None, datasets=tuple(datasets),
                         starts_others=name in sources, priority=base.get("priority", 0))
    for name, spec in entries.items():
        source = spec.get("encoder_from")
        if source and neural["embeddings"][runs[source].embeddings].get("method") != "wordpiece":
            raise ConfigError(f"config: neural.runs.{name}: encoder_from {source!r} is not a run of an encoder "
                              "(wordpiece) model")
    return runs
