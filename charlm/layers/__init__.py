"""The recurrent layers of the suite, one family per file; charlm.archs names which layer each architecture uses.

base.py     the input projection (`project`, `features`) and `TracedLayer`, the protocol every layer follows
elman.py    ElmanLayer: the S-RNN (`rnn`, `lstm-gates`)
lstm.py     LSTMLayer: the LSTM on torch's fused kernel
gru.py      GRULayer (torch's form), PaperGRULayer and its scan PaperGRUScan (the papers' form)
ablated.py  AblatedLSTMLayer (Levy et al.'s ablations) and LinearScan (the additive memory's recurrence)
ladder.py   CBOWLayer and ProtoLSTMLayer (the lecture notes' rungs)
"""

from .ablated import AblatedLSTMLayer, LinearScan
from .base import TracedLayer, features, project
from .elman import ElmanLayer
from .gru import GRULayer, PaperGRULayer, PaperGRUScan
from .ladder import CBOW_DECAY, CBOWLayer, ProtoLSTMLayer
from .lstm import LSTMLayer

__all__ = [
    "AblatedLSTMLayer", "CBOWLayer", "CBOW_DECAY", "ElmanLayer", "GRULayer", "LSTMLayer", "LinearScan", "PaperGRULayer",
    "PaperGRUScan", "ProtoLSTMLayer", "TracedLayer", "features", "project",
]  # fmt: skip
