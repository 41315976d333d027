"""Corpora: registry, download / build, byte vocabulary, contiguous splits, batching."""

from .corpus import REGISTRY, SPLIT_MODES, SPLITS, Corpus, CorpusSpec, corpora_dir, load
from .errors import UserError, run_cli

__all__ = ["REGISTRY", "SPLIT_MODES", "SPLITS", "Corpus", "CorpusSpec", "UserError", "corpora_dir", "load", "run_cli"]
