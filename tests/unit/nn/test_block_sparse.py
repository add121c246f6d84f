"""Block-sparse attention (rankstudy.nn.block_sparse): equal, in value and gradient, to dense
attention under the pattern's mask on every real row, whatever the window, globals and random keys."""

from __future__ import annotations


import pytest
import torch

from helpers import dense_reference
from rankstudy.nn.block_sparse import (SparseLayout, block_count, block_sparse_attention_forward, random_edges,
                                      sparse_attention)


@pytest.mark.parametrize("case", range(12))
def test_equal_to_dense_masked_attention(case):
    generator = torch.Generator().manual_seed(case)
    width = int(torch.randint(5, 90, (1,), generator=generator))
    window = [0, 1, 3, 7, 11, 64][case % 6]
    lengths = torch.randint(3, width + 1, (3,), generator=generator)
    lengths[0] = width
    real = torch.arange(width) < lengths.unsqueeze(1)
    is_global = (torch.rand(3, width, generator=generator) < 0.15) & real
    is_global[:, 0] = case % 4 != 0  # some cases without any global token
    draws = case % 5
    uniforms = torch.rand(3, block_count(width, window), draws, generator=generator)
    keys = random_edges(uniforms, lengths) if draws else None
    layout = SparseLayout(real, is_global, window, keys)
    query, key, value = (torch.randn(3, 2, width, 8, generator=generator, requires_grad=True) for _ in range(3))
    sparse = sparse_attention(query, key, value, layout, 8 ** -0.5)
    dense = dense_reference(query, key, value, layout)
    rows = real.view(3, 1, width, 1)
    assert sparse.shape == dense.shape and sparse.isfinite().all()
    assert torch.allclose(sparse * rows, dense * rows, atol=1e-5)
    weights = torch.randn(dense.shape, generator=generator) * rows  # a loss on the real rows only
    for got, expected in zip(torch.autograd.grad((sparse * weights).sum(), (query, key, value)),
                             torch.autograd.grad((dense * weights).sum(), (query, key, value))):
        assert torch.allclose(got, expected, atol=1e-5)


def test_each_key_counts_once():
    # token 3 draws token 4 (inside its window), token 0 (global) and token 6 twice: only 6 is added, once
    real = torch.ones(1, 8, dtype=torch.bool)
    is_global = torch.zeros(1, 8, dtype=torch.bool)
    is_global[0, 0] = True
    keys = torch.tensor([[[4, 0, 6, 6]] * 8])
    layout = SparseLayout(real, is_global, 1, keys)
    value = torch.eye(8).view(1, 1, 8, 8)
    zeros = torch.zeros(1, 1, 8, 8)  # equal scores: the output row is the attended set's average
    output = sparse_attention(zeros, zeros, value, layout, 1.0)
    assert torch.allclose(output[0, 0, 3], torch.tensor([1, 0, 1, 1, 1, 0, 1, 0]) / 5)


def test_the_encoder_must_pass_the_layout():
    with pytest.raises(RuntimeError, match="sparse_layout"):
        block_sparse_attention_forward(torch.nn.Module(), *(torch.zeros(1, 1, 4, 2),) * 3, None)
