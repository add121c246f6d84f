"""An ir_datasets dataset, exported into the data contract.

Config (``datasets.<name>.irds``)::

    docs: msmarco-passage                        # the id that provides the documents
    splits:                                      # split -> the id that provides its queries and qrels
      train: msmarco-passage/train/judged
      dev: msmarco-passage/dev/small
      test: msmarco-passage/trec-dl-2019/judged

A split may list several ids; it is then their union (e.g. cross-validation folds: Robust04's
``disks45/nocr/trec-robust-2004/fold1`` … ``fold5``, three of them to train on). A query in two of
them must have the same text there; its qrels are merged.

A record's text is its ``default_text()`` where its type has one, else its string fields other
than the id joined by spaces; the writers replace tabs and line breaks (``clean_text``).
Grades are the integer ``relevance`` of each qrel.

Rules: every id must be known to ir_datasets, ``docs`` must provide documents and every split id
queries and qrels; a split without judgments is an error; ids must be non-empty and free of
whitespace. Qrels of a query that is not in the split's queries are dropped, and a (qid, docid)
judged twice keeps its last grade (both logged as warnings, as are queries without judgments).
Qrels docids are not checked against the corpus (that would hold every docid in memory).

Documents are streamed from ``docs_iter()`` with a progress bar on stderr; queries and qrels
are small and held in memory. ir_datasets downloads on first use: offline, its files must
already be under IR_DATASETS_HOME; a failure while reading becomes a ``StudyError``. Everything
is written into a temporary directory that replaces ``out`` only at the end.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from tqdm import tqdm

from rankstudy.atomic import atomic_path
from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.formats import Qrels, write_collection, write_qrels, write_queries

log = logging.getLogger(__name__)

_SPLIT = re.compile(r"^[A-Za-z0-9_-]+$")
_ID = re.compile(r"^\S+$")


@dataclasses.dataclass
class IrdsConfig:
    docs: str
    splits: dict[str, str | list[str]]


def _home() -> str:
    return os.environ.get("IR_DATASETS_HOME", str(Path.home() / ".ir_datasets"))


def _load(dataset_id: str, provides: tuple[str, ...], where: str) -> Any:
    import ir_datasets

    try:
        dataset = ir_datasets.load(dataset_id)
    except KeyError:
        raise StudyError(
            f"{where}: unknown ir_datasets id {dataset_id!r} (ir_datasets {ir_datasets.__version__}); "
            f"when offline, its data must also already be in IR_DATASETS_HOME ({_home()})"
        ) from None
    for entity in provides:
        if not getattr(dataset, f"has_{entity}")():
            raise StudyError(f"{where}: ir_datasets id {dataset_id!r} provides no {entity}")
    return dataset


def _records(dataset: Any, dataset_id: str, entity: str) -> Iterator[Any]:
    """Iterate ``<entity>_iter()``, turning a failure inside ir_datasets into a StudyError."""
    try:
        yield from getattr(dataset, f"{entity}_iter")()
    except Exception as error:
        detail = f"{type(error).__name__}: {error}"
        raise StudyError(
            f"ir_datasets could not read the {entity} of {dataset_id!r} ({detail[:300]}); "
            f"when offline, its data must already be in IR_DATASETS_HOME ({_home()})"
        ) from error


def _text(record: Any, id_field: str) -> str:
    if hasattr(record, "default_text"):
        return record.default_text()
    fields = zip(record._fields, record)
    return " ".join(value for field, value in fields if field != id_field and isinstance(value, str) and value)


def _checked_id(identifier: str, what: str, dataset_id: str) -> str:
    if not isinstance(identifier, str) or not _ID.match(identifier):
        raise StudyError(f"ir_datasets {dataset_id!r}: expected a non-empty {what} without spaces, got {identifier!r}")
    return identifier


def _documents(dataset: Any, dataset_id: str, name: str) -> Iterator[tuple[str, str]]:
    try:
        total = dataset.docs_count()
    except Exception:  # not every ir_datasets handler knows its size
        total = None
    interval = 0.5 if sys.stderr.isatty() else 30.0
    records = _records(dataset, dataset_id, "docs")
    progress = tqdm(records, total=total, desc=f"{name} documents", unit=" docs", file=sys.stderr, mininterval=interval)
    for doc in progress:
        yield _checked_id(doc.doc_id, "doc_id", dataset_id), _text(doc, "doc_id")


def _split(name: str, split: str, dataset_id: str) -> tuple[dict[str, str], Qrels]:
    dataset = _load(dataset_id, ("queries", "qrels"), f"datasets.{name}.irds.splits.{split}")
    queries = {
        _checked_id(query.query_id, "query_id", dataset_id): _text(query, "query_id")
        for query in _records(dataset, dataset_id, "queries")
    }
    qrels: Qrels = {}
    dropped = repeated = negative = 0
    for qrel in _records(dataset, dataset_id, "qrels"):
        if qrel.query_id not in queries:
            dropped += 1
            continue
        judged = qrels.setdefault(qrel.query_id, {})
        repeated += qrel.doc_id in judged
        grade = int(qrel.relevance)
        negative += grade < 0  # e.g. the Web track's -2 (spam): judged non-relevant, as docs/formats.md asks
        judged[_checked_id(qrel.doc_id, "doc_id", dataset_id)] = max(grade, 0)
    if not qrels:
        raise StudyError(f"datasets.{name}.irds.splits.{split}: {dataset_id!r} has no judgments for its queries")
    unjudged = len(queries) - len(qrels)
    if dropped:
        log.warning("%s/%s: dropped %d qrels of queries not in %s", name, split, dropped, dataset_id)
    if negative:
        log.warning("%s/%s: %d negative grades in %s written as 0 (judged non-relevant)", name, split, negative,
                    dataset_id)
    if repeated:
        log.warning("%s/%s: %d (qid, docid) judged again in %s; last grade kept", name, split, repeated, dataset_id)
    if unjudged:
        log.warning("%s/%s: %d of %d queries have no judgments in %s", name, split, unjudged, len(queries), dataset_id)
    return queries, qrels


def _id_list(dataset_ids: str | list[str], where: str) -> list[str]:
    """A split's ir_datasets ids: one id, or a non-empty list of ids (their union)."""
    ids = [dataset_ids] if isinstance(dataset_ids, str) else dataset_ids
    if not isinstance(ids, list) or not ids or not all(isinstance(dataset_id, str) for dataset_id in ids):
        raise ConfigError(f"{where}: expected an ir_datasets id or a non-empty list of ids")
    return ids


