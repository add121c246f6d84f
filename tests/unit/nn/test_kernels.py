"""nn.kernels: the cosine of each query against its document's unit vectors, as re-ranking reads them."""

from __future__ import annotations

import torch

from rankstudy.nn.kernels import cosine_matrix, cosine_rows, unit_vectors


def test_cosine_rows_equals_the_cosine_matrix_of_each_querys_document():
    generator = torch.Generator().manual_seed(0)
    documents = torch.randn(3, 7, 5, generator=generator)
    documents[1, 4:] = 0  # padding: zero vectors have cosine 0
    query = torch.randn(6, 4, 5, generator=generator)
    rows = torch.tensor([0, 0, 2, 1, 1, 0])  # runs of equal rows, a document met again later
    expected = cosine_matrix(query, documents[rows])
    assert torch.allclose(cosine_rows(query, unit_vectors(documents), rows), expected, atol=1e-6)
    assert not cosine_rows(query, unit_vectors(documents), rows)[3:5, :, 4:].any()
