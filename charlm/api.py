"""A notebook API for any model of the suite (issue 37): score, sample, and read every internal, by name.

    from charlm import api                        # or: import charlm; charlm.api
    m = api.load("lstm-L1-H128-s0-14c291")        # a model id (trained, adopted, or shipped), a folder or a .pt
    m.score("some text").cross_entropy            # nats per character; .logp: each character's log-probability
    m.sample(200, prime="The ", temperature=1.0, seed=0)
    logits, cache = m.run_with_cache("some text") # cache["layers.0.f"], cache["layers.0.c"], ...: (T, H) arrays
    m = api.adopt("my_lstm.pt", "vocab.json", "my_corpus.txt")   # your own model (charlm.adopt), then as above

Thin by design: loading is charlm.anymodel's (checkpoint files, model folders, ids under the artifacts root; an id
found nowhere there is looked up among the shipped models of `models/`), scoring is charlm.score's (`score_text`:
row t scores character t + 1, so the first character is context only; long texts are read as charlm.predict's
parallel warmed-up streams, within 1e-3 nats of one stream, or `streams=1`), sampling is charlm.sample's
(char-rnn's temperature, priming and seeds), and the internals are the model's own `run_with_cache`: the
hand-written cells, named as the suite's traces name them, `layers.{l}.{name}` (an LSTM's i, f, o, ctilde, c, h;
a GRU's r, z, htilde, h with z the papers' weight on the candidate; an S-RNN's h; see charlm.model).

Text is bytes to the suite: a str is encoded with the model's `encoding` (UTF-8 unless loaded otherwise, e.g.
"latin-1" for a model adopted with --encoding latin-1); bytes pass as they are. A byte outside the model's
vocabulary is one UserError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from corpora.errors import UserError

from . import anymodel
from .model import CharLM


class Cache(dict):
    """{'layers.{l}.{name}': (T, H) float32 array}; a name that is not there says which are."""

    def __missing__(self, key):
        raise KeyError(f"{key!r} is not in the cache; it holds {', '.join(self)}")


@dataclass(frozen=True, eq=False)
class Score:
    """What a model makes of a text (the first character is context only)."""

    cross_entropy: float  # mean nats per scored character
    logp: np.ndarray  # (T,) float64 log-probability of each scored character given all before it, in nats
    chars: bytes  # the T scored characters (bytes): chars[t] is scored by logp[t]
    detail: object = field(repr=False)  # charlm.score.TextScores: full rows, ranks, .table(), .predictions

    @property
    def bits_per_char(self) -> float:
        return self.cross_entropy / np.log(2.0)


@dataclass(eq=False)
class Model:
    """One model of the suite in a notebook (see the module docstring)."""

    model: anymodel.AnyModel  # the suite's interface: vocab, encode, logprobs, stepper (charlm.anymodel)
    encoding: str = "utf-8"  # how str arguments become bytes

    def __repr__(self) -> str:
        return f"Model({self.model_id}: {self.model.description}, {self.model.vocab_size} bytes)"

    @property
    def model_id(self) -> str:
        return self.model.model_id

    @property
    def net(self) -> CharLM:
        """The recurrent network itself (charlm.model.CharLM); other models have none."""
        if not self.model.kind.recurrent:
            raise UserError(f"{self.model_id} is not a recurrent model ({self.model.description}): it has no network")
        return self.model.net

    @property
    def vocab(self) -> bytes:
        """Column j of logits and distributions is the byte vocab[j]."""
        return self.model.vocab.tobytes()

    @property
    def labels(self) -> list[str]:
        """A readable label per column (newline as ⏎, tab as ⇥, bytes >= 0x80 as \\xNN): charlm.score.byte_label."""
        from .score import LABELS

        return [LABELS[b] for b in self.model.vocab]

    def _bytes(self, text: str | bytes) -> bytes:
        return text.encode(self.encoding) if isinstance(text, str) else bytes(text)

    def encode(self, text: str | bytes) -> np.ndarray:
        """(N,) vocabulary ids of the text (a byte outside the vocabulary is one UserError naming it)."""
        return self.model.encode(self._bytes(text))[0]

    def decode(self, ids) -> str:
        return self.model.decode(ids).decode(self.encoding, errors="replace")

    def score(self, text: str | bytes, streams: int | None = None, context: str | bytes = "") -> Score:
        """Cross-entropy of the text in nats per character, and each character's log-probability (charlm.score). The
        model reads the text from a zero state, as it met one once an epoch in training: on a short text the first
        characters weigh, a minGRU's most (the `samples` section measures it; docs/architectures.md). `context`:
        text it reads first, unscored (then every character of `text` is scored, its first too)."""
        from .score import score_text

        scores = score_text(self.model, self._bytes(text), streams=streams, context=self._bytes(context))
        logp = scores.logp
        return Score(float(-logp.mean()), logp, scores.chars.tobytes(), scores)

    def sample(self, length: int, prime: str | bytes = "", temperature: float = 1.0, seed: int | None = 0,
               raw: bool = False) -> str | bytes:  # fmt: skip
        """`length` characters sampled after `prime` (not included), as char-rnn samples (charlm.sample): T = 0 is
        the argmax, the same seed the same text. A str decoded with `encoding` (a cut multi-byte character is
        replaced), or the bytes with `raw=True`. The model reads the prime from a zero state: a few hundred characters
        of real text put it where its test numbers measure it (a minGRU primed with a few characters writes one byte
        over and over; charlm.sample)."""
        from .sample import sample

        out = sample(self.model, length, temperature, self._bytes(prime), seed)
        return out if raw else out.decode(self.encoding, errors="replace")

    @torch.no_grad()
    def run_with_cache(self, text: str | bytes) -> tuple[np.ndarray, Cache]:
        """The text read as one stream from a zero state by the hand-written cells: logits (T, V) (row t predicts
        the character after text[t]; column j is byte vocab[j]) and every intermediate, (T, H) each."""
        ids = self.encode(text)
        if ids.size == 0:
            raise UserError("the text is empty: there is nothing to run")
        logits, cache, _ = self.net.run_with_cache(torch.as_tensor(ids, dtype=torch.long)[None])
        return logits[0].float().numpy(), Cache((k, v[0].float().numpy()) for k, v in cache.items())


def load(spec: str | Path | CharLM | anymodel.AnyModel, encoding: str = "utf-8") -> Model:
    """Any model of the suite by model id, model folder or checkpoint file (or an already loaded one).

    An id is looked up under the artifacts root first (trained, installed and adopted models), then among the
    shipped ones (charlm.anymodel). Bad input is one UserError line."""
    return Model(anymodel.load(spec), encoding)


def adopt(model: str | Path, vocab: str | Path, corpus: str, splits: str = "contiguous", encoding: str = "utf-8",
          trust_pickle: bool = False, out: str | Path | None = None, head: str | None = None) -> Model:  # fmt: skip
    """Adopt your own PyTorch character LM (charlm.adopt: exact, checked, written to the artifacts) and load it."""
    import corpora

    from . import adopt as adoption

    found = adoption.adopt(model, vocab, corpora.load(corpus, split_mode=splits), out, trust_pickle, encoding, head)
    return load(adoption.write(found), encoding)
