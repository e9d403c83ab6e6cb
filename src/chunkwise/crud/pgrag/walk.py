"""The PG-RAG "matrix walk": scoring fact paths of mind maps against key points, in numpy.

PG-RAG (Liang et al., 2024, "Empowering Large Language Models to Set up a Knowledge Retrieval
Indexer via Self-Learning", arXiv 2405.16933) stores every document as a mind map: a tree whose
root is the document's topic, whose inner nodes are keyword routes and whose leaves are facts. A
root-to-leaf path is a *fact path*. At query time the key points (KPs) of the question are
embedded and the fact paths of the candidate mind maps are scored by a walk over the trees. The
paper's retrieval section writes the result as ``Z = topK(sum over seeds of CM (.) PM)``: a
control matrix CM masked by a pathway matrix PM for every seed, summed, and the best rows kept.
This module implements that walk twice:

- :func:`matrix_walk`, vectorised over all KPs, anchors and paths (the way the authors' code
  lays the data out: one row per fact path, one column per depth);
- :func:`dfs_walk`, a plain recursive depth-first reference over the same trees, used by the
  tests and the benchmark to check :func:`matrix_walk` on many random forests.

Semantics (what both functions compute)
---------------------------------------
Notation: ``m`` KPs ``q_k`` (unit vectors), ``P`` fact paths, ``D`` = the deepest path's length,
``T[i, j]`` the node at depth ``j`` of path ``i`` (``-1`` past its end), ``e_n`` the unit
embedding of node ``n``. All similarities are cosine similarities (dot products of unit vectors,
in ``[-1, 1]``). ``s`` = support threshold, ``a`` = ambiguous threshold (``0 <= s <= a``).

1. *Template matrices*: the path-ID matrix ``T`` (:attr:`PathTable.path_nodes`) and the node
   embedding matrix (:attr:`PathTable.node_emb`).
2. *Similarity matrix* ``S[k, i, j] = q_k . e_T[i, j]`` (``0`` at padding).
3. *Anchors* (the paper's seed nodes): for each KP, the ``n_anchors`` paths whose fact (last
   node) is most similar to the KP; an anchor ``(k, r)`` has value ``v = S[k, r, leaf(r)]``.
4. *Sub-root*: from the anchor's fact, climb towards the topic while every node satisfies
   ``|S[k, r, j] - v| <= a``; the highest node reached is the sub-root, at depth ``c``
   (the fact itself when its parent already fails; the topic when nothing fails).
5. *Control matrix* (per anchor, ``(P, D)``): a node *passes* when ``|S - v| <= a``; the walk
   goes down each row from depth ``c`` and stops at the first node that does not pass, so
   ``CM[i, j] = w(|S[k, i, j] - v|) * S[k, i, j]`` if ``j >= c`` and every node of row ``i`` at
   depths ``c..j`` passes, else ``0``; ``w = 1`` within the support threshold
   (``<= s``) and ``w = 0.5`` in the ambiguous band (``s < . <= a``).
6. *Path matrix* (per anchor, ``(P, D)``, 0/1): ``PM[i, j] = 1`` when path ``i`` runs through
   the sub-root (``T[i, c]`` is the sub-root) and ``j`` is a real node of it at depth ``>= c``.
7. *Dyeing matrix* (the paper's "staining" matrix): ``DM = CM (.) PM``.
8. *Aggregation*: ``AM = sum over all anchors of all KPs of DM``; the score of path ``i`` is
   ``sum_j AM[i, j]``; the ``top_n`` paths by score are returned (ties: lower path index first).

So every anchor adds, to each fact path under its sub-root, the weighted similarities of that
path's nodes from the sub-root down to the first node that strays more than ``a`` from the
anchor's value: paths corroborated by many anchors and KPs ("the path taken by many") win. Scores
are sums of weighted cosines (unitless); like the code, a node with a negative cosine that passes
lowers the score.

Sources and deviations
----------------------
Rules 2-8 follow the authors' released matrix code, ``pgrag/sub_pseudo_graph_retriever.py`` in
github.com/IAAR-Shanghai/PGRAG (``create_matrix_templates``, ``compute_similarity_matrices``,
``process_top_k_ids`` and ``MatrixProcessor.create_control_and_pathway_matrices`` /
``color_matrices`` / ``find_top_k_ids``); the names of the matrices and the ``topK(sum CM (.) PM)``
formula are the paper's (retrieval section). The older Neo4j walk in
``PGRAG/Context_Recall/bottom_up_search.py`` (neighbour expansion on similarity *drops* of
0.2 / 0.5 relative to a seed path) and the routing in ``topic_path_router.py`` /
``context_prepare.py`` / ``final_context.py`` are an earlier pipeline and are not what is
implemented here; ``PGRAG/configs/real_config.py`` holds no walk parameter. Where we differ from
the released code, on purpose:

- padding is the explicit ``-1`` of the ID matrix (the code finds a path's end as its last
  non-zero similarity, which misreads a node whose similarity is exactly 0);
- the path matrix takes *every* path through the sub-root (the code scans only the rows adjacent
  to the anchor row, up and down until the node at the sub-root's depth changes: the same set
  when the paths of every subtree are listed next to each other, as in depth-first order);
- ties are broken by path index, deterministically (the code relies on ``np.argsort``);
- one ``top_n`` serves as the number of anchors per KP and of returned paths, as in the code
  (``topK``), unless ``n_anchors`` is given.

Thresholds: the paper's text gives 0.03 (support) / 0.05 (ambiguous); the authors' released code
uses 0.01 / 0.02 (the keyword defaults ``support_threshold`` / ``continue_threshold`` of
``create_control_and_pathway_matrices``, never overridden by its caller). The defaults here are
the code's values: every other rule above is taken from that code, the code is the part of the
method that can be read and re-run exactly, and its pair is the one that fits it; the paper's pair
is exported as :data:`SUPPORT_THRESHOLD_PAPER` / :data:`AMBIGUOUS_THRESHOLD_PAPER` and can be
passed to either walk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "AMBIGUOUS_THRESHOLD",
    "AMBIGUOUS_THRESHOLD_CODE",
    "AMBIGUOUS_THRESHOLD_PAPER",
    "AMBIGUOUS_WEIGHT",
    "MAX_DENSE_ENTRIES",
    "NORM_TOLERANCE",
    "SUPPORT_THRESHOLD",
    "SUPPORT_THRESHOLD_CODE",
    "SUPPORT_THRESHOLD_PAPER",
    "TOP_N",
    "TOP_N_CODE",
    "PathTable",
    "WalkMatrices",
    "WalkResult",
    "dfs_walk",
    "matrix_walk",
]

#: Support threshold of the authors' code (``support_threshold``): a node whose similarity is
#: within this distance of the anchor's similarity counts fully (weight 1).
SUPPORT_THRESHOLD_CODE = 0.01
#: Ambiguous threshold of the authors' code (``continue_threshold``): within it (and beyond the
#: support threshold) a node counts half and the walk goes on; beyond it the walk stops.
AMBIGUOUS_THRESHOLD_CODE = 0.02
#: Support threshold stated in the paper's text.
SUPPORT_THRESHOLD_PAPER = 0.03
#: Ambiguous threshold stated in the paper's text.
AMBIGUOUS_THRESHOLD_PAPER = 0.05
#: Default support threshold: the code's value (see the module docstring for why).
SUPPORT_THRESHOLD = SUPPORT_THRESHOLD_CODE
#: Default ambiguous threshold: the code's value.
AMBIGUOUS_THRESHOLD = AMBIGUOUS_THRESHOLD_CODE
#: Weight of a node in the ambiguous band (the authors' code: ``0.5 * similarity``).
AMBIGUOUS_WEIGHT = 0.5
#: ``topK`` default of the authors' ``PG_RAG_Processor`` (anchors per KP and returned paths).
TOP_N_CODE = 14
#: Default number of returned paths (and of anchors per KP).
TOP_N = TOP_N_CODE
#: Largest accepted ``| ||row|| - 1 |`` for embeddings said to be L2-normalised (float32 rows).
NORM_TOLERANCE = 1e-3
#: Largest ``n_kp * n_anchors * n_paths * max_depth`` for which ``return_matrices=True`` is allowed.
MAX_DENSE_ENTRIES = 20_000_000


# --------------------------------------------------------------------------------------------
# Template matrices
# --------------------------------------------------------------------------------------------


@dataclass(eq=False)
class PathTable:
    """The template matrices of a set of mind maps: fact paths (node ids) and node embeddings.

    Parameters
    ----------
    path_nodes : ndarray of int, shape (n_paths, max_depth)
        Row ``i`` is fact path ``i``: its node ids from the topic (column 0) to the fact, then
        ``-1`` up to ``max_depth``. Stored as int64.
    node_emb : ndarray of float, shape (n_nodes, d)
        Embedding of every node id; the rows used by the paths must be L2-normalised (within
        :data:`NORM_TOLERANCE`), so that a dot product is a cosine similarity. Rows no path uses
        are not checked. Stored as float32.
    path_topic : ndarray of int, shape (n_paths,), optional
        Topic (root) node id of each path. Derived from column 0 when omitted; checked against it
        when given.

    Raises
    ------
    ValueError
        On wrong shapes or dtypes, no paths, an empty path, ``-1`` padding before a node id or an
        id below ``-1``, an id out of range for ``node_emb``, non-finite or unnormalised rows,
        paths that do not form a forest (a node with two parents, or a node repeated in a path),
        a path that ends at an inner node of another path or repeats another path's fact, or a
        ``path_topic`` that disagrees with column 0.

    Notes
    -----
    The authors' code builds the same pair as its "ID Matrix" and "EMB Matrix"
    (``create_matrix_templates`` in ``pgrag/sub_pseudo_graph_retriever.py``); here embeddings are
    kept per node rather than per path cell, and looked up through the ids.

    Building the table also prepares what every walk reuses: a local numbering of the nodes the
    paths use (the fact of path ``i`` is local node ``i``, inner nodes follow), a contiguous copy
    of their embedding rows in that order, and for every node the list of paths through it.
    Treat a table as immutable once built.
    """

    path_nodes: np.ndarray
    node_emb: np.ndarray
    path_topic: np.ndarray | None = None
    _valid: np.ndarray = field(init=False, repr=False)
    _lengths: np.ndarray = field(init=False, repr=False)
    _used: np.ndarray = field(init=False, repr=False)
    _local: np.ndarray = field(init=False, repr=False)
    _emb_local: np.ndarray = field(init=False, repr=False)
    _through_ptr: np.ndarray = field(init=False, repr=False)
    _through_rows: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pn = np.asarray(self.path_nodes)
        if pn.ndim != 2:
            raise ValueError(f"path_nodes must be 2-D (n_paths, max_depth), got shape {pn.shape}")
        if pn.shape[0] == 0 or pn.shape[1] == 0:
            raise ValueError(f"path_nodes must hold at least one non-empty path, got shape {pn.shape}")
        if not np.issubdtype(pn.dtype, np.integer):
            raise ValueError(f"path_nodes must hold integer node ids, got dtype {pn.dtype}")
        pn = pn.astype(np.int64)
        emb = np.asarray(self.node_emb)
        if emb.ndim != 2 or emb.shape[0] == 0 or emb.shape[1] == 0:
            raise ValueError(f"node_emb must be 2-D (n_nodes, d) and non-empty, got shape {emb.shape}")
        if not np.issubdtype(emb.dtype, np.floating):
            raise ValueError(f"node_emb must be floating point, got dtype {emb.dtype}")
        emb = np.ascontiguousarray(emb, dtype=np.float32)
        n_paths, depth = pn.shape

        if (pn < -1).any():
            i, j = np.argwhere(pn < -1)[0]
            raise ValueError(f"path {i} has id {pn[i, j]} at depth {j}; ids are >= 0 and -1 is padding")
        valid = pn >= 0
        lengths = valid.sum(axis=1)
        if (lengths == 0).any():
            raise ValueError(f"path {int(np.argmax(lengths == 0))} is empty")
        prefix = np.arange(depth) < lengths[:, None]
        if not np.array_equal(valid, prefix):
            i = int(np.argmax((valid != prefix).any(axis=1)))
            raise ValueError(f"path {i}: padding -1 may only follow its node ids, got {pn[i].tolist()}")
        if pn.max() >= emb.shape[0]:
            i, j = np.argwhere(pn >= emb.shape[0])[0]
            raise ValueError(
                f"path {i} has node id {pn[i, j]}, out of range for node_emb with {emb.shape[0]} rows"
            )

        # Forest structure: every node has one parent (-1 for topics) wherever it occurs.
        rows, cols = np.nonzero(valid)
        nodes = pn[rows, cols]
        parents = np.where(cols > 0, pn[rows, np.maximum(cols - 1, 0)], -1)
        order = np.lexsort((parents, nodes))
        ns, ps = nodes[order], parents[order]
        clash = (ns[1:] == ns[:-1]) & (ps[1:] != ps[:-1])
        if clash.any():
            t = int(np.argmax(clash))
            raise ValueError(
                f"node {ns[t]} appears with two parents ({ps[t]} and {ps[t + 1]}; -1 = none): "
                "paths must be root-to-leaf paths of a forest, each node once per path"
            )
        leaves = pn[np.arange(n_paths), lengths - 1]
        uniq, counts = np.unique(leaves, return_counts=True)
        if (counts > 1).any():
            leaf = uniq[np.argmax(counts > 1)]
            dup = np.flatnonzero(leaves == leaf)
            raise ValueError(f"paths {dup.tolist()} all end at node {leaf}; fact paths must be distinct")
        inner = np.isin(leaves, parents[parents >= 0])
        if inner.any():
            i = int(np.argmax(inner))
            raise ValueError(
                f"path {i} ends at node {leaves[i]}, which has children in other paths: "
                "every path must run from a topic to a leaf"
            )

        # Local node numbering: the fact of path i is local node i, inner nodes follow in id order.
        inner_ids = np.unique(parents[parents >= 0])
        used = np.concatenate([leaves, inner_ids])
        emb_local = emb[used]
        sq = np.einsum("ij,ij->i", emb_local, emb_local, dtype=np.float64)
        if not np.isfinite(sq).all():
            raise ValueError(f"node_emb row {used[~np.isfinite(sq)][0]} is not finite")
        norms = np.sqrt(sq)
        off = np.abs(norms - 1.0) > NORM_TOLERANCE
        if off.any():
            t = int(np.argmax(off))
            raise ValueError(
                f"node_emb row {used[t]} has L2 norm {norms[t]:.6g}; rows used by paths must be "
                "L2-normalised (similarities are dot products, i.e. cosines)"
            )

        if self.path_topic is None:
            topic = pn[:, 0].copy()
        else:
            topic = np.asarray(self.path_topic)
            if topic.shape != (n_paths,) or not np.issubdtype(topic.dtype, np.integer):
                raise ValueError(
                    f"path_topic must be an integer array of shape ({n_paths},), got {topic.shape}"
                )
            topic = topic.astype(np.int64)
            if not np.array_equal(topic, pn[:, 0]):
                i = int(np.argmax(topic != pn[:, 0]))
                raise ValueError(f"path_topic[{i}] = {topic[i]} but path {i} starts at node {pn[i, 0]}")

        local = np.full_like(pn, -1)
        local[valid] = n_paths + np.searchsorted(inner_ids, nodes)
        local[np.arange(n_paths), lengths - 1] = np.arange(n_paths)
        # Paths through each (local) node, in path order: the rows a path matrix can mark.
        flat_local = local[rows, cols]
        by_node = np.argsort(flat_local, kind="stable")
        ptr = np.zeros(len(used) + 1, dtype=np.int64)
        np.cumsum(np.bincount(flat_local, minlength=len(used)), out=ptr[1:])

        self.path_nodes = pn
        self.node_emb = emb
        self.path_topic = topic
        self._valid = valid
        self._lengths = lengths.astype(np.int64)
        self._used = used
        self._local = local
        self._emb_local = emb_local
        self._through_ptr = ptr
        self._through_rows = rows[by_node].astype(np.int64)

    @classmethod
    def from_paths(
        cls,
        paths: Sequence[Sequence[int]],
        node_emb: np.ndarray,
        path_topic: np.ndarray | None = None,
    ) -> PathTable:
        """Build the table from root-to-leaf paths given as lists of node ids.

        Parameters
        ----------
        paths : sequence of sequences of int
            Fact paths, topic first; padded with ``-1`` to the longest one.
        node_emb : ndarray (n_nodes, d)
            See :class:`PathTable`.
        path_topic : ndarray (n_paths,), optional
            See :class:`PathTable`.

        Raises
        ------
        ValueError
            When ``paths`` is empty, a path is empty or holds a non-integer, and on every error
            listed in :class:`PathTable`.
        """
        if len(paths) == 0:
            raise ValueError("no paths given")
        lengths = np.fromiter((len(p) for p in paths), dtype=np.int64, count=len(paths))
        if (lengths == 0).any():
            raise ValueError(f"path {int(np.argmax(lengths == 0))} is empty")
        flat = np.asarray([n for p in paths for n in p])
        row = np.repeat(np.arange(len(paths)), lengths)
        if flat.ndim != 1 or not np.issubdtype(flat.dtype, np.integer):
            bad = next(i for i, p in enumerate(paths) if not all(isinstance(n, (int, np.integer)) for n in p))
            raise ValueError(
                f"path {bad} must be a flat sequence of integer node ids, got {list(paths[bad])!r}"
            )
        if (flat < 0).any():
            bad = int(row[np.argmax(flat < 0)])
            raise ValueError(f"path {bad} has a negative node id: {list(paths[bad])}")
        table = np.full((len(paths), int(lengths.max())), -1, dtype=np.int64)
        table[row, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
        return cls(table, node_emb, path_topic)

    @property
    def n_paths(self) -> int:
        """Number of fact paths (rows)."""
        return int(self.path_nodes.shape[0])

    @property
    def max_depth(self) -> int:
        """Number of nodes of the longest path (columns)."""
        return int(self.path_nodes.shape[1])

    @property
    def lengths(self) -> np.ndarray:
        """Number of nodes of each path, int64 (n_paths,)."""
        return self._lengths.copy()

    @property
    def leaf_ids(self) -> np.ndarray:
        """Fact (last) node id of each path, int64 (n_paths,)."""
        return self.path_nodes[np.arange(self.n_paths), self._lengths - 1]

    def paths(self) -> list[list[int]]:
        """The fact paths as lists of node ids (no padding)."""
        return [row[:n].tolist() for row, n in zip(self.path_nodes, self._lengths)]


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class WalkMatrices:
    """The intermediate matrices of one :func:`matrix_walk` call (for teaching and inspection).

    Anchors are indexed ``(k, a)``: KP ``k``, ``a``-th best anchor of that KP (as in
    :attr:`WalkResult.anchors`). Cells past a path's end are 0 / False everywhere.

    Attributes
    ----------
    similarity : ndarray float64 (n_kp, n_paths, max_depth)
        ``S[k, i, j]``: cosine similarity of KP ``k`` and the node at depth ``j`` of path ``i``.
    control : ndarray float64 (n_kp, n_anchors, n_paths, max_depth)
        Control matrix of every anchor: weighted similarity where the walk from the anchor's
        sub-root depth may pass, 0 elsewhere. Evaluated on every row, like the authors' code;
        only rows under the sub-root survive the path matrix.
    path : ndarray bool (n_kp, n_anchors, n_paths, max_depth)
        Path matrix of every anchor: the nodes, from the sub-root down, of the paths through the
        anchor's sub-root.
    dyeing : ndarray float64 (n_kp, n_anchors, n_paths, max_depth)
        ``control * path``.
    aggregate : ndarray float64 (n_paths, max_depth)
        ``dyeing`` summed over all anchors; its row sums are :attr:`WalkResult.path_scores` (up to
        floating-point summation order).
    """

    similarity: np.ndarray
    control: np.ndarray
    path: np.ndarray
    dyeing: np.ndarray
    aggregate: np.ndarray


@dataclass(frozen=True, eq=False)
class WalkResult:
    """Outcome of a walk: the selected fact paths and how they were reached.

    Attributes
    ----------
    paths : ndarray int64 (n_selected,)
        Selected path indices (rows of the :class:`PathTable`), best first; ties by lower index.
        ``n_selected = min(top_n, n_paths)``; paths with score 0 can be among them when fewer
        paths were reached, as in the authors' code.
    scores : ndarray float64 (n_selected,)
        Their scores: sums of weighted cosine similarities (see the module docstring).
    path_scores : ndarray float64 (n_paths,)
        Score of every path.
    anchors : ndarray int64 (n_kp, n_anchors)
        Anchor paths of each KP, best first (most similar fact first, ties by lower index).
    anchor_sims : ndarray float64 (n_kp, n_anchors)
        Cosine similarity of each anchor's fact to its KP (the value ``v`` the thresholds are
        measured from).
    sub_roots : ndarray int64 (n_kp, n_anchors)
        Node id where each anchor's walk starts (the highest ancestor reached from the fact).
    matrices : WalkMatrices or None
        The intermediate matrices, when asked for (``return_matrices=True``).
    """

    paths: np.ndarray
    scores: np.ndarray
    path_scores: np.ndarray
    anchors: np.ndarray
    anchor_sims: np.ndarray
    sub_roots: np.ndarray
    matrices: WalkMatrices | None = None


# --------------------------------------------------------------------------------------------
# Shared checks and helpers
# --------------------------------------------------------------------------------------------


def _check_kp(kp_emb: np.ndarray, table: PathTable) -> np.ndarray:
    """KP embeddings as float64 (n_kp, d), checked; a single (d,) vector is one KP."""
    kp = np.asarray(kp_emb)
    if kp.ndim == 1:
        kp = kp[None, :]
    if kp.ndim != 2:
        raise ValueError(f"kp_emb must be (n_kp, d) or (d,), got shape {np.shape(kp_emb)}")
    if kp.shape[0] == 0:
        raise ValueError("kp_emb holds no key point")
    if not np.issubdtype(kp.dtype, np.floating):
        raise ValueError(f"kp_emb must be floating point, got dtype {kp.dtype}")
    d = table.node_emb.shape[1]
    if kp.shape[1] != d:
        raise ValueError(f"kp_emb has dimension {kp.shape[1]} but node_emb has {d}")
    kp = kp.astype(np.float64)
    if not np.isfinite(kp).all():
        raise ValueError("kp_emb is not finite")
    norms = np.linalg.norm(kp, axis=1)
    off = np.abs(norms - 1.0) > NORM_TOLERANCE
    if off.any():
        t = int(np.argmax(off))
        raise ValueError(f"kp_emb row {t} has L2 norm {norms[t]:.6g}; KP embeddings must be L2-normalised")
    return kp


def _check_params(
    support: float, ambiguous: float, top_n: int, n_anchors: int | None, n_paths: int
) -> tuple[int, int]:
    """Validate thresholds and counts; returns (paths to return, anchors per KP), capped at n_paths."""
    if not (np.isfinite(support) and np.isfinite(ambiguous)) or not 0.0 <= support <= ambiguous:
        raise ValueError(f"need 0 <= support <= ambiguous, got support={support}, ambiguous={ambiguous}")
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 1:
        raise ValueError(f"top_n must be a positive integer, got {top_n!r}")
    anchors = top_n if n_anchors is None else n_anchors
    if isinstance(anchors, bool) or not isinstance(anchors, (int, np.integer)) or anchors < 1:
        raise ValueError(f"n_anchors must be a positive integer, got {n_anchors!r}")
    return min(int(top_n), n_paths), min(int(anchors), n_paths)


def _top_rows(values: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``values`` (m, n), the column indices of the ``k`` largest, best first, ties by index.

    Exact and deterministic; uses a partition to find each row's k-th largest value, then sorts
    only the entries at or above it.
    """
    m, n = values.shape
    if k >= n or n <= 64:
        return np.argsort(-values, axis=1, kind="stable")[:, :k]
    kth = np.partition(values, n - k, axis=1)[:, n - k : n - k + 1]
    rows, cols = np.nonzero(values >= kth)
    order = np.lexsort((cols, -values[rows, cols], rows))
    rows, cols = rows[order], cols[order]
    rank = np.arange(len(rows)) - np.searchsorted(rows, np.arange(m))[rows]
    return cols[rank < k].reshape(m, k)


