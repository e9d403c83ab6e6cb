"""Tests for chunkwise.evaluation.boundaries (Pk, WindowDiff, boundary P/R/F1).

Convention under test: boundary ``i`` = split after sentence ``i`` (0 <= i <= n-2);
sentences ``a < b`` are in different segments iff some boundary lies in ``[a, b-1]``.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from chunkwise.evaluation import (
    BoundaryScores,
    boundaries_from_sizes,
    boundary_scores,
    pk,
    sizes_from_boundaries,
    windowdiff,
)

# ----------------------------------------------------------------------------- helpers


def random_boundaries(rng: random.Random, n: int, p: float) -> list[int]:
    return [i for i in range(n - 1) if rng.random() < p]


def default_k(n: int, gold: list[int]) -> int:
    """Independent statement of the documented default: round-half-up of n / (2m), >= 1."""
    return max(1, math.floor(n / (2 * (len(gold) + 1)) + 0.5))


def gap_string(boundaries: list[int], n: int) -> str:
    """nltk form with exact parity: one char per *gap* between sentences (length n-1).

    nltk scores windows ``seg[i:i+k]`` for ``i in range(len(seg) - k + 1)``. With
    ``seg[j] == '1'`` iff there is a split after sentence j, window i holds gaps
    i..i+k-1, i.e. exactly the boundaries between sentences i and i+k, and there are
    (n-1) - k + 1 = n - k windows: the Beeferman / Pevzner-Hearst probes.
    """
    s = ["0"] * (n - 1)
    for b in boundaries:
        s[b] = "1"
    return "".join(s)


def sentence_string(boundaries: list[int], n: int) -> str:
    """nltk form with one char per *sentence* (length n), '1' = split after it.

    The last char is always '0'. nltk then scores n - k + 1 windows: the n - k probes
    above plus one extra window (i = n - k) that runs past the last sentence.
    """
    return gap_string(boundaries, n) + "0"


# ------------------------------------------------------------------- conversions


def test_sizes_boundaries_hand_example():
    # sentences 0 1 | 2 3 4 | 5  ->  splits after sentence 1 and 4
    assert boundaries_from_sizes([2, 3, 1]) == [1, 4]
    assert sizes_from_boundaries([1, 4], 6) == [2, 3, 1]
    assert boundaries_from_sizes([5]) == []
    assert sizes_from_boundaries([], 5) == [5]
    assert boundaries_from_sizes([1, 1, 1]) == [0, 1]
    assert sizes_from_boundaries([0, 1], 3) == [1, 1, 1]


def test_sizes_boundaries_roundtrip_random():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 40)
        b = random_boundaries(rng, n, rng.random())
        sizes = sizes_from_boundaries(b, n)
        assert sum(sizes) == n and min(sizes) >= 1
        assert boundaries_from_sizes(sizes) == b


# ------------------------------------------------------------ hand-computed metrics


def test_pk_windowdiff_hand_k1():
    # n=6, gold=[1,4], pred=[2]. Default k: mean gold segment = 6/3 = 2, half = 1.
    # With k=1 each probe (i, i+1), i=0..4, asks "split after i?":
    #   gold splits at 1,4; pred at 2 -> disagree at i=1,2,4 -> 3/5.
    assert pk([2], [1, 4], 6) == pytest.approx(3 / 5)
    assert windowdiff([2], [1, 4], 6) == pytest.approx(3 / 5)
    assert pk([2], [1, 4], 6, k=1) == pytest.approx(3 / 5)


def test_pk_windowdiff_hand_k2():
    # n=6, gold=[1,4], pred=[2], k=2: probes i=0..3, window holds gaps {i, i+1}.
    #   gold counts: {0,1}->1 {1,2}->1 {2,3}->0 {3,4}->1
    #   pred counts: {0,1}->0 {1,2}->1 {2,3}->1 {3,4}->0
    #   differ at i=0,2,3 (both for ">0" and for counts) -> 3/4.
    assert pk([2], [1, 4], 6, k=2) == pytest.approx(3 / 4)
    assert windowdiff([2], [1, 4], 6, k=2) == pytest.approx(3 / 4)


def test_pk_and_windowdiff_differ_on_near_miss_double_split():
    # n=8, gold=[3], pred=[2,3], k=2: probes i=0..5, gaps {i, i+1}.
    #   gold counts: 0 0 1 1 0 0 ; pred counts: 0 1 2 1 0 0
    #   Pk (count>0 differs): only i=1 -> 1/6.
    #   WindowDiff (count differs): i=1 (0 vs 1) and i=2 (1 vs 2) -> 2/6.
    assert pk([2, 3], [3], 8, k=2) == pytest.approx(1 / 6)
    assert windowdiff([2, 3], [3], 8, k=2) == pytest.approx(2 / 6)


def test_pk_no_prediction():
    # n=6, gold=[2], pred=[]. Default k: 6/2 = 3 per segment, half = 1.5 -> 2 (half up).
    # k=2, probes i=0..3 with gaps {i,i+1}: gold has a split at i=1 ({1,2}) and i=2
    # ({2,3}); pred never -> 2/4.
    assert pk([], [2], 6) == pytest.approx(0.5)
    assert windowdiff([], [2], 6) == pytest.approx(0.5)


def test_perfect_and_all_wrong():
    assert pk([1, 4], [1, 4], 6) == 0.0
    assert windowdiff([1, 4], [1, 4], 6) == 0.0
    # n=6, gold=[] (k: 6/2=3 -> half 1.5 -> 2), pred splits everywhere: every probe
    # window {i,i+1} holds 2 predicted splits and 0 gold ones -> 4/4.
    assert pk([0, 1, 2, 3, 4], [], 6) == 1.0
    assert windowdiff([0, 1, 2, 3, 4], [], 6) == 1.0


def test_symmetry_when_k_given():
    rng = random.Random(1)
    for _ in range(100):
        n = rng.randint(2, 30)
        a, b = random_boundaries(rng, n, 0.3), random_boundaries(rng, n, 0.3)
        k = rng.randint(1, n - 1)
        assert pk(a, b, n, k) == pk(b, a, n, k)
        assert windowdiff(a, b, n, k) == windowdiff(b, a, n, k)


# ----------------------------------------------------------------------- default k


@pytest.mark.parametrize(
    ("n", "gold", "expected_k"),
    [
        (6, [1, 4], 1),  # mean 2 -> 1
        (7, [2], 2),  # mean 3.5 -> 1.75 -> 2
        (9, [], 5),  # mean 9 -> 4.5 -> 5 (half up; Python's round() would give 4)
        (10, [], 5),  # mean 10 -> 5
        (5, [0, 1, 2, 3], 1),  # mean 1 -> 0.5 -> 1
        (2, [], 1),  # mean 2 -> 1
    ],
)
def test_default_k_is_half_mean_gold_segment_rounded_half_up(n, gold, expected_k):
    assert default_k(n, gold) == expected_k
    rng = random.Random(n)
    for _ in range(50):
        pred = random_boundaries(rng, n, 0.4)
        assert pk(pred, gold, n) == pk(pred, gold, n, k=expected_k)
        assert windowdiff(pred, gold, n) == windowdiff(pred, gold, n, k=expected_k)


def test_default_k_half_up_is_observable():
    # n=9, gold=[], pred=[0]. k=5: probes i=0..3, only i=0 sees split 0 -> 1/4.
    # k=4 (banker's rounding of 4.5) would give probes i=0..4 -> 1/5.
    assert pk([0], [], 9) == pytest.approx(1 / 4)
    assert pk([0], [], 9, k=4) == pytest.approx(1 / 5)


# ------------------------------------------------------------------- short texts


def test_k_clamped_to_n_minus_1():
    # n=3, k=5 -> k=2: the single probe (0, 2) over gaps {0, 1}.
    # gold=[0], pred=[]: gold "different", pred "same" -> 1/1.
    assert pk([], [0], 3, k=5) == 1.0
    assert windowdiff([], [0], 3, k=5) == 1.0
    # gold=[0], pred=[1]: both "different", one split each -> 0.
    assert pk([1], [0], 3, k=5) == 0.0
    assert windowdiff([1], [0], 3, k=5) == 0.0
    # gold=[0,1], pred=[0]: both "different" (Pk 0) but 2 vs 1 splits (WindowDiff 1).
    assert pk([0], [0, 1], 3, k=3) == 0.0
    assert windowdiff([0], [0, 1], 3, k=3) == 1.0
    for k in (3, 4, 100):
        assert pk([0], [1], 3, k=k) == pk([0], [1], 3, k=2)


def test_single_sentence():
    assert pk([], [], 1) == 0.0
    assert windowdiff([], [], 1) == 0.0
    assert pk([], [], 1, k=3) == 0.0
    s = boundary_scores([], [], 1)
    assert s == BoundaryScores(1, 0, 0, 0, 1.0, 1.0, 1.0, 0.0, 0.0)


# -------------------------------------------------------------------- nltk parity


def test_nltk_parity_gap_strings():
    seg = pytest.importorskip("nltk.metrics.segmentation")
    rng = random.Random(42)
    for _ in range(2000):
        n = rng.randint(2, 80)
        gold = random_boundaries(rng, n, rng.choice([0.05, 0.2, 0.5]))
        pred = random_boundaries(rng, n, rng.choice([0.05, 0.2, 0.5]))
        k = rng.choice([default_k(n, gold), rng.randint(1, n - 1)])
        ref_s, hyp_s = gap_string(gold, n), gap_string(pred, n)
        # nltk.pk(ref, hyp, k, boundary) vs nltk.windowdiff(seg1, seg2, k, boundary).
        assert pk(pred, gold, n, k) == pytest.approx(seg.pk(ref_s, hyp_s, k=k, boundary="1"))
        assert windowdiff(pred, gold, n, k) == pytest.approx(
            seg.windowdiff(ref_s, hyp_s, k, boundary="1")
        )


def test_nltk_sentence_strings_have_one_extra_window():
    # Off-by-one documented: with one char per sentence nltk divides by n-k+1 and adds
    # the window i=n-k over gaps n-k..n-1 (gap n-1 does not exist, always '0').
    seg = pytest.importorskip("nltk.metrics.segmentation")
    rng = random.Random(7)
    n_different = 0
    for _ in range(1000):
        n = rng.randint(2, 60)
        gold, pred = random_boundaries(rng, n, 0.2), random_boundaries(rng, n, 0.2)
        k = rng.randint(1, n - 1)
        ref_s, hyp_s = sentence_string(gold, n), sentence_string(pred, n)
        tail_g = [b for b in gold if b >= n - k]
        tail_p = [b for b in pred if b >= n - k]
        extra_pk = (len(tail_g) > 0) != (len(tail_p) > 0)
        extra_wd = len(tail_g) != len(tail_p)
        ours_pk, ours_wd = pk(pred, gold, n, k), windowdiff(pred, gold, n, k)
        theirs_pk = seg.pk(ref_s, hyp_s, k=k, boundary="1")
        theirs_wd = seg.windowdiff(ref_s, hyp_s, k, boundary="1")
        assert theirs_pk == pytest.approx((ours_pk * (n - k) + extra_pk) / (n - k + 1))
        assert theirs_wd == pytest.approx((ours_wd * (n - k) + extra_wd) / (n - k + 1))
        n_different += theirs_pk != pytest.approx(ours_pk)
    assert n_different > 0


# ---------------------------------------------------------------- boundary_scores


def test_boundary_scores_exact_hand():
    # n=10, gold=[2,5,8], pred=[3,5,6], tolerance 0: only 5 matches.
    # P = 1/3, R = 1/3, F1 = 1/3; extra = 3 - 1 = 2; chunks = 4.
    s = boundary_scores([3, 5, 6], [2, 5, 8], 10)
    assert (s.n_chunks, s.shifts_found, s.n_gold, s.extra_splits) == (4, 1, 3, 2)
    assert s.precision == pytest.approx(1 / 3)
    assert s.recall == pytest.approx(1 / 3)
    assert s.f1 == pytest.approx(1 / 3)
    assert s.pk == pk([3, 5, 6], [2, 5, 8], 10)
    assert s.windowdiff == windowdiff([3, 5, 6], [2, 5, 8], 10)


def test_boundary_scores_tolerance_hand():
    # tolerance 1: 2<->3 (|1|), 5<->5, 8 has nothing in [7,9] (6 is 2 away).
    # found 2, extra 1, P = R = F1 = 2/3.
    s = boundary_scores([3, 5, 6], [2, 5, 8], 10, tolerance=1)
    assert (s.shifts_found, s.extra_splits) == (2, 1)
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(2 / 3)
    assert s.f1 == pytest.approx(2 / 3)
    # tolerance 2: 8<->6 as well -> all matched.
    s = boundary_scores([3, 5, 6], [2, 5, 8], 10, tolerance=2)
    assert (s.shifts_found, s.extra_splits, s.f1) == (3, 0, 1.0)


def test_one_predicted_matches_at_most_one_gold():
    # gold [4,5], pred [4], tolerance 1: 4 could match either, but only once.
    # found 1 -> P = 1/1, R = 1/2, F1 = 2*1*0.5/1.5 = 2/3.
    s = boundary_scores([4], [4, 5], 10, tolerance=1)
    assert (s.shifts_found, s.extra_splits) == (1, 0)
    assert (s.precision, s.recall) == (1.0, 0.5)
    assert s.f1 == pytest.approx(2 / 3)
    # and one gold boundary is matched by at most one predicted: pred [3,4,5], gold [4]
    s = boundary_scores([3, 4, 5], [4], 10, tolerance=1)
    assert (s.shifts_found, s.extra_splits, s.precision, s.recall) == (1, 2, 1 / 3, 1.0)


def test_matching_is_maximum():
    # gold [3,5], pred [4,6], tolerance 1: pairing 5<->4 would strand 3; the maximum
    # matching is 3<->4, 5<->6.
    assert boundary_scores([4, 6], [3, 5], 10, tolerance=1).shifts_found == 2


def _brute_force_matching(pred: list[int], gold: list[int], tol: int) -> int:
    """Largest r such that some r gold and r predicted boundaries pair up within tol."""
    for r in range(min(len(pred), len(gold)), 0, -1):
        for gs in itertools.combinations(gold, r):
            for ps in itertools.permutations(pred, r):
                if all(abs(p - g) <= tol for p, g in zip(ps, gs)):
                    return r
    return 0


def test_matching_against_brute_force():
    rng = random.Random(3)
    for _ in range(400):
        n = rng.randint(2, 14)
        gold, pred = random_boundaries(rng, n, 0.35), random_boundaries(rng, n, 0.35)
        if len(gold) > 5 or len(pred) > 5:
            continue
        tol = rng.randint(0, 3)
        s = boundary_scores(pred, gold, n, tolerance=tol)
        assert s.shifts_found == _brute_force_matching(pred, gold, tol)
        assert s.extra_splits == len(pred) - s.shifts_found


# Empty-set conventions: precision = 1.0 with no prediction (no split made, so none is
# wrong), recall = 1.0 with no gold (nothing to find). F1 is then 1.0 only when both are
# empty and 0.0 when exactly one side is empty.
@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ([], [], (1.0, 1.0, 1.0)),
        ([], [3], (1.0, 0.0, 0.0)),
        ([3], [], (0.0, 1.0, 0.0)),
        ([2], [6], (0.0, 0.0, 0.0)),  # both non-empty, no match: P+R = 0 -> F1 = 0
    ],
)
def test_empty_set_conventions(pred, gold, expected):
    s = boundary_scores(pred, gold, 8)
    assert (s.precision, s.recall, s.f1) == expected
    assert s.n_chunks == len(pred) + 1
    assert s.n_gold == len(gold)


def test_as_dict_and_frozen():
    s = boundary_scores([1], [1], 4)
    d = s.as_dict()
    assert list(d) == [
        "n_chunks", "shifts_found", "n_gold", "extra_splits",
        "precision", "recall", "f1", "pk", "windowdiff",
    ]  # fmt: skip
    assert d == {
        "n_chunks": 2, "shifts_found": 1, "n_gold": 1, "extra_splits": 0,
        "precision": 1.0, "recall": 1.0, "f1": 1.0, "pk": 0.0, "windowdiff": 0.0,
    }  # fmt: skip
    with pytest.raises(AttributeError):
        s.f1 = 0.5  # type: ignore[misc]


def test_boundary_scores_k_passthrough():
    s = boundary_scores([2, 3], [3], 8, k=2)
    assert s.pk == pytest.approx(1 / 6)
    assert s.windowdiff == pytest.approx(2 / 6)


def test_numpy_inputs_accepted():
    s = boundary_scores(np.array([1, 4]), np.array([1, 4], dtype=np.int32), np.int64(6))
    assert s.f1 == 1.0
    assert pk(np.array([2]), [1, 4], 6, k=np.int64(2)) == pytest.approx(3 / 4)
    assert sizes_from_boundaries(np.array([1, 4]), 6) == [2, 3, 1]
    assert boundaries_from_sizes(np.array([2, 3, 1])) == [1, 4]


# -------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: pk([3, 1], [], 6), r"strictly increasing.*\[3, 1\].*unsorted.*sorted\(set"),
        (lambda: pk([1, 1], [], 6), r"strictly increasing.*duplicate: 1 then 1"),
        (lambda: pk([], [5], 6), r"gold contains 5, out of range for n_sentences=6.*0\.\.4"),
        (lambda: pk([-1], [], 6), r"predicted contains -1, out of range"),
        (lambda: pk([0], [], 1), r"contains 0.*n_sentences=1.*none \(1 sentence"),
        (lambda: pk([], [], 0), r"n_sentences must be an int >= 1, got 0"),
        (lambda: pk([], [], 6, k=0), r"k must be an int >= 1, got 0"),
        (lambda: windowdiff([], [], 6, k=-2), r"k must be an int >= 1, got -2"),
        (lambda: pk([], [], 6, k=2.0), r"k must be an int >= 1, got 2\.0 \(float\)"),
        (lambda: pk([], [], 6.0), r"n_sentences must be an int >= 1, got 6\.0 \(float\)"),
        (lambda: pk([1.0], [], 6), r"predicted must contain only ints, got 1\.0 \(float\)"),
        (lambda: pk([True], [], 6), r"predicted must contain only ints, got True \(bool\)"),
        (lambda: pk(None, [], 6), r"predicted must be a sequence of ints.*None"),
        (lambda: pk("12", [], 6), r"predicted must be a sequence of ints.*string '12'"),
        (lambda: pk(np.array([[1]]), [], 6), r"predicted must contain only ints"),
        (lambda: boundary_scores([], [], 6, tolerance=-1), r"tolerance must be .* got -1"),
        (lambda: boundary_scores([], [], 6, tolerance=0.5), r"tolerance must be an int >= 0"),
        (lambda: sizes_from_boundaries([6], 6), r"boundaries contains 6, out of range"),
        (lambda: boundaries_from_sizes([]), r"sizes is empty"),
        (lambda: boundaries_from_sizes([2, 0]), r"sizes\[1\] must be an int >= 1, got 0"),
        (lambda: boundaries_from_sizes([2, 1.5]), r"sizes\[1\] must be an int >= 1, got 1\.5"),
        (lambda: boundaries_from_sizes(3), r"sizes must be a sequence"),
    ],
)
def test_validation_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()
