"""rankstudy.evaluate against hand-computed trec_eval values and pytrec_eval (trec_eval's C code).

Fixture (tests/fixtures/eval/), grades 0-3; unjudged documents count as non-relevant.

q1  run: d1(3) d2(0) d3(2) d6(-) d4(1) d5(0); judged d9(1) is not retrieved.
q2  run: 101 docs p001..p101 by rank; judged p001(0) p002(2) p007(1) p101(3).
q3  judged x1(2) x2(0), absent from the run          -> 0 on every measure (trec_eval -c).
q4  judged z1(0) z2(0) only; run z1 z2 z3           -> 0 on every measure: trec_eval
    evaluates it (only queries without any judgment are skipped) and its AP, recall,
    P, RR and nDCG all stay 0 when no document is relevant (nDCG: DCG = ideal DCG = 0).
q5  in the run only                                  -> ignored.

Threshold 1 (relevant: grade >= 1)
  q1  4 relevant (d1 d3 d4 d9), retrieved at ranks 1, 3, 5
      AP = AP@100 = (1/1 + 2/3 + 3/5) / 4 = 0.566667
      P@10 = 3/10 = 0.3     RR@10 = 1/1 = 1     R@100 = 3/4 = 0.75
      nDCG@10 (gain = grade, discount log2(rank + 1)):
        DCG  = 3/log2(2) + 2/log2(4) + 1/log2(6)               = 4.386853
        IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4) + 1/log2(5)   = 5.192536
        nDCG@10 = 0.844838
  q2  3 relevant (p002 p007 p101) at ranks 2, 7, 101
      AP     = (1/2 + 2/7 + 3/101) / 3 = 0.271806
      AP@100 = (1/2 + 2/7) / 3         = 0.261905   (rank 101 is cut off)
      P@10 = 2/10 = 0.2     RR@10 = 1/2 = 0.5     R@100 = 2/3 = 0.666667
      nDCG@10: DCG  = 2/log2(3) + 1/log2(8)              = 1.595193
               IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)  = 4.761860
               nDCG@10 = 0.334994
Threshold 2 (relevant: grade >= 2); nDCG@10 unchanged (graded)
  q1  2 relevant (d1 d3) at ranks 1, 3: AP = (1/1 + 2/3) / 2 = 0.833333, P@10 = 0.2,
      RR@10 = 1, R@100 = 1
  q2  2 relevant (p002 p101) at ranks 2, 101: AP = (1/2 + 2/101) / 2 = 0.259901,
      AP@100 = (1/2) / 2 = 0.25, P@10 = 0.1, RR@10 = 0.5, R@100 = 0.5
"""

from __future__ import annotations


import pandas as pd
import pytest
import pytrec_eval

from helpers import REPO
from rankstudy.errors import StudyError
from rankstudy.evaluate import COLUMNS, aggregate, evaluate_run, evaluate_to_csv, read_metrics
from rankstudy.formats import FormatError, read_qrels, read_run

FIXTURES = REPO / "tests" / "fixtures" / "eval"
QRELS, RUN = FIXTURES / "qrels.txt", FIXTURES / "run.txt"
MEASURES = ["AP", "AP@100", "P@10", "RR@10", "nDCG@10", "R@100"]
ZEROS = dict.fromkeys(MEASURES, 0.0)

EXPECTED = {
    1: {
        "q1": {"AP": 0.566667, "AP@100": 0.566667, "P@10": 0.3, "RR@10": 1.0, "nDCG@10": 0.844838, "R@100": 0.75},
        "q2": {"AP": 0.271806, "AP@100": 0.261905, "P@10": 0.2, "RR@10": 0.5, "nDCG@10": 0.334994, "R@100": 0.666667},
        "q3": ZEROS,
        "q4": ZEROS,
    },
    2: {
        "q1": {"AP": 0.833333, "AP@100": 0.833333, "P@10": 0.2, "RR@10": 1.0, "nDCG@10": 0.844838, "R@100": 1.0},
        "q2": {"AP": 0.259901, "AP@100": 0.25, "P@10": 0.1, "RR@10": 0.5, "nDCG@10": 0.334994, "R@100": 0.5},
        "q3": ZEROS,
        "q4": ZEROS,
    },
}
# trec_eval names of MEASURES; recip_rank has no cutoff (same as RR@10 here: first hits are within 10)
TREC_EVAL_NAMES = {"AP": "map", "AP@100": "map_cut_100", "P@10": "P_10", "RR@10": "recip_rank",
                   "nDCG@10": "ndcg_cut_10", "R@100": "recall_100"}


def as_nested(per_query: pd.DataFrame) -> dict[str, dict[str, float]]:
    nested: dict[str, dict[str, float]] = {}
    for row in per_query.itertuples():
        nested.setdefault(row.qid, {})[row.measure] = row.value
    return nested


@pytest.mark.parametrize("threshold", [1, 2])
def test_matches_hand_computed_trec_eval(threshold):
    per_query = evaluate_run(read_run(RUN), read_qrels(QRELS), MEASURES, rel_threshold=threshold)
    assert list(per_query.columns) == ["measure", "qid", "value"]
    assert as_nested(per_query) == {
        qid: {m: pytest.approx(v, abs=1e-4) for m, v in values.items()}
        for qid, values in EXPECTED[threshold].items()
    }


