"""An activation viewer in the manner of Karpathy et al. (2016) Fig 2: text coloured by one cell's activation.

Each character's background is the cell's value after reading it (tanh(c) where the architecture has a memory
cell, h otherwise) on a diverging scale, -1 red, 0 white, +1 blue (the LSTMVis colours #ca0020 / #f7f7f7 /
#0571b0). Whitespace is visible (a space is a faint dot, a tab an arrow, a newline a return sign), so the state
on it can be read too. Characters where a binary feature is on are underlined.

`viewer_html(texts, series)` returns one self-contained HTML fragment: a selector for model, layer and cell,
the data embedded as JSON (every '<', '>' and '&' escaped, so corpus text cannot end the script), a small
inline script, and the first selection already rendered as static, escaped spans, so the fragment also reads
without scripts (a PDF). No external script, stylesheet or font. `standalone_page` wraps it in a page.

Command line (MODEL: a checkpoint, its folder or a model id, as for the other commands):

    python -m probes.view MODEL --split test --feature in_quotes --out view.html
    python -m probes.view MODEL --text FILE --start 250 --chars 2000 --cell 0:17 --out view.html

shows every cell of one layer (`--layer`, or the layer of `--cell`), the cell selector listing them ranked by
selectivity for `--feature` (as LSTMVis ranks cells against a selection), `--cell` first. The state is warmed up on
the `--warmup` characters before `--start`, and the feature's labels are counted from there too.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import corpora
from corpora import atomic
from corpora.errors import UserError, run_cli

NEGATIVE, MIDDLE, POSITIVE = (0xCA, 0x00, 0x20), (0xF7, 0xF7, 0xF7), (0x05, 0x71, 0xB0)
SHOWN = {10: "\u21b5\n", 13: "", 9: "\u2192\t", 32: "\u00b7"}  # newline, carriage return, tab, space


def colour(value: float) -> str:
    """'#rrggbb' of a value in [-1, 1] on the red-white-blue scale (clipped)."""
    v = float(np.clip(value, -1.0, 1.0)) if np.isfinite(value) else 0.0
    end = POSITIVE if v >= 0 else NEGATIVE
    a = abs(v)
    return "#" + "".join(f"{round(m + (e - m) * a):02x}" for m, e in zip(MIDDLE, end))


def display_chars(text: bytes) -> list[str]:
    """What to show for each byte: itself, visible whitespace, or for UTF-8 the whole character on its first
    byte (continuation bytes show nothing); undecodable bytes show U+FFFD."""
    out, t = [], 0
    while t < len(text):
        b = text[t]
        if b in SHOWN:
            out.append(SHOWN[b])
            t += 1
            continue
        if b < 0x80:
            out.append(chr(b) if 32 <= b < 127 else "\ufffd")
            t += 1
            continue
        width = 2 if b >> 5 == 0b110 else 3 if b >> 4 == 0b1110 else 4 if b >> 3 == 0b11110 else 1
        try:
            char = text[t : t + width].decode("utf-8")
        except UnicodeDecodeError:
            char, width = "\ufffd", 1
        out.append(char)
        out.extend([""] * (width - 1))
        t += width
    return out


_CSS = """
#ID .cv-controls{margin:.3em 0;font:inherit}
#ID .cv-controls label{margin-right:1em}
#ID .cv-text{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px;line-height:1.55;
  white-space:pre-wrap;word-break:break-all;tab-size:4;border:1px solid #ddd;padding:.5em;margin:0;color:#111}
