"""PACRR (Hui et al., EMNLP 2017) and CO-PACRR (Hui et al., WSDM 2018).

PACRR — equations of the paper and where they are implemented:

    sim_ij = cos(q_i, d_j),  i < l_q, j < l_d                 ``_channels`` (query and document cut /
                                                              zero-padded to l_q, l_d: "firstk")
    C^n = CNN_{n×n}(sim), n_f filters, n = 2..l_g             ``_channels`` (``convolutions``)
    C^{n,1}_ij = max_f C^n_ijf      (max over filters)        ``_channels``
    P^n_i = k-max_j C^{n,1}_ij  (n_s largest per query term,  ``kmax`` ; n = 1 is sim itself
            position-independent)
    idf'_i = softmax_i(idf(q_i))    (optional, ``use_idf``)   ``term_features``
    rel(q, d) = combine([P¹_i; …; P^{l_g}_i; idf'_i]_{i<l_q}) ``dense_scorer`` over the flattened
                                                              query terms (LSTM-free, as matchmaker)

CO-PACRR adds:

    querysim_j = cos(mean_i q_i, mean_{t∈win(j)} d_t)          ``CoPACRR.context_similarity``
    cascade k-max: k-max over the first 25 %, 50 %, 75 %,      ``CoPACRR._pool``
        100 % of l_d, concatenated, plus querysim at the
        positions the k-max selected
    shuffle: query-term rows permuted before combination      ``CoPACRR.term_features``
        (training only)

Following the matchmaker re-implementations used as baselines in the TKL paper (and their
config/train/non-bert-defaults.yaml where the papers leave a choice):

* n-gram positions start at their first token: the matrix is zero-padded right/bottom by n − 1
  before an n×n Conv2d, and k-max values are sorted descending. No ReLU after the convolution
  (``conv_relu: false``); the paper's Keras code has one (``conv_relu: true``).
* Combination: Linear(→100)–ReLU–Linear(100→10)–ReLU–Linear(10→1, no bias), PyTorch default
  initialisation (the authors' Keras code, khui/copacrr, offers an LSTM or, by default, two
  Dense(32) ReLU layers and a Dense(1)).
* CO-PACRR's document context is the mean of the ``context_window`` = 6 tokens starting at j
  (zero-padded at the end); cascade positions [0.25, 0.5, 0.75, 1.0] of l_d; per channel the
  features are [k-max values of all views; the context similarities at their positions].
* matchmaker computed the IDF weighting and the CO-PACRR shuffle but then flattened the
  unweighted, unshuffled tensor, so neither reached the score. The defaults ``use_idf: false``
  and ``shuffle: false`` reproduce what it computed; ``use_idf: true`` concatenates the query
  terms' IDF softmax to each term's features as the paper (not the weighting matchmaker
  attempted) and then needs ``idf`` (a [vocabulary] array, e.g. ln(N / df) of vocab.tsv) in the
  constructor; ``shuffle: true`` permutes each example's query-term rows while training.

Defaults: l_q = ``max_query_length`` 30 (matchmaker; the paper used 16), l_d =
``max_doc_length`` 800 (the paper's firstk; matchmaker's passage default was 200), l_g =
``max_ngram`` 3, n_f = ``filters`` 32, n_s = ``kmax`` 2 (khui/copacrr's default is 3, matchmaker's 5). Longer
queries / documents are cut to their first l_q / l_d tokens, shorter ones padded, so a score
does not depend on batch padding.

Masking as in TK: padding is no token, OOV (id 1) matches nothing — every channel is zero at
padding or OOV positions (an n-gram is masked like the token it starts at), query context
vectors are built from matchable tokens only, and the IDF softmax runs over matchable query
terms (as matchmaker's masked softmax).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rankstudy.config import check_int_list, check_ints
from rankstudy.models.base import Ranker
from rankstudy.models.matchpyramid import dense_scorer
from rankstudy.nn.embedding import pretrained_embedding
from rankstudy.nn.kernels import cosine_matrix, match_mask, token_masks


@dataclass
class PACRRConfig:
    max_query_length: int = 30
    max_doc_length: int = 800
    max_ngram: int = 3
    filters: int = 32
    kmax: int = 2
    dense_dims: list[int] = field(default_factory=lambda: [100, 10])
    conv_relu: bool = False
    use_idf: bool = False
    train_embeddings: bool = True

    def __post_init__(self) -> None:
        check_ints(self, "max_query_length", "max_doc_length", "max_ngram", "filters", "kmax")
        check_int_list("dense_dims", self.dense_dims)
        if self.kmax > self.max_doc_length:
            raise ValueError(f"kmax ({self.kmax}) exceeds max_doc_length ({self.max_doc_length})")

    def views(self) -> list[int]:
        """Document prefixes the k-max pooling looks at: PACRR pools over the whole document."""
        return [self.max_doc_length]


@dataclass
class CoPACRRConfig(PACRRConfig):
    context_window: int = 6
    cascade: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0])
    shuffle: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ints(self, "context_window")
        if not isinstance(self.cascade, (list, tuple)) or not self.cascade:
            raise ValueError(f"cascade must be a non-empty list of fractions in (0, 1], got {self.cascade!r}")
        for fraction in self.cascade:
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
                raise ValueError(f"cascade entries must be fractions in (0, 1], got {fraction!r}")
        if min(self.views()) < self.kmax:
            raise ValueError(f"the shortest cascade view ({min(self.views())} tokens) is shorter than "
                             f"kmax ({self.kmax}); raise max_doc_length or the smallest cascade fraction")

    def views(self) -> list[int]:
        return [int(self.max_doc_length * fraction) for fraction in self.cascade]


def fit_length(ids: torch.Tensor, length: int) -> torch.Tensor:
    """Cut [B, L] ids to their first ``length`` tokens or right-pad them with 0 to ``length``."""
    ids = ids[:, :length]
    return F.pad(ids, (0, length - ids.shape[1]), value=0)


class PACRR(Ranker):
    PARAM_GROUPS = {"embedding.": "embeddings"}

    def __init__(self, config: PACRRConfig, embeddings: np.ndarray, idf: np.ndarray | None = None):
        super().__init__()
        self.config = config
        self.embedding = pretrained_embedding(embeddings, config.train_embeddings)
        self.convolutions = nn.ModuleList(
            nn.Sequential(nn.ConstantPad2d((0, n - 1, 0, n - 1), 0.0), nn.Conv2d(1, config.filters, kernel_size=n),
                          *([nn.ReLU()] if config.conv_relu else []))
            for n in range(2, config.max_ngram + 1)
        )
        if config.use_idf:
            if idf is None:
                raise ValueError("use_idf: true needs the vocabulary's idf values (constructor argument idf)")
            idf = np.asarray(idf, dtype=np.float32)
            if idf.shape != (self.embedding.num_embeddings,):
                raise ValueError(f"idf needs one value per vocabulary entry ({self.embedding.num_embeddings}), "
                                 f"got shape {idf.shape}")
            self.register_buffer("idf", torch.from_numpy(idf.copy()))
        per_term = self.features_per_channel() * config.max_ngram + int(config.use_idf)
        self.dense = dense_scorer(config.max_query_length * per_term, config.dense_dims)

    def features_per_channel(self) -> int:
        return self.config.kmax * len(self.config.views())

    def _channels(self, query: torch.Tensor, document: torch.Tensor):
        """Fixed-length ids, the query match mask and the channels [sim, C^{2,1}, …, C^{l_g,1}],
        each [B, l_q, l_d]."""
        query = fit_length(query, self.config.max_query_length)
        document = fit_length(document, self.config.max_doc_length)
        _, q_match = token_masks(query)
        _, d_match = token_masks(document)
        mask = match_mask(q_match, d_match)
        sim = cosine_matrix(self.embedding(query), self.embedding(document)) * mask
        # max(1).values, not amax(1): the same values, and a backward pass that scatters into one
        # filter instead of comparing every filter with the max (3x faster training step)
        channels = [sim] + [conv(sim.unsqueeze(1)).max(1).values * mask for conv in self.convolutions]
        return query, document, q_match, channels

    @staticmethod
    def kmax(channel: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The k largest values per query term (descending) and their document positions: [B, l_q, k].
        Ties go to the earlier position (a stable sort): ``torch.topk`` breaks them differently on the CPU and
        on CUDA, and CO-PACRR reads the context at the chosen positions, so scores would depend on the device."""
        values, positions = torch.sort(channel, dim=2, descending=True, stable=True)
        return values[:, :, :k], positions[:, :, :k]

    def _context(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor | None:
        return None  # PACRR has no context similarity

    def _pool(self, channel: torch.Tensor, context: torch.Tensor | None, q_match: torch.Tensor) -> torch.Tensor:
        return self.kmax(channel, self.config.kmax)[0]

    def term_features(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        """Per-query-term features [B, l_q, (k · views) · l_g (+1 with IDF)] fed to the combination."""
        query, document, q_match, channels = self._channels(query, document)
        context = self._context(query, document)
        features = [self._pool(channel, context, q_match) for channel in channels]
        if self.config.use_idf:
            idf = self.idf[query].masked_fill(q_match == 0, float("-inf"))
            weights = torch.softmax(idf, dim=1).nan_to_num(0.0)  # a query without matchable terms -> 0
            features.append(weights.unsqueeze(-1))
        return torch.cat(features, dim=2)

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self.dense(self.term_features(query, document).flatten(1)).squeeze(1)


class CoPACRR(PACRR):
    def __init__(self, config: CoPACRRConfig, embeddings: np.ndarray, idf: np.ndarray | None = None):
        super().__init__(config, embeddings, idf)

    def features_per_channel(self) -> int:
        return 2 * super().features_per_channel()  # k-max values and their context similarities

    def _context(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self.context_similarity(query, document)

    def context_similarity(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        """querysim_j = cos(Σ_i q_i, mean_{t=j}^{j+w−1} d_t) over matchable tokens; 0 at unmatchable j:
        [B, L_d]. The query side sums instead of averaging: the cosine does not see the scale."""
        _, q_match = token_masks(query)
        _, d_match = token_masks(document)
        q_context = (self.embedding(query) * q_match.unsqueeze(-1)).sum(1, keepdim=True)  # [B, 1, D]
        d_embedded = (self.embedding(document) * d_match.unsqueeze(-1)).transpose(1, 2)  # [B, D, Ld]
        window = self.config.context_window
        d_context = F.avg_pool1d(F.pad(d_embedded, (0, window - 1)), kernel_size=window, stride=1)
        return cosine_matrix(q_context, d_context.transpose(1, 2)).squeeze(1) * d_match

    def _pool(self, channel: torch.Tensor, context: torch.Tensor | None, q_match: torch.Tensor) -> torch.Tensor:
        context = context.unsqueeze(1).expand_as(channel)
        values, contexts = [], []
        for view in self.config.views():
            top, positions = self.kmax(channel[:, :, :view], self.config.kmax)
            values.append(top)
            contexts.append(context.gather(2, positions) * q_match.unsqueeze(-1))
        return torch.cat(values + contexts, dim=2)

    def term_features(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        features = super().term_features(query, document)
        if self.training and self.config.shuffle:
            order = torch.argsort(torch.rand(features.shape[:2], device=features.device), dim=1)
            features = features.gather(1, order.unsqueeze(-1).expand_as(features))
        return features
