"""bench/training_negatives.py: how often the first stage already orders a training triple, and a test list's
judged pairs, correctly."""

from __future__ import annotations

import importlib.util

from helpers import REPO

SPEC = importlib.util.spec_from_file_location("training_negatives", REPO / "bench" / "training_negatives.py")
training_negatives = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(training_negatives)


def write_run(path, lists):
    path.write_text("".join(f"{qid} Q0 {docid} {rank} {100 - rank} bm25\n"
                            for qid, docids in lists.items() for rank, docid in enumerate(docids, 1)))
    return path


def test_triples_and_test_pairs_the_first_stage_orders_wrongly(tmp_path):
    run = write_run(tmp_path / "train.run", {"q1": ["p1", "n1", "n2"], "q2": ["n3", "p2", "n4"]})
    triples = tmp_path / "triples.tsv"
    triples.write_text("q1\tp1\tn1\nq1\tp1\tn2\nq2\tp2\tn3\nq2\tp2\tn4\n")
    given = tmp_path / "negatives.tsv"
    given.write_text("q2 n3\n")
    all_line, given_line = training_negatives.triple_lines(triples, run, given)
    # q1's positive is rank 1 (2 of 4 triples); only q2's n3 ranks above its positive (1 of 4)
    assert all_line == "| all | 4 | 0.500 | 0.250 | 2 |"
    assert given_line == "| negative given | 1 | 0.000 | 1.000 | 1 |"

    test_run = write_run(tmp_path / "test.run", {"t1": ["a", "r", "b", "u"]})
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("t1 0 r 2\nt1 0 a 0\nt1 0 b 0\nt1 0 u 1\n")
    # pairs (r, a) and (r, b): a, judged 0, ranks above r; u (grade 1, below the threshold) is in no pair
    assert training_negatives.judged_pairs_line("t", test_run, qrels, 2) == "| t | 1 | 2 | 0.500 |"
