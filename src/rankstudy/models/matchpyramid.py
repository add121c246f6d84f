"""MatchPyramid — text matching as image recognition (Pang et al., AAAI 2016).

Equations of the paper and where they are implemented:

    (1) M_ij = cos(x_i, y_j)                                   ``match_matrix`` (the paper's
                                                                cosine variant of ⊗)
    (2) z1ᵏ_ij = ReLU(Σ_s Σ_t w1ᵏ_st · M_{i+s, j+t} + b1ᵏ)      ``layers`` (pad, Conv2d, ReLU)
    (3) z2ᵏ_ij = max_{0≤s<d_k} max_{0≤t<d'_k} z1ᵏ_{i·d_k+s, j·d'_k+t}
        with d_k, d'_k chosen from the real text lengths          ``dynamic_pool`` (first layer)
                                                                  / AdaptiveMaxPool2d (the rest)
    (4) s = MLP(flatten(z))                                    ``dense_scorer``

As the matchmaker re-implementation used as a baseline in the TK / TKL papers: cosine match
matrix; a stack of (zero-pad right/bottom by kernel − 1, Conv2d, ReLU, adaptive max pooling)
blocks; the pooled map flattened into Linear(·→100)–ReLU–Linear(100→10)–ReLU–Linear(10→1,
no bias) with PyTorch's default initialisation and no tanh. Defaults are matchmaker's
(config/train/non-bert-defaults.yaml): ``conv_output_size`` [16]×5, ``conv_kernel_size`` [[3, 3]]×5,
``adaptive_pooling_size`` [[36, 90], [18, 60], [9, 30], [6, 20], [3, 10]]. (The paper itself
uses a single convolution + dynamic pooling layer; set one-element lists for that.)

Deliberate differences to the matchmaker code:

* Dynamic pooling of the first layer runs over each example's real region (its query and
  document lengths, OOV tokens counted), as eq. (3) in the paper: matchmaker pooled the whole
  padded batch matrix, so a score depended on how long the other texts of its batch were.
  Later layers see a fixed-size map and are pooled as in matchmaker.
* The match matrix is masked as in TK: padding is no token, OOV (id 1) matches nothing (cos 0).
* matchmaker padded right by kernel[0] − 1 and bottom by kernel[1] − 1 (``ConstantPad2d``'s
  order is left, right, top, bottom), i.e. height and width swapped; here right = width − 1
  and bottom = height − 1, so every position keeps its n×m window. Same for square kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rankstudy.config import check_int_list
from rankstudy.models.base import Ranker
from rankstudy.nn.embedding import pretrained_embedding
from rankstudy.nn.kernels import cosine_matrix, match_mask, token_masks


def dense_scorer(in_features: int, dims: Sequence[int]) -> nn.Sequential:
    """matchmaker's learning-to-rank head: Linear + ReLU per entry of ``dims`` ([100, 10]), then a
    bias-free Linear(→1). Used by MatchPyramid, PACRR and CO-PACRR."""
    layers: list[nn.Module] = []
    for dim in dims:
        layers += [nn.Linear(in_features, dim), nn.ReLU()]
        in_features = dim
    layers.append(nn.Linear(in_features, 1, bias=False))
    return nn.Sequential(*layers)


@dataclass
class MatchPyramidConfig:
    conv_output_size: list[int] = field(default_factory=lambda: [16] * 5)
    conv_kernel_size: list[list[int]] = field(default_factory=lambda: [[3, 3] for _ in range(5)])
    adaptive_pooling_size: list[list[int]] = field(
        default_factory=lambda: [[36, 90], [18, 60], [9, 30], [6, 20], [3, 10]])
    dense_dims: list[int] = field(default_factory=lambda: [100, 10])
    train_embeddings: bool = True

    def __post_init__(self) -> None:
        check_int_list("conv_output_size", self.conv_output_size)
        check_int_list("conv_kernel_size", self.conv_kernel_size, pairs=True)
        check_int_list("adaptive_pooling_size", self.adaptive_pooling_size, pairs=True)
        check_int_list("dense_dims", self.dense_dims)
        if not len(self.conv_output_size) == len(self.conv_kernel_size) == len(self.adaptive_pooling_size):
            raise ValueError("conv_output_size, conv_kernel_size and adaptive_pooling_size need the same length "
                             f"(got {len(self.conv_output_size)}, {len(self.conv_kernel_size)}, "
                             f"{len(self.adaptive_pooling_size)})")


class MatchPyramid(Ranker):
    PARAM_GROUPS = {"embedding.": "embeddings"}

    def __init__(self, config: MatchPyramidConfig, embeddings: np.ndarray):
        super().__init__()
        self.config = config
        self.embedding = pretrained_embedding(embeddings, config.train_embeddings)
        self.layers = nn.ModuleList()
        channels = 1
        for out, (height, width) in zip(config.conv_output_size, config.conv_kernel_size):
            self.layers.append(nn.Sequential(nn.ConstantPad2d((0, width - 1, 0, height - 1), 0.0),
                                             nn.Conv2d(channels, out, kernel_size=(height, width)), nn.ReLU()))
            channels = out
        self.pool_sizes = [tuple(size) for size in config.adaptive_pooling_size]
        last_h, last_w = self.pool_sizes[-1]
        self.dense = dense_scorer(channels * last_h * last_w, config.dense_dims)

    # (1) -------------------------------------------------------------------------------
    def match_matrix(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        """Masked cosine matrix [B, Lq, Ld]: 0 wherever a padding or OOV token is involved."""
        _, q_match = token_masks(query)
        _, d_match = token_masks(document)
        return cosine_matrix(self.embedding(query), self.embedding(document)) * match_mask(q_match, d_match)

    # (3) -------------------------------------------------------------------------------
    @staticmethod
    def dynamic_pool(maps: torch.Tensor, query_lengths: torch.Tensor, document_lengths: torch.Tensor,
                     size: tuple[int, int]) -> torch.Tensor:
        """Adaptive max pooling of each example's real region ``maps[b, :, :lq_b, :ld_b]`` to ``size``:
        [B, C, Lq, Ld] -> [B, C, h, w]. Examples of equal lengths are pooled together."""
        lengths = torch.stack([query_lengths.clamp(min=1), document_lengths.clamp(min=1)], dim=1)
        pooled = maps.new_empty(maps.shape[0], maps.shape[1], *size)
        unique, group = torch.unique(lengths, dim=0, return_inverse=True)
        for index, (lq, ld) in enumerate(unique.tolist()):
            rows = (group == index).nonzero(as_tuple=True)[0]
            pooled[rows] = F.adaptive_max_pool2d(maps[rows, :, :lq, :ld], size)
        return pooled

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        maps = self.match_matrix(query, document).unsqueeze(1)  # [B, 1, Lq, Ld] for Conv2d
        q_tokens, _ = token_masks(query)
        d_tokens, _ = token_masks(document)
        q_len, d_len = q_tokens.sum(1).long(), d_tokens.sum(1).long()  # right padding: real region
        for i, (layer, size) in enumerate(zip(self.layers, self.pool_sizes)):
            maps = layer(maps)  # (2)
            maps = self.dynamic_pool(maps, q_len, d_len, size) if i == 0 else F.adaptive_max_pool2d(maps, size)
        return self.dense(maps.flatten(1)).squeeze(1)  # (4)
