"""Chunkers: every one returns ``list[Chunk]`` with exact character offsets.

- :class:`FixedTokenChunker` -- fixed token windows (tiktoken)
- :class:`RecursiveTokenChunker` -- recursive separator splitting (LangChain / Chroma)
- :class:`SemanticChunker` -- LangChain-compatible semantic splitting (Kamradt)
- :class:`CappedChunker` -- another chunker's cuts, chunks over a size split again
- :class:`KamradtModifiedChunker` -- semantic splitting to a target average size (Chroma)
- :class:`ClusterSemanticChunker` -- dynamic programming over piece similarities (Chroma)
- :class:`LLMSemanticChunker` -- boundaries chosen by a language model (Chroma)
- :class:`SentenceChunker` -- whole sentences packed into a token budget
- :class:`StructureChunker` -- Markdown sections / blank-line blocks with the heading path
- :class:`HierarchicalChunker` and :func:`merge_to_parents` -- small-to-big retrieval
- :class:`ContextualChunker` -- LLM-written context per chunk (Anthropic's contextual retrieval)
- :class:`LateChunkingEmbedder` -- late chunking: token vectors of a long window pooled per chunk

Grids name chunkers by spec strings (``"Recursive:200"``, :mod:`chunkwise.chunkers.specs`);
what each kind name means -- its factory, size / overlap rules, what it needs, how its spans
are cached and indexed -- is registered once in :mod:`chunkwise.chunkers.registry` (the
built-in kinds: :mod:`chunkwise.chunkers.kinds`, imported last below).
"""

from chunkwise.chunkers.base import Chunk, check_chunks
from chunkwise.chunkers.capped import CappedChunker
from chunkwise.chunkers.cluster import ClusterSemanticChunker
from chunkwise.chunkers.contextual import ContextualChunker, index_text
from chunkwise.chunkers.fixed import FixedTokenChunker
from chunkwise.chunkers.hierarchical import HierarchicalChunker, merge_to_parents
from chunkwise.chunkers.kamradt import KamradtModifiedChunker
from chunkwise.chunkers.late import LateChunkingEmbedder
from chunkwise.chunkers.llm import LLMSemanticChunker
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.chunkers.semantic import SemanticChunker, find_breakpoints
from chunkwise.chunkers.sentence import SentenceChunker
from chunkwise.chunkers.structure import StructureChunker

# registers the built-in kinds (after the classes; it imports them, the registry and the specs)
from chunkwise.chunkers import kinds  # noqa: E402,F401  isort: skip

__all__ = [
    "CappedChunker",
    "Chunk",
    "check_chunks",
    "ClusterSemanticChunker",
    "ContextualChunker",
    "FixedTokenChunker",
    "HierarchicalChunker",
    "KamradtModifiedChunker",
    "LateChunkingEmbedder",
    "LLMSemanticChunker",
    "RecursiveTokenChunker",
    "SemanticChunker",
    "SentenceChunker",
    "StructureChunker",
    "find_breakpoints",
    "index_text",
    "merge_to_parents",
]
