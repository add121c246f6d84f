"""Speed on an idle and on a busy machine: inference and a training step, side by side in one run.

For TK and TKL the project's model is timed against a plain reference with the same weights, inputs
and scores: TK against the original forward pass (bench/reference_tk.py), TKL against the same model
computed as the original lays it out (bench/reference_tkl.py); neither slices the batch. KNRM,
CONV-KNRM, PACRR and BERT[CLS] (MiniLM, as in results/efficiency.csv) have no reference here; their rows
compare thread settings. Workers run with the study's AVX2 pins (rankstudy.cpu_isa) and its allocator setting
(rankstudy.malloc: project and reference alike, they share a process). A training step
is what the study's loop does: forward over a batch of pairs, pairwise margin loss, backward, Adam; the
project's model scores each pass in length groups (``training.length_group``), the reference the padded pass.
Every document has the row's length (``@200``, ``@2000``), or, in the "passage lengths" and "document lengths"
rows, a length drawn as the synthetic passages' (median 61 tokens) and documents' (median 750, up to 2,000;
passes of 4 pairs as the TKL runs' ``micro_batch``), each batch padded to its longest as the token stores pad.

Each thread setting runs in its own process (the OpenMP wait policy is read once, when OpenMP
starts): "2 threads" (OpenMP's default: idle threads spin before they sleep), "2 threads passive"
(``OMP_WAIT_POLICY=PASSIVE``: idle threads sleep at once) and "1 thread". Each runs idle, then under
a bounded background load: ``--load`` busy-loop processes that stop on their own after
``--load-seconds`` (and are stopped when the benchmark ends). Within a process the configurations
run once per round, in reverse order every other round, so a change in load hits them alike;
reported: the best round's time per document (or per step) and the median over rounds of the
project/reference ratio measured in the same round.

Usage: python bench/busy_speed.py [--rounds 5] [--load 4] [--models NAME ...] [--settings LABEL ...]
                                  [--out bench/results/busy_speed.md]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rankstudy.cpu_isa import pin_vector_isa

BENCH = Path(__file__).resolve().parent
SETTINGS = {  # label: (torch threads, extra environment)
    "2 threads": (2, {}),
    "2 threads passive": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "1 thread": (1, {}),
}
PAPER_TK = dict(layers=2, heads=10, ff_dim=100)


# ---------------------------------------------------------------------------------------------
# worker: one thread setting, one process


PASSAGES = (61, 0.5, 10)  # document lengths as the synthetic passages: median, sigma (lognormal), shortest
DOCUMENTS = (750, 1.05, 150)  # and as the synthetic documents


def _cases(vocab: int, train_batch: int, tkl_batch: int, models: list[str]) -> list[dict]:
    """Per case whose name contains one of ``models``: the project's model, a reference or None, query and
    document length (the longest, with ``lengths`` drawn as the study's texts up to it, else every document that
    long), inference batch, training pairs and pairs per forward/backward pass. Only those cases' models are
    built (each from seed 0, so a subset run times the same weights as a full one)."""
    import numpy as np
    import torch

    sys.path.insert(0, str(BENCH))
    from reference_tk import ReferenceTK
    from reference_tkl import ReferenceTKL

    from rankstudy.models import build_model

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal(size=(vocab, 300), dtype=np.float32)
    vectors[:2] = 0

    def model(name, **settings):
        torch.manual_seed(0)
        return build_model(name, settings, vectors)

    specs = [  # name, the project's model, its reference, longest document, batch, pairs, lengths, pairs per pass
        ("TK @200", lambda: model("tk", **PAPER_TK), ReferenceTK, 200, 64, train_batch, None, None),
        ("TK, passage lengths", lambda: model("tk", **PAPER_TK), ReferenceTK, 200, 64, train_batch, PASSAGES, None),
        ("TKL @2000", lambda: model("tkl", **PAPER_TK), ReferenceTKL, 2000, tkl_batch, tkl_batch, None, None),
        ("TKL, document lengths", lambda: model("tkl", **PAPER_TK), ReferenceTKL, 2000, tkl_batch, tkl_batch,
         DOCUMENTS, 4),
        ("KNRM @200", lambda: model("knrm"), None, 200, 64, train_batch, None, None),
        ("CONV-KNRM @200", lambda: model("conv_knrm", filters=128), None, 200, 64, train_batch, None, None),
        ("PACRR @200", lambda: model("pacrr", max_doc_length=200), None, 200, 64, train_batch, None, None),
        ("BERT[CLS] MiniLM @200", lambda: model("bert_cat", encoder="minilm"), None, 200, 64, train_batch // 4,
         None, None),
    ]
    cases = []
    for name, build, reference, doc_length, batch, pairs, lengths, micro in specs:
        if any(part in name for part in models):
            project = build()
            cases.append(dict(name=name, project=project, reference=reference(project) if reference else None,
                              query_length=8, doc_length=doc_length, batch=batch, pairs=pairs, lengths=lengths,
                              micro=micro or pairs))
    return cases


def _documents(count: int, longest: int, lengths, vocab: int, generator):
    """[count, L] random ids: each document ``longest`` tokens, or with ``lengths`` (median, sigma, shortest)
    drawn lognormal up to ``longest``, padded to the longest drawn (as the token stores pad a batch)."""
    import numpy as np
    import torch

    if lengths is None:
        return torch.randint(2, vocab, (count, longest), generator=generator)
    median, sigma, shortest = lengths
    drawn = np.clip(np.random.default_rng(2).lognormal(np.log(median), sigma, count), shortest, longest).astype(int)
    documents = torch.zeros(count, int(drawn.max()), dtype=torch.long)
    for row, length in enumerate(drawn):
        documents[row, :length] = torch.randint(2, vocab, (int(length),), generator=generator)
    return documents


def _timers(model, case: dict, vocab: int, length_groups: bool):
    """(time one inference pass, time one training step) for ``model`` on fixed random inputs. A training step is
    the study's (train.loop): passes of ``micro`` pairs, each pass padded to its longest document and, for the
    project's model, scored in length groups (``training.length_group``'s default; with several threads, the
    groups' forward and backward passes on separate threads: ``backward_in_length_groups``), its mean loss
    weighted by its share of the batch, then Adam."""
    import torch

    from rankstudy.train.length_groups import backward_in_length_groups, document_lengths
    from rankstudy.train.loop import TrainConfig
    from rankstudy.train.losses import pairwise_margin_loss

    group = TrainConfig.length_group if length_groups else 0
    batch, pairs, micro = case["batch"], case["pairs"], case["micro"]
    generator = torch.Generator().manual_seed(1)
    query = torch.randint(2, vocab, (1, case["query_length"]), generator=generator)
    documents = _documents(max(batch, 2 * pairs), case["doc_length"], case["lengths"], vocab, generator)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-6)

    def infer() -> float:
        model.eval()
        with torch.inference_mode():
            start = time.perf_counter()
            model(query.expand(batch, -1), documents[:batch])
            return time.perf_counter() - start

    def step() -> float:
        model.train()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        for first in range(0, pairs, micro):
            rows = [*range(first, first + micro), *range(pairs + first, pairs + first + micro)]
            passage = documents[rows]
            passage = passage[:, :int(document_lengths(passage).max())]
            backward_in_length_groups(model, query.expand(len(rows), -1), passage, group,
                                      lambda s: pairwise_margin_loss(s[:micro], s[micro:]) * (micro / pairs))
        optimizer.step()
        return time.perf_counter() - start

    return infer, step


def worker(threads: int, rounds: int, vocab: int, train_batch: int, tkl_batch: int, models: list[str]) -> list[dict]:
    import torch

    from rankstudy.malloc import keep_freed_memory

    keep_freed_memory()
    torch.set_num_threads(threads)
    rows = []
    for case in _cases(vocab, train_batch, tkl_batch, models):
        timed = {"project": _timers(case["project"], case, vocab, length_groups=True)}
        if case["reference"] is not None:
            timed["reference"] = _timers(case["reference"], case, vocab, length_groups=False)
        jobs = [(who, kind, timers[index]) for who, timers in timed.items()
                for index, kind in enumerate(("infer", "step"))]
        times: dict[tuple, list[float]] = {(who, kind): [] for who, kind, _ in jobs}
        cpu_start = time.process_time()
        for round_ in range(rounds + 1):  # round 0 warms up
            for who, kind, run in (jobs if round_ % 2 else jobs[::-1]):
                elapsed = run()
                if round_:
                    times[(who, kind)].append(elapsed)
        row = {"model": case["name"], "batch": case["batch"], "train_pairs": case["pairs"],
               "cpu_s": time.process_time() - cpu_start}
        for (who, kind), values in times.items():
            row[f"{who}_{kind}_best"] = min(values)
            row[f"{who}_{kind}_median"] = statistics.median(values)
        for kind in ("infer", "step"):
            if ("reference", kind) in times:
                row[f"{kind}_ratio"] = statistics.median(
                    r / p for p, r in zip(times[("project", kind)], times[("reference", kind)]))
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# parent: background load and the table


def _busy(deadline: float) -> None:
    while time.time() < deadline:
        pass


def _run_setting(label: str, args) -> list[dict]:
    threads, extra = SETTINGS[label]
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    env.update(extra)
    pin_vector_isa(env)  # the kernels the study's jobs run (python -m rankstudy pins them)
    command = [sys.executable, __file__, "--worker", str(threads), "--rounds", str(args.rounds),
               "--vocab", str(args.vocab), "--train-batch", str(args.train_batch), "--tkl-batch", str(args.tkl_batch),
               "--models", *args.models]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    return [dict(row, setting=label) for row in json.loads(done.stdout.splitlines()[-1])]


def measure(args) -> list[dict]:
    rows = []
    for condition in ("idle", "busy"):
        load = []
        if condition == "busy":
            deadline = time.time() + args.load_seconds
            load = [multiprocessing.Process(target=_busy, args=(deadline,), daemon=True) for _ in range(args.load)]
            for process in load:
                process.start()
        try:
            for label in args.settings:
                print(f"{condition}: {label} (load average {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
                rows += [dict(row, condition=condition) for row in _run_setting(label, args)]
        finally:
            for process in load:
                process.terminate()
                process.join()
    return rows


def _table(rows: list[dict], args) -> str:
    defaults = {"models": [""], "settings": list(SETTINGS)}
    subset = "".join(f" --{key} " + " ".join(f"'{value}'" for value in getattr(args, key))
                     for key, default in defaults.items() if getattr(args, key) != default)
    lines = [f"# python bench/busy_speed.py --rounds {args.rounds} --load {args.load}{subset}: "
             f"{platform.machine()}, {os.cpu_count()} CPUs, {time.strftime('%Y-%m-%d')}",
             "",
             "Per model and thread setting: inference documents/ms and training steps/s of the project's model "
             "(best round); beside them, project ÷ reference speed (median over rounds of the ratio in one round; "
             "TK: the original forward, bench/reference_tk.py; TKL: as the original lays it out, "
             "bench/reference_tkl.py). `busy`: "
             f"{args.load} busy-loop processes beside the benchmark.",
             "",
             "| model | setting | idle docs/ms | busy docs/ms | idle ÷ ref | busy ÷ ref "
             "| idle steps/s | busy steps/s | idle ÷ ref | busy ÷ ref |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by_key = {(row["model"], row["setting"], row["condition"]): row for row in rows}
    models = list(dict.fromkeys(row["model"] for row in rows))
    for model in models:
        for setting in args.settings:
            cells = []
            idle, busy = by_key[(model, setting, "idle")], by_key[(model, setting, "busy")]
            cells += [f"{row['batch'] / (row['project_infer_best'] * 1000):.4f}" for row in (idle, busy)]
            cells += [f"{row['infer_ratio']:.2f}×" if "infer_ratio" in row else "" for row in (idle, busy)]
            cells += [f"{1 / row['project_step_best']:.2f}" for row in (idle, busy)]
            cells += [f"{row['step_ratio']:.2f}×" if "step_ratio" in row else "" for row in (idle, busy)]
            lines.append(f"| {model} | {setting} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def report(table: str, rows: list[dict], out: Path | None) -> None:
    """Print the table; with ``out``, write it there and the rows beside it as JSON (bench/results/)."""
    print(table)
    if out:
        out.write_text(table)
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # torch threads of a worker process
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load", type=int, default=4, help="busy-loop processes in the busy condition")
    parser.add_argument("--load-seconds", type=float, default=1800, help="the load stops by itself after this")
    parser.add_argument("--vocab", type=int, default=30000)
    parser.add_argument("--train-batch", type=int, default=32, help="training pairs per step (config: batch_size)")
    parser.add_argument("--tkl-batch", type=int, default=16, help="TKL inference documents and training pairs")
    parser.add_argument("--models", nargs="+", default=[""], help="the rows whose model contains one of these")
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.rounds, args.vocab, args.train_batch, args.tkl_batch, args.models)))
        return 0
    rows = measure(args)
    report(_table(rows, args), rows, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
