"""Evaluation of chunkings: boundaries, retrieved spans, the grid, and the noise around them.

- :mod:`chunkwise.evaluation.boundaries` -- boundary metrics of sentence-level segmentations
  (Pk, WindowDiff, boundary precision / recall; units are sentences, see the module for the
  boundary convention); the names below are re-exported from it;
- :mod:`chunkwise.evaluation.spans` -- character-span retrieval metrics: recall, precision, IoU
  and precision_Omega;
- :mod:`chunkwise.evaluation.anyof` -- any-of answers: a question scored against the
  best-retrieved of its readings;
- :mod:`chunkwise.evaluation.grid` -- the evaluation engine: chunker x retriever x top_k over
  documents and questions with reference spans (:func:`~chunkwise.evaluation.grid.run_grid`);
- :mod:`chunkwise.evaluation.stats` -- paired bootstrap over questions: which differences
  between cells are real;
- :mod:`chunkwise.evaluation.check` -- a regression gate: rerun the grid and compare one cell
  with a baseline report, question by question;
- :mod:`chunkwise.evaluation.diagnostics` -- the shape of a chunking's chunks and what its cuts
  break.

Scores of generated answers (BLEU, ROUGE-L, BERTScore, RAGQuestEval) belong to the CRUD-RAG
chapter: :mod:`chunkwise.crud.answer_metrics`.
"""

from chunkwise.evaluation.boundaries import (
    BoundaryScores,
    boundaries_from_sizes,
    boundary_scores,
    pk,
    sizes_from_boundaries,
    windowdiff,
)

__all__ = [
    "BoundaryScores",
    "boundaries_from_sizes",
    "boundary_scores",
    "pk",
    "sizes_from_boundaries",
    "windowdiff",
]
