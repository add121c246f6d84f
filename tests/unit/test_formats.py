"""Readers name the file, line and expectation for bad input; writers are atomic."""

from __future__ import annotations

import pytest

from rankstudy import formats
from rankstudy.atomic import atomic_open, atomic_path


@pytest.mark.parametrize("reader, content, line, expected", [
    (lambda p: list(formats.iter_collection(p)), "d1\tok\nd2 no tab\n", 2, "2 tab-separated fields"),
    (lambda p: list(formats.iter_collection(p)), "d1\tok\nd1\tagain\n", 2, "unique docid (first seen on line 1)"),
    (lambda p: list(formats.iter_collection(p)), "d1\tok\n\ttext\n", 2, "non-empty docid"),
    (formats.read_queries, "1\ta\n2\tb\tc\n", 2, "2 tab-separated fields"),
    (formats.read_queries, "1\ta\n1\tb\n", 2, "unique qid"),
    (formats.read_qrels, "1 0 d1 1\n1 0 d2\n", 2, "4 whitespace-separated fields"),
    (formats.read_qrels, "1 0 d1 1\n1 0 d2 high\n", 2, "integer relevance grade"),
    (formats.read_qrels, "1 0 d1 1\n1 0 d1 2\n", 2, "judged twice"),
    (formats.read_run, "1 Q0 d1 1 2.0 x\n1 Q0 d2 2 abc x\n", 2, "numeric score"),
    (formats.read_run, "1 Q0 d1 1 2.0 x\n1 Q0 d2 two 1.0 x\n", 2, "integer rank"),
    (formats.read_run, "1 Q0 d1 1 nan x\n", 1, "finite score"),
    (formats.read_run, "1 Q0 d1 1 2.0 x\n1 Q0 d1 2 1.0 x\n", 2, "each docid once per query"),
    (formats.read_run, "1 Q0 d1 1 2.0\n", 1, "6 whitespace-separated fields"),
    # issue 16: NUL bytes, negative grades and empty files are refused at a line
    (formats.read_queries, "1\ta\n2\tb\x00c\n", 2, "without a NUL byte"),
    (lambda p: list(formats.iter_collection(p)), "d1\x00\tok\n", 1, "without a NUL byte"),
    (formats.read_qrels, "1 0 d1 1\n1 0 d2 -2\n", 2, "a relevance grade >= 0"),
    (formats.read_qrels, "", 1, "at least one judgment"),
    (formats.read_run, "\n\n", 3, "at least one ranked document"),
    (lambda p: list(formats.iter_collection(p)), "\n", 2, "at least one document"),
    (formats.read_queries, "1\ta\n\ufeff2\tb\n", 2, "without a byte-order mark"),
    (formats.read_run, "1 Q0 d1 1 2.0 x\n1 Q0 d\ufeff2 2 1.0 x\n", 2, "without a byte-order mark"),
    (formats.read_ids, "q1\nq 2\n", 2, "one qid per line, without spaces"),
    (formats.read_ids, "q1\nq1\n", 2, "a unique qid"),
])
def test_malformed_lines_are_reported_with_file_and_line(tmp_path, reader, content, line, expected):
    path = tmp_path / "input.txt"
    path.write_text(content)
    with pytest.raises(formats.FormatError) as error:
        reader(path)
    assert str(error.value).startswith(f"{path}:{line}: expected ")
    assert expected in str(error.value)


def test_undecodable_bytes_name_the_line(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_bytes(b"d1\tok\nd2\tbad \xff byte\n")
    with pytest.raises(formats.FormatError, match=r"c.tsv:2: expected UTF-8 text"):
        list(formats.iter_collection(path))


@pytest.mark.parametrize("reader, content, expected", [
    (lambda p: list(formats.iter_collection(p)), "d1\tok\n", [("d1", "ok")]),
    (formats.read_queries, "q1\ttext\n", {"q1": "text"}),
    (formats.read_qrels, "q1 0 d1 1\n", {"q1": {"d1": 1}}),
    (formats.read_run, "q1 Q0 d1 1 2.0 x\n", {"q1": [("d1", 2.0)]}),
])
def test_a_byte_order_mark_is_not_part_of_the_first_id(tmp_path, reader, content, expected):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + content.encode())
    assert reader(path) == expected


