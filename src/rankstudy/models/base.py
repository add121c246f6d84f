"""The base of every re-ranker and the capabilities it declares (docs/neural.md, "Models")."""

from __future__ import annotations

from typing import ClassVar, Mapping

from torch import nn


class Ranker(nn.Module):
    """``forward(query ids [B, Lq], document ids [B, Ld]) -> scores [B]``; id 0 is padding.

    Capabilities, class attributes that training and scoring read (a model overrides what applies):

    - ``PARAM_GROUPS``: parameter-name prefix -> the ``training.learning_rates`` group of those
      parameters (e.g. ``{"encoder.": "encoder"}``); the rest are in group ``default``.
    - ``NEEDS_IDF``: ``build_model`` passes ``idf``, ln(N / df) per token id over the training documents.
    - ``CLS_HEAD``: ``self.score`` reads h_[CLS], so ``export-encoder`` saves it with the encoder and a
      warm-started model first scores as this one.
    - ``TOKENIZER``: the ids the model reads: ``"word"`` (the study's vocabulary, with its word vectors)
      or ``"wordpiece"`` (its encoder's own ids, ``rankstudy.text.wordpiece``); training and scoring
      check the token stores against it (``experiment.check_token_stores``).
    """

    PARAM_GROUPS: ClassVar[Mapping[str, str]] = {}
    NEEDS_IDF: ClassVar[bool] = False
    CLS_HEAD: ClassVar[bool] = False
    TOKENIZER: ClassVar[str] = "word"
