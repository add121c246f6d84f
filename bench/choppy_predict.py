"""Benchmark: Choppy's prediction with and without PyTorch's attention inference fast path, side by side in one
process (truncation/choppy_train.py ``_without_attention_fast_path``):

    python bench/choppy_predict.py [--lists 64] [--n 300] [--rounds 5] [--out bench/results/choppy_predict.md]

The paper's model (d 128, 8 heads, 3 layers) on generated lists of n scores, one with padding, one thread; each
round times one forward pass of every setting, alternating; the median over rounds is reported with the ratio and
the largest difference of the probabilities.
"""

from __future__ import annotations

import argparse
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from rankstudy.models.choppy import Choppy, ChoppyConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lists", type=int, default=64)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="bench/results/choppy_predict.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    scores = torch.randn(args.lists, args.n).sort(dim=1, descending=True).values
    lengths = torch.full((args.lists,), args.n)
    lengths[0] = args.n * 5 // 6
    rows = []
    for ff_layers in (2, 1):
        model = Choppy(ChoppyConfig(d_model=128, heads=8, layers=3, ff_layers=ff_layers, max_length=args.n)).eval()
        times: dict[bool, list[float]] = {True: [], False: []}
        outputs = {}
        with torch.no_grad():
            for _ in range(args.rounds + 1):  # the first round warms up
                for fast in (True, False):
                    torch.backends.mha.set_fastpath_enabled(fast)
                    start = time.perf_counter()
                    outputs[fast] = torch.softmax(model(scores, lengths), dim=-1)
                    times[fast].append(time.perf_counter() - start)
        torch.backends.mha.set_fastpath_enabled(True)
        fast, slow = (float(np.median(times[flag][1:])) for flag in (True, False))
        rows.append((ff_layers, fast, slow, float((outputs[True] - outputs[False]).abs().max())))
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"`python bench/choppy_predict.py {shlex.join(sys.argv[1:])}` on {platform.machine()}, "
             f"{time.strftime('%Y-%m-%d')}, one thread, torch {torch.__version__}; {args.lists} lists of {args.n}, "
             f"median of {args.rounds} rounds.", "",
             "| feed-forward | fast path on (s) | off (s) | on / off | largest probability difference |",
             "|---|---|---|---|---|"]
    lines += [f"| {'1 layer (paper)' if ff == 1 else '2 layers'} | {on:.3f} | {off:.3f} | {on / off:.2f}x | {diff:.1e} |"
              for ff, on, off, diff in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
