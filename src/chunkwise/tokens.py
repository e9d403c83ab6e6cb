"""Token counting and token spans with exact character offsets.

Chunkers that measure their size in tokens need two things from a tokenizer: how many
tokens a text has, and *where* each token lies in the text. This module gives both:

- :func:`get_encoding` and :func:`count_tokens` -- thin, cached wrappers around
  `tiktoken <https://github.com/openai/tiktoken>`_ (default ``cl100k_base``).
- :class:`TokenSpanner` -- the small protocol chunkers use: ``token_spans(text)`` returns
  *units* ``(start_char, end_char, n_tokens)`` with half-open character offsets into
  ``text``.
- Three spanners: :class:`TiktokenSpanner` (any tiktoken-like encoding),
  :class:`WhitespaceSpanner` (runs of non-whitespace) and :class:`ByteSpanner`
  (one token per UTF-8 byte; a teaching and test device).

Why units and not tokens? Byte-level BPE tokenizers such as tiktoken's work on UTF-8 bytes,
so one token can end in the middle of a character (many Chinese characters and every emoji
take several tokens in ``cl100k_base``). A character offset cannot point inside a
character, so tokens that end mid-character are merged with the following token(s) until a
character edge is reached. Every unit is therefore a whole number of characters and
carries the number of tokens it contains (``n_tokens >= 1``). For English text almost
every unit is exactly one token.

Offline use: tiktoken downloads its BPE files on first use. Without network access, set the environment
variable ``TIKTOKEN_CACHE_DIR`` to a folder holding tiktoken's cached files (in this project:
``../shared/tiktoken_cache``); tiktoken checks their sha256.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DEFAULT_ENCODING",
    "TokenUnit",
    "TokenSpanner",
    "TiktokenSpanner",
    "WhitespaceSpanner",
    "ByteSpanner",
    "get_encoding",
    "count_tokens",
    "as_spanner",
]

DEFAULT_ENCODING = "cl100k_base"


class TokenUnit(NamedTuple):
    """A run of whole characters holding one or more tokens.

    Attributes
    ----------
    start, end : int
        Half-open character offsets (Python ``str`` indices) into the tokenized text.
    n_tokens : int
        Number of tokens in the unit, ``>= 1``. It is more than one only when a token
        ends inside a multi-byte character and had to be merged with what follows.
    """

    start: int
    end: int
    n_tokens: int


# ---------------------------------------------------------------------------------------
# tiktoken wrappers
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def get_encoding(encoding_name: str = DEFAULT_ENCODING) -> Any:
    """Return the tiktoken encoding ``encoding_name``, loaded once per process.

    Parameters
    ----------
    encoding_name : str, default "cl100k_base"
        A name known to tiktoken, e.g. ``"cl100k_base"`` or ``"o200k_base"``.

    Returns
    -------
    tiktoken.Encoding

    Raises
    ------
    ValueError
        If tiktoken does not know ``encoding_name``.
    RuntimeError
        If the BPE file cannot be loaded (typically: no network and no local cache).
        The message says to set ``TIKTOKEN_CACHE_DIR``.
    """
    import tiktoken

    known = tiktoken.list_encoding_names()
    if encoding_name not in known:
        raise ValueError(
            f"Unknown tiktoken encoding {encoding_name!r}; known encodings: {', '.join(sorted(known))}."
        )
    try:
        return tiktoken.get_encoding(encoding_name)
    except Exception as exc:  # network errors, hash mismatch, missing blobfile/requests ...
        raise RuntimeError(
            f"Could not load the tiktoken encoding {encoding_name!r} ({type(exc).__name__}: {exc}). "
            "tiktoken downloads its BPE files on first use. Offline, set the environment variable "
            "TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cached files (in the chunkwise "
            "checkout: ../shared/tiktoken_cache), or run once with network access."
        ) from exc


def count_tokens(text: str, encoding_name: str = DEFAULT_ENCODING) -> int:
    """Number of tiktoken tokens in ``text``.

    Special-token strings such as ``"<|endoftext|>"`` are counted as ordinary text
    (``encode_ordinary``), so any text can be counted and the count matches the
    ``n_tokens`` that :class:`TiktokenSpanner` reports.

    Parameters
    ----------
    text : str
    encoding_name : str, default "cl100k_base"

    Returns
    -------
    int
        Token count, ``0`` for ``""``.

    Raises
    ------
    ValueError, RuntimeError
        As :func:`get_encoding`.
    """
    if not text:
        return 0
    return len(get_encoding(encoding_name).encode_ordinary(text))


# ---------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------


@runtime_checkable
class TokenSpanner(Protocol):
    """Anything that can say where the tokens of a text are.

    A spanner has a ``name`` (recorded in chunk metadata, e.g. ``"cl100k_base"``) and a
    method ``token_spans(text)`` returning the text's units in order: a list of
    ``(start_char, end_char, n_tokens)`` tuples (:class:`TokenUnit`) with
    ``0 <= start < end <= len(text)``, non-overlapping and increasing, ``n_tokens >= 1``.
    Characters between units (e.g. whitespace for :class:`WhitespaceSpanner`) belong to no
    token.

    Any tiktoken-like object (with ``encode`` and ``decode_single_token_bytes``) can be
    turned into a spanner with :class:`TiktokenSpanner` or :func:`as_spanner`.
    """

    name: str

    def token_spans(self, text: str) -> list[TokenUnit]: ...


# ---------------------------------------------------------------------------------------
# Byte offsets -> character units
# ---------------------------------------------------------------------------------------


def _check_encodable(text: str) -> None:
    """Raise ``ValueError`` if ``text`` holds surrogate code points (not valid UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"The text holds a surrogate code point {text[exc.start]!r} at index {exc.start}; "
            "it has no UTF-8 form, so byte-level tokens cannot be mapped to exact character "
            "offsets. Decode the source with errors='replace' (or fix it) first."
        ) from None


