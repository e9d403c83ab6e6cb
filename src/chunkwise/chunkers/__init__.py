"""Chunkers: every one returns ``list[Chunk]`` with exact character offsets.

- :class:`FixedTokenChunker` -- fixed token windows (tiktoken)
- :class:`RecursiveTokenChunker` -- recursive separator splitting (LangChain / Chroma)
- :class:`SemanticChunker` -- LangChain-compatible semantic splitting (Kamradt)
- :class:`KamradtModifiedChunker` -- semantic splitting to a target average size (Chroma)
- :class:`ClusterSemanticChunker` -- dynamic programming over piece similarities (Chroma)
- :class:`LLMSemanticChunker` -- boundaries chosen by a language model (Chroma)
"""

from chunkwise.chunkers.base import Chunk, check_chunks
from chunkwise.chunkers.cluster import ClusterSemanticChunker
from chunkwise.chunkers.fixed import FixedTokenChunker
from chunkwise.chunkers.kamradt import KamradtModifiedChunker
from chunkwise.chunkers.llm import LLMSemanticChunker
from chunkwise.chunkers.recursive import RecursiveTokenChunker
from chunkwise.chunkers.semantic import SemanticChunker, find_breakpoints

__all__ = [
    "Chunk",
    "check_chunks",
    "ClusterSemanticChunker",
    "FixedTokenChunker",
    "KamradtModifiedChunker",
    "LLMSemanticChunker",
    "RecursiveTokenChunker",
    "SemanticChunker",
    "find_breakpoints",
]