@pytest.mark.parametrize("threshold", [1, 2])
def test_matches_pytrec_eval(threshold):
    qrels, run = read_qrels(QRELS), read_run(RUN)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_EVAL_NAMES.values()), relevance_level=threshold)
    reference = evaluator.evaluate({qid: dict(ranking) for qid, ranking in run.items()})
    assert sorted(reference) == ["q1", "q2", "q4"]  # pytrec_eval skips q3 (no run) and q5 (no qrels)
    ours = as_nested(evaluate_run(run, qrels, MEASURES, rel_threshold=threshold))
    for qid, values in reference.items():
        for measure, name in TREC_EVAL_NAMES.items():
            assert ours[qid][measure] == pytest.approx(values[name], abs=1e-9), (qid, measure)


def test_threshold_changes_binary_measures_only():
    run, qrels = read_run(RUN), read_qrels(QRELS)
    low = as_nested(evaluate_run(run, qrels, MEASURES, rel_threshold=1))
    high = as_nested(evaluate_run(run, qrels, MEASURES, rel_threshold=2))
    assert high["q1"]["AP"] != pytest.approx(low["q1"]["AP"])
    assert high["q1"]["P@10"] != pytest.approx(low["q1"]["P@10"])
    assert high["q1"]["nDCG@10"] == low["q1"]["nDCG@10"]
    assert high["q2"]["nDCG@10"] == low["q2"]["nDCG@10"]


def test_explicit_rel_is_kept():
    run, qrels = read_run(RUN), read_qrels(QRELS)
    per_query = as_nested(evaluate_run(run, qrels, ["AP(rel=2)@100", "AP@100"], rel_threshold=1))
    assert per_query["q2"] == {"AP(rel=2)@100": pytest.approx(0.25), "AP@100": pytest.approx(0.261905, abs=1e-4)}


def test_rows_sorted_by_measure_order_then_qid():
    per_query = evaluate_run(read_run(RUN), read_qrels(QRELS), ["nDCG@10", "AP"])
    assert list(zip(per_query["measure"], per_query["qid"])) == [
        (m, q) for m in ["nDCG@10", "AP"] for q in ["q1", "q2", "q3", "q4"]
    ]


def test_ties_are_broken_as_trec_eval_does_for_every_measure():
    # Equal scores: trec_eval ranks docid "b" before "a" (docid descending), so the relevant
    # "a" is at rank 2. ir_measures' msmarco provider (RR@k) alone would put "a" first.
    qrels = {"t": {"a": 1, "b": 0}}
    run = {"t": [("a", 1.0), ("b", 1.0)]}
    values = as_nested(evaluate_run(run, qrels, ["RR@10", "AP"]))["t"]
    reference = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "map"}).evaluate({"t": {"a": 1.0, "b": 1.0}})["t"]
    assert values == {"RR@10": pytest.approx(0.5), "AP": pytest.approx(0.5)}
    assert values == {"RR@10": pytest.approx(reference["recip_rank"]), "AP": pytest.approx(reference["map"])}


def test_aggregate_is_mean_over_judged_queries():
    per_query = evaluate_run(read_run(RUN), read_qrels(QRELS), MEASURES)
    means = aggregate(per_query)
    assert list(means["measure"]) == MEASURES
    expected = {m: sum(EXPECTED[1][q][m] for q in ["q1", "q2", "q3", "q4"]) / 4 for m in MEASURES}
    assert dict(zip(means["measure"], means["value"])) == {m: pytest.approx(v, abs=1e-4) for m, v in expected.items()}


def test_evaluate_to_csv(tmp_path):
    out = tmp_path / "metrics" / "bm25.csv"
    evaluate_to_csv(run_path=RUN, qrels_path=QRELS, out_path=out, measures=MEASURES, rel_threshold=1,
                    dataset="toy", system="bm25", split="dev")
    table = pd.read_csv(out, dtype={"qid": str})
    assert list(table.columns) == COLUMNS
    assert set(table["dataset"]) == {"toy"} and set(table["system"]) == {"bm25"} and set(table["split"]) == {"dev"}
    assert len(table) == len(MEASURES) * (4 + 1)
    means = table[table["qid"] == "all"]
    assert list(means["measure"]) == MEASURES
    per_query = table[table["qid"] != "all"]
    for measure, value in zip(means["measure"], means["value"]):
        assert value == pytest.approx(per_query.loc[per_query["measure"] == measure, "value"].mean())
    assert means.set_index("measure").loc["AP@100", "value"] == pytest.approx((0.566667 + 0.261905) / 4, abs=1e-4)
    assert [p.name for p in out.parent.iterdir()] == ["bm25.csv"]  # no temporary left behind

    metrics = read_metrics([out, out])
    assert list(metrics.columns) == COLUMNS and len(metrics) == 2 * len(table)


def test_malformed_run_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 9.5 t\nq1 Q0 d2 2 8.0 t\nq1 Q0 d3 3 high t\n")
    out = tmp_path / "out.csv"
    with pytest.raises(FormatError) as error:
        evaluate_to_csv(run_path=bad, qrels_path=QRELS, out_path=out, measures=MEASURES, rel_threshold=1,
                        dataset="toy", system="bm25", split="dev")
    assert f"{bad}:3:" in str(error.value)
    assert not out.exists()


@pytest.mark.parametrize("measure", ["NotAMeasure@10", "AP@ten", ""])
def test_unknown_measure(measure):
    with pytest.raises(StudyError, match="measure"):
        evaluate_run(read_run(RUN), read_qrels(QRELS), ["AP", measure])


def test_read_metrics_rejects_other_csv(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("measure,value\nAP,0.5\n")
    with pytest.raises(StudyError, match="other.csv"):
        read_metrics([other])
