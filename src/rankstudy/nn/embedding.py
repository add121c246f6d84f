"""Word embeddings initialised from a pre-computed matrix (rows aligned with the vocabulary)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def pretrained_embedding(matrix: np.ndarray, trainable: bool) -> nn.Embedding:
    """Row 0 is padding (kept at zero, no gradient); row 1 is OOV (masked out of matching)."""
    weights = torch.as_tensor(np.asarray(matrix, dtype=np.float32))
    return nn.Embedding.from_pretrained(weights, freeze=not trainable, padding_idx=0)


def sinusoidal_positions(length: int, dim: int, device=None) -> torch.Tensor:
    """Transformer position features [length, dim] (sin on the first half, cos on the second,
    timescales 1 .. 1e4), as allennlp's ``add_positional_features`` used by the original TK."""
    half = dim // 2
    timescales = torch.exp(torch.arange(half, dtype=torch.float32, device=device)
                           * -(np.log(1.0e4) / max(half - 1, 1)))
    angles = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1) * timescales.unsqueeze(0)
    features = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if dim % 2:
        features = torch.cat([features, features.new_zeros(length, 1)], dim=1)
    return features
