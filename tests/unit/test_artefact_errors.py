"""Every artefact a command reads, damaged (issue 43): cut short, empty, or of another kind, it gives one line
naming the file and what was expected, exit status 2, and nothing written. (The Lucene index: tests/learning/
test_bm25_baseline.py; the dense index: tests/unit/test_dense.py; a study encoder: tests/unit/nn/
test_study_encoder.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rankstudy.cli import main
from rankstudy.tensorfile import save_tensors

from helpers import train_args, train_here, write_training_inputs


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A trained KNRM's directory beside the files it was trained from."""
    data = write_training_inputs(tmp_path_factory.mktemp("trained"))
    train_here(data, data / "model")
    return data


def damage(path: Path, how: str) -> None:
    whole = path.read_bytes()
    path.write_bytes({"truncated": whole[:len(whole) // 2], "empty": b"", "other kind": b"qid\tdocid\n1\t2\n"}[how])


def rerank_args(data: Path, out: Path) -> list[str]:
    return ["rerank", "--model-dir", str(data / "model"), "--embeddings", str(data / "embeddings.npy"),
            "--queries", str(data / "queries"), "--documents", str(data / "docs"), "--candidates",
            str(data / "dev.run"), "--out", str(out), "--tag", "knrm", "--depth", "6", "--device", "cpu"]


def assert_one_line_error(capsys, code: int, names: Path, expected: str) -> None:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert str(names) in errors[0] and expected in errors[0], errors[0]


@pytest.fixture()
def data(trained, tmp_path):
    """A fresh copy of the trained directory and its inputs, to damage."""
    return Path(shutil.copytree(trained, tmp_path / "data"))


@pytest.mark.parametrize("how", ["truncated", "empty", "other kind"])
@pytest.mark.parametrize("artefact, expected", [
    ("model/model.pt", "not a readable .pt file"),
    ("model/config.json", "expected the JSON object that rankstudy train writes"),
    ("embeddings.npy", "cannot read embeddings"),
    ("docs/tokens.npy", "corrupt token store"),
    ("docs/offsets.npy", "corrupt token store"),
    ("queries/ids.txt", "corrupt token store"),
])
def test_rerank_with_a_damaged_artefact(data, capsys, artefact, expected, how):
    damage(data / artefact, how)
    out = data / "out.run"
    assert_one_line_error(capsys, main(rerank_args(data, out)), data / artefact.split("/")[0]
                          if artefact.startswith(("docs", "queries")) else data / artefact, expected)
    assert not out.exists()


def test_rerank_with_another_models_weights(data, capsys):
    save_tensors({"encoder.weight": __import__("torch").zeros(3, 3)}, data / "model" / "model.pt")
    out = data / "out.run"
    assert_one_line_error(capsys, main(rerank_args(data, out)), data / "model" / "model.pt",
                          "expected the weights of the knrm that config.json describes")
    assert not out.exists()


@pytest.mark.parametrize("how", ["truncated", "empty", "other kind"])
def test_a_damaged_vocabulary(data, capsys, how):
    damage(data / "vocab" / "vocab.tsv", how)
    out = data / "store"
    code = main(["store", "--input", str(data / "docs.tsv"), "--kind", "collection", "--vocab", str(data / "vocab"),
                 "--out", str(out)])
    assert_one_line_error(capsys, code, data / "vocab", "vocab")
    assert not out.exists()


def test_a_vocabulary_cut_at_a_line_end_is_caught_by_its_term_count(data, capsys):
    lines = (data / "vocab" / "vocab.tsv").read_text().splitlines(keepends=True)
    (data / "vocab" / "vocab.tsv").write_text("".join(lines[:-2]))
    code = main(["store", "--input", str(data / "docs.tsv"), "--kind", "collection", "--vocab", str(data / "vocab"),
                 "--out", str(data / "store")])
    assert_one_line_error(capsys, code, data / "vocab", f"{len(lines) - 2} terms, vocab.json says {len(lines)}")


@pytest.mark.parametrize("what", ["truncated", "another kind"])
def test_resuming_from_a_damaged_checkpoint(data, capsys, what):
    checkpoint = data / "model" / "checkpoint.pt"
    if what == "truncated":
        damage(checkpoint, "truncated")
        expected = "not a readable .pt file"
    else:
        save_tensors({"w": __import__("torch").zeros(2)}, checkpoint)
        expected = "expected a training checkpoint"
    before = (data / "model" / "model.pt").read_bytes()
    assert_one_line_error(capsys, main(train_args(data, data / "model")), checkpoint, expected)
    assert (data / "model" / "model.pt").read_bytes() == before


def test_regions_of_a_model_that_selects_none(trained, capsys):
    """The regions step reads a capability the model declares (Ranker.REGIONS), not an attribute it may have."""
    args = ["regions", "--model-dir", str(trained / "model"), "--embeddings", str(trained / "embeddings.npy"),
            "--queries", str(trained / "queries"), "--documents", str(trained / "docs"), "--run",
            str(trained / "dev.run"), "--out", str(trained / "regions.csv"), "--device", "cpu"]
    assert_one_line_error(capsys, main(args), trained / "model", "a KNRM model selects no regions (TKL does)")
    assert not (trained / "regions.csv").exists()
