"""Intervals that contain their estimate, and formatters that never print ``nan`` (issue #56)."""

import math

import numpy as np
import pandas as pd
import pytest

from chunkwise.evaluation.intervals import bootstrap_interval, interval_text, rank_correlation_interval

NAN = float("nan")


def test_percentile_and_basic_both_exclude_an_estimate_beyond_every_resample_and_cover_contains_it():
    # every resample gives 0.6, the estimate is 0.8 (noise pulled every resampled correlation down)
    boot = [0.6] * 10
    assert bootstrap_interval(0.8, boot, method="percentile") == pytest.approx((0.6, 0.6))  # excludes 0.8
    assert bootstrap_interval(0.8, boot, method="basic") == pytest.approx((1.0, 1.0))  # 2 * 0.8 - 0.6: excludes too
    assert bootstrap_interval(0.8, boot, method="cover") == pytest.approx((0.6, 1.0))  # contains 0.8
    # a correlation cannot pass 1: 2 * 0.9 - 0.6 = 1.2 is clipped, 0.9 stays inside
    assert rank_correlation_interval(0.9, boot) == pytest.approx((0.6, 1.0))
    assert rank_correlation_interval(-0.9, [-0.6] * 10) == pytest.approx((-1.0, -0.6))


def test_cover_equals_percentile_when_the_resamples_centre_on_the_estimate():
    boot = [0.0, 1.0, 2.0, 3.0, 4.0]  # quantiles at 25% / 75%: 1 and 3
    assert bootstrap_interval(2.0, boot, confidence=0.5, method="percentile") == pytest.approx((1.0, 3.0))
    assert bootstrap_interval(2.0, boot, confidence=0.5, method="basic") == pytest.approx((1.0, 3.0))
    assert bootstrap_interval(2.0, boot, confidence=0.5, method="cover") == pytest.approx((1.0, 3.0))
    # estimate 2.5: basic = (5 - 3, 5 - 1) = (2, 4); cover = (1, 4)
    assert bootstrap_interval(2.5, boot, confidence=0.5, method="basic") == pytest.approx((2.0, 4.0))
    assert bootstrap_interval(2.5, boot, confidence=0.5, method="cover") == pytest.approx((1.0, 4.0))
    assert bootstrap_interval(0.1, [0.0, 0.4], confidence=0.5, method="basic", bounds=(0.0, None)) == \
        pytest.approx((0.0, 0.1))  # 0.2 - 0.3 clipped at 0, 0.2 - 0.1


def test_cover_always_contains_the_estimate():
    rng = np.random.default_rng(3)
    for _ in range(200):
        boot = rng.normal(rng.normal(), rng.uniform(0.01, 2), size=50)
        est = float(rng.normal(0, 3))
        lo, hi = bootstrap_interval(est, boot, method="cover")
        assert lo <= est <= hi
        lo, hi = rank_correlation_interval(float(np.tanh(est)), np.tanh(boot))
        assert -1 <= lo <= np.tanh(est) <= hi <= 1


def test_no_estimate_or_no_resample_gives_no_interval():
    assert all(math.isnan(v) for v in rank_correlation_interval(NAN, [0.1, 0.2]))
    assert all(math.isnan(v) for v in rank_correlation_interval(0.5, [NAN, NAN]))
    assert all(math.isnan(v) for v in rank_correlation_interval(0.5, []))
    assert rank_correlation_interval(0.5, [NAN, 0.5, 0.5]) == (0.5, 0.5)  # undefined resamples are dropped
    with pytest.raises(ValueError, match="method"):
        bootstrap_interval(0.5, [0.5], method="bca")
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_interval(0.5, [0.5], confidence=95)


def test_rank_agreement_attenuated_by_noise_keeps_its_estimate_inside():
    from chunkwise.experiments.questions import rank_agreement

    # 12 cells in the same order under both sets, means 0.01 apart, question noise +-0.1: the
    # estimate is tau = 1, and nearly every resample scrambles some pair (percentile upper end < 1)
    rng = np.random.default_rng(0)
    means = np.arange(12) / 100

    def scores(n):
        noise = rng.choice([-0.1, 0.1], size=(n, 12))
        noise -= noise.mean(axis=0)  # means exactly ``means``
        return pd.DataFrame(means + noise, columns=[f"c{j}" for j in range(12)])

    res = rank_agreement(scores(20), scores(20), n_resamples=400, seed=0)
    assert res.kendall == pytest.approx(1.0) and res.spearman == pytest.approx(1.0)
    assert res.kendall_ci[0] < 1.0 and res.kendall_ci[1] == pytest.approx(1.0)
    assert res.spearman_ci[0] < 1.0 and res.spearman_ci[1] == pytest.approx(1.0)


def test_interval_text_says_why_there_is_none():
    assert interval_text(0.1234, 0.8) == "[0.12, 0.80]"
    assert interval_text(-1.5, 2.26, "+.1f") == "[-1.5, +2.3]"
    assert interval_text(0.1, 0.2, brackets="", sep=" to ") == "0.10 to 0.20"
    assert interval_text(NAN, NAN, n=3) == "no interval: n=3 questions"
    assert interval_text(None, 0.2, n=3, unit="items") == "no interval: n=3 items"
    assert interval_text(0.1, math.inf, why="too few methods") == "no interval: too few methods"
    assert interval_text(NAN, NAN) == "no interval"


def test_no_interval_formatter_prints_nan():
    from chunkwise.crud import experiment as crud
    from chunkwise.evaluation.stats import describe_interval
    from chunkwise.experiments.questions import RankAgreement

    texts = [
        interval_text(NAN, NAN), interval_text(NAN, 0.3, n=3), interval_text(None, None, "+.1f", why="x"),
        describe_interval(NAN, NAN, NAN), describe_interval(0.1, NAN, 0.2, scale=100),
        crud.format_interval(NAN, NAN), crud.format_interval(0.1, NAN, ".2f"),
        crud.rank_text({"spearman": -0.15, "ci_low": NAN, "ci_high": NAN, "n_methods": 12, "n_questions": 3}),
        crud.rank_text({"spearman": NAN, "ci_low": NAN, "ci_high": NAN, "n_methods": 2, "n_questions": 3}),
        RankAgreement(cells=["a", "b", "c"], means_a=np.zeros(3), means_b=np.arange(3.0), spearman=NAN, kendall=NAN,
                      spearman_ci=(NAN, NAN), kendall_ci=(NAN, NAN), confidence=0.95, n_resamples=10,
                      n_questions_a=2, n_questions_b=2).describe(),
        RankAgreement(cells=["a", "b", "c"], means_a=np.arange(3.0), means_b=np.arange(3.0), spearman=1.0,
                      kendall=1.0, spearman_ci=(NAN, NAN), kendall_ci=(1.0, 1.0), confidence=0.95, n_resamples=10,
                      n_questions_a=2, n_questions_b=2).describe(),
    ]
    for t in texts:
        assert "nan" not in t.lower(), t
    assert crud.rank_text({"spearman": -0.15, "ci_low": NAN, "ci_high": NAN, "n_questions": 3}) == \
        "Spearman -0.15 (no interval: n=3 questions)"
    assert crud.rank_text({"spearman": 0.68, "ci_low": -0.24, "ci_high": 0.8, "n_questions": 50}) == \
        "Spearman 0.68 [-0.24, 0.80]"
