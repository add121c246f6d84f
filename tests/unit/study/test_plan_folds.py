"""Query folds in the study plan (rankstudy.study.folds): a run trained on a dataset with folds trains and
re-ranks one model per fold dataset, the dataset's run is the union of the held-out folds, and the checks
refuse what folds cannot do; a local folder's given run as official candidates. No Snakemake run."""

from __future__ import annotations

import re

import pytest
import yaml

from helpers import with_schema_defaults
from rankstudy.config import ConfigError
from rankstudy.study import StudyPlan

STUDY = """
standalone: true
datasets:
  dl:
    source: local
    local: {path: folder, candidates: bm25.run, qrels_beyond_collection: true,
            splits: {test: {queries: queries.tsv, qrels: qrels.txt}}}
    rel_threshold: 2
    folds: {k: 4, seed: 7}
first_stage:
  datasets: [dl]
  systems:
    bm25: {model: official}
    cos: {model: dense, encoder: minilm, pooling: mean, l2_norm: true, rescore: bm25}
evaluation: {measures: [nDCG@10, RR@10, AP, nDCG, P@10]}
neural:
  embeddings:
    w2v: {dataset: dl, method: word2vec}
    minilm: {method: wordpiece, encoder: minilm}
  models:
    tk: {model: tk}
    bert: {model: bert_cat, encoder: minilm}
  runs:
    tk: {model: tk, embeddings: w2v, train: dl, evaluate: [dl], rerank_depth: 100}
    bert: {model: bert, embeddings: minilm, train: dl, evaluate: [dl], rerank_depth: 100}
  efficiency: {enabled: false}
"""


def folded(override: str = "", drop_depth: str | None = None) -> StudyPlan:
    """The plan of a standalone config of one local dataset with folds, an override merged in (and one run's
    rerank_depth dropped), schema defaults filled in (what common.smk builds)."""
    from snakemake.utils import update_config

    settings = yaml.safe_load(STUDY)
    update_config(settings, yaml.safe_load(override) or {})
    if drop_depth:
        del settings["neural"]["runs"][drop_depth]["rerank_depth"]
    return StudyPlan.from_config(with_schema_defaults(settings))


def test_a_dataset_with_folds_stands_for_k_fold_datasets():
    plan = folded()
    folds = plan.folds
    assert folds.parents == ["dl"] and folds.settings("dl") == {"k": 4, "seed": 7, "split": "test"}
    assert folds.names("dl") == ["dl-fold1", "dl-fold2", "dl-fold3", "dl-fold4"]
    assert folds.parent("dl-fold3") == "dl" and folds.parent("dl") is None
    assert plan.dataset_splits("dl-fold2") == ["train", "dev", "test"] and plan.dataset_splits("dl") == ["test"]
    assert plan.rel_threshold("dl-fold2", "train") == 2 and plan.train_min_grade("dl-fold2") == 2
    assert folds.inputs("dl") == {"queries": "data/dl/queries.test.tsv", "qrels": "data/dl/qrels.test.txt",
                                  "collection": "data/dl/collection.tsv"}
    assert len(folds.outputs("dl")) == 4 * 3 * 2 and "data/dl-fold4/qrels.dev.txt" in folds.outputs("dl")
    assert folds.runs() == ["tk", "bert"]
    # the given run is every split's official candidates; a fold's lists are cut from its parent's
    assert plan.system_splits("bm25", "dl") == ["test"] and plan.system_splits("bm25", "dl-fold1") == ["train", "dev",
                                                                                                     "test"]
    assert plan.first_stage.official_source("dl", "test") == "--run data/dl/candidates.run"
    assert plan.first_stage.official_run("dl-fold1") == []  # rule fold_candidates makes a fold's lists
    assert folds.candidates_input("dl-fold1", "bm25") == "runs/dl/bm25.test.run"
    assert plan.first_stage.rescored("dl", "cos", "test") == ["runs/dl/bm25.test.run"]
    assert "4 query folds of its test queries (seed 7)" in plan.data_description(["dl"])


