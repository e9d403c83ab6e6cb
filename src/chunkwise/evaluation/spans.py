"""Character-span retrieval metrics: recall, precision, IoU and precision_Omega.

These are the token-level metrics of Chroma's technical report *Evaluating Chunking
Strategies for Retrieval* (Smith & Troynikov, 2024), computed on **characters**: every span
is a half-open ``(start, end)`` pair of Python string offsets into ONE document (the
question's corpus), with ``0 <= start <= end``. ``|S|`` below is the number of characters
of a set of positions, ``U(spans)`` the union of the spans' positions, and ``len(s)`` is
``end - start``.

Two modes
---------
``mode="chroma"``
    Reproduces the report's reference implementation exactly (``chunking_evaluation``,
    ``evaluation_framework/base_evaluation.py``: ``BaseEvaluation._scores_from_dataset_and_retrievals``
    and ``BaseEvaluation._full_precision_score``, with the helpers of ``evaluation_utils.py``).
    The numerator is a union, but the denominators are plain sums, so a character that lies in
    two retrieved chunks (overlapping chunkers, or the same chunk twice) or in two overlapping
    references is counted twice there.
``mode="union"`` (default)
    The set-based version: no character is ever counted twice (unions of the retrieved spans
    and of the references throughout).

With retrieved chunks ``c_1..c_k`` from the question's corpus, references ``r_1..r_m``, and
``O = other_corpus_chars`` (see below), both modes share the numerator

    N = |U(c) ∩ U(r)|       (characters of the references that some retrieved chunk covers)

and differ in the denominators::

    chroma:
        recall    = N / sum_j len(r_j)
        precision = N / (sum_i len(c_i) + O)
        IoU       = N / (sum_i len(c_i) + O + sum_j |r_j minus U(c)|)
    union:
        recall    = N / |U(r)|
        precision = N / (|U(c)| + O)
        IoU       = N / (|U(c) ∪ U(r)| + O)

In chroma mode ``sum_j |r_j minus U(c)|`` is what the reference code keeps as "unused highlights":
each reference minus everything retrieved, again summed per reference. Consequences: with
overlapping references chroma recall stays below 1 even when everything is retrieved (and
chroma IoU can then exceed chroma recall); with overlapping or repeated retrieved chunks chroma
precision and IoU are lower than union mode's.
When neither the retrieved chunks nor the references overlap each other, the modes agree.

Chunks from other corpora
-------------------------
The report's retriever searches one index holding every corpus, so some of the ``k`` retrieved
chunks can come from another document. They can never contain a reference character, so they
only enter the precision and IoU denominators: ``O = other_corpus_chars`` is added once to
each (the formulas above). In chroma mode the reference code adds the plain sum of their lengths
(``precision_denominator`` sums every retrieved chunk, whatever its corpus), so pass
``sum(len(c))``. In union mode pass the number of *distinct* other-corpus characters (the
union per other document, summed over documents) -- :func:`score_questions` computes ``O``
that way for each mode from the retrieved triples.

precision_Omega
---------------
The best precision a chunking allows: retrieve exactly the chunks ``T`` that touch a reference.

* chroma (``_full_precision_score``): a chunk touches a reference when
  ``max(c.start, r.start) <= min(c.end, r.end)``, i.e. it overlaps **or merely abuts** it
  (a chunk ending exactly where a reference starts counts), and the score is an
  intersection over union of sets::

      precision_Omega = |U(T) ∩ U(r)| / |U(T) ∪ U(r)|

  (the reference parts no chunk covers are in the denominator; overlapping touching chunks
  are *not* double counted here, unlike chroma precision). It is 0 when no chunk touches.
  So it is not chroma precision of retrieving ``T``: with overlapping chunks or uncovered
  reference characters the two differ.
* union: a chunk touches a reference when they share at least one character
  (``max(starts) < min(ends)``), and ``precision_Omega = |U(T) ∩ U(r)| / |U(T)|``, exactly
  ``span_scores(T, references, mode="union").precision``.

Where a chunk is scored
-----------------------
All of the above takes chunk spans as given. :func:`place_spans` produces them from chunks:
``placement="exact"`` keeps each chunk's true offsets; ``"report"`` does what the report's code
does (it keeps no offsets and searches each chunk's text in the corpus: one trailing ``.``
dropped, first occurrence), so a chunk cut from a repeated passage is scored at the passage's
first copy.

Averages
--------
The report averages each metric over questions and gives the **population** standard
deviation (``np.mean`` and ``np.std`` with the default ``ddof=0``, in ``BaseEvaluation.run``);
:func:`summarize` does the same, overall and per corpus.

Degenerate ratios
-----------------
A ratio whose denominator is 0 (no reference characters, nothing retrieved) is 0.0, as in the
current reference code (``src/chunking_evaluation/...``: ``x / d if d else 0``; the older
``chunking_evaluation/...`` copy raised ZeroDivisionError there); the numerator is then 0 too.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pandas as pd

__all__ = [
    "METRICS",
    "MODES",
    "PLACEMENTS",
    "SpanScores",
    "place_spans",
    "precision_omega",
    "score_questions",
    "span_scores",
    "summarize",
]

MODES = ("union", "chroma")
PLACEMENTS = ("exact", "report")
METRICS = ("recall", "precision", "precision_omega", "iou")

Span = tuple[int, int]


@dataclass(frozen=True)
class SpanScores:
    """Recall, precision and IoU of one question's retrieval; each in ``[0, 1]``."""

    recall: float
    precision: float
    iou: float


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def _check_mode(mode: object) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES!r}.")
    return str(mode)


