"""TKL (SIGIR 2020) against its equations on tiny CPU inputs: chunking, packing, saturation
windows, learned saturation, region pooling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rankstudy.models.tkl import TKL, TKLConfig
from rankstudy.nn.kernels import cosine_matrix, default_mus


def embeddings(vocab=80, dim=8, seed=0):
    matrix = np.random.default_rng(seed).normal(size=(vocab, dim)).astype(np.float32)
    matrix[:2] = 0
    return matrix


def tiny(seed=0, vocab=80, **overrides):
    torch.manual_seed(seed)
    settings = dict(heads=2, layers=2, ff_dim=16)
    settings.update(overrides)
    return TKL(TKLConfig(**settings), embeddings(vocab)).eval()


def document_batch(lengths, total, seed=1, vocab=80):
    """Random ids (OOV included) with the given real lengths, padded to ``total``."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), total), dtype=np.int64)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(1, vocab, size=length)
    return torch.as_tensor(ids)


QUERY = torch.tensor([[5, 9, 1, 12, 0]])  # three terms, an OOV term, padding


def contextualize_document(model, document):
    """(central representations of the chunks the model contextualises [N, chunk, D], kept-chunk mask [B, C])."""
    packed, keep = model._packed_chunks(document)
    return torch.cat([model._contextualize_chunks(chunks) for _, chunks in model._chunk_groups(packed)]), keep


def contextualize_every_chunk(model, monkeypatch):
    """The reference the packing must match: every chunk contextualised, the batch's padding kept."""
    def every_chunk(document, only=None):
        chunks = model._chunk(document)
        keep = torch.ones(chunks.shape[:2], dtype=torch.bool, device=document.device)
        if only is not None:
            keep &= only
        return chunks[keep], keep

    monkeypatch.setattr(model, "_packed_chunks", every_chunk)
    monkeypatch.setattr(model, "_trim", lambda document: document)


def test_packed_and_unpacked_chunks_give_the_same_scores(monkeypatch):
    model = tiny(cpu_slice_tokens=0, cpu_slice_chunks=0)
    document = document_batch([130, 0, 45, 200, 7], 260)
    document[3, 40:159] = 0  # two whole chunks of padding inside a document, then one token of the next
    query = QUERY.repeat(5, 1)
    _, keep = contextualize_document(model, document)
    assert keep.sum().item() == 4 + 0 + 2 + 3 + 1 < keep.numel()  # padding chunks really skipped
    with torch.inference_mode():
        packed, packed_regions = model.score_with_regions(query, document)
        contextualize_every_chunk(model, monkeypatch)
        _, every = contextualize_document(model, document)
        assert bool(every.all())
        unpacked, unpacked_regions = model.score_with_regions(query, document)
    assert torch.allclose(packed, unpacked, atol=1e-5)
    assert torch.equal(packed_regions, unpacked_regions)
    assert packed[1].item() == 0.0 and bool((packed_regions[1] == -1).all())  # nothing to score


def test_a_batch_without_tokens_scores_zero():
    model = tiny(cpu_slice_tokens=0)
    scores, regions = model.score_with_regions(QUERY.repeat(2, 1), torch.zeros(2, 90, dtype=torch.long))
    assert scores.tolist() == [0.0, 0.0] and bool((regions == -1).all())


def test_cpu_slices_and_training_path_give_the_same_scores():
    document = document_batch([130, 45, 200, 7, 81], 220)
    query = torch.cat([QUERY.repeat(3, 1), torch.tensor([[7, 8, 0, 0, 0]] * 2)])
    whole = tiny(cpu_slice_tokens=0, cpu_slice_chunks=0)
    sliced = tiny(cpu_slice_tokens=450, cpu_slice_chunks=3)  # 2 documents (of 200 tokens once trimmed)
    with torch.inference_mode():
        expected = whole(query, document)
        assert torch.allclose(sliced(query, document), expected, atol=1e-5)
    whole.train()  # no dropout configured: the training path computes the same function
    assert torch.allclose(whole(query, document), expected, atol=1e-5)


