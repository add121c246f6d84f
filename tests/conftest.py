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

TIERS = ("unit", "learning", "workflow", "gpu")


# `make test` runs the suite in pytest-xdist workers, a worker per core (-n auto). The tests that read the session's
# tiny study (tests/workflow/conftest.py) or start the machine's one Slurm test cluster share one worker, so that
# the tiny study runs once and never two clusters run at a time; the slow tests go first, so that no worker is
# left with a long test at the end.
SHARED_WORKER = "tiny-study-and-slurm"
SHARED_WORKER_FILES = ("tests/workflow/test_dvc.py", "tests/workflow/test_faults.py", "tests/workflow/test_slurm.py")
SHARED_WORKER_TESTS = "tests/workflow/test_workflow.py::test_the_tiny_study_"


def on_the_shared_worker(nodeid: str) -> bool:
    return nodeid.split("::")[0] in SHARED_WORKER_FILES or nodeid.startswith(SHARED_WORKER_TESTS)


def pytest_collection_modifyitems(items):
    for item in items:
        tier = item.path.relative_to(REPO / "tests").parts[0]
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.path}: a test module belongs in one of tests/{{{','.join(TIERS)}}}/")
        item.add_marker(tier)
        if "tiny_study" in getattr(item, "fixturenames", ()) and not on_the_shared_worker(item.nodeid):
            raise pytest.UsageError(f"{item.nodeid} reads the tiny study: add it to tests/conftest.py's shared worker")
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the slow tests first


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduling by scope (whole scopes to one worker): the shared worker's tests one scope, every
    other test its own. (xdist's own --dist loadgroup groups nothing under pytest 9: it renames item._nodeid,
    which pytest 9 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SharedWorkerScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SHARED_WORKER if on_the_shared_worker(nodeid) else nodeid

    return SharedWorkerScheduling(config, log)


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
