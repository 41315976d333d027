"""Export a recurrent model's hidden states on a text as an LSTMVis project (Strobelt et al., LSTMVis).

    python -m probes.export_lstmvis artifacts/warpeace/<model id>/checkpoint.pt --split test --chars 100000 \\
        --out lstmvis-data/warpeace-lstm

writes a folder LSTMVis's server loads (`python lstm_server.py -dir lstmvis-data`; it reads every
subfolder holding an `lstm.yml`):

    lstm.yml     name, description, files, word_sequence and states sections (LSTMVis README, "Config File")
    states.h5    states{l} (N, H) float32: the raw memory cell c of layer l (1-based, as LSTMVis counts)
                 output{l} (N, H) float32: the hidden state h of layer l
                 word_ids  (N,)   int32:   the vocabulary id of each character
    chars.dict   one "token id" line per vocabulary byte: the token is `charlm.score.byte_label` (newline
                 ⏎, tab ⇥, carriage return ␍, other control bytes their control picture, bytes >= 0x80 \\xNN;
                 space is the line that starts with a space, as LSTMVis's dictionary reader expects)

Alignment: row t of every dataset is the state *after* reading character t (word_ids[t]); the text is
read as one stream from a zero state at its start, so a slice from `--start` carries the state of
everything before it. Names follow LSTMVis's own extractor (model/get_states.lua: `states{l}` = cell,
`output{l}` = output). LSTMVis applies tanh to every state type by default: the yml leaves the raw c
to that default (as Karpathy et al. Fig 2 colour by tanh(c)) and marks h, already in (-1, 1),
`transform: none`.

Architectures without a memory cell (rnn, gru, lstm-gates) export h only (`output{l}`), and say so
on stdout and in the project's description. LSTMVis's fast search scans only the first 500,000
steps: export a slice of at most that many characters, or read the note the command prints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

import corpora
from charlm import anymodel
from charlm.score import LABELS
from corpora.errors import UserError, run_cli
from probes.activations import cell_internal

STATES_FILE = "states.h5"
DICT_FILE = "chars.dict"
CONFIG_FILE = "lstm.yml"
CHUNK = 4096  # characters traced per call, the state carried between calls
SEARCH_LIMIT = 500_000  # LSTMVis's fast search scans only this many steps
PURPOSE = "LSTMVis shows recurrent states"  # why an n-NN or n-gram is refused


def dictionary(vocab: np.ndarray) -> str:
    """LSTMVis's .dict: `token id` per line; the space token is the line starting with a space."""
    return "".join(f"{LABELS[int(b)]} {i}\n" for i, b in enumerate(vocab))


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def config_yaml(name: str, description: str, layers: int, has_cell: bool) -> str:
    types = []
    for l in range(1, layers + 1):
        if has_cell:
            types.append(f"    {{type: state, layer: {l}, path: states{l}}},  # raw c; LSTMVis shows tanh(c)")
        types.append(f"    {{type: output, layer: {l}, path: output{l}, transform: none}},  # h, already in (-1, 1)")
    return "\n".join(
        [
            f"name: {_q(name)}",
            f"description: {_q(description)}",
            "",
            "files:",
            f"  states: {STATES_FILE}",
            f"  words: {DICT_FILE}",
            "",
            "word_sequence:",
            "  file: states",
            "  path: word_ids",
            "  dict_file: words",
            "",
            "states:",
            "  file: states",
            "  types: [",
            *types,
            "  ]",
            "",
        ]
    )


