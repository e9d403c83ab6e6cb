"""Document loaders by file type: plain text, Markdown, PDF, Word and HTML as one text each.

Every loader returns the text that chunkwise chunks and scores; all character offsets (the
questions' references, the chunks' spans) index that extracted text, which the reports show.
Newlines are universal (``\\r\\n`` and ``\\r`` become ``\\n``).

=========  =================  ================================================================
suffix     library            what the extracted text loses
=========  =================  ================================================================
.txt .md   (none)             nothing: the file decoded with ``encoding``
.pdf       pypdf (BSD)        layout: tables become lines of cell text, running headers and
                              footers repeat on every page, multi-column pages may interleave
                              their columns; pages are joined by a blank line. A PDF without a
                              text layer (a scan) has no text and is skipped: run OCR first
                              (e.g. ``ocrmypdf``). An encrypted PDF opens only without a password.
.docx      python-docx (MIT)  headers, footers, footnotes, comments, text boxes and equations;
                              paragraphs are joined by a blank line, table rows become ``cell |
                              cell`` lines in document order (a merged cell's text once, in its
                              first row and column; a nested table's rows are lines inside its
                              cell). Text in content controls, hyperlinks and tracked
                              insertions is kept, tracked deletions are not (the document as
                              if every change were accepted)
.html .htm BeautifulSoup (MIT)  scripts, styles, the head, navigation menus and markup; block elements become
                              paragraphs, table rows ``cell | cell`` lines (a nested table's
                              rows are lines inside its cell, each cell once), runs of spaces
                              one space (so ``<pre>`` loses its indentation); link targets and
                              images are dropped. A page chunkwise wrote (``report.html``,
                              ``boundaries.html``: marked by :data:`chunkwise.figures.GENERATOR_META`)
                              is skipped, never read as a document
=========  =================  ================================================================

Text files in UTF-16 or UTF-32 that start with their byte-order mark are read as such whatever
``encoding`` says (the mark names the encoding, per file: a folder of UTF-16 documents and a UTF-8
questions file need no option); under ``encoding="utf-16"`` a file without the mark that is valid
UTF-8 is read as UTF-8 (:func:`file_encoding`).

pypdf, python-docx and BeautifulSoup are pure-Python, permissively licensed and maintained;
pypdf reads text in content-stream order without layout analysis (pdfminer.six orders by layout
but is several times slower and still flattens tables), and BeautifulSoup's standard-library
parser needs no compiled dependency.

A file that cannot be read is not an error of the whole folder: :func:`read_document` raises
:class:`UnreadableDocument` with the reason (for a PDF or .docx any error of the library reading
it, named with its type and message: an AES-encrypted PDF without the ``cryptography`` package,
a content stream past pypdf's decompression limit, a table python-docx cannot walk), and
:func:`chunkwise.datasets.local.load_documents` lists every skipped file with it.
"""

from __future__ import annotations

import bisect
import codecs
import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LOADERS", "Documents", "PagedText", "SkippedFile", "UnreadableDocument", "is_chunkwise_page", "page_label",
           "page_of", "printable_name", "read_document"]


class UnreadableDocument(ValueError):
    """A document file that yields no text; ``reason`` says why and what to do."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name} {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class SkippedFile:
    """A file of a documents folder that was not loaded: its name and the reason."""

    name: str
    reason: str

    def line(self) -> str:
        return f"skipped: {self.name} {self.reason}"


class Documents(dict):
    """Document name -> extracted text (a ``dict``), with ``skipped``: the files not loaded
    (list of :class:`SkippedFile`), ``kinds``: name -> loader suffix, ``renamed``: printable
    name -> ``repr`` of the file name on disk, for files whose name is not valid UTF-8
    (:func:`printable_name`), ``page_starts``: PDF name -> the character offset where each
    of its pages begins (:func:`page_label` turns a span into ``"p. 3"``), and ``linked``:
    name -> target of each document read through a link to a file outside the folder."""

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)
        self.skipped: list[SkippedFile] = []
        self.kinds: dict[str, str] = {}
        self.renamed: dict[str, str] = {}
        self.page_starts: dict[str, list[int]] = {}
        self.linked: dict[str, str] = {}


class PagedText(str):
    """The text of a PDF with ``page_starts``: the character offset where each page begins
    (first 0, one per page, pages joined by a blank line). :func:`load_documents` keeps the
    map in :attr:`Documents.page_starts` and the text as a plain ``str``."""

    page_starts: list[int]

    def __new__(cls, text: str, page_starts: list[int]) -> PagedText:
        obj = super().__new__(cls, text)
        obj.page_starts = list(page_starts)
        return obj


def page_of(page_starts: list[int], offset: int) -> int:
    """The 1-based page holding character ``offset`` of a PDF's text (:class:`PagedText`)."""
    return max(1, bisect.bisect_right(page_starts, offset))


