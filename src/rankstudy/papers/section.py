"""What the papers' plans share: the study they read (``Study``), and, for TKL's and Socialformer's, that their
outputs all read one dataset, named by their config section's ``dataset``, and exist only when the study runs that
dataset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping, Protocol

from rankstudy.config import ConfigError


class Study(Protocol):
    """What a part of the plan (a paper's outputs, a shared stage) reads of the study: ``rankstudy.study.StudyPlan``
    is one. A protocol here, not StudyPlan itself, so that papers/ imports nothing of study/ above it
    (docs/architecture.md, "Layers")."""

    config: Mapping[str, Any]  # schema-validated
    runs: Mapping[str, Any]  # neural.runs, inheritance resolved (rankstudy.study.runs.Run)

    @property
    def datasets(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def studied(self) -> list[str]: ...
    @property
    def systems(self) -> Mapping[str, Mapping[str, Any]]: ...
    def rerank_system(self, dataset: str) -> str: ...
    @property
    def models(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def encoders(self) -> Mapping[str, Mapping[str, Any]]: ...
    @property
    def measures_speed(self) -> bool: ...
    def speed_columns(self) -> list[str]: ...
    def data_description(self, names: Iterable[str]) -> str: ...
    def dataset_splits(self, name: str) -> list[str]: ...
    def rel_threshold(self, name: str, split: str) -> int: ...
    def train_min_grade(self, name: str) -> int: ...
    def system_splits(self, system: str, dataset: str) -> list[str]: ...
    def eval_splits(self, dataset: str, run: str | None = None) -> list[str]: ...
    def rerank_depths(self, runs: Iterable[str]) -> str: ...
    def encoder_location(self, name: str) -> str: ...
    def encoder_build(self, name: str | None) -> list[str]: ...
    def model_encoder(self, model: str) -> dict[str, Any]: ...
    def rerank_inputs(self, dataset: str, run: str, seed: int | str, split: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class DatasetPaper:
    plan: Study
    KEY: ClassVar[str]  # the paper's config section

    @property
    def section(self) -> Mapping[str, Any]:
        return self.plan.config[self.KEY]

    @property
    def dataset(self) -> str:
        return self.section["dataset"]

    @property
    def active(self) -> bool:
        """The study has the paper's outputs when their dataset is part of the study."""
        return "dataset" in self.section and self.dataset in self.plan.studied

    def check_named_runs(self, names: list[str]) -> None:
        """Every run the section names is a neural run evaluated on the section's dataset."""
        for name in names:
            if name not in self.plan.runs or self.dataset not in self.plan.runs[name].datasets:
                raise ConfigError(f"config: {self.KEY} names run {name!r}, which is not a neural.runs entry "
                                  f"evaluated on {self.dataset!r}")
