"""The study plan (rankstudy.study): runs (inheritance, names, paths), splits and systems, claims, and the\nchecks across config sections, on configs built in memory (no Snakemake)."""

import re

import pytest

from helpers import REPO, config_file
from rankstudy.config import ConfigError
from rankstudy.study import StudyPlan, plan_runs
from rankstudy.study.checks import check_renamed_keys



def config(**runs):
    return {
        "seed": 42,
        "datasets": {"passages": {}, "documents": {}, "elsewhere": {}},
        "first_stage": {"datasets": ["passages", "documents"]},
        "neural": {
            "device": "cpu",
            "precision": "fp32",
            "training": {"loss": "pairwise", "max_steps": 10},
            "models": {"tk": {"model": "tk"}, "bert": {"model": "bert_cat", "encoder": "study"}},
            "embeddings": {"w2v": {"method": "word2vec"}, "wp": {"method": "wordpiece"}},
            "runs": runs,
        },
    }


def test_a_trained_run_resolves_to_itself():
    run = plan_runs(config(p1={"model": "tk", "embeddings": "w2v", "train": "passages", "seeds": [1, 2],
                               "evaluate": ["passages", "documents"], "training": {"max_steps": 5}}))["p1"]
    assert run.base == "p1" and run.seeds == (1, 2) and run.model == "tk" and run.train == "passages"
    assert run.training == {"loss": "pairwise", "max_steps": 5, "device": "cpu", "precision": "fp32"}
    assert run.model_dir(2) == "models/passages/tk/p1/seed2" and run.encoder_dir(1) is None
    assert run.datasets == ("passages", "documents") and run.example_kind == "triples"
    assert run.system == "tk.p1.s1" and run.view_seeds == (1,)
    assert run.systems == ("tk.p1.s1", "tk.p1.s1-full", "tk.p1.s2", "tk.p1.s2-full")


def test_reuse_and_ensemble_inherit_from_the_run_that_trained_the_models():
    runs = plan_runs(config(p1={"model": "tk", "embeddings": "w2v", "train": "passages", "seeds": [1, 2, 3],
                                "evaluate": ["passages"], "select": "best_validation"},
                            deep={"reuse": "p1", "evaluate": ["passages"], "rerank_depth": 50},
                            p3={"ensemble": "deep", "evaluate": ["passages"]}))
    assert runs["deep"].base == "p1" and runs["p3"].base == "p1"
    assert runs["p3"].seeds == (1, 2, 3) and runs["p3"].model_dir(3) == "models/passages/tk/p1/seed3"
    assert runs["p1"].system == "tk.p1.best" and runs["p1"].view_seeds == (1, 2, 3)
    assert runs["p1"].systems[-2:] == ("tk.p1.best", "tk.p1.best-full")
    assert runs["p3"].system == "tk.p3.ens" and runs["p3"].systems == ("tk.p3.ens", "tk.p3.ens-full")
    assert runs["deep"].system == "tk.deep.s1"  # a reuse selects no seed of its own


def test_seeds_default_to_the_config_seed_and_warm_starts_name_the_source_base():
    runs = plan_runs(config(ce={"model": "bert", "embeddings": "wp", "train": "passages"},
                            ce2={"reuse": "ce"},
                            doc={"model": "bert", "embeddings": "wp", "train": "documents", "encoder_from": "ce2",
                                 "evaluate": ["documents"], "training": {"loss": "listwise"}}))
    assert runs["ce"].seeds == (42,)
    assert runs["doc"].encoder_dir(42) == "models/encoders/ce.s42"  # the reuse's base trained the encoder
    assert runs["doc"].example_kind == "groups"


def test_only_datasets_the_study_runs_are_evaluated():
    runs = plan_runs(config(a={"model": "tk", "embeddings": "w2v", "train": "passages",
                               "evaluate": ["passages", "elsewhere"]},
                            b={"model": "tk", "embeddings": "w2v", "train": "elsewhere", "evaluate": ["passages"]}))
    assert runs["a"].datasets == ("passages",)
    assert runs["b"].datasets == () and runs["b"].systems  # not evaluated: its training data is not run


