"""Shared slices against one-after-another slices: TK and TKL at 2 threads, side by side in one process.

``rankstudy.nn.slices.map_slices`` shares a CPU batch's slices out between the torch threads, each scoring
whole slices on one thread; before it, the slices ran one after another, every op on both threads. This
times both on the same model and inputs, idle and beside ``--load`` busy loops, rounds interleaved, and
reports the median ratio (run with ``OMP_WAIT_POLICY=PASSIVE``, as ``python -m rankstudy`` sets it; the
study's AVX2 pins are applied here).

    OMP_WAIT_POLICY=PASSIVE python bench/slice_threads.py [--rounds 7] [--load 4]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import time

from rankstudy.cpu_isa import pin_vector_isa

pin_vector_isa(os.environ)  # before torch loads

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rankstudy.models.tk as tk_module  # noqa: E402
import rankstudy.models.tkl as tkl_module  # noqa: E402
from rankstudy.models import build_model  # noqa: E402
from rankstudy.nn.slices import map_slices  # noqa: E402


def one_after_another(score, query, document, size):
    return [score(query[start:start + size], document[start:start + size]) for start in range(0, len(document), size)]


def _busy(deadline: float) -> None:
    while time.time() < deadline:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--load", type=int, default=4, help="busy-loop processes in the busy condition")
    args = parser.parse_args()
    torch.set_num_threads(2)
    vectors = np.random.default_rng(0).standard_normal((30000, 300), dtype=np.float32)
    vectors[:2] = 0
    paper = dict(layers=2, heads=10, ff_dim=100)
    generator = torch.Generator().manual_seed(1)
    query = torch.randint(2, 30000, (1, 8), generator=generator)
    cases = []
    for name, model, length, batch in (("TK @200", "tk", 200, 64), ("TKL @2000", "tkl", 2000, 16)):
        torch.manual_seed(0)
        cases.append((name, build_model(model, paper, vectors).eval(), batch,
                      torch.randint(2, 30000, (batch, length), generator=generator)))
    print("| model | condition | shared docs/ms | one after another docs/ms | shared ÷ one after another |\n"
          "|---|---|---:|---:|---:|")
    for condition in ("idle", "busy"):
        load = [multiprocessing.Process(target=_busy, args=(time.time() + 900,), daemon=True)
                for _ in range(args.load if condition == "busy" else 0)]
        for process in load:
            process.start()
        for name, model, batch, documents in cases:
            def timed(mapper) -> float:
                tk_module.map_slices = tkl_module.map_slices = mapper  # the name the models call
                with torch.inference_mode():
                    start = time.perf_counter()
                    model(query.expand(batch, -1), documents)
                    return time.perf_counter() - start

            timed(map_slices), timed(one_after_another)  # warm-up
            times = {map_slices: [], one_after_another: []}
            for round_ in range(args.rounds):
                for mapper in (list(times) if round_ % 2 else list(times)[::-1]):
                    times[mapper].append(timed(mapper))
            ratio = statistics.median(b / a for a, b in zip(times[map_slices], times[one_after_another]))
            print(f"| {name} | {condition} | {batch / min(times[map_slices]) / 1000:.4f} "
                  f"| {batch / min(times[one_after_another]) / 1000:.4f} | {ratio:.2f}× |", flush=True)
        for process in load:
            process.terminate()
    tk_module.map_slices = tkl_module.map_slices = map_slices
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
