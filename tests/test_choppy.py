import math

import numpy as np
import pytest
import torch

from rankstudy.config import ConfigError, from_dict
from rankstudy.models.choppy import Choppy, ChoppyConfig, expected_metric_loss, predict_cuts
from rankstudy.truncation.choppy_train import predict, train_choppy

GAP = 0.05  # scores of relevant documents lie in (0.55, 1), the others in (0, 0.45)
SMALL = dict(d_model=32, heads=4, layers=2, ff_dim=64, dropout=0.0, max_length=32)


def small_model(seed: int = 0, **overrides) -> Choppy:
    torch.manual_seed(seed)
    return Choppy(ChoppyConfig(**{**SMALL, **overrides})).eval()


def toy_lists(n: int, rng: np.random.Generator, width: int = 20):
    """Lists whose relevant documents are exactly those scoring above 0.5; F1 tables from the labels."""
    scores = np.zeros((n, width), np.float32)
    tables = np.zeros((n, width), np.float32)
    lengths = rng.integers(8, width + 1, n)
    for q, length in enumerate(lengths):
        relevant = rng.integers(1, length)
        high = np.sort(rng.uniform(0.5 + GAP, 1.0, relevant))[::-1]
        low = np.sort(rng.uniform(0.0, 0.5 - GAP, length - relevant))[::-1]
        scores[q, :length] = np.concatenate([high, low])
        scores[q, length:] = scores[q, length - 1]
        labels = np.arange(length) < relevant
        hits = np.cumsum(labels)
        cut = np.arange(1, length + 1)
        tables[q, :length] = 2 * hits / (cut + labels.sum())  # F1 = 2·tp / (k + |relevant|)
        tables[q, length:] = tables[q, length - 1]
    return scores, tables, lengths


def test_config_validation():
    assert ChoppyConfig().d_model == 128 and ChoppyConfig().heads == 8 and ChoppyConfig().layers == 3
    with pytest.raises(ValueError, match="divisible"):
        ChoppyConfig(d_model=130, heads=8)
    with pytest.raises(ConfigError, match="unknown key"):
        from_dict(ChoppyConfig, {"d_modle": 64})
    with pytest.raises(ConfigError, match="dropout"):
        from_dict(ChoppyConfig, {"dropout": 1.5})


@pytest.mark.parametrize("normalize", [False, True])
def test_shapes_and_padding_mask(normalize):
    model = small_model(score_scaling="list" if normalize else "raw")
    scores = torch.rand(3, 10).sort(dim=1, descending=True).values
    lengths = torch.tensor([10, 6, 1])
    logits = model(scores, lengths)
    assert logits.shape == (3, 10)
    probabilities = torch.softmax(logits, dim=-1)
    assert torch.all(probabilities[1, 6:] == 0) and torch.all(probabilities[2, 1:] == 0)
    assert torch.allclose(probabilities.sum(-1), torch.ones(3))
    assert torch.all(torch.isinf(logits[1, 6:])) and torch.isfinite(logits[1, :6]).all()
    changed = scores.clone()
    changed[1, 6:] = torch.tensor([5.0, -3.0, 0.7, 100.0])
    changed[2, 1:] = -7.0
    assert torch.allclose(model(changed, lengths), logits, atol=1e-6)


def test_attention_across_ranks_not_across_batch():
    model = small_model()
    scores = torch.rand(2, 12).sort(dim=1, descending=True).values
    lengths = torch.tensor([12, 12])
    logits = model(scores, lengths)
    other_list = scores.clone()
    other_list[1] = torch.rand(12)
    assert torch.allclose(model(other_list, lengths)[0], logits[0], atol=1e-6)
    other_rank = scores.clone()
    other_rank[0, 7] += 0.3
    changed = model(other_rank, lengths)[0]
    assert not torch.allclose(changed[:7], logits[0, :7], atol=1e-4)  # earlier ranks see rank 8
    assert torch.allclose(model(other_rank, lengths)[1], logits[1], atol=1e-6)


