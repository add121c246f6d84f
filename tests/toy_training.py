"""A learnable toy ranking problem and the training loop's settings for it (tests of rankstudy.train and of
models trained through it): topic t's query holds token 2+t, its relevant documents token 12+t."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from torch import nn

from helpers import FakeStore
from rankstudy.train import examples as ex
from rankstudy.train.loop import TrainConfig, make_validator, train


class ToyRanker(nn.Module):
    """Mean-pooled embeddings, dot product, affine output; dropout exercises the RNG."""

    PARAM_GROUPS = {"embedding.": "embeddings"}

    def __init__(self, vocab: int = 50, dim: int = 16, init_seed: int = 0):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim, padding_idx=0)
        self.dropout = nn.Dropout(0.1)
        self.out = nn.Linear(1, 1)
        generator = torch.Generator().manual_seed(init_seed)  # weights independent of the global RNG
        with torch.no_grad():
            self.embedding.weight.copy_(torch.randn(vocab, dim, generator=generator) * 0.3)
            self.embedding.weight[0] = 0
            self.out.weight.fill_(1.0)
            self.out.bias.zero_()

    def _pool(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids > 0).float().unsqueeze(-1)
        return self.dropout((self.embedding(ids) * mask).sum(1) / mask.sum(1).clamp(min=1))

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        dot = (self._pool(query) * self._pool(document)).sum(-1, keepdim=True)
        return self.out(dot).squeeze(-1)


def make_toy(per_topic: int = 5, fillers: int = 2):
    """Topic t: query token 2+t, relevant documents hold token 12+t; fillers 22..49. Learnable."""
    rng = np.random.default_rng(0)
    queries, docs, qrels, runs = {}, {}, {}, {"train": {}, "val": {}}
    for split, count in (("train", per_topic), ("val", 1)):
        qrels[split] = {}
        for t in range(10):
            for j in range(count):
                qid = f"{split}{t}_{j}"
                queries[qid] = [2 + t]
                topics = [t] + [int(u) for u in rng.choice([u for u in range(10) if u != t], 7, replace=False)]
                candidates = []
                for k, u in enumerate(topics):
                    docid = f"{qid}_d{k}"
                    docs[docid] = [12 + u] + [int(x) for x in rng.integers(22, 50, size=fillers)]
                    candidates.append(docid)
                qrels[split][qid] = {candidates[0]: 1}
                order = rng.permutation(len(candidates))
                runs[split][qid] = [(candidates[i], float(len(candidates) - r)) for r, i in enumerate(order)]
    return {"queries": FakeStore(queries), "docs": FakeStore(docs), "qrels": qrels, "runs": runs}


def config(**overrides) -> TrainConfig:
    settings = dict(loss="pairwise", max_steps=60, validate_every=10, patience=100, metric="RR@10",
                    validation_depth=8, batch_size=16, learning_rates={"embeddings": 0.02, "default": 0.01},
                    max_query_length=5, max_doc_length=8, device="cpu")
    return TrainConfig(**{**settings, **overrides})


def triples(toy, per_query=8):
    return ex.make_triples(toy["qrels"]["train"], toy["runs"]["train"], 1, 8, per_query, seed=1)


def groups(toy, per_query=4):
    return ex.make_groups(toy["qrels"]["train"], toy["runs"]["train"], 1, 8, per_query, negatives=3, seed=1)


def validator(toy, cfg):
    return make_validator(toy["runs"]["val"], toy["qrels"]["val"], toy["queries"], toy["docs"], cfg)


def fit(toy, cfg, out_dir, examples=None, init_seed=0, seed=7, **kwargs):
    model = ToyRanker(init_seed=init_seed)
    data = examples if examples is not None else triples(toy)
    summary = train(model, data, toy["queries"], toy["docs"], validator(toy, cfg), cfg, out_dir, seed, **kwargs)
    return model, summary


def read_log(path):
    return pd.read_csv(path)
