"""BiCut (Lien, Cohen & Croft, SIGIR 2019), the Choppy paper's learned truncation baseline.

Model: a bidirectional LSTM reads the score sequence of the top N documents; position j's
input is ``[(s_j - mu) / sigma, log(1 + j)]`` (the score, standardised with the training
set's mean and standard deviation over real positions, and the 1-based rank). A linear layer
on the BiLSTM output gives per position a softmax over two decisions, ``continue`` and ``end``.

Loss (what is implemented, per batch): with y_j = 1 for a relevant document and mask m_j = 1
for real (non-padded) positions,

    L = sum_{q, j} m_j [ (1 - y_j) * alpha * p_q(continue_j) + y_j * (1 - alpha) * p_q(end_j) ]
        / sum_{q, j} m_j

i.e. the expected cost of the per-position decisions: continuing at a non-relevant document
costs ``alpha``, ending at a relevant one costs ``1 - alpha`` (``alpha > 0.5`` favours shorter
lists). Deliberate simplifications relative to BiCut: (1) the only features are the score and
the rank (BiCut also allows document statistics); (2) each position's decision is trained
independently with this cost-weighted expected loss, averaged over the real positions of the
batch; the coupling "the list ends at the first end" is applied at test time only.

Test time: the list is cut before the first real position whose decision is ``end``
(p(end) > 0.5): cut = that position - 1, at least 1; a list with no ``end`` is kept whole
(cut = its length). Only F1 is targeted, as in the Choppy paper; the epoch whose model has
the best mean dev F1 is kept (ties: the earliest), the test set is never used.

Determinism: initialisation, dropout and batch order (``default_rng([seed, epoch])``) are
functions of ``seed``; the global torch RNG state is restored afterwards. Bit-identical on
CPU; on CUDA as far as cuDNN's LSTM kernels are deterministic.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rankstudy.config import check_ints
from rankstudy.device import resolve_device
from rankstudy.truncation.baselines import evaluate_cuts

log = logging.getLogger(__name__)

CONTINUE, END = 0, 1


@dataclass
class BiCutConfig:
    hidden: int = 64
    layers: int = 1
    dropout: float = 0.0
    alpha: float = 0.65
    lr: float = 1e-3
    epochs: int = 50
    batch_size: int = 64

    def __post_init__(self) -> None:
        check_ints(self, "hidden", "layers", "epochs", "batch_size")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr!r}")


class BiCut(nn.Module):
    def __init__(self, hidden: int = 64, layers: int = 1, dropout: float = 0.0,
                 score_mean: float = 0.0, score_std: float = 1.0):
        super().__init__()
        self.lstm = nn.LSTM(2, hidden, num_layers=layers, batch_first=True, bidirectional=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * hidden, 2)
        self.register_buffer("score_mean", torch.tensor(float(score_mean)))
        self.register_buffer("score_std", torch.tensor(float(score_std)))

    def forward(self, scores: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Log-probabilities ``[B, N, 2]`` of (continue, end); ``lengths`` (CPU int64) masks padding."""
        n = scores.shape[1]
        ranks = torch.arange(1, n + 1, device=scores.device, dtype=scores.dtype)
        features = torch.stack([(scores - self.score_mean) / self.score_std,
                                torch.log1p(ranks).expand_as(scores)], dim=-1)
        packed = pack_padded_sequence(features, lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=n)
        return torch.log_softmax(self.out(self.dropout(hidden)), dim=-1)


def bicut_loss(log_probs: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, alpha: float) -> torch.Tensor:
    """Mean over real positions of (1-y) alpha p(continue) + y (1-alpha) p(end) (module docstring)."""
    probs = log_probs.exp()
    cost = (1 - labels) * alpha * probs[..., CONTINUE] + labels * (1 - alpha) * probs[..., END]
    return (cost * mask).sum() / mask.sum()


def cuts_from_decisions(end, lengths) -> np.ndarray:
    """1-based cuts: before the first real position marked end (at least 1); no end: the whole list."""
    end = np.asarray(end, dtype=bool)
    lengths = np.asarray(lengths, dtype=np.int64)
    end = end & (np.arange(1, end.shape[1] + 1)[None, :] <= lengths[:, None])
    first = end.argmax(axis=1) + 1
    return np.where(end.any(axis=1), np.maximum(first - 1, 1), lengths)