@pytest.mark.parametrize("region_start", ["zero", "repeat"])
def test_region_backward_gives_the_full_backwards_scores_and_gradients_from_fewer_chunks(region_start, monkeypatch):
    """region_backward: the transformer's backward pass runs over the chunks the chosen regions read only;
    the score and every parameter's gradient are the full pass's (up to rounding)."""
    document = document_batch([400, 45, 330, 7, 260], 420)
    query = torch.cat([QUERY.repeat(3, 1), torch.tensor([[7, 8, 0, 0, 0]] * 2)])
    results = []
    for region_backward in (False, True):
        model = tiny(region_start=region_start, region_backward=region_backward).train()
        contextualised = []
        contextualize_chunks = model._contextualize_chunks
        monkeypatch.setattr(model, "_contextualize_chunks",
                            lambda chunks: contextualised.append(len(chunks)) or contextualize_chunks(chunks))
        scores = model(query, document)
        (scores * torch.arange(1.0, 6.0)).sum().backward()
        results.append((scores.detach(), {name: p.grad for name, p in model.named_parameters()}, contextualised))
    (full_scores, full_grads, full_chunks), (scores, grads, chunks) = results
    assert torch.allclose(scores, full_scores, atol=1e-5)
    assert full_grads.keys() == grads.keys()
    for name, grad in full_grads.items():
        assert (grad is None) == (grads[name] is None), name
        if grad is not None:
            assert torch.allclose(grads[name], grad, atol=1e-5, rtol=1e-4), name
    assert full_chunks == [29] and chunks[0] == 29  # every kept chunk (10 + 2 + 9 + 1 + 7), once without autograd
    # then with autograd those of 3 regions of 38 tokens, at most 2 chunks each: 6 + 2 + 6 + 1 + 6
    assert len(chunks) == 2 and chunks[1] <= 21


def test_with_dropout_training_takes_the_single_pass(monkeypatch):
    """Two passes would draw two dropout masks: a model with dropout contextualises every chunk once, with autograd."""
    model = tiny(dropout=0.1).train()
    contextualised = []
    contextualize_chunks = model._contextualize_chunks
    monkeypatch.setattr(model, "_contextualize_chunks",
                        lambda chunks: contextualised.append(len(chunks)) or contextualize_chunks(chunks))
    model(QUERY.repeat(2, 1), document_batch([400, 45], 420))
    assert contextualised == [12]


@pytest.mark.parametrize("pack", [True, False])
def test_more_padding_does_not_change_a_documents_score_or_regions(pack, monkeypatch):
    model = tiny()
    if not pack:
        contextualize_every_chunk(model, monkeypatch)
    lengths = [37, 95, 161]
    document = document_batch(lengths, 400)
    query = QUERY.repeat(3, 1)
    with torch.inference_mode():
        batch_scores, batch_regions = model.score_with_regions(query, document)
        for row, length in enumerate(lengths):
            alone, alone_regions = model.score_with_regions(QUERY[:, :4], document[row:row + 1, :length])
            assert alone.item() == pytest.approx(batch_scores[row].item(), abs=1e-5)
            assert torch.equal(alone_regions[0], batch_regions[row])


def test_chunks_rejoin_at_their_positions():
    """α = 1: the representations are the embeddings, so the re-joined cosine matrix must be the
    plain one, position by position (a shifted or dropped chunk breaks it)."""
    model = tiny(mixer_init=1.0, chunk_size=8, overlap=3)
    document = document_batch([50, 29], 53)
    query = QUERY.repeat(2, 1)
    with torch.inference_mode():
        q, _, _ = model.contextualize(query)
        cosine = model.match_document(q, document)
        expected = cosine_matrix(model.embedding(query), model.embedding(document))
    assert cosine.shape == (2, 5, 53)
    assert torch.allclose(cosine, expected, atol=1e-6)


def test_each_chunk_sees_its_overlap_context_with_positions_restarting():
    """α = 0: chunk c's central tokens are the transformer output of ids [c·s − o, c·s + s + o)
    alone, with positions 0 … s + 2o − 1."""
    size, overlap = 6, 2
    model = tiny(mixer_init=0.0, chunk_size=size, overlap=overlap, max_length=16)
    document = document_batch([23], 23)
    padded = torch.nn.functional.pad(document, (overlap, 4 * size + overlap - 23))
    with torch.inference_mode():
        central, keep = contextualize_document(model, document)
        assert keep.tolist() == [[True] * 4]
        for chunk in range(4):
            window = padded[:, chunk * size: chunk * size + size + 2 * overlap]
            alone = model.contextualize(window)[0][0, overlap:overlap + size]
            assert torch.allclose(central[chunk], alone, atol=1e-5)
        # without the context the first chunk's output differs: the test can see the overlap
        no_context = model.contextualize(document[:, :size])[0][0]
        assert not torch.allclose(central[0], no_context, atol=1e-3)


