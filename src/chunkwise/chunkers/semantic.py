"""Semantic chunking by embedding distances between neighbouring sentence windows.

The method is Greg Kamradt's "semantic splitting" (5 Levels of Text Splitting, 2024) as
implemented by LangChain's ``SemanticChunker`` (langchain-experimental 0.4.2):

1. split the text into sentences;
2. for each sentence ``i`` build a *window*: sentences ``i - buffer_size .. i + buffer_size``
   joined by a space;
3. embed every window and take the cosine distance between windows ``i`` and ``i + 1``
   (``m = n - 1`` distances for ``n`` sentences);
4. pick a threshold from the distances (percentile, standard deviation, interquartile or
   gradient rule, or from a target ``number_of_chunks``) and split after every sentence ``i``
   whose distance is strictly above it;
5. optionally carry undersized groups into the next one (``min_chunk_size``, characters).

chunkwise reproduces LangChain's chunk boundaries exactly for the same embeddings (a parity
test runs both), with these differences, all documented on :class:`SemanticChunker`:
chunks are verbatim slices of the source with exact offsets; empty or whitespace-only
"sentences" (LangChain's final ``""`` when a text ends in whitespace) are dropped before
embedding; an empty text gives ``[]``; and ``max_chunk_tokens`` adds a hard size cap.

Each step is its own function (:func:`combine_sentences`, :func:`cosine_distances`,
:func:`breakpoint_threshold`, :func:`find_breakpoints`, :func:`group_sentences`) so that a
parameter sweep embeds each distinct window once and only reruns the cheap steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from chunkwise.chunk import Chunk
from chunkwise.chunkers.base import check_embedder, check_positive_int, embed_checked
from chunkwise.text import LANGCHAIN_SENTENCE_REGEX, regex_split_sentences, split_sentences

BreakpointThresholdType = Literal["percentile", "standard_deviation", "interquartile", "gradient"]

#: Default ``breakpoint_threshold_amount`` per threshold type (LangChain's ``BREAKPOINT_DEFAULTS``).
BREAKPOINT_DEFAULTS: dict[str, float] = {
    "percentile": 95.0,
    "standard_deviation": 3.0,
    "interquartile": 1.5,
    "gradient": 95.0,
}


def _validate_threshold(
    breakpoint_threshold_type: str,
    breakpoint_threshold_amount: float | None,
    number_of_chunks: int | None,
) -> float:
    """Validate the threshold settings in one place; return the effective amount."""
    if breakpoint_threshold_type not in BREAKPOINT_DEFAULTS:
        raise ValueError(
            f"breakpoint_threshold_type must be one of {sorted(BREAKPOINT_DEFAULTS)}, "
            f"got {breakpoint_threshold_type!r}."
        )
    if breakpoint_threshold_amount is None:
        amount = BREAKPOINT_DEFAULTS[breakpoint_threshold_type]
    else:
        if isinstance(breakpoint_threshold_amount, bool) or not isinstance(
            breakpoint_threshold_amount, (int, float, np.integer, np.floating)
        ):
            raise ValueError(
                f"breakpoint_threshold_amount must be a number or None, got {breakpoint_threshold_amount!r}."
            )
        amount = float(breakpoint_threshold_amount)
        if not math.isfinite(amount):
            raise ValueError(f"breakpoint_threshold_amount must be finite, got {amount!r}.")
        if breakpoint_threshold_type in ("percentile", "gradient") and not 0 <= amount <= 100:
            raise ValueError(
                f"breakpoint_threshold_amount for {breakpoint_threshold_type!r} is a percentile and "
                f"must lie in [0, 100], got {amount!r}."
            )
    if number_of_chunks is not None:
        if isinstance(number_of_chunks, bool) or not isinstance(number_of_chunks, (int, np.integer)):
            raise ValueError(f"number_of_chunks must be a positive int or None, got {number_of_chunks!r}.")
        if number_of_chunks < 1:
            raise ValueError(f"number_of_chunks must be >= 1, got {number_of_chunks!r}.")
    return amount


def combine_sentences(sentences: Sequence[str], buffer_size: int = 1) -> list[str]:
    """Build the sentence windows that get embedded.

    Parameters
    ----------
    sentences : sequence of str, length n
    buffer_size : int, >= 0
        Number of neighbouring sentences on each side included in a window.

    Returns
    -------
    list of str, length n
        Window ``i`` is ``" ".join(sentences[max(0, i - buffer_size) : i + buffer_size + 1])``,
        exactly as LangChain's ``combine_sentences``.

    Raises
    ------
    ValueError
        If ``buffer_size`` is negative or not an int.
    """
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, (int, np.integer)) or buffer_size < 0:
        raise ValueError(f"buffer_size must be an int >= 0, got {buffer_size!r}.")
    n = len(sentences)
    return [" ".join(sentences[max(0, i - buffer_size) : i + buffer_size + 1]) for i in range(n)]


def cosine_distances(embeddings: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """Cosine distance between each consecutive pair of rows.

    Parameters
    ----------
    embeddings : array-like, shape (n, d)
        One vector per sentence window.

    Returns
    -------
    numpy.ndarray, shape (n - 1,), float64
        ``1 - cos(e_i, e_{i+1})``. A zero vector has similarity 0 (distance 1), as in
        LangChain's ``cosine_similarity``. An input with fewer than two rows gives an empty
        array.

    Raises
    ------
    ValueError
        If ``embeddings`` is not two-dimensional or contains NaN/inf.
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.size == 0:
        return np.zeros(0, dtype=np.float64)
    if e.ndim != 2:
        raise ValueError(f"embeddings must have shape (n, d), got shape {e.shape}.")
    if not np.all(np.isfinite(e)):
        raise ValueError("embeddings contain NaN or infinite values; check the embedding model's output.")
    if e.shape[0] < 2:
        return np.zeros(0, dtype=np.float64)
    norms = np.linalg.norm(e, axis=1)
    dots = np.einsum("ij,ij->i", e[:-1], e[1:])
    with np.errstate(divide="ignore", invalid="ignore"):
        sim = dots / (norms[:-1] * norms[1:])
    sim[~np.isfinite(sim)] = 0.0
    return 1.0 - sim


