"""RecursiveTokenChunker: bug cases B12/B16-B20, LangChain parity, properties, cl100k tokens."""

from __future__ import annotations

import doctest
import os
import pickle
import re
from pathlib import Path

_CACHE = Path(__file__).resolve().parents[2] / "shared" / "tiktoken_cache"
if _CACHE.is_dir():  # offline machines: tiktoken's cached BPE files live in ../shared
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_CACHE))

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import chunkwise.chunkers.recursive as recursive_module  # noqa: E402
from chunkwise.chunkers.base import Chunk, check_chunks  # noqa: E402
from chunkwise.chunkers.recursive import DEFAULT_SEPARATORS, RecursiveTokenChunker  # noqa: E402
from chunkwise.tokens import count_tokens  # noqa: E402

CHROMA_SEPARATORS = ["\n\n", "\n", ".", "?", "!", " ", ""]
LC_DEFAULT_SEPARATORS = ["\n\n", "\n", " ", ""]


def chars(size, overlap=0, **kw):
    """A chunker that counts characters."""
    return RecursiveTokenChunker(size, overlap, length_function=len, **kw)


def texts(chunks):
    return [c.text for c in chunks]


def assert_valid(text, chunks, chunker, *, covers=True):
    """Guarantees in the docstring: exact slices, order, size bound, coverage."""
    check_chunks(chunks, text)
    for c in chunks:
        assert c.text and not c.text.isspace()
        if chunker.strip_whitespace:
            assert c.text == c.text.strip()
        n = chunker.length_function(c.text)
        assert c.metadata["length"] == n
        if n > chunker.chunk_size:  # only a piece that no remaining separator can cut
            assert len(c.text) == 1 or "" not in chunker.separators, c
    for a, b in zip(chunks, chunks[1:]):
        assert a.start <= b.start and a.end < b.end  # in order, always advancing
    if covers:  # every non-whitespace character lies in some chunk
        covered = bytearray(len(text))
        for c in chunks:
            covered[c.start : c.end] = b"\x01" * (c.end - c.start)
        missing = [i for i, ch in enumerate(text) if not ch.isspace() and not covered[i]]
        assert not missing, (missing, text)


# --- construction and validation (B12) --------------------------------------------------


@pytest.mark.parametrize("size, overlap", [(5, 5), (5, 6), (5, -1), (1, 1), (3, 100)])
def test_b12_bad_overlap_raises_at_construction(size, overlap):
    with pytest.raises(ValueError, match=rf"chunk_overlap.*\[0, {size - 1}\].*got {overlap}"):
        chars(size, overlap)


@pytest.mark.parametrize("size", [0, -3])
def test_b12_bad_size_raises(size):
    with pytest.raises(ValueError, match=rf"chunk_size must be an int >= 1, got {size}"):
        chars(size, 0)


@pytest.mark.parametrize("size, overlap", [(4.0, 0), (4, 0.5), ("4", 0), (True, 0), (4, None)])
def test_b12_non_integers_raise(size, overlap):
    with pytest.raises(ValueError, match="must be an int"):
        chars(size, overlap)