def test_loss_on_hand_computed_example():
    logits = torch.tensor([[0.0, math.log(2.0), 9.0], [0.0, 0.0, 0.0]])
    tables = torch.tensor([[0.3, 0.6, float("nan")], [1.0, 0.0, 0.5]])
    lengths = torch.tensor([2, 3])
    # list 0: p = (1/3, 2/3), E[C] = 0.1 + 0.4 = 0.5 (position 3 is padding, its NaN ignored)
    # list 1: p = 1/3 each,   E[C] = 0.5
    loss = expected_metric_loss(logits, tables, lengths)
    assert loss.item() == pytest.approx(-0.5, abs=1e-6)
    assert Choppy.expected_metric_loss is expected_metric_loss


def test_gradient_step_moves_probability_to_best_cut():
    model = small_model()
    model.train()
    scores = torch.rand(4, 8).sort(dim=1, descending=True).values
    lengths = torch.tensor([8, 8, 6, 5])
    tables = torch.full((4, 8), 0.2)
    tables[:, 2] = 1.0  # cutting after rank 3 is best
    before = torch.softmax(model(scores, lengths), -1)[:, 2].detach()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    optimizer.zero_grad()
    expected_metric_loss(model(scores, lengths), tables, lengths).backward()
    optimizer.step()
    after = torch.softmax(model(scores, lengths), -1)[:, 2].detach()
    assert torch.all(after > before)


def test_predict_cuts_is_one_based_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0, float("-inf")], [5.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0]])
    assert predict_cuts(logits).tolist() == [2, 1, 4]


def dev_mean(model, data):
    scores, tables, lengths = data
    cuts, _ = predict(model, scores, lengths, "cpu")
    return tables[np.arange(len(cuts)), cuts - 1].mean()


@pytest.mark.slow  # trains Choppy to quality: minutes
def test_training_beats_fixed_cut_and_nears_oracle():
    torch.set_num_threads(min(2, torch.get_num_threads()))
    rng = np.random.default_rng(0)
    train, dev, test = toy_lists(2000, rng), toy_lists(200, rng), toy_lists(300, rng)
    cfg = ChoppyConfig(**{**SMALL, "dropout": 0.1, "lr": 5e-4, "batch_size": 16, "epochs": 20, "patience": 6})
    model, history = train_choppy(train, dev, cfg, seed=1, device="cpu")
    assert [row["epoch"] for row in history] == list(range(1, len(history) + 1))
    assert set(history[0]) == {"epoch", "train_loss", "dev_metric"}
    # the returned model is the dev-best one
    assert dev_mean(model, dev) == pytest.approx(max(row["dev_metric"] for row in history), abs=1e-6)

    scores, tables, lengths = test
    cuts, probabilities = predict(model, scores, lengths, "cpu")
    assert cuts.dtype == np.int64 and probabilities.shape == scores.shape
    assert np.all((cuts >= 1) & (cuts <= lengths))
    assert np.allclose(probabilities.sum(1), 1, atol=1e-5)
    assert np.all(probabilities[np.arange(scores.shape[1])[None, :] >= lengths[:, None]] == 0)
    rows = np.arange(len(cuts))
    learned = tables[rows, cuts - 1].mean()
    fixed = max(tables[rows, np.minimum(k, lengths) - 1].mean() for k in range(1, scores.shape[1] + 1))
    oracle = tables.max(1).mean()  # 1.0: a perfect cut exists for every list
    print(f"choppy {learned:.3f}, best fixed cut {fixed:.3f}, oracle {oracle:.3f}, epochs {len(history)}")
    assert learned > fixed + 0.1
    assert learned > 0.88 * oracle


