"""The learning audit (issue 41): the learning curve's first and best validation, the test measure against the
first stage on all queries and on those the run can read, and the flags."""

import json

import pandas as pd
import pytest

from rankstudy.report.learning import BELOW, NEVER_IMPROVED, SYNONYMS, audit_row, learning_audit

from helpers import metric_csv

FIRST_STAGE = {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.5, "q5": 0.5, "q6": 0.5, "q7": 0.5, "q8": 0.5}


def entry(tmp_path, model_values, validations=(0.2, 0.4, 0.3), truth=True, length=200):
    """validations: the untrained model's (step 0), then after steps 10, 20, ..."""
    pd.DataFrame({"step": [0, 10, 20, 30][:len(validations)], "loss": 1.0, "metric": list(validations)}).to_csv(
        tmp_path / "log.csv", index=False)
    metric_csv(tmp_path / "model.csv", "knrm.r.s1", "test", model_values, measures=("nDCG@10",))
    metric_csv(tmp_path / "bm25.csv", "bm25", "test", FIRST_STAGE, measures=("nDCG@10",))
    # q1-q6 have a relevant document whose evidence starts before token 200; q7, q8 only after it
    starts = {f"q{i}": 50 if i <= 6 else 500 for i in range(1, 9)}
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 d{q} 1\n" for q in starts))
    (tmp_path / "truth.json").write_text(json.dumps(
        {"relevant": {q: {f"d{q}": {"evidence_start": start}} for q, start in starts.items()}}))
    return {"run": "r", "seed": 1, "dataset": "d", "system": "knrm.r.s1", "first_stage": "bm25",
            "log": tmp_path / "log.csv", "metrics": tmp_path / "model.csv",
            "first_stage_metrics": tmp_path / "bm25.csv",
            "qrels": tmp_path / "qrels.txt", "truth": tmp_path / "truth.json" if truth else None, "length": length}


def test_a_run_that_learned_and_beats_the_first_stage_on_what_it_reads(tmp_path):
    # better on the six readable queries, hopeless on the two it cannot read
    values = {**{f"q{i}": 0.9 for i in range(1, 7)}, "q7": 0.0, "q8": 0.0}
    row = audit_row(entry(tmp_path, values), "nDCG@10")
    assert (row["initial validation"], row["best validation"], row["best step"]) == (0.2, 0.4, 10)
    assert row["all queries"] == 8 and row["readable queries"] == 6
    assert row["all nDCG@10"] == pytest.approx(5.4 / 8) and row["readable nDCG@10"] == pytest.approx(0.9)
    assert row["readable first stage"] == pytest.approx(0.5) and row["readable p"] < 0.05
    assert row["flags"] == ""
    # without evidence positions (real data) every query is readable
    assert audit_row(entry(tmp_path, values, truth=False), "nDCG@10")["readable queries"] == 8


def test_flags_a_run_that_never_improved_or_ends_below_the_first_stage(tmp_path):
    values = {q: 0.1 for q in FIRST_STAGE}
    row = audit_row(entry(tmp_path, values, validations=(0.4, 0.3, 0.4)), "nDCG@10")
    assert row["flags"] == f"{NEVER_IMPROVED}, {BELOW}"
    # the untrained value is the reference: a trained state that beats it has improved
    assert audit_row(entry(tmp_path, values, validations=(0.3, 0.2, 0.35)), "nDCG@10")["best step"] == 20
    assert NEVER_IMPROVED not in audit_row(entry(tmp_path, values, validations=(0.3, 0.2, 0.35)), "nDCG@10")["flags"]
    # a run that reads 10 tokens can read none of these queries: nothing to compare, so no flag for it
    table = learning_audit([entry(tmp_path, values, length=10)], "nDCG@10", tmp_path / "learning")
    assert table.loc[0, "readable queries"] == 0 and BELOW not in table.loc[0, "flags"]
    assert "learning audit" in (tmp_path / "learning.md").read_text().lower()


def test_adds_the_synonym_probe_once_per_set_of_word_vectors(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("rankstudy.report.learning.synonyms_in_neighbours",
                        lambda vocab, embeddings, truth: calls.append(vocab) or 0.85)
    values = {q: 0.5 for q in FIRST_STAGE}
    vectors = {"name": "ft", "vocab": "text/ft/vocab", "embeddings": "text/ft/embeddings.npy"}
    entries = [{**entry(tmp_path, values), "seed": seed, "vectors": vectors} for seed in (1, 2)]
    table = learning_audit([*entries, entry(tmp_path, values)], "nDCG@10", tmp_path / "learning")
    assert calls == ["text/ft/vocab"]
    assert table["vectors"].tolist()[:2] == ["ft", "ft"] and table[SYNONYMS].tolist()[:2] == [0.85, 0.85]
    assert table[SYNONYMS].isna().tolist()[2]  # an entry without word vectors (an encoder's word pieces)
