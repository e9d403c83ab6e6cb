"""Chunking as a global optimisation over piece similarities (Chroma's ClusterSemanticChunker).

Chroma's technical report (Smith & Troynikov, 2024) proposes a chunker that does not decide cut
by cut: the text is cut into small pieces (``min_chunk_size`` tokens, 50 in the report, by
recursive splitting), every piece is embedded, and dynamic programming picks the segmentation
into runs of consecutive pieces that maximises the summed pairwise similarity inside the runs,
with at most ``max_chunk_size // min_chunk_size`` pieces per run.

The objective, for a segmentation into runs ``[s_1, e_1], [s_2, e_2], ...``::

    maximise  sum over runs r of  sum_{i, j in r} S'[i, j]
    S' = S - mean(S[i, j] for i < j),  with the diagonal of S' set to 0

where ``S`` is the cosine similarity matrix of the piece embeddings. Subtracting the mean
off-diagonal similarity makes "unrelated" pairs negative, so long runs pay off only when their
pieces are more similar than average.

Difference from Chroma's code: its DP table starts at 0 and keeps the first run that is
*strictly* better, so when every candidate reward at a position is <= 0 the position keeps
"start = 0" and the back-tracking emits one run from the beginning, which can exceed the maximum
size. chunkwise solves the DP exactly (table starts at minus infinity, runs never exceed the
maximum); the two agree whenever some positive-reward run exists at every position.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkwise.chunk import Chunk
from chunkwise.chunkers.base import check_embedder, check_positive_int, embed_checked
from chunkwise.chunkers.kamradt import chroma_piece_splitter
from chunkwise.chunkers.semantic import group_sentences


def optimal_segmentation(similarity: np.ndarray, max_cluster_size: int) -> list[tuple[int, int]]:
    """Best split of ``n`` consecutive items into runs of at most ``max_cluster_size``.

    Parameters
    ----------
    similarity : numpy.ndarray, shape (n, n)
        Symmetric similarity matrix of the items.
    max_cluster_size : int, >= 1
        Maximum items per run.

    Returns
    -------
    list of (start, end)
        Inclusive item ranges covering ``0 .. n - 1`` in order, maximising the objective in the
        module docstring. Ties go to the shorter last run (the first size tried).

    Raises
    ------
    ValueError
        If the matrix is not square or ``max_cluster_size < 1``.
    """
    s = np.asarray(similarity, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1]:
        raise ValueError(f"similarity must be a square matrix, got shape {s.shape}.")
    if max_cluster_size < 1:
        raise ValueError(f"max_cluster_size must be >= 1, got {max_cluster_size}.")
    n = s.shape[0]
    if n == 0:
        return []
    if n == 1:
        return [(0, 0)]
    m = s - s[np.triu_indices(n, k=1)].mean()
    np.fill_diagonal(m, 0.0)
    # 2-D prefix sums: block(a, b) = sum of m[a:b+1, a:b+1] in O(1).
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = m.cumsum(0).cumsum(1)

    def block(a: int, b: int) -> float:
        return p[b + 1, b + 1] - p[a, b + 1] - p[b + 1, a] + p[a, a]

    best = np.full(n + 1, -np.inf)  # best[i] = best score of items 0 .. i - 1
    best[0] = 0.0
    start = np.zeros(n, dtype=int)
    for i in range(n):
        for size in range(1, min(max_cluster_size, i + 1) + 1):
            a = i - size + 1
            score = best[a] + block(a, i)
            if score > best[i + 1]:
                best[i + 1] = score
                start[i] = a
    runs = []
    i = n - 1
    while i >= 0:
        runs.append((int(start[i]), i))
        i = int(start[i]) - 1
    runs.reverse()
    return runs


class ClusterSemanticChunker:
    """Chunks as runs of similar pieces, found by dynamic programming (Chroma's ClusterSemanticChunker).

    Parameters
    ----------
    embedder : Embedder
        ``embed(texts) -> np.ndarray`` of shape ``(len(texts), d)``.
    max_chunk_size : int, default 400
        Maximum chunk size in tokens (of ``encoding_name``); a run holds at most
        ``max_chunk_size // min_chunk_size`` pieces.
    min_chunk_size : int, default 50
        Size of the recursive pieces in tokens.
    encoding_name : str, default "cl100k_base"

    Raises
    ------
    ValueError
        At construction, for sizes that are not positive ints or ``min_chunk_size > max_chunk_size``.

    References
    ----------
    B. Smith and A. Troynikov, "Evaluating Chunking Strategies for Retrieval", Chroma technical
    report, 2024.
    """

    def __init__(
        self,
        embedder: Any,
        max_chunk_size: int = 400,
        min_chunk_size: int = 50,
        encoding_name: str = "cl100k_base",
    ) -> None:
        check_positive_int("max_chunk_size", max_chunk_size)
        check_positive_int("min_chunk_size", min_chunk_size)
        if min_chunk_size > max_chunk_size:
            raise ValueError(
                f"min_chunk_size ({min_chunk_size}) must not exceed max_chunk_size ({max_chunk_size})."
            )
        self.embedder = check_embedder(embedder)
        self.max_chunk_size = max_chunk_size
        self.min_chunk_size = min_chunk_size
        self.max_cluster = max_chunk_size // min_chunk_size
        self.encoding_name = encoding_name
        self.splitter = chroma_piece_splitter(min_chunk_size, encoding_name)

    def split(self, text: str) -> list[Chunk]:
        """Split ``text`` into runs of similar pieces.

        Returns
        -------
        list of Chunk
            Verbatim slices from a run's first piece to its last; ``[]`` for empty text.

        Raises
        ------
        ValueError
            If the embedder returns a wrong number of vectors or non-finite values.
        """
        pieces = self.splitter.split(text)
        if len(pieces) <= 1:
            return group_sentences(text, pieces, [])
        vectors = embed_checked(self.embedder, [p.text for p in pieces])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        unit = vectors / norms
        runs = optimal_segmentation(unit @ unit.T, self.max_cluster)
        breakpoints = [end for _, end in runs[:-1]]
        return group_sentences(text, pieces, breakpoints)
