"""rankstudy: a reproducible study of efficient neural re-ranking and ranked-list truncation."""

__version__ = "0.1.0"
