"""nn.transformer: the encoder forward pass against PyTorch's layers, and its output at chosen positions only."""

from __future__ import annotations

import pytest
import torch

from rankstudy.nn.transformer import ProjectedSelfAttention, encoder_forward


def encoder(projected: bool) -> torch.nn.TransformerEncoder:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    if projected:
        layer.self_attn = ProjectedSelfAttention(8, 3, 4)
    return torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False).eval()


def test_encoder_forward_is_pytorchs_encoder():
    model = encoder(projected=False)
    x, padding = torch.randn(3, 7, 8), torch.tensor([[False] * 7, [False] * 4 + [True] * 3, [False] * 7])
    with torch.no_grad():
        expected = model(x, src_key_padding_mask=padding)
        assert torch.allclose(encoder_forward(model, x, padding)[~padding], expected[~padding], atol=1e-5)


@pytest.mark.parametrize("projected", [False, True])
def test_rows_are_the_full_output_at_those_positions(projected):
    """With ``rows`` the last layer runs for those positions only, while every position stays a key and a value
    in every layer: the output is the full output's rows (padding positions as keys masked alike)."""
    model = encoder(projected)
    x = torch.randn(3, 9, 8)
    padding = torch.tensor([[False] * 9, [False] * 5 + [True] * 4, [True] * 2 + [False] * 7])
    rows = slice(2, 7)
    with torch.no_grad():
        full = encoder_forward(model, x, padding)
        part = encoder_forward(model, x, padding, rows)
        assert part.shape == (3, 5, 8)
        assert torch.allclose(part, full[:, rows], rtol=0, atol=1e-6)
        # the positions outside the rows still count: changing one changes the rows' output
        changed = x.clone()
        changed[:, 0] += 1.0
        assert not torch.allclose(encoder_forward(model, changed, padding, rows), part, atol=1e-3)
