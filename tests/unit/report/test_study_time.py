"""rankstudy.report.study_time: the study's job-minutes from its benchmark files against its goal, and a Snakemake
log's elapsed time, idle cores and critical path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rankstudy.errors import StudyError
from rankstudy.report import study_time


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
    with pytest.raises(StudyError, match="no finished job found"):
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


CONFIG = {"neural": {"runs": {"p1": {}, "tkl-2k": {}, "off": {"evaluate": []}}, "table2_runs": ["p1", "off"],
                     "efficiency": {"models": {"tk": {"model": "tk"}}}},
          "tkl": {"table1": [{"run": "tkl-2k"}]}}
CONFIG["study_time"] = {"goal_job_minutes": 10, "reference_host": "host R",
                        "reference_settings": study_time.efficiency_fingerprint(CONFIG),
                        "reference": {"tk": {"docs_per_ms": 2.0, "train_steps_per_s": 4.0}}}


def benchmark(root, relative: str, seconds: float) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{seconds}\t0:00:01\t10\t{seconds / 2}\n")


@pytest.fixture
def benchmarks(tmp_path):
    root = tmp_path / "benchmarks"
    benchmark(root, "index/d.tsv", 60)  # shared
    benchmark(root, "train/d/tk.p1.s42.tsv", 240)  # TK
    benchmark(root, "train/d/tkl.tkl-2k.s42.tsv", 300)  # TKL
    benchmark(root, "train/d/tk.gone.s42.tsv", 999)  # a run the config no longer has: left out
    return root


def test_job_minutes_are_summed_per_paper_and_stage(benchmarks):
    sums = study_time.sum_benchmarks(benchmarks, CONFIG)
    assert sums.job_minutes == 10.0
    assert dict(sums.wall) == {("shared", "index"): 60, ("TK", "train"): 240, ("TKL", "train"): 300}
    assert sums.stale == ["train/d/tk.gone.s42.tsv"] and sums.runs == {"p1", "tkl-2k"}


def test_the_goal_is_judged_at_the_reference_hosts_speed(benchmarks, tmp_path):
    """A host at half the reference's speed takes twice the job-minutes: at the reference speed it is within."""
    efficiency = tmp_path / "efficiency.csv"
    efficiency.write_text("model,device,docs_per_ms,train_steps_per_s\ntk,cpu,1.0,2.0\ntk,cuda,50.0,90.0\n")
    assert study_time.host_speed(efficiency, CONFIG["study_time"]["reference"]) == (0.5, 2)
    report = study_time.study_time_report({**CONFIG, "study_time": {**CONFIG["study_time"], "goal_job_minutes": 6}},
                                          benchmarks, efficiency)
    assert "**10.0 job-minutes**" in report and "0.50x the reference host's speed (host R" in report
    assert "**5.0 job-minutes at the reference speed**" in report and "**within** (-1.0)" in report
    assert "| **study** | all | 3 | **10.0** | 5.0 |" in report
    assert "Runs without any benchmark file (not run yet): none." in report
    assert "switches off (`evaluate: []`): off." in report


def test_speeds_of_other_throughput_settings_are_not_compared(benchmarks, tmp_path):
    """The tiny test config measures tiny models: their speed says nothing of the host against the reference's."""
    efficiency = tmp_path / "efficiency.csv"
    efficiency.write_text("model,device,docs_per_ms,train_steps_per_s\ntk,cpu,100.0,200.0\n")
    tiny = {**CONFIG, "neural": {**CONFIG["neural"], "efficiency": {"models": {"tk": {"model": "tk", "layers": 1}}}}}
    report = study_time.study_time_report(tiny, benchmarks, efficiency)
    assert "No speed comparison" in report and "Goal: 10 job-minutes: **within** (+0.0)" in report


def test_the_reference_keys_come_from_a_runs_throughput(tmp_path):
    efficiency = tmp_path / "efficiency.csv"
    efficiency.write_text("model,device,docs_per_ms,train_steps_per_s\ntk,cpu,1.5,2.25\ntk,cuda,9.0,9.0\n")
    assert study_time.reference_entry(CONFIG, efficiency, "host R") == {
        "reference_host": "host R", "reference_settings": CONFIG["study_time"]["reference_settings"],
        "reference": {"tk": {"docs_per_ms": 1.5, "train_steps_per_s": 2.25}}}


def test_without_a_throughput_benchmark_the_goal_is_judged_on_this_host(benchmarks, tmp_path):
    report = study_time.study_time_report({**CONFIG, "study_time": {"goal_job_minutes": 9}}, benchmarks,
                                          tmp_path / "missing.csv")
    assert "at the reference speed" not in report and "Goal: 9 job-minutes: **over** (+1.0)" in report


def test_a_malformed_benchmark_file_is_named(benchmarks):
    (benchmarks / "index" / "d.tsv").write_text("s\tcpu_time\nabc\t1\n")
    with pytest.raises(StudyError, match=r"index/d.tsv: expected a Snakemake benchmark file"):
        study_time.sum_benchmarks(benchmarks, CONFIG)


def test_the_command_writes_the_report(benchmarks, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "logs" / "study_time.md"
    result = subprocess.run([sys.executable, "-m", "rankstudy", "study-time", "--config-json", str(config),
                             "--benchmarks", str(benchmarks), "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert out.read_text() == result.stdout and "Goal: 10 job-minutes: **within** (+0.0)" in result.stdout
