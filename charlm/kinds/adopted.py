"""A user's own network (charlm.adopt): a PyTorch LSTM / GRU / RNN mapped exactly onto the suite's cells.

It is a recurrent network to every analysis (traces, probes, gradients, Predictions), but it was trained elsewhere:
it has no training curve, no snapshots and no stopping rule, so its only job is `score`, and a run plans it only
when asked (`python -m reports --adopt MODEL.pt --vocab VOCAB.json`), never from a profile.
"""

from __future__ import annotations

from pathlib import Path

from ..paths import config_hash
from .base import Planned
from .recurrent import Recurrent


class Adopted(Recurrent):
    name = "adopted"
    label = "adopted network"
    ships = False

    def plan(self, profile, corpus, corpus_arg, extra_orders=((), ())) -> list[Planned]:
        return []  # given by the user (reports --adopt), not by a profile

    def jobs(self, planned, env, threads, splits, snapshots, problem):
        if problem is not None:
            from corpora.errors import UserError

            raise UserError(f"adopted model {planned.model_id}: {problem}; adopt it again (python -m charlm.adopt)")
        return super().jobs(planned, env, threads, splits, False, None)

    def model_config(self, planned: Planned):
        return planned.config  # adopted: its ModelConfig as written by charlm.adopt

    def describe(self, planned: Planned) -> dict:
        c = planned.config
        return {
            "arch": f"adopted {c.arch}",
            "layers": c.layers,
            "width": c.size,
            "dropout": None,
            "seed": None,
            "params": None,
            "budget row": "-",
            "train chars": None,
        }

    def index_row(self, metrics: dict, directory: Path) -> dict:
        mc = metrics.get("model_config") or {}
        key = metrics.get("corpus_key", metrics.get("corpus_sha256"))
        return {
            "family": "neural",
            "kind": self.name,
            "arch": mc.get("arch"),
            "layers": mc.get("layers"),
            "size": mc.get("size"),
            "budget": None,
            "dropout": mc.get("dropout", 0.0),
            "seed": 0,
            "group_id": metrics.get("model_id"),
            "variant": metrics.get("model_id"),
            "recipe": config_hash({"adopted": metrics.get("model_id"), "corpus_key": key}),
            "snapshots": 0,
        }

    def owns(self, folder, metrics, payload_kind) -> bool:
        return metrics.get("kind") == "adopted"


ADOPTED = Adopted()
