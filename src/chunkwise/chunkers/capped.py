"""A size cap over another chunker: every chunk longer than ``max_tokens`` is split again.

A semantic chunker such as LangChain's ``SemanticChunker`` at its defaults has no size limit,
so many of its chunks run past the window of the model that embeds them (all-MiniLM-L6-v2
reads 256 word pieces) and are retrieved by their head alone. :class:`CappedChunker` keeps the
inner chunker's cuts and re-splits each chunk that is too long with the recursive splitter
(``["\\n\\n", "\\n", " ", ""]``, no overlap), so a reader can tell the semantic cuts apart
from what the embedder's window does to them. ``"KamradtSplit:200"`` in a grid is LangChain's
defaults capped at 200 cl100k_base tokens.
"""

from __future__ import annotations

from typing import Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers.base import check_positive_int
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.tokens import DEFAULT_ENCODING, count_tokens

__all__ = ["CappedChunker"]


class CappedChunker:
    """Chunks of ``inner``, each longer than ``max_tokens`` re-split recursively.

    Parameters
    ----------
    inner : object with ``split(text) -> list[Chunk]``
        The chunker whose cuts are kept (exact offsets, as every chunkwise chunker returns).
    max_tokens : int, >= 1
        The largest chunk, in tokens of ``encoding_name``.
    encoding_name : str, default "cl100k_base"
        The tiktoken encoding that counts ``max_tokens``.

    Raises
    ------
    ValueError
        If ``max_tokens`` is not a positive int, or ``inner`` has no ``split`` method.

    Notes
    -----
    A chunk within the cap is returned as the inner chunker gave it (its metadata kept); a
    longer one becomes the pieces of :class:`~chunkwise.chunkers.recursive.RecursiveTokenChunker`
    (``max_tokens``, no overlap, separators kept at the start of the next piece) with offsets
    shifted into the source, ``metadata["split_from"]`` holding the long chunk's ``(start,
    end)``. Whitespace between pieces stays outside them, as the recursive splitter leaves it.

    Examples
    --------
    >>> class FirstSentence:  # an inner chunker: the first sentence, then the rest
    ...     def split(self, text):
    ...         cut = text.index(". ") + 1
    ...         return [Chunk(text[:cut], 0, cut), Chunk(text[cut + 1:], cut + 1, len(text))]
    >>> capped = CappedChunker(FirstSentence(), max_tokens=4)
    >>> [(c.text, c.start) for c in capped.split("Birds fly. Boats sail far away today.")]
    [('Birds fly.', 0), ('Boats sail far', 11), ('away today.', 26)]
    """

    def __init__(self, inner: Any, max_tokens: int, encoding_name: str = DEFAULT_ENCODING) -> None:
        if not callable(getattr(inner, "split", None)):
            raise ValueError(f"inner must be a chunker with split(text) -> list[Chunk], got {type(inner).__name__}.")
        self.inner = inner
        self.max_tokens = check_positive_int("max_tokens", max_tokens)
        self.encoding_name = encoding_name
        self._splitter = RecursiveTokenChunker(
            self.max_tokens, 0, separators=["\n\n", "\n", " ", ""], keep_separator="start", encoding_name=encoding_name
        )

    def split(self, text: str) -> list[Chunk]:
        """Split ``text``: the inner chunker's chunks, those over ``max_tokens`` split again.

        Returns
        -------
        list of Chunk
            In source order, each ``text[start:end]``; none longer than ``max_tokens`` tokens
            unless a single unbreakable run is (the recursive splitter's last separator, ``""``,
            cuts between characters, so in practice none is).

        Raises
        ------
        TypeError
            If ``text`` is not a ``str``.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        out: list[Chunk] = []
        for chunk in self.inner.split(text):
            if count_tokens(chunk.text, encoding_name=self.encoding_name) <= self.max_tokens:
                out.append(chunk)
                continue
            for piece in self._splitter.split(chunk.text):
                start, end = chunk.start + piece.start, chunk.start + piece.end
                meta = dict(piece.metadata)
                meta["split_from"] = (chunk.start, chunk.end)
                out.append(Chunk(text[start:end], start, end, meta))
        return out
