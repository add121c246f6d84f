"""profiles/slurm on a real Slurm: a single-node cluster (scripts/slurm-test-cluster.sh) runs the
small test configuration end to end and reports a failing rule as failed (docs/cluster.md).

Needs root (the daemons) and Slurm installed or apt-get to install it; skipped otherwise, except
in CI (CI=true), where it must run. Every Slurm-facing command runs under `timeout -s KILL`: a
Snakemake that loses its jobs' states can hang and ignore SIGTERM."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from helpers import REPO
from paper_miniature import prepare
from test_paper_miniatures import MINIATURES, configfiles, offline_env
from test_workflow import BIN, ENV, workflow_copy

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

CLUSTER = REPO / "scripts" / "slurm-test-cluster.sh"
# the plugin's first status check after 2 s instead of 40 s: a tiny run in seconds, not minutes
FAST = ["--slurm-init-seconds-before-status-checks", "2", "--latency-wait", "5"]
# A slice of the tiny study through every kind of step (dataset, index, search, evaluation, text,
# embeddings, examples, training on the gpu-capable path, re-ranking, a table): the whole tiny DAG
# runs locally in test_workflow; through Slurm its ~300 job submissions would cost ~20 minutes.
TARGETS = ["results/tables/first_stage.csv", "results/metrics/synthetic-passage/knrm.knrm.s7.test.csv"]
# A paper config through Slurm: config/paper/tk.yaml with its miniature (tests/workflow/test_paper_miniatures.py runs
# every job locally), one run from the ir_datasets ids served offline and the GloVe file to its test metrics (15 jobs)
PAPER_MINIATURE = "tk"
PAPER_TARGET = "results/metrics/msmarco-passage/knrm.knrm.s42.test.csv"
# files whose content does not depend on where or when a job ran (efficiency.csv and
# tk_table2, which holds its docs/ms column, are timings)
DETERMINISTIC = ["data/**/*", "runs/**/*.run", "runs/**/*.json", "results/metrics/**/*.csv",
                 "results/tables/first_stage.csv", "results/tables/tk_table3_4.csv",
                 "results/tables/choppy_table1.csv", "results/choppy/**/*.csv"]


def skip_reason() -> str | None:
    if os.environ.get("CI", "").lower() == "true":
        return None
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (it starts munged, slurmctld and slurmd)"
    if not shutil.which("slurmctld", path="/usr/sbin:/usr/bin") and not shutil.which("apt-get"):
        return "Slurm is not installed and apt-get is not available to install it"
    return None


def run(command: list[str], cwd: Path, env: dict, limit: int) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", "-s", "KILL", str(limit), *command], cwd=cwd, env=env,
                          capture_output=True, text=True)


def slurm_logs(directory: Path) -> str:
    logs = sorted(directory.glob("log/*.log"))
    return "".join(f"\n--- {log} ---\n" + "\n".join(log.read_text().splitlines()[-15:]) for log in logs)


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """The environment for the cluster's commands; the daemons are stopped whatever happens."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("slurm")
    env = dict(ENV, SLURM_TEST_DIR=str(directory))
    env.pop("SLURM_CONF", None)
    try:
        up = run(["bash", str(CLUSTER), "up"], REPO, env, 900)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:] + slurm_logs(directory)
        yield env
    finally:
        down = run(["bash", str(CLUSTER), "down"], REPO, env, 180)
        assert down.returncode == 0, down.stdout + down.stderr


def slurm_snakemake(work: Path, env: dict, *args: str, limit: int = 3000) -> subprocess.CompletedProcess:
    return run([str(BIN / "snakemake"), "--workflow-profile", "profiles/slurm", *FAST, *args], work, env, limit)


