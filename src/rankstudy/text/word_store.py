"""Word-level token stores: BlingFire words mapped through the study's vocabulary (docs/neural.md)."""

from __future__ import annotations

import logging
import os

import numpy as np

from rankstudy.errors import StudyError
from rankstudy.store import build_store_with
from rankstudy.text.tokenize import tokenize
from rankstudy.text.vocab import OOV, Vocabulary

log = logging.getLogger(__name__)


def build_store(tsv_path: str | os.PathLike, vocab: Vocabulary, out_dir: str | os.PathLike,
                kind: str = "collection", chunk_tokens: int = 1 << 22, min_coverage: float = 0.0) -> int:
    """Tokenise and encode every text of ``tsv_path`` into a store at ``out_dir``; returns N.

    At most about ``chunk_tokens`` token ids are buffered before being appended to disk. The share of
    tokens the vocabulary knows is logged; under ``min_coverage`` (a vocabulary built on another
    collection, issue 43) the store is not written and the error says how to build one for this text.
    """
    def check_coverage(tokens: np.ndarray) -> None:
        # counted in chunks: the memory-mapped ids of a large collection need not fit in memory
        unknown = sum(np.count_nonzero(tokens[start:start + chunk_tokens] == OOV)
                      for start in range(0, len(tokens), chunk_tokens))
        known = 1.0 - unknown / len(tokens) if len(tokens) else 1.0
        log.info("%s: the vocabulary knows %.1f%% of its %d tokens", tsv_path, 100 * known, len(tokens))
        if known < min_coverage:
            raise StudyError(
                f"{tsv_path}: the vocabulary knows {known:.1%} of its {len(tokens)} tokens, under the "
                f"{min_coverage:.0%} of neural.min_vocabulary_coverage: it was built on another collection. Give "
                "this dataset its own vocabulary and word vectors (a neural.embeddings entry whose dataset is this "
                "one) and train a model on them, or lower the setting")

    return build_store_with(tsv_path, lambda texts: [vocab.encode(tokenize(text)) for text in texts],
                            out_dir, kind, chunk_tokens, check=check_coverage)

