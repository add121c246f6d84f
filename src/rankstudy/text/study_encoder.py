"""The study's own encoder: a small BERT built on the collection, for CPU-sized encoder models.

A pre-trained English encoder (MiniLM, BERT) does not know the synthetic language's words, and a
CPU cannot teach it their synonymy in a few hundred document steps (docs/socialformer.md). The
study therefore builds a BERT-architecture encoder of its own, sized for a CPU:

* **Tokenizer** (Hugging Face ``tokenizers``), ``tokenizer``:
  - ``word``: one token per term of the study's vocabulary (``rankstudy.text.vocab``; a
    ``WordLevel`` model, unknown words → [UNK]);
  - ``wordpiece``: a WordPiece vocabulary of ``wordpiece_vocab_size`` trained on the collection.
  Both lower-case and split on whitespace and punctuation (``BertNormalizer``,
  ``BertPreTokenizer``), which agrees with the study's BlingFire words on the collection's text.
  Special tokens come first: [PAD] = 0 (the token stores' padding), [UNK], [CLS], [SEP], [MASK].
* **Encoder**: ``transformers.BertModel`` with hidden size = the word vectors' dimension,
  ``layers`` layers of ``heads`` heads and feed-forward ``intermediate_size``; the pooler is kept
  (Socialformer scores pooler outputs).
* **Input embeddings**: the row of every token that is a word of the study's vocabulary is that
  word's word2vec/fastText vector (the synonymy the synthetic data hides is in them); the other
  rows (special tokens, sub-words) keep BERT's initialisation, N(0, initializer_range).
* **Attention** (``attention_init: identity``, the default): every layer's query and key
  projections start as the identity, so the attention logits start as dot products of the
  (word-vector) inputs and synonyms attend to each other from the first step; ``bert`` keeps BERT's
  random initialisation. Measured on the synthetic passages (docs/socialformer.md), the identity
  start is what lets the small cross-encoder learn to match within a CPU budget.
* **Masked-LM pre-training** (optional, ``mlm_steps`` > 0): ``BertForMaskedLM`` (decoder tied to
  the input embeddings) on windows of ``mlm_length`` tokens of the collection, masked by
  ``DataCollatorForLanguageModeling`` (15 %: 80 % [MASK], 10 % random, 10 % kept), AdamW. The
  loss per step goes to ``pretrain.csv``.
* Saved with ``save_pretrained`` (config, safetensors, tokenizer files), so every encoder model
  loads it through ``encoder: <directory>`` exactly as MiniLM or bert-base-uncased.

Everything is seeded by the study seed: initialisation, masking and window order.
"""

from __future__ import annotations

import csv
import json
import logging
import os
from dataclasses import asdict, dataclass
from typing import Iterator

import numpy as np
import torch
from tqdm import tqdm

from rankstudy.atomic import atomic_path
from rankstudy.config import check_ints
from rankstudy.errors import StudyError
from rankstudy.formats import iter_collection
from rankstudy.text.vocab import SPECIALS, Vocabulary

log = logging.getLogger(__name__)

TOKENIZERS = ("word", "wordpiece")
ATTENTION_INITS = ("identity", "bert")
# [PAD] must be 0: the token stores pad with 0 (rankstudy.nn.pretrained.PAD_ID)
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PRETRAIN_LOG = "pretrain.csv"


