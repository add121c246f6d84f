"""The Socialformer re-ranker: blocks, seeding, padding, inter-circle mixing, dynamic centrality, learning."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import numpy as np
import pytest
import torch

from helpers import loss_before_and_after, single_thread
from rankstudy.config import ConfigError, from_dict
from rankstudy.models import build_model
from rankstudy.models.socialformer import SocialGraphConfig
from rankstudy.models.socialformer.model import (
    DocumentPlan,
    Socialformer,
    SocialformerConfig,
    dynamic_centrality_batch,
    pair_seed,
)
from rankstudy.nn.pretrained import load_encoder, pair_inputs, save_encoder
from rankstudy.store import TokenStore, build_store_with, collection_idf
from rankstudy.train.losses import listwise_softmax_ce

# small graphs and blocks so that a 60-token document has several circles and passages; all six
# MiniLM layers, since after one or two its [CLS] barely depends on the input (scores would hardly
# differ between documents, and comparisons of scores would prove little)
GRAPH = {"max_nodes": 8, "max_circles": 3, "sparsity": 0.8, "top_k": 12, "p": 10, "delta": 20, "step": 2}
SMALL = {"encoder_layers": None, "centrality_layers": 2, "graph": GRAPH, "passage_length": 16, "max_passages": 2}


def config(**changes) -> SocialformerConfig:
    settings = {**SMALL, **changes}
    settings["graph"] = {**GRAPH, **changes.get("graph", {})}
    return from_dict(SocialformerConfig, settings, "models.socialformer")


def build(seed: int = 0, idf=None, **changes) -> Socialformer:
    torch.manual_seed(seed)
    return Socialformer(config(**changes), None, idf=idf).eval()


LIGHT = {"weights": {"static_distance": 0.5, "dynamic_distance": 0.5}}  # no frozen encoder to load


@contextlib.contextmanager
def graph_settings(model: Socialformer, **changes):
    """Temporarily change the model's graph config (it is read at every ``plan``)."""
    original = model.config.graph
    model.config.graph = dataclasses.replace(original, **changes)
    try:
        yield
    finally:
        model.config.graph = original


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with single_thread():
        yield


@pytest.fixture(scope="module")
def model():
    return build(idf=np.linspace(0.5, 5.0, 30522))


def batch(rows: int = 3, query_length: int = 5, doc_length: int = 60, seed: int = 0):
    """Padded WordPiece-like ids (no 0 inside), queries sharing terms with their documents."""
    generator = torch.Generator().manual_seed(seed)
    query = torch.randint(2000, 2040, (rows, query_length), generator=generator)
    document = torch.randint(2000, 2200, (rows, doc_length), generator=generator)
    document[:, ::7] = query[:, :1]  # every document holds a query term
    return query, document


# ---------------------------------------------------------------- config


def test_config_nested_graph_and_validation():
    cfg = from_dict(SocialformerConfig, {"graph": {"partition": "edge", "max_nodes": 32}}, "models.socialformer")
    assert isinstance(cfg.graph, SocialGraphConfig) and (cfg.graph.partition, cfg.graph.max_nodes) == ("edge", 32)
    assert cfg.graph.max_circles == 16 and cfg.encoder == "minilm"
    for bad in ({"aggregation": "sum"}, {"merge_init": "zero"}, {"passage_length": 0}, {"max_passages": -1},
                {"graph": {"partition": "circle"}}, {"dropout": 1.0}, {"unknown": 1}):
        with pytest.raises(ConfigError):
            from_dict(SocialformerConfig, bad, "models.socialformer")


def test_training_config_optimizer_option():
    from rankstudy.train.loop import OPTIMIZERS, TrainConfig

    base = {"loss": "listwise", "max_steps": 1, "validate_every": 1, "patience": 1, "metric": "RR@10",
            "validation_depth": 1}
    assert OPTIMIZERS[from_dict(TrainConfig, base).optimizer] is torch.optim.Adam
    assert OPTIMIZERS[from_dict(TrainConfig, {**base, "optimizer": "adamw"}).optimizer] is torch.optim.AdamW
    with pytest.raises(ConfigError, match="optimizer"):
        from_dict(TrainConfig, {**base, "optimizer": "sgd"})


def test_inter_heads_must_divide_hidden_size():
    with pytest.raises(ConfigError, match="inter_heads"):
        Socialformer(config(inter_heads=5, graph={"weights": {"static_distance": 1.0}}))


# ---------------------------------------------------------------- shapes, padding, determinism


