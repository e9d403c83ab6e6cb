"""Boundary metrics for sentence-level segmentations: Pk, WindowDiff, precision/recall.

All units are **sentences**. A segmentation of ``n_sentences`` sentences is described by
its *boundaries*: a strictly increasing list of ints where boundary ``i`` means "a split
after sentence ``i``", so ``0 <= i <= n_sentences - 2``. This is the convention of
``find_breakpoints`` in the semantic chunker. Example with ``n_sentences=6``::

    sentences   0 1 | 2 3 4 | 5
    boundaries  [1, 4]            sizes [2, 3, 1]

Sentences ``a < b`` are in different segments iff some boundary ``i`` has
``a <= i <= b - 1``.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from chunkwise._validation import Interval, check_param

__all__ = [
    "BoundaryScores",
    "boundaries_from_sizes",
    "boundary_scores",
    "pk",
    "sizes_from_boundaries",
    "windowdiff",
]


# --------------------------------------------------------------------------------------
# Validation (the only place inputs are checked)
# --------------------------------------------------------------------------------------


def _check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as an ``int`` or raise ``ValueError`` naming it and the fix."""
    return int(check_param(name, value, [Interval(int, minimum, None)], hint=f"; pass a whole number >= {minimum}"))


def _check_boundaries(name: str, boundaries: Iterable[int], n_sentences: int) -> list[int]:
    """Return ``boundaries`` as a list of ints after checking type, order and range."""
    if isinstance(boundaries, (str, bytes)):
        raise ValueError(
            f"{name} must be a sequence of ints (split after sentence i), got the string "
            f"{boundaries!r}; pass e.g. [1, 4]."
        )
    try:
        items = list(boundaries)
    except TypeError:
        raise ValueError(
            f"{name} must be a sequence of ints (split after sentence i), got {boundaries!r}; "
            "pass e.g. [1, 4], or [] for a single segment."
        ) from None
    out: list[int] = []
    for b in items:
        if isinstance(b, bool) or not isinstance(b, numbers.Integral):
            raise ValueError(
                f"{name} must contain only ints, got {b!r} ({type(b).__name__}) in {items!r}; "
                "convert boundaries to int sentence indices."
            )
        b = int(b)
        if not 0 <= b <= n_sentences - 2:
            valid = f"0..{n_sentences - 2}" if n_sentences > 1 else "none (1 sentence: no split)"
            raise ValueError(
                f"{name} contains {b}, out of range for n_sentences={n_sentences}: boundary i "
                f"means a split after sentence i, so valid values are {valid}. "
                "Drop splits before the first or at/after the last sentence, or check n_sentences."
            )
        if out and b <= out[-1]:
            kind = "duplicate" if b == out[-1] else "unsorted"
            raise ValueError(
                f"{name} must be strictly increasing, got {items!r} ({kind}: {out[-1]} then {b}); "
                f"pass sorted(set({name}))."
            )
        out.append(b)
    return out


