"""Rendering and checking of the reproducible charlm report (HTML + PDF)."""
