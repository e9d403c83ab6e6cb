"""Tests for FixedTokenChunker: Chroma-style token windows with exact character offsets."""

from __future__ import annotations

import math
import os
from pathlib import Path

_CACHE = Path(__file__).resolve().parents[2] / "shared" / "tiktoken_cache"
if _CACHE.is_dir():  # offline machines: tiktoken's cached BPE files live in ../shared
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_CACHE))

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from chunkwise.chunkers.base import Chunk, check_chunks  # noqa: E402
from chunkwise.chunkers.fixed import FixedTokenChunker  # noqa: E402
from chunkwise.tokens import (  # noqa: E402
    ByteSpanner,
    TiktokenSpanner,
    WhitespaceSpanner,
    count_tokens,
    get_encoding,
)

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    (
        "Retrieval-augmented generation (RAG) splits documents into chunks before embedding "
        "them.\n\nChunk size matters: too small and the context is lost; too large and the "
        "retriever returns noise. In 2024, Chroma's report measured recall, precision and IoU "
        "for several chunkers -- including a fixed-size token baseline with 200/400/800 tokens."
    ),
    (
        "def split(text):\n    return [t for t in text.split('\\n') if t]\n\n"
        "# Costs: $1,234.56 (approx.)   -- see https://example.com/a?b=c&d=e\n"
        "  Indented line\twith\ttabs, ellipses... and 'quotes' \"double\".  "
    ),
    "Mr. Smith's cat didn't like it; she'd rather sleep.\n" * 7,
]

CHINESE = [
    "猫狗鱼",
    "检索增强生成（RAG）先把文档切成块，再做向量化。块太小会丢失上下文，块太大会引入噪声。",
    "北京是中国的首都，有三千多年的建城史。故宫、长城和颐和园每年吸引大量游客。🚀 Mixed 中英 text!",
]

SIZES = [(1, 0), (2, 1), (3, 0), (4, 2), (5, 4), (7, 3), (16, 0), (50, 10)]


def expected_windows(n_tokens: int, size: int, overlap: int) -> int:
    if n_tokens == 0:
        return 0
    if n_tokens <= size:
        return 1
    return 1 + math.ceil((n_tokens - size) / (size - overlap))


def reference_windows(ids: list[int], size: int, overlap: int) -> list[tuple[int, int]]:
    """Chroma's window rule written plainly: (start, end) token indices."""
    windows, start = [], 0
    while start < len(ids):
        end = min(start + size, len(ids))
        windows.append((start, end))
        if end == len(ids):
            break
        start += size - overlap
    return windows


def unit_ranges(chunks: list[Chunk], units) -> list[tuple[int, int]]:
    """Unit index range [a, b) of each chunk; fails if a chunk does not sit on unit edges."""
    by_start = {u[0]: i for i, u in enumerate(units)}
    by_end = {u[1]: i + 1 for i, u in enumerate(units)}
    return [(by_start[c.start], by_end[c.end]) for c in chunks]


def assert_chunking_valid(text, chunks, units, size, overlap, name):
    """The guarantees in FixedTokenChunker's docstring."""
    check_chunks(chunks, text)
    if not units:
        assert chunks == []
        return
    ranges = unit_ranges(chunks, units)
    tok = [0]
    for u in units:
        tok.append(tok[-1] + u[2])
    assert ranges[0][0] == 0 and ranges[-1][1] == len(units)  # all tokens covered
    for (a, b), c in zip(ranges, chunks):
        assert c.metadata == {"n_tokens": tok[b] - tok[a], "tokenizer": name}
        assert tok[b] - tok[a] <= size or b - a == 1  # only a lone oversized unit exceeds
        assert b == len(units) or tok[b + 1] - tok[a] > size  # windows are filled greedily
    for (a0, b0), (a1, b1) in zip(ranges, ranges[1:]):
        assert a0 < a1 <= b0 < b1  # in order, no gaps, always advancing
        assert tok[b0] - tok[a1] <= overlap  # overlap respected


# --- B12: validation at construction ---------------------------------------------------


@pytest.mark.parametrize("size, overlap", [(5, 5), (5, 6), (5, -1), (1, 1), (3, 100)])
def test_b12_bad_overlap_raises_at_construction(size, overlap):
    with pytest.raises(ValueError, match=rf"chunk_overlap.*\[0, {size - 1}\].*got {overlap}"):
        FixedTokenChunker(size, overlap, tokenizer=WhitespaceSpanner())


@pytest.mark.parametrize("size", [0, -3])
def test_b12_bad_size_raises(size):
    with pytest.raises(ValueError, match=rf"chunk_size must be an int >= 1.*got {size}"):
        FixedTokenChunker(size, tokenizer=WhitespaceSpanner())


