"""The real data the configs read ships with the project (resources/data): every file under 4 MiB, every folder with
a README naming its source, commit and licence, every collection readable whole, every given run reproducing its
published figure, and the study's own Anserini first stage reproducing its figures through the workflow, on
Cranfield and on QMSum's meeting transcripts (a collection in parts); resources/data/figures.yaml holds the
numbers. Nothing here needs the network or a folder beside the repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import REPO
from rankstudy.datasets.local import collection_files
from rankstudy.evaluate import ALL, aggregate, evaluate_run, read_metrics
from rankstudy.formats import iter_collections, read_qrels, read_run

DATA = REPO / "resources" / "data"
FIGURES = yaml.safe_load((DATA / "figures.yaml").read_text())
FOLDERS = sorted(path for path in DATA.iterdir() if path.is_dir())
LIMIT = 4 * 1024 * 1024  # bytes: every shipped file is under 4 MiB
# where the project's own files live; none may read a folder outside the repository
PROJECT = ["config", "docs", "workflow", "src", "tests", "bench", "scripts", "README.md", "Makefile", "resources"]
OUTSIDE = re.compile(r"\.\./shared\b")


def test_every_shipped_file_is_under_4_mib():
    large = [f"{path.relative_to(REPO)} ({path.stat().st_size:,} bytes)" for path in DATA.rglob("*")
             if path.is_file() and path.stat().st_size >= LIMIT]
    assert not large, large


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: path.name)
def test_every_folder_says_where_it_comes_from_and_under_which_licence(folder):
    text = (folder / "README.md").read_text()
    assert re.search(r"github\.com/[\w.-]+/[\w.-]+", text), "a source repository"
    assert re.search(r"\b(commit|at)\s+[0-9a-f]{7,40}\b", text), "the source's commit"
    assert re.search(r"licen[cs]", text, re.I), "a licence, or that none is stated"
    assert folder.name in (DATA / "README.md").read_text(), "resources/data/README.md lists every folder"


@pytest.mark.parametrize("folder", sorted(FIGURES["documents"]))
def test_a_shipped_collection_reads_whole(folder):
    files = collection_files(DATA / folder)
    assert len({docid for docid, _ in iter_collections(files)}) == FIGURES["documents"][folder]


@pytest.mark.parametrize("check", FIGURES["runs"], ids=lambda check: f"{check['folder']}/{check['run']}")
def test_a_given_run_reproduces_its_published_figure(check):
    folder = DATA / check["folder"]
    run, qrels = read_run(folder / check["run"]), read_qrels(folder / check["qrels"])
    if check.get("queries") == "run":
        qrels = {qid: judged for qid, judged in qrels.items() if qid in run}
    means = aggregate(evaluate_run(run, qrels, list(check["measures"]), check["rel"]))
    measured = dict(zip(means["measure"], means["value"].round(check.get("places", 4))))
    assert measured == pytest.approx(check["measures"], abs=1e-9)


def test_no_project_file_reads_a_folder_beside_the_repository():
    tracked = subprocess.run(["git", "ls-files", *PROJECT], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    naming = [name for name in tracked if (REPO / name).is_file() and not name.endswith((".tsv", ".run", ".txt"))
              and OUTSIDE.search((REPO / name).read_text(errors="replace"))]
    assert not naming, f"these files name a folder beside the repository: {naming}"


def config_paths(text: str) -> list[str]:
    return re.findall(r"resources/data/[\w./-]+", text)


@pytest.mark.parametrize("config", sorted(REPO.glob("config/*.yaml")), ids=lambda path: path.name)
def test_every_path_a_config_names_is_shipped(config):
    missing = [path for path in config_paths(config.read_text()) if not (REPO / path.rstrip("/.")).exists()]
    assert not missing, missing


@pytest.mark.slow
@pytest.mark.parametrize("check", FIGURES["workflow"], ids=lambda check: Path(check["config"]).stem)
def test_the_study_first_stage_reproduces_its_figures_through_the_workflow(check, tmp_path):
    """A config through Snakemake as a user runs it: Anserini indexes the shipped collection (its parts read in
    order), searches it, ir-measures evaluates the runs; the metric files' means are the figures of
    resources/data/figures.yaml."""
    work = tmp_path / "study"
    work.mkdir()
    for name in ("Snakefile", "workflow", "config", "profiles", "environment.yml"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, work / name)
    (work / "resources").symlink_to(REPO / "resources")
    configs = [check["config"]]
    if "datasets" in check:
        (work / "only.yaml").write_text(yaml.safe_dump({"first_stage": {"datasets": check["datasets"]}}))
        configs.append("only.yaml")
    bin_dir = Path(sys.executable).parent  # rules call `python -m rankstudy` from PATH
    # the metric files of the systems the figures name only: a config's other systems (the long-document config's
    # MiniLM reference) and its neural runs are not this test's
    targets = sorted({f"results/metrics/{row['dataset']}/{row['system']}.{row['split']}.csv" for row in check["rows"]})
    result = subprocess.run([str(bin_dir / "snakemake"), "--cores", "2", "--configfile", *configs, "--", *targets],
                            cwd=work, env=dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}"),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    means = read_metrics([work / target for target in targets])
    means = means[means["qid"] == ALL]
    for expected in check["rows"]:
        row = means[(means["dataset"] == expected["dataset"]) & (means["split"] == expected["split"])
                    & (means["system"] == expected["system"])]
        measured = {measure: round(float(row.loc[row["measure"] == measure, "value"].iloc[0]), 4)
                    for measure in expected["measures"]}
        assert measured == pytest.approx(expected["measures"], abs=1e-9), expected
