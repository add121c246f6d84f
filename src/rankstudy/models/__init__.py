"""Published ranking models, one file each; ``MODELS`` maps a config name to (class, config)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from torch import nn

from rankstudy.config import from_dict
from rankstudy.models.bert_cat import BertCat, BertCatConfig
from rankstudy.models.conv_knrm import ConvKNRM, ConvKNRMConfig
from rankstudy.models.knrm import KNRM, KNRMConfig
from rankstudy.models.matchpyramid import MatchPyramid, MatchPyramidConfig
from rankstudy.models.pacrr import PACRR, CoPACRR, CoPACRRConfig, PACRRConfig
from rankstudy.models.tk import TK, TKConfig
from rankstudy.models.tkl import TKL, TKLConfig

MODELS: dict[str, tuple[type[nn.Module], type]] = {
    "tk": (TK, TKConfig),
    "tkl": (TKL, TKLConfig),
    "knrm": (KNRM, KNRMConfig),
    "conv_knrm": (ConvKNRM, ConvKNRMConfig),
    "matchpyramid": (MatchPyramid, MatchPyramidConfig),
    "pacrr": (PACRR, PACRRConfig),
    "co_pacrr": (CoPACRR, CoPACRRConfig),
    "bert_cat": (BertCat, BertCatConfig),
}


def build_model(name: str, settings: Mapping[str, Any], embeddings: np.ndarray) -> nn.Module:
    from rankstudy.config import ConfigError

    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
    model_class, config_class = MODELS[name]
    return model_class(from_dict(config_class, settings, f"models.{name}"), embeddings)
