"""The answer box's shape (chunkwise.answerbox): a lead of at most 60 visible words, details folded."""

import pytest

from chunkwise.answerbox import DETAILS_TITLE, MAX_LEAD_WORDS, answer_box, visible_words


def test_visible_words_counts_what_a_reader_sees():
    assert visible_words("**Use fixed-size chunks**: +3.3 [-1.1, +5.0] points.") == 7
    assert visible_words("the {term}`span recall` at k = 5") == 6  # "=" is not a word
    assert visible_words("see [chapter 2](02_chroma_recall.ipynb) and {term}`IoU <iou>`") == 5


def test_answer_box_folds_the_details_under_the_lead():
    text = answer_box("**Use TokenText 200.** Sure: robust.", "Recall +3.3 [+1.0, +5.0] on 472 questions.")
    assert text == ("**Use TokenText 200.** Sure: robust.\n\n"
                    f":::{{dropdown}} {DETAILS_TITLE}\n\nRecall +3.3 [+1.0, +5.0] on 472 questions.\n\n:::\n")
    assert answer_box("Only a lead.", "  ") == "Only a lead.\n"


def test_a_long_lead_is_refused_with_its_count():
    answer_box(" ".join(["word"] * MAX_LEAD_WORDS), "d")
    with pytest.raises(ValueError, match="61 words, more than 60"):
        answer_box(" ".join(["word"] * 61), "d")
    with pytest.raises(ValueError, match="needs a lead"):
        answer_box(" ", "d")
    with pytest.raises(ValueError, match="holds no dropdown"):
        answer_box("lead\n:::{dropdown} x\n:::", "d")


def _panel(cls, *, flips=(), n_alt=3, mde=10.0078, delta=2.0, unit="points", not_run=()):
    from chunkwise.evaluation.robustness import Robustness, SpecResult

    primary = SpecResult("primary", 1.0, -5.8, 8.1, "cannot tell", 44, mde)
    alts = tuple(SpecResult(f"alternative {i}", 0.0, -1.0, 1.0, "cannot tell", 44, mde) for i in range(n_alt))
    return Robustness(cls, primary, alts, tuple(flips), delta, unit, tuple(not_run))


def test_robustness_words_give_the_class_in_counts_not_names():
    from chunkwise.answerbox import MAX_ROBUSTNESS_WORDS, robustness_words

    flips = [("a very long alternative name that would not fit in any lead at all", "cannot tell")] * 2
    assert robustness_words(_panel("fragile", flips=flips)) == "fragile: 2 of 3 declared alternatives disagree"
    assert robustness_words(_panel("robust")) == "robust: all 3 declared alternatives agree"
    assert robustness_words(_panel("cannot tell")) == "cannot tell: the run could detect about 10.0 points"
    assert robustness_words(_panel("cannot tell", mde=float("inf"))) == (
        "cannot tell: no sampling interval to size a detectable effect")
    # a long unit falls back to "points"; a short one is kept
    assert robustness_words(_panel("no effect larger than delta", delta=5.0, unit="points of RAGQuestEval F1")) == (
        "no effect larger than 5 points; all 3 alternatives agree")
    assert robustness_words(_panel("not assessed", n_alt=0, not_run=["x", "y"])) == (
        "not assessed: no declared alternative could run here; 2 not run here")
    longest = robustness_words(_panel("no effect larger than delta", n_alt=12, delta=12.5, unit="recall points",
                                      not_run=["a"] * 11))
    assert longest == "no effect larger than 12.5 recall points; all 12 alternatives agree; 11 not run here"
    assert visible_words(longest) == MAX_ROBUSTNESS_WORDS
    assert robustness_words(_panel("an unheard-of class with a long name")) == "robustness class in the details"


def test_capped_keeps_a_short_piece_and_replaces_a_long_one():
    from chunkwise.answerbox import capped

    assert capped("TokenText 250/125", 4, "the first chunker") == "TokenText 250/125"
    assert capped("one two three four five", 4, "the first chunker") == "the first chunker"


def test_verdict_with_class_does_not_repeat_the_verdict():
    from chunkwise.answerbox import verdict_with_class

    fragile = _panel("fragile", flips=[("hybrid retrieval", "cannot tell")], n_alt=2)
    assert verdict_with_class("no", fragile) == "**no** (fragile: 1 of 2 declared alternatives disagree)"
    assert verdict_with_class("cannot tell", _panel("cannot tell")) == (
        "**cannot tell** (the run could detect about 10.0 points)")
    assert verdict_with_class("a verdict of far too many words", fragile).startswith("**see the details** (fragile")
