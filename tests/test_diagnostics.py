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


def test_report_html_shows_each_question_and_marks_the_gold(tmp_path):
    from chunkwise.evaluation.grid import GridConfig, run_grid
    from chunkwise.figures import report_html

    docs = {"a.txt": "Kale wants 45 cm. Beans climb the fence.", "b.txt": "Leeks need <deep> soil."}
    import pandas as pd

    q = pd.DataFrame({"question_id": ["Q1"], "question": ["beans fence?"], "corpus_id": ["a.txt"],
                      "references": [[{"start_index": 18, "end_index": 40}]]})
    res = run_grid(docs, q, GridConfig(chunkers=["Sentence:8"], retrievers=["bm25"], top_k=[1]),
                   cache_dir=tmp_path, show_progress=False)
    page = report_html(res, docs, res.diagnostics(docs))
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and "http" not in page
    assert "recall 100%</span> Q1: beans fence?" in page
    assert "<mark>Beans climb the fence.</mark>" in page  # the retrieved chunk, gold marked
    assert "found by 1 of 1 cells: Sentence 8 | bm25 | k=1" in page and "Chunk diagnostics" in page
    with pytest.raises(ValueError, match="not in the result"):
        report_html(res, docs, cell="nope")


def test_share_of_documents_kept_in_one_chunk_and_the_warning():
    from chunkwise.evaluation.diagnostics import chunk_diagnostics, single_chunk_warnings

    docs = {"a": "One. Two. Three.", "b": "Four.", "c": "Five. Six.", "empty": "   "}
    chunkings = {"whole": {"a": [(0, 16)], "b": [(0, 5)], "c": [(0, 5), (6, 10)], "empty": []},
                 "split": {"a": [(0, 4), (5, 16)], "b": [(0, 5)], "c": [(0, 5), (6, 10)], "empty": []}}
    diag = chunk_diagnostics(docs, chunkings)
    # three non-empty documents: "whole" keeps a and b in one chunk (2/3), "split" only b (1/3)
    assert diag.loc["whole", "share_docs_one_chunk"] == pytest.approx(2 / 3)
    assert diag.loc["split", "share_docs_one_chunk"] == pytest.approx(1 / 3)
    lines = single_chunk_warnings(diag)
    assert len(lines) == 1 and lines[0].startswith("warning: whole keeps 67% of the documents whole")
