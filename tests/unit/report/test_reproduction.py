"""The reproduction report (rankstudy.report.reproduction, python -m rankstudy reproduction) on fabricated
tables and reported-cell files."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from helpers import REPO, with_schema_defaults
from rankstudy.cli import main
from rankstudy.errors import StudyError
from rankstudy.report.reproduction import claim_directions, expand_letters, read_reported, reproduction
from rankstudy.study.plan import StudyPlan


@pytest.fixture
def tables_dir(tmp_path):
    """A Socialformer Table 1 and a Choppy Table 1 as the study writes them."""
    tables = tmp_path / "tables"
    tables.mkdir()
    pd.DataFrame({"system": ["BM25", "FirstP", "Socialformer (node)"], "window": [None, 512, 128],
                  "dev RR@10": [0.25, 0.31, 0.33], "test nDCG@10": [0.50, 0.60, 0.64]}
                 ).to_csv(tables / "socialformer_table1.csv", index=False)
    # more rows than letters a-z: a table without significance columns has no letters to map
    pd.DataFrame({"run": ["bm25"] * 2 + ["drmm"] * 28, "method": ["Oracle", "Choppy"] + [f"m{i}" for i in range(28)],
                  "F1": [0.40, 0.25] + [0.1] * 28}).to_csv(tables / "choppy_table1.csv", index=False)
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
    ({"tkl_table1": {"columns": ["x"], "rows": {"A": [1]}, "significance": {"A": ["b"]}}}, "needs letters"),
    ({"tkl_table1": {"columns": ["x"], "rows": {"A": [1]}, "letters": ["A"], "significance": {"A": ["b"]}}},
     "letter 'b' names no row"),
    ({"tkl_table1": {"columns": ["x"], "rows": {"A": [1]}, "letters": ["A"], "significance": {"B": [""]}}},
     "row 'B' is not one of rows"),
    ({"tkl_table1": {"columns": ["x"], "rows": {"A": [1]}, "letters": ["A", "B"], "significance": {"A": ["b-a"]}}},
     "does not ascend"),
])
def test_a_bad_reported_file_names_the_file_the_table_and_what_was_expected(tmp_path, tables, message):
    path = reported_file(tmp_path, tables)
    with pytest.raises(StudyError) as error:
        read_reported(path)
    assert str(path) in str(error.value) and message in str(error.value)
    assert main(["reproduction", "--reported", str(path), "--out-prefix", str(tmp_path / "r")]) == 2


def test_significance_superscripts_name_rows_in_the_papers_and_in_our_lettering(tmp_path):
    """The paper letters its rows in its own order, our table in ours: the report compares the rows named."""
    assert expand_letters("a-fhj") == list("abcdefhj") and expand_letters("") == []
    tables = tmp_path / "tables"
    tables.mkdir()
    # our order: a BM25, b TK, c TKL; TKL significantly better than BM25 and TK on nDCG, than BM25 only on RR
    pd.DataFrame({"": list("abc"), "system": ["BM25", "TK (200)", "TKL (2,000)"], "test nDCG@10": [0.5, 0.6, 0.65],
                  "test nDCG@10 sig": ["", "a", "ab"], "test RR@10": [0.8, 0.9, 0.9], "test RR@10 sig": ["", "", "a"]}
                 ).to_csv(tables / "tkl_table1.csv", index=False)
    path = reported_file(tmp_path, {"tkl_table1": {
        "columns": ["test nDCG@10", "test RR@10"], "letters": ["BM25", "KNRM", "TKL (2,000)", "TK (200)"],
        "rows": {"TKL (2,000)": [0.634, 0.915], "TK (200)": [0.594, 0.903]},
        "significance": {"TKL (2,000)": ["a-b,d".replace(",", ""), "a"], "TK (200)": [None, ""]}}})
    table = reproduction([path], tables).set_index(["row", "column"])
    cell = table.loc[("TKL (2,000)", "test nDCG@10")]
    assert cell["paper sig"] == "BM25, KNRM, TK (200)" and cell["our sig"] == "BM25, TK (200)"
    assert cell["sig agrees"] == "no"  # we did not run KNRM
    assert table.loc[("TKL (2,000)", "test RR@10"), "sig agrees"] == "yes"
    assert table.loc[("TK (200)", "test nDCG@10"), ["paper sig", "sig agrees"]].tolist() == ["", ""]  # not legible
    assert table.loc[("TK (200)", "test RR@10"), ["paper sig", "our sig", "sig agrees"]].tolist() == \
        ["none", "none", "yes"]


def scoreboard_rows(*rows):
    """Scoreboard rows with the columns the report reads (no paper pair unless given)."""
    return pd.DataFrame([{"A": "A", "B": "B", "mean A": "", "mean B": "", "paper A vs B": "", "ER": "", "ΔRI": "",
                          "pooled outcome": "", **row} for row in rows])


def test_the_paper_claims_directions_come_from_the_scoreboard(tmp_path):
    scoreboard = tmp_path / "claims.csv"
    scoreboard_rows(
        {"id": "a", "paper": "TK", "source": "paper", "claim": "A beats B and C", "outcome": "holds", "direction agrees": "yes"},
        {"id": "a", "paper": "TK", "source": "paper", "claim": "A beats B and C", "outcome": "fails", "direction agrees": "no"},
        {"id": "b", "paper": "TKL", "source": "paper", "claim": "D beats E", "outcome": "not run", "direction agrees": ""},
        {"id": "c", "paper": "TK", "source": "study", "claim": "own check", "outcome": "holds", "direction agrees": "yes"},
    ).to_csv(scoreboard, index=False)
    directions = claim_directions(scoreboard)
    assert directions.to_dict("records") == [
        {"id": "a", "paper": "TK", "claim": "A beats B and C", "outcome": "holds, fails", "direction agrees": "no"},
        {"id": "b", "paper": "TKL", "claim": "D beats E", "outcome": "not run", "direction agrees": ""}]
    prefix = tmp_path / "reproduction"
    assert main(["reproduction", "--not-comparable", "--claims", str(scoreboard), "--out-prefix", str(prefix)]) == 0
    markdown = (tmp_path / "reproduction.md").read_text()
    assert "not comparable" in markdown and "0 agree, 1 disagree" in markdown and "| D beats E" in markdown
    pd.DataFrame({"id": ["x"]}).to_csv(scoreboard, index=False)
    with pytest.raises(StudyError, match="not a claims scoreboard"):
        claim_directions(scoreboard)


def test_every_comparison_with_the_papers_pair_shows_its_effect_ratio_and_delta_ri(tmp_path):
    """The effect sizes are the scoreboard's (computed there from the claim's reported cells); the report lists the
    comparisons that have them, with the outcome the claim is decided by."""
    scoreboard = tmp_path / "claims.csv"
    scoreboard_rows(
        {"id": "tk-knrm", "paper": "TK", "source": "study", "claim": "TK beats KNRM", "A": "TK", "B": "KNRM",
         "mean A": 0.529, "mean B": 0.340, "paper A vs B": "0.594 vs 0.496 (TREC DL 2019)", "ER": "1.93",
         "ΔRI": "-0.359", "outcome": "holds", "pooled outcome": "holds", "direction agrees": "yes"},
        {"id": "tk-bm25", "paper": "TK", "source": "paper", "claim": "TK beats BM25", "outcome": "holds",
         "direction agrees": "yes"},
    ).to_csv(scoreboard, index=False)
    prefix = tmp_path / "reproduction"
    assert main(["reproduction", "--reported", "--claims", str(scoreboard), "--out-prefix", str(prefix)]) == 0
    effects = pd.read_csv(tmp_path / "reproduction_effects.csv", keep_default_na=False)
    assert effects.to_dict("records") == [
        {"id": "tk-knrm", "paper": "TK", "claim": "TK beats KNRM", "A": "TK", "B": "KNRM",
         "paper A vs B": "0.594 vs 0.496 (TREC DL 2019)", "ours A vs B": "0.529 vs 0.340", "ER": 1.93, "ΔRI": -0.359,
         "outcome": "holds (pooled over seeds)"}]
    markdown = (tmp_path / "reproduction.md").read_text()
    assert "## How large each effect is beside the paper's" in markdown and "| 1.93 | -0.359 |" in markdown
    assert "No run of this config is trained with several seeds." in markdown  # no --seeds
    assert pd.read_csv(tmp_path / "reproduction_seeds.csv").empty


def test_the_papers_reported_files_are_valid():
    for name in ("tk", "tkl", "socialformer", "choppy"):
        data = read_reported(REPO / "config" / "paper" / "reported" / f"{name}.yaml")
        assert data["paper"] and data["tables"]


def _configs_reading(reported: str) -> list[dict]:
    """The standalone configs in config/ whose reproduction report reads ``reported`` (schema defaults filled)."""
    configs = []
    for path in sorted((REPO / "config").rglob("*.yaml")):
        settings = yaml.safe_load(path.read_text())
        if isinstance(settings, dict) and reported in settings.get("reproduction", {}).get("reported", []):
            configs.append(with_schema_defaults(settings))
    return configs


@pytest.mark.parametrize("name", ["tk", "tkl", "socialformer", "choppy"])
def test_every_reported_cell_names_a_row_and_column_of_a_config_that_reads_it(name):
    """Each reported cell (values and nulls alike) is a row and a value column that the tables of a config
    reading the file write (StudyPlan.table_layout), so a typo cannot hide as "not run"."""
    reported = f"config/paper/reported/{name}.yaml"
    configs = _configs_reading(reported)
    assert configs, f"no config reads {reported}"
    layout: dict[str, dict[str, set]] = {}
    for settings in configs:
        for table, spec in StudyPlan.from_config(settings).table_layout().items():
            layout.setdefault(table, {"rows": set(), "columns": set()})
            layout[table]["rows"] |= set(spec["rows"])
            layout[table]["columns"] |= set(spec["columns"])
    for table, spec in read_reported(REPO / reported)["tables"].items():
        assert table in layout, f"{reported}: no config reading it writes {table}"
        assert set(spec["rows"]) <= layout[table]["rows"], set(spec["rows"]) - layout[table]["rows"]
        assert set(spec["columns"]) <= layout[table]["columns"], set(spec["columns"]) - layout[table]["columns"]


def test_at_least_150_reported_cells_are_filled():
    """The papers' legible tables: TK Table 2 (54), TKL Tables 1-2 and Fig. 3 (84), Socialformer Table 2 (14),
    Choppy Table 1 (26, set beside two protocols)."""
    filled = {(name, table, row.split(" | ")[-1] if table == "choppy_table1" else row, column)
              for name in ("tk", "tkl", "socialformer", "choppy")
              for table, spec in read_reported(REPO / "config/paper/reported" / f"{name}.yaml")["tables"].items()
              for row, values in spec["rows"].items()
              for column, value in zip(spec["columns"], values) if value is not None}
    assert len(filled) >= 150
