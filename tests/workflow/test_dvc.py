"""DVC round trip (dvc.yaml, docs/cluster.md): the tiny study's artifacts go to a remote with
`make push`, come back into a fresh clone with `make pull`, are identical there, and Snakemake
has nothing to do (DVC does not keep mtimes; `make pull` touches the outputs in DAG order)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import REPO
from test_workflow import BIN, ENV

pytestmark = pytest.mark.slow

DVC_ENV = dict(ENV, DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="rankstudy test", GIT_AUTHOR_EMAIL="test@invalid",
               GIT_COMMITTER_NAME="rankstudy test", GIT_COMMITTER_EMAIL="test@invalid")
# what a checkout of the project holds beside the workflow copy (tests/workflow/test_workflow.workflow_copy)
PROJECT = ["src", "scripts", "dvc.yaml", ".dvc/config", ".dvc/.gitignore", ".dvcignore", ".gitignore",
           "Makefile", "pyproject.toml"]


def run(cwd: Path, *command: str, limit: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(["timeout", "-s", "KILL", str(limit), *command], cwd=cwd, env=DVC_ENV,
                            capture_output=True, text=True)
    assert result.returncode == 0, f"{command}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout + result.stderr


def tracked_files(root: Path, outs: list[str]) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes()
            for out in outs for path in sorted((root / out).rglob("*")) if path.is_file()}


def test_artifacts_round_trip_through_a_dvc_remote(tiny_study, tmp_path):
    repo, clone, remote = tmp_path / "repo", tmp_path / "clone", tmp_path / "remote"
    # a working copy after `snakemake --configfile tiny.yaml`: outputs (mtimes kept) and .snakemake
    shutil.copytree(tiny_study, repo, symlinks=True)
    for name in PROJECT:
        source, target = REPO / name, repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, target)
    run(repo, "git", "init", "-q")
    run(repo, "git", "add", "-A")
    run(repo, "git", "commit", "-q", "-m", "project")
    run(repo, "dvc", "remote", "modify", "--local", "storage", "url", str(remote))

    run(repo, "make", "push")
    assert "up to date" in output(run(repo, "dvc", "status"))
    run(repo, "git", "add", "dvc.lock", "summary")
    run(repo, "git", "commit", "-q", "-m", "study artifacts")
    metrics = output(run(repo, "dvc", "metrics", "show"))
    assert "synthetic-passage.test.bm25.nDCG@10" in metrics, metrics

    run(tmp_path, "git", "clone", "-q", str(repo), str(clone))
    run(clone, "dvc", "remote", "modify", "--local", "storage", "url", str(remote))
    pulled = run(clone, "make", "pull", "SNAKEMAKE_ARGS=--configfile tiny.yaml")

    outs = [next(iter(out)) for out in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["study"]["outs"]]
    original, fetched = tracked_files(repo, outs), tracked_files(clone, outs)
    assert len(original) > 100
    assert sorted(fetched) == sorted(original)
    assert [name for name in original if fetched[name] != original[name]] == []
    assert (clone / "summary" / "metrics.json").read_bytes() == (repo / "summary" / "metrics.json").read_bytes()

    dry = output(run(clone, str(BIN / "snakemake"), "-n", "--configfile", "tiny.yaml"))
    assert "Nothing to be done" in dry, pulled.stdout[-2000:] + pulled.stderr[-2000:] + dry[-3000:]
    assert "up to date" in output(run(clone, "dvc", "status"))
