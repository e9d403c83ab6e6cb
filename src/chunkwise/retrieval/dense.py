"""Dense retrieval: exact cosine search over the chunks' embeddings, behind the retriever interface."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from chunkwise.retrieval.base import DEFAULT_TOP_K, Hit, as_pairs, check_top_k
from chunkwise.retrieval.index import top_k_cosine, unit_rows

__all__ = ["DenseRetriever"]


class DenseRetriever:
    """Exact cosine search over embedded chunks (:func:`chunkwise.retrieval.top_k_cosine`).

    Parameters
    ----------
    chunks : iterable
        Chunk objects (``chunk_id``, ``text``), ``(id, text)`` pairs or strings
        (:func:`chunkwise.retrieval.base.as_pairs`).
    query_embedder, passage_embedder : Embedder
        E.g. from :func:`chunkwise.embeddings.embedder_pair` (which gives passage, query); one model for both sides
        when ``passage_embedder`` is None. The passages are embedded on construction (cached
        embedders compute only new texts).
    name : str, default "dense"

    Attributes
    ----------
    ids, texts : list of str
    vectors : numpy.ndarray of float32, shape (n, d)
        The chunks' unit-length embeddings (``(0, 1)`` without chunks).

    Raises
    ------
    ValueError
        If chunk ids repeat, or the embedder returns a wrong number of vectors or non-finite ones.
    """

    def __init__(
        self, chunks: Iterable[Any], query_embedder: Any, passage_embedder: Any | None = None, *, name: str = "dense"
    ) -> None:
        self.ids, self.texts = as_pairs(chunks)
        self.query_embedder = query_embedder
        self.passage_embedder = passage_embedder if passage_embedder is not None else query_embedder
        self.name = name
        if self.texts:
            vecs = np.asarray(self.passage_embedder.embed(self.texts), dtype=np.float32)
            if vecs.shape[0] != len(self.texts):
                raise ValueError(f"the embedder returned {vecs.shape[0]} vectors for {len(self.texts)} chunks")
            self.vectors = unit_rows(vecs)
        else:
            self.vectors = np.zeros((0, 1), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.texts)

    def retrieve(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:
        """The ``top_k`` chunks most similar to ``question`` (cosine); ties by corpus order.

        Raises
        ------
        ValueError
            If ``top_k`` is not an int >= 0.
        """
        top_k = check_top_k(top_k)
        if top_k == 0 or not self.texts:
            return []
        q = np.asarray(self.query_embedder.embed([question]), dtype=np.float32)
        idx, sims = top_k_cosine(q, self.vectors, top_k)
        return [Hit(self.ids[i], self.texts[i], float(s)) for i, s in zip(idx[0], sims[0])]
