"""Expected results (rankstudy.expected, python -m rankstudy check-expected)."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from rankstudy.cli import main
from rankstudy.errors import StudyError
from rankstudy.expected import check, drifts, read_expected, tolerance_for, update


@pytest.fixture
def tables(tmp_path):
    """A first-stage table and a Choppy Table 1 as the study writes them (a timing and a p column too)."""
    first = tmp_path / "first_stage.csv"
    pd.DataFrame({"dataset": ["d", "d"], "split": ["test", "test"], "system": ["bm25", "ql"],
                  "nDCG@10": [0.41, 0.39], "AP": [0.3, 0.28]}).to_csv(first, index=False)
    choppy = tmp_path / "choppy_table1.csv"
    pd.DataFrame({"run": ["bm25", "bm25"], "method": ["Oracle", "BiCut"], "F1": [0.6, 0.3], "DCG": [2.0, None],
                  "p vs Greedy-k (F1)": [0.01, 0.2], "docs/ms (CPU)": [1.0, 2.0]}).to_csv(choppy, index=False)
    return [first, choppy]


def rewrite(path, column, row, value):
    table = pd.read_csv(path)
    table.loc[row, column] = value
    table.to_csv(path, index=False)


def test_update_then_check_round_trip(tmp_path, tables):
    expected = tmp_path / "expected.yaml"
    assert update(expected, tables) == 4 + 4  # 2 rows x 2 measures; F1 and DCG x 2 (p and docs/ms skipped)
    data = read_expected(expected)
    assert data["tables"] == {"first_stage": ["dataset", "split", "system"], "choppy_table1": ["run", "method"]}
    assert data["cells"]["first_stage"]["d | test | bm25"] == {"nDCG@10": 0.41, "AP": 0.3}
    assert data["cells"]["choppy_table1"]["bm25 | BiCut"] == {"F1": 0.3, "DCG": None}
    assert check(expected, tables) == ("all 8 expected cells of %s within tolerance" % expected, [])


def test_a_drifted_cell_is_listed_with_expected_got_and_tolerance(tmp_path, tables, capsys):
    expected = tmp_path / "expected.yaml"
    update(expected, tables)
    rewrite(tables[0], "nDCG@10", 1, 0.3905)
    args = ["check-expected", "--expected", str(expected), "--tables", *map(str, tables)]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert "first_stage | d | test | ql | nDCG@10: expected 0.39, got 0.3905, tolerance 1e-06" in out
    assert "1 of 8 expected cells" in err
    # a looser tolerance for the measure passes; other measures keep theirs
    data = read_expected(expected)
    data["tolerance"] = {"nDCG@*": 0.001, "*": 1e-6}
    expected.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(args) == 0
    # --update after an intended change, then the check passes with the default tolerance again
    assert main(args + ["--update"]) == 0
    assert read_expected(expected)["cells"]["first_stage"]["d | test | ql"]["nDCG@10"] == 0.3905
    assert read_expected(expected)["tolerance"] == {"nDCG@*": 0.001, "*": 1e-6}  # kept by --update


def test_missing_rows_tables_and_unpinned_cells_drift(tmp_path, tables):
    expected = tmp_path / "expected.yaml"
    update(expected, tables)
    pd.read_csv(tables[0]).iloc[:1].assign(P=0.5).to_csv(tables[0], index=False)
    data = read_expected(expected)
    lines = drifts(data, {"first_stage": {"d | test | bm25": {"nDCG@10": 0.41, "AP": 0.3, "P": 0.5}}})
    assert "choppy_table1: the run has no such table (expected 2 rows)" in lines
    assert "first_stage | d | test | ql | nDCG@10: missing from the run (expected 0.39)" in lines
    assert any(line.startswith("first_stage | d | test | bm25 | P: not pinned (got 0.5)") for line in lines)
    rewrite(tables[1], "DCG", 1, 1.0)  # a pinned empty cell that now has a value
    assert any("bm25 | BiCut | DCG: expected None, got 1.0" in line for line in check(expected, tables)[1])


def test_a_missing_expected_file_says_how_to_create_it(tmp_path, tables, capsys):
    expected = tmp_path / "none.yaml"
    with pytest.raises(StudyError, match=r"none.yaml: no expected results for this config; create them .* --update"):
        check(expected, tables)
    out = tmp_path / "check.txt"
    args = ["check-expected", "--expected", str(expected), "--tables", *map(str, tables), "--out", str(out)]
    assert main(args + ["--missing-ok"]) == 0
    assert out.read_text().startswith("no expectations: ")
    assert main(args) == 2 and "--update" in capsys.readouterr().err


def test_tolerance_patterns_match_in_file_order():
    tolerances = {"test nDCG@*": 0.01, "*nDCG*": 0.02, "*": 0.001}
    assert tolerance_for("test nDCG@10", tolerances) == 0.01
    assert tolerance_for("dev nDCG@100", tolerances) == 0.02
    assert tolerance_for("F1", tolerances) == 0.001
    assert tolerance_for("F1", {}) == 0.0


def test_bad_files_are_clear_errors(tmp_path, tables):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cells: []\n")
    with pytest.raises(StudyError, match="bad.yaml: cells: expected a mapping"):
        check(bad, tables)
    bad.write_text("tolerance: {'*': -1}\n")
    with pytest.raises(StudyError, match=r"tolerance '\*': expected a number >= 0"):
        check(bad, tables)
    odd = tmp_path / "odd_table.csv"
    pd.DataFrame({"x": [1.0]}).to_csv(odd, index=False)
    with pytest.raises(StudyError, match="no row key known for table 'odd_table'"):
        update(tmp_path / "e.yaml", [odd])


def test_tables_dir_checks_the_pinned_tables(tmp_path, tables, capsys):
    pd.DataFrame({"table": ["best"], "qid": ["1"], "AP": [1.0]}).to_csv(tmp_path / "tk_table3_4.csv", index=False)
    expected = tmp_path / "expected.yaml"
    args = ["check-expected", "--expected", str(expected), "--tables-dir", str(tmp_path)]
    assert main(args + ["--update"]) == 0  # every table with a known row key; tk_table3_4 has none
    assert "wrote 8 expected cells of 2 tables" in capsys.readouterr().out
    assert main(args) == 0
    tables[1].unlink()
    assert main(args) == 2
    assert "choppy_table1.csv: cannot read table" in capsys.readouterr().err


def scoreboard(path, outcome="holds", mean_a=0.6):
    pd.DataFrame({"id": ["tk-beats-bm25", "sf-beats"], "paper": ["TK", "Socialformer"], "B": ["BM25", "FirstP"],
                  "mean A": [mean_a, 0.5], "mean B": [0.4, 0.45], "p": [0.001, 0.3], "outcome": [outcome, "fails"],
                  "seeds": [None, "1 of 3"], "note": ["", ""]}).to_csv(path, index=False)
    return path


def test_a_pinned_scoreboard_drifts_when_a_claim_flips(tmp_path, tables):
    """The claims' means and p are pinned as numbers, their outcomes as text: a flipped outcome is a drift."""
    claims = scoreboard(tmp_path / "claims.csv")
    expected = tmp_path / "expected.yaml"
    update(expected, [*tables, claims])
    pinned = read_expected(expected)["cells"]["claims"]
    assert pinned["tk-beats-bm25 | BM25"] == {"mean A": 0.6, "mean B": 0.4, "p": 0.001, "outcome": "holds",
                                              "seeds": None}
    assert pinned["sf-beats | FirstP"]["seeds"] == "1 of 3"
    scoreboard(claims, outcome="fails")
    summary, lines = check(expected, [*tables, claims])
    assert lines == ["claims | tk-beats-bm25 | BM25 | outcome: expected holds, got fails, tolerance 1e-06"]


