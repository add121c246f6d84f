"""The claims scoreboard (rankstudy.report.claims): outcomes on hand-made per-query values."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from scipy import stats

from helpers import metric_csv
from rankstudy.cli import main
from rankstudy.errors import StudyError
from rankstudy.report.claims import claim_row, evaluate, evidence_queries, scoreboard, write_scoreboard

QIDS = [str(q) for q in range(1, 21)]
BASE = {q: 0.2 + 0.01 * i for i, q in enumerate(QIDS)}
# A beats B on every query by a varying amount; "even" differs from BASE in both directions
BETTER = {q: v + 0.05 + 0.002 * i for i, (q, v) in enumerate(BASE.items())}
EVEN = {q: v + (0.01 if i % 2 else -0.01) for i, (q, v) in enumerate(BASE.items())}


def claim(**overrides):
    return {"id": "c", "paper": "P", "source": "paper", "statement": "A beats B", "measure": "nDCG@10",
            "direction": "better", "test": "wilcoxon", "alpha": 0.05, **overrides}


@pytest.mark.parametrize("test, scipy_test", [("wilcoxon", stats.wilcoxon), ("t", stats.ttest_rel)])
def test_a_claim_that_holds_reports_the_tests_p(test, scipy_test):
    result = evaluate(claim(test=test), BETTER, BASE)
    expected_p = scipy_test([BETTER[q] for q in QIDS], [BASE[q] for q in QIDS]).pvalue
    assert result["outcome"] == "holds"
    assert result["p"] == pytest.approx(expected_p)
    assert result["difference"] == pytest.approx(result["mean A"] - result["mean B"]) and result["difference"] > 0
    assert result["queries"] == 20


def test_a_claim_fails_when_a_is_worse_or_not_significantly_better():
    wrong_way = evaluate(claim(), BASE, BETTER)  # significant, the wrong way
    assert (wrong_way["outcome"], wrong_way["direction agrees"]) == ("fails", "no")
    even = evaluate(claim(), EVEN, BASE)
    assert even["outcome"] == "fails" and even["p"] > 0.05
    assert evaluate(claim(), BASE, BASE)["outcome"] == "fails"  # identical: p = 1
    # the direction agrees whatever the test says: what compares with a paper on other data
    slightly = evaluate(claim(), {q: v + 0.0005 for q, v in EVEN.items()}, BASE)
    assert (slightly["outcome"], slightly["direction agrees"]) == ("fails", "yes")
    assert evaluate(claim(), BETTER, BASE)["direction agrees"] == "yes"


def test_not_worse_is_a_one_sided_test_with_the_margin():
    rule = claim(direction="not_worse", margin=0.02)
    held = evaluate(rule, EVEN, BASE)  # within 0.01 of B everywhere
    shifted = [EVEN[q] + 0.02 - BASE[q] for q in QIDS]
    assert held["outcome"] == "holds"
    assert held["p"] == pytest.approx(stats.wilcoxon(shifted, alternative="greater").pvalue)
    worse = {q: v - 0.05 for q, v in BASE.items()}
    assert evaluate(rule, worse, BASE)["outcome"] == "fails"
    assert evaluate(claim(direction="not_worse", margin=0.0), EVEN, BASE)["outcome"] == "fails"
    assert evaluate(rule, worse, BASE)["direction agrees"] == "no" and held["direction agrees"] == "yes"
    # 19 queries a little better, one lost entirely: Wilcoxon's p is small, the mean is far beyond the margin
    one_lost = {**{q: v + 0.001 for q, v in BASE.items()}, "20": BASE["20"] - 0.5}
    lost = evaluate(rule, one_lost, BASE)
    assert lost["p"] < 0.05 and lost["difference"] < -0.02 and lost["outcome"] == "fails"


def test_bounds_needs_a_at_least_b_on_every_query():
    assert evaluate(claim(direction="bounds"), BETTER, BASE)["outcome"] == "holds"
    one_below = {**BETTER, "3": BASE["3"] - 0.1}
    result = evaluate(claim(direction="bounds"), one_below, BASE)
    assert result["outcome"] == "fails" and result["note"] == "1 of 20 queries below B"
    assert "p" not in result


def test_against_a_fixed_value_is_a_one_sample_test():
    result = evaluate(claim(test="t"), BETTER, 0.2)
    assert result["outcome"] == "holds" and result["mean B"] == pytest.approx(0.2)
    assert result["p"] == pytest.approx(stats.ttest_1samp([BETTER[q] for q in QIDS], 0.2).pvalue)


def test_unknown_test_and_direction_are_errors():
    with pytest.raises(StudyError, match="unknown test 'z'"):
        evaluate(claim(test="z"), BETTER, BASE)
    with pytest.raises(StudyError, match="unknown direction 'up'"):
        evaluate(claim(direction="up"), BETTER, BASE)


@pytest.fixture
def metrics(tmp_path):
    return {name: metric_csv(tmp_path / f"{name}.csv", name, "test", values, dataset="doc")
            for name, values in (("tkl", BETTER), ("tk", BASE), ("even", EVEN))}


def ref(metrics, name):
    return {"label": name, "path": str(metrics[name]), "dataset": "doc", "system": name, "split": "test"}


def test_claim_rows_read_metric_csvs_and_report_not_run(metrics):
    rows = [claim(id="holds", a=ref(metrics, "tkl"), b=ref(metrics, "tk")),
            claim(id="fails", a=ref(metrics, "even"), b=ref(metrics, "tk")),
            claim(id="missing", a=ref(metrics, "tkl"), b={"label": "maxp", "path": "nowhere.csv"},
                  not_run="maxp is not evaluated on doc in this config")]
    table = scoreboard(rows)
    assert list(table["outcome"]) == ["holds", "fails", "not run"]
    assert table.loc[2, "note"] == "maxp is not evaluated on doc in this config" and pd.isna(table.loc[2, "p"])
    assert table.loc[0, "mean A"] == pytest.approx(sum(BETTER.values()) / 20)


def test_a_claim_with_the_papers_cells_gives_the_effect_ratio_and_delta_ri(tmp_path, metrics, monkeypatch):
    (tmp_path / "reported.yaml").write_text(
        "paper: TKL\ntables: {tkl_table1: {columns: [test nDCG@10], rows: {TKL: [0.60], TK: [0.50]}}}\n")
    monkeypatch.chdir(tmp_path)  # the reported file's path is the working directory's, as the workflow's
    reported = {"file": "reported.yaml", "table": "tkl_table1", "column": "test nDCG@10", "a": "TKL", "b": "TK",
                "where": "TREC DL 2019 documents"}
    row = claim_row(claim(a=ref(metrics, "tkl"), b=ref(metrics, "tk"), reported=reported))
    difference = row["mean A"] - row["mean B"]
    assert row["paper A vs B"] == "0.6 vs 0.5 (TREC DL 2019 documents)"
    # ER = study difference / paper difference; ΔRI = 0.1 / 0.5 - difference / mean B
    assert float(row["ER"]) == pytest.approx(difference / 0.1, abs=0.005)
    assert float(row["ΔRI"]) == pytest.approx(0.2 - difference / row["mean B"], abs=0.0005)
    assert "ER" not in claim_row(claim(a=ref(metrics, "tkl"), b=ref(metrics, "tk")))
    with pytest.raises(StudyError, match="no row 'TK3'"):
        claim_row(claim(a=ref(metrics, "tkl"), b=ref(metrics, "tk"), reported={**reported, "b": "TK3"}))


def seeded_ref(tmp_path, name, values_by_seed):
    """A run trained with several seeds: its table system (the first seed) and each seed's metric file."""
    seeds = {seed: {"path": str(metric_csv(tmp_path / f"{name}.s{seed}.csv", f"{name}.s{seed}", "test", values,
                                            dataset="doc")), "system": f"{name}.s{seed}"}
             for seed, values in values_by_seed.items()}
    first = next(iter(seeds))
    return {"label": name, "dataset": "doc", "split": "test", **seeds[first], "seeds": seeds}