def _is_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _span_problem(start: object, end: object) -> str | None:
    """Why ``(start, end)`` is not a valid half-open span, or None."""
    if not (_is_int(start) and _is_int(end)):
        return "offsets must be ints"
    if start < 0 or end < 0:  # type: ignore[operator]
        return "offsets must be >= 0"
    if start > end:  # type: ignore[operator]
        return "start > end"
    return None


def _check_spans(name: str, spans: Iterable[Sequence[int]]) -> list[Span]:
    """Return ``spans`` as a list of ``(int, int)`` or raise ``ValueError`` naming the culprit."""
    if isinstance(spans, (str, bytes)) or not isinstance(spans, Iterable):
        raise ValueError(f"{name} must be a sequence of (start, end) pairs, got {spans!r}.")
    out: list[Span] = []
    for i, span in enumerate(spans):
        try:
            start, end = span
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}[{i}] = {span!r} is not a (start, end) pair of character offsets."
            ) from None
        problem = _span_problem(start, end)
        if problem is not None:
            raise ValueError(
                f"{name}[{i}] = ({start!r}, {end!r}) is invalid: {problem}; spans are half-open "
                "(start, end) character offsets with 0 <= start <= end."
            )
        out.append((int(start), int(end)))
    return out


def _check_count(name: str, value: object) -> int:
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        raise ValueError(f"{name} must be an int >= 0 (a number of characters), got {value!r}.")
    return int(value)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Where a chunk is scored
# --------------------------------------------------------------------------------------


def _check_placement(placement: object) -> str:
    if placement not in PLACEMENTS:
        raise ValueError(
            f"unknown placement {placement!r}; use 'exact' (the chunk's own offsets) or 'report' "
            "(first occurrence of its text, as the Chroma report's code does)."
        )
    return str(placement)


