"""Word embeddings aligned with the vocabulary: ``embeddings.npy``, float32 [V, dim].

Row ``i`` is the vector of vocabulary id ``i``; rows 0 (``<pad>``) and 1 (``<oov>``) are zeros.
Three sources:

- ``word2vec`` / ``fasttext``: trained with gensim on one or more token stores (skip-gram by
  default; several stores = one corpus, e.g. passages and documents of one language). Sentences
  are streamed from the memory-mapped stores (pad/OOV ids dropped, texts longer than
  gensim's 10,000-word limit cut into pieces). Training is deterministic for a given seed:
  one worker thread, gensim's seeded generators, and a process-independent ``hashfxn``
  (CRC-32; gensim 4.4 only keeps it on the model, but Python's own ``hash`` of strings differs
  between processes, so it must never matter). A vocabulary term that gensim did not learn
  (below gensim's own ``min_count``) gets its FastText subword vector (``fasttext``) or zeros
  (``word2vec``).
- ``glove``: read from a GloVe text file (``word v1 ... vdim`` per line); terms absent from it
  get N(0, 0.1^2) vectors from a generator seeded with the study seed.
- ``encoder_table``: a pre-trained encoder's input embedding table (``encoder``, e.g. ``minilm``): each term's
  vector is the mean of its word pieces' rows (the encoder's own tokenizer), so word-level models read vectors
  learnt from the encoder's pre-training text instead of the collection's; ``dim`` must be the encoder's hidden size.

``norm`` (any method) rescales all rows by one factor to that mean norm: BERT's input rows are small (mean norm
about 1 for MiniLM) beside the sinusoid positions TK adds to its word vectors (norm sqrt(dim / 2)), and TK did not
learn from them unscaled (docs/msmarco.md); word2vec's are small as well (median 1.7 at dim 64 on QMSum, beside
positions of norm 5.7).
"""

from __future__ import annotations

import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from rankstudy.atomic import atomic_open
from rankstudy.config import check_ints
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError
from rankstudy.store import TokenStore
from rankstudy.text.vocab import Vocabulary

log = logging.getLogger(__name__)

METHODS = ("word2vec", "fasttext", "glove", "encoder_table")
GENSIM_MAX_WORDS = 10_000  # gensim silently truncates longer sentences


@dataclass
class EmbeddingConfig:
    """How to obtain the embeddings (the ``embeddings`` config section)."""

    method: str = "word2vec"
    dim: int = 100
    epochs: int = 5
    window: int = 5
    sg: int = 1  # 1 = skip-gram, 0 = CBOW
    path: str | None = None  # GloVe text file (glove only)
    min_count: int = 1  # gensim's own cut-off, applied on top of the vocabulary's
    bucket: int = 2_000_000  # FastText hash buckets for character n-grams (gensim's default)
    encoder: str | None = None  # encoder_table only: the pre-trained encoder (minilm or a directory)
    norm: float | None = None  # rescale the rows to this mean norm (None: as they are)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        check_ints(self, "dim", "epochs", "window", "min_count", "bucket")
        if self.sg not in (0, 1):
            raise ValueError(f"sg must be 0 (CBOW) or 1 (skip-gram), got {self.sg!r}")
        if (self.method == "glove") != (self.path is not None):
            raise ValueError("path (a GloVe text file) is required for method 'glove' and only for it")
        if (self.method == "encoder_table") != (self.encoder is not None):
            raise ValueError("encoder is required for method 'encoder_table' and only for it")
        if self.norm is not None and not self.norm > 0:
            raise ValueError(f"norm must be a positive number, got {self.norm!r}")


def stable_hash(text: str) -> int:
    """Process-independent string hash (CRC-32), given to gensim instead of ``hash``."""
    return zlib.crc32(text.encode("utf-8"))


class StoreSentences:
    """Re-iterable corpus over token stores, one after another: one list of term strings per text."""

    def __init__(self, stores: TokenStore | Sequence[TokenStore], vocab: Vocabulary):
        self.stores = [stores] if isinstance(stores, TokenStore) else list(stores)
        self.terms = np.asarray(vocab.terms, dtype=object)
        for store in self.stores:
            if len(store.token_array) and int(store.token_array.max()) >= len(vocab):
                raise StudyError(f"{store.path}: token ids exceed the vocabulary ({len(vocab)} terms); "
                                 "was the store built with another vocabulary?")

    def __iter__(self) -> Iterator[list[str]]:
        for store in self.stores:
            for index in range(len(store)):
                ids = np.asarray(store.tokens_at(index))
                ids = ids[ids > 1]
                for start in range(0, len(ids), GENSIM_MAX_WORDS):
                    yield self.terms[ids[start:start + GENSIM_MAX_WORDS]].tolist()


def train_embeddings(store: TokenStore | Sequence[TokenStore], vocab: Vocabulary, method: str, dim: int, epochs: int,
                     window: int, seed: int, min_count: int = 1, sg: int = 1,
                     bucket: int = 2_000_000) -> np.ndarray:
    """Train word2vec or FastText on ``store`` (several: one corpus); float32 [V, dim] aligned with ``vocab``."""
    from gensim.models import FastText, Word2Vec

    common = dict(sentences=StoreSentences(store, vocab), vector_size=dim, window=window, min_count=min_count,
                  sg=sg, epochs=epochs, seed=seed, workers=1, hashfxn=stable_hash)
    if method == "word2vec":
        model = Word2Vec(**common)
    elif method == "fasttext":
        model = FastText(**common, bucket=bucket)
    else:
        raise StudyError(f"train_embeddings: method must be 'word2vec' or 'fasttext', got {method!r}")
    wv = model.wv
    out = np.zeros((len(vocab), dim), dtype=np.float32)
    learned = np.fromiter((wv.key_to_index.get(t, -1) for t in vocab.terms), dtype=np.int64, count=len(vocab))
    learned[:2] = -1
    rows = learned >= 0
    out[rows] = wv.vectors[learned[rows]]
    missing = np.flatnonzero(~rows)
    missing = missing[missing >= 2]  # pad and oov stay zero
    if method == "fasttext":
        for i in missing:
            out[i] = wv.get_vector(vocab.terms[i])  # from the character n-grams
    log.info("%s: %d of %d terms learned, %d %s", method, int(rows.sum()), len(vocab) - 2, len(missing),
             "from subwords" if method == "fasttext" else "left at zero")
    return out