@pytest.mark.parametrize("size, overlap", [(4.0, 0), (4, 0.5), ("4", 0), (True, 0), (4, None)])
def test_b12_non_integers_raise(size, overlap):
    with pytest.raises(ValueError, match="must be an int"):
        FixedTokenChunker(size, overlap, tokenizer=WhitespaceSpanner())


def test_b12_validation_happens_before_loading_a_tokenizer():
    with pytest.raises(ValueError, match="chunk_overlap"):
        FixedTokenChunker(5, 5, encoding_name="no_such_encoding")


def test_b12_largest_valid_overlap_terminates():
    text = " ".join(f"w{i}" for i in range(20))
    chunks = FixedTokenChunker(5, 4, tokenizer=WhitespaceSpanner()).split(text)
    assert len(chunks) == expected_windows(20, 5, 4) == 16
    assert all(c.metadata["n_tokens"] <= 5 for c in chunks)


# --- B14: offsets with token overlap ----------------------------------------------------


def test_b14_offsets_with_overlap():
    text = "alpha beta gamma delta epsilon zeta eta theta"
    chunks = FixedTokenChunker(3, 2, tokenizer=WhitespaceSpanner()).split(text)
    assert [c.start for c in chunks] == [0, 6, 11, 17, 23, 31]
    assert len(chunks) == 6
    assert chunks[-1].end == len(text)
    assert chunks[0].text == "alpha beta gamma"
    assert chunks[-1].text == "zeta eta theta"
    check_chunks(chunks, text)
    assert all(c.metadata == {"n_tokens": 3, "tokenizer": "whitespace"} for c in chunks)


# --- B15: multi-byte characters and byte-level tokens ------------------------------------


def test_b15_byte_tokens_move_to_character_edges():
    text = "猫狗鱼"
    chunks = FixedTokenChunker(4, 0, tokenizer=ByteSpanner()).split(text)
    assert [c.text for c in chunks] == ["猫", "狗", "鱼"]
    assert [c.span for c in chunks] == [(0, 1), (1, 2), (2, 3)]
    assert all("\ufffd" not in c.text for c in chunks)
    assert "".join(c.text for c in chunks) == text
    assert [c.metadata["n_tokens"] for c in chunks] == [3, 3, 3]


@pytest.mark.parametrize("tokenizer", [ByteSpanner(), "cl100k_base"])
def test_b15_oversized_unit_is_emitted_alone(tokenizer):
    chunks = FixedTokenChunker(1, tokenizer=tokenizer).split("🚀")
    assert [c.text for c in chunks] == ["🚀"]
    assert chunks[0].span == (0, 1)
    assert chunks[0].metadata["n_tokens"] > 1


def test_b15_cl100k_chinese_has_no_replacement_characters():
    text = CHINESE[1]
    for size, overlap in SIZES:
        chunks = FixedTokenChunker(size, overlap).split(text)
        assert all("\ufffd" not in c.text for c in chunks)
        check_chunks(chunks, text)
        if overlap == 0:
            assert "".join(c.text for c in chunks) == text


def test_b15_window_never_duplicates_the_previous_one():
    # Units of 1, 1 and 3 tokens (a, b, 猫) with size 3, overlap 1: after [a b] the next
    # window cannot hold "b猫" (4 tokens), so it must start at 猫, not emit "b" again.
    chunks = FixedTokenChunker(3, 1, tokenizer=ByteSpanner()).split("ab猫")
    assert [c.text for c in chunks] == ["ab", "猫"]


# --- B20: empty input ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t", "\u3000\u00a0 "])
@pytest.mark.parametrize("tokenizer", [None, WhitespaceSpanner(), ByteSpanner()], ids=repr)
def test_b20_empty_and_whitespace_only(text, tokenizer):
    assert FixedTokenChunker(3, 1, tokenizer=tokenizer).split(text) == []


# --- parity with a plain tiktoken reference ----------------------------------------------


@pytest.mark.parametrize("size, overlap", SIZES)
@pytest.mark.parametrize("text", ENGLISH, ids=lambda t: t[:20])
def test_parity_with_decoded_windows_english(text, size, overlap):
    enc = get_encoding("cl100k_base")
    ids = enc.encode(text)
    reference = [enc.decode(ids[i:j]) for i, j in reference_windows(ids, size, overlap)]
    chunks = FixedTokenChunker(size, overlap, encoding_name="cl100k_base").split(text)
    assert [c.text for c in chunks] == reference
    assert len(chunks) == expected_windows(len(ids), size, overlap)
    check_chunks(chunks, text)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    for c, (i, j) in zip(chunks, reference_windows(ids, size, overlap)):
        assert c.metadata == {"n_tokens": j - i, "tokenizer": "cl100k_base"}
        assert count_tokens(c.text) <= size  # re-encoding a chunk never needs more tokens here


