"""Chapter 4's answer (chunkwise.experiments.questions.chapter_answer) from hand-made run objects, and
the chapter's tables (one_line, cell_table, cell_subsets, agreement_table)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from chunkwise.answerbox import DETAILS_TITLE, MAX_LEAD_WORDS, visible_words
from chunkwise.evaluation.robustness import Robustness, SpecResult
from chunkwise.experiments.questions import (
    agreement_table,
    cell_subsets,
    cell_table,
    chapter_answer,
    one_line,
)


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
    lead, details = answer.split(f":::{{dropdown}} {DETAILS_TITLE}")
    # the lead: what a generated set is good for here, the verdict at k = 5 with its interval, the winner
    assert lead == ("**Check a locally generated question set against reviewed questions before choosing with "
                    "it.** Rank agreement at k = 5: rho 0.50 (95% CI -0.10 to 0.90), **cannot tell**. Its winner "
                    "is in play under the checked set. Nobody reviewed its 60 questions.\n\n")
    assert details.strip().startswith("The local model kept 74 of its 100 candidate questions, 60 of them on the "
                                      "corpora of the grid, where the published set has 132.")
    assert answer.endswith("\n\n:::\n")
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
    assert only.startswith("**Read the 74 generated questions before trusting a verdict from them**: with no "
                           "checked set, this run could not test")
    assert "\n\nNo checked question set was given, so the chapter generated 74 questions from 100" in only


def _panel(cls, n_alt=3, flips=(), not_run=(), delta=0.2, unit="rho"):
    spec = SpecResult("primary", 0.5, -0.1, 0.9, "cannot tell", 60, float("nan"))
    alts = tuple(SpecResult(f"alternative {i}", 0.5, -0.1, 0.9, "cannot tell", 60, float("nan"))
                 for i in range(n_alt))
    return Robustness(cls, spec, alts, tuple(flips), delta, unit, tuple(not_run))


def test_chapter_answer_lead_fits_the_box_in_its_longest_branch_and_details_keep_the_numbers():
    generated = SimpleNamespace(questions=[0] * 1074, candidates=[0] * 2000, dropped={"duplicate": 926})
    runs = {"published": SimpleNamespace(questions=[0] * 4720, seconds=7.3, n_embedded=0),
            "generated": SimpleNamespace(questions=[0] * 1074, seconds=3.6, n_embedded=0)}
    cells = [f"cell {i} with a long name | hybrid | k=5" for i in range(24)]
    boots = {("published", "recall"): _boot(cells[0], {cells[0]: 0.92}, [cells[0], cells[5]], cells=cells,
                                            diff_best={cells[5]: (-0.018, -0.039, 0.003)}),
             ("generated", "recall"): _boot(cells[5], {cells[5]: 0.43}, cells[:18], cells=cells),
             ("published", "iou"): _boot(cells[1], {cells[1]: 0.85}, cells[:2], cells=cells),
             ("generated", "iou"): _boot(cells[1], {cells[1]: 0.64}, cells[:3], cells=cells)}
    # the longest lead: "cannot tell", the longest robustness class, no winner with some cells in play
    rob = _panel("no effect larger than delta", n_alt=12, delta=12.5, unit="recall points", not_run=["x"] * 11)
    answer, _ = chapter_answer(generated, 1074, {"calls": 147, "cache_hits": 147}, runs,
                               SimpleNamespace(seconds=3.5, n_embedded=0), boots,
                               overall=_agree(96, 0.96, 0.89, 1.0), at_k5=_agree(24, 0.74, -0.36, 1.0),
                               robustness=rob)
    lead, details = answer.split(":::{dropdown}")
    assert lead.startswith("**Check a locally generated question set against reviewed questions")
    assert "It names no winner: 18 of 24 cells in play (checked set: 2)." in lead
    assert "no effect larger than 12.5 recall points; all 12 alternatives agree; 11 not run here" in lead
    assert visible_words(lead) <= MAX_LEAD_WORDS
    # the details hold every number the box held before
    for text in ("kept 1074 of its 2000 candidate questions", "Spearman's rho 0.96 (95% CI 0.89 to 1.00)",
                 "rho is 0.74 (95% CI -0.36 to 1.00), an interval that reaches 0",
                 f"its best cell, {cells[5]}, is best in only 43% of resamples) and keeps 18 of 24 in play",
                 "1.8 recall points behind their best (paired bootstrap 95% CI -0.3 to 3.9), so it is still in play",
                 "whether the 1074 generated questions in the grid are right",
                 "**Robustness of the rank agreement** (cannot tell): no effect larger than 12.5 recall points"):
        assert text in details, text
    # agree, a robust panel, a winner that is the checked set's best
    boots[("generated", "recall")] = _boot(cells[0], {cells[0]: 0.95}, cells[:1], cells=cells, winner=cells[0])
    answer, _ = chapter_answer(generated, 1074, {"calls": 1, "cache_hits": 1}, runs, runs["generated"], boots,
                               overall=_agree(96, 0.96, 0.89, 1.0), at_k5=_agree(24, 0.74, 0.36, 1.0),
                               robustness=_panel("robust", n_alt=2))
    lead = answer.split(":::{dropdown}")[0]
    assert lead == ("**A locally generated question set can shortlist chunker and retriever.** Rank agreement at "
                    "k = 5: rho 0.74 (95% CI 0.36 to 1.00), **agree**; robust: all 2 declared alternatives agree. "
                    "Its winner is the checked set's best cell. Nobody reviewed its 1074 questions.\n\n")
    assert "**Robustness of the rank agreement** (cannot tell): robust: all 2 declared alternatives agree." in answer
    # without a checked set: a lead and the sentence it rests on
    only, _ = chapter_answer(generated, 1074, {"calls": 1, "cache_hits": 1}, {"generated": runs["generated"]},
                             runs["generated"], boots)
    assert visible_words(only.split(":::{dropdown}")[0]) <= MAX_LEAD_WORDS


# --------------------------------------------------------------------------------------
# the chapter's tables (one_line, cell_table, cell_subsets, agreement_table)
# --------------------------------------------------------------------------------------

CELLS = ["A | dense | k=1", "B | dense | k=5", "C | bm25 | k=5", "D | dense | k=5"]
GRID_TABLE = pd.DataFrame({"cell": CELLS, "chunker": ["A", "B", "C", "D"],
                           "retriever": ["dense", "dense", "bm25", "dense"], "k": [1, 5, 5, 5],
                           "recall": [0.1, 0.2, 0.3, 0.4], "iou": [0.4, 0.3, 0.2, 0.1]})


def _grid(recall, iou, n_questions, table=GRID_TABLE):
    """A grid result whose every question scores each cell the same (means = the scores)."""
    def scores(metric):
        return pd.DataFrame([recall if metric == "recall" else iou] * n_questions, columns=CELLS)

    return SimpleNamespace(table=table, questions=list(range(n_questions)), scores=scores)


def test_one_line_by_hand():
    assert one_line("What is\n\n  the  answer? ") == "What is the answer?"
    assert one_line("\tx\r\ny") == "x y"
    assert one_line(None) == "None"
    assert one_line("") == ""


def test_cell_table_by_hand():
    other = GRID_TABLE.assign(recall=[0.5, 0.1234, 0.0, 1.0])
    out = cell_table({"published": SimpleNamespace(table=GRID_TABLE),
                      "generated": SimpleNamespace(table=other.iloc[::-1])}, "recall")
    assert list(out.index) == CELLS  # the first run's order
    assert list(out.columns) == ["chunker", "retriever", "k", "published", "generated"]
    assert out["published"].tolist() == [10.0, 20.0, 30.0, 40.0]
    assert out["generated"].tolist() == [50.0, 12.3, 0.0, 100.0]  # aligned by cell, 1 decimal
    assert out.loc["C | bm25 | k=5", "retriever"] == "bm25"
    with pytest.raises(ValueError):
        cell_table({}, "recall")


def test_cell_subsets_by_hand():
    subsets = dict(cell_subsets(GRID_TABLE, [1, 5, 10]))
    assert list(subsets) == ["all cells", "k = 1", "k = 5", "k = 10", "dense, k = 5 (chunkers only)"]
    assert subsets["all cells"] == CELLS
    assert subsets["k = 1"] == ["A | dense | k=1"]
    assert subsets["k = 5"] == CELLS[1:]
    assert subsets["k = 10"] == []
    assert subsets["dense, k = 5 (chunkers only)"] == ["B | dense | k=5", "D | dense | k=5"]


def test_agreement_table_by_hand():
    # recall: generated swaps B and C. Over the 4 cells: ranks 1 2 3 4 against 1 3 2 4, sum of
    # d^2 = 2, rho = 1 - 6 * 2 / (4 * 15) = 0.8; 1 discordant pair of 6, tau = (5 - 1) / 6. Over
    # the 3 cells at k = 5: rho = 1 - 6 * 2 / (3 * 8) = 0.5, tau = (2 - 1) / 3.
    # iou: generated reverses the order, rho = tau = -1. Every question scores alike, so every
    # resample gives the same correlation and the intervals are single points.
    pub = _grid([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], 3)
    gen = _grid([0.1, 0.3, 0.2, 0.4], [0.4, 0.3, 0.2, 0.1], 2)
    out = agreement_table(pub, gen, [1, 5], n_resamples=20, seed=0)
    control = "control spearman (2 published q.)"  # as many published questions as generated
    assert list(out.columns) == ["metric", "cells", "n_cells", "spearman", "spearman_ci", "kendall",
                                 "kendall_ci", control]
    # "k = 1" (1 cell) and "dense, k = 5" (2 cells) have too few cells to rank
    assert out[["metric", "cells", "n_cells"]].values.tolist() == [
        ["recall", "all cells", 4], ["recall", "k = 5", 3], ["iou", "all cells", 4], ["iou", "k = 5", 3]]
    assert out["spearman"].tolist() == [0.8, 0.5, -1.0, -1.0]
    assert out["kendall"].tolist() == [0.67, 0.33, -1.0, -1.0]
    assert out["spearman_ci"].tolist() == ["0.80 to 0.80", "0.50 to 0.50", "-1.00 to -1.00",
                                           "-1.00 to -1.00"]
    assert out[control].tolist() == [1.0] * 4  # the published set against a sample of itself
    assert agreement_table(pub, gen, [1], n_resamples=20).columns.tolist()[-1] == control
    few = _grid([0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], 3, table=GRID_TABLE.iloc[:2])
    assert agreement_table(few, gen, [1, 5], n_resamples=20).empty  # no subset of 3 cells
