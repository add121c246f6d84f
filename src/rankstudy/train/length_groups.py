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

import torch

from rankstudy.nn.kernels import PAD_ID


def document_lengths(documents: torch.Tensor) -> torch.Tensor:
    """[B, L] padded ids -> [B]: the position after each row's last token that is not padding (0 for none)."""
    positions = torch.arange(1, documents.shape[1] + 1, device=documents.device)
    return ((documents != PAD_ID) * positions).amax(1) if documents.shape[1] else documents.new_zeros(len(documents))


def score_in_length_groups(model: torch.nn.Module, queries: torch.Tensor, documents: torch.Tensor,
                           size: int) -> torch.Tensor:
    """``model(queries, documents)``, computed over groups of ``size`` documents sorted by length (stable),
    each group's documents cut to the group's longest; ``size`` 0, a batch of at most ``size`` documents or a
    model with ``LENGTH_GROUPS = False`` run in one call."""
    if size <= 0 or documents.shape[0] <= size or not getattr(model, "LENGTH_GROUPS", True):
        return model(queries, documents)
    lengths = document_lengths(documents)
    order = torch.argsort(lengths, stable=True)
    parts = []
    for start in range(0, len(order), size):
        rows = order[start:start + size]
        longest = max(int(lengths[rows].max()), 1)
        parts.append(model(queries[rows], documents[rows, :longest]))
    return torch.cat(parts)[torch.argsort(order)]
