"""Scoring a training pass in groups of documents of similar length, each group padded to its own longest.

A pass's documents come padded to the longest of them. The synthetic passages run from 10 to 200 tokens
(median 61), so a TK training step spent most of its attention, kernel pooling and their backward passes
on padding. Every model masks padding (its score of a document does not depend on how far the batch pads
it; tests/unit/models check each model family), so scoring the documents sorted by length, ``size`` at a
time, each group cut to its longest document, gives the same scores up to float rounding for a fraction
of the work: bench/length_groups.py measures the training step both ways, side by side.

A model whose training output is not per document opts out with ``Ranker.LENGTH_GROUPS = False`` (IDCM:
its distillation loss is a mean over the pass's documents).
"""

from __future__ import annotations

from typing import Callable

import torch

from rankstudy.nn.kernels import PAD_ID
from rankstudy.nn.slices import map_on_threads
from rankstudy.precision import autocast


def document_lengths(documents: torch.Tensor) -> torch.Tensor:
    """[B, L] padded ids -> [B]: the position after each row's last token that is not padding (0 for none)."""
    positions = torch.arange(1, documents.shape[1] + 1, device=documents.device)
    return ((documents != PAD_ID) * positions).amax(1) if documents.shape[1] else documents.new_zeros(len(documents))


def length_groups(documents: torch.Tensor, size: int) -> tuple[list[tuple[torch.Tensor, int]], torch.Tensor]:
    """(groups, order): the rows of ``size`` documents at a time sorted by length (stable), each with its
    longest document's length (at least 1), and the sorted order of all rows."""
    lengths = document_lengths(documents)
    order = torch.argsort(lengths, stable=True)
    groups = []
    for start in range(0, len(order), size):
        rows = order[start:start + size]
        groups.append((rows, max(int(lengths[rows].max()), 1)))
    return groups, order


def _grouped(model: torch.nn.Module, documents: torch.Tensor, size: int) -> bool:
    return size > 0 and documents.shape[0] > size and getattr(model, "LENGTH_GROUPS", True)


def score_in_length_groups(model: torch.nn.Module, queries: torch.Tensor, documents: torch.Tensor,
                           size: int) -> torch.Tensor:
    """``model(queries, documents)``, computed over groups of ``size`` documents sorted by length (stable),
    each group's documents cut to the group's longest; ``size`` 0, a batch of at most ``size`` documents or a
    model with ``LENGTH_GROUPS = False`` run in one call."""
    if not _grouped(model, documents, size):
        return model(queries, documents)
    groups, order = length_groups(documents, size)
    parts = [model(queries[rows], documents[rows, :longest]) for rows, longest in groups]
    return torch.cat(parts)[torch.argsort(order)]


def _dropout(module: torch.nn.Module) -> float:
    if isinstance(module, torch.nn.Dropout):
        return module.p
    probability = getattr(module, "dropout", 0.0)  # nn.MultiheadAttention's, nn.transformer's attention
    return probability if isinstance(probability, float) else 0.0


def draws_random_numbers(model: torch.nn.Module) -> bool:
    """Whether a training forward pass of ``model`` draws from the random generator: a dropout module or an
    attention with a dropout probability above 0 (threads would draw in the order they happen to run)."""
    return model.training and any(_dropout(module) > 0 for module in model.modules())


def _shares(groups: list[tuple[torch.Tensor, int]], threads: int) -> list[list[int]]:
    """Group indices per thread, balanced by rows × longest (largest first to the least loaded thread, ties to
    the first), each thread's in ascending order: a function of the lengths alone, so the same batch is shared
    the same way on every run."""
    loads, shares = [0] * threads, [[] for _ in range(threads)]
    for index in sorted(range(len(groups)), key=lambda g: -len(groups[g][0]) * groups[g][1]):
        thread = loads.index(min(loads))
        loads[thread] += len(groups[index][0]) * groups[index][1]
        shares[thread].append(index)
    return [sorted(share) for share in shares if share]


def backward_in_length_groups(model: torch.nn.Module, queries: torch.Tensor, documents: torch.Tensor, size: int,
                              loss_of: Callable[[torch.Tensor], torch.Tensor], precision: str = "fp32") -> torch.Tensor:
    """``loss_of(scores)`` for ``scores = score_in_length_groups(model, queries, documents, size)``, its gradient
    added to the parameters' ``.grad``; returns the loss (detached).

    With more than one torch thread, a CPU model that allows it (``Ranker.THREAD_GROUPS``, no dropout drawn) and
    more than one group, the groups' forward and backward passes are shared out between the threads, each on one
    torch thread (``nn.slices``): the threads meet twice per pass (after the forward passes and after the backward
    passes) instead of at every op, which is what holds a training step's speed on a busy machine (issue 20).
    Each thread sums its groups' parameter gradients in group order, and the threads' sums are added in thread
    order: the same numbers on every run with the same threads; against a one-thread pass the same loss and
    the gradients up to rounding (tests/unit/train/test_length_groups.py). Memory: one gradient per thread
    besides ``.grad``.

    ``precision`` (``rankstudy.precision``): bf16 runs the forward passes under autocast; the loss and the backward
    passes run outside it (autograd follows the forward pass's types)."""
    threads = torch.get_num_threads()
    if (threads <= 1 or not getattr(model, "THREAD_GROUPS", False) or documents.device.type != "cpu"
            or not _grouped(model, documents, size) or draws_random_numbers(model)):
        with autocast(precision, documents.device):
            scores = score_in_length_groups(model, queries, documents, size)
        loss = loss_of(scores)
        loss.backward()
        return loss.detach()
    groups, order = length_groups(documents, size)
    shares = _shares(groups, min(threads, len(groups)))

    def forward(index: int) -> torch.Tensor:
        rows, longest = groups[index]
        return model(queries[rows], documents[rows, :longest])

    scored: dict[int, torch.Tensor] = {}
    with autocast(precision, documents.device):  # map_on_threads enters it on every thread
        for share, scores in zip(shares, map_on_threads(forward, shares)):
            scored.update(zip(share, scores))
    # the loss's gradient with respect to each group's scores, then each group's backward pass from there
    leaves = [scored[index].detach().requires_grad_() for index in range(len(groups))]
    loss = loss_of(torch.cat(leaves)[torch.argsort(order)])
    score_grads = torch.autograd.grad(loss, leaves)
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]

    def thread_gradients(share: list[int]) -> list[torch.Tensor | None]:
        total: list[torch.Tensor | None] = [None] * len(parameters)
        for index in share:
            grads = torch.autograd.grad(scored[index], parameters, score_grads[index], allow_unused=True)
            total = [mine if grad is None else grad if mine is None else mine + grad
                     for mine, grad in zip(total, grads)]
        return total

    per_thread = map_on_threads(thread_gradients, [[share] for share in shares])
    for position, parameter in enumerate(parameters):
        for (total,) in per_thread:
            grad = total[position]
            if grad is not None:
                parameter.grad = grad if parameter.grad is None else parameter.grad + grad
    return loss.detach()
