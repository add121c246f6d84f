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
from rankstudy.runs import ranked

log = logging.getLogger(__name__)


def pair_batches(pairs: Sequence[tuple], query_store, doc_store, batch_size: int, max_query_length: int,
                 max_doc_length: int, device: str | torch.device) -> Iterator[tuple[Sequence[tuple], torch.Tensor, torch.Tensor]]:
    """(pairs, query ids [B, Lq], document ids [B, Ld]) in batches of ``batch_size`` (query id, doc id, ...) pairs."""
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        query = torch.as_tensor(query_store.batch([pair[0] for pair in chunk], max_query_length), dtype=torch.long,
                                device=device)
        docs = torch.as_tensor(doc_store.batch([pair[1] for pair in chunk], max_doc_length), dtype=torch.long,
                               device=device)
        yield chunk, query, docs


def score_candidates(model: torch.nn.Module, run: Mapping[str, Sequence[tuple[str, float]]], query_store,
                     doc_store, depth: int, batch_size: int, max_query_length: int, max_doc_length: int,
                     device: str | torch.device, progress: bool = True) -> Run:
    """Neural scores of each query's top ``depth`` candidates: qid -> [(docid, score)], best first.

    Pairs from several queries share a batch; the model is put in eval mode (and on ``device``).
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
    done = 0
    with torch.inference_mode(), tqdm(total=len(pairs), desc="rerank", unit="pair", disable=not progress,
                                      dynamic_ncols=True) as bar:
        for chunk, query, docs in pair_batches([pairs[k] for k in order], query_store, doc_store, batch_size,
                                               max_query_length, max_doc_length, device):
            scores[order[done:done + len(chunk)]] = model(query, docs).float().cpu().numpy()
            done += len(chunk)
            bar.update(len(chunk))
    result: Run = {qid: [] for qid in run}
    for (qid, docid), score in zip(pairs, scores.tolist()):
        result[qid].append((docid, score))
    return {qid: ranked(ranking) for qid, ranking in result.items()}
