"""Benchmark: ``store.collection_idf`` (distinct (text, id) keys by sorting) against NumPy's ``np.unique``.

Every TKL, DRMM and Socialformer job computes the training collection's idf when it starts (training and
re-ranking alike). ``np.unique`` on NumPy 2 takes a hash-based path for integer arrays, which took seconds
per 4M-token chunk; ``collection_idf`` sorts instead. Both are timed side by side on the same token store,
rounds alternating, and the idf vectors must be identical.

Usage: python bench/collection_idf.py --store text/study/synthetic-doc/collection [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

from rankstudy.store import TokenStore, collection_idf


def idf_with_np_unique(store: TokenStore, chunk_tokens: int = 1 << 22) -> np.ndarray:
    """The previous implementation: the same chunks, distinct keys by ``np.unique``."""
    tokens, offsets = store.token_array, np.asarray(store.offsets)
    count, size = len(offsets) - 1, int(tokens.max()) + 1
    df, first = np.zeros(size, dtype=np.int64), 0
    while first < count:
        last = int(np.searchsorted(offsets, offsets[first] + chunk_tokens, side="right")) - 1
        last = min(count, max(last, first + 1))
        chunk = np.asarray(tokens[offsets[first]:offsets[last]], dtype=np.int64)
        text = np.repeat(np.arange(last - first, dtype=np.int64), np.diff(offsets[first:last + 1]))
        df += np.bincount(np.unique(text * size + chunk) % size, minlength=size)
        first = last
    idf = np.log(max(count, 1) / np.maximum(df, 1)).astype(np.float32)
    idf[0] = 0.0
    return idf


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a token store (rule store_collection's output)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    store = TokenStore(args.store)
    times: dict[str, list[float]] = {"sort": [], "np.unique": []}
    results = {}
    for round_ in range(args.rounds):
        for name, function in (("sort", collection_idf), ("np.unique", idf_with_np_unique))[:: 1 if round_ % 2 else -1]:
            start = time.perf_counter()
            results[name] = function(store)
            times[name].append(time.perf_counter() - start)
    same = np.array_equal(results["sort"], results["np.unique"])
    sort, unique = statistics.median(times["sort"]), statistics.median(times["np.unique"])
    print(f"# python bench/collection_idf.py --store {args.store} --rounds {args.rounds}: {platform.machine()}, "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}, load average {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{len(store.token_array):,} tokens in {len(store.offsets) - 1:,} texts; median of {args.rounds} rounds: "
          f"sort {sort:.2f} s, np.unique {unique:.2f} s ({unique / sort:.1f}x); identical idf: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
