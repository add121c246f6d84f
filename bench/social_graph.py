"""Socialformer graph construction: vectorised torch vs a pure-Python pairwise-loop original.

One synthetic 2,048-token document (vocabulary 30,000, 64-d input embeddings, a 3-term query with
occurrences, a given [CLS] attention vector — the encoder call is not part of graph construction).
Times, on the same document, (a) rankstudy's pipeline: the four patterns (top-k selection and
rescaling for dynamic centrality included), combination, scaling to 1 − sparsity, seeded symmetric
sampling, and BOTH partitions (node- and edge-level); median of --repeats runs; (b) a direct
pure-Python implementation of the same algorithm as the original code is written — nested loops
over token pairs for every matrix, the weighted sum and the sampling (random.random()), Python
loops and per-row degree sums for the partitions — timed once at full n. Also checks that (a) and
(b) agree: max |P difference| and identical circles when (b)'s partition runs on (a)'s graph.
On a shared machine a second thread is often descheduled, which makes every parallel torch op
wait; the 1-thread median is printed too (unless --no-one-thread) as the robust figure.
Stays under about 2 minutes: each thread setting stops repeating after --budget seconds.
Usage: python bench/social_graph.py [--threads 2] [--n 2048] [--repeats 30] [--budget 20]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import time

import torch

from rankstudy.cpu_isa import cpu_model
from rankstudy.models.socialformer import SocialGraphConfig, build_social_graph, partition_graph
from rankstudy.models.socialformer import patterns


# ------------------------------------------------------------------ pure-Python original


def py_norm(values):
    values = [max(v, 0.0) for v in values]
    high = max(values) if values else 0.0
    return [v / high for v in values] if high > 0 else values


def py_outer(w):
    n = len(w)
    matrix = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            matrix[i][j] = w[i] * w[j]
    return matrix


def py_static_distance(n, p):
    matrix = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            matrix[i][j] = matrix[j][i] = 1 / ((j - i) // p + 1) ** 2
    return matrix


def py_static_centrality(doc, idf):
    counts = {}
    for token in doc:
        counts[token] = counts.get(token, 0) + 1
    return py_norm([counts[token] / len(doc) * idf[token] for token in doc])


def py_dynamic_distance(doc, query, delta, step):
    weights = [0.0] * len(doc)
    terms = set(query)
    for position, token in enumerate(doc):
        if token in terms:
            for i in range(max(0, position - delta), min(len(doc), position + delta + 1)):
                weights[i] += 1 / (abs(position - i) // step + 1)
    return py_norm(weights)


def py_dynamic_centrality(query_vectors, doc_vectors, k, attention):
    dims = len(query_vectors[0])
    mean = [sum(vector[d] for vector in query_vectors) / len(query_vectors) for d in range(dims)]
    mean_norm = math.sqrt(sum(x * x for x in mean))
    cosine = []
    for vector in doc_vectors:
        dot = sum(a * b for a, b in zip(mean, vector))
        cosine.append(dot / max(mean_norm * math.sqrt(sum(x * x for x in vector)), 1e-8))
    order = sorted(range(len(cosine)), key=lambda i: (-cosine[i], i))
    selected = sorted(order[:k])
    weights = [max(c, 0.0) for c in cosine]
    mass = sum(weights[i] for i in selected)
    total = sum(max(a, 0.0) for a in attention)
    for i, a in zip(selected, attention):
        weights[i] = max(a, 0.0) * mass / total if total > 0 else 0.0
    return py_norm(weights)


def py_probability(config, doc, query, idf, query_vectors, doc_vectors, attention):
    n = len(doc)
    matrices = {
        "static_distance": py_static_distance(n, config.p),
        "static_centrality": py_outer(py_static_centrality(doc, idf)),
        "dynamic_distance": py_outer(py_dynamic_distance(doc, query, config.delta, config.step)),
        "dynamic_centrality": py_outer(py_dynamic_centrality(query_vectors, doc_vectors, config.top_k, attention)),
    }
    active = config.active
    total = sum(active.values())
    probability = [[0.0] * n for _ in range(n)]
    for name, alpha in active.items():
        matrix = matrices[name]
        for i in range(n):
            row, source = probability[i], matrix[i]
            for j in range(n):
                if i != j:
                    row[j] += alpha / total * source[j]
    # scale so that the mean over i != j is the density (Newton on the clipped mean, as rankstudy)
    target = (1 - config.sparsity) * n * (n - 1)
    factor = target / sum(sum(row) for row in probability)
    for _ in range(50):
        threshold = 1 / factor
        clipped = sum(1 for row in probability for x in row if x >= threshold)
        if clipped == 0:
            break
        unclipped = sum(x for row in probability for x in row if x < threshold)
        if unclipped <= 0:
            break
        new_factor = (target - clipped) / unclipped
        if new_factor <= factor * (1 + 1e-7):
            break
        factor = new_factor
    for i in range(n):
        for j in range(n):
            probability[i][j] = min(probability[i][j] * factor, 1.0)
    return probability


def py_sample(probability, rng):
    n = len(probability)
    graph = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < probability[i][j]:
                graph[i][j] = graph[j][i] = 1
    return graph


def py_partition(graph, max_nodes, max_circles, mode):
    graph = [row[:] for row in graph]
    n = len(graph)
    removed = [False] * n
    circles = []
    for _ in range(max_circles):
        degree = [sum(row) if not removed[i] else -1 for i, row in enumerate(graph)]
        centre = degree.index(max(degree))
        if degree[centre] <= 0:
            break
        friends = [j for j in range(n) if graph[centre][j] == 1]
        friends.sort(key=lambda j: (-degree[j], j))
        circle = sorted([centre] + friends[: max_nodes - 1])
        if mode == "node":
            for u in circle:
                removed[u] = True
                for j in range(n):
                    graph[u][j] = graph[j][u] = 0
        else:
            for u in circle:
                for v in circle:
                    graph[u][v] = 0
        circles.append(circle)
    return circles


def python_pipeline(config, doc, query, idf, query_vectors, doc_vectors, attention, seed):
    probability = py_probability(config, doc, query, idf, query_vectors, doc_vectors, attention)
    graph = py_sample(probability, random.Random(seed))
    node = py_partition(graph, config.max_nodes, config.max_circles, "node")
    edge = py_partition(graph, config.max_nodes, config.max_circles, "edge")
    return probability, graph, node, edge


# ------------------------------------------------------------------ rankstudy


def torch_pipeline(config, doc, query, idf, embeddings, attention):
    cosine, selected = patterns.select_top_cosine(embeddings[query], embeddings[doc], config.top_k)
    centrality = patterns.dynamic_centrality_weights(cosine, selected, attention)
    graph = build_social_graph(config, doc, query_ids=query, idf=idf, dynamic_centrality=centrality)
    edge = partition_graph(graph.adjacency, config.max_nodes, config.max_circles, "edge")
    return graph, edge


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds per thread setting; stops repeating early (after at least 5 runs)")
    parser.add_argument("--vocab", type=int, default=30000)
    parser.add_argument("--skip-python", action="store_true", help="time rankstudy only")
    parser.add_argument("--no-one-thread", dest="one_thread", action="store_false",
                        help="do not also time rankstudy with 1 thread")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(0)
    n = args.n
    doc = torch.randint(0, args.vocab, (n,), generator=generator)
    query = doc[torch.tensor([100, n // 2, n - 300])]  # 3 query terms that occur in the document
    idf = torch.rand(args.vocab, generator=generator) * 10
    embeddings = torch.randn(args.vocab, 64, generator=generator)
    config = SocialGraphConfig(partition="node", seed=0)
    attention = torch.rand(min(config.top_k, n), generator=generator)

    graph, edge = torch_pipeline(config, doc, query, idf, embeddings, attention)
    realised = int(graph.adjacency.sum()) / (n * (n - 1))
    print(f"cpu: {cpu_model()}, torch {torch.__version__}, "
          f"{os.cpu_count()} cores visible, load average {os.getloadavg()[0]:.1f} at start")
    print(f"document n={n}, patterns {config.active}, sparsity {config.sparsity}, "
          f"max_nodes {config.max_nodes}, max_circles {config.max_circles}")
    print(f"expected density {graph.expected_density:.5f}, realised {realised:.5f}; "
          f"node circles {len(graph.partition.circles)} (sizes {[c.numel() for c in graph.partition.circles]}), "
          f"edge circles {len(edge.circles)}")
    medians = {}
    for threads in [args.threads, 1] if args.one_thread and args.threads != 1 else [args.threads]:
        torch.set_num_threads(threads)
        torch_pipeline(config, doc, query, idf, embeddings, attention)
        times, cpu = [], []
        deadline = time.perf_counter() + args.budget
        for repeat in range(args.repeats):
            if repeat >= 5 and time.perf_counter() > deadline:
                break
            start, start_cpu = time.perf_counter(), time.process_time()
            torch_pipeline(config, doc, query, idf, embeddings, attention)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        medians[threads] = statistics.median(times)
        print(f"rankstudy (torch), {threads} thread(s): median {medians[threads] * 1e3:.1f} ms over "
              f"{len(times)} runs (min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f}; "
              f"median CPU time {statistics.median(cpu) * 1e3:.1f} ms); "
              f"patterns + sampling + node and edge partitions")
    torch.set_num_threads(args.threads)
    if args.skip_python:
        return 0

    inputs = (doc.tolist(), query.tolist(), idf.tolist(), embeddings[query].tolist(), embeddings[doc].tolist(),
              attention.tolist())
    start, start_cpu = time.perf_counter(), time.process_time()
    probability, _, _, _ = python_pipeline(config, *inputs, seed=0)
    original, original_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    ratios = ", ".join(f"{original / median:.0f}x vs {threads} thread(s)" for threads, median in medians.items())
    print(f"pure Python loops: {original:.2f} s (CPU time {original_cpu:.2f} s; one run at full n={n}); "
          f"rankstudy is faster by {ratios}")
    # agreement: same probabilities; same circles when the Python partition runs on rankstudy's graph
    difference = (torch.tensor(probability, dtype=torch.float64) - graph.probability.double()).abs().max().item()
    adjacency = graph.adjacency.to(torch.uint8).tolist()
    same_node = py_partition(adjacency, config.max_nodes, config.max_circles, "node") == [
        c.tolist() for c in graph.partition.circles]
    same_edge = py_partition(adjacency, config.max_nodes, config.max_circles, "edge") == [
        c.tolist() for c in edge.circles]
    print(f"agreement: max |P_python - P_torch| = {difference:.2e}; identical circles on the same graph: "
          f"node {same_node}, edge {same_edge}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
