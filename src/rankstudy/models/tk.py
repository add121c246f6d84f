"""TK — Transformer-Kernel ranking (Hofstätter et al., TREC 2019 notebook; ECAI 2020).

Equations (paper numbering of the ECAI 2020 paper) and where they are implemented:

    (1) q̂_i = α·q_i + (1 − α)·TF(q_i + p_i)        ``contextualize``: embeddings plus sinusoidal
        d̂_j = α·d_j + (1 − α)·TF(d_j + p_j)        positions through a shared transformer TF,
                                                    mixed with a learned α (init ``mixer_init``)
    (2) M_ij = cos(q̂_i, d̂_j)                       ``nn.kernels.cosine_matrix``
    (3) K_k(M_i) = Σ_j exp(−(M_ij − μ_k)² / 2σ²)    ``nn.kernels.KernelPooling``
    (4) s_log^k = Σ_i log2(K_k(M_i)) · β             ``kernel_features`` (β: learned scaler, init 0.01)
    (5) s_len^k = Σ_i K_k(M_i) / (|d| + 1) · β       ``kernel_features`` (TK_v1's second branch)
    (6) s_log = w_log · s_log^k ,  s_len = w_len · s_len^k ,  s = w_comb · [s_log; s_len]

Deliberate choices, following the original code (matchmaker ``TK_v1``) where the paper is silent:

* 11 kernels, μ = 1.0, 0.9, 0.7, …, −0.9, all σ = 0.1 (no special exact-match σ); w_log and
  w_len are bias-free Linear(11→1) initialised U(−0.014, 0.014); w_comb is a bias-free Linear(2→1).
* The length branch divides by |d| + 1 and takes no log (as the code, unlike a log-normalised
  variant). ``branches: log`` gives the ECAI 2020 single-branch model: s = w_log · s_log^k.
* log2 is applied to max(K_k, 1e-10), as the original clamp.
* Masking: padding is no token; OOV tokens (id 1) count for |d| but match nothing, and OOV query
  terms are left out of the sums over i (the original masked padding only, so an OOV query
  term contributed log2(1e-10) — a large constant that the paper does not intend).
  ``oov_matches: true`` gives the published behaviour (OOV tokens match as ordinary tokens).
* Positions: queries and documents read the same sinusoid table from position 0, as the paper.
  The published code (matchmaker's ``use_diff_posencoding``) starts document positions at 500:
  ``document_position_offset: 500`` gives it (docs/fidelity.md says which config uses which).
* Heads split the embedding width (PyTorch's layer) unless ``head_size`` is set: the notebook's 16
  heads of 32 over 300-d vectors project queries, keys and values to 16 × 32 and back
  (``nn.transformer.ProjectedSelfAttention``, AllenNLP's multi-head self-attention; paper config).
* The transformer is PyTorch's ``TransformerEncoder`` (post-norm, ReLU, batch-first) run through
  ``nn.transformer.encoder_forward`` (fused scaled-dot-product attention). At inference, distinct
  queries of a batch are contextualised once and shared (re-ranking scores one query against
  many documents), and on CPU a batch is scored in slices of ``cpu_slice_documents`` so the
  activations stay in cache, shared out between the threads (``nn.slices``: each thread scores whole
  slices on one torch thread); scores equal those of the original computation (tested;
  bench/tk_speed.py measures 1.46× the original forward side by side).
* (1) reads no query: re-ranking may contextualise each document once and score it against every query
  that ranks it (``encode_documents``, ``score_encoded``; ``rankstudy.rerank``), the same scores up to float
  rounding (tested; bench/document_reuse.py measures the gain).

Optional windowed kernel pooling (the notebook's d3 run on documents up to 800 tokens): for each
window size w the document is cut into consecutive windows of w tokens, (4) is computed per
window and scored by w_log, the window scores are sorted and the top ``top_windows`` are
weighted by learned weights (init 1 / top_windows); the sizes' results are summed. The notebook
gives no code for this; this is our reading of its description. Its kernel weights w_log start
non-negative (|U(−a, a)| instead of TK's U(−a, a)), so that the first top windows are the ones that match.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from rankstudy.models.base import Ranker
from rankstudy.nn.embedding import pretrained_embedding, sinusoidal_positions
from rankstudy.nn.kernels import KernelPooling, cosine_matrix, default_mus, log_soft_tf, match_mask, token_masks
from rankstudy.nn.slices import map_slices
from rankstudy.nn.transformer import ProjectedSelfAttention, encoder_forward
from rankstudy.precision import in_fp32


@dataclass
class ContextualizerConfig:
    """What TK and TKL share: the contextualiser (1) and the kernels (2)."""

    layers: int = 2
    heads: int = 10
    # None: the heads split the embedding width (PyTorch's layer); else each head projects to head_size
    # (the TK notebook: 16 heads of 32 over 300-d vectors; nn.transformer.ProjectedSelfAttention)
    head_size: int | None = None
    ff_dim: int = 100
    dropout: float = 0.0
    kernels_mu: list[float] = field(default_factory=default_mus)
    kernels_sigma: list[float] = field(default_factory=lambda: [0.1] * 11)
    mixer_init: float = 0.5
    dense_init: float = 0.014
    train_embeddings: bool = True

    def __post_init__(self) -> None:
        if len(self.kernels_mu) != len(self.kernels_sigma) or not self.kernels_mu:
            raise ValueError("kernels_mu and kernels_sigma need the same (non-zero) length")
        if any(sigma <= 0 for sigma in self.kernels_sigma):
            raise ValueError("kernels_sigma must be positive")
        if self.layers < 1 or self.heads < 1 or self.ff_dim < 1 or (self.head_size is not None and self.head_size < 1):
            raise ValueError("layers, heads, head_size and ff_dim must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError("dropout must be in [0, 1)")


@dataclass
class TKConfig(ContextualizerConfig):
    scaler_init: float = 0.01
    branches: str = "both"  # "both" (TK_v1: log + length) or "log" (ECAI 2020)
    max_length: int = 4096  # longest sequence the position features cover
    # document positions start here (queries at 0); 500 = the published code's use_diff_posencoding
    document_position_offset: int = 0
    oov_matches: bool = False  # True: OOV tokens match like any token (the published code masks padding only)
    window_sizes: list[int] = field(default_factory=list)  # windowed kernel pooling (d3); [] = off
    top_windows: int = 3
    # CPU inference scores a batch in slices of this many documents, so each slice's activations
    # stay in the CPU cache (measured +15-20 % docs/ms at batch 64 x 200, bench/tk_speed.py);
    # scores are the same. 0 = whole batch at once. GPUs always take the whole batch.
    cpu_slice_documents: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.branches not in ("both", "log"):
            raise ValueError(f"branches must be 'both' or 'log', not {self.branches!r}")
        if self.window_sizes and self.branches != "log":
            raise ValueError("windowed kernel pooling scores windows with the log branch: set branches: log")
        if self.top_windows < 1:
            raise ValueError("top_windows must be positive")
        if self.document_position_offset < 0:
            raise ValueError("document_position_offset must be >= 0")
        if self.cpu_slice_documents < 0:
            raise ValueError("cpu_slice_documents must be >= 0")


def build_contextualizer(model: nn.Module, config: ContextualizerConfig, embeddings: np.ndarray,
                         max_length: int) -> None:
    """Give ``model`` TK's embedding, transformer, sinusoid positions, mixer α and kernels (the
    parameters of (1) and (2)), in this order: the order draws the initial weights from the seed."""
    model.embedding = pretrained_embedding(embeddings, config.train_embeddings)
    dim = model.embedding.embedding_dim
    projected = config.head_size is not None and config.head_size * config.heads != dim
    if dim % config.heads and not projected:
        raise ValueError(f"embedding dim {dim} is not divisible by {config.heads} heads (or set head_size)")
    # PyTorch's layer wants dim % heads == 0 even when its attention is replaced below
    layer = nn.TransformerEncoderLayer(dim, config.heads if not projected else 1, dim_feedforward=config.ff_dim,
                                       dropout=config.dropout, batch_first=True)
    if projected:
        layer.self_attn = ProjectedSelfAttention(dim, config.heads, config.head_size, config.dropout)
    # parameters of PyTorch's layer; the forward pass is nn.transformer.encoder_forward
    model.contextualizer = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
    model.register_buffer("positions", sinusoidal_positions(max_length, dim), persistent=False)
    model.mixer = nn.Parameter(torch.full([1], config.mixer_init))
    model.kernels = KernelPooling(config.kernels_mu, config.kernels_sigma)


class Contextualizing(Ranker):
    """A ranker built on TK's contextualisation (1) (TK, TKL): its embedding, sinusoid positions, transformer
    and mixer come from ``build_contextualizer``; ``contextualize`` mixes the representations of ids."""

    THREAD_GROUPS = True  # training's length groups may run on separate threads (models/base.py)
    DOCUMENT_ENCODING = True  # encode_documents, score_encoded (models/base.py)
    PARAM_GROUPS = {"embedding.": "embeddings", "contextualizer.": "contextualizer"}

    def contextualize(self, ids: torch.Tensor, first_position: int = 0,
                      rows: slice | None = None) -> tuple[torch.Tensor, ...]:
        """Token ids [B, L] -> (mixed representations [B, L, D], token mask, match mask); positions from
        ``first_position``; with ``rows``, the three at those positions only (the others still attended to)."""
        if first_position + ids.shape[1] > self.positions.shape[0]:
            raise ValueError(f"sequence of {ids.shape[1]} tokens from position {first_position} exceeds max_length "
                             f"{self.positions.shape[0]}")
        tokens, matchable = token_masks(ids)
        embedded = self.embedding(ids)
        padding = tokens == 0
        positions = self.positions[first_position : first_position + ids.shape[1]]
        context = encoder_forward(self.contextualizer, embedded + positions, padding if bool(padding.any()) else None,
                                  rows)
        if rows is not None:
            embedded, tokens, matchable = embedded[:, rows], tokens[:, rows], matchable[:, rows]
        mixed = (self.mixer * embedded + (1 - self.mixer) * context) * tokens.unsqueeze(-1)
        return mixed, tokens, matchable

    def contextualize_queries(self, query: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``contextualize`` for the queries of a batch: at inference each distinct query once (re-ranking
        scores one query against many documents)."""
        if self.training:
            return self.contextualize(query)
        distinct, inverse = torch.unique(query, dim=0, return_inverse=True)
        if distinct.shape[0] == query.shape[0]:
            return self.contextualize(query)
        return tuple(part[inverse] for part in self.contextualize(distinct))


