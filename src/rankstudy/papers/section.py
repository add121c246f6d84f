"""What the TKL and Socialformer papers' plans share: their outputs all read one dataset, named by their
config section's ``dataset``, and exist only when the study runs that dataset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from rankstudy.config import ConfigError

if TYPE_CHECKING:
    from rankstudy.study.plan import StudyPlan


@dataclass(frozen=True)
class DatasetPaper:
    plan: StudyPlan
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