def place_spans(
    corpus: str,
    chunks: Sequence[tuple[str, int, int]],
    placement: str = "exact",
) -> list[tuple[int, int]]:
    """The character span at which each chunk is scored.

    Parameters
    ----------
    corpus : str
        The document the chunks were cut from.
    chunks : sequence of (text, start, end)
        Each chunk's text and its true half-open character offsets in ``corpus``
        (``corpus[start:end] == text`` for chunkwise's chunkers).
    placement : {"exact", "report"}
        ``"exact"`` (default): the chunk's true ``(start, end)``.
        ``"report"``: where the Chroma report's evaluation code puts it. That code keeps no
        offsets; it searches the chunk's text in the corpus (``rigorous_document_search`` in
        ``chunking_evaluation/utils.py``, brandonstarxel/chunking_evaluation at d451fc4,
        called from ``BaseEvaluation._get_chunks_and_metadata``): one trailing ``"."`` is
        dropped from the text, then the span is ``(i, i + len(text))`` with ``i`` the
        **first** occurrence of the (shortened) text in the corpus. A chunk whose text also
        occurs earlier in the corpus (repeated passages) is therefore scored at the earlier
        copy, and a chunk ending in ``"."`` loses that character.

    Returns
    -------
    list of (int, int)
        One half-open span per chunk, in input order.

    Raises
    ------
    ValueError
        On an unknown placement, a chunk that is not a ``(text, start, end)`` triple, offsets
        outside ``0 <= start <= end <= len(corpus)``, or (``"report"``) a chunk whose text
        does not occur in ``corpus``. The report's code would then fall back to a
        whitespace-insensitive and a fuzzy search; a chunk that is a slice of the corpus
        never needs them, so a miss here means the chunk belongs to another document.

    Notes
    -----
    Each distinct text is searched once (``str.find``), so repeated chunks cost nothing
    extra.
    """
    placement = _check_placement(placement)
    if not isinstance(corpus, str):
        raise ValueError(f"corpus must be a str (the document text), got {type(corpus).__name__}.")
    if isinstance(chunks, (str, bytes)) or not isinstance(chunks, Iterable):
        raise ValueError("chunks must be a sequence of (text, start, end) triples.")
    n = len(corpus)
    found: dict[str, tuple[int, int]] = {}
    out: list[tuple[int, int]] = []
    for i, chunk in enumerate(chunks):
        try:
            text, start, end = chunk
        except (TypeError, ValueError):
            raise ValueError(f"chunks[{i}] = {chunk!r:.80} is not a (text, start, end) triple.") from None
        if not isinstance(text, str):
            raise ValueError(f"chunks[{i}]: the text must be a str, got {type(text).__name__}.")
        problem = _span_problem(start, end)
        if problem is None and end > n:  # type: ignore[operator]
            problem = f"end is past the corpus ({n} characters)"
        if problem is not None:
            raise ValueError(
                f"chunks[{i}] = (text, {start!r}, {end!r}) is invalid: {problem}; offsets are "
                "half-open character offsets into the corpus."
            )
        if placement == "exact":
            out.append((int(start), int(end)))
            continue
        span = found.get(text)
        if span is None:
            target = text[:-1] if text.endswith(".") else text
            at = corpus.find(target)
            if at < 0:
                raise ValueError(
                    f"chunks[{i}] (text starting {text[:40]!r}) does not occur in the corpus, so "
                    "placement='report' cannot place it; pass the document the chunk was cut from."
                )
            span = found[text] = (at, at + len(target))
        out.append(span)
    return out


# --------------------------------------------------------------------------------------
# Reference implementation (plain Python, one question)
# --------------------------------------------------------------------------------------


def _union(spans: Iterable[Span]) -> list[Span]:
    """Disjoint sorted spans covering the same characters as ``spans``."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1][1] = end
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _size(spans: Iterable[Span]) -> int:
    """Sum of lengths (characters counted with multiplicity)."""
    return sum(e - s for s, e in spans)


def _overlap(a: list[Span], b: list[Span]) -> int:
    """``|A ∩ B|`` for two disjoint sorted span lists."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def span_scores(
    retrieved: Iterable[Sequence[int]],
    references: Iterable[Sequence[int]],
    mode: str = "union",
    other_corpus_chars: int = 0,
) -> SpanScores:
    """Recall, precision and IoU of the retrieved spans against the reference spans.

    Parameters
    ----------
    retrieved : sequence of (start, end)
        Retrieved chunks that come from the question's own document, as half-open character
        spans, in any order; overlaps and repeats allowed.
    references : sequence of (start, end)
        The question's reference excerpts in the same document; may overlap each other.
    mode : {"union", "chroma"}
        ``"chroma"`` reproduces the report's code; ``"union"`` never counts a character twice.
    other_corpus_chars : int
        Characters of the retrieved chunks that come from OTHER documents. Added once to the
        precision and IoU denominators in both modes; pass the plain sum of their lengths for
        chroma, the number of distinct characters for union.

    Returns
    -------
    SpanScores
        With ``N = |U(retrieved) ∩ U(references)|`` and ``O = other_corpus_chars``:

        chroma:
            recall    = N / sum(len(r) for r in references)
            precision = N / (sum(len(c) for c in retrieved) + O)
            iou       = N / (sum(len(c) for c in retrieved) + O
                             + sum(len(r minus U(retrieved)) for r in references))
        union:
            recall    = N / |U(references)|
            precision = N / (|U(retrieved)| + O)
            iou       = N / (|U(retrieved) ∪ U(references)| + O)

        Sums count overlapping characters once per span (double counting); ``U`` is the set
        union. A ratio with denominator 0 is 0.0.

    Raises
    ------
    ValueError
        On an unknown mode, a span with a non-int or negative offset or start > end, or a
        negative ``other_corpus_chars``.
    """
    mode = _check_mode(mode)
    ret = _check_spans("retrieved", retrieved)
    refs = _check_spans("references", references)
    other = _check_count("other_corpus_chars", other_corpus_chars)

    ret_u = _union(ret)
    refs_u = _union(refs)
    n = _overlap(ret_u, refs_u)
    if mode == "chroma":
        retrieved_chars = _size(ret) + other
        missed = sum((e - s) - _overlap([(s, e)], ret_u) for s, e in refs)
        return SpanScores(
            recall=_ratio(n, _size(refs)),
            precision=_ratio(n, retrieved_chars),
            iou=_ratio(n, retrieved_chars + missed),
        )
    retrieved_chars = _size(ret_u) + other
    return SpanScores(
        recall=_ratio(n, _size(refs_u)),
        precision=_ratio(n, retrieved_chars),
        iou=_ratio(n, retrieved_chars + _size(refs_u) - n),
    )