class TK(Contextualizing):
    def __init__(self, config: TKConfig, embeddings: np.ndarray):
        super().__init__()
        self.config = config
        build_contextualizer(self, config, embeddings, config.max_length + config.document_position_offset)
        self.scaler = nn.Parameter(torch.full([1], config.scaler_init))
        n = self.kernels.count
        self.dense_log = nn.Linear(n, 1, bias=False)
        nn.init.uniform_(self.dense_log.weight, -config.dense_init, config.dense_init)
        if config.window_sizes:
            # Windowed pooling keeps the top windows by score, and only they get a gradient. With a weight vector
            # that starts against matching the top windows are those without the query's words, from which
            # training never learns matching: d3 stayed at validation 0.04 in 1 of 3 seeds (issue 41;
            # docs/neural.md). Non-negative weights make the first top windows the best-matching ones.
            self.dense_log.weight.data.abs_()
        if config.branches == "both":
            self.dense_len = nn.Linear(n, 1, bias=False)
            nn.init.uniform_(self.dense_len.weight, -config.dense_init, config.dense_init)
            self.dense_comb = nn.Linear(2, 1, bias=False)
        if config.window_sizes:
            self.window_weights = nn.Parameter(
                torch.full([len(config.window_sizes), config.top_windows], 1.0 / config.top_windows))

    # (1) -------------------------------------------------------------------------------
    def encode_documents(self, document: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(1) for documents alone, from ``document_position_offset``: (d̂ [B, Ld, D], token mask, match mask),
        which no query changes (``Ranker.DOCUMENT_ENCODING``)."""
        return self.contextualize(document, self.config.document_position_offset)

    def _contextualize_pair(self, query: torch.Tensor, document: torch.Tensor):
        return self._pair(query, self.encode_documents(document))

    def _pair(self, query: torch.Tensor, encoded: tuple[torch.Tensor, ...]):
        """(q̂, q match mask, d̂, d token mask, d match mask) of query ids and encoded documents; with
        ``oov_matches`` every real token matches."""
        q, q_tokens, q_match = self.contextualize_queries(query)
        d, d_tokens, d_match = encoded
        if self.config.oov_matches:  # the published code: padding is the only token that matches nothing
            q_match, d_match = q_tokens, d_tokens
        return q, q_match, d, d_tokens, d_match

    # (2)-(5) ---------------------------------------------------------------------------
    def kernel_features(self, query: torch.Tensor, document: torch.Tensor) -> dict[str, torch.Tensor]:
        return self._kernel_features(*self._contextualize_pair(query, document))

    # (2)-(6) read the contextualised pair in fp32 under bf16 autocast: a cosine rounded to bf16 (4e-3) moves a
    # σ = 0.1 kernel's activation by several per cent, and bf16 scores tie documents (rankstudy.precision)
    @in_fp32
    def _kernel_features(self, q: torch.Tensor, q_match: torch.Tensor, d: torch.Tensor, d_tokens: torch.Tensor,
                         d_match: torch.Tensor) -> dict[str, torch.Tensor]:
        similarity, matches = cosine_matrix(q, d), match_mask(q_match, d_match)
        soft_tf = self.kernels(similarity, matches)  # [B, Lq, K]
        query_terms = q_match.unsqueeze(-1)
        s_log_k = log_soft_tf(soft_tf, q_match, torch.log2) * self.scaler
        features = {"similarity": similarity, "match_mask": matches, "s_log_k": s_log_k}
        if self.config.branches == "both":
            lengths = d_tokens.sum(1).view(-1, 1, 1)
            features["s_len_k"] = (soft_tf / (lengths + 1) * self.scaler * query_terms).sum(1)
        return features

    # (6) -------------------------------------------------------------------------------
    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self._in_slices(self._score, query, document)

    def _in_slices(self, score, query: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        """``score(query, other)``; at CPU inference in slices of ``cpu_slice_documents`` rows (``nn.slices``)."""
        size = self.config.cpu_slice_documents
        if not self.training and other.device.type == "cpu" and 0 < size < other.shape[0]:
            return torch.cat(map_slices(score, query, other, size))
        return score(query, other)

    def _score(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self._pair_score(self._contextualize_pair(query, document))

    def _pair_score(self, pair: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return self._windowed(*pair) if self.config.window_sizes else self._score_parts(*pair)["s"]

    def score_encoded(self, query: torch.Tensor, encoded: tuple[torch.Tensor, ...], rows: torch.Tensor) -> torch.Tensor:
        """Scores [P] of queries [P, Lq] against documents ``rows`` [P] of ``encode_documents``' output, sliced on
        CPU as ``forward`` is (``Ranker.DOCUMENT_ENCODING``)."""
        def score(query_slice: torch.Tensor, rows_slice: torch.Tensor) -> torch.Tensor:
            return self._pair_score(self._pair(query_slice, tuple(part[rows_slice] for part in encoded)))

        return self._in_slices(score, query, rows)

    def score_parts(self, query: torch.Tensor, document: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every quantity of equations (4)-(6) per pair (for the interpretability view)."""
        return self._score_parts(*self._contextualize_pair(query, document))

    @in_fp32
    def _score_parts(self, *pair: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self._kernel_features(*pair)
        s_log = self.dense_log(features["s_log_k"]).squeeze(1)
        parts = dict(features, s_log=s_log)
        if self.config.branches == "both":
            s_len = self.dense_len(features["s_len_k"]).squeeze(1)
            parts.update(s_len=s_len, s=self.dense_comb(torch.stack([s_log, s_len], dim=1)).squeeze(1))
        else:
            parts["s"] = s_log
        return parts

    @in_fp32
    def _windowed(self, q: torch.Tensor, q_match: torch.Tensor, d: torch.Tensor, _: torch.Tensor,
                  d_match: torch.Tensor) -> torch.Tensor:
        activations = self.kernels.activations(cosine_matrix(q, d), match_mask(q_match, d_match))  # [B,Lq,Ld,K]
        score = activations.new_zeros(activations.shape[0])
        for size_index, size in enumerate(self.config.window_sizes):
            windows = -(-activations.shape[2] // size)
            padded = nn.functional.pad(activations, (0, 0, 0, windows * size - activations.shape[2]))
            soft_tf = padded.view(*padded.shape[:2], windows, size, -1).sum(3)  # [B, Lq, W, K]
            logs = torch.log2(torch.clamp(soft_tf, min=1e-10)) * self.scaler * q_match.view(*q_match.shape, 1, 1)
            window_scores = self.dense_log(logs.sum(1)).squeeze(-1)  # [B, W]
            has_tokens = nn.functional.pad(d_match, (0, windows * size - d_match.shape[1])).view(-1, windows, size).amax(2)
            window_scores = window_scores.masked_fill(has_tokens == 0, float("-inf"))
            top = torch.topk(window_scores, min(self.config.top_windows, windows), dim=1).values
            top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
            score = score + (top * self.window_weights[size_index, : top.shape[1]]).sum(1)
        return score
