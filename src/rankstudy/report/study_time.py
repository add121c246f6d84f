"""How long a study took, in job-minutes: the sum of the Snakemake ``benchmark:`` file of every job.

Every rule writes ``benchmarks/.../*.tsv`` (wall seconds ``s``, ``cpu_time``). ``study_time_report`` sums them
per paper and stage and sets the sum beside the config's goal (``study_time.goal_job_minutes``), so the study's
time is measured job by job rather than guessed. The workflow's ``onsuccess`` handler runs it at the end of every
study (``python -m rankstudy study-time``; logs/study_time.md):

    python -m rankstudy study-time --config-json JSON --benchmarks benchmarks [--efficiency results/efficiency.csv]
                                   [--log LOG] [--models models] [--out FILE]

Job-minutes do not depend on the cores or on how Snakemake packed the jobs, but they do on the host's speed; so
the report also reads the run's own throughput benchmark (``results/efficiency.csv``, measured during the study
beside its other jobs) against the speeds of the host the goal was set on (``study_time.reference``): their ratio
says how much of a difference from the goal is the host's.

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

import csv
import hashlib
import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rankstudy.errors import StudyError
from rankstudy.truncation.methods import CHOPPY as CHOPPY_PAPER  # the paper is named after its method

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
        return CHOPPY_PAPER, stage
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
        raise StudyError(f"{log}: no finished job found (expected Snakemake's 'jobid:' and 'Finished jobid:' lines)")
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


PAPERS = ["shared", "TK", "TKL", "Socialformer", CHOPPY_PAPER]


@dataclass
class BenchmarkSums:
    wall: dict[tuple[str, str], float]  # (paper, stage) -> wall seconds
    cpu: dict[tuple[str, str], float]  # sampled CPU seconds (a lower bound)
    jobs: dict[tuple[str, str], int]
    runs: set[str]  # the runs with a benchmark file
    stale: list[str]  # files of runs the config no longer has

    @property
    def job_minutes(self) -> float:
        return sum(self.wall.values()) / 60


def sum_benchmarks(root: Path, config: dict) -> BenchmarkSums:
    """Every benchmark file under ``root``, summed per (paper, stage) of ``config``'s runs."""
    papers, socialformer_texts = run_papers(config), study_encoder_texts(config)
    sums = BenchmarkSums(defaultdict(float), defaultdict(float), defaultdict(int), set(), [])
    for path in sorted(root.rglob("*.tsv")):
        relative = path.relative_to(root)
        with path.open() as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if not rows:
            continue
        try:
            wall, cpu = float(rows[-1]["s"]), float(rows[-1].get("cpu_time") or 0.0)
        except (KeyError, ValueError):
            raise StudyError(f"{path}: expected a Snakemake benchmark file (a header with 's' and 'cpu_time', "
                             f"then numbers); got {rows[-1]}") from None
        key = job_paper(relative, papers, socialformer_texts)
        if key is None:
            sums.stale.append(str(relative))
            continue
        sums.wall[key] += wall
        sums.cpu[key] += cpu
        sums.jobs[key] += 1
        parts = relative.name.split(".")
        if len(parts) >= 4:
            sums.runs.add(parts[1])
    return sums


MEASURES = ("docs_per_ms", "train_steps_per_s")


def efficiency_fingerprint(config: dict) -> str:
    """The throughput benchmark's settings (``neural.efficiency``) as a short hash: speeds compare only between runs
    of the same settings (the tiny test config's models are not the default's)."""
    settings = json.dumps(config.get("neural", {}).get("efficiency", {}), sort_keys=True)
    return hashlib.sha256(settings.encode()).hexdigest()[:12]


def reference_entry(config: dict, efficiency: Path, host: str) -> dict:
    """The ``study_time`` keys that make this run's throughput the reference: paste them into the config."""
    with efficiency.open() as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("device", "cpu") == "cpu"]
    return {"reference_host": host, "reference_settings": efficiency_fingerprint(config),
            "reference": {row["model"]: {m: round(float(row[m]), 6) for m in MEASURES} for row in rows}}


def host_speed(efficiency: Path, reference: dict[str, dict[str, float]]) -> tuple[float, int] | None:
    """(this host's speed ÷ the reference host's, the measurements compared): the geometric mean, over the models
    and measures both have, of ``results/efficiency.csv``'s CPU ``docs/ms`` and ``train steps/s`` against
    ``reference`` (model -> measure -> value). None without a file or a model in common."""
    if not efficiency.is_file() or not reference:
        return None
    with efficiency.open() as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("device", "cpu") == "cpu"]
    ratios = []
    for row in rows:
        for measure, value in reference.get(row.get("model", ""), {}).items():
            measured = row.get(measure)
            if measured not in (None, "") and float(measured) > 0 and value > 0:
                ratios.append(float(measured) / value)
    if not ratios:
        return None
    return math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios)), len(ratios)


