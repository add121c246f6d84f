"""Socialformer graph construction: pattern values by hand, density, seeding, symmetry, partitions."""

from __future__ import annotations

import math

import pytest
import torch

from rankstudy.models.socialformer import (
    SocialGraphConfig,
    build_social_graph,
    circle_index,
    make_generator,
    partition_graph,
    probability_matrix,
)
from rankstudy.models.socialformer import patterns


def ids(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


# ---------------------------------------------------------------- patterns, by hand


def test_static_distance_by_hand():
    # n = 5, p = 2: ⌊|i−j|/2⌋ = 0 for |i−j| ≤ 1, 1 for 2..3, 2 for 4 → 1, 1/4, 1/9.
    a, b, c = 1.0, 1 / 4, 1 / 9
    expected = torch.tensor(
        [
            [a, a, b, b, c],
            [a, a, a, b, b],
            [b, a, a, a, b],
            [b, b, a, a, a],
            [c, b, b, a, a],
        ]
    )
    assert torch.allclose(patterns.static_distance_matrix(5, 2), expected)
    # min-max (the released code's norm): (x − 1/9) / (1 − 1/9)
    assert torch.allclose(patterns.static_distance_matrix(5, 2, normalisation="minmax"), (expected - c) / (1 - c))


@pytest.mark.parametrize("n,p", [(1, 50), (7, 1), (130, 50), (301, 7)])
def test_static_distance_matches_formula(n, p):
    i = torch.arange(n)
    expected = 1.0 / ((i[:, None] - i[None, :]).abs() // p + 1).float() ** 2
    assert torch.equal(patterns.static_distance_matrix(n, p), expected)


def test_static_centrality_by_hand():
    # doc "7 3 7 5": tf = 2/4, 1/4, 2/4, 1/4; idf[7] = 1, idf[3] = 4, idf[5] = 0.5
    idf = torch.zeros(10)
    idf[7], idf[3], idf[5] = 1.0, 4.0, 0.5
    raw = torch.tensor([0.5 * 1, 0.25 * 4, 0.5 * 1, 0.25 * 0.5])  # 0.5, 1.0, 0.5, 0.125
    weights = patterns.static_centrality_weights(ids(7, 3, 7, 5), idf)
    assert torch.allclose(weights, raw / 1.0)
    assert torch.allclose(patterns.outer(weights), raw[:, None] * raw[None, :])
    minmax = patterns.static_centrality_weights(ids(7, 3, 7, 5), idf, normalisation="minmax")
    assert torch.allclose(minmax, (raw - 0.125) / (1.0 - 0.125))


def test_static_centrality_rejects_ids_outside_idf():
    with pytest.raises(ValueError, match="index idf"):
        patterns.static_centrality_weights(ids(1, 12), torch.ones(10))


def test_dynamic_distance_by_hand():
    # 12 tokens, query terms (id 9) at positions 3 and 5; L = 2, δ = 4.
    doc = ids(1, 1, 1, 9, 1, 9, 1, 1, 1, 1, 1, 1)
    query = ids(9, 42)

    # weight 1/(⌊d/2⌋+1) for d ≤ 4 summed over both occurrences (d to 3, d to 5), by hand:
    summed = torch.tensor([1 / 2, 1 / 2 + 1 / 3, 1 + 1 / 2, 1 + 1 / 2, 1 + 1, 1 / 2 + 1,
                           1 / 2 + 1, 1 / 3 + 1 / 2, 0 + 1 / 2, 0 + 1 / 3, 0, 0])
    got = patterns.dynamic_distance_weights(doc, query, delta=4, step=2)
    assert torch.allclose(got, summed / 2)
    # nearest occurrence only: d = 3 2 1 0 1 0 1 2 3 4 5 6
    nearest = torch.tensor([1 / 2, 1 / 2, 1, 1, 1, 1, 1, 1 / 2, 1 / 2, 1 / 3, 0, 0])
    got = patterns.dynamic_distance_weights(doc, query, delta=4, step=2, mode="nearest")
    assert torch.allclose(got, nearest)


def test_dynamic_distance_without_query_terms_is_zero():
    assert torch.equal(patterns.dynamic_distance_weights(ids(1, 2, 3), ids(4)), torch.zeros(3))


def test_top_cosine_selection_and_rescaling():
    # 2-d embeddings; query mean = (1, 0); cosines of the 5 tokens: 1, 0, 0.6, −1, 0.8
    query = torch.tensor([[1.0, 1.0], [1.0, -1.0]])
    doc = torch.tensor([[2.0, 0.0], [0.0, 3.0], [0.6, 0.8], [-1.0, 0.0], [0.8, 0.6]])
    cosine, selected = patterns.select_top_cosine(query, doc, 3)
    assert torch.allclose(cosine, torch.tensor([1.0, 0.0, 0.6, -1.0, 0.8]), atol=1e-6)
    assert selected.tolist() == [0, 2, 4]  # top 3 by cosine, in document order
    # attention over [0, 2, 4] = (1, 2, 1); cosine mass of the selection = 2.4 → scale 0.6
    weights = patterns.dynamic_centrality_weights(cosine, selected, torch.tensor([1.0, 2.0, 1.0]))
    raw = torch.tensor([0.6, 0.0, 1.2, 0.0, 0.6])  # others keep max(cos, 0): 0 and 0
    assert torch.allclose(weights, raw / 1.2, atol=1e-6)
    floored = patterns.dynamic_centrality_weights(cosine, selected, torch.tensor([1.0, 2.0, 1.0]), floor=0.3)
    assert torch.allclose(floored, torch.tensor([0.6, 0.3, 1.2, 0.3, 0.6]) / 1.2, atol=1e-6)
    # k larger than the document: every position, once
    assert patterns.select_top_cosine(query, doc, 9)[1].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="one score per selected token"):
        patterns.dynamic_centrality_weights(cosine, selected, torch.ones(2))


def test_combination_weights_and_switches():
    n = 6
    static = patterns.static_distance_matrix(n, 2)
    a = torch.rand(n, generator=torch.Generator().manual_seed(0))
    b = torch.rand(n, generator=torch.Generator().manual_seed(1))
    got = patterns.combine(n, {"static_distance": 0.3, "static_centrality": 0.2, "dynamic_distance": 0.5,
                               "dynamic_centrality": 0.0}, {"static_centrality": a, "dynamic_distance": b}, static)
    expected = 0.3 * static + 0.2 * patterns.outer(a) + 0.5 * patterns.outer(b)
    expected.fill_diagonal_(0)
    assert torch.allclose(got, expected, atol=1e-6)
    random = patterns.combine(n, {"random": 2.0}, {})
    assert torch.equal(random, 1 - torch.eye(n))
    with pytest.raises(ValueError, match="no weight vector"):
        patterns.combine(n, {"dynamic_distance": 1.0}, {})


def test_probability_matrix_needs_inputs_of_active_patterns_only():
    config = SocialGraphConfig(weights={"static_distance": 1.0, "dynamic_distance": 1.0})
    with pytest.raises(ValueError, match="query_ids"):
        probability_matrix(config, ids(1, 2, 3))
    matrix = probability_matrix(config, ids(1, 2, 3), query_ids=ids(2))
    assert matrix.shape == (3, 3) and float(matrix.max()) <= 1.0


# ---------------------------------------------------------------- scaling and sampling


def document(n: int, seed: int = 0, vocab: int = 500):
    generator = torch.Generator().manual_seed(seed)
    doc = torch.randint(0, vocab, (n,), generator=generator)
    query = doc[torch.tensor([3, n // 2, n - 10])]
    idf = torch.rand(vocab, generator=generator) * 5
    embeddings = torch.randn(vocab, 16, generator=generator)
    cosine, selected = patterns.select_top_cosine(embeddings[query], embeddings[doc], 90)
    attention = torch.rand(selected.numel(), generator=generator)
    centrality = patterns.dynamic_centrality_weights(cosine, selected, attention)
    return dict(doc_ids=doc, query_ids=query, idf=idf, dynamic_centrality=centrality)


@pytest.mark.parametrize("sparsity", [0.0, 0.5, 0.9, 0.93, 0.99])
def test_realised_density_matches_sparsity(sparsity):
    n = 1000
    graph = build_social_graph(SocialGraphConfig(sparsity=sparsity, seed=3), **document(n))
    assert graph.expected_density == pytest.approx(1 - sparsity, abs=1e-6)
    realised = int(graph.adjacency.sum()) / (n * (n - 1))
    sd = math.sqrt((1 - sparsity) * sparsity / (n * (n - 1) / 2))
    assert abs(realised - (1 - sparsity)) <= max(6 * sd, 1e-9)


def test_scaling_with_heavy_clipping_is_exact():
    # a few large entries and many small ones: c·P exceeds 1 on most of the mass
    probability = torch.full((400, 400), 0.001)
    probability[:40, :40] = 1.0
    scaled, density = patterns.scale_to_density(probability, 0.5)
    assert density == pytest.approx(0.5, abs=1e-6)
    assert float(scaled.max()) == 1.0 and float(scaled.diagonal().abs().sum()) == 0.0
    # unreachable: only 10 % of the pairs have P > 0 → every one of them becomes certain
    sparse = torch.zeros(100, 100)
    sparse[:, :10] = 0.2
    scaled, density = patterns.scale_to_density(sparse, 0.5)
    assert float(scaled[:, :10].fill_diagonal_(1).min()) == 1.0 and density < 0.11


def test_same_seed_same_graph_different_seed_different_graph():
    inputs = document(300)
    config = SocialGraphConfig(sparsity=0.8, seed=11)
    first = build_social_graph(config, **inputs)
    again = build_social_graph(config, **inputs)
    other = build_social_graph(config, **inputs, generator=make_generator(12))
    assert torch.equal(first.adjacency, again.adjacency)
    assert [c.tolist() for c in first.partition.circles] == [c.tolist() for c in again.partition.circles]
    assert not torch.equal(first.adjacency, other.adjacency)


def test_graph_is_symmetric_without_self_loops():
    graph = build_social_graph(SocialGraphConfig(sparsity=0.5), **document(257))
    assert graph.adjacency.dtype == torch.bool
    assert torch.equal(graph.adjacency, graph.adjacency.T)
    assert not graph.adjacency.diagonal().any()
    certain = patterns.sample_graph(torch.ones(5, 5), make_generator(0))
    assert torch.equal(certain, ~torch.eye(5, dtype=torch.bool))


@pytest.mark.parametrize("n", [2, 3, 4, 7, 10, 65, 200])
def test_one_distinct_draw_per_pair(n):
    # every pair i < j gets its own draw (all distinct: float64, so no chance collisions), and
    # sampling compares exactly these draws
    uniforms = patterns.upper_uniforms(n, make_generator(1), dtype=torch.float64)
    rows, cols = torch.triu_indices(n, n, 1)
    used = uniforms[rows, cols]
    assert torch.unique(used).numel() == n * (n - 1) // 2 and bool((used > 0).all())
    assert not uniforms.tril().any()
    probability = torch.rand(n, n, generator=make_generator(2))
    probability = (probability + probability.T) / 2
    expected = (patterns.upper_uniforms(n, make_generator(3)) < probability).triu(1)
    assert torch.equal(patterns.sample_graph(probability, make_generator(3)), expected | expected.T)


# ---------------------------------------------------------------- partitions


def random_graph(n: int, density: float, seed: int) -> torch.Tensor:
    probability = torch.full((n, n), density)
    return patterns.sample_graph(probability, make_generator(seed))


def reference_partition(adjacency: torch.Tensor, max_nodes: int, max_circles: int, mode: str):
    """Plain-Python oracle of the documented rule, on sets."""
    n = adjacency.shape[0]
    neighbours = [set(torch.nonzero(adjacency[i]).squeeze(1).tolist()) for i in range(n)]
    alive = set(range(n))
    circles, centres = [], []
    for _ in range(max_circles):
        degree = {i: len(neighbours[i] & alive) for i in alive}
        if not degree:
            break
        centre = min(alive, key=lambda i: (-degree[i], i))
        if degree[centre] == 0:
            break
        friends = sorted(neighbours[centre] & alive, key=lambda i: (-degree[i], i))[: max_nodes - 1]
        circle = sorted([centre, *friends])
        if mode == "node":
            alive -= set(circle)
        else:
            for u in circle:
                neighbours[u] -= set(circle)
        circles.append(circle)
        centres.append(centre)
    return circles, centres


@pytest.mark.parametrize("mode", ["node", "edge"])
@pytest.mark.parametrize("n,density,max_nodes,max_circles,seed", [
    (60, 0.2, 8, 5, 0), (120, 0.3, 16, 16, 1), (40, 0.05, 128, 16, 2), (200, 0.5, 32, 4, 3),
])
def test_partition_matches_reference(mode, n, density, max_nodes, max_circles, seed):
    adjacency = random_graph(n, density, seed)
    got = partition_graph(adjacency, max_nodes, max_circles, mode)
    circles, centres = reference_partition(adjacency, max_nodes, max_circles, mode)
    assert [c.tolist() for c in got.circles] == circles
    assert got.centres.tolist() == centres


def test_node_partition_invariants():
    adjacency = random_graph(1000, 0.07, 5)
    part = partition_graph(adjacency, max_nodes=128, max_circles=16, mode="node")
    assert 0 < len(part.circles) <= 16
    seen = torch.zeros(1000, dtype=torch.bool)
    alive = torch.ones(1000, dtype=torch.bool)
    for circle, centre in zip(part.circles, part.centres.tolist()):
        assert circle.numel() <= 128
        assert torch.equal(circle, circle.sort().values) and centre in circle.tolist()
        assert not seen[circle].any()  # disjoint
        seen[circle] = True
        induced = adjacency & alive[:, None] & alive[None, :]
        degree = induced.sum(1)
        assert int(degree[centre]) == int(degree.max())  # the centre has maximal degree
        others = circle[circle != centre]
        assert induced[centre, others].all()  # the others are the centre's remaining friends
        alive[circle] = False
    assert torch.equal(part.remaining, adjacency & alive[:, None] & alive[None, :])


def test_edge_partition_removes_exactly_the_inner_edges():
    adjacency = random_graph(1000, 0.07, 6)
    part = partition_graph(adjacency, max_nodes=128, max_circles=16, mode="edge")
    assert len(part.circles) == 16
    graph = adjacency.clone()
    for circle, centre in zip(part.circles, part.centres.tolist()):
        assert circle.numel() <= 128 and centre in circle.tolist()
        degree = graph.sum(1)
        assert int(degree[centre]) == int(degree.max())
        assert graph[centre, circle[circle != centre]].all()
        inside = torch.zeros_like(graph)
        inside[circle[:, None], circle[None, :]] = True
        graph &= ~inside  # exactly these edges go, no others
    assert torch.equal(part.remaining, graph)
    # nodes may be reused by later circles
    assert sum(c.numel() for c in part.circles) > torch.unique(torch.cat(part.circles)).numel()


def test_partition_of_empty_graph_and_padding():
    empty = torch.zeros(10, 10, dtype=torch.bool)
    assert partition_graph(empty).circles == []
    adjacency = random_graph(50, 0.3, 0)
    part = partition_graph(adjacency, max_nodes=8, max_circles=4)
    index = circle_index(part.circles, max_circles=6, max_nodes=8)
    assert index.shape == (6, 8) and (index[4:] == -1).all()
    assert index[0, : part.circles[0].numel()].tolist() == part.circles[0].tolist()


# ---------------------------------------------------------------- configuration


@pytest.mark.parametrize("settings,message", [
    ({"p": 0}, "p must be a positive integer"),
    ({"step": 0}, "step"),
    ({"delta": -1}, "delta"),
    ({"top_k": 2.5}, "top_k"),
    ({"max_nodes": 1}, "max_nodes"),
    ({"max_circles": 0}, "max_circles"),
    ({"sparsity": 1.0}, r"sparsity must be a number in \[0, 1\)"),
    ({"sparsity": -0.1}, "sparsity"),
    ({"partition": "circle"}, "partition must be one of node, edge"),
    ({"weights": {"static_distance": 0.0}}, "at least one pattern"),
    ({"weights": {"static_distanse": 1.0}}, "unknown pattern"),
    ({"weights": {"random": -1.0}}, ">= 0"),
    ({"weights": {"random": float("nan")}}, "finite"),
    ({"dynamic_distance_mode": "max"}, "dynamic_distance_mode"),
    ({"normalisation": "l2"}, "normalisation"),
    ({"centrality_floor": 2.0}, "centrality_floor"),
    ({"seed": True}, "seed"),
])
def test_bad_configs_raise(settings, message):
    with pytest.raises(ValueError, match=message):
        SocialGraphConfig(**settings)


def test_pattern_subsets_and_random_pattern():
    inputs = document(200)
    only_random = SocialGraphConfig(weights={"random": 1.0}, sparsity=0.9)
    graph = build_social_graph(only_random, inputs["doc_ids"])
    assert graph.expected_density == pytest.approx(0.1, abs=1e-6)
    assert torch.allclose(graph.probability, (1 - torch.eye(200)) * 0.1)
    static_only = SocialGraphConfig(weights={"static_distance": 1.0}, sparsity=0.9, partition="edge")
    assert build_social_graph(static_only, inputs["doc_ids"]).partition.circles


def test_dynamic_distance_with_many_occurrences_matches_formula():
    # more than one block of occurrences (the weights are accumulated 256 occurrences at a time)
    doc = torch.randint(0, 2, (700,), generator=make_generator(4))
    occurrences = (doc == 1).nonzero().squeeze(1)
    assert occurrences.numel() > 256
    distance = (torch.arange(700)[None, :] - occurrences[:, None]).abs()
    kernel = torch.where(distance <= 40, 1.0 / (distance // 3 + 1).float(), torch.zeros(()))
    summed = kernel.sum(0)
    assert torch.allclose(patterns.dynamic_distance_weights(doc, ids(1), 40, 3), summed / summed.max())
    nearest = kernel.amax(0)
    assert torch.allclose(patterns.dynamic_distance_weights(doc, ids(1), 40, 3, mode="nearest"), nearest)
