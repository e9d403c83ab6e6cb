"""Contextual chunking (Anthropic's "contextual retrieval"): an LLM situates each chunk in its
document; the context is indexed with the chunk, the scored span stays the chunk's own."""

from __future__ import annotations

import bisect
import numbers
from collections.abc import Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from chunkwise.chunk import Chunk
from chunkwise.chunkers.base import check_positive_int
from chunkwise.tokens import DEFAULT_ENCODING, TokenSpanner, as_spanner

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = ["CONTEXT_PROMPT", "ContextualChunker", "block_window", "document_window", "index_text"]

#: The request sent for every chunk; ``{document}`` comes first so that a server with prefix
#: caching (llama.cpp's ``cache_prompt``, Anthropic's prompt caching) reuses the document's
#: prompt processing across the chunks of one document.
CONTEXT_PROMPT = (
    "Read this document.\n<document>\n{document}\n</document>\n\n"
    "One passage of it will be indexed on its own for search:\n<chunk>\n{chunk}\n</chunk>\n\n"
    "In one or two short sentences, say what the document is and where this passage sits in it "
    "(its topic, the entities it refers to), so that the passage can be found by a search "
    "query. Write only those sentences."
)

#: Marks text of the document left out of the prompt (see :func:`document_window`).
ELISION = "[...]"


def index_text(chunk: Chunk) -> str:
    """The text to embed and to index with BM25 for ``chunk``.

    ``chunk.metadata["index_text"]`` when a :class:`ContextualChunker` set it (context, blank
    line, chunk text), else ``chunk.text``. Scoring still uses ``chunk.start``/``chunk.end``.
    """
    value = chunk.metadata.get("index_text")
    return value if isinstance(value, str) else chunk.text


