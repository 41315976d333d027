"""One module per question: each exposes compute(...) -> tidy DataFrame, plot(df) -> Figure, and main(argv).

Every analysis reads artifacts only (metrics.json and Predictions), never trains inline unless
its CLI is asked to build what is missing.
"""