def _utf8_char_edges(text: str) -> np.ndarray:
    """Byte offset of every character edge: array of ``len(text) + 1`` int64 values."""
    edges = np.zeros(len(text) + 1, dtype=np.int64)
    if text.isascii():
        edges[1:] = np.arange(1, len(text) + 1)
        return edges
    cp = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    n_bytes = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    np.cumsum(n_bytes, out=edges[1:])
    return edges


def _units_from_byte_lengths(text: str, token_byte_lengths: Sequence[int] | np.ndarray) -> list[TokenUnit]:
    """Group tokens (given by their UTF-8 byte lengths, in order) into whole-character units.

    A unit closes after a token whose cumulative byte end is a character edge; tokens that
    end inside a character (or carry no bytes) are merged with the token(s) that follow.
    """
    lengths = np.asarray(token_byte_lengths, dtype=np.int64)
    if lengths.size == 0:
        return []
    edges = _utf8_char_edges(text)
    tok_ends = np.cumsum(lengths)
    if tok_ends[-1] != edges[-1]:
        raise ValueError(
            f"The tokens hold {int(tok_ends[-1])} bytes but the text has {int(edges[-1])} UTF-8 bytes; "
            "the tokenizer changed the text (normalisation?) so exact offsets are impossible."
        )
    char_idx = np.searchsorted(edges, tok_ends)  # tok_ends <= edges[-1], so in range
    closes = (edges[char_idx] == tok_ends) & (lengths > 0)
    # Zero-byte tokens after the last real token join the last unit.
    last_closing = np.flatnonzero(closes)
    if last_closing.size == 0:  # only zero-byte tokens: the text is empty
        return []
    closes[last_closing[-1]] = False
    closes[-1] = True
    close_pos = np.flatnonzero(closes)
    ends = char_idx[close_pos]
    starts = np.concatenate(([0], ends[:-1]))
    n_tok = np.diff(np.concatenate(([-1], close_pos)))
    return [TokenUnit(s, e, n) for s, e, n in zip(starts.tolist(), ends.tolist(), n_tok.tolist())]


# ---------------------------------------------------------------------------------------
# Spanners
# ---------------------------------------------------------------------------------------


