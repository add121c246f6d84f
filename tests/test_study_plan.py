"""The study plan's neural runs (rankstudy.study.runs): inheritance, names, paths, validation."""

import pytest

from rankstudy.config import ConfigError
from rankstudy.study import plan_runs


def config(**runs):
    return {
        "seed": 42,
        "datasets": {"passages": {}, "documents": {}, "elsewhere": {}},
        "first_stage": {"datasets": ["passages", "documents"]},
        "neural": {
            "device": "cpu",
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
    assert run.training == {"loss": "pairwise", "max_steps": 5, "device": "cpu"}
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
                                 "rerank_depth": 30}))
    assert runs["ce"].starts_others and not runs["doc"].starts_others
    assert runs["ce"].tuning_depths((10, 100, 10)) == [10, 100, 10]
    assert runs["doc"].tuning_depths((10, 100, 10)) == [10, 30, 10]
    assert runs["doc"].tuning_depths((50, 100, 10)) == [30, 30, 10]
    assert system_run("tk.p1.s42-full") == "p1" and system_run("bert_cat.doc-bert.ens") == "doc-bert"


def test_the_plan_resolves_encoders_and_warm_starts():
    from rankstudy.study import StudyPlan

    settings = config(ce={"model": "bert", "embeddings": "wp", "train": "passages"},
                      doc={"model": "bert", "embeddings": "wp", "train": "documents", "encoder_from": "ce"},
                      p1={"model": "tk", "embeddings": "w2v", "train": "passages"})
    settings["neural"]["encoders"] = {"study": {"layers": 2}}
    settings["neural"]["models"]["mini"] = {"model": "bert_cat", "encoder": "minilm"}
    plan = StudyPlan.from_config(settings)
    assert plan.encoder_location("study") == "encoders/study" and plan.encoder_location("minilm") == "minilm"
    assert plan.encoder_build("study") == ["encoders/study"] and plan.encoder_build("minilm") == []
    assert plan.model_encoder("mini") == {"encoder": "minilm"}
    assert plan.model_settings("ce", 42) == {"encoder": "encoders/study"}
    assert plan.model_settings("doc", 42) == {"encoder": "models/encoders/ce.s42"}  # warm start
    assert plan.encoder_inputs("ce", 42) == ["encoders/study"]
    assert plan.encoder_inputs("doc", 7) == ["models/encoders/ce.s7"]
    assert plan.encoder_inputs("p1", 42) == [] and plan.model_settings("p1", 42) == {}
