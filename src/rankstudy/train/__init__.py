"""Training of neural re-rankers: examples (triples, groups), losses and the training loop."""
