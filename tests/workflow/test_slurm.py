"""profiles/slurm on a real Slurm: a single-node cluster (scripts/slurm-test-cluster.sh) runs part of a paper
config's miniature to the same bytes as the local run and reports a failing rule as failed (docs/cluster.md).

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
from test_paper_miniatures import configfiles, miniature_workflow
from test_workflow import BIN, ENV, assert_same_deterministic_files

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

CLUSTER = REPO / "scripts" / "slurm-test-cluster.sh"
# the plugin's first status check after 2 s instead of 40 s: a short job in seconds, not minutes
FAST = ["--slurm-init-seconds-before-status-checks", "2", "--latency-wait", "5"]
# A paper config through Slurm: config/paper/tk.yaml with its miniature (test_paper_miniatures runs every job
# locally). Every kind of step, from the ir_datasets ids served offline and the GloVe file: datasets, Lucene
# indexes, BM25, the official candidates, evaluation, token stores, word vectors, examples, a KNRM trained on the
# gpu-capable path and re-ranking, a table (35 jobs). The whole miniature through Slurm would cost its ~180
# submissions, each polled at growing intervals by the plugin.
PAPER_MINIATURE = "tk"
PAPER_TARGETS = ["results/metrics/msmarco-passage/knrm.knrm.s42.test.csv", "results/tables/first_stage.csv"]


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


def test_a_paper_configs_miniature_runs_through_slurm_to_the_local_runs_bytes(slurm_cluster, paper_miniature_run,
                                                                            tmp_path):
    local = paper_miniature_run(PAPER_MINIATURE)
    work, env = miniature_workflow(tmp_path, PAPER_MINIATURE)
    env = env | {"SLURM_TEST_DIR": slurm_cluster["SLURM_TEST_DIR"]}
    env.pop("SLURM_CONF", None)
    arguments = [*PAPER_TARGETS, *configfiles(PAPER_MINIATURE)]
    result = slurm_snakemake(work, env, *arguments)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:] + slurm_logs(Path(slurm_cluster["SLURM_TEST_DIR"]))
    assert "SLURM run ID" in output
    # profiles/slurm/partitions.yaml: the paper config's training and scoring jobs ask for a GPU, its miniature for none
    assert "Auto-selected partition 'cpu'" in output and "partition 'gpu'" not in output, output[-3000:]
    again = run([str(BIN / "snakemake"), "-n", *arguments], work, env, 120)
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-3000:]
    metrics = pd.read_csv(work / PAPER_TARGETS[0])
    assert "nDCG@10" in set(metrics["measure"]) and metrics["value"].between(0, 1).all(), metrics
    assert assert_same_deterministic_files(local.work, work) > 20
