"""Benchmark: how long the default study takes, from the Snakemake ``benchmark:`` file of every job.

Every rule writes ``benchmarks/.../*.tsv`` (wall seconds ``s``, ``cpu_time``). This script sums
them per paper and stage, so the study's time budget is measured job by job rather than guessed:

    python bench/study_time.py [--config config/config.yaml] [--benchmarks benchmarks]
                               [--log LOG] [--models models] [--out FILE]

It prints its report; ``--out`` also writes it to a file (bench/results/study_time.md is the curated history
of timed runs, which a report would overwrite: paste the parts that matter there by hand).

A job belongs to the paper whose config section names its run (``socialformer:`` tables and
figures, with their ``encoder_from`` warm starts and the study encoder with its token stores;
``tkl:``; ``choppy:``'s jobs); other neural runs are the TK paper's; data, index,
first stage and other text are "shared".
The sum of wall times is the elapsed time of a one-job-at-a-time run; ``snakemake --cores 2`` runs
single-threaded jobs side by side, so a fresh run takes somewhat less. Only jobs that have run
are counted: the script states how many files it read and which runs had none.

Snakemake's ``cpu_time`` samples a job's processes (every second for 30 s, then every 30 s) and misses
what ran after the last sample: it is a lower bound (a TKL re-ranking job of 33 s wall recorded 13 s,
and took 26 CPU-seconds of its 26 quiet ones measured with ``/usr/bin/time``). ``--log`` reads a run's
Snakemake log instead: its elapsed time, how long fewer jobs ran than there are cores and the idle
core-minutes (what better packing could still win), and its critical path: the chain of jobs, each
reading an output of the one before, with the longest sum of wall times (no number of cores runs the
study faster than that chain; shortening a job off it does not shorten the run). ``--models`` reads the
trainings' ``log.csv`` files: the share of each training's time after its best validation (without a
learning-rate schedule, a budget cut at the best step keeps the same best checkpoint).
"""

from __future__ import annotations

import argparse
import csv
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

SHARED_STAGES = {"data", "index", "first_stage", "text"}


def run_papers(config: dict) -> dict[str, str]:
    """Run name -> paper, from the config's paper sections (other runs: TK)."""
    neural = config.get("neural", {})
    runs = neural.get("runs", {})
    tk_runs = set(neural.get("table2_runs", runs))
    papers = {name: "TK" for name in runs}
    tkl = config.get("tkl", {})
    rows = [row["run"] for key in ("table1", "saturation", "lengths") for row in tkl.get(key, [])]
    rows += list(tkl.get("compare", {}).values()) + [tkl.get("regions")]
    papers.update({run: "TKL" for run in rows if run and run not in tk_runs})
    social = config.get("socialformer", {})
    for row in social.get("table1", []) + social.get("table2", []):
        papers[row["run"]] = "Socialformer"
        source = runs.get(row["run"], {}).get("encoder_from")
        if source:
            papers[source] = "Socialformer"
    return papers


def study_encoder_texts(config: dict) -> set[str]:
    """Embedding entries whose token stores are a study encoder's (neural.encoders), and the encoders."""
    neural = config.get("neural", {})
    encoders = set(neural.get("encoders", {}))
    return encoders | {name for name, spec in neural.get("embeddings", {}).items() if spec.get("encoder") in encoders}


def job_paper(path: Path, papers: dict[str, str], socialformer_texts: set[str] = frozenset()) -> tuple[str, str] | None:
    """(paper, stage) of one benchmark file, e.g. rerank/synthetic-doc/tkl.tkl-2k.s42.dev.tsv; None for
    a run the config no longer has. ``socialformer_texts``: text jobs (study encoder, its stores) of the
    Socialformer paper's part."""
    stage = path.parts[0]
    if stage == "text" and (path.parts[1] in socialformer_texts or path.stem.removeprefix("encoder.") in socialformer_texts):
        return "Socialformer", stage
    if stage in SHARED_STAGES:
        return "shared", stage
    if stage == "choppy" or path.name.startswith("choppy"):
        return "Choppy", stage
    if stage == "report":
        for prefix, paper in (("tkl", "TKL"), ("socialformer", "Socialformer"), ("first_stage", "shared")):
            if path.name.startswith(prefix):
                return paper, stage
        return "TK", stage
    parts = path.name.split(".")
    if len(parts) >= 4 and parts[1] not in papers:
        return None  # a run no longer in the config
    return papers.get(parts[1] if len(parts) >= 4 else "", "shared"), stage


