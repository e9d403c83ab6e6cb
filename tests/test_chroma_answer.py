"""Chapter 2's answer (chunkwise.experiments.chroma.chapter_answer) from hand-made tables, and the
chapter's small helpers (say, whole_numbers, format_points, precision_omega_at)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from chunkwise.answerbox import DETAILS_TITLE, MAX_LEAD_WORDS, visible_words
from chunkwise.evaluation.robustness import Robustness, SpecResult
from chunkwise.experiments import chroma as ch


def _parts(box: str) -> tuple[str, str]:
    """The lead and the folded details of an answer box."""
    lead, rest = box.split(f"\n\n:::{{dropdown}} {DETAILS_TITLE}\n\n")
    assert rest.endswith("\n\n:::\n")
    return lead, rest[:-len("\n\n:::\n")]


def test_chapter_answer_by_hand():
    comparison = pd.DataFrame({"recall_reported": [80.0, 70.0, np.nan], "recall_delta": [1.5, -2.5, np.nan],
                               "precision_omega_reported": [5.0, 6.0, 7.0],
                               "precision_omega_delta": [-0.4, 0.2, 0.0]})
    clear = pd.DataFrame({"chunker": ["TokenText 250 overlap 125"], "diff": [3.456], "diff_low": [1.0],
                          "diff_high": [5.0]})
    common = dict(comparison=comparison, placement="report", recall_tolerance=2.0, corpora_run=["a", "b"],
                  embedding_model="all-MiniLM-L6-v2", metric_mode="chroma", top_k=5, baseline="Recursive 200",
                  clear=clear, n_chunkers=4, n_questions=472, best="A", runner_up="B")
    box = ch.chapter_answer(same_setup=True, all_five=True, top_here=(0.5, -0.2, 1.1), top_true=(0.8, 0.1, 1.5),
                            k_sentence="With dense search, X.", untested=["the report's te3 table"], **common)
    lead, text = _parts(box)
    # the clear chunker is ahead of the baseline, so none falls behind; the lead reads the true offsets
    assert lead == ("**Use A**, first by recall and ahead of B beyond the noise; no chunker falls behind Recursive 200 "
                    "beyond the noise.")
    assert text.startswith("At the report's placement, our {term}`span recall` is within 2 points of the report's "
                           "all-MiniLM-L6-v2 value for 1 of 2 chunkers (largest gap 2.5 points), and "
                           "{term}`precision_Ω`, which no retriever can move, differs from it by -0.4 to +0.2 "
                           "points.")
    assert ("Against Recursive 200, 1 of the 3 other chunkers differ in recall beyond the noise of 472 questions "
            "(95% {term}`paired bootstrap` interval excluding 0): TokenText 250/125 +3.46 [+1.00, +5.00].") in text
    assert ("At the top, A leads B by +0.50 [-0.20, +1.10] at the report's placement, within the noise, and by "
            "+0.80 [+0.10, +1.50] at the chunks' true offsets, beyond it.") in text
    assert text.endswith("With dense search, X. This run does not test the report's te3 table.")
    _, cut = _parts(ch.chapter_answer(same_setup=False, all_five=False, **common))
    assert cut.startswith("This run scores 472 questions on 2 of the report's five corpora (a, b), so its means "
                          "are {term}`not comparable here`")
    assert ch.noise_word(-1, 1) == "within" and ch.short_label("TokenText 250 overlap 125") == "TokenText 250/125"


def _k_panel(cls="fragile", verdict="no", n_alt=2, flips=(("hybrid retrieval", "cannot tell"),), not_run=()):
    alts = tuple(SpecResult(f"alt {i}", 0.0, -1.5, 1.4, "cannot tell", 472, float("nan")) for i in range(n_alt))
    return Robustness(cls, SpecResult("primary", 0.0, 0.0, 0.0, verdict, 472, float("nan")), alts, tuple(flips),
                      1.0, "recall points", tuple(not_run))


def test_the_lead_is_short_for_the_published_run_and_the_longest_case():
    comparison = pd.DataFrame({"recall_reported": [80.0] * 8, "recall_delta": [1.8, -0.5] + [0.3] * 6,
                               "precision_omega_reported": [5.0] * 8,
                               "precision_omega_delta": [-1.3, 1.9] + [0.0] * 6})
    # the published run's five clear chunkers (chapter 2, 472 questions)
    clear = pd.DataFrame({"chunker": ["Recursive 250 overlap 125", "TokenText 250 overlap 125", "Kamradt",
                                      "KamradtMod 300", "LLM"],
                          "diff": [4.18, 7.39, -9.76, -12.83, -5.62], "diff_low": [1.17, 3.94, -14.70, -17.56, -9.88],
                          "diff_high": [7.14, 10.81, -4.72, -8.05, -1.35]})
    kw = dict(comparison=comparison, same_setup=True, placement="report", recall_tolerance=2.0,
              corpora_run=["a"] * 5, all_five=True, embedding_model="all-MiniLM-L6-v2", metric_mode="chroma",
              top_k=5, baseline="Recursive 200", n_chunkers=11, n_questions=472)
    box = ch.chapter_answer(clear=clear, best="TokenText 250 overlap 125", runner_up="Recursive 250 overlap 125",
                            top_here=(3.21, 0.30, 6.25), top_true=(2.10, -0.81, 5.13), k_robustness=_k_panel(),
                            k_sentence="The plan's verdict (dense retrieval) is **no**, fragile: 1 of 2 declared "
                                       "alternatives disagree (hybrid retrieval gives cannot tell).", **kw)
    lead, details = _parts(box)
    assert lead == ("**Use TokenText 250/125 or Recursive 250/125**, the top two, within the noise of each other; "
                    "avoid the 3 chunkers behind Recursive 200 beyond the noise, by 5.6 to 12.8 points. Can the "
                    "winner lose at larger k? **no** (fragile: 1 of 2 declared alternatives disagree).")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    for number in ("within 2 points", "8 of 8 chunkers (largest gap 1.8 points)", "-1.3 to +1.9 points",
                   "5 of the 10 other chunkers", "472 questions", "Recursive 250/125 +4.18 [+1.17, +7.14]",
                   "TokenText 250/125 +7.39 [+3.94, +10.81]", "Kamradt -9.76 [-14.70, -4.72]",
                   "KamradtMod 300 -12.83 [-17.56, -8.05]", "LLM -5.62 [-9.88, -1.35]",
                   "by +3.21 [+0.30, +6.25] at the report's placement, beyond the noise",
                   "+2.10 [-0.81, +5.13] at the chunks' true offsets, within it",
                   "**no**, fragile: 1 of 2 declared alternatives disagree (hybrid retrieval gives cannot tell)"):
        assert number in details, number
    # the longest lead: three-word labels, a four-word verdict and the longest robustness words
    long_k = _k_panel("no effect larger than delta", verdict="one two three four", n_alt=12, flips=(),
                      not_run=["x"] * 11)
    box = ch.chapter_answer(clear=clear.assign(chunker=[f"Some Long Name{i}" for i in range(5)]),
                            best="First Long Name", runner_up="Second Long Name", top_here=None,
                            top_true=(-0.5, -2.0, -0.1), k_robustness=long_k,
                            **{**kw, "baseline": "Base Line Name"})
    lead, _ = _parts(box)
    assert lead.startswith("**Use Second Long Name**, ahead of First Long Name beyond the noise at the chunks' true "
                           "offsets; avoid the 3 chunkers behind Base Line Name beyond the noise, by 5.6 to 12.8 points.")
    assert "**one two three four** (no effect larger than 1 recall points; all 12 alternatives agree; 11 not run here)" in lead
    assert visible_words(lead) <= MAX_LEAD_WORDS
    # labels too long for a lead are replaced; one chunker behind; no runner-up; nobody first
    box = ch.chapter_answer(clear=clear.iloc[[2]], best="A Name Of Four Words", runner_up=None, **kw)
    assert _parts(box)[0] == ("**Use the first chunker, first by recall**; avoid the 1 chunker behind Recursive 200 "
                              "beyond the noise, by 9.8 points.")
    assert _parts(ch.chapter_answer(clear=clear.iloc[:0], **kw))[0].startswith("**This run ranks no chunker first**")


# --------------------------------------------------------------------------------------
# the chapter's small helpers (say, whole_numbers, format_points, precision_omega_at)
# --------------------------------------------------------------------------------------


def test_say_wraps_to_the_width(capsys):
    ch.say("one two three four", width=10)
    assert capsys.readouterr().out == "one two\nthree four\n"
    ch.say("a  b\nc")  # a newline becomes a space; 100 characters a line by default
    assert capsys.readouterr().out == "a  b c\n"
    ch.say("x" * 120)  # a word longer than a line is cut at the width
    assert capsys.readouterr().out == "x" * 100 + "\n" + "x" * 20 + "\n"
    with pytest.raises(ValueError):
        ch.say("a b", width=0)


def test_whole_numbers_by_hand():
    df = pd.DataFrame({"size_tokens": [250.0, np.nan, 249.9], "overlap_tokens": [125.0, 0.0, 0.0],
                       "recall": [1.5, 2.5, 3.5]}, index=["a", "b", "c"])
    out = ch.whole_numbers(df, "size_tokens", "overlap_tokens", "not_a_column")
    assert out["size_tokens"].tolist() == [250, "", 249]  # blank for missing, truncated toward 0
    assert out["overlap_tokens"].tolist() == [125, 0, 0]
    assert all(type(v) is int for v in out["overlap_tokens"])
    assert out["recall"].tolist() == [1.5, 2.5, 3.5] and list(out.index) == ["a", "b", "c"]
    assert df["size_tokens"].isna().sum() == 1  # the input is untouched
    with pytest.raises(ValueError):
        ch.whole_numbers(pd.DataFrame({"size_tokens": ["big"]}), "size_tokens")


def test_format_points_by_hand():
    assert ch.format_points(1.234) == "1.23"
    assert ch.format_points(-0.5) == "-0.50"
    assert ch.format_points(-0.004) == "0.00"  # rounds to zero: no sign
    assert ch.format_points(0.0) == "0.00"
    assert ch.format_points(12) == "12.00"
    assert ch.format_points(-10.004) == "-10.00"  # only a zero loses its sign
    assert ch.format_points(1.234, signed=True) == "+1.23"
    assert ch.format_points(-0.5, signed=True) == "-0.50"
    assert ch.format_points(0.004, signed=True) == "0.00"
    assert ch.format_points(-0.004, signed=True) == "0.00"
    assert ch.format_points(10.0, signed=True) == "+10.00"


def test_precision_omega_at_by_hand():
    table = pd.DataFrame({"chunker": ["Recursive", "Recursive", "TokenText", "Recursive"],
                          "size_tokens": [250, 250, 250, 200],
                          "overlap_tokens": [125, 0, 125, 0],
                          "precision_omega_mean": [3.5, 7.25, 4.0, 9.0]})
    assert ch.precision_omega_at(table, "Recursive", 250, 0) == 7.25
    assert ch.precision_omega_at(table, "TokenText", 250, 125) == 4.0
    assert ch.precision_omega_at(table, "Recursive", 200, 0) == 9.0
    assert np.isnan(ch.precision_omega_at(table, "TokenText", 250, 0))
    with pytest.raises(AttributeError):
        ch.precision_omega_at(table.drop(columns=["precision_omega_mean"]), "Recursive", 250, 0)