def _mask(lengths: np.ndarray, n: int) -> np.ndarray:
    return np.arange(n)[None, :] < lengths[:, None]


def _check(scores, other, lengths, name: str):
    scores = np.asarray(scores, dtype=np.float32)
    other = np.asarray(other)
    lengths = np.asarray(lengths, dtype=np.int64)
    if scores.ndim != 2 or other.shape != scores.shape or lengths.shape != (scores.shape[0],):
        raise ValueError(f"{name}: expected scores and labels/tables [Q, N] and lengths [Q], got "
                         f"{scores.shape}, {other.shape}, {lengths.shape}")
    if scores.shape[0] == 0 or (lengths < 1).any() or (lengths > scores.shape[1]).any():
        raise ValueError(f"{name}: needs at least one query and lengths in 1..N")
    return scores, other, lengths


@torch.no_grad()
def predict_cuts(model: BiCut, scores, lengths, batch_size: int = 1024) -> np.ndarray:
    """1-based cuts for padded ``scores[Q, N]`` with real ``lengths[Q]``."""
    scores, _, lengths = _check(scores, scores, lengths, "predict_cuts")
    device = model.score_mean.device
    was_training = model.training
    model.eval()
    end = []
    for start in range(0, len(scores), batch_size):
        log_probs = model(torch.from_numpy(scores[start:start + batch_size]).to(device),
                          torch.from_numpy(lengths[start:start + batch_size]))
        end.append((log_probs[..., END] > log_probs[..., CONTINUE]).cpu().numpy())
    model.train(was_training)
    return cuts_from_decisions(np.concatenate(end), lengths)


def train_bicut(train, dev, cfg: BiCutConfig, seed: int, device: str | torch.device = "auto") -> BiCut:
    """Train on ``train = (scores, labels, lengths)``; keep the epoch with the best dev mean F1.

    ``dev = (scores, f1_tables, lengths)``, or None (no dev set: every epoch, the last model, dev_f1 NaN).
    The returned model (in eval mode, on ``device``) carries ``best_epoch`` (1-based) and ``dev_f1``.
    """
    device = resolve_device(device)
    scores, labels, lengths = _check(*train, "train")
    dev_scores, dev_tables, dev_lengths = (None, None, None) if dev is None else _check(*dev, "dev")
    real = scores[_mask(lengths, scores.shape[1])]
    std = float(real.std())
    forked = [device.index if device.index is not None else torch.cuda.current_device()] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=forked):
        torch.manual_seed(seed)
        model = BiCut(cfg.hidden, cfg.layers, cfg.dropout, float(real.mean()), std if std > 0 else 1.0).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        x = torch.from_numpy(scores).to(device)
        y = torch.from_numpy(labels.astype(np.float32)).to(device)
        m = torch.from_numpy(_mask(lengths, scores.shape[1]).astype(np.float32)).to(device)
        best_f1, best_epoch, best_state = -math.inf, 0, None
        for epoch in range(cfg.epochs):
            model.train()
            order = np.random.default_rng([seed, epoch]).permutation(len(scores))
            for start in range(0, len(order), cfg.batch_size):
                batch = order[start:start + cfg.batch_size]
                index = torch.from_numpy(batch).to(device)
                loss = bicut_loss(model(x[index], torch.from_numpy(lengths[batch])), y[index], m[index], cfg.alpha)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            if dev is None:
                best_f1, best_epoch, best_state = math.nan, epoch + 1, None
                continue
            f1 = float(evaluate_cuts(dev_tables, predict_cuts(model, dev_scores, dev_lengths)).mean())
            log.debug("bicut epoch %d: last batch loss %.4f, dev F1 %.4f", epoch + 1, loss.item(), f1)
            if f1 > best_f1:
                best_f1, best_epoch = f1, epoch + 1
                best_state = {key: value.detach().clone() for key, value in model.state_dict().items()}
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    model.best_epoch, model.dev_f1 = best_epoch, best_f1
    log.info("bicut: best dev F1 %.4f at epoch %d of %d", best_f1, best_epoch, cfg.epochs)
    return model
