"""chunkwise: chunking trade-offs for retrieval-augmented generation, reproduced.

The package reads as the pipeline:

- :mod:`chunkwise.text` -- sentences with exact character spans
- :mod:`chunkwise.chunkers` -- chunkers returning :class:`~chunkwise.chunkers.Chunk` objects
- :mod:`chunkwise.embeddings` -- cached, batched sentence embeddings (every embedder)
- :mod:`chunkwise.retrieval` -- every retriever: exact cosine index, dense, BM25 (English or
  Chinese tokens), hybrid reciprocal rank fusion, rerank
- :mod:`chunkwise.evaluation` -- boundary metrics (and later span / generation metrics)
"""

__version__ = "0.1.0"