def test_scores_shape_including_empty_rows(model):
    query, document = batch(6)
    document[2] = 0  # an empty document
    query[3, 1:] = 0  # a one-token query
    document[4, 1:] = 0  # one- and two-token documents: no pair or one pair to sample
    document[5, 2:] = 0
    with torch.no_grad():
        scores = model(query, document)
    assert scores.shape == (6,) and torch.isfinite(scores).all()
    plans = model.plan(query, document)
    assert plans[2].blocks == []  # scored through one empty block [CLS] q [SEP] [SEP]
    assert [p.tolist() for p in plans[4].blocks] == [[0]] and len(plans[5].circles) <= 1


def test_padding_and_batch_composition_leave_scores_unchanged(model):
    query, document = batch(3)
    document[1, 45:] = 0  # a shorter document in the batch
    with torch.no_grad():
        scores = model(query, document)
        padded = model(torch.cat([query, torch.zeros(3, 4, dtype=torch.long)], 1),
                       torch.cat([document, torch.zeros(3, 9, dtype=torch.long)], 1))
        alone = torch.stack([model(query[i:i + 1], document[i:i + 1])[0] for i in range(3)])
    assert torch.equal(padded, scores)  # padding changes neither graphs nor block inputs
    assert torch.allclose(alone, scores, atol=1e-5)  # other documents only change the batch's padding


def test_same_seed_same_graphs_and_scores(model):
    query, document = batch(3)
    twin = build(idf=np.linspace(0.5, 5.0, 30522))
    with torch.no_grad():
        assert torch.equal(model(query, document), twin(query, document))
    plans, again = model.plan(query, document), twin.plan(query, document)
    assert all(torch.equal(a, b) for p, q in zip(plans, again) for a, b in zip(p.circles, q.circles))
    with graph_settings(model, seed=1):
        other_seed = model.plan(query, document)
    assert any(len(p.circles) != len(q.circles) or not all(torch.equal(a, b) for a, b in zip(p.circles, q.circles))
               for p, q in zip(plans, other_seed))


def test_evaluation_keeps_each_pairs_plan_until_the_state_changes(model):
    """A pair's evaluation plan is built once (a training run validates the same pairs every time), is the plan
    built afresh, and is built again after the idf, the state or the graph settings change; training never keeps."""
    query, document = batch(3)
    plans = model.plan(query, document)
    assert all(a is b for a, b in zip(plans, model.plan(query[[2, 1, 0]], document[[2, 1, 0]])[::-1]))
    fresh = build(idf=np.linspace(0.5, 5.0, 30522)).plan(query, document)
    assert all(torch.equal(a, b) for p, q in zip(plans, fresh) for a, b in zip(p.blocks, q.blocks))
    model.set_idf(np.linspace(0.5, 5.0, 30522))
    assert model.plan(query, document)[0] is not plans[0]
    kept = model.plan(query, document)[0]
    model.load_state_dict(model.state_dict())
    assert model.plan(query, document)[0] is not kept
    kept = model.plan(query, document)[0]
    with graph_settings(model, seed=1):
        assert model.plan(query, document)[0] is not kept
    model.train()
    try:
        assert model.plan(query, document)[0] is not model.plan(query, document)[0]
    finally:
        model.eval()


def test_training_redraws_graphs_each_step_reproducibly():
    query, document = batch(2)
    first, second = build(graph=LIGHT), build(graph=LIGHT)
    first.train(), second.train()
    seen = []
    for _ in range(2):
        plan_a, plan_b = first.plan(query, document), second.plan(query, document)
        assert all(torch.equal(a, b) for p, q in zip(plan_a, plan_b) for a, b in zip(p.circles, q.circles))
        seen.append(plan_a)
        first(query, document), second(query, document)
    assert int(first.graph_step) == 2
    assert any(not torch.equal(a, b) for p, q in zip(*seen) for a, b in zip(p.circles, q.circles))
    assert pair_seed(0, None, query[0], document[0]) != pair_seed(0, 0, query[0], document[0])


# ---------------------------------------------------------------- blocks


