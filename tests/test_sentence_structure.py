"""SentenceChunker and StructureChunker: boundaries computed by hand with word tokens."""

from __future__ import annotations

import pytest

from chunkwise.chunkers import SentenceChunker, StructureChunker
from chunkwise.chunkers.structure import parse_markdown_sections
from chunkwise.tokens import WhitespaceSpanner, count_tokens

W = WhitespaceSpanner()

# Sentences (word counts): "Cats purr." 0-10 (2) | "Dogs bark loudly." 11-28 (3) |
# "Birds sing." 29-40 (2) | "Fish swim in water." 41-60 (4) | "Frogs jump." 61-72 (2)
FIVE = "Cats purr. Dogs bark loudly. Birds sing. Fish swim in water. Frogs jump."


def spans(chunks):
    return [(c.start, c.end) for c in chunks]


def assert_exact(chunks, text):
    for c in chunks:
        assert text[c.start : c.end] == c.text


# ---------------------------------------------------------------- SentenceChunker


def test_sentence_packing_without_overlap():
    chunks = SentenceChunker(5, tokenizer=W).split(FIVE)
    # 2+3 = 5 fits, +2 = 7 does not; 2+4 = 6 > 5; 4+2 = 6 > 5; then the last one.
    assert spans(chunks) == [(0, 28), (29, 40), (41, 60), (61, 72)]
    assert [c.metadata["n_tokens"] for c in chunks] == [5, 2, 4, 2]
    assert [(c.metadata["sentence_start"], c.metadata["sentence_end"]) for c in chunks] == [
        (0, 2), (2, 3), (3, 4), (4, 5)
    ]
    assert all(c.metadata["tokenizer"] == "whitespace" for c in chunks)
    assert_exact(chunks, FIVE)


def test_sentence_overlap_repeats_whole_sentences():
    chunks = SentenceChunker(6, sentence_overlap=1, tokenizer=W).split(FIVE)
    # [Cats, Dogs] (5; +Birds = 7), [Dogs, Birds] (5; +Fish = 9), [Birds, Fish] (6), [Fish, Frogs] (6).
    assert spans(chunks) == [(0, 28), (11, 40), (29, 60), (41, 72)]
    assert_exact(chunks, FIVE)


def test_sentence_overlap_gives_way_when_it_leaves_no_room():
    chunks = SentenceChunker(5, sentence_overlap=1, tokenizer=W).split(FIVE)
    # After [Dogs, Birds], repeating Birds (2) with Fish (4) is 6 > 5: the overlap is dropped.
    assert spans(chunks) == [(0, 28), (11, 40), (41, 60), (61, 72)]


def test_oversized_sentence_is_sub_split_by_the_recursive_chunker():
    text = "Cats purr. Dogs bark very loudly today. Birds sing."
    chunks = SentenceChunker(3, tokenizer=W).split(text)
    # The 5-word sentence is cut at spaces into 3 + 2 words; its neighbours stay whole.
    assert [(c.text, c.start, c.end, c.metadata["split_sentence"]) for c in chunks] == [
        ("Cats purr.", 0, 10, False),
        ("Dogs bark very", 11, 25, True),
        ("loudly today.", 26, 39, True),
        ("Birds sing.", 40, 51, False),
    ]
    assert [c.metadata["sentence_start"] for c in chunks] == [0, 1, 1, 2]


def test_sentence_chunker_uses_the_robust_splitter_and_cl100k_by_default():
    text = "Dr. Lee arrived at 9 a.m. today. She left soon after. It rained."
    chunks = SentenceChunker(20).split(text)
    # "Dr." and "a.m." do not end sentences; the first two sentences are 17 cl100k tokens together.
    assert [c.text for c in chunks] == ["Dr. Lee arrived at 9 a.m. today. She left soon after.", "It rained."]
    assert chunks[0].metadata["n_tokens"] == count_tokens(chunks[0].text) == 17
    assert chunks[0].metadata["tokenizer"] == "cl100k_base"


def test_sentence_chunker_empty_and_bad_input():
    assert SentenceChunker(5, tokenizer=W).split("") == []
    assert SentenceChunker(5, tokenizer=W).split(" \n ") == []
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        SentenceChunker(0)
    with pytest.raises(ValueError, match="chunk_size"):
        SentenceChunker(True)
    with pytest.raises(ValueError, match="sentence_overlap must be an int >= 0"):
        SentenceChunker(5, sentence_overlap=-1)
    with pytest.raises(ValueError, match="sentence_overlap"):
        SentenceChunker(5, sentence_overlap=1.5)
    with pytest.raises(TypeError, match="tokenizer"):
        SentenceChunker(5, tokenizer=3.0)
    with pytest.raises(TypeError, match="text must be a str"):
        SentenceChunker(5).split(b"bytes")


