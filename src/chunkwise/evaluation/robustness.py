"""The robustness panel: a headline verdict under every declared alternative, and its class.

A chapter runs its headline's primary specification and each alternative the analysis plan
declares (:mod:`chunkwise.plan`), turns each into a :class:`SpecResult` with :func:`contrast`
(one paired difference) or :func:`pattern` (a gap and an interaction, chapter 6's rule), and
:func:`classify` says how the verdict fares:

- **robust**: every alternative reaches the primary's verdict;
- **fragile**: at least one does not; the class names each such alternative and what it gives
  (a reversal, or a loss of the effect);
- **cannot tell**: the primary itself cannot tell; its minimal detectable effect at 80% power
  (:func:`minimal_detectable_effect`) says how large an effect the run could have seen;
- **no effect larger than delta**: the primary's interval lies wholly inside +/- delta, the
  plan's practical margin (equivalence, as two one-sided tests at the interval's level), and every
  alternative agrees.

:func:`specification_curve` draws every specification's estimate with its interval, sorted, the
primary marked (Simonsohn, Simmons & Nelson 2020).

Intervals. ``percentile`` is the book's paired percentile bootstrap
(:func:`chunkwise.evaluation.stats.paired_difference_ci`, the same resamples for the same seed);
``bca`` and ``basic`` come from :func:`scipy.stats.bootstrap` on the same per-question values;
``t`` is Student's t interval of the mean. For a mean all four contain the estimate.

References
----------
U. Simonsohn, J. P. Simmons and L. D. Nelson, "Specification curve analysis", Nature Human
Behaviour 4 (2020). D. Lakens, "Equivalence tests", Social Psychological and Personality Science
8 (2017) (two one-sided tests). J. Cohen, *Statistical Power Analysis for the Behavioral
Sciences*, 1988 (the detectable effect ``(z_{1-alpha/2} + z_{power}) * sd / sqrt(n)``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = [
    "CLASSES",
    "INTERVAL_METHODS",
    "Robustness",
    "SpecResult",
    "classify",
    "contrast",
    "difference_verdict",
    "equivalence_p",
    "mean_interval",
    "minimal_detectable_effect",
    "pattern",
    "specification_curve",
]

#: The robustness classes, in the order the page explains them ("not assessed": no declared
#: alternative could run, e.g. under a parameter profile that cut the corpora).
CLASSES = ("robust", "fragile", "cannot tell", "no effect larger than delta", "not assessed")

#: Interval methods a specification may declare.
INTERVAL_METHODS = ("percentile", "bca", "basic", "t")

#: The verdicts of the ``difference`` rule (before a plan entry's own words replace above/below).
DIFFERENCE_VERDICTS = ("above", "below", "within delta", "not below delta", "not above delta", "cannot tell")


def _values(values: Any, name: str = "values") -> np.ndarray:
    try:
        x = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers (one per question), got {type(values).__name__}") from None
    x = x[~np.isnan(x)]
    if x.size < 2:
        raise ValueError(f"{name}: a paired interval needs at least 2 questions with a value, got {x.size}")
    return x


def mean_interval(values: Sequence[float], *, reference: Sequence[float] | None = None, method: str = "percentile",
                  confidence: float = 0.95, n_resamples: int = 10_000, seed: int = 0) -> tuple[float, float, float]:
    """The mean of per-question values (paired differences) with an interval.

    Parameters
    ----------
    values : sequence of float
        One value per question; NaN marks a question without a value (dropped; for
        ``percentile`` inside each resample, as :func:`~chunkwise.evaluation.stats.paired_difference_ci`
        drops a question missing either score, so its interval equals that function's on the two
        score columns).
    reference : sequence of float, optional
        Per-question scores of the reference: ``values`` are then the other arm's scores and the
        mean is of ``values - reference`` (the percentile interval is then computed on the two arms
        exactly as :func:`~chunkwise.evaluation.stats.paired_difference_ci` computes it, so a chapter's
        printed interval and its panel's primary agree to the last digit).
    method : {"percentile", "bca", "basic", "t"}
        See the module docstring.
    confidence : float in (0, 1), default 0.95
    n_resamples, seed
        Of the bootstrap methods.

    Returns
    -------
    (mean, low, high)
        In the unit of ``values``. With every value equal the interval is the value itself.

    Raises
    ------
    ValueError
        For an unknown method, a confidence outside (0, 1), or fewer than 2 values.
    """
    if method not in INTERVAL_METHODS:
        raise ValueError(f"interval method must be one of {', '.join(INTERVAL_METHODS)}, got {method!r}")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    arm = np.asarray(values, dtype=float).ravel()
    ref = np.zeros_like(arm) if reference is None else np.asarray(reference, dtype=float).ravel()
    if ref.shape != arm.shape:
        raise ValueError(f"values and reference must hold the same questions, got {arm.size} and {ref.size}")
    x = _values(arm - ref)
    mean = float(x.mean())
    if np.all(x == x[0]):
        return mean, mean, mean
    if method == "percentile":
        from chunkwise.evaluation.stats import paired_difference_ci

        # NaN rows stay in, so the resamples are those of paired_difference_ci(a, b) on the two
        # score columns (a question missing either score is dropped inside each resample)
        return paired_difference_ci(arm, ref, n_resamples=n_resamples, seed=seed, confidence=confidence)
    if method == "t":
        from scipy import stats

        half = float(stats.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
        return mean, mean - half, mean + half
    from scipy import stats

    res = stats.bootstrap((x,), np.mean, n_resamples=n_resamples, confidence_level=confidence,
                          method="BCa" if method == "bca" else "basic", random_state=np.random.default_rng(seed))
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return mean, min(low, mean), max(high, mean)


def minimal_detectable_effect(values: Sequence[float], *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true mean difference a paired two-sided test at ``alpha`` detects with
    probability ``power``, for these questions' spread: ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``
    (``sd`` with ``ddof=1``; normal approximation). Same unit as ``values``.

    Raises
    ------
    ValueError
        For fewer than 2 values, or alpha / power outside (0, 1).
    """
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha!r}, {power!r}")
    x = _values(values)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return float(z * x.std(ddof=1) / math.sqrt(x.size))