def test_missing_file(tmp_path):
    with pytest.raises(formats.FormatError, match="expected an existing file"):
        formats.read_queries(tmp_path / "nope.tsv")


def test_round_trips(tmp_path):
    formats.write_collection(tmp_path / "c.tsv", [("d1", "a\tb\nc"), ("d2", "")])
    assert list(formats.iter_collection(tmp_path / "c.tsv")) == [("d1", "a b c"), ("d2", "")]
    formats.write_qrels(tmp_path / "q.txt", {"1": {"d1": 2, "d2": 0}})
    assert formats.read_qrels(tmp_path / "q.txt") == {"1": {"d1": 2, "d2": 0}}
    run = {"1": [("d2", 0.5), ("d1", 1.25), ("d3", 0.5)]}
    formats.write_run(tmp_path / "r.run", run, "sys")
    assert formats.read_run(tmp_path / "r.run") == {"1": [("d1", 1.25), ("d2", 0.5), ("d3", 0.5)]}
    assert (tmp_path / "r.run").read_text().splitlines()[0] == "1 Q0 d1 1 1.25 sys"


def test_a_failing_writer_leaves_nothing(tmp_path):
    target = tmp_path / "out.tsv"
    target.write_text("previous\n")

    def documents():
        yield "d1", "text"
        raise RuntimeError("killed half-way")

    with pytest.raises(RuntimeError):
        formats.write_collection(target, documents())
    assert target.read_text() == "previous\n"  # the old complete file survives
    assert [p.name for p in tmp_path.iterdir()] == ["out.tsv"]  # no temporary left behind


def test_atomic_directory(tmp_path):
    with atomic_path(tmp_path / "d", directory=True) as tmp:
        (tmp / "f").write_text("x")
        assert not (tmp_path / "d").exists()
    assert (tmp_path / "d" / "f").read_text() == "x"
    with pytest.raises(ValueError):
        with atomic_path(tmp_path / "e", directory=True) as tmp:
            (tmp / "f").write_text("x")
            raise ValueError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    with atomic_open(tmp_path / "g.txt") as out:
        out.write("y")
    assert (tmp_path / "g.txt").stat().st_mode & 0o777 != 0o600  # usual permissions, not mkstemp's


def test_the_temporaries_a_killed_writer_left_go_when_the_output_is_written_again(tmp_path):
    """SIGKILL leaves the temporary; the next write of the same output removes it, and no other output's."""
    (tmp_path / ".d.abc123_z.tmp").mkdir()  # the killed job's: its directory, and a file
    (tmp_path / ".d.abc123_z.tmp" / "part").write_text("half")
    (tmp_path / ".d.x1y2z3w4.tmp").write_text("half")
    (tmp_path / ".d.e.abc123_z.tmp").write_text("another output's (d.e), being written")
    (tmp_path / ".dd.abc123_z.tmp").write_text("another output's (dd)")
    with atomic_path(tmp_path / "d", directory=True) as tmp:
        (tmp / "f").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".d.e.abc123_z.tmp", ".dd.abc123_z.tmp", "d"]


def test_a_zero_width_no_break_space_in_text_is_kept(tmp_path):
    """Real MS MARCO passages hold U+FEFF inside their text (a zero-width no-break space): kept there."""
    path = tmp_path / "collection.tsv"
    path.write_text("d1\tword\ufeffword\nd2\tplain\n", encoding="utf-8")
    assert list(formats.iter_collection(path)) == [("d1", "word\ufeffword"), ("d2", "plain")]
