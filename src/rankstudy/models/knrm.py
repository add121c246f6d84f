"""KNRM — kernel-based neural ranking (Xiong et al., SIGIR 2017).

Equations of the paper and where they are implemented:

    M_ij = cos(q_i, d_j)                                   ``nn.kernels.cosine_matrix``
    K_k(M_i) = Σ_j exp(−(M_ij − μ_k)² / 2σ_k²)             ``nn.kernels.KernelPooling``
    φ(M) = Σ_i log K(M_i)                                  ``forward``
    f(q, d) = tanh(wᵀ φ(M) + b)                            ``forward`` (see below)

Following the matchmaker re-implementation used as the TK paper's baseline: 11 kernels with
μ = 1.0 (exact match, σ = 0.001) and 0.9, 0.7, …, −0.9 (σ = 0.1); log of max(K, 1e-10)
scaled by ``log_scale`` (0.01); a bias-free linear layer initialised U(−0.014, 0.014) and no
tanh (a monotone output function does not change a ranking; it only flattens gradients).
Masking as in TK: padding is no token, OOV matches nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rankstudy.models.base import Ranker
from rankstudy.nn.embedding import pretrained_embedding
from rankstudy.nn.kernels import (KernelModelConfig, KernelPooling, cosine_matrix, log_soft_tf, match_mask,
                                  token_masks)
from rankstudy.precision import in_fp32


@dataclass
class KNRMConfig(KernelModelConfig):
    pass


class KNRM(Ranker):
    THREAD_GROUPS = True  # training's length groups may run on separate threads (models/base.py)
    PARAM_GROUPS = {"embedding.": "embeddings"}

    def __init__(self, config: KNRMConfig, embeddings: np.ndarray):
        super().__init__()
        self.config = config
        self.embedding = pretrained_embedding(embeddings, config.train_embeddings)
        self.kernels = KernelPooling(config.kernels_mu, config.kernels_sigma)
        self.dense = nn.Linear(self.kernels.count, 1, bias=False)
        nn.init.uniform_(self.dense.weight, -config.dense_init, config.dense_init)

    # fp32 under bf16 autocast: its one matrix product is the cosines, which the exact-match kernel (σ = 0.001)
    # needs exact (rankstudy.precision)
    @in_fp32
    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        _, q_match = token_masks(query)
        _, d_match = token_masks(document)
        soft_tf = self.kernels(cosine_matrix(self.embedding(query), self.embedding(document)),
                               match_mask(q_match, d_match))
        return self.dense(log_soft_tf(soft_tf, q_match) * self.config.log_scale).squeeze(1)
