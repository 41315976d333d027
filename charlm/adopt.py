"""Your own model (issue 37): adopt a character LM written without charlm, exactly, so every analysis runs on it.

    python -m charlm.adopt MODEL.pt --vocab VOCAB.json --corpus TEXT [--splits charrnn] [--score test]

MODEL.pt is `torch.save(model.state_dict())` of the ordinary PyTorch character LM: an `nn.Embedding` (or one-hot
input: the user feeds `F.one_hot`) -> one `nn.LSTM`, `nn.GRU` or `nn.RNN` (any depth, batch_first or not, with or
without biases) -> an `nn.Linear` head. The submodules may have any attribute names: the recurrent module is found
by its keys (`*weight_ih_l{k}`, `*weight_hh_l{k}`, `*bias_ih_l{k}`, `*bias_hh_l{k}`), its kind by its gate count
(`weight_hh_l0` has 4H rows: LSTM, 3H: GRU, H: RNN), the embedding by its shape (V, E), the head by (V, H) and its
optional bias (when both are (V, H) without bias: tied weights, the names, the ordinary order, else `--head KEY`).
A dict holding one state_dict (a training checkpoint) is read too; a whole pickled module only with
`--trust-pickle` (unpickling runs code). VOCAB.json is a list whose i-th entry is the character of class i, or a
{character: index} map.

The mapping is exact (tests/test_adopt.py: the adopted model's log-probabilities equal the user's forward within
1e-5 for every kind, depth, bias setting and input; every adoption also checks it on the corpus's first characters
and records the difference in the provenance):

    layers.0.rnn.weight_ih_l0 = W_ih @ E^T             the embedding folds into the first layer (one-hot ids pick a
                                                       column: W_ih E[id] = (W_ih E^T)[:, id]); one-hot: W_ih itself
    layers.l.rnn.*_l0         = the user's *_l{l}      the suite's rnn / gru / lstm layers are torch's own modules
                                                       (the suite's gru is torch's GRU form), two biases as they are;
                                                       a model without biases gets zeros
    head.weight, head.bias    = the head's, its rows in the suite's class order (no bias: zeros)

and every vocabulary axis is permuted from the user's class order to the suite's. batch_first only orders the
input's axes: it is irrelevant to the weights. nn.RNN's nonlinearity cannot be told from its weights: the suite's
S-RNN is tanh (nn.RNN's default), so an RNN is adopted as tanh, as its provenance says; a relu RNN would not be
reproduced. Hidden sizes must be equal across layers (the suite's ModelConfig has one size); a bidirectional or
projected (proj_size) LSTM is no causal character LM of this form. Weights become float32, the suite's dtype.

Bytes. The suite reads bytes: each vocabulary entry must be one character that is one byte in the encoding the
user's code read the corpus with (`--encoding`: utf-8, the default, allows ASCII; latin-1 maps U+0000..U+00FF to
bytes 0..255 one to one). A multi-byte UTF-8 character is an error that says so; every byte of the corpus must be
a class of the vocabulary (otherwise one line names the missing characters and their counts).

Characters of the vocabulary the corpus never uses. The suite's Predictions are log-probabilities over the corpus's
byte vocabulary, shared with the KenLM and n-NN baselines of that corpus. Dropping the extra classes would
renormalise the softmax and change every probability; extending the corpus's vocabulary would change its ids and
key and make the baselines spend probability on characters they never see. So the adopted model keeps every class
of the user's, ordered corpus-first: ids 0..V_c - 1 are the corpus's bytes in the suite's sorted order (the
corpus's own ids), then the extra characters in byte order. The corpus's ids are valid inputs as they are
(charlm.predict, the analyses' traces and `--score` read the corpus unchanged), every corpus character's
log-probability is exactly the user model's, and the first V_c columns of a distribution are the baselines'
columns; their sum is 1 - p(characters the corpus never uses), the probability the model really spends on them.
When the vocabulary is exactly the corpus's, the adopted model is an ordinary suite model in every respect.

Written under `artifacts/<corpus>/adopted-<arch>-L<layers>-H<size>-<hash>/` (the hash covers the model file's and
the vocabulary's sha256, the encoding and the corpus key): checkpoint.pt (loads with charlm.checkpoint) and
metrics.json ("kind": "adopted", complete, with the provenance). Atomically, and nothing at all on any error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

import corpora
from corpora import atomic
from corpora.errors import UserError, add_corpus_arguments, run_cli

from .adopt_files import ENCODINGS, char_name, read_state_dict, read_vocab
from .checkpoint import checkpoint_payload, file_sha256, save_payload
from .model import CharLM, ModelConfig, count_params
from .paths import config_hash, model_dir

GATES = {4: "lstm", 3: "gru", 1: "rnn"}  # rows of weight_hh per hidden unit -> the suite's architecture
TORCH_MODULES = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}
HEAD_NAMES = ("head", "decoder", "fc", "out", "proj", "logit", "linear", "classifier", "readout")  # name a head
EMBEDDING_NAMES = ("emb", "encoder", "tok", "wte", "lookup")  # ... and an embedding, by the attribute's name
CHECK_CHARS = 512  # corpus characters each adoption runs through both models to verify the mapping
CHECK_TOLERANCE = 1e-4  # nats: a larger difference is a bug of the mapping, never silently written
_RNN_KEY = re.compile(
    r"^(?P<prefix>(?:.*\.)?)(?P<name>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)_l(?P<layer>\d+)"
    r"(?P<reverse>_reverse)?$"
)


@dataclass(frozen=True)
class Layout:
    """What a user state_dict holds, inferred from its keys and shapes."""

    arch: str  # "lstm", "gru" or "rnn": from weight_hh_l0's rows per hidden unit (4, 3, 1)
    layers: int  # recurrent layers (weight_ih_l0 .. weight_ih_l{layers - 1})
    size: int  # H, every layer's hidden width
    input_size: int  # E, what the first layer reads: the embedding's width, or V for one-hot input
    vocab_size: int  # V, the head's outputs (the user's classes)
    rnn_prefix: str  # the recurrent module's key prefix, e.g. "rnn." ("" for a bare module)
    rnn_bias: bool  # whether the recurrent module has its biases (bias=True)
    embedding: str | None  # key of the embedding's (V, E) weight; None: one-hot input
    head_weight: str  # key of the head's (V, H) weight
    head_told_by: str  # what told the head from the embedding (its bias, its width, the names, the order, --head)
    head_bias: str | None  # key of the head's (V,) bias; None: a head without bias
    dtype: str  # the weights' dtype as saved


@dataclass(frozen=True)
class Adoption:
    """An adopted model, in memory and (once written) on disk."""

    model: CharLM  # the suite's model, `model.meta` as a loaded checkpoint's
    model_id: str  # adopted-<arch>-L<layers>-H<size>-<hash6>
    folder: Path  # where checkpoint.pt and metrics.json go
    corpus: corpora.Corpus  # what it was adopted for (its ids are the model's first ids)
    vocab: list[int]  # byte of each suite class: the corpus's bytes (sorted), then the extra characters (sorted)
    provenance: dict  # source file, hashes, inferred layout, key-by-key mapping, the check


# ------------------------------------------------------------------------------------------ the layout


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(map(str, t.shape)) + ")"


def infer_layout(state: dict[str, torch.Tensor], head: str | None = None) -> Layout:
    """The architecture and where each piece lives; a state_dict of another form is one UserError line naming
    the keys at fault and what was expected. `head` names the head's weight when nothing else tells it."""
    found = {k: m for k in state if (m := _RNN_KEY.match(k))}
    expected = (
        "an nn.LSTM, nn.GRU or nn.RNN (keys like 'rnn.weight_ih_l0', 'rnn.weight_hh_l0'), an optional "
        "nn.Embedding's weight (V, E) and an nn.Linear head's weight (V, H) with optional bias (V,)"
    )
    if not found:
        listing = ", ".join(list(state)[:8]) or "no keys"
        raise UserError(f"no recurrent weights found (the state_dict holds {listing}): expected {expected}")
    prefixes = sorted({m["prefix"] for m in found.values()})
    if len(prefixes) > 1:
        raise UserError(f"recurrent weights under {len(prefixes)} modules ({', '.join(p or '<root>' for p in prefixes)}"
                        "): the suite adopts one nn.LSTM, nn.GRU or nn.RNN of any depth")  # fmt: skip
    prefix = prefixes[0]
    reverse = [k for k, m in found.items() if m["reverse"]]
    if reverse:
        raise UserError(f"{reverse[0]}: a bidirectional module reads the future, so it is no causal character LM")
    if any(m["name"] == "weight_hr" for m in found.values()):
        raise UserError(f"{prefix}weight_hr_l0: an LSTM with proj_size has no counterpart in the suite's LSTM")
    layers = 1 + max(int(m["layer"]) for m in found.values())
    has_bias = any("bias" in m["name"] for m in found.values())
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if has_bias else ())
    missing = [f"{prefix}{n}_l{l}" for l in range(layers) for n in names if f"{prefix}{n}_l{l}" not in state]
    if missing:
        raise UserError(f"missing keys {', '.join(missing)}: a {layers}-layer recurrent module has "
                        f"{', '.join(names)} for every layer")  # fmt: skip
    wrong_rank = [f"{prefix}{n}_l{l} {_shape(state[f'{prefix}{n}_l{l}'])}" for l in range(layers) for n in names
                  if state[f"{prefix}{n}_l{l}"].dim() != (2 if n.startswith("weight") else 1)]  # fmt: skip
    if wrong_rank:
        raise UserError(f"{', '.join(wrong_rank)}: a recurrent module's weights are matrices, its biases vectors")
    w_hh = state[f"{prefix}weight_hh_l0"]
    if w_hh.shape[1] == 0 or w_hh.shape[0] % w_hh.shape[1] or w_hh.shape[0] // w_hh.shape[1] not in GATES:
        raise UserError(f"{prefix}weight_hh_l0 has shape {_shape(w_hh)}: expected (4H, H) for an LSTM, (3H, H) for a "
                        "GRU or (H, H) for an RNN")  # fmt: skip
    gates, H = w_hh.shape[0] // w_hh.shape[1], int(w_hh.shape[1])
    E = int(state[f"{prefix}weight_ih_l0"].shape[-1])
    sizes = [int(state[f"{prefix}weight_hh_l{l}"].shape[-1]) for l in range(layers)]
    if len(set(sizes)) > 1:
        raise UserError(f"hidden sizes differ across layers ({', '.join(map(str, sizes))}): the suite's ModelConfig has"
                        " one size for every layer")  # fmt: skip
    for l in range(layers):
        want = {"weight_ih": (gates * H, E if l == 0 else H), "weight_hh": (gates * H, H), "bias_ih": (gates * H,),
                "bias_hh": (gates * H,)}  # fmt: skip
        for n in names:
            t = state[f"{prefix}{n}_l{l}"]
            if tuple(t.shape) != want[n]:
                raise UserError(f"{prefix}{n}_l{l} has shape {_shape(t)}, expected ({', '.join(map(str, want[n]))}) "
                                f"for a {GATES[gates]} of hidden size {H}")  # fmt: skip
    rnn_keys = {f"{prefix}{n}_l{l}" for l in range(layers) for n in names}
    rest = [k for k in state if k not in rnn_keys]
    weights = [k for k in rest if state[k].dim() == 2]
    first_rnn = list(state).index(f"{prefix}weight_ih_l0")
    if head is not None and head not in weights:
        raise UserError(f"--head {head}: no such 2-D weight in the state_dict (2-D weights: {', '.join(weights)})")
    head, told = (head, "--head") if head else _find_head(state, weights, rest, H, E, first_rnn)
    bias = head[: -len("weight")] + "bias" if head.endswith("weight") else None
    bias = bias if bias in rest and state[bias].dim() == 1 else None
    embedding = next((k for k in weights if k != head), None)
    unexpected = [k for k in rest if k not in (head, bias, embedding)]
    if unexpected:
        listing = ", ".join(f"{k} {_shape(state[k])}" for k in unexpected)
        raise UserError(f"unexpected keys {listing}: expected only {expected}")
    V = int(state[head].shape[0])
    if state[head].shape[1] != H:
        raise UserError(f"the head {head} has shape {_shape(state[head])}: it must read the last layer's H = {H} "
                        f"outputs, expected ({V}, {H})")  # fmt: skip
    if bias is not None and state[bias].shape[0] != V:
        raise UserError(f"the head's bias {bias} has shape {_shape(state[bias])}, expected ({V},)")
    if embedding is not None and tuple(state[embedding].shape) != (V, E):
        raise UserError(f"the embedding {embedding} has shape {_shape(state[embedding])}: expected ({V}, {E}), one "
                        f"row per class of the head and the {E} inputs of {prefix}weight_ih_l0")  # fmt: skip
    if embedding is None and E != V:
        raise UserError(f"{prefix}weight_ih_l0 reads {E} inputs but no embedding was found: one-hot input needs one "
                        f"column per class of the head ({V})")  # fmt: skip
    floats = {str(t.dtype) for t in state.values()}
    if any(not t.is_floating_point() for t in state.values()):
        raise UserError(f"the state_dict holds non-float tensors ({', '.join(sorted(floats))})")
    dtype = floats.pop() if len(floats) == 1 else "mixed"
    return Layout(GATES[gates], layers, H, E, V, prefix, "bias_ih" in names, embedding, head, told, bias, dtype)


