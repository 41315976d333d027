"""[ablations] noise_seeds: an ablation whose gap is within noise at one seed is trained at the LSTM's seeds too
(issue 38), in its set (so the set ships whole), on the corpus and depth named only."""

from __future__ import annotations

import pytest

from charlm.plan import ablation_set, load_profile
from corpora.errors import UserError

PROFILE = """
description = "noise seeds"
corpora = ["fake", "other"]
analyses = ["cross_entropy"]

[train]
max_chars = 1000

[[grid]]
types = ["lstm"]
layers = [1]
budgets = [16]

[ablations]
archs = ["lstm-srnn", "lstm-gates"]
layers = [1, 2]
budget = 16
lstm_seeds = [0, 3, 5]
noise_seeds = [{corpus = "fake", layers = 1, arch = "lstm-srnn"}]
"""


def _profile(tmp_path, text=PROFILE):
    path = tmp_path / "noisy.toml"
    path.write_text(text)
    return load_profile(str(path))


def test_the_named_ablation_trains_at_the_lstms_seeds_on_its_corpus_and_depth_only(tmp_path):
    profile = _profile(tmp_path)
    members = [(c.arch, c.seed) for c in ablation_set(profile, 10, "fake", 1, 0.0)]
    assert members == [("lstm", 0), ("lstm", 3), ("lstm", 5), ("lstm-srnn", 0), ("lstm-srnn", 3), ("lstm-srnn", 5),
                       ("lstm-gates", 0)]  # fmt: skip
    for corpus, layers in (("other", 1), ("fake", 2)):
        assert [(c.arch, c.seed) for c in ablation_set(profile, 10, corpus, layers, 0.0)][3:] == [
            ("lstm-srnn", 0), ("lstm-gates", 0)]  # fmt: skip
    widths = {c.size for c in ablation_set(profile, 10, "fake", 1, 0.0)}
    assert len(widths) == 1  # every member at the LSTM's width


@pytest.mark.parametrize("entry", ['{corpus = "fake", layers = 1, arch = "lstm-srnn-out"}',  # not one of its archs
                                   '{corpus = "fake", arch = "lstm-srnn"}', '"lstm-srnn"'])  # fmt: skip
def test_a_malformed_noise_seeds_entry_is_one_clear_error(tmp_path, entry):
    text = PROFILE.replace('[{corpus = "fake", layers = 1, arch = "lstm-srnn"}]', f"[{entry}]")
    with pytest.raises(UserError, match="noise_seeds"):
        _profile(tmp_path, text)
