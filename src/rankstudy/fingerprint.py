"""Content fingerprints of a step's input files and directories.

A training directory records the fingerprint of its inputs (``rankstudy.train.loop``): a checkpoint
is resumed only when the inputs are byte for byte those it was trained on. Contents, not mtimes:
``dvc pull`` and ``snakemake --touch`` change mtimes without changing data.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Mapping


def digest(path: str | os.PathLike) -> str:
    """SHA-256 of a file, or of a directory's relative file names and contents (sorted)."""
    path = Path(path)
    total = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if file != path:
            total.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as handle:
            total.update(hashlib.file_digest(handle, "sha256").digest())
    return total.hexdigest()


def fingerprint(inputs: Mapping[str, str | os.PathLike | None]) -> dict[str, str]:
    """``{name: digest}`` of the inputs that exist (a name mapped to None or a missing path is left out)."""
    return {name: digest(path) for name, path in sorted(inputs.items()) if path is not None and Path(path).exists()}
