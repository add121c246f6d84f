"""CONV-KNRM — convolutional kernel-based ranking (Dai et al., WSDM 2018).

Equations of the paper and where they are implemented:

    g_i^h = ReLU(W^h · t_{i:i+h} + b^h),  h = 1..H          ``_ngrams`` (Conv1d per n-gram size)
    M^{hq,hd}_ij = cos(g_i^{hq}, g_j^{hd})                  all H² cross-matches, ``_match`` (each
                                                            g^h normalised once, ``_ngrams``)
    φ(M^{hq,hd}) = Σ_i log K(M^{hq,hd}_i)                    ``nn.kernels.KernelPooling``
    f(q, d) = tanh(wᵀ [φ(M^{1,1}); …; φ(M^{H,H})] + b)       ``_match`` (bias-free, no tanh)

As in the matchmaker re-implementation (the TK paper's baseline): sequences are right-padded by
h − 1 zeros so every position has an h-gram; an n-gram is masked like the token it starts at;
log of max(K, 1e-10) scaled by ``log_scale``; no tanh. Kernels as KNRM.

Learning rates: the n-gram convolutions train in group ``contextualizer`` (the TK and TKL papers' 10⁻⁴ "for
representation learning", beside 10⁻³ for the other layers). At 10⁻³ (the kernel layer's rate) the filters
fitted the synthetic documents' training pairs while the validation fell below the untrained model's
(nDCG@10 0.149 untrained, 0.117 after 200 steps; at 10⁻⁴: 0.186 after 100; docs/neural.md, issue 41).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rankstudy.models.base import Ranker
from rankstudy.nn.embedding import pretrained_embedding
from rankstudy.nn.kernels import (KernelModelConfig, KernelPooling, log_soft_tf, match_mask, token_masks,
                                  unit_vectors)
from rankstudy.precision import in_fp32


@dataclass
class ConvKNRMConfig(KernelModelConfig):
    max_ngram: int = 3
    filters: int = 128

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_ngram < 1 or self.filters < 1:
            raise ValueError("max_ngram and filters must be positive")


class ConvKNRM(Ranker):
    THREAD_GROUPS = True  # training's length groups may run on separate threads (models/base.py)
    PARAM_GROUPS = {"embedding.": "embeddings", "convolutions.": "contextualizer"}

    def __init__(self, config: ConvKNRMConfig, embeddings: np.ndarray):
        super().__init__()
        self.config = config
        self.embedding = pretrained_embedding(embeddings, config.train_embeddings)
        dim = self.embedding.embedding_dim
        self.convolutions = nn.ModuleList(
            nn.Sequential(nn.ConstantPad1d((0, h - 1), 0.0), nn.Conv1d(dim, config.filters, kernel_size=h), nn.ReLU())
            for h in range(1, config.max_ngram + 1)
        )
        self.kernels = KernelPooling(config.kernels_mu, config.kernels_sigma)
        self.dense = nn.Linear(self.kernels.count * config.max_ngram ** 2, 1, bias=False)
        nn.init.uniform_(self.dense.weight, -config.dense_init, config.dense_init)

    def _ngrams(self, ids: torch.Tensor) -> list[torch.Tensor]:
        """Unit-length n-gram vectors g^h / |g^h| [B, L, filters], h = 1..H: each computed once and
        matched against every n-gram size of the other side. Under bf16 autocast the convolutions run in bf16
        and the normalisation in fp32 (equal n-grams must keep cos = 1 for the exact-match kernel, σ = 0.001)."""
        embedded = self.embedding(ids).transpose(1, 2)  # [B, D, L] for Conv1d
        return [in_fp32(unit_vectors)(conv(embedded).transpose(1, 2)) for conv in self.convolutions]

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        _, q_match = token_masks(query)
        _, d_match = token_masks(document)
        matches = match_mask(q_match, d_match)
        document_ngrams = [d.transpose(1, 2) for d in self._ngrams(document)]
        return self._match(self._ngrams(query), document_ngrams, matches, q_match)

    @in_fp32  # the cosines, kernels and score in fp32 under bf16 autocast (rankstudy.precision)
    def _match(self, query_ngrams: list[torch.Tensor], document_ngrams: list[torch.Tensor], matches: torch.Tensor,
               q_match: torch.Tensor) -> torch.Tensor:
        features = []
        for q in query_ngrams:
            for d in document_ngrams:
                soft_tf = self.kernels(torch.bmm(q, d), matches)  # M^{hq,hd}: cosines of unit vectors
                features.append(log_soft_tf(soft_tf, q_match) * self.config.log_scale)
        return self.dense(torch.cat(features, dim=1)).squeeze(1)
