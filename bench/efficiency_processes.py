"""The efficiency job's measurement processes side by side: one spawned interpreter per model (each imports torch,
and transformers for an encoder model) against one fork per model from a forkserver that imported them once
(rankstudy.efficiency.measure_models). The tiny test study's efficiency section (tests/config/tiny.yaml), each start
method ``--rounds`` times, alternating; reports the wall time of each whole measurement and each model's numbers.

    python bench/efficiency_processes.py [--rounds 2] [--out FILE]

(bench/results/efficiency_processes.md holds its 2026-12-02 table, with notes below it that --out would overwrite.)
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
from pathlib import Path

import yaml

from rankstudy.efficiency import measure_models

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    efficiency = yaml.safe_load((REPO / "tests" / "config" / "tiny.yaml").read_text())["neural"]["efficiency"]
    walls, tables = {"spawn": [], "forkserver": []}, {}
    for _ in range(args.rounds):
        for method in walls:
            start = time.perf_counter()
            tables[method] = measure_models(efficiency["models"], efficiency["setup"], ["cpu"], start_method=method)
            walls[method].append(time.perf_counter() - start)
    lines = [f"tests/config/tiny.yaml's {len(efficiency['models'])} efficiency models on CPU, {os.cpu_count()} CPUs "
             f"({platform.machine()}), {args.rounds} rounds alternating spawn / forkserver.", "",
             "| start method | wall s per round |", "|---|---|"]
    lines += [f"| {method} | {', '.join(f'{wall:.1f}' for wall in values)} |" for method, values in walls.items()]
    lines += ["", "Last round, per model (docs/ms and steps/s are timings of tiny models; peak MB: the RSS the "
              "measurement added):", "", "| model | docs/ms spawn | docs/ms fork | peak MB spawn | peak MB fork |",
              "|---|---:|---:|---:|---:|"]
    spawn, fork = (tables[method].set_index("model") for method in ("spawn", "forkserver"))
    lines += [f"| {model} | {spawn.loc[model, 'docs_per_ms']:.2f} | {fork.loc[model, 'docs_per_ms']:.2f} | "
              f"{spawn.loc[model, 'peak_memory_mb']:.0f} | {fork.loc[model, 'peak_memory_mb']:.0f} |"
              for model in spawn.index]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