def breakpoint_threshold(
    distances: Sequence[float] | np.ndarray,
    breakpoint_threshold_type: BreakpointThresholdType = "percentile",
    breakpoint_threshold_amount: float | None = None,
    number_of_chunks: int | None = None,
) -> tuple[float, np.ndarray]:
    """Compute the split threshold and the array it is compared with.

    Parameters
    ----------
    distances : array-like, shape (m,)
        Cosine distances between consecutive windows (``m = n_sentences - 1``), ``m >= 1``.
    breakpoint_threshold_type : {"percentile", "standard_deviation", "interquartile", "gradient"}
        - ``percentile``: ``np.percentile(distances, amount)`` (linear interpolation);
        - ``standard_deviation``: ``mean + amount * std`` (population std);
        - ``interquartile``: ``mean + amount * (Q3 - Q1)``;
        - ``gradient``: ``np.percentile(g, amount)`` where ``g = np.gradient(distances)``;
          the compared array is then ``g``, not the distances. Needs ``m >= 2``.
    breakpoint_threshold_amount : float, optional
        Defaults per type: 95, 3, 1.5, 95 (LangChain's defaults).
    number_of_chunks : int, optional
        If given, overrides the type: the percentile is interpolated linearly from
        ``(x=m, y=0)`` to ``(x=1, y=100)`` at ``x = clip(number_of_chunks, 1, m)`` and applied to
        the distances (LangChain's ``_threshold_from_clusters``).

    Returns
    -------
    threshold : float
    compared : numpy.ndarray, shape (m,)
        A split follows sentence ``i`` when ``compared[i] > threshold``.

    Raises
    ------
    ValueError
        For unknown types, out-of-range amounts, an empty distance array, or ``gradient``
        with a single distance.
    """
    amount = _validate_threshold(breakpoint_threshold_type, breakpoint_threshold_amount, number_of_chunks)
    d = np.asarray(distances, dtype=np.float64).reshape(-1)
    if d.size == 0:
        raise ValueError(
            "No distances: a threshold needs at least two sentences. find_breakpoints() handles "
            "this case by returning []."
        )
    if not np.all(np.isfinite(d)):
        raise ValueError("distances contain NaN or infinite values.")
    if number_of_chunks is not None:
        x1, y1 = float(d.size), 0.0
        x2, y2 = 1.0, 100.0
        x = max(min(float(number_of_chunks), x1), x2)
        y = y2 if x2 == x1 else y1 + ((y2 - y1) / (x2 - x1)) * (x - x1)
        y = min(max(y, 0.0), 100.0)
        return float(np.percentile(d, y)), d
    if breakpoint_threshold_type == "percentile":
        return float(np.percentile(d, amount)), d
    if breakpoint_threshold_type == "standard_deviation":
        return float(np.mean(d) + amount * np.std(d)), d
    if breakpoint_threshold_type == "interquartile":
        q1, q3 = np.percentile(d, [25, 75])
        return float(np.mean(d) + amount * (q3 - q1)), d
    # gradient
    if d.size < 2:
        raise ValueError(
            "The gradient threshold needs at least two distances (three sentences); "
            "find_breakpoints() handles a single distance by splitting there, as LangChain does."
        )
    g = np.gradient(d, np.arange(d.size))
    return float(np.percentile(g, amount)), np.asarray(g, dtype=np.float64)


