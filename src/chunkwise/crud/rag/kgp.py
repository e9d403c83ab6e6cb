"""KGP: a passage graph and an LLM-guided traversal over it (a CRUD-RAG baseline).

Wang et al., 2024, "Knowledge Graph Prompting for Multi-Document Question Answering"
(AAAI 2024, arXiv 2308.11730). The method has two parts:

1. *Knowledge-graph construction* (paper section 3): the nodes are passages and the edges link
   passages that are likely to hold complementary evidence. Among the constructions the paper
   compares are a lexical one (TF-IDF keywords shared by two passages) and semantic kNN ones
   (each passage linked to its most similar passages in an embedding space).
   :class:`PassageGraph` builds both kinds of edge: (a) *lexical* -- the cosine of two
   passages' TF-IDF vectors over jieba tokens (:func:`chunkwise.retrieval.tokenize_zh`,
   which also splits English into lower-cased words) is at least ``lexical_threshold``; (b)
   *semantic* -- each passage is linked to its ``semantic_k`` nearest passages by embedding
   cosine. The graph is an undirected :class:`networkx.Graph`; an edge's ``rules`` attribute
   says which rule(s) made it.
2. *LLM graph traversal* (paper section 4): seed passages are retrieved for the question; then,
   step by step, a model reads the question and the evidence gathered so far and writes the
   *next evidence needed*; the neighbours of the visited passages are ranked by their
   similarity to that text and the best ones are visited. :class:`KGPRetriever` implements it
   behind the :class:`~chunkwise.retrieval.Retriever` interface.

What differs from the paper: the paper's next-evidence generator is a fine-tuned T5 (its
"reasoning" LLM is instruction-tuned on supporting-fact chains); here it is the project's
:class:`~chunkwise.llm.client.LLMClient` with our own prompt (:data:`NEXT_EVIDENCE_PROMPT`), no
fine-tuning. Seeds are ranked by embedding cosine with the question (the paper also uses
TF-IDF or embedding similarity for seeding), and the neighbours of *all* visited passages are
candidates at every step. The lexical rule is a TF-IDF cosine threshold rather than the paper's
shared-keyword rule.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkwise._validation import Interval, check_param
from chunkwise.crud.rag.chunking import id_text_pairs
from chunkwise.crud.rag.retrievers import CRUD_TOP_K
from chunkwise.retrieval import Hit, check_top_k, tokenize_zh, unit_rows

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "NEXT_EVIDENCE_PROMPT",
    "KGPRetriever",
    "PassageGraph",
]

logger = logging.getLogger(__name__)

#: The next-evidence prompt (ours; the paper fine-tunes T5 for this step). ``{question}`` and
#: ``{evidence}`` (numbered passages, one per line block) are filled in.
NEXT_EVIDENCE_PROMPT = (
    "You are collecting evidence to answer a question from several documents.\n\n"
    "Question: {question}\n\n"
    "Evidence found so far:\n{evidence}\n\n"
    "What information is still missing to answer the question? Reply with one short sentence "
    "describing the next piece of evidence needed (names, numbers, places), in the language "
    "of the question, and nothing else."
)

#: Rows of the embedding-similarity matrix computed at once while building the graph.
_BLOCK = 1024
#: Rows of the (sparse, possibly dense-ish: common words) TF-IDF similarity matrix at once.
_LEX_BLOCK = 256

_LEXICAL = "lexical"
_SEMANTIC = "semantic"


def _check_int(name: str, value: Any, minimum: int) -> int:
    return int(check_param(name, value, [Interval(int, minimum, None)]))


def _embed(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    vecs = unit_rows(embedder.embed(list(texts)))
    if vecs.shape[0] != len(texts):
        raise ValueError(f"the embedder returned {vecs.shape[0]} vectors for {len(texts)} texts")
    return vecs




def _tfidf_matrix(texts: Sequence[str]) -> Any:
    """L2-normalised TF-IDF rows (scipy CSR, shape (n, vocabulary)) over jieba tokens; None if no token at all."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(tokenizer=tokenize_zh, lowercase=False, token_pattern=None, norm="l2")
    try:
        return vectorizer.fit_transform(list(texts)).tocsr()
    except ValueError:  # empty vocabulary: no passage has a word
        return None