def page_label(page_starts: list[int], start: int, end: int) -> str:
    """``"p. 3"`` for a span on one page, ``"pp. 3-4"`` for one that crosses pages
    (``[start, end)``, character offsets)."""
    a, b = page_of(page_starts, start), page_of(page_starts, max(start, end - 1))
    return f"p. {a}" if a == b else f"pp. {a}-{b}"


def printable_name(name: str) -> str:
    """``name`` with the bytes of a file name that is not valid UTF-8 written as ``\\xNN``.

    Python hands such a name over with lone surrogates (``'caf\\udce9.txt'`` for the Latin-1
    bytes ``caf\\xe9.txt``), which cannot be printed or written to JSON; the printable form
    (``'caf\\\\xe9.txt'``, shown as ``caf\\xe9.txt``) can. A valid name is returned unchanged.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return name


def _why(exc: BaseException, limit: int = 200) -> str:
    """``Type: message`` of an exception on one line, at most ``limit`` characters of message."""
    msg = " ".join(str(exc).split())
    msg = msg if len(msg) <= limit else msg[: limit - 3] + "..."
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _universal(text: str) -> str:
    return io.StringIO(text, newline=None).read()


_BINARY = "looks like a binary file (it contains NUL bytes); keep text, PDF, Word or HTML files in the folder."
#: Byte-order marks of the encodings whose text is full of NUL bytes (UTF-32 first: its
#: little-endian mark starts with UTF-16's).
_WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
              (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def wide_bom(data: bytes) -> str | None:
    """``"utf-32"`` or ``"utf-16"`` when ``data`` starts with that encoding's byte-order mark, else None."""
    for bom, family in _WIDE_BOMS:
        if data.startswith(bom):
            return family
    return None


def file_encoding(data: bytes, encoding: str) -> str:
    """The encoding to decode one file's ``data`` with, given the one asked for.

    The encoding its UTF-16/32 byte-order mark names, whatever ``encoding`` says; for a UTF-16/32
    ``encoding`` and a file without that mark, UTF-8 when its bytes are valid UTF-8 without a
    NUL byte (a UTF-8 file beside UTF-16 ones: UTF-16 text of any Latin script is full of NUL
    bytes); else ``encoding``.

    Raises
    ------
    ValueError
        For an unknown ``encoding``.
    """
    try:
        codec = codecs.lookup(encoding).name
    except LookupError as exc:
        raise ValueError(f"unknown encoding {encoding!r}; use a Python codec name such as utf-8 or cp1252.") from exc
    bom = wide_bom(data)
    if bom is not None:
        return bom
    if codec.startswith(("utf-16", "utf-32")) and b"\x00" not in data:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return encoding
        return "utf-8"
    return encoding


def _read_plain(path: Path, name: str, encoding: str) -> str:
    data = path.read_bytes()
    encoding = file_encoding(data, encoding)
    wide = codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))  # NUL bytes are text there
    if not wide:
        if b"\x00" in data[:8192]:
            raise UnreadableDocument(name, _BINARY)
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(
            name,
            f"is not valid {encoding} (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            "convert it to UTF-8 or pass its encoding with --encoding (e.g. --encoding cp1252).",
        ) from exc
    if wide and "\x00" in text[:8192]:
        raise UnreadableDocument(name, _BINARY)
    return _universal(text)


