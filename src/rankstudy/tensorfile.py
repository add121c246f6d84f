"""``.pt`` files: byte-reproducible writes and pickle-free reads.

``torch.save`` to a path names the zip's root folder after the file, so saving through a temporary
name (``atomic_path``) gave equal tensors different bytes on every run (DVC and checksums saw a
change each time). Saving to an in-memory buffer fixes the root name (``archive``); the bytes are
then written atomically. Reads use ``weights_only=True``: a planted pickle cannot run code, it is
refused with a ``StudyError`` naming the file.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError, first_line


def save_tensors(obj: Any, path: str | os.PathLike) -> None:
    """Write ``obj`` (tensors, numbers, strings, lists, dicts) so that equal contents give equal bytes."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_open(path, "wb") as out:
        out.write(buffer.getbuffer())


def load_tensors(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> Any:
    """Read a ``.pt`` file without unpickling arbitrary objects."""
    if not Path(path).is_file():
        raise StudyError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive: this one is cut short, empty or not torch's
        raise StudyError(f"{path}: not a readable .pt file, truncated or not written by torch (no zip archive)")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        first = first_line(error)
        raise StudyError(f"{path}: refused to load: not a plain tensor file (weights_only: {first}); "
                         f"delete it if you did not write it") from None
    # a damaged archive: torch's zip and pickle readers fail in many ways
    except (RuntimeError, EOFError, ValueError, OSError, IndexError, KeyError) as error:
        raise StudyError(f"{path}: not a readable .pt file, truncated or not written by torch "
                         f"({type(error).__name__}: {error})") from None