def _find_head(state: dict, weights: list[str], rest: list[str], H: int, E: int, first_rnn: int) -> tuple[str, str]:
    """The head among the 2-D weights and what told it: the only one; the one with a bias (an embedding has none);
    the one of width H against the embedding's E; tied weights (either way the same); the names (e.g. PyTorch's
    word_language_model calls its embedding `encoder` and its head `decoder`); the ordinary order (embedding before
    the recurrent module, head after it). Otherwise one line asks for --head."""
    if not weights:
        raise UserError(f"no output layer: expected an nn.Linear head's weight (V, H = {H}) beside the recurrent "
                        "module")  # fmt: skip
    if len(weights) == 1:
        return weights[0], "the only 2-D weight besides the recurrent module"
    if len(weights) > 2:
        listing = ", ".join(f"{k} {_shape(state[k])}" for k in weights)
        raise UserError(f"unexpected keys: {len(weights)} 2-D weights besides the recurrent module ({listing}); "
                        "expected an optional embedding (V, E) and a head (V, H)")  # fmt: skip
    with_bias = [k for k in weights if k.endswith("weight") and k[: -len("weight")] + "bias" in rest]
    if len(with_bias) == 1:
        return with_bias[0], "its bias"
    by_width = [k for k in weights if state[k].shape[1] == H]
    if E != H and len(by_width) == 1:
        return by_width[0], f"its width H = {H}"
    order = sorted(weights, key=list(state).index)
    if state[order[0]].shape == state[order[1]].shape and torch.equal(state[order[0]], state[order[1]]):
        return order[1], "tied weights (the embedding is the head's matrix)"
    name = lambda k: k.rsplit(".", 2)[-2].lower() if k.count(".") else ""
    hint = lambda k: any(w in name(k) for w in HEAD_NAMES) - any(w in name(k) for w in EMBEDDING_NAMES)
    if hint(order[0]) != hint(order[1]):
        return max(order, key=hint), "its name"
    if list(state).index(order[0]) < first_rnn < list(state).index(order[1]):
        return order[1], "the order: embedding, recurrent module, head"
    raise UserError(f"cannot tell the embedding from the head among {', '.join(weights)} (same shape, no bias): name "
                    "the head with --head KEY")  # fmt: skip


