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
                                                           (``random_edges``)
      and i, j both real (padding rows attend to themselves only)
    Attention(Q, K, V) = softmax(QKᵀ/√d_h − ∞·(1 − A)) V   the encoder's own attention, A given as its
                                                           4-D boolean mask [B, 1, T, T]
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

* Token-level patterns (BigBird's are block-level): the window is symmetric, global edges are
  symmetric by definition (g_i or g_j), random edges are *not* symmetric (R_i is drawn per query
  token i, as BigBird draws random key blocks per query block). Every real token always attends
  itself.
* Random edges: in training, fresh draws from torch's (seeded) global generator at every forward
  pass; at evaluation a fixed table of uniforms from ``seed`` (one row per position), so R_i depends
  only on the position i and the row's real length n: the same document always gets the same
  edges, whatever the batch or its padding.
* The mask goes to the Hugging Face encoder as a 4-D boolean [B, 1, T, T] ``attention_mask``:
  transformers 5's BertModel passes a 4-D mask through unchanged (``masking_utils``) and takes
  anything else for a [B, T] padding mask, so a 3-D [B, T, T] mask fails or is misread. The
  encoder is loaded with ``attn_implementation="sdpa"``, where True means "may attend"; the eager
  path *adds* the mask to the scores, so a boolean mask would be wrong there and any other
  implementation is refused (test_longdoc_bert checks the SDPA result against eager attention
  with the equivalent additive 0/−∞ mask).
* Compute is dense: the full T × T scores are formed and masked. On CPU PyTorch's fused SDPA
  kernel takes the mask without keeping the T × T probabilities for backward, so memory stays
  linear in T·batch apart from the boolean mask itself (B·T² bytes); time grows as T², not as the
  pattern's number of edges. The baselines' effectiveness is reproduced, not their efficiency.
  The fused CPU kernel has no dropout: with attention dropout (BERT's 0.1, kept when
  ``attention_dropout`` is None) PyTorch falls back to the unfused path, which stores the
  B·heads·T² probabilities and dropout masks (3.3 GB per float tensor for 64 documents of 1,024
  tokens and 12 heads), so CPU configs set ``attention_dropout: 0``. Measured with two MiniLM
  layers, 2 threads, ``attention_dropout: 0``: a training step on 64 documents of 1,024 tokens
  takes about 40 CPU-seconds and 5.4 GB peak (any pattern), of 2,048 tokens about 120 CPU-seconds
  and 11 GB.
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
from rankstudy.nn.pretrained import (attention_dropout_override, check_encoder_options, drop_pooler, load_encoder,
                                     load_tokenizer, pair_inputs, score_head, special_ids, uses_token_types)

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
    random_keys: int = 192  # bigbird: random keys per token (BigBird: 3 blocks × 64)
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


def random_edges(uniforms: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Random key positions ⌊u·n⌋ [B, T, r] from uniforms in [0, 1) [B or 1, T, r] and real lengths n [B]."""
    lengths = lengths.view(-1, 1, 1)
    return torch.minimum((uniforms * lengths).long(), lengths - 1)  # u·n may round up to n in float32


def attention_pattern(real: torch.Tensor, is_global: torch.Tensor, window: int,
                      random_keys: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean [B, T, T] mask A (A[b, i, j]: token i may attend token j) from the real-token mask
    [B, T], the global-token mask [B, T], the window (tokens each side) and optional random key
    positions [B, T, r]. Padding rows attend to themselves only (no row is empty)."""
    positions = torch.arange(real.shape[1], device=real.device)
    allowed = ((positions.view(-1, 1) - positions.view(1, -1)).abs() <= window).unsqueeze(0)
    allowed = allowed | is_global.unsqueeze(2) | is_global.unsqueeze(1)
    if random_keys is not None and random_keys.shape[-1]:
        allowed = allowed.scatter(2, random_keys, True)
    allowed = allowed & real.unsqueeze(2) & real.unsqueeze(1)
    return allowed | torch.eye(real.shape[1], dtype=torch.bool, device=real.device)


def block_globals(similarity: torch.Tensor, block_of: torch.Tensor, count: int) -> torch.Tensor:
    """Tokens [B, T] of each row's ``count`` most query-similar blocks (ties: the earlier block).

    ``similarity`` [B, nb] has −inf for blocks without real tokens; ``block_of`` [B, T] gives each
    token's block (−1: not a document token)."""
    order = torch.argsort(similarity, dim=1, descending=True, stable=True)[:, :count]
    chosen = torch.zeros_like(similarity, dtype=torch.bool).scatter_(1, order, True) & similarity.isfinite()
    return torch.gather(F.pad(chosen, (0, 1)), 1, torch.where(block_of < 0, chosen.shape[1], block_of))


class SparseBert(nn.Module):
    PARAM_GROUPS = {"encoder.": "encoder"}
    CLS_HEAD = True  # ``score`` reads h_[CLS]: export_encoder saves it with the encoder
    TOKENIZER = "wordpiece"  # token stores of the encoder's WordPiece ids (rankstudy.text.wordpiece)

    def __init__(self, config: SparseBertConfig, embeddings=None):
        super().__init__()
        self.config = config
        self.cls_id, self.sep_id = special_ids(load_tokenizer(config.encoder), config.encoder)
        self.encoder = load_encoder(config.encoder, layers=config.encoder_layers,
                                    train_embeddings=config.train_embeddings, attn_implementation="sdpa",
                                    **attention_dropout_override(config.attention_dropout))
        if self.encoder.config._attn_implementation != "sdpa":
            raise ConfigError(f"models.sparse_bert: encoder {config.encoder!r} does not support SDPA attention, "
                              "which the boolean sparse-attention mask needs")
        drop_pooler(self.encoder)
        extend_positions(self.encoder, config.max_length)
        self.use_token_types = uses_token_types(self.encoder)
        self.dropout = nn.Dropout(config.dropout)
        self.score = score_head(self.encoder, config.encoder)
        generator = torch.Generator().manual_seed(config.seed)
        self.register_buffer("eval_uniforms", torch.rand(1, config.max_length, config.random_keys, generator=generator),
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

    def inputs(self, query: torch.Tensor, document: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The encoder's keyword inputs, with the pattern as a 4-D boolean mask, and the [B, T, T] mask."""
        config = self.config
        input_ids, token_type_ids, attention_mask = pair_inputs(query, document, self.cls_id, self.sep_id,
                                                                config.max_length)
        real = attention_mask.bool()
        is_global = (token_type_ids == 0) & real  # [CLS] q [SEP]
        if config.pattern == "qds":
            is_global = is_global | self.qds_globals(input_ids, token_type_ids, real)
        keys = None
        if config.pattern == "bigbird":
            width = input_ids.shape[1]
            uniforms = (torch.rand(len(input_ids), width, config.random_keys, device=input_ids.device)
                        if self.training else self.eval_uniforms[:, :width])
            keys = random_edges(uniforms, real.sum(1))
        allowed = attention_pattern(real, is_global, config.window, keys)
        inputs = {"input_ids": input_ids, "attention_mask": allowed.unsqueeze(1)}
        if self.use_token_types:
            inputs["token_type_ids"] = token_type_ids
        return inputs, allowed

    def forward(self, query: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        inputs, _ = self.inputs(query, document)
        hidden = self.encoder(**inputs).last_hidden_state[:, 0]
        return self.score(self.dropout(hidden)).squeeze(1)
