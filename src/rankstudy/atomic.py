"""Atomic outputs: write to a temporary sibling, rename into place on success.

A killed or failing step therefore never leaves a half-written file or directory under
the final name (Snakemake would otherwise treat it as complete on a later run); the temporary a killed
step leaves behind is removed when the output is next written.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, directory: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; move it to ``path`` if the block succeeds.

    With ``directory=True`` the temporary path is an (empty) directory and replaces any
    existing directory at ``path``.
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(final)
    if directory:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
        os.close(fd)
        tmp = Path(name)
    umask = os.umask(0)
    os.umask(umask)
    # mkstemp/mkdtemp create private entries; give them the usual permissions.
    os.chmod(tmp, (0o777 if directory else 0o666) & ~umask)
    try:
        yield tmp
        if directory:
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        else:
            os.replace(tmp, final)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _remove_stale_temporaries(final: Path) -> None:
    """Temporaries of ``final`` that a killed job left (named as mkstemp/mkdtemp name ours: the prefix, 8 random
    characters, the suffix): the job that writes ``final`` now owns them, as Snakemake gives an output one job."""
    for stale in final.parent.glob(f".{glob.escape(final.name)}.{'[a-z0-9_]' * 8}.tmp"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file for writing; it becomes ``path`` only when the block succeeds."""
    if "b" in mode:
        encoding = None
    with atomic_path(path) as tmp:
        with open(tmp, mode, encoding=encoding) as handle:
            yield handle
