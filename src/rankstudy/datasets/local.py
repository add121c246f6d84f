"""A local directory of TSV/TREC files, validated and written into the data contract.

Config (``datasets.<name>.local``)::

    path: data/cranfield              # relative to the working directory (the workflow root)
    collection: collection.tsv        # default; "docid<TAB>text" per line; where the file is absent, its parts
                                      # collection.part1.tsv, collection.part2.tsv, ... are read in order
    splits:
      test: {queries: queries.tsv, qrels: qrels.txt}   # "qid<TAB>text"; TREC "qid 0 docid rel"
    candidates: bm25.run              # optional: a TREC run of given candidate lists -> candidates.run
    qrels_beyond_collection: false    # true: keep judgments of documents the collection lacks
    pool: [../other]                  # optional: other folders' collection.tsv (or collection files) joined
                                      # to this one, text only
    held_out: {from: train, split: dev, queries: 500}   # optional: a seeded validation split carved from `from`

A split may also name ``negatives``: a ``qid<TAB>docid`` file of given negatives (e.g. MS MARCO's official
triples' negative), written into the split's qrels as grade 0 (judged non-relevant); the training examples
use every grade-0 judgment of a query (``rankstudy.train.examples``).

``candidates`` is the folder's own first stage (e.g. BM25's top 100 with the passages' text): a
``first_stage.systems`` entry of model ``official`` reads its lists of a split's queries. Its docids
must be documents of the collection and its qids queries of a split.

``qrels_beyond_collection`` keeps a pool's full judgments when the collection holds only the
candidates' text (TREC DL passages: the top 100): nDCG's ideal ranking, AP and recall count every
judged document, as in the published numbers. Training positives need text: query folds
(``rankstudy.datasets.folds``) keep only those in their train splits.

A large collection may come split into parts (files kept under a size limit): ``collection.part1.tsv`` to
``collection.partN.tsv``, numbered without gaps, read in that order as one collection (a docid unique across
them).

``pool`` pools documents of other folders into the collection, never their judgments (the training queries'
BM25 negatives are searched in the pool: config/msmarco-passages.yaml). A docid already in the collection keeps
its first text (MS MARCO renders a few passages with and without their title); the copies are logged.

``held_out`` moves ``queries`` judged queries of split ``from``, chosen with the study seed, into a new split
(e.g. a validation set apart from the training queries); the rest stay in ``from``.

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

import numpy as np

from rankstudy.atomic import atomic_path
from rankstudy.config import ConfigError, from_dict
from rankstudy.errors import StudyError
from rankstudy.formats import (
    FormatError,
    Qrels,
    _tsv_pairs,
    iter_collections,
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
SPLIT_FILES = {"queries", "qrels", "negatives"}


@dataclasses.dataclass
class LocalConfig:
    path: str
    splits: dict[str, dict]
    collection: str = "collection.tsv"
    candidates: str | None = None
    qrels_beyond_collection: bool = False
    pool: list[str] = dataclasses.field(default_factory=list)
    held_out: dict | None = None


def _config(name: str, settings: Mapping[str, Any]) -> LocalConfig:
    where = f"datasets.{name}.local"
    config = from_dict(LocalConfig, settings, where)
    if not isinstance(config.splits, Mapping) or not config.splits:
        raise ConfigError(f"{where}.splits: expected a non-empty mapping split -> {{queries, qrels}}")
    for split, files in config.splits.items():
        if not isinstance(split, str) or not _SPLIT.match(split):
            raise ConfigError(f"{where}.splits: split names use letters, digits, '_' and '-'; got {split!r}")
        if not isinstance(files, Mapping) or not {"queries", "qrels"} <= set(files) <= SPLIT_FILES:
            raise ConfigError(f"{where}.splits.{split}: expected the keys queries and qrels (and optionally "
                              f"negatives), got {files!r}")
    if config.held_out is not None:
        held = config.held_out
        if (not isinstance(held, Mapping) or set(held) != {"from", "split", "queries"}
                or not isinstance(held["queries"], int) or held["queries"] < 1):
            raise ConfigError(f"{where}.held_out: expected {{from: SPLIT, split: NEW, queries: N >= 1}}, got {held!r}")
        if held["from"] not in config.splits:
            raise ConfigError(f"{where}.held_out.from: {held['from']!r} is not one of the splits "
                              f"({', '.join(config.splits)})")
        if held["split"] in config.splits or not _SPLIT.match(str(held["split"])):
            raise ConfigError(f"{where}.held_out.split: expected a new split name, got {held['split']!r}")
    return config


def splits(settings: Mapping[str, Any]) -> list[str]:
    """The splits a local dataset writes: its files' splits and its held-out split."""
    held = settings.get("held_out")
    return list(settings["splits"]) + ([held["split"]] if held else [])


def collection_files(folder: Path, name: str = "collection.tsv") -> list[Path]:
    """The files of ``folder``'s collection ``name``: the file itself, or where it is absent its parts
    ``<stem>.part1.tsv`` ... ``<stem>.partN.tsv`` in numeric order (a gap in the numbering is an error). A
    collection found neither way is returned as ``[folder / name]`` for the caller's missing-file report."""
    single = folder / name
    stem = name.removesuffix(".tsv")
    part = re.compile(re.escape(stem) + r"\.part(\d+)\.tsv")
    parts = {}
    if not single.is_file() and folder.is_dir():
        for path in folder.iterdir():
            if number := part.fullmatch(path.name):
                parts[int(number.group(1))] = path
    if not parts:
        return [single]
    if sorted(parts) != list(range(1, len(parts) + 1)):
        raise StudyError(f"{folder}: expected collection parts {stem}.partN.tsv numbered 1 to N without gaps; "
                         f"found part numbers {sorted(parts)}")
    return [parts[number] for number in sorted(parts)]