# ------------------------------------------------------------------------------------------ the mapping


def suite_order(user_bytes: list[int], corpus: corpora.Corpus) -> list[int]:
    """The adopted model's classes: the corpus's bytes in its own (sorted) order, then the vocabulary's characters
    the corpus never uses, in byte order. Every corpus byte must be a class (else one line naming them)."""
    counts = np.bincount(corpus.data, minlength=256)
    present = set(user_bytes)
    lacking = [int(b) for b in corpus.vocab if int(b) not in present]
    if lacking:
        listing = ", ".join(f"{char_name(b, 'utf-8')} (x{counts[b]:,})" for b in lacking[:10])
        more = f" and {len(lacking) - 10} more" if len(lacking) > 10 else ""
        wide = any(b >= 0x80 for b in lacking)
        pieces = (" (bytes >= 0x80: pieces of multi-byte UTF-8 characters; the suite reads bytes, so retrain on bytes "
                  "or read the corpus as latin-1 and pass --encoding latin-1)") if wide else ""  # fmt: skip
        if 0x0D in lacking:  # Python's text mode turns "\r\n" into "\n": the model never saw "\r"
            pieces += " ('\\r': your code read the corpus in text mode, which drops it; read with newline='')"
        raise UserError(f"corpus '{corpus.name}' has {len(lacking)} character{'s' if len(lacking) != 1 else ''} the "
                        f"vocabulary cannot encode: {listing}{more}{pieces}; the model must predict every character "
                        "of the corpus")  # fmt: skip
    corpus_bytes = [int(b) for b in corpus.vocab]
    return corpus_bytes + sorted(present - set(corpus_bytes))


