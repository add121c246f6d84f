"""rankstudy.report.tables: write_table's three files and the first-stage table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from rankstudy.errors import StudyError
from rankstudy.evaluate import COLUMNS
from rankstudy.report.tables import FIRST_STAGE_CAPTION, first_stage_table, write_table


def metrics_csv(path: Path, dataset: str, split: str, system: str, means: dict[str, float]) -> Path:
    rows = [(dataset, system, split, m, "1", v + 0.1) for m, v in means.items()]  # a per-query row
    rows += [(dataset, system, split, m, "all", v) for m, v in means.items()]
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
    return path


def test_write_table(tmp_path):
    df = pd.DataFrame({"system": ["bm25_tuned", "ql"], "queries": [43, 43], "nDCG@10": [0.123456789, float("nan")]})
    write_table(df, tmp_path / "out" / "demo", "A caption: 50% of x_y.")

    csv = pd.read_csv(tmp_path / "out" / "demo.csv")
    assert list(csv.columns) == ["system", "queries", "nDCG@10"]
    assert csv.loc[0, "nDCG@10"] == 0.123456789  # full precision

    markdown = (tmp_path / "out" / "demo.md").read_text()
    assert markdown.startswith("A caption: 50% of x_y.\n\n|")
    assert "0.1235" in markdown and "0.123456789" not in markdown and "nan" not in markdown
    assert markdown.index("system") < markdown.index("queries") < markdown.index("nDCG@10")

    latex = (tmp_path / "out" / "demo.tex").read_text()
    assert "\\caption{A caption: 50\\% of x\\_y.}" in latex and "\\label{demo}" in latex
    assert "bm25\\_tuned" in latex and "0.1235" in latex
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["demo.csv", "demo.md", "demo.tex"]


def test_first_stage_table(tmp_path):
    measures = ["nDCG@10", "AP@100"]
    paths = [
        metrics_csv(tmp_path / "a.csv", "robust", "test", "ql", {"nDCG@10": 0.4, "AP@100": 0.2, "P@10": 0.3}),
        metrics_csv(tmp_path / "b.csv", "robust", "dev", "ql", {"nDCG@10": 0.5, "AP@100": 0.25}),
        metrics_csv(tmp_path / "c.csv", "robust", "test", "bm25", {"nDCG@10": 0.45, "AP@100": 0.22}),
        metrics_csv(tmp_path / "d.csv", "msmarco", "heldout", "bm25", {"nDCG@10": 0.3, "AP@100": 0.1}),
        metrics_csv(tmp_path / "e.csv", "msmarco", "train", "bm25", {"nDCG@10": 0.35, "AP@100": 0.15}),
        metrics_csv(tmp_path / "f.csv", "msmarco", "extra", "bm25", {"nDCG@10": 0.32, "AP@100": 0.12}),
    ]
    table = first_stage_table(paths, measures, tmp_path / "first_stage")

    expected_rows = [
        ("msmarco", "train", "bm25"), ("msmarco", "extra", "bm25"), ("msmarco", "heldout", "bm25"),
        ("robust", "dev", "ql"), ("robust", "test", "bm25"), ("robust", "test", "ql"),
    ]
    written = pd.read_csv(tmp_path / "first_stage.csv")
    for frame in (table, written):
        assert list(frame.columns) == ["dataset", "split", "system", "nDCG@10", "AP@100"]
        assert list(zip(frame["dataset"], frame["split"], frame["system"])) == expected_rows
    assert written.loc[3, "nDCG@10"] == 0.5 and written.loc[3, "AP@100"] == 0.25  # means, not per-query rows

    markdown = (tmp_path / "first_stage.md").read_text()
    assert markdown.startswith(FIRST_STAGE_CAPTION)
    assert " P@10 " not in markdown  # not a requested measure
    assert "\\label{first_stage}" in (tmp_path / "first_stage.tex").read_text()


def test_first_stage_table_missing_measure_names_csv(tmp_path):
    path = metrics_csv(tmp_path / "partial.csv", "robust", "test", "ql", {"nDCG@10": 0.4})
    with pytest.raises(StudyError, match=r"partial\.csv.*AP@100"):
        first_stage_table([path], ["nDCG@10", "AP@100"], tmp_path / "t")
    assert not list(tmp_path.glob("t.*"))


def test_first_stage_table_rejects_repeated_system(tmp_path):
    a = metrics_csv(tmp_path / "a.csv", "robust", "test", "ql", {"nDCG@10": 0.4})
    b = metrics_csv(tmp_path / "b.csv", "robust", "test", "ql", {"nDCG@10": 0.5})
    with pytest.raises(StudyError, match=r"a\.csv, .*b\.csv"):
        first_stage_table([a, b], ["nDCG@10"], tmp_path / "t")


def test_data_counts_come_from_the_files(tmp_path):
    """A caption's counts are read from the data folders, so they are true of whatever folder a config names."""
    from rankstudy.report.tables import data_counts

    train, test = tmp_path / "msmarco-train", tmp_path / "dl-test-a"
    for folder in (train, test):
        folder.mkdir()
    (train / "collection.tsv").write_text("d1\ta\nd2\tb\nd3\tc\n")
    (train / "queries.train.tsv").write_text("q1\tx\nq2\ty\n")
    (train / "qrels.train.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (train / "queries.dev.tsv").write_text("q3\tz\n")
    (train / "qrels.dev.txt").write_text("q3 0 d3 1\n")
    (test / "collection.tsv").write_text("d1\ta\n")
    (test / "queries.test.tsv").write_text("t1\tx\nt2\ty\nt3\tz\n")
    (test / "qrels.test.txt").write_text("t1 0 d1 2\nt1 0 unseen 1\n")
    assert data_counts([test, train]) == ("dl-test-a: 3 test queries (1 judged), 1 documents; "
                                          "msmarco-train: 2 train queries, 1 dev queries, 3 documents")
