"""Train Choppy (``rankstudy.models.choppy``) on metric tables and predict cuts.

Data: ``(scores, tables, lengths)`` numpy arrays — scores and tables float32 [Q, N] (padded with
the list's last score), lengths int [Q]; ``tables[q, i-1]`` is the metric when cutting after i.

Training: ``torch.manual_seed(seed)`` before the model is built (initialisation and dropout), one
permutation of the training lists per epoch from ``default_rng([seed, epoch])``, Adam at
``cfg.lr``, batches of ``cfg.batch_size`` (the last one may be smaller). After every epoch the
dev metric — the mean of ``tables[q, cut-1]`` at the predicted cuts — selects the model (the
first best epoch wins ties); training stops after ``cfg.patience`` epochs without improvement.
Without a dev set (``dev=None``: the Choppy paper's 80/20 train/test protocol) every epoch runs and
the last model is kept. Test data is never seen here.
"""

from __future__ import annotations

import copy
import logging
from contextlib import contextmanager

import numpy as np
import torch

from rankstudy.errors import StudyError
from rankstudy.models.choppy import Choppy, ChoppyConfig
from rankstudy.device import resolve_device

log = logging.getLogger(__name__)

Data = tuple[np.ndarray, np.ndarray, np.ndarray]


def _check(data: Data, cfg: ChoppyConfig, name: str) -> Data:
    scores, tables, lengths = (np.asarray(a) for a in data)
    if scores.ndim != 2 or tables.shape != scores.shape or lengths.shape != scores.shape[:1]:
        raise StudyError(f"{name}: expected scores and tables [Q, N] and lengths [Q], got shapes "
                         f"{scores.shape}, {tables.shape}, {lengths.shape}")
    if len(lengths) == 0:
        raise StudyError(f"{name}: no queries")
    if scores.shape[1] > cfg.max_length:
        raise StudyError(f"{name}: lists of {scores.shape[1]} scores exceed choppy max_length {cfg.max_length}")
    if lengths.min() < 1 or lengths.max() > scores.shape[1]:
        raise StudyError(f"{name}: lengths must lie in [1, {scores.shape[1]}]")
    return scores.astype(np.float32), tables.astype(np.float32), lengths.astype(np.int64)


def _tensors(data: Data, index, device: torch.device) -> list[torch.Tensor]:
    return [torch.as_tensor(a[index], device=device) for a in data]


@contextmanager
def _without_attention_fast_path():
    """PyTorch's inference fast path for attention (``torch._native_multi_head_attention``) with a padding
    mask runs 3.2-3.6x slower on a CPU than the scaled-dot-product path that training takes, for the same
    values (64 lists of 300, d 128, 8 heads, one thread: bench/choppy_predict.py)."""
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


def predict(model: Choppy, scores: np.ndarray, lengths: np.ndarray, device="auto",
            batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(cuts [Q] int64, 1-based; probabilities [Q, N] float32, 0 beyond each list's length)."""
    device = resolve_device(device)
    model.to(device)
    was_training = model.training
    model.eval()
    scores = np.asarray(scores, dtype=np.float32)
    lengths = np.asarray(lengths, dtype=np.int64)
    cuts, probabilities = [], []
    with torch.no_grad(), _without_attention_fast_path():
        for start in range(0, len(scores), batch_size):
            batch = slice(start, start + batch_size)
            logits = model(*_tensors((scores, lengths), batch, device))
            cuts.append(Choppy.predict_cuts(logits).cpu().numpy())
            probabilities.append(torch.softmax(logits, dim=-1).cpu().numpy())
    model.train(was_training)
    return np.concatenate(cuts), np.concatenate(probabilities).astype(np.float32)


def dev_metric(model: Choppy, data: Data, device) -> float:
    """Mean metric at the predicted cuts."""
    scores, tables, lengths = data
    cuts, _ = predict(model, scores, lengths, device)
    return float(tables[np.arange(len(cuts)), cuts - 1].mean())


def train_choppy(train: Data, dev: Data | None, cfg: ChoppyConfig, seed: int,
                 device="auto") -> tuple[Choppy, list[dict]]:
    """Train with early stopping on ``dev`` (None: all epochs, the last model); return the model (on
    ``device``) and per-epoch rows ``{"epoch", "train_loss", "dev_metric"}`` (dev_metric NaN without dev)."""
    device = resolve_device(device)
    train = _check(train, cfg, "train")
    dev = None if dev is None else _check(dev, cfg, "dev")
    torch.manual_seed(seed)
    model = Choppy(cfg)
    model.fit_score_scale(*(torch.as_tensor(a) for a in (train[0], train[2])))
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    best, best_state, since_best, history = -np.inf, None, 0, []
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        order = np.random.default_rng([seed, epoch]).permutation(len(train[0]))
        total = 0.0
        for start in range(0, len(order), cfg.batch_size):
            index = order[start:start + cfg.batch_size]
            scores, tables, lengths = _tensors(train, index, device)
            loss = model.loss(model(scores, lengths), tables, lengths)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
        metric = float("nan") if dev is None else dev_metric(model, dev, device)
        history.append({"epoch": epoch, "train_loss": total / len(order), "dev_metric": metric})
        log.info("choppy epoch %d: train loss %.4f, dev metric %.4f", epoch, total / len(order), metric)
        if dev is None:
            continue
        if metric > best:
            best, since_best = metric, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            since_best += 1
            if since_best >= cfg.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return model, history
