"""Socialformer's four "social" attention patterns, their combination, scaling and edge sampling.

Pure, vectorised torch: every function works on the device of its inputs and loops over no
token or token pair. The equations, the reading of the paper behind them and the deliberate
departures from the released code are in the docstring of ``rankstudy.models.socialformer.graph``;
the equation numbers below refer to it.
"""

from __future__ import annotations

import torch
from torch import Tensor

NORMALISATIONS = ("max", "minmax")
DYNAMIC_DISTANCE_MODES = ("sum", "nearest")


def normalise(values: Tensor, how: str = "max") -> Tensor:
    """Map non-negative weights onto [0, 1]; negative inputs count as 0.

    ``max``: w / max(w) (ratios kept, a zero weight stays zero); ``minmax``: (w − min)/(max − min),
    as the released code's ``norm`` (the least-weighted entry becomes 0). A constant positive
    vector becomes all ones, an all-zero vector stays zero (the pattern then adds nothing).
    """
    if how not in NORMALISATIONS:
        raise ValueError(f"normalisation must be one of {', '.join(NORMALISATIONS)}, got {how!r}")
    values = values.clamp_min(0)
    if values.numel() == 0:
        return values
    high = values.amax()
    if how == "minmax":
        low = values.amin()
        span = high - low
        flat = span <= 0
        scaled = (values - low) / torch.where(flat, torch.ones_like(span), span)
        return torch.where(flat, (high > 0).to(values.dtype).expand_as(values), scaled)
    return values / torch.where(high > 0, high, torch.ones_like(high))


