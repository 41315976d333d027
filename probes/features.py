"""Per-character labels from raw text: what the interpretable cells of Karpathy et al. (2016) Fig 2 track.

One convention everywhere: the label of character t describes the state *after reading* character t, the
moment the model's state at row t (`ctx.trace`, `CharLM.trace`) has seen it. So an opening quote is already
inside the quote (1) and the closing quote is outside again (0); a newline is at position 0 of the next line.

War and Peace (prose):
    in_quotes       inside "double quotes"; a paragraph break closes an open quote, because English prose
                    reopens (and does not close) a quote that runs on into the next paragraph
    line_position   characters read since the last newline (the newline itself is 0)
    in_parens       inside (parentheses), nesting allowed; a paragraph break closes them
    word_position   1, 2, 3 ... along a word (letters, digits, apostrophes), 0 outside words
    sentence_start  the first letter of a sentence: an upper-case letter whose previous character, spaces,
                    newlines, quotes and opening parentheses skipped, is '.', '!' or '?'

Linux (C source), from one small lexer pass (code, // and /* */ comments, "strings", 'c' literals):
    in_comment      inside a comment: from its '*' (or second '/') to before its closing '/' (or newline)
    in_string       inside a string or character literal, escapes honoured; a newline ends an unterminated one
    brace_depth     depth of {} in code (comments and strings ignored), never below 0
    indent_level    leading whitespace of the current line read so far, in tab stops of 8 columns
    in_condition    inside the parentheses of an if / for / while (nested parentheses included)
    line_position   as for prose

Labels describe the text the model read. A probed window's state is warmed up from zero on the characters just
before it, so its labels come from the same place (`window_labels`): counted from where the model started reading,
not from the start of the split. Brace depth is the feature that cares: counted from the split's start instead, 24 %
of the brace-depth labels of the Linux test windows would count braces the model never read.

`focus` names, per feature, the positions whose *next-character prediction* needs the feature (where the
ablation analysis measures the language model's loss): inside the span for the span features, the character
before a line break for line_position, and so on (see each Feature).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from corpora.errors import UserError

PROSE, CODE = "prose", "c"
STYLES = {"warpeace": PROSE, "linux": CODE}  # the registered corpora; other texts are told apart by `text_style`


def _bytes(text: bytes | np.ndarray) -> np.ndarray:
    return np.frombuffer(bytes(text), dtype=np.uint8) if not isinstance(text, np.ndarray) else text.astype(np.uint8)


def _isin(a: np.ndarray, chars: bytes) -> np.ndarray:
    return np.isin(a, np.frombuffer(chars, dtype=np.uint8))


def _run_length(mask: np.ndarray) -> np.ndarray:
    """1, 2, 3 ... along each run of True, 0 where False."""
    idx = np.arange(mask.size)
    last_false = np.maximum.accumulate(np.where(mask, -1, idx))
    return np.where(mask, idx - last_false, 0)


# ------------------------------------------------------------------------------------------ both styles


def line_position(text: bytes) -> np.ndarray:
    """Characters read since the last newline; the newline itself is 0 (the first line counts from 1)."""
    a = _bytes(text)
    idx = np.arange(a.size)
    last_newline = np.maximum.accumulate(np.where(a == ord("\n"), idx, -1))
    return idx - last_newline


def _paragraph_breaks(a: np.ndarray) -> np.ndarray:
    """True at a newline that ends an empty line (\\n\\n or \\n\\r\\n): where a paragraph ends."""
    out = np.zeros(a.size, dtype=bool)
    nl = np.flatnonzero(a == ord("\n"))
    if nl.size > 1:
        gap = np.diff(nl)
        between_is_cr = np.array([gap[k] == 2 and a[nl[k] + 1] == ord("\r") for k in range(gap.size)], dtype=bool)
        out[nl[1:][(gap == 1) | between_is_cr]] = True
    return out


# ------------------------------------------------------------------------------------------ prose


def in_quotes(text: bytes) -> np.ndarray:
    """1 inside double quotes (opening quote included, closing quote excluded); a paragraph break closes."""
    a = _bytes(text)
    breaks = _paragraph_breaks(a)
    out = np.zeros(a.size, dtype=np.int64)
    inside = False
    for t, (c, brk) in enumerate(zip(a.tolist(), breaks.tolist())):
        if brk:
            inside = False
        elif c == 34:  # "
            inside = not inside
        out[t] = inside
    return out


def in_parens(text: bytes) -> np.ndarray:
    """1 inside parentheses (the '(' included, its matching ')' excluded); a paragraph break closes them."""
    a = _bytes(text)
    breaks = _paragraph_breaks(a)
    out = np.zeros(a.size, dtype=np.int64)
    depth = 0
    for t, (c, brk) in enumerate(zip(a.tolist(), breaks.tolist())):
        if brk:
            depth = 0
        elif c == 40:  # (
            depth += 1
        elif c == 41 and depth:  # )
            depth -= 1
        out[t] = depth > 0
    return out


_WORD = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'"


def word_position(text: bytes) -> np.ndarray:
    """1, 2, 3 ... for the characters of a word (letters, digits, apostrophes); 0 for everything else."""
    return _run_length(_isin(_bytes(text), _WORD))


def sentence_start(text: bytes) -> np.ndarray:
    """1 at the first letter of a sentence: an upper-case letter after '.', '!' or '?' (skipping spaces,
    newlines, quotes and opening parentheses)."""
    a = _bytes(text)
    idx = np.arange(a.size)
    skipped = _isin(a, b" \t\r\n\"'(")
    last_kept = np.maximum.accumulate(np.where(skipped, -1, idx))  # last character not skipped, up to t
    before = np.concatenate([[-1], last_kept[:-1]])  # ... strictly before t
    ends = _isin(a, b".!?")
    upper = (a >= ord("A")) & (a <= ord("Z"))
    return (upper & (before >= 0) & ends[np.maximum(before, 0)]).astype(np.int64)


# ------------------------------------------------------------------------------------------ C source

_CONDITION_KEYWORDS = {"if", "for", "while"}
_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@lru_cache(maxsize=2)  # four features read the same pass over the same text
def lex_c(text: bytes) -> dict[str, np.ndarray]:
    """One pass of a small C lexer: per character (state after reading it) in_comment, in_string, brace_depth,
    in_condition. Robust to starting mid-file: a newline ends a string or character literal, braces reset the
    parenthesis stack, depth never goes below 0."""
    a = _bytes(text).tolist()
    n = len(a)
    comment = np.zeros(n, dtype=np.int64)
    string = np.zeros(n, dtype=np.int64)
    depth_out = np.zeros(n, dtype=np.int64)
    condition = np.zeros(n, dtype=np.int64)
    state, prev, escaped, depth = "code", None, False, 0
    parens: list[bool] = []  # per open '(': does it open an if / for / while condition
    word, last_token = [], ""  # identifier being read; the last code token (identifier or punctuation)
    for t, c in enumerate(a):
        if state == "code":
            if c in _IDENT:
                word.append(c)
            else:
                if word:
                    last_token, word = bytes(word).decode("ascii", "replace"), []
                if c == 42 and prev == 47:  # '/*'
                    state, c = "block_comment", None  # this '*' cannot also close the comment
                elif c == 47 and prev == 47:  # '//'
                    state, c = "line_comment", None
                elif c == 34:
                    state = "string"
                elif c == 39:
                    state = "char"
                elif c == 123:  # {
                    depth, parens = depth + 1, []
                elif c == 125:  # }
                    depth, parens = max(depth - 1, 0), []
                elif c == 40:  # (
                    parens.append(last_token in _CONDITION_KEYWORDS)
                elif c == 41 and parens:  # )
                    parens.pop()
                if c is not None and c not in (32, 9, 10, 13):
                    last_token = chr(c)
        elif state == "line_comment":
            if c == 10:
                state = "code"
        elif state == "block_comment":
            if c == 47 and prev == 42:  # '*/'
                state, c = "code", None  # this '/' cannot also open a comment
        else:  # string or char literal
            if escaped:
                escaped = False
            elif c == 92:  # backslash
                escaped = True
            elif c == (34 if state == "string" else 39) or c == 10:
                state = "code"
        prev = c
        comment[t] = state in ("line_comment", "block_comment")
        string[t] = state in ("string", "char")
        depth_out[t] = depth
        condition[t] = any(parens)
    return {"in_comment": comment, "in_string": string, "brace_depth": depth_out, "in_condition": condition}


def indent_level(text: bytes, tab: int = 8) -> np.ndarray:
    """Leading whitespace of the current line read so far, in tab stops (tab = next multiple of 8 columns)."""
    a = _bytes(text).tolist()
    out = np.zeros(len(a), dtype=np.int64)
    columns, leading = 0, True
    for t, c in enumerate(a):
        if c == 10:
            columns, leading = 0, True
        elif leading and c == 9:
            columns = (columns // tab + 1) * tab
        elif leading and c == 32:
            columns += 1
        elif leading and c != 13:
            leading = False
        out[t] = columns // tab
    return out


def in_comment(text: bytes) -> np.ndarray:
    return lex_c(bytes(text))["in_comment"].copy()


def in_string(text: bytes) -> np.ndarray:
    return lex_c(bytes(text))["in_string"].copy()


def brace_depth(text: bytes) -> np.ndarray:
    return lex_c(bytes(text))["brace_depth"].copy()


def in_condition(text: bytes) -> np.ndarray:
    return lex_c(bytes(text))["in_condition"].copy()


# ------------------------------------------------------------------------------------------ focus positions


def _next(mask: np.ndarray) -> np.ndarray:
    """mask shifted one step back: True at t where mask[t + 1] is True (the last position has no next)."""
    return np.concatenate([mask[1:], [False]])


def _before_line_break(a: np.ndarray, labels: np.ndarray) -> np.ndarray:
    breaking = _isin(a, b"\r\n")
    return _next(breaking) & ~breaking  # the prediction that ends the line (\r of \r\n, or \n)


def _word_end(a: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return (labels > 0) & _next(labels == 0)


def _before_sentence(a: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return _next(labels > 0)


def _before_closing_brace(a: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return _next(a == ord("}"))


def _in_indentation(a: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A newline or the leading whitespace after it: the predictions that decide how far a line is indented."""
    idx = np.arange(a.size)
    last_other = np.maximum.accumulate(np.where(_isin(a, b"\t \r"), -1, idx))  # last non-blank, up to t
    return (last_other >= 0) & (a[np.maximum(last_other, 0)] == ord("\n"))


