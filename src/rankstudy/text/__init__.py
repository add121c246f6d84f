"""Text pipeline for the neural re-rankers (docs/neural.md): tokenisation, vocabulary, embeddings, token stores,
the study's own encoder (``study_encoder``).

The token store (token ids of every text, memory-mapped) lives in ``rankstudy.store``.
"""

from rankstudy.text.tokenize import tokenize

__all__ = ["tokenize"]
