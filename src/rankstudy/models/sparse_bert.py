"""Sparse-attention BERT for long documents: the Longformer-, BigBird- and QDS-style baselines of
Socialformer's Table 1 (Zhou et al., WWW 2022) as attention patterns of one model (``pattern``).

    Longformer (Beltagy et al. 2020): sliding-window attention plus global attention on task tokens
    BigBird (Zaheer et al., NeurIPS 2020): window + global + random attention
    QDS-Transformer (Jiang et al., CIKM 2020, "Long document ranking with query-directed sparse
        transformer"): attention directed by the query

Equations and where they are implemented:

    x = [CLS] q [SEP] d [SEP] (T ≤ ``max_length`` tokens)  ``nn.pretrained.pair_inputs``
    A_ij = 1 iff j may be attended by i:                  ``attention_pattern``
      local:   |i − j| ≤ w                                 (w = ``window``, each side)
      global:  g_i or g_j                                  g: [CLS] q [SEP] (every pattern) and, for
                                                           ``qds``, the tokens of the document blocks
                                                           most similar to the query (``qds_globals``)
      random:  j ∈ R_i (``bigbird``)                       R_i: ``random_keys`` positions drawn
                                                           uniformly among the row's n real tokens
                                                           per query block of ``window`` tokens
                                                           (``random_edges``)
      and i, j both real (padding rows attend to themselves only)
    Attention(Q, K, V) = softmax(QKᵀ/√d_h − ∞·(1 − A)) V   ``nn.block_sparse``: the encoder's attention
                                                           over the allowed keys only
    s = w · dropout(h_[CLS]) + b                           ``forward``, as ``models.bert_cat``

QDS-style (our definition; the brief's "query-directed sparse attention"): every token attends its
local window and the query ([CLS] q [SEP] are global), and the tokens of the ``qds_global_blocks``
document blocks of ``qds_block`` tokens whose mean input word embedding has the highest cosine
with the query's mean input word embedding are global as well (attend everything and are
attended by everything). QDS-Transformer itself inserts a sentence token per sentence
(hierarchical attention over sentence tokens) and makes the query global; we have no sentence
boundaries in WordPiece ids, so fixed blocks stand for sentences, and the query-similar blocks
replace the sentence tokens as the long-range path. The block similarity uses the encoder's input
embeddings without gradient (a fixed, cheap selection).

Paper values: Longformer: window 512 (256 each side), global attention on the question tokens;
BigBird-ITC: blocks of 64 tokens, 3 window blocks (±64 … 127 tokens), 2 global blocks, 3 random
blocks per query block (192 random keys); Socialformer ran both on documents of up to 2,048
tokens. Position embeddings beyond 512: Longformer initialised its 4,096 positions by copying
RoBERTa's 512 learned positions again and again; we do the same (``extend_positions``) when
``max_length`` exceeds the encoder's positions.

Deliberate choices:

* Token-level window and globals (BigBird's are block-level): the window is symmetric, global
  edges are symmetric by definition (g_i or g_j), random edges are *not* symmetric. Random keys are
  drawn per query block of ``window`` tokens (every token of a block has the block's R), as BigBird
  draws random key blocks per query block; this lets the block-sparse attention give a block one
  key set. Every real token always attends itself.
* Random edges: in training, fresh draws from torch's (seeded) global generator at every forward
  pass; at evaluation a fixed table of uniforms from ``seed`` (one row per block), so R_i depends
  only on i's block and the row's real length n: the same document always gets the same edges,
  whatever the batch or its padding.
* Compute is block-sparse (``nn.block_sparse``, as Longformer and BigBird compute it): each query
  block of ``window`` tokens attends its three neighbouring blocks, the global tokens and its random
  keys in one fused SDPA call, global rows attend densely; the result equals dense attention under
  the mask A (tests/unit/nn/test_block_sparse.py), and time and memory grow linearly in T. The encoder is
  loaded with that attention function registered as its ``attn_implementation``; the pattern
  reaches every layer as the ``sparse_layout`` keyword of the encoder's forward. On a 2-core CPU,
  study-sized encoder, 1,024 tokens, window 64: 2.3–3.2× faster inference and 1.7–2.5× faster
  training steps than the dense masked SDPA of before (bench/sparse_attention.py). With attention
  dropout (BERT's 0.1, kept when ``attention_dropout`` is None) PyTorch's CPU SDPA leaves its
  fused kernel and stores the probabilities: CPU configs set ``attention_dropout: 0``.
* Inputs, head, dropout and ``encoder_layers`` as ``models.bert_cat`` / ``models.passage_bert``;
  the document is truncated to ``max_length − 3 − |q|`` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from rankstudy.config import ConfigError
from rankstudy.models.base import EncoderRanker
from rankstudy.nn import block_sparse
from rankstudy.nn.pretrained import (attention_dropout_override, check_encoder_options, drop_pooler, pair_inputs,
                                     score_head)
from rankstudy.precision import in_fp32

PATTERNS = ("longformer", "bigbird", "qds")


@dataclass
class SparseBertConfig:
    encoder: str = "minilm"  # "minilm" or a local Hugging Face model directory (e.g. bert-base-uncased)
    encoder_layers: int | None = None  # keep the encoder's first N layers (None = all)
    train_embeddings: bool = True  # False: the encoder's word embeddings stay as loaded (e.g. word2vec rows)
    dropout: float = 0.1  # on h_[CLS] before the scoring layer, training only
    # dropout on the encoder's attention probabilities (None: the encoder's own, 0.1 for BERT); on
    # CPU anything but 0 makes PyTorch store B·heads·T² probabilities (see the module docstring)
    attention_dropout: float | None = None
    pattern: str = "longformer"  # "longformer", "bigbird" or "qds"
    max_length: int = 2048  # tokens of [CLS] q [SEP] d [SEP]; positions past the encoder's are copies
    window: int = 256  # local attention: tokens each side (Longformer: 256)
    random_keys: int = 192  # bigbird: random keys per query block of `window` tokens (BigBird: 3 blocks × 64)
    qds_block: int = 64  # qds: tokens per document block
    qds_global_blocks: int = 2  # qds: blocks most similar to the query that become global
    seed: int = 0  # the fixed random edges used at evaluation (bigbird)

    def __post_init__(self) -> None:
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")
        check_encoder_options(self)
        if self.max_length < 4:
            raise ValueError(f"max_length must be >= 4, got {self.max_length}")
        for name in ("window", "random_keys", "qds_global_blocks"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.qds_block < 1:
            raise ValueError(f"qds_block must be >= 1, got {self.qds_block}")


def extend_positions(encoder, length: int) -> None:
    """Give a BERT-style ``encoder`` ``length`` learned positions by repeating its own (Longformer's
    initialisation): position p starts as a copy of position p mod (old count)."""
    embeddings = encoder.embeddings
    old = embeddings.position_embeddings
    if length <= old.num_embeddings:
        return
    repeats = math.ceil(length / old.num_embeddings)
    new = nn.Embedding(length, old.embedding_dim, device=old.weight.device, dtype=old.weight.dtype)
    with torch.no_grad():
        new.weight.copy_(old.weight.repeat(repeats, 1)[:length])
    embeddings.position_embeddings = new
    positions = torch.arange(length, device=old.weight.device).unsqueeze(0)
    embeddings.position_ids = positions  # the (non-persistent) buffers BertEmbeddings slices
    if hasattr(embeddings, "token_type_ids"):
        embeddings.token_type_ids = torch.zeros_like(positions)
    encoder.config.max_position_embeddings = length


def block_globals(similarity: torch.Tensor, block_of: torch.Tensor, count: int) -> torch.Tensor:
    """Tokens [B, T] of each row's ``count`` most query-similar blocks (ties: the earlier block).

    ``similarity`` [B, nb] has −inf for blocks without real tokens; ``block_of`` [B, T] gives each
    token's block (−1: not a document token)."""
    order = torch.argsort(similarity, dim=1, descending=True, stable=True)[:, :count]
    chosen = torch.zeros_like(similarity, dtype=torch.bool).scatter_(1, order, True) & similarity.isfinite()
    return torch.gather(F.pad(chosen, (0, 1)), 1, torch.where(block_of < 0, chosen.shape[1], block_of))