@pytest.mark.parametrize("runs, message", [
    ({"a": {"model": "nope", "embeddings": "w2v", "train": "passages"}}, "model 'nope' is not defined"),
    ({"a": {"model": "tk", "embeddings": "w2v", "train": "passages", "evaluate": ["x"]}},
     "evaluate dataset 'x' is not defined"),
    ({"a": {"model": "tk", "train": "passages"}}, "needs model, embeddings and train"),
    ({"a": {"reuse": "b"}}, "reuse 'b' is not defined"),
    ({"a": {"reuse": "b"}, "b": {"ensemble": "a"}}, "in a circle (a -> b -> a)"),
    ({"a": {"model": "tk", "embeddings": "w2v", "train": "passages"},
      "b": {"model": "bert", "embeddings": "wp", "train": "passages", "encoder_from": "a"}},
     "encoder_from 'a' is not a run of an encoder"),
])
def test_bad_runs_fail_naming_the_entry(runs, message):
    with pytest.raises(ConfigError) as error:
        plan_runs(config(**runs))
    assert "config: neural.runs." in str(error.value) and message in str(error.value)


def test_depths_names_and_warm_start_sources():
    from rankstudy.study import system_run

    runs = plan_runs(config(ce={"model": "bert", "embeddings": "wp", "train": "passages"},
                            doc={"model": "bert", "embeddings": "wp", "train": "documents", "encoder_from": "ce",
                                 "rerank_depth": 30, "priority": 5}))
    assert runs["ce"].starts_others and not runs["doc"].starts_others
    assert (runs["ce"].priority, runs["doc"].priority) == (0, 5)  # a scheduling hint, 0 unless given
    assert runs["ce"].tuning_depths((10, 100, 10)) == [10, 100, 10]
    assert runs["doc"].tuning_depths((10, 100, 10)) == [10, 30, 10]
    assert runs["doc"].tuning_depths((50, 100, 10)) == [30, 30, 10]
    assert system_run("tk.p1.s42-full") == "p1" and system_run("bert_cat.doc-bert.ens") == "doc-bert"


def study_config(override=""):
    """config/config.yaml with a YAML override merged in as Snakemake merges --configfile, schema defaults
    filled in (what common.smk hands StudyPlan.from_config)."""
    return config_file(REPO / "config" / "config.yaml", override)


def test_the_plan_resolves_encoders_and_warm_starts():
    plan = StudyPlan.from_config(study_config("""
neural:
  models: {mini: {model: bert_cat, encoder: minilm}}
  runs:
    ce: {model: ce_passage, embeddings: study, train: synthetic-passage}
    doc: {model: ce_passage, embeddings: study, train: synthetic-doc, encoder_from: ce}
"""))
    study_encoder = plan.models["ce_passage"]["encoder"]
    assert plan.encoder_location(study_encoder) == f"encoders/{study_encoder}"
    assert plan.encoder_location("minilm") == "minilm"
    assert plan.encoder_build(study_encoder) == [f"encoders/{study_encoder}"] and plan.encoder_build("minilm") == []
    assert plan.model_encoder("mini") == {"encoder": "minilm"}
    assert plan.model_settings("ce", 42)["encoder"] == f"encoders/{study_encoder}"
    assert plan.model_settings("doc", 42)["encoder"] == "models/encoders/ce.s42"  # warm start
    assert plan.encoder_inputs("ce", 42) == [f"encoders/{study_encoder}"]
    assert plan.encoder_inputs("doc", 7) == ["models/encoders/ce.s7"]
    assert plan.encoder_inputs("p1", 42) == [] and "encoder" not in plan.model_settings("p1", 42)


