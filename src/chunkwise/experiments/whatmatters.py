"""Chapter 7, "What matters most?": the chunker against the embedder, the retriever and k.

One grid (:func:`chunkwise.evaluation.grid.run_grid` with an embedder axis) crosses chunkers,
embedders, retrievers and ``k`` on the Chroma protocol. This module reads its per-question
scores three ways, each with a bootstrap over questions (the unit that was sampled):

- :func:`factor_ranges`: for each factor, the mean metric at its worst and best level
  (averaged over every other factor) and the range between them, with the basic bootstrap
  interval of the range recomputed in each resample (best and worst are re-chosen in every
  resample), and the **cross-fitted** best-minus-worst contrast (:func:`cross_fitted_contrast`:
  the pair chosen on one half of the questions, scored on the other, halves swapped), which is
  not picked on the questions it is scored on and so needs no correction for the selection;
- :func:`variance_shares`: how the variance of the cells' means splits into each factor's main
  effect and the rest (interactions), with intervals;
- :func:`ranking_agreement`: whether the chunkers' order under one embedder holds under
  another (Spearman's rho with an interval).

Why not the percentile interval of a range: the best and the worst of several noisy means are
picked on the data, so a range is biased upward, and a resample picks them again from noisier
means, so the resampled ranges sit higher still. The percentile interval keeps that bias; the
basic interval (the resamples reflected around the estimate) undoes it to first order. The
cross-fitted contrast avoids it: its pair is fixed before the questions that score it are seen,
so it is a plain paired mean with an ordinary interval (which contains it), and a factor with no
effect gets a contrast near 0 rather than a positive range. :func:`range_difference` compares
two factors that way, with the basic interval of the difference of ranges as the alternative.

The design is made balanced first (:func:`balanced_scores`): a retriever that reads no vectors
(BM25) has one cell per chunker and k, which stands for every embedder level (its ranking does
not depend on the embedder), so the embedder's effect within BM25 is zero by construction.

References
----------
.. [1] R. Qu, R. Tu and F. Bao, "Is Semantic Chunking Worth the Computational Cost?", 2024,
   arXiv:2410.13070 (embedding quality "could have more influence" than the chunking strategy).
.. [2] B. Efron and R. Tibshirani, *An Introduction to the Bootstrap*, 1993 (percentile intervals).
.. [3] A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*, 1997 (the basic
   interval, eq. 5.6).
.. [4] V. Chernozhukov et al., "Double/debiased machine learning for treatment and structural
   parameters", *Econometrics Journal* 21, 2018 (cross-fitting: choose on one fold, estimate on
   the other, swap).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from chunkwise.evaluation.intervals import bootstrap_interval, rank_correlation_interval

__all__ = [
    "FACTORS", "balanced_scores", "chapter_answer", "cross_fitted_contrast", "factor_ranges", "halves",
    "range_difference", "range_verdict", "ranking_agreement", "variance_shares",
]

#: The factors of the grid, as columns of ``GridResult.per_question``.
FACTORS: tuple[str, ...] = ("chunker", "embedder", "retriever", "k")


def balanced_scores(result: Any, metric: str = "recall", factors: Sequence[str] = FACTORS) -> pd.DataFrame:
    """Per-question scores of a balanced factorial table.

    Parameters
    ----------
    result : GridResult
        A run with an embedder axis (its ``per_question`` has an ``embedder`` column; ``-`` marks
        a retriever that reads no vectors).
    metric : str, default "recall"
        A per-question metric column (``hit`` and ``rr`` for hit rate and MRR).
    factors : sequence of str
        Columns that define a cell.

    Returns
    -------
    DataFrame
        Rows = questions (in run order), columns = a MultiIndex over ``factors`` (one column per
        combination of levels), values = the metric. A ``-`` (no embedder) cell is repeated
        under every embedder level.

    Raises
    ------
    ValueError
        If a factor or the metric is not a column, or a combination of levels has no cell (the
        grid is not a full factorial).
    """
    pq = result.per_question
    from chunkwise.evaluation.cells import metric as _metric

    col = _metric(metric).name
    missing = [c for c in (*factors, col) if c not in pq.columns]
    if missing:
        raise ValueError(f"per_question lacks column(s) {missing}; run the grid with an embedder axis.")
    frame = pq[[*factors, "question_id", col]].copy()
    if "embedder" in factors:
        levels = [e for e in dict.fromkeys(frame["embedder"]) if e != "-"]
        shared = frame[frame["embedder"] == "-"]
        if not shared.empty and levels:
            copies = [shared.assign(embedder=e) for e in levels]
            frame = pd.concat([frame[frame["embedder"] != "-"], *copies], ignore_index=True)
    wide = frame.pivot_table(index="question_id", columns=list(factors), values=col, aggfunc="first", sort=False)
    order = list(dict.fromkeys(pq["question_id"]))
    wide = wide.loc[order]
    expected = int(np.prod([wide.columns.get_level_values(f).nunique() for f in factors]))
    if wide.shape[1] != expected:
        raise ValueError(f"the grid is not a full factorial over {list(factors)}: {wide.shape[1]} cells of {expected}.")
    return wide


def _resamples(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Resampling weights over ``n`` questions, shape (n_resamples, n), rows summing to 1
    (the paired bootstrap's draws, :mod:`chunkwise.evaluation.stats`)."""
    from chunkwise.evaluation.stats import _resample_counts

    return _resample_counts(np.random.default_rng(seed), n, n_resamples) / n


