"""The :class:`Chunk` type shared by every chunker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Chunk:
    """A piece of a source text with its exact character span.

    Parameters
    ----------
    text : str
        The chunk's text. For every chunker in chunkwise this is the verbatim slice
        ``source[start:end]`` of the text that was split (whitespace and punctuation kept).
    start, end : int
        Half-open character offsets (Python ``str`` indices, i.e. Unicode code points)
        into the source text, ``0 <= start <= end <= len(source)``.
    metadata : dict
        Chunker-specific facts, e.g. the sentence indices a semantic chunk covers or its
        token count (with the tokenizer named in the key).

    Raises
    ------
    ValueError
        If the offsets are negative, reversed, or do not match the length of ``text``.
    """

    text: str
    start: int
    end: int
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(
                f"Chunk offsets must satisfy 0 <= start <= end, got start={self.start}, end={self.end}."
            )
        if self.end - self.start != len(self.text):
            raise ValueError(
                f"Chunk span [{self.start}, {self.end}) has length {self.end - self.start} "
                f"but its text has {len(self.text)} characters; the text must be source[start:end]."
            )

    @property
    def span(self) -> tuple[int, int]:
        """The half-open ``(start, end)`` character span."""
        return (self.start, self.end)

    def __len__(self) -> int:
        return len(self.text)


def check_chunks(chunks: list[Chunk], source: str) -> None:
    """Raise ``ValueError`` unless every chunk is the verbatim slice of ``source`` it claims.

    Parameters
    ----------
    chunks : list of Chunk
    source : str
        The text the chunks were cut from.
    """
    for i, c in enumerate(chunks):
        if c.end > len(source) or source[c.start : c.end] != c.text:
            raise ValueError(
                f"Chunk {i} with span [{c.start}, {c.end}) is not source[start:end] "
                f"(source has {len(source)} characters)."
            )
