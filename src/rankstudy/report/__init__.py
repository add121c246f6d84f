"""Report artifacts of the study: tables (``tables``) built from the metric CSVs."""
