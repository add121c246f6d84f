"""Long-document BERT baselines of Socialformer's Table 1: FirstP, MaxP, PARADE-Max, IDCM
(models.passage_bert, models.idcm) and the Longformer/BigBird/QDS-style sparse-attention encoder
(models.sparse_bert), on a one-layer MiniLM and short documents."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from helpers import ENCODER_SETTINGS as SETTINGS
from helpers import single_thread
from rankstudy.config import ConfigError, from_dict
from rankstudy.models import MODELS, build_model
from rankstudy.models.bert_cat import BertCat, BertCatConfig
from rankstudy.models.idcm import IDCMConfig, distillation_loss, top_k_mask, with_auxiliary_loss
from rankstudy.models.passage_bert import PassageConfig, passage_counts, split_passages
from rankstudy.models.sparse_bert import SparseBertConfig
from rankstudy.nn.block_sparse import attention_pattern, random_edges
from rankstudy.nn.pretrained import load_encoder, pair_inputs

@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def models():
    built = {}
    for name, settings in SETTINGS.items():
        torch.manual_seed(0)
        built[name] = build_model(name if name in MODELS else "sparse_bert", settings, None).eval()
    return built


def ids(*rows, width=None):
    """Padded [B, L] WordPiece-like ids (2000 + n: ordinary word pieces), 0 = padding."""
    width = width or max(map(len, rows))
    return torch.tensor([[2000 + t for t in row] + [0] * (width - len(row)) for row in rows])


QUERY = ids([1, 2, 3], [4, 5])
DOCUMENT = ids(list(range(10, 40)), [1, 2, 3, 50, 51, 52, 53], list(range(60, 81)))  # 30, 7, 21 tokens
QUERIES = QUERY[[0, 1, 0]]


@pytest.mark.parametrize("name", SETTINGS)
def test_scores_shape_padding_and_batch_invariance(models, name):
    model = models[name]
    with torch.no_grad():
        scores = model(QUERIES, DOCUMENT)
        assert scores.shape == (3,) and scores.isfinite().all()
        wider = F.pad(DOCUMENT, (0, 17))
        front = torch.cat([torch.zeros(3, 4, dtype=torch.long), DOCUMENT], 1)  # padding first
        assert torch.allclose(model(F.pad(QUERIES, (0, 3)), wider), scores, atol=1e-5)
        assert torch.allclose(model(QUERIES, front), scores, atol=1e-5)
        assert torch.allclose(model(QUERIES[1:], DOCUMENT[1:, :21]), scores[1:], atol=1e-5)  # other batch
        assert torch.equal(model(QUERIES, DOCUMENT), scores)  # deterministic


def passage_starts(n, length=8, stride=6):
    """Starts of the 1 + ⌈max(n − length, 0) / stride⌉ passages of a document of n tokens."""
    return [k * stride for k in range(1 + max(0, math.ceil((n - length) / stride)))]


def test_passage_split_by_hand():
    document = ids(list(range(1, 21)), [1, 2, 3, 4, 5, 6, 7, 8, 9], [], [1, 2])
    passages, real = split_passages(document, 8, 6, 5)
    assert passage_counts(torch.tensor([20, 9, 0, 8, 14, 15, 100]), 8, 6, 5).tolist() == [3, 2, 1, 1, 2, 3, 5]
    assert real.tolist() == [[True, True, True], [True, True, False], [True, False, False], [True, False, False]]
    assert (passages[0] - 2000).tolist() == [list(range(1, 9)), list(range(7, 15)), list(range(13, 21))]
    assert passages[1, 1].tolist() == [2007, 2008, 2009, 0, 0, 0, 0, 0]  # the last passage may be short
    assert passages[2, 0].eq(0).all()  # an empty document has one empty passage
    truncated, real = split_passages(ids(list(range(1, 101))), 8, 6, 5)
    assert real.sum() == 5 and truncated[0, -1, -1] == 2000 + 32  # past the 5th passage: dropped


def test_firstp_is_bert_cat_on_the_first_passage(models):
    firstp = models["firstp"]
    bert = BertCat(BertCatConfig(), None).eval()
    bert.encoder, bert.score = firstp.encoder, firstp.score
    with torch.no_grad():
        assert torch.allclose(firstp(QUERIES, DOCUMENT), bert(QUERIES, DOCUMENT[:, :8]), atol=1e-5)
        # nothing after the first passage matters
        changed = DOCUMENT.clone()
        changed[:, 8:] = torch.where(changed[:, 8:] > 0, 2999, 0)
        assert torch.allclose(firstp(QUERIES, changed), firstp(QUERIES, DOCUMENT), atol=1e-6)


def test_maxp_is_the_best_passage_score(models):
    maxp = models["maxp"]
    with torch.no_grad():
        scores = maxp(QUERIES, DOCUMENT)
        for row, n in enumerate([30, 7, 21]):
            alone = [maxp(QUERIES[row:row + 1], DOCUMENT[row:row + 1, s:min(s + 8, n)]) for s in passage_starts(n)]
            assert len(alone) == [5, 1, 4][row]
            assert torch.allclose(scores[row], torch.cat(alone).max(), atol=1e-5)


def test_parade_max_pools_passage_vectors(models):
    parade = models["parade"]
    with torch.no_grad():
        scores = parade(QUERIES, DOCUMENT)
        for row, n in enumerate([30, 7, 21]):
            vectors = []
            for start in passage_starts(n):
                pair = pair_inputs(QUERIES[row:row + 1], DOCUMENT[row:row + 1, start:start + 8], 101, 102)
                hidden = parade.encoder(input_ids=pair[0], token_type_ids=pair[1], attention_mask=pair[2])
                vectors.append(hidden.last_hidden_state[0, 0])
            expected = parade.score(torch.stack(vectors).max(0).values)
            assert torch.allclose(scores[row], expected, atol=1e-5)
            if len(vectors) > 1:  # the element-wise max is no single passage's vector
                assert not any(torch.allclose(torch.stack(vectors).max(0).values, v) for v in vectors)


def test_idcm_scores_only_selected_passages(models):
    idcm = models["idcm"]
    with torch.no_grad():
        idcm.top_weights.copy_(torch.tensor([2.0, 0.5]))
        passages, real = idcm.passages(DOCUMENT)
        z = idcm.selection_scores(QUERIES, passages, real)
        assert z[real].isfinite().all() and (z[~real] == float("-inf")).all()
        encoded_rows = []
        hook = idcm.encoder.register_forward_pre_hook(lambda module, args, kwargs: encoded_rows.append(
            kwargs["input_ids"].shape[0]), with_kwargs=True)
        try:
            scores = idcm(QUERIES, DOCUMENT)
        finally:
            hook.remove()
        assert encoded_rows == [2 + 1 + 2]  # k = 2 of 5, 1 of 1, 2 of 4 passages: one encoder call
        for row in range(3):
            chosen = z[row].masked_fill(~real[row], float("-inf")).argsort(descending=True, stable=True)
            chosen = chosen[:min(2, int(real[row].sum()))]
            etm = torch.stack([idcm.score(idcm.encode_pairs(QUERIES[row:row + 1], passages[row, k:k + 1]))[0, 0]
                               for k in chosen.tolist()]).sort(descending=True).values
            assert torch.allclose(scores[row], (etm * torch.tensor([2.0, 0.5])[:len(etm)]).sum(), atol=1e-5)


def test_top_k_mask_and_distillation_loss():
    scores = torch.tensor([[0.5, 2.0, 2.0, -1.0], [3.0, 0.0, 0.0, 0.0]])
    allowed = torch.tensor([[True, True, True, True], [False, True, True, False]])
    assert top_k_mask(scores, allowed, 2).tolist() == [[False, True, True, False], [False, True, True, False]]
    assert top_k_mask(scores, allowed, 1).tolist() == [[False, True, False, False], [False, True, False, False]]
    student, teacher = torch.tensor([[1.0, 0.0, 5.0]]), torch.tensor([[0.0, 0.0, 9.0]])
    mask = torch.tensor([[True, True, False]])  # the third passage is not a candidate
    assert torch.allclose(distillation_loss(student, teacher, mask), -torch.log_softmax(student[0, :2], 0).mean())
    assert distillation_loss(student, teacher, torch.tensor([[True, False, False]])) == 0  # one passage: no loss


def test_auxiliary_loss_gradient():
    x, y = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0], requires_grad=True)
    out = with_auxiliary_loss(x * 2, (y ** 2).sum())
    assert torch.equal(out, x.detach() * 2)
    (out * torch.tensor([1.0, -1.0])).sum().backward()
    assert x.grad.tolist() == [2.0, -2.0] and y.grad.tolist() == [6.0]  # as if the loss had been added


def test_idcm_training_distils_the_selector_only(models):
    idcm = models["idcm"]
    idcm.train()
    idcm.encoder.eval()  # no dropout inside the encoder: exact gradients
    idcm.dropout.eval()
    try:
        idcm.zero_grad()
        scores = idcm(QUERIES, DOCUMENT)
        scores.sum().backward()
        selector_grads = [p.grad.clone() for p in idcm.selector.parameters()]
        head_grad = idcm.score.weight.grad.clone()
        # the encoder scored all 10 passages in training; the selector's gradient is the distillation's
        passages, real = idcm.passages(DOCUMENT)
        idcm.zero_grad()
        z = idcm.selection_scores(QUERIES, passages, real)
        with torch.no_grad():
            r = idcm.score(idcm.encode_passages(QUERIES, passages, real)).squeeze(-1)
        distillation_loss(z, r, real).backward()
        for got, expected in zip(selector_grads, [p.grad for p in idcm.selector.parameters()]):
            assert torch.allclose(got, expected, atol=1e-6)
        assert head_grad.abs().sum() > 0
        with torch.no_grad():
            best = r.masked_fill(~real, float("-inf")).topk(2).values
            best[1, 1] = 0.0  # the second document has one passage: its second "best" counts 0
            assert torch.allclose(scores, (best * idcm.top_weights).sum(1), atol=1e-5)
    finally:
        idcm.eval()
        idcm.zero_grad()


def test_attention_patterns_by_hand():
    # [CLS] q [SEP] d1 d2 d3 d4 [SEP] pad: positions 0..7 real, 0..2 global, window 1
    real = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    is_global = torch.tensor([[1, 1, 1, 0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    longformer = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 0],
                               [1, 1, 1, 1, 1, 1, 1, 1, 0],
                               [1, 1, 1, 1, 1, 1, 1, 1, 0],
                               [1, 1, 1, 1, 1, 0, 0, 0, 0],
                               [1, 1, 1, 1, 1, 1, 0, 0, 0],
                               [1, 1, 1, 0, 1, 1, 1, 0, 0],
                               [1, 1, 1, 0, 0, 1, 1, 1, 0],
                               [1, 1, 1, 0, 0, 0, 1, 1, 0],
                               [0, 0, 0, 0, 0, 0, 0, 0, 1]], dtype=torch.bool)  # padding: itself only
    assert torch.equal(attention_pattern(real, is_global, 1)[0], longformer)
    keys = torch.zeros(1, 9, 1, dtype=torch.long)
    keys[0, 3, 0], keys[0, 7, 0], keys[0, 8, 0] = 6, 4, 5  # d1 → d4, [SEP] → d2, padding → d3
    bigbird = longformer.clone()
    bigbird[3, 6] = bigbird[7, 4] = True  # added for the query token only: random edges are not symmetric
    assert torch.equal(attention_pattern(real, is_global, 1, keys)[0], bigbird)
    assert not bigbird[6, 3] and not bigbird[4, 7]


def test_random_edges_deterministic_at_evaluation(models):
    bigbird = models["bigbird"]
    keys = random_edges(torch.tensor([[[0.0, 0.5, 1.0 - 2 ** -24]]]), torch.tensor([2048, 7]))
    assert keys[:, 0].tolist() == [[0, 1024, 2047], [0, 3, 6]]  # ⌊u·n⌋ < n
    with torch.no_grad():
        _, layout = bigbird.inputs(QUERIES, DOCUMENT)
        mask, alone = layout.dense_mask(), bigbird.inputs(QUERIES[1:2], DOCUMENT[1:2])[1].dense_mask()
        n = alone.shape[1]
        assert torch.equal(mask[1, :n, :n], alone[0])  # same edges whatever the batch
        per_token = layout.token_random_keys()
        assert torch.equal(per_token[:, 0], per_token[:, 1]) and torch.equal(per_token[:, 2], per_token[:, 3])
        assert not torch.equal(per_token[:, 0], per_token[:, 2])  # window 2: query blocks of 2 tokens share draws
        extra = mask[0] & ~longformer_part(QUERIES, DOCUMENT)[0]
        assert extra.sum(1).max() <= 3 and extra.any()  # ≤ random_keys edges a row beyond window and globals
        assert not torch.equal(extra, extra.T)
        bigbird.train()
        try:
            torch.manual_seed(1)
            first = bigbird.inputs(QUERIES, DOCUMENT)[1].random_keys
            torch.manual_seed(1)
            assert torch.equal(bigbird.inputs(QUERIES, DOCUMENT)[1].random_keys, first)  # seeded
            assert not torch.equal(bigbird.inputs(QUERIES, DOCUMENT)[1].random_keys, first)  # fresh draws every step
        finally:
            bigbird.eval()


def longformer_part(query, document):
    """The Longformer part (window 2, query global) of the sparse models' masks for these inputs."""
    _, types, attention = pair_inputs(query, document, 101, 102, 64)
    return attention_pattern(attention.bool(), (types == 0) & attention.bool(), 2)


