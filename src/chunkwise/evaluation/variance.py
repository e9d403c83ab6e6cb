"""Variance components of a balanced factorial grid, with the sampling noise taken out (#58).

A grid crosses factors (chunker, embedder, retriever, k) and scores every cell on the same
questions. How much of the spread of the cells' mean scores does each factor explain? Shares of
the observed sums of squares of the cell means (chapter 7's first answer) count the noise of
finite question sets as effect: every effect of ``df`` degrees of freedom collects about ``df``
times the noise variance of a cell mean even when it is absent, and the interactions, with most
of the degrees of freedom, collect most of it. Here each effect's observed sum of squares has its
noise expectation subtracted, the ANOVA (moment) estimator of a variance component.

The model and the algebra
-------------------------
Question ``i`` gives a vector ``y_i`` of ``C`` cell scores; questions are the replication unit,
drawn independently, each with any covariance ``Sigma`` across cells (a question effect, and any
question x factor interaction, are allowed). For an effect ``E`` (a main effect, or an
interaction of some factors) let ``P_E`` be the orthogonal projector onto its contrasts in cell
space (the usual balanced-ANOVA decomposition: ``P_E y`` is the inclusion-exclusion of marginal
means of ``y``, and the ``P_E`` of all effects sum to the centring projector). With cell means
``m = mean_i y_i`` and the true means ``mu``:

    SS_E = ||P_E m||^2,    E[SS_E] = ||P_E mu||^2 + tr(P_E Sigma) / Q.

The noise term is estimated without bias from the per-question residuals around the cell
means, ``S`` the sample covariance of the ``y_i`` (ddof 1):

    noise_E = tr(P_E S) / Q = sum_i ||P_E (y_i - m)||^2 / (Q (Q - 1)),

which is ``df_E * MS_(E x question) / Q``: the effect-by-question interaction mean square, the
error term of a fixed effect when the blocks (questions) are random, so that the component is
``(MS_E - MS_(E x question)) / Q`` per degree of freedom (Montgomery [1]_, ch. 5.6 and ch. 13-14:
expected mean squares and the ANOVA method of estimating variance components; Searle, Casella &
McCulloch [2]_, ch. 4). ``error="pooled"`` uses the residual pooled over every effect x question
term instead (``noise_E = df_E * MS_residual / Q``, Montgomery's blocked factorial, which assumes
the same noise for every contrast); the default, ``"effect"``, does not need that assumption and
gives an effect that no question's score can move (the embedder within BM25) no noise at all.

A corrected component can come out below 0 (the effect is smaller than its noise, as a true zero
is half the time): it is reported in ``corrected`` as it is, and its share as 0 with
``below_zero`` True and a note, the usual treatment of a negative variance-component estimate
([1]_, sec. 13.2; [2]_, sec. 4.8).

Units: components are sums of squares of cell means divided by the number of cells, i.e. the
variance of the cell means across cells that the source accounts for, in metric units squared
(recall^2 for recall in [0, 1]). Shares are fractions.

:func:`interaction_contrast` answers "does the chunker ranking transfer across embedders" for
one pair of chunkers and one pair of embedders: the difference of the chunker gap between the
two embedders, question by question, with a paired bootstrap interval
(:func:`chunkwise.evaluation.stats.paired_difference_ci`); :func:`interaction_contrasts` does it
for every pair.

References
----------
.. [1] D. C. Montgomery, *Design and Analysis of Experiments*, 8th ed., Wiley, 2013: ch. 5.6
   (blocking in a factorial design), ch. 13 (random factors: expected mean squares, the ANOVA
   method of estimating variance components, negative estimates), ch. 14 (nested and split-plot
   designs: an effect tested against its interaction with the random blocks).
.. [2] S. R. Searle, G. Casella and C. E. McCulloch, *Variance Components*, Wiley, 1992, ch. 4
   (ANOVA estimation in balanced data; negative estimates, sec. 4.8).
.. [3] B. Efron and R. J. Tibshirani, *An Introduction to the Bootstrap*, 1993 (percentile
   intervals over resampled questions).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.evaluation.stats import _resample_counts, paired_difference_ci

__all__ = [
    "ERRORS",
    "FactorialGrid",
    "interaction_contrast",
    "interaction_contrasts",
    "variance_components",
]

#: How the noise of an effect is estimated: from its own interaction with the questions, or pooled.
ERRORS: tuple[str, ...] = ("effect", "pooled")

#: The two-way interactions chapter 7 reports on their own (when both factors are in the grid).
DEFAULT_INTERACTIONS: tuple[tuple[str, str], ...] = (("chunker", "embedder"), ("retriever", "embedder"))


def _label(effect: Sequence[str]) -> str:
    return " x ".join(effect)


class FactorialGrid:
    """Per-question scores of a balanced full factorial, checked, with every effect's components.

    Parameters
    ----------
    wide : DataFrame
        Rows = questions (the replication unit), columns = cells: a MultiIndex with one named level
        per factor (or a plain Index with a name, for one factor), every combination of levels
        exactly once; values = the per-question score (e.g. recall in [0, 1]), no NaN.
        :func:`chunkwise.experiments.whatmatters.balanced_scores` returns this shape.

    Attributes
    ----------
    factors : list of str
    levels : dict of str to list
        Each factor's levels, in column order of first appearance.
    effects : list of tuple of str
        Every effect, main effects first, then two-way, three-way ... interactions, each in factor order.
    components : dict of tuple to ndarray, shape (Q, C)
        Each effect's projection of each question's scores (cells in ``wide``'s column order).
    n_questions, n_cells : int

    Raises
    ------
    ValueError
        If ``wide`` is not a DataFrame, a factor has no name, a score is NaN or not finite, there
        are fewer than 2 questions, a factor has a single level ("an effect needs two levels"), or
        the grid is not balanced (a combination of levels missing or repeated).
    """

    def __init__(self, wide: pd.DataFrame) -> None:
        if not isinstance(wide, pd.DataFrame):
            raise ValueError(f"wide must be a DataFrame of per-question scores (questions x cells), got "
                             f"{type(wide).__name__}.")
        cols = wide.columns
        if isinstance(cols, pd.MultiIndex):
            names = list(cols.names)
            tuples = list(cols)
        else:
            names = [cols.name]
            tuples = [(c,) for c in cols]
        if any(n is None for n in names) or len(set(names)) != len(names):
            raise ValueError(f"every column level must be a named factor, each once; got {names}.")
        try:
            values = wide.to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise ValueError("the scores must be numbers.") from None
        if not np.isfinite(values).all():
            raise ValueError("the scores hold NaN or infinity; variance components need a score for every "
                             "question and cell (balanced_scores gives them).")
        if values.shape[0] < 2:
            raise ValueError(f"need at least 2 questions (the noise is estimated across them), got {values.shape[0]}.")
        levels = {n: list(dict.fromkeys(t[i] for t in tuples)) for i, n in enumerate(names)}
        single = [n for n in names if len(levels[n]) < 2]
        if single:
            raise ValueError(f"factor(s) {single} have a single level ({[levels[n][0] for n in single]}); an effect "
                             "needs two levels: drop the factor (e.g. wide.xs(level, axis=1, level=factor)).")
        shape = [len(levels[n]) for n in names]
        index = {n: {lv: j for j, lv in enumerate(levels[n])} for n in names}
        pos = [tuple(index[n][t[i]] for i, n in enumerate(names)) for t in tuples]
        expected = int(np.prod(shape))
        if len(set(pos)) != len(pos):
            dup = sorted({tuples[i] for i, p in enumerate(pos) if pos.count(p) > 1}, key=str)[:3]
            raise ValueError(f"the grid is not balanced: cell(s) {dup} appear more than once.")
        if len(pos) != expected:
            have = set(pos)
            missing = [tuple(levels[n][j] for n, j in zip(names, p)) for p in itertools.product(*map(range, shape))
                       if p not in have][:3]
            raise ValueError(f"the grid is not balanced: {len(pos)} cells of the {expected} of a full factorial over "
                             f"{names} (missing e.g. {missing}).")
        self.factors: list[str] = names
        self.levels: dict[str, list[Any]] = levels
        self.n_questions, self.n_cells = values.shape
        flat = np.ravel_multi_index(np.asarray(pos).T, shape)  # column -> position in the tensor
        tensor = np.empty((values.shape[0], expected))
        tensor[:, flat] = values
        tensor = tensor.reshape(values.shape[0], *shape)
        axes = list(range(1, len(names) + 1))
        self.effects: list[tuple[str, ...]] = [
            tuple(names[i] for i in combo) for r in range(1, len(names) + 1)
            for combo in itertools.combinations(range(len(names)), r)
        ]
        marginal: dict[tuple[int, ...], np.ndarray] = {}

        def mean_keeping(kept: tuple[int, ...]) -> np.ndarray:
            if kept not in marginal:
                drop = tuple(a for i, a in enumerate(axes) if i not in kept)
                marginal[kept] = tensor.mean(axis=drop, keepdims=True) if drop else tensor
            return marginal[kept]

        self.components: dict[tuple[str, ...], np.ndarray] = {}
        for effect in self.effects:
            members = tuple(names.index(f) for f in effect)
            comp = np.zeros_like(tensor)
            for r in range(len(members) + 1):
                for kept in itertools.combinations(members, r):
                    comp = comp + (-1) ** (len(members) - r) * mean_keeping(kept)
            self.components[effect] = comp.reshape(values.shape[0], expected)[:, flat]
        self.df: dict[tuple[str, ...], int] = {
            e: int(np.prod([len(levels[f]) - 1 for f in e])) for e in self.effects}

    def sums(self, weights: np.ndarray | None = None, error: str = "effect") -> tuple[np.ndarray, np.ndarray]:
        """Each effect's observed sum of squares of the cell means and its noise expectation.

        Parameters
        ----------
        weights : ndarray, shape (B, Q), optional
            Resampling counts of the questions (each row sums to Q); default: the questions once each.
        error : {"effect", "pooled"}

        Returns
        -------
        (observed, noise) : two ndarrays of shape (B, n_effects)
            In sums of squares over the cells (divide by ``n_cells`` for variance units).
        """
        q = self.n_questions
        w = np.ones((1, q)) if weights is None else np.asarray(weights, dtype=float)
        observed = np.empty((w.shape[0], len(self.effects)))
        deviations = np.empty_like(observed)
        for j, effect in enumerate(self.effects):
            comp = self.components[effect]
            mean = (w @ comp) / q  # (B, C): the effect's part of the (resampled) cell means
            observed[:, j] = (mean * mean).sum(axis=1)
            per_q = (comp * comp).sum(axis=1)  # (Q,)
            deviations[:, j] = w @ per_q - q * observed[:, j]  # sum_i w_i ||P_E (y_i - m)||^2
        if error == "effect":
            noise = deviations / (q * (q - 1))
        else:
            df = np.asarray([self.df[e] for e in self.effects], dtype=float)
            ms_resid = deviations.sum(axis=1, keepdims=True) / (df.sum() * (q - 1))
            noise = df[None, :] * ms_resid / q
        return observed, noise


def _check_settings(error: str, n_resamples: int, confidence: float) -> None:
    if error not in ERRORS:
        raise ValueError(f"error must be one of {ERRORS}, got {error!r}.")
    from chunkwise._validation import Interval, Options, check_param

    check_param("n_resamples", n_resamples, [Options((0,)), Interval(int, 100, None)], hint=" (0: no intervals)")
    check_param("confidence", confidence, [Interval(float, 0.5, 1, closed="neither")])


def _groups(grid: FactorialGrid, interactions: Sequence[Sequence[str]] | None) -> list[tuple[str, list[int]]]:
    """Reported sources: each main effect, each named two-way interaction, the rest lumped."""
    if interactions is None:
        interactions = [p for p in DEFAULT_INTERACTIONS if all(f in grid.factors for f in p)]
    named: list[tuple[str, ...]] = []
    for pair in interactions:
        pair = tuple(pair)
        if len(pair) != 2 or len(set(pair)) != 2 or any(f not in grid.factors for f in pair):
            raise ValueError(f"an interaction to report is two different factors of {grid.factors}, got {pair!r}.")
        ordered = tuple(f for f in grid.factors if f in pair)
        if ordered not in named:
            named.append(ordered)
    out = [(f, [grid.effects.index((f,))]) for f in grid.factors]
    out += [(_label(p), [grid.effects.index(p)]) for p in named]
    rest = [j for j, e in enumerate(grid.effects) if len(e) > 1 and e not in named]
    if rest:
        out.append(("other interactions", rest))
    return out


def variance_components(
    wide: pd.DataFrame,
    interactions: Sequence[Sequence[str]] | None = None,
    *,
    error: str = "effect",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """How the variance of the cells' mean scores splits into factors, interactions and sampling noise.

    Parameters
    ----------
    wide : DataFrame
        Per-question scores of a balanced full factorial (:class:`FactorialGrid`; e.g.
        :func:`chunkwise.experiments.whatmatters.balanced_scores`, restricted first with ``wide.xs``
        to fix a factor, such as one retriever).
    interactions : sequence of (str, str), optional
        Two-way interactions reported on their own; every other interaction is lumped into
        ``"other interactions"``. Default: ``("chunker", "embedder")`` and ``("retriever",
        "embedder")``, those whose factors are in the grid.
    error : {"effect", "pooled"}, default "effect"
        The noise estimate of each effect: its own effect x question mean square (no assumption on
        the noise across cells), or the residual mean square pooled over all of them (module
        docstring).
    n_resamples : int, default 2000
        Bootstrap resamples of the questions for the intervals of the shares; 0 for none. The
        resampled estimates centre on the uncorrected value (resampling adds the questions' noise
        to the cell means once more), so each interval is the percentile interval of the resamples
        moved back by their mean's distance from the estimate (the bootstrap estimate of bias,
        Efron & Tibshirani [3]_, ch. 10), then clipped to [0, 1].
    seed, confidence
        Of the bootstrap (``numpy.random.default_rng(seed)``, as :mod:`chunkwise.evaluation.stats`).

    Returns
    -------
    DataFrame
        One row per reported source (factors in column order, the named interactions, ``"other
        interactions"`` when any remain, then ``"sampling noise"``), with columns

        - ``source``; ``df`` (degrees of freedom; for the noise row, of all effects together);
        - ``observed``: the source's part of the variance of the cell means (sum of squares over the
          cells / number of cells; metric units squared); for the noise row, the total observed;
        - ``noise``: its expected sampling-noise part, estimated (for the noise row, the total);
        - ``corrected``: ``observed - noise``, as estimated (may be below 0); for the noise row, the noise;
        - ``share``: ``max(corrected, 0)`` over the total observed variance; for the noise row, the
          total noise over it (at most 1). Without clipping, the shares add up to 1;
        - ``share_uncorrected``: ``observed`` over the total (the noise left in; the noise row NaN);
        - ``share_of_signal``: ``max(corrected, 0)`` over the sum of the sources' clipped corrected
          parts: the split of what is not noise (NaN when nothing is; the noise row NaN). It splits
          whatever is left, so it is only worth reading when the noise row's ``share`` is well below 1:
          on pure noise it divides noise by noise;
        - ``share_low``, ``share_high``: the interval of ``share`` (above; NaN without resamples);
        - ``signal_low``, ``signal_high``: the interval of ``share_of_signal``;
        - ``below_zero``: the corrected estimate was below 0 and its shares are reported as 0;
        - ``note``: why a share is 0 or missing, else "".

        ``attrs`` holds ``error``, ``n_questions``, ``n_cells``, ``factors`` and ``effects`` (every
        effect's label -> [observed, noise, corrected], variance units).

    Raises
    ------
    ValueError
        As :class:`FactorialGrid` (unbalanced grid, a factor with one level, NaN, fewer than 2
        questions); for an interaction that is not two different factors of the grid; a bad
        ``error``, ``n_resamples`` (0 or >= 100) or ``confidence`` (in (0.5, 1)).

    Examples
    --------
    >>> import pandas as pd
    >>> cols = pd.MultiIndex.from_product([["c1", "c2"], ["e1", "e2"]], names=["chunker", "embedder"])
    >>> wide = pd.DataFrame([[1, 2, 3, 4], [3, 2, 5, 8]], columns=cols)
    >>> variance_components(wide, n_resamples=0)[["source", "corrected", "share"]].round(4)
                   source  corrected   share
    0             chunker       2.00  0.7273
    1            embedder       0.25  0.0909
    2  chunker x embedder       0.00  0.0000
    3      sampling noise       0.50  0.1818
    """
    _check_settings(error, n_resamples, confidence)
    grid = FactorialGrid(wide)
    groups = _groups(grid, interactions)
    c = grid.n_cells

    def table(observed: np.ndarray, noise: np.ndarray) -> dict[str, np.ndarray]:
        """Per row of (B, n_effects) sums: each source's parts and shares, the noise row last."""
        obs = np.stack([observed[:, idx].sum(axis=1) for _, idx in groups], axis=1) / c
        noi = np.stack([noise[:, idx].sum(axis=1) for _, idx in groups], axis=1) / c
        total = observed.sum(axis=1) / c
        corr = obs - noi
        clipped = np.maximum(corr, 0.0)
        signal = clipped.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = total[:, None] > 0
            raw = np.where(ok, corr / total[:, None], np.nan)
            noise_share = np.where(total > 0, noise.sum(axis=1) / c / total, np.nan)
            clipped_noise = np.minimum(noise_share, 1.0)
            return {
                "obs": obs, "noise": noi, "corr": corr, "total": total,
                "raw": np.concatenate([raw, noise_share[:, None]], axis=1),  # unclipped shares
                "share": np.concatenate([np.where(ok, clipped / total[:, None], np.nan), clipped_noise[:, None]],
                                        axis=1),
                "signal": np.where(signal[:, None] > 0, clipped / signal[:, None], np.nan),
            }

    observed, noise = grid.sums(error=error)
    point = {k: v[0] for k, v in table(observed, noise).items()}
    total = float(point["total"])
    total_noise = float(noise.sum() / c)
    n_src = len(groups)
    share_iv = np.full((n_src + 1, 2), np.nan)
    signal_iv = np.full((n_src, 2), np.nan)
    if n_resamples:
        w = _resample_counts(np.random.default_rng(int(seed)), grid.n_questions, int(n_resamples))
        boot = table(*grid.sums(w, error=error))
        for j in range(n_src + 1):
            share_iv[j] = _shifted_interval(point["raw"][j], boot["raw"][:, j], confidence)
        for j in range(n_src):
            signal_iv[j] = _shifted_interval(point["signal"][j], boot["signal"][:, j], confidence)
    rows = []
    for j, (name, idx) in enumerate(groups):
        corr = float(point["corr"][j])
        below = corr < 0
        note = ""
        if below:
            note = f"estimate below 0 ({corr:.3g}: smaller than its noise), reported as 0"
        elif total <= 0:
            note = "the cell means do not vary"
        rows.append({
            "source": name, "df": int(sum(grid.df[grid.effects[i]] for i in idx)),
            "observed": float(point["obs"][j]), "noise": float(point["noise"][j]), "corrected": corr,
            "share": float(point["share"][j]), "share_low": share_iv[j, 0], "share_high": share_iv[j, 1],
            "share_uncorrected": float(point["obs"][j] / total) if total > 0 else np.nan,
            "share_of_signal": float(point["signal"][j]), "signal_low": signal_iv[j, 0],
            "signal_high": signal_iv[j, 1], "below_zero": bool(below), "note": note,
        })
    rows.append({
        "source": "sampling noise", "df": int(sum(grid.df.values())), "observed": total, "noise": total_noise,
        "corrected": total_noise, "share": float(point["share"][-1]), "share_low": share_iv[-1, 0],
        "share_high": share_iv[-1, 1], "share_uncorrected": np.nan, "share_of_signal": np.nan,
        "signal_low": np.nan, "signal_high": np.nan, "below_zero": False,
        "note": ("expected contribution of question-level noise to the observed variance of the cell means"
                 + (f"; it exceeds the observed variance ({total_noise:.3g} > {total:.3g}): reported as 1, nothing "
                    "is told apart from noise" if total_noise > total else "")),
    })
    out = pd.DataFrame(rows)
    out.attrs.update({
        "error": error, "n_questions": grid.n_questions, "n_cells": c, "factors": list(grid.factors),
        "effects": {_label(e): [float(observed[0, j] / c), float(noise[0, j] / c),
                                float((observed[0, j] - noise[0, j]) / c)] for j, e in enumerate(grid.effects)},
    })
    return out


def _shifted_interval(point: float, boot: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval of ``boot`` moved back by the bootstrap bias ``mean(boot) - point``, clipped to [0, 1].

    Resampling the questions adds their noise to the cell means once more, and a resample's noise
    correction removes only its own estimate of it, so the resampled estimates centre on the
    *uncorrected* value, not on ``point``; the shift removes that bias (Efron & Tibshirani [3]_,
    ch. 10: the bootstrap estimate of bias).
    """
    arr = np.asarray(boot, dtype=float)
    arr = arr[np.isfinite(arr)]
    if not np.isfinite(point) or arr.size == 0:
        return (np.nan, np.nan)
    alpha = (1 - confidence) / 2
    shift = float(arr.mean()) - float(point)
    low, high = (float(v) - shift for v in np.quantile(arr, [alpha, 1 - alpha]))
    return (min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0))


# --------------------------------------------------------------------------------------
# does the ranking transfer: paired interaction contrasts
# --------------------------------------------------------------------------------------


def _cell_means(wide: pd.DataFrame, ranked: str, across: str, r: Any, a: Any) -> np.ndarray:
    cols = wide.columns
    mask = np.asarray((cols.get_level_values(ranked) == r) & (cols.get_level_values(across) == a))
    return wide.to_numpy(dtype=float)[:, mask].mean(axis=1)


def interaction_contrast(
    wide: pd.DataFrame,
    ranked_pair: Sequence[Any],
    across_pair: Sequence[Any],
    *,
    ranked: str = "chunker",
    across: str = "embedder",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Does the gap between two chunkers change from one embedder to another? A paired 2 x 2 contrast.

    For ranked levels ``(r1, r2)`` and across levels ``(a1, a2)``, per question ``i``:
    ``gap_1(i) = y_i(r1, a1) - y_i(r2, a1)``, ``gap_2(i) = y_i(r1, a2) - y_i(r2, a2)`` (each
    ``y_i(r, a)`` the question's mean over every other factor of ``wide``: restrict ``wide`` first,
    e.g. ``wide.xs("dense", axis=1, level="retriever", drop_level=False)``, to fix one), and the
    interaction contrast ``gap_1(i) - gap_2(i)``. Its mean over the questions is the difference of
    the chunker gap between the two embedders, 0 when the gap transfers unchanged; its interval is
    the paired percentile bootstrap over questions
    (:func:`chunkwise.evaluation.stats.paired_difference_ci`, the same resamples for the gaps and
    the contrast: the same ``seed`` and questions).

    Parameters
    ----------
    wide : DataFrame
        Per-question scores with ``ranked`` and ``across`` among its column levels (e.g.
        :func:`chunkwise.experiments.whatmatters.balanced_scores`).
    ranked_pair, across_pair : pair of levels
        ``(r1, r2)`` of ``ranked`` and ``(a1, a2)`` of ``across``.
    ranked, across : str, default "chunker", "embedder"
    n_resamples, seed, confidence
        As :func:`~chunkwise.evaluation.stats.paired_difference_ci`.

    Returns
    -------
    dict
        ``ranked``, ``across``, ``r1``, ``r2``, ``a1``, ``a2``; ``gap_1``, ``gap_1_low``,
        ``gap_1_high`` (mean ``r1 - r2`` under ``a1``, metric units, with its interval); ``gap_2``,
        ... (under ``a2``); ``contrast``, ``contrast_low``, ``contrast_high`` (``gap_1 - gap_2``);
        ``reverses`` (both gaps' intervals exclude 0, with opposite signs: the order of the pair
        flips beyond the noise); ``contrast_clear`` (the contrast's interval excludes 0: the gap
        changes beyond the noise); ``per_question`` (ndarray (Q,) of the contrasts, ``wide``'s row
        order); ``n_questions``.

    Raises
    ------
    ValueError
        For an unknown factor or level, a pair that is not two different levels, NaN scores, fewer
        than 2 questions, or bad bootstrap settings (from :mod:`~chunkwise.evaluation.stats`).

    Examples
    --------
    >>> import pandas as pd
    >>> cols = pd.MultiIndex.from_product([["c1", "c2"], ["e1", "e2"]], names=["chunker", "embedder"])
    >>> wide = pd.DataFrame([[0.9, 0.5, 0.4, 0.6], [0.7, 0.6, 0.5, 0.4]], columns=cols)
    >>> r = interaction_contrast(wide, ("c1", "c2"), ("e1", "e2"), n_resamples=100)
    >>> round(r["gap_1"], 3), round(r["gap_2"], 3), round(r["contrast"], 3)
    (0.35, 0.05, 0.3)
    """
    names = list(wide.columns.names) if isinstance(wide, pd.DataFrame) else []
    if ranked not in names or across not in names or ranked == across:
        raise ValueError(f"ranked and across must be two different factors of {names}, got {ranked!r}, {across!r}.")
    for factor, pair in ((ranked, ranked_pair), (across, across_pair)):
        known = list(dict.fromkeys(wide.columns.get_level_values(factor)))
        pair = tuple(pair)
        if len(pair) != 2 or pair[0] == pair[1] or any(p not in known for p in pair):
            raise ValueError(f"a pair of {factor} is two different levels of {known}, got {pair!r}.")
    if wide.shape[0] < 2:
        raise ValueError(f"need at least 2 questions, got {wide.shape[0]}.")
    if not np.isfinite(wide.to_numpy(dtype=float)).all():
        raise ValueError("the scores hold NaN or infinity; the contrast needs a score for every question and cell.")
    (r1, r2), (a1, a2) = tuple(ranked_pair), tuple(across_pair)
    gap_1 = _cell_means(wide, ranked, across, r1, a1) - _cell_means(wide, ranked, across, r2, a1)
    gap_2 = _cell_means(wide, ranked, across, r1, a2) - _cell_means(wide, ranked, across, r2, a2)
    zeros = np.zeros_like(gap_1)
    boot = {"n_resamples": n_resamples, "seed": seed, "confidence": confidence}
    g1 = paired_difference_ci(gap_1, zeros, **boot)
    g2 = paired_difference_ci(gap_2, zeros, **boot)
    ct = paired_difference_ci(gap_1, gap_2, **boot)
    reverses = bool((g1[1] > 0 and g2[2] < 0) or (g1[2] < 0 and g2[1] > 0))
    return {
        "ranked": ranked, "across": across, "r1": r1, "r2": r2, "a1": a1, "a2": a2,
        "gap_1": g1[0], "gap_1_low": g1[1], "gap_1_high": g1[2],
        "gap_2": g2[0], "gap_2_low": g2[1], "gap_2_high": g2[2],
        "contrast": ct[0], "contrast_low": ct[1], "contrast_high": ct[2],
        "reverses": reverses, "contrast_clear": bool(ct[1] > 0 or ct[2] < 0),
        "per_question": gap_1 - gap_2, "n_questions": int(wide.shape[0]),
    }


def interaction_contrasts(
    wide: pd.DataFrame,
    *,
    ranked: str = "chunker",
    across: str = "embedder",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """:func:`interaction_contrast` for every pair of ``ranked`` levels and every pair of ``across`` levels.

    Returns
    -------
    DataFrame
        One row per (``r1``, ``r2``, ``a1``, ``a2``), pairs in level order (``r1`` before ``r2`` as
        they first appear in ``wide``'s columns): the scalar entries of :func:`interaction_contrast`
        (``per_question`` left out). ``attrs["summary"]``: how many pairs reverse beyond the noise
        and how many change their gap beyond it, in words.

    Raises
    ------
    ValueError
        As :func:`interaction_contrast`.
    """
    names = list(wide.columns.names) if isinstance(wide, pd.DataFrame) else []
    if ranked not in names or across not in names or ranked == across:
        raise ValueError(f"ranked and across must be two different factors of {names}, got {ranked!r}, {across!r}.")
    r_levels = list(dict.fromkeys(wide.columns.get_level_values(ranked)))
    a_levels = list(dict.fromkeys(wide.columns.get_level_values(across)))
    rows = []
    for rp in itertools.combinations(r_levels, 2):
        for ap in itertools.combinations(a_levels, 2):
            res = interaction_contrast(wide, rp, ap, ranked=ranked, across=across, n_resamples=n_resamples,
                                       seed=seed, confidence=confidence)
            res.pop("per_question")
            rows.append(res)
    out = pd.DataFrame(rows)
    n = len(out)
    out.attrs["summary"] = (
        f"{int(out['reverses'].sum()) if n else 0} of {n} pairs of {ranked}s reverse their order between two "
        f"{across}s beyond the noise; {int(out['contrast_clear'].sum()) if n else 0} change their gap beyond it "
        f"({confidence:.0%} paired bootstrap intervals over {int(wide.shape[0])} questions, not adjusted for "
        f"the {n} comparisons)."
    )
    return out
