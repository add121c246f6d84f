"""The Choppy paper's outputs: plan, report, CLI (rankstudy.papers)."""