def goal_lines(minutes: float, settings: dict, speed: tuple[float, int] | None) -> list[str]:
    """The verdict against ``study_time.goal_job_minutes``: on this host, and at the reference host's speed."""
    goal = settings.get("goal_job_minutes")
    lines = [f"**{minutes:.1f} job-minutes** (the sum of the jobs' wall times: what a run on one core would take; "
             "N cores take about 1/N of it)."]
    if speed:
        factor, compared = speed
        lines.append(f"This host ran the throughput benchmark at {factor:.2f}x the reference host's speed "
                     f"({settings.get('reference_host') or 'study_time.reference'}; geometric mean of {compared} "
                     f"measurements): **{minutes * factor:.1f} job-minutes at the reference speed**.")
    if goal:
        at_reference = minutes * speed[0] if speed else minutes
        verdict = "within" if at_reference <= goal else "over"
        lines.append(f"Goal: {goal:g} job-minutes{' at the reference speed' if speed else ''}: **{verdict}** "
                     f"({at_reference - goal:+.1f}).")
    return lines


def study_time_report(config: dict, benchmarks: Path, efficiency: Path | None = None, log: Path | None = None,
                      cores: int = 2, models: Path | None = None) -> str:
    """The study's job-minutes per paper and stage, against its goal; ``log``: a Snakemake log's elapsed time, idle
    cores and critical path; ``models``: the trainings' time after their best validation."""
    sums = sum_benchmarks(benchmarks, config)
    settings = config.get("study_time") or {}
    same_settings = settings.get("reference_settings") == efficiency_fingerprint(config)
    speed = host_speed(efficiency, settings.get("reference") or {}) if efficiency and same_settings else None
    lines = ["# The study's time, from its Snakemake benchmark files", "",
             *goal_lines(sums.job_minutes, settings, speed),
             *(["(No speed comparison: this run's throughput settings, neural.efficiency, are not those the reference "
                "speeds were measured with.)"] if settings.get("reference") and not same_settings else []), "",
             f"{sum(sums.jobs.values())} benchmark files under `{benchmarks}/`. Minutes: the sum of the jobs' wall "
             "times, and of Snakemake's sampled CPU times (user + system; a lower bound).", "",
             "| paper | stage | jobs | wall min | CPU min (sampled) |", "|---|---|---:|---:|---:|"]
    for paper in PAPERS:
        keys = sorted(key for key in sums.jobs if key[0] == paper)
        for key in keys:
            lines.append(f"| {paper} | {key[1]} | {sums.jobs[key]} | {sums.wall[key] / 60:.1f} | {sums.cpu[key] / 60:.1f} |")
        if keys:
            lines.append(f"| **{paper}** | all | {sum(sums.jobs[k] for k in keys)} | "
                         f"**{sum(sums.wall[k] for k in keys) / 60:.1f}** | {sum(sums.cpu[k] for k in keys) / 60:.1f} |")
    lines.append(f"| **study** | all | {sum(sums.jobs.values())} | **{sums.job_minutes:.1f}** "
                 f"| {sum(sums.cpu.values()) / 60:.1f} |")
    if log:
        logged = log_jobs(log)
        elapsed, idle, idle_cores = log_occupancy(logged, cores)
        path = critical_path(logged)
        lines += ["", f"The run's log (`{log.name}`): {elapsed / 60:.1f} minutes from the first job's start "
                  f"to the last job's end; fewer than {cores} jobs ran during {idle / 60:.1f} of them "
                  f"({idle_cores / 60:.1f} idle core-minutes).", "",
                  f"Critical path ({sum(job.seconds for job in path) / 60:.1f} minutes, {len(path)} jobs, each "
                  "reading an output of the one before):", "", "| job | min |", "|---|---:|"]
        lines += [f"| {job.name} | {job.seconds / 60:.1f} |" for job in path]
    if models:
        trained = trainings(models, benchmarks)
        lines += ["", f"Training: {sum(t.seconds for t in trained) / 60:.1f} minutes in {len(trained)} jobs, "
                  f"{sum(t.after_best for t in trained) / 60:.1f} of them after the best validation:", "",
                  "| training | min | steps | best step | min after it |", "|---|---:|---:|---:|---:|"]
        lines += [f"| {t.name} | {t.seconds / 60:.1f} | {t.steps} | {t.best_step} | {t.after_best / 60:.1f} |"
                  for t in sorted(trained, key=lambda t: -t.after_best) if t.after_best > 0]
    papers = run_papers(config)
    runs = config.get("neural", {}).get("runs", {})
    switched_off = sorted(name for name in papers if runs.get(name, {}).get("evaluate") == [])
    missing = sorted(name for name in papers if name not in sums.runs and name not in switched_off)
    lines += ["", "Runs without any benchmark file (not run yet): " + (", ".join(missing) or "none") + ".",
              "Runs the config switches off (`evaluate: []`): " + (", ".join(switched_off) or "none") + ".",
              f"Left out: {len(sums.stale)} files of runs the config no longer has"
              + (f" ({', '.join(sums.stale)})." if sums.stale else ".")]
    return "\n".join(lines) + "\n"
