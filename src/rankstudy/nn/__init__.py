"""Building blocks shared by the neural models."""