class SparseBert(EncoderRanker):
    CLS_HEAD = True  # ``score`` reads h_[CLS]: export_encoder saves it with the encoder

    def __init__(self, config: SparseBertConfig, embeddings=None):
        super().__init__()
        self.config = config
        block_sparse.register()
        self._load_encoder(config, attn_implementation=block_sparse.ATTENTION_NAME,
                           **attention_dropout_override(config.attention_dropout))
        if self.encoder.config._attn_implementation != block_sparse.ATTENTION_NAME:
            raise ConfigError(f"models.sparse_bert: encoder {config.encoder!r} does not take a custom attention "
                              "function, which the sparse attention needs")
        drop_pooler(self.encoder)
        extend_positions(self.encoder, config.max_length)
        self.dropout = nn.Dropout(config.dropout)
        self.score = score_head(self.encoder, config.encoder)
        generator = torch.Generator().manual_seed(config.seed)
        blocks = block_sparse.block_count(config.max_length, config.window)
        self.register_buffer("eval_uniforms", torch.rand(1, blocks, config.random_keys, generator=generator),
                             persistent=False)

    def qds_globals(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                    real: torch.Tensor) -> torch.Tensor:
        """Tokens [B, T] of the ``qds_global_blocks`` document blocks most similar to the query."""
        config = self.config
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        first_segment = (token_type_ids == 0) & real  # [CLS] q [SEP]
        doc_start = first_segment.sum(1, keepdim=True)
        query = first_segment & (positions > 0) & (positions < doc_start - 1)
        document = (token_type_ids == 1) & (positions < real.sum(1, keepdim=True) - 1)  # without the last [SEP]
        blocks = math.ceil(input_ids.shape[1] / config.qds_block)
        block_of = torch.where(document, torch.div(positions - doc_start, config.qds_block, rounding_mode="floor"), -1)
        slot = torch.where(document, block_of, blocks)  # non-document tokens go to a spare slot
        with torch.no_grad():
            embedded = self.encoder.get_input_embeddings()(input_ids)
            query_sum = (embedded * query.unsqueeze(-1)).sum(1)
            block_sums = embedded.new_zeros(len(input_ids), blocks + 1, embedded.shape[-1])
            block_sums.scatter_add_(1, slot.unsqueeze(-1).expand_as(embedded), embedded)
            block_sizes = torch.zeros(len(input_ids), blocks + 1, device=input_ids.device)
            block_sizes.scatter_add_(1, slot, document.float())
            # cosine of sums = cosine of means
            similarity = F.cosine_similarity(block_sums[:, :blocks], query_sum.unsqueeze(1), dim=-1, eps=1e-13)
            similarity = similarity.masked_fill(block_sizes[:, :blocks] == 0, float("-inf"))
        return block_globals(similarity, block_of, config.qds_global_blocks)

    def inputs(self, query: torch.Tensor, document: torch.Tensor) -> tuple[dict, block_sparse.SparseLayout]:
        """The encoder's keyword inputs, with the pattern as a ``SparseLayout``, and the layout."""
        config = self.config
        input_ids, token_type_ids, attention_mask = pair_inputs(query, document, self.cls_id, self.sep_id,
                                                                config.max_length)
        real = attention_mask.bool()
        is_global = (token_type_ids == 0) & real  # [CLS] q [SEP]
        if config.pattern == "qds":
            is_global = is_global | self.qds_globals(input_ids, token_type_ids, real)
        keys = None
        if config.pattern == "bigbird":
            blocks = block_sparse.block_count(input_ids.shape[1], config.window)
            uniforms = (torch.rand(len(input_ids), blocks, config.random_keys, device=input_ids.device)
                        if self.training else self.eval_uniforms[:, :blocks])
            keys = block_sparse.random_edges(uniforms, real.sum(1))
        layout = block_sparse.SparseLayout(real, is_global, config.window, keys)
        inputs = {"input_ids": input_ids, "sparse_layout": layout}  # the layout holds the padding too
        if self.use_token_types:
            inputs["token_type_ids"] = token_type_ids
        return inputs, layout

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        inputs, _ = self.inputs(query, document)
        hidden = self.encoder(**inputs).last_hidden_state[:, 0]
        return in_fp32(self.score)(self.dropout(hidden)).squeeze(1)
