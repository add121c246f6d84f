"""Length groups: a training pass scored in groups of similar length gives the padded pass's scores and gradients."""

from __future__ import annotations

import threading

import pytest
import torch

from helpers import random_embeddings
from rankstudy.config import ConfigError, from_dict
from rankstudy.models import build_model
from rankstudy.models.base import Ranker
from rankstudy.models.idcm import IDCM
from rankstudy.models.tk import TK
from rankstudy.train.length_groups import (_shares, backward_in_length_groups, document_lengths, length_groups,
                                          score_in_length_groups)
from rankstudy.train.loop import TrainConfig


def padded_batch(lengths, seed=0):
    generator = torch.Generator().manual_seed(seed)
    documents = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        documents[row, :length] = torch.randint(2, 60, (length,), generator=generator)
    queries = torch.randint(2, 60, (len(lengths), 3), generator=generator)
    return queries, documents


class Recorder(Ranker):
    """Scores a document by the sum of its ids and records the document tensors it was called with."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, query, document):
        self.calls.append(document)
        return document.sum(1).float() + query[:, 0]


def test_document_lengths_end_after_the_last_token():
    documents = torch.tensor([[5, 0, 7, 0], [3, 3, 3, 3], [0, 0, 0, 0], [1, 0, 0, 0]])  # id 1 (OOV) is a token
    assert document_lengths(documents).tolist() == [3, 4, 0, 1]
    assert document_lengths(torch.zeros(2, 0, dtype=torch.long)).tolist() == [0, 0]


def test_groups_are_sorted_by_length_and_cut_to_their_longest():
    lengths = [9, 2, 7, 3, 8, 1, 5]
    queries, documents = padded_batch(lengths)
    model = Recorder()
    scores = score_in_length_groups(model, queries, documents, size=3)
    assert torch.equal(scores, model.__class__()(queries, documents))  # in the batch's order
    assert [call.shape for call in model.calls] == [(3, 3), (3, 8), (1, 9)]  # lengths 1 2 3 | 5 7 8 | 9


def test_one_call_without_groups():
    queries, documents = padded_batch([4, 2, 6])
    for size, model in ((0, Recorder()), (3, Recorder()), (1, type("Opted", (Recorder,), {"LENGTH_GROUPS": False})())):
        score_in_length_groups(model, queries, documents, size)
        assert len(model.calls) == 1 and model.calls[0] is documents


@pytest.mark.parametrize("name, settings", [("tk", {"layers": 1, "heads": 2, "ff_dim": 8}),
                                            ("conv_knrm", {"filters": 8})])
def test_scores_and_gradients_equal_the_padded_pass(name, settings):
    """The models mask padding, so cutting it changes neither a score nor the gradient (up to rounding)."""
    queries, documents = padded_batch([12, 3, 30, 7, 7, 18, 2, 25], seed=1)
    results = []
    for size in (0, 3):
        torch.manual_seed(0)
        model = build_model(name, settings, random_embeddings()).train()
        scores = score_in_length_groups(model, queries, documents, size)
        (scores * torch.arange(1.0, 9.0)).sum().backward()
        results.append((scores.detach(), [p.grad for p in model.parameters() if p.requires_grad]))
    (padded, padded_grads), (grouped, grouped_grads) = results
    assert torch.allclose(grouped, padded, atol=1e-6)
    assert all(torch.allclose(g, p, atol=1e-5) for g, p in zip(grouped_grads, padded_grads))


def test_idcm_keeps_its_pass_whole():  # its distillation loss is a mean over the pass
    assert not IDCM.LENGTH_GROUPS and TK.LENGTH_GROUPS


def test_config_rejects_a_negative_group():
    base = dict(loss="pairwise", max_steps=1, validate_every=1, patience=1, metric="RR@10", validation_depth=5)
    assert from_dict(TrainConfig, base, "training").length_group == 16
    with pytest.raises(ConfigError, match="length_group"):
        from_dict(TrainConfig, {**base, "length_group": -1}, "training")


# --- a training pass's length groups on separate threads (backward_in_length_groups) ----------

@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def threaded_pass(name, settings, queries, documents, size=3, seed=0):
    """(loss, parameter gradients, threads that ran the forward passes) of one pass with a weighted loss,
    added to gradients already there (as a micro-batch's)."""
    torch.manual_seed(seed)
    model = build_model(name, settings, random_embeddings()).train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    for parameter in parameters:
        parameter.grad = torch.full_like(parameter, 0.5)
    seen = set()
    model.register_forward_hook(lambda *_: seen.add((threading.get_ident(), torch.get_num_threads())))
    weights = torch.linspace(-1.0, 2.0, len(documents))
    loss = backward_in_length_groups(model, queries, documents, size, lambda scores: (scores * weights).sum())
    return loss, [p.grad.clone() for p in parameters], seen


MODELS = [("tk", {"layers": 1, "heads": 2, "ff_dim": 8}), ("tkl", {"layers": 1, "heads": 2, "ff_dim": 8}),
          ("knrm", {}), ("conv_knrm", {"filters": 8})]


@pytest.mark.parametrize("name, settings", MODELS)
def test_groups_on_two_threads_give_the_one_thread_loss_and_gradients(threads, name, settings):
    queries, documents = padded_batch([12, 3, 30, 7, 7, 18, 2, 25, 9, 14], seed=1)
    threads(1)
    one_loss, one_grads, one_seen = threaded_pass(name, settings, queries, documents)
    threads(2)
    two_loss, two_grads, two_seen = threaded_pass(name, settings, queries, documents)
    again = threaded_pass(name, settings, queries, documents)
    assert len(one_seen) == 1 and len(two_seen) == 2 and {count for _, count in two_seen} == {1}
    assert torch.equal(two_loss, one_loss)  # each group's forward pass ran on one torch thread, as here
    assert all(torch.allclose(two, one, rtol=1e-5, atol=1e-6) for two, one in zip(two_grads, one_grads))
    assert torch.equal(again[0], two_loss) and all(torch.equal(a, b) for a, b in zip(again[1], two_grads))
    assert torch.get_num_threads() == 2


def test_dropout_keeps_the_pass_on_the_callers_threads(threads):
    """Threads would draw the dropout masks in whatever order they run: the pass stays one."""
    queries, documents = padded_batch([12, 3, 30, 7, 7, 18, 2, 25], seed=1)
    threads(2)
    _, _, seen = threaded_pass("tk", {"layers": 1, "heads": 2, "ff_dim": 8, "dropout": 0.1}, queries, documents)
    assert seen == {(threading.get_ident(), 2)}


def test_threads_share_the_groups_by_their_work():
    documents = torch.ones(7, 40, dtype=torch.long)
    for row, length in enumerate([40, 2, 3, 38, 4, 39, 5]):
        documents[row, length:] = 0
    groups, order = length_groups(documents, 2)
    assert [(rows.tolist(), longest) for rows, longest in groups] == [([1, 2], 3), ([4, 6], 5), ([3, 5], 39),
                                                                      ([0], 40)]
    assert _shares(groups, 2) == [[2], [0, 1, 3]]  # work 78 | 6 + 10 + 40: the same split on every run
    assert _shares(groups, 8) == [[2], [3], [1], [0]]
