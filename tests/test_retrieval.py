"""Exact cosine retrieval."""

import numpy as np
import pytest

from chunkwise.chunk import Chunk
from chunkwise.retrieval import DenseIndex, top_k_cosine


def test_top_k_cosine_hand_computed():
    keys = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [-1.0, 0.0]])
    q = np.array([[2.0, 0.1]])
    idx, scores = top_k_cosine(q, keys, top_k=3)
    # cos with (1,0)=0.9988, (1,1)=0.7418, (0,2)=0.0499, (-1,0)=-0.9988
    assert idx.tolist() == [[0, 2, 1]]
    np.testing.assert_allclose(scores[0], [2 / np.hypot(2, 0.1), 2.1 / (np.hypot(2, 0.1) * np.sqrt(2)), 0.1 / np.hypot(2, 0.1)], rtol=1e-6)
    # Ties break by the lower index; top_k above n is capped.
    idx, _ = top_k_cosine(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [2.0, 0.0]]), top_k=10)
    assert idx.tolist() == [[0, 1]]


def test_top_k_validation():
    with pytest.raises(ValueError, match="top_k"):
        top_k_cosine(np.ones((1, 2)), np.ones((3, 2)), top_k=0)
    with pytest.raises(ValueError, match="dimension"):
        top_k_cosine(np.ones((1, 2)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        top_k_cosine(np.array([[np.nan, 1.0]]), np.ones((3, 2)))


class Axis:
    name = "axis"

    def embed(self, texts):
        return np.array([[t.count("a"), t.count("b")] for t in texts], dtype=float)


def test_dense_index_from_chunks():
    docs = {"x": [Chunk("aaa", 0, 3), Chunk("bb", 3, 5)], "y": [Chunk("ab", 10, 12)]}
    index = DenseIndex.from_chunks(docs, Axis())
    assert len(index) == 3 and index.doc_ids == ["x", "x", "y"]
    assert index.spans.tolist() == [[0, 3], [3, 5], [10, 12]]
    idx, _ = index.search(Axis().embed(["b"]), top_k=2)
    assert idx.tolist() == [[1, 2]]
