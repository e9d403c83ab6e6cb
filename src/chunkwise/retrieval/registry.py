"""The registry of retriever kinds: the one place a retriever's name is given a meaning.

A :class:`RetrieverKind` names a retriever (``"dense"``, ``"bm25"``, ``"hybrid"``, ...) and
holds how it is made, in the two forms chunkwise uses:

- ``rank``, for the evaluation engine: given the indexed texts of one chunking, the questions
  and (lazily) the chunk and question vectors, each question's ranked chunk positions with its
  own index and query time. :func:`chunkwise.evaluation.grid.run_grid` and
  :class:`~chunkwise.evaluation.grid.GridConfig` read it; the name then works in a grid file and
  ``chunkwise evaluate``;
- ``build``, for a pipeline that retrieves question by question (CRUD-RAG's harness,
  :func:`chunkwise.crud.rag.retrievers.build_retrievers`): a :class:`~chunkwise.retrieval.Retriever`
  object over given chunks, from a :class:`BuildInputs`, through :func:`build_retriever_set`.

A kind that fuses others (hybrid) names them in ``uses`` and receives their rankings, or their
built retrievers, so each index is made once. Adding a retriever is one function (or two) plus
one :func:`register_retriever` call.

The built-in kinds are registered at the bottom of this module, from the parts in
:mod:`chunkwise.retrieval` (exact cosine or HNSW search, bm25s' BM25, reciprocal rank fusion,
reranking); ``none`` and ``hybrid_rerank`` are CRUD-RAG's baselines and only build.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise._validation import Interval, check_param

__all__ = [
    "BuildInputs", "RankInputs", "Ranking", "RetrieverKind", "build_retriever_set", "register_retriever",
    "rerank_kind", "retriever_kind", "retriever_names",
]


@dataclass
class RankInputs:
    """What a ranking function gets for one chunking.

    Attributes
    ----------
    texts : list of str
        The indexed text of each chunk (for contextual chunking, its context and the chunk), in
        item order.
    questions : list of str
    depth : int
        How many positions to rank per question.
    config : GridConfig
        The grid (``language``, ``tokenizer``, ``index``, ``rrf_c`` ...).
    vectors : callable ``() -> ndarray (n_items, dim)``
        The chunk vectors, embedded on the first call (cached by content).
    query_vectors : ndarray (n_questions, dim) or None
        None when no retriever of the grid needs an embedder.
    query_embed_seconds : float
        Seconds to embed one question (part of a dense query's time).
    bm25_cache : Path
        Folder of cached BM25 indexes.
    """

    texts: list[str]
    questions: list[str]
    depth: int
    config: Any
    vectors: Callable[[], np.ndarray]
    query_vectors: np.ndarray | None
    query_embed_seconds: float
    bm25_cache: Path


@dataclass
class Ranking:
    """One retriever's result on one chunking: ``ranked[i]`` = item positions for question i,
    best first; ``index_seconds`` / ``query_seconds`` its own time (building the index; per
    question), not counting the retrievers it fuses."""

    ranked: list[list[int]]
    index_seconds: float
    query_seconds: float


@dataclass
class BuildInputs:
    """What a retriever builder gets: the chunks and the settings of one set of retrievers.

    Attributes
    ----------
    chunks : list
        ``(chunk_id, text)`` pairs or objects with ``chunk_id`` and ``text`` (e.g.
        :class:`~chunkwise.crud.rag.chunking.CorpusChunk`).
    built : dict of str -> Retriever
        The retrievers of this set built so far (a fusing kind takes those it ``uses``).
    language, tokenizer : str
        BM25's text analysis (:class:`~chunkwise.retrieval.BM25Retriever`).
    dense : (query_embedder, passage_embedder) or (query_embedder, passage_embedder, label)
        The dense retriever's embedders, and the model's label (default: the query embedder's name). A
        model name is turned into them by the caller (:func:`chunkwise.crud.rag.build_retrievers`,
        through :func:`chunkwise.crud.embedders.make_dense_embedders`): this layer imports no chapter.
    reranker : str or object with ``score`` and ``name``
        :func:`chunkwise.retrieval.make_reranker`'s name, or a reranker.
    llm : ChatModel or None
        For an LLM reranker.
    cache_dir, bm25_cache_dir : path or None
        Embedding cache; saved BM25 indexes.
    n_jobs : int
        Processes for BM25 tokenization.
    """

    chunks: list[Any]
    built: dict[str, Any]
    language: str = "zh"
    tokenizer: str = "jieba"
    dense: Any = "auto"
    reranker: Any = "auto"
    llm: Any = None
    cache_dir: Any = None
    bm25_cache_dir: Any = None
    n_jobs: int = 1


@dataclass(frozen=True)
class RetrieverKind:
    """A retriever of the evaluation grid.

    Attributes
    ----------
    name : str
        The name in a grid (``retrievers = ["dense", "bm25"]``).
    rank : callable ``(inputs, fused) -> Ranking`` or None
        ``inputs`` a :class:`RankInputs`; ``fused`` maps each name in ``uses`` to its
        :class:`Ranking` on the same chunking. None: the kind cannot rank a grid's chunks.
    summary : str
        One line for listings.
    build : callable ``BuildInputs -> Retriever``, optional
        Builds the retriever as an object with ``name`` and ``retrieve(question, top_k)``; the
        retrievers it ``uses`` are in ``inputs.built``.
    needs_embedder : bool, default False
        Whether it needs chunk and question vectors (then the grid needs an embedder).
    uses : tuple of str, default ()
        Retrievers whose rankings it fuses; they are ranked first, and the grid ranks at least
        ``GridConfig.hybrid_depth`` positions.
    """

    name: str
    rank: Callable[[RankInputs, Mapping[str, Ranking]], Ranking] | None
    summary: str
    needs_embedder: bool = False
    uses: tuple[str, ...] = ()
    build: Callable[[BuildInputs], Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"a retriever kind's name must be letters, digits and '_', got {self.name!r}.")
        if self.rank is not None and not callable(self.rank):
            raise ValueError(f"retriever kind {self.name!r}: rank must be callable (inputs, fused) -> Ranking.")
        if self.build is not None and not callable(self.build):
            raise ValueError(f"retriever kind {self.name!r}: build must be callable (BuildInputs) -> Retriever.")
        if self.rank is None and self.build is None:
            raise ValueError(f"retriever kind {self.name!r} needs a rank function, a build function or both.")


_KINDS: dict[str, RetrieverKind] = {}


def register_retriever(kind: RetrieverKind, *, replace: bool = False) -> RetrieverKind:
    """Register a retriever kind (once); returns it.

    Raises
    ------
    ValueError
        If ``kind`` is not a :class:`RetrieverKind`, uses an unregistered retriever, or its
        name is taken and ``replace`` is False.
    """
    if not isinstance(kind, RetrieverKind):
        raise ValueError(f"register_retriever takes a RetrieverKind, got {type(kind).__name__}.")
    if kind.name in _KINDS and not replace:
        raise ValueError(f"a retriever named {kind.name!r} is registered already; pass replace=True to replace it.")
    missing = [u for u in kind.uses if u not in _KINDS]
    if missing:
        raise ValueError(f"retriever {kind.name!r} uses {missing}, which are not registered; register them first.")
    _KINDS[kind.name] = kind
    return kind


def retriever_names(ranks: bool | None = None) -> tuple[str, ...]:
    """The registered retrievers' names, in registration order (``ranks=True``: only those that
    can rank a grid's chunks; ``False``: only those that cannot)."""
    return tuple(n for n, k in _KINDS.items() if ranks is None or (k.rank is not None) == ranks)


def retriever_kind(name: str) -> RetrieverKind:
    """The registered retriever called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the registered ones).
    """
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(retriever_names())}.") from None


def build_retriever_set(chunks: Any, names: Any, **settings: Any) -> dict[str, Any]:
    """Build the named retrievers over one set of chunks, each index once.

    Parameters
    ----------
    chunks : sequence
        See :class:`BuildInputs`.
    names : sequence of str
        Registered retriever names whose kinds have a ``build`` function.
    **settings
        The other fields of :class:`BuildInputs`.

    Returns
    -------
    dict of str -> Retriever
        In the order of ``names``; a retriever that another one fuses is built once and shared.

    Raises
    ------
    ValueError
        For an unknown name or a kind without a ``build`` function.
    """
    names = list(names)
    for name in names:
        if retriever_kind(name).build is None:
            raise ValueError(f"retriever {name!r} ranks a grid's chunks only; a per-question set is built from "
                             f"{', '.join(n for n in retriever_names() if _KINDS[n].build is not None)}.")
    inputs = BuildInputs(list(chunks), {}, **settings)

    def make(name: str) -> Any:
        if name not in inputs.built:
            kind = retriever_kind(name)
            for used in kind.uses:
                make(used)
            inputs.built[name] = kind.build(inputs)
        return inputs.built[name]

    return {name: make(name) for name in names}


# --------------------------------------------------------------------------------------
# built-in kinds
# --------------------------------------------------------------------------------------


def _dense(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
    from chunkwise.retrieval.index import hnsw_search, top_k_cosine, unit_rows

    t0 = time.perf_counter()
    vectors = inputs.vectors()
    index_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    if inputs.config.index == "hnsw":
        idx = hnsw_search(unit_rows(vectors), inputs.query_vectors, inputs.depth)
    else:
        idx, _ = top_k_cosine(inputs.query_vectors, vectors, inputs.depth)
    query = inputs.query_embed_seconds + (time.perf_counter() - t0) / len(inputs.questions)
    return Ranking([list(map(int, row)) for row in idx], index_seconds, query)


def _bm25(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
    from chunkwise.retrieval.lexical import BM25Retriever

    t0 = time.perf_counter()
    bm25 = BM25Retriever(
        [(str(i), t) for i, t in enumerate(inputs.texts)],
        language=inputs.config.language,
        tokenizer=inputs.config.tokenizer,
        cache_dir=inputs.bm25_cache,
    )
    index_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    ranked = [[int(h[0]) for h in bm25.retrieve(t, inputs.depth)] for t in inputs.questions]
    return Ranking(ranked, index_seconds, (time.perf_counter() - t0) / len(inputs.questions))


def _hybrid(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
    from chunkwise.retrieval.hybrid import rrf_fuse

    t0 = time.perf_counter()
    ranked = [
        [int(cid) for cid, _ in rrf_fuse([[str(j) for j in b], [str(j) for j in d]], (0.5, 0.5),
                                         inputs.config.rrf_c)][: inputs.depth]
        for b, d in zip(fused["bm25"].ranked, fused["dense"].ranked)
    ]
    return Ranking(ranked, 0.0, (time.perf_counter() - t0) / len(inputs.questions))


def rerank_kind(model: Any = None, *, candidates: int | None = None, name: str = "rerank",
                over: str = "hybrid", cache: Any = "default") -> RetrieverKind:
    """A ranking kind that reorders another retriever's best candidates by a cross-encoder.

    For each question the first ``candidates`` chunks of ``over``'s ranking are scored against the
    question and put in score order (ties keep ``over``'s order); the rest of ``over``'s ranking
    follows unchanged, so the ranking stays ``depth`` long. This is the retrieve-then-rerank
    pipeline of CRUD-RAG's ``hybrid_rerank`` baseline (BAAI/bge-reranker-base over the hybrid
    union) in the form the evaluation grid ranks with. The registered ``rerank`` kind is this
    function's default; a grid with another model passes its own kind to
    :func:`chunkwise.evaluation.grid.run_grid` (``rankers=[rerank_kind("org/model")]``).

    Parameters
    ----------
    model : str, path or reranker, optional
        A cross-encoder's hub id or local folder (default :data:`~chunkwise.retrieval.rerank.DEFAULT_CROSS_ENCODER`,
        loaded on first use), or an object with ``score(question, texts) -> list[float]`` and ``name``.
    candidates : int >= 1, optional
        How many of ``over``'s chunks are reranked per question. Default: the grid's
        ``hybrid_depth`` (50), capped at the ranking depth.
    name : str, default "rerank"
        The kind's name in a grid.
    over : str, default "hybrid"
        The registered retriever whose ranking is reranked.
    cache : "default", RerankScoreCache or None
        Scores by content (default ``$CHUNKWISE_CACHE_DIR/rerank.sqlite``), so a rerun scores
        nothing; None scores every time.

    Returns
    -------
    RetrieverKind
        ``uses=(over,)`` and ``needs_embedder`` as ``over``'s; its index time is 0 and its query
        time is the scoring time per question.

    Raises
    ------
    ValueError
        For ``candidates`` < 1 or not an int, an unregistered ``over``, or (when ranking) a reranker
        that returns a wrong number of scores or a non-finite one.
    RuntimeError
        When ranking, if the cross-encoder cannot be loaded (offline without a local copy).
    """
    from chunkwise.retrieval.rerank import DEFAULT_CROSS_ENCODER, CachedReranker, CrossEncoderReranker

    candidates = check_param("candidates", candidates, [Interval(int, 1, None), None],
                             hint=" (chunks reranked per question)")
    fused = retriever_kind(over)
    if model is None or isinstance(model, (str, Path)):
        scorer: Any = CrossEncoderReranker(str(model) if model is not None else DEFAULT_CROSS_ENCODER)
    elif callable(getattr(model, "score", None)) and getattr(model, "name", None):
        scorer = model
    else:
        raise ValueError(f"model must be a cross-encoder id or folder, or an object with score(question, texts) "
                         f"and a name; got {type(model).__name__}.")
    state: dict[str, Any] = {}

    def ranker() -> Any:
        if "scorer" not in state:
            state["scorer"] = scorer if cache is None else CachedReranker(scorer, None if cache == "default" else cache)
        return state["scorer"]

    def rank(inputs: RankInputs, fused: Mapping[str, Ranking]) -> Ranking:
        n = min(candidates or inputs.config.hybrid_depth, inputs.depth)
        t0 = time.perf_counter()
        ranked = []
        for question, row in zip(inputs.questions, fused[over].ranked):
            head = list(row[:n])
            scores = ranker().score(question, [inputs.texts[j] for j in head])
            if len(scores) != len(head):
                raise ValueError(f"retriever {name!r}: the reranker returned {len(scores)} scores for {len(head)} "
                                 "passages.")
            order = sorted(range(len(head)), key=lambda i: (-float(scores[i]), i))
            ranked.append(([head[i] for i in order] + list(row[n:]))[: inputs.depth])
        return Ranking(ranked, 0.0, (time.perf_counter() - t0) / max(1, len(inputs.questions)))

    label = getattr(scorer, "model_id", None) or scorer.name
    # it reads vectors exactly when the ranking it reorders does (as a fusing kind declares)
    return RetrieverKind(name, rank, f"{over}'s best candidates reordered by the cross-encoder {label}",
                         needs_embedder=fused.needs_embedder, uses=(over,))


def _build_dense(inputs: BuildInputs) -> Any:
    from chunkwise.retrieval.dense import DenseRetriever

    if not isinstance(inputs.dense, tuple):
        raise ValueError(
            f"dense must be a (query_embedder, passage_embedder) pair here, got {inputs.dense!r}; a model name "
            "is turned into the pair by chunkwise.crud.rag.build_retrievers (chunkwise.crud.embedders."
            "make_dense_embedders), or by chunkwise.embeddings.embedder_pair (passage first)."
        )
    q_emb, p_emb = inputs.dense[:2]
    # a third item, when given, is the model's label (make_dense_embedders' own)
    label = inputs.dense[2] if len(inputs.dense) > 2 else getattr(q_emb, "name", "custom")
    retriever = DenseRetriever(inputs.chunks, q_emb, p_emb, name="dense")
    retriever.model = label  # type: ignore[attr-defined]
    return retriever


def _build_bm25(inputs: BuildInputs) -> Any:
    from chunkwise.retrieval.lexical import BM25Retriever

    return BM25Retriever(inputs.chunks, language=inputs.language, tokenizer=inputs.tokenizer,
                         cache_dir=inputs.bm25_cache_dir, n_jobs=inputs.n_jobs)


def _build_hybrid(inputs: BuildInputs) -> Any:
    from chunkwise.retrieval.hybrid import HybridRetriever

    return HybridRetriever([inputs.built["bm25"], inputs.built["dense"]])


def _build_none(inputs: BuildInputs) -> Any:
    from chunkwise.retrieval.base import NoRetriever

    return NoRetriever()


def _build_hybrid_rerank(inputs: BuildInputs) -> Any:
    from chunkwise.retrieval.rerank import RerankRetriever, make_reranker

    rr = inputs.reranker if callable(getattr(inputs.reranker, "score", None)) else make_reranker(inputs.reranker, inputs.llm)
    return RerankRetriever(inputs.built["hybrid"], rr)


register_retriever(RetrieverKind("dense", _dense, "cosine similarity of chunk and question vectors", needs_embedder=True,
                                 build=_build_dense))
register_retriever(RetrieverKind("bm25", _bm25, "BM25 (bm25s, Lucene variant) over the chunks' words", build=_build_bm25))
register_retriever(
    RetrieverKind("hybrid", _hybrid, "reciprocal rank fusion of BM25 and dense (weights 0.5 / 0.5)", needs_embedder=True,
                  uses=("bm25", "dense"), build=_build_hybrid)
)
register_retriever(rerank_kind())
register_retriever(RetrieverKind("none", None, "no retrieval (CRUD-RAG's closed-book baseline)", build=_build_none))
register_retriever(
    RetrieverKind("hybrid_rerank", None, "the hybrid union reranked by a cross-encoder or an LLM's yes/no (CRUD-RAG)",
                  needs_embedder=True, uses=("hybrid",), build=_build_hybrid_rerank)
)
