"""The TK paper's outputs: plan, report, CLI (rankstudy.papers)."""