def _touches(chunk: Span, ref: Span, mode: str) -> bool:
    lo = max(chunk[0], ref[0])
    hi = min(chunk[1], ref[1])
    return lo <= hi if mode == "chroma" else lo < hi


def precision_omega(
    chunk_spans: Iterable[Sequence[int]],
    references: Iterable[Sequence[int]],
    mode: str = "union",
) -> float:
    """Precision when retrieving exactly the chunks that touch a reference.

    Parameters
    ----------
    chunk_spans : sequence of (start, end)
        Every chunk the chunker produced for the question's document.
    references : sequence of (start, end)
        The question's reference spans in that document.
    mode : {"union", "chroma"}
        With ``T`` the touching chunks:

        chroma:  T = chunks with max(c.start, r.start) <= min(c.end, r.end) for some r
                     (abutting counts), score = |U(T) ∩ U(r)| / |U(T) ∪ U(r)|
        union:   T = chunks sharing a character with some r,
                     score = |U(T) ∩ U(r)| / |U(T)|

        (0.0 when the denominator is 0). See the module docstring.

    Raises
    ------
    ValueError
        On an unknown mode or an invalid span.
    """
    mode = _check_mode(mode)
    chunks = _check_spans("chunk_spans", chunk_spans)
    refs = _check_spans("references", references)
    touching = _union(c for c in chunks if any(_touches(c, r, mode) for r in refs))
    refs_u = _union(refs)
    n = _overlap(touching, refs_u)
    if mode == "chroma":
        return _ratio(n, _size(touching) + _size(refs_u) - n)
    return _ratio(n, _size(touching))


# --------------------------------------------------------------------------------------
# Batch engine (numpy interval arithmetic over all questions at once)
# --------------------------------------------------------------------------------------
#
# Every question's spans are shifted into its own stretch of one long line: position x of
# question q becomes q * W + x with W = 1 + the largest offset seen, so spans of different
# questions can neither overlap nor abut, and one sort + running maximum merges all unions.

_I64 = np.int64


