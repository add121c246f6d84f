"""TKL — Transformer-Kernel for long documents (Hofstätter et al., SIGIR 2020: "Local
Self-Attention over Long Text for Efficient Document Retrieval").

Equations (numbered in the order of the paper's model description) and where they are implemented:

    (1) q̂_i = α·q_i + (1 − α)·TF(q_i + p_i)            ``contextualize_queries``: TK's mixing (both
                                                         models are ``tk.Contextualizing``), the whole
                                                         query in one window
    (2) d̂_j = α·d_j + (1 − α)·TF(d^c + p_{0..49})_j     ``_contextualize_chunks``, ``match_document``:
        for the chunk c = ⌊j / 40⌋, d^c = tokens         the document is cut into chunks of 40 tokens
        40c − 5 … 40c + 44                               with 5 context tokens each side; the same
                                                         TF runs over every chunk (local
                                                         self-attention), the context tokens are
                                                         dropped and the chunks re-joined
    (3) M_ij = cos(q̂_i, d̂_j)                            ``match_document`` (nn.kernels.cosine_matrix,
                                                         chunk by chunk)
        K_k(M_ij) = exp(−(M_ij − μ_k)² / 2σ_k²)          ``kernel_activations``
    (4) x_ikw = Σ_{j = w·s}^{w·s + z − 1} K_k(M_ij)      ``window_sums``: soft-TF in saturation
                                                         windows of z = 30 tokens every s = 2 tokens
    (5) sat(x) = a·x^(1/b) − c                           ``saturate`` (``saturation: embedding``);
        [a, b, c] = W_{a,b,c}·[ReLU(e_i) ; l_w]          e_i: learned salience of query term i,
                    + bias_{a,b,c}                       l_w: real tokens in window w; the linear
                                                         ablation is (5) with b = 1: a·x − c
    (6) r_w = Σ_k v_k Σ_i sat(x_ikw)                     ``window_scores``
    (7) s = Σ_{t=1}^{3} Σ_{o=−2}^{2} u_{t,o}·r_{w_t + o}   ``select_regions``, ``_region_features``,
                                                         ``region_weights``: w_1 … w_3 are the best
                                                         local maxima of r that do not overlap

Deliberate choices — where we follow the original code (matchmaker's ``TKL_sigir20``) and where
we depart from it:

* As the original: 11 kernels with TK's μ and σ = 0.1; v is a bias-free Linear(11→1) initialised
  U(−0.014, 0.014); u a bias-free Linear(15→1) initialised to 1 (the original ``chunk_scoring``);
  chunks of 40 with 5 context tokens each side; chunks whose central 40 tokens are all padding
  are skipped and the others packed into one batch for the transformer; positions restart in
  every chunk (``re_use_encoding``), here positions 0 … 49 of the sinusoid features TK uses (the
  original learned a second copy for documents).
* In addition, positions after the last real token of the whole batch are cut before anything is
  computed, so padding a batch further costs nothing (bench/tkl_speed.py).
* (5) as the original: three Linear(2→1) layers with biases initialised to
  ``saturation_bias_init`` (100) and weights U(−0.014, 0.014), so that at initialisation
  sat(x) ≈ 100·(x^(1/100) − 1) ≈ ln x (test_tkl.py). Departures: the salience e_i is an
  nn.Embedding(vocabulary, 1) initialised with the terms' IDF when ``idf`` is given to the
  constructor, else 1 for every term (the original reduced the contextualised query vector with a
  Linear(D→1)); the pair [e_i; l_w] goes in raw (the original layer-normalised it, which for two
  features keeps only the sign of e_i − l_w); l_w counts real tokens, OOV included (the original
  counted tokens with a non-zero activation).
* ``saturation: log`` is ln(max(x, 1e-10)) (the original also multiplied x by a learned
  per-kernel factor initialised to 1; left out); ``saturation: linear`` is the paper's ablation,
  (5) with b = 1, a·x − c from the same [ReLU(e_i); l_w] (the original's linear variant learned
  a·x + b from IDF features); its a and c start at bias 1 and 0, so that it starts as x itself,
  as the embedding saturation starts as about ln x.
* Saturation windows start at every s-th position inside the document (w·s < its length) and are
  cut at its end; windows without a real token are left out. The original slid only full windows
  over the batch's padded length, so a document's last windows depended on the other documents of
  its batch; ours make a document's score independent of its padding (tested).
* Region selection: the candidates are local maxima of r among the valid windows (r_w ≥ both
  neighbours; the original took plain argmaxes, which may sit on a slope next to a suppressed
  area). The best candidate is chosen, every window that shares a token with it is suppressed
  (|w − w_t|·s < z, as the original's "< window / 2" in window units; always at least the ±2
  neighbours, so no window is scored twice), three times. Neighbours past the document's ends or
  without real tokens contribute 0 (the original clamped them to the first/last window, repeating
  its score; ``region_start: repeat`` does so before the first window, where running both side by
  side showed the difference), and so do missing regions (fewer than three local maxima). The
  chosen windows share no token; a region's span with its neighbours (``score_with_regions``) may overlap the next one
  by up to 2·2·s tokens.
* Masking as TK: padding is no token; OOV (id 1) is a token (for l_w and the windows) that
  matches nothing, and OOV query terms are left out of the sum over i.

Efficiency: at inference, distinct queries of a batch are contextualised once; on CPU a batch is
scored in slices of at most ``cpu_slice_tokens`` document positions (8 documents of 2000 tokens,
4 of 4000: the kernel tensors of a slice keep one size), shared out between the threads
(``nn.slices``: each thread scores whole slices on one torch thread), and the transformer runs over the packed
chunks in groups of ``cpu_slice_chunks`` (both measured in bench/tkl_speed.py: the activations
stay in cache, and their memory is one slice's whatever the batch and the document length).
With n > 1 torch threads the batch is cut into at least n equal slices (``nn.slices.thread_slice_size``):
a batch that fit one slice (16 documents of 1,000 tokens) ran as one slice with every op split between
the threads, slower per document than 2,000 tokens, and 16 of 1,500 tokens were shared out as 10 and 6. On one
thread the slices are as configured, so the study's runs (``neural.threads: 1``) score bit for bit as before;
with more, a document's score is a one-thread run's over the same slices, which can differ from the
one-thread slicing's in the last bit (the Linear(15→1) of (7) rounds by the slice's number of rows).
Without autograd the last transformer layer computes the 40 central positions of a chunk only (the 10 context
positions are keys and values, never outputs: ``_contextualize_chunks``).
(2) reads no query, so re-ranking may contextualise each document once and score it against every query that
ranks it (``encode_documents``, ``score_encoded``; ``rankstudy.rerank``, ``neural.rerank.reuse_documents``): the
same scores up to float rounding (tested), at a fraction of the cost when documents recur across queries'
lists (bench/document_reuse.py).
Kernel activations are laid out [B, Lq, K, Ld], so the window sums reduce a strided view of the
last dimension: no [B, Lq, windows, 30, K] tensor exists; in training their gradient is itself a window
sum (``strided_window_sums``) rather than autograd's scatter of every window (bench/train_step.py).

Training with ``region_backward`` (the default): the score (7) reads 3 regions of a document, each 38 tokens
(a window and its ±2 neighbours), so only the chunks holding those tokens — at most 2 per region, 6 of the
50 chunks of 2,000 tokens — get a gradient. A training pass therefore runs (2)-(7) once without autograd
over every chunk to choose the regions, then again with autograd over those chunks only (the other
positions' cosines enter as constants): the same score and gradients up to rounding (tested), while the
transformer's backward pass, the bulk of a step, covers a few chunks per document (a step at 2,000 tokens
3.7-4.0× the reference's: bench/results/busy_speed_regions.md). With dropout the two passes would draw other
masks, so a model with dropout trains with the single pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rankstudy.models.tk import ContextualizerConfig, Contextualizing, build_contextualizer
from rankstudy.nn.kernels import cosine_matrix, cosine_rows, token_masks, unit_vectors
from rankstudy.nn.slices import map_slices, thread_slice_size
from rankstudy.precision import in_fp32

SATURATIONS = ("embedding", "log", "linear")


def _window_sums(values: torch.Tensor, size: int, stride: int) -> torch.Tensor:
    """Each sum reduces a strided view (``Tensor.unfold``) of the values: no window is copied
    (single thread, [8, 8, 11, 2000]: 4.4 ms, against 17.5 ms for avg_pool1d and 31 ms for
    conv1d); only the few windows that run past the end see a padded copy of the tail."""
    length = values.shape[-1]
    windows = -(-length // stride)
    inside = (length - size) // stride + 1 if length >= size else 0  # windows within the sequence
    parts = [values.unfold(-1, size, stride).sum(-1)] if inside else []
    if inside < windows:
        tail = values[..., inside * stride:]
        tail = F.pad(tail, (0, (windows - inside - 1) * stride + size - tail.shape[-1]))
        parts.append(tail.unfold(-1, size, stride).sum(-1))
    return torch.cat(parts, -1) if len(parts) > 1 else parts[0]


class _WindowSumsFunction(torch.autograd.Function):
    """``_window_sums`` with a backward that is itself a window sum. Autograd's own backward of
    ``unfold`` scatters every window back (a tenth of a TKL training step at 2,000 tokens); when the
    stride divides the window, position j = stride·m + r lies in windows m − size/stride + 1 … m,
    so its gradient is the sum of size/stride consecutive window gradients, shared by the stride
    positions of group m (tested against autograd)."""

    @staticmethod
    def forward(ctx, values: torch.Tensor, size: int, stride: int) -> torch.Tensor:
        ctx.length, ctx.span, ctx.stride = values.shape[-1], size // stride, stride
        return _window_sums(values, size, stride)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        groups = F.pad(grad, (ctx.span - 1, 0)).unfold(-1, ctx.span, 1).sum(-1)  # [..., W]
        positions = groups.unsqueeze(-1).expand(*groups.shape, ctx.stride).reshape(*groups.shape[:-1], -1)
        return positions[..., :ctx.length], None, None


def strided_window_sums(values: torch.Tensor, size: int, stride: int) -> torch.Tensor:
    """Sums of ``size`` positions starting every ``stride`` positions inside the sequence (zeros past
    its end): [..., L] -> [..., ceil(L / stride)]."""
    if values.requires_grad and size % stride == 0:
        return _WindowSumsFunction.apply(values, size, stride)
    return _window_sums(values, size, stride)


@dataclass
class TKLConfig(ContextualizerConfig):
    chunk_size: int = 40  # central tokens per chunk
    overlap: int = 5  # context tokens on each side of a chunk (chunk + 2·overlap = 50 contextualised)
    saturation_window: int = 30  # tokens per saturation window
    saturation_stride: int = 2  # tokens between window starts
    saturation: str = "embedding"  # "embedding" (learned a·x^(1/b) − c), "log" or "linear"
    saturation_bias_init: float = 100.0  # bias of the a, b, c layers: ≈ ln x at initialisation
    top_regions: int = 3
    region_neighbours: int = 2  # windows each side of a chosen window that are scored with it
    # neighbours before the first window: 0 ("zero"), or the first window's score ("repeat", the published code)
    region_start: str = "zero"
    max_length: int = 512  # positions the sinusoid features cover: queries and one extended chunk
    # CPU inference: most document positions per slice of the batch (at most this // the batch's length
    # documents, at least 1, and with n torch threads at least n equal slices; 0 = whole batch) and packed
    # chunks per transformer call (0 = all at once); the activations stay in cache (bench/tkl_speed.py).
    cpu_slice_tokens: int = 16000
    cpu_slice_chunks: int = 32
    # training: autograd over the chunks that the chosen regions read only (the others' gradient is 0); the
    # regions are chosen in a forward pass without autograd first. Used where dropout is 0.
    region_backward: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.chunk_size < 1 or self.overlap < 0:
            raise ValueError("chunk_size must be positive and overlap non-negative")
        if self.saturation_window < 1 or not 1 <= self.saturation_stride <= self.saturation_window:
            raise ValueError("saturation_window must be positive and 1 <= saturation_stride <= saturation_window")
        if self.saturation not in SATURATIONS:
            raise ValueError(f"saturation must be one of {', '.join(SATURATIONS)}, not {self.saturation!r}")
        if self.top_regions < 1 or self.region_neighbours < 0:
            raise ValueError("top_regions must be positive and region_neighbours non-negative")
        if self.region_start not in ("zero", "repeat"):
            raise ValueError(f"region_start must be 'zero' or 'repeat', not {self.region_start!r}")
        if self.max_length < self.chunk_size + 2 * self.overlap:
            raise ValueError(f"max_length {self.max_length} is shorter than one chunk with its context "
                             f"({self.chunk_size + 2 * self.overlap})")
        if self.cpu_slice_tokens < 0 or self.cpu_slice_chunks < 0:
            raise ValueError("cpu_slice_tokens and cpu_slice_chunks must be >= 0")


class TKL(Contextualizing):
    """TK's contextualisation (1) (``Contextualizing``) for queries and for the packed document chunks (2)."""

    REGIONS = True  # score_with_regions: the regions step reads which windows it chose
    NEEDS_IDF = True  # training builds it with the collection's IDF (the salience e_i's initial values)

    def __init__(self, config: TKLConfig, embeddings: np.ndarray, idf: np.ndarray | None = None):
        """``embeddings``: [vocabulary, D] matrix (row 0 padding, row 1 OOV); ``idf``: optional
        [vocabulary] initial salience e of the embedding and linear saturations (default 1; unused
        by the log saturation)."""
        super().__init__()
        self.config = config
        build_contextualizer(self, config, embeddings, config.max_length)
        vocabulary = self.embedding.num_embeddings
        n_kernels = self.kernels.count
        if config.saturation in ("embedding", "linear"):
            salience = torch.ones(vocabulary, 1)
            if idf is not None:
                idf = torch.as_tensor(np.asarray(idf, dtype=np.float32))
                if idf.shape != (vocabulary,):
                    raise ValueError(f"idf has shape {tuple(idf.shape)}, expected ({vocabulary},)")
                salience = idf.view(-1, 1).clone()
            self.saturation_salience = nn.Embedding.from_pretrained(salience, freeze=False)
            # linear: a·x − c starts as x (biases 1 and 0); embedding: a·x^(1/b) − c as about ln x
            biases = {"a": 1.0, "c": 0.0} if config.saturation == "linear" else dict.fromkeys("abc", config.saturation_bias_init)
            layers = {name: nn.Linear(2, 1) for name in biases}  # all made, then all set: the seed's draws
            for name, layer in layers.items():
                nn.init.constant_(layer.bias, biases[name])
                nn.init.uniform_(layer.weight, -config.dense_init, config.dense_init)
            self.saturation_a = layers["a"]
            if "b" in layers:  # the exponent of the embedding saturation (the linear one is a·x − c)
                self.saturation_b = layers["b"]
            self.saturation_c = layers["c"]
        self.dense = nn.Linear(n_kernels, 1, bias=False)
        nn.init.uniform_(self.dense.weight, -config.dense_init, config.dense_init)
        self.region_weights = nn.Linear(config.top_regions * (2 * config.region_neighbours + 1), 1, bias=False)
        nn.init.ones_(self.region_weights.weight)

    # (2) ---------------------------------------------------------------------------------
    def _chunk(self, document: torch.Tensor) -> torch.Tensor:
        """Document ids [B, Ld] -> extended chunks [B, C, chunk + 2·overlap] (a view, no copy)."""
        size, overlap = self.config.chunk_size, self.config.overlap
        chunks = -(-document.shape[1] // size)
        padded = F.pad(document, (overlap, chunks * size + overlap - document.shape[1]))
        return padded.unfold(1, size + 2 * overlap, size)

    def _packed_chunks(self, document: torch.Tensor,
                       only: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids of the chunks to contextualise [N, chunk + 2·overlap], kept-chunk mask [B, C]):
        chunks whose central tokens are all padding are skipped, and with ``only`` [B, C] those it leaves
        out; packed chunk n is the n-th True of the mask in row-major order."""
        size, overlap = self.config.chunk_size, self.config.overlap
        chunks = self._chunk(document)
        keep = (chunks[:, :, overlap:overlap + size] != 0).any(2)
        if only is not None:
            keep &= only
        return chunks[keep], keep

    def _chunk_groups(self, packed: torch.Tensor):
        """Slices of the packed chunks that go through the transformer together."""
        group = self.config.cpu_slice_chunks
        if not self._slicing(packed) or group == 0:
            group = max(packed.shape[0], 1)
        return [(start, packed[start:start + group]) for start in range(0, packed.shape[0], group)]

    def _contextualize_chunks(self, chunks: torch.Tensor) -> torch.Tensor:
        """(2) for extended chunks [n, chunk + 2·overlap] -> central representations [n, chunk, D]. Without
        autograd (inference, choosing the regions in training) the last transformer layer runs for the central
        positions only: the same values, at 2,000 tokens an inference pass 4-6 % and a training step 4-13 % faster
        (bench/results/tkl_central_rows.md). With autograd every position runs, as the weights' gradients sum
        over them: fewer positions would change the gradients' rounding, and with it the study's training runs
        and pinned results."""
        central = slice(self.config.overlap, self.config.overlap + self.config.chunk_size)
        if torch.is_grad_enabled():
            return self.contextualize(chunks)[0][:, central]
        return self.contextualize(chunks, rows=central)[0]

    # (3) ---------------------------------------------------------------------------------
    def match_document(self, query: torch.Tensor, document: torch.Tensor, only: torch.Tensor | None = None,
                       base: torch.Tensor | None = None) -> torch.Tensor:
        """Cosine matrix [B, Lq, Ld] of contextualised query terms and re-joined document tokens
        (0 at padding; only kept chunks are computed). With ``only`` [B, C], the chunks it marks are
        computed and the others' positions read ``base`` [B, Lq, Ld]."""
        packed, keep = self._packed_chunks(document, only)
        batch, terms, length, size = query.shape[0], query.shape[1], document.shape[1], self.config.chunk_size
        n_chunks = keep.shape[1]
        if base is None:
            joined = query.new_zeros(batch * n_chunks, terms, size)
        else:  # [B, Lq, Ld] -> one row of chunk-size positions per chunk, [B·C, Lq, chunk]
            joined = F.pad(base, (0, n_chunks * size - length)).view(batch, terms, n_chunks, size)
            joined = joined.transpose(1, 2).reshape(batch * n_chunks, terms, size)
        if packed.shape[0]:  # a real token in the batch
            owners = keep.nonzero()[:, 0]  # document of each packed chunk
            cosine = torch.cat([cosine_matrix(query[owners[start:start + len(chunks)]],
                                              self._contextualize_chunks(chunks))
                                for start, chunks in self._chunk_groups(packed)])  # [N, Lq, chunk]
            joined = joined.index_put((keep.view(-1),), cosine)
        joined = joined.view(batch, n_chunks, terms, size).transpose(1, 2)
        return joined.reshape(batch, terms, -1)[:, :, :length]

    def kernel_activations(self, cosine: torch.Tensor, matchable: torch.Tensor) -> torch.Tensor:
        """K_k(M_ij) with unmatchable document tokens masked: cosine [B, Lq, Ld], matchable
        [B, Ld] -> [B, Lq, K, Ld] (kernels before positions, so that the window sums pool the
        last dimension; query terms are masked in ``window_scores``)."""
        mu, scale = self.kernels.mu.view(1, 1, -1, 1), self.kernels.exponent_scale.view(1, 1, -1, 1)
        raw = torch.exp(torch.square(cosine.unsqueeze(2) - mu) * scale)
        return raw * matchable.view(matchable.shape[0], 1, 1, -1)

    # (4) ---------------------------------------------------------------------------------
    def window_sums(self, values: torch.Tensor) -> torch.Tensor:
        """Sums over windows of ``saturation_window`` positions starting every
        ``saturation_stride`` positions inside the sequence (zeros past its end):
        [..., L] -> [..., ceil(L / stride)] (``strided_window_sums``)."""
        return strided_window_sums(values, self.config.saturation_window, self.config.saturation_stride)

    # (5) ---------------------------------------------------------------------------------
    def saturate(self, soft_tf: torch.Tensor, query: torch.Tensor, window_tokens: torch.Tensor) -> torch.Tensor:
        """sat(x) for x = soft_tf [B, Lq, K, W], query ids [B, Lq], window token counts [B, W]."""
        kind = self.config.saturation
        if kind == "log":
            return torch.log(torch.clamp(soft_tf, min=1e-10))
        salience = F.relu(self.saturation_salience(query))  # [B, Lq, 1]
        tokens = window_tokens.unsqueeze(1)  # [B, 1, W]

        def linear(layer: nn.Linear) -> torch.Tensor:  # W·[ReLU(e_i); l_w] + bias -> [B, Lq, 1, W]
            weight = layer.weight.view(2)
            return (salience * weight[0] + tokens * weight[1] + layer.bias).unsqueeze(2)

        a, c = linear(self.saturation_a), linear(self.saturation_c)
        if kind == "linear":
            return a * soft_tf - c
        logs = torch.log(torch.clamp(soft_tf, min=1e-10))
        return a * torch.exp(logs / linear(self.saturation_b)) - c

    # (6) ---------------------------------------------------------------------------------
    def window_scores(self, query_ids: torch.Tensor, query: torch.Tensor, query_match: torch.Tensor,
                      document: torch.Tensor, cosine: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(r_w [B, W], window has a real token [B, W]) for contextualised query terms (and their cosine
        matrix with the document, ``match_document``'s, where already computed)."""
        cosine = self.match_document(query, document) if cosine is None else cosine
        return self._window_scores(query_ids, query_match, document, cosine)

    @in_fp32  # (3)-(6) from the cosines on in fp32 under bf16 autocast, as TK's kernels (rankstudy.precision)
    def _window_scores(self, query_ids: torch.Tensor, query_match: torch.Tensor, document: torch.Tensor,
                       cosine: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, matchable = token_masks(document)
        activations = self.kernel_activations(cosine, matchable)
        soft_tf = self.window_sums(activations)  # [B, Lq, K, W]
        window_tokens = torch.round(self.window_sums(tokens))  # [B, W]
        saturated = self.saturate(soft_tf, query_ids, window_tokens)
        batch, terms, kernels, windows = saturated.shape
        # Σ_k v_k Σ_i m_i·sat as one batched product: coefficients m_i·v_k [B, 1, Lq·K]
        coefficients = (query_match.unsqueeze(2) * self.dense.weight.view(1, 1, -1)).view(batch, 1, -1)
        scores = torch.bmm(coefficients, saturated.reshape(batch, terms * kernels, windows)).squeeze(1)
        return scores, window_tokens > 0

    # (7) ---------------------------------------------------------------------------------
    def select_regions(self, scores: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy top local maxima of window scores [B, W] (valid: bool [B, W]) ->
        (chosen window index [B, top_regions], found [B, top_regions])."""
        top, stride = self.config.top_regions, self.config.saturation_stride
        radius = max(math.ceil(self.config.saturation_window / stride), 2 * self.config.region_neighbours + 1)
        ranked = scores.detach().masked_fill(~valid, float("-inf"))
        left = F.pad(ranked[:, :-1], (1, 0), value=float("-inf"))
        right = F.pad(ranked[:, 1:], (0, 1), value=float("-inf"))
        available = ranked.masked_fill(~(valid & (ranked >= left) & (ranked >= right)), float("-inf"))
        index = torch.arange(scores.shape[1], device=scores.device)
        chosen, found = [], []
        for _ in range(top):
            best = available.argmax(1)
            found.append(torch.isfinite(available.gather(1, best.unsqueeze(1)).squeeze(1)))
            chosen.append(best)
            available = available.masked_fill((index - best.unsqueeze(1)).abs() < radius, float("-inf"))
        return torch.stack(chosen, 1), torch.stack(found, 1)

    def _region_features(self, scores: torch.Tensor, valid: torch.Tensor, chosen: torch.Tensor,
                         found: torch.Tensor) -> torch.Tensor:
        """Scores of each chosen window and its neighbours, 0 outside / invalid / not found:
        [B, top_regions · (2·neighbours + 1)], region-major, offsets −n … n. ``region_start: repeat``:
        neighbours before the first window read the first window's score (the published code)."""
        n = self.config.region_neighbours
        offsets = torch.arange(-n, n + 1, device=scores.device)
        neighbours = chosen.unsqueeze(2) + offsets  # [B, R, 2n+1]
        inside = (neighbours < scores.shape[1]) & found.unsqueeze(2)
        if self.config.region_start == "zero":
            inside &= neighbours >= 0
        neighbours = neighbours.clamp(0, scores.shape[1] - 1).flatten(1)
        values = scores.masked_fill(~valid, 0.0).gather(1, neighbours).view(inside.shape)
        return (values * inside).flatten(1)

    # forward -----------------------------------------------------------------------------
    def _slicing(self, document: torch.Tensor) -> bool:
        return not self.training and document.device.type == "cpu"

    def _trim(self, document: torch.Tensor) -> torch.Tensor:
        """Cut the positions after the batch's last real token (they change no score)."""
        if document.shape[1] == 0:
            return document
        real = (document != 0).any(0)
        last = int(real.nonzero().max()) + 1 if bool(real.any()) else 1
        return document[:, :last]

    def _score(self, query: torch.Tensor, document: torch.Tensor) -> dict[str, torch.Tensor]:
        q, _, q_match = self.contextualize_queries(query)
        document = self._trim(document)
        length = token_masks(document)[0].cumsum(1).argmax(1) + 1
        if self.config.region_backward and not self.config.dropout and self.training and torch.is_grad_enabled():
            with torch.no_grad():  # (2)-(7) without autograd: which regions score
                cosine = self.match_document(q, document)
                chosen, found = self.select_regions(*self.window_scores(query, q, q_match, document, cosine))
            # with autograd, the chunks the regions read; the others' cosines stay constants
            cosine = self.match_document(q, document, self._region_chunks(self.region_spans(chosen, found, length),
                                                                          document.shape[1]), cosine)
            scores, valid = self.window_scores(query, q, q_match, document, cosine)
        else:
            scores, valid = self.window_scores(query, q, q_match, document)
            chosen, found = self.select_regions(scores, valid)
        return {"score": self._region_score(scores, valid, chosen, found), "chosen": chosen, "found": found,
                "length": length}

    @in_fp32  # a bf16 score would tie documents (rankstudy.precision)
    def _region_score(self, scores: torch.Tensor, valid: torch.Tensor, chosen: torch.Tensor,
                      found: torch.Tensor) -> torch.Tensor:
        """(7): the chosen regions' window scores weighted by u, [B]."""
        return self.region_weights(self._region_features(scores, valid, chosen, found)).squeeze(1)

    def _region_chunks(self, spans: torch.Tensor, length: int) -> torch.Tensor:
        """Chunks [B, C] (bool) whose central tokens overlap a region's token span (spans [B, R, 2], −1: none)."""
        size = self.config.chunk_size
        first = torch.arange(0, -(-length // size) * size, size, device=spans.device)  # each chunk's first token
        start, end = spans[..., :1], spans[..., 1:]  # [B, R, 1]
        return ((start >= 0) & (start < first + size) & (end > first)).any(1)

    def _slice_size(self, count: int, document: torch.Tensor) -> int:
        """Rows a slice of ``count`` (query, document) rows over documents ``document`` [B, Ld] holds at CPU
        inference: at most cpu_slice_tokens positions, and at least one slice per torch thread (thread_slice_size);
        0 where the rows are scored at once."""
        size = thread_slice_size(count, max(1, self.config.cpu_slice_tokens // max(document.shape[1], 1)))
        return size if self._slicing(document) and self.config.cpu_slice_tokens and size < count else 0

    def _sliced(self, query: torch.Tensor, document: torch.Tensor) -> dict[str, torch.Tensor]:
        document = self._trim(document)
        size = self._slice_size(document.shape[0], document)
        if size:
            parts = map_slices(self._score, query, document, size)
            return {key: torch.cat([part[key] for part in parts]) for key in parts[0]}
        return self._score(query, document)

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        return self._sliced(query, document)["score"]

    # re-ranking with each document contextualised once (Ranker.DOCUMENT_ENCODING) ----------------------------
    def encode_documents(self, document: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(2) for documents alone: (their re-joined contextualised tokens as unit vectors [B, Ld, D], 0 at padding
        and in skipped chunks; the ids [B, Ld]), cut after the batch's last real token. No query changes them."""
        document = self._trim(document)
        packed, keep = self._packed_chunks(document)
        batch, n_chunks, size = keep.shape[0], keep.shape[1], self.config.chunk_size
        if not packed.shape[0]:  # no real token in the batch
            return self.mixer.new_zeros(batch, document.shape[1], self.embedding.embedding_dim), document
        central = torch.cat([self._contextualize_chunks(chunks) for _, chunks in self._chunk_groups(packed)])
        joined = central.new_zeros(batch * n_chunks, size, central.shape[-1]).index_put((keep.view(-1),), central)
        return unit_vectors(joined.view(batch, n_chunks * size, -1)[:, :document.shape[1]].float()), document

    def score_encoded(self, query: torch.Tensor, encoded: tuple[torch.Tensor, torch.Tensor],
                      rows: torch.Tensor) -> torch.Tensor:
        """Scores [P] of queries [P, Lq] against documents ``rows`` [P] of ``encode_documents``' output: (3)-(7)
        as ``forward``, sliced on CPU as it is (at most ``cpu_slice_tokens`` positions a slice)."""
        units, document = encoded

        def score(query_slice: torch.Tensor, rows_slice: torch.Tensor) -> torch.Tensor:
            ids = self._trim(document[rows_slice])
            q, _, q_match = self.contextualize_queries(query_slice)
            cosine = cosine_rows(q, units[:, :ids.shape[1]], rows_slice)
            scores, valid = self._window_scores(query_slice, q_match, ids, cosine)
            return self._region_score(scores, valid, *self.select_regions(scores, valid))

        size = self._slice_size(rows.shape[0], document)
        return torch.cat(map_slices(score, query, rows, size)) if size else score(query, rows)

    def score_with_regions(self, query: torch.Tensor, document: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(scores [B], regions [B, top_regions, 2]): each chosen region's token span
        [start, end) — the chosen window and its neighbours, cut to the document — or −1 where
        fewer regions exist."""
        parts = self._sliced(query, document)
        return parts["score"], self.region_spans(parts["chosen"], parts["found"], parts["length"])

    def region_spans(self, chosen: torch.Tensor, found: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """Token spans [start, end) [B, R, 2] of chosen windows [B, R] with their neighbours, cut
        to the documents' lengths [B] (last real token + 1); −1 where ``found`` is False."""
        n, stride, size = self.config.region_neighbours, self.config.saturation_stride, self.config.saturation_window
        start = (chosen - n).clamp(min=0) * stride
        end = torch.minimum((chosen + n) * stride + size, length.unsqueeze(1))
        return torch.stack([start, end], 2).masked_fill(~found.unsqueeze(2), -1)
