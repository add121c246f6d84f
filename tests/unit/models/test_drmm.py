"""DRMM (Guo et al., CIKM 2016) against its equations on small hand-made inputs, and a toy training."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import single_thread
from rankstudy.config import ConfigError
from rankstudy.models import build_model
from rankstudy.models.drmm import DRMM, DRMMConfig
from rankstudy.train.losses import pairwise_margin_loss
from rankstudy.train.loop import train
from helpers import random_embeddings, unit_vectors
from toy_training import config as train_config
from toy_training import make_toy, triples, validator


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield


def angles(*cosines):
    """Angles (degrees) of 2-d unit vectors whose cosine with the vector at 0° is each value."""
    return [math.degrees(math.acos(c)) for c in cosines]


# The paper's example (section 3.1): query term "car" against (car, rent, truck, bump, injunction,
# runway) with local interactions (1, 0.2, 0.7, 0.3, −0.1, 0.1) and bins {[−1, −0.5), [−0.5, 0),
# [0, 0.5), [0.5, 1), [1, 1]} gives the count histogram [0, 1, 3, 1, 1].
PAPER_COSINES = (0.2, 0.7, 0.3, -0.1, 0.1)
PAPER_COUNTS = [0.0, 1.0, 3.0, 1.0, 1.0]


def paper_example(**settings):
    embeddings = unit_vectors(angles(1.0, *PAPER_COSINES))  # id 2 = "car" at 0°, ids 3..7 the others
    embeddings[1] = embeddings[2]  # an OOV vector equal to "car": only the masks keep it from matching
    return DRMM(DRMMConfig(bins=5, **settings), embeddings).eval()


@pytest.mark.parametrize("histogram, expected", [
    ("ch", PAPER_COUNTS),
    ("lch", [math.log(c + 1) for c in PAPER_COUNTS]),
    ("nh", [c / 6 for c in PAPER_COUNTS]),
])
def test_histogram_of_the_papers_example(histogram, expected):
    model = paper_example(histogram=histogram)
    query, document = torch.tensor([[2]]), torch.tensor([[2, 3, 4, 5, 6, 7]])
    assert model.histograms(query, document)[0, 0].tolist() == pytest.approx(expected, abs=1e-6)
    # padding and OOV fall in no bin (not even NH's denominator); OOV and padding query terms get empty rows
    noisy = model.histograms(torch.tensor([[2, 1, 0]]), torch.tensor([[1, 2, 3, 4, 0, 5, 1, 6, 7, 0, 0]]))
    assert noisy[0, 0].tolist() == pytest.approx(expected, abs=1e-6)
    assert noisy[0, 1:].abs().sum() == 0


def test_thirty_bins_and_exact_matches_by_id():
    # ids 2 (0°), 3 (cos .5), 4 (cos .95), 5 (cos −1), 6 (the vector of 2 under another id), 7 (cos −.3)
    embeddings = unit_vectors(angles(1.0, 0.5, 0.95, -1.0, 1.0, -0.3))
    model = DRMM(DRMMConfig(histogram="ch"), embeddings).eval()
    assert model.config.bins == 30
    counts = model.histograms(torch.tensor([[2]]), torch.tensor([[2, 3, 4, 5, 6, 7, 2]]))[0, 0]
    expected = torch.zeros(30)
    # bin ⌊(v + 1) / 2 · 29⌋ for v in [−1, 1): 0.5 -> 21, 0.95 -> 28, −1 -> 0, −0.3 -> 10; a different
    # term with cosine 1 goes to the top non-exact bin (28); the two exact matches to bin 29
    for bin_, count in ((21, 1), (28, 2), (0, 1), (10, 1), (29, 2)):
        expected[bin_] = count
    assert counts.tolist() == expected.tolist()
    lch = DRMM(DRMMConfig(), embeddings).eval().histograms(torch.tensor([[2]]), torch.tensor([[2, 3, 4, 5, 6, 7, 2]]))
    assert lch[0, 0].tolist() == pytest.approx(torch.log1p(expected).tolist())


def test_score_follows_equations_1_and_2():
    """s = Σ_i g_i tanh(w · h_i + b) with one layer, g = softmax(w_g · idf) over the real terms."""
    embeddings = unit_vectors(angles(1.0, *PAPER_COSINES))
    idf = np.zeros(len(embeddings), dtype=np.float32)
    idf[2], idf[4] = 2.0, 0.5
    model = DRMM(DRMMConfig(bins=5, hidden_sizes=[1], gate_init=1.5), embeddings, idf=idf).eval()
    w = np.array([0.3, -0.2, 0.5, 0.1, 0.7], dtype=np.float32)
    with torch.no_grad():
        model.matching[0].weight.copy_(torch.from_numpy(w).view(1, 5))
        model.matching[0].bias.fill_(-0.25)
    query, document = torch.tensor([[2, 4, 1, 0]]), torch.tensor([[2, 3, 4, 5, 6, 7, 0]])
    # term 2 ("car"): counts [0, 1, 3, 1, 1]; term 4 (cos .7 to car, at 45.57°) against the document
    cos4 = [math.cos(math.radians(angles(0.7)[0] - a)) for a in angles(1.0, *PAPER_COSINES)]
    counts4 = np.zeros(5)
    for position, c in enumerate(cos4):
        counts4[4 if position == 2 else min(int(math.floor((c + 1) / 2 * 4)), 3)] += 1
    z = [math.tanh(float(w @ np.log1p(counts)) - 0.25) for counts in (np.array(PAPER_COUNTS), counts4)]
    g = np.exp(1.5 * np.array([2.0, 0.5]))
    g /= g.sum()
    assert model(query, document).item() == pytest.approx(float(g @ z), rel=1e-5)


def test_gates_sum_to_one_over_real_terms_and_follow_idf():
    idf = np.linspace(0.1, 5.0, 60).astype(np.float32)  # idf grows with the id
    model = DRMM(DRMMConfig(), random_embeddings(), idf=idf)
    assert model.gate.weight.item() == 1.0
    query = torch.tensor([[30, 7, 1, 45, 0, 0], [9, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    gates = model.gates(query).detach()
    assert gates[0].sum().item() == pytest.approx(1.0) and gates[1].sum().item() == pytest.approx(1.0)
    assert gates[0, 2] == 0 and torch.all(gates[:, 4:] == 0)  # OOV and padding are out of the softmax
    assert gates[0, 3] > gates[0, 0] > gates[0, 1] > 0  # the order of the idfs: 45 > 30 > 7
    expected = torch.softmax(torch.tensor(idf[[30, 7, 45]]), 0)
    assert gates[0, [0, 1, 3]].tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    assert torch.all(gates[2] == 0)  # no matchable term: no gate, score 0, finite gradients
    scores = model(query, torch.randint(2, 60, (3, 8), generator=torch.Generator().manual_seed(0)))
    assert scores[2].item() == 0.0
    scores.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_idf_is_saved_with_the_model():
    idf = np.linspace(0.1, 5.0, 60).astype(np.float32)
    trained = DRMM(DRMMConfig(), random_embeddings(), idf=idf)
    loaded = DRMM(DRMMConfig(), random_embeddings())  # as load_trained builds it: no idf
    loaded.load_state_dict(trained.state_dict())
    query = torch.tensor([[30, 7, 45]])
    assert torch.equal(loaded.gates(query), trained.gates(query))
    with pytest.raises(ValueError, match="idf has shape"):
        DRMM(DRMMConfig(), random_embeddings(), idf=idf[:10])


SETTINGS = [{}, {"histogram": "ch"}, {"histogram": "nh", "bins": 5}, {"gating": "tv", "hidden_sizes": [8, 4, 1]}]


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("lq, ld", [(1, 1), (3, 7), (9, 40)])
def test_scores_have_batch_shape(settings, lq, ld):
    torch.manual_seed(0)
    model = build_model("drmm", settings, random_embeddings(), idf=np.linspace(0, 3, 60)).eval()
    generator = torch.Generator().manual_seed(lq * 100 + ld)
    query, document = torch.randint(1, 60, (4, lq), generator=generator), torch.randint(0, 60, (4, ld), generator=generator)
    scores = model(query, document)
    assert scores.shape == (4,) and torch.isfinite(scores).all()


@pytest.mark.parametrize("settings", SETTINGS)
def test_padding_and_oov_do_not_change_scores(settings):
    torch.manual_seed(0)
    embeddings = random_embeddings()
    embeddings[1] = embeddings[9]  # OOV shares a query term's vector: the masks must keep it out
    model = build_model("drmm", settings, embeddings, idf=np.linspace(0, 3, 60)).eval()
    query, document = torch.tensor([[5, 9, 12]]), torch.tensor([[20, 21, 22, 23, 9, 30]])
    short = model(query, document)
    padded = model(torch.tensor([[5, 9, 12, 0, 0]]), torch.tensor([[20, 21, 22, 23, 9, 30] + [0] * 14]))
    assert torch.allclose(short, padded, atol=1e-6)
    batch = model(torch.tensor([[5, 9, 12, 0], [7, 8, 10, 11]]),
                  torch.tensor([[20, 21, 22, 23, 9, 30] + [0] * 10, list(range(30, 46))]))
    assert torch.allclose(batch[0], short[0], atol=1e-6)
    # OOV tokens neither count nor match, in the document or the query
    with_oov = model(torch.tensor([[5, 1, 9, 12]]), torch.tensor([[20, 1, 21, 22, 23, 9, 1, 30]]))
    assert torch.allclose(with_oov, short, atol=1e-6)


def test_no_gradient_reaches_the_embeddings_through_histograms():
    model = build_model("drmm", {"train_embeddings": True}, random_embeddings()).train()
    scores = model(torch.tensor([[5, 9, 12], [7, 1, 0]]), torch.tensor([[20, 5, 22, 9, 0], [7, 8, 1, 40, 41]]))
    scores.sum().backward()
    assert model.embedding.weight.grad is None
    assert model.gate.weight.grad is not None and model.matching[0].weight.grad.abs().sum() > 0
    tv = build_model("drmm", {"train_embeddings": True, "gating": "tv"}, random_embeddings()).train()
    tv(torch.tensor([[5, 9, 12]]), torch.tensor([[20, 5, 22, 9]])).sum().backward()
    assert tv.embedding.weight.grad.abs().sum() > 0  # term-vector gating does move them
    assert not build_model("drmm", {}, random_embeddings()).embedding.weight.requires_grad  # default: frozen
    assert DRMM.NEEDS_IDF and set(DRMM.PARAM_GROUPS) == {"embedding."}


@pytest.mark.parametrize("settings, message", [
    ({"bins": 1}, "bins"),
    ({"histogram": "log"}, "histogram"),
    ({"gating": "uniform"}, "gating"),
    ({"hidden_sizes": [5, 2]}, "last of hidden_sizes"),
    ({"hidden_sizes": []}, "hidden_sizes"),
    ({"gate_init": float("nan")}, "gate_init"),
    ({"bin": 30}, "unknown key"),
])
def test_bad_settings_fail_clearly(settings, message):
    with pytest.raises(ConfigError, match=message):
        build_model("drmm", settings, random_embeddings())


def toy_embeddings(dim=32, seed=0):
    """make_toy's vocabulary (ids < 50): query token 2+t and its topic's document token 12+t have
    cosine ≈ 0.9; everything else random (|cos| mostly < 0.4 in 32 dimensions)."""
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(50, dim))
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    for t in range(10):
        noise = rng.normal(size=dim)
        noise -= noise @ matrix[2 + t] * matrix[2 + t]
        matrix[12 + t] = 0.9 * matrix[2 + t] + math.sqrt(1 - 0.81) * noise / np.linalg.norm(noise)
    matrix[:2] = 0
    return matrix.astype(np.float32)


def mean_loss(model, toy, examples):
    qids, positives, negatives = zip(*examples)
    query = torch.from_numpy(toy["queries"].batch(list(qids), 5))
    pos = torch.from_numpy(toy["docs"].batch(list(positives), 8))
    neg = torch.from_numpy(toy["docs"].batch(list(negatives), 8))
    with torch.no_grad():
        return pairwise_margin_loss(model.eval()(query, pos), model(query, neg)).item()


def test_training_learns_the_toy_problem(tmp_path):
    """The project's training loop on test_train's toy store: relevant documents hold a term close
    to the query term; DRMM must learn that the high-similarity bins mean relevance."""
    toy = make_toy()
    cfg = train_config(max_steps=60, validate_every=20, learning_rates={"default": 0.05})
    examples = triples(toy)
    torch.manual_seed(3)
    model = DRMM(DRMMConfig(), toy_embeddings())
    validate = validator(toy, cfg)
    loss_before, metric_before = mean_loss(model, toy, examples), validate(model)
    summary = train(model, examples, toy["queries"], toy["docs"], validate, cfg, tmp_path, seed=7)
    loss_after = mean_loss(model, toy, examples)
    assert loss_after < 0.3 * loss_before  # ≈ 0.96 -> < 0.01 (seeds 0, 1, 3)
    assert summary["best_metric"] > metric_before + 0.3 and summary["best_metric"] >= 0.95  # RR@10 ≈ 0.34 -> 1
