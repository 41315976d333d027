"""KenLM character (n+1)-grams with modified Kneser-Ney: the n-gram baseline of Karpathy et al. (2016) sec 4.3.

"n-gram: an unpruned (n+1)-gram language model using modified Kneser-Ney smoothing", trained with
KenLM, for n = 1..9 and 20 (Table 2). n is the number of previous characters the model sees.

    python -m charlm.ngram --corpus warpeace --n 20 --split test

Every byte is one token named `x{byte:02x}` (never `<s>`, `</s>` or `<unk>`), spaces, newlines and
carriage returns included. The train split is ONE continuous stream, written as a single line, so
no n-gram is cut at a line end. `lmplz -o {n+1} --discount_fallback` (a character vocabulary has no
singleton unigrams, so the modified-KN discounts of low orders cannot be estimated from
counts-of-counts) writes the ARPA (gigabytes for the 21-gram) into a pipe, never to disk. For the whole model
(`build`, `--build-only`, `--whole`) `build_binary` reads that pipe as it comes (`/dev/stdin`). To score one split
(the report's test Predictions) the ARPA is cut as it comes to the n-grams scoring that split can read
(charlm.arpa_filter: the same numbers at every position, tested bit for bit), and only that goes to
`build_binary`: parsing the whole 21-gram's ARPA was most of its build. Probing below n = 10 (TRIE_FROM): scoring
full distributions costs up to 87 lookups per position, and probing is KenLM's fastest query structure; from n = 10
the trie, about 3x smaller, keeps a cold report's artifacts under 3 GB; both store the same probabilities unquantised.

Scoring walks a split as one stream with KenLM's State API, from the null context, with no
sentence resets, and asks for the log-probability of every vocabulary byte at every position,
normalised over the vocabulary (the mass KenLM gives `</s>` is dropped; a byte absent from the
train split scores as `<unk>`). Distributions are cached by KenLM's State: the state after a
history is the longest suffix of the last n tokens that the model holds as a context, and the
distribution depends on nothing else, so it is an exact and coarser key than the raw last n tokens
(many 20-character contexts never occurred in training and share a short state).

Artifacts: `artifacts/<corpus>/ngram-n{n}-{hash}/` with `model.probing`, `metrics.json`
("complete": true once built), `lmplz.log`, and `predictions/model/<split>.npz` (see predictions.py).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import corpora
from corpora import atomic
from corpora.errors import UserError, add_corpus_arguments, parse_int_list, run_cli

from . import predictions
from .kenlm_tools import (
    SORT_BLOCK,
    default_memory,
    find_tool,
    import_kenlm,
    lmplz_cut_into_binary,
    lmplz_into_binary,
    max_order,
    order_error,
)
from .paths import complete_metrics, config_hash, model_dir, predictions_path
from .predict import as_corpus, cached_predictions, say_to_stderr

LN10 = math.log(10.0)
STRUCTURE = "probing"  # KenLM's fastest query structure, for every order below TRIE_FROM
TRIE_FROM = 10  # n at and above which the binary is KenLM's trie: the same probabilities unquantised (tests check the
# 20-gram's Predictions are equal bit for bit) in 46 % of the disk (War and Peace 21-gram: 332 MB against 715 MB), so a
# cold report stays under 3 GB of artifacts; it scores 10 % slower and builds in 67 s instead of 38 s (2026-11-26, the
# whole model; cut to the test split, as the report builds it, its trie is 25 MiB, binarised in 2.2 s of a 34 s build)
BINARY_NAME = f"model.{STRUCTURE}"
# Everything that changes the model's probabilities goes into its hash; memory and temp dirs do not.
KENLM_SETTINGS = {
    "format": 1,
    "tokens": "x%02x per byte, train split as one line",
    "lmplz": ["--discount_fallback"],  # interpolate_unigrams at lmplz's default
    "structure": STRUCTURE,
}


def structure(n: int) -> str:
    """The binary structure of the (n+1)-gram: probing, or the trie for the large orders (TRIE_FROM)."""
    return "trie" if n >= TRIE_FROM else STRUCTURE


def kenlm_settings(n: int) -> dict:
    return {**KENLM_SETTINGS, "structure": structure(n)}


def binary_name(n: int) -> str:
    return f"model.{structure(n)}"


def binary_path(folder: Path) -> Path:
    """The binary of a built n-gram folder (its structure follows its order, recorded in its metrics)."""
    metrics = _read_metrics(folder) or {}
    n = metrics.get("n")
    if n is None:
        match = re.match(r"ngram-n(\d+)-", Path(folder).name)
        n = int(match.group(1)) if match else 0
    return Path(folder) / binary_name(int(n))


# ----------------------------------------------------------------------------- tools


def _check_n(n: int) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
        raise UserError(f"n must be a positive integer (the number of previous characters), got {n!r}")
    order = int(n) + 1
    limit = max_order()
    if order > limit:
        raise order_error(order, limit)
    return order


# ----------------------------------------------------------------------------- build


def token_names(vocab: np.ndarray) -> list[str]:
    """One KenLM word per vocabulary byte; `x` + two hex digits never clashes with <s>, </s>, <unk>."""
    return [f"x{int(b):02x}" for b in vocab]


def model_id(corpus: corpora.Corpus, n: int) -> str:
    digest = config_hash({"kind": "ngram", "n": int(n), "corpus_sha256": corpus.key, "kenlm": kenlm_settings(n)})
    return f"ngram-n{n}-{digest}"


def model_folder(corpus: corpora.Corpus, n: int) -> Path:
    return model_dir(corpus.artifact_name, model_id(corpus, n))


def source_digest(folder: Path, model_bytes: int) -> str:
    """What an n-gram's Predictions are keyed by (it has no checkpoint file to hash): its id and its binary's size."""
    return f"{Path(folder).name}:{model_bytes}"


def _read_metrics(folder: Path) -> dict | None:
    return complete_metrics(folder / "metrics.json")


def covers(metrics: dict | None) -> str | None:
    """What text a built model scores exactly: None for any text (the whole model), else the split it was cut to."""
    return None if metrics is None else metrics.get("cut_to")


def damage(folder: Path, split: str | None = None) -> str | None:
    """None if the model in `folder` is complete and whole; else what is wrong ("not built" when absent).

    The binary's size is checked against the one recorded at build time: an interrupted copy leaves a
    shorter file, which KenLM would otherwise read as garbage or refuse with an obscure error. A model cut to one
    split (charlm.arpa_filter) is "not built" for any other text: `split` None asks for the whole model.
    """
    metrics = _read_metrics(folder)
    if metrics is None:
        return "not built"
    binary = binary_path(folder)
    if not binary.is_file():
        return f"{binary} is missing"
    if binary.stat().st_size != metrics.get("model_bytes"):
        return f"{binary} is damaged ({binary.stat().st_size:,} bytes, {metrics.get('model_bytes'):,} when built)"
    cut = covers(metrics)
    if cut is not None and cut != split:
        return "not built"
    return None


def build(
    corpus: str | corpora.Corpus,
    n: int,
    progress: bool = True,
    memory: str | None = None,
    repair: bool = True,
    split: str | None = None,
) -> Path:
    """Build (or find cached) the (n+1)-gram of a corpus's train split; returns its artifact folder.

    `split` None: the whole model, which scores any text. `split` "test" (what the report asks): the whole model if
    it is built, else the model cut to the n-grams scoring that split can read (charlm.arpa_filter): the same
    probabilities at every position of it, built in a fraction of the time (War and Peace's 21-gram: see
    `cut_ngrams` in its metrics). Asking a cut model for the whole one (or another split) rebuilds it whole.
    A damaged model is rebuilt and said so with `repair`; without it, named in one CorruptArtifact line.
    """
    order = _check_n(n)
    corpus = as_corpus(corpus)
    final = model_folder(corpus, n)
    problem = damage(final, split)
    if problem is None:
        return final
    cut_to = covers(_read_metrics(final))
    if split is not None and cut_to not in (None, split):
        split = None  # cut to another split: what serves both is the whole model
        if progress:
            print(f"{final.name}: cut to the {cut_to} split: building it whole", file=sys.stderr)
    if problem != "not built":
        if not repair:
            raise predictions.CorruptArtifact(final / binary_name(n), problem.split("(", 1)[-1].rstrip(")"))
        print(f"{final.name}: {problem}: rebuilding it", file=sys.stderr, flush=True)
    lmplz, build_binary = find_tool("lmplz"), find_tool("build_binary")
    train = corpus.split("train")
    if train.size < 2:
        raise UserError(f"the train split of '{corpus.name}' has {train.size} characters; an n-gram needs at least 2")
    names = np.array(token_names(corpus.vocab))
    memory = memory or os.environ.get("CHARLM_KENLM_MEMORY") or default_memory(int(train.size), order)

    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        work.chmod(0o755)  # mkdtemp makes it private; the finished folder is an ordinary artifact
        text, binary, log = work / "train.txt", work / binary_name(n), work / "lmplz.log"
        sort_tmp = work / "sort"
        sort_tmp.mkdir()
        with open(text, "w", encoding="ascii") as f:  # one line: the whole train split as one stream
            f.write(" ".join(names[train].tolist()))
            f.write("\n")
        if progress:
            print(
                f"{final.name}: lmplz -o {order} on {train.size:,} train characters of '{corpus.name}' (-S "
                f"{memory}) into build_binary {structure(n)} ...",
                file=sys.stderr,
                flush=True,
            )
        lmplz_cmd = [str(lmplz), "-o", str(order), "--discount_fallback", "-S", memory, "--sort_block", SORT_BLOCK,
                     "-T", str(sort_tmp) + "/",
                     "--vocab_estimate", "4096", "--text", str(text)]  # fmt: skip
        cut: dict = {}
        if split is None:
            binary_cmd = [str(build_binary), structure(n), "/dev/stdin", str(binary)]
            lmplz_s, binary_s, arpa_bytes, counts = lmplz_into_binary(lmplz_cmd, binary_cmd, log, order, final)
        else:
            binary_cmd = [str(build_binary), structure(n), str(work / "cut.arpa"), str(binary)]
            text_bytes = np.asarray(corpus.vocab)[corpus.split(split)]
            lmplz_s, binary_s, arpa_bytes, counts, kept = lmplz_cut_into_binary(
                lmplz_cmd, binary_cmd, log, order, final, text_bytes
            )
            cut = {"cut_to": split, "cut_ngrams": kept}
        text.unlink()
        shutil.rmtree(sort_tmp, ignore_errors=True)
        metrics = {
            "model_id": final.name,
            "kind": "ngram",
            "group_id": final.name.rsplit("-", 1)[-1],
            **corpus.identity(),
            "n": int(n),
            "order": order,
            "kenlm": kenlm_settings(n),
            "lmplz_memory": memory,
            "vocab": [int(b) for b in corpus.vocab],
            "train_tokens": int(train.size),
            "ngram_counts": counts,
            "lmplz_seconds": round(lmplz_s, 3),  # build_binary reads its ARPA as it comes: they overlap
            "build_binary_seconds": round(binary_s, 3),  # after lmplz finished
            "build_seconds": round(lmplz_s + binary_s, 3),
            "arpa_bytes": arpa_bytes,  # of the whole model, as lmplz wrote it
            **cut,  # a model cut to one split: which, and the n-grams per order it kept
            "model_bytes": binary.stat().st_size,
            "complete": True,
        }
        atomic.write_json(work / "metrics.json", metrics)
        if final.exists():  # an incomplete leftover (a crash after the rename cannot leave one: metrics come with it)
            shutil.rmtree(final)
        os.replace(work, final)
        for stale in final.parent.glob(f"{final.name}.*.log"):  # a failed attempt's kept log: built now
            stale.unlink()
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    if progress:
        what = f"cut to the {split} split ({sum(cut['cut_ngrams']):,} of {sum(counts):,} n-grams)" if cut else "whole"
        print(
            f"{final.name}: {metrics['model_bytes'] / 2**20:,.0f} MiB {structure(n)} binary, {what}, built in "
            f"{metrics['build_seconds']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return final


# ----------------------------------------------------------------------------- scoring


def load_model(folder: str | Path):
    """The KenLM model of a built folder; a model above the module's compiled order is one UserError line."""
    kenlm = import_kenlm()
    path = binary_path(Path(folder))
    if not path.is_file():
        raise UserError(f"n-gram model {path} does not exist: build it with `python -m charlm.ngram`")
    try:
        return kenlm.Model(str(path))
    except (OSError, RuntimeError) as err:
        message = " ".join(str(err).split())
        match = re.search(r"has order (\d+) but KenLM was compiled to support up to (\d+)", message)
        if match:
            raise order_error(int(match.group(1)), int(match.group(2))) from None
        raise UserError(f"cannot load n-gram model {path}: {message[:300]}") from None


