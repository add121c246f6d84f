"""rankstudy.truncation: metric tables, Fixed-k / Greedy-k / Oracle, and BiCut on a toy problem."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import single_thread
from rankstudy.config import from_dict
from rankstudy.errors import StudyError
from rankstudy.truncation.baselines import evaluate_cuts, fixed_k, greedy_k, oracle
from rankstudy.truncation.bicut import BiCutConfig, cuts_from_decisions, predict_cuts, train_bicut
from rankstudy.truncation.tables import (build_labels, build_tables, dcg_table, f1_table, pad_table,
                                         relevance_labels)


def test_relevance_labels_threshold_and_unjudged():
    ranking = [("a", 3.0), ("b", 2.0), ("c", 1.0), ("d", 0.5)]
    judged = {"a": 2, "b": 1, "d": 0}
    assert relevance_labels(ranking, judged, 1).tolist() == [1, 1, 0, 0]
    assert relevance_labels(ranking, judged, 2).tolist() == [1, 0, 0, 0]
    assert relevance_labels(ranking, judged, 0, n=3).tolist() == [1, 1, 0]  # unjudged "c" stays 0
    assert relevance_labels(ranking, judged, 1).dtype == np.int8


def test_f1_and_dcg_hand_computed():
    labels = [1, 0, 1, 0]
    # P = 1, 1/2, 2/3, 2/4; R = 1/3, 1/3, 2/3, 2/3 -> F1 = 2PR/(P+R)
    assert f1_table(labels, 3) == pytest.approx([0.5, 0.4, 2 / 3, 4 / 7])
    expected = np.cumsum([1, -1 / math.log2(3), 1 / math.log2(4), -1 / math.log2(5)])
    assert dcg_table(labels) == pytest.approx(expected)
    assert dcg_table(labels) == pytest.approx([1.0, 0.369070, 0.869070, 0.438394], abs=1e-6)


def test_no_relevant_documents():
    assert f1_table([0, 0, 0], 0).tolist() == [0, 0, 0]
    assert f1_table([0, 0, 0], 2).tolist() == [0, 0, 0]  # relevant documents exist, none retrieved
    dcg = dcg_table([0, 0, 0])
    assert (dcg < 0).all() and (np.diff(dcg) < 0).all()


def test_all_relevant():
    f1 = f1_table([1, 1, 1, 1], 4)  # recall_base top_n: R = relevant in the top N
    assert (np.diff(f1) > 0).all() and f1[-1] == pytest.approx(1.0)
    assert f1_table([1, 1, 1, 1], 8)[-1] == pytest.approx(2 * 4 / 12)  # qrels base: 8 relevant in total
    assert (np.diff(dcg_table([1, 1, 1, 1])) > 0).all()
    with pytest.raises(ValueError):
        f1_table([1, 1], 1)


def test_recall_base_and_skipped_queries(caplog):
    run = {"q1": [("a", 3.0), ("b", 2.0)], "q2": [("x", 1.0)], "q3": [("y", 1.0)]}
    qrels = {"q1": {"a": 1, "b": 1, "z": 1}, "q2": {"x": 1}}
    with caplog.at_level("INFO"):
        qids, scores, tables, lengths = build_tables(run, qrels, 2, "f1")
    assert qids == ["q1", "q2"] and "skipped 1 of 3" in caplog.text
    assert tables[0] == pytest.approx([0.5, 0.8])  # R = 3 (qrels): 2*1/4, 2*2/5
    _, _, top_n, _ = build_tables(run, qrels, 2, "f1", recall_base="top_n")
    assert top_n[0] == pytest.approx([2 / 3, 1.0])  # R = 2 (relevant within the top 2)
    with pytest.raises(StudyError, match="recall_base"):
        build_tables(run, qrels, 2, recall_base="all")
    with pytest.raises(StudyError, match="metric"):
        build_tables(run, qrels, 2, metric="ndcg")


def test_short_lists_are_padded_with_the_last_value():
    assert pad_table(np.array([0.5, 0.2]), 4).tolist() == [0.5, 0.2, 0.2, 0.2]
    assert pad_table(np.array([1.0, 2.0, 3.0]), 2).tolist() == [1.0, 2.0]
    run = {"long": [(f"d{i}", 10.0 - i) for i in range(6)], "short": [("s0", 5.0), ("s1", 4.0)]}
    qrels = {"long": {"d0": 1, "d2": 1}, "short": {"s1": 1}}
    qids, scores, tables, lengths = build_tables(run, qrels, 4, "dcg")
    assert qids == ["long", "short"] and lengths.tolist() == [4, 2]
    assert scores.dtype == np.float32 and tables.dtype == np.float32 and scores.shape == tables.shape == (2, 4)
    assert scores[0].tolist() == [10, 9, 8, 7] and scores[1].tolist() == [5, 4, 4, 4]
    assert tables[1] == pytest.approx(pad_table(dcg_table([0, 1]), 4))
    assert tables[1, 2] == tables[1, 3] == tables[1, 1]
    assert build_labels(run, qrels, qids, 4).tolist() == [[1, 0, 1, 0], [0, 1, 0, 0]]
    # cutting beyond the short list's end keeps the whole list
    assert fixed_k(tables[1:], 4) == pytest.approx(float(tables[1, 1]))


def test_empty_list_is_an_error_naming_the_query():
    with pytest.raises(StudyError, match="query q9"):
        build_tables({"q1": [("a", 1.0)], "q9": []}, {"q1": {"a": 1}, "q9": {"b": 1}}, 3)


def test_greedy_k_oracle_and_fixed_k():
    tables = np.array([[0.1, 0.5, 0.3],
                       [0.6, 0.2, 0.2],
                       [0.0, 0.4, 0.9]])
    assert fixed_k(tables, 1) == pytest.approx(0.7 / 3)
    assert fixed_k(tables, 2) == pytest.approx(1.1 / 3)
    assert fixed_k(tables, 10) == fixed_k(tables, 3) == pytest.approx(1.4 / 3)  # beyond N: whole list
    assert greedy_k(tables) == 3
    assert greedy_k(np.array([[0.2, 0.5, 0.5], [0.2, 0.5, 0.5]])) == 2  # ties: the smallest k
    values, cuts = oracle(tables)
    assert values.tolist() == [0.5, 0.6, 0.9] and cuts.tolist() == [2, 1, 3]
    assert oracle(np.array([[0.4, 0.4, 0.1]]))[1].tolist() == [1]
    assert evaluate_cuts(tables, [3, 1, 7]).tolist() == [0.3, 0.6, 0.9]
    with pytest.raises(ValueError):
        evaluate_cuts(tables, [0, 1, 1])


def test_cut_before_the_first_end():
    end = np.array([[0, 0, 1, 0, 1],   # first end at 3 -> cut 2
                    [1, 0, 0, 0, 0],   # end at 1 -> at least 1
                    [0, 0, 0, 0, 0],   # no end -> whole list
                    [0, 0, 0, 1, 1]],  # ends only in padding (length 3) -> whole list
                   dtype=bool)
    assert cuts_from_decisions(end, [5, 5, 4, 3]).tolist() == [2, 1, 4, 3]


def toy_split(rng: np.random.Generator, queries: int, n: int = 16):
    """Descending scores; the relevant documents are exactly those with score > 0.5."""
    scores = np.zeros((queries, n), dtype=np.float32)
    labels = np.zeros((queries, n), dtype=np.int8)
    tables = np.zeros((queries, n), dtype=np.float32)
    lengths = rng.integers(n // 2, n + 1, size=queries)
    for q, length in enumerate(lengths):
        relevant = rng.integers(1, length + 1)
        values = np.concatenate([rng.uniform(0.55, 1.0, relevant), rng.uniform(0.0, 0.45, length - relevant)])
        values = np.sort(values)[::-1]
        labels[q, :length] = values > 0.5
        scores[q] = pad_table(values, n)
        tables[q] = pad_table(f1_table(labels[q, :length], int(relevant)), n)
    return scores, labels, tables, lengths


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    return {split: toy_split(rng, size) for split, size in (("train", 256), ("dev", 64), ("test", 128))}


def test_bicut_config_from_dict():
    cfg = from_dict(BiCutConfig, {"hidden": 8, "epochs": 3})
    assert (cfg.hidden, cfg.alpha, cfg.batch_size) == (8, 0.65, 64)
    with pytest.raises(StudyError):
        from_dict(BiCutConfig, {"alpha": 1.5})


@pytest.fixture
def one_thread():
    with single_thread():
        yield


def test_bicut_learns_the_toy_cut_and_is_deterministic(toy, one_thread):
    cfg = BiCutConfig(hidden=16, epochs=8, lr=1e-2, batch_size=32)
    (tr_s, tr_y, _, tr_l), (dv_s, _, dv_t, dv_l), (te_s, _, te_t, te_l) = toy["train"], toy["dev"], toy["test"]
    model = train_bicut((tr_s, tr_y, tr_l), (dv_s, dv_t, dv_l), cfg, seed=1, device="cpu")
    cuts = predict_cuts(model, te_s, te_l)
    assert ((cuts >= 1) & (cuts <= te_l)).all()
    f1 = evaluate_cuts(te_t, cuts).mean()
    worst = min(fixed_k(te_t, k) for k in range(1, te_t.shape[1] + 1))
    best_oracle = oracle(te_t)[0].mean()
    assert best_oracle == pytest.approx(1.0)
    assert f1 > worst + 0.2
    assert f1 > fixed_k(te_t, greedy_k(toy["train"][2]))
    assert f1 >= best_oracle - 0.1
    again = train_bicut((tr_s, tr_y, tr_l), (dv_s, dv_t, dv_l), cfg, seed=1, device="cpu")
    assert np.array_equal(predict_cuts(again, te_s, te_l), cuts)
    assert again.best_epoch == model.best_epoch and again.dev_f1 == model.dev_f1
