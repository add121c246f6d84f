"""bench/gpu_efficiency.py, the GPU measurement of issue 45, runs on a CPU in its quick setting: the same code (the
sweep, both precisions, FLOPs, training steps, the report) on tiny models, so that a lent GPU's minutes go to
measuring."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import REPO


def test_the_quick_setting_measures_and_reports_on_a_cpu(tmp_path):
    out = tmp_path / "quick.md"
    environment = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    # a time limit no busy machine reaches: every measurement is taken, however slowly
    subprocess.run([sys.executable, str(REPO / "bench" / "gpu_efficiency.py"), "--device", "cpu", "--quick",
                    "--models", "knrm,tk", "--time-limit", "3000", "--out", str(out)],
                   check=True, env=environment, capture_output=True, timeout=3000)
    report = out.read_text()
    assert "(--quick: a check of the script, not a measurement)" in report
    rows = [line.split(" | ") for line in report.splitlines() if line.startswith("| knrm | 49 |")
            or line.startswith("| tk | 4 | 100 |")]
    assert [(row[0], row[3]) for row in rows] == [("| knrm", "fp32"), ("| knrm", "bf16"), ("| tk", "fp32"),
                                                  ("| tk", "bf16")]
    assert all(float(row[5]) > 0 and float(row[11]) > 0 for row in rows)  # docs/ms and training steps/s
    raw = json.loads(out.with_suffix(".json").read_text())
    assert {(row["model"], row["precision"], row["batch"]) for row in raw["sweep"]} == {
        (model, precision, batch) for model in ("knrm", "tk") for precision in ("fp32", "bf16") for batch in (4, 8)}
    assert not raw["error"] and all(row["flops_per_doc"] > 0 for row in raw["best"])
