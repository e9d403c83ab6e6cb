"""CRUD-RAG's chunking, re-implemented with exact character offsets.

What CRUD-RAG does (``src/retrievers/base.py``, ``BaseRetriever.construct_index``; the same in
``bm25.py``): it reads the corpus folder with llama_index's ``SimpleDirectoryReader`` -- one
``Document`` per *part file*, i.e. thousands of articles joined by newlines -- and cuts it with
``SimpleNodeParser.from_defaults(chunk_size=128, chunk_overlap=0)`` (``quick_start.py`` defaults
``--chunk_size 128 --chunk_overlap 0``). In the llama_index 0.9 releases its imports need
(``llama_index.vector_stores.ElasticsearchStore``, ``llama_index.postprocessor``), that parser is
the ``SentenceSplitter``, and its sizes are **tokens** of llama_index's global tokenizer
(tiktoken, ``cl100k_base``), not characters:

1. a text that fits is one split; otherwise it is cut at the paragraph separator ``"\\n\\n\\n"``,
   then by a sentence tokenizer (NLTK punkt, trained on English: it finds nothing to cut in
   Chinese without ``". "``), then at the characters ``, . ; 。 ？ ！`` (regex
   ``[^,.;。？！]+[,.;。？！]?``), then at spaces, then into characters -- recursively, only
   splits that are still too big are cut further;
2. splits are merged greedily: a chunk takes splits while the sum of their token counts stays
   within the size;
3. chunks are stripped of surrounding whitespace and empty ones dropped.

The splitter is *metadata aware*: the document's metadata string (``file_path: ...``, the only
key ``SimpleDirectoryReader`` leaves in) is subtracted from the 128 tokens, so upstream chunks
held roughly 110 tokens of text. Its ``","`` is the ASCII comma: Chinese text is cut at
``。？！`` but not at ``，`` or ``；``.

:class:`CrudSentenceChunker` follows steps 1-3 (without punkt, which is a no-op on this corpus)
and returns :class:`~chunkwise.chunk.Chunk` objects with exact spans. :func:`chunk_articles`
applies it **per article** (a chunk never spans two articles, unlike upstream's per-file
documents) with the full 128 tokens for text (no metadata string).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from chunkwise.chunk import Chunk
from chunkwise.chunkers.base import check_positive_int
from chunkwise.tokens import DEFAULT_ENCODING, get_encoding

__all__ = [
    "CRUD_CHUNK_OVERLAP",
    "CRUD_CHUNK_SIZE",
    "CorpusChunk",
    "CrudSentenceChunker",
    "chunk_articles",
    "id_text_pairs",
]

#: CRUD-RAG's chunk size (``quick_start.py --chunk_size``), in cl100k_base tokens.
CRUD_CHUNK_SIZE = 128
#: CRUD-RAG's chunk overlap (``quick_start.py --chunk_overlap``).
CRUD_CHUNK_OVERLAP = 0

_PARAGRAPH_SEP = "\n\n\n"
_CLAUSE_RE = re.compile(r"[^,.;。？！]+[,.;。？！]?")


class CorpusChunk(NamedTuple):
    """One chunk of one corpus document.

    Attributes
    ----------
    chunk_id : str
        ``"<doc_id>#<k>"``, ``k`` counting the document's chunks from 0.
    doc_id : str
    text : str
        ``document[start:end]``.
    start, end : int
        Half-open character span in the document.
    n_tokens : int
        Token count (sum over the pieces the chunk was merged from).
    """

    chunk_id: str
    doc_id: str
    text: str
    start: int
    end: int
    n_tokens: int


class CrudSentenceChunker:
    """Sentence-preferring token chunker in the manner of CRUD-RAG's llama_index splitter.

    Parameters
    ----------
    chunk_size : int, default 128
        Largest chunk, in tokens of ``encoding_name`` (a single character bigger than that
        becomes a chunk on its own).
    chunk_overlap : int, default 0
        Tokens of whole trailing pieces of a chunk repeated at the start of the next one,
        ``0 <= chunk_overlap < chunk_size``.
    encoding_name : str, default "cl100k_base"
    paragraph_separator : str, default "\\n\\n\\n"
    clause_pattern : str, default ``"[^,.;。？！]+[,.;。？！]?"``
        Regex whose matches are the clause-level pieces.

    Notes
    -----
    Pieces keep their separators (the paragraph separator, the clause punctuation, the space)
    at their end, and characters the clause regex does not match (a second punctuation mark in a
    row) are kept with the piece before, so chunks are exact slices
    ``text[start:end]``; upstream's regex silently drops such characters. Token counts of a
    chunk are the sum of its pieces' counts, as upstream measures them.
    """

    def __init__(
        self,
        chunk_size: int = CRUD_CHUNK_SIZE,
        chunk_overlap: int = CRUD_CHUNK_OVERLAP,
        encoding_name: str = DEFAULT_ENCODING,
        paragraph_separator: str = _PARAGRAPH_SEP,
        clause_pattern: str = _CLAUSE_RE.pattern,
    ) -> None:
        self.chunk_size = check_positive_int("chunk_size", chunk_size)
        if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int) or not 0 <= chunk_overlap < chunk_size:
            raise ValueError(f"chunk_overlap must be an int in [0, {chunk_size - 1}], got {chunk_overlap!r}.")
        self.chunk_overlap = chunk_overlap
        self.encoding_name = encoding_name
        self._enc = get_encoding(encoding_name)
        self.paragraph_separator = paragraph_separator
        self._clause_re = re.compile(clause_pattern)

    def __repr__(self) -> str:
        return (
            f"CrudSentenceChunker(chunk_size={self.chunk_size}, chunk_overlap={self.chunk_overlap}, "
            f"encoding_name={self.encoding_name!r})"
        )

    def _ntok(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text)) if text else 0

    # -- cutting -----------------------------------------------------------------------------

    def _cut_sep(self, text: str, start: int, end: int, sep: str) -> list[tuple[int, int]]:
        out, s = [], start
        while True:
            i = text.find(sep, s, end)
            if i < 0:
                break
            out.append((s, i + len(sep)))
            s = i + len(sep)
        if s < end:
            out.append((s, end))
        return [p for p in out if p[1] > p[0]]

    def _cut_clauses(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        # Cut where each match after the first begins: characters no match covers stay with the
        # piece before them (leading ones with the first piece).
        starts = [m.start() for m in self._clause_re.finditer(text, start, end)][1:]
        bounds = [start, *starts, end]
        return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]

    def _cut(self, text: str, start: int, end: int) -> list[tuple[int, int]]:
        for cutter in (
            lambda: self._cut_sep(text, start, end, self.paragraph_separator),
            lambda: self._cut_clauses(text, start, end),
            lambda: self._cut_sep(text, start, end, " "),
        ):
            pieces = cutter()
            if len(pieces) > 1:
                return pieces
        return [(i, i + 1) for i in range(start, end)]

    def _pieces(self, text: str, start: int, end: int, out: list[tuple[int, int, int]]) -> None:
        n = self._ntok(text[start:end])
        if n <= self.chunk_size or end - start <= 1:
            out.append((start, end, n))
            return
        for a, b in self._cut(text, start, end):
            self._pieces(text, a, b, out)

    # -- merging -----------------------------------------------------------------------------

    def split(self, text: str) -> list[Chunk]:
        """Split ``text``.

        Returns
        -------
        list of Chunk
            In source order, each the exact slice ``text[start:end]`` with surrounding
            whitespace left out; ``metadata`` holds ``n_tokens`` and ``tokenizer``. Empty and
            whitespace-only texts give ``[]``.
        """
        if not text or text.isspace():
            return []
        pieces: list[tuple[int, int, int]] = []
        self._pieces(text, 0, len(text), pieces)
        groups: list[list[tuple[int, int, int]]] = []
        cur: list[tuple[int, int, int]] = []
        cur_len = 0
        fresh = True  # `cur` holds only overlap carried from the previous chunk (or nothing)
        for piece in pieces:
            if cur and not fresh and cur_len + piece[2] > self.chunk_size:
                groups.append(cur)
                carried: list[tuple[int, int, int]] = []
                carried_len = 0
                for p in reversed(cur):
                    if carried_len + p[2] > self.chunk_overlap:
                        break
                    carried.insert(0, p)
                    carried_len += p[2]
                cur, cur_len, fresh = carried, carried_len, True
            cur.append(piece)
            cur_len += piece[2]
            fresh = False
        if cur and not fresh:
            groups.append(cur)

        chunks: list[Chunk] = []
        for group in groups:
            start, end = group[0][0], group[-1][1]
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            if end <= start:
                continue
            chunks.append(
                Chunk(text[start:end], start, end, {"n_tokens": sum(p[2] for p in group), "tokenizer": self.encoding_name})
            )
        return chunks


def chunk_articles(
    texts: Sequence[str],
    ids: Sequence[str] | None = None,
    *,
    chunk_size: int = CRUD_CHUNK_SIZE,
    chunk_overlap: int = CRUD_CHUNK_OVERLAP,
    splitter: str | Any = "sentence",
    encoding_name: str = DEFAULT_ENCODING,
) -> list[CorpusChunk]:
    """Chunk every document of a corpus, each on its own.

    Parameters
    ----------
    texts : sequence of str
        Documents (e.g. :func:`chunkwise.crud.data.load_crud_corpus` or a
        :class:`~chunkwise.crud.data.PooledCorpus`'s ``texts``).
    ids : sequence of str, optional
        Document ids; default ``texts.ids`` when present, else ``"doc<i>"``.
    chunk_size, chunk_overlap : int
        CRUD-RAG's 128 and 0 by default (tokens).
    splitter : {"sentence", "fixed"} or chunker, default "sentence"
        ``"sentence"``: :class:`CrudSentenceChunker` (CRUD-RAG's rule); ``"fixed"``:
        :class:`~chunkwise.chunkers.fixed.FixedTokenChunker` (plain token windows); or any object
        with ``split(text) -> list[Chunk]``.
    encoding_name : str, default "cl100k_base"

    Returns
    -------
    list of CorpusChunk
        Document order, then chunk order. A document that is empty or only whitespace has
        no text to retrieve and gives no chunk.
    """
    if ids is None:
        ids = getattr(texts, "ids", None) or [f"doc{i}" for i in range(len(texts))]
    if len(ids) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(ids)} ids")
    if splitter == "sentence":
        chunker: Any = CrudSentenceChunker(chunk_size, chunk_overlap, encoding_name)
    elif splitter == "fixed":
        from chunkwise.chunkers.fixed import FixedTokenChunker

        chunker = FixedTokenChunker(chunk_size, chunk_overlap, encoding_name=encoding_name)
    elif not isinstance(splitter, str) and callable(getattr(splitter, "split", None)):
        chunker = splitter
    else:
        raise ValueError(f"splitter must be 'sentence', 'fixed' or a chunker, got {splitter!r}")
    out: list[CorpusChunk] = []
    for doc_id, text in zip(ids, texts, strict=True):
        for k, c in enumerate(chunker.split(text)):
            out.append(CorpusChunk(f"{doc_id}#{k}", str(doc_id), c.text, c.start, c.end, int(c.metadata.get("n_tokens", 0))))
    return out


def id_text_pairs(chunks: Iterable[Any], needs: str = "at least one chunk") -> tuple[list[str], list[str]]:
    """Chunk ids and texts, in order, from any of the chunk forms the index builders accept.

    Parameters
    ----------
    chunks : iterable
        :class:`CorpusChunk` objects (``chunk_id``, ``text``), objects with ``id`` and ``text``,
        ``(id, text)`` pairs, or strings (id = the position as a string).
    needs : str
        Completes the empty-input message, e.g. ``"a RAPTOR tree needs at least one chunk"``.

    Returns
    -------
    (ids, texts) : two lists of str of equal length

    Raises
    ------
    ValueError
        For a single string instead of an iterable of chunks, an item of none of these forms,
        a chunk whose text is empty or blank, no chunk at all, or duplicate ids.
    """
    if isinstance(chunks, (str, bytes)):
        raise ValueError("chunks must be an iterable of chunks, not a single string")
    ids: list[str] = []
    texts: list[str] = []
    for i, c in enumerate(chunks):
        if isinstance(c, str):
            cid, text = str(i), c
        elif hasattr(c, "chunk_id") and hasattr(c, "text"):
            cid, text = str(c.chunk_id), str(c.text)
        elif hasattr(c, "id") and hasattr(c, "text"):
            cid, text = str(c.id), str(c.text)
        else:
            try:
                cid, text = str(c[0]), str(c[1])
            except (TypeError, IndexError, KeyError):
                raise ValueError(f"chunk {i} is not a CorpusChunk, an (id, text) pair or a string: {c!r}") from None
        if not text.strip():
            raise ValueError(f"chunk {cid!r} has no text")
        ids.append(cid)
        texts.append(text)
    if not ids:
        raise ValueError(f"chunks is empty: {needs}")
    if len(set(ids)) != len(ids):
        raise ValueError("chunk ids must be unique")
    return ids, texts
