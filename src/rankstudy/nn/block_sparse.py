"""Sparse attention computed over the allowed keys only, for the sparse-attention baselines
(``models.sparse_bert``): the same result as dense masked attention

    Attention(Q, K, V)_i = softmax_j(q_i·k_j / √d_h − ∞·(1 − A_ij)) V

with the pattern A of ``attention_pattern`` (local window ∪ global tokens ∪ random keys, real
tokens only), at a cost linear in the length T instead of quadratic.

How, as Longformer and BigBird compute it: the sequence is cut into query blocks of
b = max(w, 1) tokens; the queries of block n attend, in one fused ``scaled_dot_product_attention``
call per block, the keys of blocks n − 1, n, n + 1 (3b keys, among them every j with |i − j| ≤ w),
the global keys and the block's random keys (BigBird draws random keys per query block), under a
boolean mask that keeps each allowed key exactly once, as the dense mask does: the local and
random parts leave out global keys, the random part leaves out keys inside the window and repeated
draws. Global rows (a global token attends every real token) are computed densely and replace the
block rows. Rows of padding tokens attend what their block's real tokens may attend (the dense
mask: themselves only); no real row reads them, so the real rows' results are equal.

Registered with ``transformers``' ``AttentionInterface`` under ``ATTENTION_NAME``: an encoder
loaded with ``attn_implementation=ATTENTION_NAME`` reads the pattern from the ``sparse_layout``
keyword that the model passes to the encoder's ``forward`` (``transformers`` hands it through to
every attention layer).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

ATTENTION_NAME = "rankstudy_block_sparse"


def block_size(window: int) -> int:
    """Query-block size b for a window of w tokens each side."""
    return max(window, 1)


def block_count(length: int, window: int) -> int:
    """Query blocks ⌈length / b⌉ covering ``length`` tokens."""
    return -(-length // block_size(window))


def random_edges(uniforms: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Random key positions ⌊u·n⌋ [B, nb, r] from uniforms in [0, 1) [B or 1, nb, r] and real lengths n [B]."""
    lengths = lengths.view(-1, 1, 1)
    return torch.minimum((uniforms * lengths).long(), lengths - 1)  # u·n may round up to n in float32


@dataclass
class SparseLayout:
    """The attention pattern of one batch: real tokens [B, T], global tokens [B, T] (a subset of
    the real ones), the window w (tokens each side) and optional random key positions
    [B, nb, r] for each query block of ``block_size(w)`` tokens (nb ≥ ⌈T / b⌉)."""

    real: torch.Tensor
    is_global: torch.Tensor
    window: int
    random_keys: torch.Tensor | None = None

    def token_random_keys(self) -> torch.Tensor | None:
        """Random key positions per token [B, T, r] (a token has its block's)."""
        if self.random_keys is None:
            return None
        width = self.real.shape[1]
        return self.random_keys.repeat_interleave(block_size(self.window), dim=1)[:, :width]

    def dense_mask(self) -> torch.Tensor:
        """The pattern A as a dense boolean [B, T, T] mask (``attention_pattern``)."""
        return attention_pattern(self.real, self.is_global, self.window, self.token_random_keys())