# --------------------------------------------------------------------------------------------
# The matrix walk
# --------------------------------------------------------------------------------------------


def matrix_walk(
    kp_emb: np.ndarray,
    table: PathTable,
    *,
    support: float = SUPPORT_THRESHOLD,
    ambiguous: float = AMBIGUOUS_THRESHOLD,
    top_n: int = TOP_N,
    n_anchors: int | None = None,
    return_matrices: bool = False,
) -> WalkResult:
    """Score every fact path of ``table`` against the key points with the vectorised matrix walk.

    Parameters
    ----------
    kp_emb : ndarray (n_kp, d) or (d,)
        L2-normalised key-point embeddings (same model and dimension as ``table.node_emb``).
    table : PathTable
        Template matrices of the candidate mind maps.
    support, ambiguous : float
        Thresholds on ``|similarity - anchor similarity|`` (cosine units), ``0 <= support <=
        ambiguous``. Defaults: the authors' code's 0.01 / 0.02 (the paper's text says 0.03 / 0.05:
        :data:`SUPPORT_THRESHOLD_PAPER`, :data:`AMBIGUOUS_THRESHOLD_PAPER`).
    top_n : int
        Number of paths returned (capped at ``n_paths``). Default :data:`TOP_N` (the code's 14).
    n_anchors : int, optional
        Anchors per KP (capped at ``n_paths``); ``None`` uses ``top_n``, as the code does.
    return_matrices : bool
        Also return the dense intermediate matrices (:class:`WalkMatrices`); allowed while
        ``n_kp * n_anchors * n_paths * max_depth <= MAX_DENSE_ENTRIES``.

    Returns
    -------
    WalkResult

    Raises
    ------
    ValueError
        On a KP array of the wrong shape or dimension, non-finite or unnormalised KPs, thresholds
        outside ``0 <= support <= ambiguous``, a non-positive ``top_n`` / ``n_anchors``, or dense
        matrices that would be too large.

    Notes
    -----
    The semantics are the module's (rules 2-8). For speed, the control matrix of an anchor is
    evaluated only on the rows its path matrix marks (the paths through its sub-root, listed once
    per table): elsewhere the dyeing product is 0 whatever the control matrix holds, so the
    scores are those of the dense formula (which ``return_matrices=True`` also builds in full).
    Cost: one float32 ``(n_kp, d) x (d, n_paths)`` product to screen the facts, exact float64
    similarities for the few facts that can be anchors and for the nodes on the visited rows, a
    partial sort per KP, and work proportional to the number of paths under the sub-roots.
    Similarities are float64 dot products of the float32 embeddings; the screening never changes
    the anchors (see ``_LazySimilarity``).
    """
    kp = _check_kp(kp_emb, table)
    n_top, n_anc = _check_params(support, ambiguous, top_n, n_anchors, table.n_paths)
    m = kp.shape[0]
    n_paths, depth = table.path_nodes.shape
    local, valid, lengths = table._local, table._valid, table._lengths
    cols = np.arange(depth)

    # Similarity matrix, (m, n_used) over the table's local node numbering, cosine; filled on
    # demand (the facts that can be anchors first, then the nodes of the rows a walk visits).
    sim = _LazySimilarity(kp, table, n_anc)

    # Anchors: per KP, the paths whose fact is most similar.
    anchors = _top_rows(sim.fact_scores, n_anc)  # (m, A)
    n_alpha = m * n_anc
    a_kp = np.repeat(np.arange(m), n_anc)
    a_row = anchors.ravel()
    a_val = sim.values[a_kp, a_row]  # a fact's local id is its path index

    # Sub-root: climb from the fact while nodes stay within the ambiguous band of the anchor value.
    a_valid = valid[a_row]
    a_local = local[a_row]
    sim.ensure(a_local)
    a_sim = np.where(a_valid, sim.values[a_kp[:, None], np.maximum(a_local, 0)], 0.0)
    fails = a_valid & (np.abs(a_sim - a_val[:, None]) > ambiguous)
    sub_col = np.where(fails, cols, -1).max(axis=1) + 1
    sub_local = a_local[np.arange(n_alpha), sub_col]

    # Path matrix, as (anchor, row) pairs: the rows of all paths through each sub-root.
    ptr, through = table._through_ptr, table._through_rows
    starts = ptr[sub_local]
    counts = ptr[sub_local + 1] - starts
    total = int(counts.sum())
    p_alpha = np.repeat(np.arange(n_alpha), counts)
    p_row = through[np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(total)]

    # Control matrix on those rows, dyeing, aggregation.
    p_kp, p_val, p_col = a_kp[p_alpha], a_val[p_alpha], sub_col[p_alpha]
    p_valid = valid[p_row]
    p_local = local[p_row]
    sim.ensure(p_local)
    p_sim = np.where(p_valid, sim.values[p_kp[:, None], np.maximum(p_local, 0)], 0.0)
    started = cols >= p_col[:, None]
    control = _control(p_sim, p_val[:, None], p_valid, started, support, ambiguous)
    path = started & p_valid
    dyeing = control * path
    path_scores = np.bincount(p_row, weights=dyeing.sum(axis=1), minlength=n_paths)

    selected = _top_rows(path_scores[None, :], n_top)[0]
    matrices = None
    if return_matrices:
        sim.ensure(local)
        matrices = _dense_matrices(
            sim.values, table, a_kp, a_val, sub_col, sub_local, m, n_anc, support, ambiguous
        )
    return WalkResult(
        paths=selected.astype(np.int64),
        scores=path_scores[selected],
        path_scores=path_scores,
        anchors=anchors.astype(np.int64),
        anchor_sims=a_val.reshape(m, n_anc),
        sub_roots=table._used[sub_local].reshape(m, n_anc),
        matrices=matrices,
    )


