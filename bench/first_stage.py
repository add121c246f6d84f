"""Benchmark: time of each first-stage step of the default study, and Anserini's share.

Runs the default study's first-stage part (datasets, indexes, BM25/QL candidates, evaluation,
table) from scratch in a temporary copy of the workflow, then reads Snakemake's per-job
``benchmark:`` files and the Anserini timings the index/search steps record. Reports

* wall time of the whole first stage (budget: <= 180 s on 2 cores),
* seconds per stage (sum over jobs),
* pipeline overhead around Anserini: (job wall time - Anserini's own wall time) summed over
  the index and search jobs, relative to Anserini's time (budget: <= 20 %).

Usage: python bench/first_stage.py [--cores 2] [--out bench/results/first_stage.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from rankstudy.cpu_isa import cpu_model

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "profiles", "environment.yml")


def run_study(work: Path, cores: int) -> float:
    for name in WORKFLOW_FILES:
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, work / name)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    started = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "snakemake"), "results/tables/first_stage.csv",
                    "--cores", str(cores), "--quiet", "all"], cwd=work, env=env, check=True)
    return time.perf_counter() - started


def stage_times(work: Path) -> pd.DataFrame:
    rows = []
    for path in (work / "benchmarks").rglob("*.tsv"):
        stage = path.relative_to(work / "benchmarks").parts[0]
        seconds = float(pd.read_csv(path, sep="\t")["s"].iloc[0])
        rows.append({"stage": stage, "job": str(path.relative_to(work / "benchmarks").with_suffix("")), "s": seconds})
    return pd.DataFrame(rows)


def anserini_share(work: Path, jobs: pd.DataFrame) -> tuple[float, float]:
    """(Anserini seconds, pipeline seconds around them) over the index and search jobs."""
    anserini = pipeline = 0.0
    for path in (work / "benchmarks" / "anserini").glob("*.json"):
        stage, rest = path.stem.split(".", 1)
        dataset, *system_split = rest.split(".")
        job = f"{stage}/{dataset}" + ("/" + ".".join(system_split) if system_split else "")
        wall = float(jobs.loc[jobs["job"] == job, "s"].iloc[0])
        own = json.loads(path.read_text())["anserini_s"]
        anserini += own
        pipeline += wall - own
    return anserini, pipeline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "first_stage.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rankstudy-bench-") as tmp:
        work = Path(tmp)
        wall = run_study(work, args.cores)
        jobs = stage_times(work)
        anserini, pipeline = anserini_share(work, jobs)
    per_stage = jobs.groupby("stage")["s"].agg(["count", "sum"]).rename(columns={"count": "jobs", "sum": "seconds"})
    machine = f"{cpu_model()}, {os.cpu_count()} CPUs visible, --cores {args.cores}"
    ratio = pipeline / anserini
    lines = [
        "# First-stage benchmark (default study)",
        "",
        f"Machine: {machine}; Python {platform.python_version()}; {time.strftime('%Y-%m-%d')}.",
        "",
        f"- Wall time, whole first stage from scratch: **{wall:.1f} s** (budget 180 s) "
        f"{'PASS' if wall <= 180 else 'FAIL'}",
        f"- Anserini's own time (index, index stats, search): {anserini:.1f} s; pipeline time around it "
        f"(conversion, checks, run rewriting, process start-up): {pipeline:.1f} s = **{ratio:.1%}** (budget 20 %) "
        f"{'PASS' if ratio <= 0.20 else 'FAIL'}",
        "",
        "Seconds per stage (sum over jobs; jobs run in parallel, so the sum exceeds the wall time):",
        "",
        per_stage.round(2).to_markdown(),
        "",
        "Re-measure: `python bench/first_stage.py` (with the environment on PATH).",
    ]
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)
    return 0 if wall <= 180 and ratio <= 0.20 else 1


if __name__ == "__main__":
    raise SystemExit(main())