#ID .cv-text span.ws{color:#8a8a8a}
#ID .cv-text span.on{text-decoration:underline;text-decoration-color:#333}
#ID .cv-legend{font-size:11px;color:#444}
#ID .cv-scale{display:inline-block;width:140px;height:10px;vertical-align:middle;margin:0 .4em;
  background:linear-gradient(to right,#ca0020,#f7f7f7,#0571b0)}
#ID .cv-status{font-size:11px;color:#444;min-height:1.3em}
@media print{#ID .cv-controls,#ID .cv-status{display:none}}
"""

_JS = """
(function () {
  var root = document.getElementById("ID");
  if (!root) { return; }
  var data = JSON.parse(root.querySelector("script.cv-data").textContent);
  var sel = {model: root.querySelector("select.cv-model"), layer: root.querySelector("select.cv-layer"),
             cell: root.querySelector("select.cv-cell")};
  var pre = root.querySelector(".cv-text"), status = root.querySelector(".cv-status");
  var title = root.querySelector(".cv-title");
  var NEG = [202, 0, 32], MID = [247, 247, 247], POS = [5, 113, 176];
  function colour(v) {
    v = Math.max(-1, Math.min(1, v)); var end = v >= 0 ? POS : NEG, a = Math.abs(v), s = "#";
    for (var k = 0; k < 3; k++) {
      var c = Math.round(MID[k] + (end[k] - MID[k]) * a);
      s += (c < 16 ? "0" : "") + c.toString(16);
    }
    return s;
  }
  function fill(select, values, labels) {
    var old = select.value; select.textContent = "";
    values.forEach(function (v, k) {
      var o = document.createElement("option"); o.value = String(v); o.textContent = labels[k]; select.appendChild(o);
    });
    if (values.map(String).indexOf(old) >= 0) { select.value = old; }
  }
  data.series.forEach(function (s) {  // values: base64 of int8, value x 127
    var raw = atob(s.values); s.decoded = new Int8Array(raw.length);
    for (var k = 0; k < raw.length; k++) { s.decoded[k] = raw.charCodeAt(k); }
  });
  function unique(xs) { return xs.filter(function (x, k) { return xs.indexOf(x) === k; }); }
  function layers() {
    return unique(data.series.filter(function (s) { return s.model === sel.model.value; })
      .map(function (s) { return s.layer; }));
  }
  function cells() {
    var out = [];
    data.series.forEach(function (s, k) {
      if (s.model === sel.model.value && String(s.layer) === sel.layer.value) { out.push(k); }
    });
    return out;
  }
  function render() {
    var s = data.series[Number(sel.cell.value)];
    if (!s) { return; }
    var text = data.texts[s.text];
    pre.textContent = "";
    var frag = document.createDocumentFragment();
    text.chars.forEach(function (ch, t) {
      var span = document.createElement("span");
      var shown = ch;
      if (ch.charAt(0) === "\\u21b5" || ch.charAt(0) === "\\u2192" || ch === "\\u00b7") { span.className = "ws"; }
      if (text.underline && text.underline[t]) { span.className += " on"; }
      span.style.backgroundColor = colour(s.decoded[t] / 127);
      span.textContent = shown;
      span.dataset.t = String(t);
      frag.appendChild(span);
    });
    pre.appendChild(frag);
    title.textContent = s.title;
  }
  pre.addEventListener("mouseover", function (e) {
    var t = e.target && e.target.dataset ? e.target.dataset.t : undefined;
    var s = data.series[Number(sel.cell.value)];
    if (t === undefined || !s) { return; }
    var text = data.texts[s.text];
    status.textContent = "character " + t + ": " + s.quantity + " = " + (s.decoded[Number(t)] / 127).toFixed(2) +
      (text.labels ? ", " + text.feature + " = " + text.labels[Number(t)] : "");
  });
  function onModel() {
    var ls = layers(); fill(sel.layer, ls, ls.map(function (l) { return "layer " + l; })); onLayer();
  }
  function onLayer() {
    var ks = cells(); fill(sel.cell, ks, ks.map(function (k) { return data.series[k].label; })); render();
  }
  sel.model.addEventListener("change", onModel);
  sel.layer.addEventListener("change", onLayer);
  sel.cell.addEventListener("change", render);
  fill(sel.model, data.models, data.models);
  onModel();
})();
"""


def _json_for_script(data) -> str:
    """JSON that cannot close its <script> element or open a comment: <, > and & as \\u escapes."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _static_spans(chars: list[str], values: np.ndarray, underline) -> str:
    parts = []
    for t, ch in enumerate(chars):
        classes = []
        if ch and ch[0] in "\u21b5\u2192\u00b7":
            classes.append("ws")
        if underline is not None and underline[t]:
            classes.append("on")
        cls = f' class="{" ".join(classes)}"' if classes else ""
        parts.append(f'<span{cls} style="background-color:{colour(values[t] / 127)}">{html.escape(ch)}</span>')
    return "".join(parts)


def viewer_html(texts: dict[str, dict], series: list[dict], heading: str = "") -> str:
    """One self-contained HTML fragment (a <div>) showing the series on their texts, with selectors.

    texts: {key: {"text": bytes, "feature": name or "", "labels": (T,) ints or None, "underline": bool}}.
    series: [{"model", "layer", "cell", "text" (a key of texts), "values" ((T,) in [-1, 1]), "quantity"
    (e.g. "tanh(c)"), "label" (the option shown), "title" (the line above the text)}]. All corpus text is
    escaped here; the markup may be inserted as is (Jinja: `{{ fragment|safe }}`).
    """
    if not series:
        raise ValueError("a viewer needs at least one series")
    data = {"texts": {}, "series": [], "models": []}
    static_values = []
    for key, t in texts.items():
        labels = None if t.get("labels") is None else [int(v) for v in np.asarray(t["labels"])]
        underline = [int(v > 0) for v in labels] if labels is not None and t.get("underline") else None
        data["texts"][key] = {"chars": display_chars(bytes(t["text"])), "feature": t.get("feature", ""),
                              "labels": labels, "underline": underline}  # fmt: skip
    for s in series:
        values = np.rint(np.clip(np.nan_to_num(np.asarray(s["values"], dtype=float)), -1, 1) * 127).astype(np.int8)
        if values.size != len(data["texts"][s["text"]]["chars"]):
            raise ValueError(f"series {s['label']!r} has {values.size} values for a text of a different length")
        static_values.append(values)
        data["series"].append({**{k: s[k] for k in ("model", "layer", "cell", "text", "quantity", "label", "title")},
                               "values": base64.b64encode(values.tobytes()).decode("ascii")})  # fmt: skip
        if s["model"] not in data["models"]:
            data["models"].append(s["model"])
    payload = _json_for_script(data)
    uid = "cells-viewer-" + hashlib.sha256(payload.encode()).hexdigest()[:10]
    first = data["series"][0]
    text = data["texts"][first["text"]]
    static = _static_spans(text["chars"], static_values[0], text["underline"])
    head = f'<p class="cv-heading">{html.escape(heading)}</p>' if heading else ""
    css, script = _CSS.replace("#ID", "#" + uid), _JS.replace('"ID"', json.dumps(uid))
    return (
        f'<div class="cells-viewer" id="{uid}">'
        f"<style>{css}</style>{head}"
        '<form class="cv-controls" onsubmit="return false">'
        '<label>model <select class="cv-model"></select></label>'
        '<label>layer <select class="cv-layer"></select></label>'
        '<label>cell <select class="cv-cell"></select></label></form>'
        f'<p class="cv-legend"><span class="cv-title">{html.escape(first["title"])}</span> &nbsp; '
        '-1<span class="cv-scale"></span>+1 &nbsp; underlined: the feature is on</p>'
        f'<pre class="cv-text">{static}</pre><p class="cv-status"></p>'
        f'<script type="application/json" class="cv-data">{payload}</script>'
        f"<script>{script}</script></div>"
    )


def standalone_page(fragment: str, title: str) -> str:
    """A complete offline HTML page around a viewer fragment."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em;max-width:70em}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{fragment}</body></html>\n"
    )


def strip_axes(ax, chars: list[str], values: np.ndarray, underline=None, width: int = 100, lines: int = 6) -> None:
    """Draw text coloured by values on a matplotlib axis (the static image of the viewer): one cell per byte, up to
    `width` per line and `lines` lines. The colours are one image; the glyphs stay out of the layout engine."""
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgb

    ax.set_axis_off()
    background = np.ones((lines, width, 3))
    glyphs, rules = [], []
    row, col = 0, 0
    for t, ch in enumerate(chars):
        if row >= lines:
            break
        if ch == "":
            continue
        background[row, col] = to_rgb(colour(values[t]))
        glyphs.append((col, row, ch.replace("\n", "").replace("\t", "")))
        if underline is not None and underline[t]:
            rules.append([(col + 0.1, row + 0.9), (col + 0.9, row + 0.9)])
        col += 1
        if ch.endswith("\n") or col >= width:
            row, col = row + 1, 0
    ax.imshow(background, extent=(0, width, lines, 0), aspect="auto", interpolation="nearest")
    for col, row, glyph in glyphs:
        faint = glyph in ("\u21b5", "\u2192", "\u00b7")
        text = ax.text(col + 0.5, row + 0.5, glyph, ha="center", va="center", family="monospace", fontsize=6.5,
                       color="#8a8a8a" if faint else "#111")  # fmt: skip
        text.set_in_layout(False)
    if rules:
        ax.add_collection(LineCollection(rules, colors="#333", linewidths=0.5))
    ax.set_xlim(0, width)
    ax.set_ylim(lines, 0)


# ------------------------------------------------------------------------------------------ command line


def _parse_cell(text: str) -> tuple[int, int]:
    try:
        layer, index = (int(part) for part in text.split(":"))
    except ValueError:
        raise UserError(f"--cell takes LAYER:INDEX (e.g. 0:17), got '{text}'") from None
    return layer, index


def trace_layer(model, ids: np.ndarray, start: int, chars: int, warmup: int, layer: int, internal: str | None = None):
    """Every cell of one layer after reading each of ids[start : start + chars], the state warmed up on the `warmup`
    ids before `start` (from zero at the first of them), as the viewer shows them: tanh(c) for a memory cell, the
    internal itself otherwise. `model` is anything `anymodel.load_recurrent` takes.

    Returns (raw (chars, H) float32, shown (chars, H), quantity, internal). Bad input is one UserError."""
    import torch

    from charlm import anymodel

    from .activations import cell_internal, shown

    net = anymodel.load_recurrent(model, "the viewer shows a recurrent model's cells").net
    if not 0 <= layer < net.config.layers:
        raise UserError(f"layer {layer} is out of range: the model has layers 0..{net.config.layers - 1}")
    ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    with torch.no_grad():
        state = None
        if warmup > 0:
            _, state = net.forward_with_state(ids[start - warmup : start][None])
        _, cache, _ = net.run_with_cache(ids[start : start + chars][None], state)
    names = sorted(k.rsplit(".", 1)[1] for k in cache if k.startswith(f"layers.{layer}."))
    internal = internal or cell_internal(names)
    if internal not in names:
        raise UserError(f"the {net.config.arch} has no internal '{internal}' (it has {', '.join(names)})")
    raw = cache[f"layers.{layer}.{internal}"][0].float().numpy()
    values, quantity = shown(raw, internal)
    return raw, values, quantity, internal


def rank_cells(raw: np.ndarray, feature, text: bytes, labels: np.ndarray, seed: int = 0) -> pd.DataFrame:
    """Every cell ranked by selectivity for a feature on the shown text, as LSTMVis ranks cells by how well they
    match a selection: each cell alone (a threshold, or least squares for a count; `single_cells.SingleCells`) on the
    feature's labels, minus the same on Hewitt and Liang's character control (one random label per byte). Fitted
    and scored on the shown text itself: a ranking for the eye, not a held-out finding (the `cells` analysis is).
    Columns cell, score, control, selectivity; best first."""
    from .controls import context_types, control_task
    from .single_cells import SingleCells

    T = raw.shape[0]
    fit_all = np.zeros(T, dtype=bool)
    single = SingleCells(raw, fit_all)
    task, _ = single.scores(labels, feature.kind)
    types = context_types(np.frombuffer(text, dtype=np.uint8), np.arange(T), 1)
    control_labels = control_task(types, labels, feature.kind, np.arange(T) >= T // 2, seed)
    control, _ = single.scores(control_labels, feature.kind)
    out = pd.DataFrame({"cell": np.arange(raw.shape[1]), "score": task, "control": control,
                        "selectivity": task - control})  # fmt: skip
    return out.sort_values(["selectivity", "cell"], ascending=[False, True], kind="stable").reset_index(drop=True)


def main(argv=None) -> int:
    from charlm import anymodel

    from .features import features_for, style_of, window_labels

    parser = argparse.ArgumentParser(prog="python -m probes.view", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a recurrent checkpoint .pt (any architecture), its folder, or a model id")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", type=Path, help="a text file to read (bytes of the model's vocabulary)")
    source.add_argument("--split", choices=corpora.SPLITS, help="a split of the corpus the model was trained on")
    parser.add_argument("--start", type=int, default=None, help="first character shown (default: the warm-up "
                        "length, when the text is longer than twice it, else 0)")  # fmt: skip
    parser.add_argument("--chars", type=int, default=5000, help="characters shown (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=250, help="characters read before --start, from a zero state, "
                        "to warm the state up (default %(default)s)")  # fmt: skip
    parser.add_argument("--layer", type=int, default=None, help="the layer shown, every cell of it (default 0)")
    parser.add_argument("--cell", default=None, help="LAYER:INDEX of the cell shown first, e.g. 0:17")
    parser.add_argument("--internal", default=None, help="internal to show (default: c where there is one, else h)")
    parser.add_argument("--feature", default=None, help="underline where this feature is on (e.g. in_quotes) and "
                        "rank the cells by selectivity for it")  # fmt: skip
    parser.add_argument("--out", type=Path, default=Path("view.html"), help="the HTML file to write")
    args = parser.parse_args(argv)

    if args.chars < 1 or args.warmup < 0 or (args.start is not None and args.start < 0):
        raise UserError("--chars must be positive, --warmup and --start non-negative")
    model = anymodel.load_recurrent(args.model, "the viewer shows a recurrent model's cells")
    if args.text is not None:
        if not args.text.is_file():
            raise UserError(f"text file {args.text} does not exist")
        text = args.text.read_bytes()
        if not text:
            raise UserError("the text is empty: give a file with at least one character")
        ids, _ = model.encode(text, what=f"text file {args.text}")
        name = args.text.name
    else:
        from charlm.predict import corpus_for

        corpus = corpus_for(model.net)
        ids, name = corpus.split(args.split), f"the {corpus.name} {args.split} split"
        text = corpus.decode(ids)
    start = args.start if args.start is not None else (args.warmup if len(text) > 2 * args.warmup else 0)
    if start >= len(text):
        raise UserError(f"--start {start:,} is past the end of the text ({len(text):,} characters)")
    chars, warmup = min(args.chars, len(text) - start), min(args.warmup, start)
    layer, first = (args.layer or 0, None) if args.cell is None else _parse_cell(args.cell)
    if args.layer is not None and args.cell is not None and args.layer != layer:
        raise UserError(f"--layer {args.layer} and --cell {args.cell} name different layers")
    raw, values, quantity, internal = trace_layer(model, ids, start, chars, warmup, layer, args.internal)
    H = raw.shape[1]
    if first is not None and not 0 <= first < H:
        raise UserError(f"cell {first} is out of range: layer {layer} has cells 0..{H - 1}")

    feature, labels, ranking = None, None, None
    if args.feature:
        (feature,) = features_for(style_of(str(model.meta.get("corpus") or ""), text), [args.feature])
        labels = window_labels(feature, text, [start], chars, warmup)[0][0]  # of the text the model read
        ranking = rank_cells(raw, feature, text[start : start + chars], labels)
    order = list(ranking["cell"]) if ranking is not None else list(range(H))
    if first is not None:
        order = [first] + [c for c in order if c != first]
    metric = {"binary": "bal. acc.", "count": "R^2"}
    series = []
    for cell in order:
        label, detail = f"cell {cell}", ""
        if ranking is not None:
            r = ranking.loc[ranking["cell"] == cell].iloc[0]
            label += f": selectivity {r['selectivity']:+.2f}"
            detail = (f"; {feature.name}: {metric[feature.kind]} {r['score']:.2f} alone, control {r['control']:.2f}, "
                      f"selectivity {r['selectivity']:+.2f}")  # fmt: skip
        series.append({"model": model.model_id, "layer": layer, "cell": int(cell), "text": "text",
                       "values": values[:, cell], "quantity": quantity, "label": label,
                       "title": f"{model.model_id}, layer {layer}, cell {cell}: {quantity}{detail}"})  # fmt: skip
    shown_text = text[start : start + chars]
    fragment = viewer_html(
        {"text": {"text": shown_text, "feature": feature.name if feature else "", "labels": labels,
                  "underline": bool(feature and feature.kind == "binary")}},
        series,
        heading=f"{model.model_id} ({model.description}), layer {layer}, all {H} cells"
        + (f", ranked by selectivity for {feature.name}" if feature else ""),
    )  # fmt: skip
    atomic.write_text(args.out, standalone_page(fragment, f"{model.model_id}, layer {layer}: {quantity}"))
    warmed = f"the state warmed up on the {warmup:,} before them" if warmup else "the state starting from zero"
    print(f"wrote {args.out}: {H} cells of layer {layer} on characters {start:,} to {start + chars:,} of {name}, "
          f"{warmed}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
