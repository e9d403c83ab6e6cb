"""Recursive separator splitting (LangChain / Chroma style) with exact character offsets."""

from __future__ import annotations

import functools
import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from chunkwise.chunkers.base import Chunk, check_size_overlap
from chunkwise.tokens import DEFAULT_ENCODING, count_tokens, get_encoding

__all__ = ["DEFAULT_SEPARATORS", "RecursiveTokenChunker"]

#: Separators of Chroma's ``RecursiveTokenChunker`` as used in its technical report:
#: paragraphs, lines, sentence punctuation, spaces, then single characters.
DEFAULT_SEPARATORS: tuple[str, ...] = ("\n\n", "\n", ".", "?", "!", " ", "")

KeepSeparator = Literal["start", "end", False]


class RecursiveTokenChunker:
    """Split on the coarsest separator present, merge the pieces up to ``chunk_size``, and
    split again with finer separators only the pieces that are still too big.

    This is the recursive character splitting of LangChain's
    ``RecursiveCharacterTextSplitter`` and of Chroma's ``RecursiveTokenChunker`` (the
    "Recursive" rows of the Chroma technical report), written so that every chunk carries
    its exact character span in the source.

    For a text and a list of separators:

    1. take the first separator that occurs in the text (a literal string, or a regular
       expression if ``is_separator_regex``); the empty separator ``""`` always "occurs"
       and cuts the text into single characters. If none occurs, the last one is used
       (which leaves the text whole). The separators after the chosen one are the
       *finer* separators;
    2. cut the text at every match into *pieces*. With ``keep_separator="end"`` each
       match stays at the end of the piece before it (``"Kites fly."``), with ``"start"``
       at the start of the piece after it (``". Boats sail"``), with ``False`` it is
       left out of the pieces (but see below). Empty pieces are dropped;
    3. walk the pieces in order. A piece whose length is below ``chunk_size`` is
       *good* (strictly below, LangChain's rule: a piece of exactly ``chunk_size`` is
       split again); runs of good pieces are merged: a chunk takes pieces while its length
       stays ``<= chunk_size``; the next chunk starts with the last pieces of the previous
       one whose length is at most ``chunk_overlap`` (and that leave room for the next
       piece). A piece of length ``>= chunk_size`` ends the current run and is split
       again with the finer separators (step 1), or, if there are none left, emitted as a
       chunk of its own.

    The length of a chunk is the sum of the lengths of its pieces and, with
    ``keep_separator=False``, of the separator text between them -- so a merged chunk is
    always the verbatim slice ``source[start:end]``, separators re-inserted as they
    were matched in the source (never the pattern; bug case B17).

    Parameters
    ----------
    chunk_size : int, default 4000
        Largest chunk length, ``>= 1``, in the units of ``length_function``: tokens of
        ``encoding_name`` by default, characters with ``length_function=len``.
    chunk_overlap : int, default 200
        Largest length shared by consecutive chunks of one run of good pieces,
        ``0 <= chunk_overlap < chunk_size``. Overlap is made of whole pieces.
    separators : sequence of str, optional
        Separators from coarsest to finest. Default :data:`DEFAULT_SEPARATORS`
        ``["\\n\\n", "\\n", ".", "?", "!", " ", ""]`` (Chroma's). Include ``""`` last to
        guarantee that every chunk fits (see Notes).
    keep_separator : {"end", "start", False} or bool, default "end"
        Where a matched separator goes: ``"end"`` keeps it with the text before it, so
        sentence punctuation stays with its sentence (bug case B18); ``"start"`` glues it
        to the start of the next piece; ``False`` leaves it out of the pieces (it is still
        inside a merged chunk, between pieces, as in the source). ``True`` means
        ``"start"``, as in LangChain and Chroma (whose default it is).
    is_separator_regex : bool, default False
        Treat the separators as regular expressions. Otherwise they are literal strings
        and are escaped with :func:`re.escape` (bug case B17: ``". "`` does not match
        ``"d "``).
    length_function : callable, optional
        ``str -> int``, the length used for ``chunk_size`` and ``chunk_overlap``, e.g.
        ``len`` for characters. Must return an integer ``>= 0`` (0 is fine, e.g. a word
        counter on whitespace). Default: number of tiktoken tokens of ``encoding_name``
        (:func:`chunkwise.tokens.count_tokens`; special-token strings counted as text, as
        Chroma's ``disallowed_special=()`` does).
    encoding_name : str, default "cl100k_base"
        tiktoken encoding of the default length function; ignored when
        ``length_function`` is given.
    strip_whitespace : bool, default True
        Trim leading and trailing whitespace from every chunk -- merged chunks and
        oversized unsplittable pieces alike (bug case B19). The span is the trimmed span,
        so the chunk is still an exact slice.

    Attributes
    ----------
    separators : tuple of str
    keep_separator : {"start", "end", False}
        The normalised setting (``True`` becomes ``"start"``).
    length_function : callable
        The length in use.

    Raises
    ------
    ValueError
        If ``chunk_size`` is not an int ``>= 1``, ``chunk_overlap`` is not an int in
        ``[0, chunk_size - 1]`` (bug case B12), ``keep_separator`` is not one of the
        accepted values, ``separators`` is empty or holds a non-string, a separator is not a
        valid regular expression (with ``is_separator_regex=True``), ``length_function``
        is not callable, or ``encoding_name`` is unknown to tiktoken.
    RuntimeError
        If the tiktoken encoding cannot be loaded offline (set ``TIKTOKEN_CACHE_DIR``).

    Notes
    -----
    **Reproducing the Chroma report.** Chroma's ``RecursiveTokenChunker`` (and
    LangChain's ``RecursiveCharacterTextSplitter``) default to ``keep_separator=True``,
    which in both libraries means ``"start"``: the ``"."`` of a sentence is glued to the
    start of the next chunk (``["Kites fly", ". Boats sail", ". Trains run."]``). The
    report's numbers were produced that way, with the default separators above and
    lengths in ``cl100k_base`` tokens; use
    ``RecursiveTokenChunker(size, overlap, keep_separator="start")`` to reproduce them
    (a test checks that this gives LangChain's chunks, which are Chroma's, on the
    ``state_of_the_union`` corpus at 200/0 and 400/200 tokens).
    chunkwise's default ``"end"`` keeps the punctuation with its sentence
    (``["Kites fly.", "Boats sail.", "Trains run."]``).

    **Size guarantee.** Every chunk has ``length_function(chunk.text) <= chunk_size``,
    overlap included (bug case B12), except a single piece that cannot be split further:
    a piece that contains none of the remaining separators (``"extraordinarily"`` when
    the separators end at ``" "``), or a single character whose own length exceeds the
    size (an emoji is 3 ``cl100k_base`` tokens). Such a piece is emitted alone, whole and
    trimmed. Lengths are added up piece by piece, as LangChain does; since a token count
    is not exactly additive, each chunk is measured once more as a whole and, in the rare
    case it is over the size, shortened by whole pieces (overlap pieces first).

    **No recursion blow-up.** Each level of recursion uses a strictly shorter separator
    list, so the depth is at most ``len(separators)``; ``""`` splits into characters and
    a character is never split again.

    **Differences from LangChain** (``langchain-text-splitters`` 1.x), all deliberate:

    - chunks are :class:`~chunkwise.chunk.Chunk` objects with exact spans, never text
      rebuilt by joining (LangChain joins pieces with the separator *pattern* when
      ``keep_separator=False``, and drops repeated separators, bug cases B16/B17);
    - with ``keep_separator=False`` the separator text between pieces is measured as it
      is in the source (two ``"\\n"`` between pieces count 2, not 1);
    - oversized unsplittable pieces are trimmed like every other chunk (B19);
    - whitespace-only chunks are never emitted (also with ``strip_whitespace=False``),
      and an overlapping chunk that adds no non-whitespace text to the previous chunk
      (its trimmed span lies inside the previous one) is dropped; ``""`` and
      whitespace-only texts give ``[]`` (B20);
    - a chunk whose pieces add up to at most ``chunk_size`` but that measures more as a
      whole (possible with tokens, never with ``len``) is shortened; LangChain emits it;
    - a regular-expression separator with capture groups splits the same way as without
      them (LangChain's ``re.split`` would interleave the groups into the pieces).

    With ``length_function=len`` and ``keep_separator`` ``"start"`` or ``"end"``, the
    chunk texts otherwise equal LangChain's ``split_text`` output (a test checks this).

    References
    ----------
    .. [1] LangChain, ``RecursiveCharacterTextSplitter``,
       https://python.langchain.com/docs/how_to/recursive_text_splitter/
    .. [2] Smith, B. and Troynikov, A. (2024). *Evaluating Chunking Strategies for
       Retrieval*. Chroma Technical Report. https://research.trychroma.com/evaluating-chunking
       (code: github.com/brandonstarxel/chunking_evaluation, ``RecursiveTokenChunker``).

    Examples
    --------
    >>> chunker = RecursiveTokenChunker(13, 0, length_function=len)
    >>> [c.text for c in chunker.split("Kites fly. Boats sail. Trains run.")]
    ['Kites fly.', 'Boats sail.', 'Trains run.']
    >>> chunker.split("Kites fly. Boats sail. Trains run.")[1].span
    (11, 22)
    >>> chroma = RecursiveTokenChunker(13, 0, keep_separator="start", length_function=len)
    >>> [c.text for c in chroma.split("Kites fly. Boats sail. Trains run.")]
    ['Kites fly', '. Boats sail', '. Trains run.']
    """

    def __init__(
        self,
        chunk_size: int = 4000,
        chunk_overlap: int = 200,
        separators: Sequence[str] | None = None,
        keep_separator: KeepSeparator | bool = "end",
        is_separator_regex: bool = False,
        length_function: Callable[[str], int] | None = None,
        encoding_name: str = DEFAULT_ENCODING,
        strip_whitespace: bool = True,
    ) -> None:
        (
            self.chunk_size,
            self.chunk_overlap,
            self.separators,
            self.keep_separator,
            self._patterns,
        ) = self._validate(chunk_size, chunk_overlap, separators, keep_separator, is_separator_regex)
        if length_function is not None and not callable(length_function):
            raise ValueError(
                f"length_function must be a callable str -> int or None, got {length_function!r}."
            )
        self.is_separator_regex = bool(is_separator_regex)
        self.strip_whitespace = bool(strip_whitespace)
        self.encoding_name = encoding_name
        self._counts_tokens = length_function is None
        if length_function is None:
            get_encoding(encoding_name)  # fail now, not in the middle of a split
            length_function = functools.partial(count_tokens, encoding_name=encoding_name)
        self.length_function: Callable[[str], int] = length_function

    @staticmethod
    def _validate(
        chunk_size: Any,
        chunk_overlap: Any,
        separators: Any,
        keep_separator: Any,
        is_separator_regex: Any,
    ) -> tuple[int, int, tuple[str, ...], KeepSeparator, list[re.Pattern[str] | None]]:
        chunk_size, chunk_overlap = check_size_overlap(
            chunk_size, chunk_overlap, "in units of the length function"
        )

        if keep_separator is True:
            keep: KeepSeparator = "start"
        elif keep_separator is False or keep_separator is None:
            keep = False
        elif keep_separator in ("start", "end"):
            keep = keep_separator
        else:
            raise ValueError(
                f"keep_separator must be 'end', 'start', False or True (= 'start'), got {keep_separator!r}."
            )

        if separators is None:
            seps = DEFAULT_SEPARATORS
        else:
            if isinstance(separators, str):
                raise ValueError(
                    f"separators must be a list of strings, not a single string ({separators!r}); "
                    f"write [{separators!r}]."
                )
            seps = tuple(separators)
            if not seps:
                raise ValueError("separators must hold at least one separator; pass None for the default.")
            for s in seps:
                if not isinstance(s, str):
                    raise ValueError(f"every separator must be a str, got {s!r} ({type(s).__name__}).")

        patterns: list[re.Pattern[str] | None] = []
        for s in seps:
            if s == "":
                patterns.append(None)  # "" means: split into characters
                continue
            try:
                patterns.append(re.compile(s if is_separator_regex else re.escape(s)))
            except re.error as exc:
                raise ValueError(
                    f"separator {s!r} is not a valid regular expression ({exc}); "
                    "pass is_separator_regex=False to use it literally."
                ) from None
        return chunk_size, chunk_overlap, seps, keep, patterns

    def __repr__(self) -> str:
        length = f"tokens({self.encoding_name!r})" if self._counts_tokens else repr(self.length_function)
        return (
            f"RecursiveTokenChunker(chunk_size={self.chunk_size}, chunk_overlap={self.chunk_overlap}, "
            f"separators={list(self.separators)!r}, keep_separator={self.keep_separator!r}, "
            f"is_separator_regex={self.is_separator_regex}, length={length}, "
            f"strip_whitespace={self.strip_whitespace})"
        )

    # -----------------------------------------------------------------------------------
    # Public API
    # -----------------------------------------------------------------------------------

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` recursively into chunks of at most ``chunk_size``.

        Parameters
        ----------
        text : str
            The source text.

        Returns
        -------
        list of Chunk
            In source order: starts never decrease and ends strictly increase; each chunk is
            ``text[start:end]``. ``metadata["length"]`` is ``length_function(chunk.text)``;
            with the default token length, ``metadata`` also holds ``"n_tokens"`` (the same
            number) and ``"tokenizer"`` (the encoding name). ``""`` and whitespace-only
            texts give ``[]``.

        Raises
        ------
        TypeError
            If ``text`` is not a ``str``.
        ValueError
            If ``length_function`` returns a negative number or a non-integer.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        if not text or text.isspace():
            return []
        out: list[Chunk] = []
        self._split_span(text, 0, len(text), 0, out)
        return out

    # -----------------------------------------------------------------------------------
    # Internals
    # -----------------------------------------------------------------------------------

    def _length(self, piece: str) -> int:
        if not piece:
            return 0
        n = self.length_function(piece)
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
            raise ValueError(f"length_function must return an int >= 0, got {n!r} for {piece[:40]!r}.")
        return int(n)

    def _pieces(self, text: str, start: int, end: int, level: int) -> tuple[list[tuple[int, int]], int]:
        """Cut ``text[start:end]`` at the first separator (from ``level`` on) that occurs.

        Returns the non-empty piece spans (absolute offsets) and the level of the finer
        separators (``len(separators)`` when none is left).
        """
        n_seps = len(self.separators)
        sub = text[start:end]
        # LangChain's rule: the first separator that occurs; "" always occurs; if none
        # occurs, the last one (which then leaves the text whole). Finer separators are the
        # ones after the chosen one; none after "" or the fallback.
        pattern, finer = self._patterns[-1], n_seps
        for i in range(level, n_seps):
            p = self._patterns[i]
            if p is None:
                pattern = None
                break
            if p.search(sub):
                pattern, finer = p, i + 1
                break
        if pattern is None:  # "" separator: single characters
            return [(start + i, start + i + 1) for i in range(len(sub))], n_seps

        # Matches as re.split sees them (finditer and split share the scanner, so empty
        # matches are handled alike); pieces are the text between/around them.
        bounds = [(m.start(), m.end()) for m in pattern.finditer(sub)]
        cuts: list[tuple[int, int]] = []
        if self.keep_separator == "end":
            prev = 0
            for _, me in bounds:
                cuts.append((prev, me))
                prev = me
            cuts.append((prev, len(sub)))
        elif self.keep_separator == "start":
            prev = 0
            for ms, _ in bounds:
                cuts.append((prev, ms))
                prev = ms
            cuts.append((prev, len(sub)))
        else:
            prev = 0
            for ms, me in bounds:
                cuts.append((prev, ms))
                prev = me
            cuts.append((prev, len(sub)))
        return [(start + a, start + b) for a, b in cuts if b > a], finer

    def _split_span(self, text: str, start: int, end: int, level: int, out: list[Chunk]) -> None:
        pieces, finer = self._pieces(text, start, end, level)
        size = self.chunk_size
        good: list[tuple[int, int]] = []
        good_len: list[int] = []
        for s, e in pieces:
            n = self._length(text[s:e])
            if n < size:
                good.append((s, e))
                good_len.append(n)
                continue
            if good:
                self._merge(text, good, good_len, out)
                good, good_len = [], []
            if finer < len(self.separators):
                self._split_span(text, s, e, finer, out)
            else:
                self._emit_window(text, [(s, e)], 0, 1, 0, out)
        if good:
            self._merge(text, good, good_len, out)

    def _merge(self, text: str, pieces: list[tuple[int, int]], lengths: list[int], out: list[Chunk]) -> None:
        """Greedy merge of consecutive small pieces into windows with overlap."""
        n = len(pieces)
        gaps = [0] * n  # length of the source text between piece i and piece i + 1
        for i in range(n - 1):
            gs, ge = pieces[i][1], pieces[i + 1][0]
            if ge > gs:
                gaps[i] = self._length(text[gs:ge])
        cum = [0] * (n + 1)
        for i in range(n):
            cum[i + 1] = cum[i] + lengths[i] + gaps[i]

        def total(lo: int, hi: int) -> int:
            """Additive length of the window of pieces [lo, hi)."""
            return cum[hi] - cum[lo] - gaps[hi - 1] if hi > lo else 0

        size, overlap = self.chunk_size, self.chunk_overlap
        lo = hi = 0  # current window: pieces [lo, hi); pieces [0, hi) already in chunks
        while True:
            covered = hi
            hi += 1  # the first piece not yet in any chunk always joins
            while hi < n and total(lo, hi + 1) <= size:
                hi += 1
            lo, hi = self._emit_window(text, pieces, lo, hi, covered, out)
            if hi >= n:
                return
            # Keep the tail of the window as overlap: drop pieces from the front while the
            # window is longer than the overlap, or too long to take the next piece.
            while lo < hi and (
                total(lo, hi) > overlap or (total(lo, hi + 1) > size and total(lo, hi) > 0)
            ):
                lo += 1

    def _emit_window(
        self,
        text: str,
        pieces: list[tuple[int, int]],
        lo: int,
        hi: int,
        covered: int,
        out: list[Chunk],
    ) -> tuple[int, int]:
        """Emit pieces ``[lo, hi)`` as one chunk (trimmed) and return the window used.

        If the whole chunk measures more than ``chunk_size`` (a length that is not exactly
        additive, e.g. tokens), pieces are dropped -- first overlap pieces (those before
        ``covered``), then pieces from the end -- until it fits or one piece is left. The
        returned window always ends after ``covered``, so merging always advances.
        """
        size = self.chunk_size
        while True:
            start, end = pieces[lo][0], pieces[hi - 1][1]
            chunk_text = text[start:end]
            if chunk_text.isspace():
                return lo, hi  # whitespace-only chunks are never emitted
            s, e = start, end
            if self.strip_whitespace:
                s += len(chunk_text) - len(chunk_text.lstrip())
                e -= len(chunk_text) - len(chunk_text.rstrip())
            n = self._length(text[s:e])
            if n <= size or hi - lo == 1:
                break
            if lo < covered:
                lo += 1
            else:
                hi -= 1
        if out and out[-1].end >= e and out[-1].start <= s:
            return lo, hi  # adds nothing the previous chunk does not hold
        meta: dict[str, Any] = {"length": n}
        if self._counts_tokens:
            meta["n_tokens"] = n
            meta["tokenizer"] = self.encoding_name
        out.append(Chunk(text[s:e], s, e, meta))
        return lo, hi