def test_a_claim_is_judged_per_seed_and_pooled(tmp_path, metrics):
    # A beats B with seeds 1 and 2, is even with seed 3; the table's system (seed 1) holds
    a = seeded_ref(tmp_path, "tk", {"1": BETTER, "2": {q: v + 0.001 for q, v in BETTER.items()}, "3": EVEN})
    row = claim_row(claim(a=a, b=ref(metrics, "tk")))
    assert (row["outcome"], row["seeds"], row["pooled outcome"]) == ("holds", "2 of 3", "holds")
    pooled_a = [v for values in (BETTER, {q: v + 0.001 for q, v in BETTER.items()}, EVEN) for v in values.values()]
    assert row["pooled p"] == pytest.approx(stats.wilcoxon(pooled_a, list(BASE.values()) * 3).pvalue)
    # both sides seeded: seed paired with seed, only the seeds both have
    b = seeded_ref(tmp_path, "base", {"2": BASE, "3": BETTER, "4": BASE})
    both = claim_row(claim(a=a, b=b))
    assert both["seeds"] == "1 of 2" and both["pooled outcome"] == "fails"
    # a single-seed claim has no per-seed columns; seeds in common are required
    assert "seeds" not in claim_row(claim(a=ref(metrics, "tkl"), b=ref(metrics, "tk")))
    with pytest.raises(StudyError, match="no seed in common"):
        claim_row(claim(a=a, b=seeded_ref(tmp_path, "other", {"7": BASE, "8": BASE})))