@dataclass
class StudyEncoderConfig:
    tokenizer: str = "word"  # "word" (the study vocabulary's terms) or "wordpiece" (trained on the collection)
    wordpiece_vocab_size: int = 16000  # wordpiece only
    layers: int = 2
    heads: int = 4  # must divide the word vectors' dimension (= hidden size)
    intermediate_size: int = 256
    max_positions: int = 512
    dropout: float = 0.1  # hidden and attention dropout of the encoder
    # "identity": every layer's query and key projections start as the identity, so attention starts
    # as the similarity of the (word-vector) inputs; "bert": N(0, initializer_range) as BERT
    attention_init: str = "identity"
    mlm_steps: int = 0  # masked-LM pre-training steps on the collection; 0 = none
    mlm_batch_size: int = 32
    mlm_length: int = 128  # tokens per pre-training window
    mlm_probability: float = 0.15
    mlm_learning_rate: float = 5e-4

    def __post_init__(self) -> None:
        if self.attention_init not in ATTENTION_INITS:
            raise ValueError(f"attention_init must be one of {', '.join(ATTENTION_INITS)}, got {self.attention_init!r}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {self.tokenizer!r}")
        check_ints(self, "wordpiece_vocab_size", "layers", "heads", "intermediate_size", "max_positions",
                   "mlm_batch_size", "mlm_length")
        check_ints(self, "mlm_steps", minimum=0)
        if self.mlm_length + 2 > self.max_positions:
            raise ValueError(f"mlm_length + 2 ([CLS], [SEP]) must fit max_positions {self.max_positions}")
        for name in ("dropout", "mlm_probability"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.mlm_learning_rate <= 0:
            raise ValueError(f"mlm_learning_rate must be positive, got {self.mlm_learning_rate!r}")


# ---------------------------------------------------------------- tokenizer


def _backend(model):
    """A ``tokenizers`` pipeline around ``model``: BERT's normaliser (lower-case, accents stripped)
    and pre-tokeniser (whitespace and punctuation)."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers

    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True, strip_accents=True, clean_text=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


def _wrap(tokenizer):
    """The backend tokenizer as a ``transformers`` fast tokenizer with BERT's special tokens and
    [CLS] a [SEP] b [SEP] post-processing (AutoTokenizer reloads it from ``tokenizer.json``)."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=10**6)


def word_tokenizer(vocab: Vocabulary):
    """One token per vocabulary term (ids after the special tokens, in the vocabulary's order)."""
    from tokenizers.models import WordLevel

    table = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for term in vocab.terms[len(SPECIALS):]:
        table.setdefault(term, len(table))
    return _wrap(_backend(WordLevel(table, unk_token="[UNK]")))


def wordpiece_tokenizer(texts: Iterator[str], vocab_size: int):
    """A WordPiece vocabulary of at most ``vocab_size`` tokens trained on ``texts``."""
    from tokenizers import decoders, trainers
    from tokenizers.models import WordPiece

    tokenizer = _backend(WordPiece(unk_token="[UNK]"))
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                        show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return _wrap(tokenizer)


# ---------------------------------------------------------------- encoder


def build_bert(config: StudyEncoderConfig, vocab_size: int, hidden_size: int):
    from transformers import BertConfig

    if hidden_size % config.heads:
        raise StudyError(f"study encoder: {config.heads} heads do not divide the word vectors' dimension "
                         f"{hidden_size} (the hidden size)")
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=config.layers,
                      num_attention_heads=config.heads, intermediate_size=config.intermediate_size,
                      max_position_embeddings=config.max_positions, hidden_dropout_prob=config.dropout,
                      attention_probs_dropout_prob=config.dropout, pad_token_id=0)


def random_bert(out: str | os.PathLike, layers: int, hidden: int, heads: int, intermediate: int) -> str:
    """A randomly initialised BERT encoder directory (config, weights, a small WordPiece tokenizer) of these
    dimensions and BERT's vocabulary size (30,522): a stand-in whose speed is the named architecture's (speed does
    not depend on the weights) where the real encoder is not on the machine (``rankstudy.efficiency``)."""
    from transformers import BertModel

    tokenizer = wordpiece_tokenizer(iter(["a b c d e f g h"] * 4), 100)
    config = StudyEncoderConfig(layers=layers, heads=heads, intermediate_size=intermediate, max_positions=512)
    BertModel(build_bert(config, 30522, hidden)).save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return str(out)


def identity_attention(bert) -> None:
    """Start every layer's query and key projections as the identity (bias 0): head h's logit for
    tokens i, j is then the dot product of their inputs' h-th slices over sqrt(head size), i.e.
    attention begins by matching similar word vectors (synonyms), as TK's cosine matching does."""
    with torch.no_grad():
        for layer in bert.encoder.layer:
            for projection in (layer.attention.self.query, layer.attention.self.key):
                projection.weight.copy_(torch.eye(projection.out_features, projection.in_features))
                projection.bias.zero_()


def copy_word_vectors(embedding: torch.nn.Embedding, tokenizer, vocab: Vocabulary, vectors: np.ndarray) -> int:
    """Set the row of every token that is a vocabulary term to the term's vector; returns how many."""
    if vectors.shape != (len(vocab), embedding.embedding_dim):
        raise StudyError(f"study encoder: word vectors of shape {vectors.shape}, expected "
                         f"({len(vocab)}, {embedding.embedding_dim}) for the vocabulary")
    rows, sources = [], []
    for token, row in tokenizer.get_vocab().items():
        term_id = vocab.id(token)  # <pad>/<oov> (ids 0, 1) for special tokens and non-words
        if term_id >= len(SPECIALS):
            rows.append(row)
            sources.append(term_id)
    with torch.no_grad():
        embedding.weight[rows] = torch.as_tensor(vectors[sources], dtype=embedding.weight.dtype)
    return len(rows)


