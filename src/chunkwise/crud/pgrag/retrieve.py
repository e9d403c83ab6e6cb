"""PG-RAG retrieval: key points -> seed topics -> matrix walk -> mind-map context.

PG-RAG (arXiv 2405.16933, section 4) answers a question by walking the pseudo-graph the way a
reader flips through notes:

1. *Key points* (KPs): the LLM lists the points the question asks about (:func:`key_points`).
2. *Seed topics*: topic nodes most similar to the query / KPs; in the full method the seeds are
   widened through the topic super nodes (similar topics of other documents).
3. *Walk*: the fact paths under the seeds become the template matrices of
   :mod:`chunkwise.crud.pgrag.walk`; the walk keeps the paths whose nodes support the KPs.
4. *Context*: in the full method, fact paths linked to the selected facts through fact super
   nodes (the same fact reported by another document) join the selection; the selected paths are
   rendered per topic as an indented mind map, which is what the generator reads.

Three variants, as in the paper's Table 1 (our reading of the ablation, stated here because the
paper gives them in one line each):

``"pg"``
    The walk is driven by the query alone (its embedding is the only KP); no widening.
``"pg_kps"``
    The walk is driven by the LLM's KPs (plus the query); no widening.
``"pg_rag"``
    KPs, seed widening through topic super nodes, and linked facts through fact super nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkwise.crud.pgrag.graph import PseudoGraph
from chunkwise.crud.pgrag.walk import AMBIGUOUS_THRESHOLD, SUPPORT_THRESHOLD, PathTable, matrix_walk
from chunkwise.retrieval import Hit

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = ["KP_SCHEMA", "VARIANTS", "PGRetriever", "key_points", "render_mindmap"]

VARIANTS = ("pg", "pg_kps", "pg_rag")

KP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"key_points": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}},
    "required": ["key_points"],
}

_KP_PROMPT = (
    "List the key points that an answer to the question below must cover: the entities, "
    "events, numbers or aspects it asks about, each as a short phrase in the question's "
    'language. Reply with JSON: {"key_points": ["...", "..."]} (1 to 6 items).\n\nQuestion: '
)


def key_points(question: str, llm: ChatModel, *, max_points: int = 6) -> list[str]:
    """The LLM's key points (KPs) for a question: short phrases, at most ``max_points``.

    Raises
    ------
    ValueError
        If the question is empty.
    chunkwise.llm.LLMJSONError
        If no valid JSON comes back after the client's repairs.
    """
    if not isinstance(question, str) or not question.strip():
        raise ValueError("key_points needs a non-empty question")
    value, _ = llm.chat_json(_KP_PROMPT + question, schema=KP_SCHEMA, temperature=0.0, max_tokens=256)
    out: list[str] = []
    for kp in value["key_points"]:
        kp = " ".join(str(kp).split())
        if kp and kp not in out:
            out.append(kp)
    return out[:max_points]


def render_mindmap(graph: PseudoGraph, path_indices: Sequence[int]) -> str:
    """Render fact paths as an indented mind map (shared prefixes written once).

    >>> # topic
    >>> #   - route
    >>> #     - fact
    """
    lines: list[str] = []
    prev: list[int] = []
    for pi in path_indices:
        path = graph.paths[pi]
        common = 0
        while common < min(len(prev), len(path)) and prev[common] == path[common]:
            common += 1
        for depth in range(common, len(path)):
            label = graph.nodes[path[depth]].label
            lines.append(label if depth == 0 else "  " * (depth - 1) + "- " + label)
        prev = path
    return "\n".join(lines)


@dataclass
class _Trace:
    key_points: list[str]
    seed_topics: list[int]
    widened_topics: list[int]
    selected_paths: list[int]
    linked_paths: list[int]


class PGRetriever:
    """PG-RAG retrieval over a :class:`~chunkwise.crud.pgrag.graph.PseudoGraph` (one of :data:`VARIANTS`).

    Parameters
    ----------
    graph : PseudoGraph
    query_embedder : object with ``embed(texts) -> ndarray (n, d)``
        Query-side embedder matching the graph's passage embedder (e5: ``"query: "`` side).
    llm : ChatModel, optional
        Needed by ``"pg_kps"`` and ``"pg_rag"`` (key points).
    variant : {"pg", "pg_kps", "pg_rag"}, default "pg_rag"
    n_seed_topics : int, default 3
        Seed topics before widening.
    top_paths : int, default 24
        Fact paths kept by the walk.
    support, ambiguous : float
        Walk thresholds (:mod:`chunkwise.crud.pgrag.walk`; the authors' code's values by default).
    name : str, optional
        Label in result tables (default: the variant).

    Raises
    ------
    ValueError
        For an unknown variant, non-positive counts, or a KP variant without an LLM.
    """

    def __init__(
        self,
        graph: PseudoGraph,
        query_embedder: Any,
        llm: ChatModel | None = None,
        *,
        variant: str = "pg_rag",
        n_seed_topics: int = 3,
        top_paths: int = 24,
        support: float = SUPPORT_THRESHOLD,
        ambiguous: float = AMBIGUOUS_THRESHOLD,
        name: str | None = None,
    ) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if variant != "pg" and llm is None:
            raise ValueError(f"variant {variant!r} needs an llm (key points); use variant='pg' without one")
        for nm, v in (("n_seed_topics", n_seed_topics), ("top_paths", top_paths)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{nm} must be a positive int, got {v!r}")
        self.graph = graph
        self.query_embedder = query_embedder
        self.llm = llm
        self.variant = variant
        self.n_seed_topics = n_seed_topics
        self.top_paths = top_paths
        self.support = float(support)
        self.ambiguous = float(ambiguous)
        self.name = name or variant
        self.model = f"pseudo-graph, {len(graph.paths)} fact paths"
        self.last_trace: _Trace | None = None

    def _kp_embeddings(self, question: str) -> tuple[list[str], np.ndarray]:
        kps = [question] if self.variant == "pg" else [question] + key_points(question, self.llm)
        emb = np.asarray(self.query_embedder.embed(kps), dtype=np.float32)
        emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        return kps, emb

    def select(self, question: str) -> tuple[list[int], np.ndarray]:
        """Selected fact-path indices (best first) and their walk scores; see :attr:`last_trace`."""
        g = self.graph
        kps, kp_emb = self._kp_embeddings(question)
        topics = np.array(g.topic_ids, dtype=np.int64)
        tsim = (kp_emb @ g.node_emb[topics].T).max(axis=0)
        order = np.lexsort((topics, -tsim))[: self.n_seed_topics]
        seeds = [int(topics[i]) for i in order]
        widened: list[int] = []
        if self.variant == "pg_rag":
            for t in seeds:
                widened += [u for u in g.linked(t) if u not in seeds and u not in widened]
        cand = [pi for t in seeds + widened for pi in g.paths_of_topic(t)]
        if not cand:
            self.last_trace = _Trace(kps, seeds, widened, [], [])
            return [], np.zeros(0)
        table = PathTable.from_paths([g.paths[pi] for pi in cand], g.node_emb)
        res = matrix_walk(kp_emb, table, support=self.support, ambiguous=self.ambiguous, top_n=self.top_paths)
        picked = [cand[int(i)] for i in res.paths]
        scores = [float(s) for s in res.scores]
        linked: list[int] = []
        if self.variant == "pg_rag":
            leaf_to_path = {g.paths[i][-1]: i for i in range(len(g.paths))}
            for pi, s in list(zip(picked, scores)):
                for leaf in g.linked(g.paths[pi][-1]):
                    lp = leaf_to_path.get(leaf)
                    if lp is not None and lp not in picked and lp not in linked:
                        linked.append(lp)
                        scores.append(s)
            picked = picked + linked
        self.last_trace = _Trace(kps, seeds, widened, picked[: len(picked) - len(linked)], linked)
        return picked, np.asarray(scores)

    def retrieve(self, question: str, top_k: int = 8) -> list[Hit]:
        """Contexts for the generator: one rendered mind map per topic, best topic first.

        Returns
        -------
        list of :class:`~chunkwise.retrieval.Hit` ``(chunk_id, text, score)``
            ``chunk_id`` is ``"pg:<doc_id>"``; at most ``top_k`` topics; ``score`` is the best walk
            score among the topic's selected paths.
        """
        picked, scores = self.select(question)
        by_topic: dict[int, list[tuple[int, float]]] = {}
        for pi, s in zip(picked, scores):
            by_topic.setdefault(self.graph.paths[pi][0], []).append((pi, float(s)))
        ranked = sorted(by_topic.items(), key=lambda kv: (-max(s for _, s in kv[1]), kv[0]))[:top_k]
        out = []
        for topic, ps in ranked:
            ordered = sorted(p for p, _ in ps)  # document order inside a topic
            out.append(Hit(f"pg:{self.graph.nodes[topic].doc_id}", render_mindmap(self.graph, ordered),
                           max(s for _, s in ps)))
        return out
