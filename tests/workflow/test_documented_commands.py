"""Every command block of the README and docs/ runs as written, so a documented command that stops working fails CI.

A ```bash block is preceded by a marker that says how CI runs it:

    <!-- ci: run -->                  as written (small data, minutes at most)
    <!-- ci: dry-run -->              with every ``snakemake`` a dry run (-n) and every ``make`` ``make -n``: the
                                      jobs are planned, the targets exist; for the long jobs
    <!-- ci: run in the tiny study --> as written, in a copy of the tiny study's finished folder (with docs/)
    <!-- ci: skip (why) -->           not run; the reason names what tests it instead

Any marker may carry a note in parentheses; a skip must.
A block runs with bash (``set -euo pipefail``) from a copy of the repository's tracked files, as a user's clone has
them: the real-data configs read the collections shipped under resources/ (linked, not copied: read-only data) and
nothing beside the repository; offline (every proxy a closed port), with this interpreter's environment as
``.venv``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import REPO
from test_paper_miniatures import offline_env

DOCUMENTS = ["README.md", "config/README.md", *sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("docs/*.md"))]
MARKER = re.compile(r"<!-- ci: (?P<mode>run|dry-run|run in the tiny study|skip)(?: \((?P<note>.+)\))? -->")
FENCE = re.compile(r"^```(\w*)\s*$")
SHELLS = {"bash", "sh", "shell", "console"}
DRY_RUN = 'snakemake() { command snakemake -n "$@"; }\nmake() { command make -n "$@"; }\n'


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # of the opening fence
    marker: str | None  # run | dry-run | run in the tiny study | skip; None: no marker (or a skip without why)
    script: str

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"


def command_blocks(document: str) -> list[Block]:
    """The shell blocks of ``document`` with the marker on the line before each (blank lines between allowed)."""
    lines = (REPO / document).read_text().splitlines()
    blocks, start, language = [], None, ""
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if not fence:
            continue
        if start is None:
            start, language = number, fence.group(1)
            continue
        if language in SHELLS:
            before = [text for text in lines[:start - 1] if text.strip()]
            marker = MARKER.fullmatch(before[-1].strip()) if before else None
            if marker and marker["mode"] == "skip" and not marker["note"]:
                marker = None
            blocks.append(Block(document, start, marker["mode"] if marker else None,
                                "\n".join(lines[start:number - 1]) + "\n"))
        start = None
    return blocks


BLOCKS = [block for document in DOCUMENTS for block in command_blocks(document)]


def test_every_command_block_says_how_ci_runs_it():
    unmarked = [block.id for block in BLOCKS if block.marker is None]
    assert not unmarked, f"a ```bash block without a '<!-- ci: ... -->' marker before it (see this module): {unmarked}"
    assert len(BLOCKS) >= 15  # the parser found the blocks (README, docs/cluster.md, docs/msmarco.md, ...)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the repository's tracked files (its .venv: this interpreter's; resources/ linked) and the offline
    environment."""
    root = tmp_path_factory.mktemp("documented")
    repo = root / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file() and not name.startswith("resources/"):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, repo / name)
    (repo / ".venv").symlink_to(Path(sys.prefix))
    (repo / "resources").symlink_to(REPO / "resources")
    home = root / "ir_datasets_home"
    home.mkdir()
    return repo, offline_env(home)


def run_block(script: str, cwd: Path, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def params(mode: str, *marks):
    return [pytest.param(block, id=block.id, marks=marks) for block in BLOCKS if block.marker == mode]


@pytest.mark.parametrize("block", params("dry-run"))
def test_a_documented_long_command_plans_its_jobs(block, workspace):
    repo, env = workspace
    result = run_block(DRY_RUN + block.script, repo, env, timeout=600)
    assert result.returncode == 0, f"{block.id}:\n{block.script}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"


@pytest.mark.parametrize("block", params("run", pytest.mark.slow))
def test_a_documented_command_runs(block, workspace):
    repo, env = workspace
    result = run_block(block.script, repo, env, timeout=1800)
    assert result.returncode == 0, f"{block.id}:\n{block.script}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"


@pytest.mark.parametrize("block", params("run in the tiny study", pytest.mark.slow))
def test_a_documented_command_runs_on_a_finished_study(block, tiny_study, workspace, tmp_path):
    _, env = workspace
    study = tmp_path / "study"
    for name in ("config", "results"):
        shutil.copytree(tiny_study / name, study / name)
    shutil.copytree(REPO / "docs", study / "docs")
    result = run_block(block.script, study, env, timeout=600)
    assert result.returncode == 0, f"{block.id}:\n{block.script}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
