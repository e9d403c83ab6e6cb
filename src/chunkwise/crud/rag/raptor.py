"""RAPTOR: a tree of recursive cluster summaries, and its two retrievers (a CRUD-RAG baseline).

Sarthi et al., 2024, "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval"
(arXiv 2401.18059). Section 3 of the paper builds the tree bottom-up:

1. the leaves are the corpus chunks, embedded;
2. a level's node embeddings are reduced in dimension (UMAP in the paper) and clustered with a
   Gaussian mixture whose number of components is chosen by the Bayesian information criterion
   (BIC); the clustering is *soft* -- a node joins every cluster whose posterior probability
   exceeds a threshold -- and two-step: global clusters first, then local clusters inside each
   global cluster;
3. each cluster's texts are summarised by an LLM, the summaries embedded and they form the next
   level; this recurses until clustering is no longer possible (one cluster, or too few nodes).

Querying (section 3, "Querying") has two modes: *tree traversal* (top-down, the top-k nodes per
level, descending into the children of the chosen ones) and *collapsed tree* (all nodes in one
pool, ranked by cosine, taken until a token budget is filled). :class:`TreeTraversalRetriever`
and :class:`CollapsedTreeRetriever` implement them behind the :class:`~chunkwise.retrieval.Retriever`
interface; a hit's id is the node id (the chunk id for leaves, ``"raptor:<level>:<hash>"`` for
summaries).

What differs from the paper: without ``umap-learn`` installed, the reduction is PCA
(scikit-learn); the summary prompt is our own (it asks to keep names, numbers and dates and to
write in the passages' language, the corpus being Chinese); clusters whose texts exceed the
summariser's context are not re-clustered; the mixtures' covariance regulariser is relative to
the data's variance (see :func:`_gmm_clusters`), which keeps BIC from preferring one-node
clusters on small levels.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkwise._jsonl import JSONLStore

from chunkwise._validation import Interval, check_param
from chunkwise.crud.rag.chunking import id_text_pairs
from chunkwise.crud.rag.retrievers import CRUD_TOP_K
from chunkwise.retrieval import Hit, check_top_k, unit_rows
from chunkwise.tokens import DEFAULT_ENCODING, count_tokens

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "SUMMARY_PROMPT",
    "CollapsedTreeRetriever",
    "RaptorNode",
    "RaptorTree",
    "TreeTraversalRetriever",
    "reducer_name",
]

logger = logging.getLogger(__name__)

#: The summarisation prompt (ours, not the paper's); ``{passages}`` is replaced by the cluster's
#: texts, separated by blank lines.
SUMMARY_PROMPT = (
    "Summarise the following passages in a short paragraph. Keep every name, number and date. "
    "Write in the same language as the passages.\n\nPassages:\n{passages}\n\nSummary:"
)

#: Covariance regulariser of the mixtures, as a fraction of the data's mean per-dimension variance.
_REG_COVAR_FRACTION = 0.01

#: Local UMAP neighbourhood (the size the paper's code uses inside global clusters).
_LOCAL_NEIGHBOURS = 10


def _has_umap() -> bool:
    try:
        import umap  # noqa: F401
    except Exception:  # ImportError, or numba failing to import
        return False
    return True


def reducer_name() -> str:
    """``"umap"`` when ``umap-learn`` can be imported, else ``"pca"`` (scikit-learn)."""
    return "umap" if _has_umap() else "pca"


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _embed(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    vecs = unit_rows(np.asarray(embedder.embed(list(texts)), dtype=np.float32))
    if vecs.shape[0] != len(texts):
        raise ValueError(f"the embedder returned {vecs.shape[0]} vectors for {len(texts)} texts")
    return vecs




def _check_int(name: str, value: Any, minimum: int) -> int:
    return int(check_param(name, value, [Interval(int, minimum, None)]))


@dataclass
class RaptorNode:
    """One node of a RAPTOR tree.

    Attributes
    ----------
    id : str
        The chunk id for a leaf (level 0); ``"raptor:<level>:<first 16 hex of the summary key>"``
        for a summary.
    level : int
        0 for leaves, ``L`` for summaries of level ``L - 1`` nodes.
    text : str
    children : tuple of str
        Ids of the level ``level - 1`` nodes summarised (empty for leaves).
    embedding : numpy.ndarray, shape (d,), float32
        L2-normalised.
    """

    id: str
    level: int
    text: str
    children: tuple[str, ...]
    embedding: np.ndarray = field(repr=False)


class _SummaryStore:
    """Append-only ``summaries.jsonl``: one ``{"key", "level", "children", "text"}`` per line."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self._store = JSONLStore(folder, "summaries.jsonl")
        self.folder = self._store.folder
        self.path = self._store.path
        self.records = self._store.records

    def get(self, key: str) -> str | None:
        rec = self.records.get(key)
        return None if rec is None else str(rec["text"])

    def put(self, key: str, level: int, children: Sequence[str], text: str) -> None:
        self._store.put({"key": key, "level": level, "children": list(children), "text": text})