@pytest.mark.parametrize("size, stride", [(5, 2), (30, 2), (4, 4), (7, 3)])
def test_window_sums_equal_a_brute_force_loop(size, stride):
    model = tiny(saturation_window=size, saturation_stride=stride)
    for length in (1, 3, 4, 5, 6, 17, 29, 30, 31, 33, 61):
        values = torch.rand(2, 3, length, dtype=torch.float32)
        sums = model.window_sums(values)
        starts = range(0, length, stride)  # every window starting inside, cut at the end
        assert sums.shape == (2, 3, len(starts))
        for w, start in enumerate(starts):
            assert torch.allclose(sums[..., w], values[..., start:start + size].sum(-1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("size, stride", [(30, 2), (4, 4), (6, 3), (1, 1), (7, 3)])
def test_window_sums_gradient_equals_autograds(size, stride):
    """The window sums' own backward (strides that divide the window) against autograd through unfold."""
    from rankstudy.models.tkl import _window_sums, strided_window_sums

    generator = torch.Generator().manual_seed(0)
    for length in (1, 3, 17, 29, 30, 31, 61, 400):
        values = torch.rand(2, 3, length, dtype=torch.float64, generator=generator, requires_grad=True)
        weights = torch.rand(2, 3, -(-length // stride), dtype=torch.float64, generator=generator)
        expected, = torch.autograd.grad((_window_sums(values, size, stride) * weights).sum(), values)
        got, = torch.autograd.grad((strided_window_sums(values, size, stride) * weights).sum(), values)
        assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12), (size, stride, length)


def test_region_selection_picks_non_overlapping_local_maxima():
    model = tiny()  # window 30, stride 2: chosen windows must be >= 15 windows apart
    scores = torch.zeros(1, 40)
    scores[0, [3, 9, 10, 11, 25, 30, 38, 39]] = torch.tensor([5.0, 4.0, 9.0, 4.0, 7.0, 8.0, 6.0, 1.0])
    valid = torch.ones(1, 40, dtype=torch.bool)
    chosen, found = model.select_regions(scores, valid)
    # 10 first; 3 and 25 share tokens with it; then 30, which suppresses 38; nothing is left
    assert chosen[0, :2].tolist() == [10, 30] and found[0].tolist() == [True, True, False]
    features = model._region_features(scores, valid, chosen, found)
    assert features[0].tolist() == [0, 4, 9, 4, 0, 0, 0, 8, 0, 0] + [0] * 5

    # a rising sequence has one local maximum: the original's argmax would also take 24 and 9
    rising = torch.arange(40.0).unsqueeze(0)
    chosen, found = model.select_regions(rising, valid)
    assert chosen[0, 0].item() == 39 and found[0].tolist() == [True, False, False]
    features = model._region_features(rising, valid, chosen, found)
    assert features[0, :5].tolist() == [37, 38, 39, 0, 0]  # neighbours past the end count 0

    # a window without tokens is never chosen, however high its score, and counts 0 as a neighbour
    scores[0, 31], valid[0, 31] = 100.0, False
    chosen, found = model.select_regions(scores, valid)
    assert chosen[0, :2].tolist() == [10, 30] and found[0].tolist() == [True, True, False]
    assert model._region_features(scores, valid, chosen, found)[0, 5:10].tolist() == [0, 0, 8, 0, 0]


def test_region_spans_in_tokens():
    model = tiny(top_regions=2)
    chosen, found = torch.tensor([[1, 20], [30, 0]]), torch.tensor([[True, True], [True, False]])
    spans = model.region_spans(chosen, found, torch.tensor([200, 70]))
    # window w covers tokens [2w, 2w + 30); with ±2 neighbours: [2(w − 2), 2(w + 2) + 30)
    assert spans.tolist() == [[[0, 36], [36, 74]], [[56, 70], [-1, -1]]]


def test_scored_regions_contain_the_match():
    """α = 1, log saturation, only the exact-match kernel weighted: the windows holding the one
    match of the query term (starts 22 … 50) score ln(1) = 0, every other window ln(1e-10); the
    first of the plateau (window 11) is chosen, then the first window that shares no token with
    it (27)."""
    model = tiny(top_regions=2, mixer_init=1.0, saturation="log")
    with torch.no_grad():
        model.embedding.weight[40] = torch.eye(8)[0]
        model.embedding.weight[5] = torch.eye(8)[1]  # cosine 0 to token 40: no soft match
        model.dense.weight.zero_()
        model.dense.weight[0, 0] = 1.0
    document = torch.full((1, 80), 40)
    document[0, 50] = 5
    scores, regions = model.score_with_regions(torch.tensor([[5]]), document)
    assert regions[0].tolist() == [[18, 56], [50, 80]]  # windows 9-13, then 25-29 cut to 80 tokens
    # windows 9, 10 and 26-29 miss the match: 6 of the 10 scored windows count ln(1e-10)
    assert scores.item() == pytest.approx(6 * math.log(1e-10), rel=1e-4)


def test_embedding_saturation_is_about_log_at_initialisation():
    """Checks, for x in [1e-3, 30] and windows of 1 … 30 tokens: with the Linear weights at 0
    (biases 100) sat(x) = 100·(x^(1/100) − 1), within 0.005·ln²x of ln x; with the random initial
    weights (|w| <= 0.014) sat stays within 1 of ln x, increasing and concave in x."""
    idf = np.linspace(0.5, 8.0, 80).astype(np.float32)
    torch.manual_seed(0)
    model = TKL(TKLConfig(heads=2, layers=1, ff_dim=8), embeddings(), idf=idf).eval()
    assert model.saturation_salience.weight[7, 0].item() == pytest.approx(idf[7])
    x = torch.logspace(-3, math.log10(30), 50).view(1, 1, 1, 50).expand(1, 2, 3, 50)
    query = torch.tensor([[7, 79]])
    counts = torch.linspace(1, 30, 50).round().view(1, 50)
    log_x = torch.log(x)
    with torch.no_grad():
        saturated = model.saturate(x, query, counts)
        assert (saturated - log_x).abs().max().item() < 1.0
        for count in (1.0, 30.0):  # increasing and concave for a fixed window
            fine = torch.logspace(-3, math.log10(30), 200).view(1, 1, 1, 200)
            curve = model.saturate(fine, query[:, :1], torch.full((1, 200), count))[0, 0, 0]
            slopes = (curve[1:] - curve[:-1]) / (fine[0, 0, 0, 1:] - fine[0, 0, 0, :-1])
            assert bool((slopes > 0).all()) and bool((slopes[1:] < slopes[:-1]).all())
        for layer in (model.saturation_a, model.saturation_b, model.saturation_c):
            assert layer.bias.item() == 100.0 and layer.weight.abs().max().item() <= 0.014
            layer.weight.zero_()
        exact = model.saturate(x, query, counts)
    assert torch.allclose(exact, 100 * (x ** 0.01 - 1), rtol=1e-4, atol=1e-3)
    assert bool(((exact - log_x).abs() <= 0.0055 * log_x ** 2 + 1e-3).all())


def test_salience_enters_through_a_relu():
    """Eq. 5 conditions a, b, c on [ReLU(e_i); l_w]: a negative salience saturates as a zero one."""
    model = tiny().eval()
    x = torch.rand(1, 1, 3, 5) * 10
    counts = torch.full((1, 5), 20.0)
    with torch.no_grad():
        model.saturation_salience.weight[7] = -3.0
        negative = model.saturate(x, torch.tensor([[7]]), counts)
        model.saturation_salience.weight[7] = 0.0
        assert torch.equal(model.saturate(x, torch.tensor([[7]]), counts), negative)
        model.saturation_salience.weight[7] = 2.0
        assert not torch.equal(model.saturate(x, torch.tensor([[7]]), counts), negative)


def test_linear_saturation_is_eq5_with_b_one():
    """The linear ablation: a·x − c with a, c = W·[ReLU(e_i); l_w] + bias, starting at a = 1, c = 0."""
    model = tiny(saturation="linear").eval()
    assert not hasattr(model, "saturation_b")
    assert (model.saturation_a.bias.item(), model.saturation_c.bias.item()) == (1.0, 0.0)
    x = torch.rand(1, 2, 3, 4) * 10
    query, counts = torch.tensor([[7, 9]]), torch.tensor([[1.0, 5.0, 12.0, 30.0]])
    with torch.no_grad():
        model.saturation_salience.weight[7], model.saturation_salience.weight[9] = 2.0, -1.0
        features = {"e": torch.tensor([2.0, 0.0]).view(1, 2, 1, 1), "l": counts.view(1, 1, 1, 4)}

        def by_hand(layer):
            return layer.weight[0, 0] * features["e"] + layer.weight[0, 1] * features["l"] + layer.bias

        expected = by_hand(model.saturation_a) * x - by_hand(model.saturation_c)
        assert torch.allclose(model.saturate(x, query, counts), expected, atol=1e-6)
        for layer in (model.saturation_a, model.saturation_c):
            layer.weight.zero_()
        assert torch.allclose(model.saturate(x, query, counts), x)  # the weights at 0: sat(x) = x


def test_default_saturation_salience_is_one_without_idf():
    model = tiny()
    assert bool((model.saturation_salience.weight == 1).all())
    with pytest.raises(ValueError, match="idf"):
        TKL(TKLConfig(heads=2, layers=1), embeddings(), idf=np.ones(3))


@pytest.mark.parametrize("saturation", ["embedding", "log", "linear"])
def test_each_saturation_trains_with_finite_gradients(saturation):
    model = tiny(saturation=saturation, dropout=0.1).train()
    document = document_batch([130, 45, 90], 140)
    query = QUERY.repeat(3, 1)
    scores = model(query, document)
    assert scores.shape == (3,) and torch.isfinite(scores).all()
    (scores[0] - scores[1] + scores[2]).backward()
    named = dict(model.named_parameters())
    for name, param in named.items():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    for name in ["embedding.weight", "contextualizer.layers.0.linear1.weight", "mixer", "dense.weight",
                 "region_weights.weight"] + {"embedding": ["saturation_b.weight", "saturation_salience.weight"],
                                             "linear": ["saturation_a.weight", "saturation_salience.weight"],
                                             "log": []}[saturation]:
        assert named[name].grad.abs().sum() > 0, name
    assert named["region_weights.weight"].shape == (1, 15)
    assert bool((named["region_weights.weight"] == 1).all())


def brute_force_score(model, query, document):
    """Equations (3)-(7) with loops, for α = 1 (representations = embeddings), log saturation."""
    cfg = model.config
    emb = model.embedding.weight.detach().numpy()
    q_ids, d_ids = query[0].tolist(), document[0].tolist()
    mus, sigmas = np.array(cfg.kernels_mu), np.array(cfg.kernels_sigma)
    v = model.dense.weight.detach().numpy()[0]
    u = model.region_weights.weight.detach().numpy()[0]

    def cos(a, b):
        return float(emb[a] @ emb[b] / (np.linalg.norm(emb[a]) * np.linalg.norm(emb[b])))

    starts = list(range(0, len(d_ids), cfg.saturation_stride))
    r, valid = [], []
    for start in starts:
        span = range(start, min(start + cfg.saturation_window, len(d_ids)))
        valid.append(any(d_ids[j] != 0 for j in span))
        total = 0.0
        for i in q_ids:
            if i <= 1:
                continue
            soft_tf = sum((np.exp(-(cos(i, d_ids[j]) - mus) ** 2 / (2 * sigmas ** 2)) for j in span if d_ids[j] > 1),
                          np.zeros(len(mus)))
            total += float(v @ np.log(np.maximum(soft_tf, 1e-10)))
        r.append(total)
    ranked = [score if ok else -math.inf for score, ok in zip(r, valid)]
    left = [-math.inf] + ranked[:-1]
    right = ranked[1:] + [-math.inf]
    candidates = {w for w in range(len(r)) if valid[w] and ranked[w] >= left[w] and ranked[w] >= right[w]}
    features = []
    for _ in range(cfg.top_regions):
        if not candidates:
            features += [0.0] * (2 * cfg.region_neighbours + 1)
            continue
        best = max(sorted(candidates), key=lambda w: r[w])
        candidates = {w for w in candidates if abs(w - best) * cfg.saturation_stride >= cfg.saturation_window
                      and abs(w - best) > 2 * cfg.region_neighbours}
        for o in range(-cfg.region_neighbours, cfg.region_neighbours + 1):
            w = best + o
            features.append(r[w] if 0 <= w < len(r) and valid[w] else 0.0)
    return float(u @ np.array(features))


def test_scores_follow_equations_3_to_7():
    model = tiny(mixer_init=1.0, saturation="log", chunk_size=8, overlap=2, saturation_window=6,
                 top_regions=2, region_neighbours=1)
    with torch.no_grad():
        model.dense.weight.copy_(torch.linspace(-1, 1, 11).view(1, 11))
        model.region_weights.weight.copy_(torch.tensor([[0.5, 1.0, 2.0, -1.0, 0.3, 0.7]]))
    query = torch.tensor([[5, 9, 1, 12]])
    document = document_batch([33], 33, seed=3)
    document[0, [4, 20]] = torch.tensor([5, 12])
    with torch.inference_mode():
        score = model(query, document).item()
    assert score == pytest.approx(brute_force_score(model, query, document), rel=1e-4, abs=1e-3)


def test_defaults_follow_the_original():
    config = TKLConfig()
    assert (config.chunk_size, config.overlap, config.saturation_window, config.saturation_stride) == (40, 5, 30, 2)
    assert (config.top_regions, config.region_neighbours, config.saturation) == (3, 2, "embedding")
    assert config.kernels_mu == default_mus(11) and config.kernels_sigma == [0.1] * 11
    assert config.mixer_init == 0.5 and config.saturation_bias_init == 100.0
    model = tiny()
    assert model.dense.bias is None and model.dense.weight.abs().max() <= 0.014
    assert TKL.PARAM_GROUPS == {"embedding.": "embeddings", "contextualizer.": "contextualizer"}


@pytest.mark.parametrize("settings, message", [
    ({"saturation": "sqrt"}, "saturation must be"),
    ({"chunk_size": 0}, "chunk_size"),
    ({"overlap": -1}, "overlap"),
    ({"saturation_stride": 0}, "saturation_stride"),
    ({"saturation_stride": 31}, "saturation_stride"),
    ({"saturation_window": 0}, "saturation_window"),
    ({"top_regions": 0}, "top_regions"),
    ({"region_neighbours": -1}, "region_neighbours"),
    ({"kernels_sigma": [0.1] * 10}, "same"),
    ({"kernels_sigma": [0.1] * 10 + [0.0]}, "positive"),
    ({"max_length": 49}, "max_length"),
    ({"dropout": 1.0}, "dropout"),
    ({"cpu_slice_chunks": -1}, "cpu_slice"),
    ({"layers": 0}, "positive"),
])
def test_bad_config_raises(settings, message):
    with pytest.raises(ValueError, match=message):
        TKLConfig(**settings)


def test_heads_must_divide_the_embedding_dim():
    with pytest.raises(ValueError, match="not divisible"):
        TKL(TKLConfig(heads=3), embeddings())


def test_build_model_gives_tkl_the_collection_idf_as_salience():
    from rankstudy.models import build_model

    vectors = np.random.default_rng(0).normal(size=(6, 8)).astype(np.float32)
    idf = np.array([0.0, 0.0, 0.5, 1.5, 2.5, 3.5], dtype=np.float32)
    model = build_model("tkl", {"layers": 1, "heads": 2, "ff_dim": 8}, vectors, idf=idf)
    assert torch.equal(model.saturation_salience.weight.squeeze(1), torch.from_numpy(idf))
    plain = build_model("tkl", {"layers": 1, "heads": 2, "ff_dim": 8}, vectors)  # scoring: weights come from a checkpoint
    assert torch.equal(plain.saturation_salience.weight, torch.ones(6, 1))


def test_region_start_repeat_reads_the_first_window_before_the_document():
    """region_start: repeat (the published code): the −1/−2 neighbours of the first window read its score."""
    scores = torch.tensor([[9.0, 4.0, 1.0] + [0.0] * 37])
    valid = torch.ones(1, 40, dtype=torch.bool)
    chosen, found = torch.tensor([[0, 20, 30]]), torch.tensor([[True, False, False]])
    assert tiny()._region_features(scores, valid, chosen, found)[0, :5].tolist() == [0, 0, 9, 4, 1]
    assert tiny(region_start="repeat")._region_features(scores, valid, chosen, found)[0, :5].tolist() == [9, 9, 9, 4, 1]
    with pytest.raises(ValueError, match="region_start"):
        tiny(region_start="clamp")


def test_scores_without_autograd_equal_those_with_it():
    """Without autograd the last transformer layer runs for the chunks' central positions only; with autograd
    for all of them (so that training's gradients keep their rounding): the scores agree."""
    model = tiny(chunk_size=8, overlap=3)
    document, query = document_batch([50, 29, 7], 53), QUERY.repeat(3, 1)
    with torch.no_grad():
        central_only = model(query, document)
    every_position = model(query, document)
    assert every_position.requires_grad
    assert torch.allclose(central_only, every_position.detach(), rtol=0, atol=1e-6)
