"""One record per architecture: everything the suite knows about it, in one place.

    rnn               Elman S-RNN                h = tanh(W x + U h + b)
    gru               GRU (torch / cuDNN form)   r, z, htilde = tanh(W x + r * (U h + b)), h = (1 - z) h + z htilde
    lstm              LSTM                       i f o ctilde from x and h; c = f c + i ctilde; h = o tanh(c)
    lstm-srnn         Levy et al. eq. 9          ctilde = W_cx x (no recurrence, no tanh)
    lstm-srnn-out     eq. 10                     ... and h = tanh(c): no output gate
    lstm-srnn-hidden  sec 3.1                    ... and gates read x only: the memory cell is the only recurrence
    lstm-gates        sec 3.1                    gates removed: the S-RNN alone, at the LSTM's width

and the rungs of the lecture notes' derivation of the LSTM (seed 004), with the papers' own GRU:

    cbow              CBOW as an RNN             h = d h + (1 - d) E x: the notes' sum s + E[x] as a leaking mean
    cbow-tanh         squashed CBOW              h = tanh(h + E x)
    proto-lstm        prototype LSTM             i f o read c; ctilde = tanh(W (o c) + U x); c = f c + i ctilde
    gru-paper         the papers' GRU            r, z; htilde = tanh(W x + U (r * h) + b): reset before the product
    pseudo-lstm       pseudo-LSTM                the prototype reading tanh(c) instead of c; both output tanh(c)

and Feng et al.'s (2024) minimal RNNs, gates and candidate from the input alone (a linear recurrence, scanned):

    mingru            minGRU                     z = sigm(W_z x), htilde = W_h x; h = (1 - z) h + z htilde
    minlstm           minLSTM                    f, i = sigm(W x); f', i' = f / (f + i), i / (f + i); h = f' h + i' h~

Adding an architecture is its layer (charlm/layers/) and one `Arch` line in ARCHITECTURES; every table the suite
keeps of architectures (the names, the report's labels, the gated ones, the GRUs, Levy's ablations, the kernels
recorded with training, what `make bench` times them against) is a query on these records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .layers import (
    AblatedLSTMLayer,
    CBOWLayer,
    ElmanLayer,
    GRULayer,
    LSTMLayer,
    MinGRULayer,
    MinLSTMLayer,
    PaperGRULayer,
    ProtoLSTMLayer,
)

LSTM_INTERNALS = ("i", "f", "o", "ctilde", "c", "h")
GRU_INTERNALS = ("r", "z", "htilde", "h")


@dataclass(frozen=True)
class Arch:
    name: str  # the suite's name: ModelConfig.arch, model ids, profiles
    label: str  # how the report names it, everywhere
    layer: type  # its layer class (charlm/layers/), built as layer(d_in, size, **options)
    family: str  # "lstm": Levy's family (a memory cell c = f c + i ctilde); "gru"; "rnn"; "ladder": the notes' rungs;
    # "min": Feng et al.'s minimal RNNs (gates from the input alone)
    gated: bool  # learned gates: gate saturation and weighted sums apply
    internals: tuple[str, ...]  # what `trace` returns per layer (`layers.{l}.{name}`), in order
    options: dict = field(default_factory=dict)  # the layer's constructor options
    memory: str = "h"  # the internal that carries memory across steps (probed as cells, differentiated by vanishing)
    weights: str | None = None  # how the memory is a weighted sum (Levy eq. 8): "i,f" (w = i prod f), "z" (GRU, minGRU)
    fused: str = "loop"  # what trains it: "torch" (nn.RNN/GRU/LSTM), a kernel of ours by name, or "loop" (autograd)
    kernel: str | None = None  # our kernel's name as training sessions record it; a change to what it computes,
    # to the last bit, gets a new name (a shipped model retrains bit for bit only on the kernel that trained it)
    sized_as: str = ""  # whose parameter count sizes it in a budget row ("lstm": Levy's ablations keep its width)
    bench_against: str = "lstm"  # the fused torch architecture `make bench` times its training against
    ablation: bool = False  # one of Levy et al.'s four ablations of the LSTM (sec 3.1)
    content_from_input: bool = False  # the candidate written to memory reads the input alone (ctilde_j = W x_j)
    source: str = ""  # where it is defined


ARCHITECTURES = (  # the order the report lists them in (its labels' order)
    Arch("rnn", "RNN", ElmanLayer, "rnn", False, ("h",), fused="torch", bench_against="rnn",
         source="Karpathy et al. (2016) sec 3.1"),
    Arch("gru", "GRU", GRULayer, "gru", True, GRU_INTERNALS, weights="z", fused="torch", bench_against="gru",
         source="torch.nn.GRU (Cho et al. 2014 as cuDNN computes it)"),
    Arch("gru-paper", "GRU (papers' form)", PaperGRULayer, "gru", True, GRU_INTERNALS, weights="z",
         fused="PaperGRUScan", kernel="PaperGRUScan", bench_against="gru",
         source="Karpathy et al. (2016) sec 3.1; char-rnn's GRU.lua"),
    Arch("lstm", "LSTM", LSTMLayer, "lstm", True, LSTM_INTERNALS, memory="c", weights="i,f", fused="torch",
         source="Karpathy et al. (2016) sec 3.1"),
    Arch("lstm-srnn", "LSTM - S-RNN", AblatedLSTMLayer, "lstm", True, LSTM_INTERNALS,
         {"output_gate": True, "gates_recurrent": True}, memory="c", weights="i,f", sized_as="lstm", ablation=True,
         content_from_input=True, source="Levy et al. (2018) eq. 9"),
    Arch("lstm-srnn-out", "LSTM - S-RNN - OUT", AblatedLSTMLayer, "lstm", True, ("i", "f", "ctilde", "c", "h"),
         {"output_gate": False, "gates_recurrent": True}, memory="c", weights="i,f", sized_as="lstm", ablation=True,
         content_from_input=True, source="Levy et al. (2018) eq. 10"),
    Arch("lstm-srnn-hidden", "LSTM - S-RNN - HIDDEN", AblatedLSTMLayer, "lstm", True, ("i", "f", "ctilde", "c", "h"),
         {"output_gate": False, "gates_recurrent": False}, memory="c", weights="i,f", fused="LinearScan",
         sized_as="lstm", ablation=True, content_from_input=True, source="Levy et al. (2018) sec 3.1"),
    Arch("lstm-gates", "LSTM - GATES", ElmanLayer, "lstm", False, ("h",), fused="torch", sized_as="lstm",
         bench_against="rnn", ablation=True, source="Levy et al. (2018) sec 3.1"),
    Arch("cbow", "CBOW", CBOWLayer, "ladder", False, ("h",), {"squash": False}, bench_against="rnn",
         source="Goldberg and Pitis, lecture notes (seed 004)"),
    Arch("cbow-tanh", "CBOW-tanh", CBOWLayer, "ladder", False, ("h",), {"squash": True}, bench_against="rnn",
         source="Goldberg and Pitis, lecture notes (seed 004)"),
    Arch("proto-lstm", "prototype LSTM", ProtoLSTMLayer, "ladder", True, LSTM_INTERNALS, {"squash": False},
         memory="c", weights="i,f", source="Goldberg and Pitis, lecture notes (seed 004)"),
    Arch("pseudo-lstm", "pseudo-LSTM", ProtoLSTMLayer, "ladder", True, LSTM_INTERNALS, {"squash": True},
         memory="c", weights="i,f", source="Goldberg and Pitis, lecture notes (seed 004)"),
    Arch("mingru", "minGRU", MinGRULayer, "min", True, ("z", "htilde", "h"), weights="z", fused="LinearScan",
         kernel="LinearScan", bench_against="gru", content_from_input=True,
         source="Feng et al. (2024) sec 3.1.2"),
    Arch("minlstm", "minLSTM", MinLSTMLayer, "min", True, ("i", "f", "htilde", "h"), weights="i,f",
         fused="LinearScan", kernel="LinearScan", content_from_input=True, source="Feng et al. (2024) sec 3.2.3"),
)  # fmt: skip
REGISTRY = {a.name: a for a in ARCHITECTURES}


def arch(name: str) -> Arch:
    """The record of an architecture; an unknown name is one UserError line listing the known ones."""
    from corpora.errors import UserError

    if name not in REGISTRY:
        raise UserError(f"unknown architecture '{name}': choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def names(**where) -> tuple[str, ...]:
    """The names of the architectures whose record fields equal `where` (all of them by default), in the suite's
    historical order (`ARCHS`): e.g. names(gated=True), names(family="gru"), names(ablation=True)."""
    return tuple(a for a in ARCHS if all(getattr(REGISTRY[a], k) == v for k, v in where.items()))


FAMILY_ORDER = ("lstm", "gru", "min", "rnn", "ladder")  # the order gated architectures are listed in: Levy's, GRUs, ...


def gated() -> tuple[str, ...]:
    """The architectures with learned gates, Levy's LSTM family first, then the GRUs, then the notes' rungs."""
    return tuple(sorted(names(gated=True), key=lambda a: FAMILY_ORDER.index(REGISTRY[a].family)))


# The suite's order of architecture names (model ids, `--help`, tests), kept from before the records existed.
ARCHS = (
    "rnn", "gru", "lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates",
    "cbow", "cbow-tanh", "proto-lstm", "gru-paper", "pseudo-lstm", "mingru", "minlstm",
)  # fmt: skip
assert set(ARCHS) == set(REGISTRY), "every architecture has a record and a place in ARCHS"
