"""A local directory of TSV/TREC files, validated and written into the data contract.

Config (``datasets.<name>.local``)::

    path: data/cranfield              # relative to the working directory (the workflow root)
    collection: collection.tsv        # default; "docid<TAB>text" per line
    splits:
      test: {queries: queries.tsv, qrels: qrels.txt}   # "qid<TAB>text"; TREC "qid 0 docid rel"
    candidates: bm25.run              # optional: a TREC run of given candidate lists -> candidates.run
    qrels_beyond_collection: false    # true: keep judgments of documents the collection lacks

``candidates`` is the folder's own first stage (e.g. BM25's top 100 with the passages' text): a
``first_stage.systems`` entry of model ``official`` reads its lists of a split's queries. Its docids
must be documents of the collection and its qids queries of a split.

``qrels_beyond_collection`` keeps a pool's full judgments when the collection holds only the
candidates' text (TREC DL passages: the top 100): nDCG's ideal ranking, AP and recall count every
judged document, as in the published numbers. Training positives need text: query folds
(``rankstudy.datasets.folds``) keep only those in their train splits.

Validation (every failure is a ``StudyError`` naming the file, and the line where there is one):

* all named files exist (every missing one is listed);
* every line is well formed (``rankstudy.formats``: two tab-separated fields, integer grades,
  UTF-8), docids and qids are unique, and a (qid, docid) pair is judged once;
* every qrels line names a query of its split and a document of the collection (unless
  ``qrels_beyond_collection``);
* every split has at least one judgment.

Queries without any judgment and empty documents are allowed and logged as warnings.

The collection is streamed (only the set of docids is kept). Everything is written into a
temporary directory that replaces ``out`` only when all checks pass, so a failure leaves
nothing behind.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path
from typing import Any, Iterator, Mapping

from rankstudy.atomic import atomic_path
from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.formats import (
    FormatError,
    Qrels,
    iter_collection,
    iter_qrels,
    read_queries,
    read_run,
    write_collection,
    write_qrels,
    write_queries,
    write_run,
)

log = logging.getLogger(__name__)

_SPLIT = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclasses.dataclass
class LocalConfig:
    path: str
    splits: dict[str, dict]
    collection: str = "collection.tsv"
    candidates: str | None = None
    qrels_beyond_collection: bool = False


def _config(name: str, settings: Mapping[str, Any]) -> LocalConfig:
    where = f"datasets.{name}.local"
    config = from_dict(LocalConfig, settings, where)
    if not isinstance(config.splits, Mapping) or not config.splits:
        raise ConfigError(f"{where}.splits: expected a non-empty mapping split -> {{queries, qrels}}")
    for split, files in config.splits.items():
        if not isinstance(split, str) or not _SPLIT.match(split):
            raise ConfigError(f"{where}.splits: split names use letters, digits, '_' and '-'; got {split!r}")
        if not isinstance(files, Mapping) or set(files) != {"queries", "qrels"}:
            raise ConfigError(f"{where}.splits.{split}: expected exactly the keys queries and qrels, got {files!r}")
    return config


def _documents(path: Path, docids: set[str]) -> Iterator[tuple[str, str]]:
    """Stream the collection, recording its docids and counting empty texts."""
    empty = 0
    for docid, text in iter_collection(path):
        docids.add(docid)
        empty += not text.strip()
        yield docid, text
    if empty:
        log.warning("%s: %d empty document(s)", path, empty)


def _judgments(path: Path, queries: Mapping[str, str], queries_path: Path, docids: set[str] | None,
               collection: Path) -> Qrels:
    """Read a qrels file, checking each line's qid against the split and its docid against the collection
    (``docids``; None: judgments beyond the collection are kept)."""
    qrels: Qrels = {}
    for number, qid, docid, grade in iter_qrels(path):
        if qid not in queries:
            raise FormatError(path, number, f"a qid listed in {queries_path}", qid)
        if docids is not None and docid not in docids:
            raise FormatError(path, number, f"a docid listed in {collection}", docid)
        qrels.setdefault(qid, {})[docid] = grade
    if not qrels:
        raise FormatError(path, None, "at least one judgment for the split", "no judgments")
    return qrels


def _candidates(path: Path, qids: set[str], docids: set[str], collection: Path) -> dict:
    """Read the given candidate run, checking that it ranks documents of the collection for known queries."""
    run = read_run(path)
    unknown = sorted(set(run) - qids)
    if unknown:
        raise StudyError(f"{path}: ranks {len(unknown)} queries that no split lists (e.g. {unknown[0]!r})")
    missing = sorted({docid for ranking in run.values() for docid, _ in ranking} - docids)
    if missing:
        raise StudyError(f"{path}: {len(missing)} ranked documents are not in {collection} (e.g. {missing[0]!r}); "
                         "a candidate needs its text to be re-ranked")
    return run


def export(name: str, settings: Mapping[str, Any], out: Path) -> None:
    """Validate the local dataset ``name`` and write it into directory ``out``."""
    config = _config(name, settings)
    root = Path(config.path)
    collection = root / config.collection
    splits = {split: (root / files["queries"], root / files["qrels"]) for split, files in config.splits.items()}
    candidates = root / config.candidates if config.candidates else None
    needed = [collection] + [path for pair in splits.values() for path in pair] + ([candidates] if candidates else [])
    missing = [str(path) for path in dict.fromkeys(needed) if not path.is_file()]
    if missing:
        raise StudyError(f"dataset {name}: missing file(s): {', '.join(missing)}")

    with atomic_path(out, directory=True) as tmp:
        docids: set[str] = set()
        count = write_collection(tmp / "collection.tsv", _documents(collection, docids))
        log.info("%s: %d documents from %s", name, count, collection)
        qids: set[str] = set()
        for split, (queries_path, qrels_path) in splits.items():
            queries = read_queries(queries_path)
            qids.update(queries)
            qrels = _judgments(qrels_path, queries, queries_path, None if config.qrels_beyond_collection else docids,
                               collection)
            beyond = sum(docid not in docids for judged in qrels.values() for docid in judged)
            if beyond:
                log.info("%s/%s: %d judgments of documents without text kept (qrels_beyond_collection)",
                         name, split, beyond)
            unjudged = len(queries) - len(qrels)
            if unjudged:
                log.warning("%s: %d of %d queries have no judgments in %s", name, unjudged, len(queries), qrels_path)
            write_queries(tmp / f"queries.{split}.tsv", queries)
            write_qrels(tmp / f"qrels.{split}.txt", qrels)
            log.info("%s/%s: %d queries, %d judged", name, split, len(queries), len(qrels))
        if candidates:
            run = _candidates(candidates, qids, docids, collection)
            write_run(tmp / "candidates.run", run, "candidates")
            log.info("%s: candidates of %d queries from %s", name, len(run), candidates)
