"""Structure-aware chunking: Markdown sections with their heading path, blank-line blocks
for plain text, never a cut inside a fenced code block or a table."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers._packing import make_counter, pack_units
from chunkwise.chunkers.base import check_positive_int
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.tokens import DEFAULT_ENCODING, TokenSpanner, as_spanner

__all__ = ["MarkdownSection", "StructureChunker", "parse_markdown_sections"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
# A MediaWiki heading, also in WikiText-103's spaced form: "== Plot ==" or " = = Plot = = ".
_WIKI = re.compile(r"^[ \t]*(=(?:[ \t]?=)*)[ \t]*(\S.*?)[ \t]*(=(?:[ \t]?=)*)[ \t]*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])(?:\s|$)")
_TABLE_DELIM = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")


@dataclass(frozen=True)
class MarkdownSection:
    """A heading's section: from its heading line to the next heading (any level).

    Attributes
    ----------
    start, end : int
        Half-open character span in the source; the heading line is inside it. The text
        before the first heading is a section with ``level == 0`` and an empty path.
    level : int
        Heading level 1-6 (``#`` .. ``######``, setext ``=`` is 1 and ``-`` is 2), 0 for the
        preamble.
    path : tuple of str
        Titles of the enclosing headings and this one, outermost first, e.g.
        ``("Guide", "Install", "Linux")``.
    protected : tuple of (int, int)
        Spans of the fenced code blocks and tables inside the section (never cut).
    """

    start: int
    end: int
    level: int
    path: tuple[str, ...]
    protected: tuple[tuple[int, int], ...] = field(default=())


def _lines(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, line_without_newline)`` for every line; ``end`` includes the newline."""
    out = []
    for m in _LINE.finditer(text):
        s, e = m.start(), m.end()
        out.append((s, e, text[s:e].rstrip("\n").rstrip("\r")))
    return out


def _wiki_heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` if ``line`` is a MediaWiki heading (``== T ==`` or ``= = T = =``)."""
    m = _WIKI.match(line)
    if not m:
        return None
    level = m.group(1).count("=")
    title = m.group(2).strip()
    if m.group(3).count("=") != level or not title or set(title) <= {"=", " ", "\t"} or level > 6:
        return None
    return level, title


def parse_markdown_sections(text: str, setext: bool = True, wikitext: bool = True) -> list[MarkdownSection]:
    """Cut a Markdown (or plain) text into heading sections.

    Headings are ATX lines (``#`` to ``######`` then a space or the line end; optional
    closing ``#``s are not part of the title); with ``setext=True``, a single non-blank
    line underlined by a line of ``=`` (level 1) or ``-`` (level 2); with ``wikitext=True``,
    a MediaWiki heading line, the title between equal runs of ``=`` whose length is the
    level (``== Plot ==``; WikiText-103, and so the Chroma ``wikitexts`` corpus, writes it
    spaced: ``= = Plot = =``). Inside a fenced code
    block -- from a line starting with at least three backticks or tildes (up to three
    spaces of indent) to a line of at least as many of the same character, or to the end of
    the text when it is never closed (CommonMark) -- nothing is a heading. A table is a line
    holding ``|`` followed by a GFM delimiter row (``|---|:--:|``) and the following
    non-blank lines that hold ``|``.

    Parameters
    ----------
    text : str
    setext : bool, default True
    wikitext : bool, default True

    Returns
    -------
    list of MarkdownSection
        In source order, covering the text from the first heading on (and the preamble
        before it if it has non-whitespace). Plain text without headings is one preamble
        section ``(0, len(text), 0, ())``.

    Raises
    ------
    TypeError
        If ``text`` is not a str.

    References
    ----------
    CommonMark Spec 0.31.2, sections 4.2 (ATX headings), 4.3 (setext headings) and 4.5
    (fenced code blocks), https://spec.commonmark.org/0.31.2/; GitHub Flavored Markdown
    Spec, section 4.10 (tables), https://github.github.com/gfm/; MediaWiki, Help:Formatting
    (section headings), https://www.mediawiki.org/wiki/Help:Formatting; Merity et al.
    (2016), *Pointer Sentinel Mixture Models* (WikiText-103), arXiv:1609.07843.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}.")
    lines = _lines(text)
    headings: list[tuple[int, int, str]] = []  # (char start, level, title)
    protected: list[tuple[int, int]] = []
    fence: tuple[str, int, int] | None = None  # (char, length, start offset)
    k = 0
    prev_kind = "blank"  # kind of line k - 1: "blank", "para", "other"
    while k < len(lines):
        s, e, line = lines[k]
        if fence is not None:
            ch, n, fs = fence
            close = re.match(r"^ {0,3}(" + re.escape(ch) + "{" + str(n) + r",})[ \t]*$", line)
            if close:
                protected.append((fs, s + len(line)))
                fence = None
                prev_kind = "other"
            k += 1
            continue
        m = _FENCE_OPEN.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in line[m.end():]):
            fence = (m.group(1)[0], len(m.group(1)), s)
            k += 1
            continue
        if not line.strip():
            prev_kind = "blank"
            k += 1
            continue
        m = _ATX.match(line)
        if m:
            headings.append((s, len(m.group(1)), (m.group(2) or "").strip()))
            prev_kind = "other"
            k += 1
            continue
        wiki = _wiki_heading(line) if wikitext else None
        if wiki:
            headings.append((s, wiki[0], wiki[1]))
            prev_kind = "other"
            k += 1
            continue
        # A table: a line with '|' followed by a delimiter row with '|'.
        if "|" in line and k + 1 < len(lines):
            delim = lines[k + 1][2]
            if "|" in delim and _TABLE_DELIM.match(delim):
                j = k + 2
                while j < len(lines) and lines[j][2].strip() and "|" in lines[j][2]:
                    j += 1
                protected.append((s, lines[j - 1][0] + len(lines[j - 1][2])))
                prev_kind = "other"
                k = j
                continue
        if (
            setext
            and prev_kind == "para"
            and _SETEXT.match(line)
            and (k < 2 or not lines[k - 2][2].strip() or _ATX.match(lines[k - 2][2]))
        ):
            ps, _, ptext = lines[k - 1]
            headings.append((ps, 1 if line.strip()[0] == "=" else 2, ptext.strip()))
            prev_kind = "other"
            k += 1
            continue
        prev_kind = "other" if _LIST_ITEM.match(line) else "para"
        k += 1
    if fence is not None:  # never closed: runs to the end of the text
        protected.append((fence[2], len(text)))

    sections: list[MarkdownSection] = []
    bounds = [h[0] for h in headings] + [len(text)]
    if not headings or text[: headings[0][0]].strip():
        sections.append(MarkdownSection(0, bounds[0], 0, ()))
    stack: list[tuple[int, str]] = []
    for idx, (s, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        sections.append(MarkdownSection(s, bounds[idx + 1], level, tuple(t for _, t in stack)))
    return [
        MarkdownSection(
            sec.start, sec.end, sec.level, sec.path,
            tuple(p for p in protected if p[0] >= sec.start and p[1] <= sec.end),
        )
        for sec in sections
    ]


class StructureChunker:
    """Chunks that follow the document's own structure: Markdown sections, then blank-line
    blocks, with the heading path kept as metadata.

    The "document structure-based" row of the chunking guide the book starts from, in the
    manner of LangChain's ``MarkdownHeaderTextSplitter`` followed by a size-bounded
    splitter, but with exact offsets and protected blocks:

    1. the text is cut into heading sections by :func:`parse_markdown_sections` (ATX,
       setext and MediaWiki headings; a ``#`` inside a fenced code block is not a heading). A chunk never
       spans two sections, and carries the section's heading path;
    2. inside a section, *blocks* are the runs of lines between blank lines; a blank line
       inside a fenced code block does not end a block, so a code block or a table is
       always inside one block. Plain text (no headings) is one section of blank-line
       blocks;
    3. blocks are packed greedily in order while the chunk's text (source from the first
       block's first character to the last block's last character) measures at most
       ``chunk_size`` tokens; a section that fits is one chunk;
    4. a block over ``chunk_size`` on its own is cut into its code blocks and tables, kept
       whole, and the text between them, sub-split with
       :class:`~chunkwise.chunkers.recursive.RecursiveTokenChunker` (``chunk_size``
       tokens, no overlap); these pieces are then packed as in step 3;
    5. **a code block or table over ``chunk_size`` on its own is emitted whole** as one
       chunk, over budget, with ``metadata["oversized"] = True``: the rule "never cut
       inside a code block or a table" wins over the size. When it directly follows the
       section's heading line, the heading line is part of that chunk (no chunk is a bare
       heading in that case).

    Parameters
    ----------
    chunk_size : int, default 256
        Token budget per chunk, ``>= 1``.
    encoding_name : str, default "cl100k_base"
        tiktoken encoding used when ``tokenizer`` is None.
    tokenizer : TokenSpanner, tiktoken-like object or str, optional
        Anything :func:`chunkwise.tokens.as_spanner` accepts.
    setext : bool, default True
        Also recognise setext headings (a line underlined by ``===`` or ``---``).
    wikitext : bool, default True
        Also recognise MediaWiki headings (``== Plot ==``, spaced ``= = Plot = =`` in
        WikiText-103 and the Chroma ``wikitexts`` corpus).

    Raises
    ------
    ValueError
        If ``chunk_size`` is not an int ``>= 1`` or ``setext``/``wikitext`` is not a bool.
    TypeError
        If the tokenizer is of an unknown kind.

    Notes
    -----
    No overlap: structure chunks are meant to be self-contained sections. HTML, JSON and
    source-code structure (the guide's other examples) are not parsed; such text falls back
    to blank-line blocks.

    References
    ----------
    .. [1] The semantic-chunking guide this book starts from (``shared/seeds``), table row
       "Document structure-based (structure-aware)".
    .. [2] LangChain, ``MarkdownHeaderTextSplitter``,
       https://python.langchain.com/docs/how_to/markdown_header_metadata_splitter/
    .. [3] CommonMark Spec 0.31.2, https://spec.commonmark.org/0.31.2/

    Examples
    --------
    >>> from chunkwise.tokens import WhitespaceSpanner
    >>> doc = "# Guide\\n\\nIntro.\\n\\n## Install\\n\\nRun it."
    >>> [(c.text, c.metadata["headings"]) for c in StructureChunker(50, tokenizer=WhitespaceSpanner()).split(doc)]
    [('# Guide\\n\\nIntro.', ['Guide']), ('## Install\\n\\nRun it.', ['Guide', 'Install'])]
    """

    def __init__(
        self,
        chunk_size: int = 256,
        encoding_name: str = DEFAULT_ENCODING,
        tokenizer: Any = None,
        setext: bool = True,
        wikitext: bool = True,
    ) -> None:
        self.chunk_size = check_positive_int("chunk_size", chunk_size, "tokens")
        for name, value in (("setext", setext), ("wikitext", wikitext)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False, got {value!r}.")
        self.setext = setext
        self.wikitext = wikitext
        self.encoding_name = encoding_name
        self.spanner: TokenSpanner = as_spanner(tokenizer, encoding_name)
        self._count = make_counter(self.spanner)
        self._splitter = RecursiveTokenChunker(
            self.chunk_size, 0, length_function=self._count, keep_separator="end"
        )

    def __repr__(self) -> str:
        return (
            f"StructureChunker(chunk_size={self.chunk_size}, tokenizer={self.spanner!r}, "
            f"setext={self.setext}, wikitext={self.wikitext})"
        )

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` into structure chunks.

        Parameters
        ----------
        text : str

        Returns
        -------
        list of Chunk
            In source order, ``text[c.start:c.end] == c.text``, never empty or
            whitespace-only. ``metadata``: ``"headings"`` (list of heading titles, outermost
            first; ``[]`` before the first heading), ``"heading_level"`` (0 for the
            preamble), ``"section"`` (index of the section), ``"n_tokens"``,
            ``"tokenizer"`` and ``"oversized"`` (a code block or table over
            ``chunk_size``, emitted whole).

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        out: list[Chunk] = []
        for si, sec in enumerate(parse_markdown_sections(text, setext=self.setext, wikitext=self.wikitext)):
            units = self._units(text, sec)
            meta = {"headings": list(sec.path), "heading_level": sec.level, "section": si}
            run: list[tuple[int, int]] = []

            def flush() -> None:
                for i, j, n in pack_units(text, run, self.chunk_size, self._count):
                    a, b = run[i][0], run[j - 1][1]
                    out.append(Chunk(text[a:b], a, b, {
                        **meta, "headings": list(sec.path), "n_tokens": n,
                        "tokenizer": self.spanner.name, "oversized": False,
                    }))
                run.clear()

            for a, b, n, oversized in units:
                if oversized:
                    flush()
                    out.append(Chunk(text[a:b], a, b, {
                        **meta, "headings": list(sec.path), "n_tokens": n,
                        "tokenizer": self.spanner.name, "oversized": True,
                    }))
                else:
                    run.append((a, b))
            flush()
        return out

    def _units(self, text: str, sec: MarkdownSection) -> list[tuple[int, int, int, bool]]:
        """Packable units ``(start, end, n_tokens, oversized)`` of one section."""
        size = self.chunk_size
        # Blocks: split at blank lines outside protected spans.
        blocks: list[tuple[int, int]] = []
        cur: int | None = None
        last_end = sec.start
        for m in _LINE.finditer(text, sec.start, sec.end):
            s, e = m.start(), m.end()
            inside = any(p0 < s < p1 for p0, p1 in sec.protected)
            if not text[s:e].strip() and not inside:
                if cur is not None:
                    blocks.append((cur, last_end))
                    cur = None
                continue
            if cur is None:
                cur = s
            last_end = e
        if cur is not None:
            blocks.append((cur, last_end))

        units: list[tuple[int, int, int, bool]] = []
        for a, b in blocks:
            a, b = _trim(text, a, b)
            if a >= b:
                continue
            n = self._count(text[a:b])
            if n <= size:
                units.append((a, b, n, False))
                continue
            pos = a
            for p0, p1 in sec.protected:
                if p1 <= a or p0 >= b:
                    continue
                units.extend(self._free_pieces(text, pos, p0))
                q0, q1 = _trim(text, p0, p1)
                if q1 > q0:
                    nq = self._count(text[q0:q1])
                    units.append((q0, q1, nq, nq > size))
                pos = p1
            units.extend(self._free_pieces(text, pos, b))
        # A heading line followed by an oversized code block or table goes with it, so no
        # chunk is a bare heading.
        if (
            sec.level > 0 and len(units) >= 2 and units[1][3] and _is_heading_only(text[units[0][0] : units[0][1]])
        ):
            a, b = units[0][0], units[1][1]
            units[:2] = [(a, b, self._count(text[a:b]), True)]
        return units

    def _free_pieces(self, text: str, a: int, b: int) -> list[tuple[int, int, int, bool]]:
        if a >= b or not text[a:b].strip():
            return []
        return [
            (a + c.start, a + c.end, self._count(c.text), False) for c in self._splitter.split(text[a:b])
        ]


def _is_heading_only(block: str) -> bool:
    """True if ``block`` is one ATX heading line or a setext heading (title + underline)."""
    lines = block.split("\n")
    if len(lines) == 1:
        return bool(_ATX.match(lines[0]))
    return len(lines) == 2 and bool(_SETEXT.match(lines[1]))


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
