"""Socialformer graph construction (Zhou, Dou, Yuan, Ma; WWW 2022): patterns → graph → circles.

A document of n tokens is a "social network" of its tokens. Four attention patterns give
probabilities that two tokens are friends; their weighted mix is scaled to the wanted density,
an undirected graph is sampled from it and split into friend circles, inside which the model
attends fully (the model itself is elsewhere). Equations and where they are implemented
(``patterns`` and ``partition`` are this package's modules):

    (1) static distance     P_ij = 1 / (⌊|i − j| / p⌋ + 1)²                 patterns.static_distance_matrix
    (2) static centrality   w_i = tf(t_i, d) · idf(t_i),  P = w·wᵀ          patterns.static_centrality_weights
    (3) dynamic distance    w_i = Σ_{o ∈ O, |i−o| ≤ δ} 1/(⌊|i−o|/L⌋+1)      patterns.dynamic_distance_weights
                            P = w·wᵀ   (O: positions of query terms in d)
    (4) dynamic centrality  w_i = [CLS] attention of a pre-trained encoder    patterns.select_top_cosine,
                            on the top-k tokens by cos(mean query embedding,  patterns.dynamic_centrality_weights
                            token embedding), rescaled; P = w·wᵀ
    (5) P = Σ_k α_k P^k / Σ_k α_k   (each P^k in [0, 1]; α_k = 0 or absent: off;  patterns.combine
        "random": P = 1·1ᵀ, the paper's random-edges ablation)
    (6) P̃ = min(c·P, 1) with mean_{i≠j} P̃_ij = 1 − sparsity                  patterns.scale_to_density
    (7) A_ij = A_ji = [u_ij < P̃_ij], i < j, u_ij ~ U[0, 1) from a seeded      patterns.sample_graph
        torch.Generator; no self-loops (A_ii = 0 always)
    (8) friend circles: up to max_circles times, the highest-degree node and   partition.partition_graph
        ≤ max_nodes − 1 of its neighbours; node-level removes the circle's
        nodes, edge-level only the edges inside the circle

Our reading of the paper where it leaves room, and the choices made:

* Normalisation to [0, 1]: every weight vector (and the static distance matrix) is divided by its
  maximum (``normalisation="max"``), so P ∝ w_i·w_j as the equations say and a token is never cut
  off from a pattern just for being its least-weighted one. ``"minmax"`` reproduces the released
  code's (w − min)/(max − min).
* (2): tf is the count of the token in this document over |d| (the constant 1/|d| vanishes in the
  normalisation); idf is an input (computed on the collection by the caller).
* (3): δ (``delta``) is the radius of the window around each query-term occurrence and L (``step``)
  the length of the blocks in which the weight steps down as the window moves away from the
  occurrence: weight 1 for distance 0..L−1, 1/2 for L..2L−1, … up to distance δ. Contributions of
  all occurrences add up (``dynamic_distance_mode="sum"``, the released code), so passages dense in
  query terms weigh most; ``"nearest"`` uses only the nearest occurrence. Defaults δ = 512, L = 5 are
  the released code's. Query-term matching is on token ids (the caller may drop stop words).
* (4): the encoder call is not here. The caller selects the tokens with ``select_top_cosine`` (the
  query's mean input embedding against each token's input embedding; positions returned in
  document order), runs the encoder on [CLS] query [SEP] selected tokens [SEP], sums the last
  layer's [CLS] attention over heads, and passes one score per selected token to
  ``dynamic_centrality_weights``. There the scores are rescaled to the cosine mass of the selected
  tokens (as released) and the other tokens keep their cosine (clamped at 0), or get a constant
  ``centrality_floor``. ``top_k`` = 90 is the released value (there it was the encoder's whole
  input length, query included; here it counts document tokens only).
* (6): the mean is over the n(n − 1) pairs i ≠ j, the only ones that can become edges. When c·P
  exceeds 1 the clipped probabilities are rescaled (Newton on the clipped mean) until the mean is
  exact; the achieved expected density is returned (lower only if the density asks for more pairs
  than have P > 0). ``sparsity`` is the share of absent edges: 0.93 (the released default) keeps 7 %.
  If every active pattern is all zero (only dynamic distance on and no query term in the
  document), P falls back to the uniform pattern.
* (7): one uniform draw per pair i < j (the triangle is folded into ⌈n/2⌉ × (n − 1) draws, drawn
  in blocks), compared with P̃ and mirrored; no self-loops ever. Same generator state → same
  graph; ``build_social_graph`` seeds a fresh generator with ``seed`` unless one is passed.
* (8): centre ties go to the earlier position; the invariants of both partitions are stated in
  ``partition``. Circles are sorted token positions; the partition stops early when no edge is left.

Everything is vectorised torch (no loop over tokens or pairs; the partition loops over its ≤ 16
circles); bench/social_graph.py times it against a pure-Python pairwise implementation.

Deliberate departures from the released code (github.com/smallporridge/Socialformer, which does
not run as published; its bugs are not copied):

* its tf is a collection-wide term frequency, and idf is log(N/(df+1)) computed inside the script;
* its strategy switches fail (the four matrices are always summed with 0.2/0.3/0.2/0.3, and a
  switched-off pattern raises NameError); here any subset, with any weights;
* it scales to Σ P = density·n² including the diagonal and without clipping, so entries above 1
  silently lower the realised density; it samples with unseeded ``np.random.rand`` in an O(n²)
  Python loop, with self-loops that the partition then deletes;
* its dynamic-distance window is range(o − δ, o + δ) (asymmetric); here |i − o| ≤ δ;
* its dynamic-centrality selection pads short documents with position 0 repeated, feeds the
  tokens in cosine order, truncates them to 90 encoder tokens including the query and writes the
  attention of padding back; here positions are distinct, in document order, one score each;
* node-level partition: it does not remove the centre, so one centre can head several circles;
  here the centre is removed too and circles are disjoint;
* edge-level partition: it stops at max_nodes − 1 members; here circles have up to max_nodes
  nodes, centre included;
* when a centre has too many neighbours it keeps the first ones in document order; here the ones
  of highest current degree (ties: earlier position);
* it appends empty circles once no edge is left; here fewer circles are returned
  (``partition.circle_index`` pads to a fixed shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor

from rankstudy.config import check_ints, is_int, is_number
from rankstudy.models.socialformer import patterns
from rankstudy.models.socialformer.partition import PARTITIONS, Partition, partition_graph

PATTERNS = ("static_distance", "static_centrality", "dynamic_distance", "dynamic_centrality", "random")


def _default_weights() -> dict[str, float]:
    # The released code's fixed mix: 0.3 static distance, 0.2 tf-idf, 0.3 dynamic distance, 0.2 BERT.
    return {"static_distance": 0.3, "static_centrality": 0.2, "dynamic_distance": 0.3, "dynamic_centrality": 0.2}


@dataclass
class SocialGraphConfig:
    p: int = 50  # static distance: block length of (1)
    delta: int = 512  # dynamic distance: window radius δ of (3)
    step: int = 5  # dynamic distance: block length L of (3)
    top_k: int = 90  # dynamic centrality: tokens given to the encoder
    weights: dict[str, float] = field(default_factory=_default_weights)  # α of (5); 0/absent: off
    sparsity: float = 0.93  # share of absent edges: mean P̃ = 1 − sparsity
    max_nodes: int = 128  # per circle, centre included
    max_circles: int = 16
    partition: str = "node"  # "node" | "edge"
    seed: int = 0
    dynamic_distance_mode: str = "sum"  # "sum" | "nearest"
    normalisation: str = "max"  # "max" | "minmax"
    centrality_floor: float | None = None  # dynamic centrality of unselected tokens; None: their cosine

    def __post_init__(self) -> None:
        check_ints(self, "p", "step", "top_k", "max_circles")
        check_ints(self, "delta", minimum=0)
        check_ints(self, "max_nodes", minimum=2)
        if not is_int(self.seed):
            raise ValueError(f"SocialGraphConfig.seed must be an integer, got {self.seed!r}")
        if not isinstance(self.weights, Mapping) or not self.weights:
            raise ValueError(
                f"SocialGraphConfig.weights must be a non-empty mapping pattern → weight, got {self.weights!r}"
            )
        self.weights = dict(self.weights)
        unknown = sorted(set(self.weights) - set(PATTERNS))
        if unknown:
            raise ValueError(
                f"SocialGraphConfig.weights: unknown pattern(s) {', '.join(map(str, unknown))}; "
                f"expected some of {', '.join(PATTERNS)}"
            )
        for name, value in self.weights.items():
            if not is_number(value) or value < 0:
                raise ValueError(f"SocialGraphConfig.weights[{name!r}] must be a finite number >= 0, got {value!r}")
        if not any(value > 0 for value in self.weights.values()):
            raise ValueError("SocialGraphConfig.weights: at least one pattern needs a positive weight")
        if not is_number(self.sparsity) or not 0 <= self.sparsity < 1:
            raise ValueError(f"SocialGraphConfig.sparsity must be a number in [0, 1), got {self.sparsity!r}")
        for name, allowed in (
            ("partition", PARTITIONS),
            ("dynamic_distance_mode", patterns.DYNAMIC_DISTANCE_MODES),
            ("normalisation", patterns.NORMALISATIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"SocialGraphConfig.{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}"
                )
        floor = self.centrality_floor
        if floor is not None and (not is_number(floor) or not 0 <= floor <= 1):
            raise ValueError(f"SocialGraphConfig.centrality_floor must be null or a number in [0, 1], got {floor!r}")

    @property
    def active(self) -> dict[str, float]:
        """The patterns switched on, with their weights."""
        return {name: float(value) for name, value in self.weights.items() if value > 0}


@dataclass
class SocialGraph:
    probability: Tensor  # (n, n) P̃ of (6), diagonal 0
    adjacency: Tensor  # bool (n, n), symmetric, no self-loops
    expected_density: float  # mean of P̃ over i ≠ j (= 1 − sparsity unless unreachable)
    partition: Partition


def make_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A torch.Generator on ``device`` seeded with ``seed`` (per document: derive the seed, e.g. seed + index)."""
    return torch.Generator(device=device).manual_seed(seed)