@dataclass
class LoggedJob:
    name: str  # rule and wildcards, e.g. "train model=tk, run=tk, seed=42"
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    start: datetime | None = None
    end: datetime | None = None

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def log_jobs(log: Path) -> list[LoggedJob]:
    """The finished jobs of a Snakemake log: its ``[timestamp]`` lines, each job's ``rule``, ``input:``,
    ``output:``, ``wildcards:`` and ``jobid:`` lines, and ``Finished jobid:``."""
    now, current, started, finished = None, None, {}, []
    for line in log.read_text().splitlines():
        if stamp := re.match(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", line):
            now = datetime.strptime(" ".join(stamp.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif rule := re.match(r"^(?:local)?rule (\w+):$", line):
            current = LoggedJob(rule.group(1))
        elif current and (field_line := re.match(r"^    (input|output|wildcards): (.*)$", line)):
            key, value = field_line.groups()
            if key == "wildcards":
                current.name = f"{current.name} {value}"
            else:
                getattr(current, key + "s").extend(value.split(", "))
        elif current and (job := re.match(r"^    jobid: (\d+)", line)) and now:
            current.start = now
            started[job.group(1)] = current
        elif (done := re.match(r"Finished jobid: (\d+)", line)) and done.group(1) in started:
            job = started.pop(done.group(1))
            job.end = now
            finished.append(job)
    if not finished:
        raise SystemExit(f"{log}: no finished job found (expected Snakemake's 'jobid:' and 'Finished jobid:' lines)")
    return finished


def log_occupancy(jobs: list[LoggedJob], cores: int) -> tuple[int, int, int]:
    """(elapsed seconds from the first job's start to the last job's end, seconds during which fewer than
    ``cores`` jobs ran, idle core-seconds: the sum over those seconds of the cores that ran no job)."""
    first = min(job.start for job in jobs)
    seconds = int((max(job.end for job in jobs) - first).total_seconds())
    running = [0] * seconds
    for job in jobs:
        for second in range(int((job.start - first).total_seconds()), int((job.end - first).total_seconds())):
            running[second] += 1
    return (seconds, sum(1 for count in running if count < cores),
            sum(max(0, cores - count) for count in running))


def critical_path(jobs: list[LoggedJob]) -> list[LoggedJob]:
    """The chain of jobs, each reading an output of the one before, with the longest sum of wall times."""
    producer = {path: job for job in jobs for path in job.outputs}
    # a job's inputs may be directories or files below another job's output directory
    def parents(job: LoggedJob) -> set[int]:
        found = set()
        for path in job.inputs:
            while path and path not in producer:
                path = path.rpartition("/")[0]
            if path:
                found.add(id(producer[path]))
        return found

    longest: dict[int, tuple[float, list[LoggedJob]]] = {}
    for job in sorted(jobs, key=lambda job: job.end):  # a job ends after every job it reads from
        before = max((longest[parent] for parent in parents(job) if parent in longest),
                     key=lambda found: found[0], default=(0.0, []))
        longest[id(job)] = (before[0] + job.seconds, [*before[1], job])
    return max(longest.values(), key=lambda found: found[0])[1]


@dataclass
class Training:
    name: str  # dataset/run/seedN
    seconds: float  # the train job's wall time
    steps: int
    best_step: int

    @property
    def after_best(self) -> float:
        """Seconds after the best validation (steps cost alike)."""
        return self.seconds * (self.steps - self.best_step) / self.steps


def trainings(models: Path, benchmarks: Path) -> list[Training]:
    """Every training under ``models`` (DATASET/MODEL/RUN/seedN/log.csv) with a benchmark file: its steps and
    best step (the first trained row with the highest metric; step 0 is the untrained model, never chosen)."""
    found = []
    for log in sorted(models.glob("*/*/*/seed*/log.csv")):
        dataset, model, run, seed = log.parts[-5:-1]
        bench = benchmarks / "train" / dataset / f"{model}.{run}.s{seed.removeprefix('seed')}.tsv"
        with log.open() as handle:
            rows = [row for row in csv.DictReader(handle) if int(row["step"]) > 0]
        if not rows or not bench.is_file():
            continue
        best = max(rows, key=lambda row: float(row["metric"]))  # the first of equal maxima, as training keeps
        with bench.open() as handle:
            seconds = float(list(csv.DictReader(handle, delimiter="\t"))[-1]["s"])
        found.append(Training(f"{dataset}/{run}/{seed}", seconds, int(rows[-1]["step"]), int(best["step"])))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--benchmarks", default="benchmarks")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument("--log", type=Path, help="a run's .snakemake/log/*.snakemake.log: elapsed time, idle cores")
    parser.add_argument("--cores", type=int, default=2, help="the cores that run gave Snakemake")
    parser.add_argument("--models", type=Path, help="the run's models/ folder: training time after the best step")
    args = parser.parse_args()
    config = yaml.safe_load(Path(args.config).read_text())
    papers, socialformer_texts = run_papers(config), study_encoder_texts(config)
    root = Path(args.benchmarks)
    wall, cpu, jobs = defaultdict(float), defaultdict(float), defaultdict(int)
    seen_runs, stale = set(), []
    for path in sorted(root.rglob("*.tsv")):
        relative = path.relative_to(root)
        with path.open() as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if not rows:
            continue
        key = job_paper(relative, papers, socialformer_texts)
        if key is None:
            stale.append(str(relative))
            continue
        wall[key] += float(rows[-1]["s"])
        cpu[key] += float(rows[-1].get("cpu_time") or 0.0)
        jobs[key] += 1
        parts = relative.name.split(".")
        if len(parts) >= 4:
            seen_runs.add(parts[1])
    order = ["shared", "TK", "TKL", "Socialformer", "Choppy"]
    lines = [f"# Time of `{args.config}`, from its Snakemake benchmark files", "",
             f"{sum(jobs.values())} benchmark files under `{root}/` (config `{args.config}`). Minutes: the sum",
             "of the jobs' wall times, and of Snakemake's sampled CPU times (user + system; a lower bound).", "",
             "| paper | stage | jobs | wall min | CPU min (sampled) |", "|---|---|---:|---:|---:|"]
    for paper in order:
        keys = sorted(key for key in jobs if key[0] == paper)
        for key in keys:
            lines.append(f"| {paper} | {key[1]} | {jobs[key]} | {wall[key] / 60:.1f} | {cpu[key] / 60:.1f} |")
        if keys:
            lines.append(f"| **{paper}** | all | {sum(jobs[k] for k in keys)} | **{sum(wall[k] for k in keys) / 60:.1f}** "
                         f"| {sum(cpu[k] for k in keys) / 60:.1f} |")
    lines.append(f"| **study** | all | {sum(jobs.values())} | **{sum(wall.values()) / 60:.1f}** "
                 f"| {sum(cpu.values()) / 60:.1f} |")
    if args.log:
        logged = log_jobs(args.log)
        elapsed, idle, idle_cores = log_occupancy(logged, args.cores)
        path = critical_path(logged)
        lines += ["", f"The run's log (`{args.log.name}`): {elapsed / 60:.1f} minutes from the first job's start "
                  f"to the last job's end; fewer than {args.cores} jobs ran during {idle / 60:.1f} of them "
                  f"({idle_cores / 60:.1f} idle core-minutes).", "",
                  f"Critical path ({sum(job.seconds for job in path) / 60:.1f} minutes, {len(path)} jobs, each "
                  "reading an output of the one before):", "", "| job | min |", "|---|---:|"]
        lines += [f"| {job.name} | {job.seconds / 60:.1f} |" for job in path]
    if args.models:
        trained = trainings(args.models, root)
        lines += ["", f"Training: {sum(t.seconds for t in trained) / 60:.1f} minutes in {len(trained)} jobs, "
                  f"{sum(t.after_best for t in trained) / 60:.1f} of them after the best validation:", "",
                  "| training | min | steps | best step | min after it |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {t.name} | {t.seconds / 60:.1f} | {t.steps} | {t.best_step} | {t.after_best / 60:.1f} |"
                  for t in sorted(trained, key=lambda t: -t.after_best) if t.after_best > 0]
    runs = config.get("neural", {}).get("runs", {})
    switched_off = sorted(name for name in papers if runs.get(name, {}).get("evaluate") == [])
    missing = sorted(name for name in papers if name not in seen_runs and name not in switched_off)
    lines += ["", "Runs without any benchmark file (not run yet): " + (", ".join(missing) or "none") + ".",
              "Runs the config switches off (`evaluate: []`): " + (", ".join(switched_off) or "none") + ".",
              f"Left out: {len(stale)} files of runs the config no longer has" + (f" ({', '.join(stale)})." if stale else ".")]
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
