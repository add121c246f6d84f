"""One owner per setting (issue 44): a value lives in one place and every place that uses it reads it there. Each
test changes the owner and sees every reader follow."""

import pytest
import yaml

from helpers import REPO, SCHEMA, with_schema_defaults
from rankstudy.config import from_dict
from rankstudy.study import StudyPlan
from rankstudy.truncation.experiment import TruncationConfig, _choppy_config
from rankstudy.truncation.methods import F1

DEFAULT = REPO / "config" / "config.yaml"


def plan_of(settings, schema=SCHEMA):
    """The plan of a config as common.smk builds it: schema defaults filled in."""
    return StudyPlan.from_config(with_schema_defaults(settings, schema=schema))


def test_choppy_n_has_one_default_the_schemas(tmp_path):
    """The schema's default of choppy.n reaches the study's settings, its TruncationConfig and Choppy's
    positional embedding; neither dataclass has a default of its own."""
    schema = yaml.safe_load(SCHEMA.read_text())
    schema["properties"]["choppy"]["properties"]["n"]["default"] = 7
    (tmp_path / "schema.yaml").write_text(yaml.safe_dump(schema))
    settings = yaml.safe_load(DEFAULT.read_text())
    del settings["choppy"]["n"]
    choppy = plan_of(settings, tmp_path / "schema.yaml").choppy.settings()
    cfg = from_dict(TruncationConfig, choppy, "choppy")
    assert (choppy["n"], cfg.n, _choppy_config(cfg, F1).max_length) == (7, 7, 7)


def efficiency(plan, model, key):
    return plan.efficiency["models"][model].get(key, plan.efficiency["setup"].get(key))


def fig2_length(plan, run):
    return next(point["length"] for point in plan.tkl.section["lengths"] if point["run"] == run)


# config/config.yaml's YAML anchors: (the anchored value, every reader of it in the plan)
OWNERS = {
    "hits: &hits 100": lambda plan: [plan.first_stage.hits("bm25"), plan.choppy.settings()["n"]],
    # the documents' length the runs train on and PACRR pads to
    "max_doc_length: &doc_length 200": lambda plan: [
        plan.runs["doc-pacrr"].training["max_doc_length"], plan.model_settings("doc-pacrr", 42)["max_doc_length"],
        plan.models["co_pacrr"]["max_doc_length"], fig2_length(plan, "d1"), fig2_length(plan, "doc-conv_knrm")],
    # the throughput benchmark's length, at which PACRR pads
    "doc_length: &speed_length 200": lambda plan: [
        plan.efficiency["setup"]["doc_length"], efficiency(plan, "pacrr", "max_doc_length"),
        efficiency(plan, "co_pacrr", "max_doc_length")],
    # TKL's runs, their docs/ms beside them and their points of Fig. 2
    "max_doc_length: &tkl_2k 2000": lambda plan: [
        plan.runs["tkl-2k"].training["max_doc_length"], plan.runs["tkl-log-2k"].training["max_doc_length"],
        efficiency(plan, "tkl-2k", "doc_length"), fig2_length(plan, "tkl-2k")],
    "max_doc_length: &tkl_4k 4000": lambda plan: [
        plan.runs["tkl-4k"].training["max_doc_length"], efficiency(plan, "tkl-4k", "doc_length"),
        fig2_length(plan, "tkl-4k")],
}


@pytest.mark.parametrize("owner", OWNERS)
def test_a_value_the_default_config_shares_is_written_once(owner):
    text = DEFAULT.read_text()
    assert text.count(owner) == 1
    anchor, value = owner.rsplit(" ", 1)
    before = OWNERS[owner](plan_of(yaml.safe_load(text)))
    after = OWNERS[owner](plan_of(yaml.safe_load(text.replace(owner, f"{anchor} 77"))))
    assert set(before) == {int(value)} and set(after) == {77}
