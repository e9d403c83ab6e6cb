"""Sentence splitting with exact character spans.

Two modes:

``mode="langchain"``
    The split LangChain's ``SemanticChunker`` uses by default: ``re.split(r"(?<=[.?!])\\s+", text)``.
    It is reproduced exactly, faults included: ``"9 a.m. local time"`` becomes two sentences,
    ``"Dr. Lee"`` too, and a text that ends with whitespace after a terminator yields a final
    empty sentence.

``mode="robust"`` (default)
    A rule-based splitter written for chunkwise. It keeps abbreviations (``a.m.``, ``p.m.``,
    ``Dr.``, ``e.g.``, ``i.e.``, ``U.S.`` ...), decimals (``3.5``) and version numbers
    (``v1.2.3``) whole, splits after the Chinese/Japanese terminators ``。！？`` (closing quotes and
    brackets stay with their sentence), treats a blank line as a sentence end, and never yields
    an empty or whitespace-only sentence. Spans exclude the whitespace between sentences.

Every sentence is returned as a :class:`~chunkwise.chunkers.base.Chunk` whose ``text`` is
``source[start:end]``.
"""

from __future__ import annotations

import re
from typing import Literal

from chunkwise.chunk import Chunk

#: LangChain's default ``sentence_split_regex`` (langchain-experimental 0.4.2, ``SemanticChunker``).
LANGCHAIN_SENTENCE_REGEX = r"(?<=[.?!])\s+"

SplitMode = Literal["robust", "langchain"]

# Abbreviations that never end a sentence (a title or a connective is always followed by more).
_NEVER_FINAL = {
    "dr", "mr", "mrs", "ms", "prof", "sr", "jr", "st", "mt", "rev", "gen", "col", "lt", "sgt",
    "capt", "gov", "sen", "rep", "hon", "e.g", "i.e", "cf", "vs", "viz", "fig", "figs", "eq",
    "eqs", "nos", "vol", "vols", "pp", "p", "ch", "sec", "approx", "dept", "est", "ca",
    "al",  # "et al."
}
# Abbreviations that may end a sentence: they end one only when the next word is capitalised.
_MAYBE_FINAL = {
    "a.m", "p.m", "etc", "no", "u.s", "u.k", "u.n", "e.u", "inc", "ltd", "co", "corp", "jan", "feb",
    "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "wed",
    "thu", "fri", "sat", "sun", "ph.d", "b.a", "m.a", "b.sc", "m.sc",
}

# A latin terminator run, then optional closing quotes/brackets, then whitespace or the end.
_LATIN_END = re.compile(r"[.?!]+[\"'\u201d\u2019)\]]*(?=\s|$)")
# A CJK terminator run, then optional closing quotes/brackets; no whitespace needed after it.
_CJK_END = re.compile(r"[\u3002\uff01\uff1f\uff61]+[\u300d\u300f\u201d\u2019\"'\uff09)\]\u3011]*")
# A blank line (two newlines with only whitespace between them).
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
_NEXT_WORD = re.compile(r"\s*(\S)")


def whitespace_pattern(excerpt: str) -> re.Pattern[str] | None:
    """A regex matching ``excerpt`` with any run of whitespace between its words (None when it
    has no word): how chunkwise finds a passage whose spaces or line breaks were changed."""
    words = excerpt.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def split_sentences(text: str, mode: SplitMode = "robust") -> list[Chunk]:
    """Split ``text`` into sentences with exact character spans.

    Parameters
    ----------
    text : str
        The source text.
    mode : {"robust", "langchain"}
        ``"robust"`` (default): chunkwise's abbreviation-, decimal- and CJK-aware rules (see the
        module docstring). ``"langchain"``: exactly ``re.split(r"(?<=[.?!])\\s+", text)`` as in
        langchain-experimental 0.4.2's ``SemanticChunker``, including its empty final piece
        when ``text`` ends with whitespace after a terminator, and ``[""]`` for ``""``.

    Returns
    -------
    list of Chunk
        One chunk per sentence, in order, with half-open character offsets into ``text``
        (``text[c.start:c.end] == c.text``). ``metadata["index"]`` is the sentence number.
        In robust mode no sentence is empty or whitespace-only, and an empty or
        whitespace-only ``text`` gives ``[]``.

    Raises
    ------
    TypeError
        If ``text`` is not a ``str``.
    ValueError
        If ``mode`` is not one of the two modes.

    References
    ----------
    LangChain ``langchain_experimental.text_splitter.SemanticChunker`` (v0.4.2) for the
    ``"langchain"`` mode. The robust rules follow the usual punkt-style heuristics (Kiss &
    Strunk, 2006): a period after a known abbreviation or an initial, or before a lower-case
    word, does not end a sentence.
    """
    if not isinstance(text, str):
        raise TypeError(f"split_sentences expects a str, got {type(text).__name__}.")
    if mode == "langchain":
        return regex_split_sentences(text, LANGCHAIN_SENTENCE_REGEX, drop_empty=False)
    if mode == "robust":
        return _robust_split(text)
    raise ValueError(f"mode must be 'robust' or 'langchain', got {mode!r}.")


