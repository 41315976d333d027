"""The recurrent layers of the suite, one family per file; charlm.archs names which layer each architecture uses.

base.py           the input projection (`project`, `features`) and `TracedLayer`, the protocol every layer follows
elman.py          ElmanLayer: the S-RNN (`rnn`, `lstm-gates`)
lstm.py           LSTMLayer: the LSTM on torch's fused kernel
gru.py            GRULayer (torch's form), PaperGRULayer and its scan PaperGRUScan (the papers' form)
ablated.py        AblatedLSTMLayer (Levy et al.'s ablations)
minrnn.py         MinGRULayer and MinLSTMLayer (Feng et al. 2024: gates from the input alone)
scan.py           LinearScan: h_t = a_t h_{t-1} + b_t over time (-S-RNN-HIDDEN's memory cell, minGRU, minLSTM)
scan_variants.py  the other scans measured before choosing LinearScan
ladder.py         CBOWLayer and ProtoLSTMLayer (the lecture notes' rungs)
"""

from .ablated import AblatedLSTMLayer
from .base import TracedLayer, features, project
from .elman import ElmanLayer
from .gru import GRULayer, PaperGRULayer, PaperGRUScan
from .ladder import CBOW_DECAY, CBOWLayer, ProtoLSTMLayer
from .lstm import LSTMLayer
from .minrnn import MinGRULayer, MinLSTMLayer
from .scan import LinearScan, scan_loop

__all__ = [
    "AblatedLSTMLayer", "CBOWLayer", "CBOW_DECAY", "ElmanLayer", "GRULayer", "LSTMLayer", "LinearScan", "MinGRULayer",
    "MinLSTMLayer", "PaperGRULayer", "PaperGRUScan", "ProtoLSTMLayer", "TracedLayer", "features", "project",
    "scan_loop",
]  # fmt: skip