def map_weights(state: dict, layout: Layout, perm: list[int]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The suite's state_dict (float32) and, per suite key, what it was made of. perm[j] is the user class of
    suite class j. Products in float64, then rounded once."""
    idx = torch.as_tensor(perm, dtype=torch.long)
    get = lambda k: state[k].detach().to(torch.float64)
    P, gH = layout.rnn_prefix, (4 if layout.arch == "lstm" else 3 if layout.arch == "gru" else 1) * layout.size
    out, how = {}, {}
    for l in range(layout.layers):
        suite = f"layers.{l}.rnn."
        w_ih, what = get(f"{P}weight_ih_l{l}"), f"{P}weight_ih_l{l}"
        if l == 0:
            if layout.embedding is not None:
                w_ih, what = w_ih @ get(layout.embedding).T, f"{what} @ {layout.embedding}^T (embedding folded in)"
            w_ih, what = w_ih[:, idx], f"{what}, columns in the suite's class order"
        out[suite + "weight_ih_l0"], how[suite + "weight_ih_l0"] = w_ih, what
        out[suite + "weight_hh_l0"], how[suite + "weight_hh_l0"] = get(f"{P}weight_hh_l{l}"), f"{P}weight_hh_l{l}"
        for b in ("bias_ih", "bias_hh"):
            key = f"{P}{b}_l{l}"
            out[suite + f"{b}_l0"] = get(key) if layout.rnn_bias else torch.zeros(gH, dtype=torch.float64)
            how[suite + f"{b}_l0"] = key if layout.rnn_bias else "zeros (the module has no biases)"
    out["head.weight"], how["head.weight"] = get(layout.head_weight)[idx], f"{layout.head_weight}, rows permuted"
    if layout.head_bias is not None:
        out["head.bias"], how["head.bias"] = get(layout.head_bias)[idx], f"{layout.head_bias}, permuted"
    else:
        out["head.bias"], how["head.bias"] = torch.zeros(len(perm), dtype=torch.float64), "zeros (the head has no bias)"
    return {k: v.to(torch.float32).contiguous() for k, v in out.items()}, how


@torch.no_grad()
def user_logprobs(state: dict, layout: Layout, user_ids: np.ndarray) -> torch.Tensor:
    """The user's model rebuilt from torch's own modules and its own weights, in its own class order: (T, V)
    log-probabilities of one stream from a zero state (an RNN as tanh). The check every adoption runs."""
    P, T = layout.rnn_prefix, torch.as_tensor(user_ids, dtype=torch.long)
    rnn = TORCH_MODULES[layout.arch](layout.input_size, layout.size, layout.layers, bias=layout.rnn_bias).double()
    rnn.load_state_dict({k[len(P) :]: v for k, v in state.items() if k.startswith(P) and _RNN_KEY.match(k)})
    x = state[layout.embedding].double()[T] if layout.embedding else nn.functional.one_hot(T, layout.vocab_size)
    out, _ = rnn(x.double()[:, None])  # (T, 1, H): time-major
    logits = out[:, 0] @ state[layout.head_weight].double().T
    if layout.head_bias is not None:
        logits = logits + state[layout.head_bias].double()
    return torch.log_softmax(logits, -1)


def adopt(model_path: str | Path, vocab_path: str | Path, corpus: corpora.Corpus, out: str | Path | None = None,
          trust_pickle: bool = False, encoding: str = "utf-8", head: str | None = None) -> Adoption:  # fmt: skip
    """Read, infer, map and check; nothing is written (see `write`). Bad input is one UserError line."""
    model_path, vocab_path = Path(model_path), Path(vocab_path)
    state, how_read = read_state_dict(model_path, trust_pickle)
    vocab = read_vocab(vocab_path, encoding)
    layout = infer_layout(state, head)
    if len(vocab.chars) != layout.vocab_size:
        raise UserError(
            f"vocabulary {vocab_path} has {len(vocab.chars)} characters but the model's head predicts "
            f"{layout.vocab_size} classes ({layout.head_weight} is {_shape(state[layout.head_weight])})"
        )
    order = suite_order(vocab.byte_values, corpus)
    user_index = {b: i for i, b in enumerate(vocab.byte_values)}
    perm = [user_index[b] for b in order]
    weights, mapping = map_weights(state, layout, perm)
    config = ModelConfig(layout.arch, layout.vocab_size, layout.layers, layout.size)
    model = CharLM(config)
    model.load_state_dict(weights)
    model.eval()
    source_sha = file_sha256(model_path)
    identity = {"source_sha256": source_sha, "vocab_sha256": vocab.sha256, "encoding": encoding,
                "corpus_key": corpus.key, "kind": "adopted"} | ({"head": head} if head else {})  # fmt: skip
    model_id = f"adopted-{layout.arch}-L{layout.layers}-H{layout.size}-{config_hash(identity)}"
    ids = corpus.ids[:CHECK_CHARS].astype(np.int64)
    with torch.no_grad():
        mine = torch.log_softmax(model(torch.as_tensor(ids)[None])[0].double(), -1)
    theirs = user_logprobs(state, layout, np.asarray(perm)[ids])[:, perm]
    gap = float((mine - theirs).abs().max())
    if not gap <= CHECK_TOLERANCE:
        raise UserError(f"the adopted model differs from {model_path} by {gap:.2e} nats on the corpus's first "
                        f"{ids.size} characters (a bug of charlm.adopt: please report it)")  # fmt: skip
    extra = order[corpus.vocab_size :]
    provenance = {
        "source": str(model_path.resolve()), "source_sha256": source_sha, **how_read,
        "vocab_file": str(vocab_path.resolve()), "vocab_sha256": vocab.sha256, "vocab_form": vocab.form,
        "encoding": encoding, "layout": asdict(layout),
        "architecture": f"{layout.arch}: weight_hh_l0 has {weights['layers.0.rnn.weight_hh_l0'].shape[0]} rows for "
        f"hidden size {layout.size}",
        "nonlinearity": "tanh (assumed: nn.RNN's relu cannot be told from the weights; the suite's S-RNN is tanh)"
        if layout.arch == "rnn" else None,
        "input": "embedding folded into the first layer" if layout.embedding else "one-hot (no embedding)",
        "rnn_biases": "present" if layout.rnn_bias else "absent: zeros",
        "head_bias": "present" if layout.head_bias else "absent: zeros",
        "batch_first": "irrelevant to the weights (it only orders the input's axes)",
        "mapping": mapping, "user_class_of_suite_class": perm,
        "class_order": "the corpus's bytes in sorted order (the corpus's own ids), then the vocabulary's characters "
        "the corpus never uses, in byte order",
        "corpus_classes": corpus.vocab_size, "extra_classes": [chr(b) for b in extra],
        "check": {"chars": int(ids.size), "max_abs_logp_diff": gap},
    }  # fmt: skip
    folder = Path(out) if out is not None else model_dir(corpus.artifact_name, model_id)
    model.meta = {"model_id": model_id, "vocab": order, "corpus_sha256": corpus.sha256, "config": config.to_dict(),
                  **_corpus_fields(corpus), "adopted": provenance}  # fmt: skip
    return Adoption(model, model_id, folder, corpus, order, provenance)


def _corpus_fields(corpus: corpora.Corpus) -> dict:
    return {"corpus": corpus.name, "corpus_source": corpus.source or corpus.name, "corpus_key": corpus.key,
            "corpus_splits": corpus.split_mode}  # fmt: skip


def score(adoption: Adoption, split: str = "test") -> tuple[float, float, int]:
    """Cross-entropy (nats per character), its bootstrap std and the positions, of a split of the adoption's corpus,
    read as the suite reads every split (charlm.predict.score_split: parallel warmed-up streams)."""
    from .predict import score_split
    from .predictions import bootstrap_mean

    target_logp, _ = score_split(adoption.model, adoption.corpus.split(split), positions=np.zeros(0, np.int64))
    mean, std = bootstrap_mean(-target_logp.astype(np.float64))
    return mean, std, int(target_logp.size)


def write(adoption: Adoption) -> Path:
    """checkpoint.pt, then metrics.json (the completion marker), each atomically; returns the folder."""
    folder, metrics_path = adoption.folder, adoption.folder / "metrics.json"
    if metrics_path.exists():
        try:
            previous = json.loads(metrics_path.read_text()).get("model_id")
        except (ValueError, AttributeError):
            previous = "an unreadable metrics.json"
        if previous != adoption.model_id:
            raise UserError(f"{folder} holds another model ({previous}); give another --out for {adoption.model_id}")
    m, corpus = adoption.model, adoption.corpus
    extra = {k: v for k, v in m.meta.items() if k not in ("vocab", "corpus_sha256", "config")}
    checkpoint = folder / "checkpoint.pt"
    existed = checkpoint.exists()
    save_payload(checkpoint, checkpoint_payload(m, adoption.vocab, corpus.sha256, **extra))
    metrics = {
        "model_id": adoption.model_id, "group_id": adoption.model_id, "kind": "adopted", **corpus.identity(),
        **_corpus_fields(corpus), "vocab": adoption.vocab, "model_config": m.config.to_dict(),
        "params": count_params(m.config), "checkpoint_sha256": file_sha256(checkpoint), "adopted": adoption.provenance,
        "complete": True,
    }  # fmt: skip
    try:
        atomic.write_json(metrics_path, metrics)
    except BaseException:
        if not existed:
            checkpoint.unlink(missing_ok=True)
        raise
    return folder


# ------------------------------------------------------------------------------------------ CLI


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.adopt",
        description="Adopt your own PyTorch character LM (nn.Embedding or one-hot input -> nn.LSTM / nn.GRU / "
        "nn.RNN, any depth -> nn.Linear) as a suite model, exactly: the weights are mapped onto charlm's model "
        "(embedding folded into the first layer, classes reordered to the suite's byte order, missing biases as "
        "zeros), checked against your model on the corpus, and written as artifacts/<corpus>/<model id>/ so that "
        "every analysis runs on it. nn.RNN is taken as tanh (relu cannot be told from the weights). The suite "
        "reads bytes: every vocabulary character must be one byte, and every corpus byte a class; characters the "
        "corpus never uses stay classes, after the corpus's, so every log-probability stays exactly yours.",
    )
    parser.add_argument("model", type=Path, help="torch.save(model.state_dict()) of your model (.pt)")
    parser.add_argument(
        "--vocab", type=Path, required=True,
        help="JSON: a list whose i-th entry is the character of class i, or a {character: index} map",
    )  # fmt: skip
    add_corpus_arguments(parser)
    parser.add_argument(
        "--encoding", default="utf-8", choices=ENCODINGS,
        help="how your code read the corpus into characters: utf-8 (default; then only ASCII characters are one "
        "byte) or latin-1 (each byte one character)",
    )  # fmt: skip
    parser.add_argument(
        "--score", choices=corpora.SPLITS, default=None,
        help="print the adopted model's cross-entropy on this split (nats per character, read as the suite reads "
        "every split: charlm.predict's warmed-up streams)",
    )  # fmt: skip
    parser.add_argument(
        "--trust-pickle", action="store_true",
        help="load a whole pickled module (torch.save(model)); unpickling runs code: only for files you trust",
    )  # fmt: skip
    parser.add_argument(
        "--head", default=None,
        help="state_dict key of the output layer's weight, when it cannot be told from the embedding (both "
        "(V, H), neither with a bias, in an unusual order)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="model folder (default artifacts/<corpus>/<model id>)")
    args = parser.parse_args(argv)
    corpus = corpora.load(args.corpus, split_mode=args.splits)
    adoption = adopt(args.model, args.vocab, corpus, args.out, args.trust_pickle, args.encoding, args.head)
    scored = score(adoption, args.score) if args.score else None  # before writing: an error leaves nothing behind
    folder = write(adoption)
    c, extra = adoption.model.config, adoption.provenance["extra_classes"]
    print(
        f"adopted {args.model} as {adoption.model_id} ({c.arch}, {c.layers} x {c.size}, {c.vocab_size} classes"
        f"{f', {len(extra)} the corpus never uses' if extra else ''}; max |log p difference| "
        f"{adoption.provenance['check']['max_abs_logp_diff']:.1e}{'; nn.RNN taken as tanh' if c.arch == 'rnn' else ''})"
        f" -> {folder}"
    )
    layout = adoption.provenance["layout"]
    if layout["head_told_by"].startswith(("its name", "the order")):  # weak evidence: say which, and how to overrule
        print(
            f"note: took {layout['head_weight']} as the head and {layout['embedding']} as the embedding (told by "
            f"{layout['head_told_by']}); if that is wrong, name the head with --head KEY",
            file=sys.stderr,
        )
    if scored:
        mean, std, n = scored
        print(
            f"{adoption.model_id}: {args.score} cross-entropy {mean:.6f} +- {std:.6f} nats/char = "
            f"{mean / np.log(2):.6f} bits/char ({n:,} positions)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
