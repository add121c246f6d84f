"""A model directory across reruns (issue 16): inputs' fingerprint, pickle-free and byte-reproducible
``.pt`` files, stale temporaries, and a training process killed during a checkpoint write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rankstudy import formats
from rankstudy.cpu_isa import pin_vector_isa
from rankstudy.errors import StudyError
from rankstudy.tensorfile import load_tensors, save_tensors
from rankstudy.train.examples import write_triples

from helpers import TOPICS, TRAINING, train_args, train_here, write_training_inputs

@pytest.fixture()
def inputs(tmp_path):
    return write_training_inputs(tmp_path)


def test_equal_tensors_give_equal_bytes(tmp_path):
    state = {"w": torch.arange(6.0).view(2, 3), "step": 3}
    save_tensors(state, tmp_path / "a.pt")
    save_tensors(state, tmp_path / "sub" / "model.pt")  # another name and folder: the same bytes
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "sub" / "model.pt").read_bytes()
    assert torch.equal(load_tensors(tmp_path / "a.pt")["w"], state["w"])


@pytest.mark.parametrize("damage", ["truncated", "empty", "text"])
def test_a_damaged_tensor_file_is_a_clear_error_naming_it(tmp_path, damage):
    """A model file cut short (a killed copy), empty, or of another kind: the error names the file."""
    save_tensors({"w": torch.zeros(10_000), "v": torch.ones(10)}, tmp_path / "model.pt")
    whole = (tmp_path / "model.pt").read_bytes()
    damaged = {"truncated": whole[:5000], "empty": b"", "text": b"qid\tdocid\n"}[damage]
    (tmp_path / "model.pt").write_bytes(damaged)
    with pytest.raises(StudyError, match=f"{tmp_path / 'model.pt'}: not a readable .pt file"):
        load_tensors(tmp_path / "model.pt")
    with pytest.raises(StudyError, match="nowhere.pt: no such file"):
        load_tensors(tmp_path / "nowhere.pt")


def test_two_trainings_write_identical_files(inputs):
    train_here(inputs, inputs / "a")
    train_here(inputs, inputs / "b")
    for name in ("model.pt", "best.pt", "checkpoint.pt", "log.csv"):
        assert (inputs / "a" / name).read_bytes() == (inputs / "b" / name).read_bytes(), name


class Planted:
    """Pickled, it runs ``touch marker`` when unpickled (as a malicious checkpoint would)."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_is_refused(inputs, tmp_path):
    out, marker = inputs / "model", tmp_path / "PWNED"
    train_here(inputs, out)  # config.json matches the next run: the checkpoint would be resumed
    torch.save({"model": Planted(marker)}, out / "checkpoint.pt")
    with pytest.raises(StudyError, match=r"checkpoint.pt: refused to load"):
        from rankstudy.experiment import train_model

        train_model("knrm", {}, TRAINING, inputs / "embeddings.npy", inputs / "triples.tsv", inputs / "queries",
                    inputs / "docs", inputs / "queries", inputs / "dev.run", inputs / "qrels.txt", out, seed=3)
    assert not marker.exists()
    save_tensors({"w": torch.zeros(1)}, out / "model.pt")
    torch.save(Planted(marker), out / "model.pt")  # load_trained (rerank, export) refuses it too
    with pytest.raises(StudyError, match="refused to load"):
        load_tensors(out / "model.pt")
    assert not marker.exists()


def test_a_rerun_after_an_input_change_trains_on_the_new_input(inputs):
    """Snakemake deletes model.pt and log.csv before it reruns train; the finished checkpoint of the
    old examples must not be 'resumed' (it was, and log.csv never came back)."""
    out = inputs / "model"
    train_here(inputs, out)
    first = (out / "model.pt").read_bytes()
    n = len(TOPICS)  # as many triples, other negatives: only the contents differ
    write_triples(inputs / "other.tsv", [(f"q{i}", f"d{i}", f"d{(i + k) % n}") for i in range(n) for k in (3, 4)])
    for name in ("model.pt", "log.csv"):
        (out / name).unlink()
    train_here(inputs, out, examples="other.tsv")
    assert (out / "log.csv").is_file() and (out / "model.pt").read_bytes() != first
    train_here(inputs, inputs / "fresh", examples="other.tsv")
    assert (out / "model.pt").read_bytes() == (inputs / "fresh" / "model.pt").read_bytes()
    assert (out / "log.csv").read_bytes() == (inputs / "fresh" / "log.csv").read_bytes()
    recorded = json.loads((out / "config.json").read_text())["inputs"]
    assert set(recorded) == {"embeddings", "examples", "train_queries", "documents", "dev_queries", "dev_run",
                             "dev_qrels"}
    # same inputs, outputs deleted (e.g. --forcerun): the finished run gives them back unchanged
    again = (out / "model.pt").read_bytes()
    for name in ("model.pt", "log.csv"):
        (out / name).unlink()
    train_here(inputs, out, examples="other.tsv")
    assert (out / "model.pt").read_bytes() == again and (out / "log.csv").is_file()


