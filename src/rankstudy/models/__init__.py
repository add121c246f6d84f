"""Published ranking models, one file each; ``MODELS`` maps a config name to (class, config)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from rankstudy.config import from_dict
from rankstudy.models.base import Ranker
from rankstudy.models.bert_cat import BertCat, BertCatConfig
from rankstudy.models.bi_encoder import BiEncoder, BiEncoderConfig
from rankstudy.models.conv_knrm import ConvKNRM, ConvKNRMConfig
from rankstudy.models.drmm import DRMM, DRMMConfig
from rankstudy.models.idcm import IDCM, IDCMConfig
from rankstudy.models.knrm import KNRM, KNRMConfig
from rankstudy.models.matchpyramid import MatchPyramid, MatchPyramidConfig
from rankstudy.models.pacrr import PACRR, CoPACRR, CoPACRRConfig, PACRRConfig
from rankstudy.models.passage_bert import FirstP, FirstPConfig, MaxP, Parade, PassageConfig
from rankstudy.models.socialformer.model import Socialformer, SocialformerConfig
from rankstudy.models.sparse_bert import SparseBert, SparseBertConfig
from rankstudy.models.tk import TK, TKConfig
from rankstudy.models.tkl import TKL, TKLConfig

MODELS: dict[str, tuple[type[Ranker], type]] = {
    "tk": (TK, TKConfig),
    "tkl": (TKL, TKLConfig),
    "knrm": (KNRM, KNRMConfig),
    "conv_knrm": (ConvKNRM, ConvKNRMConfig),
    "matchpyramid": (MatchPyramid, MatchPyramidConfig),
    "drmm": (DRMM, DRMMConfig),
    "pacrr": (PACRR, PACRRConfig),
    "co_pacrr": (CoPACRR, CoPACRRConfig),
    "bert_cat": (BertCat, BertCatConfig),
    "bi_encoder": (BiEncoder, BiEncoderConfig),
    "firstp": (FirstP, FirstPConfig),
    "maxp": (MaxP, PassageConfig),
    "idcm": (IDCM, IDCMConfig),
    "parade": (Parade, PassageConfig),
    "sparse_bert": (SparseBert, SparseBertConfig),
    "socialformer": (Socialformer, SocialformerConfig),
}


def build_model(name: str, settings: Mapping[str, Any], embeddings: np.ndarray,
                idf: np.ndarray | None = None) -> Ranker:
    """``idf`` (per token id) goes to models that declare ``NEEDS_IDF``; others ignore it."""
    from rankstudy.config import ConfigError

    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
    model_class, config_class = MODELS[name]
    extra = {"idf": idf} if model_class.NEEDS_IDF else {}
    return model_class(from_dict(config_class, settings, f"models.{name}"), embeddings, **extra)
