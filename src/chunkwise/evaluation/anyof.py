"""Any-of answers: score a question against the best-retrieved of its readings.

A question whose answer appears in several places (a clause repeated in a contract template,
a fact in each version of a document) lists its excerpts as slots, each slot a list of
alternatives: ``"excerpts": [["the fee is 10 dollars", "the fee is ten dollars"], "paid
monthly"]``. :func:`chunkwise.datasets.local.validate_questions` locates every alternative and
lists the question's *readings*: one alternative per slot, all in one document (the column
``readings``: a list of ``{"corpus_id", "references"}``).

The span metrics are then defined per reading and the question takes its best one:

- recall, precision and IoU are those of the reading with the highest recall (ties: the
  higher precision, then the first reading): recall over the slots of that reading, precision
  against its alternatives, so a slot is filled when any of its alternatives is retrieved;
- precision_Ω is the highest over the readings (the chunking's best case for the question);
- hit rate and MRR count a retrieved chunk as relevant when it overlaps any alternative of
  any reading.

A question without readings (a plain question) has one reading, its own references, so the
metrics are unchanged for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from chunkwise.evaluation.spans import _reference_pairs

__all__ = ["best_reading", "expand_readings", "relevant_targets"]


def _readings_of(row: Any) -> list[tuple[str, list[tuple[int, int]]]]:
    def pairs(refs: Any) -> list[tuple[int, int]]:
        return [(int(s), int(e)) for s, e in _reference_pairs(refs, row["question_id"])]

    readings = row.get("readings") if hasattr(row, "get") else None
    if isinstance(readings, list) and readings:
        return [(str(r["corpus_id"]), pairs(r["references"])) for r in readings]
    return [(str(row["corpus_id"]), pairs(row["references"]))]


def expand_readings(questions: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per reading: ``(frame, owner)`` with ``owner[i]`` the position of row ``i``'s
    question in ``questions``; the frame has ``question_id``, ``corpus_id`` and ``references``
    (``(start, end)`` pairs). Questions without ``readings`` give one row each."""
    rows, owner = [], []
    for i, (_, row) in enumerate(questions.iterrows()):
        for doc, refs in _readings_of(row):
            rows.append({"question_id": row["question_id"], "corpus_id": doc, "references": refs})
            owner.append(i)
    return pd.DataFrame(rows, columns=["question_id", "corpus_id", "references"]), np.asarray(owner, dtype=np.intp)


def best_reading(scores: pd.DataFrame, owner: np.ndarray, n_questions: int) -> np.ndarray:
    """Row of ``scores`` (one per reading) that each question keeps: highest recall, then
    highest precision, then the first."""
    recall = scores["recall"].to_numpy(dtype=float)
    precision = np.nan_to_num(scores["precision"].to_numpy(dtype=float), nan=-1.0)
    order = np.lexsort((np.arange(len(owner)), -precision, -recall, owner))  # by owner, best first
    first = np.full(n_questions, -1, dtype=np.intp)
    for j in order:
        if first[owner[j]] < 0:
            first[owner[j]] = j
    return first


def relevant_targets(questions: pd.DataFrame) -> list[list[tuple[str, int, int]]]:
    """Per question, every ``(document, start, end)`` of every reading (for hit rate and MRR)."""
    out = []
    for _, row in questions.iterrows():
        out.append([(doc, s, e) for doc, refs in _readings_of(row) for s, e in refs])
    return out
