"""Work shared out between threads that each run on one torch thread: a CPU batch's slices of documents at
inference, a training pass's length groups (``train.length_groups``).

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

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence, TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_on_threads(function: Callable[[Item], Result], shares: Sequence[Sequence[Item]]) -> list[list[Result]]:
    """``[[function(item) for item in share] for share in shares]``, each share on its own thread (the first
    on the caller's) with one torch thread; the caller's grad and inference modes and CPU autocast hold on every
    thread. A single share runs on the caller's thread as it is."""
    results: list = [None] * len(shares)
    grad, inference = torch.is_grad_enabled(), torch.is_inference_mode_enabled()  # thread-local: passed on
    # so is CPU autocast (bf16, rankstudy.precision); entered on a thread only where the caller has it on
    autocast = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None

    def run(index: int) -> None:
        with torch.inference_mode(inference), torch.set_grad_enabled(grad), (
                torch.autocast("cpu", dtype=autocast) if autocast else contextlib.nullcontext()):
            results[index] = [function(item) for item in shares[index]]

    if len(shares) <= 1:
        return [[function(item) for item in share] for share in shares]
    configured = torch.get_num_threads()
    torch.set_num_threads(1)  # read by every thread's ops (ATen applies it to a new thread's first op)
    try:
        with ThreadPoolExecutor(len(shares) - 1) as pool:
            others = [pool.submit(run, index) for index in range(1, len(shares))]
            run(0)
            for other in others:
                other.result()
    finally:
        torch.set_num_threads(configured)
    return results


def thread_slice_size(count: int, most: int) -> int:
    """Documents per slice for ``count`` documents and at most ``most`` per slice: ``most`` on one torch thread;
    with more, the fewest equal slices of at most ``most`` documents that come in a multiple of the threads, so
    that every thread gets work and the same share of it (a batch that fits one slice would otherwise run as one
    slice with every op split between the threads, the slow case this module avoids; 16 documents in slices of
    at most 10 would share out as 10 and 6)."""
    threads = torch.get_num_threads()
    if threads <= 1 or count <= 1:
        return most  # one thread: the slices as configured (the study's runs, bit for bit as before)
    slices = -(-count // max(most, 1))
    slices = min(count, -(-slices // threads) * threads)
    return -(-count // slices)


def map_slices(score: Callable[[torch.Tensor, torch.Tensor], Result], query: torch.Tensor, document: torch.Tensor,
               size: int) -> list[Result]:
    """``score(query[s:s + size], document[s:s + size])`` for consecutive slices of ``size`` documents, in
    order; with more than one torch thread the slices are split between that many threads, in consecutive runs."""
    starts = list(range(0, document.shape[0], size))
    threads = min(torch.get_num_threads(), len(starts))
    if threads <= 1:
        return [score(query[start:start + size], document[start:start + size]) for start in starts]
    share = -(-len(starts) // threads)  # consecutive slices per thread
    shares = [starts[first:first + share] for first in range(0, len(starts), share)]
    results = map_on_threads(lambda start: score(query[start:start + size], document[start:start + size]), shares)
    return [result for share_results in results for result in share_results]
