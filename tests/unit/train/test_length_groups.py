"""Length groups: a training pass scored in groups of similar length gives the padded pass's scores and gradients."""

from __future__ import annotations

import pytest
import torch

from helpers import random_embeddings
from rankstudy.config import ConfigError, from_dict
from rankstudy.models import build_model
from rankstudy.models.base import Ranker
from rankstudy.models.idcm import IDCM
from rankstudy.models.tk import TK
from rankstudy.train.length_groups import document_lengths, score_in_length_groups
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
