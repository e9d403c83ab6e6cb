"""The CRUD-RAG harness: every baseline answered and scored, one table per QA task.

Glue between :mod:`chunkwise.rag` (retrieval + generation, checkpointed) and
:mod:`chunkwise.evaluation.generation` (BLEU, ROUGE-L, BERTScore, RAGQuestEval). A cell that
could not be computed is NaN in the table and its reason is kept in the ``missing`` column of the
per-item scores; nothing is turned into a silent 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from chunkwise.evaluation.generation import QuestEval, score_generation

#: Default metrics of the harness (BERTScore needs a Chinese BERT, not available offline).
DEFAULT_METRICS: tuple[str, ...] = ("bleu_crud", "bleu_standard", "rouge_l", "quest_eval")


def score_answers(
    answers: pd.DataFrame,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    llm: Any = None,
    quest_gt: dict | None = None,
    embedder: Any = None,
    bert_score_kwargs: dict | None = None,
) -> pd.DataFrame:
    """Score every row of :func:`chunkwise.rag.run_baselines`' output against its gold answer.

    Parameters
    ----------
    answers : DataFrame
        Columns ``task``, ``ID``, ``method``, ``answer``, ``parse_ok``, ``gold_answer``,
        ``model_identity``.
    metrics : sequence of str
        Names from :data:`chunkwise.evaluation.generation.METRICS`.
    llm : LLMClient, optional
        Needed for ``quest_eval`` (answers the questions from the generated text).
    quest_gt : dict, optional
        The benchmark's RAGQuestEval ground-truth cache for the task(s) (ID -> entry).

    Returns
    -------
    DataFrame
        ``answers``' identifying columns plus one column per metric and ``missing`` (reasons).
        A generation that failed to parse is scored as missing, with its parse status as reason.

    Raises
    ------
    ValueError
        If ``quest_eval`` is asked for without an ``llm``.
    """
    if "quest_eval" in metrics and llm is None:
        raise ValueError("quest_eval needs an LLM client (it answers questions from the generated text).")
    qe = QuestEval(llm, gt_cache=quest_gt) if "quest_eval" in metrics else None
    candidates = [a if ok else None for a, ok in zip(answers["answer"], answers["parse_ok"])]
    scores = score_generation(
        candidates,
        list(answers["gold_answer"]),
        ids=list(answers["ID"]),
        metrics=list(metrics),
        quest_eval=qe,
        embedder=embedder,
        bert_score_kwargs=bert_score_kwargs,
    )
    keep = answers[["task", "ID", "method", "model_identity", "parse_status"]].reset_index(drop=True)
    out = pd.concat([keep, scores.drop(columns=["id"], errors="ignore").reset_index(drop=True)], axis=1)
    out.attrs["labels"] = dict(scores.attrs.get("labels", {}))
    return out


def task_tables(scores: pd.DataFrame, metric_columns: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """One table per task: mean of each metric per method (percent), items scored, items missing.

    Returns
    -------
    dict of task -> DataFrame
        Index: method. Columns: the metrics (mean over the items that have a value, x 100),
        ``n_items``, ``n_missing`` (items with any missing metric), ``model``.
    """
    if metric_columns is None:
        fixed = {"task", "ID", "method", "model_identity", "parse_status", "missing"}
        metric_columns = [c for c in scores.columns if c not in fixed]
    out = {}
    for task, df in scores.groupby("task", sort=False):
        g = df.groupby("method", sort=False)
        table = g[list(metric_columns)].mean() * 100
        table["n_items"] = g.size()
        table["n_missing"] = g["missing"].apply(lambda s: int(sum(bool(x) for x in s)))
        table["model"] = g["model_identity"].first()
        out[str(task)] = table.round(2)
    return out
