"""TK, KNRM and CONV-KNRM against their equations on small hand-made inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import random_embeddings, unit_vectors
from rankstudy.models import MODELS, build_model
from rankstudy.models.base import Ranker
from rankstudy.models.tk import TK, TKConfig
from rankstudy.nn.kernels import KernelPooling, default_mus


def test_default_kernels_are_tks():
    assert default_mus(11) == pytest.approx([1.0, 0.9, 0.7, 0.5, 0.3, 0.1, -0.1, -0.3, -0.5, -0.7, -0.9])


def test_kernel_activation_values():
    pooling = KernelPooling([1.0, 0.9], [0.1, 0.1])
    similarity = torch.tensor([[[1.0, 0.9, 0.0]]])
    mask = torch.tensor([[[1.0, 1.0, 0.0]]])
    acts = pooling.activations(similarity, mask)[0, 0]
    assert acts[0, 0] == pytest.approx(1.0)
    assert acts[0, 1] == pytest.approx(math.exp(-0.5))  # (1.0 - 0.9)^2 / (2 * 0.01)
    assert acts[1, 0] == pytest.approx(math.exp(-0.5))
    assert acts[2].tolist() == [0.0, 0.0]  # masked
    assert pooling(similarity, mask)[0, 0].tolist() == pytest.approx([1 + math.exp(-0.5), 1 + math.exp(-0.5)])


def tk_without_context(embeddings, **overrides):
    """TK with α = 1: representations are the raw embeddings, so cosines are known by hand."""
    torch.manual_seed(0)
    model = TK(TKConfig(heads=1, layers=1, ff_dim=4, mixer_init=1.0, **overrides), embeddings)
    return model.eval()


def test_tk_scores_follow_equations_4_to_6():
    # ids: 2 -> 0°, 3 -> 60° (cos 0.5 to id 2), 4 -> 90° (cos 0)
    model = tk_without_context(unit_vectors([0, 60, 90]))
    query = torch.tensor([[2, 4, 0]])  # two terms + padding
    document = torch.tensor([[2, 3, 3, 1, 0, 0]])  # 4 tokens (one OOV) + padding
    parts = model.score_parts(query, document)
    mus, sigma, beta = np.array(default_mus(11)), 0.1, 0.01

    def k(cos):
        return np.exp(-((cos - mus) ** 2) / (2 * sigma**2))

    # query term 2 (0°) vs doc 2, 3, 3: cos 1, .5, .5 ; term 4 (90°) vs doc: cos 0, cos 30° twice
    soft_tf = np.stack([k(1.0) + 2 * k(0.5), k(0.0) + 2 * k(math.cos(math.radians(30)))])
    s_log_k = (np.log2(np.maximum(soft_tf, 1e-10)) * beta).sum(0)
    s_len_k = (soft_tf / (4 + 1) * beta).sum(0)  # |d| = 4 counts the OOV token
    assert parts["s_log_k"][0].detach().numpy() == pytest.approx(s_log_k, rel=1e-5, abs=1e-7)
    assert parts["s_len_k"][0].detach().numpy() == pytest.approx(s_len_k, rel=1e-5, abs=1e-7)
    w_log = model.dense_log.weight.detach().numpy()[0]
    w_len = model.dense_len.weight.detach().numpy()[0]
    w_comb = model.dense_comb.weight.detach().numpy()[0]
    s_log, s_len = w_log @ s_log_k, w_len @ s_len_k
    assert parts["s_log"].item() == pytest.approx(s_log, rel=1e-5)
    assert parts["s_len"].item() == pytest.approx(s_len, rel=1e-5)
    assert parts["s"].item() == pytest.approx(w_comb @ [s_log, s_len], rel=1e-5)
    assert model(query, document).item() == pytest.approx(parts["s"].item())


def test_tk_initialisation_matches_the_original():
    model = TK(TKConfig(heads=2, layers=1), np.zeros((10, 8), dtype=np.float32))
    assert model.mixer.item() == 0.5 and model.scaler.item() == pytest.approx(0.01)
    for layer in (model.dense_log, model.dense_len):
        assert layer.bias is None and layer.weight.abs().max() <= 0.014
    assert model.dense_comb.weight.shape == (1, 2) and model.dense_comb.bias is None
    assert model.kernels.count == 11 and torch.all(model.kernels.sigma == 0.1)


def test_tk_mixes_embedding_and_context():
    torch.manual_seed(1)
    embeddings = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    embeddings[:2] = 0
    model = TK(TKConfig(heads=2, layers=1, ff_dim=16, mixer_init=0.3), embeddings).eval()
    ids = torch.tensor([[4, 5, 6, 0]])
    mixed, tokens, _ = model.contextualize(ids)
    embedded = model.embedding(ids)
    context = model.contextualizer(embedded + model.positions[:4], src_key_padding_mask=tokens == 0)
    expected = (0.3 * embedded + 0.7 * context) * tokens.unsqueeze(-1)
    assert torch.allclose(mixed, expected, atol=1e-6)
    assert torch.all(mixed[0, 3] == 0)  # padding stays zero


MODEL_SETTINGS = [
    ("tk", {"heads": 2, "layers": 2, "ff_dim": 32}),
    ("tk", {"heads": 2, "layers": 1, "ff_dim": 32, "branches": "log"}),
    ("knrm", {}),
    ("conv_knrm", {"filters": 8}),
    ("drmm", {}),
]


@pytest.mark.parametrize("name, settings", MODEL_SETTINGS)
def test_padding_does_not_change_scores(name, settings):
    torch.manual_seed(0)
    model = build_model(name, settings, random_embeddings()).eval()
    query = torch.tensor([[5, 9, 12]])
    document = torch.tensor([[20, 21, 22, 23, 9, 30]])
    short = model(query, document)
    padded = model(torch.tensor([[5, 9, 12, 0, 0]]), torch.tensor([[20, 21, 22, 23, 9, 30, 0, 0, 0, 0]]))
    assert torch.allclose(short, padded, atol=1e-5)


@pytest.mark.parametrize("name, settings", MODEL_SETTINGS)
def test_oov_matches_nothing(name, settings):
    """An OOV query term adds nothing, whatever the document holds (no log2(1e-10) penalty)."""
    torch.manual_seed(0)
    model = build_model(name, settings, random_embeddings()).eval()
    document = torch.tensor([[20, 21, 1, 23, 9, 30]])
    with_oov = model(torch.tensor([[5, 9, 1]]), document)
    without = model(torch.tensor([[5, 9, 0]]), document)
    if name == "tk":  # the OOV token still passes through the transformer (it is a real position)
        assert torch.isfinite(with_oov).all()
        assert abs(with_oov.item() - without.item()) < 0.05 * (abs(without.item()) + 1e-3) + 1e-3
    elif name in ("knrm", "drmm"):
        assert torch.allclose(with_oov, without, atol=1e-6)


@pytest.mark.parametrize("cpu_slice_documents", [0, 3])
def test_batched_inference_equals_pairwise_scores(cpu_slice_documents):
    """Query sharing, the fused attention and slicing a batch give the scores of one-by-one scoring."""
    torch.manual_seed(0)
    model = build_model("tk", {"heads": 2, "layers": 2, "ff_dim": 32, "cpu_slice_documents": cpu_slice_documents},
                        random_embeddings()).eval()
    query = torch.tensor([[5, 9, 12, 0]] * 3 + [[7, 8, 0, 0]])
    document = torch.tensor([[20, 21, 22, 0, 0, 0], [30, 31, 32, 33, 34, 35], [9, 5, 0, 0, 0, 0], [7, 40, 41, 0, 0, 0]])
    with torch.inference_mode():
        batched = model(query, document)
        single = torch.cat([model(query[i : i + 1, : int((query[i] > 0).sum())],
                                  document[i : i + 1, : int((document[i] > 0).sum())]) for i in range(4)])
    model.train()  # no dropout configured: the training path computes the same function
    assert torch.allclose(batched, single, atol=1e-5)
    assert torch.allclose(model(query, document), batched, atol=1e-5)


def test_windowed_pooling_reduces_to_tk_log_for_one_window():
    torch.manual_seed(0)
    embeddings = random_embeddings()
    plain = build_model("tk", {"heads": 2, "layers": 1, "branches": "log"}, embeddings).eval()
    windowed = build_model("tk", {"heads": 2, "layers": 1, "branches": "log", "window_sizes": [50],
                                  "top_windows": 1}, embeddings).eval()
    windowed.load_state_dict({**plain.state_dict(), "window_weights": torch.ones(1, 1)})
    query, document = torch.tensor([[5, 9, 12]]), torch.tensor([[20, 21, 22, 23, 9, 30, 5, 0]])
    assert torch.allclose(plain(query, document), windowed(query, document), atol=1e-6)


def test_windowed_pooling_starts_by_preferring_the_windows_that_match():
    """Only the top windows get a gradient: an untrained model must rank a window holding the query's words above
    windows without them in every seed, or training never sees a match (d3 stuck in 1 of 3 seeds, issue 41)."""
    embeddings = random_embeddings(vocab=100)
    query = torch.tensor([[5, 9, 12]])
    filler = torch.arange(20, 80).view(1, -1)
    matching = filler.clone()
    matching[0, 30:33] = query[0]
    for seed in range(20):
        torch.manual_seed(seed)
        model = build_model("tk", {"heads": 2, "layers": 1, "branches": "log", "window_sizes": [10, 20],
                                   "top_windows": 2}, embeddings).eval()
        with torch.no_grad():
            assert model(query, matching) > model(query, filler), f"seed {seed}"


@pytest.mark.parametrize("name, settings", MODEL_SETTINGS)
def test_parameter_groups_cover_embeddings(name, settings):
    model = build_model(name, settings, random_embeddings())
    names = [n for n, _ in model.named_parameters()]
    assert any(n.startswith(prefix) for prefix in model.PARAM_GROUPS for n in names)
    assert "embedding.weight" in names


def test_bad_model_settings_fail_clearly():
    from rankstudy.config import ConfigError

    with pytest.raises(ConfigError, match="branches"):
        build_model("tk", {"branches": "three"}, random_embeddings())
    with pytest.raises(ConfigError, match="unknown model"):
        build_model("bert", {}, random_embeddings())
    with pytest.raises(ValueError, match="not divisible"):
        build_model("tk", {"heads": 3}, random_embeddings())


def test_published_document_positions_start_at_the_offset():
    """document_position_offset (the published use_diff_posencoding: 500): documents read the sinusoid table
    from the offset, queries from 0; the same weights then score differently."""
    torch.manual_seed(0)
    shifted = TK(TKConfig(heads=2, layers=1, ff_dim=16, document_position_offset=500), random_embeddings()).eval()
    plain = TK(TKConfig(heads=2, layers=1, ff_dim=16), random_embeddings()).eval()
    plain.load_state_dict(shifted.state_dict())
    query, document = torch.tensor([[5, 9, 12]]), torch.tensor([[20, 21, 9, 30, 5]])
    with torch.no_grad():
        plain.positions = shifted.positions[500:]  # documents as the offset model reads them
        assert torch.allclose(plain.contextualize(document)[0], shifted.contextualize(document, 500)[0], atol=1e-6)
        plain.positions = shifted.positions[:4096]
        assert torch.allclose(plain.contextualize(query)[0], shifted.contextualize_queries(query)[0], atol=1e-6)
        assert not torch.allclose(plain(query, document), shifted(query, document))


def test_published_oov_matching():
    """oov_matches (the published code masks padding only): OOV tokens are matched like any token, so an OOV
    query term adds its log2 kernel sums, as in the original."""
    torch.manual_seed(0)
    settings = {"heads": 2, "layers": 1, "ff_dim": 16}
    published = TK(TKConfig(**settings, oov_matches=True), random_embeddings()).eval()
    default = TK(TKConfig(**settings), random_embeddings()).eval()
    default.load_state_dict(published.state_dict())
    query, document = torch.tensor([[5, 9, 1]]), torch.tensor([[20, 21, 1, 23, 9, 30]])
    with torch.no_grad():
        assert published.kernel_features(query, document)["match_mask"].all()
        assert not default.kernel_features(query, document)["match_mask"][0, 2].any()
        assert not torch.allclose(published(query, document), default(query, document))


def test_heads_of_their_own_size():
    """head_size: heads project to their own width (the notebook's 16 heads of 32 over 300-d vectors); with
    heads x head_size = dim and the same weights it is PyTorch's layer."""
    from rankstudy.nn.transformer import ProjectedSelfAttention, encoder_layer_forward

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).eval()
    x, padding = torch.randn(3, 5, 8), torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 5])
    expected = layer(x, src_key_padding_mask=padding)
    projected = ProjectedSelfAttention(8, 2, 4)
    projected.load_state_dict({key: value for key, value in layer.self_attn.state_dict().items()})
    layer.self_attn = projected
    assert torch.allclose(encoder_layer_forward(layer, x, padding)[~padding], expected[~padding], atol=1e-5)

    model = TK(TKConfig(heads=3, head_size=5, layers=2, ff_dim=16), random_embeddings())  # 16-d vectors, 3 heads
    attention = model.contextualizer.layers[0].self_attn
    assert attention.in_proj_weight.shape == (3 * 3 * 5, 16) and attention.out_proj.weight.shape == (16, 15)
    scores = model(torch.tensor([[5, 9, 12]] * 2), torch.tensor([[20, 21, 9, 30, 5], [7, 9, 0, 0, 0]]))
    scores.sum().backward()
    assert scores.shape == (2,) and attention.in_proj_weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="not divisible by 3 heads"):
        TK(TKConfig(heads=3, layers=1, ff_dim=16), random_embeddings())


def test_every_model_declares_its_capabilities_on_the_ranker_base():
    encoder_models = {"bert_cat", "bi_encoder", "firstp", "maxp", "idcm", "parade", "sparse_bert", "socialformer"}
    for name, (model_class, _) in MODELS.items():
        assert issubclass(model_class, Ranker), name
        assert model_class.TOKENIZER == ("wordpiece" if name in encoder_models else "word"), name
        assert ("encoder." in model_class.PARAM_GROUPS) == (name in encoder_models), name
    declaring = {flag: {name for name, (model_class, _) in MODELS.items() if getattr(model_class, flag)}
                 for flag in ("NEEDS_IDF", "CLS_HEAD")}
    assert declaring["NEEDS_IDF"] == {"tkl", "drmm", "socialformer"}
    assert declaring["CLS_HEAD"] == encoder_models - {"socialformer", "bi_encoder"}  # the bi-encoder: a cosine