def attention_pattern(real: torch.Tensor, is_global: torch.Tensor, window: int,
                      random_keys: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean [B, T, T] mask A (A[b, i, j]: token i may attend token j) from the real-token mask
    [B, T], the global-token mask [B, T], the window (tokens each side) and optional random key
    positions [B, T, r]. Padding rows attend to themselves only (no row is empty)."""
    positions = torch.arange(real.shape[1], device=real.device)
    allowed = ((positions.view(-1, 1) - positions.view(1, -1)).abs() <= window).unsqueeze(0)
    allowed = allowed | is_global.unsqueeze(2) | is_global.unsqueeze(1)
    if random_keys is not None and random_keys.shape[-1]:
        allowed = allowed.scatter(2, random_keys, True)
    allowed = allowed & real.unsqueeze(2) & real.unsqueeze(1)
    return allowed | torch.eye(real.shape[1], dtype=torch.bool, device=real.device)


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [B, H, L, d] at positions ``index`` [B, K] → [B, H, K, d]."""
    B, H, _, d = x.shape
    return torch.gather(x, 2, index.view(B, 1, -1, 1).expand(B, H, index.shape[1], d))


def _global_positions(is_global: torch.Tensor, padding_position: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's global positions [B, G] (G: the most in a row), padded with ``padding_position``,
    and which entries are real [B, G]."""
    count = int(is_global.sum(1).max()) if is_global.numel() else 0
    order = torch.argsort((~is_global).to(torch.uint8), dim=1, stable=True)[:, :count]
    valid = torch.gather(is_global, 1, order)
    return torch.where(valid, order, padding_position), valid


def sparse_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, layout: SparseLayout,
                     scaling: float, dropout: float = 0.0) -> torch.Tensor:
    """Attention [B, H, T, d] of query/key/value [B, H, T, d] under ``layout`` (``dropout`` on the
    attention probabilities)."""
    B, H, T, d = query.shape
    w, b = layout.window, block_size(layout.window)
    blocks = block_count(T + 1, w)  # position T is a spare zero row: padded key slots point at it
    length = blocks * b
    device = query.device
    k, v = (F.pad(x.transpose(1, 2), (0, 0, 0, 0, 0, length - T)).transpose(1, 2) for x in (key, value))
    real = F.pad(layout.real, (0, length - T))
    usable = real & ~F.pad(layout.is_global, (0, length - T))  # keys of the local and random parts
    global_index, global_valid = _global_positions(layout.is_global, T)

    # keys of query block n: local (blocks n-1 .. n+1), global, random; positions [B, nb, K]
    first = torch.arange(blocks, device=device).view(-1, 1) * b
    local = first - b + torch.arange(3 * b, device=device)  # [nb, 3b]
    query_position = first + torch.arange(b, device=device)  # [nb, b]
    offset = query_position.unsqueeze(2) - local.unsqueeze(1)  # [nb, b, 3b]
    local_ok = (local >= 0) & (local < T)
    local_index = local.clamp(0, T).expand(B, -1, -1)
    local_allowed = ((offset.abs() <= w) & local_ok.unsqueeze(1)) & torch.gather(
        usable, 1, local_index.reshape(B, -1)).view(B, blocks, 1, 3 * b)
    local_allowed = local_allowed | (offset == 0)
    index = [local_index, global_index.unsqueeze(1).expand(B, blocks, -1)]
    allowed = [local_allowed, global_valid.view(B, 1, 1, -1).expand(B, blocks, b, -1)]
    if layout.random_keys is not None and layout.random_keys.shape[-1]:
        drawn = torch.sort(layout.random_keys[:, :blocks], dim=-1).values
        drawn = F.pad(drawn, (0, 0, 0, blocks - drawn.shape[1]), value=T)  # blocks past T: none
        repeated = F.pad(drawn[..., 1:] == drawn[..., :-1], (1, 0))
        random_ok = (torch.gather(usable, 1, drawn.view(B, -1)).view_as(drawn) & ~repeated).unsqueeze(2)
        outside = (query_position.view(1, blocks, b, 1) - drawn.unsqueeze(2)).abs() > w
        index.append(drawn)
        allowed.append(random_ok & outside)
    index = torch.cat(index, dim=2)  # [B, nb, K]
    mask = torch.cat(allowed, dim=3)  # [B, nb, b, K]
    keys_per_block = index.shape[2]

    # token rows [B·L, H·d] (HF's heads are a view of [B, T, H, d]: no copy but the padding)
    flat_index = (index + torch.arange(B, device=device).view(B, 1, 1) * length).view(-1)

    def blocked(x: torch.Tensor) -> torch.Tensor:  # [B, H, L, d] at index → [B·nb, H, K, d]
        rows = x.transpose(1, 2).reshape(B * length, H * d).index_select(0, flat_index)
        return rows.view(B * blocks, keys_per_block, H, d).transpose(1, 2)

    q = F.pad(query, (0, 0, 0, length - T))
    queries = q.view(B, H, blocks, b, d).transpose(1, 2).reshape(B * blocks, H, b, d)
    output = F.scaled_dot_product_attention(queries, blocked(k), blocked(v), attn_mask=mask.view(B * blocks, 1, b, -1),
                                            dropout_p=dropout, scale=scaling)
    output = output.view(B, blocks, H, b, d).transpose(1, 2).reshape(B, H, length, d)

    # global rows: every real key, densely; written over the block rows (padded slots land on row T)
    global_rows = F.scaled_dot_product_attention(_gather_rows(q, global_index), k, v, attn_mask=real.view(B, 1, 1, -1),
                                                 dropout_p=dropout, scale=scaling)
    output = output.scatter(2, global_index.view(B, 1, -1, 1).expand(B, H, -1, d), global_rows)
    return output[:, :, :T]


def block_sparse_attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                                   sparse_layout: SparseLayout | None = None, **kwargs):
    """``transformers`` attention function: ``attention_mask`` is ignored (the layout holds the
    pattern); returns the [B, T, H, d] output and no weights."""
    if sparse_layout is None:
        raise RuntimeError(f"{ATTENTION_NAME} attention needs the sparse_layout keyword in the encoder's forward")
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    output = sparse_attention(query, key, value, sparse_layout, scaling, dropout if module.training else 0.0)
    return output.transpose(1, 2).contiguous(), None


def register() -> None:
    """Make ``ATTENTION_NAME`` a valid ``attn_implementation`` (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, block_sparse_attention_forward)
