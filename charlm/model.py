"""The suite's character language model: one config, every architecture, every internal readable.

    ModelConfig(arch, vocab_size, layers, size, dropout) -> CharLM: one-hot bytes -> stacked recurrent layers ->
    linear softmax head

The architectures are records (charlm.archs: name, layer, family, gates, internals, kernel, sizing) and their
layers live in charlm/layers/, one family per file. Every layer has a hand-written loop that returns all its
intermediates (`trace`); rnn / gru / lstm / lstm-gates also run torch's fused kernel for training, on the very
same parameters, as gru-paper runs its own scan with a hand-written backward (tests prove each pair agrees,
outputs and gradients). The GRUs' `z` is traced in the papers' convention (the weight on the candidate), which is
one minus torch's `z`. `run_with_cache` returns the logits and every internal named `layers.{l}.{name}`.

The tables below are queries on the architecture records, kept under their old names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from corpora.errors import UserError

from . import archs as _archs
from .layers import features, project  # noqa: F401  (re-exported: the suite's input projection)

ARCHS = _archs.ARCHS
LSTM_FAMILY = _archs.names(family="lstm")
ABLATIONS = _archs.names(ablation=True)  # Levy et al. sec 3.1: at the LSTM's width
GATED_ARCHS = _archs.gated()  # learned gates (a gated additive memory), report order
GATELESS_ARCHS = _archs.names(gated=False)  # the Elman S-RNN and the CBOW RNNs (cbow's decay is fixed)
GRU_ARCHS = _archs.names(family="gru")  # torch's form and the papers' form: the same gates r and z
ARCH_LABELS = {a.name: a.label for a in _archs.ARCHITECTURES}  # one name everywhere, in report order
# Our kernels recorded with every training session (reports.ship.machine); see charlm.archs.Arch.kernel.
TRAINING_KERNELS = {a.name: a.kernel for a in _archs.ARCHITECTURES if a.kernel}
LAYERS = {a.name: (a.layer, a.options) for a in _archs.ARCHITECTURES}  # architecture -> (layer class, options)
BUDGETS = (64, 128, 256, 512)  # Karpathy et al. sec 4.1: the widths of the 1-layer LSTMs that set the four budget rows
INIT_RANGE = 0.08  # Karpathy et al. sec 3.3: every parameter uniform in [-0.08, 0.08]

State = list[tuple[torch.Tensor, ...]]  # per layer: (h,) or (h, c), each (B, H); h is what the layer outputs


@dataclass(frozen=True)
class ModelConfig:
    arch: str  # one of ARCHS (charlm.archs)
    vocab_size: int  # V: number of distinct bytes; inputs are one-hot over them
    layers: int = 2  # stacked recurrent layers
    size: int = 128  # hidden width H of every layer
    dropout: float = 0.0  # dropout on the outputs of every layer (between layers and before the softmax)

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise UserError(f"unknown architecture '{self.arch}': choose one of {', '.join(ARCHS)}")
        for field in ("vocab_size", "layers", "size"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UserError(f"{field} must be a positive integer, got {value!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict:
        return asdict(self)


def make_layer(arch: str, d_in: int, size: int) -> nn.Module:
    cls, options = LAYERS[arch]
    return cls(d_in, size, **options)


def layer_params(arch: str, d_in: int, size: int) -> int:
    cls, options = LAYERS[arch]
    return cls.n_params(d_in, size, **options)


def count_params(config: ModelConfig) -> int:
    """Parameter count of `build_model(config)` without building it."""
    V, H = config.vocab_size, config.size
    layers = sum(layer_params(config.arch, V if l == 0 else H, H) for l in range(config.layers))
    return layers + H * V + V  # + softmax head


def budget_params(budget: int, vocab_size: int) -> int:
    """Parameters of the budget row `budget` (Karpathy et al. sec 4.1): those of a 1-layer LSTM of that width.

    "For a 1-layer LSTM we used hidden size vectors of 64, 128, 256, and 512 cells, which [...] translates
    to approximately 50K, 130K, 400K, and 1.3M parameters"; "Models in each row have nearly equal number
    of parameters" (Fig 1), whatever their type and depth.
    """
    return count_params(ModelConfig("lstm", vocab_size, 1, budget))


def _closest_width(arch: str, target: int, vocab_size: int, layers: int) -> int:
    """The width whose parameter count is closest to `target` (counts grow with the width: bisect)."""
    count = lambda h: count_params(ModelConfig(arch, vocab_size, layers, h))
    lo, hi = 1, 2
    while count(hi) < target:
        hi *= 2
    while hi - lo > 1:  # invariant: count(lo) < target <= count(hi), or lo == 1
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    return min((lo, hi), key=lambda h: (abs(count(h) - target), h))


def matched_size(arch: str, budget: int, vocab_size: int, layers: int = 1) -> int:
    """Width of an `arch` model of `layers` layers sized to the budget row `budget` (a 1-layer LSTM's width).

    Every type and depth of the paper's grid is sized to the row's count (sec 4.1), so a 2-layer LSTM of
    the 128 row is narrower than 128. Levy et al.'s ablations keep the width of the LSTM they ablate
    (sec 3.2): for them this returns the LSTM's width at that depth (their record's `sized_as`).
    """
    sized_as = _archs.REGISTRY[arch].sized_as or arch
    return _closest_width(sized_as, budget_params(budget, vocab_size), vocab_size, layers)


def budget_of(arch: str, size: int, layers: int, vocab_size: int, budgets=None) -> int | None:
    """The budget row a model of this shape was sized to (the paper's rows first, then any 1-layer LSTM width),
    or None if no row gives this width."""
    candidates = budgets or (*BUDGETS, *range(1, 4 * size + 64))
    return next((b for b in candidates if matched_size(arch, b, vocab_size, layers) == size), None)


# ---------------------------------------------------------------------------------------------


class CharLM(nn.Module):
    """One-hot bytes -> stacked recurrent layers -> linear softmax head (logits over the vocabulary)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        V, H = config.vocab_size, config.size
        self.layers = nn.ModuleList(make_layer(config.arch, V if l == 0 else H, H) for l in range(config.layers))
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(H, V)
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_RANGE, INIT_RANGE)

    def init_state(self, batch_size: int) -> State:
        p = self.head.weight
        zeros = lambda: p.new_zeros(batch_size, self.config.size)  # noqa: E731
        return [tuple(zeros() for _ in layer.state_names) for layer in self.layers]

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The first layer's input: the byte ids themselves (B, T), which every layer reads as one-hot vectors
        (see `project`; the fused kernels get the one-hot built for them)."""
        if ids.dim() != 2:
            raise ValueError(f"ids must be a (B, T) LongTensor, got shape {tuple(ids.shape)}")
        return ids.long()

    def forward_with_state(self, ids: torch.Tensor, state: State | None = None, fused: bool = True):
        """(B, T) ids -> logits (B, T, V) and the state after the last step (to carry across batches)."""
        x = self._embed(ids)
        state = state if state is not None else self.init_state(ids.shape[0])
        new_state = []
        for layer, s in zip(self.layers, state):
            x, s = layer(x, s, fused=fused)  # layers without a fused kernel ignore it
            x = self.drop(x)  # (B, T, H)
            new_state.append(s)
        return self.head(x), new_state

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.forward_with_state(ids)[0]

    def run_with_cache(self, ids: torch.Tensor, state: State | None = None):
        """Hand-written cells only: logits (B, T, V), cache {'layers.{l}.{name}': (B, T, H)}, final state."""
        x = self._embed(ids)
        state = state if state is not None else self.init_state(ids.shape[0])
        cache, new_state = {}, []
        for l, (layer, s) in enumerate(zip(self.layers, state)):
            x, s, layer_cache = layer.trace(x, s)
            cache.update({f"layers.{l}.{k}": v for k, v in layer_cache.items()})
            x = self.drop(x)
            new_state.append(s)
        return self.head(x), cache, new_state

    def trace(self, ids: torch.Tensor, state: State | None = None) -> dict[str, torch.Tensor]:
        """Every internal of every layer, named `layers.{l}.{name}`, each (B, T, H)."""
        return self.run_with_cache(ids, state)[1]


def build_model(config: ModelConfig) -> CharLM:
    return CharLM(config)


def memory_weights(i: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Levy et al. eq. 8: w[:, j, t] = i_j * prod_{k=j+1..t} f_k for j <= t, else 0.

    i, f: (B, T, H) -> w: (B, T_j, T_t, H), so that c_t = sum_j w[:, j, t] * ctilde_j when c_0 = 0.
    For the GRU pass i = z and f = 1 - z: the weights of its weighted average of htilde.
    """
    B, T, H = i.shape
    w = i.new_zeros(B, T, T, H)
    for j in range(T):
        w[:, j, j] = i[:, j]
        if j + 1 < T:
            w[:, j, j + 1 :] = i[:, j, None] * torch.cumprod(f[:, j + 1 :], dim=1)
    return w
