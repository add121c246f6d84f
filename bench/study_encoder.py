"""Cost of the study encoder against MiniLM-L6 in the Socialformer paper's models, side by side.

For each model (Socialformer, MaxP, FirstP, IDCM, PARADE, sparse BERT) built once on MiniLM
(``encoder: minilm``) and once on a study encoder directory (``--study``, e.g. ``encoders/study``
after ``snakemake encoders/study``), on the same random documents of ``--length`` tokens (ids
drawn from each encoder's own vocabulary, a 4-token query): the median time of a training step
(listwise group of 1 + 3 documents, batch 2: forward, backward, AdamW) and of scoring 16
documents, and their ratio. Settings of each model are the default config's (``--config``).
Usage: python bench/study_encoder.py --study encoders/study [--threads 2] [--repeats 5]
Writes a Markdown table to stdout (bench/results/study_encoder.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch
import yaml

from rankstudy.models import build_model
from rankstudy.nn.pretrained import load_tokenizer


def _timed(function, repeats: int) -> float:
    function()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, settings: dict, length: int, repeats: int, seed: int = 0) -> tuple[float, float]:
    """(seconds per training step, seconds per 16 scored documents) of one model."""
    torch.manual_seed(seed)
    vocab = len(load_tokenizer(settings["encoder"]))
    model = build_model(name, settings, np.zeros((0, 0), dtype=np.float32))
    rng = np.random.default_rng(seed)
    docs = torch.as_tensor(rng.integers(100, vocab, size=(8, length)))
    query = torch.as_tensor(rng.integers(100, vocab, size=(8, 4)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def step():
        model.train()
        loss = torch.nn.functional.cross_entropy(model(query, docs).view(2, 4), torch.zeros(2, dtype=torch.long))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def score():
        model.eval()
        with torch.inference_mode():
            model(query.repeat(2, 1), docs.repeat(2, 1))

    return _timed(step, repeats), _timed(score, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, help="study encoder directory (encoders/study)")
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=["socialformer", "maxp", "firstp", "idcm", "parade", "longformer"])
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    models = yaml.safe_load(open(args.config))["neural"]["models"]
    print(f"# Study encoder vs MiniLM-L6 ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads, documents of {args.length} tokens, median of {args.repeats})\n")
    print("| model | MiniLM step s | study step s | step ratio | MiniLM 16 docs s | study 16 docs s | scoring ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key in args.models:
        spec = dict(models[key])
        name = spec.pop("model")
        timings = {}
        for label, encoder in (("minilm", "minilm"), ("study", args.study)):
            timings[label] = measure(name, {**spec, "encoder": encoder}, args.length, args.repeats)
        (ms, mi), (ss, si) = timings["minilm"], timings["study"]
        print(f"| {key} | {ms:.3f} | {ss:.3f} | {ms / ss:.1f}x | {mi:.3f} | {si:.3f} | {mi / si:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
