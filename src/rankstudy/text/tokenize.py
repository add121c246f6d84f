"""Tokenisation shared by the vocabulary, the token stores and the query encoder.

``tokenize(text)`` = BlingFire ``text_to_words`` on the lower-cased text, split on spaces
(docs/neural.md). BlingFire is used because it is fast (a compiled finite-state tokenizer,
millions of tokens per second from Python), deterministic (no model, no locale, no version
drift in a pinned wheel) and what the TK paper's matchmaker pipeline used, so vocabularies and
GloVe coverage stay comparable with the original setup. It splits punctuation off words
("hello, world!" -> ``hello , world !``) and keeps numbers and abbreviations whole.
"""

from __future__ import annotations

import blingfire


def tokenize(text: str) -> list[str]:
    """Lower-case ``text`` and split it into BlingFire words (punctuation separated)."""
    # BlingFire returns a C string: a NUL byte would silently cut the text short.
    return blingfire.text_to_words(text.lower().replace("\x00", " ")).split()
