"""Choppy's settings on real lists, diagnosed on the training topics only (nested; docs/choppy.md, "On the
paper's data"):

    python bench/choppy_diagnose.py [--lists ../shared/data/robust04-runs] [--system bm25] [--metric f1]
        [--repeats 0 1 2] [--epochs 30] [--variants paper raw ...] [--out bench/results/choppy_diagnose.md]

For each repeat r the study's outer 80/20 split (seed 42 + r, as config/choppy-robust04.yaml) is made and its
test topics are set aside, unseen; the training topics are split again 80/20 (seed 1000 + r) into inner training
and validation lists. Every variant trains on the inner training lists and is evaluated on the validation lists
after every epoch (the learning curve); Greedy-k is chosen on the inner training lists, and a ridge regression
on score features (``ridge_cuts``, a reference) is fitted to them. A choice made from this
table is made without the test topics. Variants change one thing against ``paper`` (the settings of
config/choppy-robust04.yaml's first version: d 128, 8 heads, 3 layers, the paper's single-layer rFF, dropout
0.1, Adam lr 1e-3, batches of 64, scores standardised on the training lists, positions initialised N(0, 0.02²)).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from rankstudy import formats
from rankstudy.models.choppy import ChoppyConfig
from rankstudy.truncation.baselines import evaluate_cuts, greedy_k, oracle
from rankstudy.truncation.choppy_train import predict, train_choppy
from rankstudy.truncation.experiment import TruncationConfig, split_queries
from rankstudy.truncation.repeats import repeat_seed
from rankstudy.truncation.tables import build_tables

PAPER = {"d_model": 128, "heads": 8, "layers": 3, "ff_layers": 1, "ff_dim": 128, "dropout": 0.1, "lr": 1e-3,
         "batch_size": 64, "score_scaling": "train", "position_init_std": 0.02}
VARIANTS = {
    "paper": {},
    "raw scores": {"score_scaling": "raw"},
    "scores z-scored per list": {"score_scaling": "list"},
    "raw scores, positions N(0, 1)": {"score_scaling": "raw", "position_init_std": 1.0},
    "dropout 0": {"dropout": 0.0},
    "d 32, 4 heads": {"d_model": 32, "heads": 4},
    "lr 3e-4": {"lr": 3e-4},
    "top 100": {"n": 100},
    "top 100, dropout 0.3": {"n": 100, "dropout": 0.3},
    "top 100, scores z-scored per list": {"n": 100, "score_scaling": "list"},
    "batches of 16": {"batch_size": 16},
    "AttnCut's loss (RAML, tau 0.95)": {"loss": "raml", "raml_temperature": 0.95},
}
SPLIT = TruncationConfig(n=300, test_fraction=0.2, dev_fraction=0)  # the split's fractions (n: unused)
RIDGE_RANKS = [1, 2, 3, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300]


def ridge_cuts(scores, tables, train, valid, penalty: float = 100.0) -> np.ndarray:
    """A reference, not a method of the paper: ridge regression from score features (the scores at 13 ranks,
    their gaps to the top score, their z-scores within the list) to each list's metric table; the cut is the
    argmax of the predicted table. It says how much a simple model can learn from the scores alone."""
    ranks = [r - 1 for r in RIDGE_RANKS if r <= scores.shape[1]]
    s = scores.astype(np.float64)
    features = np.concatenate([s[:, ranks], s[:, [0]] - s[:, ranks[1:]],
                               (s[:, ranks] - s.mean(1, keepdims=True)) / (s.std(1, keepdims=True) + 1e-9)], axis=1)
    mean, sd = features[train].mean(0), features[train].std(0) + 1e-9
    x_train = np.c_[(features[train] - mean) / sd, np.ones(len(train))]
    weights = np.linalg.solve(x_train.T @ x_train + penalty * np.eye(x_train.shape[1]), x_train.T @ tables[train])
    return (np.c_[(features[valid] - mean) / sd, np.ones(len(valid))] @ weights).argmax(axis=1) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lists", default="../shared/data/robust04-runs")
    parser.add_argument("--system", default="bm25")
    parser.add_argument("--metric", default="f1", choices=["f1", "dcg"])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeats", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--out", default="bench/results/choppy_diagnose.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lists = Path(args.lists)
    run, qrels = formats.read_run(lists / f"{args.system}.run"), formats.read_qrels(lists / "qrels.txt")
    tables_by_n = {}
    rows = []
    for variant in args.variants:
        settings = {**PAPER, **VARIANTS[variant]}
        n = settings.pop("n", 300)
        if n not in tables_by_n:
            tables_by_n[n] = build_tables(run, qrels, n, args.metric)
        qids, scores, tables, lengths = tables_by_n[n]
        for repeat in args.repeats:
            outer = split_queries(qids, SPLIT, repeat_seed(args.seed, repeat))["train"]
            inner = split_queries([qids[i] for i in outer], SPLIT, 1000 + args.seed + repeat)
            train, valid = outer[inner["train"]], outer[inner["test"]]
            part = lambda index: (scores[index], tables[index], lengths[index])  # noqa: E731
            cfg = ChoppyConfig(**settings, max_length=n, epochs=args.epochs, patience=args.epochs)
            start = time.time()
            model, history = train_choppy(part(train), part(valid), cfg, repeat_seed(args.seed, repeat), "cpu")
            cuts, _ = predict(model, scores[valid], lengths[valid], "cpu")
            k = greedy_k(tables[train])
            best_cut = oracle(tables[valid])[1]
            ridge = float(evaluate_cuts(tables[valid], ridge_cuts(scores, tables, train, valid)).mean())
            rows.append({"variant": variant, "repeat": repeat, "greedy_k": k, "ridge": ridge,
                         "greedy": float(tables[valid, k - 1].mean()),
                         "curve": [h["dev_metric"] for h in history], "train_loss": [h["train_loss"] for h in history],
                         "best_epoch_cut_sd": float(cuts.std()),
                         "best_epoch_rho": float(stats.spearmanr(cuts, best_cut).statistic) if np.ptp(cuts) else
                         float("nan"), "seconds": round(time.time() - start)})
            curve = rows[-1]["curve"]
            print(f"{variant} r{repeat}: greedy {rows[-1]['greedy']:.4f} (k {k}); valid by epoch "
                  + " ".join(f"{v:.3f}" for v in curve) + f"; {rows[-1]['seconds']} s", file=sys.stderr, flush=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    marks = [e for e in (5, 10, 15, 20, 30, 40, 60) if e <= args.epochs]
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"`python bench/choppy_diagnose.py {shlex.join(sys.argv[1:])}` on {platform.machine()} "
             f"({platform.processor() or 'cpu'}), {time.strftime('%Y-%m-%d')}, one thread; {args.system} lists, "
             f"{args.metric}, repeats {args.repeats}. Validation {args.metric} minus Greedy-k's (chosen on the inner "
             "training lists), mean over repeats, after each number of epochs; cut sd and rho (Spearman with the "
             "Oracle's cut) of the best validation epoch's model.", "",
             "| variant | Greedy-k | ridge (reference) | " + " | ".join(f"epoch {e}" for e in marks)
             + " | best epoch | cut sd | rho | s/run |",
             "|---|---|---|" + "---|" * (len(marks) + 4)]
    for variant in args.variants:
        mine = [r for r in rows if r["variant"] == variant]
        gains = np.array([np.array(r["curve"]) - r["greedy"] for r in mine])
        best = [int(np.argmax(r["curve"])) + 1 for r in mine]
        lines.append(f"| {variant} | {np.mean([r['greedy'] for r in mine]):.3f} | "
                     f"{np.mean([r['ridge'] - r['greedy'] for r in mine]):+.3f} | "
                     + " | ".join(f"{gains[:, e - 1].mean():+.3f}" for e in marks)
                     + f" | {'/'.join(map(str, best))} | {np.mean([r['best_epoch_cut_sd'] for r in mine]):.1f} | "
                     f"{np.nanmean([r['best_epoch_rho'] for r in mine]):.2f} | {np.mean([r['seconds'] for r in mine]):.0f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
