"""Retrieval at a matched budget of retrieved tokens.

At a fixed ``k`` a chunker with larger chunks hands the reader more text, and recall rewards
that by size alone: ten 400-token chunks cover more of any reference than ten 100-token
chunks. This view compares chunkers at the same *reading budget* instead: for each
(chunker, embedder, retriever) of a grid, every question reads its ranked chunks best first
until ``budget_tokens`` cl100k_base tokens are spent; the chunk that crosses the budget is cut
to its first tokens that still fit. The retrieved spans are then scored by the span metrics
of the grid (recall, precision, IoU; :func:`~chunkwise.evaluation.cells.span_scores_per_question`).

It reads the rankings a grid already computed (:attr:`GridResult.rankings
<chunkwise.evaluation.grid.GridResult.rankings>`), so it costs no embedding. A ranking holds
only as many chunks as the grid searched (its largest ``k``, or ``hybrid_depth`` when a fused
retriever ran): a question whose ranking ends before the budget while the index holds more
chunks is NaN with the reason in ``note``, never scored as if it had read less (a retriever that
returns fewer chunks than the depth, as BM25 does when few chunks share a term, has returned
all it would: the question reads what there is). Small-to-big
(Hierarchical) cells are left out: what they return is a merge, not a ranking to cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.evaluation.anyof import expand_readings
from chunkwise.evaluation.cells import span_scores_per_question
from chunkwise.evaluation.stats import BootstrapResult, paired_bootstrap
from chunkwise.tokens import get_encoding

__all__ = ["BUDGET_METRICS", "BudgetView", "token_budget_view"]

#: The metrics of the budget view (fractions).
BUDGET_METRICS: tuple[str, ...] = ("recall", "precision", "iou")


@dataclass
class BudgetView:
    """What :func:`token_budget_view` measured.

    Attributes
    ----------
    budget_tokens : int
        The reading budget per question, cl100k_base tokens.
    table : DataFrame
        One row per (chunker, embedder, retriever): ``cell`` (``"<chunker> | <retriever> |
        budget=<n>"``, with the embedder in a grid of several), ``chunker``, ``embedder``,
        ``retriever``, ``budget_tokens``, ``n_questions`` (scored), ``recall``,
        ``precision``, ``iou`` (means, fractions), ``chunks_read`` (mean chunks per question,
        a cut one counting as one), ``n_short`` (questions whose ranking ended before the
        budget) and ``note``.
    per_question : DataFrame
        One row per (cell, question): ``cell``, ``question_id``, ``recall``, ``precision``,
        ``iou``, ``chunks_read``, ``tokens_read``.
    """

    budget_tokens: int
    table: pd.DataFrame
    per_question: pd.DataFrame

    def scores(self, metric: str = "recall") -> pd.DataFrame:
        """Per-question ``metric``: rows = questions, columns = cells (table order).

        Raises
        ------
        ValueError
            For a metric that is not one of :data:`BUDGET_METRICS`.
        """
        if metric not in BUDGET_METRICS:
            raise ValueError(f"the budget view scores {', '.join(BUDGET_METRICS)}; got {metric!r}.")
        wide = self.per_question.pivot(index="question_id", columns="cell", values=metric)
        order = list(dict.fromkeys(self.per_question["question_id"]))
        return wide.loc[order, list(self.table["cell"])]

    def bootstrap(self, metric: str = "recall", baseline: str | None = None, **kwargs: Any) -> BootstrapResult:
        """Paired bootstrap of ``metric`` over the questions every cell scored
        (:func:`~chunkwise.evaluation.stats.paired_bootstrap`; ``kwargs`` passed on).

        Raises
        ------
        ValueError
            For an unknown metric or baseline, or fewer than 2 questions.
        """
        if baseline is not None and baseline not in set(self.table["cell"]):
            raise ValueError(f"baseline {baseline!r} is not a cell of the budget view.")
        return paired_bootstrap(self.scores(metric), baseline, metric=f"{metric} at {self.budget_tokens} tokens",
                                **kwargs)


def token_budget_view(result: Any, budget_tokens: int) -> BudgetView:
    """Score every (chunker, embedder, retriever) of a grid at a matched reading budget.

    Parameters
    ----------
    result : GridResult
        From :func:`~chunkwise.evaluation.grid.run_grid` (its ``rankings``, ``chunk_objects``,
        ``chunks`` and ``questions`` are read).
    budget_tokens : int
        Tokens (cl100k_base) each question reads, >= 1.

    Returns
    -------
    BudgetView

    Raises
    ------
    ValueError
        If ``budget_tokens`` is not an int >= 1, or the grid has no cell a budget applies to.
    """
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, (int, np.integer)) or budget_tokens < 1:
        raise ValueError(f"budget_tokens must be an int >= 1 (cl100k_base tokens per question), got {budget_tokens!r}.")
    budget = int(budget_tokens)
    enc = get_encoding("cl100k_base")
    q = result.questions
    has_readings = "readings" in q.columns and any(isinstance(r, list) and r for r in q["readings"])
    readings = expand_readings(q) if has_readings else None
    multi = len(result.config.embedders) > 1
    specs = {s.label: s for s in result.config.chunkers}
    depth = result.config.search_depth
    combos = result.table.drop_duplicates(["chunker", "embedder", "retriever"])
    rows, per_q = [], []
    tokens_of: dict[str, list[list[int]]] = {}  # per chunking, once: its retrievers share the chunks
    for row in combos.itertuples(index=False):
        label, emb, retriever = str(row.chunker), str(row.embedder), str(row.retriever)
        name = f"{label} | {emb} | {retriever} | budget={budget}" if multi else f"{label} | {retriever} | budget={budget}"
        if specs[label].kind.index == "parents":
            continue  # small-to-big returns merged parents: no ranking to cut (module docstring)
        _, ranking = result.ranking_of(str(row.cell))
        chunk_list = [c for cs in result.chunk_objects[label].values() for c in cs]
        spans = [(d, int(s), int(e)) for d, ss in result.chunks[label].items() for s, e in ss]
        if label not in tokens_of:
            tokens_of[label] = enc.encode_ordinary_batch([c.text for c in chunk_list])
        token_ids = tokens_of[label]
        retrieved, n_read, t_read, short = [], [], [], []
        for ranked in ranking:
            got: list[tuple[str, int, int]] = []
            used = 0
            for j in ranked:
                doc, s, e = spans[j]
                n_tok = len(token_ids[j])
                if used + n_tok <= budget:
                    got.append((doc, s, e))
                    used += n_tok
                    if used == budget:
                        break
                    continue
                keep = budget - used  # the chunk that crosses the budget: its first `keep` tokens
                _, offsets = enc.decode_with_offsets(token_ids[j])
                chars = offsets[keep] if keep < len(offsets) else e - s
                if chars > 0:
                    got.append((doc, s, s + min(chars, e - s)))
                used = budget
                break
            retrieved.append(got)
            n_read.append(len(got))
            t_read.append(used)
            # cut by the search depth (not a retriever that returned all it matched) with more chunks left
            short.append(used < budget and len(ranked) >= depth and len(ranked) < len(chunk_list))
        scored = span_scores_per_question(q, retrieved, result.config.mode, readings)
        short_arr = np.asarray(short, dtype=bool)
        frame = pd.DataFrame({
            "cell": name,
            "question_id": q["question_id"].to_numpy(),
            **{m: np.where(short_arr, np.nan, scored[m].to_numpy(dtype=float)) for m in BUDGET_METRICS},
            "chunks_read": np.asarray(n_read, dtype=float),
            "tokens_read": np.asarray(t_read, dtype=float),
        })
        per_q.append(frame)
        n_short = int(short_arr.sum())
        note = ""
        if n_short:
            note = (f"{n_short} question(s) ran out of ranked chunks before {budget} tokens (the grid searched "
                    f"{depth} deep): rerun with a larger top_k, or with hybrid retrieval "
                    "(it searches hybrid_depth deep)")
        rows.append({
            "cell": name, "chunker": label, "embedder": emb, "retriever": retriever, "budget_tokens": budget,
            "n_questions": int((~short_arr).sum()),
            **{m: float(np.nanmean(frame[m])) if (~short_arr).any() else np.nan for m in BUDGET_METRICS},
            "chunks_read": float(np.mean(n_read)) if n_read else np.nan, "n_short": n_short, "note": note,
        })
    if not rows:
        raise ValueError("no cell of the grid can be read at a token budget (small-to-big cells return merged "
                         "parents); add a chunker that returns a ranking.")
    return BudgetView(budget, pd.DataFrame(rows), pd.concat(per_q, ignore_index=True))
