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