def test_a_failing_rule_is_reported_as_failed(slurm_cluster, tmp_path):
    work = tmp_path / "failing"
    work.mkdir()
    shutil.copytree(REPO / "profiles", work / "profiles")
    (work / "Snakefile").write_text(
        'rule all:\n    input: "ok.txt", "fails.txt", "gpu.txt"\n\n'
        'rule ok:\n    output: "ok.txt"\n    resources: mem_mb=100, runtime=5\n'
        '    shell: "echo ok > {output}"\n\n'
        'rule fails:\n    output: "fails.txt"\n    resources: mem_mb=100, runtime=5\n'
        '    shell: "echo this rule fails on purpose >&2; exit 3"\n\n'
        # a GPU job: the gpu partition, --gpus=1; the test cluster has no GPU, so sbatch refuses it
        'rule gpu_job:\n    output: "gpu.txt"\n    resources: mem_mb=100, runtime=5, gpu=1\n'
        '    shell: "touch {output}"\n'
    )
    result = slurm_snakemake(work, slurm_cluster, limit=300)
    output = result.stdout + result.stderr
    assert result.returncode not in (0, 124, 137), output[-3000:]
    assert "SLURM run ID" in output and "Error in rule fails" in output, output[-3000:]
    assert "failed, SLURM status is: 'FAILED'" in output, output[-3000:]
    assert "Auto-selected partition 'gpu' for job gpu_job" in output, output[-3000:]
    assert "Error in rule gpu_job" in output and " -p gpu " in output and "--gpus=1" in output, output[-3000:]
    assert (work / "ok.txt").read_text() == "ok\n"  # keep-going: the other job ran
    assert not (work / "fails.txt").exists()
    kept = list((work / ".snakemake" / "slurm_logs" / "rule_fails").rglob("*.log"))
    assert len(kept) == 2  # the profile's retries: 1
    assert all("this rule fails on purpose" in log.read_text() for log in kept)


def test_the_tiny_study_runs_through_slurm(slurm_cluster, tiny_study, tmp_path):
    work = workflow_copy(tmp_path)
    result = slurm_snakemake(work, slurm_cluster, *TARGETS, "--configfile", "tiny.yaml")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:] + slurm_logs(Path(slurm_cluster["SLURM_TEST_DIR"]))
    assert "SLURM run ID" in output
    assert "Auto-selected partition 'cpu'" in output  # profiles/slurm/partitions.yaml
    again = snakemake_dry_run(work)
    assert "Nothing to be done" in again, again[-3000:]
    compared = 0
    for pattern in DETERMINISTIC:
        for local in sorted(tiny_study.glob(pattern)):
            if local.is_file() and (work / local.relative_to(tiny_study)).exists():
                relative = local.relative_to(tiny_study)
                assert (work / relative).read_bytes() == local.read_bytes(), relative
                compared += 1
    assert compared > 20


def test_a_paper_configs_miniature_runs_through_slurm(slurm_cluster, tmp_path):
    work = workflow_copy(tmp_path)
    home = tmp_path / "ir_datasets_home"
    prepare(work, home, **MINIATURES[PAPER_MINIATURE])
    env = offline_env(home) | {"SLURM_TEST_DIR": slurm_cluster["SLURM_TEST_DIR"]}
    env.pop("SLURM_CONF", None)
    result = slurm_snakemake(work, env, PAPER_TARGET, *configfiles(PAPER_MINIATURE))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:] + slurm_logs(Path(slurm_cluster["SLURM_TEST_DIR"]))
    # the paper config's training and scoring jobs ask for a GPU; its miniature asks for none
    assert "Auto-selected partition 'cpu'" in output and "partition 'gpu'" not in output, output[-3000:]
    metrics = pd.read_csv(work / PAPER_TARGET)
    assert "nDCG@10" in set(metrics["measure"]) and metrics["value"].between(0, 1).all(), metrics


def snakemake_dry_run(work: Path) -> str:
    result = run([str(BIN / "snakemake"), "-n", *TARGETS, "--configfile", "tiny.yaml"], work, ENV, 120)
    return result.stdout + result.stderr
