"""A user's own chunkers, imported by path in tests/test_byo_chunker.py ("plugin_chunkers:ClauseSplitter")."""

from __future__ import annotations

import re


class ClauseSplitter:
    """Splits after every semicolon or full stop (a user's chunker returning strings)."""

    def __init__(self, min_chars: int = 1):
        self.min_chars = min_chars

    def split_text(self, text):
        pieces = [p for p in re.split(r"(?<=[;.])\s+", text) if p]
        out, buf = [], ""
        for p in pieces:
            buf = f"{buf} {p}" if buf else p
            if len(buf) >= self.min_chars:
                out.append(buf)
                buf = ""
        return out + ([buf] if buf else [])


def shouting(text):
    """A splitter that rewrites its text: offsets cannot be recovered."""
    return [text.upper()]


class FakeChonkieChunk:
    def __init__(self, text, start_index, end_index):
        self.text, self.start_index, self.end_index = text, start_index, end_index


class WordPairs:
    """chonkie's protocol: chunk(text) -> objects with text, start_index, end_index."""

    def chunk(self, text):
        words = list(re.finditer(r"\S+", text))
        return [FakeChonkieChunk(text[a.start():b.end()], a.start(), b.end())
                for a, b in zip(words[::2], words[1::2] + [words[-1]] * (len(words) % 2))]