def _windows(texts: list[str], tokenizer, length: int) -> np.ndarray:
    """The collection as consecutive windows of ``length`` token ids (documents concatenated)."""
    ids = tokenizer(texts, add_special_tokens=False, split_special_tokens=True, return_attention_mask=False,
                    return_token_type_ids=False, verbose=False)["input_ids"]
    flat = np.fromiter((token for document in ids for token in document), dtype=np.int64)
    usable = len(flat) // length * length
    if usable == 0:
        raise StudyError(f"study encoder: the collection has fewer than {length} tokens to pre-train on")
    return flat[:usable].reshape(-1, length)


def _masked_lm_loss(mlm, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``BertForMaskedLM``'s loss, with the vocabulary projection applied to the masked positions
    only (the same value; the projection over all positions would cost ~7x the encoder)."""
    hidden = mlm.bert(input_ids=input_ids).last_hidden_state
    masked = labels != -100
    logits = mlm.cls(hidden[masked])
    return torch.nn.functional.cross_entropy(logits, labels[masked])


def pretrain_mlm(bert, tokenizer, texts: list[str], config: StudyEncoderConfig, seed: int) -> list[dict]:
    """Masked-LM pre-training of ``bert`` (a ``BertModel``) in place; returns the per-step log rows."""
    from transformers import BertForMaskedLM, DataCollatorForLanguageModeling

    windows = _windows(texts, tokenizer, config.mlm_length)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    mlm = BertForMaskedLM(bert.config)
    mlm.bert.load_state_dict({k: v for k, v in bert.state_dict().items() if not k.startswith("pooler.")})
    mlm.tie_weights()
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=config.mlm_probability, return_tensors="pt")
    optimizer = torch.optim.AdamW(mlm.parameters(), lr=config.mlm_learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(  # linear warm-up over 10 %, then linear decay
        optimizer, lambda step: min((step + 1) / max(1, config.mlm_steps // 10),
                                    max(0.0, (config.mlm_steps - step) / (config.mlm_steps * 0.9))))
    order = np.random.default_rng(seed).permutation(len(windows))
    rows = []
    mlm.train()
    for step in tqdm(range(config.mlm_steps), desc="masked-LM pre-training", mininterval=5):
        start = step * config.mlm_batch_size % len(order)
        picked = windows[np.take(order, range(start, start + config.mlm_batch_size), mode="wrap")]
        examples = [{"input_ids": [cls, *window.tolist(), sep]} for window in picked]
        batch = collator(examples)
        loss = _masked_lm_loss(mlm, batch["input_ids"], batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(mlm.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        rows.append({"step": step + 1, "loss": loss.item()})
    bert.load_state_dict({**bert.state_dict(), **mlm.bert.state_dict()})
    return rows


def build_study_encoder(collection: str | os.PathLike, vocab_dir: str | os.PathLike,
                        embeddings: str | os.PathLike, config: StudyEncoderConfig, seed: int,
                        out: str | os.PathLike) -> None:
    """Build (and optionally pre-train) the study encoder; write it to ``out`` atomically."""
    from transformers import BertModel

    from rankstudy.text.embeddings import load_embeddings

    vocab = Vocabulary.load(vocab_dir)
    vectors = load_embeddings(embeddings, vocab)
    # the collection's text is needed only to train WordPiece or to pre-train
    needs_text = config.tokenizer == "wordpiece" or config.mlm_steps > 0
    texts = [text for _, text in iter_collection(collection)] if needs_text else []
    if config.tokenizer == "word":
        tokenizer = word_tokenizer(vocab)
    else:
        tokenizer = wordpiece_tokenizer(iter(texts), config.wordpiece_vocab_size)
    torch.manual_seed(seed)
    bert = BertModel(build_bert(config, len(tokenizer), vectors.shape[1]))
    copied = copy_word_vectors(bert.embeddings.word_embeddings, tokenizer, vocab, vectors)
    if config.attention_init == "identity":
        identity_attention(bert)
    log.info("study encoder: %d tokens (%s), %d rows from word vectors, %d layers x %d hidden, %d parameters",
             len(tokenizer), config.tokenizer, copied, config.layers, vectors.shape[1],
             sum(p.numel() for p in bert.parameters()))
    rows = pretrain_mlm(bert, tokenizer, texts, config, seed) if config.mlm_steps else []
    with atomic_path(out, directory=True) as tmp:
        bert.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        (tmp / "study_encoder.json").write_text(json.dumps(
            {**asdict(config), "seed": seed, "word_vector_rows": copied}, indent=1, sort_keys=True) + "\n")
        with open(tmp / PRETRAIN_LOG, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["step", "loss"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
    log.info("wrote the study encoder to %s", out)
