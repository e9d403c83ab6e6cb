"""Bring your own chunker: wrap another library's splitter so it returns chunkwise chunks.

:func:`adapt_chunker` accepts

- a chunkwise chunker (``split(text) -> list[Chunk]``), returned as it is;
- a chonkie chunker (``chunk(text)`` returning objects with ``text``, ``start_index`` and
  ``end_index``), whose offsets are checked against the text;
- a LangChain text splitter (``split_text(text) -> list[str]``, e.g.
  ``RecursiveCharacterTextSplitter``), whose pieces are located in the text;
- any callable ``text -> list`` of strings, of ``(start, end)`` pairs or of objects with
  ``start``/``end`` (or ``start_index``/``end_index``) attributes.

**Embedded text that differs from the span.** A chunk may be embedded (and BM25-indexed) with
text that is not its span, e.g. a heading path or an LLM-written context before the chunk,
while span metrics still score the raw characters: return ``(start, end, index_text)``
triples, mappings ``{"start": ..., "end": ..., "index_text": ...}``, or objects with
``start``/``end`` (or ``start_index``/``end_index``) and an ``index_text`` string attribute
(chunkwise ``Chunk`` objects carry it as ``metadata["index_text"]``, as the Contextual
chunker's do). The chunk's ``text`` stays ``document[start:end]``; the retrievers read
``index_text`` (:func:`chunkwise.chunkers.contextual.index_text`).

Offsets are what span metrics score, so they must be exact: a piece given as a string is
looked for in the text at or after the previous piece's start (pieces may overlap), exactly
first and then ignoring differences of whitespace (a splitter that strips or collapses
spaces); a splitter that rewrites text (adds a prefix, changes case, joins with another
separator) cannot be placed and raises :class:`OffsetRecoveryError` naming the piece, never
a chunk placed at a guessed offset.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chunkwise.chunk import Chunk
from chunkwise.text import whitespace_pattern

__all__ = ["ChunkerPluginError", "OffsetRecoveryError", "adapt_chunker", "locate_pieces"]


class OffsetRecoveryError(ValueError):
    """A chunk of a foreign splitter whose text is not a slice of the document."""


class ChunkerPluginError(ValueError):
    """A foreign splitter that raised, or returned something that is not a list of chunks."""


def locate_pieces(text: str, pieces: Sequence[str], *, who: str = "the splitter") -> list[Chunk]:
    """Place string pieces in ``text`` in order (exact offsets), allowing overlaps.

    Parameters
    ----------
    text : str
        The document.
    pieces : sequence of str
        Chunks in document order, each a slice of ``text`` up to whitespace (leading and
        trailing whitespace and runs of whitespace may differ).
    who : str
        Named in the error message.

    Returns
    -------
    list of Chunk
        ``Chunk(text[s:e], s, e, {"piece": i})`` with ``s`` non-decreasing; empty or
        whitespace-only pieces are dropped.

        Each piece is placed at its first occurrence after the previous piece's start,
        exact or up to whitespace, whichever comes first (a verbatim copy further on does not
        win over a nearer place that differs only in whitespace).

    Raises
    ------
    OffsetRecoveryError
        If a piece is found neither exactly nor up to whitespace after the previous piece's
        start: as out of order when it occurs earlier in the text, else as rewritten.
    """
    out: list[Chunk] = []
    cursor = 0
    for i, piece in enumerate(pieces):
        if not isinstance(piece, str):
            raise OffsetRecoveryError(f"{who} returned a {type(piece).__name__} as chunk {i}, not a string.")
        if not piece.strip():
            continue
        start = text.find(piece, cursor)
        end = start + len(piece)
        # The nearest place up to whitespace wins over a later verbatim copy: a splitter that
        # collapsed "a  b" to "a b" must not be sent to a later "a b", past its next pieces.
        # (Such a place starts with the piece's first word: without it before the verbatim
        # copy there is nothing to look for.)
        first = piece.split(maxsplit=1)[0]
        pattern = m = None
        if start < 0 or text.find(first, cursor, start) >= 0:
            pattern = whitespace_pattern(piece)
            if pattern is not None:
                m = pattern.search(text, cursor) if start < 0 else pattern.search(text, cursor, end)
        if m is not None and (start < 0 or m.start() < start):
            start, end = m.start(), m.end()
        elif start < 0:
            earlier = text.find(piece)
            if earlier < 0 and pattern is not None:  # (pattern is set: start < 0)
                hit = pattern.search(text)
                earlier = hit.start() if hit else -1
            if earlier >= 0:
                raise OffsetRecoveryError(
                    f"{who}: chunk {i} ({piece[:60]!r}) occurs only before character {cursor} (at {earlier}), where "
                    "the previous chunk starts: the splitter returned its chunks out of document order. Return them "
                    "in the order of the text (or as (start, end) pairs)."
                )
            raise OffsetRecoveryError(
                f"{who} rewrote chunk {i} ({piece[:60]!r}...): it is not a slice of the document at or after "
                f"character {cursor}, even ignoring whitespace, so its offsets cannot be recovered. Use a "
                "splitter that keeps the text verbatim (LangChain: no custom length function that edits text; "
                "chonkie: chunkers that report start_index/end_index)."
            )
        out.append(Chunk(text[start:end], start, end, {"piece": i}))
        cursor = start + 1 if end > start else start
    return out


def _from_items(text: str, items: Sequence[Any], who: str) -> list[Chunk]:
    if not items:
        return []
    first = items[0]
    if isinstance(first, Chunk):
        for i, c in enumerate(items):
            if not isinstance(c, Chunk):
                raise OffsetRecoveryError(f"{who} returned a mix of Chunk and {type(c).__name__} items; return one kind.")
            if not (isinstance(c.start, int) and isinstance(c.end, int) and 0 <= c.start <= c.end <= len(text)):
                raise OffsetRecoveryError(
                    f"{who}: chunk {i} has offsets [{c.start}, {c.end}) outside the document of {len(text)} characters.")
            if c.text != text[c.start : c.end]:
                raise OffsetRecoveryError(
                    f"{who}: chunk {i}'s text is not the document's characters [{c.start}, {c.end}) "
                    f"(text starts {c.text[:40]!r}, the document there {text[c.start : c.start + 40]!r}); "
                    "every chunk must satisfy text == document[start:end].")
        return list(items)
    if isinstance(first, str):
        return locate_pieces(text, items, who=who)
    out = []
    for i, it in enumerate(items):
        embed: Any = None
        if isinstance(it, (tuple, list)) and len(it) in (2, 3):
            s, e = it[0], it[1]
            embed = it[2] if len(it) == 3 else None
        elif isinstance(it, dict):
            keys = ("start_index", "end_index") if "start_index" in it else ("start", "end")
            if not all(k in it for k in keys):
                raise OffsetRecoveryError(f"{who}: chunk {i} is a mapping without 'start' and 'end' "
                                          f"(it has {sorted(it)}); give both, and 'index_text' if the embedded "
                                          "text differs from the span.")
            s, e = it[keys[0]], it[keys[1]]
            embed = it.get("index_text")
        elif hasattr(it, "start_index") and hasattr(it, "end_index"):
            s, e = it.start_index, it.end_index
            embed = getattr(it, "index_text", None)
        elif hasattr(it, "start") and hasattr(it, "end"):
            s, e = it.start, it.end
            embed = getattr(it, "index_text", None)
        else:
            raise OffsetRecoveryError(
                f"{who} returned {type(it).__name__} items; return strings, (start, end) pairs, "
                "(start, end, index_text) triples or objects with start/end."
            )
        if isinstance(s, bool) or isinstance(e, bool) or not _whole(s) or not _whole(e):
            raise OffsetRecoveryError(f"{who}: chunk {i} has offsets ({s!r}, {e!r}); give whole character offsets.")
        s, e = int(s), int(e)
        if s > e:
            raise OffsetRecoveryError(f"{who}: chunk {i} has reversed offsets [{s}, {e}); give start <= end.")
        if not 0 <= s <= e <= len(text):
            raise OffsetRecoveryError(f"{who}: chunk {i} has offsets [{s}, {e}) outside the document of {len(text)} characters.")
        if embed is not None and not isinstance(embed, str):
            raise OffsetRecoveryError(f"{who}: chunk {i}'s index_text is a {type(embed).__name__}; give the text to "
                                      "embed as a string (or leave it out to embed the span).")
        claimed = getattr(it, "text", None) if not isinstance(it, dict) else it.get("text")
        if isinstance(claimed, str) and claimed != text[s:e]:
            if embed is not None:
                raise OffsetRecoveryError(
                    f"{who}: chunk {i}'s text is not the document's characters [{s}, {e}) (text starts "
                    f"{claimed[:40]!r}); put what is embedded in index_text and keep text == document[start:end].")
            # offsets that do not reproduce the chunk's text (e.g. counted in bytes): place the text instead
            return locate_pieces(text, [getattr(x, "text", "") for x in items], who=who)
        meta: dict[str, Any] = {"piece": i}
        if embed is not None:
            meta["index_text"] = embed
        out.append(Chunk(text[s:e], s, e, meta))
    return out


def _whole(value: Any) -> bool:
    """Whether ``value`` is a whole number (an int, or a float / numpy number equal to one)."""
    try:
        return int(value) == value
    except (TypeError, ValueError, OverflowError):
        return False


class _Adapted:
    """A foreign splitter seen as a chunkwise chunker (``split(text) -> list[Chunk]``)."""

    def __init__(self, call: Callable[[str], Sequence[Any]], who: str, wrapped: Any) -> None:
        self._call = call
        self.who = who
        self.wrapped = wrapped

    def split(self, text: str) -> list[Chunk]:
        try:
            items = self._call(text)
        except OffsetRecoveryError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's splitter can fail in any way; name it, one line
            raise ChunkerPluginError(
                f"{self.who} raised {type(exc).__name__}: {exc}; the error is the splitter's own (its code or its "
                "arguments), not chunkwise's: fix it and rerun."
            ) from exc
        if items is None or isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
            raise ChunkerPluginError(
                f"{self.who} returned {'one string' if isinstance(items, str) else type(items).__name__}, not a list "
                "of chunks; return a list of strings, (start, end) pairs, (start, end, index_text) triples or chunk "
                "objects.")
        return _from_items(text, list(items), self.who)

    def __repr__(self) -> str:
        return f"adapt_chunker({self.wrapped!r})"


def adapt_chunker(obj: Any, *, name: str | None = None) -> Any:
    """A chunkwise chunker from another library's splitter (see the module docstring).

    Parameters
    ----------
    obj : object
        A chunkwise chunker, chonkie chunker, LangChain text splitter or callable.
    name : str, optional
        Named in error messages (default the object's class name).

    Returns
    -------
    object with ``split(text) -> list[Chunk]``

    Raises
    ------
    TypeError
        If ``obj`` has none of ``split``, ``chunk``, ``split_text`` and is not callable.
    """
    who = name or type(obj).__name__
    if callable(getattr(obj, "chunk", None)) and not callable(getattr(obj, "split_text", None)):
        return _Adapted(obj.chunk, who, obj)  # chonkie
    if callable(getattr(obj, "split_text", None)):
        return _Adapted(obj.split_text, who, obj)  # LangChain text splitters
    if callable(getattr(obj, "split", None)):
        return _Adapted(obj.split, who, obj)  # chunkwise's own protocol (Chunks pass through)
    if callable(obj):
        return _Adapted(obj, who, obj)
    raise TypeError(
        f"{who} is not a chunker: give an object with split(text), chunk(text) (chonkie) or split_text(text) "
        "(LangChain), or a function text -> list of strings or (start, end) pairs."
    )
