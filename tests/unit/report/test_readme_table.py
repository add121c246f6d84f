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
    (tmp_path / "reported.yaml").write_text(yaml.safe_dump({"paper": "TKL", "tables": {"tkl_table1": {
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
                        "(p 0.00012; pooled p 1e-09) | 5.31 | -0.464 | **holds** (pooled over 3 seeds; 3 of 3 seeds "
                        "alone) |")
    assert lines[3].startswith("| TKL | TKL beats TK | — (not legible in the paper's text: reported.yaml) | real "
                               "(`r.yaml`) | not pinned yet | — | — | run it, then pin `never.yaml`")


def test_effect_ratio_and_delta_ri_by_hand():
    """Breuer et al. (SIGIR 2020): ER = reproduced improvement / original improvement, ΔRI = RI(original) −
    RI(reproduced) with RI = improvement / baseline."""
    from rankstudy.report.effects import effect

    # TK over KNRM: the paper 0.594 vs 0.496 (TREC DL 2019 documents), a reproduction 0.529 vs 0.340
    result = effect(0.594, 0.496, 0.529, 0.340)
    assert result.effect_ratio == pytest.approx(0.189 / 0.098)  # 1.929: a larger effect than the paper's
    assert result.delta_ri == pytest.approx(0.098 / 0.496 - 0.189 / 0.340)  # 0.1976 - 0.5559 = -0.358
    assert effect(0.3, 0.2, 0.2, 0.25).effect_ratio == pytest.approx(-0.5)  # the opposite direction
    assert effect(0.3, 0.2, 0.3, 0.2).delta_ri == pytest.approx(0.0)  # the paper's own numbers
    assert effect(0.3, 0.3, 0.4, 0.2).effect_ratio is None  # no effect in the paper: nothing to compare with
    assert effect(0.3, 0.0, 0.4, 0.2).delta_ri is None  # a baseline of 0: no relative improvement
    assert effect(0.3, 0.0, 0.4, 0.2).effect_ratio == pytest.approx(0.2 / 0.3)


def test_a_study_whose_magnitudes_do_not_compare_has_no_effect_ratio(repo):
    spec = yaml.safe_load((repo / "spec.yaml").read_text())
    spec["studies"]["syn"]["magnitudes"] = "synthetic data"
    (repo / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert "| — (synthetic data) | — | **holds**" in headline_table(repo / "spec.yaml", repo).splitlines()[2]


def test_a_single_seed_claim_leads_with_its_own_outcome(repo):
    claims = repo / "claims.csv"
    pd.DataFrame({"id": ["tkl-beats-tk"], "B": ["TK (200)"], "mean A": [0.5], "mean B": [0.45], "difference": [0.05],
                  "p": [0.2], "queries": [100], "outcome": ["fails"]}).to_csv(claims, index=False)
    update(repo / "pinned.yaml", [claims])
    line = headline_table(repo / "spec.yaml", repo).splitlines()[2]
    assert line.endswith("| 0.500 vs 0.450 (p 0.2) | 1.25 | -0.044 | **fails** |")


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