def _reduce(x: np.ndarray, dim: int, n_neighbours: int, random_state: int) -> np.ndarray:
    """Rows of ``x`` (n, d) reduced to (n, k), ``k = min(dim, n - 2, d)`` (at least 1)."""
    n, d = x.shape
    k = max(1, min(dim, n - 2, d))
    if _has_umap() and n > k + 1:
        import umap

        return np.asarray(
            umap.UMAP(
                n_neighbors=max(2, min(n_neighbours, n - 1)), n_components=k, metric="cosine",
                random_state=random_state,
            ).fit_transform(x),
            dtype=np.float64,
        )
    from sklearn.decomposition import PCA

    return PCA(n_components=min(k, n), random_state=random_state).fit_transform(np.asarray(x, dtype=np.float64))


def _gmm_clusters(x: np.ndarray, max_clusters: int, threshold: float, random_state: int) -> list[list[int]]:
    """Soft GMM clusters of the rows of ``x``: the BIC-best number of components in
    ``1..min(max_clusters, n - 1)``; row ``i`` joins cluster ``c`` when ``P(c | x_i) > threshold``
    (its most probable cluster when none passes). Returns lists of row indices, empty ones dropped.

    The covariance regulariser is relative to the data: ``reg_covar`` = 1% of the mean
    per-dimension variance (scikit-learn's default, an absolute 1e-6, lets components of one or
    two points collapse, and their huge likelihood makes BIC prefer singletons on small levels)."""
    from sklearn.mixture import GaussianMixture

    n = x.shape[0]
    k_max = max(1, min(max_clusters, n - 1))
    reg = max(1e-6, _REG_COVAR_FRACTION * float(np.mean(np.var(x, axis=0))))
    best_k, best_bic, best_gm = 1, math.inf, None
    for k in range(1, k_max + 1):
        gm = GaussianMixture(n_components=k, reg_covar=reg, random_state=random_state).fit(x)
        bic = gm.bic(x)
        if bic < best_bic:
            best_k, best_bic, best_gm = k, bic, gm
    assert best_gm is not None
    probs = best_gm.predict_proba(x)
    members: list[list[int]] = [[] for _ in range(best_k)]
    for i in range(n):
        chosen = np.flatnonzero(probs[i] > threshold)
        if chosen.size == 0:
            chosen = np.array([int(np.argmax(probs[i]))])
        for c in chosen:
            members[int(c)].append(i)
    return [m for m in members if m]


