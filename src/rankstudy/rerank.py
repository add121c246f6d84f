"""Re-ranking first-stage candidates with a neural model (the operations on runs that need no model:
``rankstudy.runs``)."""

from __future__ import annotations

import logging
from typing import Iterator, Mapping, Sequence

import numpy as np
import torch
from tqdm import tqdm

from rankstudy.errors import StudyError
from rankstudy.formats import Run
from rankstudy.precision import autocast, tf32
from rankstudy.runs import ranked

log = logging.getLogger(__name__)


def ids_on_device(ids: np.ndarray, device: torch.device) -> torch.Tensor:
    """Token ids as a long tensor on ``device``; to a GPU from pinned memory without blocking, so the copy runs
    while the host batches the next pairs."""
    if device.type != "cuda":
        return torch.as_tensor(ids, dtype=torch.long, device=device)
    return torch.as_tensor(ids, dtype=torch.long).pin_memory().to(device, non_blocking=True)


def pair_batches(pairs: Sequence[tuple], query_store, doc_store, batch_size: int, max_query_length: int,
                 max_doc_length: int, device: str | torch.device) -> Iterator[tuple[Sequence[tuple], torch.Tensor, torch.Tensor]]:
    """(pairs, query ids [B, Lq], document ids [B, Ld]) in batches of ``batch_size`` (query id, doc id, ...) pairs."""
    device = torch.device(device)
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        query = ids_on_device(query_store.batch([pair[0] for pair in chunk], max_query_length), device)
        docs = ids_on_device(doc_store.batch([pair[1] for pair in chunk], max_doc_length), device)
        yield chunk, query, docs


def score_candidates(model: torch.nn.Module, run: Mapping[str, Sequence[tuple[str, float]]], query_store,
                     doc_store, depth: int, batch_size: int, max_query_length: int, max_doc_length: int,
                     device: str | torch.device, progress: bool = True, precision: str = "fp32",
                     reuse_documents: bool = False) -> Run:
    """Neural scores of each query's top ``depth`` candidates: qid -> [(docid, score)], best first.

    Pairs from several queries share a batch; the model is put in eval mode (and on ``device``) and scores at
    ``precision`` (``rankstudy.precision``). The scores stay on the device until the last batch: a GPU is not
    made to wait for the host after every batch. ``reuse_documents``, for a model that encodes a document
    without its query (``Ranker.DOCUMENT_ENCODING``: TK, TKL): each distinct document is encoded once and scored
    against every query that ranks it (``score_by_document``); other models score pair by pair.
    """
    if depth < 1 or batch_size < 1:
        raise StudyError(f"depth and batch_size must be at least 1, got {depth} and {batch_size}")
    pairs = [(qid, docid) for qid, ranking in run.items() for docid, _ in ranked(ranking)[:depth]]
    log_truncation("queries", query_store, list(dict.fromkeys(qid for qid, _ in pairs)), max_query_length)
    log_truncation("documents", doc_store, list(dict.fromkeys(docid for _, docid in pairs)), max_doc_length)
    model.to(device)
    model.eval()
    with torch.inference_mode(), tf32(precision, device), autocast(precision, device), \
            tqdm(total=len(pairs), desc="rerank", unit="pair", disable=not progress, dynamic_ncols=True) as bar:
        if reuse_documents and getattr(model, "DOCUMENT_ENCODING", False):
            scores = score_by_document(model, pairs, query_store, doc_store, batch_size, max_query_length,
                                       max_doc_length, device, bar)
        else:
            scores = score_pairs(model, pairs, query_store, doc_store, batch_size, max_query_length, max_doc_length,
                                 device, bar)
    result: Run = {qid: [] for qid in run}
    for (qid, docid), score in zip(pairs, scores.tolist()):
        result[qid].append((docid, score))
    return {qid: ranked(ranking) for qid, ranking in result.items()}


def log_truncation(what: str, store, ids: Sequence[str], max_length: int) -> int:
    """Log how many of ``ids`` are longer than the model reads: each is scored on its first ``max_length`` tokens
    (``TokenStore.batch``); returns that count."""
    lengths = store.lengths(ids)
    longer = int((lengths > max_length).sum())
    if longer:
        log.info("%d of %d %s are longer than the %d tokens the model reads: each is cut to its first %d "
                 "(their median length %d tokens)", longer, len(ids), what, max_length, max_length,
                 int(np.median(lengths[lengths > max_length])))
    return longer


def score_pairs(model: torch.nn.Module, pairs: Sequence[tuple[str, str]], query_store, doc_store, batch_size: int,
                max_query_length: int, max_doc_length: int, device: str | torch.device, bar: tqdm) -> np.ndarray:
    """The model's score of each (qid, docid) pair, the query and the document read together."""
    # batches of documents of similar length: a batch is padded to its longest document, which for
    # long documents of mixed lengths costs up to twice the tokens (models are padding-invariant)
    lengths = doc_store.lengths([docid for _, docid in pairs], max_doc_length)
    order = np.argsort(lengths, kind="stable")
    scores = np.zeros(len(pairs))
    parts = []
    for chunk, query, docs in pair_batches([pairs[k] for k in order], query_store, doc_store, batch_size,
                                           max_query_length, max_doc_length, device):
        parts.append(model(query, docs).float())
        bar.update(len(chunk))
    if parts:
        scores[order] = torch.cat(parts).cpu().numpy()
    return scores


def score_by_document(model: torch.nn.Module, pairs: Sequence[tuple[str, str]], query_store, doc_store,
                      batch_size: int, max_query_length: int, max_doc_length: int, device: str | torch.device,
                      bar: tqdm) -> np.ndarray:
    """The model's score of each (qid, docid) pair, each distinct document encoded once: ``batch_size`` documents
    of similar length at a time (``encode_documents``), then every pair of theirs in batches of ``batch_size``
    (``score_encoded``). The cost of encoding is paid once per document instead of once per pair."""
    device = torch.device(device)
    by_document: dict[str, list[int]] = {}
    for index, (_, docid) in enumerate(pairs):
        by_document.setdefault(docid, []).append(index)
    documents = list(by_document)
    lengths = doc_store.lengths(documents, max_doc_length)
    documents = [documents[k] for k in np.argsort(lengths, kind="stable")]
    order, parts = [], []
    for start in range(0, len(documents), batch_size):
        chunk = documents[start:start + batch_size]
        encoded = model.encode_documents(ids_on_device(doc_store.batch(chunk, max_doc_length), device))
        indices = [index for docid in chunk for index in by_document[docid]]
        rows = torch.as_tensor([row for row, docid in enumerate(chunk) for _ in by_document[docid]], device=device)
        for first in range(0, len(indices), batch_size):
            batch = indices[first:first + batch_size]
            query = ids_on_device(query_store.batch([pairs[index][0] for index in batch], max_query_length), device)
            parts.append(model.score_encoded(query, encoded, rows[first:first + batch_size]).float())
            bar.update(len(batch))
        order += indices
    scores = np.zeros(len(pairs))
    if parts:
        scores[order] = torch.cat(parts).cpu().numpy()
    return scores
