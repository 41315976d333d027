"""Probes for interpretable cells: per-character labels from raw text, probe estimators, control tasks (`cells`)."""