def test_a_run_trains_and_re_ranks_each_fold_and_merges_the_held_out_runs():
    plan = folded()
    assert plan.train_datasets("tk") == ["dl-fold1", "dl-fold2", "dl-fold3", "dl-fold4"]
    train = plan.train_inputs("dl-fold2", "tk", 42)
    assert train["examples"] == "train/dl-fold2/triples.tsv"
    assert train["dev_run"] == "runs/dl-fold2/bm25.dev.run" and train["dev_qrels"] == "data/dl-fold2/qrels.dev.txt"
    # the fold's text is its parent's: one token store of the folded split, read by query id
    assert train["train_queries"] == train["dev_queries"] == "text/w2v/dl/queries.test"
    assert train["documents"] == "text/w2v/dl/collection"
    assert plan.training_settings("tk")["rel_threshold"] == 2
    rerank = plan.rerank_inputs("dl-fold2", "tk", 42, "test")
    assert rerank["model"] == "models/dl-fold2/tk/tk/seed42/model.pt"  # the model that held the fold out
    assert rerank["candidates"] == "runs/dl-fold2/bm25.test.run"
    assert plan.folds.merge_inputs("dl", "tk.tk.s42") == [f"runs/dl-fold{i}/tk.tk.s42.test.run" for i in range(1, 5)]
    # the dataset itself is evaluated on its folded split only, on the merged run
    assert plan.eval_splits("dl", "tk") == ["test"]
    assert not any(re.fullmatch(plan.dev_test_patterns()["dataset"], name) for name in ("dl", "dl-fold2"))
    assert "results/metrics/dl/tk.tk.s42.test.csv" in plan.neural_metrics()
    assert plan.tk.view_run() is None  # no one model to view


def test_the_learning_audit_has_a_row_per_fold():
    entries = folded().learning_audit()
    assert [(entry["run"], entry["dataset"]) for entry in entries] == [
        (run, f"dl-fold{i}") for run in ("tk", "bert") for i in range(1, 5)]
    assert entries[1]["log"] == "models/dl-fold2/tk/tk/seed42/log.csv"
    assert entries[1]["metrics"] == "results/metrics/dl-fold2/tk.tk.s42.test.csv"
    assert entries[1]["first_stage_metrics"] == "results/metrics/dl-fold2/bm25.test.csv"


def test_the_rules_patterns_match_only_the_folds():
    patterns = folded().folds.patterns()
    assert patterns["fold"] == r"dl\-fold1|dl\-fold2|dl\-fold3|dl\-fold4" and patterns["parent"] == "dl"
    assert patterns["run"] == "tk|bert" and patterns["split"] == "test" and patterns["system"] == "bm25|cos"


@pytest.mark.parametrize("override, message", [
    ("neural: {runs: {tk: {select: best_validation, seeds: [1, 2]}}}", "neural.runs.tk: select: best_validation"),
    ("datasets: {dl: {folds: {split: dev}}}", "datasets.dl.folds.split is 'dev', which is not a split of 'dl'"),
    ("datasets: {other: {source: local, local: {path: x, splits: {test: {queries: q, qrels: r}}}}}\n"
     "first_stage: {datasets: [dl, other]}\nneural: {runs: {tk: {evaluate: [dl, other]}}}",
     "neural.runs.tk trains one model per query fold of 'dl', so it re-ranks only 'dl''s held-out folds, not other"),
    ("datasets: {dl-fold2: {source: local, local: {path: x, splits: {test: {queries: q, qrels: r}}}}}",
     "dl-fold2 is already a key of datasets"),
])
def test_what_folds_cannot_do_is_refused_at_config_check(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        folded(override)


def test_a_folded_split_has_no_dev_split_to_tune_the_full_tasks_depth_on():
    with pytest.raises(ConfigError, match="neural.runs.tk is not evaluated on a 'dev' split of 'dl'"):
        folded(drop_depth="tk")


def test_a_model_trained_elsewhere_re_ranks_the_whole_folded_split():
    plan = folded("datasets: {more: {source: local, local: {path: y, splits: {train: {queries: q, qrels: r},"
                  " dev: {queries: q, qrels: r}, test: {queries: q, qrels: r}}}}}\n"
                  "first_stage: {datasets: [dl, more]}\n"
                  "neural: {runs: {elsewhere: {model: tk, embeddings: w2v, train: more, evaluate: [dl],"
                  " rerank_depth: 50}}}")
    assert "elsewhere" not in plan.folds.runs()
    assert plan.rerank_inputs("dl", "elsewhere", 42, "test")["model"] == "models/more/tk/elsewhere/seed42/model.pt"
