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
                     device: str | torch.device, progress: bool = True, precision: str = "fp32") -> Run:
    """Neural scores of each query's top ``depth`` candidates: qid -> [(docid, score)], best first.

    Pairs from several queries share a batch; the model is put in eval mode (and on ``device``) and scores at
    ``precision`` (``rankstudy.precision``). The scores stay on the device until the last batch: a GPU is not
    made to wait for the host after every batch.
    """
    if depth < 1 or batch_size < 1:
        raise StudyError(f"depth and batch_size must be at least 1, got {depth} and {batch_size}")
    pairs = [(qid, docid) for qid, ranking in run.items() for docid, _ in ranked(ranking)[:depth]]
    # batches of documents of similar length: a batch is padded to its longest document, which for
    # long documents of mixed lengths costs up to twice the tokens (models are padding-invariant)
    lengths = doc_store.lengths([docid for _, docid in pairs], max_doc_length)
    order = np.argsort(lengths, kind="stable")
    model.to(device)
    model.eval()
    scores = np.zeros(len(pairs))
    parts = []
    with torch.inference_mode(), tf32(precision, device), autocast(precision, device), \
            tqdm(total=len(pairs), desc="rerank", unit="pair", disable=not progress, dynamic_ncols=True) as bar:
        for chunk, query, docs in pair_batches([pairs[k] for k in order], query_store, doc_store, batch_size,
                                               max_query_length, max_doc_length, device):
            parts.append(model(query, docs).float())
            bar.update(len(chunk))
    if parts:
        scores[order] = torch.cat(parts).cpu().numpy()
    result: Run = {qid: [] for qid in run}
    for (qid, docid), score in zip(pairs, scores.tolist()):
        result[qid].append((docid, score))
    return {qid: ranked(ranking) for qid, ranking in result.items()}
