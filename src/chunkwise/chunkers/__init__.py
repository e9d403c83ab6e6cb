"""Chunkers: every one returns ``list[Chunk]`` with exact character offsets."""

from chunkwise.chunkers.base import Chunk, check_chunks
from chunkwise.chunkers.fixed import FixedTokenChunker
from chunkwise.chunkers.semantic import SemanticChunker, find_breakpoints

__all__ = ["Chunk", "check_chunks", "FixedTokenChunker", "SemanticChunker", "find_breakpoints"]
