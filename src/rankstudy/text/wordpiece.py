"""WordPiece token stores for the BERT-based re-rankers.

Same on-disk format as the vocabulary stores (``rankstudy.store``; ``TokenStore.batch`` pads
with 0), but the ids are the pre-trained encoder's WordPiece ids, without special tokens,
exactly as ``tokenizer(text, add_special_tokens=False, split_special_tokens=True)`` gives them
(the tokenizer's own normalisation: lower-casing and accent stripping for uncased BERT).
``split_special_tokens``: a literal "[SEP]" or "[PAD]" in a text is text, not markup, so a
store never holds [PAD] = 0 (padding) or a stray [CLS]/[SEP] inside a text.

Models add [CLS]/[SEP] themselves (``rankstudy.nn.pretrained.pair_inputs``). The stores keep
every text whole unless ``max_tokens`` is given (models truncate when batching), so long-document
models can use the same stores. ``store.json`` records the tokenizer (encoder name, vocabulary
size and a fingerprint of vocabulary + normalisation); ``check_wordpiece_store`` compares it
with a model's encoder, since encoders with the same vocabulary (bert-base-uncased, MiniLM)
share stores.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from rankstudy.errors import StudyError
from rankstudy.nn.pretrained import load_tokenizer, special_ids
from rankstudy.store import EncodeBatch, build_store_with

TOKENIZER = "wordpiece"


def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 of the tokenizer's normaliser, pre-tokeniser and WordPiece model (vocabulary)."""
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    relevant = {key: spec.get(key) for key in ("normalizer", "pre_tokenizer", "model")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode("utf-8")).hexdigest()


def wordpiece_encoder(tokenizer, max_tokens: int | None = None) -> EncodeBatch:
    """``encode(texts) -> [int32 ids]`` with the fast tokenizer's batch call (first ``max_tokens`` kept)."""
    special_ids(tokenizer)  # the stores' padding must be the tokenizer's [PAD]
    if max_tokens is not None and max_tokens < 1:
        raise StudyError(f"max_tokens must be >= 1 or None, got {max_tokens}")

    def encode(texts: list[str]) -> list[np.ndarray]:
        encoded = tokenizer(texts, add_special_tokens=False, split_special_tokens=True,
                            truncation=max_tokens is not None, max_length=max_tokens,
                            return_attention_mask=False, return_token_type_ids=False, verbose=False)
        return [np.asarray(ids, dtype=np.int32) for ids in encoded["input_ids"]]

    return encode


def store_meta(encoder: str, tokenizer, max_tokens: int | None = None) -> dict:
    return {"tokenizer": TOKENIZER, "encoder": str(encoder), "vocab_size": len(tokenizer),
            "fingerprint": tokenizer_fingerprint(tokenizer), "max_tokens": max_tokens}


def build_wordpiece_store(tsv_path: str | os.PathLike, encoder: str, out_dir: str | os.PathLike,
                          kind: str = "collection", max_tokens: int | None = None,
                          chunk_tokens: int = 1 << 22, batch_texts: int = 1024) -> int:
    """Store the WordPiece ids of every text of ``tsv_path`` (``id<TAB>text``) at ``out_dir``; returns N.

    ``encoder``: ``"minilm"`` or a local model directory (``rankstudy.nn.pretrained``). Streams
    the file ``batch_texts`` texts at a time; ``kind``: ``collection`` or ``queries``.
    """
    tokenizer = load_tokenizer(encoder)
    return build_store_with(tsv_path, wordpiece_encoder(tokenizer, max_tokens), out_dir, kind,
                            chunk_tokens=chunk_tokens, batch_texts=batch_texts,
                            meta=store_meta(encoder, tokenizer, max_tokens))


def read_store_meta(path: str | os.PathLike) -> dict | None:
    """A store's ``store.json`` (None for a vocabulary store, which has none)."""
    meta_path = Path(path) / "store.json"
    if not meta_path.is_file():
        return None
    try:
        return json.loads(meta_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise StudyError(f"{meta_path}: invalid JSON ({error})") from None


def check_wordpiece_store(path: str | os.PathLike, encoder: str) -> None:
    """Raise StudyError unless the store at ``path`` holds WordPiece ids of ``encoder``'s tokenizer."""
    meta = read_store_meta(path)
    if meta is None or meta.get("tokenizer") != TOKENIZER:
        raise StudyError(f"{path}: not a WordPiece token store (no store.json with tokenizer {TOKENIZER!r}); "
                         f"build it with rankstudy.text.wordpiece.build_wordpiece_store")
    fingerprint = tokenizer_fingerprint(load_tokenizer(encoder))
    if meta.get("fingerprint") != fingerprint:
        raise StudyError(f"{path}: WordPiece ids of encoder {meta.get('encoder')!r}, whose tokenizer differs from "
                         f"encoder {str(encoder)!r}'s; rebuild the store with {str(encoder)!r}")
