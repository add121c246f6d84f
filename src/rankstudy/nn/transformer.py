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


def encoder_layer_forward(layer: nn.TransformerEncoderLayer, x: torch.Tensor,
                          padding: torch.Tensor | None) -> torch.Tensor:
    """``layer(x, src_key_padding_mask=padding)`` for a batch-first, post-norm ReLU layer."""
    batch, length, dim = x.shape
    attention = layer.self_attn
    heads = attention.num_heads
    qkv = F.linear(x, attention.in_proj_weight, attention.in_proj_bias)
    q, k, v = qkv.view(batch, length, 3, heads, dim // heads).permute(2, 0, 3, 1, 4)
    mask = None
    if padding is not None:
        # keys to attend; a sequence without any real token attends everywhere (its output is masked later)
        keep = ~padding | padding.all(dim=1, keepdim=True)
        mask = keep[:, None, None, :]
    attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              dropout_p=attention.dropout if layer.training else 0.0)
    attended = F.linear(attended.transpose(1, 2).reshape(batch, length, dim), attention.out_proj.weight,
                        attention.out_proj.bias)
    x = layer.norm1(x + layer.dropout1(attended))
    feed_forward = layer.linear2(layer.dropout(F.relu(layer.linear1(x))))
    return layer.norm2(x + layer.dropout2(feed_forward))


def encoder_forward(encoder: nn.TransformerEncoder, x: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor:
    for layer in encoder.layers:
        x = encoder_layer_forward(layer, x, padding)
    return x
