"""A study killed at any moment resumes to the same results (issue 43).

Part of the tiny study (TARGETS) runs in a fresh copy while its whole process tree is SIGKILLed, as a
power cut would stop it: once in the middle of the index job, the training job and the report
job, and at seeded random moments. After each kill `snakemake --unlock` (the lock outlives its process) and
`snakemake --rerun-incomplete` run again until it completes. The files then equal the uninterrupted tiny
study's byte for byte (test_workflow.DETERMINISTIC: timings are the only files left out), and
no temporary is left. A second `snakemake` started while one runs is refused with Snakemake's lock message.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from test_workflow import BIN, ENV, assert_same_deterministic_files, snakemake, workflow_copy

# A slice of the tiny study through every kind of step: datasets, a Lucene index, BM25 and QL, word vectors,
# examples, a KNRM trained and re-ranking, evaluation, a table (54 jobs)
TARGETS = ["results/tables/first_stage.csv", "results/metrics/synthetic-passage/knrm.knrm.s7.test.csv"]
SEED = 43
RANDOM_KILLS = 3  # besides the three in named jobs
# a job is "in the middle" once its log exists and its output does not
JOBS = {"index": ("logs/index/synthetic-passage.log", "index/synthetic-passage"),
        "train": ("logs/train/synthetic-passage/knrm.knrm.s7.log", "models/synthetic-passage/knrm/knrm/seed7/model.pt"),
        "report": ("logs/report/first_stage_table.log", "results/tables/first_stage.csv")}


def start(work: Path, log: Path, *options: str) -> subprocess.Popen:
    """Snakemake in the background, its output to ``log`` (a pipe nobody reads would fill and stall it)."""
    with open(log, "w") as out:
        return subprocess.Popen([str(BIN / "snakemake"), *TARGETS, "--cores", "2", "--configfile", "tiny.yaml",
                                 "--rerun-incomplete", *options], cwd=work, env=ENV, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def kill_everything(work: Path, process: subprocess.Popen) -> None:
    """SIGKILL Snakemake and every process of the study (its jobs, Java), as a power cut would."""
    tree = [process.pid]
    try:
        tree += [child.pid for child in psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        pass
    for proc in psutil.process_iter(["pid", "cwd"]):
        if proc.info["cwd"] and Path(proc.info["cwd"]).is_relative_to(work):
            tree.append(proc.info["pid"])
    for pid in set(tree):
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass
    process.wait(timeout=60)
    # what a user does after a crash: Snakemake's lock outlives the process that held it
    unlock = snakemake(work, *TARGETS, "--unlock", "--configfile", "tiny.yaml")
    assert unlock.returncode == 0, unlock.stderr[-2000:]


def in_the_middle(work: Path, job: str) -> bool:
    log, output = JOBS[job]
    return (work / log).exists() and not (work / output).exists()


@pytest.mark.slow
def test_a_study_killed_anywhere_resumes_to_the_same_results(tiny_study, tmp_path):
    work = workflow_copy(tmp_path)
    rng = random.Random(SEED)
    pending_jobs = list(JOBS)
    random_moments = sorted(rng.uniform(2, 60) for _ in range(RANDOM_KILLS))
    kills = []
    for attempt in range(20):
        log = tmp_path / f"snakemake.{attempt}.log"
        process, started = start(work, log), time.monotonic()
        while process.poll() is None:
            time.sleep(0.2)
            moment = next((job for job in pending_jobs if in_the_middle(work, job)), None)
            if moment is None and random_moments and time.monotonic() - started > random_moments[0]:
                moment = f"random at {random_moments.pop(0):.1f} s"
            if moment is not None:
                time.sleep(rng.uniform(0, 0.5) if moment in JOBS else 0)
                kill_everything(work, process)
                kills.append(moment)
                if moment in pending_jobs:
                    pending_jobs.remove(moment)
                break
        else:
            assert process.returncode == 0, log.read_text()[-3000:]
            break
    assert not pending_jobs, f"the study finished before a kill in the middle of: {pending_jobs} (kills: {kills})"
    assert len(kills) >= 5, kills
    again = snakemake(work, *TARGETS, "-n", "--configfile", "tiny.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-3000:]
    assert assert_same_deterministic_files(tiny_study, work, kills) > 20
    assert not list(work.rglob("*.tmp*")), "a temporary file of a killed job was left behind"
    # last, and apart from the kills: a second snakemake blocks for seconds, in which a short job could start and
    # end unseen (it did: the index job was missed). The first is paused once it holds its lock files (its 40 s of
    # work ended before a loaded machine's second snakemake got to its lock check), the second forces its jobs
    # (with nothing to do it would exit before locking).
    process = start(work, tmp_path / "snakemake.lock.log", "--forceall")
    locks, deadline = work / ".snakemake" / "locks", time.monotonic() + 300
    while not any(locks.glob("*.lock")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(locks.glob("*.lock")), "the first snakemake never locked the working directory"
    os.killpg(process.pid, signal.SIGSTOP)
    second = snakemake(work, *TARGETS, "--forceall", "--cores", "1", "--configfile", "tiny.yaml")
    kill_everything(work, process)
    assert second.returncode != 0 and "cannot be locked" in second.stdout + second.stderr
