"""The synonym probe of the learning audit: the share of concept forms with a synonym among their nearest words."""

import json

import numpy as np
import pytest

from rankstudy.errors import StudyError
from rankstudy.report.synonyms import synonyms_in_neighbours
from rankstudy.text.embeddings import save_embeddings
from rankstudy.text.vocab import Vocabulary

WORDS = ["bada", "bedo", "kifu", "kofa", "zumi", "zeno", "lupa"]


def probe(tmp_path, rows, forms, k=1):
    Vocabulary(["<pad>", "<oov>", *WORDS], [0, 0, *[1] * len(WORDS)], [0, 0, *[1] * len(WORDS)], 1).save(
        tmp_path / "vocab")
    save_embeddings(tmp_path / "embeddings.npy", np.array([[0, 0, 0], [0, 0, 0], *rows], dtype=np.float32))
    (tmp_path / "truth.json").write_text(json.dumps({"concept_forms": forms}))
    return synonyms_in_neighbours(tmp_path / "vocab", tmp_path / "embeddings.npy", tmp_path / "truth.json", k=k)


def test_counts_the_forms_whose_nearest_words_hold_a_synonym(tmp_path):
    rows = [[1, 0, 0], [0.9, 0.1, 0],    # bada, bedo: synonyms, each other's nearest word
            [0, 1, 0], [0, 0, 1],        # kifu, kofa: synonyms, far apart
            [0, 0.9, 0.1], [0, 0.1, 0.9],  # zumi near kifu, zeno near kofa
            [-1, 0, 0]]
    forms = [["bada", "bedo"], ["kifu", "kofa"], ["lupa"], ["absent", "zumi"]]
    # bada and bedo find each other; kifu's nearest is zumi, kofa's zeno; a one-form concept and a concept with
    # one form in the vocabulary are not asked
    assert probe(tmp_path, rows, forms) == pytest.approx(2 / 4)
    # with 2 neighbours kifu still misses kofa (cosine 0: zumi, zeno and bedo are closer)
    assert probe(tmp_path, rows, forms, k=2) == pytest.approx(2 / 4)
    assert probe(tmp_path, rows, forms, k=6) == 1.0
    assert probe(tmp_path, rows, forms, k=50) == 1.0  # more neighbours than words: every other word
    assert np.isnan(probe(tmp_path, rows, [["lupa"]]))


def test_refuses_a_truth_file_without_concept_forms(tmp_path):
    with pytest.raises(StudyError, match="concept_forms"):
        probe(tmp_path, [[1, 0, 0]] * len(WORDS), None)
