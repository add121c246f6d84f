"""TKL inference throughput and peak memory against TK and against the original's layout.

Paper dimensions (emb 300, 2 layers, 10 heads, ff 100, 11 kernels), one 8-term query against a
batch of documents (re-ranking), 2 threads: TK on 200 tokens; TKL on 500, 1000, 1500, 2000, 3000
and 4000 tokens, each beside the reference TKL (bench/reference_tkl.py: the same weights and
scores, computed as matchmaker's TKL_sigir20 lays it out) on the same inputs; TKL on 2000 real
tokens padded to 4000, and on 2000-token documents with one 4000-token document in the batch
(padding that only packing the chunks, not cutting the batch's trailing padding, can skip).
Batches of 64 documents for TK, 16 for TKL (on CPU TKL scores a batch in slices of at most 16000
document positions, at least one per thread: 8 documents of 2000 tokens).

Time: every configuration runs once per round, one after the other (in reverse order every other
round), round after round (after a warm-up round), so that a change in the machine's load hits
all of them alike; docs/ms is the best round (the least disturbed), "median" the median round,
"cpu ms/doc" the process CPU time of the best round (all threads). The ratios checked are those of
the best rounds (noise only adds time); beside them, the median over rounds of the ratio between
two configurations timed in the same round.

Memory: each configuration runs one forward pass in a fresh process (multiprocessing spawn), as
src/rankstudy/efficiency.py measures: "peak" is the peak RSS above the RSS once torch is imported
(model, embeddings, activations), "activations" the peak above the RSS once model and inputs exist
and a pass over the first document alone has loaded the kernels and started the threads. Blocks
over 128 KiB are mmapped there (MALLOC_MMAP_THRESHOLD_), so freed memory leaves the RSS at once
and the peak is that of live memory.

Checks the targets of the TKL issues (among them issue 57: docs/ms falls with the length from 500 to
4000 tokens, and is at least 1.5x the reference's at every length); exit status 1 if one is missed.

Usage: python bench/tkl_speed.py [--threads 2] [--batch 64] [--tkl-batch 16] [--rounds 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import time

from pathlib import Path

import numpy as np
import torch

from rankstudy.efficiency import _current_rss_mb, _peak_rss_mb
from rankstudy.models.tk import TK, TKConfig
from rankstudy.models.tkl import TKL, TKLConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_tkl import ReferenceTKL  # noqa: E402

QUERY_LENGTH = 8
LENGTHS = (500, 1000, 1500, 2000, 3000, 4000)  # TKL and the reference side by side
DIMS = dict(layers=2, heads=10, ff_dim=100)


def embeddings(vocab: int) -> np.ndarray:
    # float32 directly: a float64 draw would be the process's largest allocation (its peak RSS)
    matrix = np.random.default_rng(0).standard_normal(size=(vocab, 300), dtype=np.float32)
    matrix[:2] = 0
    return matrix


def inputs(batch: int, length: int, real: list[int], vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The same query and the same documents' first tokens whatever the length (so 2000 real
    tokens padded to 4000 are the documents of 2000 tokens, padded)."""
    rng = np.random.default_rng(1)
    query = torch.as_tensor(rng.integers(2, vocab, size=(1, QUERY_LENGTH))).repeat(batch, 1)
    document = torch.as_tensor(rng.integers(2, vocab, size=(batch, max(length, 4000)))[:, :length])
    for row, tokens in enumerate(real):
        document[row, tokens:] = 0
    return query, document


def build(model_name: str, matrix: np.ndarray) -> torch.nn.Module:
    """"TK", "TKL" or "reference" (the reference TKL around a TKL of the same seed: the same weights)."""
    torch.manual_seed(0)
    if model_name == "TK":
        return TK(TKConfig(**DIMS), matrix).eval()
    model = TKL(TKLConfig(**DIMS), matrix).eval()
    return ReferenceTKL(model).eval() if model_name == "reference" else model


