"""CappedChunker and the KamradtSplit kind: another chunker's cuts, long chunks split again."""

from __future__ import annotations

import pytest

from chunkwise.chunk import Chunk
from chunkwise.chunkers import CappedChunker, SemanticChunker
from chunkwise.chunkers.specs import make_chunker, parse_spec
from chunkwise.tokens import count_tokens


class Fixed:
    """An inner chunker with given spans."""

    def __init__(self, spans):
        self.spans = spans

    def split(self, text):
        return [Chunk(text[s:e], s, e, {"inner": True}) for s, e in self.spans]


TEXT = "Birds fly. Boats sail far away today."


def test_chunks_within_the_cap_are_kept_and_longer_ones_split_by_hand():
    # "Birds fly." = Bird|s| fly|. (4 tokens); "Boats sail far away today." = Bo|ats| sail| far|
    # away| today|. (7): recursive at 4 tokens packs words: "Boats sail far" (4), "away today." (3)
    assert count_tokens("Birds fly.") == 4 and count_tokens("Boats sail far away today.") == 7
    chunks = CappedChunker(Fixed([(0, 10), (11, 37)]), max_tokens=4).split(TEXT)
    assert [(c.text, c.start, c.end) for c in chunks] == [
        ("Birds fly.", 0, 10), ("Boats sail far", 11, 25), ("away today.", 26, 37)]
    assert chunks[0].metadata == {"inner": True}  # a kept chunk is the inner one
    assert chunks[1].metadata["split_from"] == (11, 37) and chunks[2].metadata["split_from"] == (11, 37)
    assert all(TEXT[c.start:c.end] == c.text for c in chunks)
    # a cap that every chunk fits changes nothing
    assert CappedChunker(Fixed([(0, 10), (11, 37)]), max_tokens=7).split(TEXT) == Fixed(
        [(0, 10), (11, 37)]).split(TEXT)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_tokens must be a positive int"):
        CappedChunker(Fixed([]), max_tokens=0)
    with pytest.raises(ValueError, match="inner must be a chunker"):
        CappedChunker(object(), max_tokens=5)
    with pytest.raises(TypeError):
        CappedChunker(Fixed([]), max_tokens=5).split(None)


class Words:
    """A toy embedder: a text's vector counts a few words (cuts fall where the words change)."""

    name = "words"

    def embed(self, texts):
        import numpy as np

        vocab = ["cat", "dog", "tax", "law"]
        v = np.asarray([[t.lower().count(w) + 1e-3 for w in vocab] for t in texts], dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_kamradt_split_spec_keeps_kamradts_cuts_and_caps_the_rest():
    E = Words
    text = " ".join(["The cat sat with another cat near a cat."] * 12 + ["The tax law taxes the law."] * 12)
    spec = parse_spec("KamradtSplit:40")
    assert spec.label == "KamradtSplit 40" and spec.size == 40
    capped = make_chunker(spec, E()).split(text)
    whole = SemanticChunker(E()).split(text)
    # every Kamradt cut is a cut of the capped chunker; no capped chunk is over 40 tokens
    assert {c.end for c in whole} <= {c.end for c in capped}
    assert max(count_tokens(c.text) for c in capped) <= 40
    assert max(count_tokens(c.text) for c in whole) > 40
    assert all(text[c.start:c.end] == c.text for c in capped)
