"""Retrieval over chunks: the one home of chunkwise's retrievers.

Every retriever has a ``name`` and ``retrieve(question, top_k) -> list[Hit]``, a hit being the
tuple ``(chunk_id, text, score)``, best first; ties go to the earlier chunk.

- :mod:`~chunkwise.retrieval.base` -- :class:`Hit`, the :class:`Retriever` protocol,
  :class:`NoRetriever`, argument checks;
- :mod:`~chunkwise.retrieval.index` -- exact cosine search: :func:`top_k_cosine` and
  :class:`DenseIndex` (all chunks of several documents, with their spans);
- :mod:`~chunkwise.retrieval.dense` -- :class:`DenseRetriever` (any chunkwise embedder);
- :mod:`~chunkwise.retrieval.lexical` -- :class:`BM25Retriever` (``bm25s``, Lucene BM25) with
  English (bm25s' stopwords + Snowball stemmer) or Chinese (jieba / per-character) tokens,
  chosen by ``language``;
- :mod:`~chunkwise.retrieval.hybrid` -- :func:`rrf_fuse` and :class:`HybridRetriever`
  (reciprocal rank fusion);
- :mod:`~chunkwise.retrieval.rerank` -- :class:`RerankRetriever` with a cross-encoder or an LLM's
  yes/no judgement.

Retriever kinds (``"dense"``, ``"bm25"``, ``"hybrid"``, ``"none"``, ``"hybrid_rerank"`` and any a
user adds) are registered in :mod:`~chunkwise.retrieval.registry`, each with a ranking function
over these parts for the evaluation grid and/or a build function for per-question retrieval;
the CRUD-RAG baselines are built from these kinds by :mod:`chunkwise.crud.rag.retrievers`
(``none`` and ``hybrid_rerank`` only build). Embedders live in :mod:`chunkwise.embeddings`.
"""

from chunkwise.retrieval.base import DEFAULT_TOP_K, Hit, NoRetriever, Retriever, as_pairs, check_top_k
from chunkwise.retrieval.dense import DenseRetriever
from chunkwise.retrieval.hybrid import RRF_C, RRF_WEIGHTS, HybridRetriever, rrf_fuse
from chunkwise.retrieval.index import DenseIndex, hnsw_search, top_k_cosine, unit_rows
from chunkwise.retrieval.lexical import LANGUAGES, BM25Retriever, tokenize, tokenize_en, tokenize_zh
from chunkwise.retrieval.rerank import (
    DEFAULT_CROSS_ENCODER,
    CrossEncoderReranker,
    LLMYesNoReranker,
    RerankRetriever,
    make_reranker,
    parse_yes_no,
)

__all__ = [
    "DEFAULT_CROSS_ENCODER",
    "DEFAULT_TOP_K",
    "LANGUAGES",
    "RRF_C",
    "RRF_WEIGHTS",
    "BM25Retriever",
    "CrossEncoderReranker",
    "DenseIndex",
    "DenseRetriever",
    "Hit",
    "HybridRetriever",
    "LLMYesNoReranker",
    "NoRetriever",
    "RerankRetriever",
    "Retriever",
    "as_pairs",
    "check_top_k",
    "make_reranker",
    "parse_yes_no",
    "rrf_fuse",
    "tokenize",
    "tokenize_en",
    "tokenize_zh",
    "hnsw_search",
    "top_k_cosine",
    "unit_rows",
]
