"""Evaluation of chunkings: boundary metrics (Pk, WindowDiff, boundary precision/recall).

Units are sentences; see :mod:`chunkwise.evaluation.boundaries` for the boundary convention.
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
