"""The reproduction report (rankstudy.report.reproduction, python -m rankstudy reproduction) on fabricated
tables and reported-cell files."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from helpers import REPO
from rankstudy.cli import main
from rankstudy.errors import StudyError
from rankstudy.report.reproduction import read_reported, reproduction


@pytest.fixture
def tables_dir(tmp_path):
    """A Socialformer Table 1 and a Choppy Table 1 as the study writes them."""
    tables = tmp_path / "tables"
    tables.mkdir()
    pd.DataFrame({"system": ["BM25", "FirstP", "Socialformer (node)"], "window": [None, 512, 128],
                  "dev RR@10": [0.25, 0.31, 0.33], "test nDCG@10": [0.50, 0.60, 0.64]}
                 ).to_csv(tables / "socialformer_table1.csv", index=False)
    pd.DataFrame({"run": ["bm25", "bm25"], "method": ["Oracle", "Choppy"], "F1": [0.40, 0.25]}
                 ).to_csv(tables / "choppy_table1.csv", index=False)
    return tables


def reported_file(tmp_path, tables, paper="A paper"):
    path = tmp_path / f"reported-{len(list(tmp_path.glob('reported-*')))}.yaml"
    path.write_text(yaml.safe_dump({"paper": paper, "tables": tables}, sort_keys=False))
    return path


def test_each_reported_cell_beside_ours_with_its_difference_and_margin(tmp_path, tables_dir):
    social = reported_file(tmp_path, {"socialformer_table1": {
        "paper_table": "Table 1", "columns": ["dev RR@10", "test nDCG@10"], "margin": 0.02,
        "rows": {"FirstP": [0.30, 0.55], "Socialformer (node)": [None, 0.65], "IDCM": [0.32, 0.60]}}})
    choppy = reported_file(tmp_path, {"choppy_table1": {"columns": ["F1", "DCG"],
                                                        "rows": {"bm25 | Choppy": [0.28, 1.5]}}}, paper="Choppy")
    table = reproduction([social, choppy], tables_dir).set_index(["row", "column"])
    first = table.loc[("FirstP", "dev RR@10")]
    assert (first["reported"], first["ours"], first["status"]) == (0.30, 0.31, "compared")
    assert first["difference"] == pytest.approx(0.01) and first["reproduced"] == "yes"
    assert table.loc[("FirstP", "test nDCG@10"), "reproduced"] == "no"  # 0.60 - 0.55 > 0.02
    assert table.loc[("Socialformer (node)", "dev RR@10"), "status"] == "not reported"
    assert table.loc[("Socialformer (node)", "test nDCG@10"), "reproduced"] == "yes"
    assert set(table.loc["IDCM", "status"]) == {"not run"}  # no such row in our table
    assert pd.isna(table.loc[("IDCM", "test nDCG@10"), "ours"])
    # no margin given: the difference only, no verdict
    choppy_f1 = table.loc[("bm25 | Choppy", "F1")]
    assert choppy_f1["difference"] == pytest.approx(-0.03) and choppy_f1["reproduced"] == ""
    assert table.loc[("bm25 | Choppy", "DCG"), "status"] == "not run"  # our table has no DCG column
    assert list(table["paper"].unique()) == ["A paper", "Choppy"]


def test_a_table_the_run_did_not_write_is_not_run(tmp_path, tables_dir):
    path = reported_file(tmp_path, {"tkl_table1": {"columns": ["test nDCG@10"], "rows": {"TKL (2,000)": [0.6]}}})
    assert list(reproduction([path], tables_dir)["status"]) == ["not run"]


def test_the_cli_writes_csv_and_markdown_and_a_not_comparable_config_says_so(tmp_path, tables_dir):
    path = reported_file(tmp_path, {"choppy_table1": {"paper_table": "Table 1", "columns": ["F1"],
                                                      "rows": {"bm25 | Oracle": [0.41]}}}, paper="Choppy")
    prefix = tmp_path / "out" / "reproduction"
    prefix.parent.mkdir()
    assert main(["reproduction", "--reported", str(path), "--tables-dir", str(tables_dir),
                 "--out-prefix", str(prefix)]) == 0
    assert pd.read_csv(f"{prefix}.csv")["ours"].tolist() == [0.40]
    markdown = (prefix.parent / "reproduction.md").read_text()
    assert "1 compared, 0 not reported, 0 not run" in markdown and "## Choppy" in markdown and "0.4100" in markdown
    assert main(["reproduction", "--reported", str(path), "--tables-dir", str(tables_dir), "--not-comparable",
                 "--out-prefix", str(prefix)]) == 0
    assert "not comparable" in (prefix.parent / "reproduction.md").read_text()
    assert pd.read_csv(f"{prefix}.csv").empty


@pytest.mark.parametrize("tables, message", [
    ({"choppy_table1": {"columns": ["F1", "DCG"], "rows": {"bm25 | Choppy": [0.3]}}}, "expected 2 values"),
    ({"choppy_table1": {"columns": ["F1"], "rows": {"bm25 | Choppy": ["high"]}}}, "numbers or null"),
    ({"choppy_table1": {"columns": ["F1"], "margin": -1, "rows": {}}}, "margin"),
    ({"table9": {"columns": ["F1"], "rows": {}}}, "not a table the study writes"),
    ({"choppy_table1": {"rows": {}}}, "columns (a list)"),
])
def test_a_bad_reported_file_names_the_file_the_table_and_what_was_expected(tmp_path, tables, message):
    path = reported_file(tmp_path, tables)
    with pytest.raises(StudyError) as error:
        read_reported(path)
    assert str(path) in str(error.value) and message in str(error.value)
    assert main(["reproduction", "--reported", str(path), "--out-prefix", str(tmp_path / "r")]) == 2


def test_the_papers_reported_files_are_valid():
    for name in ("tk", "tkl", "socialformer", "choppy"):
        data = read_reported(REPO / "config" / "paper" / "reported" / f"{name}.yaml")
        assert data["paper"] and data["tables"]