def test_qds_makes_the_query_like_block_global(models):
    qds = models["qds"]
    query = ids([7, 8])
    document = ids([1, 2, 3, 4, 5, 6, 9, 10, 7, 8, 7, 8, 11, 12])  # blocks of 4: the third matches the query
    with torch.no_grad():
        mask = qds.inputs(query, document)[1].dense_mask()
    # [CLS] q q [SEP] | d0 … d13 | [SEP]: 19 tokens; the third block is positions 12..15
    real = torch.ones(1, 19, dtype=torch.bool)
    is_global = torch.zeros(1, 19, dtype=torch.bool)
    is_global[0, :4] = is_global[0, 12:16] = True
    expected = attention_pattern(real, is_global, 2)
    assert torch.equal(mask, expected)
    assert mask[0, 5, 15] and mask[0, 18, 12] and not mask[0, 5, 17]  # far tokens reach the global block only


def test_sparse_mask_is_what_the_encoder_attends(models):
    model = models["longformer"]
    input_ids, _, attention = pair_inputs(QUERIES, DOCUMENT, 101, 102, 64)
    inputs, layout = model.inputs(QUERIES, DOCUMENT)
    allowed = layout.dense_mask()
    with torch.no_grad():
        hidden = model.encoder(**inputs).last_hidden_state
        eager = load_encoder("minilm", layers=1, attn_implementation="eager").eval()
        eager.pooler = None
        eager.load_state_dict(model.encoder.state_dict())
        additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min).unsqueeze(1)
        reference = eager(input_ids=inputs["input_ids"], token_type_ids=inputs.get("token_type_ids"),
                          attention_mask=additive).last_hidden_state
        real = attention.bool()
        assert torch.allclose(hidden[real], reference[real], atol=1e-5)
        # with one layer, a document token does not see a non-global token 3 positions away …
        changed = inputs["input_ids"].clone()
        changed[0, 15] = 2999
        after = model.encoder(**{**inputs, "input_ids": changed}).last_hidden_state
        assert torch.allclose(after[0, 12], hidden[0, 12], atol=1e-6)
        assert torch.allclose(after[0, 18], hidden[0, 18], atol=1e-6)
        assert not torch.allclose(after[0, 14], hidden[0, 14]) and not torch.allclose(after[0, 0], hidden[0, 0])


