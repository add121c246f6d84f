"""The CUDA path (paper configs run with ``device: cuda`` on a cluster): every model scores as on the CPU,
trains, and the block-sparse attention equals dense masked attention there. Skipped without a GPU; run on
a lent GPU machine (README, "GPU checks")."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rankstudy.efficiency import measure_models
from rankstudy.models import MODELS, build_model
from rankstudy.nn.block_sparse import SparseLayout, block_count, random_edges, sparse_attention
from rankstudy.text.study_encoder import StudyEncoderConfig, build_bert, wordpiece_tokenizer
from helpers import ENCODER_SETTINGS, dense_reference

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def full_precision():
    """TF32 off (cuDNN convolutions default to it): the check is that the computation is the CPU's, TF32 is a
    speed setting with its own rounding."""
    settings = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = settings

VOCAB, DIM = 60, 16
WORDS = [f"w{i}" for i in range(200)]
SETTINGS = {
    "tk": {"layers": 1, "heads": 2, "ff_dim": 16},
    "tkl": {"layers": 1, "heads": 2, "ff_dim": 16},
    "knrm": {},
    "conv_knrm": {"filters": 8},
    "matchpyramid": {},
    "drmm": {},
    "pacrr": {"max_query_length": 6, "max_doc_length": 40},
    "co_pacrr": {"max_query_length": 6, "max_doc_length": 40},
    "bert_cat": {"encoder_layers": 1},
    **ENCODER_SETTINGS,  # FirstP, MaxP, PARADE, IDCM, the Longformer/BigBird/QDS-style encoders
    "socialformer": {"passage_length": 16, "max_passages": 4,
                     "graph": {"max_nodes": 8, "max_circles": 2, "top_k": 6, "delta": 16}},
}
# Socialformer samples its graph with a generator on the document's device: other draws on CUDA than on the CPU
SAMPLES_ON_DEVICE = {"socialformer"}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A small random BERT with a WordPiece vocabulary, saved as a Hugging Face model directory."""
    path = tmp_path_factory.mktemp("encoder")
    tokenizer = wordpiece_tokenizer(iter([" ".join(WORDS)] * 4), 300)
    torch.manual_seed(0)
    from transformers import BertModel
    bert = BertModel(build_bert(StudyEncoderConfig(layers=2, heads=2, intermediate_size=32), len(tokenizer), DIM))
    bert.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path, len(tokenizer)


def build(name, encoder):
    settings = dict(SETTINGS[name])
    model_name = name if name in MODELS else "sparse_bert"  # longformer, bigbird, qds: patterns of one model
    uses_encoder = model_name in ("bert_cat", "firstp", "maxp", "parade", "idcm", "sparse_bert", "socialformer")
    encoder_dir, encoder_vocab = encoder
    if uses_encoder:
        settings["encoder"] = str(encoder_dir)
    torch.manual_seed(0)
    embeddings = None if uses_encoder else np.random.default_rng(0).normal(size=(VOCAB, DIM)).astype(np.float32)
    idf = np.linspace(0.5, 5.0, encoder_vocab if uses_encoder else VOCAB)
    return build_model(model_name, settings, embeddings, idf=idf)


def inputs(vocab, rows=3, query_length=5, doc_length=40):
    """Padded ids (ordinary tokens 5 .. vocab − 1), documents of different lengths holding a query term."""
    generator = torch.Generator().manual_seed(0)
    query = torch.randint(5, vocab, (rows, query_length), generator=generator)
    document = torch.randint(5, vocab, (rows, doc_length), generator=generator)
    document[:, ::7] = query[:, :1]
    query[1, 3:] = 0
    document[1, 25:] = 0
    return query, document