@pytest.mark.parametrize("size, overlap", SIZES)
@pytest.mark.parametrize("text", CHINESE, ids=lambda t: t[:6])
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_parity_and_guarantees_chinese(text, size, overlap, name):
    enc = get_encoding(name)
    ids = enc.encode(text)
    spanner = TiktokenSpanner(enc)
    units = spanner.token_spans(text)
    chunks = FixedTokenChunker(size, overlap, tokenizer=spanner).split(text)
    assert_chunking_valid(text, chunks, units, size, overlap, name)
    assert all("\ufffd" not in c.text for c in chunks)
    if all(n == 1 for *_, n in units):
        # Every token ends on a character edge: exactly the decoded reference windows.
        reference = [enc.decode(ids[i:j]) for i, j in reference_windows(ids, size, overlap)]
        assert [c.text for c in chunks] == reference
        assert len(chunks) == expected_windows(len(ids), size, overlap)
    else:
        # A reference window that starts where one of our chunks starts and ends on a
        # character edge is exactly that chunk (greedy filling stops at the same token).
        tok_at_char, edges, pos = {}, {0}, 0
        for s, _, n in units:
            tok_at_char[s] = pos
            pos += n
            edges.add(pos)
        ours = {tok_at_char[c.start]: c.text for c in chunks}
        for i, j in reference_windows(ids, size, overlap):
            if i in ours and j in edges:
                assert ours[i] == enc.decode(ids[i:j])


def test_chinese_texts_need_merged_units_in_cl100k():
    # Sanity for the parametrised test above: the merged-unit branch is taken.
    merged = [any(n > 1 for *_, n in TiktokenSpanner("cl100k_base").token_spans(t)) for t in CHINESE]
    assert any(merged)


def test_leading_space_stays_inside_the_chunk():
    text = "one two three four"
    chunks = FixedTokenChunker(2).split(text)
    assert [c.text for c in chunks] == ["one two", " three four"]
    assert chunks[1].start == 7


def test_tiktoken_like_tokenizer_object_is_accepted():
    class Toy:
        name = "toy-bytes"

        def encode(self, text):
            return list(text.encode("utf-8"))

        def decode_single_token_bytes(self, token):
            return bytes([token])

    chunks = FixedTokenChunker(4, tokenizer=Toy()).split("猫狗鱼")
    assert [c.text for c in chunks] == ["猫", "狗", "鱼"]
    assert chunks[0].metadata["tokenizer"] == "toy-bytes"


def test_encoding_name_and_metadata():
    chunks = FixedTokenChunker(3, encoding_name="o200k_base").split("Hello there, world!")
    assert {c.metadata["tokenizer"] for c in chunks} == {"o200k_base"}
    assert sum(c.metadata["n_tokens"] for c in chunks) == count_tokens("Hello there, world!", "o200k_base")


def test_repr_names_parameters():
    r = repr(FixedTokenChunker(8, 2, tokenizer=WhitespaceSpanner()))
    assert "chunk_size=8" in r and "chunk_overlap=2" in r and "WhitespaceSpanner" in r


# --- properties -------------------------------------------------------------------------

_words = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=6),
        st.sampled_from(["the", " ", "\n\n", "猫", "🚀", "é", "don't", "  ", "数据", "\t"]),
    ),
    max_size=40,
).map("".join)


@st.composite
def _params(draw):
    size = draw(st.integers(1, 12))
    overlap = draw(st.integers(0, size - 1))
    return size, overlap


_SPANNERS = {
    "bytes": ByteSpanner(),
    "whitespace": WhitespaceSpanner(),
    "cl100k_base": None,  # filled lazily: needs the tiktoken files
}


def _spanner(kind):
    if _SPANNERS[kind] is None:
        _SPANNERS[kind] = TiktokenSpanner(kind)
    return _SPANNERS[kind]


@settings(max_examples=300, deadline=None)
@given(text=_words, params=_params(), kind=st.sampled_from(sorted(_SPANNERS)))
def test_property_verbatim_ordered_covering(text, params, kind):
    size, overlap = params
    spanner = _spanner(kind)
    chunks = FixedTokenChunker(size, overlap, tokenizer=spanner).split(text)
    units = spanner.token_spans(text) if text.strip() else []
    assert_chunking_valid(text, chunks, units, size, overlap, spanner.name)
    if all(n == 1 for *_, n in units):
        assert len(chunks) == expected_windows(len(units), size, overlap)
        assert [unit_ranges([c], units)[0][0] for c in chunks] == [
            i for i, _ in reference_windows(list(range(len(units))), size, overlap)
        ]
    if overlap == 0 and kind != "whitespace" and units:
        assert "".join(c.text for c in chunks) == text


@pytest.mark.parametrize("bad", [None, b"abc.", 123, ["a"]])
def test_split_rejects_non_str(bad):
    from chunkwise.chunkers import FixedTokenChunker

    with pytest.raises(TypeError, match="must be a str"):
        FixedTokenChunker(5).split(bad)