def test_a_subset_claim_uses_only_late_evidence_queries(tmp_path, metrics):
    # queries 1-10 have their only relevant document's evidence at token 300 (late), 11-20 at token 10
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 d{q} 1\n{q} 0 n{q} 0\n" for q in QIDS))
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps({"relevant": {q: {f"d{q}": {"evidence_start": 300 if int(q) <= 10 else 10}}
                                              for q in QIDS}}))
    assert evidence_queries(qrels, truth, 200, late=True) == {str(q) for q in range(1, 11)}
    assert evidence_queries(qrels, truth, 200, late=False) == {str(q) for q in range(11, 21)}
    # A wins only on the late queries
    late_win = {q: BETTER[q] if int(q) <= 10 else BASE[q] for q in QIDS}
    path = metric_csv(tmp_path / "late.csv", "late", "test", late_win, dataset="doc")
    a = {"label": "late", "path": str(path), "dataset": "doc", "system": "late", "split": "test"}
    subset = {"evidence": "late", "boundary": 200, "qrels": str(qrels), "truth": str(truth)}
    late = claim_row(claim(a=a, b=ref(metrics, "tk"), subset=subset))
    early = claim_row(claim(a=a, b=ref(metrics, "tk"), subset={**subset, "evidence": "early"}))
    assert (late["outcome"], late["queries"]) == ("holds", 10)
    assert (early["outcome"], early["queries"], early["difference"]) == ("fails", 10, 0.0)


def test_truncation_methods_come_from_per_query_csv(tmp_path):
    rows = [{"metric": metric, "method": method, "qid": q, "value": values[q], "cut": 5}
            for metric in ("f1", "dcg") for method, values in (("Choppy", BETTER), ("Greedy-k (k=7)", BASE))
            for q in QIDS]
    path = tmp_path / "per_query.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    side = {"path": str(path), "label": "x"}
    row = claim_row(claim(measure="dcg", a={**side, "method": "Choppy"}, b={**side, "method": "Greedy-k"}))
    assert row["outcome"] == "holds"
    with pytest.raises(StudyError, match=r"no f1 values of method 'BiCut' \(methods: Choppy, Greedy-k\)"):
        claim_row(claim(measure="f1", a={**side, "method": "BiCut"}, b={**side, "method": "Choppy"}))


