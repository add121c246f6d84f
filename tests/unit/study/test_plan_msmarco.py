"""The plan of config/msmarco-passages.yaml: models trained on one dataset (MS MARCO training queries) re-rank the
given BM25 lists of other datasets (TREC DL years), each dataset re-ranking its own first stage (rerank_from)."""

from __future__ import annotations

import pytest

from helpers import REPO, config_file
from rankstudy.config import ConfigError
from rankstudy.study import StudyPlan


def msmarco(override: str = "") -> StudyPlan:
    """The config as Snakemake hands it over (a standalone file: schema defaults filled in)."""
    return StudyPlan.from_config(config_file(REPO / "config" / "msmarco-passages.yaml", override))


def test_each_dataset_re_ranks_its_own_first_stage():
    plan = msmarco()
    assert plan.rerank_system("msmarco-train") == "bm25"
    assert plan.rerank_system("dl-test-a") == plan.rerank_system("dl-test-b") == "bm25-given"
    assert plan.dataset_splits("msmarco-train") == ["train", "dev"]  # dev held out of train
    # the study's BM25 searches the training pool; the given lists are the test years'
    assert plan.system_splits("bm25", "msmarco-train") == ["train", "dev"]
    assert plan.system_splits("bm25", "dl-test-a") == []
    assert plan.system_splits("bm25-given", "dl-test-b") == ["test"]
    training = plan.train_inputs("msmarco-train", "tk", 42)
    assert training["dev_run"] == "runs/msmarco-train/bm25.dev.run"
    # no training reads the zero-shot MiniLM reference (its dense index is not preparation: workflow priorities)
    assert plan.training_first_stages() == {"bm25"}
    assert training["examples"] == "train/msmarco-train/teacher.ensemble.tsv"  # distilled: the scored triples
    rerank = plan.rerank_inputs("dl-test-a", "tk", 43, "test")
    assert rerank["candidates"] == "runs/dl-test-a/bm25-given.test.run"
    assert rerank["model"] == "models/msmarco-train/tk/tk/seed43/model.pt"
    assert rerank["documents"] == "text/minilm-table/dl-test-a/collection"


def test_table2_has_each_test_dataset_with_its_bm25_row_and_the_caption_counts_the_training_data():
    plan = msmarco()
    rows = plan.tk.table2_rows()
    firsts = [row for row in rows if row["model"] is None and row["rerank"] == row["baseline"]]
    assert [(row["dataset"], row["run"], row["rerank"]) for row in firsts] == [
        ("dl-test-a", "BM25", "bm25-given"), ("dl-test-b", "BM25", "bm25-given")]
    assert {row["baseline"] for row in rows} == {"bm25-given"}
    assert plan.tk.caption_datasets() == ["dl-test-a", "dl-test-b", "msmarco-train"]
    assert plan.tk.tradeoff


def test_the_learning_audit_has_a_row_per_seed_and_test_dataset():
    entries = msmarco().learning_audit()
    tk = [entry for entry in entries if entry["run"] == "tk"]
    assert {(entry["dataset"], entry["seed"]) for entry in tk} == {(d, s) for d in ("dl-test-a", "dl-test-b")
                                                                    for s in (42, 43)}
    assert {entry["log"] for entry in tk} == {"models/msmarco-train/tk/tk/seed42/log.csv",
                                              "models/msmarco-train/tk/tk/seed43/log.csv"}
    assert {entry["first_stage_metrics"] for entry in tk} == {
        "results/metrics/dl-test-a/bm25-given.test.csv", "results/metrics/dl-test-b/bm25-given.test.csv"}


def test_a_learning_curve_lists_every_seed_and_dataset_with_its_training_queries():
    plan = msmarco("""
neural:
  runs:
    tk-1k: {model: tk, embeddings: minilm-table, train: msmarco-train, evaluate: [dl-test-a, dl-test-b], rerank_depth: 100,
            training: {train_queries: 1000}}
  learning_curve: [{series: TK, run: tk-1k}, {series: TK, run: tk}]
""")
    curve = plan.tk.learning_curve()
    assert {(p["queries"], p["dataset"], p["system"]) for p in curve["points"]} == {
        (1000, "dl-test-a", "tk.tk-1k.s42"), (1000, "dl-test-b", "tk.tk-1k.s42"),
        *((None, d, f"tk.tk.s{s}") for d in ("dl-test-a", "dl-test-b") for s in (42, 43))}
    assert curve["baselines"] == [{"label": "BM25", "dataset": d, "system": "bm25-given"}
                                  for d in ("dl-test-a", "dl-test-b")]
    inputs = plan.tk.learning_curve_inputs()
    assert "results/metrics/dl-test-b/tk.tk-1k.s42.test.csv" in inputs["metrics"]
    # tk-1k trains on the BM25 triples (the hinge), tk on the ensemble's scored triples
    assert inputs["examples"] == ["train/msmarco-train/teacher.ensemble.tsv", "train/msmarco-train/triples.tsv"]


@pytest.mark.parametrize("override, message", [
    ("neural: {learning_curve: [{series: TK, run: nope}]}", "neural.learning_curve names 'nope'"),
    ("datasets: {dl-test-a: {rerank_from: bm25}}", "re-ranks 'bm25' candidates, which 'dl-test-a' has no test lists"),
    ("datasets: {dl-test-b: {rerank_from: nope}}", "datasets.dl-test-b.rerank_from names 'nope', which is not a "
                                                   "first_stage system"),
])
def test_bad_settings_are_refused_naming_them(override, message):
    with pytest.raises(ConfigError, match=message):
        msmarco(override)


def test_distilled_runs_train_on_their_teachers_scored_triples():
    plan = msmarco("""
neural:
  teachers:
    a: {kind: dense, encoder: minilm, scale: 2}
    b: {kind: splade, encoder: splade-tiny}
    both: {members: [a, b], mining: {per_query: 4}}
  runs:
    tk-both: {model: tk, embeddings: minilm-table, train: msmarco-train, evaluate: [dl-test-a], rerank_depth: 100,
              training: {loss: margin_mse, teacher: {scores: both}}}
""")
    assert plan.train_inputs("msmarco-train", "tk-both", 42)["examples"] == "train/msmarco-train/teacher.both.tsv"
    assert plan.teachers.vectors("msmarco-train", "both") == ["teachers/msmarco-train/a", "teachers/msmarco-train/b"]
    settings = plan.teachers.encoder_settings("a")  # TeacherConfig's fields, the schema's defaults filled in
    assert settings["kind"] == "dense" and settings["scale"] == 2 and settings["max_length"] == 256
    assert "mining" not in settings
    args = plan.teachers.triples_args("msmarco-train", "both")
    assert args.startswith("--scales 2.0 1.0 --mining '{\"above_positive\": false, \"depth\": 100, \"per_query\": 4, "
                           "\"skip\": 3}'") and "--seed 42" in args
    assert "--metric RR@10 --validation-depth 30 --rel-threshold 1" in args


@pytest.mark.parametrize("override, message", [
    ("neural: {teachers: {e: {members: [x, y]}}}", "neural.teachers.e.members names 'x', which is not an encoder"),
    ("neural: {runs: {tk: {training: {loss: margin_mse, teacher: {scores: nope}}}}}",
     "neural.runs.tk.training.teacher.scores names 'nope', which is not a key of neural.teachers"),
])
def test_teachers_that_name_nothing_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        msmarco(override)
