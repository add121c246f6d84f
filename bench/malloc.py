"""Training steps and inference with glibc's default malloc against ``rankstudy.malloc.keep_freed_memory``.

The allocator setting is per process, so every (case, setting) runs in a fresh worker process; each round runs
both settings of a case one after the other, in alternating order, and the ratio is the median over rounds of
system ÷ heap time in the same round. A worker times ``--steps`` steps (bench/busy_speed.py's training step
or inference pass) after one warm-up step and reports their median, its peak resident memory (``ru_maxrss``)
and the page faults per step (``ru_minflt``: a fault is a fresh page touched, the cost the setting removes). Workers pin the AVX2 kernels and, for 2 threads, the
passive OpenMP wait policy, as ``python -m rankstudy`` does.

Cases: the default study's TK and TKL training steps (64-d word vectors, 1 layer, 4 heads, ff 64, frozen
embeddings; lengths drawn as the synthetic passages' and documents'; TKL's 16 pairs in passes of 4 as the
tkl-2k run), TKL at the paper's size (300-d, 2 layers, 10 heads, ff 100; 16 pairs of 2,000 tokens in one pass,
bench/busy_speed.py's "TKL @2000" step) and its inference over 16 documents, and BERT[CLS] (MiniLM) on 8
pairs of 200 tokens.

Usage: python bench/malloc.py [--rounds 3] [--steps 3] [--threads 1 2] [--cases NAME ...]
                              [--out bench/results/malloc.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rankstudy.cpu_isa import pin_vector_isa

BENCH = Path(__file__).resolve().parent
VOCAB = 30000
STUDY = dict(layers=1, heads=4, ff_dim=64, train_embeddings=False)
PAPER = dict(layers=2, heads=10, ff_dim=100)
CASES = {  # name: (model, settings, vector dim, pairs, pairs per pass, longest document, lengths, inference)
    "TK, study, passage lengths": ("tk", STUDY, 64, 32, 32, 200, (61, 0.5, 10), False),
    "TKL, study, document lengths": ("tkl", STUDY, 64, 16, 4, 2000, (750, 1.05, 150), False),
    "TKL @2000, paper size": ("tkl", PAPER, 300, 16, 16, 2000, None, False),
    "TKL @2000, paper size, inference": ("tkl", PAPER, 300, 8, 8, 2000, None, True),
    "BERT[CLS] MiniLM @200": ("bert_cat", dict(encoder="minilm"), 64, 8, 8, 200, None, False),
}


def worker(case: str, steps: int) -> dict:
    """The case's step (or inference pass) as bench/busy_speed.py times it, ``steps`` times after a warm-up."""
    import numpy as np
    import torch

    sys.path.insert(0, str(BENCH))
    from busy_speed import _timers

    from rankstudy.models import build_model

    name, settings, dim, pairs, micro, longest, lengths, inference = CASES[case]
    vectors = np.random.default_rng(0).standard_normal((VOCAB, dim), dtype=np.float32)
    vectors[:2] = 0
    torch.manual_seed(0)
    model = build_model(name, settings, vectors)
    infer, step = _timers(model, dict(query_length=8, doc_length=longest, lengths=lengths, batch=2 * pairs,
                                      pairs=pairs, micro=micro), VOCAB, length_groups=True)
    run = infer if inference else step
    run()  # warm-up
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = [run() for _ in range(steps)]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": statistics.median(times), "peak_rss_mb": usage.ru_maxrss / 1024,
            "faults_per_step": (usage.ru_minflt - faults) / steps}


def _run(case: str, malloc: str, threads: int, steps: int) -> dict:
    env = dict(os.environ, RANKSTUDY_MALLOC=malloc, OMP_NUM_THREADS=str(threads))
    if threads > 1:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    pin_vector_isa(env)
    command = [sys.executable, __file__, "--worker", case, "--malloc", malloc, "--steps", str(steps)]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def measure(args) -> list[dict]:
    rows = []
    for threads in args.threads:
        for case in (case for case in CASES if any(part in case for part in args.cases)):
            results = {"system": [], "heap": []}
            for round_ in range(args.rounds):
                for malloc in (("system", "heap") if round_ % 2 == 0 else ("heap", "system")):
                    results[malloc].append(_run(case, malloc, threads, args.steps))
                    print(f"{threads} thread(s), {case}, {malloc}: {results[malloc][-1]}", file=sys.stderr, flush=True)
            row = {"case": case, "threads": threads,
                   "ratio": statistics.median(s["seconds"] / h["seconds"]
                                              for s, h in zip(results["system"], results["heap"]))}
            for malloc, runs in results.items():
                row[f"{malloc}_seconds"] = statistics.median(run["seconds"] for run in runs)
                row[f"{malloc}_peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
                row[f"{malloc}_faults_per_step"] = statistics.median(run["faults_per_step"] for run in runs)
            rows.append(row)
    return rows


def _table(rows: list[dict], args) -> str:
    lines = [f"# python bench/malloc.py --rounds {args.rounds} --steps {args.steps}: "
             f"{platform.machine()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}",
             "",
             "Seconds per training step (or inference pass) with glibc's default malloc (`system`) and with "
             "`keep_freed_memory` (`heap`, what `python -m rankstudy` sets); speed-up: system ÷ heap, median over "
             "rounds of the ratio in one round; peak resident memory and page faults per step of each.",
             "",
             "| case | threads | system s | heap s | speed-up | system peak MB | heap peak MB "
             "| system faults/step | heap faults/step |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['case']} | {row['threads']} | {row['system_seconds']:.3f} | {row['heap_seconds']:.3f} "
                     f"| {row['ratio']:.2f}× | {row['system_peak_rss_mb']:.0f} | {row['heap_peak_rss_mb']:.0f} "
                     f"| {row['system_faults_per_step']:.0f} | {row['heap_faults_per_step']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--malloc", choices=("system", "heap"), help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per worker, after one warm-up step")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", nargs="+", default=[""], help="run the cases whose name contains one of these")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker:
        import torch

        from rankstudy.malloc import keep_freed_memory

        if keep_freed_memory() != args.malloc:
            raise SystemExit(f"malloc setting {args.malloc!r} could not be applied")
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        print(json.dumps(worker(args.worker, args.steps)))
        return 0
    sys.path.insert(0, str(BENCH))
    from busy_speed import report

    rows = measure(args)
    report(_table(rows, args), rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
