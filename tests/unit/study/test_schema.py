"""One source of truth for a setting's default: each closed section of workflow/schemas/config.schema.yaml
that a dataclass reads (``rankstudy.config.from_dict``) names exactly the dataclass's fields, and every
default the schema fills in is the dataclass's own. A key the schema lets through that the dataclass does
not know would fail inside a job; a default that differs would make a run's settings depend on whether the
workflow or the package filled them in."""

import dataclasses

import pytest
import yaml

from helpers import REPO
from rankstudy.datasets.irds import IrdsConfig
from rankstudy.datasets.local import LocalConfig
from rankstudy.datasets.synthetic import SyntheticConfig
from rankstudy.text.study_encoder import StudyEncoderConfig
from rankstudy.train.loop import TrainConfig
from rankstudy.truncation.bicut import BiCutConfig
from rankstudy.truncation.experiment import TruncationConfig
from rankstudy.models.choppy import ChoppyConfig

SCHEMA = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())


def section(*path):
    """The schema node at ``path`` through properties (a name), additionalProperties ('*') or $defs ('$NAME')."""
    node = SCHEMA
    for key in path:
        if key.startswith("$"):
            node = SCHEMA["$defs"][key[1:]]
        elif key == "*":
            node = node["additionalProperties"]
        else:
            node = node["properties"][key]
    return node


def field_defaults(cls):
    """{field: default} of a dataclass (fields without a default are left out)."""
    defaults = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    return defaults


def assert_defaults_match(properties, defaults, where):
    for key, spec in properties.items():
        if key not in defaults:
            continue
        if dataclasses.is_dataclass(defaults[key]):  # a nested section: its own fields' defaults
            assert_defaults_match(spec["properties"], dataclasses.asdict(defaults[key]), f"{where}.{key}")
        elif "default" in spec:
            assert spec["default"] == defaults[key], f"{where}.{key}: schema {spec['default']!r}"


# (schema path, dataclass, fields the workflow fills in from elsewhere, schema keys the workflow itself reads)
SECTIONS = [
    # neural.device, neural.precision and neural.rerank.reuse_documents; the dev split's
    (("neural", "training"), TrainConfig, {"device", "precision", "reuse_documents", "rel_threshold"}, set()),
    (("choppy",), TruncationConfig, set(), {"runs", "grid_runs"}),
    (("$choppy_model",), ChoppyConfig, {"max_length"}, set()),  # choppy.n; choppy.model and model_by_metric.*
    (("choppy", "bicut"), BiCutConfig, set(), set()),
    (("neural", "encoders", "*"), StudyEncoderConfig, set(), {"dataset", "embeddings"}),  # rule pretrain_encoder
    (("$synthetic",), SyntheticConfig, set(), set()),
    (("$dataset", "local"), LocalConfig, set(), set()),
    (("$dataset", "irds"), IrdsConfig, set(), set()),
]


@pytest.mark.parametrize("path, cls, filled_in, workflow_keys", SECTIONS, ids=[".".join(s[0]) for s in SECTIONS])
def test_a_closed_section_names_the_dataclass_fields_and_their_defaults(path, cls, filled_in, workflow_keys):
    node = section(*path)
    assert node.get("additionalProperties") is False, "a section a dataclass reads is closed"
    fields = {field.name for field in dataclasses.fields(cls)}
    assert set(node["properties"]) - workflow_keys == fields - filled_in
    assert_defaults_match(node["properties"], field_defaults(cls), ".".join(path))


def test_choppys_settings_and_each_metrics_are_the_one_closed_section():
    choppy = section("choppy")["properties"]
    assert choppy["model"]["allOf"] == [{"$ref": "#/$defs/choppy_model"}]
    assert choppy["model_by_metric"]["additionalProperties"] is False
    assert choppy["model_by_metric"]["properties"] == {metric: {"$ref": "#/$defs/choppy_model"} for metric in ("f1", "dcg")}
