"""Test doubles shared by the index-builder tests (RAPTOR, Graph RAG, KGP, the CRUD driver)."""

from __future__ import annotations

import numpy as np


class CharEmbedder:
    """Bag of characters over a fixed alphabet (the corpus's characters), L2-normalised."""

    def __init__(self, texts):
        chars = sorted({ch for t in texts for ch in t if not ch.isspace()})
        self.index = {ch: i for i, ch in enumerate(chars)}
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), len(self.index)), dtype=np.float32)
        for r, t in enumerate(texts):
            for ch in t:
                j = self.index.get(ch)
                if j is not None:
                    out[r, j] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms
