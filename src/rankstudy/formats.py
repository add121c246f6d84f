"""The study's text formats (see docs/formats.md) — the only module that parses them.

| artifact   | line format                          |
|------------|--------------------------------------|
| collection | ``docid<TAB>text``                   |
| queries    | ``qid<TAB>text``                     |
| qrels      | ``qid 0 docid rel`` (rel: integer)   |
| run        | ``qid Q0 docid rank score tag``      |

Every reader reports a malformed line as ``FormatError`` naming the file, the 1-based line
number, what was expected and what was found; a file without a single record is an error at the
line after its last one. A UTF-8 byte-order mark before the first line is skipped; elsewhere U+FEFF is
refused in ids (allowed in a collection's or queries' text, as a zero-width space); NUL bytes are refused.
Every writer is atomic (temp file + rename). docs/formats.md lists what each
reader accepts and refuses.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from rankstudy.atomic import atomic_open
from rankstudy.errors import StudyError

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[tuple[str, float]]]

_ID = re.compile(r"^\S+$")
_WHITESPACE = re.compile(r"[\t\r\n]+")


class FormatError(StudyError, ValueError):
    """A line of an input file does not have the expected format."""

    def __init__(self, path: str | os.PathLike, line: int | None, expected: str, got: str | None = None):
        self.path, self.line, self.expected, self.got = str(path), line, expected, got
        where = f"{path}:{line}" if line is not None else str(path)
        message = f"{where}: expected {expected}"
        if got is not None:
            shown = got if len(got) <= 120 else got[:117] + "..."
            message += f"; got {shown!r}"
        super().__init__(message)


def clean_text(text: str) -> str:
    """Replace tabs and line breaks so a text fits on one TSV line."""
    return _WHITESPACE.sub(" ", text).strip()


def _lines(path: str | os.PathLike, text_after_tab: bool = False) -> Iterator[tuple[int, str]]:
    """Yield (line number, line without its newline); decoding errors, NUL bytes and byte-order marks name the
    line. ``text_after_tab``: a line is ``id<TAB>text`` and U+FEFF is allowed in its text, where it is a
    zero-width no-break space (real MS MARCO passages hold some); an id holding one would match nothing."""
    if not Path(path).is_file():
        raise FormatError(path, None, "an existing file", "no such file")
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise FormatError(path, number, "UTF-8 text", f"undecodable byte at column {error.start + 1}") from None
            if number == 1:  # a byte-order mark (Windows editors) is not part of the first id
                line = line.removeprefix("\ufeff")
            checked = {"\0": line, "\ufeff": line.split("\t", 1)[0] if text_after_tab else line}
            for bad, what in (("\0", "NUL byte"), ("\ufeff", "byte-order mark (U+FEFF)")):
                if bad in checked[bad]:  # invisible: an id holding one would match nothing
                    raise FormatError(path, number, f"text without a {what} (a BOM only starts a file)",
                                      f"one at column {line.index(bad) + 1}")
            yield number, line.rstrip("\r\n")


def _count_lines(path: str | os.PathLike) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def _empty(path: str | os.PathLike, expected: str) -> FormatError:
    """The error of a file without a single record: at the line after its last one."""
    return FormatError(path, _count_lines(path) + 1, expected, "end of file")


def _tsv_pairs(path: str | os.PathLike, id_name: str) -> Iterator[tuple[int, str, str]]:
    for number, line in _lines(path, text_after_tab=True):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise FormatError(path, number, f"2 tab-separated fields '{id_name}<TAB>text'", line)
        identifier, text = parts
        if not _ID.match(identifier):
            raise FormatError(path, number, f"a non-empty {id_name} without spaces", identifier)
        yield number, identifier, text


def iter_collection(path: str | os.PathLike, check_unique: bool = True) -> Iterator[tuple[str, str]]:
    """Stream ``(docid, text)`` pairs; empty texts are allowed, duplicate ids and empty files are not."""
    seen: dict[str, int] = {}
    count = 0
    for number, docid, text in _tsv_pairs(path, "docid"):
        if check_unique:
            if docid in seen:
                raise FormatError(path, number, f"a unique docid (first seen on line {seen[docid]})", docid)
            seen[docid] = number
        count += 1
        yield docid, text
    if not count:
        raise _empty(path, "at least one document 'docid<TAB>text'")


def iter_collections(paths: Sequence[str | os.PathLike]) -> Iterator[tuple[str, str]]:
    """Stream several collection files in order as one collection (a collection split into parts): a docid is
    unique across all of them, and a repeat names the file and line where it was first seen."""
    seen: dict[str, tuple[str, int]] = {}
    for path in paths:
        count = 0
        for number, docid, text in _tsv_pairs(path, "docid"):
            if docid in seen:
                first_path, first_line = seen[docid]
                raise FormatError(path, number, f"a unique docid (first seen at {first_path}:{first_line})", docid)
            seen[docid] = (str(path), number)
            count += 1
            yield docid, text
        if not count:
            raise _empty(path, "at least one document 'docid<TAB>text'")


def read_queries(path: str | os.PathLike) -> dict[str, str]:
    queries: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, qid, text in _tsv_pairs(path, "qid"):
        if qid in queries:
            raise FormatError(path, number, f"a unique qid (first seen on line {lines[qid]})", qid)
        queries[qid], lines[qid] = text, number
    if not queries:
        raise _empty(path, "at least one query 'qid<TAB>text'")
    return queries


def iter_qrels(path: str | os.PathLike) -> Iterator[tuple[int, str, str, int]]:
    """Stream ``(line number, qid, docid, grade)``; a (qid, docid) pair judged twice, a negative
    grade and an empty file are errors."""
    seen: set[tuple[str, str]] = set()
    for number, line in _lines(path):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise FormatError(path, number, "4 whitespace-separated fields 'qid iteration docid relevance'", line)
        qid, _, docid, rel = parts
        try:
            grade = int(rel)
        except ValueError:
            raise FormatError(path, number, "an integer relevance grade in field 4", rel) from None
        if grade < 0:  # trec_eval's readers disagree on them; map e.g. the Web track's -2 (spam) to 0 first
            raise FormatError(path, number, "a relevance grade >= 0 in field 4 (0 = judged non-relevant)", rel)
        if (qid, docid) in seen:
            raise FormatError(path, number, f"one judgment per (qid, docid); {qid} {docid} is judged twice", line)
        seen.add((qid, docid))
        yield number, qid, docid, grade
    if not seen:
        raise _empty(path, "at least one judgment 'qid iteration docid relevance'")


def read_ids(path: str | os.PathLike, what: str = "qid") -> list[str]:
    """One id per line (blank lines skipped); ids without whitespace, each once, at least one."""
    ids: dict[str, int] = {}
    for number, line in _lines(path):
        identifier = line.strip()
        if not identifier:
            continue
        if not _ID.match(identifier):
            raise FormatError(path, number, f"one {what} per line, without spaces", line)
        if identifier in ids:
            raise FormatError(path, number, f"a unique {what} (first seen on line {ids[identifier]})", identifier)
        ids[identifier] = number
    if not ids:
        raise _empty(path, f"at least one {what}")
    return list(ids)


def read_qrels(path: str | os.PathLike) -> Qrels:
    qrels: Qrels = {}
    for _, qid, docid, grade in iter_qrels(path):
        qrels.setdefault(qid, {})[docid] = grade
    return qrels


def read_run(path: str | os.PathLike) -> Run:
    """Read a TREC run; each query's list is returned sorted by score, descending.

    Ties keep the file's order, so a run written by ``write_run`` reads back unchanged.
    """
    run: Run = {}
    seen: dict[str, set[str]] = {}
    for number, line in _lines(path):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise FormatError(path, number, "6 whitespace-separated fields 'qid Q0 docid rank score tag'", line)
        qid, _, docid, rank, score, _ = parts
        try:
            int(rank)
        except ValueError:
            raise FormatError(path, number, "an integer rank in field 4", rank) from None
        try:
            value = float(score)
        except ValueError:
            raise FormatError(path, number, "a numeric score in field 5", score) from None
        if not math.isfinite(value):
            raise FormatError(path, number, "a finite score in field 5", score)
        docs = seen.setdefault(qid, set())
        if docid in docs:
            raise FormatError(path, number, f"each docid once per query; {docid} repeats for query {qid}", line)
        docs.add(docid)
        run.setdefault(qid, []).append((docid, value))
    if not run:
        raise _empty(path, "at least one ranked document 'qid Q0 docid rank score tag'")
    for ranking in run.values():
        ranking.sort(key=lambda item: -item[1])
    return run


def write_collection(path: str | os.PathLike, docs: Iterable[tuple[str, str]]) -> int:
    """Write ``(docid, text)`` pairs; returns the number written."""
    count = 0
    with atomic_open(path) as out:
        for docid, text in docs:
            out.write(f"{docid}\t{clean_text(text)}\n")
            count += 1
    return count


def write_queries(path: str | os.PathLike, queries: Mapping[str, str]) -> None:
    with atomic_open(path) as out:
        for qid, text in queries.items():
            out.write(f"{qid}\t{clean_text(text)}\n")


def write_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_open(path) as out:
        for qid, judged in qrels.items():
            for docid, grade in judged.items():
                out.write(f"{qid} 0 {docid} {int(grade)}\n")


def write_run(path: str | os.PathLike, run: Mapping[str, Sequence[tuple[str, float]]], tag: str) -> None:
    """Write a TREC run, each query sorted by score (descending, stable), ranks from 1."""
    with atomic_open(path) as out:
        for qid, ranking in run.items():
            ordered = sorted(ranking, key=lambda item: -item[1])
            for rank, (docid, score) in enumerate(ordered, start=1):
                out.write(f"{qid} Q0 {docid} {rank} {score:.9g} {tag}\n")