# ---------------------------------------------------------------- StructureChunker

DOC = (
    "Preface line.\n"  # 0-14
    "\n"
    "# Guide\n"  # 15
    "Intro text here.\n"
    "\n"
    "## Install\n"  # 41
    "Run the installer.\n"
    "\n"
    "### Linux\n"  # 72
    "```bash\n"  # 82
    "# not a heading\n"
    "\n"
    "make install\n"
    "```\n"  # ends at 123
    "\n"
    "## Usage #\n"  # 125
    "| a | b |\n"  # 136
    "|---|---|\n"
    "| 1 | 2 |\n"  # ends at 165
)


def test_sections_heading_paths_and_fences():
    secs = parse_markdown_sections(DOC)
    assert [(s.start, s.end, s.level, s.path) for s in secs] == [
        (0, 15, 0, ()),
        (15, 41, 1, ("Guide",)),
        (41, 72, 2, ("Guide", "Install")),
        (72, 125, 3, ("Guide", "Install", "Linux")),  # the '# not a heading' in the fence is not one
        (125, 166, 2, ("Guide", "Usage")),  # closing '#' is not part of the title
    ]
    assert secs[3].protected == ((82, 123),)
    assert secs[4].protected == ((136, 165),)


def test_structure_chunks_are_sections_when_they_fit():
    chunks = StructureChunker(100, tokenizer=W).split(DOC)
    assert spans(chunks) == [(0, 13), (15, 39), (41, 70), (72, 123), (125, 165)]
    assert [c.metadata["headings"] for c in chunks] == [
        [], ["Guide"], ["Guide", "Install"], ["Guide", "Install", "Linux"], ["Guide", "Usage"]
    ]
    assert [c.metadata["heading_level"] for c in chunks] == [0, 1, 2, 3, 2]
    assert not any(c.metadata["oversized"] for c in chunks)
    assert_exact(chunks, DOC)


def test_structure_never_cuts_code_or_tables_and_flags_oversized_ones():
    chunks = StructureChunker(4, tokenizer=W).split(DOC)
    got = [(c.start, c.end, c.metadata["oversized"]) for c in chunks]
    # "# Guide\nIntro text here." is 5 words > 4: one block, cut by the recursive chunker at the
    # newline. The fenced block (10 words) and the table (9 words) stay whole, each with the
    # heading line right before it (a bare heading chunk would carry no content).
    assert got == [
        (0, 13, False),
        (15, 22, False),
        (23, 39, False),
        (41, 51, False),
        (52, 70, False),
        (72, 123, True),
        (125, 165, True),
    ]
    assert_exact(chunks, DOC)


def test_plain_text_packs_blank_line_blocks():
    text = "One two three.\n\nFour five.\n\nSix seven eight nine.\n\nTen."
    # blocks: 3 words (0-14), 2 (16-26), 4 (28-49), 1 (51-55)
    chunks = StructureChunker(5, tokenizer=W).split(text)
    assert spans(chunks) == [(0, 26), (28, 55)]
    assert [c.metadata["n_tokens"] for c in chunks] == [5, 5]
    assert all(c.metadata["headings"] == [] for c in chunks)


def test_setext_headings_thematic_breaks_and_hashtags():
    text = "Title\n=====\n\nBody.\n\nSub\n---\n\nMore.\n\n---\n\nEnd #tag\n#tag"
    secs = parse_markdown_sections(text)
    assert [(s.start, s.level, s.path) for s in secs] == [(0, 1, ("Title",)), (20, 2, ("Title", "Sub"))]
    assert [s.path for s in parse_markdown_sections(text, setext=False)] == [()]


def test_unclosed_fence_runs_to_the_end_and_hides_headings():
    text = "# A\n```\n# B\ncode\n"
    secs = parse_markdown_sections(text)
    assert [(s.path, s.protected) for s in secs] == [(("A",), ((4, 17),))]


def test_tilde_fence_needs_the_same_character_to_close():
    text = "~~~~\n```\n# no\n~~~~\n# yes\n"
    assert [s.path for s in parse_markdown_sections(text)] == [(), ("yes",)]