def score_stream(
    model, ids: np.ndarray, names: list[str], positions: np.ndarray | None = None, progress: bool = False,
    desc: str = "",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:  # fmt: skip
    """Read `ids` as one stream from KenLM's null context; no sentence boundaries anywhere.

    Returns target_logp (n - 1,) float64, the normalised natural-log probability of ids[t + 1] given ids[:t + 1];
    rows (R, V) float32, the normalised distribution at each of `positions` (every position when None);
    raw10 (n - 1,) KenLM's own log10 score of each true next token (before normalisation); and stats.

    Normalising over the byte vocabulary needs the sum Z of p(v | state) over its bytes. KenLM's distribution
    over its own vocabulary (the bytes seen in training, <unk> and </s>) sums to one, and every byte the train
    split lacks scores as <unk>, so Z = 1 - p(</s>) + (k - 1) p(<unk>) with k such bytes: two lookups per state
    instead of V (tests check it against the full sum). Full rows, where asked for, are normalised by their sum.
    """
    kenlm = import_kenlm()
    ids = np.asarray(ids)
    if ids.size < 2:
        raise UserError(f"a split of {ids.size} characters has no position to predict")
    State, base_score = kenlm.State, model.BaseScore
    words = list(names)
    V, T = len(words), ids.size - 1
    unknown = sum(1 for w in words if w not in model)  # vocabulary bytes absent from the train split: each is <unk>
    row_of = np.arange(T) if positions is None else np.full(T, -1)
    if positions is not None:
        row_of[np.asarray(positions, dtype=np.int64)] = np.arange(len(positions))
    rows = np.empty((T if positions is None else len(positions), V), dtype=np.float32)
    seq = ids.tolist()
    target_logp = np.empty(T, dtype=np.float64)
    raw10 = np.empty(T, dtype=np.float64)
    log_z: dict = {}  # KenLM State -> ln Z (see above)
    row_cache: dict = {}  # KenLM State -> normalised row, for the positions that keep rows
    scratch = State()
    state = State()
    model.NullContextWrite(state)
    nxt = State()
    base_score(state, words[seq[0]], nxt)  # the first character is context only
    state = nxt
    start = time.perf_counter()
    bar = tqdm(total=T, unit="pos", unit_scale=True, desc=desc or "score", disable=not progress, dynamic_ncols=True,
               mininterval=1.0)  # fmt: skip
    step = 10_000
    for t in range(T):
        lz = log_z.get(state)
        if lz is None:
            eos = 10.0 ** base_score(state, "</s>", scratch)
            unk = 10.0 ** base_score(state, "<unk>", scratch)
            lz = log_z[state] = math.log(1.0 - eos + (unknown - 1) * unk)
        if row_of[t] >= 0:
            row = row_cache.get(state)
            if row is None:
                row10 = np.array([base_score(state, w, scratch) for w in words], dtype=np.float64)
                full = row10 * LN10
                top = full.max()
                row = row_cache[state] = (full - (top + math.log(np.exp(full - top).sum()))).astype(np.float32)
            rows[row_of[t]] = row
        nxt = State()
        raw10[t] = base_score(state, words[seq[t + 1]], nxt)
        target_logp[t] = raw10[t] * LN10 - lz
        state = nxt
        if progress and (t + 1) % step == 0:
            bar.update(step)
            bar.set_postfix(states=len(log_z), refresh=False)
    bar.update(T - bar.n)
    bar.close()
    seconds = time.perf_counter() - start
    stats = {
        "positions": T,
        "rows": int(rows.shape[0]),
        "seconds": round(seconds, 3),
        "positions_per_s": T / seconds if seconds > 0 else float("inf"),
        "distinct_states": len(log_z),
        "basescore_calls": 2 * len(log_z) + len(row_cache) * V + T,
    }
    return target_logp, rows, raw10, stats


def predict(
    corpus: str | corpora.Corpus,
    n: int,
    split: str = "test",
    progress: bool = True,
    memory: str | None = None,
    repair: bool = True,
    full: bool = False,
    whole: bool = False,
) -> Path:
    """Predictions of one split (building the model if missing); returns the .npz path (cached).

    The model is cut to what scoring the split reads unless `whole` (or the whole model is built already).
    The probability of every true next character is exact at every position; full distributions are kept at
    `predictions.sample_positions` (what t-SNE, argmax agreement and KL read), or at every position with `full`.
    `repair`: a damaged predictions file or model is rebuilt (and said so); without it, named in a UserError.
    """
    corpus = as_corpus(corpus)
    ids = corpus.split(split)
    folder = build(corpus, n, progress=progress, memory=memory, repair=repair, split=None if whole else split)
    out = predictions_path(folder, split, "model")
    digest = source_digest(folder, _read_metrics(folder)["model_bytes"])
    if cached_predictions(out, digest, need_complete=full, repair=repair, say=say_to_stderr) is not None:
        return out
    try:
        model = load_model(folder)
    except UserError as err:
        if not repair:
            raise
        print(f"{err}: rebuilding the model", file=sys.stderr, flush=True)
        shutil.rmtree(folder)
        return predict(corpus, n, split, progress, memory, repair=False, full=full, whole=whole)
    positions = None if full else predictions.sample_positions(ids.size - 1)
    target_logp, rows, _, stats = score_stream(
        model, ids, token_names(corpus.vocab), positions, progress=progress, desc=f"{folder.name} {split}"
    )
    predictions.save(out, predictions.from_parts(target_logp, ids[1:], rows, positions, folder.name, digest))
    metrics = _read_metrics(folder) or {}
    metrics.setdefault("scoring", {})[split] = {
        k: (round(v, 1) if isinstance(v, float) else v) for k, v in stats.items()
    }
    atomic.write_json(folder / "metrics.json", metrics)
    return out


# ----------------------------------------------------------------------------- CLI


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.ngram",
        description="Build KenLM character (n+1)-grams (modified Kneser-Ney), "
        "score a split with full distributions, and print its cross-entropy (Karpathy et al. 2016, Table 2).",
    )
    add_corpus_arguments(parser)
    parser.add_argument(
        "--n", required=True, help="previous characters seen (the model is an (n+1)-gram); several as 1,2,3"
    )
    parser.add_argument("--split", default="test", choices=corpora.SPLITS, help="split to score (default %(default)s)")
    parser.add_argument(
        "--memory",
        default=None,
        help="lmplz -S sorting memory, e.g. 2G or 30%% (default: sized to the corpus, at most 30%% of RAM)",
    )
    parser.add_argument("--build-only", action="store_true", help="build the whole models and stop")
    parser.add_argument(
        "--whole", action="store_true",
        help="build the whole model even to score one split (by default a model not built yet is cut to the n-grams "
        "scoring the split reads: the same numbers, built several times faster; a later use on other text rebuilds "
        "it whole)",
    )  # fmt: skip
    parser.add_argument(
        "--full", action="store_true",
        help="keep the distribution of every position (default: the fixed sample of 20,000 the analyses read; "
        "the true character's probability is kept at every position either way)",
    )  # fmt: skip
    parser.add_argument(
        "--resamples", type=int, default=100, help="bootstrap resamples for the std (default %(default)s)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    args = parser.parse_args(argv)
    ns = parse_int_list(args.n, "--n")
    for n in ns:
        _check_n(n)
    corpus = corpora.load(args.corpus, split_mode=args.splits)
    for n in ns:
        if args.build_only:
            folder = build(corpus, n, progress=not args.quiet, memory=args.memory)
            m = _read_metrics(folder)
            print(
                f"{folder.name}: built in {m['build_seconds']:.1f} s (lmplz {m['lmplz_seconds']:.1f} s), "
                f"{m['model_bytes'] / 2**20:,.1f} MiB -> {folder}"
            )
            continue
        path = predict(
            corpus, n, args.split, progress=not args.quiet, memory=args.memory, full=args.full, whole=args.whole
        )
        preds = predictions.load(path)
        print(f"{preds.model_id}: {preds.summary(args.split, args.resamples)} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
