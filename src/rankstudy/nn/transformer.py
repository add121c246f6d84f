"""Batch-first Transformer encoder forward with PyTorch's fused attention kernel.

Computes exactly what ``nn.TransformerEncoderLayer`` (post-norm, ReLU) computes, from the same
parameters, but routes attention through ``F.scaled_dot_product_attention``: on CPU that is a
flash-attention kernel, while the layer's own inference fast path (nested tensors, batched
``bmm`` over 30-dim heads) was the slower of the two in our CPU profile of TK's shapes.
bench/tk_speed.py compares the result side by side with the original forward pass.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ProjectedSelfAttention(nn.Module):
    """Self-attention whose heads need not split the model width: queries, keys and values are projected
    to ``heads × head_size`` and the output back to ``dim`` (AllenNLP's multi-head self-attention, which
    the TK notebook's 16 heads of 32 over 300-d vectors use). It carries the attributes of
    ``nn.MultiheadAttention`` that ``encoder_layer_forward`` reads, initialised as PyTorch initialises them."""

    def __init__(self, dim: int, heads: int, head_size: int, dropout: float = 0.0):
        super().__init__()
        inner = heads * head_size
        self.num_heads, self.dropout = heads, dropout
        # read by nn.TransformerEncoder's constructor; False keeps PyTorch's fast path (which assumes the
        # heads split the width) off: the forward pass is encoder_layer_forward's
        self.batch_first, self._qkv_same_embed_dim = True, False
        self.in_proj_weight = nn.Parameter(torch.empty(3 * inner, dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * inner))
        self.out_proj = nn.Linear(inner, dim)
        nn.init.xavier_uniform_(self.in_proj_weight)
        nn.init.zeros_(self.out_proj.bias)


def encoder_layer_forward(layer: nn.TransformerEncoderLayer, x: torch.Tensor, padding: torch.Tensor | None,
                          rows: slice | None = None) -> torch.Tensor:
    """``layer(x, src_key_padding_mask=padding)`` for a batch-first, post-norm ReLU layer (its ``self_attn``
    an ``nn.MultiheadAttention`` or a ``ProjectedSelfAttention``); with ``rows``, the output at those positions
    only (``layer(...)[:, rows]``): every position is a key and a value, only they are queries."""
    batch, length, dim = x.shape
    attention = layer.self_attn
    heads = attention.num_heads
    inner = attention.in_proj_weight.shape[0] // 3  # dim, unless the heads are projected
    qkv = F.linear(x, attention.in_proj_weight, attention.in_proj_bias)
    q, k, v = qkv.view(batch, length, 3, heads, inner // heads).permute(2, 0, 3, 1, 4)
    if rows is not None:
        q, x = q[:, :, rows], x[:, rows]
        length = x.shape[1]
    mask = None
    if padding is not None:
        # keys to attend; a sequence without any real token attends everywhere (its output is masked later)
        keep = ~padding | padding.all(dim=1, keepdim=True)
        mask = keep[:, None, None, :]
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              dropout_p=attention.dropout if layer.training else 0.0)
    attended = F.linear(attended.transpose(1, 2).reshape(batch, length, inner), attention.out_proj.weight,
                        attention.out_proj.bias)
    x = layer.norm1(x + layer.dropout1(attended))
    feed_forward = layer.linear2(layer.dropout(F.relu(layer.linear1(x))))
    return layer.norm2(x + layer.dropout2(feed_forward))


def encoder_forward(encoder: nn.TransformerEncoder, x: torch.Tensor, padding: torch.Tensor | None,
                    rows: slice | None = None) -> torch.Tensor:
    """``encoder(x, src_key_padding_mask=padding)``, or with ``rows`` its output at those positions only: the
    last layer then projects queries, attends, and runs its feed-forward for them alone."""
    last = len(encoder.layers) - 1
    for index, layer in enumerate(encoder.layers):
        x = encoder_layer_forward(layer, x, padding, rows if index == last else None)
    return x
