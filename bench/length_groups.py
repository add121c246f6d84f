"""A training step over length groups against the same step over the pass padded to its longest document.

``training.length_group`` (rankstudy.train.length_groups): a pass scores its documents sorted by length, 16 at
a time, each group cut to its longest. This times the study's passage training step both ways, side by side:
32 pairs of documents drawn as the synthetic passages' lengths (median 61 tokens, 10 to 200), the default
config's dimensions (word vectors 64-d; TK 1 layer, 4 heads, ff 64; CONV-KNRM 64 filters), one thread, the
study's AVX2 pins (bench/train_step.py's batches and pins). BERT[CLS] runs MiniLM cut to one layer (the study
encoder needs a trained directory; its shapes are smaller still). Both start from the same weights and see
the same batches; rounds alternate their order; the ratio is the median over rounds of padded ÷ grouped time
in the same round. The largest difference of the first batch's scores (evaluation mode) is printed.

Usage: python bench/length_groups.py [--rounds 12] [--out bench/results/length_groups.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_step import _batches, _vectors  # noqa: E402 (pins the study's vector instructions first)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rankstudy.models import build_model  # noqa: E402
from rankstudy.train.length_groups import score_in_length_groups  # noqa: E402
from rankstudy.train.loop import TrainConfig  # noqa: E402
from rankstudy.train.losses import pairwise_margin_loss  # noqa: E402

GROUP = TrainConfig.length_group  # the study's default
MODELS = {  # label: (registry name, settings)
    "TK": ("tk", dict(layers=1, heads=4, ff_dim=64, train_embeddings=False)),
    "KNRM": ("knrm", dict(train_embeddings=False)),
    "CONV-KNRM": ("conv_knrm", dict(filters=64, train_embeddings=False)),
    "DRMM": ("drmm", dict(train_embeddings=False)),
    "BERT[CLS] (MiniLM, 1 layer)": ("bert_cat", dict(encoder="minilm", encoder_layers=1, max_length=160)),
}


def _model(name: str, settings: dict, vectors):
    torch.manual_seed(0)
    idf = np.random.default_rng(2).uniform(1.0, 8.0, len(vectors)).astype(np.float32)  # DRMM's term gating
    model = build_model(name, settings, vectors, idf=idf)
    return model, torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)


def _step(model, optimizer, queries, documents, group: int) -> float:
    model.train()
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    scores = score_in_length_groups(model, queries, documents, group)
    half = scores.shape[0] // 2
    pairwise_margin_loss(scores[:half], scores[half:]).backward()
    optimizer.step()
    return time.perf_counter() - start


def measure(name: str, settings: dict, rounds: int, vectors) -> dict:
    batches = [micro[0] for micro in _batches("passages", rounds + 2)]
    grouped, padded = _model(name, settings, vectors), _model(name, settings, vectors)
    queries, documents = batches[0]
    with torch.inference_mode():
        difference = float((score_in_length_groups(grouped[0].eval(), queries, documents, GROUP)
                            - padded[0].eval()(queries, documents)).abs().max())
    times = {"grouped": [], "padded": []}
    for index, (queries, documents) in enumerate(batches):
        for who in (["grouped", "padded"] if index % 2 else ["padded", "grouped"]):
            model, optimizer = grouped if who == "grouped" else padded
            elapsed = _step(model, optimizer, queries, documents, GROUP if who == "grouped" else 0)
            if index >= 2:  # two warm-up steps
                times[who].append(elapsed)
    return {"grouped_s": statistics.median(times["grouped"]), "padded_s": statistics.median(times["padded"]),
            "ratio": statistics.median(p / g for g, p in zip(times["grouped"], times["padded"])),
            "difference": difference}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    vectors = _vectors()
    lines = [f"# python bench/length_groups.py --rounds {args.rounds}: {platform.machine()}, {os.cpu_count()} CPUs, "
             f"1 thread, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}", "",
             f"| model (passages, 32 pairs) | groups of {GROUP}, s/step | padded, s/step | padded ÷ grouped "
             "(median of rounds) | scores, max difference |",
             "|---|---:|---:|---:|---:|"]
    for label, (name, settings) in MODELS.items():
        row = measure(name, settings, args.rounds, vectors)
        lines.append(f"| {label} | {row['grouped_s']:.4f} | {row['padded_s']:.4f} | {row['ratio']:.2f}× "
                     f"| {row['difference']:.1e} |")
        print(lines[-1], file=sys.stderr, flush=True)
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