KILLER = """
import io, sys, time
from pathlib import Path
import torch
from rankstudy.atomic import atomic_open
from rankstudy.cli import main
import rankstudy.train.loop as loop

marker, calls = Path(sys.argv[1]), []

def half_written(obj, path):  # the second checkpoint: write half of it, then wait to be killed
    calls.append(Path(path).name)
    if calls.count("checkpoint.pt") == 2 and Path(path).name == "checkpoint.pt":
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        with atomic_open(path, "wb") as out:
            out.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            out.flush()
            marker.touch()
            time.sleep(600)
    return original(obj, path)

original, loop.save_tensors = loop.save_tensors, half_written
sys.exit(main(sys.argv[2:]))
"""


def test_sigkill_during_a_checkpoint_write_then_rerun_equals_an_uninterrupted_run(inputs, tmp_path):
    # all three trainings in processes with the environment of the study's jobs (``python -m rankstudy`` pins the
    # vector instruction set; the killed process gets the same pins): the test process's own kernels may round
    # the logged loss otherwise
    env = dict(os.environ)
    pin_vector_isa(env)
    full = subprocess.run([sys.executable, "-m", "rankstudy", *train_args(inputs, inputs / "full")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert full.returncode == 0, full.stderr[-2000:]
    out, marker = inputs / "killed", tmp_path / "writing"
    process = subprocess.Popen([sys.executable, "-c", KILLER, str(marker), *train_args(inputs, out)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert process.poll() is None, process.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the training process never reached its second checkpoint"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    stale = list(out.glob(".*.tmp"))
    assert [p.name.split(".tmp")[0].split(".")[1] for p in stale] == ["checkpoint"]
    assert not (out / "model.pt").exists()
    rerun = subprocess.run([sys.executable, "-m", "rankstudy", *train_args(inputs, out)], env=env,
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming" in rerun.stderr and "removed" in rerun.stderr
    assert not list(out.glob(".*.tmp"))
    for name in ("model.pt", "log.csv"):
        assert (out / name).read_bytes() == (inputs / "full" / name).read_bytes(), name


def test_scoring_lengths_come_from_the_model_directory(tmp_path):
    """rerank, regions and tk-view read the lengths a model trained at from its config.json (no flags)."""
    from rankstudy.experiment import InputSpec, read_input_spec

    (tmp_path / "config.json").write_text(json.dumps({"train": {"max_query_length": 12, "max_doc_length": 2000}}))
    assert read_input_spec(tmp_path) == InputSpec(max_query_length=12, max_doc_length=2000)
    (tmp_path / "config.json").write_text(json.dumps({"train": {"max_query_length": 12}}))
    with pytest.raises(StudyError, match=r"config.json: expected train.max_query_length and train.max_doc_length"):
        read_input_spec(tmp_path)
    with pytest.raises(StudyError, match="no config.json; train the model first"):
        read_input_spec(tmp_path / "absent")


@pytest.mark.parametrize("teacher, message", [
    ({"model": "no_such_model"}, "unknown teacher model 'no_such_model'"),
    ({"model": "bi_encoder", "encoder": "minilm"}, "queries: not a WordPiece token store"),
])
def test_a_teacher_that_cannot_read_the_models_stores_fails_before_training(inputs, teacher, message):
    """Loss margin_mse: the teacher scores the model's own token ids, so a teacher of another tokenizer (a
    WordPiece encoder over the study vocabulary's word ids) is an error naming the store, before any step."""
    from rankstudy.experiment import train_model

    training = {**TRAINING, "loss": "margin_mse", "teacher": teacher}
    with pytest.raises(StudyError, match=message):
        train_model("knrm", {}, training, inputs / "embeddings.npy", inputs / "triples.tsv", inputs / "queries",
                    inputs / "docs", inputs / "queries", inputs / "dev.run", inputs / "qrels.txt", inputs / "out",
                    seed=3)
    assert not (inputs / "out").exists()