def test_a_file_that_pins_no_scoreboard_checks_only_its_tables(tmp_path, tables):
    """config/expected/extended.yaml was pinned before the scoreboard was: the rule's claims.csv is not a drift."""
    expected = tmp_path / "expected.yaml"
    update(expected, tables)
    assert check(expected, [*tables, scoreboard(tmp_path / "claims.csv")])[1] == []


def test_tables_dir_finds_the_scoreboard_beside_the_tables(tmp_path):
    from rankstudy.expected import tables_in

    folder = tmp_path / "results" / "tables"
    folder.mkdir(parents=True)
    pd.DataFrame({"dataset": ["d"], "split": ["test"], "system": ["bm25"], "AP": [0.3]}).to_csv(
        folder / "first_stage.csv", index=False)
    claims = scoreboard(tmp_path / "results" / "claims.csv")
    assert tables_in(folder, tmp_path / "none.yaml") == [folder / "first_stage.csv", claims]


def test_on_another_machine_only_the_first_stages_drift_fails(tmp_path, tables, monkeypatch):
    """The file names the CPU it was pinned on; elsewhere a trained model's cell may land in another optimum."""
    import rankstudy.expected as expected_module
    from rankstudy.expected import fatal

    expected = tmp_path / "expected.yaml"
    monkeypatch.setattr(expected_module, "cpu_model", lambda: "CPU A")
    update(expected, tables)
    assert read_expected(expected)["machine"] == "CPU A"
    rewrite(tables[1], "F1", 0, 0.9)  # choppy_table1: a trained model's cell
    summary, lines = check(expected, tables)
    assert len(lines) == 1 and fatal(expected, lines) == lines  # the same machine: every drift fails
    monkeypatch.setattr(expected_module, "cpu_model", lambda: "CPU B")
    summary, lines = check(expected, tables)
    assert fatal(expected, lines) == [] and "drifted on this machine (CPU B; pinned on CPU A)" in summary
    assert main(["check-expected", "--expected", str(expected), "--tables", *map(str, tables)]) == 0
    rewrite(tables[0], "AP", 0, 0.5)  # first_stage: Lucene, the same on every machine
    summary, lines = check(expected, tables)
    assert [line.split(":")[0] for line in fatal(expected, lines)] == ["first_stage | d | test | bm25 | AP"]
    assert main(["check-expected", "--expected", str(expected), "--tables", *map(str, tables)]) == 2
