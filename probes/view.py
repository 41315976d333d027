"""An activation viewer in the manner of Karpathy et al. (2016) Fig 2: text coloured by one cell's activation.

Each character's background is the cell's value after reading it (tanh(c) where the architecture has a memory
cell, h otherwise) on a diverging scale, -1 red, 0 white, +1 blue (the LSTMVis colours #ca0020 / #f7f7f7 /
#0571b0). Whitespace is visible (a space is a faint dot, a tab an arrow, a newline a return sign), so the state
on it can be read too. Characters where a binary feature is on are underlined.

`viewer_html(texts, series)` returns one self-contained HTML fragment: a selector for model, layer and cell,
the data embedded as JSON (every '<', '>' and '&' escaped, so corpus text cannot end the script), a small
inline script, and the first selection already rendered as static, escaped spans, so the fragment also reads
without scripts (a PDF). No external script, stylesheet or font. `standalone_page` wraps it in a page.

Command line:

    python -m probes.view CHECKPOINT --text FILE --cell LAYER:INDEX --out view.html [--feature NAME]
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


def trace_text(model, text: bytes, layer: int, index: int, internal: str | None = None) -> tuple[np.ndarray, str]:
    """One cell's values after reading each byte of text (from a zero state), as the viewer shows them:
    tanh(c) for a memory cell, the internal itself otherwise. `model` is a CharLM or anything `anymodel.load`
    takes. Bad input is one UserError."""
    import torch

    from charlm import anymodel

    from .activations import cell_internal, shown

    if not text:
        raise UserError("the text is empty: give a file with at least one character")
    wrapped = anymodel.load_recurrent(model, "the viewer shows a recurrent model's cells")
    model = wrapped.net
    ids, _ = wrapped.encode(text)
    if not 0 <= layer < model.config.layers:
        raise UserError(f"layer {layer} is out of range: the model has layers 0..{model.config.layers - 1}")
    if not 0 <= index < model.config.size:
        raise UserError(f"cell {index} is out of range: layer {layer} has cells 0..{model.config.size - 1}")
    with torch.no_grad():
        cache = model.trace(torch.from_numpy(ids)[None])
    names = sorted(k.rsplit(".", 1)[1] for k in cache if k.startswith(f"layers.{layer}."))
    internal = internal or cell_internal(names)
    if internal not in names:
        raise UserError(f"the {model.config.arch} has no internal '{internal}' (it has {', '.join(names)})")
    return shown(cache[f"layers.{layer}.{internal}"][0, :, index].float().numpy(), internal)


def main(argv=None) -> int:
    from charlm.checkpoint import load_checkpoint

    from .features import features_for, style_of

    parser = argparse.ArgumentParser(prog="python -m probes.view", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a charlm checkpoint.pt")
    parser.add_argument("--text", type=Path, required=True, help="the text file to read (bytes of the vocabulary)")
    parser.add_argument("--cell", required=True, help="LAYER:INDEX of the cell to show, e.g. 0:17")
    parser.add_argument("--internal", default=None, help="internal to show (default: c where there is one, else h)")
    parser.add_argument("--feature", default=None, help="underline where this feature is on (e.g. in_quotes)")
    parser.add_argument("--max-chars", type=int, default=5000, help="show at most this many characters")
    parser.add_argument("--out", type=Path, default=Path("view.html"), help="the HTML file to write")
    args = parser.parse_args(argv)

    model = load_checkpoint(args.checkpoint)
    if not args.text.is_file():
        raise UserError(f"text file {args.text} does not exist")
    text = args.text.read_bytes()
    if args.max_chars < 1:
        raise UserError("--max-chars must be positive")
    if len(text) > args.max_chars:
        print(f"showing the first {args.max_chars:,} of {len(text):,} characters")
        text = text[: args.max_chars]
    layer, index = _parse_cell(args.cell)
    feature = None
    if args.feature:
        corpus = str(model.meta.get("corpus") or "")
        (feature,) = features_for(style_of(corpus, text), [args.feature])
    values, quantity = trace_text(model, text, layer, index, args.internal)
    labels = feature.labels(text) if feature else None
    name = str(model.meta.get("model_id") or args.checkpoint.parent.name)
    title = f"{name}, layer {layer}, cell {index}: {quantity}"
    fragment = viewer_html(
        {"text": {"text": text, "feature": feature.name if feature else "", "labels": labels,
                  "underline": bool(feature and feature.kind == "binary")}},
        [{"model": name, "layer": layer, "cell": index, "text": "text", "values": values, "quantity": quantity,
          "label": f"cell {index}", "title": title}],
    )  # fmt: skip
    atomic.write_text(args.out, standalone_page(fragment, title))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
