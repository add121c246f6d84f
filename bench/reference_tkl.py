"""TKL computed as the original lays it out (matchmaker's TKL_sigir20), for side-by-side benchmarks.

The same model and weights as a rankstudy TKL, the same scores, but the original's order of work:
the sequence-first transformer over every packed chunk of the batch at once (transposes in and
out, masks multiplied in again), allennlp-style cosine (norm + tiny), kernel activations laid out
[B, Lq, Ld, K] (kernels last), saturation windows as ``unfold`` views of that tensor summed over
their 30 positions (autograd scatters every window back in training), no slicing of the batch and
no trimming of its padding. Region selection (7) is the model's own: it is a few hundred windows
per document and costs the same either way.

bench/busy_speed.py times rankstudy's TKL against it, as it times TK against bench/reference_tk.py.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ReferenceTKL(nn.Module):
    def __init__(self, model):
        super().__init__()
        cfg = self.config = model.config
        dim = model.embedding.embedding_dim
        self.model = model  # (5)'s parameters and (7)
        self.embedding = model.embedding
        layer = nn.TransformerEncoderLayer(dim, cfg.heads, dim_feedforward=cfg.ff_dim, dropout=0.0)  # seq-first
        self.contextualizer = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.contextualizer.load_state_dict(model.contextualizer.state_dict())
        self.register_buffer("positions", model.positions.clone())
        self.mixer = model.mixer
        self.mu, self.sigma = model.kernels.mu.view(1, 1, 1, -1), model.kernels.sigma.view(1, 1, 1, -1)

    def forward_representation(self, ids):
        mask = (ids != 0).float()
        embeddings = self.embedding(ids)
        pos = self.positions[: ids.shape[1]].unsqueeze(0)
        context = self.contextualizer((embeddings + pos).transpose(1, 0),
                                      src_key_padding_mask=~mask.bool()).transpose(1, 0)
        return (self.mixer * embeddings + (1 - self.mixer) * context) * mask.unsqueeze(-1)

    def document_representation(self, document):
        """(2): every extended chunk with a real central token through the transformer in one call."""
        size, overlap = self.config.chunk_size, self.config.overlap
        chunks = -(-document.shape[1] // size)
        padded = F.pad(document, (overlap, chunks * size + overlap - document.shape[1]))
        unrolled = padded.unfold(1, size + 2 * overlap, size).reshape(-1, size + 2 * overlap)
        packed_indices = (unrolled[:, overlap:overlap + size] != 0).any(-1)
        packed = self.forward_representation(unrolled[packed_indices])
        unique_again = packed.new_zeros(unrolled.shape[0], size + 2 * overlap, packed.shape[-1])
        unique_again[packed_indices] = packed
        context = unique_again.view(document.shape[0], chunks, size + 2 * overlap, -1)[:, :, overlap:overlap + size]
        return context.reshape(document.shape[0], chunks * size, -1)[:, : document.shape[1]]

    def window_sums(self, values, dim):
        """Windows of ``values`` along ``dim`` (zeros past the end), each an unfold view summed."""
        size, stride = self.config.saturation_window, self.config.saturation_stride
        length = values.shape[dim]
        windows = -(-length // stride)
        pad = [0, 0] * (values.dim() - 1 - dim % values.dim()) + [0, (windows - 1) * stride + size - length]
        return F.pad(values, pad).unfold(dim, size, stride).sum(-1)

    def forward(self, query, document):
        query_mask, query_match = (query != 0).float(), (query > 1).float()
        document_mask, document_match = (document != 0).float(), (document > 1).float()
        query_embeddings = self.forward_representation(query)
        document_embeddings = self.document_representation(document)
        query_by_doc_mask = torch.bmm(query_mask.unsqueeze(-1), document_match.unsqueeze(-1).transpose(-1, -2))
        a = query_embeddings / (query_embeddings.norm(p=2, dim=-1, keepdim=True) + 1e-13)
        b = document_embeddings / (document_embeddings.norm(p=2, dim=-1, keepdim=True) + 1e-13)
        cosine = torch.bmm(a, b.transpose(-1, -2)) * query_by_doc_mask
        kernels = torch.exp(-torch.pow(cosine.unsqueeze(-1) - self.mu, 2) / (2 * torch.pow(self.sigma, 2)))
        kernels = kernels * query_by_doc_mask.unsqueeze(-1)  # [B, Lq, Ld, K]
        per_kernel_query = self.window_sums(kernels, 2)  # [B, Lq, W, K]
        window_tokens = torch.round(self.window_sums(document_mask, 1))  # [B, W]
        saturated = self.saturate(per_kernel_query, query, window_tokens)
        per_kernel = torch.sum(saturated * query_match.view(*query_match.shape, 1, 1), 1)  # [B, W, K]
        scores = self.model.dense(per_kernel).squeeze(-1)  # [B, W]
        valid = window_tokens > 0
        chosen, found = self.model.select_regions(scores, valid)
        return self.model.region_weights(self.model._region_features(scores, valid, chosen, found)).squeeze(1)

    def saturate(self, per_kernel_query, query, window_tokens):
        """(5) on [B, Lq, W, K]: the model's saturation, kernels last."""
        model = self.model
        if self.config.saturation == "log":
            return torch.log(torch.clamp(per_kernel_query, min=1e-10))
        influence = torch.stack(torch.broadcast_tensors(F.relu(model.saturation_salience(query)),
                                                        window_tokens.unsqueeze(1)), -1)  # [B, Lq, W, 2]
        a, c = model.saturation_a(influence), model.saturation_c(influence)  # [B, Lq, W, 1]
        if self.config.saturation == "linear":
            return a * per_kernel_query - c
        return a * torch.pow(torch.clamp(per_kernel_query, min=1e-10), 1 / model.saturation_b(influence)) - c
