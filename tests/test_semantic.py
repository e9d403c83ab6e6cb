"""SemanticChunker: parity with langchain-experimental 0.4.2 and the bug kinds of bug-cases.md."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from chunkwise.chunkers.semantic import (
    SemanticChunker,
    breakpoint_threshold,
    combine_sentences,
    cosine_distances,
    find_breakpoints,
    group_sentences,
)
from chunkwise.text import split_sentences
from fakes import FakeEmbedder, WrongCountEmbedder

LC_REGEX = r"(?<=[.?!])\s+"


def _lc_chunker(embedder: FakeEmbedder, **kwargs):
    lc = pytest.importorskip("langchain_experimental.text_splitter")
    from langchain_core.embeddings import Embeddings

    class LCFake(Embeddings):
        def embed_documents(self, texts):
            return [embedder.vector(t).tolist() for t in texts]

        def embed_query(self, text):
            return embedder.vector(text).tolist()

    return lc.SemanticChunker(LCFake(), **kwargs)


TOPICS = [
    "river boat water fish bridge current bank flood".split(),
    "server deploy cluster latency cache queue node rollback".split(),
    "bread flour oven yeast dough crust butter sugar".split(),
    "violin concert tempo rhythm melody chord stage choir".split(),
    "ballot senate vote law court budget tax mayor".split(),
]


def _random_text(rng: random.Random) -> str:
    n_sent = rng.choice([1, 2, 3, 4, 5, 8, 12, 18, 25, 40])
    parts = []
    topic = rng.randrange(len(TOPICS))
    for i in range(n_sent):
        if rng.random() < 0.2:
            topic = rng.randrange(len(TOPICS))
        words = [rng.choice(TOPICS[topic] + TOPICS[rng.randrange(len(TOPICS))][:2]) for _ in range(rng.randint(2, 12))]
        sent = " ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!"])
        parts.append(sent)
        if i < n_sent - 1:
            parts.append(rng.choice([" ", " ", "  ", "\n", "\n\n", "\t "]))
    return "".join(parts)


def _random_settings(rng: random.Random) -> dict:
    kind = rng.choice(["percentile", "standard_deviation", "interquartile", "gradient"])
    s: dict = {"buffer_size": rng.choice([0, 1, 2, 3]), "breakpoint_threshold_type": kind}
    r = rng.random()
    if r < 0.3:
        pass  # default amount
    elif kind in ("percentile", "gradient"):
        s["breakpoint_threshold_amount"] = rng.choice([50, 70, 80, 90, 95, 99, 100, 0, 33.3])
    else:
        s["breakpoint_threshold_amount"] = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, -0.5])
    if rng.random() < 0.2:
        s["number_of_chunks"] = rng.choice([1, 2, 3, 5, 10, 50])
    if rng.random() < 0.3:
        s["min_chunk_size"] = rng.choice([1, 20, 60, 150, 400])
    return s


def test_parity_with_langchain_experimental_on_generated_texts():
    rng = random.Random(20261130)
    fake = FakeEmbedder()
    n_cases = 0
    for _ in range(400):
        text = _random_text(rng)
        settings = _random_settings(rng)
        ours = SemanticChunker(fake, **settings).split_text(text)
        theirs = _lc_chunker(fake, **settings).split_text(text)
        assert ours == theirs, (text, settings)
        n_cases += 1
    assert n_cases == 400


def test_parity_distances_and_chunks_are_verbatim_slices():
    rng = random.Random(7)
    fake = FakeEmbedder()
    for _ in range(100):
        text = _random_text(rng)
        settings = _random_settings(rng)
        chunker = SemanticChunker(fake, **settings)
        chunks = chunker.split(text)
        for c in chunks:
            assert text[c.start : c.end] == c.text
        # Every sentence appears in exactly one chunk, in order (B07).
        covered = [i for c in chunks for i in range(c.metadata["sentence_start"], c.metadata["sentence_end"])]
        assert covered == list(range(len(chunker.sentences(text))))


def test_combine_sentences_matches_langchain():
    from langchain_experimental.text_splitter import combine_sentences as lc_combine

    sents = ["A b.", "C d!", "E f?", "G h.", "I j."]
    for b in range(5):
        lc = lc_combine([{"sentence": s, "index": i} for i, s in enumerate(sents)], b)
        assert combine_sentences(sents, b) == [d["combined_sentence"] for d in lc]
    assert combine_sentences(sents, 1)[0] == "A b. C d!"
    assert combine_sentences(sents, 0) == sents


def test_cosine_distances_hand_computed():
    e = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    d = cosine_distances(e)
    # (1,0)-(0,1): cos 0 -> 1; (0,1)-(1,1): cos 1/sqrt2 -> 1 - 0.7071; zero vector -> similarity 0 -> 1.
    np.testing.assert_allclose(d, [1.0, 1 - 1 / np.sqrt(2), 1.0])
    assert cosine_distances(np.zeros((1, 3))).shape == (0,)
    with pytest.raises(ValueError, match="NaN"):
        cosine_distances(np.array([[np.nan, 1.0], [1.0, 0.0]]))


def test_find_breakpoints_hand_computed():
    d = [0.1, 0.5, 0.2, 0.9, 0.3]
    # percentile 50 of sorted [0.1, 0.2, 0.3, 0.5, 0.9] is 0.3 -> distances > 0.3 at indices 1 and 3.
    assert find_breakpoints(d, "percentile", 50) == [1, 3]
    # mean 0.4, population std sqrt(0.08) = 0.2828; mean + 1 * std = 0.6828 -> only 0.9.
    assert find_breakpoints(d, "standard_deviation", 1) == [3]
    # Q1 = 0.2, Q3 = 0.5, IQR = 0.3; mean + 0.5 * 0.3 = 0.55 -> only 0.9.
    assert find_breakpoints(d, "interquartile", 0.5) == [3]
    # gradient: [0.4, 0.05, 0.2, 0.05, -0.6]; its 50th percentile is 0.05 -> gradients > 0.05 at 0 and 2.
    assert find_breakpoints(d, "gradient", 50) == [0, 2]
    # number_of_chunks=3 with m=5: y = 0 + (100/(1-5)) * (3-5) = 50 -> same as percentile 50.
    assert find_breakpoints(d, number_of_chunks=3) == [1, 3]
    thr, compared = breakpoint_threshold(d, "percentile", 50)
    assert thr == pytest.approx(0.3)
    np.testing.assert_allclose(compared, d)


@pytest.mark.parametrize("m", [17, 40, 100])
def test_percentile_break_count_depends_only_on_gap_count(m):
    rng = np.random.default_rng(m)
    for _ in range(50):
        d = rng.random(m)
        for p in (80, 90, 95):
            # np.percentile interpolates at rank r = p/100 * (m - 1); with distinct values exactly
            # the distances ranked above floor(r) are strictly greater than the threshold.
            expected = m - 1 - int(np.floor(p / 100 * (m - 1)))
            assert len(find_breakpoints(d, "percentile", p)) == expected
    # The article's numbers: 17 gaps -> p95: 1, p90: 2, p80: 4 breaks.
    if m == 17:
        d = rng.random(17)
        assert [len(find_breakpoints(d, "percentile", p)) for p in (95, 90, 80)] == [1, 2, 4]


def test_find_breakpoints_validation_errors():
    with pytest.raises(ValueError, match="breakpoint_threshold_type must be one of"):
        find_breakpoints([0.1, 0.2], "median")
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        find_breakpoints([0.1, 0.2], "percentile", 120)
    with pytest.raises(ValueError, match="number_of_chunks must be >= 1"):
        find_breakpoints([0.1, 0.2], number_of_chunks=0)
    with pytest.raises(ValueError, match="NaN"):
        find_breakpoints([0.1, float("nan")])


# --- bug kinds from ../shared/docs/bug-cases.md --------------------------------------------


@pytest.mark.parametrize("kind", ["percentile", "standard_deviation", "interquartile", "gradient"])
@pytest.mark.parametrize("number_of_chunks", [None, 3])
def test_b01_one_sentence(kind, number_of_chunks):
    fake = FakeEmbedder()
    chunker = SemanticChunker(fake, breakpoint_threshold_type=kind, number_of_chunks=number_of_chunks)
    assert chunker.split_text("Tea is served at noon.") == ["Tea is served at noon."]
    assert fake.calls == 0
    assert find_breakpoints([], kind, number_of_chunks=number_of_chunks) == []


def test_b03_gradient_with_two_and_three_sentences():
    fake = FakeEmbedder()
    chunker = SemanticChunker(fake, breakpoint_threshold_type="gradient")
    assert chunker.split_text("Rain fell. Sun rose.") == ["Rain fell.", "Sun rose."]
    assert find_breakpoints([0.4], "gradient") == [0]
    three = "Rain fell. Sun rose. Birds sang."
    assert chunker.split_text(three) == _lc_chunker(fake, breakpoint_threshold_type="gradient").split_text(three)


def test_b04_trailing_whitespace_no_empty_sentence_and_vector_count_checked():
    fake = FakeEmbedder()
    chunker = SemanticChunker(fake, buffer_size=0)
    text = "Sky is blue. Grass is green.\n"
    assert [s.text for s in chunker.sentences(text)] == ["Sky is blue.", "Grass is green."]
    chunker.split(text)
    assert "" not in fake.texts and all(t.strip() for t in fake.texts)
    # LangChain's regex leaves an empty final piece; we document and drop it.
    assert re.split(LC_REGEX, text) == ["Sky is blue.", "Grass is green.", ""]

    with pytest.raises(ValueError, match="returned 1 vectors .* for 2 windows"):
        SemanticChunker(WrongCountEmbedder(-1, dim=4)).split("Sky is blue. Grass is green.")


def test_b07_last_sentence_kept():
    text = "Ann ate an apple. Ben ate a bean. Cal ate a carrot. Dan ate a date."
    for kind in ("percentile", "standard_deviation", "interquartile", "gradient"):
        for b in range(4):
            chunks = SemanticChunker(FakeEmbedder(), buffer_size=b, breakpoint_threshold_type=kind).split(text)
            joined = " ".join(c.metadata["joined_text"] for c in chunks)
            assert joined == text
            assert chunks[-1].text.endswith("Dan ate a date.")


def test_b09_min_chunk_size_carries_small_groups_forward():
    sents = ["Hi.", "Ok.", "The committee approved the new budget after a long debate."]
    text = " ".join(sents)
    spans = split_sentences(text, "langchain")
    chunks = group_sentences(text, spans, [0, 1], min_chunk_size=10)
    assert [c.text for c in chunks] == [text]
    # Without the minimum every breakpoint splits.
    assert [c.text for c in group_sentences(text, spans, [0, 1])] == sents
    # LangChain's rule, pinned: the final group is emitted even when it is below the minimum.
    tail = group_sentences("A long first sentence here. Ok.", split_sentences("A long first sentence here. Ok.", "langchain"), [0], min_chunk_size=10)
    assert [c.text for c in tail] == ["A long first sentence here.", "Ok."]


def test_b10_max_chunk_tokens_caps_a_giant_sentence():
    from chunkwise.tokens import count_tokens

    rng = random.Random(3)
    words = [rng.choice(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]) for _ in range(300)]
    text = " ".join(words)
    chunker = SemanticChunker(FakeEmbedder(), max_chunk_tokens=100)
    chunks = chunker.split(text)  # one sentence: the early-return path must obey the cap too
    assert len(chunks) >= 3
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert " ".join(c.text for c in chunks) == text
    for a, b in zip(chunks, chunks[1:]):
        assert text[a.end : b.start].isspace()  # cuts fall on whitespace
    # Multi-sentence chunks are cut at sentence boundaries first.
    long_text = " ".join(f"Sentence number {i} talks about river boats and water." for i in range(40))
    capped = SemanticChunker(FakeEmbedder(), number_of_chunks=1, max_chunk_tokens=50).split(long_text)
    assert all(count_tokens(c.text) <= 50 for c in capped)
    assert all(c.text.endswith(".") for c in capped)
    # A single word longer than the cap is cut at token boundaries.
    word = "x" * 400
    pieces = SemanticChunker(FakeEmbedder(), max_chunk_tokens=5).split(word)
    assert "".join(p.text for p in pieces) == word and all(count_tokens(p.text) <= 5 for p in pieces)


def test_b16_chunks_are_verbatim_slices():
    text = "Line one.\n\nLine two. Dr. Kim left;; see ../notes"
    for regex in (LC_REGEX, None):
        chunks = SemanticChunker(FakeEmbedder(), buffer_size=0, breakpoint_threshold_type="percentile",
                                 breakpoint_threshold_amount=0, sentence_split_regex=regex).split(text)
        assert len(chunks) >= 2
        for c in chunks:
            assert text[c.start : c.end] == c.text
    # LangChain's joined form turns the blank line into a space; the verbatim chunk keeps it.
    lc_form = SemanticChunker(FakeEmbedder(), number_of_chunks=1).split_text(text)
    assert lc_form == ["Line one. Line two. Dr. Kim left;; see ../notes"]
    assert SemanticChunker(FakeEmbedder(), number_of_chunks=1).split(text)[0].text == text


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_b20_empty_input(text):
    fake = FakeEmbedder()
    assert SemanticChunker(fake).split(text) == []
    assert SemanticChunker(fake, max_chunk_tokens=5).split(text) == []
    assert fake.calls == 0


def test_robust_sentences_keep_am_whole():
    text = "The rotation starts at 9 a.m. local time. Pages go to the secondary."
    fake = FakeEmbedder()
    assert len(SemanticChunker(fake).sentences(text)) == 3  # LangChain's regex splits "a.m."
    assert len(SemanticChunker(fake, sentence_split_regex=None).sentences(text)) == 2


def test_constructor_validation():
    fake = FakeEmbedder()
    with pytest.raises(ValueError, match="buffer_size must be an int >= 0"):
        SemanticChunker(fake, buffer_size=-1)
    with pytest.raises(ValueError, match="min_chunk_size must be a positive int"):
        SemanticChunker(fake, min_chunk_size=0)
    with pytest.raises(ValueError, match="max_chunk_tokens must be a positive int"):
        SemanticChunker(fake, max_chunk_tokens=-3)
    with pytest.raises(ValueError, match="capturing groups"):
        SemanticChunker(fake, sentence_split_regex=r"(\.)\s+")
    with pytest.raises(TypeError, match="embed"):
        SemanticChunker(object())
    with pytest.raises(TypeError, match="must be a str"):
        SemanticChunker(fake).split(None)  # type: ignore[arg-type]


def test_cap_on_long_unbroken_text_is_exact_and_bounded():
    from chunkwise.tokens import count_tokens

    text = "ab" * 20_000
    pieces = SemanticChunker(FakeEmbedder(), max_chunk_tokens=100).split(text)
    assert "".join(p.text for p in pieces) == text
    assert all(count_tokens(p.text) <= 100 for p in pieces)
    with pytest.raises(ValueError):
        SemanticChunker(FakeEmbedder(), max_chunk_tokens=10, encoding_name="no-such-encoding")
