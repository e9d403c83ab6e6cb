"""Chapter 4's answer (chunkwise.experiments.questions.chapter_answer) from hand-made run objects."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from chunkwise.experiments.questions import chapter_answer


def _boot(best, p_best, in_play, cells=("A", "B", "C"), winner=None, diff_best=None):
    table = pd.DataFrame({"p_best": [p_best.get(c, 0.0) for c in cells],
                          "diff_best": [(diff_best or {}).get(c, (0, 0, 0))[0] for c in cells],
                          "diff_best_low": [(diff_best or {}).get(c, (0, 0, 0))[1] for c in cells],
                          "diff_best_high": [(diff_best or {}).get(c, (0, 0, 0))[2] for c in cells]},
                         index=list(cells))
    return SimpleNamespace(best=best, table=table, in_play=list(in_play), winner=winner,
                           ruled_out=[c for c in cells if c not in in_play])


def _agree(n, rho, lo, hi):
    return SimpleNamespace(cells=[f"c{i}" for i in range(n)], spearman=rho, spearman_ci=(lo, hi),
                           describe=lambda: f"rho {rho:.2f}")


def test_chapter_answer_by_hand():
    generated = SimpleNamespace(questions=[0] * 74, candidates=[0] * 100,
                                dropped={"excerpt_not_found": 20, "duplicate": 6, "malformed_json": 0})
    grid = SimpleNamespace(questions=[0] * 132, seconds=12.34, n_embedded=0)
    runs = {"published": grid, "generated": SimpleNamespace(questions=[0] * 60, seconds=3.0, n_embedded=5)}
    boots = {("published", "recall"): _boot("A", {"A": 0.7}, ["A", "B"], diff_best={"B": (-0.05, -0.09, -0.01)}),
             ("generated", "recall"): _boot("B", {"B": 0.95}, ["B"], winner="B"),
             ("published", "iou"): _boot("A", {"A": 0.5}, ["A", "B", "C"]),
             ("generated", "iou"): _boot("A", {"A": 0.6}, ["A"])}
    answer, facts = chapter_answer(generated, 60, {"calls": 100, "cache_hits": 100}, runs,
                                   SimpleNamespace(seconds=1.0, n_embedded=0), boots,
                                   overall=_agree(24, 0.88, 0.75, 0.9), at_k5=_agree(6, 0.5, -0.1, 0.9))
    assert answer.startswith("The local model kept 74 of its 100 candidate questions, 60 of them on the corpora "
                             "of the grid, where the published set has 132.")
    assert ("among the 6 cells at k = 5, where only the chunker and the retriever change, rho is 0.50 (95% CI "
            "-0.10 to 0.90), an interval that reaches 0, so much of the overall agreement comes from k") in answer
    assert ("the published set names no winner (its best cell, A, is best in only 70% of resamples) and keeps "
            "2 of 3 cells in play; the generated set names a winner, B (best in 95% of resamples) and keeps 1 of "
            "3 in play.") in answer
    assert "the generated set's best cell is 5.0 recall points behind their best (paired bootstrap 95% CI 1.0 " \
           "to 9.0), so it is still in play." in answer
    assert facts.splitlines()[0] == ("- generated set: 74 questions kept of 100 candidates, 60 of them on the corpora "
                                     "of the grid; dropped by reason: excerpt not found 20, duplicate 6; LLM calls "
                                     "100, from the cache 100")
    with pytest.raises(ValueError, match="rank agreements"):
        chapter_answer(generated, 60, {"calls": 1, "cache_hits": 1}, runs, grid, boots)
    only, _ = chapter_answer(generated, 60, {"calls": 1, "cache_hits": 1}, {"generated": runs["generated"]}, grid,
                             boots)
    assert only.startswith("No checked question set was given, so the chapter generated 74 questions from 100")
