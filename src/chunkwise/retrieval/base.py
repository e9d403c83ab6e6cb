"""What every retriever shares: the hit, the interface, the no-retrieval baseline, argument checks.

A retriever has a ``name`` and ``retrieve(question, top_k) -> list[Hit]``, a hit being the
tuple ``(chunk_id, text, score)``, best first. Chunks are given as objects with ``chunk_id`` and
``text`` attributes (e.g. :class:`chunkwise.crud.rag.chunking.CorpusChunk`), ``(id, text)`` pairs,
or plain strings (their position is the id).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = ["DEFAULT_TOP_K", "Hit", "NoRetriever", "Retriever", "as_pairs", "check_top_k"]

#: Chunks returned when ``top_k`` is not given (CRUD-RAG's ``--retrieve_top_k``, the first
#: harness these retrievers served).
DEFAULT_TOP_K = 8


class Hit(NamedTuple):
    """One retrieved chunk: ``(chunk_id, text, score)``; the score's scale depends on the retriever."""

    chunk_id: str
    text: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Anything with a ``name`` and ``retrieve(question, top_k) -> list[Hit]`` (best first)."""

    name: str

    def retrieve(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:  # pragma: no cover
        ...


def check_top_k(top_k: Any) -> int:
    """``top_k`` as an int, for ``retrieve``: zero is allowed (no hits).

    Raises
    ------
    ValueError
        If ``top_k`` is not an int (bools are refused) or is negative.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
    return int(top_k)


def as_pairs(chunks: Iterable[Any]) -> tuple[list[str], list[str]]:
    """``(ids, texts)`` of chunks given as objects, ``(id, text)`` pairs or strings.

    Parameters
    ----------
    chunks : iterable
        Objects with ``chunk_id`` and ``text`` attributes, ``(id, text)`` pairs, or strings
        (the id is then the position, as a string).

    Returns
    -------
    ids, texts : list of str, each as long as ``chunks``

    Raises
    ------
    ValueError
        If two chunks share an id.
    """
    ids: list[str] = []
    texts: list[str] = []
    for i, c in enumerate(chunks):
        if isinstance(c, str):
            ids.append(str(i))
            texts.append(c)
        elif hasattr(c, "chunk_id") and hasattr(c, "text"):
            ids.append(str(c.chunk_id))
            texts.append(str(c.text))
        else:
            cid, text = c[0], c[1]
            ids.append(str(cid))
            texts.append(str(text))
    if len(set(ids)) != len(ids):
        raise ValueError("chunk ids must be unique")
    return ids, texts


class NoRetriever:
    """The "w/o RAG" baseline: retrieves nothing."""

    name = "none"

    def retrieve(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:
        """An empty list (after checking ``top_k``: an int >= 0, else ``ValueError``)."""
        check_top_k(top_k)
        return []
