"""IDCM — Intra-Document Cascading (Hofstätter, Mitra, Zamani, Craswell, Hanbury; SIGIR 2021:
"Intra-Document Cascading: Learning to Select Passages for Neural Document Ranking"), a passage
baseline of Socialformer's Table 1. A cheap selector (ESM) scores every passage; the pre-trained
encoder (ETM) scores only the k best; their ETM scores are combined.

Equations and where they are implemented (passages as in ``models.passage_bert``):

    ESM: ê_t = ReLU(Conv_3(W_p · E(t))) / ‖·‖                    ``PassageSelector.contextualize``:
                                                                 E = the encoder's input word
                                                                 embeddings, detached
    M_ij = cos(ê_{q_i}, ê_{p_j})                                  ``PassageSelector.forward``
    z_k = w_z · Σ_i log max(α ⊙ Σ_j K(M_ij), 10⁻⁴) + b_z           (RBF kernels as KNRM/TK)
    S = top-k passages by z (ties: the earlier passage)            ``top_k_mask``
    ETM: r_k = w · h_[CLS](q, p_k) + b, for k ∈ S                  ``PassageRanker.encode_passages``
    s = Σ_{t=1}^{k} u_t · r_(t)   (r_(t): t-th largest r in S,    ``IDCM.forward``; u init 1
         0 if S has fewer than t passages)

Paper values: 50-token chunks with 7 tokens of overlap each side (64-token windows), k = 4
selected, documents up to 2,000 tokens; the ESM is "CK-small" (projection 768 → 384, 3-gram
convolution to 128, 11 kernels μ = 1.0, 0.9, …, −0.9, σ = 0.1, α init 1, bin weights
U(−0.01, 0.01)), on the ETM's input embeddings with gradients stopped. Here W_p maps the
encoder's width to ``selector_dim`` and the convolution keeps ``selector_dim`` channels (the
original: 768 → 384 → 128). The passages are ``passage_length`` tokens every ``passage_stride``
(one split for MaxP, PARADE and IDCM); ``passage_length: 64, passage_stride: 50`` gives IDCM's.

Deliberate choices:

* Training, simplified and joint: the paper trains in stages (ETM on all passages, then the ESM by
  knowledge distillation from the frozen ETM). Here one run trains both: in training the ETM
  scores *all* of a document's passages and s aggregates its top-k of those (the paper's first
  stage), while the ESM learns from the ETM's (detached) passage scores with a listwise
  distillation loss: per document with ≥ 2 passages, CE(softmax(r), softmax(z)), averaged over
  documents and weighted by ``distill_weight``. The loss reaches the ESM without a change to the
  training loop: ``with_auxiliary_loss`` returns s unchanged and, in backward, adds the loss's
  gradient (as if it were added to the ranking loss; the ESM gets no gradient from the ranking
  loss, the ETM none from the distillation). At evaluation the ESM selects and the ETM scores only
  the k selected passages, so inference cost does not grow with the document; a training step
  costs about as much as MaxP's. ``select_when_training: true`` selects in training as well (cheaper; the ESM
  then only learns to order the passages it already picked).
* The ESM sees word embeddings only (the original passed ids through the full BERT embedding
  layer, adding within-chunk positions); padding embeddings are zeroed before the convolution
  (right-padded, as the original), so padding never changes a passage's z. Query padding is
  masked out of the sum over i.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from rankstudy.models.passage_bert import PassageConfig, PassageRanker
from rankstudy.nn.kernels import KernelPooling, cosine_matrix, default_mus
from rankstudy.nn.pretrained import PAD_ID
from rankstudy.precision import in_fp32


@dataclass
class IDCMConfig(PassageConfig):
    selected_passages: int = 4  # k: passages the selector passes to the encoder (IDCM: 4)
    selector_dim: int = 128  # the selector's convolution channels (IDCM CK-small: 128)
    selector_ngram: int = 3  # the selector's convolution width (IDCM: 3)
    kernels_mu: list[float] = field(default_factory=default_mus)
    kernels_sigma: list[float] = field(default_factory=lambda: [0.1] * 11)
    distill_weight: float = 1.0  # weight of the selector's distillation loss (0: the selector is not trained)
    select_when_training: bool = False  # True: the encoder scores only the selected passages in training too

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.selected_passages < 1:
            raise ValueError(f"selected_passages must be >= 1, got {self.selected_passages}")
        if self.selector_dim < 1 or self.selector_ngram < 1:
            raise ValueError("selector_dim and selector_ngram must be >= 1")
        if len(self.kernels_mu) != len(self.kernels_sigma) or not self.kernels_mu:
            raise ValueError("kernels_mu and kernels_sigma need the same (non-zero) length")
        if self.distill_weight < 0:
            raise ValueError(f"distill_weight must be >= 0, got {self.distill_weight}")


class _AuxiliaryLoss(torch.autograd.Function):
    """Identity on ``output``; backward also sends gradient 1 into ``loss``."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
        ctx.loss_shape = loss.shape
        return output.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, grad.new_ones(ctx.loss_shape)