def load_glove(path: str | os.PathLike, vocab: Vocabulary, dim: int, seed: int) -> np.ndarray:
    """float32 [V, dim] from a GloVe text file; absent terms ~ N(0, 0.1^2) (seeded), pad/oov zero.

    Words are matched exactly (the vocabulary is lower-cased); the first line of a word wins.
    Every line must have ``dim + 1`` space-separated fields; the only tolerated exception is a
    word that itself contains spaces (a few in glove.840B), which cannot match any term.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, None, "an existing GloVe text file", "no such file")
    out = (np.random.default_rng(seed).standard_normal((len(vocab), dim)) * 0.1).astype(np.float32)
    found = np.zeros(len(vocab), dtype=bool)
    expected = f"{dim + 1} space-separated fields 'word v1 ... v{dim}'"
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.rstrip().split(" ")
            if len(parts) != dim + 1:
                if len(parts) < dim + 1 or _is_number(parts[-dim - 1]):
                    raise FormatError(path, number, expected, f"{len(parts)} fields: {line.rstrip()[:60]}")
                continue
            i = vocab.id(parts[0])
            if i < 2 or found[i]:
                continue
            try:
                out[i] = np.asarray(parts[1:], dtype=np.float32)
            except ValueError:
                raise FormatError(path, number, f"{dim} numbers after the word", line.rstrip()[:60]) from None
            found[i] = True
    out[:2] = 0.0
    log.info("GloVe %s: %d of %d terms found, the rest random N(0, 0.1^2)", path, int(found.sum()), len(vocab) - 2)
    return out


def encoder_table(encoder: str, vocab: Vocabulary, dim: int) -> np.ndarray:
    """Each term's vector: the mean of its word pieces' rows in the encoder's input embedding table."""
    import torch

    from rankstudy.nn.pretrained import load_encoder, load_tokenizer

    table = load_encoder(encoder).embeddings.word_embeddings.weight.detach()
    if table.shape[1] != dim:
        raise StudyError(f"embeddings: encoder {encoder!r} has {table.shape[1]}-d input embeddings; set dim to it")
    tokenizer = load_tokenizer(encoder)
    out = np.zeros((len(vocab), dim), dtype=np.float32)
    pieces = tokenizer(vocab.terms[2:], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        for row, ids in enumerate(pieces, start=2):
            if ids:
                out[row] = table[ids].mean(dim=0).numpy()
    empty = sum(not ids for ids in pieces)
    log.info("%s's input embeddings: %d terms from their word pieces, %d without any left at zero", encoder,
             len(pieces) - empty, empty)
    return out


def scaled_to_norm(vectors: np.ndarray, norm: float) -> np.ndarray:
    """All rows scaled by one factor so that the non-zero rows' mean norm is ``norm``."""
    norms = np.linalg.norm(vectors[2:], axis=1)
    scale = norm / norms[norms > 0].mean()
    log.info("rows scaled by %.2f to a mean norm of %g", scale, norm)
    return vectors * np.float32(scale)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def build_embeddings(config: EmbeddingConfig, vocab: Vocabulary, seed: int,
                     store: TokenStore | Sequence[TokenStore] | None = None) -> np.ndarray:
    """The embeddings ``config`` asks for (``store``, one or several, is needed by word2vec and fasttext), scaled to
    its ``norm`` where it gives one."""
    if config.method == "glove":
        vectors = load_glove(config.path, vocab, config.dim, seed)
    elif config.method == "encoder_table":
        vectors = encoder_table(config.encoder, vocab, config.dim)
    else:
        stores = [store] if isinstance(store, TokenStore) else list(store or [])
        if not stores:
            raise StudyError(f"embeddings: method {config.method!r} needs a token store to train on")
        vectors = train_embeddings(stores, vocab, config.method, config.dim, config.epochs, config.window, seed,
                                   min_count=config.min_count, sg=config.sg, bucket=config.bucket)
    return vectors if config.norm is None else scaled_to_norm(vectors, config.norm)


def save_embeddings(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write a float32 [V, dim] array as ``.npy`` atomically."""
    array = np.asarray(array)
    if array.ndim != 2 or array.dtype != np.float32:
        raise ValueError(f"embeddings must be a 2-D float32 array, got {array.dtype} {array.shape}")
    with atomic_open(path, "wb") as out:
        np.save(out, array)


def load_embeddings(path: str | os.PathLike, vocab: Vocabulary | None = None) -> np.ndarray:
    """Read ``embeddings.npy``; with ``vocab``, check that there is one row per term."""
    try:
        array = np.load(path)
    except (OSError, ValueError, EOFError) as error:
        raise StudyError(f"{path}: cannot read embeddings ({error})") from None
    if array.ndim != 2 or array.dtype != np.float32:
        raise StudyError(f"{path}: expected a 2-D float32 array, got {array.dtype} {array.shape}")
    if vocab is not None and len(array) != len(vocab):
        raise StudyError(f"{path}: {len(array)} rows for a vocabulary of {len(vocab)} terms")
    return array
