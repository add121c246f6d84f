"""``StudyPlan``: what a config asks the workflow to build, as one object the rules read (issue 17)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rankstudy.study.runs import Run, plan_runs


@dataclass(frozen=True)
class StudyPlan:
    runs: Mapping[str, Run]  # neural.runs, inheritance resolved
    models: Mapping[str, Mapping[str, Any]]  # neural.models
    encoders: Mapping[str, Mapping[str, Any]]  # neural.encoders: the study's own, built by rule pretrain_encoder

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StudyPlan:
        """The plan of a schema-validated config; a ConfigError names what the config gets wrong."""
        neural = config["neural"]
        return cls(runs=plan_runs(config), models=neural["models"], encoders=neural["encoders"])

    def encoder_location(self, name: str) -> str:
        """The directory (or packaged name, e.g. ``minilm``) loaded for an ``encoder`` name: a study encoder is
        built to encoders/NAME."""
        return f"encoders/{name}" if name in self.encoders else name

    def encoder_build(self, name: str | None) -> list[str]:
        """Inputs of a job that loads encoder ``name``: the study encoder's directory, if it is one."""
        return [self.encoder_location(name)] if name in self.encoders else []

    def model_encoder(self, model: str) -> dict[str, Any]:
        """``neural.models[model]`` without its ``model`` key, its ``encoder`` resolved to a location."""
        settings = {key: value for key, value in self.models[model].items() if key != "model"}
        if "encoder" in settings:
            settings["encoder"] = self.encoder_location(settings["encoder"])
        return settings

    def model_settings(self, run: str, seed: int | str) -> dict[str, Any]:
        """The settings a run's model is built with: its model entry, the encoder warm-started from the
        run's ``encoder_from`` where it has one."""
        settings = self.model_encoder(self.runs[run].model)
        warm_start = self.runs[run].encoder_dir(seed)
        if warm_start:
            settings["encoder"] = warm_start
        return settings

    def encoder_inputs(self, run: str, seed: int | str) -> list[str]:
        """The encoder directories a run's model loads: its warm start, else its study encoder."""
        warm_start = self.runs[run].encoder_dir(seed)
        return [warm_start] if warm_start else self.encoder_build(self.models[self.runs[run].model].get("encoder"))