def loss_and_gradients(model, query, document):
    """A squared-error loss in eval mode (no dropout) and the gradient of every trainable parameter."""
    model.eval()
    model.zero_grad()
    target = torch.tensor([1.0, -1.0, 0.5], device=query.device)
    loss = ((model(query, document) - target) ** 2).mean()
    loss.backward()
    return loss.detach(), {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", SETTINGS)
def test_a_model_scores_and_trains_on_cuda(name, encoder):
    model = build(name, encoder)
    query, document = inputs(min(VOCAB, encoder[1]))
    cpu_loss, cpu_gradients = loss_and_gradients(model, query, document)
    model.to("cuda")
    query, document = query.to("cuda"), document.to("cuda")
    with torch.no_grad():
        scores = model(query, document)
        assert scores.device.type == "cuda" and scores.shape == (3,) and scores.isfinite().all()
        assert torch.equal(model(query, document), scores)  # deterministic in eval mode
    loss, gradients = loss_and_gradients(model, query, document)
    assert gradients and all(g.isfinite().all() for g in gradients.values())
    if name not in SAMPLES_ON_DEVICE:  # the same loss and gradients as on the CPU
        assert torch.allclose(loss.cpu(), cpu_loss, rtol=1e-4) and gradients.keys() == cpu_gradients.keys()
        for key, gradient in gradients.items():
            assert torch.allclose(gradient.cpu(), cpu_gradients[key], rtol=1e-3, atol=1e-5), key
    before = {key: p.detach().clone() for key, p in model.named_parameters() if p.requires_grad}
    model.train()
    torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3).step()
    assert any(not torch.equal(p, before[key]) for key, p in model.named_parameters() if key in before)


@pytest.mark.parametrize("case", range(6))
def test_block_sparse_attention_equals_dense_on_cuda(case):
    generator = torch.Generator().manual_seed(case)
    width, window = 70, [0, 1, 3, 7, 11, 64][case]
    lengths = torch.tensor([width, 40, 9])
    real = torch.arange(width) < lengths.unsqueeze(1)
    is_global = (torch.rand(3, width, generator=generator) < 0.15) & real
    keys = random_edges(torch.rand(3, block_count(width, window), 2, generator=generator), lengths)
    layout = SparseLayout(real.cuda(), is_global.cuda(), window, keys.cuda())
    query, key, value = (torch.randn(3, 2, width, 8, generator=generator).cuda() for _ in range(3))
    rows = real.view(3, 1, width, 1).cuda()
    sparse = sparse_attention(query, key, value, layout, 8 ** -0.5)
    assert torch.allclose(sparse * rows, dense_reference(query, key, value, layout) * rows, atol=1e-5)


def test_efficiency_measures_cuda():
    setup = {"batch": 4, "doc_length": 50, "query_length": 5, "dim": 16, "vocab": 100, "repeats": 2, "threads": 1,
             "train_batch": 4}
    table = measure_models({"tk": {"model": "tk", "layers": 1, "heads": 2, "ff_dim": 16}}, setup)
    cuda = table[table["device"] == "cuda"]
    assert len(cuda) == 1 and (cuda["docs_per_ms"] > 0).all() and (cuda["train_steps_per_s"] > 0).all()


@pytest.mark.parametrize("name", ["tk", "tkl", "knrm", "conv_knrm", "bert_cat"])
def test_bf16_and_tf32_score_and_train_on_cuda(name, encoder):
    """neural.precision on CUDA (rankstudy.precision): bf16 autocast with the kernels and score heads in fp32, TF32
    switched on while inside and back after; the scores follow fp32's and a training pass runs."""
    from rankstudy.precision import autocast, tf32
    from rankstudy.train.length_groups import backward_in_length_groups

    model = build(name, encoder).to("cuda").eval()
    generator = torch.Generator().manual_seed(1)
    vocab = min(VOCAB, encoder[1])
    query = torch.randint(5, vocab, (1, 5), generator=generator).repeat(24, 1).cuda()
    document = torch.randint(5, vocab, (24, 40), generator=generator).cuda()
    document[::2, ::5] = query[0, 0]
    with torch.no_grad():
        exact = model(query, document)
        scores = {}
        for precision in ("bf16", "tf32"):
            with tf32(precision, "cuda"), autocast(precision, "cuda"):
                assert torch.backends.cuda.matmul.allow_tf32 == (precision == "tf32")
                scores[precision] = model(query, document)
    assert not torch.backends.cuda.matmul.allow_tf32  # put back (the fixture turned it off)
    for precision, values in scores.items():
        assert values.dtype == torch.float32 and values.isfinite().all()
        assert float(torch.corrcoef(torch.stack([exact, values]))[0, 1]) > 0.95, precision
    model.train()
    loss = backward_in_length_groups(model, query, document, 8, lambda s: (s[:12].float() - s[12:].float()).mean(),
                                     "bf16")
    assert loss.isfinite() and any(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())
