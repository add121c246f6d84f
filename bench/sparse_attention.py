"""Sparse-attention baselines (models.sparse_bert): block-sparse attention against the dense
masked attention it replaced, side by side in one process, same weights and inputs.

A study-sized encoder (2 layers, hidden 64, 4 heads, ff 256: config.yaml's ``neural.encoders.study``)
with random weights, documents of 1,024 tokens and a 4-token query, window 64 (the default config's
Longformer/BigBird/QDS-style settings). ``dense`` runs the same model with the pattern given to
PyTorch's fused SDPA kernel as a dense [B, 1, T, T] boolean mask (the implementation before
2026-11-26). Reports ms per document for inference (batch 16) and for a training step (forward +
backward, batch 8), the ratio dense ÷ block-sparse, and the largest score difference.

    python bench/sparse_attention.py [--threads 1] [--rounds 3] [--out bench/results/sparse_attention.md]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from rankstudy.config import from_dict
from rankstudy.models import build_model
from rankstudy.nn import block_sparse
from rankstudy.text.embeddings import save_embeddings
from rankstudy.text.study_encoder import StudyEncoderConfig, build_study_encoder
from rankstudy.text.vocab import build_vocabulary

DENSE = "bench_dense_mask"
PATTERNS = {"longformer": {}, "bigbird": {"random_keys": 32}, "qds": {"qds_block": 64, "qds_global_blocks": 2}}


def dense_mask_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, sparse_layout=None,
                         **kwargs):
    """The dense reference: the whole pattern as a boolean mask for SDPA."""
    mask = sparse_layout.dense_mask().unsqueeze(1)
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling,
                                            dropout_p=dropout if module.training else 0.0)
    return output.transpose(1, 2).contiguous(), None


def study_sized_encoder(root: Path) -> Path:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    collection = root / "collection.tsv"
    collection.write_text("".join(f"D{i}\t{' '.join(rng.choice(words, size=50))}\n" for i in range(400)))
    vocab = build_vocabulary(collection, min_count=1)
    vocab.save(root / "vocab")
    save_embeddings(root / "vectors.npy", rng.normal(size=(len(vocab), 64)).astype(np.float32))
    config = from_dict(StudyEncoderConfig, {"layers": 2, "heads": 4, "intermediate_size": 256, "max_positions": 1100},
                       "encoder")
    build_study_encoder(collection, root / "vocab", root / "vectors.npy", config, 0, root / "encoder")
    return root / "encoder"


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AttentionInterface

    AttentionInterface.register(DENSE, dense_mask_attention)
    torch.manual_seed(0)
    query, document = torch.randint(5, 3000, (16, 4)), torch.randint(5, 3000, (16, 1024))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        encoder = study_sized_encoder(Path(tmp))
        for pattern, extra in PATTERNS.items():
            torch.manual_seed(0)
            model = build_model("sparse_bert", {"encoder": str(encoder), "attention_dropout": 0.0, "pattern": pattern,
                                                "max_length": 1060, "window": 64, **extra}, None)
            times = {"block-sparse": ([], []), "dense": ([], [])}
            for _ in range(args.rounds):
                for name, implementation in (("block-sparse", block_sparse.ATTENTION_NAME), ("dense", DENSE)):
                    model.encoder.config._attn_implementation = implementation
                    model.eval()
                    with torch.no_grad():
                        times[name][0].append(timed(lambda: model(query, document)) / len(query) * 1000)
                    model.train()
                    torch.manual_seed(1)
                    times[name][1].append(timed(lambda: model(query[:8], document[:8]).sum().backward()) / 8 * 1000)
                    model.zero_grad()
            model.eval()
            with torch.no_grad():
                model.encoder.config._attn_implementation = DENSE
                dense_scores = model(query, document)
                model.encoder.config._attn_implementation = block_sparse.ATTENTION_NAME
                difference = (model(query, document) - dense_scores).abs().max().item()
            best = {name: (min(a), min(b)) for name, (a, b) in times.items()}
            rows.append(f"| {pattern} | {best['dense'][0]:.1f} | {best['block-sparse'][0]:.1f} | "
                        f"{best['dense'][0] / best['block-sparse'][0]:.2f}× | {best['dense'][1]:.1f} | "
                        f"{best['block-sparse'][1]:.1f} | {best['dense'][1] / best['block-sparse'][1]:.2f}× | "
                        f"{difference:.1e} |")
    report = "\n".join([
        f"# python bench/sparse_attention.py --threads {args.threads} --rounds {args.rounds}: "
        f"{platform.machine()}, torch {torch.__version__}, {date.today()}", "",
        "ms per document of 1,024 tokens (best of the rounds; rounds interleave the two implementations); "
        "study-sized encoder, window 64.", "",
        "| pattern | dense inference | block-sparse inference | speed-up | dense train step | block-sparse train step "
        "| speed-up | max score difference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|", *rows, ""])
    print(report)
    if args.out:
        args.out.write_text(report)


if __name__ == "__main__":
    main()
