"""Socialformer (Zhou, Dou, Yuan, Ma; WWW 2022): a re-ranker over friend circles and passages.

For a query q and a document d (n tokens) the graph of ``graph`` (patterns (1)–(7), partition (8))
gives up to ``max_circles`` friend circles C_1 … C_K; the document also keeps up to
``max_passages`` contiguous passages P_1 … P_M of ``passage_length`` tokens. Each of these blocks
b is one encoder input. Equations and where they are implemented:

    x_b = [CLS] q [SEP] b [SEP]          ``Socialformer.plan`` (blocks), ``nn.pretrained.pair_inputs``:
                                         b's tokens in document order; segment 0 = [CLS] q [SEP],
                                         segment 1 = b [SEP]; |x_b| ≤ ``max_length``
    H_b^0 = Emb(x_b)                     the encoder's embeddings (positions 0, 1, … per block)
    H_b^l = Layer_l(H̃_b^{l−1})            intra-circle: the encoder's layer l, all blocks of the
                                         batch in one call (``_encode``)
    (c_1^l … c_B^l) = Inter(h_1^l … h_B^l)  inter-circle: one ``nn.TransformerEncoderLayer`` over the
                                         [CLS] states h_b^l = H_b^l[0] of one document's blocks
                                         (``_inter_circle``), shared by all layers
    H̃_b^l[0] = W_m [h_b^l; c_b^l] + b_m   merged back (``merge``, shared by all layers); the
                                         other positions of H̃_b^l are H_b^l
    v_d = max_b tanh(W_p H̃_b^L[0] + b_p)  the encoder's pooler, then max pooling over the blocks
                                         (``aggregation``: ``max``; ``mean``; ``attention``:
                                         Σ_b softmax_b(w_a·u_b) u_b) (``_aggregate``); without the
                                         pooler when the encoder has a scoring head (below)
    s(q, d) = w_s · dropout(v_d) + b_s     ``score``
    L = −log softmax(s)_positive          listwise CE over 1 positive + 7 negatives (train loop,
                                         ``loss: listwise``; not in this module)

Dynamic centrality (pattern (4) of ``graph``) needs an encoder call per pair:
``dynamic_centrality_batch`` picks the ``top_k`` document tokens whose input (word) embedding has
the highest cosine with the query's mean input embedding, runs [CLS] q [SEP] picked tokens (in
document order) [SEP] through a *frozen* copy of the pre-trained encoder (all its layers unless
``centrality_layers``; no gradient; one batched call for every document of the batch), sums the
last layer's [CLS] attention over the heads and hands one score per picked token to
``patterns.dynamic_centrality_weights`` (rescaled to the picked tokens' cosine mass; the other
tokens keep their cosine). The frozen copy is deliberately not a registered sub-module: it is
never trained, never saved in ``state_dict`` (it is the pre-trained model itself) and follows
``.to(device)`` through ``_apply``.

Deliberate choices and departures (the released code, github.com/smallporridge/Socialformer
``model/model.py``, does not run as published):

* Graphs are built on the fly, on the CPU (small integer work with a data-dependent loop per
  circle), for every (query, document) pair of a batch; the released code precomputes them.
  Sampling is seeded per pair: ``pair_seed`` hashes (``graph.seed``, step, the query's and the
  document's real token ids) with BLAKE2b into the seed of a fresh ``torch.Generator``. In
  training, step is the model's count of training forward passes (buffer ``graph_step``, saved
  with the model and the checkpoint, so a resumed run draws the same graphs), i.e. a pair's graph
  is re-drawn every step; in evaluation step is the constant ``"eval"``, so scores depend only on
  the pair, never on batch composition, order or padding. An evaluation plan is therefore kept per pair
  (up to ``EVAL_PLANS_KEPT`` pairs; dropped when ``idf`` or the state changes): a training run validates
  the same pairs at every validation, and a third of a validation was building their graphs again.
* Positions restart in every block (BERT's positions 0 … |x_b| − 1); a circle's tokens keep their
  document order but not their document positions (a 2,000-token document would exceed BERT's
  512 positions), as in the released code, which feeds each circle as a token list.
* Blocks: passages first, then circles (their order does not matter: the inter-circle layer has no
  positions). ``max_passages = 16`` and ``passage_length = 128`` are the released values
  (``ori_slice[:16]``, ``max_psglen``). A document with no token, or without passages and without
  any edge, gets one empty block [CLS] q [SEP] [SEP], so every document is scored.
* Inter-circle layer: ``nn.TransformerEncoderLayer(d_model = hidden, nhead = inter_heads = 4,
  dim_feedforward = inter_feedforward = 512, batch_first=True)`` and the merge Linear(2·hidden →
  hidden) are shared by all layers, as released. The merge is initialised to the identity on h_b
  and zero on c_b (``merge_init: identity``), so the untrained model is exactly the pre-trained
  encoder on each block and training starts from BERT's [CLS] states; the released code used the
  default (random) initialisation, which overwrites every [CLS] state with a random projection
  after the first layer — ``merge_init: default`` reproduces it.
* Aggregation: the encoder's pooler (dense + tanh) on each block's final [CLS] state, then max
  pooling over the blocks, dropout and a Linear(hidden → 1) with Xavier-normal weights, as
  released. An encoder without a pooler uses the [CLS] state directly.
  Departure (``warm_head``, default on): when the encoder directory holds a fine-tuned scoring head
  (a cross-encoder's export, ``nn.pretrained.score_head``), the pooler is dropped and the score
  layer starts as that head, as FirstP, MaxP and PARADE start. The exported pooler was never
  trained (BERT[CLS] scores h_[CLS] itself), so the released initialisation would put a random
  dense + tanh and a random head on top of the warm start (measured on the default study: best
  validation RR@10 0.181 with them, 0.203 with the head; docs/socialformer.md). With the head, the
  untrained model is PARADE-Max over its blocks with the warm start's scorer. An encoder without a head
  (bert-base-uncased, the paper config) keeps the released pooler and Xavier head.
* IDF of static centrality (2): ``store.collection_idf`` computes ln(N / df) over the training
  documents' token store; ``experiment.train_model`` passes it (``NEEDS_IDF``) and it is kept in
  the buffer ``idf`` (saved with the model, so re-ranking uses the training IDF). Without it
  (unit tests, a model built by hand) every idf is 1 and static centrality weighs tokens by tf
  alone; a warning says so once.
* ``PARAM_GROUPS``: the encoder (pooler included) is optimiser group ``encoder``; the inter-circle
  layer, merge and score layers are ``default``. The paper trains everything with AdamW at lr 1e-5
  (training config ``optimizer: adamw``; with weight decay 0, as released, AdamW is Adam).
* ``encoder_layers`` keeps the first N layers of the fine-tuned encoder (a CPU-sized model);
  the frozen centrality encoder is independent (``centrality_layers``). Beware with MiniLM
  (a sentence encoder trained with mean pooling): its [CLS] state after 1–2 layers hardly depends
  on the input (spread across blocks ~1 % of its size), so a truncated MiniLM starts from an
  almost constant score and learns slowly; all 6 layers learn at once (tests).
* Blocks are sorted by length and encoded in ``length_buckets`` groups, each padded only to its
  own longest block (circles are often much shorter than passages); results do not depend on it.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pad_sequence

from rankstudy.config import ConfigError, check_ints
from rankstudy.models.base import EncoderRanker
from rankstudy.models.socialformer import patterns
from rankstudy.models.socialformer.graph import SocialGraphConfig, build_social_graph, make_generator
from rankstudy.nn.pretrained import PAD_ID, drop_pooler, has_score_head, load_encoder, pair_inputs, score_head
from rankstudy.precision import in_fp32

log = logging.getLogger(__name__)

AGGREGATIONS = ("max", "mean", "attention")
# evaluation plans kept per (query, document) pair: more than a validation's pairs (the default study's: 1,500),
# few enough to stay small (a plan is ~16 KB of positions)
EVAL_PLANS_KEPT = 4096
MERGE_INITS = ("identity", "default")


@dataclass
class SocialformerConfig:
    encoder: str = "minilm"  # "minilm" or a local Hugging Face model directory (e.g. bert-base-uncased)
    encoder_layers: int | None = None  # keep the first N layers of the fine-tuned encoder; None: all
    train_embeddings: bool = True  # False: the encoder's word embeddings stay as loaded (e.g. word2vec rows)
    centrality_layers: int | None = None  # layers of the frozen encoder for dynamic centrality; None: all
    graph: SocialGraphConfig = field(default_factory=SocialGraphConfig)  # patterns, sparsity, partition, circles, seed
    passage_length: int = 128  # tokens per contiguous passage
    max_passages: int | None = 16  # passages kept (the first ones); 0: none; None: the whole document
    aggregation: str = "max"  # blocks -> document vector: "max" | "mean" | "attention"
    dropout: float = 0.1  # on the document vector, and inside the inter-circle layer
    max_length: int = 512  # a block's encoder input [CLS] q [SEP] b [SEP] at most this long
    inter_heads: int = 4  # heads of the inter-circle layer (released: 4)
    inter_feedforward: int = 512  # its feed-forward width (released: 512)
    merge_init: str = "identity"  # "identity": [h; c] -> h at start; "default": PyTorch's random init
    length_buckets: int = 4  # blocks sorted by length and encoded in this many groups (less padding; speed only)
    # start the score layer from the encoder's exported scoring head, without the pooler, when the
    # encoder has one (a cross-encoder's export); False: the released pooler + Xavier head always
    warm_head: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.graph, Mapping):
            self.graph = SocialGraphConfig(**self.graph)
        if not isinstance(self.graph, SocialGraphConfig):
            raise ValueError(f"graph must be a mapping of SocialGraphConfig keys, got {self.graph!r}")
        check_ints(self, "encoder_layers", "centrality_layers", nullable=True)
        check_ints(self, "max_passages", minimum=0, nullable=True)
        check_ints(self, "passage_length", "inter_heads", "inter_feedforward", "length_buckets")
        check_ints(self, "max_length", minimum=4)
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {self.aggregation!r}")
        if not isinstance(self.warm_head, bool):
            raise ValueError(f"warm_head must be true or false, got {self.warm_head!r}")
        if self.merge_init not in MERGE_INITS:
            raise ValueError(f"merge_init must be one of {', '.join(MERGE_INITS)}, got {self.merge_init!r}")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")


# ---------------------------------------------------------------- inputs of the graph


def _tensor(output) -> Tensor:
    """A Hugging Face layer's hidden states (transformers 5 returns a tensor, 4 a tuple)."""
    return output[0] if isinstance(output, tuple) else output


