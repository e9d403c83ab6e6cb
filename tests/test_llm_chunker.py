"""LLMSemanticChunker with a stub client (the model's content is not the point here)."""

from __future__ import annotations

import re

import pytest

from chunkwise.chunkers import LLMSemanticChunker

TEXT = " ".join(f"Sentence {i} is about topic {'A' if i < 6 else 'B' if i < 12 else 'C'} only." for i in range(18))


class StubClient:
    """Answers with fixed split lists per request; records the prompts and validates like chat_json."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.prompts = []

    def chat_json(self, messages, schema=None, validator=None, max_repairs=2, **kw):
        self.prompts.append(messages[-1]["content"])
        for _ in range(max_repairs + 1):
            obj = {"split_after": self.answers.pop(0)}
            try:
                validator(obj)
                return obj, None
            except ValueError:
                continue
        raise RuntimeError("no valid answer")


def test_splits_where_the_model_says_and_offsets_are_exact():
    chunker = LLMSemanticChunker(StubClient([[3, 6]]), piece_size=8, window_tokens=10_000)
    pieces = chunker.splitter.split(TEXT)
    chunks = chunker.split(TEXT)
    # One window holds everything; splits after pieces 3 and 6 (1-based) -> 3 chunks.
    assert [c.metadata["sentence_end"] for c in chunks] == [3, 6, len(pieces)]
    for c in chunks:
        assert TEXT[c.start : c.end] == c.text


def test_window_walk_moves_forward_and_invalid_answers_are_reasked():
    # First window: an out-of-range id (invalid) then a valid answer; later windows: no split.
    client = StubClient([[999], [2], [], [], [], [], [], [], [], [], [], []])
    chunker = LLMSemanticChunker(client, piece_size=8, window_tokens=40)
    chunks = chunker.split(TEXT)
    assert chunks[0].metadata["sentence_end"] == 2
    numbers = [int(x) for p in client.prompts for x in re.findall(r"PIECES (\d+) to", p)]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)  # always forward


def test_validation():
    with pytest.raises(TypeError, match="LLMClient"):
        LLMSemanticChunker(object())
    with pytest.raises(ValueError, match="window_tokens"):
        LLMSemanticChunker(StubClient([]), piece_size=50, window_tokens=10)
    assert LLMSemanticChunker(StubClient([])).split("") == []


def test_non_integer_ids_are_reasked_not_crashed():
    chunker = LLMSemanticChunker(StubClient([[3.0], ["2"], [2]]), piece_size=8, window_tokens=10_000)
    chunks = chunker.split(TEXT)
    assert chunks[0].metadata["sentence_end"] == 2
