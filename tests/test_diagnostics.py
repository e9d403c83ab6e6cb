"""Chunk diagnostics (chunkwise.evaluation.diagnostics) by hand."""

from __future__ import annotations

import pytest

from chunkwise.evaluation.diagnostics import chunk_diagnostics, structure_blocks

DOC = (
    "Intro line one. Intro line two.\n"        # 0-32
    "| a | b |\n| 1 | 2 |\n| 3 | 4 |\n"          # table: 32-61
    "```\ncode here\n```\n"                     # fence: 62-79
    "Tail sentence."
)


def test_structure_blocks_by_hand():
    blocks = structure_blocks(DOC)
    t0 = DOC.index("| a")
    assert blocks["tables"] == [(t0, DOC.index("| 3 | 4 |") + len("| 3 | 4 |"))]
    c0 = DOC.index("```")
    assert blocks["code"] == [(c0, DOC.rindex("```") + 3)]


def test_cuts_inside_a_table_a_fence_and_a_sentence():
    mid_table = DOC.index("| 1")          # a cut between table rows splits the table
    mid_code = DOC.index("code here") + 4  # inside the fenced block
    mid_sentence = DOC.index("line two")  # inside "Intro line two."
    spans = [(0, mid_sentence), (mid_sentence, mid_table), (mid_table, mid_code), (mid_code, len(DOC))]
    whole = [(0, DOC.index("| a")), (DOC.index("| a"), len(DOC))]
    d = chunk_diagnostics({"d": DOC}, {"cuts": {"d": spans}, "clean": {"d": whole}}, floor_tokens=8)
    assert d.loc["cuts", "n_chunks"] == 4 and d.loc["cuts", "tables"] == 1 and d.loc["cuts", "code_blocks"] == 1
    assert d.loc["cuts", "tables_cut"] == 1.0 and d.loc["cuts", "code_blocks_cut"] == 1.0
    # three cuts: inside a sentence, between table rows (a line end, not a sentence end) and inside code
    assert d.loc["cuts", "mid_sentence_cuts"] == 1.0
    assert d.loc["clean", "tables_cut"] == 0.0 and d.loc["clean", "code_blocks_cut"] == 0.0
    assert d.loc["clean", "mid_sentence_cuts"] == 0.0  # after "two.\n": between sentences
    with pytest.raises(ValueError, match="floor_tokens"):
        chunk_diagnostics({"d": DOC}, {"x": {"d": whole}}, floor_tokens=0)


def test_share_under_floor_and_percentiles():
    text = "a b c d e f g h i j"  # ten one-token words (and spaces)
    spans = [(0, 1), (2, 3), (4, 19)]  # "a", "b", "c d e f g h i j"
    d = chunk_diagnostics({"t": text}, {"x": {"t": spans}}, floor_tokens=2)
    assert d.loc["x", "share_under_floor"] == pytest.approx(2 / 3, abs=1e-3)
    assert d.loc["x", "max_tokens"] == 8 and d.loc["x", "median_tokens"] == 1.0