def test_b12_validation_happens_before_loading_a_tokenizer():
    with pytest.raises(ValueError, match="chunk_overlap"):
        RecursiveTokenChunker(5, 5, encoding_name="no_such_encoding")
    with pytest.raises(ValueError, match="no_such_encoding"):
        RecursiveTokenChunker(5, 1, encoding_name="no_such_encoding")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"keep_separator": "middle"}, "keep_separator"),
        ({"keep_separator": 1}, "keep_separator"),
        ({"separators": []}, "at least one separator"),
        ({"separators": "\n"}, "list of strings"),
        ({"separators": ["\n", 3]}, "must be a str"),
        ({"separators": ["(unclosed"], "is_separator_regex": True}, "not a valid regular expression"),
        ({"length_function": 5}, "length_function"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    kwargs.setdefault("length_function", len)
    with pytest.raises(ValueError, match=match):
        RecursiveTokenChunker(10, 0, **kwargs)


def test_defaults():
    chunker = RecursiveTokenChunker()
    assert (chunker.chunk_size, chunker.chunk_overlap) == (4000, 200)
    assert list(chunker.separators) == CHROMA_SEPARATORS == list(DEFAULT_SEPARATORS)
    assert chunker.keep_separator == "end"
    assert chunker.strip_whitespace is True
    assert chunker.length_function("Hello world") == count_tokens("Hello world") == 2
    assert "cl100k_base" in repr(chunker)
    assert pickle.loads(pickle.dumps(chunker)).split("a b") == chunker.split("a b")
    assert RecursiveTokenChunker(10, 0, keep_separator=True).keep_separator == "start"  # LangChain meaning
    assert RecursiveTokenChunker(10, 0, keep_separator=False).keep_separator is False
    # a literal "(unclosed" is fine when not a regex
    assert texts(chars(4, separators=["(unclosed", ""]).split("ab(unclosedcd")) == ["ab(u", "nclo", "sed", "cd"]


def test_length_function_must_return_non_negative_int():
    with pytest.raises(ValueError, match="must return an int >= 0"):
        RecursiveTokenChunker(5, 0, length_function=lambda s: -1).split("abc def")
    with pytest.raises(ValueError, match="must return an int >= 0"):
        RecursiveTokenChunker(5, 0, length_function=lambda s: 0.5).split("abc def")


def test_text_must_be_a_string():
    with pytest.raises(TypeError):
        chars(5).split(b"abc")


# --- B12: size bound after overlap -------------------------------------------------------


@pytest.mark.parametrize("keep", ["end", "start", False])
@pytest.mark.parametrize("strip", [True, False])
def test_b12_cap_holds_after_overlap(keep, strip):
    text = "xx  yy  zz  ww"
    chunker = chars(4, 2, keep_separator=keep, strip_whitespace=strip)
    chunks = chunker.split(text)
    assert all(len(c.text) <= 4 for c in chunks), texts(chunks)
    assert_valid(text, chunks, chunker)
    if strip:
        assert texts(chunks) == ["xx", "yy", "zz", "ww"]


@pytest.mark.parametrize("size, overlap", [(4, 2), (6, 3), (10, 9), (3, 1)])
def test_b12_overlap_chunks_never_exceed_the_size(size, overlap):
    text = "one two  three\nfour five. six seven?  eight nine! ten"
    for keep in ("end", "start", False):
        chunker = chars(size, overlap, keep_separator=keep)
        chunks = chunker.split(text)
        assert max(len(c.text) for c in chunks) <= size
        assert_valid(text, chunks, chunker, covers=keep is not False)


def test_b12_overlap_is_carried_over():
    chunks = chars(12, 6, separators=[" "]).split("aa bb cc dd ee ff gg")
    assert texts(chunks) == ["aa bb cc dd", "cc dd ee ff", "ee ff gg"]
    assert [c.span for c in chunks] == [(0, 11), (6, 17), (12, 20)]


# --- B16: verbatim slices ---------------------------------------------------------------


@pytest.mark.parametrize("keep", ["end", "start", False])
@pytest.mark.parametrize("size, overlap", [(12, 0), (20, 5), (25, 10), (8, 3)])
def test_b16_chunks_are_verbatim_slices(keep, size, overlap):
    text = "Line one.\n\nLine two. Dr. Kim left;; see ../notes"
    chunker = chars(size, overlap, keep_separator=keep)
    chunks = chunker.split(text)
    assert len(chunks) >= 2
    for c in chunks:
        assert text[c.start : c.end] == c.text
    assert_valid(text, chunks, chunker, covers=keep is not False)


@pytest.mark.parametrize(
    "keep, expected",
    [
        ("end", [("Line one.", (0, 9)), ("Line two. Dr. Kim left;; see .", (11, 41)), ("./notes", (41, 48))]),
        ("start", [("Line one.", (0, 9)), ("Line two. Dr. Kim left;; see", (11, 39)), ("../notes", (40, 48))]),
        (False, [("Line one.", (0, 9)), ("Line two. Dr. Kim left;; see", (11, 39)), ("/notes", (42, 48))]),
    ],
)
def test_b16_repeated_punctuation_and_newlines_survive(keep, expected):
    text = "Line one.\n\nLine two. Dr. Kim left;; see ../notes"
    chunks = chars(30, 0, keep_separator=keep).split(text)
    assert [(c.text, c.span) for c in chunks] == expected
    # the paragraph break is never rewritten as a space
    assert texts(chars(100, 0, keep_separator=keep).split(text)) == [text]


# --- B17: literal separators are escaped; merges re-insert the matched text ------------


def test_b17_literal_separator_is_escaped():
    text = "Red fox. Blue jay. Green frog."
    chunker = chars(10, 0, separators=[". "], keep_separator=False)
    chunks = chunker.split(text)
    assert texts(chunks) == ["Red fox", "Blue jay", "Green frog."]
    assert [c.span for c in chunks] == [(0, 7), (9, 17), (19, 30)]
    assert chunks[-1].metadata["length"] == 11  # oversized and unsplittable: emitted alone


def test_b17_literal_dot_is_not_any_character():
    chunks = chars(4, 0, separators=[".", ""], keep_separator=False).split("abcdefgh")
    assert texts(chunks) == ["abcd", "efgh"]  # "." never matched, so characters were used


@pytest.mark.parametrize("keep", ["end", "start", False])
def test_b17_regex_separator_reinserts_matched_text_not_pattern(keep):
    text = "Red fox\tBlue jay\nGreen frog"
    chunker = chars(17, 0, separators=[r"\s"], keep_separator=keep, is_separator_regex=True)
    chunks = chunker.split(text)
    assert "\\s" not in "".join(texts(chunks))
    assert texts(chunks) == ["Red fox\tBlue jay", "Green frog"]
    check_chunks(chunks, text)


def test_b17_keep_false_measures_the_real_separator_text():
    # Two newlines between pieces count 2 characters, so "a\n\nbb" (5) does not fit in 4.
    chunks = chars(4, 0, separators=["\n"], keep_separator=False).split("a\n\nbb\nc")
    assert texts(chunks) == ["a", "bb\nc"]  # LangChain: ["a\nbb", "c"], counting one "\n"


def test_regex_with_capture_groups_and_lookaround():
    text = "One. Two! Three? Four."
    groups = chars(10, 0, separators=[r"([.!?]) "], is_separator_regex=True)
    assert texts(groups.split(text)) == ["One. Two!", "Three?", "Four."]
    look = chars(10, 0, separators=[r"(?<=[.!?]) "], is_separator_regex=True, keep_separator=False)
    assert texts(look.split(text)) == ["One. Two!", "Three?", "Four."]


# --- B18: where the separator goes -------------------------------------------------------


def test_b18_keep_end_keeps_punctuation_with_its_sentence():
    text = "Kites fly. Boats sail. Trains run."
    chunks = RecursiveTokenChunker(13, 0, separators=CHROMA_SEPARATORS, length_function=len).split(text)
    assert texts(chunks) == ["Kites fly.", "Boats sail.", "Trains run."]
    assert [c.span for c in chunks] == [(0, 10), (11, 22), (23, 34)]


@pytest.mark.parametrize("keep", ["start", True])
def test_b18_keep_start_reproduces_the_reference(keep):
    text = "Kites fly. Boats sail. Trains run."
    chunker = RecursiveTokenChunker(13, 0, separators=CHROMA_SEPARATORS, keep_separator=keep, length_function=len)
    chunks = chunker.split(text)
    assert texts(chunks) == ["Kites fly", ". Boats sail", ". Trains run."]
    assert [c.span for c in chunks] == [(0, 9), (9, 21), (21, 34)]


def test_b18_reference_matches_langchain():
    lc = pytest.importorskip("langchain_text_splitters")
    text = "Kites fly. Boats sail. Trains run."
    for keep in (True, "end"):
        splitter = lc.RecursiveCharacterTextSplitter(
            chunk_size=13, chunk_overlap=0, separators=CHROMA_SEPARATORS, keep_separator=keep
        )
        ours = RecursiveTokenChunker(13, 0, keep_separator=keep, length_function=len)
        assert splitter.split_text(text) == texts(ours.split(text))


# --- B19: strip_whitespace applies to unsplittable pieces too --------------------------


@pytest.mark.parametrize("keep", ["end", "start", False])
def test_b19_oversized_piece_is_stripped(keep):
    text = "go extraordinarily\nfar"
    chunks = chars(5, 0, separators=["\n", " "], keep_separator=keep).split(text)
    assert texts(chunks) == ["go", "extraordinarily", "far"]
    assert chunks[1].span == (3, 18)
    assert chunks[1].metadata["length"] == 15


def test_b19_without_stripping_the_whitespace_stays():
    text = "go extraordinarily\nfar"
    chunks = chars(5, 0, separators=["\n", " "], strip_whitespace=False).split(text)
    assert texts(chunks) == ["go ", "extraordinarily\n", "far"]
    check_chunks(chunks, text)


def test_b19_langchain_leaves_the_piece_unstripped():
    """Documented difference: LangChain's oversized piece keeps its space; ours is stripped."""
    lc = pytest.importorskip("langchain_text_splitters")
    splitter = lc.RecursiveCharacterTextSplitter(chunk_size=5, chunk_overlap=0, separators=["\n", " "])
    assert splitter.split_text("go extraordinarily\nfar") == ["go", " extraordinarily", "far"]


# --- B20: empty, whitespace-only, zero lengths -------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n\t", "\u3000\u00a0 ", "\n\n\n\n"])
@pytest.mark.parametrize("strip", [True, False])
def test_b20_empty_and_whitespace_only(text, strip):
    assert RecursiveTokenChunker(3, 1, strip_whitespace=strip).split(text) == []
    assert chars(3, 1, strip_whitespace=strip).split(text) == []


def words(s: str) -> int:
    return len(s.split())


@pytest.mark.parametrize("keep", ["end", "start", False])
@pytest.mark.parametrize("size, overlap", [(1, 0), (2, 1), (3, 0), (5, 4)])
def test_b20_zero_length_whitespace_pieces(keep, size, overlap):
    text = "a  b \n\n c d\te   f  \n g h i j k l"
    chunker = RecursiveTokenChunker(size, overlap, length_function=words, keep_separator=keep)
    chunks = chunker.split(text)
    assert_valid(text, chunks, chunker, covers=keep is not False)
    assert all(words(c.text) <= size for c in chunks)


def test_b20_length_always_zero_gives_one_chunk():
    text = "a b c\n\nd e f"
    chunks = RecursiveTokenChunker(1, 0, length_function=lambda s: 0).split(text)
    assert texts(chunks) == [text]


# --- no recursion blow-up ------------------------------------------------------------------


def test_long_text_without_separators_does_not_recurse():
    text = "x" * 50_000
    chunks = chars(1000, 100).split(text)
    assert [len(c.text) for c in chunks[:-1]] == [1000] * (len(chunks) - 1)
    assert chunks[-1].end == len(text)


@pytest.mark.parametrize(
    "size, expected",
    # A piece is split further unless it is *below* the size (LangChain's rule), so with
    # size 1 even the one-token "go" is cut into characters.
    [(1, ["g", "o", "🚀", "g", "o"]), (2, ["go", "🚀", "go"])],
)
def test_single_character_longer_than_size_is_emitted_alone(size, expected):
    # "🚀" is 3 cl100k tokens: no separator can cut it, so it is one oversized chunk.
    text = "go 🚀 go"
    chunks = RecursiveTokenChunker(size, 0).split(text)
    assert texts(chunks) == expected
    rocket = chunks[expected.index("🚀")]
    assert rocket.metadata == {"length": 3, "n_tokens": 3, "tokenizer": "cl100k_base"}


def test_size_one_in_characters():
    chunks = chars(1, 0).split("ab c")
    assert texts(chunks) == ["a", "b", "c"]


def test_regex_that_matches_empty_strings_terminates():
    text = "abc def"
    for pattern in [r"\s*", r"(?=b)", r"x*"]:
        chunker = chars(2, 1, separators=[pattern], is_separator_regex=True)
        chunks = chunker.split(text)
        assert_valid(text, chunks, chunker, covers=True)


def test_many_nested_levels():
    text = ("word " * 30 + "\n") * 30
    chunker = chars(7, 3, separators=["\n\n\n", "\n\n", "\n", "  ", " ", ""])
    assert_valid(text, chunker.split(text), chunker)


# --- non-additive lengths: every chunk is measured as a whole -----------------------------


@pytest.mark.parametrize("overlap", [0, 5, 30])
def test_non_additive_length_is_checked_on_the_whole_chunk(overlap):
    def squared(s: str) -> int:  # pieces of 3 + 3 measure 18 but together 36
        return len(s) ** 2

    text = "ab cd ef gh ij kl mn op qr st uv wx yz"
    chunker = RecursiveTokenChunker(40, overlap, length_function=squared, keep_separator="end")
    chunks = chunker.split(text)
    assert_valid(text, chunks, chunker)
    assert all(squared(c.text) <= 40 for c in chunks)


# --- LangChain parity ---------------------------------------------------------------------

PARITY_TEXTS = [
    "Kites fly. Boats sail. Trains run.",
    (
        "Retrieval-augmented generation splits documents into chunks before embedding them.\n\n"
        "Chunk size matters: too small and the context is lost; too large and the retriever "
        "returns noise. Is that so? Yes! In 2024, Chroma's report measured recall, precision "
        "and IoU for several chunkers.\nA new line starts here.\n\n\nThree newlines above."
    ),
    (
        "def split(text):\n    return [t for t in text.split('\\n') if t]\n\n"
        "# Costs: $1,234.56 (approx.)   -- see https://example.com/a?b=c&d=e\n"
        "  Indented line\twith\ttabs, ellipses... and 'quotes' \"double\".  "
    ),
    "Mr. Smith's cat didn't like it; she'd rather sleep.\n" * 7,
    "- item one\n- item two is a bit longer than the others\n- three\n\n## Heading\n\nBody text!",
    "supercalifragilisticexpialidocious " * 3 + "tail",
    "检索增强生成（RAG）先把文档切成块，再做向量化。块太小会丢失上下文，块太大会引入噪声。🚀 Mixed 中英 text!",
    "   leading and trailing spaces   \n\n   second paragraph   ",
]
PARITY_SIZES = [(5, 0), (10, 0), (10, 3), (25, 0), (25, 12), (40, 10), (80, 20), (200, 0)]


def langchain_chunks(text, size, overlap, separators, keep):
    lc = pytest.importorskip("langchain_text_splitters")
    splitter = lc.RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, separators=separators, keep_separator=keep, length_function=len
    )
    return splitter.split_text(text)