def _read_pdf(path: Path, name: str, encoding: str) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import DependencyError
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise UnreadableDocument(name, "needs the pypdf package to be read (pip install pypdf).") from exc
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception:  # noqa: BLE001 - pypdf raises several types for unsupported ciphers
                ok = 0
            if not ok:
                raise UnreadableDocument(name, "is an encrypted PDF that needs a password; save an unprotected copy.")
        pages = [page.extract_text() or "" for page in reader.pages]
    except UnreadableDocument:
        raise
    except DependencyError as exc:  # pypdf opens an empty-password AES PDF only with cryptography
        if "AES" in str(exc):
            raise UnreadableDocument(
                name, "is an encrypted PDF (AES) that pypdf can open only with the cryptography package; "
                "pip install cryptography, or save an unprotected copy.") from exc
        raise UnreadableDocument(name, f"needs a package pypdf lacks here ({_why(exc)}); install it and retry.") from exc
    except Exception as exc:  # noqa: BLE001 - one damaged PDF is a skip, named, never the end of the folder
        # pypdf raises PdfReadError, LimitReachedError (a stream past its decompression limit),
        # and on damaged files KeyError, TypeError, RecursionError, zlib.error ...
        raise UnreadableDocument(name, f"is not a readable PDF ({_why(exc)}).") from exc
    pieces = [p.strip("\n") for p in pages]
    text = "\n\n".join(pieces)
    if not text.strip():
        raise UnreadableDocument(
            name,
            f"has no text layer ({len(pages)} page(s), no extractable text: a scanned PDF?); run OCR first, e.g. ocrmypdf.",
        )
    # where each page starts in the text: raw offsets, less one per "\r\n" before them (universal newlines)
    raw_starts, at = [], 0
    for piece in pieces:
        raw_starts.append(at)
        at += len(piece) + 2
    crlf = [m.start() for m in re.finditer("\r\n", text)]
    return PagedText(_universal(text), [s - bisect.bisect_left(crlf, s - 1) for s in raw_starts])


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
#: Inline wrappers whose runs are text of the paragraph: links, content controls, tracked
#: insertions and moves (to), fields, smart tags. Deleted or moved-away runs (w:del,
#: w:moveFrom) and math (m:oMath) are not read.
_DOCX_INLINE = {f"{_W}{t}" for t in ("hyperlink", "ins", "moveTo", "sdt", "sdtContent", "smartTag", "customXml",
                                     "fldSimple", "dir", "bdo")}
#: Block wrappers (content controls, custom XML) around paragraphs, tables, rows or cells.
_DOCX_BLOCK = {f"{_W}{t}" for t in ("sdt", "sdtContent", "customXml")}


def _docx_runs(el: object, out: list[str]) -> None:
    """Append the text of the runs under a paragraph ``el`` (python-docx's run text: w:t, tabs
    and line breaks), looking through :data:`_DOCX_INLINE` wrappers."""
    from docx.oxml.text.run import CT_R

    for child in el:  # type: ignore[attr-defined]
        if isinstance(child, CT_R):
            out.append(child.text)
        elif child.tag in _DOCX_INLINE:
            _docx_runs(child, out)


def _docx_children(el: object, tag: str):
    """The ``w:tag`` children of ``el``, looking through content controls and custom XML."""
    for child in el:  # type: ignore[attr-defined]
        if child.tag == f"{_W}{tag}":
            yield child
        elif child.tag in _DOCX_BLOCK:
            yield from _docx_children(child, tag)


def _docx_blocks(el: object, out: list[str]) -> None:
    """Append the text of the paragraphs and tables under ``el`` (the body or a table cell), in
    document order: a paragraph's runs, a table's rows as ``cell | cell`` lines."""
    for child in el:  # type: ignore[attr-defined]
        if child.tag == f"{_W}p":
            runs: list[str] = []
            _docx_runs(child, runs)
            text = "".join(runs)
            if text.strip():
                out.append(text)
        elif child.tag == f"{_W}tbl":
            rows = []
            for tr in _docx_children(child, "tr"):
                cells = []
                for tc in _docx_children(tr, "tc"):  # each w:tc once: merged cells are not repeated
                    inner: list[str] = []
                    _docx_blocks(tc, inner)  # paragraphs and nested tables
                    cells.append("\n".join(inner).strip())
                row = " | ".join(cells).rstrip()
                if row.strip(" |"):
                    rows.append(row)
            if rows:
                out.append("\n".join(rows))
        elif child.tag in _DOCX_BLOCK:
            _docx_blocks(child, out)


def _read_docx(path: Path, name: str, encoding: str) -> str:
    try:
        import docx
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise UnreadableDocument(name, "needs the python-docx package to be read (pip install python-docx).") from exc
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # noqa: BLE001 - python-docx raises zipfile / lxml / its own errors
        raise UnreadableDocument(name, f"is not a readable Word .docx file ({_why(exc)}).") from exc
    blocks: list[str] = []
    try:
        _docx_blocks(document.element.body, blocks)
    except Exception as exc:  # noqa: BLE001 - one odd .docx is a skip, named, never the end of the folder
        raise UnreadableDocument(
            name, f"could not be converted to text ({_why(exc)}); save it again from Word or as PDF and retry.") from exc
    return _universal("\n\n".join(b for b in blocks if b))


_BLANKS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLOCK_TAGS = [
    "p", "div", "section", "article", "header", "footer", "main", "nav", "aside", "h1", "h2", "h3", "h4", "h5",
    "h6", "li", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "figure", "figcaption", "hr",
]


