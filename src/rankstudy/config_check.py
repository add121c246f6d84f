"""Config sections checked through their dataclasses when the DAG is built (rankstudy.study.checks).

The JSON schema closes every section whose keys it can list; a model's keys depend on its class, so
``neural.models`` (and ``neural.efficiency.models``) and each run's merged training settings are
built here with ``from_dict``, which rejects unknown keys and values out of range. A typo then stops
``snakemake`` (dry run included) before the first job, naming the key path, instead of failing inside
the job after Snakemake has deleted the previous outputs.
"""

from __future__ import annotations

from typing import Any, Mapping

from rankstudy.config import ConfigError, from_dict


def model_problems(models: Mapping[str, Mapping[str, Any]], where: str = "neural.models") -> list[str]:
    """One line per model entry whose settings its class's config dataclass refuses."""
    from rankstudy.efficiency import MEASUREMENT_KEYS, RandomEncoder
    from rankstudy.models import MODELS

    measured = where.endswith("efficiency.models")  # the benchmark's entries also say how they are measured
    measured_only = ("model", *MEASUREMENT_KEYS) if measured else ("model",)
    problems = []
    for name, settings in models.items():
        kind = settings.get("model")
        if kind not in MODELS:
            problems.append(f"{where}.{name}.model: unknown model {kind!r}; expected one of {', '.join(MODELS)}")
            continue
        fields = {key: value for key, value in settings.items() if key not in measured_only}
        try:
            config = from_dict(MODELS[kind][1], fields, f"{where}.{name}")
            if measured and "random_encoder" in settings:
                from_dict(RandomEncoder, settings["random_encoder"], f"{where}.{name}.random_encoder")
                if not hasattr(config, "encoder"):
                    raise ConfigError(f"{where}.{name}.random_encoder: model {kind!r} has no encoder to replace")
        except ConfigError as error:
            problems.append(str(error))
    return problems


def training_problem(settings: Mapping[str, Any], where: str) -> str | None:
    """The TrainConfig error of a run's merged training settings, or None."""
    from rankstudy.train.loop import TrainConfig

    try:
        from_dict(TrainConfig, settings, where)
    except ConfigError as error:
        return str(error)
    return None