def document_window(
    cum_tokens: Sequence[int], units: Sequence[tuple[int, int, int]], start: int, end: int, budget: int
) -> tuple[int, int]:
    """Character span of the document shown to the LLM for the chunk ``[start, end)``.

    Rule: the window holds the chunk's own token units, then spends what is left of
    ``budget`` tokens half before and half after the chunk (the odd token after); a side that
    reaches the document's edge gives what it cannot use to the other side. Whole units only.
    When the chunk alone is over the budget the window is the chunk's units.

    Parameters
    ----------
    cum_tokens : sequence of int, length ``len(units) + 1``
        ``cum_tokens[i]`` = tokens in ``units[:i]``.
    units : sequence of (start_char, end_char, n_tokens)
        The document's token units (:meth:`chunkwise.tokens.TokenSpanner.token_spans`).
    start, end : int
        The chunk's character span.
    budget : int
        Tokens of document text allowed.

    Returns
    -------
    (int, int)
        Half-open character span in the document.
    """
    n = len(units)
    starts = [u[0] for u in units]
    ends = [u[1] for u in units]
    u0 = min(bisect.bisect_right(ends, start), n - 1)  # first unit ending after start
    u1 = max(bisect.bisect_left(starts, end), u0 + 1)  # units [u0, u1) overlap the chunk
    rest = budget - (cum_tokens[u1] - cum_tokens[u0])
    if rest <= 0:
        return units[u0][0], units[u1 - 1][1]
    left_avail, right_avail = cum_tokens[u0], cum_tokens[n] - cum_tokens[u1]
    left = min(rest // 2, left_avail)
    right = min(rest - left, right_avail)
    left = min(rest - right, left_avail)
    lo = bisect.bisect_left(cum_tokens, cum_tokens[u0] - left, 0, u0 + 1)
    hi = bisect.bisect_right(cum_tokens, cum_tokens[u1] + right, u1) - 1
    return units[lo][0], units[hi - 1][1]


def block_window(
    cum_tokens: Sequence[int], units: Sequence[tuple[int, int, int]], start: int, end: int, budget: int
) -> tuple[int, int]:
    """Character span of the document shown for the chunk ``[start, end)`` in ``"blocks"`` mode.

    Rule: the document's token units are cut, in order, into consecutive blocks of whole units
    holding at most ``budget`` tokens each (a unit alone over the budget is a block of its
    own). The window is the block holding the chunk's first unit, extended to the end of the
    chunk's last unit when the chunk runs past the block. All chunks that start in one block
    therefore share the same prompt up to that block's end: a server with prompt-prefix
    caching (llama.cpp) processes the block once for all of them, when the requests are sent
    in document order.

    Parameters and returns as :func:`document_window`.
    """
    n = len(units)
    starts = [u[0] for u in units]
    ends = [u[1] for u in units]
    u0 = min(bisect.bisect_right(ends, start), n - 1)  # first unit ending after start
    u1 = max(bisect.bisect_left(starts, end), u0 + 1)
    b0 = 0  # walk the blocks up to the one holding u0
    while True:
        b1 = max(bisect.bisect_right(cum_tokens, cum_tokens[b0] + budget, b0 + 1) - 1, b0 + 1)
        if u0 < b1 or b1 >= n:
            break
        b0 = b1
    return units[b0][0], units[max(b1, u1) - 1][1]


class ContextualChunker:
    """Any chunker's chunks, each with a short LLM-written context that situates it in its document.

    Anthropic's *contextual retrieval* (September 2024): before indexing, a language model
    is shown the whole document and one chunk and writes a short context for the chunk (what
    the document is, where the chunk fits); the context is prepended to the chunk for the
    embedding ("contextual embeddings") and for the BM25 index ("contextual BM25"). The
    boundaries are the base chunker's, unchanged: the chunk's ``text``, ``start`` and
    ``end`` stay its own, so span-based scoring measures the same span as without context.
    The guide the book starts from lists it as "not really a splitter": it works on top of
    any boundaries.

    For each chunk of ``base_chunker.split(text)`` one request :data:`CONTEXT_PROMPT`; the
    requests of a document go out as one batch through ``llm.chat_many`` (so
    :class:`chunkwise.llm.LLMClient` caches them: a rerun or a committed cache makes no
    request). The reply, stripped, is ``metadata["context"]``;
    ``metadata["index_text"]`` is ``context + "\\n\\n" + chunk.text`` (just ``chunk.text``
    when the reply is empty). Read it with :func:`index_text`.

    **Long documents.** Anthropic sends the whole document. Here the document is measured in
    tokens of ``encoding_name`` (cl100k_base by default, a stand-in for the model's own
    tokenizer, which chunkwise cannot see through an OpenAI-compatible endpoint); when it is
    over ``max_document_tokens``, the prompt shows a window of ``max_document_tokens``
    tokens around the chunk instead (:func:`document_window`: the chunk, then the remaining
    budget split evenly before and after it, unused budget moving to the other side), with
    ``[...]`` where text was left out. ``metadata["document_window"]`` records the span
    shown. With ``windows="blocks"`` the window is instead the fixed block of the document
    that holds the chunk (:func:`block_window`), so that consecutive chunks share their
    prompt prefix and a prefix-caching server reads each block once.

    Parameters
    ----------
    base_chunker : object with ``split(text) -> list[Chunk]``
        The chunker whose boundaries are used, e.g.
        :class:`~chunkwise.chunkers.recursive.RecursiveTokenChunker`.
    llm : chunkwise.llm.ChatModel
        E.g. :class:`chunkwise.llm.LLMClient`; its replies have ``.text`` (and optionally
        ``.cached`` and ``.latency_s``).
    max_document_tokens : int, default 3000
        Largest document excerpt shown per request, in tokens of ``encoding_name``. The
        default leaves room for the chunk, the instructions and the reply in a 4096-token
        context (the local Qwen2.5 server of ``chunkwise.llm.local``).
    context_max_tokens : int, default 100
        ``max_tokens`` of each reply (tokens of the model's tokenizer).
    max_workers : int, optional
        Concurrent requests: ``max_concurrency`` of the batch call
        (:meth:`~chunkwise.llm.LLMClient.chat_many`: cached replies first, the misses at most
        this many at once); ``None`` means the client's ``max_concurrency``. An object with
        ``chat`` only is asked one request at a time
        (:class:`~chunkwise.llm.SequentialBatches`). A local 2-core server gains nothing from
        more than 1; with a remote API, more overlap the waiting.
    temperature : float or None, default 0.0
    encoding_name : str, default "cl100k_base"
        tiktoken encoding used to measure documents when ``tokenizer`` is None.
    tokenizer : TokenSpanner, tiktoken-like object or str, optional
        Anything :func:`chunkwise.tokens.as_spanner` accepts; overrides ``encoding_name``.
    windows : {"centered", "blocks"}, default "centered"
        How a long document is cut for the prompt: :func:`document_window` (the chunk in the
        middle of its own window) or :func:`block_window` (fixed blocks shared by their
        chunks; much cheaper with a prefix-caching local server).

    Attributes
    ----------
    last_stats : dict
        Of the latest :meth:`split`: ``"llm_calls"`` (requests made, one per chunk,
        cached or not), ``"cache_hits"`` (replies with ``cached`` true) and ``"truncated"``
        (chunks whose prompt showed a window, not the whole document).

    Raises
    ------
    TypeError
        If ``base_chunker`` has no ``split`` or ``llm`` no ``chat`` method.
    ValueError
        If ``max_document_tokens``, ``context_max_tokens`` or ``max_workers`` is not a
        positive int, ``temperature`` is not a number ``>= 0`` or None, or ``windows`` is
        not "centered" or "blocks".

    References
    ----------
    .. [1] Anthropic (2024-09-19). *Introducing Contextual Retrieval*.
       https://www.anthropic.com/news/contextual-retrieval
    .. [2] The semantic-chunking guide this book starts from (``shared/seeds``), paragraph on
       contextual chunking.
    """

    def __init__(
        self,
        base_chunker: Any,
        llm: ChatModel,
        max_document_tokens: int = 3000,
        context_max_tokens: int = 100,
        max_workers: int | None = None,
        temperature: float | None = 0.0,
        encoding_name: str = DEFAULT_ENCODING,
        tokenizer: Any = None,
        windows: str = "centered",
    ) -> None:
        if windows not in ("centered", "blocks"):
            raise ValueError(f"windows must be 'centered' or 'blocks', got {windows!r}.")
        self.windows = windows
        if isinstance(base_chunker, (str, bytes)) or not callable(getattr(base_chunker, "split", None)):
            raise TypeError(
                "base_chunker must have a split(text) -> list[Chunk] method, e.g. "
                f"chunkwise.chunkers.RecursiveTokenChunker(400, 0); got {type(base_chunker).__name__}."
            )
        if not callable(getattr(llm, "chat", None)):
            raise TypeError(
                "llm must be a chunkwise.llm.LLMClient (or have chat(messages, ...)); configure one "
                f"with LLMClient.from_env(); got {type(llm).__name__}."
            )
        self.base_chunker = base_chunker
        self.llm = llm
        self.max_document_tokens = check_positive_int("max_document_tokens", max_document_tokens, "tokens")
        self.context_max_tokens = check_positive_int("context_max_tokens", context_max_tokens, "tokens")
        self.max_workers = (
            None if max_workers is None else check_positive_int("max_workers", max_workers, "concurrent requests")
        )
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not temperature >= 0
        ):
            raise ValueError(f"temperature must be a number >= 0 or None, got {temperature!r}.")
        self.temperature = None if temperature is None else float(temperature)
        self.encoding_name = encoding_name
        self.spanner: TokenSpanner = as_spanner(tokenizer, encoding_name)
        self.last_stats: dict[str, int] = {"llm_calls": 0, "cache_hits": 0, "truncated": 0}

    def __repr__(self) -> str:
        return (
            f"ContextualChunker(base_chunker={self.base_chunker!r}, max_document_tokens={self.max_document_tokens}, "
            f"context_max_tokens={self.context_max_tokens}, max_workers={self.max_workers})"
        )

    def prompt(self, text: str, chunk: Chunk, window: tuple[int, int] | None = None) -> str:
        """The request for ``chunk`` of document ``text``, showing ``text[window]`` (default: all)."""
        ws, we = window if window is not None else (0, len(text))
        shown = text[ws:we]
        if ws > 0:
            shown = f"{ELISION} {shown}"
        if we < len(text):
            shown = f"{shown} {ELISION}"
        return CONTEXT_PROMPT.format(document=shown, chunk=chunk.text)

    def split(self, text: str) -> list[Chunk]:
        """Chunk ``text`` with the base chunker and add each chunk's context.

        Parameters
        ----------
        text : str
            The whole document (its chunks are situated in it).

        Returns
        -------
        list of Chunk
            The base chunker's chunks, same text and offsets, with ``metadata`` added:
            ``"context"`` (the reply, stripped), ``"index_text"`` (context, blank line,
            chunk text), ``"document_window"`` (``[start, end]`` of the document text
            shown to the model) and ``"context_seconds"`` (the reply's ``latency_s``: for a
            cached reply, the seconds the original request took; 0 when not reported).

        Raises
        ------
        TypeError
            If ``text`` is not a str.
        ValueError
            If the base chunker returns a chunk that is not ``text[start:end]``.
        chunkwise.llm.LLMError
            From the client, when a request fails after its retries.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        chunks = self.base_chunker.split(text)
        for i, c in enumerate(chunks):
            if text[c.start : c.end] != c.text:
                raise ValueError(f"base_chunker returned chunk {i} whose text is not text[start:end].")
        if not chunks:
            self.last_stats = {"llm_calls": 0, "cache_hits": 0, "truncated": 0}
            return []
        units = self.spanner.token_spans(text)
        cum = [0, *accumulate(u[2] for u in units)]
        whole = cum[-1] <= self.max_document_tokens
        rule = block_window if self.windows == "blocks" else document_window
        windows = [
            (0, len(text)) if whole else rule(cum, units, c.start, c.end, self.max_document_tokens)
            for c in chunks
        ]
        prompts = [self.prompt(text, c, w) for c, w in zip(chunks, windows)]

        from chunkwise.llm.batch import chat_many

        results = chat_many(
            self.llm, [[{"role": "user", "content": p}] for p in prompts], max_concurrency=self.max_workers,
            errors="raise", temperature=self.temperature, max_tokens=self.context_max_tokens,
        )
        replies = [r.output for r in results]

        out: list[Chunk] = []
        for c, w, r in zip(chunks, windows, replies):
            context = str(getattr(r, "text", r) or "").strip()
            idx = f"{context}\n\n{c.text}" if context else c.text
            out.append(Chunk(c.text, c.start, c.end, {
                **c.metadata, "context": context, "index_text": idx, "document_window": [w[0], w[1]],
                "context_seconds": float(getattr(r, "latency_s", 0.0) or 0.0),
            }))
        self.last_stats = {
            "llm_calls": len(replies),
            "cache_hits": sum(1 for r in replies if getattr(r, "cached", False)),
            "truncated": 0 if whole else len(chunks),
        }
        return out
