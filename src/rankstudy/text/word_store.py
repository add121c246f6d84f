"""Word-level token stores: BlingFire words mapped through the study's vocabulary (docs/neural.md)."""

from __future__ import annotations

import os

from rankstudy.store import build_store_with
from rankstudy.text.tokenize import tokenize
from rankstudy.text.vocab import Vocabulary


def build_store(tsv_path: str | os.PathLike, vocab: Vocabulary, out_dir: str | os.PathLike,
                kind: str = "collection", chunk_tokens: int = 1 << 22) -> int:
    """Tokenise and encode every text of ``tsv_path`` into a store at ``out_dir``; returns N.

    At most about ``chunk_tokens`` token ids are buffered before being appended to disk.
    """
    return build_store_with(tsv_path, lambda texts: [vocab.encode(tokenize(text)) for text in texts],
                            out_dir, kind, chunk_tokens)