class _LazySimilarity:
    """KP-node cosine similarities, (m, n_used) in the table's local numbering, computed lazily.

    Every node's similarity is computed once, as a float64 matrix product (the float32 embedding
    rows are cast to float64, exactly), so a node compared in two steps of a walk (climbing, then
    walking down) is compared with the same number. Inner
    nodes are computed when a walk first visits them. Facts are screened first: a float32 product
    over all facts (half the memory traffic of float64) gives each fact's similarity within
    ``eps``, a bound on the float32 rounding error; every fact that can still be among the
    ``n_anchors`` best of a KP (float32 value within ``2 * eps`` of the ``n_anchors``-th best) is
    then computed exactly, and only those compete for the anchors. The anchors are therefore the
    ones an exact float64 ranking of all facts gives.
    """

    def __init__(self, kp: np.ndarray, table: PathTable, n_anchors: int) -> None:
        self.kp = kp
        self.emb = table._emb_local
        m, d = kp.shape
        n_facts = table.n_paths
        self.values = np.zeros((m, self.emb.shape[0]))
        self.known = np.zeros(self.emb.shape[0], dtype=bool)
        if n_anchors >= n_facts:
            candidates = np.ones((m, n_facts), dtype=bool)
        else:
            approx = (kp.astype(np.float32) @ self.emb[:n_facts].T).astype(np.float64)
            # |float32 dot - exact dot| <= (d + 1) u sum|q_i e_i| (u = 2**-24, rounding of q
            # included) and sum|q_i e_i| <= |q| |e| <= (1 + NORM_TOLERANCE)**2; doubled for margin.
            eps = 2.0 * (d + 2) * 2.0**-24 * (1.0 + NORM_TOLERANCE) ** 2
            kth = np.partition(approx, n_facts - n_anchors, axis=1)[:, n_facts - n_anchors, None]
            candidates = approx >= kth - 2.0 * eps
        self.ensure(np.flatnonzero(candidates.any(axis=0)))  # facts: local id = path index
        #: Exact fact similarities where a fact can be an anchor, -inf elsewhere: (m, n_paths).
        self.fact_scores = np.where(candidates, self.values[:, :n_facts], -np.inf)

    def ensure(self, local: np.ndarray) -> None:
        """Compute the similarities of the local node ids in ``local`` (``-1`` padding ignored)."""
        ids = local[local >= 0]
        need = np.unique(ids[~self.known[ids]])
        if need.size:
            self.values[:, need] = self.kp @ self.emb[need].astype(np.float64).T
            self.known[need] = True


