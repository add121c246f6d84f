"""Query folds in the study plan (``datasets.<name>.folds``; rankstudy.datasets.folds): a dataset with folds
stands for k fold datasets ``NAME-fold1`` … ``NAME-foldk``, derived from its folded split by one job
(rule ``folds_NAME``). A run that trains on NAME trains one model per fold dataset (train and dev splits)
and re-ranks that fold's test queries; NAME's run of the folded split is the union of those held-out runs
(rule ``fold_merge``), which the evaluation and the tables read like any other run.

A fold dataset keeps only its queries and judgments (``data/NAME-foldI/``): its text (the collection's and
the queries' token stores) and its candidates are NAME's, the candidates cut to the fold's queries
(rule ``fold_candidates``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from rankstudy.datasets.folds import ROLES
from rankstudy.papers.section import Study


DEFAULTS = {"k": 5, "split": "test"}  # the schema's defaults, for plans built from unvalidated dicts (tests)


def fold_names(parent: str, k: int) -> list[str]:
    """The fold datasets of a dataset with k folds, NAME-fold1 … NAME-foldk."""
    return [f"{parent}-fold{i}" for i in range(1, k + 1)]


def alternatives(names: list[str]) -> str:
    """A wildcard pattern matching exactly these names; one that matches nothing if there are none."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


@dataclass(frozen=True)
class Folds:
    plan: Study

    @property
    def parents(self) -> list[str]:
        """The datasets that have folds."""
        return [name for name, spec in self.plan.datasets.items() if "folds" in spec]

    def settings(self, parent: str) -> dict[str, Any]:
        """k, seed (default: the study seed) and the folded split of a dataset with folds."""
        spec = {**DEFAULTS, **self.plan.datasets[parent]["folds"]}
        return {**spec, "seed": spec.get("seed", self.plan.config["seed"])}

    def split(self, parent: str) -> str:
        """The split whose judged queries a dataset's folds share out."""
        return self.settings(parent)["split"]

    def names(self, parent: str) -> list[str]:
        """The fold datasets of a dataset, NAME-fold1 … NAME-foldk."""
        return fold_names(parent, self.settings(parent)["k"])

    @cached_property
    def _parent_of(self) -> dict[str, str]:
        return {fold: parent for parent in self.parents for fold in self.names(parent)}

    def parent(self, dataset: str) -> str | None:
        """The dataset a fold dataset was derived from; None for any other dataset."""
        return self._parent_of.get(dataset)

    def text_source(self, dataset: str, split: str) -> tuple[str, str]:
        """(dataset, split) whose token stores hold a split's queries: a fold's are its parent's folded split
        (the stores are read by query id), any other dataset's its own."""
        parent = self.parent(dataset)
        return (parent, self.split(parent)) if parent else (dataset, split)

    def collection_source(self, dataset: str) -> str:
        """The dataset whose collection (and its token stores) a dataset reads: a fold reads its parent's."""
        return self.parent(dataset) or dataset

    # ---- the rules: folds_NAME, fold_candidates, fold_merge ------------------------------------------------
    def inputs(self, parent: str) -> dict[str, str]:
        """What rule folds_NAME reads: the folded split's queries and qrels, and the collection (train positives
        must have text)."""
        split, data = self.split(parent), f"data/{parent}"
        return {"queries": f"{data}/queries.{split}.tsv", "qrels": f"{data}/qrels.{split}.txt",
                "collection": f"{data}/collection.tsv"}

    def outputs(self, parent: str) -> list[str]:
        """Every fold dataset's queries and qrels of each split (train, dev, test)."""
        return [f"data/{fold}/{kind}.{role}.{ext}" for fold in self.names(parent) for role in ROLES
                for kind, ext in (("queries", "tsv"), ("qrels", "txt"))]

    def candidates_input(self, dataset: str, system: str) -> str:
        """The parent's run of the folded split that a fold's candidate lists of a system are cut from."""
        parent = self.parent(dataset)
        return f"runs/{parent}/{system}.{self.split(parent)}.run"

    def merge_inputs(self, dataset: str, system: str) -> list[str]:
        """The held-out runs of a system on each fold (its test split) that make the dataset's run."""
        return [f"runs/{fold}/{system}.test.run" for fold in self.names(dataset)]

    def runs(self) -> list[str]:
        """The neural runs whose models train on a dataset with folds (one model per fold), reuses included."""
        return [name for name, run in self.plan.runs.items() if run.train in self.parents]

    def patterns(self) -> dict[str, str]:
        """Wildcard patterns of the fold rules: fold datasets, datasets with folds, their folded splits, the
        runs trained on folds and the first-stage systems."""
        return {"fold": alternatives(list(self._parent_of)), "parent": alternatives(self.parents),
                "split": alternatives(sorted({self.split(parent) for parent in self.parents})),
                "run": alternatives(self.runs()), "system": alternatives(list(self.plan.systems))}

    def description(self, parent: str) -> str:
        """The folds in words, for captions."""
        settings = self.settings(parent)
        return (f"{settings['k']} query folds of its {settings['split']} queries (seed {settings['seed']}): each "
                f"fold re-ranked by a model trained on {settings['k'] - 2} folds and validated on 1 more")