@pytest.mark.parametrize("partition", ["node", "edge"])
def test_blocks_respect_circle_and_passage_limits(model, partition):
    query, document = batch(3, doc_length=80)
    with graph_settings(model, partition=partition):
        plans = model.plan(query, document)
    for plan in plans:
        assert [p.tolist() for p in plan.passages] == [list(range(16)), list(range(16, 32))]
        assert 1 <= len(plan.circles) <= 3
        for circle in plan.circles:
            assert 2 <= circle.numel() <= 8 and torch.equal(circle, circle.sort().values)
            assert circle.unique().numel() == circle.numel() and int(circle.max()) < 80
        if partition == "node":
            members = torch.cat(plan.circles)
            assert members.unique().numel() == members.numel()  # disjoint circles


def test_block_inputs_are_query_then_block_tokens_in_document_order(model):
    query, document = batch(2, doc_length=40)
    plans = [DocumentPlan([torch.arange(0, 4)], [torch.tensor([3, 9, 30])]),
             DocumentPlan([], [torch.tensor([1, 2])])]
    input_ids, token_types, mask, owner, slot = model._block_inputs(query, document, plans)
    expected = [[101, *query[0].tolist(), 102, *document[0, :4].tolist(), 102],
                [101, *query[0].tolist(), 102, *document[0, [3, 9, 30]].tolist(), 102],
                [101, *query[1].tolist(), 102, *document[1, [1, 2]].tolist(), 102]]
    for row, ids in enumerate(expected):
        assert input_ids[row, :len(ids)].tolist() == ids and int(mask[row].sum()) == len(ids)
        assert token_types[row, :len(ids)].tolist() == [0] * 7 + [1] * (len(ids) - 7)
    assert owner.tolist() == [0, 0, 1] and slot.tolist() == [0, 1, 0]


def test_block_input_length_is_capped(model):
    query, document = batch(1, doc_length=40)
    model.config.max_length = 12
    try:
        input_ids, _, mask, _, _ = model._block_inputs(query, document, [DocumentPlan([torch.arange(16)], [])])
    finally:
        model.config.max_length = 512
    assert mask.sum(1).tolist() == [12] and input_ids[0, 11] == 102  # 5 query + 4 document tokens kept


# ---------------------------------------------------------------- the network