def test_the_default_plan_names_splits_systems_and_claims():
    plan = StudyPlan.from_config(study_config())
    assert plan.dataset_splits("synthetic-doc") == ["train", "dev", "test"]
    assert plan.system_splits("bm25", "synthetic-doc") == ["train", "dev", "test"]
    assert plan.eval_splits("synthetic-doc", "sf-random") == ["test"]  # splits: [test]
    assert ("synthetic-passage", "tk.p1.s42-full") in plan.neural_systems()
    assert plan.choppy.names() == ["bm25", "tk", "drmm"]
    assert plan.choppy.grid_names() == ["bm25"] and plan.choppy.has_grid  # Fig. 2: the paper's BM25 lists only
    claims = {row["id"]: row for row in plan.claims}
    assert claims["tk-beats-bm25"]["a"]["path"] == "results/metrics/synthetic-passage/tk.p1.best.test.csv"
    assert claims["tk-beats-bm25"]["b"]["path"] == "results/metrics/synthetic-passage/bm25.test.csv"
    assert claims["tkl-gain-late"]["subset"]["truth"] == "data/synthetic-doc/truth.json"
    # p1 trained three seeds: its claims are judged on each (and pooled); KNRM trained one
    p1_seeds = claims["tk-beats-knrm"]["a"]["seeds"]
    assert p1_seeds["43"] == {"path": "results/metrics/synthetic-passage/tk.p1.s43.test.csv", "system": "tk.p1.s43"}
    assert list(p1_seeds) == ["42", "43", "44"] and "seeds" not in claims["tk-beats-knrm"]["b"]
    assert claims["tk-tuned-depth"]["a"]["seeds"]["44"]["system"] == "tk.p1.s44-full"
    assert "results/metrics/synthetic-passage/tk.p1.s44.test.csv" in plan.claim_inputs()
    # p2 (fastText) runs in the extended config only: its claim is listed, not run
    not_run = {row["id"]: row["not_run"] for row in plan.claims if row["not_run"]}
    assert not_run == {"tk-fasttext-even": "tk.p2.s42 is not evaluated on synthetic-passage in this config"}
    assert "results/choppy/tk/per_query.csv" in plan.claim_inputs()


def test_a_runs_training_and_re_ranking_read_its_text_candidates_and_warm_start():
    plan = StudyPlan.from_config(study_config())
    train = plan.train_inputs("synthetic-passage", "p1", 42)
    assert train["examples"] == "train/synthetic-passage/triples.tsv" and train["encoder"] == []
    assert train["dev_run"] == "runs/synthetic-passage/bm25.dev.run"
    assert train["train_queries"] == "text/w2v/synthetic-passage/queries.train"
    rerank = plan.rerank_inputs("synthetic-doc", "sf-node", 42, "test")
    assert rerank["model"] == "models/synthetic-doc/socialformer/sf-node/seed42/model.pt"
    assert rerank["queries"] == "text/study/synthetic-doc/queries.test"
    assert rerank["encoder"] == ["models/encoders/ce-passage.s42"]  # its encoder_from run's export
    assert plan.rerank_depth("p1") == 100


def test_the_shared_stages_inputs_and_settings():
    plan = StudyPlan.from_config(study_config(
        "first_stage:\n  systems:\n    dense: {model: dense, encoder: minilm, hits: 50, splits: [test]}\n"))
    stage = plan.first_stage
    assert stage.names("bm25", "ql") == ["bm25", "ql"] and stage.names("dense") == ["dense"]
    assert stage.names("official") == []
    assert stage.search_params("bm25") == {"k1": 0.9, "b": 0.4}
    assert stage.hits("bm25") == 100 and stage.hits("dense") == 50
    assert stage.dense_settings("dense") == {"encoder": "minilm"}
    assert "results/metrics/synthetic-doc/dense.test.csv" in stage.metrics()
    assert "results/metrics/synthetic-doc/dense.dev.csv" not in stage.metrics()
    text = plan.text
    assert text.store_inputs("w2v") == {"vocab": "text/w2v/vocab", "encoder": []}
    # a study encoder's WordPiece stores wait for the encoder's build; a packaged encoder has none
    assert text.store_inputs("study") == {"vocab": [], "encoder": ["encoders/study"]}
    assert text.store_inputs("minilm") == {"vocab": [], "encoder": []}
    assert text.tokens_arg("study", "synthetic-doc") == "--encoder encoders/study"
    # the vocabulary's own dataset and its word vectors' corpus, against a dataset neither has seen
    assert text.tokens_arg("w2v", "synthetic-doc") == "--vocab text/w2v/vocab"
    assert text.tokens_arg("ft", "synthetic-passage") == "--vocab text/ft/vocab"
    assert text.tokens_arg("ft", "synthetic-doc") == "--vocab text/ft/vocab"  # in its vectors' corpus
    assert text.tokens_arg("ft", "synthetic-lists") == "--vocab text/ft/vocab --min-coverage 0.5"
    assert text.vectors_inputs("w2v")["store"] == ["text/w2v/synthetic-passage/collection",
                                                   "text/w2v/synthetic-doc/collection"]
    assert text.vectors_inputs("ft")["store"] == ["text/ft/synthetic-passage/collection",  # its corpus
                                                  "text/ft/synthetic-doc/collection"]
    assert "corpus" not in text.vectors_settings("w2v") and text.vectors_settings("w2v")["dim"] == 64
    assert text.vocabulary_inputs("ft")["queries"] == [f"data/synthetic-passage/queries.{split}.tsv"
                                                       for split in ("train", "dev", "test")]
    assert text.vocabulary_inputs("w2v")["queries"] == []
    assert text.encoder_inputs("study")["embeddings"] == "text/w2v/embeddings.npy"
    assert text.min_count("w2v") == 5 and text.min_count("ft") == 1  # the schema's default, the entry's own
    assert stage.model("dense") == "dense" and stage.device("dense") == "auto"
    assert stage.index_stats("synthetic-doc") == {}
    assert stage.threads == 1 and stage.terms_tolerance == 0.01


