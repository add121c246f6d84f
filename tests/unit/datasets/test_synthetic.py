"""The synthetic dataset has the properties the study relies on (docs/synthetic.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from rankstudy.config import ConfigError, from_dict
from rankstudy.datasets.synthetic import SyntheticConfig, generate


def small(**overrides) -> SyntheticConfig:
    base = dict(train_queries=20, dev_queries=5, test_queries=5, concepts=200, filler_vocabulary=500,
                context_vocabulary=300, background_documents=30)
    base.update(overrides)
    return SyntheticConfig(**base)


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_same_seed_same_bytes_other_seed_other_data(tmp_path):
    generate(small(), seed=7).write(tmp_path / "a")
    generate(small(), seed=7).write(tmp_path / "b")
    generate(small(), seed=8).write(tmp_path / "c")
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a")["collection.tsv"] != digest(tmp_path / "c")["collection.tsv"]
    assert sorted(digest(tmp_path / "a")) == [
        "collection.tsv", "qrels.dev.txt", "qrels.test.txt", "qrels.train.txt",
        "queries.dev.tsv", "queries.test.tsv", "queries.train.tsv", "truth.json",
    ]


def test_splits_sizes_and_judgment_styles(passage_data):
    data = passage_data
    assert len(data.queries["train"]) >= 1000
    # dev is sparse: exactly one judged (relevant) document per query, like MS MARCO dev
    assert all(len(judged) == 1 and min(judged.values()) >= 1 for judged in data.qrels["dev"].values())
    # ... although most queries have more relevant documents in the collection
    dev_relevant = [len(data.truth["relevant"][qid]) for qid in data.qrels["dev"]]
    assert np.mean(dev_relevant) > 2
    # test is dense and graded 0-3, with judged non-relevant documents
    test_grades = [g for judged in data.qrels["test"].values() for g in judged.values()]
    assert set(test_grades) == {0, 1, 2, 3}
    for qid, judged in data.qrels["test"].items():
        assert {d for d, g in judged.items() if g > 0} == set(data.truth["relevant"][qid])
    ids = [docid for docid, _ in data.docs]
    assert len(ids) == len(set(ids))


def test_relevant_counts_are_heavy_tailed(passage_data):
    counts = np.array([len(docs) for docs in passage_data.truth["relevant"].values()])
    assert counts.min() == 1 and counts.max() >= 50
    assert np.median(counts) <= 3  # most queries have few relevant documents ...
    assert (counts >= 50).sum() >= 5  # ... a few have very many
    assert 0.3 < (counts == 1).mean() < 0.7


def test_lexical_mismatch(passage_data):
    """Relevant texts often name a query concept with a synonym the query does not use."""
    data = passage_data
    text = dict(data.docs)
    queries = {qid: q for split in data.queries.values() for qid, q in split.items()}
    missing_a_query_word = [
        not set(queries[qid].split()) <= set(text[docid].split())
        for qid, docs in data.truth["relevant"].items()
        for docid in docs
    ]
    assert np.mean(missing_a_query_word) > 0.5
    # concepts have several surface forms, and the expansion lists them
    forms = [len(f) for f in data.truth["concept_forms"]]
    assert max(forms) >= 3 and np.mean(forms) > 1.5


def test_hard_negatives_hold_the_query_words_out_of_context(passage_data):
    data = passage_data
    text = dict(data.docs)
    queries = data.queries["test"]
    for qid in queries:
        for docid in data.truth["hard_negatives"][qid]:
            assert set(queries[qid].split()) <= set(text[docid].split())
            assert data.qrels["test"][qid][docid] == 0


def test_document_lengths_and_late_evidence(document_data):
    data = document_data
    lengths = np.array([len(t.split()) for _, t in data.docs])
    assert np.median(lengths) >= 600
    assert np.percentile(lengths, 90) >= 2500
    assert (lengths >= 4000).sum() >= 10
    starts = np.array([info["evidence_start"] for docs in data.truth["relevant"].values() for info in docs.values()])
    assert (starts > 200).mean() >= 0.5
    # evidence is placed anywhere, also deep inside long documents
    assert (starts > 2000).sum() > 0


def test_passages_are_short(passage_data):
    lengths = np.array([len(t.split()) for _, t in passage_data.docs])
    assert 40 <= np.median(lengths) <= 100 and lengths.max() <= 200


def test_grades_follow_the_evidence(passage_data):
    """Higher grades carry more query-concept evidence (the signal a ranker must learn)."""
    data = passage_data
    text = dict(data.docs)
    concept_of = {form: c for c, forms in enumerate(data.truth["concept_forms"]) for form in forms}
    by_grade: dict[int, list[float]] = {1: [], 2: [], 3: []}
    for qid, docs in data.truth["relevant"].items():
        concepts = set(data.truth["queries"][qid]["concepts"])
        for docid, info in docs.items():
            words = text[docid].split()
            by_grade[info["grade"]].append(sum(concept_of.get(w) in concepts for w in words))
    assert np.mean(by_grade[1]) < np.mean(by_grade[2]) < np.mean(by_grade[3])


@pytest.mark.parametrize("bad, message", [
    ({"flavour": "novel"}, "flavour"),
    ({"synonym_rate": 1.5}, "probabilities"),
    ({"evidence_length": [10, 500]}, "evidence_length"),
    ({"typo_key": 1}, "unknown key"),
])
def test_bad_settings_fail_clearly(bad, message):
    with pytest.raises(ConfigError, match=message):
        from_dict(SyntheticConfig, bad, "datasets.x.synthetic")
