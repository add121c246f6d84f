"""Dataset sources. Each writes the data contract into one directory:

``collection.tsv``, ``queries.{split}.tsv`` and ``qrels.{split}.txt`` for each split.

The dataset's config section names its ``source`` and carries that source's settings under a
key of the same name (``synthetic:``, ``local:``, ``irds:``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from rankstudy.config import ConfigError


def _synthetic(name: str, settings: Mapping[str, Any], out: Path, seed: int) -> None:
    from rankstudy.datasets import synthetic

    synthetic.export(name, settings, out, seed)


def _local(name: str, settings: Mapping[str, Any], out: Path, seed: int) -> None:
    from rankstudy.datasets import local

    local.export(name, settings, out, seed)


def _irds(name: str, settings: Mapping[str, Any], out: Path, seed: int) -> None:
    from rankstudy.datasets import irds

    irds.export(name, settings, out)


SOURCES: dict[str, Callable[[str, Mapping[str, Any], Path, int], None]] = {
    "synthetic": _synthetic,
    "local": _local,
    "irds": _irds,
}


def export_dataset(name: str, section: Mapping[str, Any], out: Path, seed: int) -> None:
    """Write dataset ``name`` (its whole config section) into directory ``out``."""
    source = section.get("source")
    if source not in SOURCES:
        raise ConfigError(f"datasets.{name}.source: expected one of {', '.join(SOURCES)}, got {source!r}")
    SOURCES[source](name, section.get(source, {}), out, seed)
