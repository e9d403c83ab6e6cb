"""Tests for chunkwise.tokens: tiktoken wrappers and token spanners with exact offsets."""

from __future__ import annotations

import os
from pathlib import Path

_CACHE = Path(__file__).resolve().parents[2] / "shared" / "tiktoken_cache"
if _CACHE.is_dir():  # offline machines: tiktoken's cached BPE files live in ../shared
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_CACHE))

import pytest  # noqa: E402
import tiktoken  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from chunkwise.tokens import (  # noqa: E402
    ByteSpanner,
    TiktokenSpanner,
    TokenSpanner,
    TokenUnit,
    WhitespaceSpanner,
    as_spanner,
    count_tokens,
    get_encoding,
)


class ToyByteTokenizer:
    """A tiktoken-shaped tokenizer: one token per UTF-8 byte (no encode_ordinary)."""

    name = "toy-bytes"

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode_single_token_bytes(self, token: int) -> bytes:
        return bytes([token])


def assert_units_valid(text: str, units: list[TokenUnit], contiguous: bool) -> None:
    prev_end = 0
    for u in units:
        start, end, n = u
        assert 0 <= prev_end <= start < end <= len(text)
        assert n >= 1
        if contiguous:
            assert start == prev_end
        prev_end = end
    if contiguous:
        assert prev_end == len(text)


# --- get_encoding / count_tokens -------------------------------------------------------


def test_get_encoding_is_cached():
    assert get_encoding("cl100k_base") is get_encoding("cl100k_base")
    assert get_encoding().name == "cl100k_base"


def test_get_encoding_unknown_name():
    with pytest.raises(ValueError, match="no_such_encoding"):
        get_encoding("no_such_encoding")


def test_get_encoding_offline_error_names_cache_variable(monkeypatch):
    def offline(name):
        raise ConnectionError("Failed to resolve 'openaipublic.blob.core.windows.net'")

    get_encoding.cache_clear()
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    try:
        with pytest.raises(RuntimeError, match="TIKTOKEN_CACHE_DIR"):
            get_encoding("o200k_base")
    finally:
        monkeypatch.undo()
        get_encoding.cache_clear()
    assert get_encoding("o200k_base").name == "o200k_base"  # failures are not cached


@pytest.mark.parametrize(
    "text", ["", "hello world", "The cat sat.\n\nOn the mat!", "猫狗鱼 🚀", "a <|endoftext|> b"]
)
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_count_tokens_matches_tiktoken(text, name):
    assert count_tokens(text, name) == len(tiktoken.get_encoding(name).encode_ordinary(text))


def test_count_tokens_values():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    # Special-token strings are plain text, not an error.
    assert count_tokens("<|endoftext|>") > 1


# --- TiktokenSpanner -----------------------------------------------------------------


def test_tiktoken_units_merge_to_character_edges():
    text = " hello 猫狗鱼 🚀"
    units = TiktokenSpanner("cl100k_base").token_spans(text)
    assert [text[s:e] for s, e, _ in units] == [" hello", " 猫", "狗", "鱼", " 🚀"]
    assert [n for _, _, n in units] == [1, 3, 3, 3, 3]
    assert sum(n for *_, n in units) == len(get_encoding().encode(text))
    assert_units_valid(text, units, contiguous=True)


def test_tiktoken_units_english_are_single_tokens():
    text = "The quick brown fox jumps over the lazy dog.\n\n  Indented  line\twith tabs."
    enc = get_encoding("cl100k_base")
    units = TiktokenSpanner(enc).token_spans(text)
    ids = enc.encode(text)
    assert len(units) == len(ids)
    assert [text[s:e] for s, e, _ in units] == [enc.decode([t]) for t in ids]
    assert all(n == 1 for *_, n in units)


def test_tiktoken_spanner_treats_special_tokens_as_text():
    text = "end <|endoftext|> start"
    units = TiktokenSpanner().token_spans(text)
    assert_units_valid(text, units, contiguous=True)
    assert "".join(text[s:e] for s, e, _ in units) == text


def test_tiktoken_spanner_accepts_tiktoken_like_object():
    spanner = TiktokenSpanner(ToyByteTokenizer())
    assert spanner.name == "toy-bytes"
    text = "a猫🚀b"
    assert spanner.token_spans(text) == ByteSpanner().token_spans(text)
    assert [n for *_, n in spanner.token_spans(text)] == [1, 3, 4, 1]