@torch.no_grad()
def export_lstmvis(
    checkpoint, ids: np.ndarray, out: str | Path, start: int = 0, chars: int | None = None, text_name: str = "text",
    chunk: int = CHUNK,
) -> Path:  # fmt: skip
    """Write the LSTMVis project of `checkpoint` on ids[start : start + chars] into the folder `out`.

    `ids` are vocabulary ids of the whole text; the model reads it from its start (zero state), so row t of the
    export is the state after reading character start + t. The folder appears complete or not at all; an
    existing folder is replaced only if it is an earlier export (holds an lstm.yml).
    """
    model = anymodel.load_recurrent(checkpoint, PURPOSE)
    net = model.net
    ids = np.asarray(ids, dtype=np.int64)
    chars = ids.size - start if chars is None else chars
    if start < 0 or chars < 1 or start + chars > ids.size:
        raise UserError(f"{chars:,} characters from {start:,} do not fit a text of {ids.size:,} characters")
    out = Path(out)
    if out.exists() and not (out.is_dir() and (not any(out.iterdir()) or (out / CONFIG_FILE).is_file())):
        raise UserError(f"{out} exists and is not an earlier LSTMVis export (no {CONFIG_FILE}): choose another --out")
    c = net.config
    has_cell = cell_internal(net.layers[0].state_names) == "c"
    import h5py

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        work.chmod(0o755)
        state = None
        for lo in range(0, start, chunk):  # the text before the slice: state only
            _, state = net.forward_with_state(torch.from_numpy(ids[lo : min(lo + chunk, start)])[None], state)
        with h5py.File(work / STATES_FILE, "w") as f:
            f.create_dataset("word_ids", data=ids[start : start + chars].astype(np.int32))
            names = [("h", "output")] + ([("c", "states")] if has_cell else [])
            sets = {
                (l, internal): f.create_dataset(f"{prefix}{l + 1}", (chars, c.size), dtype="float32")
                for l in range(c.layers)
                for internal, prefix in names
            }
            for lo in range(start, start + chars, chunk):
                piece = torch.from_numpy(ids[lo : min(lo + chunk, start + chars)])[None]  # (1, k)
                _, cache, state = net.run_with_cache(piece, state)
                for (l, internal), dataset in sets.items():
                    dataset[lo - start : lo - start + piece.shape[1]] = (
                        cache[f"layers.{l}.{internal}"][0].float().numpy()
                    )
        (work / DICT_FILE).write_text(dictionary(model.vocab), encoding="utf-8")
        cell_note = (
            f"states1..{c.layers}: raw memory cell c, output1..{c.layers}: hidden state h"
            if has_cell
            else f"output1..{c.layers}: hidden state h only (the {c.arch} has no memory cell)"
        )
        description = (
            f"{model.model_id}: {c.arch}, {c.layers} layer(s) of {c.size}; {chars:,} characters of {text_name} from "
            f"{start:,}; {cell_note}; row t = state after reading character t"
        )
        (work / CONFIG_FILE).write_text(
            config_yaml(f"{model.model_id} on {text_name}", description, c.layers, has_cell), encoding="utf-8"
        )
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(work, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m probes.export_lstmvis",
        description="Export a recurrent model's memory cells and hidden states on a text as an LSTMVis project "
        "(lstm.yml, states.h5, chars.dict); row t = the state after reading character t.",
    )
    parser.add_argument("checkpoint", help="a recurrent checkpoint .pt (any architecture), its folder, or a model id")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", type=Path, help="a text file (read as bytes)")
    source.add_argument("--split", choices=corpora.SPLITS, help="a split of the corpus the model was trained on")
    parser.add_argument("--chars", type=int, default=100_000, help="characters to export (default %(default)s)")
    parser.add_argument("--start", type=int, default=0, help="first character exported; the state carries the text "
                        "before it (default %(default)s)")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="the project folder to write (e.g. <datadir>/<name>)")
    args = parser.parse_args(argv)
    if args.chars < 1 or args.start < 0:
        raise UserError(f"--chars must be positive and --start non-negative, got {args.chars} and {args.start}")
    model = anymodel.load_recurrent(args.checkpoint, PURPOSE)
    if args.text is not None:
        if not args.text.is_file():
            raise UserError(f"text file {args.text} does not exist")
        data = args.text.read_bytes()
        if not data:
            raise UserError(f"text file {args.text} is empty")
        ids, _ = model.encode(data, what=f"text file {args.text}")
        name = args.text.name
    else:
        from charlm.predict import corpus_for

        corpus = corpus_for(model.net)
        ids, name = corpus.split(args.split), f"the {corpus.name} {args.split} split"
    chars = min(args.chars, ids.size - args.start)
    if chars < 1:
        raise UserError(f"--start {args.start:,} is past the end of the text ({ids.size:,} characters)")
    out = export_lstmvis(model, ids, args.out, args.start, chars, name)
    print(f"wrote {out}: {chars:,} characters, {model.description}")
    if cell_internal(model.net.layers[0].state_names) != "c":
        c = model.net.config
        print(f"note: the {c.arch} has no memory cell: only its hidden state h is exported (output1..{c.layers})")
    if chars > SEARCH_LIMIT:
        print(f"note: LSTMVis's fast search scans only the first {SEARCH_LIMIT:,} steps of the {chars:,} exported")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
