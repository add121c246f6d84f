"""Passage-level BERT re-rankers for long documents: FirstP, MaxP (Dai & Callan, SIGIR 2019, "Deeper
text understanding for IR with contextual neural language modeling") and PARADE-Max (Li et al.
2020, "PARADE: Passage representation aggregation for document reranking"); IDCM, which scores
only passages chosen by a cheap selector, is in ``models.idcm`` on the same machinery. They are
the passage baselines of Socialformer's Table 1 (Zhou et al., WWW 2022).

Equations and where they are implemented:

    d → passages p_1 … p_P: p_k = d[k·s, k·s + L)      ``split_passages``: L = ``passage_length``,
        (a passage is kept if it reaches past the      s = ``passage_stride``, P ≤ ``max_passages``;
        previous one; p_1 always, even if empty)       tokens past passage P are dropped
    x_k = [CLS] q [SEP] p_k [SEP]                      ``PassageRanker.encode_passages``
    h_k = BERT(x_k)_[CLS]                              (``nn.pretrained.pair_inputs``; one encoder
                                                       call for all passages of the batch)
    FirstP:  s = w · h_1 + b                            ``FirstP.forward`` (passage p_1 only)
    MaxP:    s = max_k (w · h_k + b)                    ``MaxP.forward``
    PARADE-Max: s = w · (max_k h_k) + b  (element-wise)  ``Parade.forward``

Paper values: Dai & Callan cut documents into 150-word passages with stride 75 (FirstP: the first
one); PARADE (and its FirstP/MaxP re-implementations, which Socialformer's table follows) uses
225-token passages with stride 200 (25 tokens overlap), at most 16 passages. The defaults here are
PARADE's; the CPU config may shorten the passages (``passage_length`` ≤ the encoder's positions
minus the query and 3 special tokens).

Deliberate choices:

* Inputs, encoder, head and dropout as ``models.bert_cat`` (BERT[CLS]): the study's padded
  WordPiece ids without special tokens, h_[CLS] of the last layer (pooler removed), a
  Linear(hidden → 1) head initialised N(0, initializer_range) or from a warm start's exported
  head, dropout on the vector that the head scores (h_k for FirstP/MaxP, the pooled vector for
  PARADE). ``encoder_layers`` keeps the first N layers of the pre-trained encoder (CPU-sized runs).
* Padding may sit anywhere in a row: the real tokens are first moved to the front (order kept),
  so passages are cut from real tokens only and padding a batch further never changes a score.
* All passages of all documents of a batch are packed into one [N, T] encoder batch: passages
  that would be all padding (past a document's end) are never encoded, so the cost follows the
  documents' real lengths; T is the longest packed pair, not L + query + 3.
* A passage is cut at every s tokens while it reaches past the previous passage's end; so a
  document of n tokens has 1 + ⌈max(n − L, 0) / s⌉ passages (capped at ``max_passages``), the last
  one possibly shorter than L. An empty document has one (empty) passage: [CLS] q [SEP] [SEP].
* ``attention_dropout``: BERT fine-tunes with dropout 0.1 on the attention probabilities (the
  default, None, keeps the encoder's setting). On CPU, PyTorch's fused attention kernel has no
  dropout: with dropout the attention falls back to the unfused path, which stores the
  [passages, heads, T, T] probabilities and dropout masks (measured, MaxP with two MiniLM layers,
  a training step on 64 documents of 1,024 tokens, 2 threads: 10.5 GB peak and 56 CPU-seconds
  with 0.1, 5.6 GB and 32 CPU-seconds with 0). CPU configs set 0.
* PARADE-Max only: PARADE's paper also aggregates with attention, CNN and a transformer; the
  Socialformer comparison uses max pooling of the passages' [CLS] vectors, as here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rankstudy.config import ConfigError
from rankstudy.models.base import EncoderRanker
from rankstudy.nn.pretrained import PAD_ID, attention_dropout_override, check_encoder_options, drop_pooler, score_head
from rankstudy.precision import in_fp32


@dataclass
class FirstPConfig:
    encoder: str = "minilm"  # "minilm" or a local Hugging Face model directory (e.g. bert-base-uncased)
    encoder_layers: int | None = None  # keep the encoder's first N layers (None = all)
    train_embeddings: bool = True  # False: the encoder's word embeddings stay as loaded (e.g. word2vec rows)
    dropout: float = 0.1  # on the scored vector, training only
    # dropout on the encoder's attention probabilities (None: the encoder's own, 0.1 for BERT);
    # 0 keeps CPU training on PyTorch's fused attention kernel (see the module docstring)
    attention_dropout: float | None = None
    passage_length: int = 225  # document tokens per passage (PARADE: 225)

    def __post_init__(self) -> None:
        check_encoder_options(self)
        if self.passage_length < 1:
            raise ValueError(f"passage_length must be >= 1, got {self.passage_length}")


@dataclass
class PassageConfig(FirstPConfig):
    passage_stride: int = 200  # tokens between passage starts (PARADE: 200)
    max_passages: int = 16  # passages per document at most (PARADE: 16); later tokens are dropped

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.passage_stride < 1:
            raise ValueError(f"passage_stride must be >= 1, got {self.passage_stride}")
        if self.max_passages < 1:
            raise ValueError(f"max_passages must be >= 1, got {self.max_passages}")


def compact(ids: torch.Tensor) -> torch.Tensor:
    """[B, L] ids with each row's real (non-padding) tokens moved to the front, in order."""
    order = torch.argsort((ids == PAD_ID).to(torch.int8), dim=1, stable=True)
    return ids.gather(1, order)


