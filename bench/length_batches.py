"""Re-ranking throughput with batches of similar document length (``rerank.score_candidates``)
against batches in candidate order (before 2026-11-26), side by side in one process, same model,
same pairs. Each batch is padded to its longest document, so the saving grows with the spread of
document lengths. Reports pairs/s both ways, the ratio and the largest score difference.

    python bench/length_batches.py --model-dir models/synthetic-doc/tkl/tkl-2k/seed42 \\
        --embeddings text/w2v/embeddings.npy --queries text/w2v/synthetic-doc/queries.test \\
        --documents text/w2v/synthetic-doc/collection --candidates runs/synthetic-doc/bm25.test.run \\
        --max-doc-length 2000 [--query-count 10] [--depth 50] [--threads 1] [--rounds 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from rankstudy import formats
from rankstudy.experiment import load_trained
from rankstudy.rerank import pair_batches, score_candidates
from rankstudy.runs import ranked
from rankstudy.store import TokenStore


def candidate_order_scores(model, run, queries, documents, depth, batch_size, max_doc_length) -> dict:
    """The former path: batches in candidate order."""
    pairs = [(qid, docid) for qid, ranking in run.items() for docid, _ in ranked(ranking)[:depth]]
    scores = []
    with torch.inference_mode():
        for _, query, docs in pair_batches(pairs, queries, documents, batch_size, 30, max_doc_length, "cpu"):
            scores.extend(model(query, docs).tolist())
    return dict(zip(pairs, scores))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("model-dir", "embeddings", "queries", "documents", "candidates"):
        parser.add_argument(f"--{name}", type=Path, required=True)
    parser.add_argument("--max-doc-length", type=int, required=True)
    parser.add_argument("--query-count", type=int, default=10)
    parser.add_argument("--depth", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, _ = load_trained(args.model_dir, args.embeddings, torch.device("cpu"))
    run = formats.read_run(args.candidates)
    run = {qid: run[qid] for qid in sorted(run)[:args.query_count]}
    queries, documents = TokenStore(args.queries), TokenStore(args.documents)
    pairs = sum(min(args.depth, len(ranking)) for ranking in run.values())
    times: dict[str, list[float]] = {"candidate order": [], "similar lengths": []}
    for _ in range(args.rounds):
        start = time.perf_counter()
        before = candidate_order_scores(model, run, queries, documents, args.depth, args.batch_size,
                                        args.max_doc_length)
        times["candidate order"].append(time.perf_counter() - start)
        start = time.perf_counter()
        now = score_candidates(model, run, queries, documents, args.depth, args.batch_size, 30, args.max_doc_length,
                               "cpu", progress=False)
        times["similar lengths"].append(time.perf_counter() - start)
    difference = max(abs(score - before[(qid, docid)]) for qid, ranking in now.items() for docid, score in ranking)
    rates = {name: pairs / min(values) for name, values in times.items()}
    lengths = documents.lengths([d for ranking in run.values() for d, _ in ranked(ranking)[:args.depth]],
                                args.max_doc_length)
    print(f"{args.model_dir}: {pairs} pairs of {len(run)} queries, documents of {int(np.median(lengths))} "
          f"(median) to {lengths.max()} tokens (cap {args.max_doc_length}), batch {args.batch_size}, "
          f"{args.threads} thread(s)")
    for name, rate in rates.items():
        print(f"  {name}: {rate:.1f} pairs/s")
    print(f"  ratio: {rates['similar lengths'] / rates['candidate order']:.2f}x; largest score difference "
          f"{difference:.1e}")


if __name__ == "__main__":
    main()
