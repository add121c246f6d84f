"""TKL's last transformer layer for the chunks' central positions only, against every position: side by side in
one process, at 2,000 tokens, idle and beside ``--load`` busy loops.

A chunk is contextualised over 50 positions (40 central tokens, 5 of context each side) and only the central 40
are kept. Without autograd (inference, and the pass of a ``region_backward`` training step that chooses the
regions) ``TKL._contextualize_chunks`` now runs the last layer's queries, attention output and feed-forward for
those 40 only (``nn.transformer.encoder_forward``'s ``rows``); "every position" is the model as before (the
full output, then cut). Scores are equal (tests/unit/models/test_tkl.py). Rounds interleaved, median ratio
reported; the study's AVX2 pins and the CLI's allocator setting applied (bench/slice_threads.py).

    OMP_WAIT_POLICY=PASSIVE python bench/tkl_central_rows.py [--threads 2] [--rounds 7] [--load 4]
"""

from __future__ import annotations

import argparse
import time
import types

# importing slice_threads applies the AVX2 pins and the allocator setting before torch loads
from slice_threads import _interleaved, _row, background_load, timed_step

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rankstudy.models import build_model  # noqa: E402


def every_position(model, chunks: torch.Tensor) -> torch.Tensor:
    """``_contextualize_chunks`` as it was: the whole transformer output, then its central positions."""
    overlap = model.config.overlap
    return model.contextualize(chunks)[0][:, overlap:overlap + model.config.chunk_size]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--load", type=int, default=4, help="busy-loop processes in the busy condition")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    vectors = np.random.default_rng(0).standard_normal((30000, 300), dtype=np.float32)
    vectors[:2] = 0
    torch.manual_seed(0)
    model = build_model("tkl", dict(layers=2, heads=10, ff_dim=100), vectors)
    central = model._contextualize_chunks
    ways = {"central": central, "every": types.MethodType(every_position, model)}
    generator = torch.Generator().manual_seed(1)
    query = torch.randint(2, 30000, (1, 8), generator=generator)
    batch, pairs = 16, 16  # as bench/busy_speed.py's TKL @2000
    documents = torch.randint(2, 30000, (2 * pairs, 2000), generator=generator)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-6)

    def infer(way: str) -> float:
        model._contextualize_chunks = ways[way]
        model.eval()
        with torch.inference_mode():
            start = time.perf_counter()
            model(query.expand(batch, -1), documents[:batch])
            return time.perf_counter() - start

    def step(way: str) -> float:
        model._contextualize_chunks = ways[way]
        return timed_step(model, optimizer, query, documents, pairs)

    print(f"{args.threads} threads\n| model | condition | central positions | every position | central ÷ every |\n"
          "|---|---|---:|---:|---:|")
    for condition in ("idle", "busy"):
        with background_load(args.load if condition == "busy" else 0):
            print(_row("TKL @2000 inference, docs/ms", condition, _interleaved(infer, list(ways), args.rounds),
                       batch / 1000), flush=True)
            print(_row(f"TKL @2000 training step ({pairs} pairs), steps/s", condition,
                       _interleaved(step, list(ways), args.rounds), 1.0), flush=True)
    model._contextualize_chunks = central
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
