"""PG-RAG: pseudo-graph indexing and matrix-walk retrieval (Liang et al., arXiv 2405.16933).

The pipeline, one module per stage:

- :mod:`chunkwise.crud.pgrag.extract` -- main topic + factual check items (FCIs) per document,
  verified against the source (ROUGE-L and semantic similarity), regenerated on failure;
- :mod:`chunkwise.crud.pgrag.mindmap` -- the FCIs organised by the LLM into a mind map; fact paths;
- :mod:`chunkwise.crud.pgrag.graph` -- knowledge fusion: stitched-context node embeddings, topic and
  fact clusters, super nodes and links; the pseudo-graph saved to disk;
- :mod:`chunkwise.crud.pgrag.index` -- :class:`PGIndexer`, resumable indexing of a corpus and its
  statistics (time per document, compression ratio);
- :mod:`chunkwise.crud.pgrag.walk` -- template / control / path / dyeing matrices and the matrix walk,
  with a recursive DFS reference that selects the same paths;
- :mod:`chunkwise.crud.pgrag.retrieve` -- key points, seed topics, the walk, the mind-map context;
  the variants PG, PG w. KPs and PG-RAG.
"""

from chunkwise.crud.pgrag.extract import (
    ROUGE_THRESHOLD,
    SEMANTIC_THRESHOLD,
    Extraction,
    FCIAttempt,
    extract_fcis,
    extract_verified_fcis,
    verify_fcis,
)
from chunkwise.crud.pgrag.graph import (
    FACT_ALPHA,
    FACT_THRESHOLD,
    TOPIC_ALPHA,
    TOPIC_THRESHOLD,
    PseudoGraph,
    SuperNode,
    fit_fusion_threshold,
    similarity_clusters,
    super_node_stats,
)
from chunkwise.crud.pgrag.index import PGIndexer, compression_ratio
from chunkwise.crud.pgrag.mindmap import MindMapNode, fact_paths, generate_mindmap, parse_mindmap
from chunkwise.crud.pgrag.retrieve import VARIANTS, PGRetriever, key_points, render_mindmap
from chunkwise.crud.pgrag.walk import PathTable, WalkResult, dfs_walk, matrix_walk

__all__ = [
    "FACT_ALPHA",
    "FACT_THRESHOLD",
    "ROUGE_THRESHOLD",
    "SEMANTIC_THRESHOLD",
    "TOPIC_ALPHA",
    "TOPIC_THRESHOLD",
    "VARIANTS",
    "Extraction",
    "FCIAttempt",
    "MindMapNode",
    "PGIndexer",
    "PGRetriever",
    "PathTable",
    "PseudoGraph",
    "SuperNode",
    "WalkResult",
    "compression_ratio",
    "dfs_walk",
    "extract_fcis",
    "extract_verified_fcis",
    "fact_paths",
    "fit_fusion_threshold",
    "generate_mindmap",
    "key_points",
    "matrix_walk",
    "parse_mindmap",
    "render_mindmap",
    "similarity_clusters",
    "super_node_stats",
    "verify_fcis",
]
