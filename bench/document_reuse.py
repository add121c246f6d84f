"""Re-ranking throughput of TK and TKL with each document encoded once for all its queries, against scoring every
(query, document) pair whole: the two ways of ``rankstudy.rerank.score_candidates`` (``reuse_documents``).

TK and TKL contextualise a document without its query, so a document that several queries' lists hold needs
one transformer pass, not one per query. How much that saves depends on how often a document recurs: a
collection's ``queries x depth / documents``. Re-ranking the top 100 of the study's long-document collections,
it is about 100 for QMSum's test queries (238 queries, 232 meetings) and 130 for ScisummNet's (1,290 citances,
977 papers), but 1.4 for AILA's (40 queries, 2,914 judgments). The workload here: ``--documents`` documents of
the given length, ``--queries`` queries of 8 terms, each ranking ``--depth`` of the documents (drawn with a
seed), so each document recurs ``queries x depth / documents`` times on average (printed).

Paper dimensions (embeddings 300, 2 layers, 10 heads, ff 100, 11 kernels) as bench/tkl_speed.py, randomly
initialised (the scores' cost does not depend on the weights), TK at 200 tokens, TKL at 2,000 and 4,000, batches
of ``--batch`` pairs (and documents), ``--threads`` torch threads (the study's re-ranking jobs run one).
The two ways alternate in every round, their order reversed every other round, after a warm-up round; docs/ms is
pairs scored per millisecond in the best round (the least disturbed), the ratio that of the best rounds. The
largest difference between the two ways' scores is printed beside them (float rounding only).

Usage: python bench/document_reuse.py [--documents 16] [--queries 32] [--depth 16] [--rounds 2] [--threads 1]
                                      [--out bench/results/document_reuse.md]
Exit status 1 where reuse is not at least 10x at 2,000 tokens with the default workload (each document
recurring 32 times, a third of the long-document collections' recurrence).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from rankstudy.models.tk import TK, TKConfig
from rankstudy.models.tkl import TKL, TKLConfig
from rankstudy.rerank import score_candidates

DIMS = dict(layers=2, heads=10, ff_dim=100)
QUERY_LENGTH = 8
VOCAB = 30000
MODELS = {"TK 200": ("TK", 200), "TKL 2000": ("TKL", 2000), "TKL 4000": ("TKL", 4000)}


class Store:
    """Token ids by id in memory, with ``rankstudy.store.TokenStore``'s ``batch`` and ``lengths``."""

    def __init__(self, texts: dict[str, np.ndarray]):
        self.texts = texts

    def lengths(self, ids, max_length: int | None = None) -> np.ndarray:
        return np.array([min(len(self.texts[i]), max_length or len(self.texts[i])) for i in ids], dtype=np.int64)

    def batch(self, ids, max_length: int) -> np.ndarray:
        rows = [self.texts[i][:max_length] for i in ids]
        out = np.zeros((len(rows), max(len(row) for row in rows)), dtype=np.int64)
        for index, row in enumerate(rows):
            out[index, :len(row)] = row
        return out


def workload(documents: int, queries: int, depth: int, length: int):
    """(query store, document store, run): each query ranks ``depth`` of the documents, drawn with seed 0."""
    rng = np.random.default_rng(0)
    docs = Store({f"d{i}": rng.integers(2, VOCAB, size=length) for i in range(documents)})
    query_store = Store({f"q{i}": rng.integers(2, VOCAB, size=QUERY_LENGTH) for i in range(queries)})
    run = {qid: [(f"d{d}", float(-rank)) for rank, d in enumerate(rng.permutation(documents)[:depth])]
           for qid in query_store.texts}
    return query_store, docs, run


def build(kind: str) -> torch.nn.Module:
    matrix = np.random.default_rng(0).standard_normal(size=(VOCAB, 300), dtype=np.float32)
    matrix[:2] = 0
    torch.manual_seed(0)
    return (TK(TKConfig(**DIMS), matrix) if kind == "TK" else TKL(TKLConfig(**DIMS), matrix)).eval()


def measure(args: argparse.Namespace) -> list[dict]:
    rows = []
    for name, (kind, length) in MODELS.items():
        model = build(kind)
        stores_and_run = workload(args.documents, args.queries, args.depth, length)
        pairs = sum(len(ranking) for ranking in stores_and_run[2].values())

        def score(reuse: bool):
            return score_candidates(model, stores_and_run[2], stores_and_run[0], stores_and_run[1], args.depth,
                                    args.batch, QUERY_LENGTH, length, "cpu", progress=False, reuse_documents=reuse)

        best = {False: float("inf"), True: float("inf")}
        results = {}
        for round_ in range(args.rounds + 1):  # round 0 warms up
            for reuse in ((False, True) if round_ % 2 else (True, False)):
                start = time.perf_counter()
                results[reuse] = score(reuse)
                if round_:
                    best[reuse] = min(best[reuse], time.perf_counter() - start)
        difference = max(abs(a - b) for qid in results[False] for (_, a), (_, b) in
                         zip(sorted(results[False][qid]), sorted(results[True][qid])))
        rows.append({"model": name, "pairs": pairs, "pairwise": pairs / best[False] / 1000,
                     "reuse": pairs / best[True] / 1000, "ratio": best[False] / best[True],
                     "difference": difference})
        print(f"{name}: {rows[-1]['pairwise']:.4f} vs {rows[-1]['reuse']:.4f} docs/ms ({rows[-1]['ratio']:.1f}x)",
              flush=True)
    return rows


def report(args: argparse.Namespace, rows: list[dict]) -> str:
    recurrence = args.queries * args.depth / args.documents
    lines = ["# Re-ranking with each document encoded once (bench/document_reuse.py)", "",
             f"{args.queries} queries of {QUERY_LENGTH} terms, each re-ranking {args.depth} of {args.documents} "
             f"documents (each document in {recurrence:g} lists on average); paper dimensions, random weights; "
             f"batches of {args.batch}; {args.threads} torch thread(s); best of {args.rounds} rounds, the two ways "
             f"alternating; {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
             f"{time.strftime('%Y-%m-%d')}.", "",
             "| model (tokens read) | pairs | docs/ms, pair by pair | docs/ms, documents encoded once | ratio | "
             "largest score difference |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {row['model']} | {row['pairs']} | {row['pairwise']:.4f} | {row['reuse']:.4f} | "
              f"{row['ratio']:.1f}x | {row['difference']:.1e} |" for row in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=16)
    parser.add_argument("--queries", type=int, default=32)
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write the report here too (Markdown)")
    args = parser.parse_args()
    if not 1 <= args.depth <= args.documents:
        parser.error("--depth must be between 1 and --documents")
    torch.set_num_threads(args.threads)
    rows = measure(args)
    text = report(args, rows)
    print(text)
    if args.out:
        args.out.write_text(text)
    default = (args.documents, args.queries, args.depth) == (16, 32, 16)
    return int(default and next(row for row in rows if row["model"] == "TKL 2000")["ratio"] < 10)


if __name__ == "__main__":
    raise SystemExit(main())
