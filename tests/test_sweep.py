"""Sweeps: the same jobs on local processes and on a real Dask LocalCluster give the same artifacts."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import torch

from charlm.checkpoint import load_payload
from charlm.kinds.recurrent import score_job, train_job
from charlm.paths import checkpoint_predictions_path
from charlm.predictions import load as load_predictions
from charlm.sweep import executor, run_jobs
from charlm.train import TrainConfig


def _jobs(corpus_path, root):
    env = {"CHARLM_ARTIFACTS": str(root)}
    configs = [
        TrainConfig(
            corpus=str(corpus_path),
            arch=arch,
            layers=1,
            size=8,
            max_chars=2000,
            eval_chars=800,
            batch_size=4,
            unroll=10,
            snapshots=2,
        )
        for arch in ("lstm", "lstm-srnn-hidden")
    ]
    return [partial(_train_and_score, c.__dict__, env) for c in configs]


def _train_and_score(config: dict, env: dict) -> str:
    """A report's two jobs for one network: train it, then score its checkpoint and snapshots."""
    out = train_job(config, env, 1, "contiguous")
    return score_job(out, config["corpus"], env, 1, "contiguous", True)


def _artifacts(dirs):
    out = {}
    for d in map(Path, dirs):
        state = load_payload(d / "checkpoint.pt")["state_dict"]
        metrics = json.loads((d / "metrics.json").read_text())
        snapshots = [
            load_predictions(checkpoint_predictions_path(d / s["file"], "test")).target_logp
            for s in metrics["snapshots"]
        ]
        final = load_predictions(checkpoint_predictions_path(d / "checkpoint.pt", "test")).logp
        out[d.name] = (state, metrics["epochs"], final, snapshots)
    return out


def test_dask_local_cluster_matches_local_processes(tmp_path, small_text_file):
    distributed = pytest.importorskip("distributed")
    local = run_jobs_with(None, _jobs(small_text_file, tmp_path / "local"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = run_jobs_with(cluster.scheduler_address, _jobs(small_text_file, tmp_path / "dask"))
    a, b = _artifacts(local), _artifacts(dask)
    assert sorted(a) == sorted(b) and len(a) == 2
    for model_id in a:
        state_a, curve_a, logp_a, snaps_a = a[model_id]
        state_b, curve_b, logp_b, snaps_b = b[model_id]
        assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
        assert curve_a == curve_b
        assert (logp_a == logp_b).all()
        assert len(snaps_a) == len(snaps_b) == 2 and all((x == y).all() for x, y in zip(snaps_a, snaps_b))
    assert all(str(tmp_path / "dask") in d for d in dask)


def run_jobs_with(scheduler, jobs):
    with executor(scheduler, workers=1) as pool:
        return run_jobs(pool, jobs, desc="test")


def test_unreachable_scheduler_is_one_clear_error():
    from corpora.errors import UserError

    with pytest.raises(UserError, match="cannot reach the Dask scheduler"):
        with executor("tcp://127.0.0.1:9", workers=1, connect_timeout="2s"):
            pass
