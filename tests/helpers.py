"""Small builders shared by test modules (pytest puts tests/ on sys.path)."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pandas as pd
import torch


def metric_csv(path, system, split, values, measures=("AP", "nDCG@10", "RR@10", "P@10"), dataset="d"):
    """A long-format metrics CSV (as rankstudy evaluate writes) with the same per-query values for every measure."""
    rows = []
    for measure in measures:
        for qid, value in values.items():
            rows.append((dataset, system, split, measure, qid, value))
        rows.append((dataset, system, split, measure, "all", float(np.mean(list(values.values())))))
    pd.DataFrame(rows, columns=["dataset", "system", "split", "measure", "qid", "value"]).to_csv(path, index=False)
    return path


@contextmanager
def single_thread():
    """torch on one intra-op thread: tiny models only pay for a second thread's synchronisation
    (and stay polite on a shared machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def loss_before_and_after(model, optimizer, loss, steps=5):
    """(loss in eval mode, loss in eval mode after ``steps`` training steps on it)."""
    model.eval()
    with torch.no_grad():
        before = loss().item()
    model.train()
    for _ in range(steps):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        after = loss().item()
    return before, after


class FakeStore:
    """In-memory stand-in for ``rankstudy.store.TokenStore``: id -> token ids."""

    def __init__(self, texts: dict[str, list[int]]):
        self.texts = texts

    def lengths(self, ids, max_length: int) -> np.ndarray:
        return np.array([min(len(self.texts[i]), max_length) for i in ids], dtype=np.int64)

    def batch(self, ids, max_length: int) -> np.ndarray:
        rows = [self.texts[i][:max_length] for i in ids]
        out = np.zeros((len(rows), max(1, max(len(r) for r in rows))), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i, :len(row)] = row
        return out


def assert_drawn(png, pdf=None):
    """A figure was drawn, not just written: the PNG decodes to an image of some size with more than one
    colour (an empty canvas is a single colour), and the PDF, if given, is a PDF."""
    from matplotlib import image

    pixels = image.imread(png)
    assert pixels.ndim == 3 and min(pixels.shape[:2]) >= 100, f"{png}: {pixels.shape}"
    assert float(pixels[..., :3].std()) > 0.01, f"{png} is a blank canvas"
    if pdf is not None:
        with open(pdf, "rb") as handle:
            assert handle.read(5) == b"%PDF-", f"{pdf} is not a PDF"