def find_breakpoints(
    distances: Sequence[float] | np.ndarray,
    breakpoint_threshold_type: BreakpointThresholdType = "percentile",
    breakpoint_threshold_amount: float | None = None,
    number_of_chunks: int | None = None,
) -> list[int]:
    """Indices of the sentences after which the text is split.

    Parameters
    ----------
    distances : array-like, shape (m,)
        Cosine distances between consecutive sentence windows (see :func:`cosine_distances`).
    breakpoint_threshold_type, breakpoint_threshold_amount, number_of_chunks
        As in :func:`breakpoint_threshold`.

    Returns
    -------
    list of int
        Sorted indices ``i`` in ``[0, m - 1]``; index ``i`` means "split after sentence ``i``".
        ``m = 0`` (one sentence) gives ``[]`` without computing any statistic. With ``gradient``
        and ``m = 1`` (two sentences) the result is ``[0]``, also when ``number_of_chunks`` is
        set: LangChain returns the two sentences as two chunks before looking at either.

    Raises
    ------
    ValueError
        For invalid settings or non-finite distances.

    Notes
    -----
    In percentile mode the number of breakpoints depends only on ``m`` and the percentile when
    the distances are distinct: ``np.percentile`` interpolates at rank ``p/100 * (m - 1)``, and
    exactly the distances ranked above it are strictly greater. With ``m = 17`` (18 sentences)
    p95, p90 and p80 give 1, 2 and 4 breakpoints, i.e. 2, 3 and 5 chunks, whatever the text.
    """
    _validate_threshold(breakpoint_threshold_type, breakpoint_threshold_amount, number_of_chunks)
    d = np.asarray(distances, dtype=np.float64).reshape(-1)
    if d.size == 0:
        return []
    if breakpoint_threshold_type == "gradient" and d.size == 1:
        if not np.all(np.isfinite(d)):
            raise ValueError("distances contain NaN or infinite values.")
        return [0]
    threshold, compared = breakpoint_threshold(
        d, breakpoint_threshold_type, breakpoint_threshold_amount, number_of_chunks
    )
    return [int(i) for i in np.flatnonzero(compared > threshold)]


