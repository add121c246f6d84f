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


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory):
    """The small test configuration (tests/config/tiny.yaml) run once per session, locally, in a fresh
    workflow copy: test_workflow checks its outputs, test_slurm compares a Slurm run with them,
    test_dvc pushes and pulls them. Read it or copy it; do not change what is there."""
    from test_workflow import snakemake, workflow_copy

    work = workflow_copy(tmp_path_factory.mktemp("tiny"))
    result = snakemake(work, "--cores", "2", "--configfile", "tiny.yaml", timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return work
