"""The CRUD-RAG harness: every baseline answered and scored, one table per QA task.

Glue between :mod:`chunkwise.crud.rag` (retrieval + answers, checkpointed) and
:mod:`chunkwise.crud.answer_metrics` (BLEU, ROUGE-L, BERTScore, RAGQuestEval). A cell that
could not be computed is NaN in the table and its reason is kept in the ``missing`` column of the
per-item scores; nothing is turned into a silent 0.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from chunkwise.evaluation.stats import describe_interval, interval_side
from chunkwise.evaluation.intervals import interval_text, rank_correlation_interval
from chunkwise.crud.answer_metrics import QuestEval, score_answer_texts

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

#: Default pool size of the CRUD-RAG chapter: each question's top-2 BM25 documents over the whole
#: available corpus (103 documents for the 50 + 3 + 3 default items, 116 with the 13 gold articles
#: added; 27 for the 10 gold items of ``qa_source="subset"`` with their gold news) -- small enough
#: for LLM-based indexing (PG-RAG, tree and graph baselines) on a 2-core CPU.
CRUD_POOL_TOP_N = 2


def chunkwise_cache_dir() -> Path:
    """The machine's chunkwise cache folder: ``$CHUNKWISE_CACHE_DIR`` when set and non-empty,
    else ``~/.cache/chunkwise`` (the rule of the embedding and LLM caches)."""
    from chunkwise._env import cache_root

    return cache_root()


def default_checkpoint() -> Path:
    """Default answers checkpoint of the chapter: ``<chunkwise_cache_dir()>/crud_answers.jsonl``.

    Its rows are keyed by the generation request (see :func:`chunkwise.crud.rag.run_baselines`), so
    one file serves every parameter setting without mixing their answers.
    """
    return chunkwise_cache_dir() / "crud_answers.jsonl"


def load_items(
    tasks: Sequence[str], n_items: int | None = None, mirror: Any = None, source: str = "auto"
) -> list[dict[str, Any]]:
    """The first ``n_items`` QA items of each task (all when ``None``), each with its ``task``.

    ``source`` is :func:`chunkwise.crud.data.load_crud_qa`'s: ``"auto"`` (upstream's split,
    else the offline mirror: 50 / 3 / 3 items), ``"upstream"``, ``"mirror"`` or ``"subset"``
    (only the 4 / 3 / 3 items that carry their gold news).

    Raises
    ------
    ValueError
        If ``n_items`` is not a positive int or None, or ``source`` is unknown.
    """
    from chunkwise.crud.data import load_crud_qa

    if n_items is not None and (isinstance(n_items, bool) or not isinstance(n_items, int) or n_items < 1):
        raise ValueError(f"n_items must be a positive int or None, got {n_items!r}")
    out: list[dict[str, Any]] = []
    for task in tasks:
        rows = list(load_crud_qa(task, source, mirror=mirror))
        out += [dict(r, task=task) for r in rows[:n_items]]
    return out


def build_pool(
    items: Sequence[Mapping[str, Any]],
    top_n: int = CRUD_POOL_TOP_N,
    *,
    pool_file: str | os.PathLike[str] | None = None,
    mirror: Any = None,
    cache_dir: Any = None,
    show_progress: bool = False,
    add_gold: bool = True,
) -> Any:
    """The retrieval pool of the chapter: reuse ``pool_file`` when it matches, else search and save.

    ``add_gold`` is :func:`chunkwise.crud.data.pooled_corpus`'s: whether the items' gold news
    join their BM25 documents; a pool file made with the other setting is not reused.

    A pool file (:func:`chunkwise.crud.data.save_pool`) is reused when its ``top_n`` is at
    least ``top_n`` and it holds every one of these items; for a subset of its items (fewer
    tasks, a smaller ``n_items``) or a smaller ``top_n``, only the documents those items pooled
    are kept (:func:`chunkwise.crud.data.load_pool`). Otherwise the whole available corpus is
    BM25-searched (minutes, ~1.2 GB; the index is kept under ``cache_dir``, default
    ``$CHUNKWISE_CACHE_DIR/bm25`` or ``~/.cache/chunkwise/bm25``) and the file is (re)written.

    Returns
    -------
    chunkwise.crud.data.PooledCorpus

    Raises
    ------
    ValueError
        If ``top_n`` is not a positive int, or the pool file does not match the data
        (:func:`chunkwise.crud.data.load_pool`).
    """
    from chunkwise.crud.data import _item_key, load_crud_corpus, load_pool, pooled_corpus, save_pool

    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise ValueError(f"top_n (the chapter's pool_top_n) must be a positive int, got {top_n!r}")
    if pool_file is not None and Path(pool_file).is_file():
        import json

        doc = json.loads(Path(pool_file).read_text(encoding="utf-8"))
        wanted = {_item_key(i) for i in items}
        gold, retrieved = doc.get("gold", {}), doc.get("retrieved", {})
        same_gold = bool(doc.get("add_gold", True)) == bool(add_gold)
        if same_gold and int(doc.get("top_n", -1)) >= top_n and wanted <= set(gold):
            keep = {d for k in wanted for d in gold[k] + retrieved.get(k, [])[:top_n]}
            needs_corpus = any(o != "gold" for d, o in zip(doc.get("ids", []), doc.get("origin", [])) if d in keep)
            corpus = load_crud_corpus(mirror, warn=False) if needs_corpus else None
            return load_pool(pool_file, items, corpus, top_n)  # only the documents these items pooled
    corpus = load_crud_corpus(mirror)
    cache = Path(cache_dir) if cache_dir is not None else chunkwise_cache_dir() / "bm25"
    pool = pooled_corpus(items, corpus, top_n, cache_dir=cache, show_progress=show_progress, add_gold=add_gold)
    if pool_file is not None:
        save_pool(pool, pool_file)
    return pool


def run_harness(
    items: Sequence[Mapping[str, Any]],
    pool: Any,
    llm: ChatModel,
    methods: Sequence[str] | Mapping[str, Any] = ("none", "bm25", "dense", "hybrid", "hybrid_rerank"),
    *,
    top_k: int = 8,
    metrics: Sequence[str] = ("bleu_crud", "bleu_standard", "rouge_l", "quest_eval"),
    checkpoint: str | os.PathLike[str] | None = None,
    dense: Any = "auto",
    extra_retrievers: Mapping[str, Any] | None = None,
    score_embedder: Any = None,
    mirror: Any = None,
    show_progress: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Answer and score every item with every baseline over a pooled corpus.

    The pool's documents are chunked as CRUD-RAG does (128 tokens, no overlap), the retrievers
    built (:func:`chunkwise.crud.rag.retrievers.build_retrievers`), every item answered
    (:func:`chunkwise.crud.rag.run_baselines`, checkpointed) and scored (:func:`score_answers`, with
    the benchmark's RAGQuestEval ground truth of each task).

    Parameters
    ----------
    items : sequence of mapping
        QA items with ``task`` (:func:`load_items`).
    pool : PooledCorpus
        The retrieval corpus (:func:`build_pool`).
    llm : ChatModel
        Generator, LLM reranker and RAGQuestEval answerer.
    methods : sequence of str or mapping
        Baseline names for :func:`chunkwise.crud.rag.retrievers.build_retrievers`, or retrievers.
    top_k : int, default 8
        Contexts per question (CRUD-RAG's default).
    metrics : sequence of str
        Metric names of :func:`chunkwise.crud.answer_metrics.score_answer_texts`.
    checkpoint : path, optional
        JSONL checkpoint of the answers (see :func:`chunkwise.crud.rag.run_baselines`).
    dense : str or (query, passage) embedders
        The dense retriever's embedders.
    extra_retrievers : mapping, optional
        More methods (name -> retriever), e.g. :func:`build_pg_retrievers`' output; run after
        the baselines.
    score_embedder : object with ``embed``, optional
        Needed for the ``embedding_cosine`` metric.

    Returns
    -------
    (answers, scores) : two DataFrames
        ``run_baselines``' rows, and :func:`score_answers`' rows (one per item and method).
    """
    from chunkwise.crud.data import load_quest_gt
    from chunkwise.crud.rag import chunk_articles, run_baselines
    from chunkwise.crud.rag.retrievers import build_retrievers

    if isinstance(methods, Mapping):
        retrievers = dict(methods)
    else:
        chunks = chunk_articles(pool.texts, pool.ids)
        retrievers = build_retrievers(chunks, list(methods), llm=llm, dense=dense)
    retrievers.update(dict(extra_retrievers or {}))
    answers = run_baselines(items, None, retrievers, llm, top_k=top_k, checkpoint=checkpoint, show_progress=show_progress)
    parts = []
    for task, group in answers.groupby("task", sort=False):  # IDs repeat across tasks: one gt cache per task
        quest_gt = load_quest_gt(str(task), mirror) if "quest_eval" in metrics else None
        parts.append(score_answers(group, metrics, llm=llm, quest_gt=quest_gt, embedder=score_embedder))
    scores = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if parts:
        scores.attrs["labels"] = parts[0].attrs.get("labels", {})
    return answers, scores