@contextmanager
def _one_thread():
    """Run small per-document tensor work on one thread: a second OpenMP thread only adds
    synchronisation there (and stalls badly when the CPUs are shared); restored afterwards."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def pair_seed(seed: int, step: int | None, query_ids: Tensor, doc_ids: Tensor) -> int:
    """The graph seed of one (query, document) pair: BLAKE2b-64 of (seed, step or "eval",
    |q|, q's ids, d's ids) as little-endian int64, shifted to 63 bits. Only real tokens are given,
    so padding never changes a graph."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{seed}:{'eval' if step is None else step}:{query_ids.numel()}:".encode())
    digest.update(query_ids.detach().cpu().numpy().astype("<i8").tobytes())
    digest.update(doc_ids.detach().cpu().numpy().astype("<i8").tobytes())
    return int.from_bytes(digest.digest(), "little") >> 1


def _pair_key(query_ids: Tensor, doc_ids: Tensor) -> bytes:
    """A (query, document) pair's key among the kept evaluation plans: BLAKE2b-128 of both id sequences."""
    digest = hashlib.blake2b(f"{query_ids.numel()}:".encode(), digest_size=16)
    digest.update(query_ids.numpy().astype("<i8").tobytes())
    digest.update(doc_ids.numpy().astype("<i8").tobytes())
    return digest.digest()


