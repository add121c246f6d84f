"""The tiny study, run once per session for the workflow tests that read its outputs."""

from __future__ import annotations

import pytest

from test_workflow import snakemake, workflow_copy


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory):
    """The small test configuration (tests/config/tiny.yaml) run once per session, locally, in a fresh
    workflow copy: test_workflow checks its outputs, test_slurm compares a Slurm run with them,
    test_dvc pushes and pulls them. Read it or copy it; do not change what is there."""
    work = workflow_copy(tmp_path_factory.mktemp("tiny"))
    result = snakemake(work, "--cores", "2", "--configfile", "tiny.yaml", timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return work