def test_same_seed_same_model():
    rng = np.random.default_rng(1)
    train, dev = toy_lists(200, rng), toy_lists(50, rng)
    cfg = ChoppyConfig(**{**SMALL, "dropout": 0.1, "epochs": 2, "patience": 2})
    runs = [train_choppy(train, dev, cfg, seed=7, device="cpu") for _ in range(2)]
    assert runs[0][1] == runs[1][1]
    first, second = (predict(model, dev[0], dev[2], "cpu") for model, _ in runs)
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    other = train_choppy(train, dev, cfg, seed=8, device="cpu")[1]
    assert other != runs[0][1]


def offset_lists(n: int, rng: np.random.Generator, width: int = 30, relevant=None, level=None):
    """BM25-like lists: each at its own level (5 to 40) with a drop of 3 after its k relevant documents.

    The level says nothing about the cut; only the shape does (the failure of issue 19: a Choppy fed raw
    scores next to N(0, 1) positional embeddings learned one cut for every list)."""
    relevant = rng.integers(1, 16, n) if relevant is None else np.asarray(relevant)
    level = rng.uniform(5, 40, (n, 1)) if level is None else np.full((n, 1), level)
    scores = level + np.where(np.arange(width)[None, :] < relevant[:, None], 3.0, 0.0) + rng.normal(0, 0.3, (n, width))
    scores = -np.sort(-scores, axis=1)
    labels = np.arange(width)[None, :] < relevant[:, None]
    tables = 2 * np.cumsum(labels, 1) / (np.arange(1, width + 1)[None, :] + relevant[:, None])
    return scores.astype(np.float32), tables.astype(np.float32), np.full(n, width), relevant


@pytest.mark.slow  # trains Choppy to quality: minutes
def test_the_cut_follows_the_scores_not_the_rank():
    rng = np.random.default_rng(3)
    train, dev = offset_lists(600, rng)[:3], offset_lists(60, rng)[:3]
    cfg = ChoppyConfig(**{**SMALL, "lr": 1e-3, "batch_size": 8, "epochs": 15, "patience": 15})
    model, _ = train_choppy(train, dev, cfg, seed=1, device="cpu")
    scores, tables, lengths, relevant = offset_lists(200, np.random.default_rng(4))
    cuts, _ = predict(model, scores, lengths, "cpu")
    assert np.corrcoef(cuts, relevant)[0, 1] > 0.9
    # F1 at the cut: 0.85-0.92 depending on the CPU's kernels and threads (float sums differ), the
    # oracle's 1.0, a Choppy on raw scores beside N(0, 1) positions 0.80
    assert tables[np.arange(200), cuts - 1].mean() > 0.83
    # two lists of the same length and level, their best cuts 3 and 12: two different cuts, each
    # nearer its own list's best cut (how near depends on the CPU's arithmetic: 3 and 12 on one VM,
    # 6 for the first on another)
    pair, _, pair_lengths, _ = offset_lists(2, np.random.default_rng(5), relevant=[3, 12], level=20.0)
    pair_cuts, _ = predict(model, pair, pair_lengths, "cpu")
    assert pair_cuts[0] < pair_cuts[1]
    assert abs(pair_cuts[0] - 3) < abs(pair_cuts[0] - 12) and abs(pair_cuts[1] - 12) < abs(pair_cuts[1] - 3)
    # the same lists with their scores flattened: the cut no longer depends on them
    flat_cuts, _ = predict(model, np.full_like(scores, 20.0), lengths, "cpu")
    assert len(set(flat_cuts.tolist())) == 1


def test_training_scores_set_the_standardisation():
    model = small_model()
    scores = torch.tensor([[30.0, 20.0, 10.0, 10.0], [8.0, 6.0, 99.0, 99.0]])
    model.fit_score_scale(scores, torch.tensor([3, 2]))  # padding (99) is not a score
    real = torch.tensor([30.0, 20.0, 10.0, 8.0, 6.0])
    assert model.score_mean.item() == pytest.approx(real.mean().item())
    assert model.score_std.item() == pytest.approx(real.std().item())
    assert "score_mean" in model.state_dict()  # saved with the weights