def _values(wide: pd.DataFrame, what: str) -> np.ndarray:
    values = wide.to_numpy(dtype=float)
    if np.isnan(values).any():
        raise ValueError(f"the scores hold NaN; {what} need a score for every question and cell.")
    return values


def _check_boot(n_resamples: int, confidence: float) -> None:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
        raise ValueError(f"n_resamples must be an int >= 100, got {n_resamples!r}.")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence!r}.")


def halves(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two halves of ``n`` questions for cross-fitting: a random split (``numpy`` generator seeded
    with ``[seed, 1]``, apart from the resamples' stream), sizes ``n // 2`` and ``n - n // 2``,
    each sorted.

    Raises
    ------
    ValueError
        For fewer than 4 questions (each half needs 2).
    """
    if n < 4:
        raise ValueError(f"cross-fitting needs at least 4 questions (2 per half), got {n}.")
    order = np.random.default_rng([int(seed), 1]).permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def _cross_fit(per_q: np.ndarray, split: tuple[np.ndarray, np.ndarray], levels: Sequence[Any]) -> tuple[np.ndarray, str]:
    """Per question, the best-minus-worst contrast of the pair chosen on the other half.

    ``per_q`` has shape (Q, L): each question's mean over each level. Returns the (Q,) contrasts
    and the two chosen pairs in words (``"best - worst | best - worst"``, chosen on the first
    half, then on the second)."""
    out = np.empty(per_q.shape[0])
    words = []
    for choose, score in (split, split[::-1]):
        m = per_q[choose].mean(axis=0)
        best, worst = int(m.argmax()), int(m.argmin())
        out[score] = per_q[score, best] - per_q[score, worst]
        words.append(f"{levels[best]} - {levels[worst]}")
    return out, " | ".join(words)


def cross_fitted_contrast(
    wide: pd.DataFrame, factor: str, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> dict[str, Any]:
    """The cross-fitted best-minus-worst contrast of one factor, with a paired bootstrap interval.

    The questions are split in two halves (:func:`halves`). On the first half the factor's best
    and worst levels (by mean metric over every other factor) are chosen, and their difference is
    scored on each question of the second half; then the halves swap. Every question is scored
    once, by a pair chosen without it, and the contrast is the mean of those per-question
    differences; its interval is the percentile interval of that mean over resamples of the
    questions (the pairs stay fixed), which contains it.

    Parameters
    ----------
    wide : DataFrame
        From :func:`balanced_scores`.
    factor : str
        A factor (column level) of ``wide``.
    n_resamples, seed, confidence
        The bootstrap over questions; ``seed`` also fixes the split.

    Returns
    -------
    dict
        ``contrast``, ``low``, ``high`` (metric units), ``pairs`` (the two chosen pairs, in
        words) and ``per_question`` (the (Q,) contrasts, in ``wide``'s row order).

    Raises
    ------
    ValueError
        For an unknown factor, fewer than 4 questions, NaN scores or bad bootstrap settings.
    """
    _check_boot(n_resamples, confidence)
    if factor not in wide.columns.names:
        raise ValueError(f"factor must be one of {list(wide.columns.names)}, got {factor!r}.")
    values = _values(wide, "the cross-fitted contrast")
    codes = wide.columns.get_level_values(factor)
    levels = list(dict.fromkeys(codes))
    per_q = np.stack([values[:, np.asarray(codes == lv)].mean(axis=1) for lv in levels], axis=1)
    contrast, pairs = _cross_fit(per_q, halves(values.shape[0], seed), levels)
    boot = _resamples(values.shape[0], n_resamples, seed) @ contrast
    alpha = (1 - confidence) / 2
    return {"contrast": float(contrast.mean()), "low": float(np.quantile(boot, alpha)),
            "high": float(np.quantile(boot, 1 - alpha)), "pairs": pairs, "per_question": contrast}


def factor_ranges(
    wide: pd.DataFrame, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> pd.DataFrame:
    """Each factor's worst and best level and the range between them, in metric units.

    Parameters
    ----------
    wide : DataFrame
        From :func:`balanced_scores`.
    n_resamples, seed, confidence
        The bootstrap over questions (rows of ``wide``).

    Returns
    -------
    DataFrame
        One row per factor, largest range first: ``factor``, ``n_levels``, ``worst``, ``best``
        (levels), ``worst_mean``, ``best_mean`` (the metric averaged over every other factor and
        the questions), ``range`` (best minus worst), ``range_low`` / ``range_high`` (basic
        bootstrap interval of max minus min level mean, both re-chosen in each resample, clipped
        at 0), ``range_pct_low`` / ``range_pct_high`` (the percentile interval of the same
        resamples, kept for comparison), ``diff_low`` / ``diff_high`` (interval of the fixed pair
        best minus worst as chosen on all questions, paired over questions) and ``xfit``,
        ``xfit_low``, ``xfit_high``, ``xfit_pairs`` (:func:`cross_fitted_contrast`).

    Raises
    ------
    ValueError
        For bad bootstrap settings or NaN scores.
    """
    _check_boot(n_resamples, confidence)
    values = _values(wide, "the factor ranges")
    w = _resamples(values.shape[0], n_resamples, seed)
    alpha = (1 - confidence) / 2
    split = halves(values.shape[0], seed)
    rows = []
    for f in wide.columns.names:
        codes = wide.columns.get_level_values(f)
        levels = list(dict.fromkeys(codes))
        per_q = np.stack([values[:, np.asarray(codes == lv)].mean(axis=1) for lv in levels], axis=1)  # (Q, L)
        means = per_q.mean(axis=0)
        best, worst = int(means.argmax()), int(means.argmin())
        boot = w @ per_q  # (B, L)
        span = boot.max(axis=1) - boot.min(axis=1)
        diff = boot[:, best] - boot[:, worst]
        rng_ = float(means[best] - means[worst])
        low, high = bootstrap_interval(rng_, span, confidence, method="basic", bounds=(0.0, None))
        p_low, p_high = bootstrap_interval(rng_, span, confidence, method="percentile")
        per_q_contrast, pairs = _cross_fit(per_q, split, levels)
        xb = w @ per_q_contrast
        rows.append({
            "factor": f, "n_levels": len(levels), "worst": levels[worst], "best": levels[best],
            "worst_mean": float(means[worst]), "best_mean": float(means[best]),
            "range": rng_, "range_low": low, "range_high": high, "range_pct_low": p_low, "range_pct_high": p_high,
            "diff_low": float(np.quantile(diff, alpha)), "diff_high": float(np.quantile(diff, 1 - alpha)),
            "xfit": float(per_q_contrast.mean()), "xfit_low": float(np.quantile(xb, alpha)),
            "xfit_high": float(np.quantile(xb, 1 - alpha)), "xfit_pairs": pairs,
        })
    return pd.DataFrame(rows).sort_values("range", ascending=False, kind="stable").reset_index(drop=True)


def _shares(cell_means: np.ndarray, codes: list[np.ndarray]) -> np.ndarray:
    """Main-effect sums of squares over the total, per factor, for each row of ``cell_means``
    (shape (B, C)); ``codes[f]`` = level index of each cell for factor f."""
    grand = cell_means.mean(axis=1, keepdims=True)
    total = ((cell_means - grand) ** 2).sum(axis=1)
    out = []
    for c in codes:
        n_levels = int(c.max()) + 1
        ss = np.zeros(cell_means.shape[0])
        for lv in range(n_levels):
            at = c == lv
            ss += at.sum() * (cell_means[:, at].mean(axis=1) - grand[:, 0]) ** 2
        out.append(ss)
    stacked = np.stack(out, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total[:, None] > 0, stacked / total[:, None], np.nan)


def variance_shares(
    wide: pd.DataFrame, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> pd.DataFrame:
    """How the variance of the cells' mean scores splits by factor (a balanced ANOVA of the cell means).

    For a full factorial the total sum of squares of the cell means around their grand mean is
    the sum of each factor's main effect (levels' means around the grand mean, times the cells
    per level) and the interactions; the shares are those parts over the total.

    Parameters
    ----------
    wide : DataFrame
        From :func:`balanced_scores`.
    n_resamples, seed, confidence
        The bootstrap over questions: cell means recomputed from each resample.

    Returns
    -------
    DataFrame
        One row per factor and one ``interactions`` row (the remainder), largest first:
        ``source``, ``share`` (fraction of the total), ``share_low`` / ``share_high``.

    Raises
    ------
    ValueError
        For bad bootstrap settings or NaN scores.
    """
    _check_boot(n_resamples, confidence)
    values = _values(wide, "the variance shares")
    names = list(wide.columns.names)
    codes = []
    for f in names:
        lv = wide.columns.get_level_values(f)
        index = {v: i for i, v in enumerate(dict.fromkeys(lv))}
        codes.append(np.asarray([index[v] for v in lv]))
    point = _shares(values.mean(axis=0, keepdims=True), codes)[0]
    boot = _shares(_resamples(values.shape[0], n_resamples, seed) @ values, codes)
    alpha = (1 - confidence) / 2
    rows = [{"source": f, "share": float(point[i]), "share_low": float(np.nanquantile(boot[:, i], alpha)),
             "share_high": float(np.nanquantile(boot[:, i], 1 - alpha))} for i, f in enumerate(names)]
    rest_b = 1 - boot.sum(axis=1)
    rows.append({"source": "interactions", "share": float(1 - point.sum()),
                 "share_low": float(np.nanquantile(rest_b, alpha)), "share_high": float(np.nanquantile(rest_b, 1 - alpha))})
    return pd.DataFrame(rows).sort_values("share", ascending=False, kind="stable").reset_index(drop=True)


def ranking_agreement(
    wide: pd.DataFrame,
    across: str = "embedder",
    ranked: str = "chunker",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Does the order of the ``ranked`` levels hold from one ``across`` level to another?

    The ``ranked`` levels (chunkers) are scored under each ``across`` level (embedder) by their
    mean over the other factors and the questions; each pair of ``across`` levels gets
    Spearman's rho between the two orders, with an interval from resampling questions that
    contains it (:func:`chunkwise.evaluation.intervals.rank_correlation_interval`).

    Parameters
    ----------
    wide : DataFrame
        From :func:`balanced_scores` (restrict its columns first to fix a retriever, e.g.
        ``wide.xs("dense", axis=1, level="retriever", drop_level=False)``).
    across, ranked : str
        Factor names.
    n_resamples, seed, confidence
        The bootstrap over questions.

    Returns
    -------
    DataFrame
        One row per pair: ``a``, ``b`` (levels of ``across``), ``rho``, ``rho_low``,
        ``rho_high``, ``n_ranked`` and ``same_best`` (whether both put the same level first).

    Raises
    ------
    ValueError
        For unknown factors, fewer than 3 ranked levels, or bad bootstrap settings.
    """
    _check_boot(n_resamples, confidence)
    names = list(wide.columns.names)
    if across not in names or ranked not in names or across == ranked:
        raise ValueError(f"across and ranked must be two different factors of {names}.")
    values = wide.to_numpy(dtype=float)
    a_codes = wide.columns.get_level_values(across)
    r_codes = wide.columns.get_level_values(ranked)
    a_levels = list(dict.fromkeys(a_codes))
    r_levels = list(dict.fromkeys(r_codes))
    if len(r_levels) < 3:
        raise ValueError(f"a rank correlation needs at least 3 levels of {ranked}, got {len(r_levels)}.")
    w = _resamples(values.shape[0], n_resamples, seed)
    # per question: the mean of each (across, ranked) pair -> (Q, A, R)
    per_q = np.stack([
        np.stack([values[:, np.asarray((a_codes == a) & (r_codes == r))].mean(axis=1) for r in r_levels], axis=1)
        for a in a_levels
    ], axis=1)
    point = per_q.mean(axis=0)  # (A, R)
    boot = np.einsum("bq,qar->bar", w, per_q)
    alpha = (1 - confidence) / 2
    rows = []
    for i in range(len(a_levels)):
        for j in range(i + 1, len(a_levels)):
            rho = float(spearmanr(point[i], point[j]).statistic)
            rb = np.asarray([spearmanr(boot[b, i], boot[b, j]).statistic for b in range(len(boot))], dtype=float)
            low, high = rank_correlation_interval(rho, rb, confidence)
            rows.append({"a": a_levels[i], "b": a_levels[j], "rho": rho, "rho_low": low, "rho_high": high,
                         "n_ranked": len(r_levels),
                         "same_best": bool(point[i].argmax() == point[j].argmax())})
    return pd.DataFrame(rows)


def range_difference(
    wide: pd.DataFrame, a: str = "embedder", b: str = "chunker", n_resamples: int = 2000, seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Does factor ``a`` move the metric more than factor ``b``, best level against worst?

    The primary statistic is the difference of the two factors' **cross-fitted** best-minus-worst
    contrasts (:func:`cross_fitted_contrast`, the same split for both): per question, ``a``'s
    contrast minus ``b``'s, each scored with the pair chosen on the other half of the questions;
    its interval is the percentile interval of the mean of those per-question differences over
    resamples of the questions (paired: both contrasts are resampled together), which contains it.

    The alternative is the difference of the two **ranges** (max minus min level mean, both
    picked on all questions), with the basic bootstrap interval of the ranges recomputed in each
    resample (best and worst re-chosen): the percentile interval of those resamples (also
    returned) keeps the upward bias of a range picked on the data, which is larger for the factor
    with more levels.

    Parameters
    ----------
    wide : DataFrame
        From :func:`balanced_scores`.
    a, b : str
        Two factors.
    n_resamples, seed, confidence
        The bootstrap over questions; ``seed`` also fixes the split in halves.

    Returns
    -------
    dict
        Primary: ``contrast_a``, ``contrast_b``, ``diff`` (``contrast_a - contrast_b``, metric
        units), ``diff_low`` / ``diff_high``, ``pairs_a`` / ``pairs_b`` (the chosen pairs, in
        words), ``per_question`` (the (Q,) differences ``diff`` is the mean of).
        Alternative: ``range_a``, ``range_b``, ``range_diff`` (``range_a - range_b``),
        ``range_low`` / ``range_high`` (basic) and ``range_pct_low`` / ``range_pct_high``
        (percentile).

    Raises
    ------
    ValueError
        For unknown factors, fewer than 4 questions, NaN scores or bad bootstrap settings.
    """
    _check_boot(n_resamples, confidence)
    names = list(wide.columns.names)
    if a not in names or b not in names or a == b:
        raise ValueError(f"a and b must be two different factors of {names}.")
    values = _values(wide, "the range difference")
    w = _resamples(values.shape[0], n_resamples, seed)
    split = halves(values.shape[0], seed)

    def level_means(f: str) -> tuple[np.ndarray, list[Any]]:
        codes = wide.columns.get_level_values(f)
        levels = list(dict.fromkeys(codes))
        return np.stack([values[:, np.asarray(codes == lv)].mean(axis=1) for lv in levels], axis=1), levels

    (pa, la), (pb, lb) = level_means(a), level_means(b)
    ca, pairs_a = _cross_fit(pa, split, la)
    cb, pairs_b = _cross_fit(pb, split, lb)
    d_q = ca - cb
    d_boot = w @ d_q
    alpha = (1 - confidence) / 2
    ra, rb = float(np.ptp(pa.mean(axis=0))), float(np.ptp(pb.mean(axis=0)))
    ba, bb = w @ pa, w @ pb
    d = (ba.max(axis=1) - ba.min(axis=1)) - (bb.max(axis=1) - bb.min(axis=1))
    r_low, r_high = bootstrap_interval(ra - rb, d, confidence, method="basic")
    p_low, p_high = bootstrap_interval(ra - rb, d, confidence, method="percentile")
    return {"contrast_a": float(ca.mean()), "contrast_b": float(cb.mean()), "diff": float(d_q.mean()),
            "diff_low": float(np.quantile(d_boot, alpha)), "diff_high": float(np.quantile(d_boot, 1 - alpha)),
            "pairs_a": pairs_a, "pairs_b": pairs_b, "per_question": d_q,
            "range_a": ra, "range_b": rb, "range_diff": ra - rb, "range_low": r_low, "range_high": r_high,
            "range_pct_low": p_low, "range_pct_high": p_high}


def range_verdict(diff_low: float, diff_high: float, a: str = "embedder", b: str = "chunker") -> str:
    """``"<a> ahead"`` when the interval of ``a``'s effect minus ``b``'s lies above 0, ``"<b> ahead"``
    below it, else ``"cannot tell"`` (:func:`range_difference`: its primary, cross-fitted
    ``diff_low`` / ``diff_high``)."""
    if diff_low > 0:
        return f"{a} ahead"
    if diff_high < 0:
        return f"{b} ahead"
    return "cannot tell"


def chapter_answer(
    ranges: pd.DataFrame,
    dense_difference: Mapping[str, float],
    agreement: pd.DataFrame,
    best_by: Mapping[str, str],
    *,
    largest_chunker: str,
    iou_ranges: pd.DataFrame,
    truncation: pd.DataFrame,
    matched_chunker: str,
    matched_word: str,
    n_questions: int,
    corpora: Sequence[str],
    retrievers: Sequence[str],
    top_k: Sequence[int],
    variance_shares: pd.DataFrame | None = None,
    robustness: Any = None,
) -> str:
    """Chapter 7's answer box, built from its tables.

    Parameters
    ----------
    ranges : DataFrame
        :func:`factor_ranges` indexed by factor, largest range first.
    dense_difference : mapping
        :func:`range_difference` of embedder against chunker under dense retrieval (fractions): the
        verdict reads its cross-fitted ``diff_low`` / ``diff_high``.
    agreement : DataFrame
        :func:`ranking_agreement` (``rho``).
    best_by : mapping embedder -> chunker label
        The best chunker under each embedder.
    largest_chunker : str
        The chunker with the largest chunks.
    iou_ranges : DataFrame
        :func:`factor_ranges` of IoU, indexed by factor.
    truncation : DataFrame
        Index (chunker, embedder), column ``ref_chars_past_window`` (fraction).
    matched_chunker, matched_word : str
        The chunker re-cut with the retrieval embedder, and that section's verdict.
    n_questions : int
    corpora, retrievers : sequence of str
    top_k : sequence of int
    variance_shares : DataFrame, optional
        :func:`variance_shares` (columns ``source``, ``share``): when the main effects' order by
        share differs from their order by range, the answer says so (the two statistics weigh a
        factor differently), so the box never contradicts the variance figure.
    robustness : Robustness, optional
        The plan's ``embedder-over-chunker`` panel (:func:`embedder_chunker_panel`): its class in a
        few words in the lead (:func:`chunkwise.answerbox.robustness_words`), its full sentence
        with the alternatives that disagree in the details.

    Returns
    -------
    str
        The answer box (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (the
        factor to set first with its range and interval, or that none is clearly first when the
        variance shares put another factor on top; that the order of the others is not a finding
        when range and share order them differently; the embedder-versus-chunker verdict with its
        robustness class, flagged when the variance shares rank the two the other way), then
        folded details: the factors by range with the largest's interval, the order by variance
        share when it differs, the embedder-minus-chunker verdict with its cross-fitted interval
        and the difference of ranges as the alternative, the ranking agreement, the size and window
        caveats, the matched model's verdict, the settings the verdicts cover, and the robustness
        sentence.
    """
    from chunkwise.answerbox import answer_box, capped, robustness_words
    from chunkwise.evaluation.stats import describe_interval

    def pct(x: float) -> str:
        return f"{100 * x:.1f}"

    top = ranges.index[0]
    ev = dense_difference
    word = range_verdict(ev["diff_low"], ev["diff_high"])
    worst = truncation["ref_chars_past_window"].idxmax()
    n_chunkers = truncation.index.get_level_values(0).nunique()
    by_share = ""
    order: list[str] = []
    if variance_shares is not None:
        main = variance_shares[variance_shares["source"].isin(list(ranges.index))]
        order = list(main.sort_values("share", ascending=False, kind="stable")["source"])
        if order != [f for f in ranges.index if f in order]:
            by_share = (f" By share of the variance of the cell means (the figure below) the order is "
                        f"{', '.join(order)}: the two statistics weigh a factor differently, so the order of "
                        "close factors is not a finding.")

    def name(factor: str) -> str:  # a factor named in the lead: short, so the lead stays within 60 words
        return capped(str(factor), 2, "one factor")

    # the lead: fixed wording, two factor names at most per clause, the largest range's interval once,
    # and the verdict with the robustness class in a few words; it ranks two factors only where the
    # variance figure does not rank them the other way, or says that it does
    top_range = (f"{pct(ranges.loc[top, 'range'])} points (interval {pct(ranges.loc[top, 'range_low'])} to "
                 f"{pct(ranges.loc[top, 'range_high'])})")
    if not order or order[0] == top:
        lead = f"**Set {name(top)} first: it moves mean recall most, {top_range}.**"
        if by_share:
            lead += " The other factors' order is not a finding (range and variance share differ)."
    else:
        lead = (f"**No factor is clearly first: {name(top)} has the largest range of mean recall, {top_range}, "
                f"{name(order[0])} the largest variance share.**")
    how_sure = f"**{word}**" + (f"; {robustness_words(robustness)}" if robustness is not None else "")
    if word == "cannot tell":
        lead += f" Under dense retrieval, whether the embedder or the chunker matters more: {how_sure}."
    else:
        ahead, behind = ("embedder", "chunker") if word == "embedder ahead" else ("chunker", "embedder")
        if ahead in order and behind in order and order.index(behind) < order.index(ahead):
            rob = f" ({robustness_words(robustness)})" if robustness is not None else ""
            lead += (f" Embedder versus chunker under dense retrieval: **{word}**{rob}, though the variance "
                     f"shares rank the {behind} higher.")
        else:
            lead += f" Under dense retrieval the {ahead} matters more than the {behind} ({how_sure})."
    robust_text = ("" if robustness is None else
                   f"\n\n**Robustness of the embedder-versus-chunker verdict** ({robustness.primary.verdict}): "
                   f"{robustness.describe()}.")
    return answer_box(lead, (
        f"On {n_questions} questions of Chroma's {', '.join(corpora)} corpora, the factor with the largest "
        f"range of mean recall is **{top}** ({pct(ranges.loc[top, 'range'])} points, interval "
        f"{pct(ranges.loc[top, 'range_low'])} to {pct(ranges.loc[top, 'range_high'])}), then "
        + ", ".join(f"{f} ({pct(ranges.loc[f, 'range'])})" for f in ranges.index[1:]) + "." + by_share + " "
        f"Under dense retrieval the embedder's best-minus-worst contrast minus the chunker's, each pair "
        f"chosen on the other half of the questions, is "
        f"{describe_interval(ev['diff'], ev['diff_low'], ev['diff_high'], scale=100)} points: **{word}** "
        "(Qu, Tu & Bao: embedding quality could matter more than chunking); the difference of their ranges "
        f"picked on all questions is "
        f"{describe_interval(ev['range_diff'], ev['range_low'], ev['range_high'], scale=100)} points (basic "
        "bootstrap interval). The chunker ranking between "
        f"embedders has Spearman's rho from {agreement['rho'].min():.2f} to {agreement['rho'].max():.2f} "
        "(the best chunker: " + ", ".join(f"{b} under {e}" for e, b in best_by.items()) + "). "
        f"Part of the chunker's range is size: {largest_chunker}'s chunks are the largest, and under IoU the "
        f"chunker's range is {pct(iou_ranges.loc['chunker', 'range'])} points with "
        f"{iou_ranges.loc['chunker', 'best']} best; {worst[0]} loses "
        f"{100 * truncation.loc[worst, 'ref_chars_past_window']:.0f}% of its reference characters to "
        f"{worst[1]}'s window. "
        f"Cutting {matched_chunker} with the retrieval embedder: **{matched_word}**. "
        f"Verdicts cover these corpora, {_count(n_chunkers, 'chunker')}, {_count(len(best_by), 'embedder')}, "
        f"{_count(len(retrievers), 'retriever')} and k in {{{', '.join(map(str, top_k))}}}."
        + robust_text
    ))


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _count(n: int, noun: str) -> str:
    """``"six chunkers"``, ``"one embedder"``, ``"12 chunkers"``."""
    return f"{_WORDS[n] if n < len(_WORDS) else n} {noun}{'' if n == 1 else 's'}"



def embedder_chunker_panel(
    wides: Mapping[str, pd.DataFrame],
    entry: Any,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """The analysis plan's ``embedder-over-chunker`` verdict under its primary specification and
    each declared alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification names ``statistic`` (``"cross-fitted fixed-pair contrast"``: the primary of
    :func:`range_difference`; ``"max-minus-min range"``: its range difference with the basic
    interval), ``retriever``, ``metric`` (a key of ``wides``) and ``long_text_policy``. The grid has
    one policy, each embedder runtime's own, so a specification with another policy is reported as
    not run, as is a retriever or metric the grid lacks. Estimates are embedder minus chunker, in
    points; the verdict is :func:`chunkwise.evaluation.robustness.difference_verdict` with the
    plan's margin and words; the detectable effect (80% power) is that of the per-question
    cross-fitted differences (none for the range, whose levels are re-chosen in each resample).

    Parameters
    ----------
    wides : mapping
        Metric -> :func:`balanced_scores` of the grid (with the ``retriever`` level).
    entry : chunkwise.plan.PlanEntry

    Returns
    -------
    (Robustness, DataFrame)
        The class, and one row per specification run: ``specification``, ``statistic``,
        ``retriever``, ``metric``, ``estimate``, ``low``, ``high``, ``mde`` (points), ``verdict``.

    Raises
    ------
    ValueError
        When the primary specification cannot be computed from ``wides``.
    """
    from chunkwise.evaluation.robustness import SpecResult, classify, difference_verdict, minimal_detectable_effect
    from chunkwise.plan import specifications

    results, rows, not_run = [], [], []
    for name, spec in specifications(entry):
        wide = wides.get(spec["metric"])
        ok = (wide is not None and spec["long_text_policy"] == "each runtime's own"
              and spec["retriever"] in set(wide.columns.get_level_values("retriever")))
        if not ok:
            if name == "primary":
                raise ValueError(f"the primary specification of {entry.entry_id!r} needs {spec}")
            not_run.append(name)
            continue
        w = wide.xs(spec["retriever"], axis=1, level="retriever", drop_level=False)
        d = range_difference(w, "embedder", "chunker", n_resamples=n_resamples, seed=seed)
        if spec["statistic"].startswith("cross-fitted"):
            est, lo, hi = d["diff"], d["diff_low"], d["diff_high"]
            mde = 100 * minimal_detectable_effect(d["per_question"])
        else:
            est, lo, hi, mde = d["range_diff"], d["range_low"], d["range_high"], float("nan")
        est, lo, hi = 100 * est, 100 * lo, 100 * hi
        generic = difference_verdict(lo, hi, entry.delta)
        verdict = entry.words.get(generic.replace(" ", "_"), generic)
        results.append(SpecResult(name, est, lo, hi, verdict, int(w.shape[0]), mde, {}, generic))
        rows.append({"specification": name, "statistic": spec["statistic"], "retriever": spec["retriever"],
                     "metric": spec["metric"], "estimate": est, "low": lo, "high": hi, "mde": mde,
                     "verdict": verdict})
    rob = classify(results[0], results[1:], delta=entry.delta, unit=entry.unit, not_run=not_run)
    return rob, pd.DataFrame(rows)
