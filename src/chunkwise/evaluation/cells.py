"""The cell scorer: one table of retrieval metrics and one function that scores a cell.

A *cell* of the evaluation grid is one chunking searched by one retriever (with one embedder)
at one depth ``k``. Whatever produced its retrievals (:func:`chunkwise.evaluation.grid.run_grid`,
or chapter 2's :func:`chunkwise.experiments.chroma.rescore`, which scores the same rankings
under another placement), it is scored here, so each metric's name, per-question definition
and aggregate live in one place: :data:`METRICS`.

Per-question metrics (fractions in [0, 1]; :mod:`chunkwise.evaluation.spans` defines the span
ones, after Smith & Troynikov's report for Chroma, 2024):

=========================  ==================  ==========================================================
per-question column        table column        definition
=========================  ==================  ==========================================================
``recall``                 ``recall``          reference characters retrieved / reference characters
``precision``              ``precision``       reference characters retrieved / retrieved characters
``iou``                    ``iou``             intersection over union of retrieved and reference characters
``precision_omega``        ``precision_omega`` precision with perfect retrieval (the chunking's ceiling),
                                               in the grid's ``mode``
``precision_omega_chroma`` same                precision_Ω in Chroma's mode
``precision_omega_union``  same                precision_Ω in union mode
``hit``                    ``hit_rate``        1 when any reference character is retrieved, else 0
``rr``                     ``mrr``             1 / rank of the first retrieved chunk that shares a character
                                               with a reference (0 when none in the top k)
``ndcg``                   ``ndcg``            NDCG@k with binary relevance (a chunk is relevant when it
                                               shares a character with a reference): DCG over the ideal DCG
                                               of min(R, k) relevant chunks first, R = relevant chunks in the
                                               index (Järvelin & Kekäläinen, 2002)
``ap``                     ``map``             average precision@k: the precision at each relevant rank,
                                               summed over min(R, k) (mean over questions: MAP)
=========================  ==================  ==========================================================

The table column is the mean over questions (precision_Ω skips the NaN of a question whose
document has no chunk).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.evaluation.anyof import best_reading
from chunkwise.evaluation.spans import score_questions

__all__ = [
    "METRICS", "METRIC_TABLE", "PUBLIC_METRICS", "CellInputs", "Metric", "aggregate_cell", "metric", "score_cell",
    "span_scores_per_question",
]


@dataclass(frozen=True)
class CellInputs:
    """What a cell's metrics are computed from.

    Attributes
    ----------
    questions : DataFrame
        The grid's questions (``question_id``, ``corpus_id``, ``references``), one row each.
    retrieved : list of list of (document, start, end)
        Per question, the retrieved chunks' scored spans, best first (at most ``k`` of them,
        after any small-to-big merge).
    first_rank : ndarray of int, shape (n_questions,)
        1-based rank of the first retrieved chunk sharing a character with a reference (any
        reading), 0 when none.
    k : int
        The cell's depth.
    omega : mapping {"chroma", "union"} -> ndarray, shape (n_questions,)
        Each question's precision_Ω under the chunking, per mode (it does not depend on the
        retrieval).
    mode : {"chroma", "union"}
        The grid's span-metric mode.
    readings : (DataFrame, list of int) or None
        Any-of questions: one row per reading and each reading's question position
        (:func:`chunkwise.evaluation.anyof.expand_readings`); a question scores its best
        reading.
    relevance : list of list of bool, optional
        Per question, whether each retrieved chunk shares a character with a reference (any
        reading), in rank order; with ``n_relevant`` it gives NDCG and AP (NaN without them).
    n_relevant : ndarray of int, shape (n_questions,), optional
        Relevant chunks in the whole index per question (R).
    """

    questions: pd.DataFrame
    retrieved: Sequence[Sequence[tuple[str, int, int]]]
    first_rank: np.ndarray
    k: int
    omega: Mapping[str, np.ndarray]
    mode: str = "chroma"
    readings: tuple[pd.DataFrame, Sequence[int]] | None = None
    relevance: Sequence[Sequence[bool]] | None = None
    n_relevant: np.ndarray | None = None


def span_scores_per_question(
    questions: pd.DataFrame,
    retrieved: Sequence[Sequence[tuple[str, int, int]]],
    mode: str = "chroma",
    readings: tuple[pd.DataFrame, Sequence[int]] | None = None,
) -> pd.DataFrame:
    """Recall, precision and IoU of each question's retrieved spans; an any-of question keeps
    its best reading (:func:`~chunkwise.evaluation.anyof.best_reading`).

    Parameters
    ----------
    questions, retrieved, mode, readings
        As the fields of :class:`CellInputs`.

    Returns
    -------
    DataFrame
        One row per question in order, with the columns of
        :func:`~chunkwise.evaluation.spans.score_questions` (``recall``, ``precision``,
        ``iou``, fractions).
    """
    if readings is None:
        return score_questions(questions, retrieved, None, mode=mode)
    qx, owner = readings
    sc_x = score_questions(qx, [retrieved[o] for o in owner], None, mode=mode)
    return sc_x.iloc[best_reading(sc_x, np.asarray(owner), len(questions))].reset_index(drop=True)


class _Spans:
    """Span scores of a cell, computed once and shared by the span metrics."""

    def __init__(self, inputs: CellInputs):
        self.inputs = inputs
        self._frame: pd.DataFrame | None = None

    def column(self, name: str) -> np.ndarray:
        if self._frame is None:
            i = self.inputs
            self._frame = span_scores_per_question(i.questions, i.retrieved, i.mode, i.readings)
        return self._frame[name].to_numpy(dtype=float)


@dataclass(frozen=True)
class Metric:
    """One per-question metric of the grid.

    Attributes
    ----------
    name : str
        The per-question column (``GridResult.per_question``).
    column : str
        The cell table's column holding the aggregate (``GridResult.table``).
    per_question : callable ``(CellInputs, spans) -> ndarray (n_questions,)``
        The value of each question, a fraction in [0, 1] (NaN where undefined).
    aggregate : callable ``ndarray -> float``
        The cell's value from the per-question values.
    public : bool
        Whether a verdict, a baseline check or a figure may be about it.
    """

    name: str
    column: str
    per_question: Callable[[CellInputs, _Spans], np.ndarray]
    aggregate: Callable[[np.ndarray], float]
    public: bool = True


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values))


def _nanmean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def _rr(i: CellInputs, s: _Spans) -> np.ndarray:
    first = np.asarray(i.first_rank, dtype=np.int64)
    return np.where((first > 0) & (first <= i.k), 1.0 / np.maximum(first, 1), 0.0)


def _ranked_relevance(i: CellInputs) -> list[tuple[np.ndarray, int]] | None:
    if i.relevance is None or i.n_relevant is None:
        return None
    out = []
    for rel, r in zip(i.relevance, np.asarray(i.n_relevant, dtype=np.int64)):
        rel_arr = np.asarray(list(rel)[: i.k], dtype=float)
        out.append((rel_arr, max(int(r), int(rel_arr.sum()))))  # a merged parent can add a relevant item
    return out


def _ndcg(i: CellInputs, s: _Spans) -> np.ndarray:
    ranked = _ranked_relevance(i)
    if ranked is None:
        return np.full(len(i.questions), np.nan)
    out = []
    for rel, r in ranked:
        if r == 0:
            out.append(np.nan)
            continue
        discount = 1.0 / np.log2(np.arange(2, i.k + 2))
        dcg = float((rel * discount[: len(rel)]).sum())
        out.append(dcg / float(discount[: min(r, i.k)].sum()))
    return np.asarray(out)


def _ap(i: CellInputs, s: _Spans) -> np.ndarray:
    ranked = _ranked_relevance(i)
    if ranked is None:
        return np.full(len(i.questions), np.nan)
    out = []
    for rel, r in ranked:
        if r == 0:
            out.append(np.nan)
            continue
        hits = np.cumsum(rel)
        precision_at = hits / np.arange(1, len(rel) + 1)
        out.append(float((precision_at * rel).sum()) / min(r, i.k))
    return np.asarray(out)


#: The metric table, in the order of the per-question and cell-table columns.
METRIC_TABLE: tuple[Metric, ...] = (
    Metric("recall", "recall", lambda i, s: s.column("recall"), _mean),
    Metric("precision", "precision", lambda i, s: s.column("precision"), _mean),
    Metric("iou", "iou", lambda i, s: s.column("iou"), _mean),
    Metric("precision_omega", "precision_omega", lambda i, s: np.asarray(i.omega[i.mode], dtype=float), _nanmean),
    Metric("precision_omega_chroma", "precision_omega_chroma", lambda i, s: np.asarray(i.omega["chroma"], dtype=float),
           _nanmean, public=False),
    Metric("precision_omega_union", "precision_omega_union", lambda i, s: np.asarray(i.omega["union"], dtype=float),
           _nanmean, public=False),
    Metric("hit", "hit_rate", lambda i, s: (s.column("recall") > 0).astype(float), _mean),
    Metric("rr", "mrr", _rr, _mean),
    Metric("ndcg", "ndcg", _ndcg, _nanmean),
    Metric("ap", "map", _ap, _nanmean),
)

#: Per-question metric columns, in table order.
METRICS: tuple[str, ...] = tuple(m.name for m in METRIC_TABLE)

#: Table columns a verdict can be about.
PUBLIC_METRICS: tuple[str, ...] = tuple(m.column for m in METRIC_TABLE if m.public)


def metric(name: str) -> Metric:
    """The metric whose per-question name or table column is ``name`` (``"mrr"`` and ``"rr"`` alike).

    Raises
    ------
    ValueError
        For an unknown name (the message lists the public ones).
    """
    for m in METRIC_TABLE:
        if name in (m.name, m.column):
            return m
    raise ValueError(f"unknown metric {name!r}; use one of {', '.join(PUBLIC_METRICS)}.")


def score_cell(inputs: CellInputs) -> dict[str, np.ndarray]:
    """Every per-question metric of one cell.

    Parameters
    ----------
    inputs : CellInputs

    Returns
    -------
    dict of str -> ndarray, shape (n_questions,)
        Keyed by :data:`METRICS`, in that order; fractions in [0, 1], NaN only for a
        precision_Ω that is undefined.

    Raises
    ------
    ValueError
        From :func:`chunkwise.evaluation.spans.score_questions` for an invalid span or reference,
        or when an array has another length than the questions.
    """
    spans = _Spans(inputs)
    n = len(inputs.questions)
    out: dict[str, np.ndarray] = {}
    for m in METRIC_TABLE:
        values = np.asarray(m.per_question(inputs, spans), dtype=float)
        if values.shape != (n,):
            raise ValueError(f"metric {m.name!r} gave {values.shape[0] if values.ndim else 0} values for {n} questions.")
        out[m.name] = values
    return out


def aggregate_cell(per_question: Mapping[str, Any] | pd.DataFrame) -> dict[str, float]:
    """The cell table's metric columns from one cell's per-question values.

    Parameters
    ----------
    per_question : mapping or DataFrame
        Holds every per-question column of :data:`METRICS`.

    Returns
    -------
    dict of str -> float
        Table column (``recall`` ... ``hit_rate``, ``mrr``) -> the metric's aggregate.

    Raises
    ------
    ValueError
        If a metric column is missing.
    """
    missing = [m.name for m in METRIC_TABLE if m.name not in per_question]
    if missing:
        raise ValueError(f"per-question scores lack metric column(s) {missing}; keep every column of METRICS.")
    return {m.column: m.aggregate(np.asarray(per_question[m.name], dtype=float)) for m in METRIC_TABLE}
