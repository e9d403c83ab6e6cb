"""Shared pieces of the chunkers: the :class:`~chunkwise.chunk.Chunk` type and small checks.

The type lives in :mod:`chunkwise.chunk` so that :mod:`chunkwise.text` can use it without
importing the chunkers.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkwise.chunk import Chunk, check_chunks

__all__ = [
    "Chunk",
    "check_chunks",
    "check_embedder",
    "check_positive_int",
    "check_size_overlap",
    "embed_checked",
]


def check_positive_int(name: str, value: Any, unit: str = "tokens") -> int:
    """Return ``value`` if it is an int >= 1, else raise ``ValueError`` naming it and its unit."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive int ({unit}), got {value!r}.")
    return int(value)


def check_size_overlap(chunk_size: Any, chunk_overlap: Any, unit: str = "tokens") -> tuple[int, int]:
    """Validate a window chunker's size and overlap (bug kind B12).

    Returns
    -------
    (int, int)
        ``chunk_size >= 1`` and ``0 <= chunk_overlap < chunk_size``.

    Raises
    ------
    ValueError
        For non-integers (bools included) or values outside those ranges, naming the value and
        the accepted range.
    """
    for label, value in (("chunk_size", chunk_size), ("chunk_overlap", chunk_overlap)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{label} must be an int ({unit}), got {value!r} ({type(value).__name__}).")
    chunk_size, chunk_overlap = int(chunk_size), int(chunk_overlap)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size} ({unit}).")
    if not 0 <= chunk_overlap < chunk_size:
        raise ValueError(
            f"chunk_overlap must satisfy 0 <= chunk_overlap < chunk_size, i.e. lie in "
            f"[0, {chunk_size - 1}] for chunk_size={chunk_size}; got {chunk_overlap}."
        )
    return chunk_size, chunk_overlap


def check_embedder(embedder: Any) -> Any:
    """Return ``embedder`` if it has an ``embed`` method, else raise ``TypeError`` saying what to pass."""
    if not callable(getattr(embedder, "embed", None)):
        raise TypeError(
            "embedder must have an embed(texts) -> np.ndarray method, e.g. "
            "chunkwise.embeddings.SentenceTransformerEmbedder()."
        )
    return embedder


def embed_checked(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` and check the result.

    Returns
    -------
    numpy.ndarray, shape (len(texts), d), float64

    Raises
    ------
    ValueError
        If the embedder does not return one finite row per text (bug kind B04).
    """
    vectors = np.asarray(embedder.embed(list(texts)), dtype=np.float64)
    if vectors.ndim != 2:
        raise ValueError(
            f"The embedder returned an array of shape {vectors.shape}; it must be 2-D, "
            f"(n_texts, dim) = ({len(texts)}, d)."
        )
    if vectors.shape[0] != len(texts):
        raise ValueError(
            f"The embedder returned {vectors.shape[0] if vectors.ndim else 0} vectors "
            f"(shape {vectors.shape}) for {len(texts)} windows; it must return one row per text."
        )
    if not np.all(np.isfinite(vectors)):
        raise ValueError("The embedder returned NaN or infinite values; check the embedding model's output.")
    return vectors
