"""TKL paper outputs: systems table with significance letters, evidence table, Figs. 1-3."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from helpers import assert_drawn, metric_csv

from rankstudy.errors import StudyError
from rankstudy.formats import write_qrels, write_run
from rankstudy.papers.tkl.report import (evidence_table, length_figure, max_length_figure, region_figure,
                                      region_shares, system_table)

MEASURES = ("nDCG@10", "RR@10", "AP@100")


def test_system_table_means_letters_and_speed(tmp_path):
    rng = np.random.default_rng(0)
    base = {str(q): float(v) for q, v in enumerate(rng.random(40))}
    better = {q: v + 0.2 for q, v in base.items()}
    csvs = [metric_csv(tmp_path / f"{s}.{split}.csv", s, split, values, MEASURES)
            for s, values in (("bm25", base), ("tkl", better)) for split in ("dev", "test")]
    efficiency = tmp_path / "eff.csv"
    pd.DataFrame({"model": ["tkl"], "device": ["cpu"], "docs_per_ms": [0.05]}).to_csv(efficiency, index=False)
    rows = [{"label": "BM25", "dataset": "d", "system": "bm25"},
            {"label": "TKL", "dataset": "d", "system": "tkl", "model": "tkl"}]
    table = system_table(csvs, rows, ["test", "dev"], tmp_path / "t1", "caption", efficiency_csv=efficiency)
    assert list(table[""]) == ["a", "b"]
    assert table.loc[1, "test nDCG@10"] == pytest.approx(np.mean(list(better.values())))
    assert list(table["test nDCG@10 sig"]) == ["", "a"] and list(table["dev AP@100 sig"]) == ["", "a"]
    assert pd.isna(table.loc[0, "docs/ms (CPU)"]) and table.loc[1, "docs/ms (CPU)"] == 0.05
    assert (tmp_path / "t1.md").read_text().startswith("caption Queries: test 40, dev 40.")  # counted, not told
    with pytest.raises(StudyError, match="no metrics for d/missing/test"):
        system_table(csvs, [{"label": "x", "dataset": "d", "system": "missing"}], ["test"], tmp_path / "t", "")
    # measured on a GPU as well (a cluster job): the column is the GPU's and says so
    pd.DataFrame({"model": ["tkl", "tkl"], "device": ["cpu", "cuda"], "docs_per_ms": [0.05, 2.0]}).to_csv(efficiency)
    table = system_table(csvs, rows, ["test"], tmp_path / "t2", "caption", efficiency_csv=efficiency)
    assert table.loc[1, "docs/ms (GPU)"] == 2.0 and "docs/ms (CPU)" not in table


@pytest.fixture
def toy_study(tmp_path):
    """Two queries; run 'short' ranks the late-evidence document low, 'long' ranks it first."""
    qrels = {"1": {"early": 1, "late": 2}, "2": {"late2": 1}}
    write_qrels(tmp_path / "qrels.txt", qrels)
    truth = {"relevant": {"1": {"early": {"evidence_start": 10}, "late": {"evidence_start": 900}},
                          "2": {"late2": {"evidence_start": 300}}}}
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    fillers = [f"x{i}" for i in range(12)]
    short = {"1": [("early", 20.0)] + [(d, 10.0 - i) for i, d in enumerate(fillers)] + [("late", -5.0)],
             "2": [(d, 10.0 - i) for i, d in enumerate(fillers)] + [("late2", -5.0)]}
    long = {"1": [("late", 30.0), ("early", 20.0)] + [(d, 10.0 - i) for i, d in enumerate(fillers)],
            "2": [("late2", 30.0)] + [(d, 10.0 - i) for i, d in enumerate(fillers)]}
    write_run(tmp_path / "short.run", short, "short")
    write_run(tmp_path / "long.run", long, "long")
    lengths = {"early": 100, "late": 3000, "late2": 600, **{d: 100 for d in fillers}}
    return tmp_path, lengths


def test_evidence_table_separates_early_and_late_evidence(toy_study):
    path, _ = toy_study
    runs = {"TK": path / "short.run", "TKL": path / "long.run"}
    table = evidence_table(runs, path / "qrels.txt", path / "truth.json", path / "ev", "caption", boundary=200, top=10)
    early, late = table.iloc[0], table.iloc[1]
    assert early["relevant documents"] == 1 and late["relevant documents"] == 2
    assert early["TK in top 10"] == 1.0 and early["TKL in top 10"] == 1.0 and early["gain"] == 0.0
    assert late["TK in top 10"] == 0.0 and late["TKL in top 10"] == 1.0 and late["gain"] == 1.0
    (path / "bad.json").write_text("{}")
    with pytest.raises(StudyError, match="truth.json"):
        evidence_table(runs, path / "qrels.txt", path / "bad.json", path / "ev", "")


def test_length_figure_probabilities_by_bucket(toy_study):
    path, lengths = toy_study
    runs = {"TK": path / "short.run", "TKL": path / "long.run"}
    summary = length_figure(runs, path / "qrels.txt", lengths, path / "fig1", top=1, edges=(0, 500, 1000, 2000))
    by_bucket = summary.set_index("bucket")
    assert list(summary["bucket"]) == ["0-500", "500-1000", ">2000"]
    assert by_bucket.loc["0-500", "pairs"] == 25  # 'early' + 12 fillers + 12 fillers
    assert by_bucket.loc["0-500", "P(relevant)"] == pytest.approx(1 / 25)
    assert by_bucket.loc[">2000", "P(top 1 | TK)"] == 0.0 and by_bucket.loc[">2000", "P(top 1 | TKL)"] == 1.0
    assert by_bucket.loc["0-500", "P(top 1 | TK)"] == pytest.approx(2 / 25)
    assert_drawn(path / "fig1.png", path / "fig1.pdf")
    with pytest.raises(StudyError, match="no length"):
        length_figure(runs, path / "qrels.txt", {}, path / "fig1")


def test_max_length_and_region_figures(tmp_path):
    values = {"1": 0.2, "2": 0.4}
    csvs = [metric_csv(tmp_path / f"{s}.csv", s, "test", {q: v + bonus for q, v in values.items()}, MEASURES)
            for s, bonus in (("tk200", 0.0), ("tk1000", 0.05), ("tkl1000", 0.1))]
    points = [{"model": "TK", "length": 200, "dataset": "d", "system": "tk200"},
              {"model": "TK", "length": 1000, "dataset": "d", "system": "tk1000"},
              {"model": "TKL", "length": 1000, "dataset": "d", "system": "tkl1000"}]
    table = max_length_figure(csvs, points, tmp_path / "fig2")
    assert table[table["model"] == "TKL"]["nDCG@10"].item() == pytest.approx(0.4)
    assert (tmp_path / "fig2.png").exists()
    regions = pd.DataFrame({"qid": ["1"] * 4, "docid": ["a"] * 3 + ["b"], "region": [1, 2, 3, 1],
                            "start": [0, 40, 400, -1], "end": [30, 70, 430, -1], "score": [1.0, 0.5, 0.2, 0.0]})
    regions.to_csv(tmp_path / "regions.csv", index=False)
    counts = region_figure(tmp_path / "regions.csv", tmp_path / "fig3")
    assert counts.groupby("region")["count"].sum().to_dict() == {1: 1, 2: 1, 3: 1}  # the -1 (no region) is left out
    assert (tmp_path / "fig3.pdf").exists()


def test_region_shares_count_the_regions_starting_after_a_word(tmp_path):
    """The paper's Fig. 3 text: the share of each top region that starts after the 500th word."""
    regions = pd.DataFrame({"qid": ["1"] * 7, "docid": list("aaabbbc"), "region": [1, 2, 3, 1, 2, 3, 1],
                            "start": [0, 499, 500, 700, 40, 1500, -1], "end": [0] * 7})
    regions.to_csv(tmp_path / "regions.csv", index=False)
    table = region_shares(tmp_path / "regions.csv", tmp_path / "shares", after=500)
    assert table.to_dict("list") == {"region": ["1", "2", "3"], "regions": [2, 2, 2],
                                     "share after 500": [0.5, 0.0, 1.0]}  # 499 is the 500th word, not after it
    assert "24.5, 41.5 and 46.4 %" in (tmp_path / "shares.md").read_text()