def _control(
    s: np.ndarray,
    v: np.ndarray,
    valid: np.ndarray,
    started: np.ndarray,
    support: float,
    ambiguous: float,
) -> np.ndarray:
    """Control-matrix rows: weighted similarity on the passing prefix from the sub-root depth.

    ``s`` similarities, ``v`` anchor values (broadcast), ``valid`` real cells, ``started`` cells at
    or below the sub-root depth; all broadcast to the same shape, depth on the last axis.
    """
    delta = np.abs(s - v)
    passes = valid & (delta <= ambiguous)
    walkable = np.logical_and.accumulate(passes | ~started, axis=-1) & started
    weight = np.where(delta <= support, 1.0, AMBIGUOUS_WEIGHT)
    return np.where(walkable, weight * s, 0.0)


def _dense_matrices(
    sim: np.ndarray,
    table: PathTable,
    a_kp: np.ndarray,
    a_val: np.ndarray,
    sub_col: np.ndarray,
    sub_local: np.ndarray,
    m: int,
    n_anc: int,
    support: float,
    ambiguous: float,
) -> WalkMatrices:
    """Build the full similarity / control / path / dyeing / aggregate matrices of a walk."""
    n_paths, depth = table.path_nodes.shape
    size = m * n_anc * n_paths * depth
    if size > MAX_DENSE_ENTRIES:
        raise ValueError(
            f"return_matrices=True would build {size} cells per matrix (> MAX_DENSE_ENTRIES = "
            f"{MAX_DENSE_ENTRIES}); use fewer KPs, anchors or paths"
        )
    local, valid = table._local, table._valid
    similarity = np.where(valid, sim[:, np.maximum(local, 0)], 0.0)  # (m, P, D)
    s = similarity[a_kp]  # (n_alpha, P, D)
    started = (np.arange(depth) >= sub_col[:, None, None]) & np.ones((1, n_paths, 1), dtype=bool)
    control = _control(s, a_val[:, None, None], valid[None], started, support, ambiguous)
    through = local[:, sub_col].T == sub_local[:, None]  # (n_alpha, P): path runs through the sub-root
    path = through[:, :, None] & started & valid[None]
    dyeing = control * path
    shape = (m, n_anc, n_paths, depth)
    return WalkMatrices(
        similarity=similarity,
        control=control.reshape(shape),
        path=path.reshape(shape),
        dyeing=dyeing.reshape(shape),
        aggregate=dyeing.sum(axis=0),
    )


