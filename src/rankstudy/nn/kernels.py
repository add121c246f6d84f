"""RBF kernel pooling (KNRM, Xiong et al. 2017), shared by KNRM, CONV-KNRM, TK and TKL.

For a cosine match matrix M (query term i x document term j) and kernels (mu_k, sigma_k):

    K_k(M_i) = sum_j exp(-(M_ij - mu_k)^2 / (2 sigma_k^2))          (soft term frequency)

Matches involving padding or OOV tokens are masked out before the sum over j.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from rankstudy.precision import in_fp32

PAD_ID = 0
OOV_ID = 1


def default_mus(count: int = 11) -> list[float]:
    """1.0 (exact match) then count-1 evenly spaced centres from 0.9 down: 0.9, 0.7, ..., -0.9."""
    step = 2.0 / (count - 1)
    return [1.0] + [round(1.0 - step / 2 - i * step, 10) for i in range(count - 1)]


def token_masks(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(real-token mask, matchable mask) as float tensors: padding is not a token; OOV is a
    token (it counts for lengths) that matches nothing."""
    return (ids != PAD_ID).float(), (ids > OOV_ID).float()


def unit_vectors(vectors: torch.Tensor) -> torch.Tensor:
    """Each vector of the last dimension divided by its L2 norm (zero vectors stay 0)."""
    return F.normalize(vectors, dim=-1, eps=1e-13)


@in_fp32  # under bf16 autocast too: equal vectors must give cos = 1 for an exact-match kernel (σ = 0.001)
def cosine_matrix(query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
    """[B, Lq, D] x [B, Ld, D] -> [B, Lq, Ld] cosine similarities (0 for zero vectors), in fp32."""
    return torch.bmm(unit_vectors(query), unit_vectors(document).transpose(1, 2))


@in_fp32
def cosine_rows(query: torch.Tensor, document_units: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``cosine_matrix(query, documents[rows])`` for query vectors [P, Lq, D] and the unit vectors of documents
    [B, Ld, D] (``unit_vectors``), without copying a document per query: one product per run of equal
    ``rows`` [P] (re-ranking scores the queries of one document together) -> [P, Lq, Ld]."""
    query = unit_vectors(query)
    pairs, terms, dim = query.shape
    cosine = query.new_empty(pairs, terms, document_units.shape[1])
    start = 0
    for row, count in zip(*(part.tolist() for part in torch.unique_consecutive(rows, return_counts=True))):
        block = query[start:start + count].reshape(count * terms, dim)
        cosine[start:start + count] = (block @ document_units[row].T).view(count, terms, -1)
        start += count
    return cosine


class KernelPooling(nn.Module):
    def __init__(self, mus: Sequence[float], sigmas: Sequence[float]):
        super().__init__()
        if len(mus) != len(sigmas) or not len(mus):
            raise ValueError("kernel pooling needs as many sigmas as mus (at least one)")
        self.register_buffer("mu", torch.tensor(list(mus), dtype=torch.float32).view(1, 1, 1, -1), persistent=False)
        self.register_buffer("sigma", torch.tensor(list(sigmas), dtype=torch.float32).view(1, 1, 1, -1), persistent=False)
        # −1 / (2σ²), so that each activation is one product and one exp (no division, no negation pass)
        self.register_buffer("exponent_scale", -0.5 / torch.square(self.sigma), persistent=False)

    @property
    def count(self) -> int:
        return self.mu.shape[-1]

    def activations(self, similarity: torch.Tensor, match_mask: torch.Tensor) -> torch.Tensor:
        """exp(-(M_ij - mu_k)^2 / (2 sigma_k^2)), masked: [B, Lq, Ld, K]."""
        raw = torch.exp(torch.square(similarity.unsqueeze(-1) - self.mu) * self.exponent_scale)
        return raw * match_mask.unsqueeze(-1)

    def forward(self, similarity: torch.Tensor, match_mask: torch.Tensor) -> torch.Tensor:
        """Soft-TF per query term and kernel, K_k(M_i): [B, Lq, K]."""
        return self.activations(similarity, match_mask).sum(2)


def match_mask(query_mask: torch.Tensor, document_mask: torch.Tensor) -> torch.Tensor:
    """[B, Lq] x [B, Ld] -> [B, Lq, Ld] outer product of two masks."""
    return query_mask.unsqueeze(2) * document_mask.unsqueeze(1)


def log_soft_tf(soft_tf: torch.Tensor, query_mask: torch.Tensor,
                log: Callable[[torch.Tensor], torch.Tensor] = torch.log) -> torch.Tensor:
    """Σ_i log(max(K_k(M_i), 1e-10)) over the query terms in ``query_mask``: [B, Lq, K] -> [B, K]."""
    return (log(torch.clamp(soft_tf, min=1e-10)) * query_mask.unsqueeze(-1)).sum(1)


@dataclass
class KernelModelConfig:
    """Settings shared by KNRM and CONV-KNRM (the matchmaker baselines of the TK paper)."""

    kernels_mu: list[float] = field(default_factory=default_mus)
    kernels_sigma: list[float] = field(default_factory=lambda: [0.001] + [0.1] * 10)
    log_scale: float = 0.01
    dense_init: float = 0.014
    train_embeddings: bool = True

    def __post_init__(self) -> None:
        if len(self.kernels_mu) != len(self.kernels_sigma):
            raise ValueError("kernels_mu and kernels_sigma need the same length")
