"""Training: example sampling, losses, optimizer groups, the loop (early stopping, best model, resume)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from helpers import FakeStore, random_embeddings
from toy_training import ToyRanker, config, fit, groups, make_toy, read_log, triples, validator
from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError
from rankstudy.models import build_model
from rankstudy.train import examples as ex
from rankstudy.train.losses import listwise_softmax_ce, margin_mse_loss, pairwise_margin_loss
from rankstudy.device import resolve_device
from rankstudy.train.loop import (BatchOrder, TrainConfig, TrainingInterrupted, batch_pass, make_validator, pick_queries,
                                  optimizer_groups, train)


@pytest.fixture(scope="module")
def toy():
    return make_toy()


# --- examples ------------------------------------------------------------------------------

QRELS = {"q1": {"a": 2, "b": 1, "c": 0}, "q2": {"x": 0}, "q3": {"p": 1}, "q4": {"z": 1}}
RUN = {"q1": [("a", 6.0), ("c", 5.0), ("d", 4.0), ("e", 3.0), ("b", 2.0), ("f", 1.0)],
       "q2": [("x", 1.0), ("y", 0.5)], "q3": [("p", 1.0)]}


def test_triples_sample_positives_and_top_negatives(caplog):
    with caplog.at_level(logging.INFO, logger="rankstudy.train.examples"):
        result = ex.make_triples(QRELS, RUN, rel_threshold=1, negatives_depth=4, per_query=4, seed=0)
    assert len(result) == 4 and len(set(result)) == 4  # 6 distinct pairs: drawn without replacement
    assert {q for q, _, _ in result} == {"q1"}
    assert {p for _, p, _ in result} <= {"a", "b"} and {n for _, _, n in result} <= {"c", "d", "e"}
    assert "skipped 3 of 4 queries: 1 without a positive, 2 without a negative in the top 4" in caplog.text

    many = ex.make_triples(QRELS, RUN, 1, 4, per_query=10, seed=0)  # more than the 6 pairs: with replacement
    assert len(many) == 10 and {(p, n) for _, p, n in many} <= {(p, n) for p in "ab" for n in "cde"}

    strict = ex.make_triples(QRELS, RUN, rel_threshold=2, negatives_depth=6, per_query=20, seed=0)
    assert {p for _, p, _ in strict} == {"a"} and {n for _, _, n in strict} == {"c", "d", "e", "b", "f"}


def test_sampling_is_determined_by_the_seed():
    assert ex.make_triples(QRELS, RUN, 1, 6, 3, seed=5) == ex.make_triples(QRELS, RUN, 1, 6, 3, seed=5)
    assert len({tuple(ex.make_triples(QRELS, RUN, 1, 6, 3, seed=s)) for s in range(10)}) > 1
    assert ex.make_groups(QRELS, RUN, 1, 6, 3, 2, seed=5) == ex.make_groups(QRELS, RUN, 1, 6, 3, 2, seed=5)


def test_judged_negatives_each_make_a_triple_first():
    """A query's documents judged 0 (given negatives) each make one triple, even beyond the candidates' depth;
    off (the default), the same draws as before."""
    qrels = {"q1": {"a": 2, "b": 1, "g": 0, "f": 0}}
    with_given = ex.make_triples(qrels, RUN, rel_threshold=1, negatives_depth=3, per_query=5, seed=0,
                                 judged_negatives=True)
    assert len(with_given) == 5
    assert [n for _, _, n in with_given[:2]] == ["f", "g"]  # f is below the depth, g not in the lists at all
    assert {n for _, _, n in with_given[2:]} <= {"c", "d", "f", "g"}
    assert ex.make_triples(QRELS, RUN, 1, 4, 4, seed=0, judged_negatives=False) == ex.make_triples(QRELS, RUN, 1, 4, 4,
                                                                                                   seed=0)


def test_negatives_from_training_documents_keeps_the_held_out_queries_documents_out():
    """A collection split by document: q1's relevant documents are a and b, q2's is x; y (a held-out query's, say)
    is judged by no training query and is never a negative, so no model learns to rank it last."""
    qrels = {"q1": {"a": 1, "b": 1}, "q2": {"x": 1}}
    run = {"q1": [("y", 9.0), ("x", 8.0), ("a", 7.0), ("b", 6.0)], "q2": [("y", 9.0), ("a", 8.0), ("x", 7.0)]}
    every = ex.make_triples(qrels, run, 1, 10, per_query=20, seed=0)
    assert {n for _, _, n in every} == {"x", "y", "a"}
    kept = ex.make_triples(qrels, run, 1, 10, per_query=20, seed=0, negatives_from="training_documents")
    assert {(q, n) for q, _, n in kept} == {("q1", "x"), ("q2", "a")}
    groups = ex.make_groups(qrels, run, 1, 10, per_query=3, negatives=2, seed=0, negatives_from="training_documents")
    assert all("y" not in negatives for _, _, negatives in groups)
    with pytest.raises(StudyError, match="negatives_from must be one of candidates, training_documents"):
        ex.make_triples(qrels, run, 1, 10, 2, seed=0, negatives_from="judged")


def test_a_query_subset_is_nested_and_seed_free():
    examples = [(f"q{i}", "p", "n") for i in range(20) for _ in range(2)]
    small, large = ex.query_subset(examples, 5), ex.query_subset(examples, 12)
    assert len({q for q, _, _ in small}) == 5 and len(small) == 10
    assert {q for q, _, _ in small} < {q for q, _, _ in large}
    with pytest.raises(StudyError, match="21 training queries asked for, the examples have 20"):
        ex.query_subset(examples, 21)


def test_groups_have_distinct_negatives_when_possible():
    result = ex.make_groups(QRELS, RUN, 1, 6, per_query=5, negatives=3, seed=0)
    assert len(result) == 5
    for qid, positive, negatives in result:
        assert qid == "q1" and positive in {"a", "b"}
        assert len(set(negatives)) == 3 and set(negatives) <= {"c", "d", "e", "f"}
    padded = ex.make_groups(QRELS, RUN, 1, 3, per_query=2, negatives=4, seed=0)  # only c, d: with replacement
    assert all(len(n) == 4 and set(n) <= {"c", "d"} for _, _, n in padded)


def test_examples_round_trip_and_malformed_lines(tmp_path):
    t = ex.make_triples(QRELS, RUN, 1, 6, 3, seed=0)
    ex.write_triples(tmp_path / "triples.tsv", t)
    assert ex.read_triples(tmp_path / "triples.tsv") == t
    g = ex.make_groups(QRELS, RUN, 1, 6, 3, 2, seed=0)
    ex.write_groups(tmp_path / "groups.tsv", g)
    assert ex.read_groups(tmp_path / "groups.tsv") == g
    assert (tmp_path / "groups.tsv").read_text().splitlines()[0].count(",") == 1

    bad = tmp_path / "bad.tsv"
    for reader, text, line, expected in [
        (ex.read_triples, "q1\ta\tb\nq1\ta\n", 2, "3 tab-separated ids"),
        (ex.read_triples, "q1\ta\tb c\n", 1, "3 tab-separated ids"),
        (ex.read_groups, "q1\ta\tb,c\nq1\ta\tb,,c\n", 2, "neg1,neg2"),
        (ex.read_groups, "q1\ta\tb,c\nq2\ta\tb\n", 2, "2 negatives, as on the first line"),
    ]:
        bad.write_text(text)
        with pytest.raises(FormatError) as error:
            reader(bad)
        assert error.value.path == str(bad) and error.value.line == line and expected in str(error.value)


# --- losses --------------------------------------------------------------------------------

def test_pairwise_margin_loss_values_and_gradients():
    pos = torch.tensor([3.0, 0.5, 1.0], requires_grad=True)
    neg = torch.tensor([1.0, 1.0, 1.0], requires_grad=True)
    loss = pairwise_margin_loss(pos, neg)
    assert loss.item() == pytest.approx((0 + 1.5 + 1.0) / 3)
    assert loss.item() == pytest.approx(nn.MarginRankingLoss(margin=1.0)(pos, neg, torch.ones(3)).item())
    loss.backward()
    assert pos.grad.tolist() == pytest.approx([0, -1 / 3, -1 / 3])  # raising a violated positive lowers the loss
    assert neg.grad.tolist() == pytest.approx([0, 1 / 3, 1 / 3])
    assert pairwise_margin_loss(pos, neg, margin=0.0).item() == pytest.approx(0.5 / 3)


def test_listwise_softmax_ce_values_and_gradients():
    scores = torch.tensor([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], requires_grad=True)
    loss = listwise_softmax_ce(scores)
    expected = (np.log(1 + 2 * np.exp(-2.0)) + np.log(3.0)) / 2
    assert loss.item() == pytest.approx(expected)
    assert loss.item() == pytest.approx(nn.functional.cross_entropy(scores, torch.zeros(2, dtype=torch.long)).item())
    loss.backward()
    assert (scores.grad[:, 0] < 0).all() and (scores.grad[:, 1:] > 0).all()
    with pytest.raises(ValueError):
        listwise_softmax_ce(torch.zeros(3, 1))


def test_margin_mse_loss_values_and_gradients():
    """Hofstätter et al. 2020, eq. 1: the student's margin regressed on the teacher's; an easy pair the
    student already orders still has a gradient toward the teacher's margin (the hinge's would be 0)."""
    pos = torch.tensor([3.0, 0.5], requires_grad=True)
    neg = torch.tensor([1.0, 1.0], requires_grad=True)
    teacher_pos, teacher_neg = torch.tensor([5.0, 1.0]), torch.tensor([0.0, 0.0])
    loss = margin_mse_loss(pos, neg, teacher_pos, teacher_neg)
    assert loss.item() == pytest.approx(((2.0 - 5.0) ** 2 + (-0.5 - 1.0) ** 2) / 2)
    assert pairwise_margin_loss(pos[:1], neg[:1]).item() == 0  # the first pair is easy for the hinge
    loss.backward()
    assert pos.grad.tolist() == pytest.approx([-3.0, -1.5]) and neg.grad.tolist() == pytest.approx([3.0, 1.5])
    assert margin_mse_loss(pos, neg, pos.detach() + 2, neg.detach() + 2).item() == 0  # margins agree
    with pytest.raises(ValueError, match="score shapes differ"):
        margin_mse_loss(pos, neg, teacher_pos[:1], teacher_neg[:1])


# --- config, device, optimizer groups -------------------------------------------------------

def test_train_config_validation():
    base = dict(loss="pairwise", max_steps=10, validate_every=5, patience=2, metric="nDCG@10", validation_depth=50)
    cfg = from_dict(TrainConfig, {**base, "learning_rates": {"embeddings": 1e-4, "default": 1e-3}})
    assert cfg.batch_size == 32 and cfg.grad_clip is None
    for bad, message in [({"loss": "hinge"}, "loss must be"), ({"learning_rates": {"embeddings": 1e-4}}, "'default'"),
                         ({"metric": "NoSuchMeasure@3"}, "unknown measure"), ({"patience": 0}, "patience"),
                         ({"grad_clip": -1.0}, "grad_clip"), ({"device": "tpu"}, "device"),
                         ({"learning_rates": {"default": "1e-3"}}, "learning_rates.default"),
                         ({"micro_batch": 0}, "micro_batch"),
                         ({"micro_batch": 4, "query_negatives": True}, "micro_batch and query_negatives"),
                         ({"loss": "margin_mse"}, "margin_mse needs a teacher"),
                         ({"teacher": {"model": "bi_encoder"}}, "a teacher needs loss margin_mse"),
                         ({"loss": "margin_mse", "teacher": {"encoder": "minilm"}}, "teacher must map either 'model'"),
                         ({"loss": "margin_mse", "teacher": {"model": "bi_encoder"}, "query_negatives": True},
                          "margin_mse and query_negatives")]:
        with pytest.raises(ConfigError, match=message):
            from_dict(TrainConfig, {**base, **bad}, "training")


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(StudyError):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(StudyError, match="CUDA is not available"):
            resolve_device("cuda")


def test_optimizer_groups(caplog):
    model = ToyRanker(vocab=50, dim=16)
    with caplog.at_level(logging.INFO, logger="rankstudy.train.loop"):
        groups = optimizer_groups(model, {"embeddings": 1e-4, "contextualizer": 5e-5, "default": 1e-3})
    assert [(g["name"], g["lr"]) for g in groups] == [("embeddings", 1e-4), ("default", 1e-3)]
    assert groups[0]["params"] == [model.embedding.weight] and groups[1]["params"] == list(model.out.parameters())
    assert "optimizer group embeddings: 800 parameters, lr 0.0001" in caplog.text
    assert "optimizer group default: 2 parameters, lr 0.001" in caplog.text
    optimizer = torch.optim.Adam(groups)
    assert [g["lr"] for g in optimizer.param_groups] == [1e-4, 1e-3]
    with pytest.raises(StudyError, match="no learning rate for optimizer group.*embeddings"):
        optimizer_groups(model, {"default": 1e-3})
    model.embedding.weight.requires_grad_(False)  # frozen parameters need no rate
    assert [g["name"] for g in optimizer_groups(model, {"default": 1e-3})] == ["default"]


def test_batch_order_is_a_function_of_seed_and_step():
    order = BatchOrder(10, 4, seed=3)
    steps = [order(k).tolist() for k in range(6)]
    assert steps == [BatchOrder(10, 4, seed=3)(k).tolist() for k in range(6)]
    assert all(len(s) == 4 for s in steps)
    assert len(set(steps[0] + steps[1])) == 8  # an epoch has no repeats (2 batches, remainder dropped)
    assert steps[:2] != steps[2:4]  # a new permutation per epoch
    assert BatchOrder(3, 8, seed=0)(5).tolist() != []  # fewer examples than a batch: one batch of all


# --- training loop -------------------------------------------------------------------------

@pytest.mark.parametrize("listwise", [False, True])
def test_query_negatives_score_each_positive_with_the_next_query(listwise):
    """A document-only scorer (score = its first token) cannot separate the swapped pairs: their
    term of the loss stays at the margin; the pairs are (q_{i+1}, d+_i)."""
    queries = FakeStore({"q1": [1], "q2": [2], "q3": [3]})
    docs = FakeStore({"p1": [5], "p2": [6], "p3": [7], "n1": [1], "n2": [1], "n3": [1]})
    seen = []

    def by_document(query, document):
        seen.append((query[:, 0].tolist(), document[:, 0].tolist()))
        return document[:, 0].float()

    batch = ([(q, f"p{q[1]}", (f"n{q[1]}",)) for q in ("q1", "q2", "q3")] if listwise
             else [(q, f"p{q[1]}", f"n{q[1]}") for q in ("q1", "q2", "q3")])

    def loss(cfg):
        query_ids, document_ids, loss_of = batch_pass(batch, listwise, queries, docs, cfg, torch.device("cpu"))
        return loss_of(by_document(query_ids, document_ids))

    plain, swapped = loss(config()), loss(config(query_negatives=True))
    queries_seen, documents_seen = seen[1]
    assert queries_seen[-3:] == [2, 3, 1] and documents_seen[-3:] == [5, 6, 7]
    if listwise:  # the swapped positive ties the positive: -log(e^s / (e^s + e^n + e^s)) > plain loss
        assert swapped.item() == pytest.approx(plain.item() + np.log(2), abs=0.01)
    else:  # margin 1 on a tie
        assert swapped.item() == pytest.approx(plain.item() + 1.0)



def trained_log(out_dir):
    """A run's log.csv without the untrained model's step-0 row."""
    log = read_log(out_dir / "log.csv")
    return log[log["step"] > 0].reset_index(drop=True)


def test_pairwise_training_learns_the_toy_problem(toy, tmp_path):
    cfg = config()
    before = validator(toy, cfg)(ToyRanker(init_seed=0))
    model, summary = fit(toy, cfg, tmp_path / "run")
    log = pd.read_csv(tmp_path / "run" / "log.csv")
    assert list(log.columns) == ["step", "loss", "metric", "best"]
    assert log["step"].tolist() == [0, 10, 20, 30, 40, 50, 60]
    # step 0: the untrained model's validation value (the learning audit's reference), no loss, no best
    assert log.loc[0, "metric"] == pytest.approx(before) and log.loc[0, ["loss", "best"]].isna().all()
    log = trained_log(tmp_path / "run")
    assert log["loss"].iloc[-1] < 0.5 * log["loss"].iloc[0]
    assert summary["best_metric"] > before + 0.3 and summary["best_metric"] >= 0.85
    assert summary["steps"] == 60 and not summary["stopped_early"]
    assert validator(toy, cfg)(model) == summary["best_metric"]  # the model holds the best state on return
    assert {p.name for p in (tmp_path / "run").iterdir()} == {"model.pt", "best.pt", "checkpoint.pt", "log.csv", "config.json"}


def test_listwise_training_learns_the_toy_problem(toy, tmp_path):
    cfg = config(loss="listwise", batch_size=8)
    before = validator(toy, cfg)(ToyRanker(init_seed=0))
    _, summary = fit(toy, cfg, tmp_path / "run", examples=groups(toy))
    log = trained_log(tmp_path / "run")
    assert log["loss"].iloc[-1] < 0.5 * log["loss"].iloc[0]
    assert summary["best_metric"] > before + 0.3
    with pytest.raises(StudyError, match="listwise needs groups"):
        fit(toy, cfg, tmp_path / "wrong", examples=triples(toy))


class TopicTeacher(nn.Module):
    """The toy problem's oracle: score 4 for a document of the query's topic (token 12+t for query token 2+t),
    0 otherwise; ``sign`` -1 scores the other way round."""

    def __init__(self, sign: float = 1.0):
        super().__init__()
        self.sign = nn.Parameter(torch.tensor(sign))  # a parameter, to check that the teacher stays frozen

    def forward(self, query, document):
        return self.sign * 4.0 * (document[:, 0] == query[:, 0] + 10).float()


def test_margin_mse_training_learns_the_teachers_margins(toy, tmp_path):
    """The model learns what the teacher's margins say, not the labels alone: taught by the oracle it learns
    the toy problem; taught by the reversed oracle, on the same triples, it ranks the relevant documents
    below its untrained self. The teacher is not trained."""
    cfg = config(loss="margin_mse", teacher={"model": "toy"})
    before = validator(toy, cfg)(ToyRanker(init_seed=0))
    teacher = TopicTeacher()
    _, taught = fit(toy, cfg, tmp_path / "oracle", teacher=teacher)
    log = trained_log(tmp_path / "oracle")
    assert log["loss"].iloc[-1] < 0.2 * log["loss"].iloc[0]
    assert taught["best_metric"] > before + 0.3
    assert teacher.sign.item() == 1.0 and not teacher.sign.requires_grad and not teacher.training

    fit(toy, config(loss="margin_mse", teacher={"model": "toy"}, patience=1), tmp_path / "reversed",
        teacher=TopicTeacher(sign=-1.0))
    assert read_log(tmp_path / "reversed" / "log.csv")["metric"].iloc[-1] < before - 0.2
    with pytest.raises(StudyError, match="loss margin_mse needs teacher model"):
        fit(toy, cfg, tmp_path / "none")
    with pytest.raises(StudyError, match="loss pairwise takes no teacher model"):
        fit(toy, config(), tmp_path / "extra", teacher=teacher)


@pytest.mark.parametrize("listwise", [False, True])
def test_micro_batches_take_the_same_steps_as_one_pass(toy, tmp_path, listwise):
    """Gradient accumulation over micro-batches of 3 (the last one shorter) is the whole batch's step:
    the same losses and the same trained weights, up to float summation order (without dropout,
    whose masks are drawn per pass)."""
    settings = dict(loss="listwise", batch_size=8) if listwise else {}
    data = groups(toy) if listwise else triples(toy)
    models = {}
    for name, micro_batch in (("whole", None), ("micro", 3)):
        cfg = config(**settings, micro_batch=micro_batch)
        models[name] = ToyRanker(init_seed=0)
        models[name].dropout.p = 0.0
        train(models[name], data, toy["queries"], toy["docs"], validator(toy, cfg), cfg, tmp_path / name, seed=7)
    whole, micro = models["whole"], models["micro"]
    losses = [trained_log(tmp_path / name)["loss"].to_numpy() for name in ("whole", "micro")]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    assert losses[0][-1] < 0.5 * losses[0][0]  # the runs learn: the comparison is not of two idle models
    for name, value in whole.state_dict().items():
        if listwise and name == "out.bias":  # softmax is shift-invariant: its gradient is float noise, which Adam scales up
            continue
        torch.testing.assert_close(micro.state_dict()[name], value, rtol=1e-4, atol=1e-5)


def test_tk_trains_on_two_threads_as_on_one(toy, tmp_path):
    """With two torch threads a pass's length groups run forward and backward on separate threads
    (train.length_groups): the same run twice gives the same weights, a one-thread run's up to rounding."""
    weights, losses, before = {}, {}, torch.get_num_threads()
    try:
        for name, count in (("one", 1), ("two", 2), ("again", 2)):
            torch.set_num_threads(count)
            torch.manual_seed(0)
            model = build_model("tk", {"layers": 1, "heads": 2, "ff_dim": 8}, random_embeddings(vocab=50))
            cfg = config(max_steps=20, length_group=8,  # batches of 16 pairs: 4 groups of 8 documents
                         learning_rates={"embeddings": 0.02, "contextualizer": 0.01, "default": 0.01})
            train(model, triples(toy), toy["queries"], toy["docs"], validator(toy, cfg), cfg, tmp_path / name, seed=7)
            weights[name], losses[name] = model.state_dict(), trained_log(tmp_path / name)["loss"].to_numpy()
    finally:
        torch.set_num_threads(before)
    assert losses["one"][-1] < 0.8 * losses["one"][0]  # it learns: not a comparison of idle models
    np.testing.assert_allclose(losses["two"], losses["one"], rtol=1e-4)
    np.testing.assert_array_equal(losses["again"], losses["two"])
    for name, value in weights["one"].items():
        assert torch.equal(weights["again"][name], weights["two"][name])
        two = weights["two"][name]
        if name.endswith("in_proj_bias"):  # the keys' bias shifts every attention logit alike: its gradient is
            two, value = two[torch.arange(48) // 16 != 1], value[torch.arange(48) // 16 != 1]  # noise Adam scales
        torch.testing.assert_close(two, value, rtol=1e-4, atol=1e-5)


def test_early_stopping_keeps_the_best_model(toy, tmp_path):
    # the untrained model validates highest (0.8): it is logged, never kept, and no reference for patience
    values, snapshots = iter([0.8, 0.5, 0.7, 0.6, 0.65, 0.9]), []

    def validate(model):
        assert not model.training and not torch.is_grad_enabled()
        snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        return next(values)

    cfg = config(max_steps=100, validate_every=5, patience=2)
    model = ToyRanker()
    summary = train(model, triples(toy), toy["queries"], toy["docs"], validate, cfg, tmp_path, seed=1)
    assert summary == {"metric": "RR@10", "best_metric": 0.7, "best_step": 10, "steps": 20, "stopped_early": True}
    log = trained_log(tmp_path)
    assert log["step"].tolist() == [5, 10, 15, 20] and log["best"].tolist() == [0.5, 0.7, 0.7, 0.7]
    best = torch.load(tmp_path / "model.pt")
    assert all(torch.equal(best[k], snapshots[2][k]) for k in best)
    assert not torch.equal(best["embedding.weight"], snapshots[4]["embedding.weight"])
    assert all(torch.equal(v, best[k]) for k, v in model.state_dict().items())


def test_resume_after_a_kill_gives_the_same_result(toy, tmp_path):
    cfg = config(max_steps=50, validate_every=10, patience=2)
    _, full = fit(toy, cfg, tmp_path / "full")

    killed = tmp_path / "killed"
    with pytest.raises(TrainingInterrupted):
        fit(toy, cfg, killed, kill_after_step=20)
    assert read_log(killed / "log.csv")["step"].tolist() == [0, 10, 20]
    with pytest.raises(TrainingInterrupted):  # killed between checkpoints: steps 21..25 are redone
        fit(toy, cfg, killed, init_seed=99, kill_after_step=25)
    _, resumed = fit(toy, cfg, killed, init_seed=99)  # the checkpoint replaces the fresh weights

    assert resumed == full
    assert (killed / "log.csv").read_bytes() == (tmp_path / "full" / "log.csv").read_bytes()
    a, b = torch.load(tmp_path / "full" / "model.pt"), torch.load(killed / "model.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    model, again = fit(toy, cfg, tmp_path / "full", init_seed=5)  # finished: nothing to do, best state loaded
    assert again == full and torch.equal(model.embedding.weight, a["embedding.weight"])


def test_resume_with_another_config_starts_afresh(toy, tmp_path):
    (tmp_path / "config.json").write_text('{"model_config": {"dim": 16}}')  # written by the caller: kept
    with pytest.raises(TrainingInterrupted):
        fit(toy, config(), tmp_path, kill_after_step=10)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_config"] == {"dim": 16} and saved["seed"] == 7 and saved["train"]["batch_size"] == 16
    # another config (or other recorded inputs): the checkpoint is not resumed, training starts over
    _, summary = fit(toy, config(batch_size=8), tmp_path, recorded={"inputs": {"examples": "b"}})
    _, fresh = fit(toy, config(batch_size=8), tmp_path / "fresh", recorded={"inputs": {"examples": "b"}})
    assert summary == fresh and read_log(tmp_path / "log.csv").equals(read_log(tmp_path / "fresh" / "log.csv"))
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["train"]["batch_size"] == 8 and saved["inputs"] == {"examples": "b"}


def test_stale_temporaries_are_removed_on_resume(toy, tmp_path):
    with pytest.raises(TrainingInterrupted):
        fit(toy, config(), tmp_path, kill_after_step=10)
    (tmp_path / ".checkpoint.pt.abc123.tmp").write_bytes(b"half a zip")
    fit(toy, config(), tmp_path)
    assert not list(tmp_path.glob(".*.tmp"))


def test_validation_on_a_subset_averages_over_the_subset(toy):
    """A subset of N queries is scored as a mean over those N, not over every judged query (the
    evaluation counts judged queries missing from the run as 0)."""
    model = ToyRanker()
    per_query = {}
    for qid in sorted(toy["runs"]["val"]):
        one = make_validator({qid: toy["runs"]["val"][qid]}, {qid: toy["qrels"]["val"][qid]}, toy["queries"],
                             toy["docs"], config())
        per_query[qid] = one(model)
    first = sorted(per_query)[:3]
    subset = make_validator(toy["runs"]["val"], toy["qrels"]["val"], toy["queries"], toy["docs"],
                            config(validation_queries=3))
    assert subset(model) == pytest.approx(np.mean([per_query[q] for q in first]))
    assert max(per_query[q] for q in first) > 0  # the check is not 0 == 0
    # spread: the queries at evenly spaced places of the id order, the first and a later one of five
    ids = sorted(per_query)
    spread = make_validator(toy["runs"]["val"], toy["qrels"]["val"], toy["queries"], toy["docs"],
                            config(validation_queries=2, validation_pick="spread"))
    assert spread(model) == pytest.approx(np.mean([per_query[ids[0]], per_query[ids[len(ids) // 2]]]))


def test_spread_validation_queries_cover_the_whole_id_order():
    items = [(f"q{i:02d}", None) for i in range(10)]
    assert [qid for qid, _ in pick_queries(items, 3, "first")] == ["q00", "q01", "q02"]
    assert [qid for qid, _ in pick_queries(items, 3, "spread")] == ["q00", "q03", "q06"]
    assert pick_queries(items, 20, "spread") == items
    with pytest.raises(ValueError, match="validation_pick must be first or spread"):
        TrainConfig(loss="pairwise", max_steps=1, validate_every=1, patience=1, metric="RR@10", validation_depth=5,
                    validation_pick="random")