def test_the_settings_the_rules_read_come_from_the_plan():
    plan = StudyPlan.from_config(study_config(
        "datasets:\n  synthetic-doc: {train_min_grade: 2}\nneural: {rerank: {depths: [5, 100, 5]}}\n"))
    assert plan.seed == 42 and "nDCG@10" in plan.measures and plan.expected == "config/expected/default.yaml"
    assert plan.threads == 1 and plan.device == "auto" and plan.examples["per_query"] == 20
    assert plan.reproduction == {"comparable": False, "reported": []}  # the schema's default filled in
    assert plan.train_min_grade("synthetic-doc") == 2 and plan.train_min_grade("synthetic-passage") == 1
    assert plan.tuning_depths("p1") == [5, 100, 5] and plan.tuning_depths("ce-passage") == [5, 50, 5]
    assert plan.efficiency["setup"]["threads"] == 1 and plan.choppy.device == "auto"


def test_claims_on_data_the_config_does_not_run_are_reported_not_run():
    plan = StudyPlan.from_config(study_config("first_stage: {datasets: [synthetic-passage]}"))
    rows = {row["id"]: row for row in plan.claims}
    assert rows["tkl-gain-late"]["not_run"].startswith("dataset synthetic-doc is not part of this config; ")
    assert rows["tk-beats-bm25"]["not_run"] is None
    assert not any(path.startswith("results/metrics/synthetic-doc/") for path in plan.claim_inputs())


def test_a_claim_with_several_b_names_the_papers_row_of_each():
    plan = StudyPlan.from_config(config_file(REPO / "config" / "choppy-robust04.yaml"))
    rows = [row for row in plan.claims if row["id"] == "choppy-f1-drmm"]
    assert [(row["b"]["label"], row["reported"]["a"], row["reported"]["b"]) for row in rows] == \
        [("Greedy-k (drmm)", "drmm | Choppy", "drmm | Greedy-k"), ("BiCut (drmm)", "drmm | Choppy", "drmm | BiCut")]


def claim(**keys):
    """A config with one claim, its keys changed or added by the test."""
    entry = {"id": "x", "paper": "TKL", "source": "paper", "statement": "s", "dataset": "synthetic-doc",
             "measure": "nDCG@10", "a": "{run: tkl-2k}", "b": "{run: d1}", **keys}
    return "claims:\n  - {" + ", ".join(f"{key}: {value}" for key, value in entry.items() if value) + "}\n"