def matches_langchain(lc_texts, ours):
    """Ours equals LangChain's output after the documented normalisation.

    LangChain's texts are stripped and empty ones dropped (its oversized pieces are not
    stripped, B19); an overlapping LangChain chunk that only repeats the end of the
    previous chunk (its new pieces were whitespace) is absent from ours.
    """
    lc_norm = [t.strip() for t in lc_texts if t.strip()]
    j, prev = 0, None
    for t in lc_norm:
        if j < len(ours) and t == ours[j]:
            prev, j = t, j + 1
        elif prev is not None and prev.endswith(t):
            continue  # redundant chunk, dropped by chunkwise
        else:
            return False
    return j == len(ours)


@pytest.mark.parametrize("keep", [True, "end"])
@pytest.mark.parametrize(
    "separators", [CHROMA_SEPARATORS, LC_DEFAULT_SEPARATORS, ["\n", " "]], ids=["chroma", "lc", "nl-space"]
)
@pytest.mark.parametrize("size, overlap", PARITY_SIZES)
def test_parity_with_langchain(keep, separators, size, overlap):
    for text in PARITY_TEXTS:
        expected = langchain_chunks(text, size, overlap, separators, keep)
        chunker = chars(size, overlap, separators=separators, keep_separator=keep)
        chunks = chunker.split(text)
        got = texts(chunks)
        assert matches_langchain(expected, got), (text, expected, got)
        assert_valid(text, chunks, chunker, covers=True)