def test_positions_beyond_512():
    torch.manual_seed(0)
    model = build_model("sparse_bert", {"encoder_layers": 1, "max_length": 700, "window": 8}, None).eval()
    table = model.encoder.embeddings.position_embeddings.weight
    assert table.shape[0] == 700 and model.encoder.config.max_position_embeddings == 700
    assert torch.equal(table[512:700], table[:188])  # Longformer's copies
    long_document = torch.randint(2000, 3000, (2, 800))
    long_document[1, 650:] = 0
    with torch.no_grad():
        inputs, _ = model.inputs(QUERY, long_document)
        assert inputs["input_ids"].shape[1] == 700  # truncated to max_length
        scores = model(QUERY, long_document)
        assert scores.isfinite().all()
        assert torch.allclose(model(QUERY[1:], long_document[1:, :650]), scores[1:], atol=1e-5)


def test_attention_dropout_setting(models):
    def attention_dropout(model):
        return {layer.attention.self.dropout.p for layer in model.encoder.encoder.layer}

    assert attention_dropout(models["maxp"]) == {0.1}  # None: the encoder's own
    assert attention_dropout(models["qds"]) == {0.0}


def test_configs_reject_bad_values():
    with pytest.raises(ConfigError, match="attention_dropout"):
        from_dict(PassageConfig, {"attention_dropout": 1.0}, "models.maxp")
    with pytest.raises(ConfigError, match="pattern"):
        from_dict(SparseBertConfig, {"pattern": "dense"}, "models.sparse_bert")
    with pytest.raises(ConfigError, match="passage_stride"):
        from_dict(PassageConfig, {"passage_stride": 0}, "models.maxp")
    with pytest.raises(ConfigError, match="unknown key"):
        from_dict(PassageConfig, {"selected_passages": 2}, "models.maxp")
    with pytest.raises(ConfigError, match="selected_passages"):
        from_dict(IDCMConfig, {"selected_passages": 0}, "models.idcm")
    with pytest.raises(ConfigError, match="no room for a query"):
        build_model("maxp", {"encoder_layers": 1, "passage_length": 510}, None)
