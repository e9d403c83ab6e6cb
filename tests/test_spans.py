"""Tests for chunkwise.evaluation.spans (Chroma-style span recall/precision/IoU/precision_Omega).

Spans are half-open (start, end) character offsets. Notation in the hand computations:
N = |U(retrieved) ∩ U(refs)|, "sum" = lengths summed with multiplicity, "|U(.)|" = size of
the union. chroma: recall N/sum(refs), precision N/(sum(ret)+O),
iou N/(sum(ret)+O+sum_j |r_j minus U(ret)|). union: recall N/|U(refs)|,
precision N/(|U(ret)|+O), iou N/(|U(ret) ∪ U(refs)|+O).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.evaluation.spans import (
    SpanScores,
    precision_omega,
    score_questions,
    span_scores,
    summarize,
)

BOTH = ("union", "chroma")


def approx(recall: float, precision: float, iou: float) -> SpanScores:
    return SpanScores(pytest.approx(recall), pytest.approx(precision), pytest.approx(iou))


# ----------------------------------------------------------------------- hand examples


def test_overlapping_retrieved_chunks():
    # ret (0,10),(5,15); ref (5,10). N = 5.
    # union : U(ret) = (0,15) = 15 -> recall 5/5, precision 5/15, iou 5/(15+5-5) = 5/15
    # chroma: sum(ret) = 10+10 = 20 (chars 5..10 counted twice), missed = 0
    #         -> recall 5/5, precision 5/20, iou 5/(20+0)
    ret, refs = [(0, 10), (5, 15)], [(5, 10)]
    assert span_scores(ret, refs, "union") == approx(1.0, 1 / 3, 1 / 3)
    assert span_scores(ret, refs, "chroma") == approx(1.0, 0.25, 0.25)


def test_adjacent_chunks_agree_in_both_modes():
    # ret (0,10),(10,20) abut; ref (8,12). N = 4; sum(ret) = |U(ret)| = 20.
    # recall 4/4; precision 4/20; iou: union 4/(20+4-4), chroma 4/(20+0)
    for mode in BOTH:
        assert span_scores([(0, 10), (10, 20)], [(8, 12)], mode) == approx(1.0, 0.2, 0.2)


def test_chunk_abutting_a_reference_scores_zero():
    # ret (0,10), ref (10,20): no shared character, N = 0 (chroma's zero-length
    # intersection (10,10) adds nothing to recall/precision/iou).
    for mode in BOTH:
        assert span_scores([(0, 10)], [(10, 20)], mode) == SpanScores(0.0, 0.0, 0.0)


def test_reference_split_across_two_chunks():
    # chunks (0,100),(100,200); ref (90,110).
    # Only (0,100) retrieved: N = 10; recall 10/20; precision 10/100;
    #   iou union 10/|(0,110)| = 10/110, chroma 10/(100 + |(100,110)|) = 10/110.
    # Both retrieved: N = 20; recall 1; precision 20/200; iou 20/200.
    for mode in BOTH:
        assert span_scores([(0, 100)], [(90, 110)], mode) == approx(0.5, 0.1, 10 / 110)
        assert span_scores([(0, 100), (100, 200)], [(90, 110)], mode) == approx(1.0, 0.1, 0.1)


def test_references_overlapping_each_other():
    # refs (0,10),(5,15); ret (0,8). N = |(0,8)| = 8.
    # union : |U(refs)| = 15 -> recall 8/15, precision 8/8, iou 8/(8+15-8) = 8/15
    # chroma: sum(refs) = 20 -> recall 8/20; precision 8/8;
    #         missed = |(0,10) minus (0,8)| + |(5,15) minus (0,8)| = 2 + 7 = 9 -> iou 8/(8+9)
    refs = [(0, 10), (5, 15)]
    assert span_scores([(0, 8)], refs, "union") == approx(8 / 15, 1.0, 8 / 15)
    assert span_scores([(0, 8)], refs, "chroma") == approx(0.4, 1.0, 8 / 17)


def test_other_corpus_chunks_enter_precision_and_iou_denominators():
    # ret (0,10) in this corpus + 30 chars from other corpora; ref (0,10). N = 10.
    # recall 10/10; precision 10/(10+30); iou union 10/(10+30), chroma 10/(10+30+0)
    for mode in BOTH:
        assert span_scores([(0, 10)], [(0, 10)], mode, other_corpus_chars=30) == approx(
            1.0, 0.25, 0.25
        )
    # Only other-corpus chunks retrieved: N = 0 -> all zero.
    for mode in BOTH:
        assert span_scores([], [(0, 10)], mode, other_corpus_chars=50) == SpanScores(0, 0, 0)


def test_no_overlap_at_all():
    # ret (0,10), ref (20,30): N = 0; denominators 10, 10, 20 -> all 0.
    for mode in BOTH:
        assert span_scores([(0, 10)], [(20, 30)], mode) == SpanScores(0.0, 0.0, 0.0)


def test_empty_retrieved():
    # N = 0; precision denominator 0 -> 0.0 by convention; iou 0/10.
    for mode in BOTH:
        assert span_scores([], [(0, 10)], mode) == SpanScores(0.0, 0.0, 0.0)


def test_empty_references_give_zero():
    for mode in BOTH:
        assert span_scores([(0, 10)], [], mode) == SpanScores(0.0, 0.0, 0.0)


def test_partial_overlap_hand_computed():
    # ret (0,50),(40,60),(100,120); refs (30,45),(110,130).
    # N = |(30,45)| + |(110,120)| = 15 + 10 = 25.
    # union : U(ret) = (0,60),(100,120) = 80; U(refs) = 15 + 20 = 35;
    #         recall 25/35, precision 25/80, iou 25/(80+35-25) = 25/90
    # chroma: sum(ret) = 50+20+20 = 90; sum(refs) = 35; missed = 0 + |(120,130)| = 10;
    #         recall 25/35, precision 25/90, iou 25/(90+10) = 25/100
    ret, refs = [(0, 50), (40, 60), (100, 120)], [(30, 45), (110, 130)]
    assert span_scores(ret, refs, "union") == approx(25 / 35, 25 / 80, 25 / 90)
    assert span_scores(ret, refs, "chroma") == approx(25 / 35, 25 / 90, 0.25)


# ------------------------------------------------------------------- precision_Omega


def test_precision_omega_tiled_chunks():
    # chunks tile (0,300) by 100; ref (150,250) touches (100,200),(200,300) in both modes
    # ((0,100) ends at 100 < 150). U(T) = (100,300) = 200; N = 100.
    # union 100/200; chroma 100/|U(T) ∪ U(r)| = 100/200.
    chunks = [(0, 100), (100, 200), (200, 300)]
    for mode in BOTH:
        assert precision_omega(chunks, [(150, 250)], mode) == pytest.approx(0.5)


def test_precision_omega_abutting_chunks_differ():
    # ref (10,20) exactly equals chunk (10,20). chroma's touch test max(starts) <= min(ends)
    # also takes (0,10) and (20,30), which only abut it: U(T) = (0,30) -> 10/30.
    # union takes only (10,20) -> 10/10.
    chunks = [(0, 10), (10, 20), (20, 30)]
    assert precision_omega(chunks, [(10, 20)], "chroma") == pytest.approx(1 / 3)
    assert precision_omega(chunks, [(10, 20)], "union") == 1.0


def test_precision_omega_reference_not_covered_by_chunks():
    # chunks (0,10),(20,30) leave a gap; ref (5,25). T = both; U(T) = 20; N = 5 + 5 = 10.
    # union 10/20; chroma 10/|(0,30)| = 10/30 (the uncovered (10,20) is in the denominator).
    chunks = [(0, 10), (20, 30)]
    assert precision_omega(chunks, [(5, 25)], "union") == pytest.approx(0.5)
    assert precision_omega(chunks, [(5, 25)], "chroma") == pytest.approx(1 / 3)


def test_precision_omega_overlapping_chunks_is_a_union_even_in_chroma_mode():
    # window 100, stride 50; ref (60,90) touches (0,100),(50,150): U(T) = (0,150), N = 30.
    # precision_Omega = 30/150 in both modes, while chroma *precision* of retrieving exactly
    # T double counts (50,100): 30/(100+100).
    chunks = [(0, 100), (50, 150), (100, 200), (150, 250)]
    for mode in BOTH:
        assert precision_omega(chunks, [(60, 90)], mode) == pytest.approx(0.2)
    assert span_scores(chunks[:2], [(60, 90)], "chroma").precision == pytest.approx(0.15)


def test_precision_omega_no_touching_chunk():
    for mode in BOTH:
        assert precision_omega([(0, 10)], [(20, 30)], mode) == 0.0
        assert precision_omega([], [(20, 30)], mode) == 0.0


# ------------------------------------------------------------- documented difference


def test_documented_difference_chroma_vs_union():
    """Pinned: chroma sums lengths in its denominators, union counts each character once.

    refs (0,10),(5,15) fully retrieved by (0,15), plus the same chunk retrieved twice:
    union  : recall 15/15 = 1, precision 15/15 = 1, iou 1
    chroma : recall 15/(10+10) = 0.75 (overlapping refs counted twice);
             precision 15/(15+15) = 0.5 (duplicate chunk counted twice); iou 15/(30+0) = 0.5
    """
    ret, refs = [(0, 15), (0, 15)], [(0, 10), (5, 15)]
    assert span_scores(ret, refs, "union") == SpanScores(1.0, 1.0, 1.0)
    assert span_scores(ret, refs, "chroma") == SpanScores(0.75, 0.5, 0.5)


def test_chroma_iou_can_exceed_chroma_recall():
    # The same reference listed twice, retrieved exactly: N = 1.
    # chroma: recall 1/(1+1) = 0.5 but iou 1/(1 + missed 0) = 1.  union: all 1.
    assert span_scores([(0, 1)], [(0, 1), (0, 1)], "chroma") == SpanScores(0.5, 1.0, 1.0)
    assert span_scores([(0, 1)], [(0, 1), (0, 1)], "union") == SpanScores(1.0, 1.0, 1.0)


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("retrieved", "references", "match"),
    [
        ([(5, 3)], [(0, 1)], r"retrieved\[0\].*start > end"),
        ([(0, 1)], [(0, 2), (9, 4)], r"references\[1\].*start > end"),
        ([(-1, 3)], [(0, 1)], r"retrieved\[0\].*>= 0"),
        ([(0, 1)], [(0, -2)], r"references\[0\].*>= 0"),
        ([(0.5, 3)], [(0, 1)], r"must be ints"),
        ([(0, 1, 2)], [(0, 1)], r"not a \(start, end\) pair"),
    ],
)
def test_invalid_spans_raise(retrieved, references, match):
    with pytest.raises(ValueError, match=match):
        span_scores(retrieved, references)
    with pytest.raises(ValueError, match=match.replace("retrieved", "chunk_spans")):
        precision_omega(retrieved, references)


def test_unknown_mode_and_bad_other_chars_raise():
    with pytest.raises(ValueError, match="unknown mode 'tokens'"):
        span_scores([(0, 1)], [(0, 1)], mode="tokens")
    with pytest.raises(ValueError, match="unknown mode"):
        precision_omega([(0, 1)], [(0, 1)], mode="Union")
    with pytest.raises(ValueError, match="other_corpus_chars"):
        span_scores([(0, 1)], [(0, 1)], other_corpus_chars=-1)
    with pytest.raises(ValueError, match="unknown mode"):
        score_questions(_questions([[(0, 1)]], ["a"]), [[]], mode="x")


def test_batch_validation_names_question_and_span():
    qs = _questions([[(0, 5)], [(0, 3), (8, 2)]], ["a", "a"])
    with pytest.raises(ValueError, match=r"question 1: references\[1\] = \(8, 2\).*start > end"):
        score_questions(qs, [[], []])
    qs = _questions([[(0, 5)], [(0, 3)]], ["a", "a"])
    with pytest.raises(ValueError, match=r"question 1: retrieved\[0\] = \(-4, 2\)"):
        score_questions(qs, [[], [("a", -4, 2)]])
    with pytest.raises(ValueError, match=r"chunks\['a'\]\[1\] = \(7, 6\)"):
        score_questions(qs, [[], []], chunks={"a": [(0, 5), (7, 6)]})
    with pytest.raises(ValueError, match="no entry for corpus 'a'"):
        score_questions(qs, [[], []], chunks={"b": [(0, 5)]})
    with pytest.raises(ValueError, match="2 rows"):
        score_questions(qs, [[]])
    with pytest.raises(ValueError, match="must be ints"):
        score_questions(qs, [[("a", 0.5, 2)], []])
    with pytest.raises(ValueError, match=r"question 0: retrieved\[1\] = \(1, 2, 3, 4\) is not a"):
        score_questions(qs, [[(0, 1), (1, 2, 3, 4)], []])
    with pytest.raises(ValueError, match=r"question 1: references\[0\] = \(0, 1, 2\) is not a"):
        score_questions(_questions([[(0, 5)], [(0, 1, 2)]], ["a", "a"]), [[], []])


# ------------------------------------------------------------------------ batch path


def _questions(refs: list, corpora: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"corpus_id": corpora, "references": refs})


def _other_chars(items, corpus, mode):
    """Reference computation of other_corpus_chars from triples, per the documented rule."""
    others: dict[str, list[tuple[int, int]]] = {}
    for c, s, e in items:
        if c != corpus:
            others.setdefault(c, []).append((s, e))
    if mode == "chroma":
        return sum(e - s for spans in others.values() for s, e in spans)
    total = 0
    for spans in others.values():
        covered: set[int] = set()
        for s, e in spans:
            covered.update(range(s, e))
        total += len(covered)
    return total


def test_batch_formats_and_hand_values():
    # Chroma CSV format (dict references, JSON string), question_id column, pair shorthand.
    qs = pd.DataFrame(
        {
            "question_id": ["q1", "q2"],
            "corpus_id": ["a", "b"],
            "references": [
                json.dumps([{"content": "x", "start_index": 90, "end_index": 110}]),
                [{"content": "y", "start_index": 0, "end_index": 10}],
            ],
        }
    )
    retrieved = [[(0, 100), ("b", 0, 50)], [("b", 0, 10), ("a", 0, 30), ("a", 10, 40)]]
    chunks = {"a": [(0, 100), (100, 200)], "b": [(0, 10), (10, 20)]}
    df = score_questions(qs, retrieved, chunks, mode="chroma")
    assert list(df.columns) == ["question_id", "corpus", "recall", "precision", "precision_omega", "iou"]
    assert df["question_id"].tolist() == ["q1", "q2"]
    # q1: N = 10 of ref (90,110); O = 50 -> recall 10/20, precision 10/150, iou 10/(150+10)
    #     Omega: T = both chunks, 20/200.
    # q2: N = 10; O chroma = 30 + 30 = 60 -> precision 10/70, iou 10/70; Omega: T = (0,10) and
    #     the abutting (10,20) -> 10/20.
    assert df.loc[0, ["recall", "precision", "iou", "precision_omega"]].tolist() == pytest.approx(
        [0.5, 10 / 150, 10 / 160, 0.1]
    )
    assert df.loc[1, ["recall", "precision", "iou", "precision_omega"]].tolist() == pytest.approx(
        [1.0, 10 / 70, 10 / 70, 0.5]
    )
    # union mode: q2's other-corpus chars are distinct, |(0,40)| = 40 -> precision 10/50.
    dfu = score_questions(qs, retrieved, chunks, mode="union")
    assert dfu.loc[1, ["precision", "iou", "precision_omega"]].tolist() == pytest.approx(
        [10 / 50, 10 / 50, 1.0]
    )
    assert np.isnan(score_questions(qs, retrieved)["precision_omega"]).all()


def test_batch_empty():
    df = score_questions(_questions([], []), [], chunks={})
    assert len(df) == 0
    df = score_questions(_questions([[]], ["a"]), [[]], chunks={"a": []})
    assert df.loc[0, ["recall", "precision", "precision_omega", "iou"]].tolist() == [0, 0, 0, 0]


span = st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1]))
corpus_names = st.sampled_from(["a", "b", "c"])
question = st.tuples(
    corpus_names,
    st.lists(span, max_size=4),
    st.lists(st.tuples(corpus_names, span).map(lambda t: (t[0], *t[1])), max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(
    qs=st.lists(question, max_size=6),
    chunk_lists=st.fixed_dictionaries({c: st.lists(span, max_size=8) for c in "abc"}),
    mode=st.sampled_from(BOTH),
    own_only=st.booleans(),
)
def test_batch_equals_span_scores(qs, chunk_lists, mode, own_only):
    if own_only:  # the (start, end) shorthand: only the question's own corpus
        qs = [(c, refs, [t for t in items if t[0] == c]) for c, refs, items in qs]
        retrieved = [[(s, e) for _, s, e in items] for _, _, items in qs]
    else:
        retrieved = [items for _, _, items in qs]
    questions = _questions([refs for _, refs, _ in qs], [c for c, _, _ in qs])
    df = score_questions(questions, retrieved, chunk_lists, mode=mode)
    for i, (corpus, refs, items) in enumerate(qs):
        own = [(s, e) for c, s, e in items if c == corpus]
        expected = span_scores(own, refs, mode, other_corpus_chars=_other_chars(items, corpus, mode))
        row = df.iloc[i]
        # exact equality: both paths divide the same integers
        assert (row["recall"], row["precision"], row["iou"]) == (
            expected.recall,
            expected.precision,
            expected.iou,
        )
        assert row["precision_omega"] == precision_omega(chunk_lists[corpus], refs, mode)
        assert row["corpus"] == corpus


# ------------------------------------------------------------------ union invariants


@settings(max_examples=300, deadline=None)
@given(ret=st.lists(span, max_size=6), refs=st.lists(span, max_size=4), other=st.integers(0, 50))
def test_scores_in_unit_interval(ret, refs, other):
    for mode in BOTH:
        s = span_scores(ret, refs, mode, other)
        assert 0.0 <= s.recall <= 1.0
        assert 0.0 <= s.precision <= 1.0
        assert 0.0 <= s.iou <= s.precision
        if mode == "union":
            assert s.iou <= s.recall
        assert 0.0 <= precision_omega(ret, refs, mode) <= 1.0


@settings(max_examples=200, deadline=None)
@given(refs=st.lists(span.filter(lambda t: t[1] > t[0]), min_size=1, max_size=4),
       extra=st.lists(span, max_size=4), pad=st.integers(0, 10))
def test_union_recall_is_one_when_refs_covered(refs, extra, pad):
    # Retrieved: each reference widened by `pad` on both sides, plus unrelated spans.
    ret = [(max(0, s - pad), e + pad) for s, e in refs] + extra
    assert span_scores(ret, refs, "union").recall == 1.0


@settings(max_examples=200, deadline=None)
@given(ret=st.lists(span, min_size=1, max_size=6), refs=st.lists(span, max_size=4),
       k=st.integers(0, 5), other=st.integers(0, 30))
def test_union_invariant_to_duplicating_a_chunk(ret, refs, k, other):
    dup = ret + [ret[k % len(ret)]]
    assert span_scores(dup, refs, "union", other) == span_scores(ret, refs, "union", other)
    assert precision_omega(dup, refs, "union") == precision_omega(ret, refs, "union")


def test_chroma_not_invariant_to_duplicating_a_chunk():
    # ret (0,10) twice, ref (0,10): chroma precision 10/20, union 10/10.
    assert span_scores([(0, 10), (0, 10)], [(0, 10)], "chroma").precision == 0.5
    assert span_scores([(0, 10), (0, 10)], [(0, 10)], "union").precision == 1.0


# --------------------------------------------------------------------------- summary


def test_summarize_population_sd_overall_and_per_corpus():
    df = pd.DataFrame(
        {
            "question_id": [0, 1, 2],
            "corpus": ["a", "a", "b"],
            "recall": [1.0, 0.0, 0.5],
            "precision": [0.2, 0.4, 0.6],
            "precision_omega": [np.nan, np.nan, np.nan],
            "iou": [0.1, 0.3, 0.2],
        }
    )
    out = summarize(df)
    assert out.index.tolist() == ["all", "a", "b"]
    assert out.loc["all", "n"] == 3
    assert out.loc["all", "recall_mean"] == pytest.approx(0.5)
    # population sd of [1, 0, 0.5]: sqrt(((0.5)^2 + (0.5)^2 + 0) / 3)
    assert out.loc["all", "recall_sd"] == pytest.approx(np.sqrt(0.5 / 3))
    assert out.loc["a", "recall_sd"] == pytest.approx(0.5)  # [1, 0] -> 0.5 (ddof=0)
    assert out.loc["b", "precision_sd"] == 0.0
    assert np.isnan(out.loc["all", "precision_omega_mean"])