def group_sentences(
    source: str,
    sentences: Sequence[Chunk],
    breakpoints: Sequence[int],
    min_chunk_size: int | None = None,
) -> list[Chunk]:
    """Group sentences into chunks at the breakpoints.

    Parameters
    ----------
    source : str
        The text the sentences were split from.
    sentences : sequence of Chunk, length n
        Sentences with spans into ``source``, in order.
    breakpoints : sequence of int
        Sorted indices in ``[0, n - 2]`` (split after sentence ``i``).
    min_chunk_size : int, optional
        Minimum chunk size in characters, measured LangChain-style on the sentences joined by
        single spaces. A group below it is not emitted but carried into the next group; the
        final group is always emitted, even when short (LangChain's rule).

    Returns
    -------
    list of Chunk
        Verbatim slices ``source[first.start:last.end]``; ``metadata`` holds
        ``sentence_start``/``sentence_end`` (half-open sentence indices) and ``joined_text``
        (LangChain's form: the sentences joined by ``" "``).

    Raises
    ------
    ValueError
        If a breakpoint is out of range.
    """
    n = len(sentences)
    if n == 0:
        return []
    for b in breakpoints:
        if not 0 <= b <= n - 1:
            raise ValueError(f"breakpoint {b} is out of range for {n} sentences (valid: 0..{n - 1}).")
    groups: list[tuple[int, int]] = []
    start = 0
    for b in breakpoints:
        end = b + 1
        if end <= start:
            continue
        if min_chunk_size is not None:
            joined_len = sum(len(s.text) for s in sentences[start:end]) + (end - start - 1)
            if joined_len < min_chunk_size:
                continue
        groups.append((start, end))
        start = end
    if start < n:
        groups.append((start, n))
    return [_make_chunk(source, sentences, s, e) for s, e in groups]


def _make_chunk(source: str, sentences: Sequence[Chunk], s: int, e: int, **extra: Any) -> Chunk:
    first, last = sentences[s], sentences[e - 1]
    joined = " ".join(x.text for x in sentences[s:e])
    meta = {"sentence_start": s, "sentence_end": e, "joined_text": joined}
    meta.update(extra)
    return Chunk(source[first.start : last.end], first.start, last.end, meta)


@dataclass
class SemanticAnalysis:
    """Everything :meth:`SemanticChunker.analyze` computed for one text (for plots and teaching).

    Attributes
    ----------
    sentences : list of Chunk, length n
    windows : list of str, length n
    distances : numpy.ndarray, shape (n - 1,)
    threshold : float or None
        None when no threshold was computed (n <= 1, or gradient with n == 2).
    compared : numpy.ndarray, shape (n - 1,)
        The array compared with the threshold (the distances, or their gradient).
    breakpoints : list of int
    chunks : list of Chunk
    """

    sentences: list[Chunk]
    windows: list[str]
    distances: np.ndarray
    threshold: float | None
    compared: np.ndarray
    breakpoints: list[int]
    chunks: list[Chunk] = field(default_factory=list)