@torch.no_grad()
def dynamic_centrality_batch(encoder, cls_id: int, sep_id: int, queries: Sequence[Tensor],
                             documents: Sequence[Tensor], top_k: int, *, floor: float | None = None,
                             normalisation: str = "max", max_length: int = 512) -> list[Tensor]:
    """Pattern (4) for every (query, document) pair, with one encoder call for all of them.

    ``queries``/``documents``: 1-D tensors of real WordPiece ids (no padding). ``encoder`` must
    return attentions (eager attention). Per pair: ``patterns.select_top_cosine`` on the encoder's
    word embeddings, [CLS] q [SEP] picked tokens [SEP] through the encoder, the last layer's [CLS]
    row summed over heads at the picked tokens, ``patterns.dynamic_centrality_weights``. Returns
    one CPU float vector per document (all zeros for an empty query or document). Tokens cut off
    by ``max_length`` keep their cosine.
    """
    device = encoder.embeddings.word_embeddings.weight.device
    words = encoder.embeddings.word_embeddings
    weights: list[Tensor] = [torch.zeros(d.numel()) for d in documents]
    picks = []
    with _one_thread():
        for index, (query, document) in enumerate(zip(queries, documents)):
            if query.numel() and document.numel():
                cosine, selected = patterns.select_top_cosine(words(query.to(device)), words(document.to(device)),
                                                              top_k)
                picks.append((index, cosine.cpu(), selected.cpu()))
    if not picks:
        return weights
    query_batch = pad_sequence([queries[i].cpu() for i, _, _ in picks], batch_first=True, padding_value=PAD_ID)
    picked = pad_sequence([documents[i].cpu()[s] for i, _, s in picks], batch_first=True, padding_value=PAD_ID)
    input_ids, token_types, mask = pair_inputs(query_batch, picked, cls_id, sep_id, max_length)
    inputs = {"input_ids": input_ids.to(device), "attention_mask": mask.to(device)}
    if getattr(encoder.config, "type_vocab_size", 0) >= 2:
        inputs["token_type_ids"] = token_types.to(device)
    attentions = encoder(**inputs, output_attentions=True).attentions
    if not attentions or attentions[-1] is None:
        raise RuntimeError("the centrality encoder returned no attentions (it needs attn_implementation='eager')")
    cls_row = attentions[-1].sum(1)[:, 0].float().cpu()  # [P, T]: [CLS] attention summed over heads
    query_lengths = (query_batch != PAD_ID).sum(1).clamp(max=max_length - 3)
    with _one_thread():
        for row, (index, cosine, selected) in enumerate(picks):
            start = 2 + int(query_lengths[row])  # [CLS] q [SEP] come first
            scored = selected[: max(0, min(selected.numel(), max_length - 1 - start))]
            weights[index] = patterns.dynamic_centrality_weights(
                cosine, scored, cls_row[row, start:start + scored.numel()], floor=floor, normalisation=normalisation)
    return weights


