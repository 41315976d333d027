"""charlm: character language models of every architecture, their training, checkpoints and predictions.

Public API (names may grow; these stay):
    ModelConfig(arch=, vocab_size=, layers=, size=)
    build_model(config) -> model;  model(ids) -> logits (B, T, V);  model.trace(ids) -> {name: (B, T, H)}
    load_checkpoint(path) -> model
"""

from .checkpoint import load_checkpoint, save_checkpoint
from .model import ARCHS, CharLM, ModelConfig, build_model, count_params, matched_size, memory_weights

__all__ = [
    "ARCHS",
    "CharLM",
    "ModelConfig",
    "build_model",
    "count_params",
    "load_checkpoint",
    "matched_size",
    "memory_weights",
    "save_checkpoint",
]
