"""Paired bootstrap over questions: which differences between cells are real.

Every cell of an evaluation grid (a chunker x retriever x top_k combination, or a RAG method)
is scored on the *same* questions, so cells are compared question by question: a paired
design. Resampling the questions with replacement (Efron's bootstrap) and recomputing every
cell's mean on each resample gives, from one set of resamples,

- each cell's difference to a chosen baseline cell with a percentile confidence interval;
- each cell's difference to the best cell (the highest observed mean) and its interval;
- each cell's probability of being best: the share of resamples in which its mean is the
  highest (a tie of ``m`` cells gives each ``1/m``);
- a verdict in plain words (:func:`verdict`) that names a winner only when one cell is best in
  at least ``winner_threshold`` (default 90%) of the resamples.

Missing scores (NaN, e.g. a method that did not answer a question) are dropped *pairwise*:
the difference of cells ``a`` and ``b`` uses the questions where both have a score, and a
cell's mean in a resample (for the probability of being best) uses the resampled questions
where it has one.

Reproducibility: resamples come from ``numpy.random.default_rng(seed)`` in fixed batches, so
the same inputs and seed give the same numbers on every machine.

How many questions would separate two cells? For paired differences with mean ``d`` and
standard deviation ``s`` (``ddof=1``), the normal-approximation interval
``d +- z * s / sqrt(n)`` excludes 0 once ``n > (z * s / d) ** 2`` (``z = 1.96`` at 95%):
:func:`questions_to_separate`. It assumes the observed difference is the true one, so it is an
order of magnitude, not a promise.

References
----------
.. [1] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993
   (percentile intervals: ch. 13).
.. [2] The ">= 90% of resamples before naming a winner" rule follows the ``chunklab`` package
   (MIT); the implementation here is our own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "BootstrapResult",
    "describe_interval",
    "holm",
    "interval_side",
    "paired_bootstrap",
    "paired_difference_ci",
    "paired_difference_p",
    "questions_to_separate",
    "verdict",
]

#: Resamples drawn per batch; fixed so that results do not depend on memory limits.
_BATCH = 500


# --------------------------------------------------------------------------------------
# input checks
# --------------------------------------------------------------------------------------


def _as_matrix(scores: Any) -> tuple[list[str], np.ndarray]:
    """Cell names and an (n_questions, n_cells) float matrix (NaN = missing)."""
    if isinstance(scores, pd.DataFrame):
        names = [str(c) for c in scores.columns]
        try:
            x = scores.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as exc:
            raise ValueError("scores must hold numbers (one column per cell, one row per question).") from exc
    elif isinstance(scores, Mapping):
        names = [str(k) for k in scores]
        cols = []
        lengths = set()
        for k, v in scores.items():
            try:
                col = np.asarray(v, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"scores[{k!r}] must be a sequence of numbers, one per question.") from exc
            if col.ndim != 1:
                raise ValueError(f"scores[{k!r}] must be one-dimensional (one number per question).")
            cols.append(col)
            lengths.add(col.size)
        if len(lengths) > 1:
            sizes = {str(k): np.asarray(v).size for k, v in scores.items()}
            raise ValueError(
                f"every cell must be scored on the same questions; got lengths {sizes}. "
                "Use NaN for a question a cell did not answer."
            )
        x = np.column_stack(cols) if cols else np.zeros((0, 0))
    else:
        raise ValueError(
            "scores must be a DataFrame (columns = cells, rows = questions) or a mapping "
            f"cell -> sequence of per-question scores, got {type(scores).__name__}."
        )
    if len(set(names)) != len(names):
        raise ValueError(f"cell names must be unique, got {names}.")
    if not names:
        raise ValueError("scores has no cells; pass at least one.")
    if x.shape[0] < 2:
        raise ValueError(f"the bootstrap needs at least 2 questions, got {x.shape[0]}.")
    if np.isinf(x).any():
        raise ValueError("scores contain infinite values; use finite numbers (NaN for missing).")
    empty = [names[j] for j in range(x.shape[1]) if np.isnan(x[:, j]).all()]
    if empty:
        raise ValueError(f"cell(s) {empty} have no score on any question.")
    return names, x


def _check_fraction(name: str, value: Any, *, closed_high: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    ok = 0.0 < v <= 1.0 if closed_high else 0.0 < v < 1.0
    if not ok:
        bound = "(0, 1]" if closed_high else "(0, 1)"
        raise ValueError(f"{name} must be a number in {bound}, got {value!r}.")
    return v


# --------------------------------------------------------------------------------------
# small pure helpers
# --------------------------------------------------------------------------------------


def questions_to_separate(differences: Sequence[float], confidence: float = 0.95) -> float:
    """Roughly how many questions make the paired difference's interval exclude 0.

    ``n = (z * sd / mean) ** 2`` for the paired differences (NaN dropped; ``sd`` with
    ``ddof=1``; ``z`` the two-sided normal quantile, 1.96 at 95%), assuming the observed mean
    difference is the true one.

    Parameters
    ----------
    differences : sequence of float
        Per-question differences between two cells.
    confidence : float, default 0.95

    Returns
    -------
    float
        The approximate number of questions (not rounded); ``inf`` when the mean difference is
        0, ``0.0`` when every difference is equal and non-zero; NaN with fewer than 2
        differences.
    """
    conf = _check_fraction("confidence", confidence)
    d = np.asarray(differences, dtype=np.float64)
    d = d[~np.isnan(d)]
    if d.size < 2:
        return math.nan
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if mean == 0.0:
        return math.inf
    z = NormalDist().inv_cdf(0.5 + conf / 2)
    return (z * sd / mean) ** 2


def paired_difference_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float, float]:
    """Mean of ``a - b`` over the questions both answered, with a percentile bootstrap interval.

    Parameters
    ----------
    a, b : sequence of float, same length
        Per-question scores of two cells; NaN marks a missing score (dropped pairwise).
    n_resamples, seed, confidence
        As in :func:`paired_bootstrap`.

    Returns
    -------
    (mean_difference, ci_low, ci_high) : tuple of float

    Raises
    ------
    ValueError
        As :func:`paired_bootstrap`; also when fewer than 2 questions have both scores.
    """
    xa, xb = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    both = int(np.sum(~np.isnan(xa) & ~np.isnan(xb))) if xa.shape == xb.shape else 2  # lengths: checked below
    if both < 2:
        raise ValueError(f"a paired interval needs at least 2 questions with both scores, got {both}.")
    res = paired_bootstrap({"a": a, "b": b}, baseline="b", n_resamples=n_resamples, seed=seed, confidence=confidence)
    row = res.table.loc["a"]
    return float(row["diff"]), float(row["diff_low"]), float(row["diff_high"])


def interval_side(low: float, high: float, words: tuple[str, str, str] = ("ahead", "behind", "within")) -> str:
    """The book's one rule for reading a paired interval of a difference against 0.

    Parameters
    ----------
    low, high : float
        The interval's ends (any unit).
    words : (str, str, str), default ("ahead", "behind", "within")
        What to say when the interval lies above 0, below 0, or contains 0 (each caller's own
        words: ``("supports", "contradicts", "cannot tell")``, ``("LLM ahead", "recursive
        ahead", "cannot tell")``...).

    Returns
    -------
    str
        ``words[0]`` when ``low > 0``, ``words[1]`` when ``high < 0``, else ``words[2]``: an
        interval that contains 0, or has a NaN end, is never read as a difference.
    """
    return words[0] if low > 0 else words[1] if high < 0 else words[2]


def describe_interval(point: float, low: float, high: float, *, scale: float = 1.0, decimals: int = 1,
                      signed: bool = True) -> str:
    """An estimate with its interval as the book prints it: ``"+3.3 [-1.1, +5.0]"``.

    Parameters
    ----------
    point, low, high : float
        The estimate and its interval, in the unit to print after ``scale``.
    scale : float, default 1.0
        Multiplies all three first (100 turns fractions into percentage points).
    decimals : int, default 1
    signed : bool, default True
        Print a sign on every number (differences); False for levels (``"61.2 [58.0, 64.1]"``).

    Returns
    -------
    str
        A value that rounds to zero prints as ``0.0`` (never ``-0.0`` or ``+0.0``); a NaN as
        ``n/a``.
    """
    def one(x: float) -> str:
        x = float(x) * scale
        if math.isnan(x):
            return "n/a"
        text = f"{x:.{decimals}f}"
        if float(text) == 0:
            return f"{0:.{decimals}f}"
        return f"{x:+.{decimals}f}" if signed else text

    return f"{one(point)} [{one(low)}, {one(high)}]"


def paired_difference_p(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided percentile-bootstrap p-value of ``mean(a - b) = 0`` over the questions both answered.

    ``p = min(1, 2 * min(P*(d <= 0), P*(d >= 0)))`` over the resampled mean differences ``d``:
    the smallest ``alpha`` at which the ``1 - alpha`` percentile interval of
    :func:`paired_difference_ci` (same resampling, same seed) reaches 0. Use it to correct a
    family of intervals (:func:`holm`).

    Parameters
    ----------
    a, b : sequence of float, same length
        Per-question scores; a pair with a NaN is dropped.
    n_resamples, seed
        As in :func:`paired_bootstrap`.

    Returns
    -------
    float
        In ``[1 / n_resamples, 1]`` roughly; 1.0 when every difference is 0.

    Raises
    ------
    ValueError
        For different lengths or fewer than 2 usable pairs.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"a and b must be 1-d and of the same length, got {x.shape} and {y.shape}.")
    d = (x - y)[~(np.isnan(x) | np.isnan(y))]
    if d.size < 2:
        raise ValueError(f"the bootstrap needs at least 2 questions with both scores, got {d.size}.")
    if not np.any(d):
        return 1.0
    rng = np.random.default_rng(int(seed))
    le = ge = 0
    for start in range(0, n_resamples, _BATCH):
        size = min(_BATCH, n_resamples - start)
        means = (_resample_counts(rng, d.size, size) @ d) / d.size
        le += int((means <= 0).sum())
        ge += int((means >= 0).sum())
    return float(min(1.0, 2 * min(le, ge) / n_resamples))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (Holm, 1979, Scand. J. Statist. 6:65-70).

    The i-th smallest of ``m`` p-values is multiplied by ``m - i + 1`` (i from 1), made
    non-decreasing along that order, and capped at 1; rejecting where the adjusted value is
    below ``alpha`` controls the family-wise error rate at ``alpha``.

    Parameters
    ----------
    p_values : sequence of float
        In [0, 1]; NaN stays NaN and does not count in ``m``.

    Returns
    -------
    ndarray, shape (n,)
        Adjusted p-values in the input order.

    Raises
    ------
    ValueError
        For a value outside [0, 1].
    """
    p = np.asarray(p_values, dtype=float)
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1].")
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(ok)
    order = idx[np.argsort(p[idx], kind="stable")]
    m = len(order)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = running
    return out


# --------------------------------------------------------------------------------------
# the bootstrap
# --------------------------------------------------------------------------------------


@dataclass
class BootstrapResult:
    """What :func:`paired_bootstrap` found.

    Attributes
    ----------
    table : DataFrame
        One row per cell (index = cell name, input order) with columns

        - ``n``: questions with a score;
        - ``mean``: mean score over them; ``mean_low``, ``mean_high``: its percentile
          interval (the cell alone, not paired);
        - ``diff``, ``diff_low``, ``diff_high``: mean paired difference to the baseline
          (questions both answered) and its percentile interval (0, 0, 0 for the baseline);
        - ``diff_best``, ``diff_best_low``, ``diff_best_high``: the same against the best cell;
        - ``p_best``: share of resamples in which the cell has the best mean (ties split);
        - ``ruled_out``: ``diff_best_high < 0`` (worse than the best, beyond the noise);
        - ``in_play``: not ruled out;
        - ``cost``: the cost given for the cell (NaN when none).
        Differences are signed so that positive means better (for ``higher_is_better=False``
        a positive ``diff`` is a *lower* value than the baseline's).
    baseline, best : str
        The baseline cell and the cell with the best observed mean.
    runner_up : str or None
        The second-best cell by observed mean (None with one cell).
    winner : str or None
        ``best`` when ``p_best >= winner_threshold``, else None.
    questions_needed : float
        :func:`questions_to_separate` for best vs runner-up (NaN with one cell).
    n_questions, n_resamples, seed, confidence, winner_threshold, higher_is_better
        The settings.
    metric, cost_name : str
        Labels used in the verdict.
    verdict : str
        Plain-words summary, see :func:`verdict`.
    """

    table: pd.DataFrame
    baseline: str
    best: str
    runner_up: str | None
    winner: str | None
    questions_needed: float
    n_questions: int
    n_resamples: int
    seed: int
    confidence: float
    winner_threshold: float
    higher_is_better: bool
    metric: str = "score"
    cost_name: str = "cost"
    percent: bool = True
    verdict: str = field(default="", repr=False)

    @property
    def in_play(self) -> list[str]:
        """Cells whose interval of difference to the best reaches 0 or above."""
        return [str(c) for c in self.table.index[self.table["in_play"]]]

    @property
    def ruled_out(self) -> list[str]:
        """Cells worse than the best beyond the noise (interval entirely below 0)."""
        return [str(c) for c in self.table.index[self.table["ruled_out"]]]

    @property
    def cheapest_in_play(self) -> str | None:
        """The in-play cell with the lowest cost (None when no cost was given)."""
        sub = self.table[self.table["in_play"] & self.table["cost"].notna()]
        if sub.empty:
            return None
        return str(sub["cost"].idxmin())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (numbers as floats, NaN as None)."""

        def clean(v: Any) -> Any:
            if isinstance(v, (bool, np.bool_)):
                return bool(v)
            if isinstance(v, (int, np.integer)):
                return int(v)
            if isinstance(v, (float, np.floating)):
                return None if math.isnan(v) or math.isinf(v) else float(v)
            return v

        cells = {
            str(name): {k: clean(v) for k, v in row.items()} for name, row in self.table.iterrows()
        }
        return {
            "metric": self.metric,
            "baseline": self.baseline,
            "best": self.best,
            "runner_up": self.runner_up,
            "winner": self.winner,
            "in_play": self.in_play,
            "ruled_out": self.ruled_out,
            "cheapest_in_play": self.cheapest_in_play,
            "cost_name": self.cost_name,
            "questions_needed": clean(self.questions_needed),
            "n_questions": self.n_questions,
            "n_resamples": self.n_resamples,
            "seed": self.seed,
            "confidence": self.confidence,
            "winner_threshold": self.winner_threshold,
            "higher_is_better": self.higher_is_better,
            "verdict": self.verdict,
            "cells": cells,
        }


def _resample_counts(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """How often each question is drawn in each of ``size`` resamples, shape (size, n)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=size).astype(np.float64)


