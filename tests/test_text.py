"""Sentence splitting: LangChain mode equals re.split; robust mode handles the B05 kind."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.text import LANGCHAIN_SENTENCE_REGEX, regex_split_sentences, split_sentences


def texts(sents):
    return [s.text for s in sents]


@given(st.text(alphabet=st.sampled_from(list("ab .?!\n\t。")), max_size=60))
@settings(max_examples=300, deadline=None)
def test_langchain_mode_equals_re_split(text):
    got = split_sentences(text, mode="langchain")
    assert texts(got) == re.split(LANGCHAIN_SENTENCE_REGEX, text)
    for s in got:
        assert text[s.start : s.end] == s.text


@given(st.lists(st.sampled_from(list("aB3 .?!\n\t。！？”\"") + ["a.m. ", "Dr. ", "3.5 ", "e.g. "]), max_size=40).map("".join))
@settings(max_examples=300, deadline=None)
def test_robust_mode_spans_and_no_empty_sentences(text):
    got = split_sentences(text)
    prev_end = 0
    for s in got:
        assert s.text.strip() == s.text and s.text
        assert text[s.start : s.end] == s.text
        assert s.start >= prev_end
        assert text[prev_end : s.start].strip() == ""  # only whitespace is left out
        prev_end = s.end
    assert text[prev_end:].strip() == ""


def test_b05_abbreviations_and_decimals():
    text = "Dr. Lee arrived at 9 a.m. today. The dose was 3.5 mg."
    assert texts(split_sentences(text, "langchain")) == ["Dr.", "Lee arrived at 9 a.m.", "today.", "The dose was 3.5 mg."]
    assert texts(split_sentences(text)) == ["Dr. Lee arrived at 9 a.m. today.", "The dose was 3.5 mg."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The page fires at 9 a.m. local time. Then it stops.", ["The page fires at 9 a.m. local time.", "Then it stops."]),
        ("We meet at 5 p.m. Bring notes.", ["We meet at 5 p.m.", "Bring notes."]),
        ("Use a tool, e.g. a hammer, or i.e. a stone. Done.", ["Use a tool, e.g. a hammer, or i.e. a stone.", "Done."]),
        ("Sales in the U.S. rose. Exports fell.", ["Sales in the U.S. rose.", "Exports fell."]),
        ("Upgrade to v1.2.3 now. Version 2.0 follows.", ["Upgrade to v1.2.3 now.", "Version 2.0 follows."]),
        ("J. Smith wrote it. Mr. Brown read it.", ["J. Smith wrote it.", "Mr. Brown read it."]),
        ("Pi is 3.14159. Really? Yes!", ["Pi is 3.14159.", "Really?", "Yes!"]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("今天下雨。明天晴！真的吗？", ["今天下雨。", "明天晴！", "真的吗？"]),
        ("他说：“好。”然后走了。", ["他说：“好。”", "然后走了。"]),
        ("「いいえ。」と言った。", ["「いいえ。」", "と言った。"]),
        ("Heading\n\nBody text without a stop", ["Heading", "Body text without a stop"]),
        ("Sky is blue. Grass is green.\n", ["Sky is blue.", "Grass is green."]),
        ("", []),
        ("  \n\t ", []),
    ],
)
def test_robust_examples(text, expected):
    assert texts(split_sentences(text)) == expected


def test_langchain_mode_splits_am_and_keeps_empty_tail():
    assert texts(split_sentences("Start at 9 a.m. local time.", "langchain")) == ["Start at 9 a.m.", "local time."]
    assert texts(split_sentences("One. Two.\n", "langchain")) == ["One.", "Two.", ""]
    assert texts(split_sentences("", "langchain")) == [""]


def test_regex_split_drop_empty_and_errors():
    got = regex_split_sentences("One. Two.\n", LANGCHAIN_SENTENCE_REGEX, drop_empty=True)
    assert texts(got) == ["One.", "Two."]
    assert [s.metadata["index"] for s in got] == [0, 1]
    with pytest.raises(ValueError, match="not a valid regular expression"):
        regex_split_sentences("x", "(")
    with pytest.raises(ValueError, match="mode must be"):
        split_sentences("x", mode="nltk")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expects a str"):
        split_sentences(b"x")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is no. We left.", ["The answer is no.", "We left."]),
        ("See No. 5 for details.", ["See No. 5 for details."]),
        ("Steps:\n1. Mix flour.\n2. Add water.", ["Steps:\n1. Mix flour.", "2. Add water."]),
        ('Question?" she asked. Yes.', ['Question?" she asked.', "Yes."]),
    ],
)
def test_robust_review_cases(text, expected):
    assert texts(split_sentences(text)) == expected
