"""Work shared between threads against every op on both threads: TK and TKL at 2 threads, side by side in one
process.

Inference: ``rankstudy.nn.slices.map_slices`` shares a CPU batch's slices out between the torch threads, each
scoring whole slices on one thread; before it, the slices ran one after another, every op on both threads.
Training: ``train.length_groups.backward_in_length_groups`` runs a pass's length groups forward and backward on
separate threads; before it, the groups ran one after another and one backward pass followed (``THREAD_GROUPS``
off on the model). This times both ways on the same model and inputs, idle and beside ``--load`` busy loops,
rounds interleaved, and reports the median ratio (run with ``OMP_WAIT_POLICY=PASSIVE``, as ``python -m
rankstudy`` sets it; the study's AVX2 pins and the CLI's allocator setting are applied here).

    OMP_WAIT_POLICY=PASSIVE python bench/slice_threads.py [--rounds 7] [--load 4]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import time

from rankstudy.cpu_isa import pin_vector_isa
from rankstudy.malloc import keep_freed_memory

pin_vector_isa(os.environ)  # before torch loads
keep_freed_memory()  # as python -m rankstudy

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rankstudy.models.tk as tk_module  # noqa: E402
import rankstudy.models.tkl as tkl_module  # noqa: E402
from rankstudy.models import build_model  # noqa: E402
from rankstudy.nn.slices import map_slices  # noqa: E402
from rankstudy.train.length_groups import backward_in_length_groups  # noqa: E402
from rankstudy.train.losses import pairwise_margin_loss  # noqa: E402


def one_after_another(score, query, document, size):
    return [score(query[start:start + size], document[start:start + size]) for start in range(0, len(document), size)]


def _busy(deadline: float) -> None:
    while time.time() < deadline:
        pass


@contextlib.contextmanager
def background_load(processes: int):
    """``processes`` busy loops for the duration of the block (each also stops on its own after 900 s)."""
    load = [multiprocessing.Process(target=_busy, args=(time.time() + 900,), daemon=True) for _ in range(processes)]
    for process in load:
        process.start()
    try:
        yield
    finally:
        for process in load:
            process.terminate()


def timed_step(model, optimizer, query: torch.Tensor, documents: torch.Tensor, pairs: int) -> float:
    """Seconds of one training step over ``pairs`` positives (the first rows) and as many negatives: length groups
    of 16, pairwise margin loss, the optimizer's step (as bench/busy_speed.py's)."""
    model.train()
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    backward_in_length_groups(model, query.expand(2 * pairs, -1), documents[:2 * pairs], 16,
                              lambda s: pairwise_margin_loss(s[:pairs], s[pairs:]))
    optimizer.step()
    return time.perf_counter() - start


def _interleaved(run, ways, rounds: int) -> dict:
    """Seconds of ``run(way)`` per way over ``rounds`` rounds (after a warm-up), the ways' order alternating."""
    for way in ways:
        run(way)
    times = {way: [] for way in ways}
    for round_ in range(rounds):
        for way in (ways if round_ % 2 else ways[::-1]):
            times[way].append(run(way))
    return times


def _row(name: str, condition: str, times: dict, unit: float) -> str:
    shared, plain = times.values()
    ratio = statistics.median(b / a for a, b in zip(shared, plain))
    return f"| {name} | {condition} | {unit / min(shared):.4f} | {unit / min(plain):.4f} | {ratio:.2f}× |"


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
    print("| model | condition | shared | every op on both threads | shared ÷ every op on both |\n"
          "|---|---|---:|---:|---:|")
    for condition in ("idle", "busy"):
        with background_load(args.load if condition == "busy" else 0):
            measure(cases, query, condition, args.rounds)
    tk_module.map_slices = tkl_module.map_slices = map_slices
    return 0


def measure(cases, query: torch.Tensor, condition: str, rounds: int) -> None:
    """Print each case's inference row, then its training-step row, for one condition."""
    for name, model, batch, documents in cases:
        def infer(mapper) -> float:
            tk_module.map_slices = tkl_module.map_slices = mapper  # the name the models call
            with torch.inference_mode():
                start = time.perf_counter()
                model(query.expand(batch, -1), documents)
                return time.perf_counter() - start

        print(_row(f"{name} inference, docs/ms", condition,
                   _interleaved(infer, [map_slices, one_after_another], rounds), batch / 1000), flush=True)
    for (name, model, batch, documents), pairs in zip(cases, (32, 16)):  # pairs per step as bench/busy_speed.py
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-6)
        passage = documents.repeat(2, 1)[:2 * pairs]

        def step(threaded: bool) -> float:
            model.THREAD_GROUPS = threaded
            return timed_step(model, optimizer, query, passage, pairs)

        print(_row(f"{name} training step ({pairs} pairs), steps/s", condition,
                   _interleaved(step, [True, False], rounds), 1.0), flush=True)
        model.eval()


if __name__ == "__main__":
    raise SystemExit(main())
