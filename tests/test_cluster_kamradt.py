"""ClusterSemanticChunker's DP and KamradtModifiedChunker's threshold search."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from chunkwise.chunkers.cluster import ClusterSemanticChunker, optimal_segmentation
from chunkwise.chunkers.kamradt import KamradtModifiedChunker, threshold_for_cuts
from fakes import FakeEmbedder


def _objective(m: np.ndarray, runs) -> float:
    return sum(m[a : b + 1, a : b + 1].sum() for a, b in runs)


def _brute_force(s: np.ndarray, k: int):
    n = s.shape[0]
    m = s - s[np.triu_indices(n, 1)].mean()
    np.fill_diagonal(m, 0)
    best, best_runs = -np.inf, None
    for cuts in itertools.product([0, 1], repeat=n - 1):
        runs, a = [], 0
        for i, c in enumerate(cuts):
            if c:
                runs.append((a, i))
                a = i + 1
        runs.append((a, n - 1))
        if max(b - a + 1 for a, b in runs) > k:
            continue
        v = _objective(m, runs)
        if v > best + 1e-12:
            best, best_runs = v, runs
    return best, best_runs, m


@pytest.mark.parametrize("seed", range(30))
def test_dp_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 10))
    x = rng.normal(size=(n, 4))
    s = x @ x.T
    k = int(rng.integers(1, 5))
    best, _, m = _brute_force(s, k)
    runs = optimal_segmentation(s, k)
    assert _objective(m, runs) == pytest.approx(best)
    assert max(b - a + 1 for a, b in runs) <= k
    assert runs[0][0] == 0 and runs[-1][1] == n - 1
    assert all(r[1] + 1 == q[0] for r, q in zip(runs, runs[1:]))


def test_dp_hand_computed_two_blocks():
    # Items 0,1 similar (1.0), items 2,3 similar (1.0), across pairs 0.0. Mean of the 6 upper
    # pairs = 2/6 = 1/3, so within-block pairs score 2/3 each (counted twice in a block sum: 4/3)
    # and cross pairs -1/3. The best runs of size <= 2 are [0,1] and [2,3] with 8/3 in total.
    s = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=float)
    assert optimal_segmentation(s, 2) == [(0, 1), (2, 3)]
    assert optimal_segmentation(s, 4) == [(0, 1), (2, 3)]
    assert optimal_segmentation(s, 1) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert optimal_segmentation(np.zeros((0, 0)), 3) == []
    with pytest.raises(ValueError, match="square"):
        optimal_segmentation(np.zeros((2, 3)), 2)


def test_threshold_for_cuts():
    d = np.array([0.1, 0.5, 0.3, 0.9, 0.7])
    ranked = np.sort(d)[::-1]
    for cuts in range(5):
        t = threshold_for_cuts(d, cuts)
        # The search converges on the (cuts + 1)-th largest distance and stops within 1e-6 of
        # it, on either side (Chroma's rule keeps the last midpoint): cuts or cuts + 1 above.
        assert abs(t - ranked[cuts]) <= 1e-6
        assert int((d > t).sum()) in (cuts, cuts + 1)
    # Zero cuts: the search runs up to 1.0 and nothing is above.
    assert threshold_for_cuts(d, 0) > 0.9
    with pytest.raises(ValueError):
        threshold_for_cuts(d, -1)


TEXT = (
    "Rivers carry water and fish downstream past every bridge and bank.\n\n"
    "The boat drifted with the current while the flood rose over the bank.\n\n"
    "Servers in the cluster deploy a rollback when latency climbs and the queue grows.\n\n"
    "Each node keeps a cache so the deploy finishes before the queue overflows.\n\n"
    "Bread needs flour, yeast and butter before the dough goes into the oven.\n\n"
    "A good crust forms when the oven is hot and the dough has risen with sugar."
)


def test_cluster_chunker_on_topics_is_exact_and_bounded():
    from chunkwise.tokens import count_tokens

    chunker = ClusterSemanticChunker(FakeEmbedder(), max_chunk_size=60, min_chunk_size=20)
    chunks = chunker.split(TEXT)
    assert len(chunks) >= 2
    for c in chunks:
        assert TEXT[c.start : c.end] == c.text
    pieces = chunker.splitter.split(TEXT)
    assert all(count_tokens(p.text) <= 20 for p in pieces)
    # Every piece is in exactly one chunk, in order.
    covered = [i for c in chunks for i in range(c.metadata["sentence_start"], c.metadata["sentence_end"])]
    assert covered == list(range(len(pieces)))
    assert all(c.metadata["sentence_end"] - c.metadata["sentence_start"] <= 3 for c in chunks)
    assert chunker.split("") == []


def test_kamradt_modified_hits_the_cut_count():
    from chunkwise.tokens import count_tokens

    chunker = KamradtModifiedChunker(FakeEmbedder(), avg_chunk_size=40, min_chunk_size=15, buffer_size=1)
    chunks = chunker.split(TEXT)
    pieces = chunker.splitter.split(TEXT)
    total = sum(count_tokens(p.text) for p in pieces)
    assert len(chunks) - 1 in (total // 40, total // 40 + 1)  # see test_threshold_for_cuts
    for c in chunks:
        assert TEXT[c.start : c.end] == c.text
    assert chunker.split("   ") == []


def test_constructor_validation():
    with pytest.raises(ValueError, match="must not exceed"):
        ClusterSemanticChunker(FakeEmbedder(), max_chunk_size=40, min_chunk_size=50)
    with pytest.raises(ValueError, match="positive int"):
        KamradtModifiedChunker(FakeEmbedder(), avg_chunk_size=0)
    with pytest.raises(TypeError, match="embed"):
        ClusterSemanticChunker(object())