def equivalence_p(values: Sequence[float], delta: float) -> float:
    """Two one-sided t tests of ``|mean| < delta``: the larger of the two one-sided p-values
    (equivalence is shown at level alpha when this is below alpha).

    Raises
    ------
    ValueError
        For ``delta <= 0`` or fewer than 2 values.
    """
    from scipy import stats

    if not delta > 0:
        raise ValueError(f"delta (the practical margin) must be > 0, got {delta!r}")
    x = _values(values)
    if np.all(x == x[0]):
        return 0.0 if abs(x[0]) < delta else 1.0
    p_low = stats.ttest_1samp(x, -delta, alternative="greater").pvalue
    p_high = stats.ttest_1samp(x, delta, alternative="less").pvalue
    return float(max(p_low, p_high))


def difference_verdict(low: float, high: float, delta: float) -> str:
    """The ``difference`` rule's outcome for an interval ``[low, high]`` and a practical margin.

    - ``"above"``: the interval lies above 0; ``"below"``: below 0;
    - ``"within delta"``: it lies inside ``(-delta, +delta)`` (equivalence: two one-sided tests at
      the interval's level);
    - ``"not below delta"``: it includes 0 but rules out a drop larger than delta
      (``low > -delta``), though not a rise; ``"not above delta"``: the mirror image;
    - ``"cannot tell"``: otherwise, or with NaN bounds.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        return "cannot tell"
    if low > 0:
        return "above"
    if high < 0:
        return "below"
    if -delta < low and high < delta:
        return "within delta"
    if -delta < low:
        return "not below delta"
    if high < delta:
        return "not above delta"
    return "cannot tell"


@dataclass(frozen=True)
class SpecResult:
    """One specification's outcome: its name, the estimate and interval the verdict reads, the
    verdict (a word of the plan entry), the number of questions, the minimal detectable effect
    at 80% power, for the pattern rule the other interval it reads (``extra``), and the rule's
    outcome before the plan's words renamed it (``generic``, e.g. ``"within delta"``)."""

    name: str
    estimate: float
    low: float
    high: float
    verdict: str
    n: int
    mde: float
    extra: Mapping[str, float] = field(default_factory=dict)
    generic: str = ""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping (NaN as None)."""
        d = asdict(self)
        for k in ("estimate", "low", "high", "mde"):
            d[k] = None if not math.isfinite(d[k]) else float(d[k])
        d["extra"] = {k: (None if not math.isfinite(v) else float(v)) for k, v in self.extra.items()}
        return d


def _word(verdict: str, words: Mapping[str, str]) -> str:
    return words.get(verdict.replace(" ", "_"), words.get(verdict, verdict))


def contrast(name: str, values: Sequence[float], *, delta: float, reference: Sequence[float] | None = None,
             scale: float = 1.0, method: str = "percentile", confidence: float = 0.95,
             words: Mapping[str, str] | None = None, n_resamples: int = 10_000, seed: int = 0) -> SpecResult:
    """One specification under the ``difference`` rule: the mean of per-question paired
    differences (``values``, or ``values - reference`` when the reference arm is given), its
    interval (``method``), the verdict (:func:`difference_verdict`, with ``above``
    and ``below`` renamed by ``words``) and the minimal detectable effect.

    ``scale`` multiplies the estimate, the interval and the detectable effect after they are
    computed (100: fractions in, points out, as the chapters print them); ``delta`` is in the
    scaled unit.

    Raises
    ------
    ValueError
        As :func:`mean_interval`, or for ``delta <= 0``.
    """
    if not delta > 0:
        raise ValueError(f"delta (the practical margin) must be > 0, got {delta!r}")
    arm = np.asarray(values, dtype=float).ravel()
    x = _values(arm if reference is None else arm - np.asarray(reference, dtype=float).ravel(), name)
    est, lo, hi = (scale * v for v in mean_interval(arm, reference=reference, method=method, confidence=confidence,
                                                    n_resamples=n_resamples, seed=seed))
    generic = difference_verdict(lo, hi, delta)
    return SpecResult(name, est, lo, hi, _word(generic, words or {}), int(x.size),
                      scale * minimal_detectable_effect(x), generic=generic)


def pattern(name: str, gap: Sequence[float], interaction: Sequence[float], *, delta: float,
            gap_reference: Sequence[float] | None = None, interaction_reference: Sequence[float] | None = None,
            scale: float = 1.0, method: str = "percentile", confidence: float = 0.95, n_resamples: int = 10_000,
            seed: int = 0) -> SpecResult:
    """One specification under the ``pattern`` rule (Qu, Tu & Bao's finding has two parts): per
    question, ``gap`` is the method minus the reference where the effect is expected (stitched
    text) and ``interaction`` that gap minus the same gap on the control (real text).

    ``"supports"`` needs both intervals above 0; ``"contradicts"`` when either lies below 0;
    ``"no effect larger than delta"`` when the interaction's interval lies inside +/- delta;
    else ``"cannot tell"``. The estimate is the interaction; the gap goes to ``extra``.

    ``gap_reference`` / ``interaction_reference``: the second arm of each difference, as in
    :func:`contrast` (``gap`` is then the method's scores and ``interaction`` the treated gap, so
    the intervals equal :func:`~chunkwise.evaluation.stats.paired_difference_ci`'s on the two arms);
    ``scale`` multiplies every number after it is computed; ``delta`` is in the scaled unit.

    Raises
    ------
    ValueError
        As :func:`mean_interval`, or when the two arrays differ in length.
    """
    g, i = np.asarray(gap, dtype=float).ravel(), np.asarray(interaction, dtype=float).ravel()
    if g.shape != i.shape:
        raise ValueError(f"{name}: gap and interaction must hold the same questions, got {g.size} and {i.size}")
    kw = dict(method=method, confidence=confidence, n_resamples=n_resamples, seed=seed)
    gm, glo, ghi = (scale * v for v in mean_interval(g, reference=gap_reference, **kw))
    im, ilo, ihi = (scale * v for v in mean_interval(i, reference=interaction_reference, **kw))
    if glo > 0 and ilo > 0:
        verdict = "supports"
    elif ghi < 0 or ihi < 0:
        verdict = "contradicts"
    elif -delta < ilo and ihi < delta:
        verdict = "no effect larger than delta"
    else:
        verdict = "cannot tell"
    x = _values(i if interaction_reference is None else i - np.asarray(interaction_reference, dtype=float).ravel(),
                name)
    return SpecResult(name, im, ilo, ihi, verdict, int(x.size), scale * minimal_detectable_effect(x),
                      {"gap": gm, "gap_low": glo, "gap_high": ghi}, generic=verdict)


@dataclass(frozen=True)
class Robustness:
    """:func:`classify`'s result: the class, the primary, every alternative, and those that
    disagree with the primary (``flips``: ``(name, verdict)``)."""

    cls: str
    primary: SpecResult
    alternatives: tuple[SpecResult, ...]
    flips: tuple[tuple[str, str], ...]
    delta: float
    unit: str = "points"
    not_run: tuple[str, ...] = ()

    @property
    def results(self) -> tuple[SpecResult, ...]:
        """The primary first, then the alternatives."""
        return (self.primary, *self.alternatives)

    def describe(self, decimals: int = 1) -> str:
        """One sentence: the class, the alternatives it flips under, or the detectable effect, and
        the declared alternatives this run could not run (a parameter profile that cut the corpora)."""
        text = self._describe(decimals)
        if self.not_run:
            text += f"; {len(self.not_run)} declared alternatives not run here ({', '.join(self.not_run)})"
        return text

    def _describe(self, decimals: int) -> str:
        n = len(self.alternatives)
        d = f"{self.delta:g} {self.unit}".strip()
        if self.cls == "not assessed":
            return "not assessed: none of the declared alternatives could run here"
        if self.cls == "robust":
            return f"robust: all {n} declared alternatives agree"
        if self.cls == "no effect larger than delta":
            return (f"no effect larger than {d}: the interval lies inside +/-{d} and all {n} declared "
                    "alternatives agree")
        if self.cls == "cannot tell":
            if not math.isfinite(self.primary.mde):
                return "cannot tell: the primary specification has no sampling interval to size a detectable effect by"
            return (f"cannot tell: the run could detect an effect of about {self.primary.mde:.{decimals}f} {self.unit} "
                    f"at 80% power ({self.primary.n} questions)").strip()
        flipped = "; ".join(f"{a} gives {v}" for a, v in self.flips)
        return f"fragile: {len(self.flips)} of {n} declared alternatives disagree ({flipped})"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: class, sentence, delta, unit, primary, alternatives, flips."""
        return {"class": self.cls, "describe": self.describe(), "delta": self.delta, "unit": self.unit,
                "primary": self.primary.as_dict(), "alternatives": [a.as_dict() for a in self.alternatives],
                "flips": [list(f) for f in self.flips], "not_run": list(self.not_run)}


def classify(primary: SpecResult, alternatives: Sequence[SpecResult], *, delta: float,
             unit: str = "points", not_run: Sequence[str] = ()) -> Robustness:
    """The robustness class of a verdict (see the module docstring).

    Parameters
    ----------
    primary : SpecResult
        The plan's primary specification.
    alternatives : sequence of SpecResult
        One per declared alternative (at least one).
    delta : float
        The plan's practical margin, in ``unit``.
    not_run : sequence of str
        Declared alternatives this run could not compute (named in :meth:`Robustness.describe`;
        they count for no class).

    Raises
    ------
    ValueError
        Without alternatives, or with two specifications of one name.
    """
    alts = tuple(alternatives)
    if not alts and not not_run:
        raise ValueError("classify needs at least one declared alternative; declare them in the analysis plan")
    names = [primary.name, *(a.name for a in alts)]
    if len(set(names)) != len(names):
        raise ValueError(f"specification names must be unique, got {names}")
    flips = tuple((a.name, a.verdict) for a in alts if a.verdict != primary.verdict)
    if primary.verdict == "cannot tell" or primary.generic == "cannot tell":
        cls = "cannot tell"
    elif not alts:
        cls = "not assessed"  # every declared alternative needs data this run does not have
    elif flips:
        cls = "fragile"
    elif primary.generic in ("within delta", "no effect larger than delta"):
        cls = "no effect larger than delta"
    else:
        cls = "robust"
    return Robustness(cls, primary, alts, flips, float(delta), unit, tuple(not_run))


def specification_curve(robustness: Robustness, *, ax: Any = None, title: str | None = None,
                        ylabel: str | None = None) -> Any:
    """Every specification's estimate with its interval, sorted by estimate, the primary marked
    (a filled red point) and the +/- delta band shaded. One row per specification, labelled with its
    name and verdict on the y axis, so long names never overlap.

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib.pyplot as plt

    res = sorted(robustness.results, key=lambda r: (r.estimate if math.isfinite(r.estimate) else -math.inf))
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 0.32 * len(res) + 1.2))
    y = np.arange(len(res))
    for yi, r in zip(y, res):
        primary = r.name == robustness.primary.name
        colour = "tab:red" if primary else ("tab:blue" if r.verdict == robustness.primary.verdict else "tab:orange")
        ax.errorbar(r.estimate, yi, xerr=[[r.estimate - r.low], [r.high - r.estimate]], fmt="o", color=colour,
                    ms=6 if primary else 4, capsize=2, lw=1.2)
    ax.axvline(0, color="black", lw=0.8)
    d = robustness.delta
    ax.axvspan(-d, d, color="grey", alpha=0.12, lw=0)
    ax.set_yticks(y, [f"{'PRIMARY: ' if r.name == robustness.primary.name else ''}{r.name} ({r.verdict})"
                      for r in res], fontsize=7)
    ax.set_xlabel(ylabel or f"estimate with its interval ({robustness.unit}); shaded: +/-{d:g}")
    ax.set_title(title or f"{robustness.cls}", fontsize=10)
    ax.figure.tight_layout()
    return ax
