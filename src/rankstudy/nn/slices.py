"""Scoring a CPU batch in slices of documents, the slices shared out between threads.

TK and TKL score a CPU batch a few documents at a time so that the activations stay in cache. With
more than one torch thread, running every small op of every slice on all threads makes each op a
parallel region whose threads meet at its end: on a machine that also runs other work, one thread
without a core holds all of them, op after op (issue 20: TK fell to a third of its idle speed beside
other jobs). Here each thread instead scores whole slices on its own, one torch thread each: the
threads meet once, at the end of the batch, and the scores are those of a one-thread run, bit for bit
(the same slices through the same single-threaded kernels). bench/busy_speed.py measures it idle and
under load.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import torch

Result = TypeVar("Result")


def map_slices(score: Callable[[torch.Tensor, torch.Tensor], Result], query: torch.Tensor, document: torch.Tensor,
               size: int) -> list[Result]:
    """``score(query[s:s + size], document[s:s + size])`` for consecutive slices of ``size`` documents, in
    order; with more than one torch thread the slices are split between that many threads."""
    starts = list(range(0, document.shape[0], size))
    configured = torch.get_num_threads()
    threads = min(configured, len(starts))
    results: list = [None] * len(starts)
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()  # thread-local: passed on

    def run(indices: range) -> None:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            for index in indices:
                start = starts[index]
                results[index] = score(query[start:start + size], document[start:start + size])

    if threads <= 1:
        run(range(len(starts)))
        return results
    share = -(-len(starts) // threads)  # consecutive slices per thread
    groups = [range(first, min(first + share, len(starts))) for first in range(0, len(starts), share)]
    torch.set_num_threads(1)  # read by every thread's ops (ATen applies it to a new thread's first op)
    try:
        with ThreadPoolExecutor(len(groups) - 1) as pool:
            others = [pool.submit(run, group) for group in groups[1:]]
            run(groups[0])
            for other in others:
                other.result()
    finally:
        torch.set_num_threads(configured)
    return results
