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
    ours, optional (``loss: raml``; not the paper's): AttnCut's reward-augmented maximum likelihood
    (Wu et al., AAAI 2021), cross-entropy to the softmax of the metric table at temperature τ
        L = − Σ_i q_i · log p_i,  q = softmax(C / τ)   ``raml_loss``
    the cut is the most probable position
        k̂ = argmax_i p_i   (1-based: keep the top k̂)    ``predict_cuts``

C_i (``tables[:, i-1]``) is the metric — F1 or penalised DCG — when the list is cut after rank i.

Deliberate choices:

* Padding: lists shorter than N are padded (with their last score); positions ≥ ``lengths`` are
  masked out of the attention keys and get logit −inf, hence probability 0 and no share of the
  loss. Their table entries are ignored (set to 0 before multiplying, so a NaN there is harmless).
* Scale of the two parts of x_i (measured, docs/choppy.md "Why Choppy cut every query at the same
  rank"): with nn.Embedding's N(0, 1) initialisation the d − 1 positional dimensions carry ~127 times
  the energy of the one score dimension, and raw BM25 scores shift from query to query by more than
  they vary within a list. The model then learned a position prior only: one cut for every query,
  whatever the scores (permuting or flattening them changed no cut). By default the positional
  embedding starts at N(0, 0.02²) (BERT's initialisation) and the scores are standardised with the
  mean and standard deviation of the training lists' scores (``score_scaling: train``, an affine map
  the first layer could learn but in practice does not); ``raw`` feeds them as the paper does and
  ``list`` z-scores each list on its own (this drops the list's level, which carries signal).
* Feed-forward: the paper's rFF is "a single learnable feed-forward layer with ReLU activation",
  O = LayerNorm(A + ReLU(A W_f + b_f)) with W_f ∈ R^{d × d} (``ff_layers: 1``, ``ChoppyLayer``);
  ``ff_layers: 2`` is PyTorch's encoder layer, Linear(d, ff_dim) → ReLU → Linear(ff_dim, d), the default
  study's (pinned) setting. Width (2 layers) and dropout are not fixed by the paper; they come from the
  config (defaults 128 and 0.1). Dropout on the attention weights is separate and 0 by default: with it
  PyTorch leaves its fused attention kernel, and a training step at N = 300 is 5.6x slower.
  PyTorch's post-norm ReLU encoder layer; no final layer norm.
* Loss (``loss``): the paper's expected metric by default. Its gradient on logit i is p_i (C_i − Σ_j p_j C_j),
  which vanishes wherever p has concentrated on one position; with DCG's table (down to about −50 at rank
  300) p concentrates on one cut for every list within a few epochs and stays there (docs/choppy.md, "On the
  paper's data"). ``raml`` (the loss of AttnCut, the paper's successor, also in the public implementation
  that has Choppy's) has the gradient p − q, which vanishes only where p matches each list's own target.
* Training (``rankstudy.truncation.choppy_train``): Adam, batches of ``batch_size`` lists (both
  configs: 16); ``epochs`` and ``patience`` (early stopping on the dev metric at the predicted
  cuts) are ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from rankstudy.config import check_ints, is_number


@dataclass
class ChoppyConfig:
    d_model: int = 128
    heads: int = 8
    layers: int = 3
    ff_dim: int = 128  # the hidden width of ff_layers 2 (ff_layers 1 is d -> d, as the paper)
    ff_layers: int = 2  # 1: the paper's single ReLU layer; 2: PyTorch's two-layer feed-forward
    dropout: float = 0.1  # on the residual branches and inside the feed-forward layer
    attention_dropout: float = 0.0  # on the attention weights (see the module docstring)
    # longest list (N) the positional embedding covers: the study's choppy.n (truncation.experiment), no default here
    max_length: int = field(kw_only=True)
    lr: float = 1e-3
    batch_size: int = 64
    epochs: int = 100
    patience: int = 10  # epochs without dev improvement before stopping
    # how scores enter: "raw" (the paper), "train" (standardised with the training lists' mean and
    # standard deviation, set by ``fit_score_scale``), "list" (each list z-scored on its own)
    score_scaling: str = "train"
    position_init_std: float = 0.02  # BERT's; nn.Embedding's default N(0, 1) drowns the score (docstring)
    loss: str = "expected_metric"  # the paper's; "raml": AttnCut's cross-entropy to softmax(C / τ) (docstring)
    raml_temperature: float = 0.95  # τ of "raml" (AttnCut's value)

    def __post_init__(self) -> None:
        check_ints(self, "d_model", "heads", "layers", "ff_dim", "max_length", "batch_size", "epochs", "patience")
        if self.ff_layers not in (1, 2):
            raise ValueError(f"ff_layers must be 1 (the paper's single ReLU layer) or 2, got {self.ff_layers!r}")
        if self.d_model < 2:
            raise ValueError(f"d_model must be at least 2 (1 score + positional dims), got {self.d_model}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by heads ({self.heads})")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not is_number(value) or not 0 <= value < 1:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if not is_number(self.lr) or self.lr <= 0:
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if self.score_scaling not in SCORE_SCALINGS:
            raise ValueError(f"score_scaling must be one of {SCORE_SCALINGS}, got {self.score_scaling!r}")
        if not is_number(self.position_init_std) or self.position_init_std <= 0:
            raise ValueError(f"position_init_std must be a positive number, got {self.position_init_std!r}")
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if not is_number(self.raml_temperature) or self.raml_temperature <= 0:
            raise ValueError(f"raml_temperature must be a positive number, got {self.raml_temperature!r}")


SCORE_SCALINGS = ("raw", "train", "list")
LOSSES = ("expected_metric", "raml")



def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[B, width] bool, True at real positions (rank index < length)."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


class ChoppyLayer(nn.Module):
    """The paper's transformer layer (Sec. 3.1), post-norm:
    A = LayerNorm(X + MultiAttn(X)),  O = LayerNorm(A + rFF(A)),  rFF(A) = ReLU(A W_f + b_f), W_f ∈ R^{d × d}.
    Dropout (ours) on both residual branches, as PyTorch's encoder layer."""

    def __init__(self, d_model: int, heads: int, dropout: float, attention_dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, heads, dropout=attention_dropout, batch_first=True)
        self.feed_forward = nn.Linear(d_model, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        attended = self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False)[0]
        a = self.norm1(x + self.dropout(attended))
        return self.norm2(a + self.dropout(torch.relu(self.feed_forward(a))))


class Choppy(nn.Module):
    def __init__(self, config: ChoppyConfig):
        super().__init__()
        self.config = config
        self.position = nn.Embedding(config.max_length, config.d_model - 1)
        nn.init.normal_(self.position.weight, std=config.position_init_std)
        # score_scaling "train": set from the training lists by fit_score_scale, saved with the weights
        self.register_buffer("score_mean", torch.tensor(0.0))
        self.register_buffer("score_std", torch.tensor(1.0))
        if config.ff_layers == 1:
            self.layers = nn.ModuleList(ChoppyLayer(config.d_model, config.heads, config.dropout,
                                                    config.attention_dropout) for _ in range(config.layers))
        else:
            layer = nn.TransformerEncoderLayer(config.d_model, config.heads, dim_feedforward=config.ff_dim,
                                               dropout=config.dropout, batch_first=True)
            layer.self_attn.dropout = config.attention_dropout  # nn.TransformerEncoderLayer has one rate for all
            self.encoder = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.output = nn.Linear(config.d_model, 1)

    def forward(self, scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """scores [B, N], lengths [B] → logits [B, N], −inf beyond each list's length."""
        batch, width = scores.shape
        if width > self.config.max_length:
            raise ValueError(f"lists of {width} scores exceed max_length {self.config.max_length}")
        real = length_mask(lengths, width)
        scores = scores.masked_fill(~real, 0.0)  # padded values must not reach any real position
        if self.config.score_scaling == "train":
            scores = ((scores - self.score_mean) / self.score_std).masked_fill(~real, 0.0)
        elif self.config.score_scaling == "list":
            count = lengths[:, None].to(scores.dtype)
            mean = scores.sum(1, keepdim=True) / count
            var = ((scores - mean).masked_fill(~real, 0.0) ** 2).sum(1, keepdim=True) / count
            scores = ((scores - mean) / var.sqrt().clamp_min(1e-6)).masked_fill(~real, 0.0)
        positions = self.position.weight[:width].expand(batch, width, -1)
        tokens = torch.cat([scores[..., None], positions], dim=-1)
        if self.config.ff_layers == 1:
            hidden = tokens
            for layer in self.layers:
                hidden = layer(hidden, ~real)
        else:
            hidden = self.encoder(tokens, src_key_padding_mask=~real)
        return self.output(hidden).squeeze(-1).masked_fill(~real, float("-inf"))

    def fit_score_scale(self, scores: torch.Tensor, lengths: torch.Tensor) -> None:
        """Mean and standard deviation of the real scores of the training lists (score_scaling "train")."""
        real = scores[length_mask(lengths, scores.shape[1])]
        self.score_mean.fill_(real.mean().item())
        self.score_std.fill_(max(real.std().item(), 1e-6) if real.numel() > 1 else 1.0)

    @staticmethod
    def expected_metric_loss(logits: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """L = −Σ_i p_i · C_i with p = softmax(logits) over each list's real positions; batch mean."""
        real = length_mask(lengths, logits.shape[1])
        probabilities = torch.softmax(logits.masked_fill(~real, float("-inf")), dim=-1)
        return -(probabilities * tables.masked_fill(~real, 0.0)).sum(-1).mean()

    @staticmethod
    def raml_loss(logits: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor,
                  temperature: float) -> torch.Tensor:
        """L = −Σ_i q_i · log p_i with q = softmax(C / τ) and p = softmax(logits), over real positions; batch mean."""
        real = length_mask(lengths, logits.shape[1])
        log_p = torch.log_softmax(logits.masked_fill(~real, float("-inf")), dim=-1)
        target = torch.softmax((tables / temperature).masked_fill(~real, float("-inf")), dim=-1)
        return -(target * log_p.masked_fill(~real, 0.0)).sum(-1).mean()

    def loss(self, logits: torch.Tensor, tables: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The configured training loss (``config.loss``)."""
        if self.config.loss == "raml":
            return self.raml_loss(logits, tables, lengths, self.config.raml_temperature)
        return self.expected_metric_loss(logits, tables, lengths)

    @staticmethod
    def predict_cuts(logits: torch.Tensor) -> torch.Tensor:
        """1-based cut (keep the top k) at the most probable position."""
        return logits.argmax(dim=-1) + 1


expected_metric_loss = Choppy.expected_metric_loss
predict_cuts = Choppy.predict_cuts
