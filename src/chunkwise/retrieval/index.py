"""Exact dense (cosine) search over embedded chunks.

The Chroma-style experiment puts the chunks of all corpora in one index and retrieves the
``top_k`` chunks nearest to each question by cosine similarity. Search here is exact (a matrix
product over L2-normalised vectors), so results do not depend on an approximate index's
parameters; for normalised embeddings cosine ranking equals the L2 ranking a vector database
would use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DenseIndex", "hnsw_search", "top_k_cosine", "unit_rows"]


def unit_rows(x: Any) -> np.ndarray:
    """Vectors as float32 rows of unit L2 length (zero rows stay zero).

    Parameters
    ----------
    x : array-like, shape (n, d)

    Returns
    -------
    numpy.ndarray of float32, shape (n, d)

    Raises
    ------
    ValueError
        If ``x`` is not 2-d ``(n, d)`` or holds NaN / infinite values.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"vectors must have shape (n, d), got {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise ValueError("vectors contain NaN or infinite values.")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def top_k_cosine(queries: np.ndarray, keys: np.ndarray, top_k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k cosine search.

    Parameters
    ----------
    queries : numpy.ndarray, shape (q, d)
    keys : numpy.ndarray, shape (n, d)
    top_k : int, >= 1
        Results per query; capped at ``n``.

    Returns
    -------
    indices : numpy.ndarray of int, shape (q, min(top_k, n))
        Key rows, best first. Ties are broken by the lower key index (stable).
    scores : numpy.ndarray of float32, same shape
        Cosine similarities.

    Raises
    ------
    ValueError
        For mismatched dimensions, non-finite values or ``top_k < 1``.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}.")
    q = unit_rows(queries)
    k = unit_rows(keys)
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"query dimension {q.shape[1]} != key dimension {k.shape[1]}; use the same embedder.")
    kk = min(int(top_k), k.shape[0])
    if kk == 0 or q.shape[0] == 0:
        return np.zeros((q.shape[0], 0), dtype=int), np.zeros((q.shape[0], 0), dtype=np.float32)
    # Products of float32 numbers are exact in float64, and the float64 sums differ between BLAS
    # kernels (which depend on the matrix shape and the CPU) by ~1e-16, far below a float32 step:
    # rounded back to float32, a key's score no longer depends on which other keys share the call
    # or on the machine, so equal chunks tie exactly and a sharded search (chunkwise.evaluation.
    # distributed) returns the same top k as this one. Plain float32 ``q @ k.T`` did not: on an
    # AVX-512 CPU two copies of one chunk scored 1 ulp apart depending on their row.
    sims = (q.astype(np.float64) @ k.astype(np.float64).T).astype(np.float32)
    # Stable order: sort by (-score, index).
    order = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    return order, np.take_along_axis(sims, order, axis=1)


@dataclass
class DenseIndex:
    """Chunks of several documents in one exact cosine index.

    Build with :meth:`from_chunks`; query with :meth:`search`.

    Attributes
    ----------
    doc_ids : list of str, length n
        The document each chunk belongs to.
    spans : numpy.ndarray of int, shape (n, 2)
        Half-open character spans of the chunks in their documents.
    vectors : numpy.ndarray, shape (n, d)
        L2-normalised chunk embeddings.
    """

    doc_ids: list[str]
    spans: np.ndarray
    vectors: np.ndarray

    @classmethod
    def from_chunks(cls, chunks_by_doc: dict[str, Sequence[Any]], embedder: Any) -> DenseIndex:
        """Embed every chunk (``Chunk`` objects) of every document into one index.

        Parameters
        ----------
        chunks_by_doc : dict of str -> list of Chunk
        embedder : Embedder
            Called once with all chunk texts (a caching embedder embeds only new ones).

        Raises
        ------
        ValueError
            If the embedder returns a wrong number of vectors.
        """
        doc_ids: list[str] = []
        spans: list[tuple[int, int]] = []
        texts: list[str] = []
        for doc, chunks in chunks_by_doc.items():
            for c in chunks:
                doc_ids.append(doc)
                spans.append((c.start, c.end))
                texts.append(c.text)
        vectors = np.asarray(embedder.embed(texts)) if texts else np.zeros((0, 1), dtype=np.float32)
        if vectors.shape[0] != len(texts):
            raise ValueError(f"The embedder returned {vectors.shape[0]} vectors for {len(texts)} chunks.")
        return cls(doc_ids, np.asarray(spans, dtype=np.int64).reshape(-1, 2), unit_rows(vectors))

    def __len__(self) -> int:
        return len(self.doc_ids)

    def search(self, query_vectors: np.ndarray, top_k: int = 5) -> tuple[np.ndarray, np.ndarray]:
        """Top-k chunk rows and cosine scores per query (see :func:`top_k_cosine`).

        Raises
        ------
        ValueError
            If the index holds no chunks (every document chunked to nothing).
        """
        if len(self) == 0:
            raise ValueError("The index is empty: no chunks were added (were all documents empty?).")
        return top_k_cosine(query_vectors, self.vectors, top_k)