# --------------------------------------------------------------------------------------------
# Depth-first reference
# --------------------------------------------------------------------------------------------


def dfs_walk(
    kp_emb: np.ndarray,
    table: PathTable,
    *,
    support: float = SUPPORT_THRESHOLD,
    ambiguous: float = AMBIGUOUS_THRESHOLD,
    top_n: int = TOP_N,
    n_anchors: int | None = None,
) -> WalkResult:
    """Reference walk: the same rules as :func:`matrix_walk`, by recursion over the trees.

    Builds the forest from ``table.paths()`` (children in first-seen order), then for each KP:
    recurses from every topic to list the facts with their root-to-leaf stacks, takes the anchors
    (most similar facts, ties by path index), climbs each anchor's stack to its sub-root while
    ``|similarity - v| <= ambiguous``, and recurses down from the sub-root: a node within the
    ambiguous band adds ``w * similarity`` (``w = 1`` within ``support``, else 0.5) to everything
    below it, a node outside it stops the additions for its whole subtree, and every fact reached
    adds the running sum to its path's score. Similarities are computed per node, lazily, as
    float64 dot products.

    Parameters, return value and errors are those of :func:`matrix_walk` (without matrices).
    Meant for tests and benchmarks: it is plain Python and slow.
    """
    kp = _check_kp(kp_emb, table)
    n_top, n_anc = _check_params(support, ambiguous, top_n, n_anchors, table.n_paths)
    paths = table.paths()
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    leaf_path: dict[int, int] = {}
    for i, p in enumerate(paths):
        if p[0] not in children:
            children[p[0]] = []
            roots.append(p[0])
        for parent, child in zip(p, p[1:]):
            if child not in children:
                children[child] = []
                children[parent].append(child)
        leaf_path[p[-1]] = i

    emb = table.node_emb
    path_scores = [0.0] * len(paths)
    all_anchors: list[list[int]] = []
    all_values: list[list[float]] = []
    all_subs: list[list[int]] = []
    for q in kp:
        cache: dict[int, float] = {}

        def sim(node: int, q: np.ndarray = q, cache: dict[int, float] = cache) -> float:
            if node not in cache:
                cache[node] = float(np.dot(emb[node].astype(np.float64), q))
            return cache[node]

        facts: list[tuple[float, int, list[int]]] = []

        def collect(node: int, stack: list[int], facts: list[tuple[float, int, list[int]]] = facts) -> None:
            stack.append(node)
            if node in leaf_path:
                facts.append((-sim(node), leaf_path[node], list(stack)))
            for child in children[node]:
                collect(child, stack)
            stack.pop()

        for root in roots:
            collect(root, [])
        facts.sort()

        anchors, values, subs = [], [], []
        for neg_v, row, stack in facts[:n_anc]:
            v = -neg_v
            top = len(stack) - 1
            while top > 0 and abs(sim(stack[top - 1]) - v) <= ambiguous:
                top -= 1

            def descend(node: int, acc: float, alive: bool, v: float = v) -> None:
                if alive:
                    s = sim(node)
                    gap = abs(s - v)
                    if gap <= ambiguous:
                        acc += (1.0 if gap <= support else AMBIGUOUS_WEIGHT) * s
                    else:
                        alive = False
                if node in leaf_path:
                    path_scores[leaf_path[node]] += acc
                for child in children[node]:
                    descend(child, acc, alive)

            descend(stack[top], 0.0, True)
            anchors.append(row)
            values.append(v)
            subs.append(stack[top])
        all_anchors.append(anchors)
        all_values.append(values)
        all_subs.append(subs)

    ranked = sorted(range(len(paths)), key=lambda i: (-path_scores[i], i))[:n_top]
    scores = np.asarray(path_scores, dtype=np.float64)
    return WalkResult(
        paths=np.asarray(ranked, dtype=np.int64),
        scores=scores[ranked],
        path_scores=scores,
        anchors=np.asarray(all_anchors, dtype=np.int64),
        anchor_sims=np.asarray(all_values, dtype=np.float64),
        sub_roots=np.asarray(all_subs, dtype=np.int64),
    )
