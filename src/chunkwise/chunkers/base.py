"""Re-export of the :class:`~chunkwise.chunk.Chunk` type for chunker modules.

The type lives in :mod:`chunkwise.chunk` so that :mod:`chunkwise.text` can use it without
importing the chunkers.
"""

from chunkwise.chunk import Chunk, check_chunks

__all__ = ["Chunk", "check_chunks"]