def test_untrained_model_is_the_encoder_on_each_block(model):
    """merge_init identity: before training each block's [CLS] is the pre-trained encoder's, so the
    layer loop, masks and length buckets reproduce a plain encoder call exactly."""
    query, document = batch(2)
    plans = model.plan(query, document)
    with torch.no_grad():
        cls, owner, _ = model.block_states(query, document, plans)
        for index, (row, positions) in enumerate((r, p) for r, plan in enumerate(plans) for p in plan.blocks):
            ids, types, mask = pair_inputs(query[row:row + 1], document[row:row + 1, positions], 101, 102)
            expected = model.encoder(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state[0, 0]
            assert owner[index] == row
            assert torch.allclose(cls[index], expected, atol=1e-5)
        scores = model(query, document)
        pooled = model.encoder.pooler(cls.unsqueeze(1))
        for row in range(2):
            vector = pooled[owner == row].amax(0)
            assert torch.allclose(scores[row], model.score(vector)[0], atol=1e-6)  # max pooling, then score


def test_a_warm_started_encoder_brings_its_scoring_head(tmp_path):
    """On a cross-encoder's export (an encoder directory with score_head.pt) the model starts from
    that head, without the never-trained pooler: untrained, it is PARADE-Max over its blocks with
    the warm start's scorer. ``warm_head: false`` keeps the released pooler + Xavier head."""
    head = torch.nn.Linear(384, 1)
    torch.nn.init.normal_(head.weight)
    save_encoder(load_encoder("minilm"), "minilm", tmp_path / "encoder", head=head)
    warm = build(encoder=str(tmp_path / "encoder"), graph=LIGHT)
    assert warm.encoder.pooler is None
    assert torch.equal(warm.score.weight, head.weight) and torch.equal(warm.score.bias, head.bias)
    query, document = batch(2)
    with torch.no_grad():
        cls, owner, _ = warm.block_states(query, document)
        scores = warm(query, document)
        for row in range(2):
            assert torch.allclose(scores[row], head(cls[owner == row].amax(0))[0], atol=1e-5)
    released = build(encoder=str(tmp_path / "encoder"), graph=LIGHT, warm_head=False)
    assert released.encoder.pooler is not None and not torch.equal(released.score.weight, head.weight)


def test_inter_circle_layer_mixes_blocks_of_one_document_only():
    mixing = build(merge_init="default", graph=LIGHT)
    query, document = batch(2, doc_length=40)
    plans = [DocumentPlan([torch.arange(0, 10), torch.arange(10, 20)], []) for _ in range(2)]
    changed = document.clone()
    changed[0, 3] = 2999  # a token of document 0's first block only
    with torch.no_grad():
        before, _, _ = mixing.block_states(query, document, plans)
        after, _, _ = mixing.block_states(query, changed, plans)
        # without the inter-circle path (identity merge) the second block cannot see the change
        identity_before, _, _ = build(graph=LIGHT).block_states(query, document, plans)
    assert not torch.allclose(before[0], after[0])
    assert (before[1] - after[1]).abs().max() > 1e-4  # block 2 of document 0 sees block 1's change
    assert torch.allclose(before[2:], after[2:], atol=1e-6)  # document 1 does not
    assert not torch.allclose(before[1], identity_before[1])


@pytest.mark.parametrize("aggregation", ["mean", "attention"])
def test_other_aggregations(aggregation):
    model = build(aggregation=aggregation, graph=LIGHT)
    query, document = batch(2)
    with torch.no_grad():
        cls, owner, _ = model.block_states(query, document)
        pooled = model.encoder.pooler(cls.unsqueeze(1))
        scores = model(query, document)
        for row in range(2):
            units = pooled[owner == row]
            if aggregation == "mean":
                vector = units.mean(0)
            else:
                vector = (torch.softmax(model.block_attention(units).squeeze(1), 0)[:, None] * units).sum(0)
            assert torch.allclose(scores[row], model.score(vector)[0], atol=1e-6)


# ---------------------------------------------------------------- patterns


@pytest.mark.parametrize("pattern", ["static_distance", "static_centrality", "dynamic_distance",
                                     "dynamic_centrality", "random"])
def test_each_pattern_can_be_switched_off_or_used_alone(model, pattern):
    query, document = batch(2)
    everything = {name: 1.0 for name in ("static_distance", "static_centrality", "dynamic_distance",
                                         "dynamic_centrality")}
    settings = [{pattern: 1.0}] + ([] if pattern == "random" else [{**everything, pattern: 0.0}])
    for weights in settings:
        with graph_settings(model, weights=weights):
            plans = model.plan(query, document)
            with torch.no_grad():
                scores = model(query, document)
        assert all(plan.circles and len(plan.passages) == 2 for plan in plans)
        assert torch.isfinite(scores).all()


def test_frozen_centrality_encoder_is_unsaved_untrained_and_moves_with_the_model(model):
    frozen = model._centrality[0]
    model.train()
    assert not any(p.requires_grad for p in frozen.parameters()) and not frozen.training  # no dropout
    model.eval()
    frozen_storage = {p.data_ptr() for p in frozen.parameters()}
    assert not frozen_storage & {t.data_ptr() for t in model.state_dict().values()}  # never saved
    assert not frozen_storage & {p.data_ptr() for p in model.parameters()}  # never optimised
    model.double()  # .to()/.double()/.cuda() reach it through _apply
    try:
        assert frozen.embeddings.word_embeddings.weight.dtype == torch.float64
    finally:
        model.float()
    assert frozen.embeddings.word_embeddings.weight.dtype == torch.float32
    light = build(graph=LIGHT)
    assert light._centrality == ()


def test_patterns_change_the_graph(model):
    query, document = batch(2)
    circles = {}
    for pattern in ("static_distance", "dynamic_centrality", "random"):
        with graph_settings(model, weights={pattern: 1.0}):
            circles[pattern] = [c.tolist() for plan in model.plan(query, document) for c in plan.circles]
    assert len({str(c) for c in circles.values()}) == 3


def test_dynamic_centrality_is_the_encoders_cls_attention(model):
    """Weights at the picked tokens are the [CLS] attention (summed over heads) of the frozen
    encoder on [CLS] q [SEP] picked tokens [SEP], rescaled to their cosine mass; the rest keep
    their cosine; then divided by the maximum. Batched (with padding) = one pair at a time."""
    frozen = model._centrality[0]
    query, document = batch(2, doc_length=50)
    queries = [query[0], query[1, :3]]
    documents = [document[0], document[1, :30]]
    weights = dynamic_centrality_batch(frozen, 101, 102, queries, documents, top_k=12)
    assert [w.shape for w in weights] == [(50,), (30,)]
    for q, d, w in zip(queries, documents, weights):
        embed = frozen.embeddings.word_embeddings
        with torch.no_grad():
            mean = embed(q).mean(0, keepdim=True)
            cosine = torch.nn.functional.cosine_similarity(mean, embed(d), dim=1)
            picked = torch.sort(cosine, descending=True, stable=True).indices[:12].sort().values  # ties: earlier
            ids, types, mask = pair_inputs(q[None], d[picked][None], 101, 102)
            attention = frozen(input_ids=ids, token_type_ids=types, attention_mask=mask,
                               output_attentions=True).attentions[-1][0].sum(0)[0]
        cls_on_picked = attention[2 + q.numel():2 + q.numel() + 12]
        raw = cosine.clamp_min(0).clone()
        raw[picked] = cls_on_picked * cosine.clamp_min(0)[picked].sum() / cls_on_picked.sum()
        assert torch.allclose(w, raw / raw.max(), atol=1e-5)
        # among the picked tokens, the order is the order of the [CLS] attention
        assert torch.equal(w[picked].argsort(), cls_on_picked.argsort())
    assert torch.equal(dynamic_centrality_batch(frozen, 101, 102, [query[0][:0]], [document[0]], 12)[0],
                       torch.zeros(50))


# ---------------------------------------------------------------- idf and the registry


def test_collection_idf_from_a_token_store(tmp_path):
    texts = {"d1": [5, 7, 7], "d2": [7, 9], "d3": [], "d4": [5, 5, 5, 11]}
    (tmp_path / "c.tsv").write_text("".join(f"{k}\t{' '.join(map(str, v))}\n" for k, v in texts.items()))
    encode = lambda batch: [[int(t) for t in text.split()] for text in batch]  # noqa: E731
    build_store_with(tmp_path / "c.tsv", encode, tmp_path / "store", chunk_tokens=2)
    store = TokenStore(tmp_path / "store")
    for chunk in (1, 3, 1 << 20):  # chunking never splits a text's distinct ids
        idf = collection_idf(store, size=14, chunk_tokens=chunk)
        df = np.ones(14)
        df[5], df[7], df[9], df[11] = 2, 2, 1, 1
        expected = np.log(4 / df).astype(np.float32)
        expected[0] = 0.0
        assert np.allclose(idf, expected)
    assert collection_idf(store).shape == (12,)
    with pytest.raises(ValueError, match="does not fit"):
        collection_idf(store, size=10)


def test_build_model_passes_idf_and_state_dict_keeps_it():
    settings = {**SMALL, "graph": {**GRAPH, "weights": {"static_centrality": 1.0}, "sparsity": 0.9}}
    idf = np.full(100, 0.01, dtype=np.float32)
    idf[99] = 100.0
    model = build_model("socialformer", settings, np.zeros((0, 0)), idf=idf)
    assert isinstance(model, Socialformer) and bool(model.idf_given)
    assert torch.equal(model.idf[:100], torch.from_numpy(idf)) and float(model.idf[5000]) == 100.0
    fresh = build_model("socialformer", settings, np.zeros((0, 0)))
    assert not bool(fresh.idf_given) and float(fresh.idf.max()) == 1.0
    fresh.load_state_dict(model.state_dict())
    assert bool(fresh.idf_given) and torch.equal(fresh.idf, model.idf)
    # tf·idf drives static centrality: the one rare token links to all others and heads the first circle
    document = torch.full((1, 40), 20)
    document[0, 10] = 99
    first = fresh.eval().plan(torch.tensor([[20]]), document)[0].circles[0]
    assert 10 in first.tolist()


# ---------------------------------------------------------------- learning


def test_a_few_steps_reduce_the_listwise_loss():
    """Two groups (1 positive + 3 negatives) of real text; the loss in eval mode (fixed graphs, no
    dropout) before and after five AdamW steps."""
    from rankstudy.nn.pretrained import load_tokenizer

    tokenizer = load_tokenizer("minilm")
    topics = ["apple pie", "solar panel", "jazz guitar", "river fishing", "mountain bike"]
    filler = "notes on the history of the town and its people over many years"

    def ids(texts):
        rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        out = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
        for row, values in zip(out, rows):
            row[:len(values)] = torch.tensor(values)
        return out

    query = ids([topics[0]] * 4 + [topics[1]] * 4)
    docs = [f"{filler} a {t} guide {filler}" for t in (topics[0], topics[2], topics[3], topics[4],
                                                       topics[1], topics[2], topics[3], topics[4])]
    document = ids(docs)
    model = build(seed=3, graph=LIGHT)
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)  # a faster test
    encoder = [p for name, p in model.named_parameters() if name.startswith("encoder.") and p.requires_grad]
    head = [p for name, p in model.named_parameters() if not name.startswith("encoder.")]
    optimizer = torch.optim.AdamW([{"params": encoder, "lr": 3e-5}, {"params": head, "lr": 1e-3}])

    def loss():
        return listwise_softmax_ce(model(query, document).view(2, 4))

    before, after = loss_before_and_after(model, optimizer, loss)
    assert after < before - 0.2, (before, after)


