"""bench/study_time.py reads a Snakemake log: elapsed time, idle cores and the critical path of a run."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from helpers import REPO

SPEC = importlib.util.spec_from_file_location("study_time", REPO / "bench" / "study_time.py")
study_time = sys.modules["study_time"] = importlib.util.module_from_spec(SPEC)  # dataclasses look it up
SPEC.loader.exec_module(study_time)


def job(rule: str, jobid: int, at: str, outputs: str, inputs: str = "", wildcards: str = "") -> str:
    lines = [f"[Tue Dec  1 10:{at} 2026]", f"localrule {rule}:"]
    lines += [f"    input: {inputs}"] if inputs else []
    lines += [f"    output: {outputs}", f"    log: logs/{rule}.log", f"    jobid: {jobid}"]
    lines += [f"    wildcards: {wildcards}"] if wildcards else []
    return "\n".join(lines + [f"Shell command: python -m rankstudy {rule}"])


def done(jobid: int, at: str) -> str:
    return f"[Tue Dec  1 10:{at} 2026]\nFinished jobid: {jobid} (Rule: x)\n1 of 4 steps (25%) done"


@pytest.fixture
def log(tmp_path):
    """Two cores: a (0-10 s) and c (0-30 s) side by side; b reads a's directory (10-70 s); d reads b and c (70-80 s)."""
    path = tmp_path / "run.snakemake.log"
    path.write_text("\n".join([
        "Building DAG of jobs...", "Execute 2 jobs...",
        job("a", 1, "00:00", "index/x"), job("c", 3, "00:00", "c.txt"),
        done(1, "00:10"),
        job("b", 2, "00:10", "b.txt", inputs="index/x/part", wildcards="run=tk"),
        done(3, "00:30"), done(2, "01:10"),
        job("d", 4, "01:10", "d.txt", inputs="b.txt, c.txt"), done(4, "01:20"),
    ]) + "\n")
    return path


def test_idle_cores_and_the_critical_path_of_a_log(log):
    jobs = study_time.log_jobs(log)
    assert [(job.name, job.seconds) for job in jobs] == [("a", 10), ("c", 30), ("b run=tk", 60), ("d", 10)]
    elapsed, idle, idle_cores = study_time.log_occupancy(jobs, cores=2)
    assert (elapsed, idle, idle_cores) == (80, 50, 50)  # one core idle from 30 s on
    assert [job.name for job in study_time.critical_path(jobs)] == ["a", "b run=tk", "d"]


def test_a_log_without_finished_jobs_is_refused(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("Building DAG of jobs...\n")
    with pytest.raises(SystemExit, match="no finished job found"):
        study_time.log_jobs(empty)


def test_training_time_after_the_best_validation(tmp_path):
    """A training's time after its best validation: the first of equal best metrics, never the untrained step 0."""
    def training(run: str, seconds: float, log: str) -> None:
        folder = tmp_path / "models" / "d" / "tk" / run / "seed42"
        folder.mkdir(parents=True)
        (folder / "log.csv").write_text("step,loss,metric,best\n" + log)
        bench = tmp_path / "benchmarks" / "train" / "d" / f"tk.{run}.s42.tsv"
        bench.parent.mkdir(parents=True, exist_ok=True)
        bench.write_text(f"s\th:m:s\tcpu_time\n{seconds}\t0:01:40\t90\n")

    training("peaks", 100.0, "0,nan,0.9,nan\n250,0.5,0.3,0.3\n500,0.4,0.4,0.4\n750,0.3,0.4,0.4\n1000,0.2,0.2,0.4\n")
    training("last", 60.0, "0,nan,0.1,nan\n250,0.5,0.2,0.2\n500,0.4,0.3,0.3\n")
    training("unbenchmarked", 10.0, "0,nan,0.1,nan\n250,0.5,0.2,0.2\n")
    (tmp_path / "benchmarks" / "train" / "d" / "tk.unbenchmarked.s42.tsv").unlink()
    found = {t.name: t for t in study_time.trainings(tmp_path / "models", tmp_path / "benchmarks")}
    assert sorted(found) == ["d/last/seed42", "d/peaks/seed42"]
    assert (found["d/peaks/seed42"].steps, found["d/peaks/seed42"].best_step) == (1000, 500)
    assert found["d/peaks/seed42"].after_best == 50.0
    assert (found["d/last/seed42"].best_step, found["d/last/seed42"].after_best) == (500, 0.0)
