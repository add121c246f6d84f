"""The TKL paper's outputs: plan, report, CLI (rankstudy.papers)."""
