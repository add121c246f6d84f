"""Token stores: the token ids of every text of an ``id<TAB>text`` file, memory-mapped.

A store is a directory (docs/neural.md) holding

- ``tokens.npy``: int32, the ids of every text concatenated (source-file order);
- ``offsets.npy``: int64 [N+1]; text ``i`` is ``tokens[offsets[i]:offsets[i+1]]``;
- ``ids.txt``: the N text ids, one per line, in the same order.
- ``store.json`` (optional): what made the ids, e.g. a WordPiece tokenizer (``rankstudy.text.wordpiece``).

``build_store_with`` streams the input: token ids are appended in chunks to ``tokens.npy`` behind a
fixed-size header that is rewritten with the final length at the end, so a multi-GB collection
never sits in memory. The directory is built under a temporary name and renamed when complete.
It takes any batch encoder: the vocabulary's BlingFire words (``rankstudy.text.word_store``), a
pre-trained encoder's WordPiece ids (``rankstudy.text.wordpiece``). This module knows nothing of
the text pipeline, which builds on it.
"""

from __future__ import annotations

import array
import io
import itertools
import json
import logging
import os
import sys
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from rankstudy.atomic import atomic_path
from rankstudy.errors import StudyError
from rankstudy.formats import iter_collection, read_queries

log = logging.getLogger(__name__)

KINDS = ("collection", "queries")


def _npy_header(length: int) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<i4", "fortran_order": False, "shape": (length,)})
    return buffer.getvalue()


def _texts(path: Path, kind: str) -> Iterator[tuple[str, str]]:
    if kind == "collection":
        return iter_collection(path)
    if kind == "queries":
        return iter(read_queries(path).items())
    raise StudyError(f"store kind must be one of {', '.join(KINDS)}, got {kind!r}")


EncodeBatch = Callable[[list[str]], Sequence[Sequence[int] | np.ndarray]]


def build_store_with(tsv_path: str | os.PathLike, encode: EncodeBatch, out_dir: str | os.PathLike,
                     kind: str = "collection", chunk_tokens: int = 1 << 22, batch_texts: int = 256,
                     meta: Mapping | None = None, check: Callable[[np.ndarray], None] | None = None) -> int:
    """A store of any encoder's ids: ``encode(texts)`` maps a list of up to ``batch_texts``
    texts to as many id sequences (e.g. a fast sub-word tokenizer's batch call). ``meta``, if
    given, is written as ``store.json`` (e.g. which tokenizer made the ids). ``check``, if given,
    sees every token id (memory-mapped) before the store is in place; what it raises leaves nothing."""
    if batch_texts < 1:
        raise ValueError("batch_texts must be >= 1")
    texts = _texts(Path(tsv_path), kind)
    header = _npy_header(0)
    offsets = array.array("q", [0])
    total = 0
    with atomic_path(out_dir, directory=True) as tmp:
        with open(tmp / "tokens.npy", "wb") as tokens_out, open(tmp / "ids.txt", "w", encoding="utf-8") as ids_out:
            tokens_out.write(header)
            pending: list[np.ndarray] = []
            buffered = 0
            progress = iter(tqdm(texts, desc=f"store {Path(tsv_path).name}", unit=" texts", file=sys.stderr,
                                 mininterval=2))
            while batch := list(itertools.islice(progress, batch_texts)):
                encoded = encode([text for _, text in batch])
                if len(encoded) != len(batch):
                    raise StudyError(f"store encoder returned {len(encoded)} id sequences for {len(batch)} texts")
                for (identifier, _), ids in zip(batch, encoded):
                    ids = np.asarray(ids, dtype=np.int32)
                    pending.append(ids)
                    buffered += len(ids)
                    total += len(ids)
                    offsets.append(total)
                    ids_out.write(identifier + "\n")
                    if buffered >= chunk_tokens:
                        tokens_out.write(np.concatenate(pending).astype("<i4", copy=False).tobytes())
                        pending, buffered = [], 0
            if pending:
                tokens_out.write(np.concatenate(pending).astype("<i4", copy=False).tobytes())
            final_header = _npy_header(total)
            if len(final_header) != len(header):  # numpy reserves room for the length; never expected
                raise StudyError(f"{out_dir}: cannot rewrite the tokens.npy header in place")
            tokens_out.seek(0)
            tokens_out.write(final_header)
        np.save(tmp / "offsets.npy", np.frombuffer(offsets, dtype=np.int64))
        if meta is not None:
            (tmp / "store.json").write_text(json.dumps(dict(meta), indent=2) + "\n", encoding="utf-8")
        if check is not None:
            check(np.load(tmp / "tokens.npy", mmap_mode="r"))
    count = len(offsets) - 1
    log.info("wrote %s: %d %s texts, %d tokens", out_dir, count, kind, total)
    return count


