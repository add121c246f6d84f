"""How long Snakemake takes to plan each config (a dry run, ``snakemake -n``): the budget is 10 s.

The paper configs read ir_datasets collections; the dry run must plan them without the data and
without a network (the test suite checks that it does, tests/workflow/test_paper_configs.py), so every run
here goes through closed proxies too. Each config is planned ``--repeats`` times in a fresh copy-free
invocation from the repository root; reported: the best and the median wall time.

Usage: python bench/dry_run.py [--repeats 3] [--out bench/results/dry_run.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ("config/config.yaml", "config/extended.yaml", "config/paper/tk.yaml", "config/paper/tkl.yaml",
           "config/paper/socialformer.yaml", "config/paper/choppy.yaml")
BUDGET_S = 10.0


def dry_run_seconds(config: str, home: Path) -> float:
    closed = "http://127.0.0.1:9"
    env = dict(os.environ, IR_DATASETS_HOME=str(home), HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed,
               https_proxy=closed)
    snakemake = Path(sys.executable).with_name("snakemake")
    start = time.perf_counter()
    done = subprocess.run([str(snakemake), "-n", "--cores", "2", "--configfile", config], cwd=REPO, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"dry run of {config} failed:\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [f"# python bench/dry_run.py --repeats {args.repeats}: {platform.machine()}, {os.cpu_count()} CPUs, "
             f"{time.strftime('%Y-%m-%d')}", "", f"Budget: {BUDGET_S:.0f} s per dry run.", "",
             "| config | best s | median s | within budget |", "|---|---:|---:|---|"]
    with tempfile.TemporaryDirectory() as home:
        for config in CONFIGS:
            times = [dry_run_seconds(config, Path(home)) for _ in range(args.repeats)]
            lines.append(f"| {config} | {min(times):.1f} | {statistics.median(times):.1f} | "
                         f"{'yes' if min(times) <= BUDGET_S else 'no'} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
