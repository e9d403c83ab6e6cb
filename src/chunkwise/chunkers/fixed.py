"""Fixed-size token windows with overlap, with exact character offsets."""

from __future__ import annotations

import bisect
from itertools import accumulate
from typing import Any

from chunkwise.chunkers.base import Chunk, check_size_overlap
from chunkwise.tokens import DEFAULT_ENCODING, TokenSpanner, as_spanner

__all__ = ["FixedTokenChunker"]


class FixedTokenChunker:
    """Cut a text into windows of ``chunk_size`` tokens, a new window every
    ``chunk_size - chunk_overlap`` tokens.

    This is the fixed-size baseline of the Chroma technical report (Smith & Troynikov,
    2024), same windows as their ``FixedTokenChunker``: windows start at tokens
    ``0, step, 2*step, ...`` with ``step = chunk_size - chunk_overlap``; the last window
    ends at the last token and no window starts after it. A text of ``n`` tokens (each a
    whole number of characters) gives ``0`` windows if ``n == 0``, one if
    ``n <= chunk_size`` and ``1 + ceil((n - chunk_size) / step)`` otherwise.

    Unlike a decode of token windows, each chunk is an exact slice of the source: its text
    is ``source[start:end]`` from the first character of its first token to the last
    character of its last token. With tiktoken, a word's leading space is inside its token,
    so it is inside the chunk, just as Chroma's decoded windows have it.

    Parameters
    ----------
    chunk_size : int
        Window length in tokens, ``>= 1``.
    chunk_overlap : int, default 0
        Tokens shared by consecutive windows, ``0 <= chunk_overlap < chunk_size``.
    encoding_name : str, default "cl100k_base"
        tiktoken encoding used when ``tokenizer`` is None.
    tokenizer : TokenSpanner, tiktoken-like object or str, optional
        Anything :func:`chunkwise.tokens.as_spanner` accepts: a spanner such as
        :class:`~chunkwise.tokens.WhitespaceSpanner`, an object with ``encode`` and
        ``decode_single_token_bytes``, or an encoding name. Overrides ``encoding_name``.

    Attributes
    ----------
    spanner : TokenSpanner
        The tokenizer in use; ``spanner.name`` is recorded in each chunk's metadata.

    Raises
    ------
    ValueError
        If ``chunk_size`` is not an int ``>= 1``, or ``chunk_overlap`` is not an int in
        ``[0, chunk_size - 1]`` (an overlap equal to the size would never advance). The
        message names the value and the accepted range.
    TypeError
        If the tokenizer is of an unknown kind.
    RuntimeError
        If the tiktoken encoding cannot be loaded offline (set ``TIKTOKEN_CACHE_DIR``).

    Notes
    -----
    **Units and character edges.** Sizes are counted in tokens of the chosen tokenizer.
    A byte-level tokenizer may end a token inside a multi-byte character (Chinese, emoji);
    such tokens are grouped with the next ones into *units* that are whole characters (see
    :mod:`chunkwise.tokens`).
    Windows are built from whole units: a window takes as many units as fit in
    ``chunk_size`` tokens, and the next window starts at the first unit that leaves at most
    ``chunk_overlap`` tokens shared with the previous window and leaves room for the first
    unit not yet covered (so every window reaches further than the one before).
    When every unit is one token -- English text with tiktoken -- this is exactly the
    token-window rule above. A single unit bigger than ``chunk_size`` (an emoji of 3 tokens
    with ``chunk_size=1``) becomes a chunk on its own; nothing recurses and nothing is cut.

    Guarantees: ``chunk.text == source[chunk.start:chunk.end]``; chunks are in source order
    (each starts and ends later than the one before) and cover every token; a chunk holds
    at most ``chunk_size`` tokens unless it is one oversized unit; consecutive chunks share
    at most ``chunk_overlap`` tokens.

    References
    ----------
    .. [1] Smith, B. and Troynikov, A. (2024). *Evaluating Chunking Strategies for
       Retrieval*. Chroma Technical Report. https://research.trychroma.com/evaluating-chunking
       (code: github.com/brandonstarxel/chunking_evaluation, ``FixedTokenChunker``).

    Examples
    --------
    >>> from chunkwise.tokens import WhitespaceSpanner
    >>> chunker = FixedTokenChunker(3, 1, tokenizer=WhitespaceSpanner())
    >>> [c.text for c in chunker.split("a bb ccc dd e")]
    ['a bb ccc', 'ccc dd e']
    >>> chunker.split("a bb ccc dd e")[1].span
    (5, 13)
    """

    def __init__(
        self,
        chunk_size: int,
        chunk_overlap: int = 0,
        encoding_name: str = DEFAULT_ENCODING,
        tokenizer: Any = None,
    ) -> None:
        self.chunk_size, self.chunk_overlap = check_size_overlap(chunk_size, chunk_overlap, "tokens")
        self.encoding_name = encoding_name
        self.spanner: TokenSpanner = as_spanner(tokenizer, encoding_name)

    def __repr__(self) -> str:
        return (
            f"FixedTokenChunker(chunk_size={self.chunk_size}, chunk_overlap={self.chunk_overlap}, "
            f"tokenizer={self.spanner!r})"
        )

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` into overlapping token windows.

        Parameters
        ----------
        text : str
            The source text.

        Returns
        -------
        list of Chunk
            In source order. ``metadata`` holds ``"n_tokens"`` (tokens in the chunk) and
            ``"tokenizer"`` (the tokenizer's name, e.g. ``"cl100k_base"``). Empty,
            whitespace-only and zero-token texts give ``[]``.

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        ValueError
            From the tokenizer, e.g. for text with surrogate code points.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        if not text or text.isspace():
            return []
        units = self.spanner.token_spans(text)
        if not units:
            return []
        size, overlap = self.chunk_size, self.chunk_overlap
        # cum[i] = number of tokens before unit i; cum[-1] = all tokens.
        cum = [0, *accumulate(u[2] for u in units)]
        n_units = len(units)
        name = self.spanner.name
        chunks: list[Chunk] = []
        s = 0
        while True:
            # Largest e with tokens(units[s:e]) <= size; at least one unit.
            e = max(bisect.bisect_right(cum, cum[s] + size, lo=s) - 1, s + 1)
            start, end = units[s][0], units[e - 1][1]
            chunks.append(
                Chunk(text[start:end], start, end, {"n_tokens": cum[e] - cum[s], "tokenizer": name})
            )
            if e >= n_units:
                return chunks
            # Next window: the first unit that shares at most `overlap` tokens with this window
            # and still lets unit e (the first one not yet covered) fit, so every window reaches
            # past the previous one; always advance, never leave a gap.
            s = max(
                bisect.bisect_left(cum, cum[e] - overlap, lo=s),
                bisect.bisect_left(cum, cum[e + 1] - size, lo=s),
                s + 1,
            )
            s = min(s, e)
