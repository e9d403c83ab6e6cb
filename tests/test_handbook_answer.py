"""Chapter 1's answer (chunkwise.experiments.handbook.chapter_answer) from a hand-made sweep, and
the chapter's table display (format_number, show_table, compact_sweep_table)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from chunkwise.answerbox import DETAILS_TITLE, MAX_LEAD_WORDS, visible_words
from chunkwise.experiments.handbook import (
    COMPACT_COLUMNS,
    chapter_answer,
    compact_sweep_table,
    format_number,
    show_table,
)


def _row(text, b, rule, amount, mcs, chunks, shifts, recall, extra, wd):
    return {"text": text, "buffer_size": b, "threshold": rule, "amount": amount, "min_chunk_size": mcs,
            "chunks": chunks, "shifts_found": shifts, "recall": recall, "extra_splits": extra, "windowdiff": wd}


def test_chapter_answer_by_hand():
    rows = [
        # LangChain's defaults: 3 chunks, 1 of 2 shifts; the control cut in 3
        _row("handbook", 1, "percentile", 95.0, np.nan, 3, "1 of 2", 0.5, 1, 0.40),
        _row("control", 1, "percentile", 95.0, np.nan, 3, "0 of 0", np.nan, 2, 0.0),
        # both shifts, WindowDiff 0.10, 2 extra splits; the control in 4
        _row("handbook", 0, "percentile", 80.0, 150.0, 5, "2 of 2", 1.0, 2, 0.10),
        _row("control", 0, "percentile", 80.0, 150.0, 4, "0 of 0", np.nan, 3, 0.0),
        # a standard-deviation rule that leaves the control whole and finds both shifts
        _row("handbook", 1, "standard_deviation", 1.5, np.nan, 4, "2 of 2", 1.0, 1, 0.20),
        _row("control", 1, "standard_deviation", 1.5, np.nan, 1, "0 of 0", np.nan, 0, 0.0),
    ]
    box = chapter_answer(pd.DataFrame(rows), n_sentences=20, n_gold=2, n_control_sentences=20)
    lead, text = _parts(box)
    assert lead == ("**Do not trust LangChain's semantic-chunker defaults to find topic shifts, and test any "
                    "setting on a text without one**: the defaults find 1 of 2 shifts in the 20-sentence handbook "
                    "text; of 3 settings, 1 finds every shift and leaves the single-topic control whole. Exact "
                    "counts on two short texts, not estimates: no interval, other documents untested.")
    assert text.startswith("On the 20-sentence handbook text with 2 real topic shifts, LangChain's defaults "
                           "(`buffer_size=1`, 95th percentile) make 3 chunks and find 1 of 2 shifts. ")
    assert ("2 of the 3 settings of the sweep find every shift; the best of them by WindowDiff (buffer_size 0, "
            "percentile 80, min_chunk_size 150 characters) pays 2 extra splits for it and still cuts the "
            "single-topic control text into 4 chunks.") in text
    assert ("A percentile threshold never leaves a text whole: in all 2 percentile settings it cuts the control, "
            "where there is nothing to find, into 3 to 4 chunks, as many as the handbook in 1 of them") in text
    assert "Of the 1 settings that do leave the control whole (rules: standard deviation), 1 finds every " \
           "handbook shift." in text
    assert text.endswith("the run cannot say how often the same happens on other documents.")
    assert "of 20 sentences each" in text


def _parts(box: str) -> tuple[str, str]:
    """The lead and the folded details of an answer box."""
    lead, rest = box.split(f"\n\n:::{{dropdown}} {DETAILS_TITLE}\n\n")
    assert rest.endswith("\n\n:::\n")
    return lead, rest[:-len("\n\n:::\n")]


def test_every_lead_is_short_and_the_details_keep_the_counts():
    # the longest lead: defaults that miss a shift, settings that find every shift and leave the control whole
    rows = [
        _row("handbook", 1, "percentile", 95.0, np.nan, 2, "0 of 2", 0.0, 0, 0.50),
        _row("control", 1, "percentile", 95.0, np.nan, 3, "0 of 0", np.nan, 2, 0.0),
        _row("handbook", 1, "standard_deviation", 1.5, np.nan, 4, "2 of 2", 1.0, 1, 0.20),
        _row("control", 1, "standard_deviation", 1.5, np.nan, 1, "0 of 0", np.nan, 0, 0.0),
        _row("handbook", 0, "interquartile", 1.5, 150.0, 4, "2 of 2", 1.0, 1, 0.25),
        _row("control", 0, "interquartile", 1.5, 150.0, 1, "0 of 0", np.nan, 0, 0.0),
    ]
    lead, details = _parts(chapter_answer(pd.DataFrame(rows), n_sentences=1234, n_gold=2, n_control_sentences=18))
    assert visible_words(lead) <= MAX_LEAD_WORDS
    assert "find 0 of 2 shifts in the 1234-sentence handbook text; of 3 settings, 2 find every shift" in lead
    assert "make 2 chunks and find 0 of 2 shifts." in details
    assert "2 of the 3 settings of the sweep find every shift" in details
    assert "Of the 2 settings that do leave the control whole (rules: interquartile, standard deviation), 2 find " \
           "every handbook shift." in details
    assert "(1234 and 18 sentences)" in details
    # every branch of the lead: defaults absent or finding every shift; no setting leaves the control whole
    found = [r for r in rows if r["threshold"] != "percentile"] + [
        _row("handbook", 1, "percentile", 95.0, np.nan, 3, "2 of 2", 1.0, 0, 0.0),
        _row("control", 1, "percentile", 95.0, np.nan, 2, "0 of 0", np.nan, 1, 0.0)]
    lead, _ = _parts(chapter_answer(pd.DataFrame(found), n_sentences=18, n_gold=2, n_control_sentences=18))
    assert lead.startswith("**LangChain's semantic-chunker defaults find the topic shifts here; still test any")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    absent = pd.DataFrame(rows[2:] + [_row("handbook", 0, "percentile", 80.0, 150.0, 5, "2 of 2", 1.0, 2, 0.10),
                                      _row("control", 0, "percentile", 80.0, 150.0, 4, "0 of 0", np.nan, 3, 0.0)])
    lead, details = _parts(chapter_answer(absent, n_sentences=18, n_gold=2, n_control_sentences=18))
    assert lead.startswith("**Test any semantic-chunker setting on a text without a topic shift before trusting it**: "
                           "LangChain's defaults were not in this sweep; of 3 settings, 2 find every shift and leave")
    assert "LangChain's defaults (`buffer_size=1`, 95th percentile) were not in this sweep." in details
    cut = pd.DataFrame(rows[:2])
    lead, details = _parts(chapter_answer(cut, n_sentences=18, n_gold=2, n_control_sentences=18))
    assert "none of 1 settings leaves the single-topic control whole." in lead
    assert "None of the 1 settings of the sweep finds every shift." in details
    assert "No setting of the sweep leaves the control text whole." in details


# --------------------------------------------------------------------------------------
# the chapter's table display (format_number, show_table, compact_sweep_table)
# --------------------------------------------------------------------------------------

def _cells(styler) -> list[str]:
    """The body cells of a rendered table, row by row."""
    return re.findall(r">([^<>]*)</td>", styler.to_html())


def test_format_number_whole_numbers_lose_their_decimals():
    assert format_number(3.0) == "3"
    assert format_number(np.int64(4)) == "4"
    assert format_number(-2.0) == "-2"
    assert format_number(1e6) == "1e+06"  # the 'g' format of a whole number, as the chapter prints it
    assert format_number(0.5) == "0.50"
    assert format_number(2 / 3, digits=3) == "0.667"
    assert format_number(0.125, digits=1) == "0.1"
    with pytest.raises(ValueError):
        format_number("x")


def test_show_table_formats_floats_relabels_headers_and_hides_the_index():
    df = pd.DataFrame({"mean_chunk_tokens": [200.0, 12.3456, np.nan], "n": [1, 2, 3]}, index=[7, 8, 9])
    styled = show_table(df, digits=1)
    assert list(styled.data.columns) == ["mean tokens", "n"]  # chunkwise.labels' reader label
    assert _cells(styled) == ["200", "1", "12.3", "2", "-", "3"]  # row by row; NaN as '-'
    html = styled.to_html()
    assert 'class="dataframe"' in html and "row_heading" not in html
    assert list(df.columns) == ["mean_chunk_tokens", "n"]  # the input is left as it was
    with pytest.raises(TypeError):
        show_table([1, 2])


def test_compact_sweep_table_short_headers_and_rules():
    row = {"text": "handbook", "buffer_size": 1, "threshold": "standard_deviation", "amount": 1.5,
           "min_chunk_size": np.nan, "chunks": 3, "shifts_found": "2 of 2", "extra_splits": 0,
           "mid_sentence_cuts": 0, "f1": 2 / 3, "pk": 0.25, "windowdiff": 0.125, "recall": 1.0}
    iqr = {**row, "threshold": "interquartile", "amount": 1.0, "min_chunk_size": 150.0, "chunks": 1,
           "shifts_found": "0 of 2", "f1": 0.0, "pk": 0.5, "windowdiff": 0.5}
    styled = compact_sweep_table(pd.DataFrame([row, iqr], index=[5, 2]))
    assert list(styled.data.columns) == ["buffer", "rule", "amount", "min size", "chunks", "found",
                                         "extra", "mid-sent.", "f1", "Pk", "WD"]
    assert list(styled.data.index) == [0, 1]
    assert _cells(styled) == ["1", "std", "1.50", "-", "3", "2 of 2", "0", "0", "0.67", "0.25", "0.12",
                              "1", "iqr", "1", "150", "1", "0 of 2", "0", "0", "0", "0.50", "0.50"]
    with pytest.raises(KeyError):
        compact_sweep_table(pd.DataFrame([row]).drop(columns=["pk"]))
    assert len(COMPACT_COLUMNS) == 11
