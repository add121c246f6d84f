"""TK paper: the effectiveness-efficiency trade-off figure and the learning curve over training queries."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from helpers import metric_csv

from rankstudy.cli import build_parser
from rankstudy.errors import StudyError
from rankstudy.papers.tk.tradeoff import learning_curve, tradeoff_figure
from rankstudy.significance import wilcoxon_p

QIDS = [str(i) for i in range(20)]
LOW = {q: 0.2 + 0.01 * i for i, q in enumerate(QIDS)}


def shifted(delta: float) -> dict[str, float]:
    return {q: v + delta for q, v in LOW.items()}


def table2_csv(path, speed="docs/ms (CPU)"):
    """A Table 2 CSV as report.table2 writes it: the first stage (empty p), a reference system without docs/ms,
    two TK runs with docs/ms; two datasets."""
    rows = []
    for dataset in ("dl-a", "dl-b"):
        rows += [{"dataset": dataset, "run": "BM25", "test re-rank nDCG@10": 0.5, speed: None, "p vs BM25": None},
                 {"dataset": dataset, "run": "BERT", "test re-rank nDCG@10": 0.7, speed: None, "p vs BM25": 0.001},
                 {"dataset": dataset, "run": "TK", "test re-rank nDCG@10": 0.65, speed: 2.0, "p vs BM25": 0.01},
                 {"dataset": dataset, "run": "TK-3", "test re-rank nDCG@10": 0.66, speed: 0.8, "p vs BM25": 0.01}]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("speed", ["docs/ms (CPU)", "docs/ms (GPU)"])
def test_tradeoff_figure_is_written(tmp_path, speed):
    tradeoff_figure(table2_csv(tmp_path / "t2.csv", speed), tmp_path / "fig")
    assert (tmp_path / "fig.png").stat().st_size > 0 and (tmp_path / "fig.pdf").stat().st_size > 0


def test_tradeoff_errors_name_the_file(tmp_path):
    path = table2_csv(tmp_path / "t2.csv")
    with pytest.raises(StudyError, match=f"{path}: no column 'test full AP'"):
        tradeoff_figure(path, tmp_path / "fig", measure="test full AP")
    pd.read_csv(path).drop(columns=["docs/ms (CPU)"]).to_csv(tmp_path / "nospeed.csv", index=False)
    with pytest.raises(StudyError, match="nospeed.csv: no column 'docs/ms"):
        tradeoff_figure(tmp_path / "nospeed.csv", tmp_path / "fig")
    pd.read_csv(path).assign(**{"docs/ms (CPU)": None}).to_csv(tmp_path / "empty.csv", index=False)
    with pytest.raises(StudyError, match="empty.csv: no run has a docs/ms"):
        tradeoff_figure(tmp_path / "empty.csv", tmp_path / "fig")
    assert not (tmp_path / "fig.png").exists()


@pytest.fixture
def curve_inputs(tmp_path):
    """TK at 100 queries (two seeds: +0.1, +0.3), at 1000 (one seed: +0.2), BM25 and a second baseline."""
    values = {"bm25": LOW, "bert": shifted(0.25), "tk.100.s1": shifted(0.1), "tk.100.s2": shifted(0.3),
              "tk.1k.s1": shifted(0.2)}
    csvs = [metric_csv(tmp_path / f"{system}.csv", system, "test", found) for system, found in values.items()]
    points = [{"series": "TK", "queries": 100, "dataset": "d", "system": "tk.100.s1"},
              {"series": "TK", "queries": 1000, "dataset": "d", "system": "tk.1k.s1"},
              {"series": "TK", "queries": 100, "dataset": "d", "system": "tk.100.s2"}]
    baselines = [{"label": "BM25", "dataset": "d", "system": "bm25"},
                 {"label": "BERT", "dataset": "d", "system": "bert"}]
    return csvs, points, baselines


def test_learning_curve_table_and_figure(tmp_path, curve_inputs):
    csvs, points, baselines = curve_inputs
    table = learning_curve(csvs, points, tmp_path / "lc", tmp_path / "lc-fig", baselines, caption="Scaled down.")
    assert list(table.columns) == ["dataset", "series", "training queries", "seeds", "nDCG@10 mean", "nDCG@10 min",
                                   "nDCG@10 max", "p vs BM25"]
    assert list(table["series"]) == ["BM25", "BERT", "TK", "TK"]
    assert table["training queries"].isna().tolist() == [True, True, False, False]
    assert list(table["training queries"].dropna()) == [100, 1000] and list(table["seeds"].dropna()) == [2, 1]
    mean = np.mean(list(LOW.values()))
    tk = table.iloc[2]
    assert tk["nDCG@10 mean"] == pytest.approx(mean + 0.2)
    assert (tk["nDCG@10 min"], tk["nDCG@10 max"]) == (pytest.approx(mean + 0.1), pytest.approx(mean + 0.3))
    assert table.iloc[0]["nDCG@10 mean"] == pytest.approx(mean) and pd.isna(table.iloc[0]["p vs BM25"])
    # p: the seeds' per-query mean against BM25
    seed_mean = {q: np.mean([shifted(0.1)[q], shifted(0.3)[q]]) for q in QIDS}
    assert tk["p vs BM25"] == pytest.approx(wilcoxon_p(seed_mean, LOW)) and tk["p vs BM25"] < 0.001
    assert table.iloc[1]["p vs BM25"] == pytest.approx(wilcoxon_p(shifted(0.25), LOW))
    csv = pd.read_csv(tmp_path / "lc.csv")
    assert csv["training queries"].isna().sum() == 2 and csv["seeds"].dropna().tolist() == [2, 1]
    md = (tmp_path / "lc.md").read_text()
    assert md.startswith("Learning curve: test nDCG@10 by the number of training queries") and "Scaled down." in md
    assert "against BM25" in md and (tmp_path / "lc.tex").exists()
    assert (tmp_path / "lc-fig.png").stat().st_size > 0 and (tmp_path / "lc-fig.pdf").exists()


def test_learning_curve_without_baselines_has_no_p_column(tmp_path, curve_inputs):
    csvs, points, _ = curve_inputs
    table = learning_curve(csvs, points, tmp_path / "lc", tmp_path / "fig", measure="AP")
    assert "p vs BM25" not in table.columns and list(table["AP mean"]) == pytest.approx(
        [np.mean(list(LOW.values())) + 0.2] * 2)


def test_learning_curve_errors_name_the_point(tmp_path, curve_inputs):
    csvs, points, baselines = curve_inputs
    missing = {"series": "TK", "queries": 10, "dataset": "d", "system": "tk.10.s1"}
    with pytest.raises(StudyError, match=r"point \{.*'tk\.10\.s1'\}: no metrics for d/tk\.10\.s1/test in .*bm25\.csv"):
        learning_curve(csvs, [*points, missing], tmp_path / "lc", tmp_path / "fig", baselines)
    with pytest.raises(StudyError, match="baseline .*'nope'.*: no metrics for d/nope/test"):
        learning_curve(csvs, points, tmp_path / "lc", tmp_path / "fig", [{"label": "X", "dataset": "d",
                                                                           "system": "nope"}])
    with pytest.raises(StudyError, match="point .* lacks queries"):
        learning_curve(csvs, [{"series": "TK", "dataset": "d", "system": "tk.1k.s1"}], tmp_path / "lc",
                       tmp_path / "fig")
    assert not (tmp_path / "lc.csv").exists()


def test_cli_subcommands(tmp_path, curve_inputs):
    csvs, points, baselines = curve_inputs
    args = build_parser().parse_args(["tk-learning-curve", "--metrics", *map(str, csvs), "--points", "[]",
                                      "--out-prefix", "t", "--figure-prefix", "f"])
    assert (args.measure, args.baselines, args.caption) == ("nDCG@10", "[]", "")
    args = build_parser().parse_args(["tk-tradeoff", "--table", "t.csv", "--out-prefix", "f"])
    assert args.measure == "test re-rank nDCG@10"

    def cli(*arguments):
        return subprocess.run([sys.executable, "-m", "rankstudy", *arguments], capture_output=True, text=True)

    result = cli("tk-learning-curve", "--metrics", *map(str, csvs), "--points", json.dumps(points), "--baselines",
                 json.dumps(baselines), "--out-prefix", str(tmp_path / "lc"), "--figure-prefix", str(tmp_path / "f"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "lc.csv").exists() and (tmp_path / "f.png").exists()
    result = cli("tk-tradeoff", "--table", str(table2_csv(tmp_path / "t2.csv")), "--measure",
                 "test re-rank nDCG@10", "--out-prefix", str(tmp_path / "trade"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "trade.png").exists() and (tmp_path / "trade.pdf").exists()
    result = cli("tk-learning-curve", "--metrics", str(csvs[0]), "--points", "{oops", "--out-prefix", "x",
                 "--figure-prefix", "y")
    assert result.returncode == 2 and "--points: not JSON" in result.stderr and "Traceback" not in result.stderr


def test_training_queries_counts_every_kind_of_examples_file(tmp_path):
    from rankstudy.papers.tk.tradeoff import training_queries

    files = {"triples.tsv": "q1\tp\tn\nq2\tp\tn\nq1\tp\tm\n", "groups.tsv": "q1\tp\tn,m\nq3\tp\tn,m\n",
             "teacher.ensemble.tsv": "q1\tp\tn\t2.5\t1.0\nq2\tp\tn\t3.0\t-1.0\nq4\tp\tn\t1\t0\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert [training_queries(tmp_path / name) for name in files] == [2, 2, 3]
