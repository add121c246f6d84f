"""rankstudy.report.readme_table: the README's headline claims table, from pinned scoreboards and reported cells."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from helpers import REPO
from rankstudy.errors import StudyError
from rankstudy.expected import update
from rankstudy.report.readme_table import BEGIN, END, headline_table, write_readme_table


@pytest.fixture
def repo(tmp_path):
    """A pinned scoreboard of one study, a second study never pinned, a reported-cells file and a spec."""
    claims = tmp_path / "claims.csv"
    pd.DataFrame({"id": ["tkl-beats-tk"], "B": ["TK (200)"], "mean A": [0.61234], "mean B": [0.4], "difference": [0.2],
                  "p": [0.00012], "queries": [100], "outcome": ["holds"], "seeds": ["3 of 3"],
                  "pooled p": [1e-9], "pooled outcome": ["holds"]}).to_csv(claims, index=False)
    update(tmp_path / "pinned.yaml", [claims])
    (tmp_path / "reported.yaml").write_text(yaml.safe_dump({"tables": {"tkl_table1": {
        "columns": ["test nDCG@10"], "rows": {"TKL (2,000)": [0.634], "TK (200)": [0.594], "X": [None]}}}}))
    reported = {"file": "reported.yaml", "table": "tkl_table1", "column": "test nDCG@10", "a": "TKL (2,000)",
                "b": "TK (200)", "where": "TREC DL 2019"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "studies": {"syn": {"data": "synthetic", "config": "c.yaml", "scoreboard": "pinned.yaml"},
                    "real": {"data": "real", "config": "r.yaml", "scoreboard": "never.yaml"}},
        "rows": [{"paper": "TKL", "claim": "TKL beats TK", "reported": reported,
                  "results": [{"study": "syn", "id": "tkl-beats-tk", "b": "TK (200)"},
                              {"study": "real", "id": "tkl-beats-tk", "b": "TK (200)",
                               "reported": {**reported, "a": "X"}}]}]}))
    (tmp_path / "README.md").write_text(f"# r\n\n{BEGIN}\nold\n{END}\n\nmore\n")
    return tmp_path


def test_a_row_is_the_papers_cells_beside_the_pinned_claim(repo):
    lines = headline_table(repo / "spec.yaml", repo).splitlines()
    assert lines[2] == ("| TKL | TKL beats TK | 0.634 vs 0.594 (TREC DL 2019) | synthetic (`c.yaml`) | 0.612 vs 0.400 "
                        "(p 0.00012) | **holds** (3 of 3 seeds; pooled: holds) |")
    assert lines[3].startswith("| TKL | TKL beats TK | — (not legible in the paper's text: reported.yaml) | real "
                               "(`r.yaml`) | not pinned yet | run it, then pin `never.yaml`")


def test_the_readme_is_rewritten_between_its_markers_and_checked(repo):
    assert not write_readme_table(repo / "spec.yaml", repo / "README.md", repo, check=True)
    assert "old" in (repo / "README.md").read_text()  # --check changes nothing
    assert not write_readme_table(repo / "spec.yaml", repo / "README.md", repo)
    text = (repo / "README.md").read_text()
    assert text.startswith(f"# r\n\n{BEGIN}\n| paper |") and text.endswith(f"|\n{END}\n\nmore\n")
    assert write_readme_table(repo / "spec.yaml", repo / "README.md", repo, check=True)


def test_a_claim_the_scoreboard_does_not_have_is_an_error(repo):
    spec = yaml.safe_load((repo / "spec.yaml").read_text())
    spec["rows"][0]["results"][0]["b"] = "BM25"
    (repo / "spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(StudyError, match=r"pinned.yaml: no claim 'tkl-beats-tk \| BM25'"):
        headline_table(repo / "spec.yaml", repo)


def test_a_readme_without_its_markers_is_an_error(repo):
    (repo / "README.md").write_text("# r\n")
    with pytest.raises(StudyError, match="expected one pair of markers"):
        write_readme_table(repo / "spec.yaml", repo / "README.md", repo)


def test_the_projects_readme_shows_what_the_pinned_scoreboards_give():
    """README.md's first table is generated: after a change of a pin or of the spec, run python -m rankstudy
    readme-table."""
    assert write_readme_table(REPO / "docs" / "headline-claims.yaml", REPO / "README.md", REPO, check=True)


def test_a_spec_without_a_key_is_an_error_naming_the_file(repo):
    spec = yaml.safe_load((repo / "spec.yaml").read_text())
    del spec["rows"][0]["reported"]["where"]
    (repo / "spec.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(StudyError, match=r"spec.yaml: expected studies .* missing or wrong: 'where'"):
        headline_table(repo / "spec.yaml", repo)
