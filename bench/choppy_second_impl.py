"""A second Choppy: a transcription of the public implementation in github.com/Woody5962/Ranked-List-Truncation
(models/Choopy.py, utils/losses.py ChoopyLoss, utils/metrics.py, run.py, hyper_parameter_bm25.conf at 5620c2d),
trained on the study's splits of the Robust04 lists, beside the study's Greedy-k (docs/choppy.md, "On the
paper's data"):

    python bench/choppy_second_impl.py [--lists ../shared/data/robust04-runs] [--system bm25] [--metric f1]
        [--repeats 0 1] [--source-split] [--epochs 80] [--out bench/results/choppy_second_impl.md]

What the transcription keeps of that code, deliberately (it is here to be compared, not to be right):
- the model: raw scores (no scaling) concatenated with a positional parameter drawn from N(0, 1), 127 wide;
  nn.TransformerEncoderLayer(d_model=128, nhead=8, dropout=0.2) x 3 with PyTorch's defaults, so the feed-forward
  is 2,048 wide and ``batch_first`` is False: the encoder reads a batch [B, 300, 128] as a sequence of B lists
  at each of 300 ranks, so attention runs across the lists of a batch at one rank, never across the ranks of a
  list; a linear layer to one logit per rank and a softmax over the ranks;
- the loss: -sum_i o_i C_i / B, with F1's recall base the relevant documents within the top 300 (their labels);
- training: Adam lr 1e-3, weight decay 0.0054756, batches of 64 shuffled lists, 80 epochs (run.py's default);
  the test lists also go through in shuffled batches of 64 (the batch changes each list's output);
- their selection: the test metric after every epoch, and the best of those reported ("best_test_f1").
This script reports the last epoch's test value (no selection) and their best-of-epochs value, each for F1 with
both recall bases (theirs, the top 300; the study's, every relevant document in the qrels), beside Greedy-k.
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
from torch import nn

from rankstudy import formats
from rankstudy.truncation.baselines import evaluate_cuts, greedy_k
from rankstudy.truncation.experiment import TruncationConfig, split_queries
from rankstudy.truncation.repeats import repeat_seed
from rankstudy.truncation.tables import build_tables

N = 300


class SecondChoppy(nn.Module):
    """models/Choopy.py (``batch_first`` False, as there)."""

    def __init__(self, dropout: float = 0.2):
        super().__init__()
        self.position_encoding = nn.Parameter(torch.randn(N, 127))
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=8, dropout=dropout)
        self.attention_layer = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
        self.decision = nn.Linear(128, 1)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        x = torch.cat([scores[..., None], self.position_encoding.expand(len(scores), N, 127)], dim=2)
        return torch.softmax(self.decision(self.attention_layer(x)).squeeze(-1), dim=1)


def _shuffled_batches(count: int, rng: np.random.Generator, size: int = 64):
    order = rng.permutation(count)
    return [order[start:start + size] for start in range(0, count, size)]


def train_and_test(scores, train_table, test_tables, split, seed: int, epochs: int) -> dict:
    """Per epoch, the test value of the argmax cuts under each of ``test_tables`` (name -> tables)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = SecondChoppy()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.0054756345581373493)
    x = torch.from_numpy(scores)
    c = torch.from_numpy(train_table)
    train, test = split["train"], split["test"]
    curves = {name: [] for name in test_tables}
    curves["cuts"] = []
    for epoch in range(epochs):
        model.train()
        for batch in _shuffled_batches(len(train), rng):
            index = train[batch]
            loss = -(model(x[index]) * c[index]).sum() / len(index)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        cuts = np.empty(len(test), dtype=np.int64)
        with torch.no_grad():
            for batch in _shuffled_batches(len(test), rng):
                cuts[batch] = model(x[test[batch]]).argmax(dim=1).numpy() + 1
        for name, tables in test_tables.items():
            curves[name].append(float(evaluate_cuts(tables[test], cuts).mean()))
        curves["cuts"].append((float(cuts.mean()), float(cuts.std())))
        print(f"  epoch {epoch + 1}: loss {loss.item():.4f}, "
              + ", ".join(f"test {name} {curves[name][-1]:.4f}" for name in test_tables)
              + f", cut {cuts.mean():.1f} ± {cuts.std():.1f}", file=sys.stderr, flush=True)
    return curves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lists", default="../shared/data/robust04-runs")
    parser.add_argument("--system", default="bm25")
    parser.add_argument("--metric", default="f1", choices=["f1"])
    parser.add_argument("--seed", type=int, default=42, help="the study's seed (config/choppy-robust04.yaml)")
    parser.add_argument("--repeats", type=int, nargs="*", default=[0, 1], help="random 80/20 splits (seed + r)")
    parser.add_argument("--source-split", action="store_true", help="also the lists' own split (topics 651-700)")
    parser.add_argument("--epochs", type=int, default=80)
    parser.add_argument("--out", default="bench/results/choppy_second_impl.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lists = Path(args.lists)
    run, qrels = formats.read_run(lists / f"{args.system}.run"), formats.read_qrels(lists / "qrels.txt")
    qids, scores, qrels_f1, _ = build_tables(run, qrels, N, "f1", recall_base="qrels")
    _, _, top_f1, _ = build_tables(run, qrels, N, "f1", recall_base="top_n")
    tables = {"F1 (qrels)": qrels_f1, "F1 (top 300)": top_f1}
    splits = {f"random split {r}": split_queries(qids, TruncationConfig(n=N, test_fraction=0.2, dev_fraction=0),
                                                 repeat_seed(args.seed, r)) for r in args.repeats}
    if args.source_split:
        given = {part: formats.read_ids(lists / f"{args.system}.{part}.qids", "qid") for part in ("train", "test")}
        splits["source split"] = split_queries(qids, TruncationConfig(n=N), args.seed,
                                               {part: [q for q in ids if q in set(qids)] for part, ids in given.items()})
    rows = []
    for name, split in splits.items():
        print(f"{name}: {len(split['train'])} train, {len(split['test'])} test lists", file=sys.stderr)
        start = time.time()
        curves = train_and_test(scores, top_f1, tables, split, args.seed, args.epochs)
        for table_name, tables_ in tables.items():
            k = greedy_k(tables_[split["train"]])
            rows.append({"split": name, "measure": table_name, "greedy_k": k,
                         "Greedy-k": float(tables_[split["test"], k - 1].mean()),
                         "second, last epoch": curves[table_name][-1],
                         "second, best test epoch (its selection)": max(curves[table_name]),
                         "last epoch cut mean, sd": curves["cuts"][-1],
                         "epochs with one cut for every list": sum(sd == 0 for _, sd in curves["cuts"]),
                         "minutes": round((time.time() - start) / 60, 1)})
        print(json.dumps(rows[-2:]), file=sys.stderr)
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"`python bench/choppy_second_impl.py {shlex.join(sys.argv[1:])}` on {platform.machine()}, "
             f"{time.strftime('%Y-%m-%d')}, one thread; {args.system} lists, {args.epochs} epochs.", "",
             "| split | F1 measured with | Greedy-k (k) | second, last epoch | second, best test epoch | last epoch's cut "
             "| epochs with one cut for all |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['split']} | {r['measure']} | {r['Greedy-k']:.3f} ({r['greedy_k']}) | {r['second, last epoch']:.3f} "
              f"| {r['second, best test epoch (its selection)']:.3f} | {r['last epoch cut mean, sd'][0]:.1f} ± "
              f"{r['last epoch cut mean, sd'][1]:.1f} | {r['epochs with one cut for all']} of {args.epochs} |"
              for r in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
