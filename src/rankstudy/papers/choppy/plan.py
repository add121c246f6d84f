"""The Choppy paper's outputs of a study (config ``choppy``): the ranked lists each truncation run
type cuts, the methods its table compares, and which outputs the config asks for."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from rankstudy.config import ConfigError
from rankstudy.papers.section import Study
from rankstudy.truncation.methods import METRIC_NAMES, methods
from rankstudy.truncation.methods import METRICS as MEASURES

__all__ = ["MEASURES", "STUDY_FILES", "ChoppyOutputs"]  # MEASURES: study.claims reads it here
STUDY_FILES = ("results.csv", "per_query.csv", "fig1.json", "settings.json")  # truncation.experiment.write_study


@dataclass(frozen=True)
class ChoppyOutputs:
    plan: Study

    @property
    def section(self) -> Mapping[str, Any]:
        return self.plan.config["choppy"]

    @property
    def device(self) -> str:
        """The device of Choppy's and BiCut's training (choppy.device)."""
        return self.section["device"]

    @property
    def methods(self) -> list[str]:
        """Table 1's rows: the oracle, the baselines, BiCut, Choppy."""
        return methods(self.section["fixed_k"])

    def names(self) -> list[str]:
        """The run types whose lists the study produces (workflow runs of its datasets, cross-validation
        folds) or reads from files."""
        return [name for name, spec in self.section["runs"].items()
                if "run" in spec or all(part.get("dataset") in self.plan.studied for part in spec.get("folds", [spec]))]

    def grid_names(self) -> list[str]:
        """The run types whose lists get Fig. 2's d x heads grid (``grid_runs``; empty: every run type)."""
        chosen = self.section.get("grid_runs") or []
        return [name for name in self.names() if not chosen or name in chosen]

    @property
    def has_grid(self) -> bool:
        """Whether the config asks for Fig. 2's d x heads grid, on at least one run type."""
        return bool(self.section.get("grid_d")) and bool(self.section.get("grid_heads")) and bool(self.grid_names())

    def check(self) -> None:
        unknown = [name for name in self.section.get("grid_runs") or [] if name not in self.section["runs"]]
        if unknown:
            raise ConfigError(f"config: choppy.grid_runs names {', '.join(map(repr, unknown))}, which is not a key of "
                              f"choppy.runs ({', '.join(self.section['runs'])})")

    def outputs(self) -> list[str]:
        if not self.names():
            return []
        outputs = ["results/tables/choppy_table1.csv", "results/figures/choppy_fig1.png"]
        return outputs + (["results/figures/choppy_fig2.png"] if self.has_grid else [])

    def layout(self) -> dict[str, dict[str, list[str]]]:
        """Table 1's row names and value columns: what a reported file (config/paper/reported) may name."""
        if not self.names():
            return {}
        return {"choppy_table1": {"rows": [f"{name} | {method}" for name in self.names() for method in self.methods],
                                  "columns": list(METRIC_NAMES.values())}}

    def inputs(self, name: str) -> dict[str, str]:
        """{run, qrels} of a run type: a workflow run, merged folds or external files."""
        spec = self.section["runs"][name]
        if "run" in spec:
            return {"run": spec["run"], "qrels": spec["qrels"]}
        split = spec.get("split", "test")
        if "folds" in spec:
            return {"run": f"runs/folds/{name}/{split}.run", "qrels": f"runs/folds/{name}/qrels.{split}.txt"}
        return {"run": f"runs/{spec['dataset']}/{self.system(spec['system'])}.{split}.run",
                "qrels": f"data/{spec['dataset']}/qrels.{split}.txt"}

    def system(self, name: str) -> str:
        """A run type's system: a neural.runs name stands for that run's system (its first seed, best seed or
        ensemble: ``drmm`` is drmm.drmm.s42 under seed 42, drmm.drmm.s7 under seed 7), else a system name as it
        is (bm25, tk.p3.ens)."""
        return self.plan.runs[name].system if name in self.plan.runs else name

    def repeat_dirs(self, name: str) -> list[str]:
        """The output directories of a run type's repeats (rule choppy_study), repeat 0 first."""
        repeats = self.section["runs"][name].get("repeats", self.section.get("repeats", 1))
        return [f"results/choppy/{name}/repeat{repeat}" for repeat in range(repeats)]

    def repeat_files(self, name: str) -> list[str]:
        """Every output file of a run type's repeats (rule choppy_pool's input)."""
        return [path for directory in self.repeat_dirs(name) for path in self.study_files(directory)]

    @staticmethod
    def study_files(directory: str) -> list[str]:
        """The output files of one repeat (rule choppy_study); rule choppy_grid reads repeat 0's."""
        return [f"{directory}/{file}" for file in STUDY_FILES]

    def settings(self) -> dict[str, Any]:
        """The section less what the workflow plans (its runs, which of them get the grid): the ``choppy-study``
        command's --config."""
        return {key: value for key, value in self.section.items() if key not in ("runs", "grid_runs")}

    def qid_args(self, name: str) -> str:
        """The qid-list options of an external run type, paths shell-quoted (they come from the config)."""
        spec = self.section["runs"][name]
        return " ".join(f"--{part}-qids {shlex.quote(spec[f'{part}_qids'])}" for part in ("train", "dev", "test")
                        if f"{part}_qids" in spec)

    def fold_inputs(self, name: str, split: str) -> dict[str, list[str]]:
        """The runs and qrels of a cross-validated run type's folds, merged into one list per split."""
        folds = self.section["runs"][name]["folds"]
        return {"runs": [f"runs/{part['dataset']}/{self.system(part['system'])}.{split}.run" for part in folds],
                "qrels": [f"data/{part['dataset']}/qrels.{split}.txt" for part in folds]}
