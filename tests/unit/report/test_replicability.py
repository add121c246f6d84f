"""How closely a run's seeds agree (rankstudy.report.replicability): repro_eval's KTU, RBO and RMSE over the study's
run and metric files, checked against values worked out from the measures' definitions."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from helpers import REPO, config_file
from rankstudy.errors import StudyError
from rankstudy.formats import write_run
from rankstudy.report.replicability import seed_agreement
from rankstudy.study import StudyPlan


def seed_files(tmp_path, seed, ranking, ndcg):
    """A run file (ranking: {qid: documents in rank order}) and its metric file (ndcg: {qid: value})."""
    run = tmp_path / f"s{seed}.run"
    write_run(run, {qid: [(doc, float(len(docs) - i)) for i, doc in enumerate(docs)] for qid, docs in ranking.items()},
              f"s{seed}")
    metrics = tmp_path / f"s{seed}.csv"
    rows = [{"qid": qid, "value": value} for qid, value in ndcg.items()]
    rows.append({"qid": "all", "value": sum(ndcg.values()) / len(ndcg)})
    pd.DataFrame(rows).assign(dataset="d", system=f"s{seed}", split="test", measure="nDCG@10")[
        ["dataset", "system", "split", "measure", "qid", "value"]].to_csv(metrics, index=False)
    return {"seed": seed, "run": str(run), "metrics": str(metrics)}


def rbo(first, other, p=0.95, depth=1000):
    """RBO as repro_eval defines it (Clarke et al.'s form): the weighted overlap at each depth, normalised."""
    score = norm = 0.0
    for i in range(depth):
        overlap = len(set(first[:i + 1]) & set(other[:i + 1]))
        score += p ** i * overlap / (i + 1)
        norm += p ** i
    return score / norm


def test_the_seeds_agreement_topic_by_topic(tmp_path):
    original = seed_files(tmp_path, 42, {"q1": ["a", "b", "c"], "q2": ["x", "y"]}, {"q1": 0.5, "q2": 0.2})
    other = seed_files(tmp_path, 43, {"q1": ["a", "c", "b"], "q2": ["x", "y"]}, {"q1": 0.4, "q2": 0.2})
    table = seed_agreement([{"run": "tk", "dataset": "d", "split": "test", "seeds": [original, other]}])
    row = table.iloc[0]
    assert (row["run"], row["original seed"], row["other seed"], row["queries"]) == ("tk", 42, 43, 2)
    # q1: one discordant pair of three, τ = (2 - 1) / 3; q2: the same order, τ = 1
    assert row["KTU"] == pytest.approx((1 / 3 + 1) / 2)
    assert row["RBO"] == pytest.approx((rbo("abc", "acb") + rbo("xy", "xy")) / 2)
    assert row["RMSE nDCG@10"] == pytest.approx(math.sqrt((0.1 ** 2 + 0) / 2))


def test_seeds_without_a_topic_in_common_fail_naming_the_files(tmp_path):
    original = seed_files(tmp_path, 42, {"q1": ["a"]}, {"q1": 0.5})
    other = seed_files(tmp_path, 43, {"q9": ["a"]}, {"q9": 0.5})
    with pytest.raises(StudyError, match="s43.run: no topic in common with .*s42.run"):
        seed_agreement([{"run": "tk", "dataset": "d", "split": "test", "seeds": [original, other]}])


def test_the_plan_groups_each_trained_runs_seeds_first_seed_first():
    plan = StudyPlan.from_config(config_file(REPO / "config" / "config.yaml"))
    groups = {(group["run"], group["dataset"]): group for group in plan.seed_groups()}
    seeds = groups["p1", "synthetic-passage"]["seeds"]
    assert [seed["seed"] for seed in seeds] == [42, 43, 44]
    assert seeds[1] == {"seed": 43, "run": "runs/synthetic-passage/tk.p1.s43.test.run",
                        "metrics": "results/metrics/synthetic-passage/tk.p1.s43.test.csv"}
    assert all(len(group["seeds"]) > 1 for group in groups.values())
    assert set(plan.seed_group_inputs()) == {seed[key] for group in groups.values() for seed in group["seeds"]
                                             for key in ("run", "metrics")}