def passage_counts(lengths: torch.Tensor, length: int, stride: int, max_passages: int) -> torch.Tensor:
    """Passages per document of ``lengths`` real tokens: 1 + ⌈max(n − L, 0) / s⌉, at most ``max_passages``."""
    extra = torch.div((lengths - length).clamp(min=0) + stride - 1, stride, rounding_mode="floor")
    return (1 + extra).clamp(max=max_passages)


def split_passages(document: torch.Tensor, length: int, stride: int,
                   max_passages: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut padded documents [B, Ld] into passages: ``(passages [B, P, length], real [B, P] bool)``.

    Passage k holds real tokens k·stride … k·stride + length − 1 (padding where the document is
    shorter); ``real`` marks the passages the document has (``passage_counts``); P is the largest
    count of the batch.
    """
    document = compact(document)
    counts = passage_counts((document != PAD_ID).sum(1), length, stride, max_passages)
    passages = int(counts.max()) if document.shape[0] else 1
    width = (passages - 1) * stride + length
    if document.shape[1] < width:
        document = nn.functional.pad(document, (0, width - document.shape[1]), value=PAD_ID)
    chunks = document[:, :width].unfold(1, length, stride)
    real = torch.arange(passages, device=document.device).unsqueeze(0) < counts.unsqueeze(1)
    return chunks, real


class PassageRanker(EncoderRanker):
    """The pre-trained encoder over [CLS] q [SEP] passage [SEP] pairs; subclasses pool and score."""

    PARAM_GROUPS = {"encoder.": "encoder"}
    CLS_HEAD = True  # ``score`` reads h_[CLS]: export_encoder saves it with the encoder
    TOKENIZER = "wordpiece"  # token stores of the encoder's WordPiece ids (rankstudy.text.wordpiece)
    NAME = "passage model"  # config section name in error messages

    def __init__(self, config: FirstPConfig, embeddings=None):
        super().__init__()
        self.config = config
        self._load_encoder(config, **attention_dropout_override(config.attention_dropout))
        drop_pooler(self.encoder)
        self.max_length = self.encoder.config.max_position_embeddings
        if config.passage_length + 4 > self.max_length:
            raise ConfigError(f"models.{self.NAME}.passage_length {config.passage_length} leaves no room for a query "
                              f"in encoder {config.encoder!r}'s {self.max_length} positions")
        self.dropout = nn.Dropout(config.dropout)
        self.score = score_head(self.encoder, config.encoder)

    def passages(self, document: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``split_passages`` with this model's settings."""
        config = self.config
        return split_passages(document, config.passage_length, config.passage_stride, config.max_passages)

    def encode_pairs(self, query: torch.Tensor, passages: torch.Tensor) -> torch.Tensor:
        """h_[CLS] [N, H] of [CLS] query [SEP] passage [SEP] for N (query, passage) rows."""
        return self.encoder(**self.encoder_inputs(query, passages, self.max_length)).last_hidden_state[:, 0]

    def encode_passages(self, query: torch.Tensor, passages: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
        """h_[CLS] of the ``selected`` [B, P] passages [B, P, L], packed into one encoder call: [B, P, H],
        zeros where a passage is not selected."""
        rows, columns = selected.nonzero(as_tuple=True)
        hidden = self.encode_pairs(query[rows], passages[rows, columns])
        out = hidden.new_zeros(*selected.shape, hidden.shape[-1])
        out[rows, columns] = hidden
        return out


class FirstP(PassageRanker):
    """s = w · h_[CLS](q, first passage) + b."""

    NAME = "firstp"

    def passages(self, document: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The first passage only: [B, 1, L] and an all-true mask."""
        return split_passages(document, self.config.passage_length, self.config.passage_length, 1)

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        passages, _ = self.passages(document)
        hidden = self.encode_pairs(query, passages[:, 0])
        return in_fp32(self.score)(self.dropout(hidden)).squeeze(1)


class MaxP(PassageRanker):
    """s = max_k (w · h_k + b) over the document's passages."""

    NAME = "maxp"

    def passage_scores(self, query: torch.Tensor, document: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-passage scores [B, P] (−inf where the document has no passage k) and the real mask."""
        passages, real = self.passages(document)
        hidden = self.encode_passages(query, passages, real)
        scores = in_fp32(self.score)(self.dropout(hidden)).squeeze(-1)
        return scores.masked_fill(~real, float("-inf")), real

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self.passage_scores(query, document)[0].max(1).values


class Parade(PassageRanker):
    """PARADE-Max: s = w · max_k h_k + b, the maximum taken per dimension over the passages."""

    NAME = "parade"

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        passages, real = self.passages(document)
        hidden = self.encode_passages(query, passages, real)
        pooled = hidden.masked_fill(~real.unsqueeze(-1), float("-inf")).max(1).values
        return in_fp32(self.score)(self.dropout(pooled)).squeeze(1)
