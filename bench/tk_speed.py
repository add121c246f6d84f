"""TK inference throughput: rankstudy's TK vs the original forward pass, side by side.

Paper dimensions (emb 300, 2 layers, 10 heads, ff 100), batch 64 documents of 200 tokens against
one query (re-ranking), 2 threads. Checks the scores are identical (max abs diff), reports
documents/ms for both and the ratio. Usage: python bench/tk_speed.py [--threads 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_tk import ReferenceTK  # noqa: E402

from rankstudy.models.tk import TK, TKConfig  # noqa: E402


def throughput(model, query, document, repeats: int, warmup: int = 2) -> float:
    with torch.inference_mode():
        for _ in range(warmup):
            model(query, document)
        times = []
        for _ in range(repeats):
            if document.is_cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            model(query, document)
            if document.is_cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
    return document.shape[0] / (statistics.median(times) * 1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--vocab", type=int, default=30000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    embeddings = rng.normal(size=(args.vocab, 300)).astype(np.float32)
    embeddings[:2] = 0
    model = TK(TKConfig(layers=2, heads=10, ff_dim=100), embeddings).eval().to(args.device)
    reference = ReferenceTK(model).eval().to(args.device)
    query = torch.as_tensor(rng.integers(2, args.vocab, size=(1, 8))).repeat(64, 1).to(args.device)
    document = torch.as_tensor(rng.integers(2, args.vocab, size=(64, 200))).to(args.device)
    with torch.inference_mode():
        difference = (model(query, document) - reference(query, document)).abs().max().item()
    ours = throughput(model, query, document, args.repeats)
    original = throughput(reference, query, document, args.repeats)
    print(f"device {args.device}, {args.threads} threads, batch 64 x 200 tokens, emb 300, 2 layers, 10 heads, ff 100")
    print(f"original TK forward : {original:.3f} docs/ms")
    print(f"rankstudy TK        : {ours:.3f} docs/ms  ({ours / original:.2f}x)")
    print(f"max |score difference|: {difference:.2e}")
    return 0 if difference < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