def paired_bootstrap(
    scores: pd.DataFrame | Mapping[str, Sequence[float]],
    baseline: str | None = None,
    *,
    cost: Mapping[str, float] | pd.Series | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    winner_threshold: float = 0.9,
    higher_is_better: bool = True,
    metric: str = "score",
    cost_name: str = "cost",
    percent: bool = True,
) -> BootstrapResult:
    """Paired percentile bootstrap over questions for every cell of a grid.

    Parameters
    ----------
    scores : DataFrame or mapping
        Per-question scores: a DataFrame with one column per cell and one row per question, or
        a mapping ``cell -> sequence`` (all of the same length, questions in the same order).
        NaN marks a missing score and is dropped pairwise (see the module docstring).
    baseline : str, optional
        The cell every difference is taken against; default the first cell.
    cost : mapping or Series, optional
        Cost of each cell (e.g. mean retrieved tokens per question); names the cheapest cell
        still in play in the verdict. Cells without a cost get NaN.
    n_resamples : int, default 10000
        Bootstrap resamples (each draws ``n_questions`` questions with replacement).
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.
    confidence : float, default 0.95
        Two-sided level of the percentile intervals.
    winner_threshold : float, default 0.9
        Smallest probability of being best for which the verdict names a winner.
    higher_is_better : bool, default True
        False for metrics such as latency; differences are then signed so that positive still
        means better.
    metric, cost_name : str
        Names used in the verdict (e.g. ``"recall"``, ``"retrieved tokens"``).
    percent : bool, default True
        Print scores and differences as percentages / percentage points (scores in [0, 1]).

    Returns
    -------
    BootstrapResult

    Raises
    ------
    ValueError
        For scores that are not numbers, cells of different lengths, fewer than 2 questions,
        a cell without any score, infinite values, an unknown baseline, ``n_resamples < 1``,
        or ``confidence`` / ``winner_threshold`` outside (0, 1).
    """
    names, x = _as_matrix(scores)
    if baseline is None:
        baseline = names[0]
    if str(baseline) not in names:
        raise ValueError(f"baseline {baseline!r} is not a cell; cells are {names}.")
    baseline = str(baseline)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an int, got {seed!r}.")
    conf = _check_fraction("confidence", confidence)
    threshold = _check_fraction("winner_threshold", winner_threshold, closed_high=True)
    sign = 1.0 if higher_is_better else -1.0

    n_q, n_c = x.shape
    y = sign * x  # higher is better from here on
    present = ~np.isnan(y)
    filled = np.where(present, y, 0.0)
    n_answered = present.sum(axis=0)
    means = filled.sum(axis=0) / n_answered

    order = sorted(range(n_c), key=lambda j: (-means[j], j))
    best_j = order[0]
    second_j = order[1] if n_c > 1 else None
    base_j = names.index(baseline)

    def diffs_to(ref: int) -> tuple[np.ndarray, np.ndarray]:
        both = present & present[:, [ref]]
        d = np.where(both, filled - filled[:, [ref]], 0.0)
        return d, both.astype(np.float64)

    d_base, m_base = diffs_to(base_j)
    d_best, m_best = diffs_to(best_j)

    boot_base = np.empty((n_resamples, n_c))
    boot_best = np.empty((n_resamples, n_c))
    boot_means = np.empty((n_resamples, n_c))
    wins = np.zeros(n_c)
    rng = np.random.default_rng(int(seed))
    w_present = present.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        for start in range(0, n_resamples, _BATCH):
            size = min(_BATCH, n_resamples - start)
            w = _resample_counts(rng, n_q, size)
            sl = slice(start, start + size)
            boot_base[sl] = (w @ d_base) / (w @ m_base)
            boot_best[sl] = (w @ d_best) / (w @ m_best)
            cell_means = (w @ filled) / (w @ w_present)
            boot_means[sl] = cell_means
            cell_means = np.where(np.isnan(cell_means), -np.inf, cell_means)
            top = cell_means.max(axis=1, keepdims=True)
            # ties within rounding of the sums count as ties
            tied = cell_means >= top - 1e-12 * np.maximum(1.0, np.abs(top))
            wins += (tied / tied.sum(axis=1, keepdims=True)).sum(axis=0)

    alpha = (1.0 - conf) / 2.0
    q = [100 * alpha, 100 * (1 - alpha)]

    def summary(d: np.ndarray, m: np.ndarray, boot: np.ndarray, ref: int) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            obs = d.sum(axis=0) / m.sum(axis=0)
        out = np.full((n_c, 3), np.nan)
        out[:, 0] = obs
        for j in range(n_c):
            col = boot[:, j]
            col = col[~np.isnan(col)]
            if j == ref:
                out[j] = 0.0
            elif col.size:
                out[j, 1:] = np.percentile(col, q)
        return out

    sb = summary(d_base, m_base, boot_base, base_j)
    sbest = summary(d_best, m_best, boot_best, best_j)
    p_best = wins / n_resamples
    mean_ci = np.full((n_c, 2), np.nan)
    for j in range(n_c):
        col = boot_means[:, j]
        col = col[~np.isnan(col)]
        if col.size:
            mean_ci[j] = np.sort(sign * np.percentile(col, q))
    ruled = sbest[:, 2] < 0
    cost_vals = np.full(n_c, np.nan)
    if cost is not None:
        unknown = [str(k) for k in dict(cost) if str(k) not in names]
        if unknown:
            raise ValueError(f"cost names cell(s) {unknown} that are not in scores; cells are {names}.")
        for k, v in dict(cost).items():
            cost_vals[names.index(str(k))] = float(v)

    table = pd.DataFrame(
        {
            "n": n_answered.astype(int),
            "mean": sign * means,
            "mean_low": mean_ci[:, 0],
            "mean_high": mean_ci[:, 1],
            "diff": sb[:, 0],
            "diff_low": sb[:, 1],
            "diff_high": sb[:, 2],
            "diff_best": sbest[:, 0],
            "diff_best_low": sbest[:, 1],
            "diff_best_high": sbest[:, 2],
            "p_best": p_best,
            "ruled_out": ruled,
            "in_play": ~ruled,
            "cost": cost_vals,
        },
        index=pd.Index(names, name="cell"),
    )
    needed = math.nan
    if second_j is not None:
        both = present[:, best_j] & present[:, second_j]
        needed = questions_to_separate((y[both, best_j] - y[both, second_j]), conf)
    winner = names[best_j] if p_best[best_j] >= threshold else None
    result = BootstrapResult(
        table=table,
        baseline=baseline,
        best=names[best_j],
        runner_up=names[second_j] if second_j is not None else None,
        winner=winner,
        questions_needed=needed,
        n_questions=n_q,
        n_resamples=int(n_resamples),
        seed=int(seed),
        confidence=conf,
        winner_threshold=threshold,
        higher_is_better=bool(higher_is_better),
        metric=str(metric),
        cost_name=str(cost_name),
        percent=bool(percent),
    )
    result.verdict = verdict(result)
    return result