@pytest.mark.parametrize("override, message", [
    ("first_stage:\n  datasets: [nowhere]\n", "first_stage.datasets names 'nowhere'"),
    ("neural:\n  embeddings:\n    w2v: {corpus: [synthetic-passage, nowhere]}\n",
     "neural.embeddings.w2v names dataset 'nowhere', which is not a key of datasets"),
    ("neural:\n  rerank: {first_stage: dense}\n", "neural.rerank.first_stage names 'dense'"),
    ("neural:\n  models:\n    tk: {model: tk, layer: 2}\n", "neural.models.tk: unknown key(s) layer"),
    ("neural:\n  models:\n    tk: {model: tk, heads: -1}\n", "neural.models.tk: "),
    ("neural:\n  efficiency:\n    models:\n      tk: {model: tk, ff_dims: 8}\n",
     "neural.efficiency.models.tk: unknown key(s) ff_dims"),
    ("neural:\n  efficiency:\n    models:\n      bert_cat: {model: bert_cat, random_encoder: {layers: 2, hidden: 30, "
     "heads: 4, intermediate: 8}}\n",
     "neural.efficiency.models.bert_cat.random_encoder: heads (4) must divide hidden (30)"),
    ("neural:\n  efficiency:\n    models:\n      tk: {model: tk, random_encoder: {layers: 2, hidden: 8, heads: 2, "
     "intermediate: 8}}\n", "neural.efficiency.models.tk.random_encoder: model 'tk' has no encoder to replace"),
    ("neural:\n  runs:\n    p1:\n      training: {metric: RR@ten}\n", "neural.runs.p1.training"),
    ("neural:\n  runs:\n    p1: {splits: [test]}\n", "neural.runs.p1 is not evaluated on a 'dev' split"),
    ("neural:\n  runs:\n    sf-node: {encoder_from: p1}\n", "neural.runs.sf-node: encoder_from 'p1' is not a run of an encoder"),
    ("neural:\n  table2_runs: [p1, p9]\n", "neural.table2_runs names 'p9'"),
    ("neural:\n  query_tables: [p9]\n", "neural.query_tables names 'p9'"),
    ("tkl:\n  compare: {TK: p1}\n", "tkl names run 'p1', which is not a neural.runs entry evaluated on"),
    ("socialformer:\n  table2_columns: {dev: [RR@10]}\n",
     "socialformer.table2 shows dev columns, but run 'sf-no-static-distance' is not evaluated on dev"),
    ("socialformer:\n  curves: {x: sf-random-reuse}\nneural:\n  runs:\n    sf-random-reuse: {reuse: sf-random}\n",
     "socialformer.curves names 'sf-random-reuse', which is not a trained neural.runs entry"),
    ("socialformer:\n  fig6: {measure: MAP@7}\n", "socialformer uses measure 'MAP@7'"),
    ("socialformer:\n  graph_run: sf-maxp\n", "socialformer.graph_run 'sf-maxp' is not a Socialformer run"),
    ("choppy:\n  grid_runs: [bm25, dmm]\n", "choppy.grid_runs names 'dmm', which is not a key of choppy.runs"),
    (claim(b="{run: nowhere}"), "claims: claim 'x': run 'nowhere' is not a key of neural.runs"),
    (claim(b="{system: tk.d1.s99}"), "claim 'x': system 'tk.d1.s99' is neither a first_stage system"),
    (claim(direction="not_worse"), "claim 'x': a margin goes with direction not_worse, and only with it"),
    (claim(reported="{file: f.yaml, table: t, column: c, a: A, b: B, where: w}"),
     "claim 'x': on synthetic data an effect's size does not compare with the paper's"),
    (claim(reported="{file: f.yaml, table: t, column: c, a: A, b: B, where: w}", dataset="cranfield",
           b="[{system: bm25}, {system: ql}]", a="{system: bm25}"),
     "claim 'x': reported.b: expected one row of the paper's table per B (2, in the order of b), got 'B'"),
    (claim(reported="{file: f.yaml, table: t, column: c, a: A, b: [B1, B2], where: w}", choppy="bm25", dataset=None,
           a="{method: Choppy}", b="[{method: Greedy-k}, {method: BiCut}]", measure="f1"),
     "claim 'x': on synthetic data an effect's size does not compare with the paper's"),
    (claim(measure="MAP@7"), "claim 'x': measure 'MAP@7' is not in evaluation.measures"),
    (claim(split="dev", a="{run: sf-random}"), "claim 'x': run 'sf-random' is evaluated on test, not 'dev'"),
    (claim(b="{value: 0.5}", a="{value: 0.1}"), "claim 'x': a is a system; only b may be a fixed value"),
    (claim(b="{method: Choppy}"), "claim 'x': {method: ...} needs the claim's choppy key"),
    (claim(split="validation"), "claim 'x': split 'validation' is not a split of synthetic-doc"),
    (claim(dataset="nowhere"), "claim 'x': dataset 'nowhere' is not a key of datasets"),
    (claim(measure="docs/ms", a="{model: tkl-2k}", b="{model: bert_cat}", dataset="synthetic-doc"),
     "claim 'x': a docs/ms claim compares efficiency models; it has no dataset"),
    (claim(measure="docs/ms", a="{model: tkl-9k}", b="{model: bert_cat}", dataset=None, direction="bounds"),
     "claim 'x': model 'tkl-9k' is not a key of neural.efficiency.models"),
    (claim(measure="docs/ms", a="{model: tkl-2k}", b="{model: bert_cat}", dataset=None),
     "claim 'x': a docs/ms claim compares one measured number each: direction bounds"),
    (claim(b="{model: bert_cat}"), "claim 'x': {model: ...} is an efficiency model: the claim's measure must be docs/ms"),
    ("evaluation: {measures: [nDCG@10, RR@10, AP@100, P@10, AP, RR@100, nDCG@100]}",
     "the TK Table 2 (neural.table2_runs) shows nDCG: add it to evaluation.measures"),
])
def test_a_bad_config_fails_naming_the_key(override, message):
    with pytest.raises(ConfigError) as error:
        StudyPlan.from_config(study_config(override))
    assert str(error.value).startswith("config: ") and message in str(error.value)


