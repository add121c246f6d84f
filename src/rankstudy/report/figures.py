"""Figures of the study: matplotlib without a display, each written as PREFIX.png and PREFIX.pdf."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (re-exported: importing it from here selects Agg first)

from rankstudy.atomic import atomic_path  # noqa: E402


def save_figure(figure, out_prefix: str | Path) -> None:
    """Write ``figure`` as PREFIX.png and PREFIX.pdf (each atomically) and close it."""
    out_prefix = Path(out_prefix)
    for suffix in (".png", ".pdf"):
        with atomic_path(out_prefix.parent / (out_prefix.name + suffix)) as tmp:
            figure.savefig(tmp, format=suffix[1:], bbox_inches="tight", dpi=120)
    plt.close(figure)
