"""Re-ranking first-stage candidates with a neural model; re-ranking depth; score ensembles; the best seed;
cross-validation folds merged."""

from __future__ import annotations

import logging
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from rankstudy.errors import StudyError
from rankstudy.evaluate import aggregate, evaluate_run
from rankstudy.formats import Qrels, Run

log = logging.getLogger(__name__)


def _ranked(ranking: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Sorted by score, descending; ties keep their order."""
    return sorted(ranking, key=lambda item: -item[1])


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
    pairs = [(qid, docid) for qid, ranking in run.items() for docid, _ in _ranked(ranking)[:depth]]
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
    return {qid: _ranked(ranking) for qid, ranking in result.items()}


def rerank_to_depth(first_stage_run: Mapping[str, Sequence[tuple[str, float]]],
                    neural_run: Mapping[str, Sequence[tuple[str, float]]], depth: int) -> Run:
    """Each query's top ``depth`` first-stage candidates by neural score, then the rest in
    first-stage order, scored ``min(neural) - 1, min(neural) - 2, ...`` so a score sort keeps
    this order. Every re-ranked candidate needs a neural score."""
    if depth < 0:
        raise StudyError(f"depth must be >= 0, got {depth}")
    result: Run = {}
    for qid, ranking in first_stage_run.items():
        ranking = _ranked(ranking)
        neural = dict(neural_run.get(qid, ()))
        head = []
        for docid, _ in ranking[:depth]:
            if docid not in neural:
                raise StudyError(f"query {qid}: candidate {docid} (top {depth}) has no neural score")
            head.append((docid, neural[docid]))
        head = _ranked(head)
        floor = min((score for _, score in head), default=0.0)
        tail = [(docid, floor - i) for i, (docid, _) in enumerate(ranking[depth:], start=1)]
        result[qid] = head + tail
    return result


def tune_depth(first_stage_run: Mapping[str, Sequence[tuple[str, float]]],
               neural_run: Mapping[str, Sequence[tuple[str, float]]], qrels: Qrels, depths: Iterable[int],
               measure: str, rel_threshold: int = 1) -> tuple[int, pd.DataFrame]:
    """Mean ``measure`` of ``rerank_to_depth`` for each depth; the best depth (ties: the smallest)."""
    depths = sorted(set(depths))
    if not depths:
        raise StudyError("no depths to evaluate")
    judged = {qid: ranking for qid, ranking in first_stage_run.items() if qid in qrels}
    values = []
    for depth in depths:
        per_query = evaluate_run(rerank_to_depth(judged, neural_run, depth), qrels, [measure], rel_threshold)
        values.append(float(aggregate(per_query)["value"].iloc[0]) if len(per_query) else 0.0)
    table = pd.DataFrame({"depth": depths, "value": values})
    best = depths[max(range(len(depths)), key=lambda i: (values[i], -i))]
    log.info("best re-ranking depth for %s: %d (%.4f)", measure, best, max(values))
    return best, table


def best_validated(logs: Sequence[pd.DataFrame], names: Sequence[str]) -> int:
    """Index of the training log (``step``, ``metric`` per validation) whose validation metric peaked highest;
    ties go to the first. The TK notebook submits the best validation run of several initialisations."""
    best = []
    for frame, name in zip(logs, names, strict=True):
        metric = frame["metric"].dropna()
        if metric.empty:
            raise StudyError(f"{name}: no validation metric in the training log")
        best.append(float(metric.max()))
    chosen = int(np.argmax(best))
    log.info("best validation metric per seed: %s -> %s", ", ".join(f"{value:.4f}" for value in best), names[chosen])
    return chosen


def merge_disjoint(parts: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """One mapping qid -> value from parts with disjoint query ids (cross-validation folds' test runs or
    qrels, named by ``names`` in errors)."""
    merged: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for part, name in zip(parts, names, strict=True):
        for qid, value in part.items():
            if qid in merged:
                raise StudyError(f"{name}: query {qid!r} is also in {owner[qid]}: folds must not share queries")
            merged[qid], owner[qid] = value, name
    return merged


def ensemble(runs: Sequence[Mapping[str, Sequence[tuple[str, float]]]]) -> Run:
    """Average each (qid, docid)'s score over ``runs``; every run must hold the same pairs."""
    if not runs:
        raise StudyError("no runs to ensemble")
    first = runs[0]
    result: Run = {}
    for index, run in enumerate(runs[1:], start=1):
        if set(run) != set(first):
            raise StudyError(f"run {index} has other queries than run 0: "
                             f"{sorted(set(run) ^ set(first))[:5]}")
    for qid, ranking in first.items():
        totals = dict(ranking)
        for index, run in enumerate(runs[1:], start=1):
            scores = dict(run[qid])
            if set(scores) != set(totals):
                missing = sorted(set(scores) ^ set(totals))[:5]
                raise StudyError(f"query {qid}: runs 0 and {index} differ in documents {missing}")
            for docid, score in scores.items():
                totals[docid] += score
        result[qid] = _ranked((docid, total / len(runs)) for docid, total in totals.items())
    return result
