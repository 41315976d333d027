"""The architecture records: every table of architectures is a query on them, and each record says true things."""

from __future__ import annotations

import pytest
import torch

from charlm import archs
from charlm.model import ARCH_LABELS, GATED_ARCHS, LAYERS, CharLM, ModelConfig, count_params


@pytest.mark.parametrize("record", archs.ARCHITECTURES, ids=lambda a: a.name)
def test_each_record_describes_the_model_it_builds(record):
    model = CharLM(ModelConfig(record.name, 7, 2, 5))
    assert sum(p.numel() for p in model.parameters()) == count_params(model.config)
    cache = model.trace(torch.randint(0, 7, (2, 4)))
    assert tuple(k.split(".", 2)[2] for k in cache if k.startswith("layers.0.")) == record.internals
    assert record.memory in record.internals
    has_gates = bool({"i", "f", "o", "r", "z"} & set(record.internals))
    assert record.gated == has_gates
    assert (record.weights is not None) == record.gated  # a gated memory is a weighted sum (Levy eq. 8)
    assert record.bench_against in archs.names(fused="torch")
    assert not record.sized_as or record.sized_as in archs.REGISTRY


def test_the_old_tables_are_queries_on_the_records():
    assert list(ARCH_LABELS) == [a.name for a in archs.ARCHITECTURES]
    assert set(GATED_ARCHS) == {a.name for a in archs.ARCHITECTURES if a.gated}
    assert GATED_ARCHS[0] == "lstm" and GATED_ARCHS.index("gru") > GATED_ARCHS.index("lstm-srnn-hidden")
    assert {name: cls for name, (cls, _) in LAYERS.items()} == {a.name: a.layer for a in archs.ARCHITECTURES}
    assert archs.names(ablation=True) == ("lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates")


def test_an_unknown_architecture_is_one_line():
    from corpora.errors import UserError

    with pytest.raises(UserError, match="unknown architecture 'lsmt'"):
        archs.arch("lsmt")


@pytest.mark.parametrize("record", [a for a in archs.ARCHITECTURES if a.fused == "LinearScan"], ids=lambda a: a.name)
def test_the_linear_recurrences_train_and_score_by_their_scan_and_trace_step_by_step(record, monkeypatch):
    """The cells whose recurrence is linear with input-only coefficients (charlm/layers/scan.py): their content and
    gates read x alone, forward runs LinearScan once per layer, the trace never (it is the step loop)."""
    from charlm.layers import LinearScan

    calls = []
    scan = LinearScan.apply
    monkeypatch.setattr(LinearScan, "apply", lambda *args: calls.append(1) or scan(*args))
    model = CharLM(ModelConfig(record.name, 7, 2, 5))
    ids = torch.randint(0, 7, (2, 4))
    model.forward_with_state(ids)
    assert len(calls) == 2
    model.trace(ids)
    model.forward_with_state(ids, fused=False)
    assert len(calls) == 2
    assert record.gated and record.content_from_input and record.weights is not None
    # lstm-srnn-hidden trained on LinearScan before kernels were recorded, and still computes the same bits
    assert record.kernel == (None if record.name == "lstm-srnn-hidden" else "LinearScan")


def test_the_minimal_rnns_of_feng_et_al():
    for name, label, weights in (("mingru", "minGRU", "z"), ("minlstm", "minLSTM", "i,f")):
        record = archs.arch(name)
        assert (record.label, record.family, record.memory, record.weights) == (label, "min", "h", weights)
        assert not record.sized_as and not record.ablation
    assert archs.names(family="min") == ("mingru", "minlstm")
    assert GATED_ARCHS.index("gru-paper") < GATED_ARCHS.index("mingru") < GATED_ARCHS.index("proto-lstm")