class SemanticChunker:
    """Split text where the meaning shifts, LangChain-compatible.

    Parameters
    ----------
    embedder : Embedder
        Any object with ``embed(texts) -> np.ndarray`` of shape ``(len(texts), d)``
        (see :mod:`chunkwise.embeddings`).
    buffer_size : int, default 1
        Sentences on each side of a sentence in its embedded window.
    breakpoint_threshold_type : {"percentile", "standard_deviation", "interquartile", "gradient"}
    breakpoint_threshold_amount : float, optional
        Defaults 95 / 3 / 1.5 / 95 by type (LangChain's).
    number_of_chunks : int, optional
        Target number of chunks; overrides the threshold type (LangChain's interpolation).
    min_chunk_size : int, optional
        Minimum chunk size in characters (LangChain's rule: an undersized group is carried into
        the next one; the last group is always emitted).
    sentence_split_regex : str or None, default LangChain's ``(?<=[.?!])\\s+``
        Sentences are the pieces of ``re.split(sentence_split_regex, text)``; empty or
        whitespace-only pieces are dropped. ``None`` uses
        :func:`chunkwise.text.split_sentences` in ``"robust"`` mode (keeps "9 a.m." whole).
    max_chunk_tokens : int, optional
        chunkwise's addition: a hard cap in tokens of ``encoding_name``. A chunk above it is
        cut at sentence boundaries, a sentence above it at whitespace, and a word above it at
        token boundaries, so every chunk is <= the cap.
    encoding_name : str, default "cl100k_base"
        tiktoken encoding that counts tokens for ``max_chunk_tokens``.

    Notes
    -----
    Differences from langchain-experimental 0.4.2's ``SemanticChunker``, which otherwise gives
    the same chunk boundaries for the same embeddings:

    - ``split`` returns :class:`Chunk` objects that are verbatim slices of the source (a
      newline between sentences stays a newline); :meth:`split_text` returns LangChain's
      strings (sentences joined by one space).
    - Empty/whitespace-only pieces are not sentences: ``"a. b.\\n"`` has two sentences here,
      three (the last ``""``) in LangChain, and ``""`` gives ``[]`` instead of ``[""]``.
    - One sentence returns at once without calling the embedder (as LangChain) but still obeys
      ``max_chunk_tokens``.

    References
    ----------
    G. Kamradt, "5 Levels of Text Splitting" (2024); LangChain,
    ``langchain_experimental.text_splitter.SemanticChunker`` (v0.4.2).
    """

    def __init__(
        self,
        embedder: Any,
        buffer_size: int = 1,
        breakpoint_threshold_type: BreakpointThresholdType = "percentile",
        breakpoint_threshold_amount: float | None = None,
        number_of_chunks: int | None = None,
        min_chunk_size: int | None = None,
        sentence_split_regex: str | None = LANGCHAIN_SENTENCE_REGEX,
        max_chunk_tokens: int | None = None,
        encoding_name: str = "cl100k_base",
    ) -> None:
        check_embedder(embedder)
        combine_sentences([], buffer_size)  # validates buffer_size
        self.breakpoint_threshold_amount = _validate_threshold(
            breakpoint_threshold_type, breakpoint_threshold_amount, number_of_chunks
        )
        if min_chunk_size is not None:
            check_positive_int("min_chunk_size", min_chunk_size, "characters; or None")
        if max_chunk_tokens is not None:
            check_positive_int("max_chunk_tokens", max_chunk_tokens, "tokens; or None")
            from chunkwise.tokens import get_encoding

            get_encoding(encoding_name)  # an unknown encoding fails here, not in split()
        if sentence_split_regex is not None:
            regex_split_sentences("", sentence_split_regex)  # validates the pattern
        self.embedder = embedder
        self.buffer_size = int(buffer_size)
        self.breakpoint_threshold_type = breakpoint_threshold_type
        self.number_of_chunks = number_of_chunks
        self.min_chunk_size = min_chunk_size
        self.sentence_split_regex = sentence_split_regex
        self.max_chunk_tokens = max_chunk_tokens
        self.encoding_name = encoding_name

    # -- steps ---------------------------------------------------------------------------
    def sentences(self, text: str) -> list[Chunk]:
        """Split ``text`` into non-empty sentences with spans (see the class Notes)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        _check_embeddable(text)
        if self.sentence_split_regex is None:
            return split_sentences(text, mode="robust")
        return regex_split_sentences(text, self.sentence_split_regex, drop_empty=True)

    def embed_windows(self, windows: Sequence[str]) -> np.ndarray:
        """Embed the windows and check that one vector came back per window."""
        return embed_checked(self.embedder, windows)

    def analyze(self, text: str) -> SemanticAnalysis:
        """Run every step and keep the intermediate results.

        Returns
        -------
        SemanticAnalysis
            Sentences, windows, distances (shape (n - 1,)), threshold, compared array,
            breakpoints and the final chunks (after ``min_chunk_size`` and ``max_chunk_tokens``).
        """
        sents = self.sentences(text)
        n = len(sents)
        empty = np.zeros(0, dtype=np.float64)
        if n <= 1:
            chunks = group_sentences(text, sents, [])
            return SemanticAnalysis(sents, [s.text for s in sents], empty, None, empty, [], self._cap(text, sents, chunks))
        if self.breakpoint_threshold_type == "gradient" and n == 2:
            chunks = group_sentences(text, sents, [0])
            return SemanticAnalysis(sents, [s.text for s in sents], empty, None, empty, [0], self._cap(text, sents, chunks))
        windows = combine_sentences([s.text for s in sents], self.buffer_size)
        distances = cosine_distances(self.embed_windows(windows))
        threshold, compared = breakpoint_threshold(
            distances, self.breakpoint_threshold_type, self.breakpoint_threshold_amount, self.number_of_chunks
        )
        bps = [int(i) for i in np.flatnonzero(compared > threshold)]
        chunks = group_sentences(text, sents, bps, self.min_chunk_size)
        return SemanticAnalysis(sents, windows, distances, threshold, compared, bps, self._cap(text, sents, chunks))

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` into semantic chunks.

        Parameters
        ----------
        text : str

        Returns
        -------
        list of Chunk
            Verbatim slices of ``text`` with character offsets, in order, covering every
            sentence exactly once. ``[]`` for an empty or whitespace-only text (no embedder call).

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        ValueError
            If ``text`` holds a lone surrogate code point (checked before anything is embedded),
            or the embedder returns a wrong number of vectors or non-finite values.
        """
        return self.analyze(text).chunks

    def split_text(self, text: str) -> list[str]:
        """LangChain's output form: each chunk's sentences joined by a single space."""
        return [c.metadata["joined_text"] for c in self.split(text)]

    # -- hard cap --------------------------------------------------------------------------
    def _cap(self, source: str, sentences: Sequence[Chunk], chunks: list[Chunk]) -> list[Chunk]:
        if self.max_chunk_tokens is None:
            return chunks
        return cap_chunks(source, sentences, chunks, self.max_chunk_tokens, self.encoding_name)


