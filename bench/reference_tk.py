"""The original TK forward pass (matchmaker's TK, ECAI 2020 code), for side-by-side benchmarks.

Kept as the original computes it — sequence-first transformer (transposes in and out), every
mask multiplied in again at each step, allennlp-style cosine (norm + tiny), query contextualised
once per pair — so bench/tk_speed.py can check that rankstudy's TK gives the same scores faster.
It reads a rankstudy TK's weights (same parameter names).
"""

from __future__ import annotations

import torch
from torch import nn


class ReferenceTK(nn.Module):
    def __init__(self, model):
        super().__init__()
        cfg = model.config
        dim = model.embedding.embedding_dim
        self.embedding = model.embedding
        layer = nn.TransformerEncoderLayer(dim, cfg.heads, dim_feedforward=cfg.ff_dim, dropout=0.0)  # seq-first
        self.contextualizer = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.contextualizer.load_state_dict(model.contextualizer.state_dict())
        self.register_buffer("positions", model.positions.clone())
        self.mixer, self.nn_scaler = model.mixer, model.scaler
        self.mu, self.sigma = model.kernels.mu.view(1, 1, 1, -1), model.kernels.sigma.view(1, 1, 1, -1)
        self.dense, self.dense_mean, self.dense_comb = model.dense_log, model.dense_len, model.dense_comb

    def forward_representation(self, embeddings, mask):
        pos = self.positions[: embeddings.shape[1]].unsqueeze(0)
        context = self.contextualizer((embeddings + pos).transpose(1, 0),
                                      src_key_padding_mask=~mask.bool()).transpose(1, 0)
        return (self.mixer * embeddings + (1 - self.mixer) * context) * mask.unsqueeze(-1)

    def forward(self, query, document):
        query_mask, document_mask = (query > 1).float(), (document > 1).float()
        query_embeddings = self.forward_representation(self.embedding(query), query_mask)
        document_embeddings = self.forward_representation(self.embedding(document), document_mask)
        query_by_doc_mask = torch.bmm(query_mask.unsqueeze(-1), document_mask.unsqueeze(-1).transpose(-1, -2))
        a = query_embeddings / (query_embeddings.norm(p=2, dim=-1, keepdim=True) + 1e-13)
        b = document_embeddings / (document_embeddings.norm(p=2, dim=-1, keepdim=True) + 1e-13)
        cosine_matrix = torch.bmm(a, b.transpose(-1, -2))
        cosine_matrix_masked = cosine_matrix * query_by_doc_mask
        raw_kernel_results = torch.exp(-torch.pow(cosine_matrix_masked.unsqueeze(-1) - self.mu, 2) / (2 * torch.pow(self.sigma, 2)))
        kernel_results_masked = raw_kernel_results * query_by_doc_mask.unsqueeze(-1)
        per_kernel_query = torch.sum(kernel_results_masked, 2)
        log_per_kernel_query = torch.log2(torch.clamp(per_kernel_query, min=1e-10)) * self.nn_scaler
        per_kernel = torch.sum(log_per_kernel_query * query_mask.unsqueeze(-1), 1)
        doc_lengths = torch.sum((document > 0).float(), 1)
        per_kernel_query_mean = per_kernel_query / (doc_lengths.view(-1, 1, 1) + 1)
        per_kernel_mean = torch.sum(per_kernel_query_mean * self.nn_scaler * query_mask.unsqueeze(-1), 1)
        dense_out = self.dense(per_kernel)
        dense_mean_out = self.dense_mean(per_kernel_mean)
        return torch.squeeze(self.dense_comb(torch.cat([dense_out, dense_mean_out], dim=1)), 1)