def test_parity_is_exact_when_langchain_is_consistent():
    text = PARITY_TEXTS[1]
    for keep in (True, "end"):
        for size, overlap in [(40, 0), (60, 20), (100, 30)]:
            expected = langchain_chunks(text, size, overlap, CHROMA_SEPARATORS, keep)
            assert texts(chars(size, overlap, keep_separator=keep).split(text)) == expected


def test_difference_redundant_overlap_chunk_is_dropped():
    """LangChain emits "onzeta", which only repeats the end of "lonzeta"; chunkwise does not."""
    text = "epsilonzeta 3.5  "
    expected = langchain_chunks(text, 7, 6, CHROMA_SEPARATORS, "end")
    assert expected == ["epsilon", "psilonz", "silonze", "ilonzet", "lonzeta", "onzeta", "3.", "5"]
    got = texts(chars(7, 6).split(text))
    assert got == ["epsilon", "psilonz", "silonze", "ilonzet", "lonzeta", "3.", "5"]


def test_difference_keep_false_chunks_are_slices():
    """LangChain drops empty pieces between repeated separators and rejoins with one separator."""
    text = "alpha\n\nalpha. delta  "
    expected = langchain_chunks(text, 29, 3, ["\n", " "], False)
    assert expected == ["alpha\nalpha. delta"]  # not a slice of the text
    assert texts(chars(29, 3, separators=["\n", " "], keep_separator=False).split(text)) == ["alpha\n\nalpha. delta"]


