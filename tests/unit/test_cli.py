"""`python -m rankstudy`: bad input exits non-zero with one clear line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rankstudy", *args], capture_output=True, text=True, cwd=cwd)


def test_malformed_collection_fails_before_indexing(tmp_path):
    (tmp_path / "c.tsv").write_text("d1\tgood\nd2 missing tab\n")
    result = cli("index", "--collection", str(tmp_path / "c.tsv"), "--out", str(tmp_path / "idx"))
    assert result.returncode == 2
    assert f"{tmp_path / 'c.tsv'}:2: expected 2 tab-separated fields" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.tsv"]


def test_bad_dataset_config(tmp_path):
    section = {"source": "synthetic", "synthetic": {"flavour": "passage", "train_querys": 5}}
    result = cli("dataset", "--name", "x", "--config", json.dumps(section), "--seed", "1", "--out", str(tmp_path / "x"))
    assert result.returncode == 2
    assert "datasets.x.synthetic: unknown key(s) train_querys" in result.stderr
    assert not (tmp_path / "x").exists()


def test_malformed_run_in_evaluation(tmp_path):
    (tmp_path / "q.txt").write_text("1 0 d1 1\n")
    (tmp_path / "r.run").write_text("1 Q0 d1 1 1.0 x\n1 Q0 d2 2 oops x\n")
    result = cli("evaluate", "--run", str(tmp_path / "r.run"), "--qrels", str(tmp_path / "q.txt"),
                 "--out", str(tmp_path / "m.csv"), "--measures", "AP", "--dataset", "d", "--system", "s", "--split", "test")
    assert result.returncode == 2
    assert f"{tmp_path / 'r.run'}:2: expected a numeric score in field 5; got 'oops'" in result.stderr
    assert not (tmp_path / "m.csv").exists()


def test_synthetic_dataset_command_writes_the_contract(tmp_path):
    settings = {"train_queries": 5, "dev_queries": 2, "test_queries": 2, "concepts": 50, "filler_vocabulary": 100,
                "context_vocabulary": 50, "background_documents": 5}
    result = cli("dataset", "--name", "tiny", "--config", json.dumps({"source": "synthetic", "synthetic": settings}),
                 "--seed", "3", "--out", str(tmp_path / "tiny"))
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in (tmp_path / "tiny").iterdir())
    assert names == ["collection.tsv", "qrels.dev.txt", "qrels.test.txt", "qrels.train.txt",
                     "queries.dev.tsv", "queries.test.tsv", "queries.train.tsv", "truth.json"]


def test_an_empty_run_is_an_error_naming_the_file_in_every_command(tmp_path):
    (tmp_path / "q.txt").write_text("1 0 d1 1\n")
    (tmp_path / "empty.run").write_text("")
    run, qrels = str(tmp_path / "empty.run"), str(tmp_path / "q.txt")
    commands = {
        "examples": ["--qrels", qrels, "--candidates", run, "--out", str(tmp_path / "t.tsv"), "--kind", "triples",
                     "--negatives-depth", "10", "--per-query", "2", "--seed", "1"],
        "choppy-study": ["--run", run, "--qrels", qrels, "--config", "{\"n\": 10}", "--seed", "1",
                         "--out", str(tmp_path / "tr")],
        "evaluate": ["--run", run, "--qrels", qrels, "--out", str(tmp_path / "m.csv"), "--measures", "AP",
                     "--dataset", "d", "--system", "s", "--split", "test"],
        "tune-depth": ["--first-stage", run, "--neural", run, "--qrels", qrels, "--measure", "AP",
                       "--out-json", str(tmp_path / "d.json")],
        "ensemble": ["--runs", run, "--out", str(tmp_path / "e.run"), "--tag", "x"],
    }
    for command, args in commands.items():
        result = cli(command, *args)
        assert result.returncode == 2, (command, result.stderr[-500:])
        assert f"{run}:1: expected at least one ranked document" in result.stderr, (command, result.stderr[-500:])
        assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.run", "q.txt"]


def test_examples_without_a_usable_query_is_an_error(tmp_path):
    (tmp_path / "q.txt").write_text("1 0 d1 1\n")
    (tmp_path / "c.run").write_text("1 Q0 d1 1 2.0 x\n")  # the positive only: no negative
    result = cli("examples", "--qrels", str(tmp_path / "q.txt"), "--candidates", str(tmp_path / "c.run"),
                 "--out", str(tmp_path / "t.tsv"), "--kind", "triples", "--negatives-depth", "10", "--per-query", "2",
                 "--seed", "1")
    assert result.returncode == 2 and "no training example" in result.stderr and str(tmp_path / "c.run") in result.stderr
    assert not (tmp_path / "t.tsv").exists()
