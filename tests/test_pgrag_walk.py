"""Tests for the PG-RAG matrix walk: hand-computed toys, validation, and matrix == DFS on random forests."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.crud.pgrag import walk
from chunkwise.crud.pgrag.walk import (
    AMBIGUOUS_THRESHOLD,
    AMBIGUOUS_THRESHOLD_CODE,
    AMBIGUOUS_THRESHOLD_PAPER,
    SUPPORT_THRESHOLD,
    SUPPORT_THRESHOLD_CODE,
    SUPPORT_THRESHOLD_PAPER,
    TOP_N,
    PathTable,
    WalkResult,
    dfs_walk,
    matrix_walk,
)

WALKS = [matrix_walk, dfs_walk]

# ---------------------------------------------------------------------------------------------
# The 2-topic toy. Embeddings are 2-d unit vectors (cos t, sin t) and the KP is (1, 0), so the
# cosine similarity of the KP to node n is exactly the number chosen for n below.
#
#   topic A (0, sim .60)                     topic B (6, sim .812)
#   +- route 1 (.905)                        +- route 7 (.805)
#   |  +- fact 3 (.90)     path 0            |  +- fact 8 (.80)    path 3
#   |  +- fact 4 (.888)    path 1            |  +- fact 9 (.795)   path 4
#   +- route 2 (.30)                         +- route 12 (.50)
#      +- fact 5 (.50)     path 2               +- fact 13 (.80)   path 5
# ---------------------------------------------------------------------------------------------
TOY_SIMS = {0: 0.60, 1: 0.905, 2: 0.30, 3: 0.90, 4: 0.888, 5: 0.50, 6: 0.812, 7: 0.805,
            8: 0.80, 9: 0.795, 12: 0.50, 13: 0.80}
TOY_PATHS = [[0, 1, 3], [0, 1, 4], [0, 2, 5], [6, 7, 8], [6, 7, 9], [6, 12, 13]]
KP = np.array([[1.0, 0.0]])


def toy_table() -> PathTable:
    emb = np.zeros((14, 2), dtype=np.float32)
    emb[:, 0] = 1.0  # node ids 10, 11 are unused rows
    for node, s in TOY_SIMS.items():
        emb[node] = [s, np.sqrt(1.0 - s * s)]
    return PathTable.from_paths(TOY_PATHS, emb)


def test_constants() -> None:
    assert (SUPPORT_THRESHOLD_CODE, AMBIGUOUS_THRESHOLD_CODE) == (0.01, 0.02)
    assert (SUPPORT_THRESHOLD_PAPER, AMBIGUOUS_THRESHOLD_PAPER) == (0.03, 0.05)
    assert (SUPPORT_THRESHOLD, AMBIGUOUS_THRESHOLD) == (0.01, 0.02)
    assert TOP_N == 14


@pytest.mark.parametrize("fn", WALKS)
def test_toy_code_thresholds(fn) -> None:
    # Anchors (3 per KP): facts .90 (path 0), .888 (path 1), then .80 -- paths 3 and 5 tie, the
    # lower index (3) wins.
    # Anchor path 0, v=.90: route 1 is .005 away (support) -> climb; topic A is .30 away -> stop.
    #   Sub-root 1; its paths 0 and 1 get: path 0: .905 + .90 = 1.805;
    #   path 1: .905 + 0.5 * .888 (.012 away: ambiguous) = 1.349.
    # Anchor path 1, v=.888: route 1 is .017 away (ambiguous) -> climb; topic A fails. Sub-root 1;
    #   path 1: 0.5 * .905 + .888 = 1.3405; path 0: 0.5 * .905 + 0.5 * .90 = .9025.
    # Anchor path 3, v=.80: route 7 .005 (support), topic B .012 (ambiguous) -> sub-root = topic B.
    #   path 3: 0.5 * .812 + .805 + .80 = 2.011; path 4: .406 + .805 + .795 = 2.006;
    #   path 5: .406, then route 12 (.30 away) stops the walk: fact 13 (.80) is not counted.
    res = fn(KP, toy_table(), top_n=4, n_anchors=3)
    assert isinstance(res, WalkResult)
    assert res.paths.tolist() == [0, 1, 3, 4]
    np.testing.assert_allclose(res.scores, [2.7075, 2.6895, 2.011, 2.006], atol=1e-6)
    np.testing.assert_allclose(res.path_scores, [2.7075, 2.6895, 0.0, 2.011, 2.006, 0.406], atol=1e-6)
    assert res.anchors.tolist() == [[0, 1, 3]]
    np.testing.assert_allclose(res.anchor_sims, [[0.90, 0.888, 0.80]], atol=1e-6)
    assert res.sub_roots.tolist() == [[1, 1, 6]]
    # Path 4 (fact .795, never an anchor) outranks path 5 (fact .80): it lies on a corroborated route.
    assert res.path_scores[4] > res.path_scores[5]


@pytest.mark.parametrize("fn", WALKS)
def test_toy_more_anchors(fn) -> None:
    # A 4th anchor, path 5 (v=.80): route 12 is .30 away, so its walk is fact 13 alone: +.80.
    res = fn(KP, toy_table(), top_n=6, n_anchors=4)
    assert res.anchors.tolist() == [[0, 1, 3, 5]]
    assert res.sub_roots.tolist() == [[1, 1, 6, 13]]
    assert res.paths.tolist() == [0, 1, 3, 4, 5, 2]
    np.testing.assert_allclose(res.path_scores, [2.7075, 2.6895, 0.0, 2.011, 2.006, 1.206], atol=1e-6)


@pytest.mark.parametrize("fn", WALKS)
def test_toy_paper_thresholds(fn) -> None:
    # With 0.03 / 0.05 every gap above that was ambiguous (.012, .017) is now support (weight 1).
    res = fn(KP, toy_table(), support=SUPPORT_THRESHOLD_PAPER, ambiguous=AMBIGUOUS_THRESHOLD_PAPER,
             top_n=3, n_anchors=3)
    assert res.paths.tolist() == [0, 1, 3]
    np.testing.assert_allclose(res.scores, [3.61, 3.586, 2.417], atol=1e-6)
    np.testing.assert_allclose(res.path_scores, [3.61, 3.586, 0.0, 2.417, 2.412, 0.812], atol=1e-6)


@pytest.mark.parametrize("fn", WALKS)
def test_toy_zero_thresholds_keep_only_exact_matches(fn) -> None:
    # support = ambiguous = 0: every anchor's walk is its own fact; scores are the facts' cosines.
    res = fn(KP, toy_table(), support=0.0, ambiguous=0.0, top_n=6, n_anchors=6)
    assert res.sub_roots.tolist() == [[3, 4, 8, 13, 9, 5]]
    assert res.paths.tolist() == [0, 1, 3, 5, 4, 2]
    np.testing.assert_allclose(res.path_scores, [0.90, 0.888, 0.50, 0.80, 0.795, 0.80], atol=1e-6)


@pytest.mark.parametrize("fn", WALKS)
def test_scores_add_over_key_points(fn) -> None:
    table = toy_table()
    one = fn(KP, table, top_n=4, n_anchors=3)
    two = fn(np.vstack([KP, KP]), table, top_n=4, n_anchors=3)
    np.testing.assert_allclose(two.path_scores, 2 * one.path_scores, rtol=1e-12)
    assert two.paths.tolist() == one.paths.tolist()
    assert two.anchors.tolist() == [[0, 1, 3], [0, 1, 3]]
    flat = fn(KP[0], table, top_n=4, n_anchors=3)  # a single (d,) vector is one KP
    np.testing.assert_array_equal(flat.path_scores, one.path_scores)


@pytest.mark.parametrize("fn", WALKS)
def test_default_top_n_caps_at_number_of_paths(fn) -> None:
    res = fn(KP, toy_table())
    assert res.paths.shape == (6,) and res.anchors.shape == (1, 6)
    assert sorted(res.paths.tolist()) == list(range(6))
    assert np.all(np.diff(res.scores) <= 0)


def test_toy_matrices() -> None:
    res = matrix_walk(KP, toy_table(), top_n=4, n_anchors=3, return_matrices=True)
    mats = res.matrices
    assert mats is not None
    assert mats.similarity.shape == (1, 6, 3) and mats.control.shape == (1, 3, 6, 3)
    np.testing.assert_allclose(mats.similarity[0, 5], [0.812, 0.50, 0.80], atol=1e-6)
    # Anchor 0 (path 0, sub-root = route 1 at depth 1): the path matrix marks paths 0 and 1 from depth 1.
    assert mats.path[0, 0].tolist() == [[False, True, True], [False, True, True]] + [[False] * 3] * 4
    np.testing.assert_allclose(mats.control[0, 0, 0], [0.0, 0.905, 0.90], atol=1e-6)
    np.testing.assert_allclose(mats.control[0, 0, 1], [0.0, 0.905, 0.444], atol=1e-6)
    # Anchor 2 (path 3, sub-root = topic B at depth 0): paths 3, 4, 5; on path 5 the walk stops at route 12.
    assert mats.path[0, 2, :, 0].tolist() == [False, False, False, True, True, True]
    np.testing.assert_allclose(mats.control[0, 2, 5], [0.406, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(mats.dyeing[0, 2, 3], [0.406, 0.805, 0.80], atol=1e-6)
    np.testing.assert_array_equal(mats.dyeing, mats.control * mats.path)
    np.testing.assert_allclose(mats.aggregate, mats.dyeing.sum(axis=(0, 1)))
    np.testing.assert_allclose(mats.aggregate.sum(axis=1), res.path_scores, atol=1e-12)
    assert matrix_walk(KP, toy_table(), top_n=4, n_anchors=3).matrices is None


def test_path_table_fields() -> None:
    table = toy_table()
    assert table.path_nodes.dtype == np.int64 and table.node_emb.dtype == np.float32
    assert table.path_nodes.shape == (6, 3) and (table.n_paths, table.max_depth) == (6, 3)
    assert table.path_topic.tolist() == [0, 0, 0, 6, 6, 6]
    assert table.leaf_ids.tolist() == [3, 4, 5, 8, 9, 13]
    assert table.lengths.tolist() == [3, 3, 3, 3, 3, 3]
    assert table.paths() == TOY_PATHS
    ragged = PathTable.from_paths([[0, 1, 2], [0, 3], [4]], np.eye(5, dtype=np.float32))
    assert ragged.path_nodes.tolist() == [[0, 1, 2], [0, 3, -1], [4, -1, -1]]
    assert ragged.lengths.tolist() == [3, 2, 1]


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------

EYE = np.eye(6, dtype=np.float32)


@pytest.mark.parametrize(
    ("paths", "emb", "match"),
    [
        ([], EYE, "no paths"),
        ([[0, 1], []], EYE, "path 1 is empty"),
        ([[0, 1], [0, 7]], EYE, "out of range"),
        ([[0, 1], [0, -2]], EYE, "negative"),
        ([[0, 1.5]], EYE, "integer"),
        ([[0, 1, 2], [3, 1, 4]], EYE, "two parents"),
        ([[0, 1, 0]], EYE, "two parents"),
        ([[0, 1], [0, 1, 2]], EYE, "has children"),
        ([[0, 1], [0, 1]], EYE, "distinct"),
        ([[0, 1]], np.ones(6, dtype=np.float32), "2-D"),
        ([[0, 1]], np.eye(6, dtype=np.int64), "floating"),
        ([[0, 1]], 2 * EYE, "L2 norm"),
        ([[0, 1]], np.where(np.eye(6) > 0, np.nan, 0).astype(np.float32), "not finite"),
    ],
)
def test_from_paths_errors(paths, emb, match) -> None:
    with pytest.raises(ValueError, match=match):
        PathTable.from_paths(paths, emb)


@pytest.mark.parametrize(
    ("path_nodes", "match"),
    [
        (np.zeros((0, 3), dtype=np.int64), "at least one"),
        (np.array([0, 1]), "2-D"),
        (np.array([[0.0, 1.0]]), "integer"),
        (np.array([[0, -1, 1]]), "padding"),
        (np.array([[0, 1], [-1, -1]]), "path 1 is empty"),
        (np.array([[0, -3]]), "ids are >= 0"),
    ],
)
def test_path_table_errors(path_nodes, match) -> None:
    with pytest.raises(ValueError, match=match):
        PathTable(path_nodes, EYE)


def test_path_topic_is_checked() -> None:
    paths = np.array([[0, 1], [0, 2]])
    assert PathTable(paths, EYE, path_topic=np.array([0, 0])).path_topic.tolist() == [0, 0]
    with pytest.raises(ValueError, match="starts at node 0"):
        PathTable(paths, EYE, path_topic=np.array([0, 3]))
    with pytest.raises(ValueError, match="shape"):
        PathTable(paths, EYE, path_topic=np.array([0]))


def test_unused_rows_are_not_checked() -> None:
    emb = EYE.copy()
    emb[5] = [3, 0, 0, 0, 0, 0]  # no path uses node 5
    table = PathTable.from_paths([[0, 1]], emb)
    assert table.n_paths == 1


@pytest.mark.parametrize("fn", WALKS)
@pytest.mark.parametrize(
    ("kp", "kwargs", "match"),
    [
        (np.array([[1.0, 0.0, 0.0]]), {}, "dimension"),
        (np.array([[2.0, 0.0]]), {}, "L2-normalised"),
        (np.zeros((0, 2)), {}, "no key point"),
        (np.array([[np.nan, 1.0]]), {}, "not finite"),
        (np.ones((1, 1, 2)), {}, "shape"),
        (np.array([[1, 0]]), {}, "floating"),
        (KP, {"support": 0.03, "ambiguous": 0.02}, "support <= ambiguous"),
        (KP, {"support": -0.01}, "support <= ambiguous"),
        (KP, {"ambiguous": float("nan")}, "support <= ambiguous"),
        (KP, {"top_n": 0}, "top_n"),
        (KP, {"top_n": True}, "top_n"),
        (KP, {"n_anchors": 0}, "n_anchors"),
    ],
)
def test_walk_errors(fn, kp, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        fn(kp, toy_table(), **kwargs)


def test_dense_matrices_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(walk, "MAX_DENSE_ENTRIES", 10)
    with pytest.raises(ValueError, match="MAX_DENSE_ENTRIES"):
        matrix_walk(KP, toy_table(), return_matrices=True)
    assert matrix_walk(KP, toy_table()).paths.shape == (6,)


# ---------------------------------------------------------------------------------------------
# matrix_walk == dfs_walk on random forests
# ---------------------------------------------------------------------------------------------


def random_forest(
    rng: np.random.Generator,
    n_topics: int,
    max_depth: int,
    max_branch: int,
    d: int,
    noise: float,
) -> tuple[list[list[int]], np.ndarray]:
    """Random mind maps with similar-ish embeddings along edges, shuffled ids and path order.

    A child's embedding is its parent's plus Gaussian noise (renormalised), so thresholds of a
    few hundredths are crossed on some edges and not on others. Node ids are a random permutation
    (with a few unused, unnormalised rows), and paths are shuffled, so subtrees are neither
    id-ordered nor contiguous.
    """
    vecs: list[np.ndarray] = []
    paths: list[list[int]] = []

    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v)

    def grow(vec: np.ndarray, prefix: list[int], depth: int) -> None:
        node = len(vecs)
        vecs.append(vec)
        here = prefix + [node]
        if depth == max_depth - 1 or (depth > 0 and rng.random() < 0.3):
            paths.append(here)
            return
        for _ in range(int(rng.integers(1, max_branch + 1))):
            grow(unit(vec + noise * rng.standard_normal(d)), here, depth + 1)

    for _ in range(n_topics):
        grow(unit(rng.standard_normal(d)), [], 0)
    n_unused = int(rng.integers(0, 3))
    perm = rng.permutation(len(vecs) + n_unused)
    emb = 5.0 * rng.standard_normal((len(vecs) + n_unused, d))
    emb[perm[: len(vecs)]] = np.array(vecs)
    paths = [[int(perm[n]) for n in p] for p in paths]
    order = rng.permutation(len(paths))
    return [paths[i] for i in order], emb.astype(np.float32)


def assert_same_walk(a: WalkResult, b: WalkResult) -> None:
    assert a.anchors.tolist() == b.anchors.tolist()
    assert a.sub_roots.tolist() == b.sub_roots.tolist()
    np.testing.assert_allclose(a.anchor_sims, b.anchor_sims, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.path_scores, b.path_scores, rtol=1e-9, atol=1e-12)
    assert a.paths.tolist() == b.paths.tolist()
    np.testing.assert_allclose(a.scores, b.scores, rtol=1e-9, atol=1e-12)


THRESHOLDS = [
    (SUPPORT_THRESHOLD_CODE, AMBIGUOUS_THRESHOLD_CODE),
    (SUPPORT_THRESHOLD_PAPER, AMBIGUOUS_THRESHOLD_PAPER),
    (0.1, 0.3),
    (0.0, 0.2),
    (0.25, 0.25),
    (0.0, 0.0),
    (2.0, 2.0),
]


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_topics=st.integers(1, 4),
    max_depth=st.integers(1, 5),
    max_branch=st.integers(1, 4),
    d=st.integers(2, 8),
    noise=st.sampled_from([0.02, 0.1, 0.3, 1.0]),
    n_kp=st.integers(1, 4),
    thresholds=st.sampled_from(THRESHOLDS),
    top_n=st.integers(1, 12),
    n_anchors=st.one_of(st.none(), st.integers(1, 12)),
)
def test_matrix_walk_equals_dfs_walk(
    seed, n_topics, max_depth, max_branch, d, noise, n_kp, thresholds, top_n, n_anchors
) -> None:
    rng = np.random.default_rng(seed)
    paths, emb = random_forest(rng, n_topics, max_depth, max_branch, d, noise)
    table = PathTable.from_paths(paths, emb)
    # KPs near random path nodes (so walks reach real subtrees) or anywhere.
    used = table.path_nodes[table.path_nodes >= 0]
    kp = table.node_emb[rng.choice(used, n_kp)].astype(np.float64) + noise * rng.standard_normal((n_kp, d))
    kp /= np.linalg.norm(kp, axis=1, keepdims=True)
    support, ambiguous = thresholds
    kw = dict(support=support, ambiguous=ambiguous, top_n=top_n, n_anchors=n_anchors)
    fast = matrix_walk(kp, table, return_matrices=True, **kw)
    ref = dfs_walk(kp, table, **kw)
    assert_same_walk(fast, ref)
    assert fast.paths.shape == (min(top_n, table.n_paths),)
    mats = fast.matrices
    assert mats is not None
    np.testing.assert_allclose(mats.aggregate.sum(axis=1), fast.path_scores, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(mats.dyeing, mats.control * mats.path)
    # Every anchor's own path is reached, and its fact counts fully (gap 0).
    for k in range(fast.anchors.shape[0]):
        for a, row in enumerate(fast.anchors[k]):
            leaf_col = table.lengths[row] - 1
            assert mats.path[k, a, row, leaf_col]
            assert mats.dyeing[k, a, row, leaf_col] == pytest.approx(fast.anchor_sims[k, a])


def test_large_forest_matches_dfs() -> None:
    # Big enough for the partial-sort selection (> 64 paths) and for long path-matrix row lists.
    rng = np.random.default_rng(7)
    paths, emb = random_forest(rng, n_topics=40, max_depth=5, max_branch=4, d=16, noise=0.05)
    table = PathTable.from_paths(paths, emb)
    assert table.n_paths > 500
    kp = table.node_emb[rng.choice(table.leaf_ids, 5)].astype(np.float64)
    kp /= np.linalg.norm(kp, axis=1, keepdims=True)
    for support, ambiguous in [(0.01, 0.02), (0.03, 0.05), (0.05, 0.15)]:
        kw = dict(support=support, ambiguous=ambiguous, top_n=25, n_anchors=40)
        assert_same_walk(matrix_walk(kp, table, **kw), dfs_walk(kp, table, **kw))


def test_anchor_screening_is_exact_on_near_ties() -> None:
    # 300 facts whose similarities to the KP differ by ~1e-7, the size of float32 rounding at d=64:
    # the float32 screen must still hand the exact float64 top 10 to the walk.
    rng = np.random.default_rng(11)
    d = 64
    base = rng.standard_normal(d)
    emb = base + 1e-6 * rng.standard_normal((301, d))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb.astype(np.float32)
    table = PathTable.from_paths([[0, i] for i in range(1, 301)], emb)
    kp = (base + 0.5 * rng.standard_normal(d))[None, :]
    kp /= np.linalg.norm(kp)
    exact = emb[1:].astype(np.float64) @ kp[0]
    expected = np.lexsort((np.arange(300), -exact))[:10]
    for fn in WALKS:
        res = fn(kp, table, support=0.0, ambiguous=0.0, top_n=10)
        assert res.anchors[0].tolist() == expected.tolist()
        assert res.paths.tolist() == expected.tolist()
    assert_same_walk(matrix_walk(kp, table, top_n=10), dfs_walk(kp, table, top_n=10))


def test_top_rows_matches_stable_sort_with_ties() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(0, 20, size=(5, 500)).astype(np.float64)  # many ties
    for k in (1, 7, 64, 499, 500):
        expected = np.argsort(-values, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(walk._top_rows(values, k), expected)
