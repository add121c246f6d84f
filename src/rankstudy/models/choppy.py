"""Choppy — a transformer that chooses where to cut a ranked list (Bahri et al., SIGIR 2020).

The paper's model and loss (paraphrased, not verbatim quotes) and where they are implemented:

    each score is concatenated with a learned positional embedding of d − 1 dimensions
        x_i = [s_i ; P_i],  P ∈ R^{N × (d−1)}           ``forward`` (``position``: nn.Embedding)
    a stack of transformer encoder layers (d = 128, 8 heads, 3 layers)
        h = Transformer(x_1 … x_N)                      ``forward`` (``encoder``: nn.TransformerEncoder,
                                                        batch_first=True, attention across the ranks
                                                        of one list, never across the batch)
    a linear layer to one logit per position, softmax over positions
        p_i = softmax_i(w · h_i + b)                    ``forward`` (logits); softmax in
                                                        ``expected_metric_loss`` and ``predict``
    the loss is the negative expected metric
        L = − Σ_i p_i · C_i   (mean over the batch)     ``expected_metric_loss``
    the cut is the most probable position
        k̂ = argmax_i p_i   (1-based: keep the top k̂)    ``predict_cuts``

C_i (``tables[:, i-1]``) is the metric — F1 or penalised DCG — when the list is cut after rank i.

Deliberate choices:

* Padding: lists shorter than N are padded (with their last score); positions ≥ ``lengths`` are
  masked out of the attention keys and get logit −inf, hence probability 0 and no share of the
  loss. Their table entries are ignored (set to 0 before multiplying, so a NaN there is harmless).
* Scores are fed raw, as in the paper. ``normalize_scores: true`` standardises each list's real
  scores to zero mean and unit variance first (for retrievers with very different score scales).
* Feed-forward width and dropout are not fixed by the paper; they come from the config
  (defaults 128 and 0.1). PyTorch's post-norm ReLU encoder layer; no final layer norm.
* Training (``rankstudy.truncation.choppy_train``): Adam, batches of 64; ``epochs`` and
  ``patience`` (early stopping on the dev metric at the predicted cuts) are ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class ChoppyConfig:
    d_model: int = 128
    heads: int = 8
    layers: int = 3
    ff_dim: int = 128
    dropout: float = 0.1
    max_length: int = 300  # longest list (N) the positional embedding covers
    lr: float = 1e-3
    batch_size: int = 64
    epochs: int = 100
    patience: int = 10  # epochs without dev improvement before stopping
    normalize_scores: bool = False

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "layers", "ff_dim", "max_length", "batch_size", "epochs", "patience"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model < 2:
            raise ValueError(f"d_model must be at least 2 (1 score + positional dims), got {self.d_model}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        if not _number(self.dropout) or not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not _number(self.lr) or self.lr <= 0:
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if not isinstance(self.normalize_scores, bool):
            raise ValueError(f"normalize_scores must be true or false, got {self.normalize_scores!r}")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, width] bool, True at real positions (rank index < length)."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


class Choppy(nn.Module):
    def __init__(self, config: ChoppyConfig):
        super().__init__()
        self.config = config
        self.position = nn.Embedding(config.max_length, config.d_model - 1)
        layer = nn.TransformerEncoderLayer(config.d_model, config.heads, dim_feedforward=config.ff_dim,
                                           dropout=config.dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.output = nn.Linear(config.d_model, 1)

    def forward(self, scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """scores [B, N], lengths [B] → logits [B, N], −inf beyond each list's length."""
        batch, width = scores.shape
        if width > self.config.max_length:
            raise ValueError(f"lists of {width} scores exceed max_length {self.config.max_length}")
        real = length_mask(lengths, width)
        scores = scores.masked_fill(~real, 0.0)  # padded values must not reach any real position
        if self.config.normalize_scores:
            count = lengths[:, None].to(scores.dtype)
            mean = scores.sum(1, keepdim=True) / count
            var = ((scores - mean).masked_fill(~real, 0.0) ** 2).sum(1, keepdim=True) / count
            scores = ((scores - mean) / var.sqrt().clamp_min(1e-6)).masked_fill(~real, 0.0)
        positions = self.position.weight[:width].expand(batch, width, -1)
        tokens = torch.cat([scores[..., None], positions], dim=-1)
        hidden = self.encoder(tokens, src_key_padding_mask=~real)
        return self.output(hidden).squeeze(-1).masked_fill(~real, float("-inf"))

    @staticmethod
    def expected_metric_loss(logits: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """L = −Σ_i p_i · C_i with p = softmax(logits) over each list's real positions; batch mean."""
        real = length_mask(lengths, logits.shape[1])
        probabilities = torch.softmax(logits.masked_fill(~real, float("-inf")), dim=-1)
        return -(probabilities * tables.masked_fill(~real, 0.0)).sum(-1).mean()

    @staticmethod
    def predict_cuts(logits: torch.Tensor) -> torch.Tensor:
        """1-based cut (keep the top k) at the most probable position."""
        return logits.argmax(dim=-1) + 1


expected_metric_loss = Choppy.expected_metric_loss
predict_cuts = Choppy.predict_cuts
