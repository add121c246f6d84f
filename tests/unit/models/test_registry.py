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
