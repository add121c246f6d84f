"""Benchmark: tuning the full task's re-ranking depth (rankstudy.runs.tune_depth), every depth evaluated against
each query's distinct top lists, side by side in one run:

    python bench/tune_depth.py [--queries 500] [--candidates 1000] [--depths 1 1000 10] [--measure RR@10]
                               [--out bench/results/tune_depth.md]

"every depth" evaluates ``rerank_to_depth``'s whole run at each depth (``runs.means_at_every_depth``: tune_depth's
path for a measure without a cutoff, and its only path before); "distinct top lists" is tune_depth for a measure with a cutoff. Made-up lists
(no dataset needed): each query has ``--candidates`` first-stage candidates with random neural scores and one
relevant candidate, as MS MARCO's sparse judgments. The two tables must be equal, bit for bit.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from datetime import date
from pathlib import Path

from rankstudy.cpu_isa import cpu_model
from rankstudy.runs import means_at_every_depth, tune_depth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--depths", type=int, nargs=3, default=[1, 1000, 10], metavar=("START", "STOP", "STEP"))
    parser.add_argument("--measure", default="RR@10")
    parser.add_argument("--out", type=Path, default=Path("bench/results/tune_depth.md"))
    args = parser.parse_args()

    rng = random.Random(0)
    first = {f"q{q}": [(f"d{q}_{i}", float(args.candidates - i)) for i in range(args.candidates)]
             for q in range(args.queries)}
    neural = {qid: [(docid, rng.random()) for docid, _ in ranking] for qid, ranking in first.items()}
    qrels = {qid: {f"{qid.replace('q', 'd')}_{rng.randrange(args.candidates)}": 1} for qid in first}
    depths = list(range(args.depths[0], args.depths[1] + 1, args.depths[2]))

    start = time.perf_counter()
    _, table = tune_depth(first, neural, qrels, depths, args.measure)
    lists_seconds = time.perf_counter() - start
    start = time.perf_counter()
    expected = means_at_every_depth(first, neural, qrels, depths, args.measure)
    every_seconds = time.perf_counter() - start
    equal = table["value"].tolist() == expected

    report = "\n".join([
        f"# tune_depth: every depth against distinct top lists ({date.today()})", "",
        f"`python bench/tune_depth.py --queries {args.queries} --candidates {args.candidates} --depths "
        f"{' '.join(map(str, args.depths))} --measure {args.measure}` on {cpu_model()} ({os.cpu_count()} cores), "
        f"one process: {len(depths)} depths, {args.queries} queries of {args.candidates} candidates.", "",
        "| path | seconds | per depth |", "|---|---:|---:|",
        f"| every depth evaluated | {every_seconds:.1f} | {every_seconds / len(depths):.2f} |",
        f"| distinct top lists (tune_depth) | {lists_seconds:.1f} | {lists_seconds / len(depths):.3f} |", "",
        f"Ratio: {every_seconds / lists_seconds:.0f}x; the two tables equal bit for bit: {equal}.", ""])
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    if not equal:
        raise SystemExit("the two paths' means differ")


if __name__ == "__main__":
    main()
