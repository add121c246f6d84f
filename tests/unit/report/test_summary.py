"""DVC's summary of the study (rankstudy summary; dvc.yaml stage ``summary``)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from helpers import metric_csv
from rankstudy.cli import main


def test_summary_nests_means_and_tabulates_the_test_split(tmp_path, capsys):
    (tmp_path / "metrics" / "d").mkdir(parents=True)
    metric_csv(tmp_path / "metrics" / "d" / "bm25.test.csv", "bm25", "test", {"q1": 0.2, "q2": 0.4}, measures=("AP",))
    metric_csv(tmp_path / "metrics" / "d" / "tk.test.csv", "tk", "test", {"q1": 0.5, "q2": 0.7}, measures=("AP",))
    metric_csv(tmp_path / "metrics" / "d" / "tk.dev.csv", "tk", "dev", {"q1": 1.0}, measures=("AP",))
    assert main(["summary", "--metrics", str(tmp_path / "metrics"), "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert summary["d"]["test"]["tk"]["AP"] == 0.6 and summary["d"]["dev"]["tk"]["AP"] == 1.0
    table = pd.read_csv(tmp_path / "out" / "test.csv")
    assert list(table["run"]) == ["d/bm25", "d/tk"] and list(table["AP"]) == pytest.approx([0.3, 0.6])


def test_summary_without_results_fails_cleanly(tmp_path, capsys):
    assert main(["summary", "--metrics", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "no evaluation results" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
