"""Tests for chunkwise.evaluation.stats (paired bootstrap, probability best, verdict).

Hand computations use two questions: a bootstrap resample of 2 questions is {q1, q1} with
probability 1/4, {q1, q2} with 1/2 and {q2, q2} with 1/4.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from chunkwise.evaluation.stats import (
    paired_bootstrap,
    paired_difference_ci,
    questions_to_separate,
    verdict,
)


def test_constant_improvement_has_a_degenerate_interval_and_wins():
    # b = a + 0.1 on every question: every resample's mean difference is exactly 0.1.
    a = [0.2, 0.5, 0.9, 0.4]
    b = [v + 0.1 for v in a]
    res = paired_bootstrap({"a": a, "b": b}, baseline="a", n_resamples=300, seed=1)
    row = res.table.loc["b"]
    assert row["diff"] == pytest.approx(0.1)
    assert row["diff_low"] == pytest.approx(0.1)
    assert row["diff_high"] == pytest.approx(0.1)
    assert res.table.loc["a", ["diff", "diff_low", "diff_high"]].tolist() == [0.0, 0.0, 0.0]
    assert res.table.loc["b", "p_best"] == 1.0
    assert res.table.loc["a", "p_best"] == 0.0
    assert res.best == "b" and res.winner == "b"
    assert res.ruled_out == ["a"] and res.in_play == ["b"]
    assert res.table.loc["a", "diff_best"] == pytest.approx(-0.1)
    assert "Winner: b" in res.verdict


def test_two_question_hand_computation():
    # A = [1, 0.5], B = [0, 1]; differences A - B = [1, -0.5].
    # {q1,q1}: A 1 vs B 0 -> A best, diff 1      (prob 1/4)
    # {q1,q2}: A .75 vs B .5 -> A best, diff .25 (prob 1/2)
    # {q2,q2}: A .5 vs B 1 -> B best, diff -.5   (prob 1/4)
    # => p_best(A) = 3/4; the 2.5th / 97.5th percentiles of the difference are -0.5 and 1.
    res = paired_bootstrap({"A": [1.0, 0.5], "B": [0.0, 1.0]}, baseline="B", n_resamples=20_000, seed=3)
    t = res.table
    assert t.loc["A", "p_best"] == pytest.approx(0.75, abs=0.015)
    assert t.loc["B", "p_best"] == pytest.approx(0.25, abs=0.015)
    assert t.loc["A", "p_best"] + t.loc["B", "p_best"] == pytest.approx(1.0)
    assert t.loc["A", "diff"] == pytest.approx(0.25)
    assert t.loc["A", "diff_low"] == pytest.approx(-0.5)
    assert t.loc["A", "diff_high"] == pytest.approx(1.0)
    # A's own mean: 1 (1/4), .75 (1/2), .5 (1/4) -> interval [0.5, 1]
    assert (t.loc["A", "mean_low"], t.loc["A", "mean_high"]) == pytest.approx((0.5, 1.0))
    assert res.winner is None  # 75% < 90%
    assert res.in_play == ["A", "B"]


def test_identical_cells_split_ties():
    x = [0.1, 0.7, 0.3, 0.9, 0.5]
    res = paired_bootstrap({"p": x, "q": list(x), "r": [v - 0.2 for v in x]}, n_resamples=500, seed=0)
    assert res.table.loc["p", "p_best"] == pytest.approx(0.5)
    assert res.table.loc["q", "p_best"] == pytest.approx(0.5)
    assert res.table.loc["r", "p_best"] == 0.0
    assert res.winner is None
    assert res.ruled_out == ["r"]
    assert math.isinf(res.questions_needed)
    assert "no number of questions would separate them" in res.verdict


def test_questions_to_separate_by_hand():
    # d = [1, 0, 1, 0]: mean 0.5, sd (ddof=1) = sqrt(1/3); n = (1.959964 * 0.57735 / 0.5)^2 = 5.122
    assert questions_to_separate([1, 0, 1, 0]) == pytest.approx((1.959964 * math.sqrt(1 / 3) / 0.5) ** 2, rel=1e-5)
    assert questions_to_separate([1, 0, 1, 0]) == pytest.approx(5.122, abs=1e-3)
    assert questions_to_separate([0.2, 0.2, 0.2]) == pytest.approx(0.0, abs=1e-12)
    assert math.isinf(questions_to_separate([1, -1]))
    assert math.isnan(questions_to_separate([1.0, np.nan]))
    # 90%: z = 1.644854
    assert questions_to_separate([1, 0, 1, 0], confidence=0.9) == pytest.approx((1.644854 * math.sqrt(1 / 3) / 0.5) ** 2, rel=1e-5)


def test_verdict_without_winner_names_in_play_cheapest_and_questions_needed():
    # big - small alternates +0.10 / -0.09: mean 0.005, far inside the noise.
    base = np.linspace(0.45, 0.55, 40)
    scores = {
        "big": base + np.tile([0.10, -0.09], 20),
        "small": base,
        "bad": base - 0.4,
    }
    cost = {"big": 900.0, "small": 300.0, "bad": 100.0}
    res = paired_bootstrap(scores, baseline="small", cost=cost, metric="recall", cost_name="retrieved tokens", seed=5, n_resamples=2000)
    assert res.winner is None
    assert res.ruled_out == ["bad"]
    assert set(res.in_play) == {"big", "small"}
    assert res.cheapest_in_play == "small"
    d = scores[res.best] - scores[res.runner_up]
    expected = (1.959964 * d.std(ddof=1) / d.mean()) ** 2
    assert res.questions_needed == pytest.approx(expected, rel=1e-5)
    v = res.verdict
    assert "No winner" in v
    assert "Ruled out" in v and "bad" in v
    assert "Cheapest cell in play by retrieved tokens: small" in v
    assert f"{max(2, math.ceil(expected))} questions" in v


def test_same_seed_same_numbers_and_seed_matters():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.uniform(size=(30, 4)), columns=list("wxyz"))
    r1 = paired_bootstrap(df, n_resamples=700, seed=11)
    r2 = paired_bootstrap(df, n_resamples=700, seed=11)
    r3 = paired_bootstrap(df, n_resamples=700, seed=12)
    pd.testing.assert_frame_equal(r1.table, r2.table)
    assert r1.verdict == r2.verdict
    assert not r1.table["diff_low"].equals(r3.table["diff_low"])


def test_lower_is_better_flips_the_sign():
    fast = [1.0, 2.0, 1.5]
    slow = [3.0, 4.0, 3.5]
    res = paired_bootstrap({"slow": slow, "fast": fast}, higher_is_better=False, n_resamples=200, percent=False)
    assert res.best == "fast" and res.winner == "fast"
    assert res.table.loc["fast", "diff"] == pytest.approx(2.0)  # 2 lower = 2 better
    assert res.table.loc["fast", "mean"] == pytest.approx(1.5)


def test_nan_is_dropped_pairwise():
    # b misses q3. b - a on q1, q2: [0.1, 0.1] -> diff exactly 0.1 with a degenerate interval;
    # a alone keeps all 3 questions for its mean.
    a = [0.5, 0.6, 0.0]
    b = [0.6, 0.7, np.nan]
    res = paired_bootstrap({"a": a, "b": b}, baseline="a", n_resamples=400, seed=2)
    t = res.table
    assert t.loc["b", "n"] == 2 and t.loc["a", "n"] == 3
    assert t.loc["a", "mean"] == pytest.approx(1.1 / 3)
    assert t.loc["b", "diff"] == pytest.approx(0.1)
    assert t.loc["b", "diff_low"] == pytest.approx(0.1)
    assert t.loc["b", "diff_high"] == pytest.approx(0.1)
    m, lo, hi = paired_difference_ci(b, a, n_resamples=400, seed=2)
    assert (m, lo, hi) == pytest.approx((0.1, 0.1, 0.1))


def test_to_dict_is_json_ready():
    import json

    res = paired_bootstrap({"a": [0.1, 0.2, 0.3], "b": [0.2, 0.2, 0.2]}, n_resamples=50, cost={"a": 10})
    d = json.loads(json.dumps(res.to_dict()))
    assert d["cells"]["b"]["cost"] is None
    assert d["cells"]["a"]["cost"] == 10.0
    assert d["verdict"] == res.verdict


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scores": {"a": [1, 2], "b": [1]}}, "same questions"),
        ({"scores": {"a": [1]}}, "at least 2 questions"),
        ({"scores": {"a": [1, 2]}, "baseline": "z"}, "baseline 'z' is not a cell"),
        ({"scores": {"a": [1, 2]}, "n_resamples": 0}, "n_resamples"),
        ({"scores": {"a": [1, 2]}, "confidence": 95}, "confidence"),
        ({"scores": {"a": [1, np.inf]}}, "infinite"),
        ({"scores": {"a": [np.nan, np.nan], "b": [1, 2]}}, "no score"),
        ({"scores": {"a": ["x", "y"]}}, "numbers"),
        ({"scores": [1, 2]}, "DataFrame"),
        ({"scores": {"a": [1, 2]}, "cost": {"q": 1}}, "cost names"),
    ],
)
def test_bad_input_gets_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        paired_bootstrap(**kwargs)


def test_interval_coverage_by_simulation():
    # 200 data sets of 40 paired questions with a known mean difference of 0.05 (sd 0.15):
    # the 95% percentile interval should cover 0.05 in roughly 95% of them; we accept 90-99%.
    rng = np.random.default_rng(2024)
    true = 0.05
    covered = 0
    for i in range(200):
        base = rng.uniform(0, 1, 40)
        other = base + true + rng.normal(0, 0.15, 40)
        m, lo, hi = paired_difference_ci(other, base, n_resamples=1000, seed=i)
        covered += lo <= true <= hi
    assert 180 <= covered <= 198, covered


def test_paired_difference_p_by_hand_and_consistent_with_the_interval():
    from chunkwise.evaluation.stats import paired_difference_ci, paired_difference_p

    # every question gains 1: no resample reaches 0
    assert paired_difference_p([1, 1, 1, 1], [0, 0, 0, 0], n_resamples=2000) == 0.0
    # differences +1 and -1: resampled means -1, 0, +1 with probabilities 1/4, 1/2, 1/4 -> p = 1
    assert paired_difference_p([1, 0], [0, 1], n_resamples=2000) == 1.0
    # differences 1 and 0: the mean is 0 with probability 1/4 -> p = 2 * 1/4
    assert paired_difference_p([1, 0], [0, 0], n_resamples=20_000) == pytest.approx(0.5, abs=0.02)
    assert paired_difference_p([0, 0, 0], [0, 0, 0]) == 1.0
    rng = np.random.default_rng(1)
    a, b = rng.random(40), rng.random(40)
    for shift in (0.0, 0.05, 0.1, 0.2):
        p = paired_difference_p(a + shift, b, n_resamples=4000, seed=5)
        _, lo, hi = paired_difference_ci(a + shift, b, n_resamples=4000, seed=5)
        assert (p < 0.05) == (lo > 0 or hi < 0)


def test_holm_by_hand():
    from chunkwise.evaluation.stats import holm

    # sorted .01 x4 = .04, .03 x3 = .09, .04 x2 = .08 -> .09 (monotone), .5 x1 = .5
    assert holm([0.01, 0.04, 0.03, 0.5]).tolist() == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert np.isnan(holm([0.2, float("nan")])[1]) and holm([0.2, float("nan")])[0] == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5])


def test_describe_interval():
    from chunkwise.evaluation.stats import describe_interval

    assert describe_interval(3.31, -1.14, 5.0) == "+3.3 [-1.1, +5.0]"
    assert describe_interval(0.612, 0.58, 0.641, scale=100, signed=False) == "61.2 [58.0, 64.1]"
    # a value that rounds to zero has no sign; NaN is n/a
    assert describe_interval(-0.04, -0.001, 0.0) == "0.0 [0.0, 0.0]"
    assert describe_interval(float("nan"), 1, 2, decimals=2) == "n/a [+1.00, +2.00]"


def test_verdict_decimals_quote_the_table_to_its_digits():
    # a - b = 0.123 on every question: winner a at 61.23%, b 12.30 points behind, interval degenerate.
    b = np.linspace(0.3, 0.678, 20)
    res = paired_bootstrap({"a": b + 0.123, "b": b}, n_resamples=300, seed=0)
    mean_a = 100 * float(np.mean(b + 0.123))
    assert res.winner == "a"
    two = verdict(res, decimals=2)
    assert f"{mean_a:.2f}%" in two and f"{mean_a:.1f}%" in res.verdict
    assert "at +12.30 points behind" in two and "+12.30 points to +12.30 points" in two
    assert "at +12.3 points behind" in res.verdict
    assert verdict(res) == res.verdict
    for bad in (-1, True, 2.5, "2", None, 11):
        with pytest.raises(ValueError, match="decimals must be an int from 0 to 10"):
            verdict(res, decimals=bad)
    assert verdict(res, decimals=np.int64(2)) == two


def test_paired_difference_ci_needs_two_questions_with_both_scores():
    with pytest.raises(ValueError, match="at least 2 questions with both scores, got 1"):
        paired_difference_ci([0.5, np.nan, np.nan], [0.2, 0.3, np.nan])
    assert paired_difference_ci([0.5, 0.7, np.nan], [0.2, 0.4, 0.1], n_resamples=200) == pytest.approx((0.3, 0.3, 0.3))


def test_interval_side_is_the_one_rule_for_reading_an_interval():
    from chunkwise.evaluation.stats import interval_side

    assert interval_side(0.1, 2.0) == "ahead" and interval_side(-2.0, -0.1) == "behind"
    assert interval_side(-0.1, 0.1) == "within" and interval_side(0.0, 1.0) == "within"  # 0 inside: no claim
    assert interval_side(float("nan"), 1.0) == "within" and interval_side(-1.0, float("nan")) == "within"
    assert interval_side(1.0, 2.0, ("supports", "contradicts", "cannot tell")) == "supports"
    from chunkwise.experiments.whatmatters import range_verdict
    from chunkwise.experiments.stitched import verdict_words

    assert range_verdict(-3.0, -1.0) == "chunker ahead" and verdict_words(-0.5, 0.5) == "cannot tell"