class PassageGraph:
    """Passages as nodes, lexical and semantic edges between them (KGP's knowledge graph).

    Build it with :meth:`build`; :meth:`save` / :meth:`load` store it in a folder.

    Attributes
    ----------
    ids : list of str
        Passage ids, corpus order (row ``r`` of :attr:`embeddings` is ``ids[r]``).
    texts : list of str
    embeddings : ndarray, float32, shape (n, d)
        L2-normalised passage embeddings.
    graph : networkx.Graph
        Nodes are the passage ids (attribute ``row``: the corpus index). Each edge has
        ``rules``: a tuple, ``("lexical",)``, ``("semantic",)`` or ``("lexical", "semantic")``;
        ``lexical``: the TF-IDF cosine of the pair (float in [0, 1]); ``semantic``: the
        embedding cosine of the pair (float in [-1, 1]). No self-loops.
    lexical_threshold : float or None
    semantic_k : int
    """

    def __init__(self, ids: Sequence[str], texts: Sequence[str], embeddings: np.ndarray, graph: Any, *,
                 lexical_threshold: float | None, semantic_k: int) -> None:
        self.ids = list(ids)
        self.texts = list(texts)
        self.embeddings = embeddings
        self.graph = graph
        self.lexical_threshold = lexical_threshold
        self.semantic_k = semantic_k
        self.row = {cid: r for r, cid in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)

    def neighbours(self, passage_id: str) -> list[str]:
        """Ids of the passages linked to ``passage_id``, in corpus order. KeyError for an unknown id."""
        if passage_id not in self.row:
            raise KeyError(f"unknown passage id {passage_id!r}")
        return sorted(self.graph.neighbors(passage_id), key=self.row.__getitem__)

    def edges_by_rule(self, rule: str) -> set[frozenset[str]]:
        """The edges that ``rule`` (``"lexical"`` or ``"semantic"``) made, as unordered id pairs."""
        if rule not in (_LEXICAL, _SEMANTIC):
            raise ValueError(f"rule must be 'lexical' or 'semantic', got {rule!r}")
        return {frozenset((u, v)) for u, v, rules in self.graph.edges(data="rules") if rule in rules}

    @classmethod
    def build(
        cls,
        chunks: Iterable[Any],
        embedder: Any,
        *,
        lexical_threshold: float | None = 0.3,
        semantic_k: int = 3,
        show_progress: bool = False,
    ) -> PassageGraph:
        """Build the graph of ``chunks``.

        Parameters
        ----------
        chunks : iterable
            :class:`~chunkwise.crud.rag.chunking.CorpusChunk` objects, objects with ``id`` and
            ``text``, ``(id, text)`` pairs, or strings (id = index).
        embedder : object with ``embed(texts) -> ndarray``
            Returns one vector per text, shape ``(n, d)``; rows are L2-normalised here.
        lexical_threshold : float in (0, 1], or None, default 0.3
            Two passages are linked when the cosine of their TF-IDF vectors (jieba tokens,
            smoothed idf, l2 norm; scikit-learn ``TfidfVectorizer``) is ``>=`` this value
            (with a 1e-9 tolerance for round-off). ``None``: no lexical edges.
        semantic_k : int >= 0, default 3
            Each passage is linked to its ``semantic_k`` most similar other passages by
            embedding cosine (ties: corpus order); the edge is undirected, so a passage may end
            up with more than ``semantic_k`` semantic neighbours. 0: no semantic edges.
        show_progress : bool, default False
            Print progress to stderr.

        Returns
        -------
        PassageGraph

        Raises
        ------
        ValueError
            For empty chunks, an empty text, duplicate ids, a threshold outside (0, 1], a
            negative ``semantic_k``, or embeddings of the wrong shape or with NaN/inf values.
        """
        import networkx as nx

        if lexical_threshold is not None:
            if isinstance(lexical_threshold, bool) or not isinstance(lexical_threshold, (int, float, np.floating)):
                raise ValueError(f"lexical_threshold must be a float in (0, 1] or None, got {lexical_threshold!r}")
            lexical_threshold = float(lexical_threshold)
            if not 0.0 < lexical_threshold <= 1.0:
                raise ValueError(f"lexical_threshold must be in (0, 1], got {lexical_threshold!r}")
        semantic_k = _check_int("semantic_k", semantic_k, 0)
        ids, texts = id_text_pairs(chunks, "a passage graph needs at least one passage")
        n = len(ids)
        emb = _embed(embedder, texts)

        graph = nx.Graph()
        for r, cid in enumerate(ids):
            graph.add_node(cid, row=r)

        def link(i: int, j: int, rule: str) -> None:
            u, v = ids[i], ids[j]
            if graph.has_edge(u, v):
                rules = set(graph.edges[u, v]["rules"]) | {rule}
                graph.edges[u, v]["rules"] = tuple(sorted(rules))
            else:
                graph.add_edge(u, v, rules=(rule,))

        tfidf = _tfidf_matrix(texts) if n > 1 else None
        if lexical_threshold is not None and tfidf is not None:
            for start in range(0, n, _LEX_BLOCK):
                block = (tfidf[start:start + _LEX_BLOCK] @ tfidf.T).tocoo()
                for i, j, s in zip(block.row, block.col, block.data):
                    i = int(i) + start
                    j = int(j)
                    # round-off on identical texts may give 1.0000000002: clip
                    if i < j and min(float(s), 1.0) >= lexical_threshold - 1e-9:
                        link(i, j, _LEXICAL)
                if show_progress:
                    print(f"KGP lexical edges: {min(start + _LEX_BLOCK, n)}/{n} passages", file=sys.stderr, flush=True)

        k = min(semantic_k, n - 1)
        if k > 0:
            for start in range(0, n, _BLOCK):
                sims = emb[start:start + _BLOCK] @ emb.T
                for off, row in enumerate(sims):
                    i = start + off
                    row = row.astype(np.float64)
                    row[i] = -np.inf
                    # the k largest, ties by corpus order, in O(n): everything >= the k-th value
                    kth = np.partition(row, n - k)[n - k]
                    cand = np.flatnonzero(row >= kth)
                    order = cand[np.lexsort((cand, -row[cand]))][:k]
                    for j in order:
                        link(i, int(j), _SEMANTIC)
                if show_progress:
                    print(f"KGP semantic edges: {min(start + _BLOCK, n)}/{n} passages", file=sys.stderr, flush=True)

        # record both similarities on every edge
        if graph.number_of_edges():
            row_of = {cid: r for r, cid in enumerate(ids)}
            for u, v, data in graph.edges(data=True):
                a, b = row_of[u], row_of[v]
                lex = float(tfidf[a].multiply(tfidf[b]).sum()) if tfidf is not None else 0.0
                data[_LEXICAL] = min(lex, 1.0)
                data[_SEMANTIC] = float(np.dot(emb[a], emb[b]))
        logger.info("KGP graph: %d passages, %d edges", n, graph.number_of_edges())
        return cls(ids, texts, emb, graph, lexical_threshold=lexical_threshold, semantic_k=semantic_k)

    def save(self, folder: str | Path) -> None:
        """Write ``graph.json`` (ids, texts, edges, parameters) and ``embeddings.npy`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        edges = [
            {"u": u, "v": v, "rules": list(d["rules"]), "lexical": d[_LEXICAL], "semantic": d[_SEMANTIC]}
            for u, v, d in self.graph.edges(data=True)
        ]
        doc = {
            "ids": self.ids,
            "texts": self.texts,
            "edges": edges,
            "lexical_threshold": self.lexical_threshold,
            "semantic_k": self.semantic_k,
        }
        np.save(folder / "embeddings.npy", self.embeddings)
        tmp = folder / "graph.json.tmp"
        tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        tmp.replace(folder / "graph.json")

    @classmethod
    def load(cls, folder: str | Path) -> PassageGraph:
        """Read a graph written by :meth:`save`. FileNotFoundError when a file is missing;
        ValueError when the embeddings do not match the passages or hold NaN/infinity."""
        import networkx as nx

        folder = Path(folder)
        doc = json.loads((folder / "graph.json").read_text(encoding="utf-8"))
        emb = np.load(folder / "embeddings.npy")
        if emb.ndim != 2 or emb.shape[0] != len(doc["ids"]):
            raise ValueError(f"embeddings.npy has shape {emb.shape} for {len(doc['ids'])} passages")
        if not np.isfinite(emb).all():
            raise ValueError(
                f"{folder / 'embeddings.npy'} holds NaN or infinite values (an embedder failed when it "
                "was built); delete the folder and build the graph again."
            )
        graph = nx.Graph()
        for r, cid in enumerate(doc["ids"]):
            graph.add_node(cid, row=r)
        for e in doc["edges"]:
            graph.add_edge(e["u"], e["v"], rules=tuple(e["rules"]), lexical=e["lexical"], semantic=e["semantic"])
        return cls(doc["ids"], doc["texts"], emb.astype(np.float32), graph,
                   lexical_threshold=doc["lexical_threshold"], semantic_k=doc["semantic_k"])


def _clean_reply(text: str) -> str:
    """The first non-empty line of a reply, without surrounding quotes and whitespace."""
    for line in str(text).splitlines():
        line = line.strip().strip("\"'“”「」").strip()
        if line:
            return line
    return ""


class KGPRetriever:
    """KGP's LLM-guided graph traversal (Wang et al., 2024, section 4).

    For a question:

    1. *seeds*: the ``n_seeds`` passages with the highest embedding cosine to the question
       (ties: corpus order) are visited first (score = that cosine);
    2. *steps*: up to ``max_steps`` times, while fewer than the limit of passages are visited
       and some visited passage has an unvisited neighbour, the LLM is shown the question and
       the visited passages (:data:`NEXT_EVIDENCE_PROMPT`) and writes the next evidence needed
       (the first non-empty line of its reply; the question itself if the reply is empty);
       the unvisited neighbours of all visited passages are ranked by embedding cosine with
       that text (ties: corpus order) and the best ``per_step`` are visited (score = that
       cosine).

    The paper generates the next evidence with a fine-tuned T5; here it is ``llm`` (an
    :class:`~chunkwise.llm.client.LLMClient` or anything with ``chat(messages, temperature,
    max_tokens) -> object with .text``), zero-shot with our prompt.

    The limit of visited passages is ``min(budget, top_k)``: the traversal is deterministic
    and visits in order, so stopping at ``top_k`` returns the same passages as running to
    ``budget`` and cutting, with fewer LLM calls.

    Parameters
    ----------
    graph : PassageGraph
    llm : ChatModel
    query_embedder : object with ``embed(texts) -> ndarray``
        Must share the vector space (and dimension) of the graph's embeddings.
    n_seeds : int >= 1, default 2
    budget : int >= 1, default 8
        Most passages visited (CRUD-RAG's top-k is 8).
    max_steps : int >= 0, default 3
        Most LLM-guided expansion steps (= LLM calls) per question.
    per_step : int >= 1, default 2
        Passages added per step.
    max_tokens : int >= 1, default 128
        Completion limit of the next-evidence call.
    name : str, default "kgp"

    Attributes
    ----------
    last_trace : dict or None
        After :meth:`retrieve`: ``{"question", "seeds": [ids], "seed_scores": [floats],
        "steps": [{"missing": str, "reply": str, "n_candidates": int, "added": [ids],
        "scores": [floats]}], "stop": str}``; ``stop`` is ``"limit"`` (enough passages),
        ``"max_steps"``, ``"no_neighbours"`` (no unvisited neighbour left) or ``"top_k=0"``.

    Raises
    ------
    ValueError
        For parameters out of range or an empty graph.
    """

    def __init__(self, graph: PassageGraph, llm: ChatModel, query_embedder: Any, *, n_seeds: int = 2,
                 budget: int = 8, max_steps: int = 3, per_step: int = 2, max_tokens: int = 128,
                 name: str = "kgp") -> None:
        if not isinstance(graph, PassageGraph):
            raise ValueError(f"graph must be a PassageGraph, got {type(graph).__name__}")
        if len(graph) == 0:
            raise ValueError("the graph has no passages")
        if not hasattr(llm, "chat"):
            raise ValueError("llm must have a chat(messages, ...) method")
        if not hasattr(query_embedder, "embed"):
            raise ValueError("query_embedder must have an embed(texts) method")
        self.graph = graph
        self.llm = llm
        self.query_embedder = query_embedder
        self.n_seeds = _check_int("n_seeds", n_seeds, 1)
        self.budget = _check_int("budget", budget, 1)
        self.max_steps = _check_int("max_steps", max_steps, 0)
        self.per_step = _check_int("per_step", per_step, 1)
        self.max_tokens = _check_int("max_tokens", max_tokens, 1)
        self.name = name
        self.last_trace: dict[str, Any] | None = None

    def _cosines(self, text: str) -> np.ndarray:
        q = _embed(self.query_embedder, [text])
        if q.shape[1] != self.graph.embeddings.shape[1]:
            raise ValueError(
                f"query embedding has dimension {q.shape[1]}, the graph's embeddings {self.graph.embeddings.shape[1]}"
            )
        return (self.graph.embeddings @ q[0]).astype(np.float64)

    def _next_evidence(self, question: str, visited: Sequence[str]) -> tuple[str, str]:
        evidence = "\n".join(f"[{k + 1}] {self.graph.texts[self.graph.row[cid]]}" for k, cid in enumerate(visited))
        prompt = NEXT_EVIDENCE_PROMPT.format(question=question, evidence=evidence)
        reply = self.llm.chat([{"role": "user", "content": prompt}], temperature=0.0, max_tokens=self.max_tokens)
        raw = str(getattr(reply, "text", reply) or "")
        return raw, _clean_reply(raw)

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """Hits ``(passage id, text, score)`` in visit order, at most ``min(top_k, budget)``.

        Parameters
        ----------
        question : str
            Non-empty.
        top_k : int >= 0, default 8

        Returns
        -------
        list of Hit
            Seeds first (score: cosine with the question), then each step's additions (score:
            cosine with that step's next-evidence text). The order is the visit order, not a
            ranking by score.

        Raises
        ------
        ValueError
            For an empty question, a bad ``top_k``, or query embeddings of the wrong dimension.
        LLMError
            Whatever the LLM client raises.
        """
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        top_k = check_top_k(top_k)
        trace: dict[str, Any] = {"question": question, "seeds": [], "seed_scores": [], "steps": [], "stop": ""}
        self.last_trace = trace
        if top_k == 0:
            trace["stop"] = "top_k=0"
            return []
        limit = min(top_k, self.budget)
        g = self.graph
        n = len(g)
        rows = np.arange(n)

        sims = self._cosines(question)
        seeds = np.lexsort((rows, -sims))[: min(self.n_seeds, limit)]
        visited: list[str] = [g.ids[r] for r in seeds]
        scores: list[float] = [float(sims[r]) for r in seeds]
        trace["seeds"] = list(visited)
        trace["seed_scores"] = list(scores)
        seen = set(visited)

        stop = "max_steps"
        for _ in range(self.max_steps):
            if len(visited) >= limit:
                stop = "limit"
                break
            candidates = sorted({nb for cid in visited for nb in g.graph.neighbors(cid)} - seen, key=g.row.__getitem__)
            if not candidates:
                stop = "no_neighbours"
                break
            raw, missing = self._next_evidence(question, visited)
            csims = self._cosines(missing or question)
            cand_rows = np.array([g.row[c] for c in candidates])
            order = cand_rows[np.lexsort((cand_rows, -csims[cand_rows]))]
            take = order[: min(self.per_step, limit - len(visited))]
            added = [g.ids[r] for r in take]
            added_scores = [float(csims[r]) for r in take]
            visited.extend(added)
            scores.extend(added_scores)
            seen.update(added)
            trace["steps"].append({"missing": missing, "reply": raw, "n_candidates": len(candidates),
                                   "added": added, "scores": added_scores})
        else:
            if len(visited) >= limit:
                stop = "limit"
        trace["stop"] = stop
        return [Hit(cid, g.texts[g.row[cid]], s) for cid, s in zip(visited, scores)]
