"""BERT[CLS] — the concatenated cross-encoder (Nogueira & Cho 2019, "Passage re-ranking with
BERT"; the BERT[CLS] / BERT_Cat baseline of the TK and TKL papers).

Equations and where they are implemented:

    x = [CLS] q_1 … q_n [SEP] d_1 … d_m [SEP]        ``nn.pretrained.pair_inputs``: segment 0 for
                                                     [CLS] q [SEP], segment 1 for d [SEP];
                                                     n + m + 3 ≤ ``max_length`` (512)
    h = BERT(x)                                      the pre-trained encoder (``config.encoder``)
    s(q, d) = w · dropout(h_[CLS]) + b               ``forward``: Linear(hidden → 1)

Deliberate choices:

* Inputs are the study's padded WordPiece id tensors (``rankstudy.text.wordpiece`` stores;
  ``TOKENIZER``), without special tokens; the model adds [CLS]/[SEP], drops the padding
  (wherever it is) and truncates the *document* so the pair fits in ``max_length`` (the query
  only if it alone is longer than ``max_length − 3``). Rows are as long as their real tokens
  need, so padding a batch more never changes a score.
* h_[CLS] is the last layer's [CLS] vector, as the TKL paper's BERT_Cat code
  (``bert(…)[0][:, 0, :]``); BERT's pooler (dense + tanh, trained for next-sentence prediction)
  is removed, so no unused parameters reach the optimiser. Nogueira & Cho's original used the
  pooled output with dropout 0.1 and a 2-class softmax; a single score trained with the study's
  ranking losses is the same ranking function up to the loss. ``dropout`` (default 0.1, BERT's
  classifier dropout) is applied to h_[CLS] in training only; the encoder keeps its own dropout
  settings from its ``config.json``.
* The head is initialised N(0, initializer_range) with bias 0, as BERT's classification heads —
  unless the encoder directory carries a fine-tuned head (an exported warm start,
  ``nn.pretrained.score_head``), which it then starts from.
* ``train_embeddings: false`` keeps the encoder's word embeddings as loaded (the study encoder's
  word2vec rows, ``text.study_encoder``); they are then left out of the optimiser.
* ``PARAM_GROUPS`` puts the encoder in optimiser group ``encoder`` (fine-tuning learning rate,
  3e-6 … 3e-5) and the head in ``default`` (e.g. 1e-3).
* The constructor takes (and ignores) ``embeddings``: the study builds every model as
  ``Model(config, embeddings)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from rankstudy.config import ConfigError
from rankstudy.models.base import EncoderRanker
from rankstudy.nn.pretrained import attention_dropout_override, check_encoder_options, drop_pooler, score_head
from rankstudy.precision import in_fp32


@dataclass
class BertCatConfig:
    encoder: str = "minilm"  # "minilm" or a local Hugging Face model directory (e.g. bert-base-uncased)
    encoder_layers: int | None = None  # keep the encoder's first N layers (None = all)
    train_embeddings: bool = True  # False: the encoder's word embeddings stay as loaded (e.g. word2vec rows)
    dropout: float = 0.1  # on h_[CLS] before the scoring layer
    # dropout on the encoder's attention probabilities (None: the encoder's own, 0.1 for BERT);
    # 0 keeps CPU training on PyTorch's fused attention kernel
    attention_dropout: float | None = None
    max_length: int = 512  # [CLS] q [SEP] d [SEP] at most this long (≤ the encoder's positions)

    def __post_init__(self) -> None:
        check_encoder_options(self)
        if self.max_length < 3:
            raise ValueError(f"max_length must be >= 3, got {self.max_length}")


class BertCat(EncoderRanker):
    CLS_HEAD = True  # ``score`` reads h_[CLS]: export_encoder saves it with the encoder

    def __init__(self, config: BertCatConfig, embeddings=None):
        super().__init__()
        self.config = config
        self._load_encoder(config, **attention_dropout_override(config.attention_dropout))
        drop_pooler(self.encoder)
        positions = getattr(self.encoder.config, "max_position_embeddings", None)
        if positions is not None and config.max_length > positions:
            raise ConfigError(f"models.bert_cat.max_length {config.max_length} exceeds encoder {config.encoder!r}'s "
                              f"{positions} positions")
        self.dropout = nn.Dropout(config.dropout)
        self.score = score_head(self.encoder, config.encoder)

    def inputs(self, query: torch.Tensor, document: torch.Tensor) -> dict[str, torch.Tensor]:
        """The encoder's keyword inputs for a padded batch (``nn.pretrained.pair_inputs``)."""
        return self.encoder_inputs(query, document, self.config.max_length)

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(**self.inputs(query, document)).last_hidden_state[:, 0]
        return in_fp32(self.score)(self.dropout(hidden)).squeeze(1)
