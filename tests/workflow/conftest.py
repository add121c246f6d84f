"""Runs shared by the workflow tests, each run once per session: the tiny study and the paper configs' miniatures."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_paper_miniatures import configfiles, miniature_workflow
from test_paper_miniatures import snakemake as offline_snakemake
from test_workflow import snakemake, workflow_copy


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory):
    """The small test configuration (tests/config/tiny.yaml) run once per session, locally, in a fresh
    workflow copy: test_workflow checks its outputs, test_faults compares a killed and resumed run with them,
    test_dvc pushes and pulls them. Read it or copy it; do not change what is there."""
    work = workflow_copy(tmp_path_factory.mktemp("tiny"))
    result = snakemake(work, "--cores", "2", "--configfile", "tiny.yaml", timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return work


@dataclass(frozen=True)
class MiniatureRun:
    work: Path  # the workflow copy it ran in
    env: dict[str, str]  # the offline environment, ir_datasets at the run's miniature home
    stderr: str  # Snakemake's log of the run
    seconds: float


@pytest.fixture(scope="session")
def paper_miniature_run(tmp_path_factory):
    """``run(name)``: config/paper/NAME.yaml with its miniature run once per session, locally, on the miniature
    inputs (tests/workflow/paper_miniature.py): test_paper_miniatures checks what it promises, test_slurm compares
    a Slurm run of part of it with it. Read it; do not change what is there."""
    runs: dict[str, MiniatureRun] = {}

    def run(name: str) -> MiniatureRun:
        if name not in runs:
            work, env = miniature_workflow(tmp_path_factory.mktemp(f"miniature-{name}"), name)
            start = time.perf_counter()
            result = offline_snakemake(work, env, "--cores", "2", *configfiles(name), timeout=3600)
            assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
            runs[name] = MiniatureRun(work, env, result.stderr, time.perf_counter() - start)
        return runs[name]

    return run