def with_auxiliary_loss(output: torch.Tensor, loss: torch.Tensor) -> torch.Tensor:
    """``output``, such that backpropagating any loss L through it also backpropagates the scalar
    ``loss``: the gradients are those of L + ``loss`` (one backward pass per forward pass)."""
    if not loss.requires_grad:
        return output
    return _AuxiliaryLoss.apply(output, loss)


def top_k_mask(scores: torch.Tensor, allowed: torch.Tensor, k: int) -> torch.Tensor:
    """[B, P] mask of each row's k highest ``scores`` among ``allowed`` (ties: the lower index)."""
    ranked = scores.masked_fill(~allowed, float("-inf"))
    order = torch.argsort(ranked, dim=1, descending=True, stable=True)
    positions = torch.arange(order.shape[1], device=order.device).expand_as(order)
    rank = torch.empty_like(order).scatter_(1, order, positions)
    return (rank < k) & allowed


class PassageSelector(nn.Module):
    """IDCM's CK-style ESM: a kernel-pooling score per passage from the encoder's word embeddings."""

    def __init__(self, config: IDCMConfig, hidden_size: int):
        super().__init__()
        self.project = nn.Linear(hidden_size, config.selector_dim)
        self.ngram = config.selector_ngram
        self.conv = nn.Conv1d(config.selector_dim, config.selector_dim, config.selector_ngram)
        self.kernels = KernelPooling(config.kernels_mu, config.kernels_sigma)
        self.kernel_scale = nn.Parameter(torch.ones(len(config.kernels_mu)))  # α
        self.bins = nn.Linear(len(config.kernels_mu), 1)
        nn.init.uniform_(self.bins.weight, -0.01, 0.01)

    def contextualize(self, embedded: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """ReLU(Conv(W_p · e)) of n-grams starting at each token, unit length: [N, L, D]."""
        projected = self.project(embedded) * real.unsqueeze(-1)
        padded = F.pad(projected.transpose(1, 2), (0, self.ngram - 1))
        return F.normalize(F.relu(self.conv(padded)).transpose(1, 2), dim=-1, eps=1e-13)

    def forward(self, query_embedded: torch.Tensor, query_real: torch.Tensor,
                passage_embedded: torch.Tensor, passage_real: torch.Tensor) -> torch.Tensor:
        """z [N] for N (query, passage) rows of embeddings [N, L, H] and real-token masks [N, L]."""
        query_real, passage_real = query_real.float(), passage_real.float()
        similarity = cosine_matrix(self.contextualize(query_embedded, query_real),
                                   self.contextualize(passage_embedded, passage_real))
        soft_tf = self.kernels(similarity, query_real.unsqueeze(2) * passage_real.unsqueeze(1))
        features = (torch.log(torch.clamp(soft_tf * self.kernel_scale, min=1e-4)) * query_real.unsqueeze(-1)).sum(1)
        return in_fp32(self.bins)(features).squeeze(-1)


class IDCM(PassageRanker):
    NAME = "idcm"
    LENGTH_GROUPS = False  # the distillation loss is a mean over the pass's documents

    def __init__(self, config: IDCMConfig, embeddings=None):
        super().__init__(config, embeddings)
        self.selector = PassageSelector(config, self.encoder.config.hidden_size)
        self.top_weights = nn.Parameter(torch.ones(config.selected_passages))  # u

    def selection_scores(self, query: torch.Tensor, passages: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """ESM scores z [B, P] of the ``real`` passages (−inf elsewhere)."""
        words = self.encoder.get_input_embeddings()
        rows, columns = real.nonzero(as_tuple=True)
        packed = passages[rows, columns]
        with torch.no_grad():  # the ESM reads the ETM's embeddings; it does not train them
            query_embedded, passage_embedded = words(query), words(packed)
        z = self.selector(query_embedded[rows], (query != PAD_ID)[rows], passage_embedded, packed != PAD_ID)
        return z.new_full(real.shape, float("-inf")).index_put((rows, columns), z)

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        config = self.config
        passages, real = self.passages(document)
        z = self.selection_scores(query, passages, real)
        selected = top_k_mask(z, real, config.selected_passages)
        scored = real if self.training and not config.select_when_training else selected
        hidden = self.encode_passages(query, passages, scored)
        r = in_fp32(self.score)(self.dropout(hidden)).squeeze(-1).masked_fill(~scored, float("-inf"))
        k = min(config.selected_passages, r.shape[1])
        best = r.topk(k, dim=1).values
        best = best.masked_fill(best == float("-inf"), 0.0)  # fewer than k passages: the rest count 0
        score = (best * self.top_weights[:k]).sum(1)
        if self.training and config.distill_weight > 0:
            score = with_auxiliary_loss(score, config.distill_weight * distillation_loss(z, r.detach(), scored))
        return score


def distillation_loss(student: torch.Tensor, teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over documents with ≥ 2 ``mask``ed passages of CE(softmax(teacher), softmax(student)) [B, P]."""
    usable = mask.sum(1) >= 2
    if not usable.any():
        return student.new_zeros(())
    student, teacher, mask = student[usable], teacher[usable], mask[usable]
    log_student = torch.log_softmax(student.masked_fill(~mask, float("-inf")), dim=1)
    target = torch.softmax(teacher.masked_fill(~mask, float("-inf")), dim=1)
    return -(target * log_student.masked_fill(~mask, 0.0)).sum(1).mean()
