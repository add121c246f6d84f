"""Column names of the paper tables that the study plan needs when the DAG is built (a reported file's cells
name them) and the reports write: plain constants, so that planning imports neither pandas nor matplotlib."""

from __future__ import annotations

# TK notebook's Table 2: MAP, nDCG, MRR@10 (dev) and MAP, nDCG, P@10 (test); its nDCG is over the whole ranking
# (NIST's evaluation of the submitted runs gives the same values: docs/fidelity.md); nDCG@10, TREC DL's headline
# measure, beside it
TK_DEV_MEASURES = ("AP", "nDCG", "nDCG@10", "RR@10")
TK_TEST_MEASURES = ("AP", "nDCG", "nDCG@10", "P@10")
TK_MEASURES = tuple(dict.fromkeys(TK_DEV_MEASURES + TK_TEST_MEASURES))
TKL_MEASURES = ("nDCG@10", "RR@10", "AP@100")  # TKL Tables 1-2, each on test and dev
SPEED_MEASURE = "docs/ms"  # a claim on the efficiency benchmark's throughput (results/efficiency.csv)
# the tables' captions
SPEED_NOTE = "docs/ms: throughput at the dimensions the config's efficiency benchmark names (results/efficiency.csv). "
REGIONS_AFTER = 500  # TKL Fig. 3's text: the share of each top region "after the 500th word"


def speed_column(device: str) -> str:
    """The tables' docs/ms column for an efficiency benchmark run on ``device`` (cuda or cpu)."""
    return f"docs/ms ({'GPU' if device == 'cuda' else 'CPU'})"