def _union(name: str, split: str, dataset_ids: str | list[str]) -> tuple[dict[str, str], Qrels]:
    """A split's queries and qrels from one ir_datasets id or the union of several."""
    queries: dict[str, str] = {}
    qrels: Qrels = {}
    for dataset_id in _id_list(dataset_ids, f"datasets.{name}.irds.splits.{split}"):
        part_queries, part_qrels = _split(name, split, dataset_id)
        for qid, text in part_queries.items():
            if queries.setdefault(qid, text) != text:
                raise StudyError(f"datasets.{name}.irds.splits.{split}: query {qid!r} has another text in "
                                 f"{dataset_id!r} than in an earlier id of the list")
        for qid, judged in part_qrels.items():
            qrels.setdefault(qid, {}).update(judged)
    return queries, qrels


def export(name: str, settings: Mapping[str, Any], out: Path) -> None:
    """Write the ir_datasets dataset described by ``settings`` into directory ``out``."""
    where = f"datasets.{name}.irds"
    config = from_dict(IrdsConfig, settings, where)
    if not isinstance(config.splits, Mapping) or not config.splits:
        raise ConfigError(f"{where}.splits: expected a non-empty mapping split -> ir_datasets id")
    for split in config.splits:
        if not isinstance(split, str) or not _SPLIT.match(split):
            raise ConfigError(f"{where}.splits: split names use letters, digits, '_' and '-'; got {split!r}")
    docs = _load(config.docs, ("docs",), f"{where}.docs")
    splits = {split: _union(name, split, dataset_ids) for split, dataset_ids in config.splits.items()}

    with atomic_path(out, directory=True) as tmp:
        for split, (queries, qrels) in splits.items():
            write_queries(tmp / f"queries.{split}.tsv", queries)
            write_qrels(tmp / f"qrels.{split}.txt", qrels)
            log.info("%s/%s: %d queries, %d judged", name, split, len(queries), len(qrels))
        count = write_collection(tmp / "collection.tsv", _documents(docs, config.docs, name))
        if not count:
            raise StudyError(f"{where}.docs: {config.docs!r} provided no documents")
        log.info("%s: %d documents from %s", name, count, config.docs)


def official_candidates(dataset_ids: str | list[str], qids: Iterable[str], hits: int) -> dict[str, list[tuple[str, float]]]:
    """A split's own candidate lists (ir_datasets ``scoreddocs``, e.g. TREC DL's official top 1,000): the
    top ``hits`` of each query in ``qids`` by score (ties in file order), from one id or the union of several,
    the queries in the order of ``qids`` (a set's order changes from process to process, and the run's bytes
    with it). A query of ``qids`` without candidates gets an empty list (logged)."""
    ids = _id_list(dataset_ids, "official candidates")
    run: dict[str, list[tuple[str, float]]] = {qid: [] for qid in qids}
    for dataset_id in ids:
        dataset = _load(dataset_id, ("scoreddocs",), f"official candidates of {dataset_id!r}")
        for record in _records(dataset, dataset_id, "scoreddocs"):
            if record.query_id in run:
                run[record.query_id].append((_checked_id(record.doc_id, "doc_id", dataset_id), float(record.score)))
    missing = sorted(qid for qid, ranking in run.items() if not ranking)
    if len(missing) == len(run):
        raise StudyError(f"{', '.join(ids)}: no scoreddocs for any of the split's {len(run)} queries")
    if missing:
        log.warning("%d of %d queries have no official candidates (e.g. %s)", len(missing), len(run), missing[0])
    # MS MARCO passage's scoreddocs carry no scores (ir_datasets gives every pair 0): left tied, trec_eval would
    # order them by docid while the depth cut and re-ranking took the file's order; the file's order, as scores
    unscored = [qid for qid, ranking in run.items() if len(ranking) > 1 and len({score for _, score in ranking}) == 1]
    for qid in unscored:
        run[qid] = [(docid, float(len(run[qid]) - rank)) for rank, (docid, _) in enumerate(run[qid])]
    if unscored:
        log.warning("%d of %d queries' official candidates carry no scores (all tied): ranked in the file's order",
                    len(unscored), len(run))
    return {qid: sorted(ranking, key=lambda item: -item[1])[:hits] for qid, ranking in run.items()}