def regex_split_sentences(text: str, pattern: str, drop_empty: bool = False) -> list[Chunk]:
    """Split like ``re.split(pattern, text)`` but return pieces with their spans.

    Parameters
    ----------
    text : str
    pattern : str
        A regular expression matching the separators (e.g. LangChain's ``(?<=[.?!])\\s+``).
        Capturing groups are not supported (``re.split`` would return the captured text as
        extra pieces).
    drop_empty : bool
        If true, pieces that are empty or whitespace-only are left out (LangChain keeps them).

    Returns
    -------
    list of Chunk
        The pieces between separator matches, in order; ``metadata["index"]`` numbers the
        pieces that are returned.

    Raises
    ------
    ValueError
        If the pattern does not compile or has capturing groups.
    """
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"sentence_split_regex {pattern!r} is not a valid regular expression: {exc}") from exc
    if rx.groups:
        raise ValueError(
            f"sentence_split_regex {pattern!r} has capturing groups; use (?:...) so that "
            "re.split does not return the separators as sentences."
        )
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in rx.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    out: list[Chunk] = []
    for s, e in spans:
        piece = text[s:e]
        if drop_empty and not piece.strip():
            continue
        out.append(Chunk(piece, s, e, {"index": len(out)}))
    return out


def _is_boundary_after_period(text: str, dot_start: int, end: int) -> bool:
    """Decide whether the terminator run ``text[dot_start:end]`` that starts with '.' ends a sentence."""
    # The word before the period: what re.search(r"(\S+)$", text[:dot_start]) finds -- the
    # run of non-whitespace ending at dot_start, or, when a newline comes just before the
    # period, the run ending before that newline ("$" also matches before a final "\n").
    # Scanned backwards from the period: the regex search tried every start position, which
    # made the splitter quadratic in the text length (2 s on a 48 kB text, minutes on 700 kB).
    word_end = dot_start - 1 if dot_start > 0 and text[dot_start - 1] == "\n" else dot_start
    word_start = word_end
    while word_start > 0 and not text[word_start - 1].isspace():
        word_start -= 1
    word = text[word_start:word_end]
    if not word:
        word_start = 0
    # Strip opening quotes/brackets from the word.
    word = word.lstrip("\"'(\u201c\u2018[")
    key = word.lower()
    nxt = _NEXT_WORD.match(text, end)
    next_char = nxt.group(1) if nxt else ""
    if not next_char:
        return True  # end of text
    if text[dot_start:end].startswith("..."):
        # An ellipsis ends a sentence only before a capital letter.
        return next_char.isupper()
    if key in _NEVER_FINAL:
        return False
    # A list marker ("1." at the start of a line) belongs to its item.
    if word.isdigit() and text[word_start:dot_start] == word:
        line_start = text.rfind("\n", 0, word_start) + 1
        if not text[line_start:word_start].strip():
            return False
    # A single capital letter ("J. Smith") is an initial.
    if len(word) == 1 and word.isalpha() and word.isupper():
        return False
    if key in _MAYBE_FINAL or re.fullmatch(r"(?:[a-z]\.)+[a-z]", key):
        # Dotted abbreviations like "a.m", "u.s.a": a sentence end only before a capital.
        return next_char.isupper() or not next_char.isalnum()
    # Before a lower-case word or a digit the period is not a sentence end (e.g. "approx. 3").
    if next_char.islower():
        return False
    return True


def _robust_split(text: str) -> list[Chunk]:
    cuts: set[int] = set()
    for m in _LATIN_END.finditer(text):
        run = m.group(0)
        if run[0] == "." and not _is_boundary_after_period(text, m.start(), m.end()):
            continue
        if run[0] in "?!":
            # 'Is it?" she asked.' -- a lower-case word after ?/! continues the sentence.
            nxt = _NEXT_WORD.match(text, m.end())
            if nxt and nxt.group(1).islower():
                continue
        cuts.add(m.end())
    for m in _CJK_END.finditer(text):
        cuts.add(m.end())
    for m in _BLANK_LINE.finditer(text):
        cuts.add(m.start())
    cuts.add(len(text))
    out: list[Chunk] = []
    pos = 0
    for cut in sorted(cuts):
        if cut <= pos:
            continue
        seg = text[pos:cut]
        stripped = seg.strip()
        if stripped:
            lead = len(seg) - len(seg.lstrip())
            s = pos + lead
            e = s + len(stripped)
            out.append(Chunk(text[s:e], s, e, {"index": len(out)}))
        pos = cut
    return out