# --------------------------------------------------------------------------------------
# the verdict
# --------------------------------------------------------------------------------------


def _fmt_value(v: float, percent: bool, decimals: int = 1) -> str:
    return f"{100 * v:.{decimals}f}%" if percent else f"{v:.3g}"


def _fmt_diff(v: float, percent: bool, decimals: int = 1) -> str:
    return f"{100 * v:+.{decimals}f} points" if percent else f"{v:+.3g}"


def _names(cells: Sequence[str], limit: int = 8) -> str:
    cells = list(cells)
    if len(cells) <= limit:
        return ", ".join(cells)
    return ", ".join(cells[:limit]) + f" and {len(cells) - limit} more"


def verdict(result: BootstrapResult, *, decimals: int = 1) -> str:
    """A few sentences that say what the bootstrap can and cannot tell apart.

    A winner is named only when the best cell is best in at least ``winner_threshold`` of the
    resamples. Otherwise the text lists the cells ruled out (interval of the difference to the
    best entirely below 0), the cells still in play, the cheapest cell in play (when costs were
    given) and roughly how many questions would separate the top two at the observed
    difference (:func:`questions_to_separate`).

    Parameters
    ----------
    result : BootstrapResult
    decimals : int, default 1
        Decimals of the means and differences when the metric is a percentage (points); a page
        that prints its tables with two decimals quotes them with two. ``result.verdict`` is
        the text with the default.

    Raises
    ------
    ValueError
        If ``decimals`` is negative.
    """
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)) or not 0 <= decimals <= 10:
        raise ValueError(f"decimals must be an int from 0 to 10, got {decimals!r}.")
    decimals = int(decimals)
    t = result.table
    pct = result.percent

    def fv(v: float) -> str:
        return _fmt_value(v, pct, decimals)

    def fd(v: float) -> str:
        return _fmt_diff(v, pct, decimals)

    conf = f"{100 * result.confidence:.0f}%"
    best = result.best
    p = float(t.loc[best, "p_best"])
    head = (
        f"{result.metric} over {result.n_questions} questions, {result.n_resamples} paired "
        f"bootstrap resamples (seed {result.seed})."
    )
    lines = [head]
    if len(t) == 1:
        lines.append(f"Only one cell ({best}): nothing to compare.")
        return " ".join(lines)
    if result.winner is not None:
        ru = result.runner_up
        lines.append(
            f"Winner: {best} ({result.metric} {fv(float(t.loc[best, 'mean']))}), best in "
            f"{100 * p:.0f}% of resamples (a winner needs {100 * result.winner_threshold:.0f}%); "
            f"runner-up {ru} at {fd(-float(t.loc[ru, 'diff_best']))} behind "
            f"({conf} CI {fd(-float(t.loc[ru, 'diff_best_high']))} to "
            f"{fd(-float(t.loc[ru, 'diff_best_low']))})."
        )
    else:
        lines.append(
            f"No winner: the best observed cell, {best} ({result.metric} "
            f"{fv(float(t.loc[best, 'mean']))}), is best in only {100 * p:.0f}% of "
            f"resamples (a winner needs {100 * result.winner_threshold:.0f}%)."
        )
    ruled = result.ruled_out
    in_play = result.in_play
    if ruled:
        lines.append(
            f"Ruled out ({conf} CI of the difference to {best} entirely below 0): {_names(ruled)}."
        )
    else:
        lines.append(f"No cell is ruled out: every {conf} CI of the difference to {best} reaches 0.")
    if result.winner is None:
        lines.append(f"Still in play ({len(in_play)}): {_names(in_play)}.")
    cheap = result.cheapest_in_play
    if cheap is not None:
        lines.append(
            f"Cheapest cell in play by {result.cost_name}: {cheap} "
            f"({float(t.loc[cheap, 'cost']):.4g} {result.cost_name}, {result.metric} "
            f"{fv(float(t.loc[cheap, 'mean']))})."
        )
    ru = result.runner_up
    if ru is not None and result.winner is None:
        gap = -float(t.loc[ru, "diff_best"])
        need = result.questions_needed
        if math.isinf(need):
            lines.append(
                f"{best} and {ru} have the same mean on the questions both answered: no number of "
                "questions would separate them at this difference."
            )
        elif not math.isnan(need):
            n_need = max(2, math.ceil(need))
            if n_need <= result.n_questions:
                extra = f"about {n_need} questions would already suffice (you have {result.n_questions})"
            else:
                extra = f"roughly {n_need} questions would be needed (you have {result.n_questions})"
            lines.append(
                f"To separate the top two, {best} and {ru}, at the observed difference of "
                f"{fd(gap)}: {extra}; a normal approximation (z * sd / difference)^2, "
                "an order of magnitude only."
            )
    return " ".join(lines)