def _inside(a: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return labels > 0


# ------------------------------------------------------------------------------------------ the registry


@dataclass(frozen=True)
class Feature:
    name: str
    style: str  # PROSE or CODE: the texts it is defined on
    kind: str  # "binary" (logistic probe, balanced accuracy) or "count" (ridge probe, R^2)
    description: str
    paper_cell: str  # what Karpathy et al. Fig 2 shows for it ("" if nothing)
    label: Callable[[bytes], np.ndarray]
    focus: Callable[[np.ndarray, np.ndarray], np.ndarray]  # (bytes, labels) -> positions whose prediction needs it
    focus_description: str

    def labels(self, text: bytes) -> np.ndarray:
        """(T,) int64: the label of every character (state after reading it)."""
        return np.asarray(self.label(text), dtype=np.int64)

    def focus_positions(self, text: bytes, labels: np.ndarray | None = None) -> np.ndarray:
        """(T,) bool: positions t whose prediction of character t + 1 needs this feature."""
        labels = self.labels(text) if labels is None else labels
        return np.asarray(self.focus(_bytes(text), labels), dtype=bool)


FEATURES: dict[tuple[str, str], Feature] = {
    (f.style, f.name): f
    for f in (
        Feature("in_quotes", PROSE, "binary", "inside double quotes", "a cell that turns on inside quotes",
                in_quotes, _inside, "characters inside quotes"),
        Feature("line_position", PROSE, "count", "position in the line", "a line-length counter cell",
                line_position, _before_line_break, "the character before each line break"),
        Feature("in_parens", PROSE, "binary", "inside parentheses", "", in_parens, _inside,
                "characters inside parentheses"),
        Feature("word_position", PROSE, "count", "position in the word", "", word_position, _word_end,
                "the last character of each word"),
        Feature("sentence_start", PROSE, "binary", "first letter of a sentence", "", sentence_start,
                _before_sentence, "the character before a sentence's first letter"),
        Feature("in_comment", CODE, "binary", "inside a comment", "a cell on inside comments and quotes",
                in_comment, _inside, "characters inside comments"),
        Feature("in_string", CODE, "binary", "inside a string or character literal",
                "a cell on inside comments and quotes", in_string, _inside, "characters inside literals"),
        Feature("brace_depth", CODE, "count", "depth of { } nesting", "a cell sensitive to the depth of an "
                "expression", brace_depth, _before_closing_brace, "the character before each '}'"),
        Feature("indent_level", CODE, "count", "indentation level (tab stops)", "a cell whose strength grows "
                "with the indentation of a block", indent_level, _in_indentation, "newlines and leading "
                "whitespace"),
        Feature("in_condition", CODE, "binary", "inside the parentheses of if / for / while",
                "a cell that activates inside if statements' parentheses", in_condition, _inside,
                "characters inside the condition"),
        Feature("line_position", CODE, "count", "position in the line", "", line_position, _before_line_break,
                "the character before each line break"),
    )
}  # fmt: skip


def window_labels(feature: Feature, text: bytes, starts, length: int, warmup: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels and focus positions, each (W, length), of windows text[start : start + length] computed on the text the
    model read for each: from `warmup` characters before the window, where its state starts from zero."""
    starts = np.asarray(starts, dtype=np.int64)
    if (starts < warmup).any():
        raise ValueError(f"a window starts before its {warmup} characters of warm-up")
    labels, focus = [], []
    for start in starts.tolist():
        read = bytes(text[start - warmup : start + length])
        y = feature.labels(read)
        labels.append(y[warmup:])
        focus.append(feature.focus_positions(read, y)[warmup:])
    return np.stack(labels), np.stack(focus)


def text_style(text: bytes) -> str:
    """PROSE or CODE for a text that is not a registered corpus: C if braces and semicolons are common."""
    a = _bytes(text)
    if a.size == 0:
        return PROSE
    per_char = lambda ch: float(np.count_nonzero(a == ord(ch))) / a.size
    return CODE if per_char(";") > 0.005 and per_char("{") > 0.002 else PROSE


def style_of(corpus_name: str, text: bytes) -> str:
    return STYLES.get(corpus_name) or text_style(text)


def check_names(names) -> None:
    """Every name is a known feature (of some text style), else one clear UserError."""
    known = sorted({name for _, name in FEATURES})
    for name in names or ():
        if name not in known:
            raise UserError(f"unknown feature '{name}': choose one of {', '.join(known)}")


def features_for(style: str, names: list[str] | tuple[str, ...] | None = None) -> list[Feature]:
    """The features of a text style (all, or those named, in that order); unknown or inapplicable names are one
    clear UserError."""
    available = [f for (s, _), f in FEATURES.items() if s == style]
    if names is None:
        return available
    by_name = {f.name: f for f in available}
    check_names(names)
    out = []
    for name in names:
        if name not in by_name:
            raise UserError(f"feature '{name}' does not apply to {style} text (its features: {', '.join(by_name)})")
        out.append(by_name[name])
    return out
