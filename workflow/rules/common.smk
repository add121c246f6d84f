import json
import os

from snakemake.utils import min_version, validate

min_version("9.0")


validate(config, "../schemas/config.schema.yaml")

DATASETS = config["datasets"]
FIRST_STAGE = config["first_stage"]
SYSTEMS = FIRST_STAGE["systems"]
SYNTHETIC_SPLITS = ["train", "dev", "test"]

for _name in FIRST_STAGE["datasets"]:
    if _name not in DATASETS:
        raise ValueError(
            f"config: first_stage.datasets names {_name!r}, which is not a key of datasets "
            f"(known: {', '.join(DATASETS) or 'none'})"
        )


wildcard_constraints:
    dataset=r"[A-Za-z0-9_-]+",
    split=r"[A-Za-z0-9_-]+",


def dataset_splits(name):
    """The splits a dataset provides, known when the DAG is built."""
    dataset = DATASETS[name]
    if dataset["source"] == "synthetic":
        return SYNTHETIC_SPLITS
    return list(dataset[dataset["source"]]["splits"])


def rel_threshold(name):
    return DATASETS[name].get("rel_threshold", config["evaluation"]["rel_threshold"])


def first_stage_metrics():
    return [
        f"results/metrics/{dataset}/{system}.{split}.csv"
        for dataset in FIRST_STAGE["datasets"]
        for system in SYSTEMS
        for split in dataset_splits(dataset)
    ]


def as_json(value):
    return json.dumps(value, sort_keys=True)
