"""Training examples sampled from qrels and first-stage candidates (see docs/neural.md).

* Positives: the query's judged documents with grade >= ``rel_threshold``.
* Negatives: the query's top ``negatives_depth`` candidates (by score) whose grade (0 when
  unjudged) is below ``rel_threshold``.
* ``judged_negatives`` (triples only): a query's documents judged 0 (given negatives, e.g. MS MARCO's official
  triples' negative: ``rankstudy.datasets.local``) each make one triple first, with a drawn positive; the rest
  of its ``per_query`` triples are drawn as above, from the candidates and the judged negatives together.
* ``negatives_from``: ``candidates`` (all of them, as above) or ``training_documents``: only the candidates that
  some training query judges relevant. In a collection split by document (QMSum's meetings, ScisummNet's cited
  papers: a held-out query's relevant document is never a training query's) the held-out queries' documents
  otherwise enter training as negatives only (29 % of QMSum's BM25 training negatives), and a model that learns
  documents learns to rank exactly the held-out positives last.
* Queries are visited in qid order, each with its own draws from one
  ``numpy.random.default_rng(seed)``; queries without a positive or a negative are skipped.

``triples.tsv``: ``qid<TAB>positive<TAB>negative``; ``groups.tsv``: ``qid<TAB>positive<TAB>n1,n2,...``;
scored triples (``train.teachers``): ``qid<TAB>positive<TAB>negative<TAB>teacher score<TAB>teacher score``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from typing import Iterable, Sequence

import numpy as np

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError
from rankstudy.formats import FormatError, Qrels, Run, _empty, _lines

log = logging.getLogger(__name__)

Triple = tuple[str, str, str]
Group = tuple[str, str, tuple[str, ...]]
ScoredTriple = tuple[str, str, str, float, float]  # a triple and its teacher's scores of the two passages

_ID = re.compile(r"^[^\s,]+$")


NEGATIVES_FROM = ("candidates", "training_documents")


def _pools(qrels: Qrels, run: Run, rel_threshold: int, negatives_depth: int, negatives_from: str = "candidates"):
    """Yield ``(qid, positives, negatives)`` for usable queries; log the skipped ones."""
    if rel_threshold < 1 or negatives_depth < 1:
        raise StudyError("rel_threshold and negatives_depth must be at least 1")
    if negatives_from not in NEGATIVES_FROM:
        raise StudyError(f"negatives_from must be one of {', '.join(NEGATIVES_FROM)}, not {negatives_from!r}")
    # the documents a training query judges relevant: the only negatives allowed with training_documents
    allowed = {d for judged in qrels.values() for d, grade in judged.items() if grade >= rel_threshold} \
        if negatives_from == "training_documents" else None
    no_positive = no_negative = 0
    for qid in sorted(qrels):
        judged = qrels[qid]
        positives = sorted(d for d, grade in judged.items() if grade >= rel_threshold)
        ranking = sorted(run.get(qid, []), key=lambda item: -item[1])[:negatives_depth]
        negatives = [d for d, _ in ranking if judged.get(d, 0) < rel_threshold and (allowed is None or d in allowed)]
        if not positives:
            no_positive += 1
        elif not negatives:
            no_negative += 1
        else:
            yield qid, positives, negatives
    if no_positive or no_negative:
        log.info("skipped %d of %d queries: %d without a positive, %d without a negative in the top %d",
                 no_positive + no_negative, len(qrels), no_positive, no_negative, negatives_depth)


def make_triples(qrels: Qrels, candidates_run: Run, rel_threshold: int, negatives_depth: int,
                 per_query: int, seed: int, judged_negatives: bool = False,
                 negatives_from: str = "candidates") -> list[Triple]:
    """``per_query`` (qid, positive, negative) triples per query.

    Pairs are drawn from positives x negatives without replacement while there are enough
    distinct pairs, with replacement otherwise.
    """
    if per_query < 1:
        raise StudyError(f"per_query must be at least 1, got {per_query}")
    rng = np.random.default_rng(seed)
    triples: list[Triple] = []
    given_count = 0
    for qid, positives, negatives in _pools(qrels, candidates_run, rel_threshold, negatives_depth, negatives_from):
        given = sorted(d for d, grade in qrels[qid].items() if grade == 0)[:per_query] if judged_negatives else []
        for negative in given:
            triples.append((qid, positives[int(rng.integers(len(positives)))], negative))
        given_count += len(given)
        negatives = negatives + [d for d in given if d not in negatives]
        pairs, wanted = len(positives) * len(negatives), per_query - len(given)
        for index in rng.choice(pairs, size=wanted, replace=wanted > pairs):
            p, n = divmod(int(index), len(negatives))
            triples.append((qid, positives[p], negatives[n]))
    log.info("%d triples (%d with a given negative)", len(triples), given_count)
    return triples


def make_groups(qrels: Qrels, candidates_run: Run, rel_threshold: int, negatives_depth: int,
                per_query: int, negatives: int, seed: int, negatives_from: str = "candidates") -> list[Group]:
    """``per_query`` groups (qid, positive, ``negatives`` negatives) per query.

    A group's negatives are distinct when the query has at least ``negatives`` of them.
    """
    if per_query < 1 or negatives < 1:
        raise StudyError(f"per_query and negatives must be at least 1, got {per_query} and {negatives}")
    rng = np.random.default_rng(seed)
    groups: list[Group] = []
    for qid, positives, pool in _pools(qrels, candidates_run, rel_threshold, negatives_depth, negatives_from):
        for _ in range(per_query):
            positive = positives[int(rng.integers(len(positives)))]
            chosen = rng.choice(len(pool), size=negatives, replace=negatives > len(pool))
            groups.append((qid, positive, tuple(pool[int(i)] for i in chosen)))
    log.info("%d groups of 1 positive + %d negatives", len(groups), negatives)
    return groups


def query_subset(examples: Sequence[tuple], count: int) -> list[tuple]:
    """The examples of ``count`` of their queries: the first ``count`` qids in the order of their SHA-1 digests,
    a fixed order independent of the seed, so that smaller subsets are nested in larger ones (a learning curve)
    and every seed of a run trains on the same queries."""
    qids = sorted({example[0] for example in examples}, key=lambda qid: hashlib.sha1(qid.encode()).hexdigest())
    if count > len(qids):
        raise StudyError(f"train_queries: {count} training queries asked for, the examples have {len(qids)}")
    kept = set(qids[:count])
    return [example for example in examples if example[0] in kept]


def write_triples(path: str | os.PathLike, triples: Iterable[Sequence[str]]) -> None:
    with atomic_open(path) as out:
        for qid, positive, negative in triples:
            out.write(f"{qid}\t{positive}\t{negative}\n")


def write_groups(path: str | os.PathLike, groups: Iterable[tuple[str, str, Sequence[str]]]) -> None:
    with atomic_open(path) as out:
        for qid, positive, negatives in groups:
            out.write(f"{qid}\t{positive}\t{','.join(negatives)}\n")


def _fields(path, number: int, line: str, expected: str) -> list[str]:
    parts = line.split("\t")
    if len(parts) != 3 or not all(_ID.match(p) for p in parts[:2]):
        raise FormatError(path, number, expected, line)
    return parts


def read_triples(path: str | os.PathLike) -> list[Triple]:
    expected = "3 tab-separated ids 'qid<TAB>positive<TAB>negative'"
    triples = []
    for number, line in _lines(path):
        if line.strip():
            qid, positive, negative = _fields(path, number, line, expected)
            if not _ID.match(negative):
                raise FormatError(path, number, expected, line)
            triples.append((qid, positive, negative))
    if not triples:
        raise _empty(path, expected)
    return triples


def read_scored_triples(path: str | os.PathLike) -> list[ScoredTriple]:
    """Triples with a teacher's scores of the positive and the negative (finite numbers)."""
    expected = "5 tab-separated fields 'qid<TAB>positive<TAB>negative<TAB>positive score<TAB>negative score'"
    triples = []
    for number, line in _lines(path):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 5 or not all(_ID.match(p) for p in parts[:3]):
            raise FormatError(path, number, expected, line)
        try:
            scores = float(parts[3]), float(parts[4])
        except ValueError:
            raise FormatError(path, number, expected, line) from None
        if not all(np.isfinite(scores)):
            raise FormatError(path, number, "finite teacher scores", line)
        triples.append((parts[0], parts[1], parts[2], *scores))
    if not triples:
        raise _empty(path, expected)
    return triples


def read_groups(path: str | os.PathLike) -> list[Group]:
    """Read groups; every group must have the same number of negatives."""
    expected = "3 tab-separated fields 'qid<TAB>positive<TAB>neg1,neg2,...'"
    groups: list[Group] = []
    for number, line in _lines(path):
        if not line.strip():
            continue
        qid, positive, field = _fields(path, number, line, expected)
        negatives = tuple(field.split(","))
        if not all(_ID.match(n) for n in negatives):
            raise FormatError(path, number, expected, line)
        if groups and len(negatives) != len(groups[0][2]):
            raise FormatError(path, number, f"{len(groups[0][2])} negatives, as on the first line",
                              f"{len(negatives)} negatives")
        groups.append((qid, positive, negatives))
    if not groups:
        raise _empty(path, expected)
    return groups
