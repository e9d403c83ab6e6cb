"""Variance components of a balanced grid with the sampling noise taken out, and paired interaction
contrasts (chunkwise.evaluation.variance, #58): hand cases, synthetic grids with known components,
errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from chunkwise.evaluation.variance import (
    FactorialGrid,
    interaction_contrast,
    interaction_contrasts,
    variance_components,
)


def tiny() -> pd.DataFrame:
    """Two questions, chunker x embedder, 2 x 2 (columns c1e1, c1e2, c2e1, c2e2)."""
    cols = pd.MultiIndex.from_product([["c1", "c2"], ["e1", "e2"]], names=["chunker", "embedder"])
    return pd.DataFrame([[1, 2, 3, 4], [3, 2, 5, 8]], columns=cols, dtype=float)


# --------------------------------------------------------------------------------------
# by hand
# --------------------------------------------------------------------------------------


def test_tiny_grid_by_hand():
    # cell means [[2, 2], [4, 6]] (chunker rows, embedder columns), grand mean 3.5.
    # SS over the 4 cells: chunker 4 * 1.5^2 = 9, embedder 4 * 0.5^2 = 1, interaction 4 * 0.5^2 = 1 (total 11).
    # Per question, the chunker part is +-1 (q1) and +-2 (q2): around their mean +-1.5, 4 cells x 0.25 x 2
    # questions = 2, over Q (Q - 1) = 2: noise 1. Embedder: +-0.5 in both questions: noise 0.
    # Interaction: 0 (q1) and +-1 (q2): noise 1. In variance units (/ 4 cells):
    out = variance_components(tiny(), n_resamples=0).set_index("source")
    assert list(out.index) == ["chunker", "embedder", "chunker x embedder", "sampling noise"]
    assert out["df"].tolist() == [1, 1, 1, 3]
    np.testing.assert_allclose(out["observed"], [9 / 4, 1 / 4, 1 / 4, 11 / 4])
    np.testing.assert_allclose(out["noise"], [1 / 4, 0, 1 / 4, 2 / 4])
    np.testing.assert_allclose(out["corrected"], [2, 1 / 4, 0, 2 / 4], atol=1e-12)
    np.testing.assert_allclose(out["share"], [2 / 2.75, 0.25 / 2.75, 0, 0.5 / 2.75], atol=1e-12)
    assert abs(out["share"].sum() - 1) < 1e-12  # nothing clipped: the shares add up to 1
    np.testing.assert_allclose(out["share_uncorrected"].iloc[:3], [9 / 11, 1 / 11, 1 / 11])
    np.testing.assert_allclose(out["share_of_signal"].iloc[:3], [2 / 2.25, 0.25 / 2.25, 0], atol=1e-12)
    assert not out["below_zero"].any() and out["share_low"].isna().all()
    effects = out.attrs["effects"]
    assert effects["chunker x embedder"] == pytest.approx([0.25, 0.25, 0.0])


def test_tiny_grid_with_the_pooled_error_by_hand():
    # pooled residual: the three effects' question deviations (2 + 0 + 2) over (C - 1)(Q - 1) = 3 df,
    # so each effect of 1 df carries 1 * (4/3) / Q = 2/3 in sums of squares, 1/6 in variance units
    out = variance_components(tiny(), error="pooled", n_resamples=0).set_index("source")
    np.testing.assert_allclose(out["noise"], [1 / 6, 1 / 6, 1 / 6, 1 / 2])
    np.testing.assert_allclose(out["corrected"].iloc[:3], [9 / 4 - 1 / 6, 1 / 4 - 1 / 6, 1 / 4 - 1 / 6])


def test_effects_partition_the_cell_means_and_do_not_depend_on_column_order():
    rng = np.random.default_rng(3)
    cols = pd.MultiIndex.from_product([["a", "b", "c"], ["x", "y"], [1, 3]], names=["chunker", "embedder", "k"])
    wide = pd.DataFrame(rng.random((7, 12)), columns=cols)
    grid = FactorialGrid(wide)
    assert grid.effects == [("chunker",), ("embedder",), ("k",), ("chunker", "embedder"), ("chunker", "k"),
                            ("embedder", "k"), ("chunker", "embedder", "k")]
    assert [grid.df[e] for e in grid.effects] == [2, 1, 1, 2, 2, 1, 2]
    # per question, the effects' parts add up to the scores around their mean
    parts = sum(grid.components.values())
    np.testing.assert_allclose(parts, wide.to_numpy() - wide.to_numpy().mean(axis=1, keepdims=True), atol=1e-12)
    out = variance_components(wide, n_resamples=0)
    means = wide.to_numpy().mean(axis=0)
    assert sum(v[0] for v in out.attrs["effects"].values()) == pytest.approx(means.var())
    shuffled = wide[wide.columns[rng.permutation(12)]]
    again = variance_components(shuffled, n_resamples=0)
    pd.testing.assert_frame_equal(out, again)
    assert list(out["source"]) == ["chunker", "embedder", "k", "chunker x embedder", "other interactions",
                                   "sampling noise"]
    assert out.set_index("source").loc["other interactions", "df"] == 2 + 1 + 2


# --------------------------------------------------------------------------------------
# synthetic grids with known components
# --------------------------------------------------------------------------------------

LEVELS = {"chunker": 4, "embedder": 3, "retriever": 2, "k": 2}
COLS = pd.MultiIndex.from_product([[f"{f[0]}{i}" for i in range(n)] for f, n in LEVELS.items()], names=list(LEVELS))
ALPHA = np.array([-0.1, -0.05, 0.05, 0.1])  # chunker: variance 0.00625
BETA = np.array([-0.06, 0.0, 0.06])  # embedder: 0.0024
GAMMA = np.array([-0.04, 0.04])  # retriever: 0.0016; k and every interaction: 0


def synthetic(seed: int, sigma: float, n_questions: int = 400, effects: bool = True) -> pd.DataFrame:
    """Pure main effects plus a question effect (sd 0.5, the same in every cell: it cancels) plus
    independent noise of standard deviation ``sigma`` in every cell."""
    rng = np.random.default_rng(seed)
    codes = [np.asarray(COLS.codes[i]) for i in range(4)]
    mu = ALPHA[codes[0]] + BETA[codes[1]] + GAMMA[codes[2]] if effects else np.zeros(len(COLS))
    y = mu + rng.normal(0, 0.5, (n_questions, 1)) + rng.normal(0, sigma, (n_questions, len(COLS)))
    return pd.DataFrame(y, columns=COLS)


def test_main_effects_plus_noise_are_recovered():
    out = variance_components(synthetic(0, sigma=0.5), n_resamples=1000).set_index("source")
    truth = np.array([0.00625, 0.0024, 0.0016, 0.0])
    # the noise of a cell mean is sigma^2 / Q; over the 48 cells it adds (47/48) sigma^2 / Q
    assert out.loc["sampling noise", "noise"] == pytest.approx(47 / 48 * 0.25 / 400, rel=0.05)
    # what is not noise splits as the truth does, within 0.05 (seed 0: errors 0.013, 0.031, 0.032, 0;
    # over 100 seeds the standard deviations are 0.034, 0.030, 0.025)
    signal = out.loc[["chunker", "embedder", "retriever", "k"], "share_of_signal"].to_numpy()
    np.testing.assert_allclose(signal, truth / truth.sum(), atol=0.05)
    for source in ("chunker x embedder", "embedder x retriever", "other interactions"):
        assert out.loc[source, "share"] < 0.01 and out.loc[source, "share_of_signal"] < 0.01
    # the uncorrected share of the lumped interactions is mostly noise
    assert out.loc["other interactions", "share_uncorrected"] > 4 * out.loc["other interactions", "share"]
    # the intervals hold the estimates and the true split
    for source, true in zip(["chunker", "embedder", "retriever"], truth / truth.sum()):
        row = out.loc[source]
        assert row["share_low"] <= row["share"] <= row["share_high"]
        assert row["signal_low"] <= true <= row["signal_high"]


def test_pure_noise_gives_shares_near_zero_and_says_when_an_estimate_is_below_zero():
    out = variance_components(synthetic(0, sigma=1.0, effects=False), n_resamples=500)
    sources = out.iloc[:-1]
    assert (out["share"] >= 0).all()  # never reported below 0
    assert sources["share"].max() <= 0.15  # seed 0: at most 0.106
    assert out.iloc[-1]["share"] >= 0.6  # the noise row holds the rest (seed 0: 0.75)
    below = sources[sources["below_zero"]]
    assert len(below) >= 1  # seed 0: embedder and k
    assert (below["corrected"] < 0).all() and (below["share"] == 0).all() and (below["share_of_signal"] == 0).all()
    assert below["note"].str.contains("below 0").all() and (sources[~sources["below_zero"]]["note"] == "").all()
    assert (sources["share_uncorrected"].sum()) == pytest.approx(1.0)  # uncorrected, noise is read as effect
    # over many grids the corrected estimates average 0; their shares, clipped at 0, a little above
    # (most for the lumped interactions, whose estimate has the largest spread: 32 degrees of freedom)
    runs = [variance_components(synthetic(s, 1.0, 200, effects=False), n_resamples=0) for s in range(30)]
    raw = np.array([r["corrected"].to_numpy()[:-1] / r["observed"].iloc[-1] for r in runs])
    shares = np.array([r["share"].to_numpy()[:-1] for r in runs])
    assert np.abs(raw.mean(axis=0)).max() < 0.04
    assert shares.mean(axis=0).max() < 0.1


def test_an_effect_no_question_can_move_carries_no_noise():
    # a retriever that reads no vectors: its cells are the same under every embedder (balanced_scores
    # copies them), so the embedder's effect within it is exactly 0 and so is its noise
    rng = np.random.default_rng(1)
    cols = pd.MultiIndex.from_product([["c1", "c2", "c3"], ["e1", "e2"], ["bm25", "dense"]],
                                      names=["chunker", "embedder", "retriever"])
    y = rng.random((50, 12))
    frame = pd.DataFrame(y, columns=cols)
    for c in ("c1", "c2", "c3"):
        frame[(c, "e2", "bm25")] = frame[(c, "e1", "bm25")]
    bm25 = variance_components(frame.xs("bm25", axis=1, level="retriever", drop_level=False).droplevel(
        "retriever", axis=1), n_resamples=0).set_index("source")
    assert bm25.loc["embedder", "observed"] == pytest.approx(0, abs=1e-15)
    assert bm25.loc["embedder", "noise"] == pytest.approx(0, abs=1e-15)
    pooled = variance_components(frame, error="pooled", n_resamples=0).set_index("source")
    effect = variance_components(frame, n_resamples=0).set_index("source")
    assert list(effect.index) == ["chunker", "embedder", "retriever", "chunker x embedder", "embedder x retriever",
                                  "other interactions", "sampling noise"]
    assert effect.loc["embedder", "noise"] < pooled.loc["embedder", "noise"]  # half its cells cannot move


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------


def test_errors():
    wide = tiny()
    with pytest.raises(ValueError, match="not balanced: 3 cells of the 4"):
        variance_components(wide.iloc[:, :3], n_resamples=0)
    dup = pd.concat([wide, wide.iloc[:, [0]]], axis=1)
    with pytest.raises(ValueError, match="appear more than once"):
        variance_components(dup, n_resamples=0)
    one = wide.xs("e1", axis=1, level="embedder", drop_level=False)
    with pytest.raises(ValueError, match=r"factor\(s\) \['embedder'\] have a single level"):
        variance_components(one, n_resamples=0)
    nan = wide.copy()
    nan.iloc[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        variance_components(nan, n_resamples=0)
    with pytest.raises(ValueError, match="at least 2 questions"):
        variance_components(wide.iloc[:1], n_resamples=0)
    with pytest.raises(ValueError, match="two different factors"):
        variance_components(wide, [("chunker", "chunker")], n_resamples=0)
    with pytest.raises(ValueError, match="two different factors"):
        variance_components(wide, [("chunker", "retriever")], n_resamples=0)
    with pytest.raises(ValueError, match="error must be one of"):
        variance_components(wide, error="residual")
    with pytest.raises(ValueError, match="n_resamples"):
        variance_components(wide, n_resamples=50)
    with pytest.raises(ValueError, match="confidence"):
        variance_components(wide, confidence=0.3)
    unnamed = wide.copy()
    unnamed.columns = unnamed.columns.set_names([None, "embedder"])
    with pytest.raises(ValueError, match="named factor"):
        variance_components(unnamed, n_resamples=0)
    with pytest.raises(ValueError, match="DataFrame"):
        variance_components(wide.to_numpy(), n_resamples=0)
    single = pd.DataFrame({"a": [1.0, 2.0], "b": [2.0, 2.5]}).rename_axis(columns="chunker")
    assert list(variance_components(single, n_resamples=0)["source"]) == ["chunker", "sampling noise"]


# --------------------------------------------------------------------------------------
# does the ranking transfer: paired interaction contrasts
# --------------------------------------------------------------------------------------


def test_interaction_contrast_by_hand():
    cols = pd.MultiIndex.from_product([["c1", "c2"], ["e1", "e2"]], names=["chunker", "embedder"])
    wide = pd.DataFrame([[0.9, 0.5, 0.4, 0.6], [0.7, 0.6, 0.5, 0.4]], columns=cols)
    r = interaction_contrast(wide, ("c1", "c2"), ("e1", "e2"), n_resamples=200)
    # gaps c1 - c2 per question: under e1 0.5 and 0.2, under e2 -0.1 and 0.2; contrasts 0.6 and 0.0
    assert r["gap_1"] == pytest.approx(0.35) and r["gap_2"] == pytest.approx(0.05)
    assert r["contrast"] == pytest.approx(0.30)
    np.testing.assert_allclose(r["per_question"], [0.6, 0.0], atol=1e-12)
    assert r["contrast_low"] <= r["contrast"] <= r["contrast_high"] and r["n_questions"] == 2
    assert (r["r1"], r["r2"], r["a1"], r["a2"]) == ("c1", "c2", "e1", "e2")
    swapped = interaction_contrast(wide, ("c2", "c1"), ("e1", "e2"), n_resamples=200)
    assert swapped["contrast"] == pytest.approx(-0.30)


def test_interaction_contrast_averages_the_other_factors():
    cols = pd.MultiIndex.from_product([["c1", "c2"], ["e1", "e2"], [1, 5]], names=["chunker", "embedder", "k"])
    row = [1.0, 0.0, 0.2, 0.2, 0.4, 0.4, 0.6, 0.0]  # c1e1: (1, 0) -> 0.5; c1e2: 0.2; c2e1: 0.4; c2e2: 0.3
    wide = pd.DataFrame([row, row], columns=cols)
    r = interaction_contrast(wide, ("c1", "c2"), ("e1", "e2"), n_resamples=100)
    assert r["gap_1"] == pytest.approx(0.1) and r["gap_2"] == pytest.approx(-0.1)
    assert r["contrast"] == pytest.approx(0.2)
    assert r["contrast_low"] == pytest.approx(0.2) and r["contrast_high"] == pytest.approx(0.2)  # no spread
    assert r["reverses"] and r["contrast_clear"]


def test_a_reversal_beyond_the_noise_and_a_gap_that_transfers():
    rng = np.random.default_rng(0)
    cols = pd.MultiIndex.from_product([["a", "b", "c"], ["e1", "e2"]], names=["chunker", "embedder"])
    # a beats b by 0.1 under e1 and loses by 0.1 under e2; c is 0.05 below a under both
    mu = np.array([0.6, 0.5, 0.5, 0.6, 0.55, 0.45])
    wide = pd.DataFrame(mu + rng.normal(0, 0.05, (200, 6)), columns=cols)
    table = interaction_contrasts(wide, n_resamples=1000)
    assert len(table) == 3 and list(table.columns[:6]) == ["ranked", "across", "r1", "r2", "a1", "a2"]
    ab = table[(table.r1 == "a") & (table.r2 == "b")].iloc[0]
    # its standard error is 2 * 0.05 / sqrt(200) = 0.007 (seed 0: 0.175, 95% interval 0.163 to 0.189)
    assert ab["reverses"] and ab["contrast_clear"] and ab["contrast"] == pytest.approx(0.2, abs=0.03)
    ac = table[(table.r1 == "a") & (table.r2 == "c")].iloc[0]
    assert not ac["reverses"] and ac["contrast_low"] < 0 < ac["contrast_high"]
    assert table.attrs["summary"].startswith("2 of 3 pairs of chunkers reverse their order between two embedders")


def test_interaction_contrast_errors():
    wide = tiny()
    with pytest.raises(ValueError, match="two different levels"):
        interaction_contrast(wide, ("c1", "c1"), ("e1", "e2"))
    with pytest.raises(ValueError, match="two different levels"):
        interaction_contrast(wide, ("c1", "c9"), ("e1", "e2"))
    with pytest.raises(ValueError, match="two different factors"):
        interaction_contrast(wide, ("c1", "c2"), ("e1", "e2"), across="retriever")
    with pytest.raises(ValueError, match="at least 2 questions"):
        interaction_contrast(wide.iloc[:1], ("c1", "c2"), ("e1", "e2"))
    nan = wide.copy()
    nan.iloc[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        interaction_contrast(nan, ("c1", "c2"), ("e1", "e2"))
    with pytest.raises(ValueError, match="two different factors"):
        interaction_contrasts(wide, ranked="embedder", across="embedder")
