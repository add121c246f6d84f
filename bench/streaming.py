"""Benchmark: peak memory and time of the corpus-scale steps on a large synthetic collection.

Generates a synthetic passage collection of about ``--documents`` documents (default 1,000,000;
the study's passage flavour: log-normal lengths, median 60 tokens, 25-200, ~400 bytes a line) and
runs, one after the other and as the workflow's rules do (``python -m rankstudy <command>``
subprocesses with the rules' arguments), every step that reads the whole corpus:

===============  ==========================================================================
dataset          ``dataset``: synthetic export (generation spooled to disk, written shuffled)
vocab            ``vocab --min-count 5``: term counts, one streaming pass
store            ``store --vocab``: BlingFire token store
store-wordpiece  ``store --encoder minilm``: WordPiece token store (the BERT re-rankers')
index            ``index --threads 2``: JsonCollection conversion, Anserini IndexCollection,
                 index statistics and their check
candidates-*     ``search --model bm25 --hits 100`` per split (the candidates the re-rankers
                 train on and re-rank): Anserini SearchCollection, run rewritten
===============  ==========================================================================

Memory of a step: its whole process tree (the JVM that Anserini runs in included) is sampled
every 0.1 s with psutil, summing RSS over the processes; the kernel's own peak RSS of the largest
single process (``os.wait4``) catches a spike between samples. "peak RSS" is the larger of the
two, and is what is checked against the 4 GB budget; "peak anon" is the sampled RSS without
file-backed pages (memory-mapped index and store files, which the kernel can drop at will).

Time of a step: wall seconds, and CPU seconds (user + system of the step and its reaped
descendants, the JVM included), which a machine shared with other work disturbs much less; the
1-minute load average after each step is recorded beside them.

Writes ``--out`` (default bench/results/streaming.txt); exit status 1 if a step fails or a peak
exceeds the budget. The work directory (a fresh one under ``--work``) is removed afterwards
unless ``--keep``; at 1,000,000 documents it peaks at about 3 GB.

Usage: nice -n 10 python bench/streaming.py [--documents 1000000] [--work /tmp] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from rankstudy.cpu_isa import cpu_model

REPO = Path(__file__).resolve().parents[1]
GB = 1e9
BUDGET_BYTES = 4 * GB
SEED = 42
SPLITS = ("train", "dev", "test")
# Synthetic queries: documents per query besides the background ones = E[relevant] (discrete
# Pareto, exponent 1, capped at 100: H_100 = 5.19) + 2 hard negatives.
QUERIES = {"train": 1000, "dev": 200, "test": 250}
DOCUMENTS_PER_QUERY = 7.19


@dataclass
class Step:
    name: str
    seconds: float
    cpu_seconds: float  # user + system, the step's process and its reaped descendants
    load: float  # 1-minute load average when the step ended
    peak_rss: float  # bytes: max(sampled process-tree sum, kernel peak of one process)
    peak_anon: float  # bytes: sampled process-tree sum without file-backed pages
    output_bytes: int
    returncode: int


def machine() -> str:
    return (f"{cpu_model()}, {os.cpu_count()} CPUs visible, {psutil.virtual_memory().total / GB:.1f} GB RAM, "
            f"Python {platform.python_version()}")


def tree_memory(root: psutil.Process) -> tuple[int, int]:
    """(RSS, RSS without file-backed pages) summed over ``root`` and its descendants."""
    rss = anon = 0
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    for process in processes:
        try:
            info = process.memory_info()
        except psutil.Error:  # exited between listing and reading
            continue
        rss += info.rss
        anon += info.rss - info.shared
    return rss, anon


def measure(name: str, command: list[str], work: Path, output: Path, interval: float = 0.1) -> Step:
    """Run ``command`` in ``work`` (log in work/logs/NAME.log); time it and sample its memory."""
    log_path = work / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    peaks = {"rss": 0, "anon": 0}
    done = threading.Event()
    with open(log_path, "w") as log:
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=work, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        root = psutil.Process(process.pid)

        def sample() -> None:
            while not done.is_set():
                rss, anon = tree_memory(root)
                peaks["rss"], peaks["anon"] = max(peaks["rss"], rss), max(peaks["anon"], anon)
                done.wait(interval)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)  # rusage of the child and its reaped descendants
        except BaseException:  # interrupted: take the step's process group (the JVM too) down with us
            os.killpg(process.pid, signal.SIGTERM)
            raise
        finally:
            done.set()
            sampler.join()
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen from waiting again
    kernel_peak = usage.ru_maxrss * 1024  # KiB on Linux
    step = Step(name, seconds, usage.ru_utime + usage.ru_stime, os.getloadavg()[0],
                max(peaks["rss"], kernel_peak), peaks["anon"], disk_usage(output), process.returncode)
    state = "ok" if step.returncode == 0 else f"FAILED (exit {step.returncode}, see {log_path})"
    print(f"{name:16s} {seconds:8.1f} s  cpu {step.cpu_seconds:8.1f} s  peak RSS {step.peak_rss / GB:5.2f} GB  "
          f"load {step.load:.1f}  {state}", flush=True)
    return step


def disk_usage(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def dataset_section(documents: int) -> dict:
    background = max(1, round(documents - DOCUMENTS_PER_QUERY * sum(QUERIES.values())))
    return {"source": "synthetic", "synthetic": {
        "flavour": "passage", "background_documents": background,
        **{f"{split}_queries": count for split, count in QUERIES.items()},
    }}


def steps(documents: int, threads: int, hits: int) -> list[tuple[str, list[str], str]]:
    """(name, command, output path) of every step, in workflow order."""
    rankstudy = [sys.executable, "-m", "rankstudy"]
    collection = "data/collection.tsv"
    bm25 = json.dumps({"k1": 0.9, "b": 0.4})
    plan = [
        ("dataset", [*rankstudy, "dataset", "--name", "synthetic-stream", "--config",
                     json.dumps(dataset_section(documents)), "--seed", str(SEED), "--out", "data"], "data"),
        ("vocab", [*rankstudy, "vocab", "--collection", collection, "--min-count", "5", "--out", "text/vocab"],
         "text/vocab"),
        ("store", [*rankstudy, "store", "--input", collection, "--kind", "collection", "--vocab", "text/vocab",
                   "--out", "text/store"], "text/store"),
        ("store-wordpiece", [*rankstudy, "store", "--input", collection, "--kind", "collection",
                             "--encoder", "minilm", "--out", "text/wordpiece"], "text/wordpiece"),
        ("index", [*rankstudy, "index", "--collection", collection, "--out", "index", "--threads", str(threads),
                   "--timing", "benchmarks/index.json"], "index"),
    ]
    for split in SPLITS:
        plan.append((f"candidates-{split}", [
            *rankstudy, "search", "--index", "index", "--queries", f"data/queries.{split}.tsv",
            "--out", f"runs/bm25.{split}.run", "--model", "bm25", "--params", bm25, "--hits", str(hits),
            "--threads", str(threads), "--timing", f"benchmarks/search.{split}.json"], f"runs/bm25.{split}.run"))
    return plan


def collection_size(work: Path) -> tuple[int, int]:
    """(documents, tokens) of the generated collection (tokens: whitespace-separated words)."""
    documents = tokens = 0
    with open(work / "data" / "collection.tsv", "rb") as handle:
        for line in handle:
            documents += 1
            tokens += line.count(b" ") + 1
    return documents, tokens


def report(results: list[Step], documents: int, tokens: int, wall: float, threads: int, hits: int,
           load_before: float) -> str:
    per_million = 1e6 / documents
    lines = [
        f"# python bench/streaming.py --documents {documents:,} on {machine()}, {time.strftime('%Y-%m-%d')}",
        f"# synthetic passages (study flavour 'passage'): {documents:,} documents, {tokens:,} words "
        f"({tokens / documents:.0f} a document); queries train/dev/test {'/'.join(str(QUERIES[s]) for s in SPLITS)}; "
        f"--threads {threads}; BM25 top {hits}",
        "# peak RSS: max(sampled sum over the step's process tree, kernel peak of one process); "
        "anon: sampled, without file-backed pages",
        f"# total wall time {wall / 60:.1f} min; 1-minute load average {load_before:.1f} at the start, "
        f"'load' after each step (a load above the {os.cpu_count()} CPUs stretches wall time, not CPU time)",
        "",
        f"{'step':16s} {'wall s':>8s} {'wall s/1M':>10s} {'cpu s/1M':>9s} {'load':>5s} {'peak RSS GB':>12s} "
        f"{'peak anon GB':>13s} {'output MB':>10s}  budget 4 GB",
    ]
    for step in results:
        verdict = "FAIL (step failed)" if step.returncode else ("PASS" if step.peak_rss < BUDGET_BYTES else "FAIL")
        lines.append(f"{step.name:16s} {step.seconds:8.1f} {step.seconds * per_million:10.1f} "
                     f"{step.cpu_seconds * per_million:9.1f} {step.load:5.1f} {step.peak_rss / GB:12.2f} "
                     f"{step.peak_anon / GB:13.2f} {step.output_bytes / 1e6:10.1f}  {verdict}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000, help="about this many documents")
    parser.add_argument("--work", default=tempfile.gettempdir(), help="a fresh work directory is made under this")
    parser.add_argument("--threads", type=int, default=2, help="Anserini threads (index, search)")
    parser.add_argument("--hits", type=int, default=100, help="BM25 candidates per query (config first_stage.hits)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "streaming.txt"))
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if args.documents < 10 * sum(QUERIES.values()):
        parser.error(f"--documents must be at least {10 * sum(QUERIES.values())}")
    Path(args.work).mkdir(parents=True, exist_ok=True)
    needed = 3.5e3 * args.documents  # bytes a document at the peak (collection, JSON copy, index, stores)
    free = shutil.disk_usage(args.work).free
    if free < needed:
        print(f"warning: {free / GB:.1f} GB free under {args.work}, about {needed / GB:.1f} GB needed", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below when killed
    work = Path(tempfile.mkdtemp(prefix="rankstudy-streaming-", dir=args.work))
    load_before = os.getloadavg()[0]
    print(f"work directory {work}", flush=True)
    results: list[Step] = []
    started = time.perf_counter()
    try:
        for name, command, output in steps(args.documents, args.threads, args.hits):
            results.append(measure(name, command, work, work / output))
            if results[-1].returncode:
                break
        wall = time.perf_counter() - started
        generated = (work / "data" / "collection.tsv").is_file()
        documents, tokens = collection_size(work) if generated else (args.documents, 0)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = report(results, documents, tokens, wall, args.threads, args.hits, load_before)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)
    failed = any(step.returncode or step.peak_rss >= BUDGET_BYTES for step in results)
    return 1 if failed or len(results) < len(steps(args.documents, args.threads, args.hits)) else 0


if __name__ == "__main__":
    raise SystemExit(main())
