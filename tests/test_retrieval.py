"""Retrieval: exact cosine search, and BM25 over English chunks (hand-computed scores, parity with bm25s)."""

import math

import numpy as np
import pytest

from chunkwise.chunk import Chunk
from chunkwise.retrieval import DenseIndex, top_k_cosine


def test_top_k_cosine_hand_computed():
    keys = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [-1.0, 0.0]])
    q = np.array([[2.0, 0.1]])
    idx, scores = top_k_cosine(q, keys, top_k=3)
    # cos with (1,0)=0.9988, (1,1)=0.7418, (0,2)=0.0499, (-1,0)=-0.9988
    assert idx.tolist() == [[0, 2, 1]]
    np.testing.assert_allclose(scores[0], [2 / np.hypot(2, 0.1), 2.1 / (np.hypot(2, 0.1) * np.sqrt(2)), 0.1 / np.hypot(2, 0.1)], rtol=1e-6)
    # Ties break by the lower index; top_k above n is capped.
    idx, _ = top_k_cosine(np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [2.0, 0.0]]), top_k=10)
    assert idx.tolist() == [[0, 1]]


def test_top_k_validation():
    with pytest.raises(ValueError, match="top_k"):
        top_k_cosine(np.ones((1, 2)), np.ones((3, 2)), top_k=0)
    with pytest.raises(ValueError, match="dimension"):
        top_k_cosine(np.ones((1, 2)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="NaN"):
        top_k_cosine(np.array([[np.nan, 1.0]]), np.ones((3, 2)))


class Axis:
    name = "axis"

    def embed(self, texts):
        return np.array([[t.count("a"), t.count("b")] for t in texts], dtype=float)


def test_dense_index_from_chunks():
    docs = {"x": [Chunk("aaa", 0, 3), Chunk("bb", 3, 5)], "y": [Chunk("ab", 10, 12)]}
    index = DenseIndex.from_chunks(docs, Axis())
    assert len(index) == 3 and index.doc_ids == ["x", "x", "y"]
    assert index.spans.tolist() == [[0, 3], [3, 5], [10, 12]]
    idx, _ = index.search(Axis().embed(["b"]), top_k=2)
    assert idx.tolist() == [[1, 2]]


# ---------------------------------------------------------------------------------------------
# BM25 over English chunks
# ---------------------------------------------------------------------------------------------


def test_english_tokens_are_stemmed_without_stopwords():
    from chunkwise.retrieval import tokenize, tokenize_en

    assert tokenize_en("The cats are chunking documents") == ["cat", "chunk", "document"]
    assert tokenize_en("The cats are chunking documents", "words") == ["cats", "chunking", "documents"]
    # single characters are not tokens (bm25s' / scikit-learn's pattern \b\w\w+\b)
    assert tokenize_en("a B c 42 x") == ["42"]
    assert tokenize("Chunks, chunked!", "en") == ["chunk", "chunk"]
    with pytest.raises(ValueError, match="'stem' or 'words'"):
        tokenize_en("x", "jieba")
    with pytest.raises(ValueError, match="language"):
        tokenize("x", "fr")


def test_english_bm25_scores_by_hand():
    from chunkwise.retrieval import BM25Retriever

    docs = [("d0", "The cats are chunking documents"), ("d1", "A dog chased the cat"), ("d2", "Chunks of text")]
    bm25 = BM25Retriever(docs, language="en")
    assert bm25.tokenizer == "stem"
    # tokens: d0 = cat chunk document, d1 = dog chase cat, d2 = chunk text; N = 3, avgdl = 8/3.
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # df(chunk) = 2
    norm = {dl: 1.2 * (1 - 0.75 + 0.75 * dl / (8 / 3)) for dl in (2, 3)}
    hits = bm25.retrieve("Chunking", 5)
    assert [h.chunk_id for h in hits] == ["d2", "d0"]  # the shorter chunk first; d1 has no match
    assert hits[0].score == pytest.approx(idf / (1 + norm[2]), rel=1e-5)
    assert hits[1].score == pytest.approx(idf / (1 + norm[3]), rel=1e-5)
    # two query terms add up; "the" is a stopword and adds nothing
    both = {h.chunk_id: h.score for h in bm25.retrieve("the cat chunks", 5)}
    assert both["d0"] == pytest.approx(2 * idf / (1 + norm[3]), rel=1e-5)  # df(cat) = 2 as well
    assert bm25.retrieve("the of", 5) == [] and bm25.retrieve("zebra", 5) == []


def test_english_bm25_matches_bm25s_used_directly():
    bm25s = pytest.importorskip("bm25s")
    from nltk.stem.snowball import EnglishStemmer

    from chunkwise.retrieval import BM25Retriever

    corpus = [
        "Fixed-size chunking splits a document every few hundred tokens, regardless of sentences.",
        "Recursive splitting tries paragraphs first, then sentences, then words, until chunks fit.",
        "Semantic chunking starts a new chunk where the embeddings of adjacent sentences drift apart.",
        "Retrieval quality depends on the chunk size: small chunks are precise, large chunks keep context.",
        "BM25 ranks documents by term frequency, inverse document frequency and document length.",
        "Dense retrievers embed the question and every chunk, then rank chunks by cosine similarity.",
        "Hybrid retrieval fuses the lexical and the dense rankings with reciprocal rank fusion.",
        "The tokens retrieved per question are the cost a generator pays for every answer.",
    ]
    queries = ["How does semantic chunking decide boundaries?", "ranking by term frequency", "cost of retrieved tokens",
               "Which chunk sizes are precise?"]
    stem = EnglishStemmer().stem
    reference = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    reference.index(bm25s.tokenize(corpus, stopwords="en", stemmer=lambda ws: [stem(w) for w in ws], show_progress=False),
                    show_progress=False)
    ours = BM25Retriever(corpus, language="en")
    for q in queries:
        q_tokens = bm25s.tokenize(q, stopwords="en", stemmer=lambda ws: [stem(w) for w in ws], return_ids=False,
                                  show_progress=False)[0]
        expected = reference.get_scores(q_tokens)
        np.testing.assert_allclose(ours.scores(q), expected, rtol=1e-5, atol=1e-7)
        assert expected.max() > 0
        hits = ours.retrieve(q, 3)
        assert [int(h.chunk_id) for h in hits] == list(np.argsort(-expected, kind="stable")[:3])


def test_bm25_language_and_tokenizer_are_checked():
    from chunkwise.retrieval import BM25Retriever

    with pytest.raises(ValueError, match="language must be one of"):
        BM25Retriever(["x"], language="fr")
    with pytest.raises(ValueError, match="tokenizer for language 'en'"):
        BM25Retriever(["x"], language="en", tokenizer="jieba")
    with pytest.raises(TypeError, match="language"):
        BM25Retriever(["x"])  # the language must be said


def test_english_bm25_index_cache_round_trip(tmp_path):
    from chunkwise.retrieval import BM25Retriever

    docs = [("a", "Chunking strategies for retrieval"), ("b", "A recipe for bread")]
    first = BM25Retriever(docs, language="en", cache_dir=tmp_path)
    again = BM25Retriever(docs, language="en", cache_dir=tmp_path)
    assert again.index_seconds == 0.0 and again.retrieve("chunks", 2) == first.retrieve("chunks", 2)
    # another tokenizer or language is another index
    BM25Retriever(docs, language="en", tokenizer="words", cache_dir=tmp_path)
    BM25Retriever(docs, language="zh", cache_dir=tmp_path)
    assert len(list(tmp_path.glob("bm25-*"))) == 3


# ---------------------------------------------------------------------------------------------
# Hybrid and rerank over English chunks
# ---------------------------------------------------------------------------------------------


class _Letters:
    """A toy embedder: counts of the letters a, b, c."""

    name = "letters"

    def embed(self, texts):
        return np.array([[t.count("a"), t.count("b"), t.count("c")] for t in texts], dtype=float)


_DOCS = [("d0", "a cab"), ("d1", "bbb bb"), ("d2", "cab cab"), ("d3", "ccc")]


def test_english_hybrid_fuses_bm25_and_dense_by_hand():
    from chunkwise.retrieval import BM25Retriever, DenseRetriever, HybridRetriever

    bm25 = BM25Retriever(_DOCS, language="en", tokenizer="words")
    dense = DenseRetriever(_DOCS, _Letters())
    # BM25 for "cab": d2 (tf 2) then d0 (tf 1); "a" is a single letter, not a token.
    assert [h.chunk_id for h in bm25.retrieve("cab", 4)] == ["d2", "d0"]
    # cosine to (1, 1, 1): d0 = (2,1,1) -> 4/sqrt(18); d2 = (2,2,2) -> 1; d1 = (0,5,0) and d3 = (0,0,3) -> 1/sqrt(3)
    assert [h.chunk_id for h in dense.retrieve("abc", 4)] == ["d2", "d0", "d1", "d3"]
    hybrid = HybridRetriever([bm25, dense])
    hits = hybrid.retrieve("abc cab", 3)
    # bm25 ("abc", "cab"): d2, d0; dense of "abc cab" = (2,2,2): d2, d0, d1 -> RRF d2 = 1/61, d0 = 1/62, d1 = 0.5/63
    assert [h.chunk_id for h in hits] == ["d2", "d0", "d1"]
    assert [h.score for h in hits] == pytest.approx([1 / 61, 1 / 62, 0.5 / 63])


def test_cross_encoder_reranker_with_a_stand_in_model(monkeypatch):
    import sys
    import types

    from chunkwise.retrieval import BM25Retriever, CrossEncoderReranker, DenseRetriever, HybridRetriever, RerankRetriever

    made = []

    class FakeCrossEncoder:
        def __init__(self, model, device=None, max_length=None):
            made.append((model, device, max_length))

        def predict(self, pairs, batch_size=32, show_progress_bar=False):
            # relevance = count of "a" minus count of "c"; a column vector, as some models return
            return np.array([[p.count("a") - p.count("c")] for _, p in pairs], dtype=np.float32)

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=FakeCrossEncoder))
    ce = CrossEncoderReranker("stand-in/model", max_length=128)
    assert ce.score("q", []) == [] and made == []  # nothing loaded for no texts
    assert ce.score("q", ["c", "ccc", "xa"]) == [-1.0, -3.0, 1.0]
    assert made == [("stand-in/model", "cpu", 128)]
    hybrid = HybridRetriever([BM25Retriever(_DOCS, language="en", tokenizer="words"), DenseRetriever(_DOCS, _Letters())])
    hits = RerankRetriever(hybrid, ce).retrieve("abc cab", 3)
    # candidates in hybrid order d2, d0, d1 (see the hybrid test), scored 0, 1, 0: d0 first, the tie
    # d2 / d1 kept in hybrid order
    assert [(h.chunk_id, h.score) for h in hits] == [("d0", 1.0), ("d2", 0.0), ("d1", 0.0)]
    assert len(made) == 1  # loaded once

    class Short:
        name = "short"

        def score(self, question, texts):
            return [1.0]

    with pytest.raises(ValueError, match="returned 1 scores for 3 passages"):
        RerankRetriever(hybrid, Short()).retrieve("abc cab", 3)


def test_top_k_cosine_scores_a_key_alike_whatever_else_is_in_the_call():
    """A key's score does not depend on the other keys of the call (BLAS picks kernels by shape)."""
    from chunkwise.retrieval.index import top_k_cosine

    rng = np.random.default_rng(7)
    keys = rng.standard_normal((500, 384)).astype(np.float32)
    keys[321] = keys[4]  # the same chunk twice, far apart
    queries = rng.standard_normal((9, 384)).astype(np.float32)
    idx_all, s_all = top_k_cosine(queries, keys, 500)
    full = np.empty((9, 500), dtype=np.float32)
    np.put_along_axis(full, idx_all, s_all, axis=1)
    for lo, hi in ((0, 3), (3, 17), (17, 500), (320, 322)):
        idx, s = top_k_cosine(queries, keys[lo:hi], hi - lo)
        part = np.empty((9, hi - lo), dtype=np.float32)
        np.put_along_axis(part, idx, s, axis=1)
        assert np.array_equal(part, full[:, lo:hi]), (lo, hi)
    assert np.array_equal(full[:, 4], full[:, 321])
    # the two copies tie exactly, so the lower index comes first wherever they rank
    order = idx_all.tolist()
    assert all(row.index(4) < row.index(321) for row in order)
