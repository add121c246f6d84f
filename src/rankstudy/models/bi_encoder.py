"""Bi-encoder — a pre-trained sentence encoder's cosine of query and passage, fine-tuned as a re-ranker
(Reimers & Gurevych 2019, Sentence-BERT; sentence-transformers/all-MiniLM-L6-v2 is trained this way).

Equations and where they are implemented:

    v(x) = mean_{t : mask_t = 1} BERT([CLS] x [SEP])_t     ``embed``: ``nn.pretrained.single_inputs``; the mean
                                                          over every real position, [CLS] and [SEP] included
                                                          (sentence-transformers' Pooling); or h_[CLS]
    s(q, d) = scale · cos(v(q), v(d))                     ``forward``

Deliberate choices:

* Untrained it is its encoder's zero-shot dense re-scorer: all-MiniLM-L6-v2 as sentence-transformers uses it
  (mean pooling, unit length), the first-stage system of model ``dense`` with ``rescore``
  (config/trec-dl-passages.yaml) up to the token limits. Fine-tuning starts from there, not from a random
  head as BERT[CLS] does: on a few dozen training queries (query folds of TREC DL) the cross-encoder has to
  learn query-passage matching from scratch, the bi-encoder only to adjust it.
* ``scale`` (default 20, sentence-transformers' MultipleNegativesRankingLoss) turns cosines in [-1, 1] into
  scores on which the study's losses work: the pairwise margin of 1 asks a positive to beat a negative by 0.05
  in cosine.
* Query and document are encoded separately (no token types, no cross-attention), each truncated to
  ``max_length`` (256: the model's ``max_seq_length``). The encoder is in optimiser group ``encoder``; the model
  has no other parameters. It takes (and ignores) ``embeddings``, as every study model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rankstudy.models.base import EncoderRanker
from rankstudy.nn.pretrained import attention_dropout_override, drop_pooler, single_inputs

POOLINGS = ("mean", "cls")


@dataclass
class BiEncoderConfig:
    encoder: str = "minilm"  # "minilm" or a local Hugging Face model directory
    encoder_layers: int | None = None  # keep the encoder's first N layers (None = all)
    train_embeddings: bool = True  # False: the encoder's word embeddings stay as loaded
    attention_dropout: float | None = None  # None: the encoder's own; 0 keeps CPU training on the fused kernel
    pooling: str = "mean"  # mean over real positions (sentence-transformers) or h_[CLS]
    scale: float = 20.0  # score = scale * cosine
    max_length: int = 256  # [CLS] x [SEP] at most this long, per text

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if self.scale <= 0 or self.max_length < 2:
            raise ValueError(f"scale must be > 0 and max_length >= 2, got {self.scale} and {self.max_length}")
        if self.attention_dropout is not None and not 0.0 <= self.attention_dropout < 1.0:
            raise ValueError(f"attention_dropout must be in [0, 1), got {self.attention_dropout}")
        if self.encoder_layers is not None and self.encoder_layers < 1:
            raise ValueError(f"encoder_layers must be >= 1 or null, got {self.encoder_layers}")


class BiEncoder(EncoderRanker):
    def __init__(self, config: BiEncoderConfig, embeddings=None):
        super().__init__()
        self.config = config
        self._load_encoder(config, **attention_dropout_override(config.attention_dropout))
        drop_pooler(self.encoder)  # unused: no parameter without a gradient reaches the optimiser

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """v(x) of padded WordPiece ids [B, L]: unit vectors [B, hidden]."""
        input_ids, mask = single_inputs(ids, self.cls_id, self.sep_id, self.config.max_length)
        hidden = self.encoder(input_ids=input_ids, attention_mask=mask).last_hidden_state
        if self.config.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(2).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1)
        return F.normalize(pooled, dim=1)

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self.config.scale * (self.embed(query) * self.embed(document)).sum(1)