class RaptorTree:
    """A RAPTOR tree: leaves (the chunks) and levels of cluster summaries above them.

    Build it with :meth:`build`. Attributes: ``nodes`` (id -> :class:`RaptorNode`), ``levels``
    (``levels[L]`` the node ids of level ``L``, level 0 the leaves in corpus order), ``reducer``
    (``"umap"`` or ``"pca"``), ``llm_calls`` and ``reused_summaries`` (of the build).
    """

    def __init__(self, nodes: dict[str, RaptorNode], levels: list[list[str]], *, reducer: str = "pca",
                 llm_calls: int = 0, reused_summaries: int = 0) -> None:
        if not levels or not levels[0]:
            raise ValueError("a RAPTOR tree needs at least one leaf")
        self.nodes = nodes
        self.levels = levels
        self.reducer = reducer
        self.llm_calls = llm_calls
        self.reused_summaries = reused_summaries

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def depth(self) -> int:
        """Number of levels above the leaves."""
        return len(self.levels) - 1

    @property
    def root_ids(self) -> list[str]:
        """Ids of the top level's nodes (one node when the recursion ended in a single cluster)."""
        return list(self.levels[-1])

    @classmethod
    def build(
        cls,
        chunks: Iterable[Any],
        embedder: Any,
        llm: ChatModel,
        *,
        max_levels: int = 3,
        reduction_dim: int = 10,
        max_clusters: int = 50,
        threshold: float = 0.1,
        max_summary_tokens: int = 256,
        random_state: int = 0,
        store: str | os.PathLike[str] | None = None,
        show_progress: bool = False,
    ) -> RaptorTree:
        """Build the tree bottom-up (paper section 3, "Tree construction" and "Clustering algorithm").

        Per level: reduce the node embeddings to ``reduction_dim`` dimensions -- UMAP (cosine
        metric; ``n_neighbors = sqrt(n)`` for the global step, 10 for the local step) when
        ``umap-learn`` is installed, **otherwise PCA** (scikit-learn) -- fit Gaussian mixtures
        with 1 to ``max_clusters`` components, keep the one with the lowest BIC, assign every node
        to each cluster whose posterior exceeds ``threshold`` (soft clustering); then repeat
        inside each global cluster (local step). Each resulting cluster is summarised by ``llm``
        (:data:`SUMMARY_PROMPT`, temperature 0, at most ``max_summary_tokens`` completion
        tokens), the summaries are embedded and form the next level. The recursion stops when a
        level has a single node, when ``max_levels`` summary levels exist, when a level has fewer
        than 2 nodes to cluster, or when clustering no longer reduces the number of nodes. A
        level of 2 or 3 nodes is summarised as one cluster (too few points for a mixture).

        Parameters
        ----------
        chunks : iterable
            :class:`~chunkwise.crud.rag.chunking.CorpusChunk` objects (``chunk_id``, ``text``),
            objects with ``id`` and ``text``, ``(id, text)`` pairs, or strings (ids = index).
        embedder : object with ``embed(texts) -> ndarray (n, d)``
            For the leaves and the summaries (rows are L2-normalised here).
        llm : ChatModel
            Returning an object with ``.text`` (e.g. :class:`chunkwise.llm.LLMClient`, whose
            response cache also makes reruns free).
        max_levels : int >= 1, default 3
            Most summary levels above the leaves.
        reduction_dim : int >= 1, default 10
            Target dimension of the reduction (capped at ``n - 2`` and at ``d``).
        max_clusters : int >= 1, default 50
            Most mixture components tried per clustering step.
        threshold : float in (0, 1), default 0.1
            Posterior probability above which a node joins a cluster.
        max_summary_tokens : int >= 1, default 256
            ``max_tokens`` of each summary request (completion tokens of the LLM's tokenizer).
        random_state : int, default 0
            Seed of the reduction and of the mixtures.
        store : path, optional
            Folder for ``summaries.jsonl``: every summary is appended (and flushed) as soon as it
            is made, keyed by the sha1 of ``(level, sorted child ids, their texts)``; a later build
            reuses the stored summaries and makes no LLM call for them. The key does not hold
            the model or ``max_summary_tokens``: a store belongs to one model and one summary
            length, so use a new folder when changing either
            (:func:`chunkwise.crud.experiment.build_tree_graph_retrievers` keys its folders so).
        show_progress : bool, default False
            Print one line per level to stderr.

        Returns
        -------
        RaptorTree

        Raises
        ------
        ValueError
            For empty ``chunks``, duplicate chunk ids, a chunk without text, parameters out of
            range, an ``llm`` without ``chat`` or an ``embedder`` without ``embed``, an embedder
            returning the wrong number of vectors, or the LLM returning an empty summary.
        Exception
            Whatever ``llm.chat`` raises (e.g. :class:`chunkwise.llm.LLMRequestError`); the
            summaries finished before it are kept in ``store``.
        """
        max_levels = _check_int("max_levels", max_levels, 1)
        reduction_dim = _check_int("reduction_dim", reduction_dim, 1)
        max_clusters = _check_int("max_clusters", max_clusters, 1)
        max_summary_tokens = _check_int("max_summary_tokens", max_summary_tokens, 1)
        if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
            raise ValueError(f"random_state must be an int, got {random_state!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or not 0.0 < float(threshold) < 1.0:
            raise ValueError(f"threshold must be a probability in (0, 1), got {threshold!r}")
        threshold = float(threshold)
        if not callable(getattr(embedder, "embed", None)):
            raise ValueError("embedder must have an embed(texts) method (e.g. chunkwise.embeddings)")
        if not callable(getattr(llm, "chat", None)):
            raise ValueError("llm must have a chat(messages, ...) method (e.g. chunkwise.llm.LLMClient)")
        if isinstance(random_state, np.integer):
            random_state = int(random_state)
        if random_state < 0:
            raise ValueError(f"random_state must be an int >= 0, got {random_state!r}")
        ids, texts = id_text_pairs(chunks, "a RAPTOR tree needs at least one chunk")
        summary_store = _SummaryStore(store) if store is not None else None

        vecs = _embed(embedder, texts)
        nodes: dict[str, RaptorNode] = {
            i: RaptorNode(i, 0, t, (), vecs[j]) for j, (i, t) in enumerate(zip(ids, texts))
        }
        levels: list[list[str]] = [list(ids)]
        llm_calls = reused = 0

        while len(levels) - 1 < max_levels:
            level = len(levels) - 1
            current = levels[-1]
            n = len(current)
            if n < 2:
                break
            if n <= 3:
                clusters = [list(range(n))]
            else:
                x = np.stack([nodes[i].embedding for i in current])
                clusters = cls._two_step_clusters(x, reduction_dim, max_clusters, threshold, int(random_state))
            if len(clusters) >= n:  # no reduction: every node alone
                break
            new_ids: list[str] = []
            new_texts: list[str | None] = []
            new_children: list[tuple[str, ...]] = []
            asks: list[tuple[int, str, list[str], list[str]]] = []  # (position, key, child ids, child texts)
            for members in clusters:
                child_ids = sorted({current[m] for m in members})
                child_texts = [nodes[c].text for c in child_ids]
                key = _sha1(json.dumps([level + 1, child_ids, child_texts], ensure_ascii=False))
                node_id = f"raptor:{level + 1}:{key[:16]}"
                if node_id in new_ids:
                    continue
                summary = summary_store.get(key) if summary_store is not None else None
                if summary is None:
                    asks.append((len(new_ids), key, child_ids, child_texts))
                else:
                    reused += 1
                new_ids.append(node_id)
                new_texts.append(summary)
                new_children.append(tuple(child_ids))
            # the clusters of one level are independent: one batch (cache first, the misses concurrently)
            summaries = cls._summarise_many(llm, [a[3] for a in asks], max_summary_tokens)
            llm_calls += len(asks)
            for (pos, key, child_ids, _texts), summary in zip(asks, summaries):
                new_texts[pos] = summary
                if summary_store is not None:
                    summary_store.put(key, level + 1, child_ids, summary)
            new_vecs = _embed(embedder, new_texts)  # type: ignore[arg-type]
            for j, node_id in enumerate(new_ids):
                nodes[node_id] = RaptorNode(node_id, level + 1, new_texts[j], new_children[j], new_vecs[j])
            levels.append(new_ids)
            if show_progress:
                print(f"RAPTOR level {level + 1}: {n} nodes -> {len(new_ids)} clusters", file=sys.stderr, flush=True)
            logger.info("RAPTOR level %d: %d nodes -> %d clusters", level + 1, n, len(new_ids))
            if len(new_ids) == 1:
                break
        return cls(nodes, levels, reducer=reducer_name(), llm_calls=llm_calls, reused_summaries=reused)

    @staticmethod
    def _two_step_clusters(x: np.ndarray, dim: int, max_clusters: int, threshold: float, random_state: int) -> list[list[int]]:
        """Global soft clusters, then local soft clusters inside each; row-index lists, deduplicated."""
        n = x.shape[0]
        global_x = _reduce(x, dim, max(2, int(math.sqrt(n - 1))), random_state)
        out: list[list[int]] = []
        seen: set[tuple[int, ...]] = set()
        for g in _gmm_clusters(global_x, max_clusters, threshold, random_state):
            if len(g) <= 3:
                local = [list(range(len(g)))]
            else:
                sub = _reduce(x[g], dim, _LOCAL_NEIGHBOURS, random_state)
                local = _gmm_clusters(sub, max_clusters, threshold, random_state)
            for members in local:
                key = tuple(sorted(g[m] for m in members))
                if key not in seen:
                    seen.add(key)
                    out.append(list(key))
        return out

    @staticmethod
    def _summarise_many(llm: ChatModel, groups: Sequence[Sequence[str]], max_tokens: int) -> list[str]:
        """One summary per group of texts, through the LLM's batch call (same requests as one by one).

        Raises the first failed request's error, or ValueError for an empty summary, after
        every request has finished (so the good replies are in the LLM cache).
        """
        from chunkwise.llm.batch import chat_many

        prompts = [SUMMARY_PROMPT.format(passages="\n\n".join(t.strip() for t in texts)) for texts in groups]
        results = chat_many(llm, [[{"role": "user", "content": p}] for p in prompts], errors="raise",
                            temperature=0.0, max_tokens=max_tokens)
        out = [str(getattr(r.output, "text", r.output)).strip() for r in results]
        if any(not text for text in out):
            raise ValueError("the LLM returned an empty summary")
        return out

    def all_nodes(self) -> list[RaptorNode]:
        """Every node, level by level (leaves first, in corpus order)."""
        return [self.nodes[i] for level in self.levels for i in level]


def _cosines(query_embedder: Any, question: str, matrix: np.ndarray) -> np.ndarray:
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
    q = unit_rows(np.asarray(query_embedder.embed([question]), dtype=np.float32))
    if q.shape != (1, matrix.shape[1]):
        raise ValueError(f"query embedding has shape {q.shape}, the tree's nodes have dimension {matrix.shape[1]}")
    return matrix @ q[0]


class TreeTraversalRetriever:
    """RAPTOR's tree traversal (paper section 3, "Querying", first mode).

    Start at the top level, keep the ``top_k_per_level`` nodes most similar to the question
    (cosine), descend into their children, keep the best ``top_k_per_level`` of those, and so on
    down to the leaves; the selected nodes of all levels are returned best first (by cosine,
    ties by level from the top, then tree order), at most ``top_k`` of them.

    Parameters
    ----------
    tree : RaptorTree
    query_embedder : object with ``embed(texts) -> ndarray``
        Must share the vector space of the tree's embedder.
    top_k_per_level : int >= 1, optional
        Nodes kept per level; ``None`` (default): the ``top_k`` of each :meth:`retrieve` call.
    name : str, default "tree_traversal"

    Raises
    ------
    ValueError
        For ``top_k_per_level < 1``.
    """

    def __init__(self, tree: RaptorTree, query_embedder: Any, top_k_per_level: int | None = None, *,
                 name: str = "tree_traversal") -> None:
        if top_k_per_level is not None:
            top_k_per_level = _check_int("top_k_per_level", top_k_per_level, 1)
        self.tree = tree
        self.query_embedder = query_embedder
        self.top_k_per_level = top_k_per_level
        self.name = name
        self._order = [n.id for n in tree.all_nodes()]
        self._row = {nid: r for r, nid in enumerate(self._order)}
        self._matrix = np.stack([tree.nodes[i].embedding for i in self._order])

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """Hits ``(node id, text, cosine)`` of the traversal, best first, at most ``top_k``.

        Raises
        ------
        ValueError
            For an empty question, a ``top_k`` that is not an int >= 0, or a query embedding
            whose dimension differs from the tree's.
        """
        top_k = check_top_k(top_k)
        if top_k == 0:
            return []
        per_level = self.top_k_per_level or top_k
        sims = _cosines(self.query_embedder, question, self._matrix)
        candidates = list(self.tree.levels[-1])
        selected: list[str] = []
        while candidates:
            ranked = sorted(candidates, key=lambda i: (-sims[self._row[i]], self._row[i]))[:per_level]
            selected.extend(ranked)
            children: list[str] = []
            seen: set[str] = set()
            for nid in ranked:
                for c in self.tree.nodes[nid].children:
                    if c not in seen:
                        seen.add(c)
                        children.append(c)
            candidates = children
        top_level = len(self.tree.levels)
        order = sorted(
            selected,
            key=lambda i: (-sims[self._row[i]], top_level - self.tree.nodes[i].level, self._row[i]),
        )
        return [Hit(i, self.tree.nodes[i].text, float(sims[self._row[i]])) for i in order[:top_k]]


class CollapsedTreeRetriever:
    """RAPTOR's collapsed tree (paper section 3, "Querying", second mode).

    Every node of every level in one pool, ranked by cosine with the question (ties by tree
    order, leaves first); nodes are taken in that order while their summed token count stays
    within ``max_tokens`` -- the first node that does not fit ends the selection, as in the
    paper -- and at most ``top_k`` of them.

    Parameters
    ----------
    tree : RaptorTree
    query_embedder : object with ``embed(texts) -> ndarray``
    max_tokens : int >= 1, default 2000
        Token budget of the returned texts, in tokens of the tiktoken encoding ``encoding``
        (the paper's experiments use 2000).
    encoding : str, default "cl100k_base"
        Token counting via :func:`chunkwise.tokens.count_tokens`.
    name : str, default "collapsed_tree"

    Raises
    ------
    ValueError
        For ``max_tokens < 1``; :func:`chunkwise.tokens.get_encoding`'s errors for the encoding.
    """

    def __init__(self, tree: RaptorTree, query_embedder: Any, max_tokens: int = 2000, *,
                 encoding: str = DEFAULT_ENCODING, name: str = "collapsed_tree") -> None:
        self.max_tokens = _check_int("max_tokens", max_tokens, 1)
        self.tree = tree
        self.query_embedder = query_embedder
        self.encoding = encoding
        self.name = name
        self._nodes = tree.all_nodes()
        self._matrix = np.stack([n.embedding for n in self._nodes])
        self.n_tokens = np.array([count_tokens(n.text, encoding) for n in self._nodes], dtype=np.int64)

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """Hits ``(node id, text, cosine)``, best first; total tokens <= ``max_tokens``, at most ``top_k``.

        Raises
        ------
        ValueError
            For an empty question, a ``top_k`` that is not an int >= 0, or a query embedding
            whose dimension differs from the tree's.
        """
        top_k = check_top_k(top_k)
        if top_k == 0:
            return []
        sims = _cosines(self.query_embedder, question, self._matrix)
        order = np.lexsort((np.arange(len(sims)), -sims))
        hits: list[Hit] = []
        used = 0
        for r in order:
            if used + int(self.n_tokens[r]) > self.max_tokens or len(hits) >= top_k:
                break
            used += int(self.n_tokens[r])
            node = self._nodes[r]
            hits.append(Hit(node.id, node.text, float(sims[r])))
        return hits
