"""Snakemake's schedulers side by side: the tiny test study (tests/config/tiny.yaml) run end to end with each, in
fresh workflow copies one after the other, nothing else running. Reports each run's wall time, the CPU seconds of
Snakemake's own process and of its children (the jobs, and for ``ilp`` the CBC solver it starts on every pass with
more ready jobs than free cores), and whether the runs' outputs are byte-identical.

    python bench/scheduler.py [--schedulers greedy ilp] [--dir /tmp/scheduler-bench] [--out FILE]

(bench/results/scheduler.md holds its 2026-12-02 table.)
"""

from __future__ import annotations

import argparse
import filecmp
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Snakemake run in-process, its own and its children's CPU printed when it exits
MEASURED_SNAKEMAKE = """
import atexit, resource, sys
def report():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"CPU {own.ru_utime + own.ru_stime:.1f} {children.ru_utime + children.ru_stime:.1f}", file=sys.stderr)
atexit.register(report)
from snakemake.cli import main
sys.argv = ["snakemake"] + sys.argv[1:]
main()
"""


def workflow_copy(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for name in ("Snakefile", "workflow", "config", "profiles", "environment.yml", "requirements.lock"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, directory / name)
    shutil.copy(REPO / "tests" / "config" / "tiny.yaml", directory / "tiny.yaml")
    return directory


def run(directory: Path, scheduler: str) -> dict:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", MEASURED_SNAKEMAKE, "--cores", "2", "--configfile", "tiny.yaml",
                             "--scheduler", scheduler], cwd=directory, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"{scheduler}: snakemake failed\n{result.stderr[-3000:]}")
    own, children = result.stderr.strip().splitlines()[-1].split()[1:]
    return {"scheduler": scheduler, "wall": wall, "own": float(own), "children": float(children)}


def same_outputs(a: Path, b: Path) -> bool:
    for folder in ("runs", "results/metrics"):
        pending = [filecmp.dircmp(a / folder, b / folder)]
        while pending:
            comparison = pending.pop()
            _, mismatch, errors = filecmp.cmpfiles(comparison.left, comparison.right, comparison.common_files,
                                                   shallow=False)
            if mismatch or errors or comparison.left_only or comparison.right_only:
                return False
            pending.extend(comparison.subdirs.values())
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedulers", nargs="+", default=["greedy", "ilp"])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/scheduler-bench"))
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    rows = [run(workflow_copy(args.dir / name), name) for name in args.schedulers]
    identical = all(same_outputs(args.dir / args.schedulers[0], args.dir / name) for name in args.schedulers[1:])
    lines = [f"Tiny test study, `--cores 2`, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
             f"run in this order; runs/ and results/metrics/ byte-identical across schedulers: {identical}.", "",
             "| scheduler | wall s | Snakemake CPU s | children CPU s |", "|---|---:|---:|---:|"]
    lines += [f"| {r['scheduler']} | {r['wall']:.0f} | {r['own']:.1f} | {r['children']:.1f} |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
