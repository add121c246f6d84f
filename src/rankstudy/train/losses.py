"""Ranking losses (means over the batch)."""

from __future__ import annotations

import torch


def pairwise_margin_loss(pos_scores: torch.Tensor, neg_scores: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """Hinge loss on score differences, ``torch.nn.MarginRankingLoss`` with target 1:

    ``L = mean_i max(0, margin - (s_pos_i - s_neg_i))``
    """
    if pos_scores.shape != neg_scores.shape:
        raise ValueError(f"score shapes differ: {tuple(pos_scores.shape)} vs {tuple(neg_scores.shape)}")
    return torch.clamp(margin - (pos_scores - neg_scores), min=0).mean()


def listwise_softmax_ce(scores: torch.Tensor) -> torch.Tensor:
    """Softmax cross-entropy with the positive in column 0 of ``scores[B, 1+n]``:

    ``L = mean_i -log(exp(s_i0) / sum_j exp(s_ij)) = mean_i (logsumexp_j s_ij - s_i0)``
    """
    if scores.dim() != 2 or scores.shape[1] < 2:
        raise ValueError(f"expected scores [B, 1+n] with n >= 1, got {tuple(scores.shape)}")
    return (torch.logsumexp(scores, dim=1) - scores[:, 0]).mean()


def margin_mse_loss(pos_scores: torch.Tensor, neg_scores: torch.Tensor, teacher_pos: torch.Tensor,
                    teacher_neg: torch.Tensor) -> torch.Tensor:
    """Margin-MSE (Hofstätter et al. 2020, "Improving Efficient Neural Ranking Models with Cross-Architecture
    Knowledge Distillation", eq. 1): the student's margin regressed on a teacher's,

    ``L = mean_i ((s_pos_i - s_neg_i) - (t_pos_i - t_neg_i))^2``

    Unlike the hinge it is zero only where the margins agree: an easy pair the student already orders
    still carries the teacher's estimate of how far apart the two passages are.
    """
    shapes = {tuple(t.shape) for t in (pos_scores, neg_scores, teacher_pos, teacher_neg)}
    if len(shapes) != 1:
        raise ValueError(f"score shapes differ: {sorted(shapes)}")
    return ((pos_scores - neg_scores) - (teacher_pos - teacher_neg)).square().mean()
