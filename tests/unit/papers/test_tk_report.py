"""TK paper outputs: significance, Table 2, Tables 3-4, the interpretability view, efficiency."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import metric_csv
from scipy import stats as scipy_stats

from rankstudy import formats
from rankstudy.efficiency import measure_models
from rankstudy.errors import StudyError
from rankstudy.models import build_model
from rankstudy.papers.tk.report import best_worst_queries, table2
from rankstudy.papers.tk.view import choose_query, render
from rankstudy.significance import paired_t_p, significance_letters, wilcoxon_p
from rankstudy.text.vocab import build_vocabulary


def test_wilcoxon_detects_a_consistent_gain_and_not_noise():
    rng = np.random.default_rng(0)
    base = {str(q): float(v) for q, v in enumerate(rng.random(60))}
    better = {q: v + 0.1 + rng.normal(0, 0.02) for q, v in base.items()}
    noisy = {q: v + rng.normal(0, 0.05) for q, v in base.items()}
    assert wilcoxon_p(better, base) < 0.001
    assert wilcoxon_p(noisy, base) > 0.05
    assert wilcoxon_p(base, base) == 1.0
    with pytest.raises(StudyError, match="different queries"):
        wilcoxon_p(base, {"0": 1.0})


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_small_samples_get_scipys_exact_wilcoxon_p_value(alternative):
    """Up to 13 queries the p-value is exact (every sign flip), with ties and zeros as scipy treats them."""
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 9, 13):
        for _ in range(4):
            a = rng.choice([0.0, 0.25, 0.5, 1.0], n)  # RR-like values: ties and zero differences
            b = rng.choice([0.0, 0.25, 0.5, 1.0], n) if rng.random() < 0.5 else rng.random(n)
            if not np.any(a != b):
                continue
            expected = scipy_stats.wilcoxon(a, b, zero_method="wilcox", alternative=alternative).pvalue
            got = wilcoxon_p({str(q): v for q, v in enumerate(a)}, {str(q): v for q, v in enumerate(b)}, alternative)
            assert got == pytest.approx(expected, rel=1e-12, abs=1e-15), (n, a, b)


def test_paired_t_test_matches_the_textbook_statistic():
    a = {"q1": 0.5, "q2": 0.7, "q3": 0.4, "q4": 0.9}
    b = {"q1": 0.3, "q2": 0.6, "q3": 0.4, "q4": 0.6}
    d = np.array([0.2, 0.1, 0.0, 0.3])  # t = mean / (sd / sqrt(n)), 3 degrees of freedom
    t = d.mean() / (d.std(ddof=1) / 2)
    assert paired_t_p(a, b) == pytest.approx(2 * scipy_stats.t.sf(t, 3))
    assert paired_t_p(a, a) == 1.0
    rng = np.random.default_rng(1)
    base = {str(q): float(v) for q, v in enumerate(rng.random(60))}
    better = {q: v + 0.1 + rng.normal(0, 0.02) for q, v in base.items()}
    assert significance_letters([base, better], test="t") == ["", "a"]
    with pytest.raises(StudyError, match="unknown significance test 'z'"):
        significance_letters([base, better], test="z")


def test_significance_letters_mark_rows_significantly_beaten():
    rng = np.random.default_rng(1)
    base = {str(q): float(v) for q, v in enumerate(rng.random(60))}
    better = {q: v + 0.1 + rng.normal(0, 0.02) for q, v in base.items()}
    best = {q: v + 0.2 + rng.normal(0, 0.02) for q, v in base.items()}
    noisy_base = {q: v + rng.normal(0, 0.05) for q, v in base.items()}
    # rows a..d: base, better, best, noise around base
    assert significance_letters([base, better, best, noisy_base]) == ["", "ad", "abd", ""]


def test_table2_rows_columns_and_significance(tmp_path):
    qids = [str(i) for i in range(30)]
    low = {q: 0.2 + 0.01 * i for i, q in enumerate(qids)}
    high = {q: v + 0.2 for q, v in low.items()}
    csvs = [metric_csv(tmp_path / f"{s}.{split}.csv", s, split, high if s.startswith("tk") else low,
                       measures=("AP", "nDCG", "nDCG@10", "RR@10", "P@10"))
            for s in ("bm25", "tk.p1.s1", "tk.p1.s1-full") for split in ("dev", "test")]
    rows = [{"run": "BM25", "model": None, "dataset": "d", "rerank": "bm25", "full": "bm25", "baseline": "bm25"},
            {"run": "p1", "model": "tk", "dataset": "d", "rerank": "tk.p1.s1", "full": "tk.p1.s1-full", "baseline": "bm25"}]
    efficiency = tmp_path / "eff.csv"
    pd.DataFrame({"model": ["tk"], "device": ["cpu"], "docs_per_ms": [0.5]}).to_csv(efficiency, index=False)
    table = table2(csvs, rows, tmp_path / "t2", depth=100, efficiency_csv=efficiency)
    assert list(table["run"]) == ["BM25", "p1"]
    assert table.loc[1, "test re-rank nDCG@10"] == pytest.approx(np.mean(list(high.values())))
    # the notebook's columns: MAP, nDCG (whole ranking), MRR@10 on dev; MAP, nDCG, P@10 per test task; nDCG@10 beside
    assert [c for c in table.columns if c.startswith("dev ")] == ["dev AP", "dev nDCG", "dev nDCG@10", "dev RR@10"]
    assert [c for c in table.columns if c.startswith("test full ")] == \
        ["test full AP", "test full nDCG", "test full nDCG@10", "test full P@10"]
    assert table.loc[1, "p vs BM25"] < 0.001 and pd.isna(table.loc[0, "p vs BM25"])
    assert table.loc[1, "docs/ms (CPU)"] == 0.5
    assert (tmp_path / "t2.md").read_text().startswith("TK paper Table 2 on d. dev: re-rank task; test: full task "
                                                       "(first stage, then re-ranking to the depth tuned on dev) and")
    # another first stage (official candidates) names the p column and the caption
    official = [{**row, "run": "official"} if row["run"] == "BM25" else row for row in rows]
    table = table2(csvs, official, tmp_path / "t2o", depth=1000)
    assert table.loc[1, "p vs official"] < 0.001
    assert "all top-1000 official candidates" in (tmp_path / "t2o.md").read_text()


def test_table2_without_a_dev_split_and_with_a_reference_row(tmp_path):
    """Query folds (or a test-only collection): no dev columns; a reference system (a zero-shot re-scorer of the
    same lists) has re-rank columns and p against the first stage, no full task."""
    qids = [str(i) for i in range(30)]
    low = {q: 0.2 + 0.01 * i for i, q in enumerate(qids)}
    values = {"bm25": low, "cos": {q: v + 0.1 for q, v in low.items()}, "tk.a.s1": low, "tk.a.s1-full": low}
    csvs = [metric_csv(tmp_path / f"{s}.csv", s, "test", v, measures=("AP", "nDCG", "nDCG@10", "RR@10", "P@10"))
            for s, v in values.items()]
    rows = [{"run": "BM25", "model": None, "dataset": "d", "rerank": "bm25", "full": "bm25", "baseline": "bm25"},
            {"run": "cos", "model": None, "dataset": "d", "rerank": "cos", "full": None, "baseline": "bm25"},
            {"run": "a", "model": "tk", "dataset": "d", "rerank": "tk.a.s1", "full": "tk.a.s1-full",
             "baseline": "bm25"}]
    table = table2(csvs, rows, tmp_path / "t2", depth=100)
    assert not [c for c in table.columns if c.startswith("dev ")]
    assert table.loc[1, "test re-rank nDCG@10"] == pytest.approx(np.mean(list(low.values())) + 0.1)
    assert pd.isna(table.loc[1, "test full nDCG@10"]) and table.loc[1, "p vs BM25"] < 0.001
    caption = (tmp_path / "t2.md").read_text()
    assert "dev: re-rank task" not in caption and "each run's fixed depth: no dev split to tune it on" in caption


def test_best_and_worst_queries(tmp_path):
    values = {"1": 0.9, "2": 0.1, "3": 0.5, "4": 0.0, "5": 1.0}
    csv = metric_csv(tmp_path / "m.csv", "tk", "test", values)
    formats.write_queries(tmp_path / "q.tsv", {q: f"query {q}" for q in values})
    formats.write_qrels(tmp_path / "r.txt", {q: {"d1": 1, "d2": 2} for q in values})
    documents = metric_csv(tmp_path / "d.csv", "tk-windowed", "test", {"1": 0.3, "2": 0.7, "3": 0.5})
    table = best_worst_queries([csv, documents], [tmp_path / "q.tsv"] * 2, [tmp_path / "r.txt"] * 2,
                               tmp_path / "t34", count=2)
    # Table 3 from the first run, Table 4 from the second, each its own best and worst
    assert list(table["qid"]) == ["5", "1", "4", "2", "2", "3", "1", "3"]
    assert list(table["table"]) == ["best", "best", "worst", "worst"] * 2
    assert list(table["paper table"]) == ["Table 3"] * 4 + ["Table 4"] * 4
    assert list(table["system"].unique()) == ["tk", "tk-windowed"]
    assert table.loc[0, "query"] == "query 5" and table.loc[0, "relevant"] == 2
    assert "Table 3: tk, Table 4: tk-windowed" in (tmp_path / "t34.md").read_text()
    with pytest.raises(StudyError, match="one queries and one qrels file per metric CSV"):
        best_worst_queries([csv, documents], [tmp_path / "q.tsv"], [tmp_path / "r.txt"] * 2, tmp_path / "x")


def test_choose_query_prefers_a_flip_to_relevant():
    first = {"a": [("x", 3.0), ("r", 2.0)], "b": [("y", 3.0), ("z", 1.0)]}
    neural = {"a": [("r", 9.0), ("x", 1.0)], "b": [("z", 9.0), ("y", 1.0)]}
    qrels = {"a": {"r": 1}, "b": {"y": 1}}
    assert choose_query(first, neural, qrels) == ("a", "r", "x")


def test_interpretability_view(tmp_path):
    docs = [("d1", "apple banana cherry apple"), ("d2", "durian apple elder fig"), ("d3", "grape")]
    formats.write_collection(tmp_path / "c.tsv", docs)
    formats.write_queries(tmp_path / "q.tsv", {"1": "apple banana"})
    formats.write_qrels(tmp_path / "r.txt", {"1": {"d1": 2, "d2": 0}})
    formats.write_run(tmp_path / "bm25.run", {"1": [("d2", 2.0), ("d1", 1.0)]}, "bm25")
    formats.write_run(tmp_path / "tk.run", {"1": [("d1", 2.0), ("d2", 1.0)]}, "tk")
    vocab = build_vocabulary(tmp_path / "c.tsv", 1)
    torch.manual_seed(0)
    embeddings = np.random.default_rng(0).normal(size=(len(vocab), 8)).astype(np.float32)
    embeddings[:2] = 0
    model = build_model("tk", {"heads": 2, "layers": 1, "ff_dim": 8}, embeddings).eval()
    qid = render(model, vocab, tmp_path / "c.tsv", tmp_path / "q.tsv", tmp_path / "r.txt", tmp_path / "bm25.run",
                 tmp_path / "tk.run", tmp_path / "view.html", 30, 200, [1.0, 0.9])
    page = (tmp_path / "view.html").read_text()
    assert qid == "1"
    assert "TK&#x27;s top document" in page and "demoted by TK" in page
    assert "d1" in page and "d2" in page and "s_log_k" in page and "s_len" in page
    # exact matches of the query words fall in the exact-match kernel (mu = 1.0)
    assert page.count("kernel μ=1.0") >= 3


def test_efficiency_measures_every_model():
    models = {"tk": {"model": "tk", "layers": 1, "heads": 2, "ff_dim": 8}, "knrm": {"model": "knrm", "repeats": 2}}
    table = measure_models(models, {"batch": 4, "doc_length": 20, "query_length": 4, "dim": 8, "vocab": 50,
                                    "repeats": 1, "threads": 1, "train_batch": 2})
    assert list(table["model"]) == ["tk", "knrm"]
    assert list(table["repeats"]) == [1, 2]  # a model entry overrides the setup
    assert (table["docs_per_ms"] > 0).all() and (table["peak_memory_mb"] >= 0).all()
    assert (table["train_steps_per_s"] > 0).all() and (table["threads"] == 1).all()
    assert table["omp_wait_policy"].notna().all() and table["cpu_capability"].notna().all()
    assert set(table["malloc"]) <= {"heap", "system"}