def test_train_and_rerank_through_the_experiment_steps(tmp_path):
    """experiment.train_model computes the collection IDF for a NEEDS_IDF model, the trained
    model.pt keeps it, and rerank_run loads and scores with it (AdamW through the loop)."""
    from rankstudy import formats
    from rankstudy.experiment import load_trained, rerank_run, train_model
    from rankstudy.text.wordpiece import build_wordpiece_store
    from rankstudy.train.examples import write_groups

    topics = ["apple pie", "solar panel", "jazz guitar"]
    docs = {f"d{i}": f"a short note on {t} and more about {t} today" for i, t in enumerate(topics)}
    docs["d3"] = "nothing related here at all"
    formats.write_collection(tmp_path / "docs.tsv", docs.items())
    formats.write_queries(tmp_path / "queries.tsv", {f"q{i}": t for i, t in enumerate(topics)})
    build_wordpiece_store(tmp_path / "docs.tsv", "minilm", tmp_path / "doc_store")
    build_wordpiece_store(tmp_path / "queries.tsv", "minilm", tmp_path / "query_store", kind="queries")
    write_groups(tmp_path / "groups.tsv", [(f"q{i}", f"d{i}", [f"d{(i + 1) % 3}", "d3"]) for i in range(3)])
    run = {f"q{i}": [(d, 1.0 - 0.1 * j) for j, d in enumerate(docs)] for i in range(3)}
    formats.write_run(tmp_path / "bm25.run", run, "bm25")
    formats.write_qrels(tmp_path / "qrels.txt", {f"q{i}": {f"d{i}": 1} for i in range(3)})
    np.save(tmp_path / "embeddings.npy", np.zeros((0, 0), dtype=np.float32))
    settings = {**SMALL, "encoder_layers": 1,
                "graph": {**GRAPH, "weights": {"static_distance": 0.5, "static_centrality": 0.5}}}
    training = {"loss": "listwise", "max_steps": 2, "validate_every": 2, "patience": 1, "metric": "RR@10",
                "validation_depth": 4, "batch_size": 2, "max_doc_length": 24, "optimizer": "adamw",
                "learning_rates": {"default": 1e-3, "encoder": 1e-5}, "device": "cpu"}
    out = tmp_path / "model"
    train_model("socialformer", settings, training, tmp_path / "embeddings.npy", tmp_path / "groups.tsv",
                tmp_path / "query_store", tmp_path / "doc_store", tmp_path / "query_store", tmp_path / "bm25.run",
                tmp_path / "qrels.txt", out, seed=1)
    trained, spec = load_trained(out, tmp_path / "embeddings.npy", torch.device("cpu"))
    assert (spec.max_query_length, spec.max_doc_length) == (30, 24)  # the lengths it trained at (30: the default)
    idf = collection_idf(TokenStore(tmp_path / "doc_store"))
    assert bool(trained.idf_given) and torch.equal(trained.idf[:len(idf)], torch.from_numpy(idf))
    assert int(trained.graph_step) == 2  # two training steps drew two sets of graphs
    rerank_run(out, tmp_path / "embeddings.npy", tmp_path / "doc_store",
               [(tmp_path / "query_store", tmp_path / "bm25.run", tmp_path / "socialformer.run")], "sf", depth=4,
               batch_size=3, device="cpu")
    reranked = formats.read_run(tmp_path / "socialformer.run")
    assert {qid: sorted(d for d, _ in ranking) for qid, ranking in reranked.items()} == \
        {qid: sorted(docs) for qid in run}
    # the model directory belongs to these settings: retraining it with others starts afresh, it is
    # not resumed under the old recorded settings (load_trained builds from config.json)
    train_model("socialformer", {**settings, "aggregation": "mean"}, training, tmp_path / "embeddings.npy",
                tmp_path / "groups.tsv", tmp_path / "query_store", tmp_path / "doc_store", tmp_path / "query_store",
                tmp_path / "bm25.run", tmp_path / "qrels.txt", out, seed=1)
    assert json.loads((out / "config.json").read_text())["model_settings"]["aggregation"] == "mean"
