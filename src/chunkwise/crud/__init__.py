"""The CRUD-RAG chapter: PG-RAG and its baselines on CRUD-RAG's Chinese news QA (chapter 3).

Everything that exists only for the CRUD-RAG benchmark (Lyu et al., 2024) lives here, on top of
the core package (chunkers, embeddings, retrieval, llm), which never imports it. Its libraries
(jieba, sacrebleu, rouge-score, bert-score, networkx, scikit-learn, Hugging Face ``datasets``)
come with the ``crud`` extra: ``pip install 'chunkwise[crud]'``.

- :mod:`chunkwise.crud.data` -- the benchmark's data: QA items, the news corpus, the
  RAGQuestEval ground-truth files, the pooled retrieval corpus (:class:`~chunkwise.crud.data.PooledCorpus`);
- :mod:`chunkwise.crud.rag` -- retrieve-then-answer: CRUD-RAG's chunking of each article
  (:func:`~chunkwise.crud.rag.chunk_articles`), the chunk baselines, the answer prompt and its
  parser (:mod:`~chunkwise.crud.rag.answer`), the resumable runner, and the tree / graph
  baselines (RAPTOR, Graph RAG, KGP);
- :mod:`chunkwise.crud.pgrag` -- PG-RAG: pseudo-graph indexing and matrix-walk retrieval
  (extract -> mindmap -> graph -> index -> walk -> retrieve);
- :mod:`chunkwise.crud.answer_metrics` -- scores of a generated answer against the reference:
  BLEU, ROUGE-L, BERTScore, embedding cosine, RAGQuestEval;
- :mod:`chunkwise.crud.experiment` -- the chapter's driver: items and pool, every method
  answered and scored, the tables, paired intervals and the comparison with the paper.

The package imports none of its modules on import; import the one you need.
"""