@pytest.mark.parametrize("old, message", [
    ({"longdoc": {"top": 30}}, "config: section 'longdoc' is now called tkl"),
    ({"truncation": {"n": 50}}, "config: section 'truncation' is now called choppy (and its `choppy:` settings"),
    ({"claims": [{"id": "c", "truncation": "bm25"}]}, "config: claims: claim 'c': key 'truncation' is now called"),
])
def test_a_config_with_a_renamed_section_names_the_new_key(old, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_renamed_keys(old)
    check_renamed_keys(study_config())


def test_each_paper_plans_its_tables_and_figures():
    plan = StudyPlan.from_config(study_config())
    table2 = plan.tk.table2_rows()
    assert table2[0] == {"run": "BM25", "model": None, "dataset": "synthetic-passage", "rerank": "bm25",
                         "full": "bm25", "baseline": "bm25"}
    assert table2[1]["rerank"] == "tk.p1.best" and table2[1]["full"] == "tk.p1.best-full"
    assert "results/metrics/synthetic-passage/tk.p1.best-full.dev.csv" in plan.tk.table2_metrics()
    assert plan.tk.view_run() == {"run": "p1", "dataset": "synthetic-passage", "system": "tk.p1.best"}
    view = plan.tk.view_inputs()  # every seed the best-validated run chooses from
    assert view["models"] == [f"models/synthetic-passage/tk/p1/seed{seed}/model.pt" for seed in (42, 43, 44)]
    assert view["neural"] == "runs/synthetic-passage/tk.p1.best.test.run"
    assert [table["run"] for table in plan.tk.query_tables()] == ["p1", "d3"]
    tkl_table1 = plan.tkl.table_spec("table1")
    assert [row["label"] for row in tkl_table1["rows"]][:2] == ["BM25", "KNRM"]
    assert tkl_table1["caption"].startswith("TKL paper Table 1 on synthetic-doc (the study's synthetic data, "
                                            "docs/synthetic.md; not the paper's): re-ranking the top 100 BM25")
    assert "docs/ms: throughput" in tkl_table1["caption"] and plan.measures_speed
    # a config that leaves the throughput benchmark out: no docs/ms column, nor its caption sentence
    quiet = StudyPlan.from_config(study_config("neural:\n  efficiency: {enabled: false}\n"))
    assert not quiet.measures_speed and "docs/ms" not in quiet.tkl.table_spec("table1")["caption"]
    assert all(plan.speed_column not in table["columns"] for table in quiet.table_layout().values())
    assert plan.data_description(["synthetic-doc", "synthetic-doc"]).count("synthetic-doc") == 1
    assert plan.socialformer.table_spec("table2")["columns"] == [["test", "nDCG@100"], ["test", "nDCG@10"]]
    assert [row["label"] for row in plan.socialformer.rows("table1")][:3] == ["BM25", "QL", "FirstP"]
    assert plan.choppy.inputs("tk") == {"run": "runs/synthetic-passage/tk.p3.ens.test.run",
                                        "qrels": "data/synthetic-passage/qrels.test.txt"}
    # choppy.runs.drmm names the neural run: its system follows the study's seed (no second DRMM under seed 7)
    assert plan.choppy.inputs("drmm")["run"] == "runs/synthetic-passage/drmm.drmm.s42.test.run"
    seven = StudyPlan.from_config(study_config("seed: 7\n"))
    assert seven.choppy.inputs("drmm")["run"] == "runs/synthetic-passage/drmm.drmm.s7.test.run"
    assert plan.rerank_depths(["p1", "ce-passage"]) == "50-100 (per run)" and plan.rerank_depths(["p1"]) == "100"
    assert plan.headline_tables() == ["results/tables/" + name for name in (
        "first_stage.csv", "tk_table2.csv", "tkl_table1.csv", "tkl_table2.csv", "tkl_evidence.csv", "tkl_regions.csv",
        "socialformer_table1.csv", "socialformer_table2.csv", "choppy_table1.csv")]


def test_a_paper_whose_dataset_the_study_does_not_run_has_no_outputs():
    plan = StudyPlan.from_config(study_config("first_stage: {datasets: [synthetic-passage]}"))
    assert plan.tkl.outputs() == [] and plan.socialformer.outputs() == []
    assert plan.choppy.names() == ["tk", "drmm"]  # its bm25 lists are synthetic-lists
    assert plan.choppy.grid_names() == [] and "results/figures/choppy_fig2.png" not in plan.choppy.outputs()
    every = StudyPlan.from_config(study_config("first_stage: {datasets: [synthetic-passage]}\nchoppy: {grid_runs: []}"))
    assert every.choppy.grid_names() == ["tk", "drmm"] and "results/figures/choppy_fig2.png" in every.choppy.outputs()
    assert plan.headline_tables() == ["results/tables/" + name for name in (
        "first_stage.csv", "tk_table2.csv", "choppy_table1.csv")]
    assert {row["dataset"] for row in plan.tk.table2_rows()} == {"synthetic-passage"}


def test_training_validates_with_the_dev_splits_relevance_threshold():
    plan = StudyPlan.from_config(study_config("datasets:\n  synthetic-passage:\n    rel_threshold: {dev: 2}\n"))
    assert plan.training_settings("p1")["rel_threshold"] == 2  # trains on synthetic-passage
    assert plan.training_settings("d1")["rel_threshold"] == 1  # trains on synthetic-doc
    assert plan.training_settings("p1")["max_steps"] == plan.runs["p1"].training["max_steps"]


def test_a_run_no_target_produces_is_named_at_dag_time():
    """Issue 43: a run trained on a dataset the study does not run (or evaluated on none it runs) is dropped
    from the targets; the plan names it (common.smk logs each as a warning) instead of dropping it silently."""
    assert StudyPlan.from_config(study_config()).idle_runs() == []  # p2's evaluate: [] switches it off on purpose
    plan = StudyPlan.from_config(study_config(
        "first_stage:\n  datasets: [synthetic-doc]\n"
        "neural:\n  runs:\n    idle: {model: knrm, embeddings: w2v, train: synthetic-doc, evaluate: [synthetic-passage]}\n"))
    warnings = plan.idle_runs()
    assert "neural.runs.idle will not run: it evaluates none of first_stage.datasets (synthetic-doc); " \
           "its evaluate: ['synthetic-passage']" in warnings
    assert any(w.startswith("neural.runs.p1 will not run: it trains on 'synthetic-passage', which "
                            "first_stage.datasets does not run") for w in warnings)


def test_the_learning_audit_lists_every_trained_seed():
    plan = StudyPlan.from_config(study_config())
    entries = plan.learning_audit()
    runs = {(entry["run"], entry["seed"]) for entry in entries}
    assert {("p1", 42), ("p1", 43), ("p1", 44), ("d1", 42), ("knrm", 42)} <= runs
    assert not {run for run, _ in runs} & {"d2", "p3"}  # reused and ensembled runs train nothing of their own
    d1 = next(entry for entry in entries if entry["run"] == "d1")
    assert d1["truth"] == "data/synthetic-doc/truth.json" and d1["length"] == 200
    assert d1["log"] == "models/synthetic-doc/tk/d1/seed42/log.csv" and d1["first_stage"] == "bm25"
    assert set(plan.learning_audit_inputs()) >= {d1["log"], d1["metrics"], d1["truth"], "text/w2v/embeddings.npy"}
    # word vectors on synthetic data are probed for its synonymy; an encoder's word pieces are not
    assert d1["vectors"] == {"name": "w2v", "vocab": "text/w2v/vocab", "embeddings": "text/w2v/embeddings.npy"}
    assert "p2" not in {run for run, _ in runs}  # switched off in the default (evaluate: [])
    extended = StudyPlan.from_config(study_config("neural:\n  runs:\n    p2: {evaluate: [synthetic-passage]}\n"))
    assert next(entry for entry in extended.learning_audit() if entry["run"] == "p2")["vectors"]["name"] == "ft"
    assert all(entry["vectors"] is None for entry in entries if entry["run"] == "doc-bert")


def test_a_run_evaluated_on_dev_and_test_re_ranks_both_in_one_job():
    """rule rerank_dev_test's wildcard patterns: runs that keep both splits (not sf-random's test only, not an
    ensemble), datasets with both and no folds; its inputs list each split's queries and candidates."""
    plan = StudyPlan.from_config(study_config())
    patterns = {key: re.compile(pattern) for key, pattern in plan.dev_test_patterns().items()}
    assert patterns["run"].fullmatch("p1") and patterns["run"].fullmatch("drmm")
    assert not patterns["run"].fullmatch("sf-random") and not patterns["run"].fullmatch("p3")  # test only; ensemble
    assert patterns["dataset"].fullmatch("synthetic-passage") and patterns["dataset"].fullmatch("synthetic-doc")
    for run, dataset in [("p1", "synthetic-passage"), ("sf-node", "synthetic-doc")]:
        assert plan.eval_splits(dataset, run) == ["dev", "test"]
    assert plan.eval_splits("synthetic-doc", "sf-random") == ["test"]
    inputs = plan.rerank_split_inputs("synthetic-passage", "p1", 42, ["dev", "test"])
    assert inputs["queries"] == ["text/w2v/synthetic-passage/queries.dev", "text/w2v/synthetic-passage/queries.test"]
    assert inputs["candidates"] == ["runs/synthetic-passage/bm25.dev.run", "runs/synthetic-passage/bm25.test.run"]
    assert inputs["model"] == plan.rerank_inputs("synthetic-passage", "p1", 42, "dev")["model"]


def test_the_rerank_command_reuses_documents_only_where_the_config_says_so():
    default = StudyPlan.from_config(config_file(REPO / "config" / "config.yaml"))
    assert default.rerank_options("d1") == "--batch-size 64"
    plan = StudyPlan.from_config(config_file(REPO / "config" / "config.yaml",
                                             "neural: {rerank: {reuse_documents: true, batch_size: 16}}"))
    assert plan.rerank_options("d1") == "--batch-size 16 --reuse-documents"
    # validation inside training re-ranks the same way; the default study's training settings do not name it
    assert plan.runs["d1"].training["reuse_documents"] is True
    assert "reuse_documents" not in default.runs["d1"].training


def test_a_run_s_query_length_reaches_the_rerank_command():
    runs = "neural: {runs: {d2: {reuse: p1, evaluate: [synthetic-doc], query_length: 500}}}"
    plan = StudyPlan.from_config(config_file(REPO / "config" / "config.yaml", runs))
    assert plan.rerank_options("d2") == "--batch-size 64 --max-query-length 500"
    assert plan.rerank_options("d1") == "--batch-size 64"
