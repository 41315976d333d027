"""charlm: character language models of every architecture, their training, checkpoints and predictions.

Public API (names may grow; these stay):
    ModelConfig(arch=, vocab_size=, layers=, size=)
    build_model(config) -> model;  model(ids) -> logits (B, T, V);  model.trace(ids) -> {name: (B, T, H)}
    load_checkpoint(path) -> model
    api.load(model id, folder or .pt) -> m;  m.score(text), m.sample(n), m.run_with_cache(text)  (notebooks)
    api.adopt(MODEL.pt, VOCAB.json, corpus) -> m: your own PyTorch character LM, exactly (charlm.adopt)
"""

from . import api
from .checkpoint import load_checkpoint, save_checkpoint
from .model import ARCHS, CharLM, ModelConfig, build_model, count_params, matched_size, memory_weights

__all__ = [
    "ARCHS",
    "api",
    "CharLM",
    "ModelConfig",
    "build_model",
    "count_params",
    "load_checkpoint",
    "matched_size",
    "memory_weights",
    "save_checkpoint",
]