def peak_memory(model_name: str, batch: int, length: int, real: list[int], threads: int, vocab: int) -> tuple:
    """(peak RSS above torch, peak RSS above model + inputs) in MB, in a fresh process."""
    baseline = _current_rss_mb()
    torch.set_num_threads(threads)
    model = build(model_name, embeddings(vocab))
    query, document = inputs(batch, length, real, vocab)
    with torch.inference_mode():
        model(query[:1], document[:1])  # loads the kernels, starts the threads
        ready = _current_rss_mb()
        model(query, document)
    peak = _peak_rss_mb()
    return peak - baseline, peak - ready


def _real(lengths: list[int], batch: int) -> list[int]:
    """[all] -> the same real length for every document; [first, rest] -> first, then rest."""
    return [] if not lengths else [lengths[0]] + lengths[-1:] * (batch - 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64, help="TK batch")
    parser.add_argument("--tkl-batch", type=int, default=16, help="TKL batch")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=30000)
    args = parser.parse_args()
    batch = args.tkl_batch
    configurations = {  # name: (model, batch, padded length, real lengths (see _real))
        "TK 200": ("TK", args.batch, 200, []),
        "TKL 2000 real padded to 4000": ("TKL", batch, 4000, [2000]),
        "TKL 2000 real + one 4000": ("TKL", batch, 4000, [4000, 2000]),
    }
    for length in LENGTHS:
        configurations[f"TKL {length}"] = ("TKL", batch, length, [])
        configurations[f"reference {length}"] = ("reference", batch, length, [])
    memory = {}
    # the memory processes allocate blocks over 128 KiB with mmap and give them back when freed, so
    # their peak RSS is the peak of live memory (glibc's default caching made it vary by ±20 MB)
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "131072"
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        for name, (model_name, size, length, real) in configurations.items():
            memory[name] = pool.apply(peak_memory, (model_name, size, length, _real(real, size), args.threads,
                                                    args.vocab))
    del os.environ["MALLOC_MMAP_THRESHOLD_"]
    load_before = os.getloadavg()[0]

    torch.set_num_threads(args.threads)
    matrix = embeddings(args.vocab)
    models = {name: build(name, matrix) for name in ("TK", "TKL", "reference")}
    data = {name: inputs(size, length, _real(real, size), args.vocab)
            for name, (_, size, length, real) in configurations.items()}
    wall = {name: [] for name in configurations}
    cpu = {name: [] for name in configurations}
    scores = {}
    with torch.inference_mode():
        for round_ in range(args.rounds + 1):  # round 0 warms up
            order = list(configurations.items())
            for name, (model_name, *_) in order if round_ % 2 else order[::-1]:  # cancels a drift in load
                query, document = data[name]
                start, start_cpu = time.perf_counter(), time.process_time()
                scores[name] = models[model_name](query, document)
                if round_:
                    wall[name].append(time.perf_counter() - start)
                    cpu[name].append(time.process_time() - start_cpu)
            print(f"round {round_} done", file=sys.stderr, flush=True)

    rows = {}
    for name, (_, size, length, real) in configurations.items():
        best = int(np.argmin(wall[name]))
        rows[name] = {"batch": size, "tokens": length, "real": int((data[name][1] != 0).sum()) // size,
                      "docs_per_ms": size / (wall[name][best] * 1000),
                      "median_docs_per_ms": size / (statistics.median(wall[name]) * 1000),
                      "cpu_ms_per_doc": cpu[name][best] * 1000 / size,
                      "peak_mb": memory[name][0], "activations_mb": memory[name][1]}
    print(f"{platform.machine()} {platform.processor() or ''}, {args.threads} threads, torch {torch.__version__}, "
          f"emb 300, 2 layers, 10 heads, ff 100, 11 kernels, query {QUERY_LENGTH} terms, {args.rounds} rounds; "
          f"machine load (1-min average) {load_before:.1f} before timing, {os.getloadavg()[0]:.1f} after")
    print(f"{'configuration':<29} {'batch':>5} {'tokens':>6} {'real':>5} {'docs/ms':>8} {'median':>8} "
          f"{'ms/doc':>7} {'cpu ms/doc':>10} {'peak MB':>7} {'activ. MB':>9}")
    for name, row in rows.items():
        print(f"{name:<29} {row['batch']:>5} {row['tokens']:>6} {row['real']:>5} {row['docs_per_ms']:>8.4f} "
              f"{row['median_docs_per_ms']:>8.4f} {1 / row['docs_per_ms']:>7.2f} {row['cpu_ms_per_doc']:>10.2f} "
              f"{row['peak_mb']:>7.0f} {row['activations_mb']:>9.0f}")

    def per_doc(name: str, round_: int) -> float:
        return wall[name][round_] / configurations[name][1]

    def ratio(slow: str, fast: str) -> tuple[float, float]:
        """Time per document of ``slow`` over ``fast``: (ratio of the best rounds, median over
        rounds of the ratio within a round)."""
        paired = statistics.median(per_doc(slow, r) / per_doc(fast, r) for r in range(args.rounds))
        return rows[fast]["docs_per_ms"] / rows[slow]["docs_per_ms"], paired

    speed = [1 / value for value in ratio("TKL 2000", "TK 200")]
    time_4k = ratio("TKL 4000", "TKL 2000")
    padded = ratio("TKL 2000 real padded to 4000", "TKL 2000")
    mixed = ratio("TKL 2000 real + one 4000", "TKL 2000")
    peak_4k = rows["TKL 4000"]["peak_mb"] / rows["TKL 2000"]["peak_mb"]
    activations_4k = rows["TKL 4000"]["activations_mb"] / rows["TKL 2000"]["activations_mb"]
    difference = (scores["TKL 2000"] - scores["TKL 2000 real padded to 4000"]).abs()
    print(f"TKL scores of the documents padded to 4000 and to 2000: max |difference| {difference.max().item():.1e}")
    print("TKL against the reference, same inputs: docs/ms of the best rounds, ratio (median over rounds of the "
          "ratio within a round), max |score difference|")
    print(f"{'tokens':>6} {'TKL':>8} {'ref.':>8} {'ratio':>6} {'(median)':>8} {'|diff|':>8}")
    against = {}
    for length in LENGTHS:
        ours, theirs = f"TKL {length}", f"reference {length}"
        against[length] = ratio(theirs, ours)
        print(f"{length:>6} {rows[ours]['docs_per_ms']:>8.4f} {rows[theirs]['docs_per_ms']:>8.4f} "
              f"{against[length][0]:>6.2f} {against[length][1]:>8.2f} "
              f"{(scores[ours] - scores[theirs]).abs().max().item():>8.1e}")
    speeds = [rows[f"TKL {length}"]["docs_per_ms"] for length in LENGTHS]
    print("ratios of the best rounds (median over rounds of the ratio within a round)")
    checks = [
        (f"TKL 2000 docs/ms / TK 200 docs/ms = {speed[0]:.3f} ({speed[1]:.3f})", speed[0] >= 0.08, ">= 0.08"),
        (f"TKL time per doc 4000 / 2000 = {time_4k[0]:.2f} ({time_4k[1]:.2f})", time_4k[0] <= 2.2, "<= 2.2"),
        (f"TKL peak memory 4000 / 2000 = {peak_4k:.2f} (activations {activations_4k:.2f})",
         peak_4k <= 2.2 and activations_4k <= 2.2, "<= 2.2"),
        (f"time 2000 real padded to 4000 / padded to 2000 = {padded[0]:.2f} ({padded[1]:.2f})", padded[0] <= 1.15,
         "about 1: <= 1.15"),
        (f"time 2000 real + one 4000 / all 2000 = {mixed[0]:.2f} ({mixed[1]:.2f})", True, "none, reported"),
        ("TKL docs/ms " + " > ".join(f"{speed:.4f}" for speed in speeds) + f" ({', '.join(map(str, LENGTHS))} tokens)",
         all(longer < shorter for shorter, longer in zip(speeds, speeds[1:])), "falls with the length"),
        ("TKL / reference docs/ms " + ", ".join(f"{against[length][0]:.2f}" for length in LENGTHS),
         all(against[length][0] >= 1.5 for length in LENGTHS), ">= 1.5 at every length"),
    ]
    for text, ok, target in checks:
        print(f"{'ok  ' if ok else 'MISS'} {text}  (target {target})")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