ALPHABET = st.sampled_from(list("abcde") + [" ", " ", "\n", "\n\n", ".", "?", "!", "\t", "é", "  ", "猫", ". "])


@st.composite
def split_cases(draw):
    text = "".join(draw(st.lists(ALPHABET, max_size=60)))
    size = draw(st.integers(1, 30))
    overlap = draw(st.integers(0, size - 1))
    separators = draw(st.sampled_from([CHROMA_SEPARATORS, LC_DEFAULT_SEPARATORS, ["\n", " "], [". ", " ", ""]]))
    return text, size, overlap, separators


@settings(max_examples=300, deadline=None)
@given(split_cases(), st.sampled_from([True, "end"]))
def test_parity_with_langchain_property(case, keep):
    text, size, overlap, separators = case
    expected = langchain_chunks(text, size, overlap, separators, keep)
    got = texts(chars(size, overlap, separators=separators, keep_separator=keep).split(text))
    assert matches_langchain(expected, got), (expected, got)


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(split_cases(), st.sampled_from(["end", "start", False]), st.booleans())
def test_properties_characters(case, keep, strip):
    text, size, overlap, separators = case
    chunker = chars(size, overlap, separators=separators, keep_separator=keep, strip_whitespace=strip)
    chunks = chunker.split(text)
    # keep_separator=False leaves a separator out where two merge runs meet (". " in B17).
    assert_valid(text, chunks, chunker, covers=keep is not False)
    if "" in separators:
        assert all(len(c.text) <= size for c in chunks)


