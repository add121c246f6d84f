"""Shared fixtures, and each test's tier from its folder (README names each tier's command): tests/unit
mirrors src/ (seconds, no Snakemake, no training to quality), tests/learning (models learn, claims hold:
minutes), tests/workflow (Snakemake, Slurm, DVC), tests/gpu (CUDA; skipped without a GPU). `pytest -m unit`
(or `pytest tests/unit`) selects a tier."""

from __future__ import annotations

import pytest
import yaml

from helpers import REPO
from rankstudy.config import from_dict
from rankstudy.datasets.synthetic import SyntheticConfig, generate

TIERS = ("unit", "learning", "workflow", "realdata", "gpu")


def pytest_collection_modifyitems(items):
    for item in items:
        tier = item.path.relative_to(REPO / "tests").parts[0]
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.path}: a test module belongs in one of tests/{{{','.join(TIERS)}}}/")
        item.add_marker(tier)


def study_synthetic_config(name: str) -> SyntheticConfig:
    """The synthetic settings the default study uses for dataset ``name``."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return from_dict(SyntheticConfig, config["datasets"][name]["synthetic"])


@pytest.fixture(scope="session")
def passage_data():
    return generate(study_synthetic_config("synthetic-passage"), seed=42)


@pytest.fixture(scope="session")
def document_data():
    return generate(study_synthetic_config("synthetic-doc"), seed=42)
