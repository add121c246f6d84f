"""Training steps of the default study's models against a plain computation of the same model, side by side.

The study spends most of its time training (bench/results/study_time.md). For each model this times the
study's training step (forward over a batch of pairs, pairwise margin loss, backward, Adam) at the default
config's dimensions (word vectors 64-d; TK/TKL 1 layer, 4 heads, ff 64; CONV-KNRM 64 filters), one thread,
the AVX2 kernels the study pins (run through ``python bench/train_step.py``, which pins them as
``python -m rankstudy`` does), and the same step computed plainly:

* TKL (2,000 tokens, 16 pairs in micro-batches of 4, document lengths drawn as the synthetic documents'):
  the window sums' gradient by autograd through ``unfold`` (a scatter of every window) instead of
  ``strided_window_sums``' own backward;
* CONV-KNRM (passages, 32 pairs): each cross-match convolving and normalising its document n-grams again
  (the computation before the change: 9 convolutions of the documents instead of 3), kernels as
  exp(−(M − μ)² / (2σ²)) with a division and a negation.

Both variants start from the same weights and see the same batches; rounds alternate their order; the
ratio is the median over rounds of plain ÷ project time in the same round. The two differ by float
rounding only, which Adam amplifies: the weights' largest difference after the steps is printed.

Usage: python bench/train_step.py [--rounds 12] [--out bench/results/train_step.md]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time
from pathlib import Path

from rankstudy.cpu_isa import pin_vector_isa

pin_vector_isa()

import numpy as np  # noqa: E402
import torch  # noqa: E402

import rankstudy.models.tkl as tkl_module  # noqa: E402
from rankstudy.models import build_model  # noqa: E402
from rankstudy.nn.kernels import cosine_matrix, log_soft_tf, match_mask, token_masks  # noqa: E402
from rankstudy.train.losses import pairwise_margin_loss  # noqa: E402

VOCAB, DIM = 20000, 64


def _vectors() -> np.ndarray:
    vectors = np.random.default_rng(0).standard_normal((VOCAB, DIM), dtype=np.float32)
    vectors[:2] = 0
    return vectors


def _batches(kind: str, count: int) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per step, micro-batches of (queries [2P, 4], documents [2P, L]): P pairs, positives first."""
    rng = np.random.default_rng(1)
    generator = torch.Generator().manual_seed(1)
    if kind == "tkl":  # the synthetic documents: median 750 tokens, read up to 2,000
        parts, pairs, median, sigma, low, high = 4, 4, 750, 1.05, 150, 2000
    else:  # the synthetic passages: median 61 tokens, at most 200
        parts, pairs, median, sigma, low, high = 1, 32, 61, 0.5, 10, 200
    steps = []
    for _ in range(count):
        micro = []
        for _ in range(parts):
            lengths = np.clip(rng.lognormal(np.log(median), sigma, 2 * pairs), low, high).astype(int)
            documents = torch.zeros(2 * pairs, int(lengths.max()), dtype=torch.long)
            for row, length in enumerate(lengths):
                documents[row, :length] = torch.randint(2, VOCAB, (int(length),), generator=generator)
            queries = torch.randint(2, VOCAB, (pairs, 4), generator=generator)
            micro.append((torch.cat([queries, queries]), documents))
        steps.append(micro)
    return steps


def _plain_conv_knrm_forward(model, query, document):
    """CONV-KNRM as computed before: documents convolved and normalised again for every query n-gram size."""
    def ngrams(ids):
        embedded = model.embedding(ids).transpose(1, 2)
        return [conv(embedded).transpose(1, 2) for conv in model.convolutions]

    _, q_match = token_masks(query)
    _, d_match = token_masks(document)
    matches = match_mask(q_match, d_match)
    kernels = model.kernels
    features = []
    for q in ngrams(query):
        for d in ngrams(document):
            similarity = cosine_matrix(q, d)
            raw = torch.exp(-torch.square(similarity.unsqueeze(-1) - kernels.mu) / (2 * torch.square(kernels.sigma)))
            soft_tf = (raw * matches.unsqueeze(-1)).sum(2)
            features.append(log_soft_tf(soft_tf, q_match) * model.config.log_scale)
    return model.dense(torch.cat(features, dim=1)).squeeze(1)


@contextlib.contextmanager
def _plain(kind: str, model):
    if kind == "tkl":
        own = tkl_module.strided_window_sums
        tkl_module.strided_window_sums = tkl_module._window_sums  # autograd's backward through unfold
        try:
            yield model
        finally:
            tkl_module.strided_window_sums = own
    else:
        forward = model.forward
        model.forward = lambda query, document: _plain_conv_knrm_forward(model, query, document)
        try:
            yield model
        finally:
            model.forward = forward


def _model(kind: str, vectors: np.ndarray):
    torch.manual_seed(0)
    settings = {"tkl": dict(layers=1, heads=4, ff_dim=64, train_embeddings=False),
                "conv_knrm": dict(filters=64, train_embeddings=False)}[kind]
    model = build_model(kind, settings, vectors)
    model.train()
    return model, torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)


def _step(model, optimizer, micro_batches) -> float:
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for queries, documents in micro_batches:
        scores = model(queries, documents)
        half = scores.shape[0] // 2
        pairwise_margin_loss(scores[:half], scores[half:]).backward()
    optimizer.step()
    return time.perf_counter() - start


def measure(kind: str, rounds: int, vectors: np.ndarray) -> dict:
    batches = _batches(kind, rounds + 2)
    project, plain = _model(kind, vectors), _model(kind, vectors)
    times = {"project": [], "plain": []}
    for index, micro_batches in enumerate(batches):
        order = ["project", "plain"] if index % 2 else ["plain", "project"]
        for who in order:
            model, optimizer = project if who == "project" else plain
            if who == "plain":
                with _plain(kind, model):
                    elapsed = _step(model, optimizer, micro_batches)
            else:
                elapsed = _step(model, optimizer, micro_batches)
            if index >= 2:  # two warm-up steps
                times[who].append(elapsed)
    drift = max(float((a - b).detach().abs().max()) for a, b in zip(project[0].parameters(), plain[0].parameters()))
    return {"model": kind, "project_s": statistics.median(times["project"]),
            "plain_s": statistics.median(times["plain"]),
            "ratio": statistics.median(p / q for q, p in zip(times["project"], times["plain"])), "weights_drift": drift}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    vectors = _vectors()
    rows = [measure(kind, args.rounds, vectors) for kind in ("tkl", "conv_knrm")]
    labels = {"tkl": "TKL @2,000, 16 pairs (4 × 4)", "conv_knrm": "CONV-KNRM passages, 32 pairs"}
    lines = [f"# python bench/train_step.py --rounds {args.rounds}: {platform.machine()}, {os.cpu_count()} CPUs, "
             f"1 thread, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}", "",
             "| model | project s/step | plain s/step | plain ÷ project (median of rounds) "
             "| weights after training, max diff |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {labels[r['model']]} | {r['project_s']:.4f} | {r['plain_s']:.4f} | {r['ratio']:.2f}× "
              f"| {r['weights_drift']:.1e} |" for r in rows]
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
