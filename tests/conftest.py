from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rankstudy.config import from_dict
from rankstudy.datasets.synthetic import SyntheticConfig, generate

REPO = Path(__file__).resolve().parents[1]


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
