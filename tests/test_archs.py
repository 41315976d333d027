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
