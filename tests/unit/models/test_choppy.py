"""Choppy (rankstudy.models.choppy) against its equations: shapes and masks, attention across ranks, the
expected-metric loss by hand, a gradient step, the score standardisation, determinism."""

import math

import numpy as np
import pytest
import torch

from rankstudy.config import ConfigError, from_dict
from rankstudy.models.choppy import Choppy, ChoppyConfig, expected_metric_loss, predict_cuts
from rankstudy.truncation.choppy_train import predict, train_choppy

from helpers import SMALL_CHOPPY as SMALL
from helpers import toy_lists



def small_model(seed: int = 0, **overrides) -> Choppy:
    torch.manual_seed(seed)
    return Choppy(ChoppyConfig(**{**SMALL, **overrides})).eval()


def test_config_validation():
    assert ChoppyConfig(max_length=300).d_model == 128 and ChoppyConfig(max_length=300).heads == 8
    with pytest.raises(TypeError, match="max_length"):  # the study's n: no default of its own
        ChoppyConfig()
    with pytest.raises(ValueError, match="divisible"):
        ChoppyConfig(d_model=130, heads=8, max_length=300)
    with pytest.raises(ConfigError, match="unknown key"):
        from_dict(ChoppyConfig, {"d_modle": 64})
    with pytest.raises(ConfigError, match="dropout"):
        from_dict(ChoppyConfig, {"dropout": 1.5, "max_length": 300})
    with pytest.raises(ValueError, match="ff_layers"):
        ChoppyConfig(ff_layers=3, max_length=300)
    with pytest.raises(ValueError, match="loss must be one of"):
        ChoppyConfig(loss="hinge", max_length=300)
    with pytest.raises(ValueError, match="raml_temperature"):
        ChoppyConfig(loss="raml", raml_temperature=0, max_length=300)


@pytest.mark.parametrize("ff_layers", [1, 2])
@pytest.mark.parametrize("normalize", [False, True])
def test_shapes_and_padding_mask(normalize, ff_layers):
    model = small_model(score_scaling="list" if normalize else "raw", ff_layers=ff_layers)
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


@pytest.mark.parametrize("ff_layers", [1, 2])
def test_attention_across_ranks_not_across_batch(ff_layers):
    model = small_model(ff_layers=ff_layers)
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


def test_the_papers_layer_by_its_equations():
    """Sec. 3.1: A = LayerNorm(X + MultiAttn(X)), O = LayerNorm(A + ReLU(A W_f + b_f)), W_f d x d: one layer,
    no hidden width (ff_layers 1); padded ranks are no keys."""
    model = small_model(ff_layers=1, layers=1)
    layer = model.layers[0]
    assert layer.feed_forward.weight.shape == (32, 32) and not hasattr(model, "encoder")
    x = torch.randn(2, 6, 32)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    heads, width = 4, 8
    w_q, w_k, w_v = layer.self_attn.in_proj_weight.split(32)
    b_q, b_k, b_v = layer.self_attn.in_proj_bias.split(32)

    def split_heads(t):
        return t.view(2, 6, heads, width).transpose(1, 2)

    q, k, v = split_heads(x @ w_q.T + b_q), split_heads(x @ w_k.T + b_k), split_heads(x @ w_v.T + b_v)
    weights = torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(width)).masked_fill(padding[:, None, None, :],
                                                                                        float("-inf")), dim=-1)
    attended = layer.self_attn.out_proj((weights @ v).transpose(1, 2).reshape(2, 6, 32))
    a = layer.norm1(x + attended)
    expected = layer.norm2(a + torch.relu(layer.feed_forward(a)))
    assert torch.allclose(layer(x, padding), expected, atol=1e-5)


def test_prediction_without_the_attention_fast_path_gives_the_same_cuts():
    """predict() leaves PyTorch's inference fast path (slow with a padding mask on a CPU) and restores it."""
    rng = np.random.default_rng(3)
    scores, _, lengths = toy_lists(40, rng)
    for ff_layers in (1, 2):
        model = small_model(ff_layers=ff_layers)
        cuts, probabilities = predict(model, scores, lengths, "cpu")
        with torch.no_grad():
            fast = torch.softmax(model(torch.as_tensor(scores), torch.as_tensor(lengths)), -1).numpy()
        assert torch.backends.mha.get_fastpath_enabled()
        assert np.allclose(probabilities, fast, atol=1e-5) and np.array_equal(cuts, fast.argmax(-1) + 1)


def test_loss_on_hand_computed_example():
    logits = torch.tensor([[0.0, math.log(2.0), 9.0], [0.0, 0.0, 0.0]])
    tables = torch.tensor([[0.3, 0.6, float("nan")], [1.0, 0.0, 0.5]])
    lengths = torch.tensor([2, 3])
    # list 0: p = (1/3, 2/3), E[C] = 0.1 + 0.4 = 0.5 (position 3 is padding, its NaN ignored)
    # list 1: p = 1/3 each,   E[C] = 0.5
    loss = expected_metric_loss(logits, tables, lengths)
    assert loss.item() == pytest.approx(-0.5, abs=1e-6)
    assert Choppy.expected_metric_loss is expected_metric_loss


def test_raml_loss_on_hand_computed_example():
    logits = torch.tensor([[0.0, math.log(2.0), 9.0]])
    tables = torch.tensor([[0.3, 0.6, float("nan")]])
    # q = softmax((0.3, 0.6) / 0.5) over the 2 real positions, p = (1/3, 2/3); L = -(q1 log p1 + q2 log p2)
    q_second = math.exp(1.2) / (math.exp(0.6) + math.exp(1.2))
    expected = -((1 - q_second) * math.log(1 / 3) + q_second * math.log(2 / 3))
    loss = Choppy.raml_loss(logits, tables, torch.tensor([2]), temperature=0.5)
    assert loss.item() == pytest.approx(expected, abs=1e-6)


def test_raml_gradient_survives_where_the_expected_metric_gradient_vanishes():
    # all probability on the worst cut: the expected metric's gradient p_i (C_i - E[C]) is ~0 everywhere,
    # RAML's is p - q, which points to the list's best cut
    logits = torch.tensor([[20.0, 0.0, 0.0]], requires_grad=True)
    tables, lengths = torch.tensor([[-5.0, 1.0, 0.0]]), torch.tensor([3])
    expected_metric_loss(logits, tables, lengths).backward()
    assert logits.grad.abs().max().item() < 1e-6
    logits.grad = None
    Choppy.raml_loss(logits, tables, lengths, temperature=0.95).backward()
    target = torch.softmax(tables[0] / 0.95, -1)
    assert torch.allclose(logits.grad[0], torch.softmax(logits[0].detach(), -1) - target, atol=1e-6)
    assert logits.grad[0].argmin().item() == 1


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


def test_training_scores_set_the_standardisation():
    model = small_model()
    scores = torch.tensor([[30.0, 20.0, 10.0, 10.0], [8.0, 6.0, 99.0, 99.0]])
    model.fit_score_scale(scores, torch.tensor([3, 2]))  # padding (99) is not a score
    real = torch.tensor([30.0, 20.0, 10.0, 8.0, 6.0])
    assert model.score_mean.item() == pytest.approx(real.mean().item())
    assert model.score_std.item() == pytest.approx(real.std().item())
    assert "score_mean" in model.state_dict()  # saved with the weights
