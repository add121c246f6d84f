"""What pinning the CPU's vector instruction set to AVX2 costs: inference and training speed of the models,
the machine's own choice (AVX-512 where it has it) against the AVX2 pin that ``python -m rankstudy`` sets
(``rankstudy.__main__``: the same kernels, so the same numbers, on every x86-64 machine with AVX2).

Each setting runs ``python -m rankstudy efficiency`` (one process per model, 1 thread, the default config's
paper-sized models) in its own environment; the settings alternate for ``--rounds`` rounds, so a change in
the machine's load hits both alike. Reported per model: the best round's documents/ms and training steps/s
of each setting and the pinned ÷ native ratio.

Usage: python bench/cpu_isa.py [--rounds 2] [--out bench/results/cpu_isa.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import yaml

from rankstudy.cpu_isa import AVX2_PINS

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("tk", "knrm", "conv_knrm", "pacrr", "tkl-2k")


def environment(pinned: bool) -> dict[str, str]:
    """The entry point pins unless told ``RANKSTUDY_CPU_ISA=native``; no pin inherited from this shell."""
    env = {k: v for k, v in os.environ.items() if k not in AVX2_PINS and k != "RANKSTUDY_CPU_ISA"}
    return env if pinned else {**env, "RANKSTUDY_CPU_ISA": "native"}


def measure(pinned: bool, models: dict, setup: dict) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "efficiency.csv"
        subprocess.run([sys.executable, "-m", "rankstudy", "efficiency", "--models", json.dumps(models),
                        "--setup", json.dumps(setup), "--out", str(out)], check=True, env=environment(pinned),
                       stderr=subprocess.DEVNULL)
        return pd.read_csv(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "cpu_isa.md"))
    args = parser.parse_args()
    efficiency = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["neural"]["efficiency"]
    models = {name: efficiency["models"][name] for name in MODELS}
    setup = {**efficiency["setup"], "repeats": 3}
    rows = []
    for round_number in range(args.rounds):
        for pinned in ((False, True) if round_number % 2 == 0 else (True, False)):
            table = measure(pinned, models, setup)
            rows.append(table.assign(setting="AVX2 pin" if pinned else "native", round=round_number))
            print(f"round {round_number} {'pinned' if pinned else 'native'} done", file=sys.stderr)
    best = pd.concat(rows).groupby(["model", "setting"])[["docs_per_ms", "train_steps_per_s"]].max().unstack()
    lines = [f"# python bench/cpu_isa.py --rounds {args.rounds}: {platform.machine()}, {os.cpu_count()} CPUs", "",
             "Best round per setting; 1 thread; the default config's efficiency models (results/efficiency.csv).", "",
             "| model | native docs/ms | AVX2 pin docs/ms | pin ÷ native | native steps/s | AVX2 pin steps/s "
             "| pin ÷ native |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for model in models:
        docs, steps = best.loc[model, "docs_per_ms"], best.loc[model, "train_steps_per_s"]
        lines.append(f"| {model} | {docs['native']:.4f} | {docs['AVX2 pin']:.4f} | "
                     f"{docs['AVX2 pin'] / docs['native']:.2f}× | {steps['native']:.3f} | {steps['AVX2 pin']:.3f} | "
                     f"{steps['AVX2 pin'] / steps['native']:.2f}× |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
