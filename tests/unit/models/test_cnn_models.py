"""MatchPyramid, PACRR and CO-PACRR (the TKL paper's Table 1 baselines) on small hand-made inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from helpers import single_thread
from rankstudy.models.matchpyramid import MatchPyramid, MatchPyramidConfig
from rankstudy.models.pacrr import PACRR, CoPACRR, CoPACRRConfig, PACRRConfig
from rankstudy.train.losses import pairwise_margin_loss
from helpers import random_embeddings, unit_vectors

SMALL = {
    "matchpyramid": lambda emb: MatchPyramid(MatchPyramidConfig(
        conv_output_size=[4, 4], conv_kernel_size=[[3, 3], [2, 3]], adaptive_pooling_size=[[4, 8], [2, 4]],
        dense_dims=[16, 8]), emb),
    "pacrr": lambda emb: PACRR(PACRRConfig(max_query_length=5, max_doc_length=24, filters=4, dense_dims=[16, 8]), emb),
    "pacrr-idf-relu": lambda emb: PACRR(PACRRConfig(max_query_length=5, max_doc_length=24, filters=4, use_idf=True,
                                                    conv_relu=True, dense_dims=[16, 8]),
                                        emb, idf=np.linspace(0.5, 4.0, emb.shape[0])),
    "co_pacrr": lambda emb: CoPACRR(CoPACRRConfig(max_query_length=5, max_doc_length=24, filters=4, context_window=3,
                                                  dense_dims=[16, 8]), emb),
    "co_pacrr-shuffle": lambda emb: CoPACRR(CoPACRRConfig(max_query_length=5, max_doc_length=24, filters=4,
                                                          shuffle=True, dense_dims=[16, 8]), emb),
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield


def with_oov_vector(embeddings, like):
    """A copy whose OOV row (1) equals row ``like``, as a trained OOV embedding may: only the
    masks, not a zero vector, can then keep OOV from matching."""
    embeddings = embeddings.copy()
    embeddings[1] = embeddings[like]
    return embeddings


def build(name, embeddings=None, seed=0):
    torch.manual_seed(seed)
    return SMALL[name](random_embeddings() if embeddings is None else embeddings).eval()


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("lq, ld", [(1, 1), (3, 7), (5, 24), (4, 40), (9, 3)])
def test_scores_have_batch_shape(name, lq, ld):
    model = build(name)
    generator = torch.Generator().manual_seed(lq * 100 + ld)
    query, document = torch.randint(2, 60, (3, lq), generator=generator), torch.randint(2, 60, (3, ld), generator=generator)
    scores = model(query, document)
    assert scores.shape == (3,) and torch.isfinite(scores).all()


@pytest.mark.parametrize("name", SMALL)
def test_padding_does_not_change_scores(name):
    model = build(name)
    query, document = torch.tensor([[5, 9, 12]]), torch.tensor([[20, 21, 22, 23, 9, 30]])
    short = model(query, document)
    padded = model(torch.tensor([[5, 9, 12, 0, 0]]), torch.tensor([[20, 21, 22, 23, 9, 30] + [0] * 14]))
    assert torch.allclose(short, padded, atol=1e-6)
    # a batch partner with a longer query and document pads this pair: its score stays the same
    batch = model(torch.tensor([[5, 9, 12, 0], [7, 8, 10, 11]]),
                  torch.tensor([[20, 21, 22, 23, 9, 30] + [0] * 10, list(range(30, 46))]))
    assert torch.allclose(batch[0], short[0], atol=1e-6)


@pytest.mark.parametrize("name", ["pacrr", "co_pacrr"])
def test_documents_are_cut_to_max_doc_length(name):
    model = build(name)
    document = torch.arange(2, 42).unsqueeze(0)  # 40 tokens, max_doc_length 24
    assert torch.allclose(model(torch.tensor([[5, 30]]), document), model(torch.tensor([[5, 30]]), document[:, :24]))


def test_matchpyramid_match_matrix_is_the_masked_cosine():
    # ids 2: 0°, 3: 60°, 4: 90°; OOV as 0°
    model = MatchPyramid(MatchPyramidConfig(), with_oov_vector(unit_vectors([0, 60, 90]), 2))
    matrix = model.match_matrix(torch.tensor([[2, 4, 1, 0]]), torch.tensor([[3, 2, 1, 4, 0]]))[0]
    expected = [[0.5, 1.0, 0.0, 0.0, 0.0],  # 0° vs 60°, 0°, OOV, 90°, padding
                [math.cos(math.radians(30)), 0.0, 0.0, 1.0, 0.0],
                [0.0] * 5,  # OOV query term matches nothing
                [0.0] * 5]  # padding
    assert matrix.detach().numpy() == pytest.approx(np.array(expected), abs=1e-6)


def test_matchpyramid_dynamic_pooling_covers_the_real_region_only():
    maps = torch.full((2, 1, 4, 6), 99.0)  # 99 marks padding: it must never be pooled
    maps[0, 0, :3, :4] = torch.arange(12.0).view(3, 4)  # example 0: 3 x 4 real region
    maps[1, 0, :2, :2] = torch.tensor([[1.0, 2.0], [3.0, 4.0]])  # example 1: 2 x 2, pooled up to 2 x 3
    pooled = MatchPyramid.dynamic_pool(maps, torch.tensor([3, 2]), torch.tensor([4, 2]), (2, 3))
    # adaptive bins over 3 rows -> [0, 2), [1, 3); over 4 columns -> [0, 2), [1, 3), [2, 4)
    assert pooled[0, 0].tolist() == [[5.0, 6.0, 7.0], [9.0, 10.0, 11.0]]
    # over 2 columns -> [0, 1), [0, 2), [1, 2): output cells repeat input cells
    assert pooled[1, 0].tolist() == [[1.0, 2.0, 2.0], [3.0, 4.0, 4.0]]


def pacrr_unit(ngram=2, **overrides):
    """A PACRR on 2-d unit vectors (ids 2: 0°, 3: 60°, 4: 90°, 5: 30°, 6: 180°; OOV as 0°) with fixed
    conv weights."""
    settings = dict(max_query_length=3, max_doc_length=6, max_ngram=ngram, filters=2, kmax=2, dense_dims=[4])
    settings.update(overrides)
    config_class = CoPACRRConfig if "context_window" in overrides else PACRRConfig
    model = (CoPACRR if config_class is CoPACRRConfig else PACRR)(
        config_class(**settings), with_oov_vector(unit_vectors([0, 60, 90, 30, 180]), 2))
    with torch.no_grad():
        for conv in model.convolutions:
            n = conv[1].kernel_size[0]
            weights = torch.arange(2 * n * n, dtype=torch.float32).view(2, 1, n, n) / 10 - 0.4
            conv[1].weight.copy_(weights)
            conv[1].bias.copy_(torch.tensor([0.1, -0.2]))
    return model.eval()


QUERY = torch.tensor([[2, 6, 1]])  # 0°, 180°, OOV
DOCUMENT = torch.tensor([[3, 2, 4, 1, 5]])  # 60°, 0°, 90°, OOV, 30° (padded to 6)


def hand_similarity():
    cos = lambda a, b: math.cos(math.radians(a - b))  # noqa: E731
    doc = [60, 0, 90, None, 30, None]  # OOV and padding match nothing
    return np.array([[cos(q, d) if d is not None and q is not None else 0.0 for d in doc] for q in (0, 180, None)])


def test_pacrr_kmax_pooling_picks_the_k_largest_per_query_term():
    features = pacrr_unit(ngram=1).term_features(QUERY, DOCUMENT)[0].detach().numpy()
    assert features.shape == (3, 2)
    assert features[0] == pytest.approx([1.0, math.cos(math.radians(30))], abs=1e-6)
    assert features[1] == pytest.approx([0.0, 0.0], abs=1e-6)  # all real matches negative: zeros of OOV / pad
    assert features[2] == pytest.approx([0.0, 0.0], abs=1e-7)  # OOV query term
    assert np.sort(hand_similarity(), axis=1)[:, ::-1][:, :2] == pytest.approx(features, abs=1e-6)


def test_pacrr_ngram_channel_is_max_over_filters_of_the_convolution():
    model = pacrr_unit(ngram=2)
    features = model.term_features(QUERY, DOCUMENT)[0].detach().numpy()  # [3, 2 (sim) + 2 (bigram)]
    sim = np.pad(hand_similarity(), ((0, 1), (0, 1)))  # zero-padded right/bottom by n - 1
    weights, bias = model.convolutions[0][1].weight.detach().numpy()[:, 0], [0.1, -0.2]
    conv = np.array([[max((weights[f] * sim[i:i + 2, j:j + 2]).sum() + bias[f] for f in range(2)) for j in range(6)]
                     for i in range(3)])
    mask = np.outer([1, 1, 0], [1, 1, 1, 0, 1, 0])  # an n-gram is masked like the token it starts at
    expected = np.sort(conv * mask, axis=1)[:, ::-1][:, :2]
    assert features[:, 2:] == pytest.approx(expected, abs=1e-6)
    assert features[2] == pytest.approx(np.zeros(4), abs=1e-7)


def test_pacrr_idf_softmax_over_matchable_query_terms():
    idf = np.arange(7, dtype=np.float32)  # idf of id i is i
    model = PACRR(PACRRConfig(max_query_length=4, max_doc_length=6, max_ngram=1, kmax=1, use_idf=True),
                  unit_vectors([0, 60, 90, 30, 180]), idf=idf)
    weights = model.term_features(torch.tensor([[2, 5, 1]]), DOCUMENT)[0, :, -1].detach().numpy()
    expected = np.exp([2.0, 5.0]) / np.exp([2.0, 5.0]).sum()
    assert weights == pytest.approx([expected[0], expected[1], 0.0, 0.0], abs=1e-6)


def test_co_pacrr_context_similarity_and_cascade_pooling():
    model = pacrr_unit(ngram=1, kmax=1, max_doc_length=6, context_window=2, cascade=[0.5, 1.0])
    query = torch.tensor([[2, 4, 0]])  # 0° and 90°: the query context points to 45°
    document = torch.tensor([[3, 4, 1, 2, 5]])  # 60°, 90°, OOV, 0°, 30°
    vec = lambda a: np.array([math.cos(math.radians(a)), math.sin(math.radians(a))])  # noqa: E731
    q_context = vec(0) + vec(90)
    d = [vec(60), vec(90), np.zeros(2), vec(0), vec(30), np.zeros(2)]
    windows = [d[j] + (d[j + 1] if j + 1 < 6 else 0) for j in range(6)]
    cosine = [w @ q_context / max(np.linalg.norm(w), 1e-9) / np.linalg.norm(q_context) for w in windows]
    context = np.array(cosine) * [1, 1, 0, 1, 1, 0]  # 0 at OOV and padding positions
    assert context[1] == pytest.approx(math.cos(math.radians(45)))  # window 90° + OOV
    got = model.context_similarity(query, F.pad(document, (0, 1)))[0]
    assert got.detach().numpy() == pytest.approx(context, abs=1e-6)

    features = model.term_features(query, document)[0].detach().numpy()
    assert features.shape == (3, 4)  # [k-max first 3 tokens, k-max all 6, their two contexts]
    # term 0°: first half 60°, 90°, OOV -> best cos 0.5 at position 0; whole doc: 1.0 at position 3
    assert features[0] == pytest.approx([0.5, 1.0, context[0], context[3]], abs=1e-6)
    # term 90°: exact match at position 1 in both views
    assert features[1] == pytest.approx([1.0, 1.0, context[1], context[1]], abs=1e-6)
    assert features[2] == pytest.approx(np.zeros(4), abs=1e-7)  # padding


@pytest.mark.parametrize("name", ["pacrr", "pacrr-idf-relu", "co_pacrr"])
def test_pacrr_oov_query_term_matches_nothing(name):
    model = build(name, with_oov_vector(random_embeddings(), 9))  # unmasked, OOV would match 9 exactly
    document = torch.tensor([[20, 21, 1, 23, 9, 30]])
    assert torch.allclose(model(torch.tensor([[5, 9, 1]]), document), model(torch.tensor([[5, 9, 0]]), document))
    similarity = model._channels(torch.tensor([[5, 1]]), document)[3][0][0]
    assert torch.all(similarity[1] == 0) and torch.all(similarity[:, 2] == 0)


def test_co_pacrr_shuffles_query_terms_only_while_training():
    model = build("co_pacrr-shuffle")
    query, document = torch.tensor([[5, 9, 12, 13, 0]]), torch.tensor([[20, 21, 9, 23, 5, 30, 13]])
    evaluated = model.term_features(query, document)
    assert torch.equal(evaluated, model.term_features(query, document))
    model.train()
    torch.manual_seed(3)
    shuffled = model.term_features(query, document)
    assert not torch.equal(shuffled, evaluated)
    rows = lambda t: sorted(map(tuple, t[0].tolist()))  # noqa: E731
    assert rows(shuffled) == rows(evaluated)  # the same query-term rows, reordered


@pytest.mark.parametrize("name", SMALL)
def test_gradients_are_finite_and_reach_the_convolutions(name):
    model = build(name).train()
    scores = model(torch.tensor([[5, 9, 12], [7, 1, 0]]), torch.tensor([[20, 5, 22, 9, 0], [7, 8, 1, 40, 41]]))
    scores.sum().backward()
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs
    for conv in convs:
        assert torch.isfinite(conv.weight.grad).all() and conv.weight.grad.abs().sum() > 0
    for name_, parameter in model.named_parameters():
        assert parameter.grad is None or torch.isfinite(parameter.grad).all(), name_
    assert model.embedding.weight.grad.abs().sum() > 0
    assert set(model.PARAM_GROUPS) == {"embedding."}


def toy_pairs(count, generator):
    """Query: 2 terms of 2..19; positive: 12 filler terms of 20..59 with one query term inserted;
    negative: filler only."""
    queries = torch.randint(2, 20, (count, 2), generator=generator)
    positives = torch.randint(20, 60, (count, 12), generator=generator)
    negatives = torch.randint(20, 60, (count, 12), generator=generator)
    slots = torch.randint(0, 12, (count,), generator=generator)
    positives[torch.arange(count), slots] = queries[:, 0]
    return queries, positives, negatives


@pytest.mark.parametrize("name", ["matchpyramid", "pacrr", "co_pacrr-shuffle"])
def test_training_learns_to_prefer_documents_with_the_query_term(name):
    model = build(name, seed=1).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    test_q, test_pos, test_neg = toy_pairs(64, torch.Generator().manual_seed(99))
    with torch.no_grad():
        before = pairwise_margin_loss(model.eval()(test_q, test_pos), model(test_q, test_neg)).item()
    model.train()
    for _ in range(40):
        query, positive, negative = toy_pairs(16, generator)
        loss = pairwise_margin_loss(model(query, positive), model(query, negative))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        pos, neg = model(test_q, test_pos), model(test_q, test_neg)
    after = pairwise_margin_loss(pos, neg).item()
    assert after < 0.5 * before
    assert (pos > neg).float().mean().item() >= 0.9


@pytest.mark.parametrize("config_class, settings, message", [
    (MatchPyramidConfig, {"conv_output_size": [16, 16]}, "same length"),
    (MatchPyramidConfig, {"conv_kernel_size": [[3]] * 5}, "pairs"),
    (MatchPyramidConfig, {"adaptive_pooling_size": [[36, 0]] * 5}, "positive"),
    (MatchPyramidConfig, {"conv_output_size": []}, "non-empty"),
    (MatchPyramidConfig, {"dense_dims": [100, -1]}, "positive"),
    (PACRRConfig, {"kmax": 0}, "kmax"),
    (PACRRConfig, {"max_doc_length": 1, "kmax": 2}, "exceeds max_doc_length"),
    (PACRRConfig, {"filters": 2.5}, "filters"),
    (CoPACRRConfig, {"cascade": [0.5, 1.5]}, r"\(0, 1\]"),
    (CoPACRRConfig, {"cascade": []}, "non-empty"),
    (CoPACRRConfig, {"max_doc_length": 8, "kmax": 3, "cascade": [0.25, 1.0]}, "shortest cascade view"),
    (CoPACRRConfig, {"context_window": 0}, "context_window"),
])
def test_bad_configs_raise(config_class, settings, message):
    with pytest.raises(ValueError, match=message):
        config_class(**settings)


def test_idf_is_required_and_checked_when_used():
    with pytest.raises(ValueError, match="needs the vocabulary's idf"):
        PACRR(PACRRConfig(use_idf=True), random_embeddings())
    with pytest.raises(ValueError, match="one value per vocabulary entry"):
        CoPACRR(CoPACRRConfig(use_idf=True), random_embeddings(), idf=np.ones(5))
