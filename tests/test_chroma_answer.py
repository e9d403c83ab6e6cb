"""Chapter 2's answer (chunkwise.experiments.chroma.chapter_answer) from hand-made tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from chunkwise.experiments import chroma as ch


def test_chapter_answer_by_hand():
    comparison = pd.DataFrame({"recall_reported": [80.0, 70.0, np.nan], "recall_delta": [1.5, -2.5, np.nan],
                               "precision_omega_reported": [5.0, 6.0, 7.0],
                               "precision_omega_delta": [-0.4, 0.2, 0.0]})
    clear = pd.DataFrame({"chunker": ["TokenText 250 overlap 125"], "diff": [3.456], "diff_low": [1.0],
                          "diff_high": [5.0]})
    common = dict(comparison=comparison, placement="report", recall_tolerance=2.0, corpora_run=["a", "b"],
                  embedding_model="all-MiniLM-L6-v2", metric_mode="chroma", top_k=5, baseline="Recursive 200",
                  clear=clear, n_chunkers=4, n_questions=472, best="A", runner_up="B")
    text = ch.chapter_answer(same_setup=True, all_five=True, top_here=(0.5, -0.2, 1.1), top_true=(0.8, 0.1, 1.5),
                             k_sentence="With dense search, X.", untested=["the report's te3 table"], **common)
    assert text.startswith("At the report's placement, our {term}`span recall` is within 2 points of the report's "
                           "all-MiniLM-L6-v2 value for 1 of 2 chunkers (largest gap 2.5 points), and "
                           "{term}`precision_Ω`, which no retriever can move, differs from it by -0.4 to +0.2 "
                           "points.")
    assert ("Against Recursive 200, 1 of the 3 other chunkers differ in recall beyond the noise of 472 questions "
            "(95% {term}`paired bootstrap` interval excluding 0): TokenText 250/125 +3.46 [+1.00, +5.00].") in text
    assert ("At the top, A leads B by +0.50 [-0.20, +1.10] at the report's placement, within the noise, and by "
            "+0.80 [+0.10, +1.50] at the chunks' true offsets, beyond it.") in text
    assert text.endswith("With dense search, X. This run does not test the report's te3 table.")
    cut = ch.chapter_answer(same_setup=False, all_five=False, **common)
    assert cut.startswith("This run scores 472 questions on 2 of the report's five corpora (a, b), so its means "
                          "are {term}`not comparable here`")
    assert ch.noise_word(-1, 1) == "within" and ch.short_label("TokenText 250 overlap 125") == "TokenText 250/125"