_META = re.compile(rb"<meta\b[^>]*>", re.I)
_GENERATOR_NAME = re.compile(rb"""\bname\s*=\s*["']?generator\b""", re.I)
_GENERATOR_CHUNKWISE = re.compile(rb"""\bcontent\s*=\s*["']?chunkwise\b""", re.I)
#: What pages chunkwise wrote before they carried the generator tag begin with (boundaries.html's
#: legend; report.html's first table heading).
_OLD_PAGES = (b'<span class="ov">two chunks overlap</span><span class="out">in no chunk</span>',
              b"<h2>Cells (percent)</h2>")


def is_chunkwise_page(raw: bytes) -> bool:
    """Whether the bytes of an HTML file are a page chunkwise wrote (a report, chunk boundaries).

    True for a ``<meta name="generator" content="chunkwise ...">`` tag
    (:data:`chunkwise.figures.GENERATOR_META`) in the first 64 kB, or for the opening of a page
    chunkwise wrote before it had that tag.
    """
    head = raw[:65536]
    if any(_GENERATOR_NAME.search(m.group(0)) and _GENERATOR_CHUNKWISE.search(m.group(0)) for m in _META.finditer(head)):
        return True
    return any(sig in head for sig in _OLD_PAGES)


def _read_html(path: Path, name: str, encoding: str) -> str:
    try:
        from bs4 import BeautifulSoup
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise UnreadableDocument(name, "needs the beautifulsoup4 package to be read (pip install beautifulsoup4).") from exc
    raw = path.read_bytes()
    if is_chunkwise_page(raw):
        raise UnreadableDocument(
            name, "is a report written by chunkwise, not a document; write reports outside the documents folder "
            "(--out) or move this one out.")
    soup = BeautifulSoup(raw, "html.parser", from_encoding=None if encoding.lower() in ("utf-8", "utf8") else encoding)
    for tag in soup(["script", "style", "noscript", "template", "head", "nav"]):
        tag.decompose()
    # A table becomes one paragraph of "cell | cell" lines. Innermost first: a nested table is
    # already text (its rows, lines inside the outer cell) when the outer one reads its rows,
    # so each cell is read once.
    for table in reversed(soup.find_all("table")):
        rows = [" | ".join(c.get_text(" ", strip=True) for c in tr.find_all(["td", "th"])) for tr in table.find_all("tr")]
        table.replace_with("\n\n" + "\n".join(r for r in rows if r.strip(" |")) + "\n\n")
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for tag in soup.find_all(_BLOCK_TAGS):  # a block starts and ends a paragraph; inline tags do not
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    text = _universal(soup.get_text())
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip()


#: Suffix -> (what it is, loader ``(path, name, encoding) -> text``), compared case-insensitively.
LOADERS: dict[str, tuple[str, Callable[[Path, str, str], str]]] = {
    ".txt": ("plain text", _read_plain),
    ".md": ("Markdown", _read_plain),
    ".pdf": ("PDF (pypdf)", _read_pdf),
    ".docx": ("Word (python-docx)", _read_docx),
    ".html": ("HTML (BeautifulSoup)", _read_html),
    ".htm": ("HTML (BeautifulSoup)", _read_html),
}


def read_document(path: Path, name: str | None = None, encoding: str = "utf-8", *, unknown_as_text: bool = False) -> str:
    """Extract the text of one document file by its suffix (:data:`LOADERS`).

    Parameters
    ----------
    path : pathlib.Path
    name : str, optional
        Name used in messages (default the file name).
    encoding : str, default "utf-8"
        Codec of text files (and the fallback of HTML files without a declared charset).
    unknown_as_text : bool, default False
        Read a file whose suffix has no loader as plain text instead of refusing it (a single
        file named on the command line).

    Returns
    -------
    str
        The extracted text, universal newlines, never empty.

    Raises
    ------
    UnreadableDocument
        For an unknown suffix, an empty file or one without text, a binary or undecodable text
        file, a UTF-16/32 file read with another encoding, an encrypted or damaged PDF (any error
        of pypdf), a damaged .docx (any error of python-docx), a page chunkwise wrote
        (``reason`` says which and what to do).
    ValueError
        For an unknown ``encoding``.
    """
    path = Path(path)
    name = name or printable_name(path.name)
    suffix = path.suffix.lower()
    if suffix not in LOADERS and not unknown_as_text:
        raise UnreadableDocument(name, f"has an unknown type {suffix or '(no suffix)'!r}; chunkwise reads {', '.join(LOADERS)}.")
    if path.stat().st_size == 0:
        raise UnreadableDocument(name, "is empty.")
    text = LOADERS.get(suffix, ("plain text", _read_plain))[1](path, name, encoding)
    if not text.strip():
        raise UnreadableDocument(name, "has no text.")
    return text
