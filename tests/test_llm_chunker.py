"""LLMSemanticChunker with the shared fake chat model (the model's content is not the point here)."""

from __future__ import annotations

import re

import pytest

from chunkwise.chunkers import LLMSemanticChunker
from fakes import FakeChatModel

TEXT = " ".join(f"Sentence {i} is about topic {'A' if i < 6 else 'B' if i < 12 else 'C'} only." for i in range(18))


def scripted(answers):
    """Answers the split lists in turn, one per request or repair (validated as chat_json does)."""
    return FakeChatModel([{"split_after": a} for a in answers])


def test_splits_where_the_model_says_and_offsets_are_exact():
    chunker = LLMSemanticChunker(scripted([[3, 6]]), piece_size=8, window_tokens=10_000)
    pieces = chunker.splitter.split(TEXT)
    chunks = chunker.split(TEXT)
    # One window holds everything; splits after pieces 3 and 6 (1-based) -> 3 chunks.
    assert [c.metadata["sentence_end"] for c in chunks] == [3, 6, len(pieces)]
    for c in chunks:
        assert TEXT[c.start : c.end] == c.text


def test_window_walk_moves_forward_and_invalid_answers_are_reasked():
    # First window: an out-of-range id (invalid) then a valid answer; later windows: no split.
    client = scripted([[999], [2], [], [], [], [], [], [], [], [], [], []])
    chunker = LLMSemanticChunker(client, piece_size=8, window_tokens=40)
    chunks = chunker.split(TEXT)
    assert chunks[0].metadata["sentence_end"] == 2
    numbers = [int(x) for p in client.prompts for x in re.findall(r"PIECES (\d+) to", p)]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)  # always forward


def test_validation():
    with pytest.raises(TypeError, match="LLMClient"):
        LLMSemanticChunker(object())
    with pytest.raises(ValueError, match="window_tokens"):
        LLMSemanticChunker(scripted([]), piece_size=50, window_tokens=10)
    assert LLMSemanticChunker(scripted([])).split("") == []


def test_non_integer_ids_are_reasked_not_crashed():
    chunker = LLMSemanticChunker(scripted([[3.0], ["2"], [2]]), piece_size=8, window_tokens=10_000)
    chunks = chunker.split(TEXT)
    assert chunks[0].metadata["sentence_end"] == 2


def test_last_stats_count_windows_repairs_and_windows_without_split(tmp_path):
    import json

    from fakes import ScriptedLLM

    # window 1: an out-of-range piece (re-asked), then a split after piece 2; later windows: no split
    replies = [json.dumps({"split_after": [999]}), json.dumps({"split_after": [2]})]
    replies += [json.dumps({"split_after": []})] * 20
    llm = ScriptedLLM(replies, tmp_path / "llm.sqlite")
    chunker = LLMSemanticChunker(llm, piece_size=8, window_tokens=40)
    chunks = chunker.split(TEXT)
    st = chunker.last_stats
    windows = len(llm.requests) - 1  # every request but the re-ask opened a window
    assert st["repairs"] == 1 and st["windows"] == windows >= 3
    assert st["windows_without_split"] == windows - 1 and st["splits"] == 1 and len(chunks) == 2
    assert st["pieces"] == len(chunker.splitter.split(TEXT))
