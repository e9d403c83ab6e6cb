"""chunkwise: chunking trade-offs for retrieval-augmented generation, reproduced.

The package reads as the pipeline:

- :mod:`chunkwise.text`, :mod:`chunkwise.tokens` -- sentences and tokens with exact character
  spans; :mod:`chunkwise.chunk` -- the :class:`~chunkwise.chunk.Chunk` type
- :mod:`chunkwise.chunkers` -- chunkers returning :class:`~chunkwise.chunk.Chunk` objects, named
  in grids by spec strings
- :mod:`chunkwise.embeddings` -- cached, batched sentence embeddings (every embedder)
- :mod:`chunkwise.retrieval` -- every retriever: exact cosine index, dense, BM25 (English or
  Chinese tokens), hybrid reciprocal rank fusion, rerank
- :mod:`chunkwise.evaluation` -- boundary and span metrics, the evaluation grid, paired
  bootstrap, the regression gate, diagnostics
- :mod:`chunkwise.datasets` -- the Chroma benchmark and a reader's own documents and questions
- :mod:`chunkwise.llm` -- one chat client for any OpenAI-compatible endpoint, cached; the
  embedded local model
- :mod:`chunkwise.experiments` -- the chapters' drivers
- :mod:`chunkwise.crud` -- the CRUD-RAG chapter (PG-RAG and its baselines, answer metrics),
  with its own install extra: ``pip install 'chunkwise[crud]'``
- :mod:`chunkwise.figures`, :mod:`chunkwise.findings`, :mod:`chunkwise.book`,
  :mod:`chunkwise.cli` -- figures, the findings page, the book's notebooks, the command line
"""

__version__ = "0.1.0"
