"""A user's own embedders, named by import path in tests/test_embedder_plugins.py
("plugin_embedders:TinyEmbedder"), as tests/plugin_chunkers.py holds a user's chunkers."""

from __future__ import annotations

import re

import numpy as np

WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


class TinyEmbedder:
    """Bag of the ten words, unit length (a model with one side and a window of 8 words)."""

    name = "tiny-words/v1"
    max_tokens = 8
    truncates = True

    def __init__(self):
        self.calls = []

    def token_counts(self, texts):
        return np.array([len(t.split()) for t in texts], dtype=np.int64)

    def embed(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), len(WORDS)), dtype=np.float32)
        for r, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower())[: self.max_tokens]:
                if w in WORDS:
                    out[r, WORDS.index(w)] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


def sided_embedder(kind="passage"):
    """A factory with a ``kind`` parameter: questions and passages get embedders of their own."""
    emb = TinyEmbedder()
    emb.name = f"tiny-words/v1|{kind}"
    return emb


#: An embedder object, used as it is.
SHARED = TinyEmbedder()


class Broken:
    """A class whose constructor fails (a missing model, say)."""

    def __init__(self):
        raise RuntimeError("weights not found at /nowhere")


def not_an_embedder():
    return {"name": "dict"}


NOT_CALLABLE = 42