@settings(max_examples=150, deadline=None)
@given(
    st.text(st.sampled_from(list("Theqk brwn.,?!' \n猫🚀0123")), max_size=80),
    st.integers(1, 12),
    st.sampled_from(["end", "start"]),
    st.data(),
)
def test_properties_cl100k_tokens(text, size, keep, data):
    overlap = data.draw(st.integers(0, size - 1))
    chunker = RecursiveTokenChunker(size, overlap, keep_separator=keep)
    chunks = chunker.split(text)
    assert_valid(text, chunks, chunker)
    for c in chunks:
        assert c.metadata["n_tokens"] == count_tokens(c.text)
        assert c.metadata["tokenizer"] == "cl100k_base"


# --- tokens: Chroma's setting on English ---------------------------------------------------

PARAGRAPH = (
    "Chunking decides what a retriever can find. A document is cut into pieces, each piece is "
    "embedded, and at query time the pieces nearest to the question are returned. If a piece is "
    "too small, the sentence that answers the question may lose the context that makes it "
    "meaningful; if it is too large, the embedding averages over several topics and the relevant "
    "passage is diluted. Recursive splitting is a simple compromise: it prefers paragraph breaks, "
    "then line breaks, then sentence punctuation, and only falls back to spaces or single "
    "characters when nothing coarser works. Does it help? In Chroma's evaluation it did well! "
    "A recursive splitter with 200-token chunks and no overlap reached 88.1% recall.\n\n"
    "The second paragraph is short. It exists so that the paragraph separator is used first."
)


