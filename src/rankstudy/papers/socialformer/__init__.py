"""The Socialformer paper's outputs: plan, report, CLI (rankstudy.papers)."""
