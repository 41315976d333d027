"""Probes for interpretable cells: per-character feature labels from raw text, probe estimators, control tasks (DESIGN.md sec 5, `cells`)."""
