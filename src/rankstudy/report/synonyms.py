"""How well a run's word vectors hold the synthetic data's synonymy (issue 41; the learning audit's last columns).

The synthetic language writes a concept in 1-3 surface forms (``truth.json``'s ``concept_forms``) that share their
neighbouring words, so vectors trained on the collection can learn the synonymy (docs/synthetic.md). The probe:
the share of concept forms whose nearest ``k`` vocabulary words (by cosine, itself left out) include another form
of the same concept. It tells the vectors apart where a model's effectiveness differs: fastText's subword
n-grams carry no meaning in a language whose words are random syllables, so its vectors pull words of shared
spelling together and hold fewer synonyms than word2vec's (docs/neural.md, "p2's fastText").
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from rankstudy.errors import StudyError
from rankstudy.text.embeddings import load_embeddings
from rankstudy.text.vocab import OOV, SPECIALS, Vocabulary

NEIGHBOURS = 10


def concept_forms(truth_path: str | os.PathLike) -> list[list[str]]:
    """The forms of every concept with more than one (``truth.json``'s ``concept_forms``)."""
    truth = json.loads(Path(truth_path).read_text(encoding="utf-8"))
    forms = truth.get("concept_forms")
    if not isinstance(forms, list):
        raise StudyError(f"{truth_path}: expected a synthetic dataset's truth.json with 'concept_forms'")
    return [list(group) for group in forms if len(group) > 1]


def synonyms_in_neighbours(vocab_dir: str | os.PathLike, embeddings_path: str | os.PathLike,
                           truth_path: str | os.PathLike, k: int = NEIGHBOURS) -> float:
    """Share of the vocabulary's concept forms that have a synonym among their ``k`` nearest vocabulary words;
    NaN where the vocabulary holds no two forms of one concept."""
    vocab = Vocabulary.load(vocab_dir)
    vectors = load_embeddings(embeddings_path, vocab)
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    k = min(k, len(vocab) - len(SPECIALS) - 1)  # a vocabulary of k words or fewer: every other word is a neighbour
    hits = []
    for group in concept_forms(truth_path):
        known = [vocab.id(form) for form in group if vocab.id(form) != OOV]
        if len(known) < 2:
            continue
        similarity = vectors[known] @ vectors.T  # [forms, V]
        similarity[:, :len(SPECIALS)] = -np.inf  # padding and OOV are no words
        similarity[np.arange(len(known)), known] = -np.inf  # a word is not its own neighbour
        nearest = np.argpartition(-similarity, k, axis=1)[:, :k]
        hits.extend(bool(set(row.tolist()) & (set(known) - {form})) for form, row in zip(known, nearest))
    return float(np.mean(hits)) if hits else float("nan")