# ---------------------------------------------------------------- the model


@dataclass
class DocumentPlan:
    """One document's blocks: token positions (sorted) of its passages, then of its circles."""

    passages: list[Tensor]
    circles: list[Tensor]

    @property
    def blocks(self) -> list[Tensor]:
        return self.passages + self.circles


class Socialformer(EncoderRanker):
    NEEDS_IDF = True  # build_model passes ``idf`` (collection_idf of the training documents)

    def __init__(self, config: SocialformerConfig, embeddings=None, idf: np.ndarray | Tensor | None = None):
        super().__init__()
        self.config = config
        self._load_encoder(config)
        encoder_config = self.encoder.config
        positions = getattr(encoder_config, "max_position_embeddings", None)
        if positions is not None and config.max_length > positions:
            raise ConfigError(f"models.socialformer.max_length {config.max_length} exceeds encoder "
                              f"{config.encoder!r}'s {positions} positions")
        hidden = encoder_config.hidden_size
        if hidden % config.inter_heads:
            raise ConfigError(f"models.socialformer.inter_heads {config.inter_heads} does not divide the encoder's "
                              f"hidden size {hidden}")
        self.inter = nn.TransformerEncoderLayer(hidden, config.inter_heads, config.inter_feedforward,
                                                config.dropout, batch_first=True)
        self.merge = nn.Linear(2 * hidden, hidden)
        if config.merge_init == "identity":
            with torch.no_grad():
                self.merge.weight.zero_()
                self.merge.weight[:, :hidden] = torch.eye(hidden)
                self.merge.bias.zero_()
        self.block_attention = nn.Linear(hidden, 1) if config.aggregation == "attention" else None
        self.dropout = nn.Dropout(config.dropout)
        if config.warm_head and has_score_head(config.encoder):
            drop_pooler(self.encoder)
            self.score = score_head(self.encoder, config.encoder)
        else:
            self.score = nn.Linear(hidden, 1)
            nn.init.xavier_normal_(self.score.weight)
            nn.init.zeros_(self.score.bias)

        self._eval_plans: dict[bytes, DocumentPlan] = {}  # plan()'s, by _pair_key, made with these settings:
        self._eval_plans_settings: tuple = ()
        self.register_load_state_dict_post_hook(Socialformer._forget_plans)  # a loaded state may hold another idf
        self.register_buffer("graph_step", torch.zeros((), dtype=torch.long))
        vocab = encoder_config.vocab_size
        self.register_buffer("idf", torch.ones(vocab))
        self.register_buffer("idf_given", torch.zeros((), dtype=torch.bool))
        if idf is not None:
            self.set_idf(idf)
        self._warned_idf = False

        self._centrality: tuple = ()  # the frozen encoder, deliberately not a sub-module (module docstring)
        if "dynamic_centrality" in config.graph.active:
            frozen = load_encoder(config.encoder, config.centrality_layers, attn_implementation="eager")
            frozen.requires_grad_(False).eval()
            self._centrality = (frozen,)

    @staticmethod
    def _forget_plans(module: "Socialformer", incompatible_keys=None) -> None:
        module._eval_plans.clear()

    def set_idf(self, idf: np.ndarray | Tensor) -> None:
        """Use ``idf`` (one value per token id, e.g. ``collection_idf``) for static centrality; ids
        beyond its length (never seen in that collection) get its largest value."""
        values = torch.as_tensor(idf, dtype=torch.float32)
        if values.dim() != 1 or not 0 < values.numel() <= self.idf.numel():
            raise ValueError(f"idf must be 1-D with 1 to {self.idf.numel()} values, got shape {tuple(values.shape)}")
        full = torch.full_like(self.idf, float(values.max()))
        full[: values.numel()] = values.to(full.device)
        self.idf.copy_(full)
        self.idf_given.fill_(True)
        self._forget_plans(self)

    def _apply(self, fn, recurse=True):
        super()._apply(fn, recurse)
        for frozen in self._centrality:
            frozen._apply(fn)
        return self

    # ------------------------------------------------------------ graph and blocks (no gradient)

    @torch.no_grad()
    def plan(self, query: Tensor, document: Tensor) -> list[DocumentPlan]:
        """The blocks of every (query, document) row of a padded batch (real ids only, on the CPU).

        Draws from ``pair_seed`` with the current step (training) or "eval"; does not advance it. In evaluation a
        pair's plan is built once and kept (module docstring).
        """
        queries = [row[row != PAD_ID] for row in query.cpu()]
        documents = [row[row != PAD_ID] for row in document.cpu()]
        if self.training:
            return self._plan_pairs(queries, documents, int(self.graph_step))
        settings = (self.config.graph, self.config.passage_length, self.config.max_passages)
        if settings != self._eval_plans_settings:  # the config may change between calls (tests change it)
            self._forget_plans(self)
            self._eval_plans_settings = copy.deepcopy(settings)
        keys = [_pair_key(query_ids, doc_ids) for query_ids, doc_ids in zip(queries, documents)]
        found = {key: self._eval_plans[key] for key in keys if key in self._eval_plans}
        missing = [i for i, key in enumerate(keys) if key not in found]
        if missing:
            built = self._plan_pairs([queries[i] for i in missing], [documents[i] for i in missing], None)
            if len(self._eval_plans) + len(missing) > EVAL_PLANS_KEPT:
                self._eval_plans.clear()
            for i, plan in zip(missing, built):
                found[keys[i]] = self._eval_plans[keys[i]] = plan
        return [found[key] for key in keys]

    def _plan_pairs(self, queries: list[Tensor], documents: list[Tensor], step: int | None) -> list[DocumentPlan]:
        """The plans of (query, document) pairs of real ids, drawn with ``step`` (None: evaluation)."""
        graph = self.config.graph
        active = graph.active
        centrality = [None] * len(documents)
        if "dynamic_centrality" in active:
            centrality = dynamic_centrality_batch(
                self._centrality[0], self.cls_id, self.sep_id, queries, documents, graph.top_k,
                floor=graph.centrality_floor, normalisation=graph.normalisation, max_length=self.config.max_length)
        idf = None
        if "static_centrality" in active:
            if not bool(self.idf_given) and not self._warned_idf:
                log.warning("Socialformer: no collection IDF was given; static centrality uses tf alone (idf = 1)")
                self._warned_idf = True
            idf = self.idf.cpu()
        plans = []
        with _one_thread():
            for query_ids, doc_ids, weights in zip(queries, documents, centrality):
                plans.append(self._plan_document(query_ids, doc_ids, weights, idf, step))
        return plans

    def _plan_document(self, query_ids: Tensor, doc_ids: Tensor, centrality: Tensor | None, idf: Tensor | None,
                       step: int | None) -> DocumentPlan:
        """Passages and friend circles of one document (real ids, CPU)."""
        n = doc_ids.numel()
        passages = list(torch.arange(n).split(self.config.passage_length)) if n else []
        if self.config.max_passages is not None:
            passages = passages[: self.config.max_passages]
        if not n:
            return DocumentPlan(passages, [])
        graph = self.config.graph
        generator = make_generator(pair_seed(graph.seed, step, query_ids, doc_ids))
        social = build_social_graph(graph, doc_ids, query_ids=query_ids, idf=idf, dynamic_centrality=centrality,
                                    generator=generator)
        return DocumentPlan(passages, social.partition.circles)

    def _block_inputs(self, query: Tensor, document: Tensor, plans: list[DocumentPlan]):
        """Encoder inputs of every block of the batch, grouped by document: ``(input_ids,
        token_type_ids, attention_mask, block_document, slot)``, the last two [N] (document row
        and index among that document's blocks)."""
        tokens, owners = [], []
        for row, plan in enumerate(plans):
            doc_ids = document[row][document[row] != PAD_ID].cpu()
            blocks = plan.blocks or [torch.zeros(0, dtype=torch.long)]  # an empty block still scores the document
            tokens += [doc_ids[positions] for positions in blocks]
            owners += [row] * len(blocks)
        block_ids = pad_sequence(tokens, batch_first=True, padding_value=PAD_ID).to(query.device)
        if block_ids.shape[1] == 0:
            block_ids = block_ids.new_zeros(len(tokens), 1)
        block_document = torch.tensor(owners, dtype=torch.long, device=query.device)
        starts = torch.searchsorted(block_document, torch.arange(len(plans), device=query.device))
        slot = torch.arange(len(owners), device=query.device) - starts[block_document]
        input_ids, token_types, mask = pair_inputs(query.index_select(0, block_document), block_ids,
                                                   self.cls_id, self.sep_id, self.config.max_length)
        return input_ids, token_types, mask, block_document, slot

    # ------------------------------------------------------------ network

    def _inter_circle(self, cls: Tensor, block_document: Tensor, slot: Tensor, documents: int) -> Tensor:
        """[CLS] states [N, H] -> merged [CLS] states [N, H] after the inter-circle layer."""
        width = int(slot.max()) + 1
        grouped = cls.new_zeros(documents, width, cls.shape[1]).index_put((block_document, slot), cls)
        present = torch.zeros(documents, width, dtype=torch.bool, device=cls.device)
        present[block_document, slot] = True
        mixed = self.inter(grouped, src_key_padding_mask=~present)[block_document, slot]
        return self.merge(torch.cat([cls, mixed], dim=1))

    def _encode(self, input_ids: Tensor, token_types: Tensor, mask: Tensor, block_document: Tensor, slot: Tensor,
                documents: int) -> Tensor:
        """The final (merged) [CLS] state of every block, [N, H].

        Blocks are sorted by length and split into ``length_buckets`` groups of equal count, each
        cut to its own longest block: every layer runs once per group instead of once on the
        batch padded to its longest block (a circle of 20 tokens next to 128-token passages).
        Each block's result is the same either way (masked attention; no cross-block term).
        """
        from transformers.masking_utils import create_bidirectional_mask

        order = torch.argsort(mask.sum(1), stable=True)
        groups = [group for group in order.tensor_split(min(self.config.length_buckets, len(order))) if group.numel()]
        order = torch.cat(groups)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order), device=order.device)
        hidden, masks = [], []
        for group in groups:
            group_mask = mask[group]
            width = int(group_mask.sum(1).max())
            types = token_types[group, :width] if self.use_token_types else None
            states = self.encoder.embeddings(input_ids=input_ids[group, :width], token_type_ids=types)
            hidden.append(states)
            masks.append(create_bidirectional_mask(config=self.encoder.config, inputs_embeds=states,
                                                   attention_mask=group_mask[:, :width]))
        sizes = [len(group) for group in groups]
        for layer in self.encoder.encoder.layer:
            hidden = [_tensor(layer(states, group_mask)) for states, group_mask in zip(hidden, masks)]
            cls = torch.cat([states[:, 0] for states in hidden])[inverse]  # back to block order
            merged = self._inter_circle(cls, block_document, slot, documents)[order].split(sizes)
            hidden = [torch.cat([head.unsqueeze(1), states[:, 1:]], dim=1) for head, states in zip(merged, hidden)]
        return torch.cat([states[:, 0] for states in hidden])[inverse]

    def _aggregate(self, cls: Tensor, block_document: Tensor, slot: Tensor, documents: int) -> Tensor:
        """Block [CLS] states [N, H] -> document vectors [B, H] (pooler, then max/mean/attention)."""
        pooler = getattr(self.encoder, "pooler", None)
        units = pooler(cls.unsqueeze(1)) if pooler is not None else cls
        width = int(slot.max()) + 1
        grouped = units.new_zeros(documents, width, units.shape[1]).index_put((block_document, slot), units)
        present = torch.zeros(documents, width, dtype=torch.bool, device=units.device)
        present[block_document, slot] = True
        if self.config.aggregation == "max":
            return grouped.masked_fill(~present.unsqueeze(2), float("-inf")).amax(1)
        if self.config.aggregation == "mean":
            return grouped.sum(1) / present.sum(1, keepdim=True)
        weights = self.block_attention(grouped).squeeze(2).masked_fill(~present, float("-inf")).softmax(1)
        return (weights.unsqueeze(2) * grouped).sum(1)

    def block_states(self, query: Tensor, document: Tensor, plans: list[DocumentPlan] | None = None):
        """``(cls [N, H], block_document [N], slot [N])``: every block's final merged [CLS] state."""
        plans = self.plan(query, document) if plans is None else plans
        input_ids, token_types, mask, block_document, slot = self._block_inputs(query, document, plans)
        cls = self._encode(input_ids, token_types, mask, block_document, slot, len(plans))
        return cls, block_document, slot

    def forward(self, query: Tensor, document: Tensor) -> Tensor:
        if query.shape[0] != document.shape[0]:
            raise ValueError(f"query and document batch sizes differ: {query.shape[0]} vs {document.shape[0]}")
        cls, block_document, slot = self.block_states(query, document)
        if self.training:
            self.graph_step += 1
        vector = self._aggregate(cls, block_document, slot, query.shape[0])
        return in_fp32(self.score)(self.dropout(vector)).squeeze(1)
