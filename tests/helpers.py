"""Small builders shared by test modules (pytest puts tests/ on sys.path)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def metric_csv(path, system, split, values, measures=("AP", "nDCG@10", "RR@10", "P@10"), dataset="d"):
    """A long-format metrics CSV (as rankstudy evaluate writes) with the same per-query values for every measure."""
    rows = []
    for measure in measures:
        for qid, value in values.items():
            rows.append((dataset, system, split, measure, qid, value))
        rows.append((dataset, system, split, measure, "all", float(np.mean(list(values.values())))))
    pd.DataFrame(rows, columns=["dataset", "system", "split", "measure", "qid", "value"]).to_csv(path, index=False)
    return path
