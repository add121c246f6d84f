"""Benchmark: a training step in micro-batches (``training.micro_batch``) against one pass over the batch.

A training step of the default study's models, at the default config's model settings
(config/config.yaml ``neural.models``, 64-d random word vectors) and the batch and document length of
the runs that train them: forward over the pairs, pairwise margin loss, backward, Adam. The same
model and inputs are stepped with the whole batch in one pass and in micro-batches of
``batch / 2, / 4, / 8`` pairs (gradients accumulated: the same step, ``rankstudy.train.loop._backward``),
round after round, the order reversed every other round, so a change in load hits every variant
alike. Reported: the median step time over rounds of the one-pass step and, per micro-batch size, the
median over rounds of (one-pass time ÷ micro-batch time) in the same round. Runs at the study's
thread setting (``neural.threads``: 1) and at 2 threads, each in its own process.

Usage: python bench/micro_batch.py [--rounds 5] [--only TKL] [--threads 1 2] [--out bench/results/micro_batch.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
# (label, neural.models key, document length, pairs per step): as the default config's runs train them
CASES = [
    ("TK @200 (d1, p1)", "tk", 200, 32),
    ("TKL @2000 (tkl-2k)", "tkl", 2000, 16),
    ("TKL @4000 (tkl-4k)", "tkl", 4000, 16),
    ("KNRM @200 (doc-knrm)", "knrm", 200, 32),
    ("CONV-KNRM @200 (doc-conv_knrm)", "conv_knrm", 200, 32),
    ("CONV-KNRM @1000 (conv_knrm-1k)", "conv_knrm", 1000, 8),
    ("MatchPyramid @200", "matchpyramid", 200, 32),
    ("PACRR @200", "pacrr", 200, 32),
]
QUERY_LENGTH, VOCAB, DIM = 8, 20000, 64


def worker(threads: int, rounds: int, only: str) -> list[dict]:
    import numpy as np
    import torch

    from rankstudy.models import build_model
    from rankstudy.train.losses import pairwise_margin_loss

    torch.set_num_threads(threads)
    models = yaml.safe_load((REPO / "config/config.yaml").read_text())["neural"]["models"]
    vectors = np.random.default_rng(0).standard_normal(size=(VOCAB, DIM), dtype=np.float32)
    vectors[:2] = 0
    rows = []
    for label, key, length, pairs in [case for case in CASES if only in case[0]]:
        settings = {name: value for name, value in models[key].items() if name != "model"}
        torch.manual_seed(0)
        model = build_model(models[key]["model"], settings, vectors).train()
        generator = torch.Generator().manual_seed(1)
        query = torch.randint(2, VOCAB, (2 * pairs, QUERY_LENGTH), generator=generator)
        documents = torch.randint(2, VOCAB, (2 * pairs, length), generator=generator)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-6)

        def step(micro: int) -> float:
            start = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            for first in range(0, pairs, micro):
                rows_ = list(range(first, first + micro)) + list(range(pairs + first, pairs + first + micro))
                scores = model(query[rows_], documents[rows_])
                (pairwise_margin_loss(scores[:micro], scores[micro:]) * (micro / pairs)).backward()
            optimizer.step()
            return time.perf_counter() - start

        sizes = [size for size in (pairs, pairs // 2, pairs // 4, pairs // 8) if size >= 1]
        times: dict[int, list[float]] = {size: [] for size in sizes}
        for round_ in range(rounds + 1):  # round 0 warms up
            for size in (sizes if round_ % 2 else sizes[::-1]):
                elapsed = step(size)
                if round_:
                    times[size].append(elapsed)
        rows.append({"model": label, "pairs": pairs, "threads": threads,
                     "step_s": statistics.median(times[pairs]),
                     "speedup": {size: statistics.median(whole / part for whole, part in zip(times[pairs], times[size]))
                                 for size in sizes[1:]}})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="the models whose label contains this")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.rounds, args.only)))
        return 0
    rows = []
    for threads in args.threads:
        print(f"{threads} thread(s), load average {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, __file__, "--worker", str(threads), "--rounds", str(args.rounds),
                               "--only", args.only],
                              env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, check=True, capture_output=True, text=True)
        rows += json.loads(done.stdout.splitlines()[-1])
    lines = [f"# python bench/micro_batch.py --rounds {args.rounds}: {platform.machine()}, {os.cpu_count()} CPUs, "
             f"{time.strftime('%Y-%m-%d')}, load average at the end {os.getloadavg()[0]:.1f}", "",
             "One training step (pairs as the default config's runs train), the default config's model settings; "
             "speed-up of micro-batches of m pairs over one pass (median over rounds of the ratio in one round).", "",
             "| model | threads | pairs | one pass s/step | m = pairs/2 | pairs/4 | pairs/8 |", "|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        speedups = [f"{value:.2f}× (m={size})" for size, value in row["speedup"].items()]
        speedups += [""] * (3 - len(speedups))
        lines.append(f"| {row['model']} | {row['threads']} | {row['pairs']} | {row['step_s']:.3f} | " + " | ".join(speedups) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
