"""Repeated splits of a truncation study (rankstudy.truncation.repeats): the seeds, the pooling, and the
table, claims and reproduction report that read a pooled study."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from rankstudy.errors import StudyError
from rankstudy.papers.choppy.report import settings_caption, table1
from rankstudy.report.claims import reference_values
from rankstudy.report.reproduction import reproduction
from rankstudy.truncation.experiment import TruncationConfig, judged_only, run_study, split_queries, write_study
from rankstudy.truncation.repeats import pool, query_key, read_study, repeat_seed

from test_experiment import toy_run


def fake_study(repeat: int, choppy: list[float], greedy: list[float], k: int, split_from: str = "seed 1") -> dict:
    """A study of three test queries (ids shift with the repeat, as a new split's would)."""
    qids = [str(q + repeat) for q in range(3)]
    per_query, results = [], []
    for method, values, cuts in (("Choppy", choppy, [3, 5, 9]), (f"Greedy-k (k={k})", greedy, [k] * 3)):
        per_query += [{"metric": "f1", "method": method, "qid": q, "value": v, "cut": c}
                      for q, v, c in zip(qids, values, cuts)]
        results.append({"metric": "f1", "method": method, "value": float(np.mean(values)),
                        "mean_cut": float(np.mean(cuts)), "cut_sd": float(np.std(cuts)), "cut_rho_oracle": np.nan})
    return {"results": pd.DataFrame(results), "per_query": pd.DataFrame(per_query), "fig1": {"repeat": repeat},
            "settings": {"n": 10, "split": {"train": 8, "dev": 0, "test": 3}, "split_from": split_from}}


def test_repeat_seeds():
    assert [repeat_seed(42, r) for r in range(3)] == [42, 43, 44]
    with pytest.raises(StudyError, match="repeat"):
        repeat_seed(42, -1)


def test_pool_means_sds_and_every_query_value():
    studies = [fake_study(0, [0.3, 0.4, 0.5], [0.2, 0.2, 0.2], k=4), fake_study(1, [0.1, 0.2, 0.3], [0.3, 0.3, 0.3], k=6)]
    pooled = pool(studies)
    results = pooled["results"].set_index("method")
    assert list(results.index) == ["Choppy", "Greedy-k"]  # k varies by split: one row
    assert results.loc["Choppy", "value"] == pytest.approx(0.3)
    assert results.loc["Choppy", "value_sd"] == pytest.approx(np.std([0.4, 0.2], ddof=1))
    assert results.loc["Greedy-k", "mean_cut"] == pytest.approx(5) and (results["repeats"] == 2).all()
    per_query = pooled["per_query"]
    assert len(per_query) == 12 and sorted(per_query["repeat"].unique()) == [0, 1]
    assert set(per_query["method"]) == {"Choppy", "Greedy-k"}
    assert pooled["settings"]["repeats"] == 2 and pooled["settings"]["greedy_k"] == {"f1": [4, 6]}
    assert pooled["fig1"] == {"repeat": 0}
    # query "1" and "2" are test queries of both repeats: one key per (repeat, query)
    keys = query_key(per_query[per_query["method"] == "Choppy"])
    assert len(set(keys)) == 6 and "0/1" in set(keys) and "1/1" in set(keys)
    single = pool(studies[:1])["results"]
    assert single["value_sd"].isna().all() and single["value"].tolist() == pytest.approx([0.4, 0.2])


def test_pool_refuses_repeats_of_different_methods():
    other = fake_study(1, [0.1] * 3, [0.3] * 3, k=6)
    other["results"] = other["results"].replace({"Choppy": "BiCut"})
    with pytest.raises(StudyError, match="different methods"):
        pool([fake_study(0, [0.3] * 3, [0.2] * 3, k=4), other])
    with pytest.raises(StudyError, match="no truncation studies"):
        pool([])


def test_a_pooled_study_in_table1_claims_and_the_reproduction_report(tmp_path):
    """Ten repeats in which Choppy beats Greedy-k by 0.05 on every query: the table's mean, sd and the pooled
    paired test (30 pairs, significant, where 3 pairs of one repeat could not be), the claims' per-pair values,
    and the paper's cell within one sd of ours or not."""
    rng = np.random.default_rng(0)
    studies = []
    for repeat in range(10):
        greedy = list(rng.uniform(0.1, 0.3, 3))
        studies.append(fake_study(repeat, [g + 0.05 for g in greedy], greedy, k=4 + repeat % 2))
    directory = tmp_path / "bm25"
    write_study(pool(studies), directory)
    assert read_study(directory)["per_query"]["qid"].tolist()[:3] == ["0", "1", "2"]  # ids stay strings
    table = table1([directory], ["bm25"], tmp_path / "table1").set_index("method")
    assert table.loc["Choppy", "F1"] - table.loc["Greedy-k", "F1"] == pytest.approx(0.05)
    assert table.loc["Choppy", "sd (F1)"] > 0 and table.loc["Choppy", "repeats above Greedy-k (F1)"] == 10
    assert table.loc["Choppy", "p vs Greedy-k (F1)"] < 0.001
    caption = (tmp_path / "table1.md").read_text()
    assert "10 repeats (a random split each" in caption and "pools every repeat's test queries" in caption
    values = reference_values({"path": str(directory / "per_query.csv"), "method": "Choppy"}, "f1")
    assert len(values) == 30 and "9/11" in values
    reported = tmp_path / "reported.yaml"
    choppy, sd = table.loc["Choppy", "F1"], table.loc["Choppy", "sd (F1)"]
    reported.write_text(yaml.safe_dump({"paper": "Choppy", "tables": {"choppy_table1": {
        "columns": ["F1"], "rows": {"bm25 | Choppy": [float(choppy + sd / 2)], "bm25 | Greedy-k": [1.0]}}}}))
    (tmp_path / "tables").mkdir()
    (tmp_path / "table1.csv").rename(tmp_path / "tables" / "choppy_table1.csv")
    cells = reproduction([reported], tmp_path / "tables").set_index("row")
    assert cells.loc["bm25 | Choppy", "our sd"] == pytest.approx(sd) and cells.loc["bm25 | Choppy", "within sd"] == "yes"
    assert cells.loc["bm25 | Greedy-k", "within sd"] == "no"


def test_one_repeat_keeps_the_single_studys_table(tmp_path):
    directory = tmp_path / "bm25"
    write_study(pool([fake_study(0, [0.3, 0.4, 0.5], [0.2, 0.2, 0.2], k=4)]), directory)
    table = table1([directory], ["bm25"], tmp_path / "table1")
    assert not any(column.startswith(("sd", "repeats above")) for column in table.columns)
    assert "repeats" not in settings_caption(json.loads((directory / "settings.json").read_text()))


def test_a_given_split_without_dev_and_the_repeats_of_a_study():
    qids = [str(i) for i in range(20)]
    given = split_queries(qids, TruncationConfig(n=10), 1, {"train": ["0", "1", "2"], "test": ["3"]})
    assert len(given["dev"]) == 0 and list(given["train"]) == [0, 1, 2]
    with pytest.raises(StudyError, match="train and a test list"):
        split_queries(qids, TruncationConfig(n=10), 1, {"train": ["0"], "dev": ["1"], "test": []})
    run, qrels = toy_run(queries=40)
    cfg = TruncationConfig(n=20, fixed_k=[5], dev_fraction=0, model={"d_model": 8, "heads": 2, "layers": 1,
                                                                      "epochs": 1}, bicut={"epochs": 1, "hidden": 4},
                           device="cpu")
    first, second = (run_study(run, qrels, cfg, repeat_seed(5, r)) for r in (0, 1))
    test_queries = [set(study["per_query"]["qid"]) for study in (first, second)]
    assert test_queries[0] != test_queries[1] and first["settings"]["split_from"] == "seed 5"
    fixed = run_study(run, qrels, cfg, 6, {"train": [str(q) for q in range(30)], "test": ["30", "31"]})
    assert fixed["settings"]["split_from"] == "query-id files" and fixed["settings"]["split"]["dev"] == 0


def test_each_metrics_choppy_takes_its_own_settings():
    run, qrels = toy_run(queries=30)
    cfg = TruncationConfig(n=20, fixed_k=[5], model={"d_model": 8, "heads": 2, "layers": 1, "epochs": 1,
                                                     "score_scaling": "list"},
                           model_by_metric={"dcg": {"epochs": 2, "score_scaling": "train"}}, bicut={"epochs": 1},
                           device="cpu")
    settings = run_study(run, qrels, cfg, 1)["settings"]
    assert (settings["choppy_f1"]["score_scaling"], settings["choppy_f1"]["epochs_run"]) == ("list", 1)
    assert (settings["choppy_dcg"]["score_scaling"], settings["choppy_dcg"]["epochs_run"]) == ("train", 2)
    assert len(settings["choppy_dcg"]["train_loss"]) == 2  # the learning curve
    with pytest.raises(ValueError, match="model_by_metric"):
        TruncationConfig(n=10, model_by_metric={"ndcg": {}})


def test_listed_queries_without_judgments_are_left_out():
    run = {"1": [("d", 1.0)], "2": [("d", 1.0)]}
    assert judged_only(["1", "2", "3"], run, {"1": {"d": 1}}, "test.qids") == ["1", "3"]  # "3": reported later
