"""The registry of retriever kinds the evaluation engine ranks chunks with.

A :class:`RetrieverKind` names a retriever of a grid (``"dense"``, ``"bm25"``, ``"hybrid"``)
and holds its ranking function: given the indexed texts of one chunking, the questions and
(lazily) the chunk and question vectors, it returns each question's ranked chunk positions
with its own index and query time. A kind that fuses others (hybrid) names them in ``uses``
and receives their rankings, so each ranking is computed once per chunking.
:func:`chunkwise.evaluation.grid.run_grid` and :class:`~chunkwise.evaluation.grid.GridConfig`
read this registry; adding a retriever is one function plus one :func:`register_retriever`
call, after which its name works in a grid file and ``chunkwise evaluate``.

The built-in kinds are registered at the bottom of this module, from the parts in
:mod:`chunkwise.retrieval` (exact cosine or HNSW search, bm25s' BM25, reciprocal rank fusion).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RankInputs", "Ranking", "RetrieverKind", "register_retriever", "retriever_kind", "retriever_names"]


@dataclass
class RankInputs:
    """What a ranking function gets for one chunking.

    Attributes
    ----------
    texts : list of str
        The indexed text of each chunk (for contextual chunking, its context and the chunk), in
        item order.
    questions : list of str
    depth : int
        How many positions to rank per question.
    config : GridConfig
        The grid (``language``, ``tokenizer``, ``index``, ``rrf_c`` ...).
    vectors : callable ``() -> ndarray (n_items, dim)``
        The chunk vectors, embedded on the first call (cached by content).
    query_vectors : ndarray (n_questions, dim) or None
        None when no retriever of the grid needs an embedder.
    query_embed_seconds : float
        Seconds to embed one question (part of a dense query's time).
    bm25_cache : Path
        Folder of cached BM25 indexes.
    """

    texts: list[str]
    questions: list[str]
    depth: int
    config: Any
    vectors: Callable[[], np.ndarray]
    query_vectors: np.ndarray | None
    query_embed_seconds: float
    bm25_cache: Path


@dataclass
class Ranking:
    """One retriever's result on one chunking: ``ranked[i]`` = item positions for question i,
    best first; ``index_seconds`` / ``query_seconds`` its own time (building the index; per
    question), not counting the retrievers it fuses."""

    ranked: list[list[int]]
    index_seconds: float
    query_seconds: float


@dataclass(frozen=True)
class RetrieverKind:
    """A retriever of the evaluation grid.

    Attributes
    ----------
    name : str
        The name in a grid (``retrievers = ["dense", "bm25"]``).
    rank : callable ``(inputs, fused) -> Ranking``
        ``inputs`` a :class:`RankInputs`; ``fused`` maps each name in ``uses`` to its
        :class:`Ranking` on the same chunking.
    summary : str
        One line for listings.
    needs_embedder : bool, default False
        Whether it needs chunk and question vectors (then the grid needs an embedder).
    uses : tuple of str, default ()
        Retrievers whose rankings it fuses; they are ranked first, and the grid ranks at least
        ``GridConfig.hybrid_depth`` positions.
    """

    name: str
    rank: Callable[[RankInputs, Mapping[str, Ranking]], Ranking]
    summary: str
    needs_embedder: bool = False
    uses: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"a retriever kind's name must be letters, digits and '_', got {self.name!r}.")
        if not callable(self.rank):
            raise ValueError(f"retriever kind {self.name!r}: rank must be callable (inputs, fused) -> Ranking.")


_KINDS: dict[str, RetrieverKind] = {}


def register_retriever(kind: RetrieverKind, *, replace: bool = False) -> RetrieverKind:
    """Register a retriever kind (once); returns it.

    Raises
    ------
    ValueError
        If ``kind`` is not a :class:`RetrieverKind`, uses an unregistered retriever, or its
        name is taken and ``replace`` is False.
    """
    if not isinstance(kind, RetrieverKind):
        raise ValueError(f"register_retriever takes a RetrieverKind, got {type(kind).__name__}.")
    if kind.name in _KINDS and not replace:
        raise ValueError(f"a retriever named {kind.name!r} is registered already; pass replace=True to replace it.")
    missing = [u for u in kind.uses if u not in _KINDS]
    if missing:
        raise ValueError(f"retriever {kind.name!r} uses {missing}, which are not registered; register them first.")
    _KINDS[kind.name] = kind
    return kind


def retriever_names() -> tuple[str, ...]:
    """The registered retrievers' names, in registration order."""
    return tuple(_KINDS)


def retriever_kind(name: str) -> RetrieverKind:
    """The registered retriever called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the registered ones).
    """
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(retriever_names())}.") from None


# --------------------------------------------------------------------------------------
# built-in kinds
# --------------------------------------------------------------------------------------


def _dense(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
    from chunkwise.retrieval.index import hnsw_search, top_k_cosine, unit_rows

    t0 = time.perf_counter()
    vectors = inputs.vectors()
    index_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    if inputs.config.index == "hnsw":
        idx = hnsw_search(unit_rows(vectors), inputs.query_vectors, inputs.depth)
    else:
        idx, _ = top_k_cosine(inputs.query_vectors, vectors, inputs.depth)
    query = inputs.query_embed_seconds + (time.perf_counter() - t0) / len(inputs.questions)
    return Ranking([list(map(int, row)) for row in idx], index_seconds, query)


def _bm25(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
    from chunkwise.retrieval.lexical import BM25Retriever

    t0 = time.perf_counter()
    bm25 = BM25Retriever(
        [(str(i), t) for i, t in enumerate(inputs.texts)],
        language=inputs.config.language,
        tokenizer=inputs.config.tokenizer,
        cache_dir=inputs.bm25_cache,
    )
    index_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    ranked = [[int(h[0]) for h in bm25.retrieve(t, inputs.depth)] for t in inputs.questions]
    return Ranking(ranked, index_seconds, (time.perf_counter() - t0) / len(inputs.questions))


def _hybrid(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
    from chunkwise.retrieval.hybrid import rrf_fuse

    t0 = time.perf_counter()
    ranked = [
        [int(cid) for cid, _ in rrf_fuse([[str(j) for j in b], [str(j) for j in d]], (0.5, 0.5), inputs.config.rrf_c)]
        for b, d in zip(fused["bm25"].ranked, fused["dense"].ranked)
    ]
    return Ranking(ranked, 0.0, (time.perf_counter() - t0) / len(inputs.questions))


register_retriever(RetrieverKind("dense", _dense, "cosine similarity of chunk and question vectors", needs_embedder=True))
register_retriever(RetrieverKind("bm25", _bm25, "BM25 (bm25s, Lucene variant) over the chunks' words"))
register_retriever(
    RetrieverKind("hybrid", _hybrid, "reciprocal rank fusion of BM25 and dense (weights 0.5 / 0.5)", needs_embedder=True,
                  uses=("bm25", "dense"))
)
