"""Hybrid retrieval: reciprocal rank fusion (RRF) of several retrievers' rankings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chunkwise.retrieval.base import DEFAULT_TOP_K, Hit, check_top_k

__all__ = ["RRF_C", "RRF_WEIGHTS", "HybridRetriever", "rrf_fuse"]

#: Reciprocal-rank-fusion constant ``c`` (Cormack et al. 2009; CRUD-RAG's ``EnsembleRetriever.c``).
RRF_C = 60
#: Default fusion weights of two retrievers, (lexical, dense) (CRUD-RAG's ``EnsembleRetriever.weights``).
RRF_WEIGHTS = (0.5, 0.5)


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float] | None = None,
    c: float = RRF_C,
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion (Cormack, Clarke & Buettcher, 2009).

    ``score(d) = sum_i weights[i] / (c + rank_i(d))`` over the rankings that contain ``d``,
    ranks counted from 1 -- CRUD-RAG's ``EnsembleRetriever`` with ``weights = [0.5, 0.5]`` and
    ``c = 60``.

    Parameters
    ----------
    rankings : sequence of sequence of str
        Ids, best first; a repeated id counts at its first rank only.
    weights : sequence of float, optional
        One per ranking; default equal weights ``1 / len(rankings)``.
    c : float, default 60

    Returns
    -------
    list of (id, score)
        Every id of every ranking, by score descending. Ties go to the id met first when the
        rankings are read rank by rank (rank 1 of each ranking in order, then rank 2, ...).

    Raises
    ------
    ValueError
        If the number of weights differs from the number of rankings.

    References
    ----------
    .. [1] G. V. Cormack, C. L. A. Clarke and S. Buettcher, "Reciprocal rank fusion outperforms
       Condorcet and individual rank learning methods", SIGIR 2009.
    """
    if weights is None:
        weights = [1.0 / len(rankings)] * len(rankings) if rankings else []
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    for i, (ranking, w) in enumerate(zip(rankings, weights)):
        seen: set[str] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + float(w) / (c + rank)
            pos = (rank, i)
            if doc not in first_seen or pos < first_seen[doc]:
                first_seen[doc] = pos
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


class HybridRetriever:
    """Reciprocal rank fusion of several retrievers (CRUD-RAG: BM25 and dense, 0.5/0.5, c=60).

    Parameters
    ----------
    retrievers : sequence of Retriever
        In CRUD-RAG's order: BM25 first, dense second (the order breaks ties, see :func:`rrf_fuse`).
    weights : sequence of float or None, default (0.5, 0.5)
        One per retriever; ``None`` for equal weights (needed with other than two retrievers).
    c : float, default 60
    depth : int, optional
        Hits asked from each retriever; default ``top_k`` (CRUD-RAG asks each for top_k).
    name : str, default "hybrid"

    Raises
    ------
    ValueError
        If the number of weights differs from the number of retrievers.
    """

    def __init__(
        self,
        retrievers: Sequence[Any],
        weights: Sequence[float] | None = RRF_WEIGHTS,
        c: float = RRF_C,
        depth: int | None = None,
        name: str = "hybrid",
    ) -> None:
        self.retrievers = list(retrievers)
        if weights is None:
            weights = [1.0 / len(self.retrievers)] * len(self.retrievers)
        if len(weights) != len(self.retrievers):
            raise ValueError(f"{len(self.retrievers)} retrievers but {len(weights)} weights")
        self.weights = tuple(float(w) for w in weights)
        self.c = float(c)
        self.depth = depth
        self.name = name

    def candidates(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:
        """Every chunk any retriever returned (each asked for ``depth`` or ``top_k``), fused order;
        the score is the RRF score."""
        depth = self.depth if self.depth is not None else check_top_k(top_k)
        lists = [r.retrieve(question, depth) for r in self.retrievers]
        text = {h[0]: h[1] for hits in lists for h in hits}
        fused = rrf_fuse([[h[0] for h in hits] for hits in lists], self.weights, self.c)
        return [Hit(cid, text[cid], score) for cid, score in fused]

    def retrieve(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:
        """The ``top_k`` best fused chunks."""
        return self.candidates(question, top_k)[: check_top_k(top_k)]
