"""DRMM — Deep Relevance Matching Model (Guo, Fan, Ai, Croft, CIKM 2016: "A Deep Relevance
Matching Model for Ad-hoc Retrieval").

Equations of the paper and where they are implemented:

    (1) z_i^(0) = h(w_i^(q) ⊗ d),  i = 1 … M             ``histograms``: matching histogram of
                                                         query term i ("matching histogram
                                                         mapping")
        z_i^(l) = tanh(W^(l) z_i^(l−1) + b^(l)), l = 1 … L ``matching``: the feed-forward matching
                                                         network, the same for every query term
        s = Σ_{i=1}^{M} g_i z_i^(L)                      ``forward``
    (2) g_i = exp(w_g x_i^(q)) / Σ_j exp(w_g x_j^(q))     ``gates``: term gating, x_i the term's
                                                         IDF (``gating: idf``, the paper's best
                                                         variant) or its embedding (``tv``)
    (3) L = max(0, 1 − s(q, d⁺) + s(q, d⁻))              the project's ``pairwise_margin_loss``
                                                         (margin 1); the optimiser is the
                                                         project's (the paper used Adagrad)

The paper's setting is the default: ``bins`` = 30, LogCount histograms (``histogram: lch``;
``ch`` counts, ``nh`` counts / their sum are the paper's other two), ``hidden_sizes`` [5, 1]
(two tanh layers of 5 and 1 units, eq. 1 applies tanh to the last one too) and IDF gating.

* Bins, as the original code (MatchZoo's ``MatchingHistogram``): bins − 1 bins of width
  2 / (bins − 1) cover [−1, 1) (a cosine v goes to ⌊(v + 1) / 2 · (bins − 1)⌋) and the last bin
  holds the exact matches. Departure: a pair is an exact match when its token ids are equal,
  not when its float cosine is 1 (a vector's cosine with itself may round below 1, two terms
  with equal vectors may round to 1); a non-exact cosine that rounds to ≥ 1 goes to the top
  non-exact bin.
* LCH = ln(count + 1) = ``torch.log1p(count)``: the paper writes "logarithm over the count" and
  gives no offset, but ln 0 is −∞ for every empty bin; MatchZoo starts every bin at 1 and takes
  ln (MatchZoo 1.0 took log10(count + 1), the same up to a factor the first layer absorbs).
* Histograms are counts, piecewise constant in the similarities: no gradient reaches the
  embeddings through them (they are computed under ``torch.no_grad``), so the embeddings are
  frozen in effect and ``train_embeddings`` defaults to false. Only ``gating: tv`` can move them.
* Term gating: w_g is one scalar for ``idf`` (initialised to ``gate_init``, 1: at the start the
  gates are a softmax of the IDFs, rarer terms weigh more) and a bias-free Linear(D → 1) with
  PyTorch's initialisation for ``tv`` (as MatchZoo). ``idf`` is a [vocabulary] array given to the
  constructor (``NEEDS_IDF``: training passes ``store.collection_idf``, ln(N / df) of the training
  documents); it is kept in the buffer ``idf`` (saved with the model, so re-ranking uses the
  training IDF). Without it (unit tests, a model built by hand) every IDF is 1: uniform gates.
* Masking as the project's other models: padding is no token; OOV (id 1) matches nothing, so
  OOV document tokens fall in no bin (NH divides by the matchable document tokens), and padding
  and OOV query terms are left out of the gating softmax (their g_i = 0; a query with no
  matchable term scores 0). A score is therefore the same whatever the padding of its batch.
* The matching network's layers keep PyTorch's initialisation (the paper gives none); no dropout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from rankstudy.config import check_int_list, check_ints, is_number
from rankstudy.models.base import Ranker
from rankstudy.nn.embedding import pretrained_embedding
from rankstudy.nn.kernels import cosine_matrix, match_mask, token_masks

HISTOGRAMS = ("ch", "nh", "lch")
GATINGS = ("idf", "tv")


@dataclass
class DRMMConfig:
    bins: int = 30  # bins − 1 over [−1, 1), then the exact-match bin
    histogram: str = "lch"  # "ch" (counts), "nh" (counts / their sum) or "lch" (ln(count + 1))
    hidden_sizes: list[int] = field(default_factory=lambda: [5, 1])  # tanh layers; the last has 1 unit
    gating: str = "idf"  # "idf" (w_g · idf_i) or "tv" (w_g · embedding of term i)
    gate_init: float = 1.0  # initial w_g of IDF gating
    train_embeddings: bool = False  # no gradient reaches them through the histograms (only tv gating)

    def __post_init__(self) -> None:
        check_ints(self, "bins", minimum=2)  # one bin for exact matches
        if self.histogram not in HISTOGRAMS:
            raise ValueError(f"histogram must be one of {', '.join(HISTOGRAMS)}, not {self.histogram!r}")
        if self.gating not in GATINGS:
            raise ValueError(f"gating must be one of {', '.join(GATINGS)}, not {self.gating!r}")
        sizes = self.hidden_sizes
        check_int_list("hidden_sizes", sizes)
        if sizes[-1] != 1:
            raise ValueError(f"the last of hidden_sizes must be 1 (z_i^(L) is a scalar), got {sizes!r}")
        if not is_number(self.gate_init):
            raise ValueError(f"gate_init must be a finite number, got {self.gate_init!r}")


class DRMM(Ranker):
    PARAM_GROUPS = {"embedding.": "embeddings"}
    NEEDS_IDF = True  # training builds it with the collection's IDF (the term gating's input)

    def __init__(self, config: DRMMConfig, embeddings: np.ndarray, idf: np.ndarray | None = None):
        """``embeddings``: [vocabulary, D] matrix (row 0 padding, row 1 OOV); ``idf``: optional
        [vocabulary] IDF of every token id for the term gating (default 1 for every term)."""
        super().__init__()
        self.config = config
        self.embedding = pretrained_embedding(embeddings, config.train_embeddings)
        vocabulary, dim = self.embedding.weight.shape
        values = torch.ones(vocabulary)
        if idf is not None:
            values = torch.as_tensor(np.asarray(idf, dtype=np.float32))
            if values.shape != (vocabulary,):
                raise ValueError(f"idf has shape {tuple(values.shape)}, expected ({vocabulary},)")
        self.register_buffer("idf", values.clone())
        layers: list[nn.Module] = []
        width = config.bins
        for size in config.hidden_sizes:
            layers += [nn.Linear(width, size), nn.Tanh()]
            width = size
        self.matching = nn.Sequential(*layers)
        self.gate = nn.Linear(1 if config.gating == "idf" else dim, 1, bias=False)
        if config.gating == "idf":
            nn.init.constant_(self.gate.weight, config.gate_init)

    def histograms(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        """z_i^(0): the matching histogram of every query term, [B, Lq, bins] (CH, NH or LCH);
        rows of padding and OOV query terms are 0."""
        bins = self.config.bins
        with torch.no_grad():
            _, q_match = token_masks(query)
            _, d_match = token_masks(document)
            weight = match_mask(q_match, d_match)
            similarity = cosine_matrix(self.embedding(query), self.embedding(document))
            index = torch.floor((similarity.clamp(-1.0, 1.0) + 1.0) / 2.0 * (bins - 1)).long().clamp(0, bins - 2)
            index = torch.where(query.unsqueeze(2) == document.unsqueeze(1), bins - 1, index)  # exact matches
            counts = weight.new_zeros(*query.shape, bins).scatter_add_(2, index, weight)
            if self.config.histogram == "nh":
                return counts / counts.sum(2, keepdim=True).clamp(min=1.0)
            if self.config.histogram == "lch":
                return torch.log1p(counts)
            return counts

    def gates(self, query: torch.Tensor) -> torch.Tensor:
        """g_i, [B, Lq]: a softmax over the matchable query terms of w_g · x_i; 0 elsewhere."""
        _, q_match = token_masks(query)
        real = q_match > 0
        if self.config.gating == "idf":
            features = self.idf[query].unsqueeze(-1)
        else:
            features = self.embedding(query)
        logits = self.gate(features).squeeze(-1).masked_fill(~real, float("-inf"))
        # a query without matchable terms: finite logits (no NaN in the backward pass), gates 0
        logits = torch.where(real.any(1, keepdim=True), logits, torch.zeros_like(logits))
        return torch.softmax(logits, dim=1) * q_match

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        terms = self.matching(self.histograms(query, document)).squeeze(-1)  # z_i^(L): [B, Lq]
        return (self.gates(query) * terms).sum(1)