def test_wikitext_headings_spaced_and_plain():
    text = " = Kites = \n Kites fly .\n = = Flight = = \n Up .\n = = = Wind = = = \n Gusts .\n == Care ==\nDry them.\n"
    secs = parse_markdown_sections(text)
    assert [(s.start, s.level, s.path) for s in secs] == [
        (0, 1, ("Kites",)),
        (25, 2, ("Kites", "Flight")),
        (48, 3, ("Kites", "Flight", "Wind")),
        (76, 2, ("Kites", "Care")),
    ]
    assert [s.path for s in parse_markdown_sections(text, wikitext=False)] == [()]
    # Not headings: unequal runs, no title, an equation.
    assert [s.path for s in parse_markdown_sections("= x ==\n= = =\na = b = c\n")] == [()]


def test_structure_bad_input():
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        StructureChunker(-3)
    with pytest.raises(ValueError, match="setext must be True or False"):
        StructureChunker(10, setext="yes")
    with pytest.raises(ValueError, match="wikitext must be True or False"):
        StructureChunker(10, wikitext=1)
    with pytest.raises(TypeError, match="text must be a str"):
        StructureChunker(10).split(None)
    with pytest.raises(TypeError, match="text must be a str"):
        parse_markdown_sections(42)
    assert StructureChunker(10).split("") == []
    assert StructureChunker(10).split("\n\n  \n") == []


# ---------------------------------------------------------------- guarantees on real text


def test_giant_sentence_respects_the_cap_bug_b10():
    text = " ".join(f"word{i}" for i in range(300))  # one 300-word "sentence", no punctuation
    chunks = SentenceChunker(100).split(text)
    assert all(c.metadata["split_sentence"] for c in chunks)
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert "".join(text[c.start : c.end] for c in chunks).replace(" ", "") == text.replace(" ", "")


def _corpus(name):
    import os
    from pathlib import Path

    path = Path(os.environ.get("CHUNKWISE_DATA_MIRROR", "")) / "chroma" / "corpora" / f"{name}.md"
    if not path.is_file():
        pytest.skip(f"data mirror without {name}.md")
    return path.read_text(encoding="utf-8")


def test_every_sentence_in_exactly_one_chunk_and_under_budget_bug_b07():
    from chunkwise.text import split_sentences

    text = _corpus("state_of_the_union")
    chunks = SentenceChunker(200).split(text)
    assert all(c.metadata["n_tokens"] <= 200 and count_tokens(c.text) == c.metadata["n_tokens"] for c in chunks)
    covered = [i for c in chunks for i in range(c.metadata["sentence_start"], c.metadata["sentence_end"])
               if not c.metadata["split_sentence"]]
    assert covered == list(range(len(split_sentences(text))))
    assert_exact(chunks, text)


def test_structure_chunks_cover_a_corpus_in_order_under_budget():
    text = _corpus("wikitexts")
    chunks = StructureChunker(400).split(text)
    assert_exact(chunks, text)
    # The corpus's WikiText-103 headings give the sections their paths.
    assert chunks[0].metadata["headings"] == ["Valkyria Chronicles III"]
    assert ["Valkyria Chronicles III", "Development", "Music"] in [c.metadata["headings"] for c in chunks]
    assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:]))
    assert all(c.metadata["n_tokens"] <= 400 for c in chunks if not c.metadata["oversized"])
    # Nothing but whitespace is left out.
    gaps = [text[a.end : b.start] for a, b in zip(chunks, chunks[1:])]
    assert all(not g.strip() for g in gaps)


def test_docstring_examples_of_the_new_modules():
    import doctest

    from chunkwise.chunkers import hierarchical, late, sentence, structure

    for module in (sentence, structure, hierarchical, late):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_heading_stack_pops_to_the_right_level_and_crlf_lines():
    text = "# A\n## B\n### C\n## D\n# E\n### F\n"
    assert [s.path for s in parse_markdown_sections(text)] == [
        ("A",), ("A", "B"), ("A", "B", "C"), ("A", "D"), ("E",), ("E", "F")
    ]
    crlf = "# Guide\r\n\r\nIntro.\r\n\r\n## Install\r\n```\r\n# no\r\n```\r\n"
    chunks = StructureChunker(100, tokenizer=W).split(crlf)
    assert [(c.text, c.metadata["headings"]) for c in chunks] == [
        ("# Guide\r\n\r\nIntro.", ["Guide"]),
        ("## Install\r\n```\r\n# no\r\n```", ["Guide", "Install"]),
    ]