def _merge(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of the (already shifted) spans ``[x0, x1)``: disjoint sorted segment bounds."""
    if x0.size == 0:
        return x0, x1
    order = np.argsort(x0, kind="stable")
    x0 = x0[order]
    run = np.maximum.accumulate(x1[order])
    new = np.empty(x0.size, dtype=bool)
    new[0] = True
    np.greater(x0[1:], run[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, x0.size - 1)
    return x0[first], run[last]


def _sum_by(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Integer sums of ``values`` per group id in ``0..n-1``."""
    if group.size == 0:
        return np.zeros(n, dtype=_I64)
    # float64 sums of integers below 2**53 are exact.
    return np.bincount(group, weights=values, minlength=n).astype(_I64)


def _covered_before(seg0: np.ndarray, seg1: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Characters of the disjoint sorted segments that lie before position ``x``."""
    cum = np.zeros(seg0.size + 1, dtype=_I64)
    np.cumsum(seg1 - seg0, out=cum[1:])
    idx = np.searchsorted(seg0, x, side="right")
    out = cum[idx]
    has = idx > 0
    out[has] -= np.maximum(seg1[idx[has] - 1] - x[has], 0)
    return out


def _covered(seg0: np.ndarray, seg1: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """``|[x0, x1) ∩ segments|`` for each span."""
    if seg0.size == 0 or x0.size == 0:
        return np.zeros(x0.size, dtype=_I64)
    return _covered_before(seg0, seg1, x1) - _covered_before(seg0, seg1, x0)


def _ratio_arr(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num.astype(np.float64), den.astype(np.float64), out=out, where=den > 0)
    return out


def _pairs_to_arrays(
    name: str, pairs: list, q: np.ndarray, qids: list
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end arrays of the flattened spans, after vectorized checks.

    ``q`` is the (sorted) question index of each span; messages name the question and the
    span's position in that question's list.
    """
    if not pairs:
        empty = np.zeros(0, dtype=_I64)
        return empty, empty

    def fail(k: int, problem: str | None) -> None:
        qi = int(q[k])
        pos = k - int(np.searchsorted(q, qi, side="left"))
        item = pairs[k]
        if problem is None:
            raise ValueError(
                f"question {qids[qi]!r}: {name}[{pos}] = {item!r} is not a (start, end) pair "
                "of character offsets."
            )
        raise ValueError(
            f"question {qids[qi]!r}: {name}[{pos}] = ({item[0]!r}, {item[1]!r}) is invalid: "
            f"{problem}; spans are half-open (start, end) character offsets with "
            "0 <= start <= end."
        )

    try:
        arr = np.asarray(pairs)
    except (ValueError, TypeError):
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape[1] != 2:
        for k, item in enumerate(pairs):
            if not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 2:
                fail(k, None)
        arr = np.asarray(pairs, dtype=object)
    if arr.dtype.kind not in "iu":
        for k, (start, end) in enumerate(pairs):
            problem = _span_problem(start, end)
            if problem is not None:
                fail(k, problem)
    starts = arr[:, 0].astype(_I64)
    ends = arr[:, 1].astype(_I64)
    bad = (starts < 0) | (ends < 0) | (starts > ends)
    if bad.any():
        k = int(np.argmax(bad))
        fail(k, _span_problem(int(starts[k]), int(ends[k])))
    return starts, ends


def _reference_pairs(raw: object, qid: object) -> list:
    """One question's references as a list of ``(start, end)`` items (checked later).

    ``raw`` is a list of ``{"start_index", "end_index"}`` mappings or of pairs, or that list as
    JSON text (the Chroma CSV). Errors name the question ``qid``.
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise ValueError(
                f"question {qid!r}: references is not valid JSON ({exc}): {raw!r:.80}; expected a "
                'list of {"start_index": s, "end_index": e} objects or of (start, end) pairs.'
            ) from None
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, (Sequence, np.ndarray)):
        raise ValueError(
            f"question {qid!r}: references must be a list of spans, got {type(raw).__name__} "
            f"{raw!r:.80}; give a list of {{\"start_index\", \"end_index\"}} objects or of "
            "(start, end) pairs (an empty list for none)."
        )
    try:
        return [
            (r["start_index"], r["end_index"]) if type(r) is dict or isinstance(r, Mapping) else r
            for r in raw
        ]
    except KeyError as exc:
        pos, item = next(
            ((i, r) for i, r in enumerate(raw) if isinstance(r, Mapping) and exc.args[0] not in r),
            (0, raw[0]),
        )
        raise ValueError(
            f"question {qid!r}: references[{pos}] = {item!r:.80} has no {exc.args[0]!r}; each "
            "reference needs 'start_index' and 'end_index' (character offsets)."
        ) from None


def score_questions(
    questions: pd.DataFrame,
    retrieved: Sequence[Sequence[Sequence[object]]],
    chunks: Mapping[str, Sequence[Sequence[int]] | np.ndarray] | None = None,
    mode: str = "union",
) -> pd.DataFrame:
    """Score many questions at once; identical to :func:`span_scores` / :func:`precision_omega`.

    Parameters
    ----------
    questions : DataFrame
        One row per question with columns ``corpus_id`` (the document) and ``references``:
        a list of ``{"start_index", "end_index"}`` dicts (the Chroma CSV format, optionally
        still a JSON string) or of ``(start, end)`` pairs. A ``question_id`` column is used
        as the id when present, else the index. Corpus ids are compared as strings.
    retrieved : sequence, one item per question row
        The retrieved chunks of each question, each a ``(corpus_id, start, end)`` triple, or a
        ``(start, end)`` pair meaning the question's own corpus. Triples of another corpus
        make up ``other_corpus_chars``: the sum of their lengths in chroma mode, the distinct
        characters (union per other corpus) in union mode.
    chunks : mapping corpus_id -> sequence of (start, end), optional
        All chunk spans of each corpus, for precision_Omega (sorted once per corpus). When
        omitted the ``precision_omega`` column is NaN.
    mode : {"union", "chroma"}

    Returns
    -------
    DataFrame
        Columns ``question_id, corpus, recall, precision, precision_omega, iou``, one row per
        question in input order.

    Raises
    ------
    ValueError
        On an unknown mode, missing columns, ``len(retrieved) != len(questions)``, an invalid
        span, references that are not valid JSON, not a list, or lack ``start_index`` /
        ``end_index`` (the message names the question id), or a corpus missing from ``chunks``.
    """
    mode = _check_mode(mode)
    if not isinstance(questions, pd.DataFrame):
        raise ValueError("questions must be a pandas DataFrame with corpus_id and references.")
    missing = [c for c in ("corpus_id", "references") if c not in questions.columns]
    if missing:
        raise ValueError(
            f"questions is missing column(s) {missing}; it needs corpus_id and references."
        )
    n_q = len(questions)
    if len(retrieved) != n_q:
        raise ValueError(
            f"retrieved has {len(retrieved)} items but questions has {n_q} rows; "
            "pass one list of retrieved chunks per question."
        )
    ids = questions["question_id"] if "question_id" in questions.columns else questions.index
    qids = ids.tolist()
    corpora = [str(c) for c in questions["corpus_id"].tolist()]
    codes = {c: i for i, c in enumerate(dict.fromkeys(corpora))}

    # ---- flatten (the only per-span Python work) ----
    q_code = np.asarray([codes[c] for c in corpora], dtype=_I64)
    arange = np.arange(n_q, dtype=np.intp)
    ref_lists = [_reference_pairs(r, q) for r, q in zip(questions["references"].tolist(), qids)]
    rq = np.repeat(arange, [len(r) for r in ref_lists])
    ref_pairs = list(chain.from_iterable(ref_lists))
    rs, re_ = _pairs_to_arrays("references", ref_pairs, rq, qids)

    flat = list(chain.from_iterable(retrieved))
    tq = np.repeat(arange, [len(items) for items in retrieved])
    try:
        all_pairs = set(map(len, flat)) <= {2}
    except TypeError:
        all_pairs = False
    if all_pairs:  # fast path: everything from the question's own corpus
        tc = q_code[tq]
        ret_pairs = flat
    else:
        ret_codes: list[int] = []
        ret_pairs = []
        for k, item in enumerate(flat):
            if isinstance(item, Sequence) and len(item) == 3:
                ret_codes.append(codes.setdefault(str(item[0]), len(codes)))
                ret_pairs.append(item[1:])
            else:
                ret_codes.append(int(q_code[tq[k]]))
                ret_pairs.append(item)
        tc = np.asarray(ret_codes, dtype=_I64)
    ts, te = _pairs_to_arrays("retrieved", ret_pairs, tq, qids)
    same = tc == q_code[tq]

    # ---- chunks per corpus, sorted once ----
    chunk_tables: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if chunks is not None:
        chunks = {str(k): v for k, v in chunks.items()}
        for corpus in dict.fromkeys(corpora):
            if corpus not in chunks:
                raise ValueError(
                    f"chunks has no entry for corpus {corpus!r}; pass the chunk spans of every "
                    "corpus that a question refers to."
                )
        for corpus in dict.fromkeys(corpora):
            chunk_tables[corpus] = _chunk_table(corpus, chunks[corpus])

    widths = [1]
    for arr in (re_, te):
        if arr.size:
            widths.append(int(arr.max()) + 1)
    for _, ends, _ in chunk_tables.values():
        if ends.size:
            widths.append(int(ends.max()) + 1)
    width = max(widths)
    if (n_q + 1) * width * max(len(codes), 1) >= 2**62:
        raise ValueError("offsets too large for the batch engine; use span_scores per question.")

    rec, prec, iou = _batch_scores(n_q, width, rq, rs, re_, tq, tc, ts, te, same, len(codes), mode)
    if chunks is None:
        omega = np.full(n_q, np.nan)
    else:
        tables = {codes[c]: t for c, t in chunk_tables.items()}
        omega = _batch_omega(n_q, width, rq, rs, re_, q_code[rq], tables, mode)

    return pd.DataFrame(
        {
            "question_id": qids,
            "corpus": corpora,
            "recall": rec,
            "precision": prec,
            "precision_omega": omega,
            "iou": iou,
        }
    )


def _chunk_table(corpus: str, spans: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Chunk starts, ends (sorted by start) and the running maximum of ends."""
    arr = np.asarray(spans)
    if arr.size == 0:
        empty = np.zeros(0, dtype=_I64)
        return empty, empty, empty
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"chunks[{corpus!r}] must be a sequence of (start, end) pairs.")
    if arr.dtype.kind not in "iu":
        raise ValueError(f"chunks[{corpus!r}] offsets must be ints, got dtype {arr.dtype}.")
    arr = arr.astype(_I64)
    bad = (arr[:, 0] < 0) | (arr[:, 1] < 0) | (arr[:, 0] > arr[:, 1])
    if bad.any():
        k = int(np.argmax(bad))
        s, e = int(arr[k, 0]), int(arr[k, 1])
        raise ValueError(
            f"chunks[{corpus!r}][{k}] = ({s}, {e}) is invalid: {_span_problem(s, e)}; spans are "
            "half-open (start, end) character offsets with 0 <= start <= end."
        )
    order = np.argsort(arr[:, 0], kind="stable")
    starts = arr[order, 0]
    ends = arr[order, 1]
    return starts, ends, np.maximum.accumulate(ends)


def _batch_scores(
    n_q: int,
    width: int,
    rq: np.ndarray,
    rs: np.ndarray,
    re_: np.ndarray,
    tq: np.ndarray,
    tc: np.ndarray,
    ts: np.ndarray,
    te: np.ndarray,
    same: np.ndarray,
    n_codes: int,
    mode: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    shift_r = rq.astype(_I64) * width
    r0, r1 = rs + shift_r, re_ + shift_r
    cq = tq[same]
    shift_c = cq.astype(_I64) * width
    c0, c1 = ts[same] + shift_c, te[same] + shift_c

    ru0, ru1 = _merge(r0, r1)
    cu0, cu1 = _merge(c0, c1)
    # N = |U(c) ∩ U(r)|, summed over the merged reference segments.
    n = _sum_by(ru0 // width, _covered(cu0, cu1, ru0, ru1), n_q)
    c_union = _sum_by(cu0 // width, cu1 - cu0, n_q)
    r_union = _sum_by(ru0 // width, ru1 - ru0, n_q)

    other_mask = ~same
    oq = tq[other_mask]
    if mode == "chroma":
        other = _sum_by(oq, te[other_mask] - ts[other_mask], n_q)
        c_sum = _sum_by(cq, c1 - c0, n_q)
        r_sum = _sum_by(rq, re_ - rs, n_q)
        missed = r_sum - _sum_by(rq, _covered(cu0, cu1, r0, r1), n_q)
        retrieved_chars = c_sum + other
        return (
            _ratio_arr(n, r_sum),
            _ratio_arr(n, retrieved_chars),
            _ratio_arr(n, retrieved_chars + missed),
        )
    # Distinct characters per (question, other corpus), then per question.
    group = oq.astype(_I64) * n_codes + tc[other_mask]
    shift_o = group * width
    ou0, ou1 = _merge(ts[other_mask] + shift_o, te[other_mask] + shift_o)
    other = _sum_by((ou0 // width) // n_codes, ou1 - ou0, n_q)
    retrieved_chars = c_union + other
    return (
        _ratio_arr(n, r_union),
        _ratio_arr(n, retrieved_chars),
        _ratio_arr(n, retrieved_chars + r_union - n),
    )


def _batch_omega(
    n_q: int,
    width: int,
    rq: np.ndarray,
    rs: np.ndarray,
    re_: np.ndarray,
    ref_code: np.ndarray,
    tables: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]],
    mode: str,
) -> np.ndarray:
    """precision_Omega per question from sorted chunk tables.

    For a reference ``[a, b]`` the touching chunks are (chroma, abutting counts):
    those starting in ``[a, b]`` -- a contiguous run of the start-sorted table -- plus those
    starting before ``a`` and ending at or after ``a``. The latter all contain ``a``, so their
    union is one span from the first of them (the first index whose running max end reaches
    ``a``) to the running max end before the run. Union mode uses the strict inequalities.
    """
    t_q: list[np.ndarray] = []
    t_s: list[np.ndarray] = []
    t_e: list[np.ndarray] = []
    strict = mode == "union"
    for code, (starts, ends, run_max) in tables.items():
        if starts.size == 0:
            continue
        sel = np.flatnonzero(ref_code == code)
        if strict:
            sel = sel[re_[sel] > rs[sel]]  # an empty reference shares no character
        if sel.size == 0:
            continue
        a, b, q = rs[sel], re_[sel], rq[sel]
        lo = np.searchsorted(starts, a, side="left")
        hi = np.searchsorted(starts, b, side="left" if strict else "right")
        first = np.searchsorted(run_max, a, side="right" if strict else "left")
        # chunks that begin before the reference and reach into it (or abut it)
        stab = first < lo
        t_q.append(q[stab])
        t_s.append(starts[first[stab]])
        t_e.append(run_max[lo[stab] - 1])
        # chunks that begin inside the reference
        counts = hi - lo
        total = int(counts.sum())
        if total:
            offsets = np.repeat(lo - (np.cumsum(counts) - counts), counts)
            idx = np.arange(total) + offsets
            t_q.append(np.repeat(q, counts))
            t_s.append(starts[idx])
            t_e.append(ends[idx])

    if t_q:
        shift = np.concatenate(t_q).astype(_I64) * width
        tu0, tu1 = _merge(np.concatenate(t_s) + shift, np.concatenate(t_e) + shift)
    else:
        tu0 = tu1 = np.zeros(0, dtype=_I64)
    shift_r = rq.astype(_I64) * width
    ru0, ru1 = _merge(rs + shift_r, re_ + shift_r)
    n = _sum_by(ru0 // width, _covered(tu0, tu1, ru0, ru1), n_q)
    t_union = _sum_by(tu0 // width, tu1 - tu0, n_q)
    if mode == "chroma":
        r_union = _sum_by(ru0 // width, ru1 - ru0, n_q)
        return _ratio_arr(n, t_union + r_union - n)
    return _ratio_arr(n, t_union)


# --------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and population standard deviation of each metric, overall and per corpus.

    Parameters
    ----------
    df : DataFrame
        Output of :func:`score_questions` (columns ``corpus`` and the metrics).

    Returns
    -------
    DataFrame
        Index ``corpus`` with the row ``"all"`` first, then each corpus in order of first
        appearance; columns ``n`` and ``<metric>_mean``, ``<metric>_sd`` for recall,
        precision, precision_omega and iou. ``sd`` is the population standard deviation
        (``np.std``, ``ddof=0``), as in the report's ``BaseEvaluation.run``; NaN values (e.g.
        precision_omega without chunks) are left out, and an all-NaN metric gives NaN.
    """
    missing = [c for c in ("corpus", *METRICS) if c not in df.columns]
    if missing:
        raise ValueError(f"df is missing column(s) {missing}; pass the output of score_questions.")

    def stats(part: pd.DataFrame) -> dict[str, float]:
        row: dict[str, float] = {"n": len(part)}
        for metric in METRICS:
            values = part[metric].to_numpy(dtype=np.float64)
            values = values[~np.isnan(values)]
            row[f"{metric}_mean"] = float(np.mean(values)) if values.size else np.nan
            row[f"{metric}_sd"] = float(np.std(values)) if values.size else np.nan
        return row

    rows = {"all": stats(df)}
    for corpus in dict.fromkeys(df["corpus"]):
        rows[str(corpus)] = stats(df[df["corpus"] == corpus])
    out = pd.DataFrame.from_dict(rows, orient="index")
    out["n"] = out["n"].astype(int)
    out.index.name = "corpus"
    return out