#: Default metrics of the harness (BERTScore needs a Chinese BERT, not available offline).
DEFAULT_METRICS: tuple[str, ...] = ("bleu_crud", "bleu_standard", "rouge_l", "quest_eval")


def score_answers(
    answers: pd.DataFrame,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    llm: ChatModel | None = None,
    quest_gt: dict | None = None,
    embedder: Any = None,
    bert_score_kwargs: dict | None = None,
) -> pd.DataFrame:
    """Score every row of :func:`chunkwise.crud.rag.run_baselines`' output against its gold answer.

    Parameters
    ----------
    answers : DataFrame
        Columns ``task``, ``ID``, ``method``, ``answer``, ``parse_ok``, ``gold_answer``,
        ``model_identity``.
    metrics : sequence of str
        Names from :data:`chunkwise.crud.answer_metrics.METRICS`.
    llm : ChatModel, optional
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
    scores = score_answer_texts(
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


def _paired_points(
    a: pd.Series, b: pd.Series, *, n_resamples: int, seed: int, confidence: float, min_shared: int
) -> tuple[float, float, float, float, float, int]:
    """Two aligned score columns (fractions) on the questions both have: their means, the mean
    difference ``a - b`` and its bootstrap interval, all in points, and the number of questions.
    The interval is NaN below ``min_shared`` questions (see :func:`paired_with`)."""
    from chunkwise.evaluation.stats import paired_difference_ci

    both = pd.concat([a, b], axis=1).astype(float).dropna() * 100
    x, y = both.iloc[:, 0], both.iloc[:, 1]
    low = high = float("nan")
    if len(both) >= max(2, int(min_shared)):
        _, low, high = paired_difference_ci(x.to_numpy(), y.to_numpy(), n_resamples=n_resamples, seed=seed,
                                            confidence=confidence)
    return x.mean(), y.mean(), x.mean() - y.mean(), low, high, len(both)


def paired_with(
    scores: pd.DataFrame,
    reference: str = "dense",
    metric: str = "quest_avg_f1",
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    min_shared: int = 10,
) -> pd.DataFrame:
    """Each method against ``reference`` on the questions both have a value for, with a CI.

    :func:`task_tables` averages every method over the items where it has a value, so two rows
    with different ``n_missing`` are means over different questions. This table compares like
    with like: per task and method, the mean of ``metric`` for the method and for the
    reference over their shared items, the paired difference, and its percentile bootstrap
    interval over those items (:func:`chunkwise.evaluation.stats.paired_difference_ci`, the
    own-data engine's statistics).

    Parameters
    ----------
    scores : DataFrame
        One row per (task, ID, method), as returned by :func:`score_answers`.
    reference : str, default "dense"
        The method compared against (must be in ``scores``).
    metric : str, default "quest_avg_f1"
        A metric column of ``scores`` (a fraction in [0, 1]).
    n_resamples, seed, confidence
        Bootstrap settings (10,000 resamples, ``numpy.random.default_rng(0)``, 95%).
    min_shared : int, default 10
        Fewest shared items for an interval. A percentile bootstrap over a handful of items has
        few distinct resamples and intervals far narrower than the truth (three items give ten
        distinct resamples), so below this the interval is NaN rather than misleading.

    Returns
    -------
    DataFrame
        Index (task, method), every method but the reference; columns ``method``, ``reference``
        (means over the shared items, percent), ``difference`` (method - reference, points),
        ``ci_low`` / ``ci_high`` (the interval of the difference, points; NaN with fewer than
        ``min_shared`` shared items), ``n_shared`` (items with a value for both). Means are NaN where
        nothing is shared.

    Raises
    ------
    ValueError
        If ``metric`` is not a column of ``scores`` or ``reference`` is not one of its methods.
    """
    if metric not in scores.columns:
        raise ValueError(f"metric {metric!r} is not a column of scores; columns: {list(scores.columns)}")
    if reference not in set(scores["method"]):
        raise ValueError(f"reference method {reference!r} is not in scores; methods: {sorted(set(scores['method']))}")
    rows: dict[tuple[str, str], dict[str, float]] = {}
    for task, df in scores.groupby("task", sort=False):
        wide = df.pivot_table(index="ID", columns="method", values=metric, aggfunc="first", dropna=False)
        if reference not in wide.columns:
            continue
        for method in df["method"].drop_duplicates():
            if method == reference:
                continue
            ours, ref, diff, low, high, n = _paired_points(
                wide[method], wide[reference], n_resamples=n_resamples, seed=seed, confidence=confidence,
                min_shared=min_shared)
            rows[(str(task), str(method))] = {
                "method": ours, "reference": ref, "difference": diff, "ci_low": low, "ci_high": high, "n_shared": n,
            }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=["task", "method"])
    out["n_shared"] = out["n_shared"].astype(int)
    return out.round(2)


def pool_variant_effect(
    default: pd.DataFrame,
    variant: pd.DataFrame,
    metric: str = "quest_avg_f1",
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    min_shared: int = 10,
) -> pd.DataFrame:
    """Per method, a variant run minus the default run on the questions both scored (all tasks
    pooled), with a paired bootstrap interval -- e.g. the pool with the gold articles added
    against the pool without them, on the items that have a gold article.

    Parameters
    ----------
    default, variant : DataFrame
        :func:`score_answers`' rows of the two runs (``task``, ``ID``, ``method``, ``metric``).
    metric : str, default "quest_avg_f1"
    n_resamples, seed, confidence, min_shared
        As in :func:`paired_with` (no interval below ``min_shared`` shared questions).

    Returns
    -------
    DataFrame
        Index: method (the variant's order); columns ``default``, ``variant`` (means over the
        shared questions, percent), ``difference`` (variant - default, points), ``ci_low``,
        ``ci_high``, ``n_shared``.

    Raises
    ------
    ValueError
        If ``metric`` is missing from either table.
    """

    for name, df in (("default", default), ("variant", variant)):
        if metric not in df.columns:
            raise ValueError(f"metric {metric!r} is not a column of the {name} scores")
    key = ["task", "ID", "method"]
    both = variant[key + [metric]].merge(default[key + [metric]], on=key, suffixes=("_variant", "_default"))
    rows = {}
    for method in variant["method"].drop_duplicates():
        sub = both[both["method"] == method]
        v, d, diff, low, high, n = _paired_points(
            sub[f"{metric}_variant"], sub[f"{metric}_default"], n_resamples=n_resamples, seed=seed,
            confidence=confidence, min_shared=min_shared)
        rows[str(method)] = {"default": d, "variant": v, "difference": diff, "ci_low": low, "ci_high": high,
                             "n_shared": n}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "method"
    out["n_shared"] = out["n_shared"].astype(int)
    return out.round(2)


def describe_difference(paired: pd.DataFrame, task: str, method: str, reference: str | None = None) -> str:
    """One phrase for prose: a :func:`paired_with` row as "difference [CI] over n questions" and
    what it supports.

    Parameters
    ----------
    paired : DataFrame
        :func:`paired_with`'s output, optionally concatenated over references with a first
        index level ``reference`` (as chapter 3 does).
    task, method : str
    reference : str, optional
        The reference method, when ``paired`` has a ``reference`` level.

    Returns
    -------
    str
        E.g. ``"-3.1 points [-8.0, +1.9] over 46 shared questions: within the noise"``,
        ``"+9.0 points [+2.2, +15.1] over 46 shared questions: ahead beyond the noise"``,
        ``"-20.0 points over 4 shared questions, too few for an interval"``, or
        ``"not run"`` when the row is absent.
    """
    key = (reference, task, method) if reference is not None else (task, method)
    if key not in paired.index:
        return "not run"
    row = paired.loc[key]
    n = int(row["n_shared"])
    if n == 0 or pd.isna(row["difference"]):
        return "no question with a score for both"
    head = f"{row['difference']:+.1f} points"
    qs = f"{n} shared question{'s' if n != 1 else ''}"
    if pd.isna(row["ci_low"]) or pd.isna(row["ci_high"]):
        return f"{head} over {qs}, too few for an interval"
    ci = f"[{row['ci_low']:+.1f}, {row['ci_high']:+.1f}]"
    return f"{head} {ci} over {qs}: {_interval_word(row)} the noise"


def _interval_word(row: Mapping[str, Any]) -> str:
    """"ahead beyond", "behind beyond", "within", or "" (no interval) for a paired row."""
    low, high = row["ci_low"], row["ci_high"]
    if pd.isna(low) or pd.isna(high):
        return ""
    return interval_side(low, high, ("ahead beyond", "behind beyond", "within"))


def ordering_panel(
    scores: pd.DataFrame,
    entry: Any,
    task: str = "questanswer_1doc",
    method: str = "pg_rag",
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """The analysis plan's ``pgrag-order`` verdict under its primary specification and each
    declared alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification names ``reference`` (``"the strongest baseline ..."``: the baseline with
    the highest mean ``metric`` on the task, as :func:`ordering_result` picks it; or a method name
    such as ``"dense"``), ``metric`` (a score column) and ``interval`` / ``confidence``. Its value
    per question is ``method`` minus the reference in points, over the questions both answered
    (the same pairs as :func:`paired_with`, so the primary's percentile interval is
    :func:`ordering_result`'s).

    Returns
    -------
    (Robustness, DataFrame)
        The class, and one row per specification: ``specification``, ``reference``, ``metric``,
        ``estimate``, ``low``, ``high`` (points), ``n``, ``mde``, ``verdict``.

    Raises
    ------
    ValueError
        When the task has no scores for ``method``, or a specification names a metric or a
        reference the scores lack.
    """
    from chunkwise.evaluation.robustness import classify, contrast
    from chunkwise.plan import specifications

    mine = scores[scores["task"] == task]
    if mine.empty or method not in set(mine["method"]):
        raise ValueError(f"no scores for {method!r} on {task!r}; run the chapter's answers for it first.")
    results, rows = [], []
    for name, spec in specifications(entry):
        metric = spec["metric"]
        if metric not in mine.columns:
            raise ValueError(f"{name}: metric {metric!r} is not a column of the scores")
        reference = str(spec["reference"])
        if reference.startswith("the strongest baseline"):
            pool = [m for m in dict.fromkeys(mine["method"]) if m not in ("pg", "pg_kps", "pg_rag", "none")]
            reference = str(mine[mine["method"].isin(pool)].groupby("method")[metric].mean().dropna().idxmax())
        wide = mine.pivot_table(index="ID", columns="method", values=metric, aggfunc="first", dropna=False)
        if reference not in wide.columns:
            raise ValueError(f"{name}: reference {reference!r} has no scores on {task!r}")
        both = pd.concat([wide[method], wide[reference]], axis=1).astype(float).dropna() * 100
        r = contrast(name, both.iloc[:, 0].to_numpy(), reference=both.iloc[:, 1].to_numpy(), delta=entry.delta,
                     method=spec["interval"], confidence=spec["confidence"], words=entry.words,
                     n_resamples=n_resamples, seed=seed)
        results.append(r)
        rows.append({"specification": name, "reference": PAPER_METHOD.get(reference, reference), "metric": metric,
                     "estimate": r.estimate, "low": r.low, "high": r.high, "n": r.n, "mde": r.mde,
                     "verdict": r.verdict})
    return classify(results[0], results[1:], delta=entry.delta, unit=entry.unit), pd.DataFrame(rows)


def ordering_result(
    scores: pd.DataFrame,
    task: str = "questanswer_1doc",
    method: str = "pg_rag",
    metric: str = "quest_avg_f1",
    baselines: Sequence[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """PG-RAG against the best baseline of one task, for chapter 3's findings results.

    The paper's Table 1 puts PG-RAG above every baseline (Liang et al., 2024). The absolute
    scores do not carry over to another generator and pool, but the direction of the gap does:
    the best baseline here is the one with the highest mean ``metric`` on the task, and the gap
    is PG-RAG minus it on the questions both answered (:func:`paired_with`).

    Parameters
    ----------
    scores : DataFrame
        :func:`score_answers` rows (task, ID, method, metrics).
    task, method, metric : str
    baselines : sequence of str, optional
        Default: every method of ``scores`` on the task except the PG variants (``pg``,
        ``pg_kps``, ``pg_rag``) and ``none`` (no retrieval).
    n_resamples, seed : int

    Returns
    -------
    dict
        With the task's prefix (``doc1`` ...): ``pg_rag_vs_best_<p>`` = ``"PG-RAG ahead"`` /
        ``"baseline ahead"`` when the 95% paired interval is above / below 0, ``"cannot tell"``
        when it contains 0 or has too few shared questions; ``pg_rag_vs_best_<p>_ci``
        (``"+d [low, high]"`` points), ``best_baseline_<p>`` (the paper's label) and
        ``pg_rag_vs_best_<p>_n``, the questions both methods answered (the ones the interval is
        over; fewer than the task's items where an answer failed or was not scored).

    Raises
    ------
    ValueError
        When the task or method has no scores, or no baseline has.
    """
    prefix = PAPER_TASK.get(task, task)
    mine = scores[scores["task"] == task]
    if mine.empty or method not in set(mine["method"]):
        raise ValueError(f"no scores for {method!r} on {task!r}; run the chapter's answers for it first.")
    pool = list(baselines) if baselines is not None else [
        m for m in dict.fromkeys(mine["method"]) if m not in ("pg", "pg_kps", "pg_rag", "none")]
    means = mine[mine["method"].isin(pool)].groupby("method")[metric].mean().dropna()
    if means.empty:
        raise ValueError(f"no baseline has {metric!r} scores on {task!r} (baselines: {pool}).")
    best = str(means.idxmax())
    row = paired_with(mine, reference=best, metric=metric, n_resamples=n_resamples, seed=seed).loc[(task, method)]
    word = _interval_word(row)
    verdict = {"ahead beyond": "PG-RAG ahead", "behind beyond": "baseline ahead"}.get(word, "cannot tell")
    ci = (describe_interval(row["difference"], row["ci_low"], row["ci_high"]) if word
          else f"{row['difference']:+.1f} (no interval: {int(row['n_shared'])} shared questions)")
    return {f"pg_rag_vs_best_{prefix}": verdict, f"pg_rag_vs_best_{prefix}_ci": ci,
            f"best_baseline_{prefix}": PAPER_METHOD.get(best, best),
            f"pg_rag_vs_best_{prefix}_n": int(row["n_shared"])}


def headline_verdict(
    paired: pd.DataFrame,
    rank: Mapping[str, Any] | None,
    task: str = "questanswer_1doc",
    method: str = "pg_rag",
    references: Sequence[str] = ("dense", "bm25"),
) -> str:
    """What a run says about PG-RAG's headline claim (ahead of chunk retrieval; Liang et al.,
    2024, Table 1), in one or two sentences that claim only what the intervals support.

    Parameters
    ----------
    paired : DataFrame
        :func:`paired_with` outputs concatenated over references (first index level
        ``reference``), as chapter 3 builds them.
    rank : mapping or None
        :func:`rank_correlation_with_paper`'s result for ``task`` (``spearman``, ``ci_low``,
        ``ci_high``, ``n_questions``), or ``None`` when it was not computed.
    task, method : str
        The task and the method whose claim is read (default: PG-RAG on one document).
    references : sequence of str
        The chunk-retrieval methods it is compared with.

    Returns
    -------
    str
        "supports" when ``method`` is ahead of every reference beyond the noise (the 95%
        interval of the paired difference above 0), "contradicts" when it is behind any of them
        beyond the noise, "partly supports" when ahead of some and within the noise of the
        others, and "cannot confirm or refute" otherwise (intervals that contain 0, or too few
        shared questions for one); then whether the paper's ordering of methods comes back
        (Spearman's interval above 0, below 0, or containing 0).
    """
    verdicts: dict[str, str] = {}
    for ref in references:
        key = (ref, task, method)
        verdicts[ref] = "not run" if key not in paired.index else (_interval_word(paired.loc[key]) or "no interval")
    run = {r: v for r, v in verdicts.items() if v != "not run"}
    ahead = [r for r, v in run.items() if v == "ahead beyond"]
    behind = [r for r, v in run.items() if v == "behind beyond"]
    within = [r for r, v in run.items() if v == "within"]
    names = {"dense": "dense retrieval", "bm25": "BM25"}

    def join(refs: Sequence[str]) -> str:
        return " and ".join(names.get(r, r) for r in refs)

    if not run:
        first = "This run has no paired comparison for the paper's headline claim."
    elif behind:
        first = (f"This run contradicts the paper's headline in its setting: PG-RAG is behind {join(behind)} "
                 f"beyond the noise" + (f" (ahead of {join(ahead)} beyond it)" if ahead else "") + ".")
    elif len(ahead) == len(run):
        first = f"This run supports the paper's headline in its setting: PG-RAG is ahead of {join(ahead)} beyond the noise."
    elif ahead:
        first = (f"This run partly supports the paper's headline: PG-RAG is ahead of {join(ahead)} beyond the noise, "
                 f"but within the noise of {join([r for r in run if r not in ahead])}.")
    elif within and len(within) == len(run):
        first = (f"This run can neither confirm nor refute the paper's headline: PG-RAG's differences from "
                 f"{join(within)} are within the noise.")
    elif within:
        first = (f"This run can neither confirm nor refute the paper's headline: PG-RAG's difference from "
                 f"{join(within)} is within the noise, and too few questions are shared with "
                 f"{join([r for r in run if r not in within])} for an interval.")
    else:
        first = ("This run can neither confirm nor refute the paper's headline: too few questions are shared "
                 "for an interval.")
    if rank is None or pd.isna(rank.get("spearman", float("nan"))):
        return first
    rho = f"Spearman {rank['spearman']:.2f}"
    if pd.isna(rank.get("ci_low", float("nan"))) or pd.isna(rank.get("ci_high", float("nan"))):
        second = f"The ordering of methods ({rho}) rests on too few questions for an interval."
    else:
        rho += f" [{rank['ci_low']:.2f}, {rank['ci_high']:.2f}]"
        if rank["ci_low"] > 0:
            second = f"The paper's ordering of methods comes back in part ({rho}, above 0)."
        elif rank["ci_high"] < 0:
            second = f"The paper's ordering of methods is reversed here ({rho}, below 0)."
        else:
            second = f"Whether the paper's ordering of methods comes back is not settled ({rho} contains 0)."
    return f"{first} {second}"


# ---------------------------------------------------------------- what the chapter shows a reader

#: Task -> the words the chapter uses for it.
TASK_WORDS = {"questanswer_1doc": "one-document", "questanswer_2docs": "two-document",
              "questanswer_3docs": "three-document"}


def format_interval(low: float, high: float, fmt: str = "+.1f") -> str:
    """``"[low, high]"`` with ``fmt`` (signed, one decimal by default), or ``"–"`` when either end
    is NaN or None (too few questions for an interval)."""
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return "–"
    return f"[{low:{fmt}}, {high:{fmt}}]"


def format_stat(key: str, value: Any) -> str:
    """One statistic as a reader should see it, chosen by what its name says it is.

    ``*_share`` as a percent with one decimal (two significant digits below 1%), ``*_threshold`` (a cosine) with three decimals,
    ``*seconds*`` with one decimal, an integral number as an integer with thousands separators
    (``1290.0 -> "1,290"``, never ``"1290.00"``), any other number with two decimals, a missing
    value as ``""``, anything else (a list, a word) as its ``str``.
    """
    if value is None:
        return ""
    if isinstance(value, (bool, str, list, tuple, dict)):
        return str(value)
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(v):
        return ""
    if key.endswith("_share"):
        return f"{v * 100:.2g}%" if 0 < abs(v) < 0.01 else f"{v:.1%}"
    if key.endswith("_threshold"):
        return f"{v:.3f}"
    if "seconds" in key:
        return f"{v:,.1f}"
    if v.is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}"


def readable_stats(columns: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Statistics dictionaries side by side, every value formatted by :func:`format_stat`.

    Parameters
    ----------
    columns : mapping column name -> (statistic -> value)
        E.g. ``{"pseudo-graph": index_stats}`` or one column per tree or graph method. The
        ``folder`` entry (a path) is left out.

    Returns
    -------
    DataFrame of str
        One row per statistic (first-seen order), one column per entry of ``columns``; ``""``
        where a column has no such statistic.
    """
    keys = list(dict.fromkeys(k for stats in columns.values() for k in stats if k != "folder"))
    return pd.DataFrame({name: [format_stat(k, stats.get(k)) for k in keys] for name, stats in columns.items()},
                        index=pd.Index(keys, name="statistic"))


def readable_paired(table: pd.DataFrame) -> pd.DataFrame:
    """A :func:`paired_with` or :func:`pool_variant_effect` table as a reader should see it.

    The means (``method``, ``reference``, ``default``, ``variant``; percent) get one decimal, the
    ``difference`` (points) a sign, ``ci_low`` / ``ci_high`` become one ``95% interval`` column
    in brackets (``"–"`` below the fewest shared questions for one), ``n_shared`` an integer.
    Other columns are kept as they are.
    """
    out = pd.DataFrame(index=table.index)
    for col in table.columns:
        if col in ("ci_low", "ci_high"):
            if col == "ci_low":
                out["95% interval"] = [format_interval(lo, hi) for lo, hi in zip(table["ci_low"], table["ci_high"])]
        elif col == "difference":
            # a difference that rounds to zero has no sign ("0.0", never "-0.0")
            out[col] = [("0.0" if round(float(v), 1) == 0 else f"{v:+.1f}") if pd.notna(v) else "–"
                        for v in table[col]]
        elif col == "n_shared":
            out[col] = table[col].astype(int)
        elif col in ("method", "reference", "default", "variant"):
            out[col] = [f"{v:.1f}" if pd.notna(v) else "–" for v in table[col]]
        else:
            out[col] = table[col]
    return out


def _difference_words(paired: pd.DataFrame, key: tuple[str, ...]) -> str | None:
    """``"+2.3 points (95% interval [-4.4, +9.3], 46 shared questions)"`` for one paired row;
    None when the row is absent or nothing is shared."""
    if key not in paired.index:
        return None
    row = paired.loc[key]
    n = int(row["n_shared"])
    if n == 0 or pd.isna(row["difference"]):
        return None
    qs = f"{n} shared question{'s' if n != 1 else ''}"
    if pd.isna(row["ci_low"]) or pd.isna(row["ci_high"]):
        return f"{row['difference']:+.1f} points ({qs}, too few for an interval)"
    return f"{row['difference']:+.1f} points (95% interval {format_interval(row['ci_low'], row['ci_high'])}, {qs})"


def chapter_answer(
    paired: pd.DataFrame,
    rank: Mapping[str, Any] | None,
    items_per_task: Mapping[str, int],
    n_pool: int,
    generator: str,
    comparison: pd.DataFrame | None = None,
    task: str = "questanswer_1doc",
    method: str = "pg_rag",
    references: Sequence[str] = ("dense", "bm25"),
    min_shared: int = 10,
    robustness: Any = None,
    strongest: str | None = None,
) -> str:
    """Chapter 3's answer box: what the run says of PG-RAG against the strongest baseline, then
    every difference with its interval, built from the run's values.

    Parameters
    ----------
    paired : DataFrame
        :func:`paired_with` outputs concatenated over references (first index level
        ``reference``), as the chapter builds them.
    rank : mapping or None
        :func:`rank_correlation_with_paper` for ``task``.
    items_per_task : mapping task -> int
        Questions per task in the run.
    n_pool : int
        Articles in the retrieval pool.
    generator : str
        The generator's identity (``LLMClient.model_identity``; a ``@sha256:...`` suffix is
        dropped).
    comparison : DataFrame, optional
        :func:`compare_with_paper` for ``task``: adds ours beside the paper's score for
        ``method``.
    task, method, references
        The comparison the chapter's question is about (PG-RAG against chunk retrieval on one
        document, as in the paper's headline).
    min_shared : int, default 10
        Tasks with fewer questions are named as too small for an interval.
    robustness : Robustness, optional
        :func:`ordering_panel`'s class of the plan's ``pgrag-order`` verdict (``method`` minus the
        strongest baseline on ``task``): the lead states its difference, verdict and class.
    strongest : str, optional
        The strongest baseline's label (:func:`ordering_panel`'s first row's ``reference``,
        e.g. ``"Hybrid"``).

    Returns
    -------
    str
        Markdown (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (whether
        to prefer PG-RAG to the strongest baseline, their difference with its interval, the
        verdict and its robustness class, and the scope: one local generator over ``n_pool``
        articles), then the folded details: the strongest-baseline question with the full
        robustness sentence, the differences from each of ``references`` with their 95% paired
        intervals, the verdict of :func:`headline_verdict` (with the rank correlation), and what
        the run cannot show: the tasks with too few questions, and ours against the paper's
        score. Without ``robustness`` the lead says that the run has no comparison with the
        strongest baseline and counts how the other references came out.
    """
    from chunkwise.answerbox import answer_box, capped, verdict_with_class

    model = generator.split("@", 1)[0]
    n_task = int(items_per_task.get(task, 0))
    setting = (f"On the {n_task} {TASK_WORDS.get(task, task)} CRUD-RAG questions, answered by {model} from a pool "
               f"of {n_pool} news articles")
    names = {"dense": "dense retrieval's", "bm25": "BM25's"}
    parts = []
    for ref in references:
        words = _difference_words(paired, (ref, task, method))
        if words is not None:
            parts.append(f"from {names.get(ref, ref + chr(39) + 's')} by {words}")
    label = PAPER_METHOD.get(method, method)
    short = capped(label, 2, "the method")
    named = capped(f"{strongest}, the strongest baseline", 6, "the strongest baseline") if strongest else \
        "the strongest baseline"
    scope = f"A local generator over {n_pool} articles tests the claim's direction, not its size."
    asked = f"{TASK_WORDS[task]} questions" if task in TASK_WORDS else "questions"
    question = ""
    if robustness is not None:
        p = robustness.primary
        ci = describe_interval(p.estimate, p.low, p.high)
        action = {"above": f"**{short} is worth trying over {named}**",
                  "below": f"**Prefer {named}{',' if ',' in named else ''} to {short}**"}.get(
            p.generic, f"**No reason here to prefer {short} to {named}**")
        lead = (f"{action} ({short} minus it: {ci} RAGQuestEval F1 points, {p.n} {asked}): "
                f"{verdict_with_class(p.verdict, robustness)}. {scope}")
        question = (f"**Does {label} beat the strongest baseline on {TASK_WORDS.get(task, task)} questions?** "
                    f"{strongest or 'The strongest baseline'} is the strongest here; {label} minus it: {ci} points, "
                    f"**{p.verdict}** ({robustness.describe()}).")
    elif parts:
        words = [_interval_word(paired.loc[(ref, task, method)]) for ref in references
                 if (ref, task, method) in paired.index]
        lead = (f"**This run has no comparison of {short} with the strongest baseline**; of {len(words)} other "
                f"baselines it is ahead of {words.count('ahead beyond')} and behind {words.count('behind beyond')} "
                f"beyond the noise, within it for {words.count('within')}. {scope}")
    else:
        lead = f"**This build has no paired comparison for {short}, so the chapter cannot answer its question.**"
    if not parts:
        details = (f"{setting}, {label} has no paired comparison with chunk retrieval in this build, so the chapter "
                   f"cannot answer its question.")
        return answer_box(lead, "\n\n".join(t for t in (question, details) if t))
    sentences = [f"{setting}, {label}'s RAGQuestEval F1 differs " + " and ".join(parts) + "."]
    sentences.append(headline_verdict(paired, rank, task=task, method=method, references=references))
    small = [t for t, n in items_per_task.items() if t != task and 0 < int(n) < min_shared]
    caveats = []
    if small:
        counts = [int(items_per_task[t]) for t in small]
        words = " and ".join(TASK_WORDS.get(t, t) for t in small)
        n_words = (f"{counts[0]} questions" if len(set(counts)) == 1 and len(counts) == 1
                   else f"{counts[0]} questions each" if len(set(counts)) == 1
                   else " and ".join(map(str, counts)) + " questions")
        caveats.append(f"the {words} tasks have {n_words}, too few for an interval")
    if comparison is not None and label in comparison.index and ("f1qe", "ours") in comparison.columns:
        ours, theirs = comparison.loc[label, ("f1qe", "ours")], comparison.loc[label, ("f1qe", "paper")]
        if pd.notna(ours) and pd.notna(theirs):
            caveats.append(f"{label}'s score is {ours:.1f}% here against {theirs:.1f}% in the paper's Table 1, "
                           f"so this run speaks to the direction of the claim, not to its size")
    if caveats:
        text = "; ".join(caveats)
        sentences.append(text[0].upper() + text[1:] + ".")
    return answer_box(lead, "\n\n".join(t for t in (question, " ".join(sentences)) if t))


def same_context_share(answers: pd.DataFrame, method: str, reference: str, task: str | None = None) -> tuple[int, int]:
    """How often two methods handed the generator the same chunks.

    Parameters
    ----------
    answers : DataFrame
        :func:`chunkwise.crud.rag.run_baselines`' rows (``task``, ``ID``, ``method``,
        ``retrieved_ids``).
    method, reference : str
    task : str, optional
        Only this task's questions.

    Returns
    -------
    (same, total) : tuple of int
        Questions where both methods retrieved the same set of ids, and questions both
        answered; ``(0, 0)`` when either method is absent.
    """
    df = answers if task is None else answers[answers["task"] == task]
    a = df[df["method"] == method].set_index(["task", "ID"])["retrieved_ids"]
    b = df[df["method"] == reference].set_index(["task", "ID"])["retrieved_ids"]
    shared = a.index.intersection(b.index)
    same = sum(set(a[k]) == set(b[k]) for k in shared)
    return int(same), int(len(shared))


def answer_counts(answers: pd.DataFrame, scores: pd.DataFrame, metric: str = "quest_avg_f1") -> pd.DataFrame:
    """Per task and method: questions asked, answered, answers that did not parse, and answered
    questions whose ``metric`` is missing -- counts, never zero-filled scores.

    Parameters
    ----------
    answers : DataFrame
        :func:`chunkwise.crud.rag.run_baselines`' rows (``task``, ``ID``, ``method``, ``parse_ok``).
    scores : DataFrame
        :func:`score_answers`' rows for the same answers.
    metric : str, default "quest_avg_f1"

    Returns
    -------
    DataFrame
        Index (task, method) in the answers' order; columns ``questions``, ``answered``
        (a reply that parsed), ``unparsed``, ``metric_missing`` (answered but no ``metric``,
        e.g. a RAGQuestEval cell that failed), ``scored`` (``answered - metric_missing``).

    Raises
    ------
    ValueError
        If ``metric`` is not a column of ``scores``.
    """
    if metric not in scores.columns:
        raise ValueError(f"metric {metric!r} is not a column of scores; columns: {list(scores.columns)}")
    key = ["task", "ID", "method"]
    merged = answers[key + ["parse_ok"]].merge(scores[key + [metric]], on=key, how="left", validate="one_to_one")
    ok = merged["parse_ok"].astype(bool)
    merged["answered"] = ok
    merged["unparsed"] = ~ok
    merged["metric_missing"] = ok & merged[metric].isna()
    g = merged.groupby(["task", "method"], sort=False)
    out = pd.DataFrame({
        "questions": g.size(),
        "answered": g["answered"].sum().astype(int),
        "unparsed": g["unparsed"].sum().astype(int),
        "metric_missing": g["metric_missing"].sum().astype(int),
    })
    out["scored"] = out["answered"] - out["metric_missing"]
    return out


# ---------------------------------------------------------------------------------------------
# PG-RAG beside the baselines, and the paper's Table 1
# ---------------------------------------------------------------------------------------------

#: chunkwise method name -> row label of the PG-RAG paper's Table 1.
PAPER_METHOD = {
    "none": "w/o RAG", "bm25": "BM25", "dense": "DPR", "hybrid": "Hybrid", "hybrid_rerank": "Hybrid+Rerank",
    "tree_traversal": "Tree Traversal", "collapsed_tree": "Collapsed Tree", "graph_rag": "Graph-RAG",
    "kgp": "KGP-LLaMA", "pg": "PG", "pg_kps": "PG w. KPs", "pg_rag": "PG-RAG",
}
#: Task -> column prefix of the paper's table.
PAPER_TASK = {"questanswer_1doc": "doc1", "questanswer_2docs": "doc2", "questanswer_3docs": "doc3"}
#: Paper metric -> (our column, what our column is).
PAPER_METRIC = {
    "bleu": ("bleu_crud", "BLEU-4, CRUD-RAG's variant (brevity penalty divided out), jieba tokens"),
    "rougeL": ("rouge_l", "ROUGE-L F, jieba tokens"),
    "bertscore": ("embedding_cosine", "CRUD-RAG's 'bertScore' definition: cosine of sentence embeddings"),
    "f1qe": ("quest_avg_f1", "RAGQuestEval F1"),
}


def paper_table1(path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The PG-RAG paper's Table 1 (CRUD-RAG QA, percent), indexed by method label.

    Default file: ``data/crud/pgrag_table1_crud_qa.csv`` of the repository (transcribed from the
    authors' published results image; see ``data/crud/README.md``).
    """
    if path is None:
        from chunkwise._env import repo_root as find_repo_root

        path = find_repo_root() / "data" / "crud" / "pgrag_table1_crud_qa.csv"
    return pd.read_csv(path, comment="#").set_index("method")


def compare_with_paper(table: pd.DataFrame, task: str, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """One task's table beside the paper: for each paper metric, ours, the paper's, and the delta.

    Parameters
    ----------
    table : DataFrame
        A :func:`task_tables` table (index: chunkwise method names, metric columns in percent).
    task : str
        ``"questanswer_1doc"``, ``"questanswer_2docs"`` or ``"questanswer_3docs"``.
    paper : DataFrame, optional
        :func:`paper_table1`'s table.

    Returns
    -------
    DataFrame
        Index: the paper's method labels (in our table's order); columns ``(metric, "ours" |
        "paper" | "delta")``. A metric we did not compute stays NaN (never 0).
    """
    if task not in PAPER_TASK:
        raise ValueError(f"unknown task {task!r}; expected one of {list(PAPER_TASK)}")
    paper = paper_table1() if paper is None else paper
    prefix = PAPER_TASK[task]
    cols = {}
    labels = [PAPER_METHOD.get(m, m) for m in table.index]
    for metric, (ours_col, _) in PAPER_METRIC.items():
        ours = table[ours_col].to_numpy(dtype=float) if ours_col in table else [float("nan")] * len(table)
        ref = [float(paper.loc[lab, f"{prefix}_{metric}"]) if lab in paper.index else float("nan") for lab in labels]
        cols[(metric, "ours")] = ours
        cols[(metric, "paper")] = ref
        cols[(metric, "delta")] = [o - r for o, r in zip(ours, ref)]
    out = pd.DataFrame(cols, index=pd.Index(labels, name="method"))
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return out.round(2)


def rank_correlation_with_paper(
    scores: pd.DataFrame,
    task: str,
    paper: pd.DataFrame | None = None,
    *,
    metric: str = "f1qe",
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    min_questions: int = 10,
) -> dict[str, Any]:
    """Spearman's rank correlation between our methods' means and the paper's Table 1, with a
    bootstrap interval over our questions that contains the estimate
    (:func:`chunkwise.evaluation.intervals.rank_correlation_interval`).

    The paper publishes means only, so only our side is resampled: each resample draws the
    task's questions with replacement, recomputes every method's mean (over the drawn questions
    where it has a value) and correlates those means with the paper's fixed column
    (:func:`scipy.stats.spearmanr`). Methods without a paper row (labels outside
    :data:`PAPER_METHOD`) are left out.

    Parameters
    ----------
    scores : DataFrame
        :func:`score_answers`' rows.
    task : str
        A key of :data:`PAPER_TASK`.
    paper : DataFrame, optional
        :func:`paper_table1`'s table (read when None).
    metric : {"bleu", "rougeL", "bertscore", "f1qe"}, default "f1qe"
        The paper's metric; ours is :data:`PAPER_METRIC`'s column for it.
    n_resamples, seed, confidence
        Bootstrap settings.
    min_questions : int, default 10
        Fewest questions for an interval (see :func:`paired_with`'s ``min_shared``).

    Returns
    -------
    dict
        ``spearman``, ``ci_low``, ``ci_high`` (NaN when undefined: fewer than 3 methods, all
        means tied, or for the interval fewer than ``min_questions`` questions),
        ``n_methods``, ``n_questions``, ``methods`` (paper labels used).

    Raises
    ------
    ValueError
        For an unknown task or metric, or a metric column missing from ``scores``.
    """
    import numpy as np
    from scipy.stats import spearmanr

    if task not in PAPER_TASK:
        raise ValueError(f"unknown task {task!r}; expected one of {list(PAPER_TASK)}")
    if metric not in PAPER_METRIC:
        raise ValueError(f"unknown paper metric {metric!r}; expected one of {list(PAPER_METRIC)}")
    ours_col = PAPER_METRIC[metric][0]
    if ours_col not in scores.columns:
        raise ValueError(f"scores has no column {ours_col!r} (ours for the paper's {metric!r})")
    paper = paper_table1() if paper is None else paper
    df = scores[scores["task"] == task]
    wide = df.pivot_table(index="ID", columns="method", values=ours_col, aggfunc="first", dropna=False)
    methods = [m for m in df["method"].drop_duplicates() if PAPER_METHOD.get(m) in paper.index and m in wide.columns]
    methods = [m for m in methods if wide[m].notna().any()]
    ref = np.array([float(paper.loc[PAPER_METHOD[m], f"{PAPER_TASK[task]}_{metric}"]) for m in methods])
    x = wide[methods].to_numpy(dtype=float) if methods else np.zeros((0, 0))
    out: dict[str, Any] = {"spearman": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                           "n_methods": len(methods), "n_questions": int(x.shape[0]),
                           "methods": [PAPER_METHOD[m] for m in methods]}
    if len(methods) < 3 or x.shape[0] < 2:
        return out

    def rho(means: np.ndarray) -> float:
        ok = ~np.isnan(means)
        if ok.sum() < 3 or np.ptp(means[ok]) == 0:
            return float("nan")
        return float(spearmanr(means[ok], ref[ok]).statistic)

    with np.errstate(invalid="ignore"):
        out["spearman"] = rho(np.nanmean(x, axis=0))
        if x.shape[0] < max(2, int(min_questions)):
            return out
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(int(n_resamples)):
            idx = rng.integers(0, x.shape[0], size=x.shape[0])
            sample = x[idx]
            counts = (~np.isnan(sample)).sum(axis=0)
            means = np.where(counts > 0, np.nansum(sample, axis=0) / np.maximum(counts, 1), np.nan)
            draws.append(rho(means))
    out["ci_low"], out["ci_high"] = rank_correlation_interval(out["spearman"], np.array(draws), float(confidence))
    return out


def rank_text(rank: Mapping[str, Any], decimals: int = 2) -> str:
    """:func:`rank_correlation_with_paper`'s result in words, as Fig. 5's titles print it:
    ``"Spearman 0.68 [-0.24, 0.80]"``, ``"Spearman -0.15 (no interval: n=3 questions)"`` or
    ``"Spearman undefined (2 methods)"``; never ``nan``."""
    rho = rank.get("spearman", float("nan"))
    if rho is None or rho != rho:
        return f"Spearman undefined ({rank.get('n_methods', 0)} methods, {rank.get('n_questions', 0)} questions)"
    text = interval_text(rank.get("ci_low"), rank.get("ci_high"), f".{decimals}f", n=rank.get("n_questions"))
    return f"Spearman {rho:.{decimals}f} " + (f"({text})" if text.startswith("no ") else text)


def findings_key(task_prefix: str, method_label: str, metric: str) -> str:
    """Results key of one Table 1 cell, e.g. ``("doc1", "PG-RAG", "f1qe") -> "doc1_pg_rag_f1qe"``
    (the method label lower-cased, every run of other characters than letters and digits as ``_``)."""
    import re

    slug = re.sub(r"[^0-9a-z]+", "_", method_label.lower()).strip("_")
    return f"{task_prefix}_{slug}_{metric}"


def findings_results(
    tables: Mapping[str, pd.DataFrame],
    index_stats: Mapping[str, Any] | None = None,
    n_pool: int | None = None,
    generator: str | None = None,
) -> dict[str, Any]:
    """The chapter's numbers for the findings page (:func:`chunkwise.findings.write_results`).

    Parameters
    ----------
    tables : mapping
        :func:`task_tables` (task -> table, metrics in percent).
    index_stats : mapping, optional
        :func:`build_pg_retrievers`' statistics (for ``compression_ratio``).
    n_pool : int, optional
        Articles in the retrieval pool.
    generator : str, optional
        The generator's model identity; recorded without its ``@sha256:...`` suffix.

    Returns
    -------
    dict
        For every task of :data:`PAPER_TASK` and every method label of :data:`PAPER_METHOD`
        and every metric of :data:`PAPER_METRIC`, :func:`findings_key` -> ours in percent
        (None where the run has no such row or value); ``n_items_<doc>`` (questions per task,
        None if not run); ``compression_ratio`` (source characters over pseudo-graph
        characters); ``n_pool``, ``generator``; and the abstract's percentages recomputed on
        our table (:func:`chunkwise.findings.pgrag_abstract_metrics`; None where a row is missing).
    """
    from chunkwise.findings import FindingsError, pgrag_abstract_metrics

    out: dict[str, Any] = {}
    paper_shaped: dict[str, dict[str, float]] = {}
    for task, prefix in PAPER_TASK.items():
        table = tables.get(task)
        out[f"n_items_{prefix}"] = int(table["n_items"].max()) if table is not None and len(table) else None
        for method, label in PAPER_METHOD.items():
            for metric, (col, _) in PAPER_METRIC.items():
                value = None
                if table is not None and method in table.index and col in table.columns:
                    v = float(table.loc[method, col])
                    value = None if math.isnan(v) else v
                out[findings_key(prefix, label, metric)] = value
                paper_shaped.setdefault(label, {})[f"{prefix}_{metric}"] = math.nan if value is None else value
    cr = (index_stats or {}).get("compression_ratio")
    out["compression_ratio"] = None if cr is None or math.isnan(float(cr)) else float(cr)
    out["n_pool"] = n_pool
    out["generator"] = generator.split("@", 1)[0] if isinstance(generator, str) else generator
    try:
        abstract = pgrag_abstract_metrics(paper_shaped)
    except FindingsError:
        abstract = {}
    for key in ("abstract_overall_1doc", "abstract_bleu_1doc", "abstract_f1qe_1doc", "abstract_multi_min_avg",
                "abstract_multi_bleu", "abstract_multi_f1qe"):
        v = abstract.get(key)
        out[key] = None if v is None or math.isnan(v) else round(v, 2)
    return out


def pg_index_folder(root: str | os.PathLike[str], llm: ChatModel, embedder: Any, settings: Mapping[str, Any]) -> Path:
    """A store folder keyed by what determines its content: model, embedder, settings.

    ``<root>/<12 hex of sha1(model identity, embedder name, sorted settings)>``; changing one of
    these settings or the model therefore starts a fresh store instead of mixing records. For
    PG-RAG the settings are the extraction's (attempts, verification thresholds): the fusion
    thresholds only act when the graph is built from the records.
    """
    import hashlib
    import json

    key = json.dumps([getattr(llm, "model_identity", repr(llm)), str(getattr(embedder, "name", type(embedder).__name__)),
                      sorted(dict(settings).items())], ensure_ascii=False, default=str)
    return Path(root) / hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def build_pg_retrievers(
    pool: Any,
    llm: ChatModel,
    passage_embedder: Any,
    query_embedder: Any,
    index_root: str | os.PathLike[str],
    *,
    variants: Sequence[str] = ("pg", "pg_kps", "pg_rag"),
    max_attempts: int = 3,
    rouge_threshold: float = 0.15,
    semantic_threshold: float = 0.85,
    topic_threshold: float | str = 0.92,
    fact_threshold: float | str = 0.98,
    topic_alpha: float = 0.01,
    fact_alpha: float = 0.001,
    n_seed_topics: int = 3,
    top_paths: int = 24,
    support: float | None = None,
    ambiguous: float | None = None,
    show_progress: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Index the pool with PG-RAG (resumable) and build one retriever per variant.

    ``topic_threshold`` / ``fact_threshold`` are cosines (the authors' 0.92 / 0.98 by default)
    or ``"fitted"`` (:func:`chunkwise.crud.pgrag.graph.fit_fusion_threshold` with ``topic_alpha`` /
    ``fact_alpha``); the records do not depend on them, so either reuses the same index.

    Returns
    -------
    (retrievers, stats)
        Variant name -> :class:`chunkwise.crud.pgrag.PGRetriever`; the indexer's statistics
        (:meth:`chunkwise.crud.pgrag.PGIndexer.stats`) plus ``"folder"``.
    """
    from chunkwise.crud.pgrag import PGIndexer, PGRetriever
    from chunkwise.crud.pgrag.walk import AMBIGUOUS_THRESHOLD, SUPPORT_THRESHOLD

    # the records depend on the extraction settings only; fusion happens when the graph is built,
    # so changing a fusion threshold reuses the records (no LLM call)
    extraction = {"max_attempts": max_attempts, "rouge_threshold": rouge_threshold,
                  "semantic_threshold": semantic_threshold}
    folder = pg_index_folder(index_root, llm, passage_embedder, extraction)
    ix = PGIndexer(folder, llm, passage_embedder, topic_threshold=topic_threshold, fact_threshold=fact_threshold,
                   topic_alpha=topic_alpha, fact_alpha=fact_alpha, **extraction)
    ix.add_documents(list(zip(pool.ids, pool.texts)), show_progress=show_progress)
    graph = ix.graph(list(pool.ids))
    stats = dict(ix.stats(list(pool.ids)), folder=str(folder))
    kw = {"n_seed_topics": n_seed_topics, "top_paths": top_paths,
          "support": SUPPORT_THRESHOLD if support is None else support,
          "ambiguous": AMBIGUOUS_THRESHOLD if ambiguous is None else ambiguous}
    return {v: PGRetriever(graph, query_embedder, llm, variant=v, **kw) for v in variants}, stats


def fusion_comparison(
    pool: Any,
    llm: ChatModel,
    passage_embedder: Any,
    index_root: str | os.PathLike[str],
    *,
    max_attempts: int = 3,
    rouge_threshold: float = 0.15,
    semantic_threshold: float = 0.85,
    topic_alpha: float = 0.01,
    fact_alpha: float = 0.001,
    topic_threshold: float = 0.92,
    fact_threshold: float = 0.98,
) -> pd.DataFrame:
    """Super-node statistics of the pool's pseudo-graph under the fitted and the authors' fusion.

    Both graphs are built from the same index records (:func:`build_pg_retrievers` must have
    indexed the pool with these extraction settings); no LLM call is made.

    Returns
    -------
    DataFrame
        Index ``["fitted", "authors"]``; columns of :func:`chunkwise.crud.pgrag.super_node_stats`
        (thresholds, super nodes, largest super node, share of nodes fused, share of
        cross-document pairs at or above the threshold, per kind) and ``rule``.

    Raises
    ------
    KeyError
        If a pooled article is not indexed yet.
    """
    from chunkwise.crud.pgrag import PGIndexer, super_node_stats

    extraction = {"max_attempts": max_attempts, "rouge_threshold": rouge_threshold,
                  "semantic_threshold": semantic_threshold}
    folder = pg_index_folder(index_root, llm, passage_embedder, extraction)
    rows = {}
    for name, kw, rule in (
        ("fitted", {"topic_threshold": "fitted", "fact_threshold": "fitted", "topic_alpha": topic_alpha,
                    "fact_alpha": fact_alpha},
         f"top {topic_alpha:.1%} of cross-document topic pairs, top {fact_alpha:.1%} of fact pairs"),
        ("authors", {"topic_threshold": topic_threshold, "fact_threshold": fact_threshold},
         f"the authors' fixed cosines {topic_threshold:g} / {fact_threshold:g}"),
    ):
        ix = PGIndexer(folder, llm, passage_embedder, **kw, **extraction)
        rows[name] = {"rule": rule, **super_node_stats(ix.graph(list(pool.ids)))}
    return pd.DataFrame.from_dict(rows, orient="index")


#: The tree and graph baselines of the PG-RAG paper's Table 1, as chunkwise method names.
TREE_GRAPH_METHODS = ("tree_traversal", "collapsed_tree", "graph_rag", "kgp")


def build_tree_graph_retrievers(
    pool: Any,
    llm: ChatModel,
    passage_embedder: Any,
    query_embedder: Any,
    store_root: str | os.PathLike[str],
    *,
    methods: Sequence[str] = TREE_GRAPH_METHODS,
    raptor_max_levels: int = 3,
    raptor_max_clusters: int = 50,
    raptor_summary_tokens: int = 256,
    collapsed_max_tokens: int = 2000,
    graphrag_unit_tokens: int = 600,
    graphrag_unit_overlap: int = 100,
    graphrag_min_community_size: int = 2,
    graphrag_top_entities: int = 10,
    kgp_lexical_threshold: float | None = 0.3,
    kgp_semantic_k: int = 3,
    kgp_n_seeds: int = 2,
    kgp_max_steps: int = 3,
    kgp_per_step: int = 2,
    show_progress: bool = False,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Build the tree (RAPTOR) and graph (Graph RAG, KGP) baselines over the pool (resumable).

    RAPTOR and KGP work on the harness's chunks (CRUD-RAG's 128-token sentence chunks,
    :func:`chunkwise.crud.rag.chunk_articles`), as the other baselines do. Graph RAG extracts entities
    from its own *text units*: the pool re-chunked at ``graphrag_unit_tokens`` tokens with
    ``graphrag_unit_overlap`` overlap (cl100k_base; Edge et al., 2024 use 600 / 100), which
    are also what its local search returns -- one extraction call per 128-token chunk would
    cost about four times as many LLM calls for the same text.

    The LLM results are kept in ``<store_root>/<method>/<12 hex>`` folders keyed by the model,
    the embedder and the settings that change them (:func:`pg_index_folder`'s rule), so an
    interrupted build resumes and such a change starts a fresh store. Settings that act only
    after the LLM calls (the retrievers' settings, ``graphrag_min_community_size``) reuse it.

    Parameters
    ----------
    pool : PooledCorpus
        ``ids`` and ``texts`` of the articles (:func:`build_pool`).
    llm : ChatModel
        ``chat`` (RAPTOR summaries, KGP steps) and ``chat_json`` (Graph RAG).
    passage_embedder, query_embedder : objects with ``embed(texts) -> ndarray (n, d)``
        The dense retriever's pair (:func:`chunkwise.crud.embedders.make_dense_embedders`).
    store_root : path
    methods : sequence of str, default all four
        Any of :data:`TREE_GRAPH_METHODS`; ``tree_traversal`` and ``collapsed_tree`` share one tree.
    raptor_max_levels, raptor_max_clusters, raptor_summary_tokens
        :meth:`chunkwise.crud.rag.raptor.RaptorTree.build`'s ``max_levels``, ``max_clusters`` and
        ``max_summary_tokens``.
    collapsed_max_tokens : int, default 2000
        Token budget (cl100k_base) of the collapsed-tree context (the RAPTOR paper's 2000).
    graphrag_unit_tokens, graphrag_unit_overlap : int
        Size and overlap of Graph RAG's text units, in cl100k_base tokens.
    graphrag_min_community_size : int, default 2
        Communities with fewer entities get no report (saves one LLM call per singleton).
    graphrag_top_entities : int, default 10
        Entities taken by similarity before the 1-hop expansion.
    kgp_lexical_threshold, kgp_semantic_k
        :meth:`chunkwise.crud.rag.kgp.PassageGraph.build`'s edge rules.
    kgp_n_seeds, kgp_max_steps, kgp_per_step
        :class:`chunkwise.crud.rag.kgp.KGPRetriever`'s traversal settings.
    show_progress : bool, default False

    Returns
    -------
    (retrievers, stats)
        Method name -> retriever; ``"raptor"`` / ``"graph_rag"`` / ``"kgp"`` -> dict of
        build statistics (sizes, LLM calls, reused results, store folder).

    Raises
    ------
    ValueError
        For ``methods`` given as one string or holding an unknown name, or a setting out of range
        (named as passed here) -- all checked before any index is built.
    """
    from chunkwise.crud.rag import chunk_articles
    from chunkwise.crud.rag.graphrag import GraphIndex, GraphRAGLocalRetriever
    from chunkwise.crud.rag.kgp import KGPRetriever, PassageGraph
    from chunkwise.crud.rag.raptor import CollapsedTreeRetriever, RaptorTree, TreeTraversalRetriever

    if isinstance(methods, str):
        raise ValueError(f"methods must be a list of method names, e.g. [{methods!r}], got the string {methods!r}")
    methods = list(methods)
    unknown = [m for m in methods if m not in TREE_GRAPH_METHODS]
    if unknown:
        raise ValueError(f"unknown tree/graph method(s) {unknown}; expected any of {list(TREE_GRAPH_METHODS)}")
    # every setting checked before any index is built (a typo must not cost an hour of LLM calls first)
    minimum = {"raptor_max_levels": 1, "raptor_max_clusters": 1, "raptor_summary_tokens": 1,
               "collapsed_max_tokens": 1, "graphrag_unit_tokens": 1, "graphrag_unit_overlap": 0,
               "graphrag_min_community_size": 1, "graphrag_top_entities": 1, "kgp_semantic_k": 0,
               "kgp_n_seeds": 1, "kgp_max_steps": 0, "kgp_per_step": 1}
    given = {"raptor_max_levels": raptor_max_levels, "raptor_max_clusters": raptor_max_clusters,
             "raptor_summary_tokens": raptor_summary_tokens, "collapsed_max_tokens": collapsed_max_tokens,
             "graphrag_unit_tokens": graphrag_unit_tokens, "graphrag_unit_overlap": graphrag_unit_overlap,
             "graphrag_min_community_size": graphrag_min_community_size,
             "graphrag_top_entities": graphrag_top_entities, "kgp_semantic_k": kgp_semantic_k,
             "kgp_n_seeds": kgp_n_seeds, "kgp_max_steps": kgp_max_steps, "kgp_per_step": kgp_per_step}
    for name, low in minimum.items():
        value = given[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if graphrag_unit_overlap >= graphrag_unit_tokens:
        raise ValueError(f"graphrag_unit_overlap ({graphrag_unit_overlap}) must be smaller than "
                         f"graphrag_unit_tokens ({graphrag_unit_tokens})")
    if kgp_lexical_threshold is not None and (
        isinstance(kgp_lexical_threshold, bool) or not isinstance(kgp_lexical_threshold, (int, float))
        or not 0 < kgp_lexical_threshold <= 1
    ):
        raise ValueError(f"kgp_lexical_threshold must be a number in (0, 1] or None, got {kgp_lexical_threshold!r}")
    root = Path(store_root)
    retrievers: dict[str, Any] = {}
    stats: dict[str, dict[str, Any]] = {}
    chunks = chunk_articles(pool.texts, pool.ids) if any(m != "graph_rag" for m in methods) else []

    if "tree_traversal" in methods or "collapsed_tree" in methods:
        settings = {"method": "raptor", "max_levels": raptor_max_levels, "max_clusters": raptor_max_clusters,
                    "max_summary_tokens": raptor_summary_tokens}
        folder = pg_index_folder(root / "raptor", llm, passage_embedder, settings)
        tree = RaptorTree.build(chunks, passage_embedder, llm, max_levels=raptor_max_levels,
                                max_clusters=raptor_max_clusters, max_summary_tokens=raptor_summary_tokens,
                                store=folder, show_progress=show_progress)
        stats["raptor"] = {"leaves": len(tree.levels[0]), "summaries": len(tree) - len(tree.levels[0]),
                           "levels": tree.depth, "nodes_per_level": [len(lv) for lv in tree.levels],
                           "reducer": tree.reducer, "llm_calls": tree.llm_calls,
                           "reused_summaries": tree.reused_summaries, "folder": str(folder)}
        if "tree_traversal" in methods:
            retrievers["tree_traversal"] = TreeTraversalRetriever(tree, query_embedder)
        if "collapsed_tree" in methods:
            retrievers["collapsed_tree"] = CollapsedTreeRetriever(tree, query_embedder, max_tokens=collapsed_max_tokens)

    if "graph_rag" in methods:
        units = chunk_articles(pool.texts, pool.ids, chunk_size=graphrag_unit_tokens, chunk_overlap=graphrag_unit_overlap)
        # min_community_size is not part of the key: it only decides which communities get a report,
        # and reports are stored under the hash of their prompt, so changing it reuses all extractions
        settings = {"method": "graph_rag", "unit_tokens": graphrag_unit_tokens, "unit_overlap": graphrag_unit_overlap}
        folder = pg_index_folder(root / "graph_rag", llm, passage_embedder, settings)
        index = GraphIndex.build(units, llm, passage_embedder, store=folder,
                                 min_community_size=graphrag_min_community_size, show_progress=show_progress)
        stats["graph_rag"] = {"text_units": len(units), "entities": index.graph.number_of_nodes(),
                              "relations": index.graph.number_of_edges(), "communities": len(index.communities),
                              "reports": len(index.summaries), "failed_units": len(index.failed),
                              "failed_reports": len(index.failed_communities), "llm_calls": index.llm_calls,
                              "reused_extractions": index.reused_extractions, "folder": str(folder)}
        retrievers["graph_rag"] = GraphRAGLocalRetriever(index, query_embedder, top_entities=graphrag_top_entities)

    if "kgp" in methods:
        graph = PassageGraph.build(chunks, passage_embedder, lexical_threshold=kgp_lexical_threshold,
                                   semantic_k=kgp_semantic_k, show_progress=show_progress)
        stats["kgp"] = {"passages": len(graph), "edges": graph.graph.number_of_edges(),
                        "lexical_edges": len(graph.edges_by_rule("lexical")),
                        "semantic_edges": len(graph.edges_by_rule("semantic"))}
        retrievers["kgp"] = KGPRetriever(graph, llm, query_embedder, n_seeds=kgp_n_seeds, max_steps=kgp_max_steps,
                                         per_step=kgp_per_step)
    return retrievers, stats