class TokenStore:
    """Read access to a store directory (memory-mapped; ids and their index loaded lazily)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        for name in ("tokens.npy", "offsets.npy", "ids.txt"):
            if not (self.path / name).is_file():
                raise StudyError(f"{self.path}: not a token store (missing {name})")
        try:
            self.token_array = np.load(self.path / "tokens.npy", mmap_mode="r")
            self.offsets = np.load(self.path / "offsets.npy", mmap_mode="r")
        except (ValueError, OSError, EOFError) as error:
            raise StudyError(f"{self.path}: corrupt token store ({error})") from None
        tokens, offsets = self.token_array, self.offsets
        problem = None
        if tokens.ndim != 1 or tokens.dtype != np.int32 or offsets.ndim != 1 or offsets.dtype != np.int64:
            problem = "expected 1-D int32 tokens.npy and 1-D int64 offsets.npy"
        elif len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(tokens):
            problem = f"offsets do not span tokens.npy ({len(tokens)} tokens)"
        elif len(offsets) > 1 and np.any(np.diff(offsets) < 0):
            problem = "offsets are not non-decreasing"
        if problem:
            raise StudyError(f"{self.path}: corrupt token store: {problem}")
        self._ids: list[str] | None = None
        self._position: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def ids(self) -> list[str]:
        """The text ids in store order (read from ``ids.txt`` on first use)."""
        if self._ids is None:
            try:
                text = (self.path / "ids.txt").read_text(encoding="utf-8")
            except UnicodeDecodeError as error:
                raise StudyError(f"{self.path}: corrupt token store: ids.txt is not UTF-8 ({error})") from None
            if text and not text.endswith("\n"):  # every id is written with its newline: the last one was cut
                raise StudyError(f"{self.path}: corrupt token store: ids.txt does not end with a newline (cut short?)")
            ids = text.split("\n")[:-1]
            if len(ids) != len(self):
                raise StudyError(f"{self.path}: corrupt token store: ids.txt has {len(ids)} ids, offsets {len(self)}")
            self._ids = ids
        return self._ids

    def position(self, identifier: str) -> int:
        """The store index of a text id (KeyError naming the store if unknown)."""
        if self._position is None:
            self._position = {identifier: i for i, identifier in enumerate(self.ids)}
        try:
            return self._position[identifier]
        except KeyError:
            raise KeyError(f"{identifier!r} is not in the token store {self.path}") from None

    def tokens_at(self, index: int) -> np.ndarray:
        return self.token_array[self.offsets[index]:self.offsets[index + 1]]

    def tokens(self, identifier: str) -> np.ndarray:
        """The int32 token ids of one text (a read-only memory-mapped view)."""
        return self.tokens_at(self.position(identifier))

    def lengths(self, ids: Sequence[str], max_length: int | None = None) -> np.ndarray:
        """int64 [B]: the texts' token counts (capped at ``max_length`` if given)."""
        positions = np.fromiter((self.position(i) for i in ids), dtype=np.int64, count=len(ids))
        lengths = self.offsets[positions + 1] - self.offsets[positions]
        return np.minimum(lengths, max_length) if max_length is not None else np.asarray(lengths)

    def batch(self, ids: Sequence[str], max_length: int) -> np.ndarray:
        """int64 [B, L]: each text truncated to ``max_length`` and padded with 0 to the batch's
        longest; L >= 1 even when every text is empty, so models never see a zero-width batch."""
        if max_length < 1:
            raise ValueError("max_length must be >= 1")
        rows = [self.tokens_at(self.position(i))[:max_length] for i in ids]
        out = np.zeros((len(rows), max(1, max((len(r) for r in rows), default=0))), dtype=np.int64)
        for row, tokens in zip(out, rows):
            row[:len(tokens)] = tokens
        return out


def collection_idf(store, size: int | None = None, chunk_tokens: int = 1 << 22) -> np.ndarray:
    """float32 [size]: ln(N / df) of every token id over the N texts of a token store (``store.py``).

    df counts the texts holding the id; an id in no text counts df = 1 (as ``Vocabulary.idf``);
    id 0 (padding) gets 0. ``size`` defaults to the largest id + 1. Vectorised over chunks of
    about ``chunk_tokens`` tokens (whole texts): each distinct (text, id) pair counts once.
    """
    tokens, offsets = store.token_array, np.asarray(store.offsets)
    count = len(offsets) - 1
    largest = int(tokens.max()) if len(tokens) else 0
    size = largest + 1 if size is None else size
    if largest >= size:
        raise ValueError(f"{store.path}: token id {largest} does not fit an idf of size {size}")
    df = np.zeros(size, dtype=np.int64)
    first = 0
    while first < count:
        last = int(np.searchsorted(offsets, offsets[first] + chunk_tokens, side="right")) - 1
        last = min(count, max(last, first + 1))
        chunk = np.asarray(tokens[offsets[first]:offsets[last]], dtype=np.int64)
        text = np.repeat(np.arange(last - first, dtype=np.int64), np.diff(offsets[first:last + 1]))
        # distinct (text, id) keys by sorting: NumPy 2's hash-based np.unique took 4-13 s per 4M-token chunk
        # here, a sort 0.2 s (a TKL or Socialformer job paid it in every training and re-ranking job)
        keys = np.sort(text * size + chunk)
        pairs = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys
        df += np.bincount(pairs % size, minlength=size)
        first = last
    idf = np.log(max(count, 1) / np.maximum(df, 1)).astype(np.float32)
    idf[0] = 0.0  # padding
    return idf