def probability_matrix(
    config: SocialGraphConfig,
    doc_ids: Tensor,
    *,
    query_ids: Tensor | None = None,
    idf: Tensor | None = None,
    dynamic_centrality: Tensor | None = None,
) -> Tensor:
    """(1)–(5): the combined, unscaled probability matrix of one document (diagonal 0).

    Inputs needed by the active patterns only: ``query_ids`` for dynamic distance, ``idf`` for static
    centrality, ``dynamic_centrality`` (the vector from ``patterns.dynamic_centrality_weights``).
    """
    if doc_ids.dim() != 1:
        raise ValueError(f"doc_ids must be 1-D (one document, no padding), got shape {tuple(doc_ids.shape)}")
    n = doc_ids.numel()
    device = doc_ids.device
    active = config.active
    vectors: dict[str, Tensor] = {}
    static = None
    if "static_distance" in active:
        static = patterns.static_distance_matrix(n, config.p, normalisation=config.normalisation, device=device)
    if "static_centrality" in active:
        if idf is None:
            raise ValueError("static_centrality is switched on but no idf vector was given")
        vectors["static_centrality"] = patterns.static_centrality_weights(
            doc_ids, idf.to(device), normalisation=config.normalisation
        )
    if "dynamic_distance" in active:
        if query_ids is None:
            raise ValueError("dynamic_distance is switched on but no query_ids were given")
        vectors["dynamic_distance"] = patterns.dynamic_distance_weights(
            doc_ids, query_ids, config.delta, config.step,
            mode=config.dynamic_distance_mode, normalisation=config.normalisation,
        )
    if "dynamic_centrality" in active:
        if dynamic_centrality is None:
            raise ValueError("dynamic_centrality is switched on but no weight vector was given")
        vectors["dynamic_centrality"] = dynamic_centrality.to(device)
    return patterns.combine(n, active, vectors, static, device=device, reuse_static=True)


def build_social_graph(
    config: SocialGraphConfig,
    doc_ids: Tensor,
    *,
    query_ids: Tensor | None = None,
    idf: Tensor | None = None,
    dynamic_centrality: Tensor | None = None,
    generator: torch.Generator | None = None,
    partition: str | None = None,
) -> SocialGraph:
    """(1)–(8) for one document: probabilities, sampled graph and friend circles.

    ``generator`` defaults to a fresh one seeded with ``config.seed`` — the same draws for every
    document, so for a collection pass one generator through all documents (or seed one per
    document, e.g. ``make_generator(config.seed + index)``). ``partition`` overrides
    ``config.partition``.
    """
    probability = probability_matrix(
        config, doc_ids, query_ids=query_ids, idf=idf, dynamic_centrality=dynamic_centrality
    )
    probability, density = patterns.scale_to_density(probability, 1.0 - config.sparsity, inplace=True)
    if generator is None:
        generator = make_generator(config.seed, doc_ids.device)
    adjacency = patterns.sample_graph(probability, generator)
    circles = partition_graph(adjacency, config.max_nodes, config.max_circles, partition or config.partition)
    return SocialGraph(probability, adjacency, density, circles)