def test_efficiency_claims_compare_the_benchmarks_docs_per_ms(tmp_path):
    path = tmp_path / "efficiency.csv"
    pd.DataFrame({"model": ["tkl-2k", "bert_cat", "tkl-2k"], "device": ["cpu", "cpu", "cuda"],
                  "docs_per_ms": [1.5, 0.2, 9.0]}).to_csv(path, index=False)
    side = {"path": str(path)}
    faster = claim(measure="docs/ms", direction="bounds", a={**side, "model": "tkl-2k", "label": "TKL"},
                   b={**side, "model": "bert_cat", "label": "BERT"})
    with pytest.raises(StudyError, match="no docs/ms of model 'bert_cat'"):  # the GPU's numbers when measured
        claim_row(faster)
    path.write_text("model,device,docs_per_ms\ntkl-2k,cpu,1.5\nbert_cat,cpu,0.2\n")
    row = claim_row(faster)
    assert (row["outcome"], row["mean A"], row["mean B"], row["queries"]) == ("holds", 1.5, 0.2, 1)
    assert claim_row({**faster, "a": faster["b"], "b": faster["a"]})["outcome"] == "fails"


def test_a_claim_names_its_source():
    with pytest.raises(StudyError, match="claim c: source must be one of paper, study"):
        claim_row(claim(source="blog", a={}, b={}))


def test_the_cli_writes_csv_and_markdown(tmp_path, metrics):
    spec = {"claims": [claim(id="tkl-beats-tk", on="doc test", quote="TKL wins.", a=ref(metrics, "tkl"),
                             b=ref(metrics, "tk")),
                       claim(id="even-not-worse", direction="not_worse", margin=0.02, a=ref(metrics, "even"),
                             b=ref(metrics, "tk")),
                       claim(id="gone", source="study", a=ref(metrics, "tkl"), b=ref(metrics, "tk"),
                             not_run="not here")]}
    assert main(["claims", "--spec", json.dumps(spec), "--out-prefix", str(tmp_path / "claims")]) == 0
    table = pd.read_csv(tmp_path / "claims.csv")
    assert list(table["outcome"]) == ["holds", "holds", "not run"]
    assert list(table["source"]) == ["paper", "paper", "study"] and table.loc[0, "quote"] == "TKL wins."
    markdown = (tmp_path / "claims.md").read_text()
    assert markdown.startswith("Claims scoreboard: paper claims: 2 holds, 0 fails, 0 not run; "
                               "study claims: 0 holds, 0 fails, 1 not run")
    assert "one-sided, margin 0.02" in markdown and "| tkl-beats-tk " in markdown
    assert not list(tmp_path.glob(".*tmp"))


def test_a_bad_spec_or_file_is_a_clear_error(tmp_path, capsys):
    assert main(["claims", "--spec", "[1]", "--out-prefix", str(tmp_path / "c")]) == 2
    assert "--spec: expected JSON" in capsys.readouterr().err
    bad = {"claims": [claim(a={"label": "a", "path": str(tmp_path / "none.csv"), "dataset": "d", "system": "a",
                               "split": "test"}, b={"label": "b", "value": 0.1})]}
    assert main(["claims", "--spec", json.dumps(bad), "--out-prefix", str(tmp_path / "c")]) == 2
    assert "none.csv: cannot read metrics CSV" in capsys.readouterr().err
    assert not (tmp_path / "c.csv").exists()


def test_write_scoreboard_counts_outcomes(tmp_path):
    table = pd.DataFrame([{"id": "x", "paper": "P", "source": "study", "claim": "c", "outcome": "fails", "test": "t",
                           "alpha": 0.05, "margin": None, "p": 0.5, "queries": 3, "quote": ""}])
    write_scoreboard(table, tmp_path / "s")
    assert "study claims: 0 holds, 1 fails, 0 not run" in (tmp_path / "s.md").read_text()
