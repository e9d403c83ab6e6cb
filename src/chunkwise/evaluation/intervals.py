"""Bootstrap intervals for statistics the percentile interval gets wrong, and how to print any interval.

The percentile interval (the 2.5th and 97.5th percentiles of the resampled statistic) is right
for a mean, whose resampled values centre on the estimate. Two statistics of this package do not:

- a **rank correlation of noisy means** (Spearman's rho or Kendall's tau-b between the cells'
  means under two question sets, or between our methods' means and a paper's): resampling adds
  noise to the means, which can only scramble their order, so the resampled correlations sit
  below the estimate, at times nearly all of them (chapter 4 printed tau-b 0.83 with a
  percentile interval of 0.71 to 0.82);
- a **max-minus-min range** (best level's mean minus the worst's, both picked on the data):
  picking the extremes biases it upward, and a resample picks them again, so the resampled
  ranges sit above the estimate.

The **basic** bootstrap interval ``[2 t - q_hi, 2 t - q_lo]`` (``t`` the estimate, ``q`` the
percentiles of the resampled statistic) reflects the resamples around the estimate: it reads
the shift of the resamples from the estimate as the estimate's own bias and undoes it (Davison
& Hinkley 1997, eq. 5.6). It contains the estimate exactly when the percentile interval does,
and so does BCa (its bias correction ``z0`` moves the lower end past the estimate once more than
97.5% of the resamples fall below it): when the resampling bias is larger than the resampling
spread, no interval of these three contains the estimate. For rank correlations, where that
happens (chapter 4), :func:`rank_correlation_interval` gives the **cover** interval: from the
lower of the two lower ends to the higher of the two upper ends of the percentile and basic
intervals. It contains the estimate by construction (when the resamples lie all below the
estimate, the basic interval lies above it and the percentile interval below), and it covers
the parameter whenever either interval does, so it is never less conservative than either.
A max-minus-min range is better replaced by a contrast that is not picked on the data it is
scored on (the cross-fitted fixed pair of :mod:`chunkwise.experiments.whatmatters`).

:func:`interval_text` prints an interval, or why there is none: never ``nan``.

References
----------
.. [1] A. C. Davison and D. V. Hinkley, *Bootstrap Methods and their Application*, Cambridge
   University Press, 1997 (basic interval: eq. 5.6; BCa: section 5.3.2).
.. [2] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall, 1993
   (percentile interval: ch. 13; bias: ch. 10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["INTERVAL_METHODS", "bootstrap_interval", "interval_text", "rank_correlation_interval"]

#: The interval methods :func:`bootstrap_interval` knows.
INTERVAL_METHODS: tuple[str, ...] = ("percentile", "basic", "cover")


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def bootstrap_interval(
    estimate: float,
    boot: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    method: str = "basic",
    bounds: tuple[float | None, float | None] = (None, None),
) -> tuple[float, float]:
    """An interval for ``estimate`` from its resampled values.

    Parameters
    ----------
    estimate : float
        The statistic on the data.
    boot : sequence of float
        The statistic on each resample; NaN values (a resample where it is undefined) are dropped.
    confidence : float, default 0.95
        In (0, 1).
    method : {"percentile", "basic", "cover"}, default "basic"
        ``percentile``: ``[q_lo, q_hi]``; ``basic``: ``[2 t - q_hi, 2 t - q_lo]``; ``cover``: from
        the lower to the higher end of the two (contains ``estimate`` by construction).
    bounds : (low, high), default no bounds
        The statistic's range (``(-1, 1)`` for a correlation, ``(0, None)`` for a range): both ends
        are clipped to it, which keeps an interval that contained the estimate containing it.

    Returns
    -------
    (low, high) : tuple of float
        ``(nan, nan)`` when ``estimate`` is not finite or no resample gave a value.

    Raises
    ------
    ValueError
        For an unknown method or a confidence outside (0, 1).
    """
    if method not in INTERVAL_METHODS:
        raise ValueError(f"method must be one of {INTERVAL_METHODS}, got {method!r}.")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    arr = np.asarray(boot, dtype=float).ravel()
    arr = arr[~np.isnan(arr)]
    if arr.size == 0 or not _finite(estimate):
        return (math.nan, math.nan)
    t = float(estimate)
    alpha = (1.0 - float(confidence)) / 2.0
    q_lo, q_hi = (float(v) for v in np.quantile(arr, [alpha, 1.0 - alpha]))
    basic = (2 * t - q_hi, 2 * t - q_lo)
    if method == "percentile":
        low, high = q_lo, q_hi
    elif method == "basic":
        low, high = basic
    else:
        low, high = min(q_lo, basic[0]), max(q_hi, basic[1])
    lo_b, hi_b = bounds
    if lo_b is not None:
        low, high = max(low, lo_b), max(high, lo_b)
    if hi_b is not None:
        low, high = min(low, hi_b), min(high, hi_b)
    return (float(low), float(high))


def rank_correlation_interval(
    estimate: float, boot: Sequence[float] | np.ndarray, confidence: float = 0.95
) -> tuple[float, float]:
    """The interval every rank correlation of the package prints (Spearman, Kendall): the cover
    interval of :func:`bootstrap_interval` clipped to [-1, 1], which contains ``estimate``.

    Parameters
    ----------
    estimate : float
        The correlation on the data (NaN when undefined).
    boot : sequence of float
        The correlation on each resample (NaN for a resample where it is undefined, dropped).
    confidence : float, default 0.95

    Returns
    -------
    (low, high) : tuple of float
        ``(nan, nan)`` when the estimate is NaN or no resample gave a correlation; print it with
        :func:`interval_text`, which says so in words.
    """
    return bootstrap_interval(estimate, boot, confidence, method="cover", bounds=(-1.0, 1.0))


def interval_text(
    low: float | None,
    high: float | None,
    fmt: str = ".2f",
    *,
    n: int | None = None,
    unit: str = "questions",
    why: str | None = None,
    brackets: str = "[]",
    sep: str = ", ",
) -> str:
    """``"[low, high]"``, or why there is no interval: ``"no interval: n=3 questions"``. Never ``nan``.

    Parameters
    ----------
    low, high : float or None
        The interval; NaN, None or infinite at either end means there is none.
    fmt : str, default ".2f"
        Format of each end (``"+.1f"`` for signed differences).
    n : int, optional
        How many units the interval would rest on (printed when there is none).
    unit : str, default "questions"
    why : str, optional
        The reason to print instead of the count (``"too few methods"``).
    brackets : str, default "[]"
        Opening and closing characters (``""`` for none).
    sep : str, default ", "
        Between the two ends (``" to "`` in prose).

    Returns
    -------
    str
    """
    if _finite(low) and _finite(high):
        opening, closing = (brackets[0], brackets[-1]) if brackets else ("", "")
        return f"{opening}{format(float(low), fmt)}{sep}{format(float(high), fmt)}{closing}"
    if why:
        return f"no interval: {why}"
    if n is not None:
        return f"no interval: n={int(n)} {unit}"
    return "no interval"
