"""The model registry: every model builds from its name, derives from the documented base, and is listed in
docs/neural.md's table."""

import re

from helpers import REPO
from rankstudy.models import MODELS
from rankstudy.models.base import Ranker


def test_every_registered_model_is_a_ranker_listed_in_the_docs():
    documented = set(re.findall(r"`(\w+)`", "\n".join(
        line.split("|")[1] for line in (REPO / "docs" / "neural.md").read_text().splitlines()
        if line.startswith("  | `"))))
    assert set(MODELS) <= documented, set(MODELS) - documented
    assert all(issubclass(model, Ranker) for model, _ in MODELS.values())


def test_a_model_declares_regions_exactly_when_it_scores_with_them():
    """The regions step trusts Ranker.REGIONS (TKL's), so the flag and score_with_regions go together."""
    assert {name for name, (model, _) in MODELS.items() if model.REGIONS} == {"tkl"}
    assert all(model.REGIONS == hasattr(model, "score_with_regions") for model, _ in MODELS.values())