def cap_chunks(
    source: str,
    sentences: Sequence[Chunk],
    chunks: Sequence[Chunk],
    max_tokens: int,
    encoding_name: str = "cl100k_base",
) -> list[Chunk]:
    """Cut every chunk longer than ``max_tokens`` tokens: at sentences, then whitespace, then tokens.

    Parameters
    ----------
    source : str
    sentences : sequence of Chunk
        The sentences the chunks were grouped from (their spans).
    chunks : sequence of Chunk
        Chunks carrying ``sentence_start``/``sentence_end`` metadata.
    max_tokens : int
        The cap in tokens of ``encoding_name`` (tiktoken), counted on the verbatim slice.
    encoding_name : str

    Returns
    -------
    list of Chunk
        Every chunk has at most ``max_tokens`` tokens (a single character that alone exceeds
        the cap is emitted alone); pieces keep exact offsets. Pieces cut from one chunk carry
        ``metadata["capped"] = True`` and the parent's sentence range; their ``joined_text`` is
        the verbatim slice.
    """
    from chunkwise.tokens import count_tokens, get_encoding

    def ntok(s: int, e: int) -> int:
        return count_tokens(source[s:e], encoding_name)

    out: list[Chunk] = []
    for c in chunks:
        if ntok(c.start, c.end) <= max_tokens:
            out.append(c)
            continue
        s0 = c.metadata.get("sentence_start", 0)
        s1 = c.metadata.get("sentence_end", 0)
        units: list[tuple[int, int]] = [(s.start, s.end) for s in sentences[s0:s1]] or [(c.start, c.end)]
        # Break units that are too long on their own: first at whitespace, then at tokens.
        fine: list[tuple[int, int]] = []
        for us, ue in units:
            if ntok(us, ue) <= max_tokens:
                fine.append((us, ue))
                continue
            for ws, we in _word_spans(source, us, ue):
                if ntok(ws, we) <= max_tokens:
                    fine.append((ws, we))
                else:
                    fine.extend(_token_pieces(source, ws, we, max_tokens, get_encoding(encoding_name)))
        # Greedy packing of consecutive units while the slice stays within the cap.
        def piece(s: int, e: int) -> Chunk:
            meta = {"capped": True, "parent_sentence_start": s0, "parent_sentence_end": s1,
                    "joined_text": source[s:e]}
            return Chunk(source[s:e], s, e, meta)

        cur_s, cur_e = fine[0]
        for us, ue in fine[1:]:
            if ntok(cur_s, ue) <= max_tokens:
                cur_e = ue
            else:
                out.append(piece(cur_s, cur_e))
                cur_s, cur_e = us, ue
        out.append(piece(cur_s, cur_e))
    return out