def _prepare(
    predicted: Iterable[int], gold: Iterable[int], n_sentences: int, k: int | None
) -> tuple[list[int], list[int], int, int]:
    """Validate the common arguments; return ``(predicted, gold, n_sentences, k)``.

    ``k`` is resolved (default from ``gold``) and clamped to ``n_sentences - 1``; it is
    0 only when ``n_sentences == 1`` (no probe pairs exist).
    """
    n = _check_int("n_sentences", n_sentences, 1)
    pred = _check_boundaries("predicted", predicted, n)
    ref = _check_boundaries("gold", gold, n)
    if k is None:
        # Half the mean gold segment length n / m, rounded half up, in exact integer
        # arithmetic: floor(n / (2m) + 1/2) == (n + m) // (2m).
        m = len(ref) + 1
        k = max(1, (n + m) // (2 * m))
    else:
        k = _check_int("k", k, 1)
    return pred, ref, n, min(k, n - 1)


def _prefix_counts(boundaries: list[int], n: int) -> list[int]:
    """``c[j]`` = number of boundaries ``< j``, for ``j`` in ``0..n-1``."""
    is_boundary = [0] * n
    for b in boundaries:
        is_boundary[b] = 1
    counts = [0]
    for j in range(n - 1):
        counts.append(counts[-1] + is_boundary[j])
    return counts


def _window_counts(boundaries: list[int], n: int, k: int) -> list[int]:
    """Boundaries between sentences ``i`` and ``i + k`` for each probe ``i`` in ``0..n-k-1``."""
    c = _prefix_counts(boundaries, n)
    return [c[i + k] - c[i] for i in range(n - k)]


def _pk(pred: list[int], ref: list[int], n: int, k: int) -> float:
    """Pk on validated input (``k`` already resolved and clamped)."""
    if n == 1:
        return 0.0
    pairs = zip(_window_counts(pred, n, k), _window_counts(ref, n, k))
    return sum((p > 0) != (g > 0) for p, g in pairs) / (n - k)


def _windowdiff(pred: list[int], ref: list[int], n: int, k: int) -> float:
    """WindowDiff on validated input (``k`` already resolved and clamped)."""
    if n == 1:
        return 0.0
    pairs = zip(_window_counts(pred, n, k), _window_counts(ref, n, k))
    return sum(p != g for p, g in pairs) / (n - k)


# --------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------


def boundaries_from_sizes(sizes: Sequence[int]) -> list[int]:
    """Convert segment sizes (in sentences) to boundaries.

    Parameters
    ----------
    sizes : sequence of int
        Number of sentences in each segment, in order; each ``>= 1``, at least one segment.

    Returns
    -------
    list of int
        Boundaries (split after sentence ``i``), e.g. ``[2, 3, 1] -> [1, 4]``.

    Raises
    ------
    ValueError
        If ``sizes`` is empty, not a sequence, or holds a non-int or a size ``< 1``.

    References
    ----------
    Same convention as ``find_breakpoints`` in the semantic chunker.
    """
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
        raise ValueError(
            f"sizes must be a sequence of ints >= 1, got {sizes!r}; pass e.g. [2, 3, 1]."
        )
    items = list(sizes)
    if not items:
        raise ValueError(
            "sizes is empty: a segmentation needs at least one segment; pass e.g. [n_sentences]."
        )
    boundaries: list[int] = []
    end = 0
    for i, size in enumerate(items):
        end += _check_int(f"sizes[{i}]", size, 1)
        boundaries.append(end - 1)
    return boundaries[:-1]


def sizes_from_boundaries(boundaries: Iterable[int], n_sentences: int) -> list[int]:
    """Convert boundaries to segment sizes (in sentences).

    Parameters
    ----------
    boundaries : iterable of int
        Strictly increasing split positions, each in ``0..n_sentences-2``.
    n_sentences : int
        Number of sentences in the text, ``>= 1``.

    Returns
    -------
    list of int
        Segment sizes summing to ``n_sentences``, e.g. ``([1, 4], 6) -> [2, 3, 1]``.

    Raises
    ------
    ValueError
        If ``n_sentences < 1`` or the boundaries are non-int, unsorted, duplicated or
        out of range.

    References
    ----------
    Same convention as ``find_breakpoints`` in the semantic chunker.
    """
    n = _check_int("n_sentences", n_sentences, 1)
    bounds = _check_boundaries("boundaries", boundaries, n)
    edges = [-1, *bounds, n - 1]
    return [b - a for a, b in zip(edges, edges[1:])]


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------


def pk(
    predicted: Iterable[int], gold: Iterable[int], n_sentences: int, k: int | None = None
) -> float:
    """Pk segmentation error (lower is better) of Beeferman, Berger & Lafferty (1999).

    For every probe pair of sentences ``(i, i + k)``, ``i = 0 .. n_sentences-k-1``, ask
    "are both sentences in the same segment?" in the predicted and in the gold
    segmentation. Pk is the fraction of the ``n_sentences - k`` probes where the answers
    differ.

    Parameters
    ----------
    predicted, gold : iterable of int
        Boundaries (split after sentence ``i``), strictly increasing, in ``0..n_sentences-2``.
    n_sentences : int
        Number of sentences in the text, ``>= 1``.
    k : int, optional
        Probe distance in sentences, ``>= 1``. Default: half the mean gold segment length
        ``n_sentences / (len(gold) + 1)``, rounded half up (``2.5 -> 3``), at least 1.
        If ``k >= n_sentences`` it is clamped to ``n_sentences - 1`` (a single probe
        comparing the first and last sentence); with ``n_sentences == 1`` there is no
        probe and the result is 0.0.

    Returns
    -------
    float
        Error in ``[0, 1]``; 0.0 means every probe agrees.

    Raises
    ------
    ValueError
        If ``n_sentences < 1``, ``k < 1``, a value is not an int, or boundaries are
        unsorted, duplicated or out of range.

    References
    ----------
    D. Beeferman, A. Berger and J. Lafferty (1999). Statistical models for text
    segmentation. *Machine Learning* 34(1-3):177-210.
    """
    return _pk(*_prepare(predicted, gold, n_sentences, k))


def windowdiff(
    predicted: Iterable[int], gold: Iterable[int], n_sentences: int, k: int | None = None
) -> float:
    """WindowDiff segmentation error (lower is better) of Pevzner & Hearst (2002).

    For every window between sentences ``i`` and ``i + k``, ``i = 0 .. n_sentences-k-1``,
    count the boundaries inside it (boundaries ``b`` with ``i <= b <= i + k - 1``) in the
    predicted and in the gold segmentation. WindowDiff is the fraction of the
    ``n_sentences - k`` windows where the two counts differ.

    Parameters
    ----------
    predicted, gold : iterable of int
        Boundaries (split after sentence ``i``), strictly increasing, in ``0..n_sentences-2``.
    n_sentences : int
        Number of sentences in the text, ``>= 1``.
    k : int, optional
        Probe distance in sentences, ``>= 1``. Default: half the mean gold segment length
        ``n_sentences / (len(gold) + 1)``, rounded half up (``2.5 -> 3``), at least 1.
        If ``k >= n_sentences`` it is clamped to ``n_sentences - 1`` (a single probe
        comparing the first and last sentence); with ``n_sentences == 1`` there is no
        probe and the result is 0.0.

    Returns
    -------
    float
        Error in ``[0, 1]``; 0.0 means every window has the same boundary count.

    Raises
    ------
    ValueError
        If ``n_sentences < 1``, ``k < 1``, a value is not an int, or boundaries are
        unsorted, duplicated or out of range.

    References
    ----------
    L. Pevzner and M. A. Hearst (2002). A critique and improvement of an evaluation
    metric for text segmentation. *Computational Linguistics* 28(1):19-36.
    """
    return _windowdiff(*_prepare(predicted, gold, n_sentences, k))


@dataclass(frozen=True)
class BoundaryScores:
    """Boundary agreement between a predicted and a gold segmentation (units: sentences).

    Attributes
    ----------
    n_chunks : int
        Number of predicted chunks, ``len(predicted) + 1``.
    shifts_found : int
        Gold boundaries matched one-to-one by a predicted boundary within
        ``+/- tolerance`` sentences (a maximum matching).
    n_gold : int
        Number of gold boundaries.
    extra_splits : int
        Predicted boundaries matching no gold boundary, ``len(predicted) - shifts_found``.
    precision : float
        ``shifts_found / len(predicted)``; 1.0 when nothing is predicted.
    recall : float
        ``shifts_found / n_gold``; 1.0 when there are no gold boundaries.
    f1 : float
        Harmonic mean of precision and recall; 0.0 when both are 0.
    pk : float
        :func:`pk` with the same ``k``.
    windowdiff : float
        :func:`windowdiff` with the same ``k``.
    """

    n_chunks: int
    shifts_found: int
    n_gold: int
    extra_splits: int
    precision: float
    recall: float
    f1: float
    pk: float
    windowdiff: float

    def as_dict(self) -> dict[str, int | float]:
        """Return the fields as a plain ``dict`` (field order kept)."""
        return asdict(self)


def _match_count(predicted: list[int], gold: list[int], tolerance: int) -> int:
    """Size of a maximum one-to-one matching with ``|p - g| <= tolerance``.

    Greedy over sorted gold boundaries, each taking the leftmost unused predicted one in
    ``[g - tolerance, g + tolerance]``; optimal because all windows have equal width.
    """
    matched = 0
    j = 0
    for g in gold:
        while j < len(predicted) and predicted[j] < g - tolerance:
            j += 1
        if j < len(predicted) and predicted[j] <= g + tolerance:
            matched += 1
            j += 1
    return matched


def boundary_scores(
    predicted: Iterable[int],
    gold: Iterable[int],
    n_sentences: int,
    tolerance: int = 0,
    *,
    k: int | None = None,
) -> BoundaryScores:
    """Boundary precision/recall/F1 with a tolerance, plus Pk and WindowDiff.

    A gold boundary counts as found when a predicted boundary lies within
    ``+/- tolerance`` sentences of it; each predicted boundary can match at most one gold
    boundary (and vice versa), and the number of matches is maximised.

    Empty-set conventions: precision is 1.0 when nothing is predicted (no split made,
    so no wrong split made) and recall is 1.0 when there are no gold boundaries (nothing
    to find). Hence F1 is 1.0 when both are empty (one chunk, which is exactly right) and
    0.0 when exactly one side is empty (precision or recall is then 0), so F1 never
    rewards predicting nothing or splitting an unsplit gold text.

    Parameters
    ----------
    predicted, gold : iterable of int
        Boundaries (split after sentence ``i``), strictly increasing, in ``0..n_sentences-2``.
    n_sentences : int
        Number of sentences in the text, ``>= 1``.
    tolerance : int, default 0
        Allowed shift in sentences, ``>= 0``; 0 means exact matches only.
    k : int, optional
        Probe distance passed to :func:`pk` and :func:`windowdiff` (default as there).

    Returns
    -------
    BoundaryScores
        Frozen dataclass; use ``.as_dict()`` for a table row.

    Raises
    ------
    ValueError
        If ``n_sentences < 1``, ``tolerance < 0``, ``k < 1``, a value is not an int, or
        boundaries are unsorted, duplicated or out of range.

    References
    ----------
    D. Beeferman, A. Berger and J. Lafferty (1999). Statistical models for text
    segmentation. *Machine Learning* 34(1-3):177-210.

    L. Pevzner and M. A. Hearst (2002). A critique and improvement of an evaluation
    metric for text segmentation. *Computational Linguistics* 28(1):19-36.
    """
    pred, ref, n, k_used = _prepare(predicted, gold, n_sentences, k)
    tol = _check_int("tolerance", tolerance, 0)
    found = _match_count(pred, ref, tol)
    precision = found / len(pred) if pred else 1.0
    recall = found / len(ref) if ref else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BoundaryScores(
        n_chunks=len(pred) + 1,
        shifts_found=found,
        n_gold=len(ref),
        extra_splits=len(pred) - found,
        precision=precision,
        recall=recall,
        f1=f1,
        pk=_pk(pred, ref, n, k_used),
        windowdiff=_windowdiff(pred, ref, n, k_used),
    )


def boundaries_from_chunks(
    chunk_spans: Sequence[tuple[int, int]],
    sentence_spans: Sequence[tuple[int, int]],
) -> tuple[list[int], int]:
    """Express chunk cuts as boundaries between reference sentences.

    Chunkers may split text into different "sentences" than the gold annotation (LangChain's
    regex cuts "9 a.m." in two; a fixed-token window can stop mid-sentence). This maps every cut
    between consecutive chunks onto the reference sentences so that all chunkers are scored
    against the same gold boundaries.

    Parameters
    ----------
    chunk_spans : sequence of (start, end)
        Half-open character spans of the chunks, in order (overlapping windows are allowed;
        the cut is taken at each chunk's end).
    sentence_spans : sequence of (start, end)
        Half-open character spans of the reference sentences, in order, non-overlapping.

    Returns
    -------
    boundaries : list of int
        Sorted, unique sentence boundaries (``i`` = split after reference sentence ``i``).
        A cut in the whitespace between sentences ``i`` and ``i + 1`` maps to ``i``; a cut
        inside sentence ``j`` maps to the nearer of its two edges (``j - 1`` or ``j``; ties go
        to the end, ``j``), and is also counted as a mid-sentence cut. Cuts at or after the end of the
        last sentence, or before the first, give no boundary.
    mid_sentence_cuts : int
        Number of cuts that fell strictly inside a reference sentence.

    Raises
    ------
    ValueError
        If spans are malformed (start > end) or the sentences overlap or are out of order.
    """
    for name, spans in (("chunk_spans", chunk_spans), ("sentence_spans", sentence_spans)):
        for s, e in spans:
            if s > e:
                raise ValueError(f"{name} has a span with start {s} > end {e}.")
    for (s0, e0), (s1, e1) in zip(sentence_spans, sentence_spans[1:]):
        if s1 < e0:
            raise ValueError(f"sentence_spans overlap or are out of order: ({s0}, {e0}) then ({s1}, {e1}).")
    n = len(sentence_spans)
    found: set[int] = set()
    mid = 0
    for s, e in chunk_spans[:-1]:
        cut = e
        for j, (ss, se) in enumerate(sentence_spans):
            if cut <= ss:
                # In the gap before sentence j: boundary after sentence j - 1.
                if j > 0:
                    found.add(j - 1)
                break
            if cut < se:
                mid += 1
                b = j - 1 if (cut - ss) < (se - cut) else j
                if 0 <= b <= n - 2:
                    found.add(b)
                break
        # A cut at or after the last sentence's end gives no boundary.
    return sorted(found), mid