@pytest.mark.parametrize("size, overlap", [(20, 0), (50, 0), (50, 10), (100, 30), (400, 200)])
def test_chroma_separators_cl100k_english(size, overlap):
    chunker = RecursiveTokenChunker(size, overlap, separators=CHROMA_SEPARATORS)
    chunks = chunker.split(PARAGRAPH)
    assert_valid(PARAGRAPH, chunks, chunker)
    for c in chunks:
        assert c.metadata["n_tokens"] == count_tokens(c.text) <= size
    if size >= 50:  # sentences fit, so with "end" every chunk ends on sentence punctuation
        assert all(c.text[-1] in ".?!" for c in chunks)
    if overlap == 0:
        assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:]))


@pytest.mark.parametrize("size, overlap", [(20, 0), (50, 0), (50, 10), (100, 30)])
def test_chroma_reproduction_setting_matches_langchain_with_tokens(size, overlap):
    """keep_separator="start" + cl100k counts = Chroma's RecursiveTokenChunker (LangChain algorithm)."""
    expected = pytest.importorskip("langchain_text_splitters").RecursiveCharacterTextSplitter(
        chunk_size=size, chunk_overlap=overlap, separators=CHROMA_SEPARATORS, keep_separator=True,
        length_function=count_tokens,
    ).split_text(PARAGRAPH)
    got = texts(RecursiveTokenChunker(size, overlap, keep_separator="start").split(PARAGRAPH))
    assert matches_langchain(expected, got)
    if size >= 50:
        assert got == expected


def test_chroma_corpus_parity_with_langchain():
    mirror = os.environ.get("CHUNKWISE_DATA_MIRROR")
    path = Path(mirror or "/nonexistent") / "chroma" / "corpora" / "state_of_the_union.md"
    if not path.is_file():
        pytest.skip("Chroma corpora mirror not available")
    lc = pytest.importorskip("langchain_text_splitters")
    text = path.read_text(encoding="utf-8")
    for size, overlap in [(200, 0), (400, 200)]:
        expected = lc.RecursiveCharacterTextSplitter(
            chunk_size=size, chunk_overlap=overlap, separators=CHROMA_SEPARATORS, keep_separator=True,
            length_function=count_tokens,
        ).split_text(text)
        chunks = RecursiveTokenChunker(size, overlap, keep_separator="start").split(text)
        assert texts(chunks) == expected
        check_chunks(chunks, text)


def test_metadata_for_custom_length():
    chunks = chars(10, 0).split("abc def ghi jkl")
    assert all(set(c.metadata) == {"length"} for c in chunks)
    assert all(isinstance(c, Chunk) for c in chunks)


def test_docstring_examples():
    result = doctest.testmod(recursive_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_separator_is_never_searched_for_afterwards():
    # Repeated text: a search for the chunk text would find the first occurrence.
    text = "same words. same words. same words."
    chunks = chars(12, 0).split(text)
    assert [c.span for c in chunks] == [(0, 11), (12, 23), (24, 35)]
    assert [m.start() for m in re.finditer("same", text)] == [c.start for c in chunks]
