"""Glue for the ``train`` and ``rerank`` steps: files in, model and runs out.

Everything a step needs comes from its arguments (paths and JSON config sections); the logic
lives in ``train.loop``, ``rerank`` and ``models``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from rankstudy import formats
from rankstudy.atomic import atomic_open
from rankstudy.config import from_dict
from rankstudy.errors import StudyError
from rankstudy.fingerprint import fingerprint
from rankstudy.models import MODELS, build_model
from rankstudy.models.base import EncoderRanker, Ranker
from rankstudy.rerank import pair_batches, score_candidates
from rankstudy.runs import rerank_to_depth
from rankstudy.store import TokenStore, collection_idf
from rankstudy.tensorfile import load_tensors
from rankstudy.text.embeddings import load_embeddings
from rankstudy.text.wordpiece import check_wordpiece_store, read_store_meta
from rankstudy.train.examples import query_subset, read_groups, read_scored_triples, read_triples
from rankstudy.device import resolve_device
from rankstudy.train.loop import TrainConfig, make_validator, train

log = logging.getLogger(__name__)


def train_model(model_name: str, model_settings: Mapping[str, Any], train_settings: Mapping[str, Any],
                embeddings: Path, examples: Path, train_queries: Path, documents: Path, dev_queries: Path,
                dev_run: Path, dev_qrels: Path, out_dir: Path, seed: int, threads: int = 1) -> dict:
    """Train one model (seeded before it is built, so its initial weights follow the seed)."""
    torch.set_num_threads(max(1, threads))
    cfg = from_dict(TrainConfig, train_settings, "training")
    document_store = TokenStore(documents)
    if model_name not in MODELS:
        raise StudyError(f"unknown model {model_name!r}; expected one of {', '.join(MODELS)}")
    model_class = MODELS[model_name][0]
    check_token_stores(model_name, model_settings, train_queries, documents, dev_queries)
    # models declaring NEEDS_IDF get ln(N / df) over the training documents (kept in their state_dict)
    vectors = load_embeddings(embeddings)  # [vocabulary, D]; empty for WordPiece models
    idf = None
    if model_class.NEEDS_IDF:
        idf = collection_idf(document_store, size=len(vectors) if vectors.size else None)
    torch.manual_seed(seed)
    model = build_model(model_name, model_settings, vectors, idf=idf)
    read = read_groups if cfg.loss == "listwise" else read_scored_triples if cfg.scored_examples else read_triples
    validate = make_validator(formats.read_run(dev_run), formats.read_qrels(dev_qrels), TokenStore(dev_queries),
                              document_store, cfg)
    # load_trained builds the model from the recorded name and settings; the checkpoint is resumed only
    # for these settings and inputs (a rerun after an upstream change starts afresh)
    encoder = model_settings.get("encoder")
    teacher = _teacher(cfg, vectors, train_queries, documents)
    teacher_encoder = (cfg.teacher or {}).get("encoder")
    inputs = fingerprint({"embeddings": embeddings, "examples": examples, "train_queries": train_queries,
                          "documents": documents, "dev_queries": dev_queries, "dev_run": dev_run,
                          "dev_qrels": dev_qrels, "encoder": encoder if isinstance(encoder, str) else None,
                          "teacher_encoder": teacher_encoder if isinstance(teacher_encoder, str) else None})
    examples_read = read(examples)
    if cfg.train_queries is not None:
        examples_read = query_subset(examples_read, cfg.train_queries)
        log.info("training on the examples of %d queries (%d examples)", cfg.train_queries, len(examples_read))
    return train(model, examples_read, TokenStore(train_queries), document_store, validate, cfg, out_dir, seed,
                 recorded={"model_name": model_name, "model_settings": dict(model_settings), "inputs": inputs},
                 teacher=teacher)


def _teacher(cfg: TrainConfig, vectors: np.ndarray, *stores: Path) -> Ranker | None:
    """The frozen teacher of loss margin_mse, built untrained from ``cfg.teacher`` (after the model, so that the
    model's initial weights do not depend on it); it must read the model's token stores."""
    if cfg.teacher is None or cfg.scored_examples:
        return None
    settings = {key: value for key, value in cfg.teacher.items() if key != "model"}
    name = cfg.teacher["model"]
    if name not in MODELS:
        raise StudyError(f"unknown teacher model {name!r}; expected one of {', '.join(MODELS)}")
    check_token_stores(name, settings, *stores)
    return build_model(name, settings, vectors)


def check_token_stores(model_name: str, model_settings: Mapping[str, Any], *stores: Path) -> None:
    """Raise StudyError unless every store holds the ids the model reads (``Ranker.TOKENIZER``): its
    encoder's WordPiece ids, or the study vocabulary's word ids (a store without WordPiece metadata)."""
    model_class, config_class = MODELS[model_name]
    if model_class.TOKENIZER == "wordpiece":
        encoder = from_dict(config_class, model_settings, f"models.{model_name}").encoder
        for store in stores:
            check_wordpiece_store(store, encoder)
        return
    for store in stores:
        meta = read_store_meta(store) or {}
        if meta.get("tokenizer") == "wordpiece":
            raise StudyError(f"{store}: WordPiece ids of encoder {meta.get('encoder')!r}, but "
                             f"{model_class.__name__} reads word ids of the study's vocabulary (a word2vec, fastText "
                             "or GloVe embeddings entry)")


@dataclass(frozen=True)
class InputSpec:
    """What a trained model reads, as its directory records it (config.json's ``train``): scoring
    commands cut queries and documents to the lengths it was trained at, never to flags of their own."""
    max_query_length: int
    max_doc_length: int


def _recorded_config(model_dir: Path) -> dict:
    """The model directory's config.json (what ``train`` recorded: model name and settings, training settings)."""
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise StudyError(f"{model_dir}: no config.json; train the model first")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError(f"a JSON {type(config).__name__}")
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise StudyError(f"{config_path}: expected the JSON object that rankstudy train writes ({error})") from None
    return config


def _trained_config(model_dir: Path) -> dict:
    """The recorded config of a trained model: it names the model and its settings."""
    config = _recorded_config(model_dir)
    if not isinstance(config.get("model_name"), str) or not isinstance(config.get("model_settings"), dict):
        raise StudyError(f"{model_dir / 'config.json'}: expected the JSON object that rankstudy train writes "
                         "(no model_name and model_settings)")
    return config


def read_input_spec(model_dir: Path, config: Mapping[str, Any] | None = None) -> InputSpec:
    """The lengths recorded in ``model_dir``'s config.json (``config``: that file, already read)."""
    config_path = model_dir / "config.json"
    train_settings = (config if config is not None else _recorded_config(model_dir)).get("train") or {}
    try:
        return InputSpec(int(train_settings["max_query_length"]), int(train_settings["max_doc_length"]))
    except (KeyError, TypeError, ValueError):
        raise StudyError(f"{config_path}: expected train.max_query_length and train.max_doc_length (integers, "
                         "written by python -m rankstudy train)") from None


def load_trained(model_dir: Path, embeddings: Path, device: torch.device) -> tuple[Ranker, InputSpec]:
    """(the trained model in eval mode on ``device``, the input lengths it was trained at)."""
    config = _trained_config(model_dir)
    spec = read_input_spec(model_dir, config)
    model = build_model(config["model_name"], config["model_settings"], load_embeddings(embeddings))
    weights = model_dir / "model.pt"
    saved = load_tensors(weights)
    try:
        model.load_state_dict(saved)
    except (RuntimeError, TypeError, AttributeError):  # another model's weights, or not a state dict
        raise StudyError(f"{weights}: expected the weights of the {config['model_name']} that config.json "
                         f"describes ({_key_mismatch(model, saved)})") from None
    return model.to(device).eval(), spec


def _key_mismatch(model: torch.nn.Module, saved: Any) -> str:
    """How the saved keys differ from the model's, in a few words."""
    if not isinstance(saved, dict):
        return f"the file holds a {type(saved).__name__}, not a state dict"
    missing, unexpected = set(model.state_dict()) - set(saved), set(saved) - set(model.state_dict())
    if not missing and not unexpected:
        return "the tensors' shapes differ"
    return f"{len(missing)} missing key(s), e.g. {sorted(missing)[:2]}; {len(unexpected)} unexpected"


def export_encoder(model_dir: Path, embeddings: Path, out: Path) -> None:
    """Write a trained model's fine-tuned encoder as a Hugging Face directory (``nn.pretrained.save_encoder``).

    Used to warm-start other encoder models (a run's ``encoder_from``) from a cross-encoder
    fine-tuned on passages, as PARADE and IDCM start from a BERT fine-tuned on MS MARCO passages.
    Its scoring head goes along, so the warm-started model first scores as the one it came from.
    """
    from rankstudy.nn.pretrained import save_encoder

    model, _ = load_trained(model_dir, embeddings, torch.device("cpu"))
    settings = _trained_config(model_dir)["model_settings"]
    if "encoder" not in settings or not isinstance(model, EncoderRanker):
        raise StudyError(f"{model_dir}: model {type(model).__name__} has no pre-trained encoder to export")
    # the head goes along where it scores h_[CLS] (not Socialformer's, which scores pooler outputs)
    save_encoder(model.encoder, settings["encoder"], out, head=model.score if model.CLS_HEAD else None)
    log.info("wrote the fine-tuned encoder of %s to %s", model_dir, out)


def _scoring_model(model_dir: Path, embeddings: Path, device: str, threads: int, *stores: Path):
    """(trained model in eval mode, its InputSpec, the resolved device), torch using ``threads`` threads;
    the token ``stores`` it will score are checked against the ids it reads first."""
    config = _trained_config(model_dir)
    check_token_stores(config["model_name"], config["model_settings"], *stores)
    torch.set_num_threads(max(1, threads))
    resolved = resolve_device(device)
    return (*load_trained(model_dir, embeddings, resolved), resolved)


def rerank_run(model_dir: Path, embeddings: Path, documents: Path, splits: Sequence[tuple[Path, Path, Path]],
               tag: str, depth: int, batch_size: int, device: str = "auto", threads: int = 1,
               precision: str = "fp32", reuse_documents: bool = False, max_query_length: int | None = None) -> None:
    """For each split's (queries, candidates, out): score the top ``depth`` candidates of every query with a trained
    model, at the lengths it was trained at (``max_query_length``: queries cut there instead) and at ``precision``
    (``rankstudy.precision``); write a TREC run (the neural order on top, the rest of the candidates after it). The
    model and the collection load once for all; ``reuse_documents``: each document encoded once for all its queries,
    where the model can (``rerank.score_candidates``)."""
    model, spec, resolved = _scoring_model(model_dir, embeddings, device, threads,
                                           *(queries for queries, _, _ in splits), documents)
    if max_query_length is not None:
        if max_query_length < 1:
            raise StudyError(f"rerank: the query length must be a positive number of tokens, not {max_query_length}")
        spec = replace(spec, max_query_length=max_query_length)
    document_store = TokenStore(documents)
    for queries, candidates, out in splits:
        first_stage = formats.read_run(candidates)
        scored = score_candidates(model, first_stage, TokenStore(queries), document_store, depth, batch_size,
                                  spec.max_query_length, spec.max_doc_length, resolved, precision=precision,
                                  reuse_documents=reuse_documents)
        # candidates below ``depth`` follow in first-stage order, so every run ranks the same candidates
        formats.write_run(out, rerank_to_depth(first_stage, scored, depth), tag)
        log.info("re-ranked %d queries (top %d) with %s -> %s", len(scored), depth, model_dir, out)


def write_regions(model_dir: Path, embeddings: Path, queries: Path, documents: Path, run: Path, out: Path,
                  depth: int, batch_size: int, device: str = "auto", threads: int = 1) -> None:
    """TKL's top regions for each query's top ``depth`` documents of ``run``, as CSV rows
    (qid, docid, rank, region, start, end); start = end = -1 where a document has fewer regions."""
    model, spec, resolved = _scoring_model(model_dir, embeddings, device, threads, queries, documents)
    if not model.REGIONS:
        raise StudyError(f"{model_dir}: a {type(model).__name__} model selects no regions (TKL does)")
    query_store, document_store = TokenStore(queries), TokenStore(documents)
    pairs = [(qid, docid, rank) for qid, ranking in formats.read_run(run).items()
             for rank, (docid, _) in enumerate(ranking[:depth], 1)]
    rows = []
    with torch.inference_mode():
        for chunk, query, docs in pair_batches(pairs, query_store, document_store, batch_size, spec.max_query_length,
                                               spec.max_doc_length, resolved):
            _, positions = model.score_with_regions(query, docs)
            for (qid, docid, rank), spans in zip(chunk, positions.cpu().tolist()):
                rows += [(qid, docid, rank, region, s, e) for region, (s, e) in enumerate(spans, 1)]
    with atomic_open(out) as handle:
        handle.write("qid,docid,rank,region,start,end\n")
        handle.writelines(f"{q},{d},{r},{g},{s},{e}\n" for q, d, r, g, s, e in rows)
    log.info("regions of %d documents -> %s", len(pairs), out)
