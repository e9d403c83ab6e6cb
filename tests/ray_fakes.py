"""A fake embedder for the Ray engine's tests, in its own module so Ray's workers can import it.

Vectors come from the sha256 of each text (deterministic, no model). Every text embedded is
appended to ``log`` (one sha256 per line), written only after the batch succeeded, so the log
lists exactly the embedding work done, across processes. ``fail_after``: raise instead of
embedding a batch that would take the log past that many lines (a crash in the middle of a run).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np


class HashEmbedder:
    def __init__(self, name: str, log: str | Path, dim: int = 24, fail_after: int | None = None) -> None:
        self.name = name
        self.log = str(log)
        self.dim = dim
        self.fail_after = fail_after

    def embed(self, texts):
        done = Path(self.log).read_text().count("\n") if Path(self.log).exists() else 0
        if self.fail_after is not None and done + len(texts) > self.fail_after:
            raise RuntimeError(f"simulated crash after {done} texts")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256((self.name + "\0" + t).encode()).digest()[:8], "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            # shared words pull vectors together, so dense retrieval is not pure noise
            for w in t.lower().split()[:64]:
                h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 0.5
        with open(self.log, "a") as f:
            f.writelines(hashlib.sha256(t.encode()).hexdigest() + "\n" for t in texts)
        return out


def logged(log: str | Path) -> list[str]:
    """The sha256 of every text embedded so far, in order."""
    p = Path(log)
    return p.read_text().split() if p.exists() else []


class ParagraphChunker:
    """Blank-line blocks (a chunker kind a user registers on the driver only)."""

    def split(self, text):
        import re

        from chunkwise.chunk import Chunk

        return [Chunk(m.group(), m.start(), m.end()) for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text)]


def paragraph_kind(name: str = "Paragraph"):
    from chunkwise.chunkers.registry import ChunkerKind

    return ChunkerKind(name, lambda spec, embedder, llm: ParagraphChunker(), "blank-line blocks", size="none")
