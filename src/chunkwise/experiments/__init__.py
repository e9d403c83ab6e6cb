"""Experiment drivers: the glue between chunkwise's pieces and the book's chapters.

- :mod:`chunkwise.experiments.handbook` -- chapter 1: which semantic-chunking settings find
  real topic shifts;
- :mod:`chunkwise.experiments.chroma` -- chapter 2: chunkers scored by span recall / precision /
  IoU on the Chroma protocol;
- :mod:`chunkwise.experiments.questions` -- chapter 4: question generation, an evaluation set
  written by an LLM, and how far its rankings agree with another set's;
- :mod:`chunkwise.experiments.strategies` -- chapter 5: every strategy of the chunking guide's
  table on the Chroma protocol;
- :mod:`chunkwise.experiments.stitched` -- chapter 6: stitched versus real documents.

Chapter 3's driver is :mod:`chunkwise.crud.experiment`, with the rest of the CRUD-RAG code.
"""
