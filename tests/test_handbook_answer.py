"""Chapter 1's answer (chunkwise.experiments.handbook.chapter_answer) from a hand-made sweep."""

from __future__ import annotations

import numpy as np
import pandas as pd

from chunkwise.experiments.handbook import chapter_answer


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
    text = chapter_answer(pd.DataFrame(rows), n_sentences=20, n_gold=2, n_control_sentences=20)
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