def hnsw_search(
    vectors: np.ndarray,
    query_vectors: np.ndarray,
    top_k: int = 5,
    search_ef: int = 50,
    batch_size: int = 500,
) -> np.ndarray:
    """Approximate nearest neighbours through one in-memory ``chromadb`` collection.

    The report's setup (``BaseEvaluation._chunker_to_collection`` in chunking_evaluation at
    d451fc4): one collection, Chroma's default l2 space, ``hnsw:search_ef`` 50, chunks added in
    batches of 500 with ids ``"0", "1", ...``. Embeddings are passed explicitly, so chromadb
    loads no embedding model (works offline) and telemetry is off.

    Parameters
    ----------
    vectors : numpy.ndarray, shape (n, d)
        Chunk vectors, in index order (l2 on unit vectors ranks as cosine does).
    query_vectors : numpy.ndarray, shape (q, d)
    top_k : int
    search_ef, batch_size : int

    Returns
    -------
    numpy.ndarray of int, shape (q, min(top_k, n))
        Retrieved rows of ``vectors``, nearest first.

    Raises
    ------
    ImportError
        If ``chromadb`` is not installed (``pip install 'chunkwise[chroma]'``).
    ValueError
        On an empty index, mismatched dimensions or a non-positive ``top_k``.
    """
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:
        raise ImportError(
            "index='hnsw' needs chromadb: pip install 'chunkwise[chroma]' (or use index='exact')."
        ) from exc
    vectors = np.asarray(vectors, dtype=np.float32)
    query_vectors = np.asarray(query_vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] == 0:
        raise ValueError("hnsw_search needs a non-empty (n, d) array of chunk vectors.")
    if query_vectors.ndim != 2 or query_vectors.shape[1] != vectors.shape[1]:
        raise ValueError(
            f"query_vectors must have shape (q, {vectors.shape[1]}), got {query_vectors.shape}."
        )
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int, got {top_k!r}.")
    client = chromadb.EphemeralClient(Settings(anonymized_telemetry=False, allow_reset=True))
    name = "chunkwise_hnsw"
    if name in {getattr(c, "name", c) for c in client.list_collections()}:
        client.delete_collection(name)
    collection = client.create_collection(
        name, embedding_function=None, metadata={"hnsw:space": "l2", "hnsw:search_ef": search_ef}
    )
    try:
        for i in range(0, len(vectors), batch_size):
            batch = vectors[i : i + batch_size]
            collection.add(ids=[str(j) for j in range(i, i + len(batch))], embeddings=batch)
        k = min(top_k, len(vectors))
        res = collection.query(query_embeddings=query_vectors, n_results=k, include=[])
        return np.asarray([[int(x) for x in ids] for ids in res["ids"]], dtype=np.int64).reshape(-1, k)
    finally:
        client.delete_collection(name)