def static_distance_matrix(
    n: int,
    p: int = 50,
    *,
    normalisation: str = "max",
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """(1) P_ij = 1 / (⌊|i − j| / p⌋ + 1)², an (n, n) symmetric Toeplitz matrix, normalised.

    Built from the n distinct values t_k = 1/(⌊k/p⌋+1)² through a strided view (no n² index
    arithmetic). Already in (0, 1] with a diagonal of ones, so ``max`` leaves it unchanged.
    """
    if n < 0 or p < 1:
        raise ValueError(f"static_distance_matrix needs n >= 0 and p >= 1, got n={n}, p={p}")
    if n == 0:
        return torch.zeros(0, 0, dtype=dtype, device=device)
    offsets = torch.arange(n, device=device)
    table = normalise(1.0 / (torch.div(offsets, p, rounding_mode="floor") + 1).to(dtype) ** 2, normalisation)
    # band[m] = t_|m − (n − 1)|; Hankel view H[r, j] = band[r + j]; S[i, j] = H[n − 1 − i, j].
    band = torch.cat([table.flip(0), table[1:]])
    return band.as_strided((n, n), (1, 1)).flip(0)


def term_frequencies(doc_ids: Tensor) -> Tensor:
    """tf(t_i, d) / |d| for every position i of a 1-D tensor of token ids."""
    if doc_ids.dim() != 1:
        raise ValueError(f"doc_ids must be 1-D (one document), got shape {tuple(doc_ids.shape)}")
    if doc_ids.numel() == 0:
        return torch.zeros(0, device=doc_ids.device)
    _, inverse, counts = torch.unique(doc_ids, return_inverse=True, return_counts=True)
    return counts[inverse].to(torch.float32) / doc_ids.numel()


def static_centrality_weights(doc_ids: Tensor, idf: Tensor, *, normalisation: str = "max") -> Tensor:
    """(2) w_i = tf(t_i, d) · idf(t_i): tf counted in this document (relative), ``idf[token id]``.

    ``idf`` is a 1-D tensor indexed by token id (computed on the collection elsewhere).
    P = w·wᵀ (``outer``).
    """
    if idf.dim() != 1:
        raise ValueError(f"idf must be 1-D (indexed by token id), got shape {tuple(idf.shape)}")
    if doc_ids.numel() and (int(doc_ids.min()) < 0 or int(doc_ids.max()) >= idf.numel()):
        raise ValueError(f"document token ids must lie in [0, {idf.numel()}) to index idf")
    weights = term_frequencies(doc_ids).to(idf.dtype) * idf[doc_ids]
    return normalise(weights, normalisation)


def query_term_positions(doc_ids: Tensor, query_ids: Tensor) -> Tensor:
    """Positions of the document tokens that occur in the query (sorted, int64)."""
    return torch.isin(doc_ids, query_ids.to(doc_ids.device)).nonzero().squeeze(1)


def dynamic_distance_weights(
    doc_ids: Tensor,
    query_ids: Tensor,
    delta: int = 512,
    step: int = 5,
    *,
    mode: str = "sum",
    normalisation: str = "max",
) -> Tensor:
    """(3) weight of each token from its distance to the query-term occurrences O in the document.

    ``sum`` (the released code): w_i = Σ_{o ∈ O, |i − o| ≤ δ} 1 / (⌊|i − o| / L⌋ + 1);
    ``nearest``: w_i = 1 / (⌊d_i / L⌋ + 1) if d_i = min_o |i − o| ≤ δ, else 0.
    δ = ``delta`` (window radius around an occurrence), L = ``step`` (block length over which the
    weight is constant). No occurrence: all zeros (the pattern adds nothing). Cost O(|O|·n).
    """
    if mode not in DYNAMIC_DISTANCE_MODES:
        raise ValueError(f"dynamic distance mode must be one of {', '.join(DYNAMIC_DISTANCE_MODES)}, got {mode!r}")
    if delta < 0 or step < 1:
        raise ValueError(f"dynamic distance needs delta >= 0 and step >= 1, got delta={delta}, step={step}")
    n = doc_ids.numel()
    occurrences = query_term_positions(doc_ids, query_ids)
    if occurrences.numel() == 0:
        return torch.zeros(n, device=doc_ids.device)
    positions = torch.arange(n, device=doc_ids.device)
    if mode == "nearest":
        distance = torch.full((n,), n, dtype=torch.int64, device=doc_ids.device)
    else:
        weight = torch.zeros(n, device=doc_ids.device)
    for start in range(0, occurrences.numel(), 256):  # (≤ 256, n) at a time: memory O(n)
        block = (positions[None, :] - occurrences[start : start + 256, None]).abs()
        if mode == "nearest":
            distance = torch.minimum(distance, block.amin(0))
        else:
            weight += _step_kernel(block, delta, step).sum(0)
    if mode == "nearest":
        weight = _step_kernel(distance, delta, step)
    return normalise(weight, normalisation)


def _step_kernel(distance: Tensor, delta: int, step: int) -> Tensor:
    """1 / (⌊d / L⌋ + 1) for d ≤ δ, else 0."""
    weight = 1.0 / (torch.div(distance, step, rounding_mode="floor") + 1).to(torch.float32)
    return torch.where(distance <= delta, weight, torch.zeros_like(weight))


def select_top_cosine(query_embeddings: Tensor, doc_embeddings: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """(4a) cosine of the query's mean input embedding with every document token, and the top k.

    Returns ``(cosine (n,), selected)`` where ``selected`` holds the positions of the min(k, n)
    highest cosines (ties: earlier position), sorted by position — the order in which the encoder
    should see them, so ``attention[j]`` belongs to token ``selected[j]``.
    """
    if query_embeddings.dim() != 2 or doc_embeddings.dim() != 2:
        raise ValueError("query_embeddings and doc_embeddings must be 2-D (tokens × dimensions)")
    if query_embeddings.shape[1] != doc_embeddings.shape[1]:
        raise ValueError(
            f"embedding sizes differ: query {query_embeddings.shape[1]}, document {doc_embeddings.shape[1]}"
        )
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")
    if query_embeddings.shape[0] == 0:
        raise ValueError("the query has no tokens")
    query = query_embeddings.mean(0, keepdim=True)
    cosine = torch.nn.functional.cosine_similarity(query, doc_embeddings, dim=1)
    n = cosine.numel()
    order = torch.sort(cosine, descending=True, stable=True).indices  # stable: ties keep position order
    return cosine, order[: min(k, n)].sort().values


def dynamic_centrality_weights(
    cosine: Tensor,
    selected: Tensor,
    attention: Tensor,
    *,
    floor: float | None = None,
    normalisation: str = "max",
) -> Tensor:
    """(4b) encoder [CLS] attention on the selected tokens, cosine (or a constant floor) elsewhere.

    ``attention[j]`` is the [CLS] attention of the encoder's last layer summed over heads for
    token ``selected[j]``. It is rescaled so that it sums to Σ_j max(cos, 0)[selected[j]] (the
    released code's alignment of the two scales), then written onto the selected positions; the
    other positions keep max(cos, 0) (``floor=None``, as released) or get ``floor``.
    """
    if selected.dim() != 1 or attention.dim() != 1 or attention.numel() != selected.numel():
        raise ValueError(
            f"attention must give one score per selected token: {attention.numel()} scores, "
            f"{selected.numel()} selected"
        )
    if selected.numel() != torch.unique(selected).numel():
        raise ValueError("selected positions must be distinct")
    cosine = cosine.clamp_min(0)
    if floor is None:
        weights = cosine.clone()
    else:
        if not 0.0 <= floor <= 1.0:
            raise ValueError(f"floor must be in [0, 1], got {floor}")
        weights = torch.full_like(cosine, floor)
    attention = attention.to(cosine.dtype).clamp_min(0)
    total = attention.sum()
    mass = cosine[selected].sum()
    positive = total > 0
    scale = torch.where(positive, mass / torch.where(positive, total, torch.ones_like(total)), torch.zeros_like(total))
    weights[selected] = attention * scale
    return normalise(weights, normalisation)


def outer(weights: Tensor) -> Tensor:
    """P = w·wᵀ."""
    return weights[:, None] * weights[None, :]


def combine(
    n: int,
    pattern_weights: dict[str, float],
    vectors: dict[str, Tensor],
    static: Tensor | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
    reuse_static: bool = False,
) -> Tensor:
    """(5) P = (α_sd·S + Σ_k α_k·w_k·w_kᵀ + α_rand·1·1ᵀ) / Σ α (rank-1 updates), diagonal zeroed.

    ``pattern_weights`` maps a pattern name to α ≥ 0 (0 or absent: off); ``static_distance``
    is the matrix ``static``, ``random`` the all-ones vector, every other name a vector in
    ``vectors``. The result lies in [0, 1]; its diagonal is 0 (no self-loops are sampled).
    ``reuse_static=True`` builds the result in ``static``'s storage (it is overwritten).
    """
    active = {name: float(alpha) for name, alpha in pattern_weights.items() if alpha > 0}
    if not active:
        raise ValueError("no pattern has a positive weight")
    total = sum(active.values())
    columns, scaled = [], []
    for name, alpha in active.items():
        if name == "static_distance":
            continue
        if name == "random":
            vector = torch.ones(n, dtype=dtype, device=device)
        elif name in vectors:
            vector = vectors[name].to(dtype=dtype, device=device)
        else:
            raise ValueError(f"pattern {name!r} has weight {alpha} but no weight vector was given")
        if vector.shape != (n,):
            raise ValueError(f"pattern {name!r}: expected {n} weights, got shape {tuple(vector.shape)}")
        columns.append(vector)
        scaled.append(vector * (alpha / total))
    if "static_distance" in active:
        if static is None or static.shape != (n, n):
            raise ValueError(f"static_distance has a positive weight but no ({n}, {n}) matrix was given")
        probability = static.to(dtype=dtype, device=device)
        weight = active["static_distance"] / total
        probability = probability.mul_(weight) if reuse_static and probability is static else probability * weight
    else:
        probability = torch.zeros(n, n, dtype=dtype, device=device)
    for left, right in zip(scaled, columns):
        probability.addr_(left, right)  # rank-1 BLAS update: faster than a rank-r addmm here
    probability.diagonal().zero_()
    return probability


def _clip_statistics(probability: Tensor, threshold: float, block_bytes: int = 1 << 20) -> tuple[int, float]:
    """(#{P ≥ t}, Σ_{P < t} P), in row blocks of about 1 MiB through one reused scratch block.

    Per block: m = min(P, t) gives Σ m = Σ_{P<t} P + t·#{P ≥ t}, and ⌊m / t⌋ is 1 exactly where
    P ≥ t (0 elsewhere; an entry within one ulp below t may count as clipped — immaterial).
    Cache-sized blocks and no n² temporaries: fresh n² buffers cost more in page faults than the
    arithmetic on a busy CPU.
    """
    rows = max(1, block_bytes // max(1, probability.shape[1] * probability.element_size()))
    scratch = torch.empty((min(rows, probability.shape[0]), probability.shape[1]), dtype=probability.dtype,
                          device=probability.device)
    clipped, clamped_sum = 0.0, 0.0
    for start in range(0, probability.shape[0], rows):
        block = probability[start : start + rows]
        clamped = torch.clamp(block, max=threshold, out=scratch[: block.shape[0]])
        clamped_sum += float(clamped.sum())
        clipped += float(clamped.div_(threshold).floor_().sum())
    count = int(round(clipped))
    return count, clamped_sum - threshold * count


def scale_to_density(
    probability: Tensor, density: float, *, max_iterations: int = 50, inplace: bool = False
) -> tuple[Tensor, float]:
    """(6) P̃ = min(c·P, 1) with c chosen so that the mean of P̃ over the pairs i ≠ j is ``density``.

    Without clipping c = density / mean(P). When c·P exceeds 1 somewhere, c is found by Newton's
    method on the concave, piecewise-linear f(c) = mean(min(c·P, 1)): holding the clipped set
    fixed, c ← (density·N − #clipped) / Σ_unclipped P. Started below the solution it increases
    monotonically and stops in a few steps, exactly on the piece containing the solution. If
    ``density`` exceeds the share of pairs with P > 0 it cannot be reached; then every positive
    pair gets probability 1. Returns P̃ (diagonal 0) and the achieved expected density mean(P̃).
    An all-zero P (e.g. only dynamic distance on and no query term in the document) is replaced
    by the uniform (random) pattern. ``inplace=True`` reuses ``probability``'s storage.
    """
    if not 0.0 <= density <= 1.0:
        raise ValueError(f"density must be in [0, 1], got {density}")
    n = probability.shape[0]
    pairs = n * (n - 1)
    if not inplace:
        probability = probability.clone()
    probability.diagonal().zero_()
    if pairs == 0 or density == 0.0:
        return torch.zeros_like(probability), 0.0
    total = float(probability.sum())
    if total <= 0.0:
        probability = torch.ones_like(probability)
        probability.diagonal().zero_()
        total = float(pairs)
    target = density * pairs
    factor = target / total
    if factor * float(probability.amax()) > 1.0:
        for _ in range(max_iterations):
            threshold = 1.0 / factor
            clipped, unclipped = _clip_statistics(probability, threshold)
            if unclipped <= 1e-5 * threshold * clipped:  # (almost) every positive pair is clipped
                positive = int(torch.count_nonzero(probability))
                if target >= positive:  # out of reach: every positive pair becomes certain
                    smallest = torch.where(probability > 0, probability, torch.full_like(probability, 2.0)).amin()
                    factor = max(factor, 1.0 / float(smallest))
                    break
                if unclipped <= 0.0:
                    break
            new_factor = (target - clipped) / unclipped
            if new_factor <= factor * (1.0 + 1e-6):  # same clipped set: converged
                break
            factor = new_factor
    scaled = probability.mul_(factor).clamp_(max=1.0)
    return scaled, float(scaled.sum()) / pairs


def _upper_draw_blocks(n: int, generator, dtype, device, block_rows: int = 64):
    """Uniform draws for the strict upper triangle, folded into ⌈n/2⌉ rows of n − 1 and drawn in
    blocks of ``block_rows`` rows into reused buffers (no n²-sized temporary).

    Folded row i of R serves matrix row i (columns j > i read R[i, j − i − 1]) and, for
    i < ⌊n/2⌋, matrix row n − 1 − i (columns j > n − 1 − i read R[i, j − 1]); the two parts
    are disjoint and together fill R[i]. Each block draws 1 + rows·(n − 1) numbers (the first
    only pads the strided view) and yields ``(a, b, top, c, bottom)``: ``top`` is a
    (b − a, n − a) view whose [i, j − a] is the draw of pair (a + i, j) for j > a + i, and
    ``bottom`` (or None) a (c, n − 1) tensor whose [k, j − 1] is the draw of pair (r, j) for
    the matrix row r = n − a − c + k and j > r. Values off those pairs are arbitrary.
    """
    split, folded = (n + 1) // 2, n // 2
    rows = max(1, min(block_rows, split))
    draws = torch.empty(1 + rows * (n - 1), dtype=dtype, device=device)
    flipped = torch.empty(rows, n - 1, dtype=dtype, device=device)
    for a in range(0, split, rows):
        b = min(a + rows, split)
        size = b - a
        block = draws[: 1 + size * (n - 1)].uniform_(generator=generator)
        # top[i, j'] = block[1 + i·(n − 1) + (a + j') − (a + i) − 1] = block[i·(n − 2) + j']
        top = block.as_strided((size, n - a), (n - 2, 1))
        count = max(0, min(b, folded) - a)
        bottom = None
        if count:
            reverse = torch.arange(count - 1, -1, -1, device=device)
            bottom = torch.index_select(block[1:].view(size, n - 1)[:count], 0, reverse, out=flipped[:count])
        yield a, b, top, count, bottom


def upper_uniforms(n: int, generator: torch.Generator | None = None, *, dtype=torch.float32, device=None) -> Tensor:
    """The draws ``sample_graph`` uses, as an (n, n) matrix: its strict upper triangle holds one
    distinct uniform draw per pair i < j (the rest is 0). For tests and inspection."""
    out = torch.zeros(n, n, dtype=dtype, device=device)
    if n < 3:
        return torch.rand(n, n, generator=generator, dtype=dtype, device=device).triu_(1)
    for a, b, top, count, bottom in _upper_draw_blocks(n, generator, dtype, device):
        out[a:b, a:] = top
        if count:
            out[n - a - count : n - a, 1:] = bottom
    return out.triu_(1)


def sample_graph(probability: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """(7) symmetric Bernoulli graph: A_ij = A_ji = [u_ij < P_ij] for i < j, no self-loops.

    Exactly one uniform draw from ``generator`` per pair i < j (about n²/2 draws, folded layout
    of ``_upper_draw_blocks``, in blocks so that no n²-sized float temporary is allocated),
    compared with the upper triangle of P and mirrored: symmetric by construction, each pair an
    independent Bernoulli(P_ij). Returns a bool (n, n) adjacency matrix with a false diagonal.
    """
    if probability.dim() != 2 or probability.shape[0] != probability.shape[1]:
        raise ValueError(f"probability must be a square matrix, got shape {tuple(probability.shape)}")
    n = probability.shape[0]
    if n < 3:
        upper = upper_uniforms(n, generator, dtype=probability.dtype, device=probability.device) < probability
        upper.triu_(1)
        return upper | upper.T
    probability = probability.contiguous()
    upper = torch.zeros(n, n, dtype=torch.bool, device=probability.device)
    for a, b, top, count, bottom in _upper_draw_blocks(n, generator, probability.dtype, probability.device):
        # compare only from the block's first diagonal column on; clear its diagonal block's lower part
        torch.lt(top, probability[a:b, a:], out=upper[a:b, a:])
        upper[a:b, a:b].triu_(1)
        if count:
            low, high = n - a - count, n - a
            torch.lt(bottom[:, low - 1 :], probability[low:high, low:], out=upper[low:high, low:])
            upper[low:high, low:high].triu_(1)
    return upper.bitwise_or_(upper.T.contiguous())  # contiguous transpose first: faster than a strided OR