class TiktokenSpanner:
    """Units of a byte-level BPE tokenizer (tiktoken or anything shaped like it).

    The text is encoded, each token's bytes are taken
    (``decode_tokens_bytes``/``decode_single_token_bytes``), byte offsets are accumulated
    and mapped to character offsets. Tokens ending inside a multi-byte character are merged
    with the following token(s) up to the next character edge, so units are whole
    characters and ``n_tokens`` may exceed one (e.g. ``" 猫"`` is 3 tokens and ``"🚀"`` is
    3 tokens in ``cl100k_base``). Units are contiguous: together they cover the whole text,
    leading spaces included (tiktoken puts a word's leading space inside its token).

    Parameters
    ----------
    encoding : str or tiktoken-like object, default "cl100k_base"
        A tiktoken encoding name, or an object with ``encode(text) -> list[int]`` and
        ``decode_single_token_bytes(token) -> bytes`` whose tokens' bytes concatenate to the
        UTF-8 bytes of the text. If the object has ``encode_ordinary`` (tiktoken does), it
        is used, so special-token strings such as ``"<|endoftext|>"`` are plain text.

    Raises
    ------
    TypeError
        If ``encoding`` is neither a name nor tiktoken-like.
    ValueError, RuntimeError
        As :func:`get_encoding`, when ``encoding`` is a name.

    Attributes
    ----------
    encoding : object
        The encoding object.
    name : str
        The encoding's ``name`` (e.g. ``"cl100k_base"``), or its class name if it has none.
    """

    def __init__(self, encoding: Any = DEFAULT_ENCODING) -> None:
        if isinstance(encoding, str):
            encoding = get_encoding(encoding)
        elif not (hasattr(encoding, "encode") and hasattr(encoding, "decode_single_token_bytes")):
            raise TypeError(
                "TiktokenSpanner needs an encoding name or an object with encode() and "
                f"decode_single_token_bytes(); got {type(encoding).__name__}."
            )
        self.encoding = encoding
        self.name = str(getattr(encoding, "name", type(encoding).__name__))

    def __repr__(self) -> str:
        return f"TiktokenSpanner({self.name!r})"

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special-token strings treated as text when possible)."""
        enc = self.encoding
        if hasattr(enc, "encode_ordinary"):
            return list(enc.encode_ordinary(text))
        return list(enc.encode(text))

    def token_spans(self, text: str) -> list[TokenUnit]:
        """Units ``(start_char, end_char, n_tokens)`` of ``text``; see the class docstring.

        Raises
        ------
        ValueError
            If ``text`` holds surrogate code points, or the tokens' bytes do not add up to
            the text's UTF-8 bytes.
        """
        if not text:
            return []
        _check_encodable(text)
        ids = self.encode(text)
        enc = self.encoding
        if hasattr(enc, "decode_tokens_bytes"):
            pieces = enc.decode_tokens_bytes(ids)
        else:
            pieces = [enc.decode_single_token_bytes(t) for t in ids]
        return _units_from_byte_lengths(text, [len(p) for p in pieces])


class WhitespaceSpanner:
    """Tokens are runs of non-whitespace (``\\S+``); whitespace belongs to no token.

    Every unit is one token. Useful in tests and for teaching, because token positions can
    be read off the text by eye.

    Examples
    --------
    >>> WhitespaceSpanner().token_spans("to be  or")
    [TokenUnit(start=0, end=2, n_tokens=1), TokenUnit(start=3, end=5, n_tokens=1), TokenUnit(start=7, end=9, n_tokens=1)]
    """

    name = "whitespace"
    _pattern = re.compile(r"\S+")

    def __repr__(self) -> str:
        return "WhitespaceSpanner()"

    def token_spans(self, text: str) -> list[TokenUnit]:
        """Units ``(start_char, end_char, 1)`` of the non-whitespace runs of ``text``."""
        return [TokenUnit(m.start(), m.end(), 1) for m in self._pattern.finditer(text)]


class ByteSpanner:
    """Every UTF-8 byte is one token; units are single characters.

    The smallest byte-level tokenizer: it shows what happens when tokens cut characters.
    A character of ``k`` UTF-8 bytes is one unit with ``n_tokens == k`` (``"猫"`` is 3
    tokens, ``"🚀"`` is 4).

    Examples
    --------
    >>> ByteSpanner().token_spans("a猫")
    [TokenUnit(start=0, end=1, n_tokens=1), TokenUnit(start=1, end=2, n_tokens=3)]
    """

    name = "utf8-bytes"

    def __repr__(self) -> str:
        return "ByteSpanner()"

    def token_spans(self, text: str) -> list[TokenUnit]:
        """Units ``(i, i + 1, n_bytes)``, one per character of ``text``.

        Raises
        ------
        ValueError
            If ``text`` holds surrogate code points.
        """
        if not text:
            return []
        _check_encodable(text)
        n_bytes = len(text.encode("utf-8"))
        return _units_from_byte_lengths(text, np.ones(n_bytes, dtype=np.int64))


def as_spanner(tokenizer: Any = None, encoding_name: str = DEFAULT_ENCODING) -> TokenSpanner:
    """Turn a tokenizer argument into a :class:`TokenSpanner`.

    Parameters
    ----------
    tokenizer : None, str, TokenSpanner or tiktoken-like object
        ``None`` uses ``encoding_name``; a string is a tiktoken encoding name; an object
        with ``token_spans`` is used as is; an object with ``encode`` and
        ``decode_single_token_bytes`` is wrapped in :class:`TiktokenSpanner`.
    encoding_name : str, default "cl100k_base"
        Used only when ``tokenizer`` is ``None``.

    Returns
    -------
    TokenSpanner

    Raises
    ------
    TypeError
        For any other kind of object.
    ValueError, RuntimeError
        As :func:`get_encoding`, when a tiktoken encoding has to be loaded.
    """
    if tokenizer is None:
        return TiktokenSpanner(encoding_name)
    if isinstance(tokenizer, str):
        return TiktokenSpanner(tokenizer)
    if callable(getattr(tokenizer, "token_spans", None)):
        return tokenizer
    if hasattr(tokenizer, "encode") and hasattr(tokenizer, "decode_single_token_bytes"):
        return TiktokenSpanner(tokenizer)
    raise TypeError(
        "tokenizer must be None, a tiktoken encoding name, an object with token_spans(text), "
        f"or a tiktoken-like object with encode() and decode_single_token_bytes(); got {type(tokenizer).__name__}."
    )
