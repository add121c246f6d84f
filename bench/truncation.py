"""Benchmark: the truncation study (Choppy Table 1: Oracle, Fixed-k, Greedy-k, BiCut with its alpha
sweep, Choppy for F1 and DCG) on 250 lists of 300, wall time and peak memory, with the settings
before issue 19 and with today's default, side by side in one run:

    python bench/truncation.py [--queries 250] [--n 300] [--out bench/results/truncation.md]

The lists are generated here (no dataset needed): each query has a level, a decreasing score curve
with noise, and relevant documents drawn more often near the top, so the best cut differs from query
to query. Each setting runs in its own process (``python -m rankstudy truncation``, as the workflow
runs it); peak memory is that process's maximum resident set size. "before" is the configuration of
the study before issue 19 (raw scores, N(0, 1) positions, dropout 0.1 on the attention weights too,
d 128 / 8 heads, 2 threads, BiCut alpha in 0.1-0.65); the model code is today's, which reproduces it
with those settings.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BEFORE = {"threads": 2, "settings": {
    "model": {"d_model": 128, "heads": 8, "layers": 3, "ff_dim": 128, "dropout": 0.1, "attention_dropout": 0.1,
               "lr": 1e-3, "batch_size": 64, "epochs": 30, "patience": 8, "score_scaling": "raw",
               "position_init_std": 1.0},
    "bicut": {"epochs": 30}, "bicut_alphas": [0.1, 0.25, 0.5, 0.65]}}


def today() -> dict:
    import yaml

    config = yaml.safe_load(Path("config/config.yaml").read_text())
    choppy = config["choppy"]
    settings = {key: choppy[key] for key in ("model", "bicut", "bicut_alphas")}
    return {"threads": config["neural"]["threads"], "settings": settings}


def write_lists(queries: int, n: int, directory: Path, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    run_lines, qrels_lines = [], []
    for q in range(queries):
        relevant_count = min(60, int(rng.pareto(1.0)) + 1)
        # relevant documents concentrate at the top; how much differs by query
        sharpness = rng.uniform(0.02, 0.3)
        weights = np.exp(-sharpness * np.arange(n))
        positions = rng.choice(n, size=min(relevant_count, n), replace=False, p=weights / weights.sum())
        level = rng.uniform(5, 40)
        scores = level + 8 * np.exp(-np.arange(n) / rng.uniform(5, 60)) + rng.normal(0, 0.2, n)
        scores[positions] += rng.uniform(0.5, 2.0)
        scores = np.sort(scores)[::-1]
        for rank, score in enumerate(scores, 1):
            run_lines.append(f"q{q} Q0 d{q}_{rank} {rank} {score:.4f} bench")
        qrels_lines += [f"q{q} 0 d{q}_{p + 1} 1" for p in sorted(positions)]
        qrels_lines.append(f"q{q} 0 d{q}_x 1") if rng.random() < 0.3 else None  # a relevant one not retrieved
    run, qrels = directory / "run.txt", directory / "qrels.txt"
    run.write_text("\n".join(run_lines) + "\n")
    qrels.write_text("\n".join(qrels_lines) + "\n")
    return run, qrels


def measure(name: str, setup: dict, run: Path, qrels: Path, n: int, directory: Path) -> dict:
    settings = {"n": n, "fixed_k": [5, 10, 50], **setup["settings"]}
    out = directory / name
    env = dict(os.environ, OMP_NUM_THREADS=str(setup["threads"]))
    # the job as the workflow runs it, with torch's threads as the rule sets them; the process reports
    # its own peak resident set (ru_maxrss, KiB on Linux)
    command = [sys.executable, "-c",
               "import resource, sys, torch; from rankstudy.cli import main; torch.set_num_threads(int(sys.argv[1])); "
               "code = main(sys.argv[2:]); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(code)",
               str(setup["threads"]), "choppy-study", "--run", str(run), "--qrels", str(qrels),
               "--config", json.dumps(settings), "--seed", "42", "--out", str(out)]
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, check=True, env=env, stderr=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    results = {(r["metric"], r["method"].split(" ")[0]): r for r in _csv(out / "results.csv")}
    return {"name": name, "threads": setup["threads"], "wall_s": time.perf_counter() - start,
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "peak_mb": int(done.stdout.split()[-1]) / 1024, "results": results}


def _csv(path: Path) -> list[dict]:
    import csv

    with path.open() as f:
        return list(csv.DictReader(f))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=250)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--only", choices=["before", "today"], help="run one setting only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        run, qrels = write_lists(args.queries, args.n, directory)
        setups = {"today": today(), "before": BEFORE}
        rows = [measure(name, setup, run, qrels, args.n, directory) for name, setup in setups.items()
                if args.only in (None, name)]
    lines = [f"Choppy study on {args.queries} generated lists of {args.n} (bench/truncation.py), "
             f"{platform.machine()} {os.cpu_count()} cores, one process at a time; peak memory: the process's "
             "largest resident set (ru_maxrss).", "",
             "| setting | threads | wall s | CPU s | peak MB | F1 Greedy-k | F1 BiCut | F1 Choppy | Choppy mean cut (sd) F1 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["results"]
        choppy = r[("f1", "Choppy")]
        lines.append(f"| {row['name']} | {row['threads']} | {row['wall_s']:.0f} | {row['cpu_s']:.0f} | "
                     f"{row['peak_mb']:.0f} | {float(r[('f1', 'Greedy-k')]['value']):.4f} | "
                     f"{float(r[('f1', 'BiCut')]['value']):.4f} | {float(choppy['value']):.4f} | "
                     f"{float(choppy['mean_cut']):.1f} ({float(choppy['cut_sd']):.1f}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