def describe(files: list[Path]) -> str:
    """``files`` in a message: one path, or the first part's path and how many parts."""
    return str(files[0]) if len(files) == 1 else f"{files[0]} (and its other {len(files) - 1} parts)"


def _documents(files: list[Path], docids: set[str]) -> Iterator[tuple[str, str]]:
    """Stream a collection (its parts in order), recording its docids and counting empty texts."""
    empty = 0
    for docid, text in iter_collections(files):
        docids.add(docid)
        empty += not text.strip()
        yield docid, text
    if empty:
        log.warning("%s: %d empty document(s)", describe(files), empty)


def _pooled(collection: list[Path], pool: list[list[Path]], docids: set[str]) -> Iterator[tuple[str, str]]:
    """The collection's documents, then the pool's that it lacks. A docid seen again keeps its first text (the
    collection's own: its judgments were made on it); copies with another text are counted and logged."""
    yield from _documents(collection, docids)
    for files in pool:
        other = 0
        for docid, text in _documents(files, set()):
            if docid in docids:
                other += 1
                continue
            docids.add(docid)
            yield docid, text
        if other:
            log.warning("%s: %d documents already in the collection, kept with the first text", describe(files),
                        other)


def _given_negatives(path: Path, qrels: Qrels, queries: Mapping[str, str], docids: set[str]) -> int:
    """Add the ``qid<TAB>docid`` negatives of ``path`` to ``qrels`` as grade 0; returns how many were added."""
    added = 0
    for number, qid, docid in _tsv_pairs(path, "qid"):
        if qid not in queries:
            raise FormatError(path, number, "a qid of the split's queries", qid)
        if docid not in docids:
            raise FormatError(path, number, "a docid of the collection (a negative needs its text)", docid)
        if qrels.get(qid, {}).get(docid, 0) > 0:
            raise FormatError(path, number, "a document not judged relevant to the query", f"{qid} {docid}")
        added += docid not in qrels.setdefault(qid, {})
        qrels[qid][docid] = 0
    return added


def _hold_out(queries: dict[str, str], qrels: Qrels, count: int, seed: int, where: str):
    """Move ``count`` judged queries (seeded choice) out of ``queries``/``qrels``; returns the moved ones."""
    judged = sorted(qrels)
    if count >= len(judged):
        raise StudyError(f"{where}: cannot hold out {count} of {len(judged)} judged queries (some must stay)")
    chosen = sorted(judged[i] for i in np.random.default_rng(seed).choice(len(judged), size=count, replace=False))
    return {qid: queries.pop(qid) for qid in chosen}, {qid: qrels.pop(qid) for qid in chosen}


def _judgments(path: Path, queries: Mapping[str, str], queries_path: Path, docids: set[str] | None,
               collection: str) -> Qrels:
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


def _candidates(path: Path, qids: set[str], docids: set[str], collection: str) -> dict:
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


def export(name: str, settings: Mapping[str, Any], out: Path, seed: int = 0) -> None:
    """Validate the local dataset ``name`` and write it into directory ``out`` (``seed``: the held-out split's
    choice)."""
    config = _config(name, settings)
    root = Path(config.path)
    collection = collection_files(root, config.collection)
    # a pool entry is a collection file, or a folder of this layout (its collection.tsv or its parts)
    pool = [collection_files(Path(path)) if Path(path).is_dir() else [Path(path)] for path in config.pool]
    files = {split: {key: root / value for key, value in paths.items()} for split, paths in config.splits.items()}
    candidates = root / config.candidates if config.candidates else None
    needed = ([*collection, *(path for entry in pool for path in entry)]
              + [path for paths in files.values() for path in paths.values()] + ([candidates] if candidates else []))
    missing = [str(path) for path in dict.fromkeys(needed) if not path.is_file()]
    if missing:
        raise StudyError(f"dataset {name}: missing file(s): {', '.join(missing)}")

    with atomic_path(out, directory=True) as tmp:
        docids: set[str] = set()
        count = write_collection(tmp / "collection.tsv", _pooled(collection, pool, docids))
        log.info("%s: %d documents from %s", name, count, ", ".join(map(describe, [collection, *pool])))
        qids: set[str] = set()
        written = {}
        for split, paths in files.items():
            queries_path, qrels_path = paths["queries"], paths["qrels"]
            queries = read_queries(queries_path)
            qids.update(queries)
            qrels = _judgments(qrels_path, queries, queries_path, None if config.qrels_beyond_collection else docids,
                               describe(collection))
            if "negatives" in paths:
                added = _given_negatives(paths["negatives"], qrels, queries, docids)
                log.info("%s/%s: %d given negatives from %s (grade 0)", name, split, added, paths["negatives"])
            written[split] = (queries, qrels, qrels_path)
        if config.held_out:
            held = config.held_out
            source_queries, source_qrels, source_path = written[held["from"]]
            moved = _hold_out(source_queries, source_qrels, held["queries"], seed,
                              f"datasets.{name}.local.held_out")
            written[held["split"]] = (*moved, source_path)
            log.info("%s: %d of %s's judged queries held out as split %s (seed %d)", name, held["queries"],
                     held["from"], held["split"], seed)
        for split, (queries, qrels, qrels_path) in written.items():
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
            run = _candidates(candidates, qids, docids, describe(collection))
            write_run(tmp / "candidates.run", run, "candidates")
            log.info("%s: candidates of %d queries from %s", name, len(run), candidates)
