"""Margin-MSE teachers: vectors once per text, scores as inner products, mined negatives and their guard,
ensemble weights, scored triples read back, and the loop's targets taken from them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy import sparse

from helpers import FakeStore
from toy_training import config
from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError
from rankstudy.train import teachers as tt
from rankstudy.train.examples import read_scored_triples
from rankstudy.train.loop import TrainConfig, batch_pass

PASSAGES = {"p-cat": "the cat sat on the mat and purred",
            "p-rome": "rome is the capital city of italy",
            "p-tax": "how to file an income tax return online",
            "p-soup": "a recipe for tomato soup with basil"}
QUERIES = {"q-rome": "what is the capital of italy", "q-soup": "tomato soup recipe"}


@pytest.fixture(scope="module", params=["dense", "splade"])
def encoded(request, tmp_path_factory):
    """Each packaged teacher's vectors of the toy passages and queries, written by ``vectorize``."""
    kind, encoder = request.param, {"dense": "minilm", "splade": "splade-tiny"}[request.param]
    folder = tmp_path_factory.mktemp(kind)
    (folder / "collection.tsv").write_text("".join(f"{d}\t{t}\n" for d, t in PASSAGES.items()))
    (folder / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    cfg = tt.TeacherConfig(kind=kind, encoder=encoder, batch_size=3)
    tt.vectorize(cfg, folder / "collection.tsv", [folder / "queries.tsv"], folder / "vectors")
    return kind, folder / "vectors"


def test_vectors_are_written_once_per_text_and_rank_the_answer_first(encoded):
    kind, folder = encoded
    documents = tt.load_vectors(folder / "documents")
    assert documents.ids == list(PASSAGES) and not list(folder.glob(".*tmp*"))
    if kind == "splade":  # log(1 + ReLU(.)) max-pooled: non-negative and sparse over the vocabulary
        assert sparse.issparse(documents.matrix) and documents.matrix.shape[1] == 30522
        assert documents.matrix.min() >= 0 and documents.matrix.nnz < 0.1 * np.prod(documents.matrix.shape)
    else:  # mean-pooled, unit length
        assert np.allclose(np.linalg.norm(documents.matrix, axis=1), 1, atol=1e-5)
    teacher = tt.load_teacher([folder], [20.0], [])
    ranked = teacher.rank(list(QUERIES), 2)
    assert [d for d, _ in ranked["q-rome"]][0] == "p-rome" and [d for d, _ in ranked["q-soup"]][0] == "p-soup"
    scores = [s for _, s in ranked["q-rome"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == 2
    # a pair's score is the same inner product the ranking used
    assert teacher.pair_scores([("q-rome", "p-rome")])[0] == pytest.approx(ranked["q-rome"][0][1], rel=1e-5)


def _dense_teacher(query_rows, doc_rows, weight=1.0):
    queries = tt.Vectors([f"q{i}" for i in range(len(query_rows))], np.asarray(query_rows, dtype=np.float32))
    documents = tt.Vectors([f"d{i}" for i in range(len(doc_rows))], np.asarray(doc_rows, dtype=np.float32))
    return tt.Member(queries, documents, weight)


def test_pair_scores_are_scaled_inner_products_and_an_ensemble_weighs_members_alike():
    wide = _dense_teacher([[1.0, 0.0]], [[4.0, 0.0], [1.0, 0.0], [0.0, 1.0]], weight=2.0)
    narrow = _dense_teacher([[1.0, 0.0]], [[0.4, 0.0], [0.3, 0.0], [0.0, 0.0]])
    assert tt.Teacher([wide]).pair_scores([("q0", "d0"), ("q0", "d2")]).tolist() == [8.0, 0.0]
    triples = [("q0", "d0", "d1"), ("q0", "d0", "d2"), ("q0", "d1", "d2")]
    weights = tt.ensemble_weights([wide, narrow], triples)
    margins = []
    for member, weight in zip([wide, narrow], weights):
        single = tt.Teacher([tt.Member(member.queries, member.documents, weight)])
        margins.append(single.pair_scores([(q, p) for q, p, _ in triples])
                       - single.pair_scores([(q, n) for q, _, n in triples]))
    assert margins[0].std() == pytest.approx(margins[1].std())  # each member counts alike
    flat = _dense_teacher([[1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    with pytest.raises(StudyError, match="same margin"):
        tt.ensemble_weights([wide, flat], triples)


def test_mined_negatives_skip_the_teachers_best_and_those_above_the_positive():
    # one query; the teacher's order d0 > d1 > ... > d9; the positive is d4, d2 is judged non-relevant
    member = _dense_teacher([[1.0]], [[10.0 - i] for i in range(10)])
    teacher = tt.Teacher([member])
    qrels = {"q0": {"d4": 1, "d2": 0}}
    ranked = teacher.rank(["q0"], 10)
    guarded = tt.mine_triples(qrels, ranked, teacher, tt.MiningConfig(per_query=20, depth=10, skip=1), 1, seed=0)
    # unjudged: d0 d1 d3 d5 ...; skip 1 drops d0; d1 and d3 score above the positive d4
    assert {n for _, _, n in guarded} <= {f"d{i}" for i in range(5, 10)} and len(guarded) == 20
    assert all(p == "d4" for _, p, _ in guarded)
    free = tt.mine_triples(qrels, ranked, teacher, tt.MiningConfig(per_query=20, depth=10, skip=1,
                                                                  above_positive=True), 1, seed=0)
    assert {"d1", "d3"} <= {n for _, _, n in free} and not {"d0", "d2", "d4"} & {n for _, _, n in free}
    assert free == tt.mine_triples(qrels, ranked, teacher, tt.MiningConfig(per_query=20, depth=10, skip=1,
                                                                          above_positive=True), 1, seed=0)
    # everything below the positive cut away: no triple, no error
    assert tt.mine_triples(qrels, ranked, teacher, tt.MiningConfig(per_query=3, depth=5, skip=1), 1, 0) == []


def test_score_triples_writes_given_then_mined_triples_with_the_teachers_scores(tmp_path):
    member = _dense_teacher([[1.0]], [[10.0 - i] for i in range(10)])
    given = [("q0", "d4", "d9")]
    out = tmp_path / "scored.tsv"
    summary = tt.score_triples(tt.Teacher([member]), given, {"q0": {"d4": 1}},
                               tt.MiningConfig(per_query=2, depth=10, skip=0), 1, 0, out)
    rows = read_scored_triples(out)
    assert rows[0] == ("q0", "d4", "d9", 6.0, 1.0) and len(rows) == 3
    assert all(s_pos > s_neg for _, _, _, s_pos, s_neg in rows)  # mined below the positive
    assert summary["given"] == 1 and summary["mined"] == 2 and summary["positive_first"] == 1.0


def test_validate_teacher_reranks_the_validation_lists_beside_the_first_stage():
    member = _dense_teacher([[1.0]], [[float(i)] for i in range(5)])  # the teacher prefers d4
    run = {"q0": [("d0", 5.0), ("d1", 4.0), ("d4", 1.0)]}
    result = tt.validate_teacher(tt.Teacher([member]), run, {"q0": {"d4": 1}}, 3, "RR@10", 1)
    assert result["teacher"] == 1.0 and result["first_stage"] == pytest.approx(1 / 3) and result["queries"] == 1


def test_bad_files_and_settings_fail_clearly(tmp_path):
    bad = tmp_path / "scored.tsv"
    bad.write_text("q1\tp1\tn1\t1.5\t0.5\nq1\tp1\tn2\tnan\t0.1\n")
    with pytest.raises(FormatError, match=r"scored.tsv:2: expected finite teacher scores"):
        read_scored_triples(bad)
    bad.write_text("q1\tp1\tn1\t1.5\n")
    with pytest.raises(FormatError, match=r"scored.tsv:1: expected 5 tab-separated fields"):
        read_scored_triples(bad)
    with pytest.raises(StudyError, match="no ids.txt"):
        tt.load_vectors(tmp_path)
    with pytest.raises(ConfigError, match="kind must be one of"):
        from_dict(tt.TeacherConfig, {"kind": "colbert", "encoder": "minilm"}, "teacher")
    with pytest.raises(ConfigError, match="skip"):
        from_dict(tt.MiningConfig, {"skip": 5, "depth": 5}, "mining")
    texts = tmp_path / "texts.tsv"
    texts.write_text("a\tsome text\n")
    with pytest.raises(StudyError, match="not a directory"):
        tt.vectorize(tt.TeacherConfig(kind="dense", encoder=str(tmp_path / "none")), texts, [texts], tmp_path / "v")
    assert not (tmp_path / "v").exists()


def test_scored_triples_give_the_margin_mse_targets():
    """teacher {scores: NAME}: no teacher model; the batch's targets are the carried scores."""
    queries, docs = FakeStore({"q1": [1], "q2": [2]}), FakeStore({"p": [5], "n": [3], "m": [4]})
    cfg = config(loss="margin_mse", teacher={"scores": "minilm"})
    batch = [("q1", "p", "n", 3.0, 1.0), ("q2", "p", "m", 2.0, 2.5)]
    _, document_ids, loss_of = batch_pass(batch, False, queries, docs, cfg, torch.device("cpu"))
    scores = document_ids[:, 0].float()  # student margins: 5 - 3 = 2 and 5 - 4 = 1
    assert loss_of(scores).item() == pytest.approx(((2 - 2) ** 2 + (1 - (-0.5)) ** 2) / 2)
    with pytest.raises(ConfigError, match="either 'model'"):
        from_dict(TrainConfig, {**json.loads(json.dumps(cfg.__dict__)), "teacher": {"model": "tk", "scores": "x"}},
                  "training")