def test_tiktoken_spanner_rejects_other_objects():
    with pytest.raises(TypeError):
        TiktokenSpanner(42)


def test_zero_byte_tokens_join_neighbours():
    class WithEmptyTokens(ToyByteTokenizer):
        def encode(self, text):
            return [256] + [b for byte in text.encode("utf-8") for b in (byte, 256)]

        def decode_single_token_bytes(self, token):
            return b"" if token == 256 else bytes([token])

    text = "a猫"
    units = TiktokenSpanner(WithEmptyTokens()).token_spans(text)
    assert [(s, e) for s, e, _ in units] == [(0, 1), (1, 2)]
    assert sum(n for *_, n in units) == 1 + 2 * 4


def test_byte_count_mismatch_is_an_error():
    class Lossy(ToyByteTokenizer):
        def encode(self, text):
            return list(text.encode("utf-8"))[:-1]

    with pytest.raises(ValueError, match="bytes"):
        TiktokenSpanner(Lossy()).token_spans("abc")


@pytest.mark.parametrize("spanner", [TiktokenSpanner("cl100k_base"), ByteSpanner()], ids=repr)
def test_surrogates_give_clear_error(spanner):
    with pytest.raises(ValueError, match="surrogate"):
        spanner.token_spans("ab\ud800cd")


# --- WhitespaceSpanner / ByteSpanner ----------------------------------------------------


def test_whitespace_spanner():
    text = "  alpha beta\n\tgamma  "
    units = WhitespaceSpanner().token_spans(text)
    assert [text[s:e] for s, e, _ in units] == ["alpha", "beta", "gamma"]
    assert [(s, e) for s, e, _ in units] == [(2, 7), (8, 12), (14, 19)]
    assert all(n == 1 for *_, n in units)
    assert WhitespaceSpanner().token_spans("") == []
    assert WhitespaceSpanner().token_spans(" \n\t ") == []


def test_byte_spanner():
    text = "a猫🚀é"
    units = ByteSpanner().token_spans(text)
    assert units == [(0, 1, 1), (1, 2, 3), (2, 3, 4), (3, 4, 2)]
    assert ByteSpanner().token_spans("") == []


def test_units_are_named_tuples():
    (unit,) = WhitespaceSpanner().token_spans("word")
    assert unit == (0, 4, 1)
    assert (unit.start, unit.end, unit.n_tokens) == (0, 4, 1)


# --- protocol and as_spanner ----------------------------------------------------------


def test_spanners_satisfy_protocol():
    for spanner in (TiktokenSpanner(), WhitespaceSpanner(), ByteSpanner()):
        assert isinstance(spanner, TokenSpanner)
        assert isinstance(spanner.name, str)


def test_as_spanner():
    assert as_spanner().name == "cl100k_base"
    assert as_spanner(None, "o200k_base").name == "o200k_base"
    assert as_spanner("o200k_base").name == "o200k_base"
    ws = WhitespaceSpanner()
    assert as_spanner(ws) is ws
    assert isinstance(as_spanner(ToyByteTokenizer()), TiktokenSpanner)
    assert isinstance(as_spanner(get_encoding()), TiktokenSpanner)
    with pytest.raises(TypeError, match="tokenizer"):
        as_spanner(object())


# --- properties -------------------------------------------------------------------------

_unicode_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=120)


@settings(max_examples=150, deadline=None)
@given(text=_unicode_text)
def test_tiktoken_units_property(text):
    enc = get_encoding("cl100k_base")
    units = TiktokenSpanner(enc).token_spans(text)
    assert_units_valid(text, units, contiguous=True)
    assert sum(n for *_, n in units) == len(enc.encode_ordinary(text))
    # Each unit's text is exactly the bytes of its tokens, decoded.
    pieces = enc.decode_tokens_bytes(enc.encode_ordinary(text))
    i = 0
    for s, e, n in units:
        assert b"".join(pieces[i : i + n]).decode("utf-8") == text[s:e]
        i += n


@settings(max_examples=150, deadline=None)
@given(text=_unicode_text)
def test_byte_and_whitespace_units_property(text):
    units = ByteSpanner().token_spans(text)
    assert_units_valid(text, units, contiguous=True)
    assert [n for *_, n in units] == [len(ch.encode("utf-8")) for ch in text]
    ws = WhitespaceSpanner().token_spans(text)
    assert_units_valid(text, ws, contiguous=False)
    assert [text[s:e] for s, e, _ in ws] == text.split()