def _word_spans(source: str, start: int, end: int) -> list[tuple[int, int]]:
    import re

    return [(m.start() + start, m.end() + start) for m in re.finditer(r"\S+", source[start:end])]


def _token_pieces(source: str, start: int, end: int, max_tokens: int, enc: Any) -> list[tuple[int, int]]:
    """Cut ``source[start:end]`` (no whitespace inside) into pieces of <= max_tokens tokens at char edges."""
    pieces: list[tuple[int, int]] = []
    s = start

    def fits(e: int) -> bool:
        return len(enc.encode(source[s:e], disallowed_special=())) <= max_tokens

    while s < end:
        # Largest e with count <= max_tokens (at least one character). Gallop first so that each
        # probe encodes at most about twice the piece, not the whole rest of the text.
        width = max(4 * max_tokens, 16)
        hi = min(end, s + width)
        while hi < end and fits(hi):
            width *= 2
            hi = min(end, s + width)
        lo = s + 1
        best = s + 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(mid):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        pieces.append((s, best))
        s = best
    return pieces


def _check_embeddable(text: str) -> None:
    """Raise ValueError if ``text`` holds a lone surrogate code point, which no embedding
    model's tokenizer can encode (it has no UTF-8 form); the message gives its position."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"The text holds a lone surrogate code point {text[exc.start]!r} at character "
            f"{exc.start}; it is not valid Unicode text (it has no UTF-8 form), so the embedding "
            "model's tokenizer cannot encode it. Decode the source with errors='replace' (or fix "
            "it) first."
        ) from None


class MemoEmbedder:
    """Wrap an embedder with an in-memory memo so that each distinct text is embedded once.

    Used by :func:`semantic_sweep`; independent of any on-disk cache the wrapped embedder has.

    Parameters
    ----------
    embedder : Embedder
        Anything with ``embed(texts) -> np.ndarray`` of shape ``(len(texts), d)``.

    Attributes
    ----------
    n_embedded : int
        Texts passed on to ``embedder`` (each distinct text at most once).
    n_requested : int
        Texts asked for, duplicates included.
    """

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.name = getattr(embedder, "name", type(embedder).__name__)
        self._memo: dict[str, np.ndarray] = {}
        self.n_embedded = 0
        self.n_requested = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        self.n_requested += len(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            vectors = np.asarray(self.embedder.embed(missing))
            if vectors.ndim != 2 or vectors.shape[0] != len(missing):
                raise ValueError(
                    f"The embedder returned shape {vectors.shape} for {len(missing)} texts; "
                    "it must return one row per text."
                )
            self.n_embedded += len(missing)
            self._memo.update(zip(missing, vectors))
        if not texts:
            return np.zeros((0, 0))
        return np.stack([self._memo[t] for t in texts])


def semantic_sweep(
    text: str,
    embedder: Any,
    settings: Sequence[dict[str, Any]],
) -> list[tuple[dict[str, Any], SemanticAnalysis]]:
    """Run :class:`SemanticChunker` once per setting, embedding each distinct window only once.

    Parameters
    ----------
    text : str
    embedder : Embedder
        Wrapped in a :class:`MemoEmbedder` (pass a ``MemoEmbedder`` yourself to share it
        across texts or read its counters).
    settings : sequence of dict
        Keyword arguments for :class:`SemanticChunker` (everything except ``embedder``).

    Returns
    -------
    list of (dict, SemanticAnalysis)
        One pair per setting, in order.

    Raises
    ------
    ValueError, TypeError
        As :class:`SemanticChunker` for an invalid setting (raised before anything is embedded).
    """
    memo = embedder if isinstance(embedder, MemoEmbedder) else MemoEmbedder(embedder)
    chunkers = [SemanticChunker(memo, **dict(s)) for s in settings]  # validate all first
    return [(dict(s), c.analyze(text)) for s, c in zip(settings, chunkers)]
