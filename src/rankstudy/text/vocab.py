"""The vocabulary: term <-> id, with collection counts and document frequencies.

Ids (docs/neural.md): 0 = ``<pad>``, 1 = ``<oov>``, then every term whose count is at least
``min_count``, most frequent first, ties by term (so the ids only depend on the data).

On disk, a directory with

- ``vocab.tsv``: ``id<TAB>term<TAB>count<TAB>df``, one line per id from 0 (``count`` is the
  collection count plus the count in the extra texts, ``df`` the number of collection documents
  holding the term; both 0 for ``<pad>`` and ``<oov>``);
- ``vocab.json``: ``{"documents": N, "min_count": m, "terms": V, ...}``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from tqdm import tqdm

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError, iter_collection
from rankstudy.text.tokenize import tokenize

log = logging.getLogger(__name__)

PAD, OOV = 0, 1
SPECIALS = ("<pad>", "<oov>")


class Vocabulary:
    """Terms (``terms[id]``), ``counts`` and ``dfs`` (int64 arrays aligned with the ids)."""

    def __init__(self, terms: Sequence[str], counts: Sequence[int], dfs: Sequence[int],
                 documents: int, min_count: int = 1, extra: dict | None = None):
        if list(terms[:2]) != list(SPECIALS):
            raise ValueError(f"a vocabulary starts with {SPECIALS}")
        if not len(terms) == len(counts) == len(dfs):
            raise ValueError("terms, counts and dfs must have the same length")
        self.terms = list(terms)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.dfs = np.asarray(dfs, dtype=np.int64)
        self.documents = int(documents)
        self.min_count = int(min_count)
        self.extra = dict(extra or {})
        self._ids = {term: i for i, term in enumerate(self.terms)}
        if len(self._ids) != len(self.terms):
            raise ValueError("duplicate terms in the vocabulary")

    def __len__(self) -> int:
        return len(self.terms)

    def id(self, term: str) -> int:
        """The term's id, or 1 (``<oov>``) for a term outside the vocabulary."""
        return self._ids.get(term, OOV)

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Token strings -> int32 ids (OOV -> 1)."""
        get = self._ids.get
        return np.fromiter((get(t, OOV) for t in tokens), dtype=np.int32)

    def idf(self) -> np.ndarray:
        """float32 [V]: ln(N / df); 0 for pad/oov. A term seen only in extra texts (df 0) counts df = 1."""
        values = np.log(self.documents / np.maximum(self.dfs, 1)).astype(np.float32)
        values[:2] = 0.0
        return values

    def save(self, directory: str | os.PathLike) -> None:
        """Write ``vocab.tsv`` and ``vocab.json`` (each atomically) into ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with atomic_open(directory / "vocab.tsv") as out:
            for i, (term, count, df) in enumerate(zip(self.terms, self.counts.tolist(), self.dfs.tolist())):
                out.write(f"{i}\t{term}\t{count}\t{df}\n")
        meta = {**self.extra, "documents": self.documents, "min_count": self.min_count, "terms": len(self)}
        with atomic_open(directory / "vocab.json") as out:
            json.dump(meta, out, indent=2)
            out.write("\n")

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "Vocabulary":
        directory = Path(directory)
        tsv, meta_path = directory / "vocab.tsv", directory / "vocab.json"
        for path in (tsv, meta_path):
            if not path.is_file():
                raise StudyError(f"{directory}: not a vocabulary directory (missing {path.name})")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            documents, min_count = int(meta.pop("documents")), int(meta.pop("min_count"))
        except (ValueError, KeyError, TypeError) as error:
            raise StudyError(f"{meta_path}: expected JSON with 'documents' and 'min_count' ({error})") from None
        recorded_terms = meta.pop("terms", None)
        terms, counts, dfs = [], [], []
        with open(tsv, encoding="utf-8", newline="\n") as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.rstrip("\n").split("\t")
                if not line.endswith("\n"):  # save() ends every line: a last line without one was cut short
                    raise FormatError(tsv, number, "a line ending in a newline (the file seems cut short)", line)
                if len(parts) != 4 or parts[0] != str(number - 1) or not parts[2].isdigit() or not parts[3].isdigit():
                    raise FormatError(tsv, number, f"'id<TAB>term<TAB>count<TAB>df' with id {number - 1}", line)
                terms.append(parts[1])
                counts.append(int(parts[2]))
                dfs.append(int(parts[3]))
        if recorded_terms is not None and recorded_terms != len(terms):  # cut at a line end: no line is bad
            raise StudyError(f"{tsv}: {len(terms)} terms, vocab.json says {recorded_terms} (cut short?)")
        try:
            return cls(terms, counts, dfs, documents, min_count, extra=meta)
        except ValueError as error:
            raise StudyError(f"{tsv}: {error}") from None


def build_vocabulary(collection_path: str | os.PathLike, min_count: int = 1,
                     extra_texts: Iterable[str] | None = None) -> Vocabulary:
    """Count terms over the collection (one streaming pass) and build the vocabulary.

    ``extra_texts`` (e.g. the query texts) add their terms' counts but no document frequency,
    so ``min_count=1`` plus the queries gives a vocabulary without OOV on either side.
    Memory: the term dictionaries only; documents are read one at a time.
    """
    if min_count < 1:
        raise StudyError(f"min_count must be >= 1, got {min_count}")
    counts: Counter[str] = Counter()
    dfs: Counter[str] = Counter()
    documents = tokens = 0
    for _, text in tqdm(iter_collection(collection_path), desc="vocabulary", unit=" docs",
                        file=sys.stderr, mininterval=2):
        words = tokenize(text)
        counts.update(words)
        dfs.update(set(words))
        documents += 1
        tokens += len(words)
    extra_count = 0
    for text in extra_texts or ():
        counts.update(tokenize(text))
        extra_count += 1
    for special in SPECIALS:  # BlingFire splits "<pad>" anyway; keep the ids unambiguous
        counts.pop(special, None)
    kept = sorted((term for term, count in counts.items() if count >= min_count),
                  key=lambda term: (-counts[term], term))
    vocab = Vocabulary(
        [*SPECIALS, *kept],
        [0, 0, *(counts[t] for t in kept)],
        [0, 0, *(dfs[t] for t in kept)],
        documents, min_count,
        extra={"collection_tokens": tokens, "distinct_terms": len(counts), "extra_texts": extra_count},
    )
    log.info("vocabulary: %d documents, %d tokens, %d distinct terms, %d kept (min_count %d)",
             documents, tokens, len(counts), len(kept), min_count)
    return vocab
