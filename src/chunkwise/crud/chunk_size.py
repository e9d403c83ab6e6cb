"""The chunk-size sweep on CRUD-RAG: does the chunking that retrieves best also answer best?

CRUD-RAG (Lyu et al., 2024, arXiv 2401.17043) varies the chunk size of its retrieval corpus and
reads the answers' BLEU, ROUGE-L, BERTScore and RAGQuestEval. The semantic-chunking guide ends its
advice with "compare retrieval and answer metrics, then pick" and warns that longer chunks can
raise recall while diluting what the generator reads. This module holds the measures that put the
two side by side for the configurations (retriever x chunk size) of a sweep run with chapter 3's
harness (``benchmarks/crud_chunk_size_stages.py``):

- :func:`context_recall`: a retrieval measure that needs no gold document. Most CRUD-RAG items
  have no gold article in the pool, so the reference's *answer* stands in for it: the share of
  the gold answer's jieba tokens (multiset, :func:`chunkwise.crud.answer_metrics.tokenize`) that
  occur in the retrieved contexts. 1.0 means every word of the reference answer is somewhere in
  what the generator read; it says nothing about whether the words belong together.
- :func:`item_table`: one row per (configuration, item) with that recall, the contexts' length in
  cl100k_base tokens and the answer metric, also per 1,000 retrieved tokens.
- :func:`rank_agreement`: Spearman's rho between the configurations' mean recall and mean answer
  score, with a percentile bootstrap interval over items (items resampled jointly, so every
  configuration is scored on the same resample).
- :func:`dilution_test`: larger chunks against a reference size, per retriever: the paired
  differences of recall and of the answer score per retrieved token, and a verdict that needs both
  intervals to exclude 0 (recall up, score per token down) to support the guide's claim.

Every interval is a paired percentile bootstrap over items (:mod:`chunkwise.evaluation.stats`);
an item without a score (a failed generation) is dropped pairwise, never scored 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "SWEEP_METRICS",
    "SWEEP_RETRIEVERS",
    "DIRECTION_WORDS",
    "chapter_answer",
    "larger_chunks_word",
    "load_paper_reference",
    "pooled_rank_correlation",
    "Sweep",
    "configuration_name",
    "context_recall",
    "dilution_panel",
    "dilution_test",
    "item_table",
    "rank_agreement",
    "run_sweep",
    "size_effects",
    "sweep_means",
]

#: The sweep's answer metrics: chapter 3's (CRUD-RAG's BLEU in its own and the standard form,
#: ROUGE-L, its "bertScore" read as the cosine of sentence embeddings, and RAGQuestEval).
SWEEP_METRICS: tuple[str, ...] = ("bleu_crud", "bleu_standard", "rouge_l", "embedding_cosine", "quest_eval")

#: Retrievers a sweep may vary the chunk size under (chapter 3's chunk baselines).
SWEEP_RETRIEVERS: tuple[str, ...] = ("bm25", "dense", "hybrid", "hybrid_rerank")


def configuration_name(retriever: str, chunk_size: int) -> str:
    """The ``method`` label of one sweep configuration: ``"<retriever>@<chunk_size>"`` (tokens)."""
    return f"{retriever}@{int(chunk_size)}"


@dataclass
class Sweep:
    """What :func:`run_sweep` returns.

    Attributes
    ----------
    answers : DataFrame
        :func:`chunkwise.crud.rag.run_baselines` rows, ``method`` =
        :func:`configuration_name` (e.g. ``"dense@256"``), with ``retrieved_ids``.
    scores : DataFrame or None
        :func:`chunkwise.crud.experiment.score_answers` rows (one per item and configuration;
        fractions in [0, 1]); ``None`` when the sweep was run with ``score=False``.
    chunk_texts : dict
        ``{method: {chunk_id: text}}``, the chunks each configuration retrieved from.
    configs : DataFrame
        One row per configuration: ``method``, ``retriever``, ``chunk_size_tokens``, ``chunks``
        (how many chunks the pool gave) and ``mean_chunk_tokens`` (cl100k_base).
    """

    answers: pd.DataFrame
    scores: pd.DataFrame | None
    chunk_texts: dict[str, dict[str, str]]
    configs: pd.DataFrame


def run_sweep(
    items: Sequence[Mapping[str, Any]],
    pool: Any,
    llm: Any,
    chunk_sizes: Sequence[int],
    *,
    retrievers: Sequence[str] = ("bm25", "dense"),
    top_k: int = 8,
    dense: Any = "auto",
    score_embedder: Any = None,
    metrics: Sequence[str] = SWEEP_METRICS,
    score: bool = True,
    checkpoint: Any = None,
    mirror: Any = None,
    show_progress: bool = False,
) -> Sweep:
    """CRUD-RAG's chunk-size experiment on chapter 3's harness: chunk, retrieve, answer, score.

    For every chunk size the pool's articles are chunked with CRUD-RAG's sentence-packing rule
    (:func:`chunkwise.crud.rag.chunk_articles`, no overlap), each retriever is built over those
    chunks (:func:`chunkwise.crud.rag.retrievers.build_retrievers`), and every item is answered
    from its ``top_k`` chunks and scored (:func:`chunkwise.crud.experiment.run_harness`: the
    benchmark's prompt, generator settings and RAGQuestEval ground truth). Every LLM reply goes
    through ``llm`` (its cache makes a rerun replay), every answer through ``checkpoint``. The
    method follows Lyu et al. (2024), "CRUD-RAG", arXiv 2401.17043, section 5 (chunk size 64 to
    512 tokens, everything else at its default).

    Parameters
    ----------
    items : sequence of mapping
        QA items with ``task`` (:func:`chunkwise.crud.experiment.load_items`).
    pool : PooledCorpus
        The retrieval corpus (:func:`chunkwise.crud.experiment.build_pool`).
    llm : ChatModel
        Generator and RAGQuestEval answerer.
    chunk_sizes : sequence of int
        Chunk sizes in cl100k_base tokens, each at least 16, no repeats.
    retrievers : sequence of str, default ("bm25", "dense")
        Names from :data:`SWEEP_RETRIEVERS`.
    top_k : int, default 8
        Chunks per question (CRUD-RAG's default).
    dense : str or (query, passage) embedders
        The dense retriever's embedders (as in ``build_retrievers``).
    score_embedder : object with ``embed``, optional
        Needed for the ``embedding_cosine`` metric.
    metrics : sequence of str, default :data:`SWEEP_METRICS`
    score : bool, default True
        False: answer only (``scores`` is None), e.g. a generation stage that fills the cache.
    checkpoint, mirror, show_progress
        As in :func:`chunkwise.crud.experiment.run_harness`.

    Returns
    -------
    Sweep

    Raises
    ------
    ValueError
        For an empty or repeated chunk size, one below 16 tokens or not an int, an unknown
        retriever, or a ``top_k`` that is not a positive int.
    """
    from chunkwise.crud import experiment as crud
    from chunkwise.crud.rag import chunk_articles, run_baselines
    from chunkwise.crud.rag.retrievers import build_retrievers

    sizes = list(chunk_sizes) if not isinstance(chunk_sizes, int | str) else [chunk_sizes]
    if not sizes:
        raise ValueError("chunk_sizes is empty; give at least one size in tokens, e.g. [64, 128, 256, 512]")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 16:
            raise ValueError(f"a chunk size is an int of at least 16 (cl100k_base tokens), got {s!r}")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"chunk_sizes repeats a size: {sizes}; list each once")
    bad = [r for r in retrievers if r not in SWEEP_RETRIEVERS]
    if bad or not retrievers:
        raise ValueError(f"retrievers must be some of {list(SWEEP_RETRIEVERS)}, got {list(retrievers)}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be a positive int (chunks per question), got {top_k!r}")

    answers, scores, texts, configs = [], [], {}, []
    for size in sizes:
        chunks = chunk_articles(pool.texts, pool.ids, chunk_size=int(size), chunk_overlap=0)
        built = build_retrievers(chunks, list(retrievers), llm=llm, dense=dense)
        named = {configuration_name(r, size): built[r] for r in retrievers}
        by_id = {c.chunk_id: c.text for c in chunks}
        mean_tokens = float(np.mean([c.n_tokens for c in chunks])) if chunks else float("nan")
        for r in retrievers:
            name = configuration_name(r, size)
            texts[name] = by_id
            configs.append({"method": name, "retriever": r, "chunk_size_tokens": int(size), "chunks": len(chunks),
                            "mean_chunk_tokens": mean_tokens})
        if score:
            a, sc = crud.run_harness(items, pool, llm, named, top_k=top_k, metrics=list(metrics),
                                     checkpoint=checkpoint, score_embedder=score_embedder, mirror=mirror,
                                     show_progress=show_progress)
            scores.append(sc)
        else:
            a = run_baselines(items, None, named, llm, top_k=top_k, checkpoint=checkpoint,
                              show_progress=show_progress)
        answers.append(a)
    all_scores = None
    if score:
        all_scores = pd.concat(scores, ignore_index=True)
        all_scores.attrs["labels"] = scores[0].attrs.get("labels", {})
    return Sweep(pd.concat(answers, ignore_index=True), all_scores, texts, pd.DataFrame(configs))


def sweep_means(sweep: Sweep, table: pd.DataFrame, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean of every answer metric, the context recall and the retrieved tokens per configuration.

    Parameters
    ----------
    sweep : Sweep
        :func:`run_sweep`'s output, scored.
    table : DataFrame
        :func:`item_table` of the same sweep (``context_recall``, ``retrieved_tokens``).
    metrics : sequence of str, optional
        Score columns to average (fractions); default every score column of ``sweep.scores``.

    Returns
    -------
    DataFrame
        One row per configuration, in the sweep's order: ``retriever``, ``chunk_size_tokens``,
        ``chunks``, the metrics and ``context_recall`` in percent (means over the items that
        have a value), ``retrieved_tokens`` (mean, cl100k_base) and ``n_scored`` (items with the
        first metric).

    Raises
    ------
    ValueError
        If the sweep was not scored, or a metric is not a score column.
    """
    if sweep.scores is None:
        raise ValueError("the sweep was run with score=False; rerun it with score=True")
    sc = sweep.scores
    cols = list(metrics) if metrics is not None else [c for c in sc.columns if c not in _ID_COLUMNS]
    if missing := [c for c in cols if c not in sc.columns]:
        raise ValueError(f"no score column {missing}; the scores have {list(sc.columns)}")
    by = sc.groupby("method", sort=False)
    out = sweep.configs.set_index("method")[["retriever", "chunk_size_tokens", "chunks"]].copy()
    for c in cols:
        out[c] = 100 * by[c].mean()
    tab = table.groupby("method", sort=False)
    out["context_recall"] = 100 * tab["context_recall"].mean()
    out["retrieved_tokens"] = tab["retrieved_tokens"].mean()
    out["n_scored"] = by[cols[0]].count() if cols else 0
    return out


_ID_COLUMNS = ("task", "ID", "method", "chunk_size_tokens", "missing", "model_identity", "parse_status", "parse_ok")


def size_effects(
    sweep: Sweep,
    table: pd.DataFrame,
    reference_size: int,
    metrics: Sequence[str],
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Each chunk size against a reference size, per retriever: paired differences with intervals.

    Parameters
    ----------
    sweep : Sweep
        :func:`run_sweep`'s output, scored.
    table : DataFrame
        :func:`item_table` of the sweep (its ``context_recall`` and ``retrieved_tokens`` are
        compared too).
    reference_size : int
        The size every other is compared with (CRUD-RAG's default, 128 tokens).
    metrics : sequence of str
        Score columns (fractions) to compare.
    n_resamples, seed
        Of the paired bootstrap over items (:func:`chunkwise.evaluation.stats.paired_difference_ci`).

    Returns
    -------
    DataFrame
        One row per (retriever, chunk size other than the reference, measure): ``retriever``,
        ``chunk_size_tokens``, ``measure``, ``diff``, ``low``, ``high`` (percentage points;
        tokens for ``retrieved_tokens``; ``size - reference``) and ``n`` (items paired).

    Raises
    ------
    ValueError
        If the sweep was not scored, has no configuration at ``reference_size`` for a retriever,
        or a measure has fewer than 2 paired items.
    """
    from chunkwise.evaluation.stats import paired_difference_ci

    if sweep.scores is None:
        raise ValueError("the sweep was run with score=False; rerun it with score=True")
    cfg = sweep.configs
    rows = []
    scores = sweep.scores.assign(ID=sweep.scores["ID"].astype(str))
    wide = {m: scores.pivot(index="ID", columns="method", values=m) for m in metrics}
    for measure in ("context_recall", "retrieved_tokens"):
        wide[measure] = _wide(table, measure)
    for r in dict.fromkeys(cfg["retriever"]):
        mine = cfg[cfg["retriever"] == r]
        if reference_size not in set(mine["chunk_size_tokens"]):
            raise ValueError(f"{r} has no configuration at the reference size {reference_size}; "
                             f"its sizes are {sorted(mine['chunk_size_tokens'])}")
        ref = configuration_name(r, reference_size)
        for size in mine["chunk_size_tokens"]:
            if size == reference_size:
                continue
            name = configuration_name(r, size)
            for measure, w in wide.items():
                scale = 1.0 if measure == "retrieved_tokens" else 100.0
                a, b = scale * w[name].to_numpy(float), scale * w[ref].to_numpy(float)
                try:
                    d, lo, hi = paired_difference_ci(a, b, n_resamples=n_resamples, seed=seed)
                except ValueError as exc:
                    raise ValueError(f"{measure}, {name} against {ref}: {exc}") from exc
                n = int(np.sum(~np.isnan(a) & ~np.isnan(b)))
                rows.append({"retriever": r, "chunk_size_tokens": int(size), "measure": measure,
                             "diff": d, "low": lo, "high": hi, "n": n})
    return pd.DataFrame(rows, columns=["retriever", "chunk_size_tokens", "measure", "diff", "low", "high", "n"])


def context_recall(contexts: Sequence[str], gold: str) -> float:
    """Share of the gold answer's tokens found in the retrieved contexts (multiset recall).

    Parameters
    ----------
    contexts : sequence of str
        The retrieved chunks' texts, in any order (they are read as one bag of tokens).
    gold : str
        The item's reference answer.

    Returns
    -------
    float
        ``|tokens(gold) & tokens(contexts)| / |tokens(gold)|`` with multiset intersection, in
        [0, 1]; NaN when the gold answer has no token (nothing to find). Tokens are
        :func:`chunkwise.crud.answer_metrics.tokenize`'s (jieba, whitespace removed,
        case-sensitive).

    Raises
    ------
    TypeError
        If ``gold`` is not a str, or ``contexts`` is a str or holds a non-str.
    """
    from chunkwise.crud.answer_metrics import tokenize

    if not isinstance(gold, str):
        raise TypeError(f"gold must be a str (the reference answer), got {type(gold).__name__}")
    if isinstance(contexts, str):
        raise TypeError("contexts must be a list of chunk texts, got one string; wrap it in a list")
    contexts = list(contexts)
    bad = [type(c).__name__ for c in contexts if not isinstance(c, str)]
    if bad:
        raise TypeError(f"contexts must be strings (chunk texts), got {bad[0]}")
    want = Counter(tokenize(gold))
    if not want:
        return float("nan")
    have = Counter(t for c in contexts for t in tokenize(c))
    return sum((want & have).values()) / sum(want.values())


def item_table(
    answers: pd.DataFrame,
    scores: pd.DataFrame,
    chunk_texts: Mapping[str, Mapping[str, str]],
    metric: str = "quest_avg_f1",
    *,
    encoding_name: str = "cl100k_base",
) -> pd.DataFrame:
    """One row per (configuration, item): retrieval recall, context length and answer score.

    Parameters
    ----------
    answers : DataFrame
        :func:`chunkwise.crud.rag.run_baselines` rows with ``ID``, ``method``, ``retrieved_ids``
        and ``gold_answer``; ``method`` names the configuration (e.g. ``"dense@256"``).
    scores : DataFrame
        :func:`chunkwise.crud.experiment.score_answers` rows (``ID``, ``method`` and ``metric``).
    chunk_texts : mapping
        ``{method: {chunk_id: text}}``: the chunks each configuration retrieved from.
    metric : str, default "quest_avg_f1"
        The answer metric (a column of ``scores``, a fraction in [0, 1]).
    encoding_name : str, default "cl100k_base"
        Tokenizer of ``retrieved_tokens``.

    Returns
    -------
    DataFrame
        Columns ``method``, ``ID``, ``context_recall``, ``retrieved_tokens`` (sum over the
        retrieved chunks), ``answer`` (the metric; NaN where the item was not scored) and
        ``answer_per_1k_tokens`` (``answer / retrieved_tokens * 1000``; NaN without contexts).

    Raises
    ------
    ValueError
        If a column is missing, ``metric`` is not in ``scores``, a method has no entry in
        ``chunk_texts``, or a retrieved id is not among that method's chunks.
    """
    from chunkwise.tokens import count_tokens

    need = {"ID", "method", "retrieved_ids", "gold_answer"}
    if missing := need - set(answers.columns):
        raise ValueError(f"answers lacks columns {sorted(missing)} (run_baselines' output has them)")
    if metric not in scores.columns or not {"ID", "method"} <= set(scores.columns):
        raise ValueError(f"scores must have ID, method and {metric!r}; it has {list(scores.columns)}")
    rows = []
    for rec in answers.itertuples(index=False):
        if isinstance(rec.retrieved_ids, str) or not isinstance(rec.retrieved_ids, Sequence | np.ndarray):
            raise TypeError(f"{rec.method}, item {rec.ID}: retrieved_ids must be a list of chunk ids, got "
                            f"{type(rec.retrieved_ids).__name__} (a CSV round trip turns lists into strings: "
                            "parse them with ast.literal_eval)")
        if not isinstance(rec.gold_answer, str):
            raise TypeError(f"{rec.method}, item {rec.ID}: gold_answer must be a str, got {rec.gold_answer!r}")
        texts = chunk_texts.get(rec.method)
        if texts is None:
            raise ValueError(f"no chunk texts for method {rec.method!r}; chunk_texts has {sorted(chunk_texts)}")
        unknown = [c for c in rec.retrieved_ids if c not in texts]
        if unknown:
            raise ValueError(f"{rec.method}: retrieved id {unknown[0]!r} is not among its chunks "
                             "(were they chunked with another size?)")
        contexts = [texts[c] for c in rec.retrieved_ids]
        rows.append({"method": rec.method, "ID": str(rec.ID), "context_recall": context_recall(contexts, rec.gold_answer),
                     "retrieved_tokens": sum(count_tokens(t, encoding_name) for t in contexts)})
    out = pd.DataFrame(rows, columns=["method", "ID", "context_recall", "retrieved_tokens"])
    s = scores[["ID", "method", metric]].assign(ID=lambda d: d["ID"].astype(str)).rename(columns={metric: "answer"})
    out = out.merge(s, on=["method", "ID"], how="left")
    with np.errstate(divide="ignore", invalid="ignore"):
        out["answer_per_1k_tokens"] = np.where(out["retrieved_tokens"] > 0,
                                               out["answer"] / out["retrieved_tokens"] * 1000, np.nan)
    return out


def _wide(table: pd.DataFrame, column: str) -> pd.DataFrame:
    for c in ("method", "ID", column):
        if c not in table.columns:
            raise ValueError(f"table has no column {c!r}; pass item_table()'s output")
    dup = table.duplicated(["method", "ID"])
    if dup.any():
        first = table.loc[dup, ["method", "ID"]].iloc[0]
        raise ValueError(f"table repeats item {first['ID']!r} of configuration {first['method']!r}; "
                         "give one row per (method, ID)")
    return table.pivot(index="ID", columns="method", values=column)


def _check_bootstrap(n_resamples: Any, confidence: Any) -> None:
    from chunkwise._validation import Interval, check_param

    check_param("n_resamples", n_resamples, [Interval(int, 1, None)])
    check_param("confidence", confidence, [Interval(float, 0, 1, closed="neither")], hint=" (e.g. 0.95)")


def _percentile_interval(boot: Sequence[float], confidence: float, estimate: float | None = None) -> tuple[float, float]:
    """Interval of bootstrap statistics; (NaN, NaN) when no resample gave one.

    With ``estimate`` (a rank correlation), the package's rank-correlation interval
    (:func:`chunkwise.evaluation.intervals.rank_correlation_interval`: the lower to the higher end
    of the percentile and basic intervals, which contains the estimate); without it, the
    percentile interval."""
    from chunkwise.evaluation.intervals import bootstrap_interval, rank_correlation_interval

    if not len(boot):
        return float("nan"), float("nan")
    if estimate is not None:
        return rank_correlation_interval(estimate, boot, confidence)
    return bootstrap_interval(float(np.median(boot)), boot, confidence, method="percentile")


def rank_agreement(
    table: pd.DataFrame,
    x: str = "context_recall",
    y: str = "answer",
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Spearman's rho between the configurations' mean ``x`` and mean ``y``, with an interval.

    Parameters
    ----------
    table : DataFrame
        :func:`item_table`'s output (``method``, ``ID`` and the two columns).
    x, y : str
        Columns to correlate (means per configuration over items).
    n_resamples, seed, confidence
        Percentile bootstrap over items, resampled jointly for every configuration.

    Returns
    -------
    dict
        ``rho`` (on the observed means), ``low``, ``high``, ``n_configs``, ``n_items`` and
        ``means`` (a DataFrame of the per-configuration means). Only the items that have both
        values under every configuration are used (``n_items``), so all means are over the same
        items. A resample in which one of the two mean vectors is constant gives no rho and is
        skipped.

    Raises
    ------
    ValueError
        Fewer than 3 configurations (a rank correlation of two points is always +-1), a
        configuration without values, fewer than 2 complete items, equal means (rho undefined),
        repeated (method, ID) rows, a column missing, or a bad ``n_resamples`` / ``confidence``.
    """
    from scipy.stats import spearmanr

    _check_bootstrap(n_resamples, confidence)
    wx, wy = _wide(table, x), _wide(table, y)
    if wx.shape[1] < 3:
        raise ValueError(f"rank agreement needs at least 3 configurations, got {wx.shape[1]}")
    empty = [m for m in wx.columns if wx[m].isna().all() or wy[m].isna().all()]
    if empty:
        raise ValueError(f"configuration(s) {empty} have no {x} or no {y} on any item; leave them out "
                         "(a failed stage) or rerun them")
    complete = wx.notna().all(axis=1) & wy.notna().all(axis=1)  # the same items for every configuration
    wx, wy = wx[complete], wy[complete]
    if len(wx) < 2:
        raise ValueError(f"only {len(wx)} item(s) have {x} and {y} under every configuration; need 2 or more")
    means = pd.DataFrame({x: wx.mean(), y: wy.mean()})
    if means[x].nunique() == 1 or means[y].nunique() == 1:
        raise ValueError(f"every configuration has the same mean {x if means[x].nunique() == 1 else y}: "
                         "a rank correlation is undefined")
    rho = float(spearmanr(means[x], means[y]).statistic)
    rng = np.random.default_rng(seed)
    ax, ay, n = wx.to_numpy(float), wy.to_numpy(float), len(wx)
    boot = []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, n)
        mx, my = ax[idx].mean(axis=0), ay[idx].mean(axis=0)
        if np.ptp(mx) == 0 or np.ptp(my) == 0:
            continue
        boot.append(spearmanr(mx, my).statistic)
    low, high = _percentile_interval(boot, confidence, estimate=rho)
    return {"rho": rho, "low": float(low), "high": float(high), "n_configs": int(wx.shape[1]),
            "n_items": int(n), "means": means}


def dilution_test(
    table: pd.DataFrame,
    reference: str,
    larger: str,
    *,
    delta: float = 5.0,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """The guide's dilution claim for one pair of configurations (same retriever, larger chunks).

    "A chunker that returns longer chunks can raise recall while diluting what the generator
    reads": with ``larger`` against ``reference``, is ``context_recall`` up and the *answer score
    itself* down, each by a paired 95% interval that excludes 0? The answer score per 1,000
    retrieved tokens is returned as a description only: it falls almost by construction when the
    generator reads several times the tokens, so it cannot test the claim.

    Parameters
    ----------
    table : DataFrame
        :func:`item_table`'s output holding both configurations.
    reference, larger : str
        ``method`` names, e.g. ``"dense"`` (128 tokens) and ``"dense@512"``.
    n_resamples, seed
        Of the paired bootstrap (:func:`chunkwise.evaluation.stats.paired_difference_ci`).

    Returns
    -------
    dict
        ``recall_diff``, ``per_token_diff`` and ``answer_diff`` (each ``(mean, low, high)``,
        ``larger - reference``; recall and answer in points, per-token in points per 1,000
        tokens), ``tokens_ratio`` (mean retrieved tokens, larger / reference) and ``verdict``:
        ``"supports"`` (recall up and the answers down), ``"contradicts"`` (the answers up, or
        recall down, each shown by an interval), ``"no dilution larger than <delta> points"`` (the
        answers' interval rules out a drop larger than ``delta``: its low end lies above
        ``-delta``) or ``"cannot tell"``.
    delta : float, default 5.0
        The practical margin, in answer points (the analysis plan's ``longer-chunks-dilute``).

    Raises
    ------
    ValueError
        If a configuration is not in ``table``, or fewer than 2 items have a value under both
        (each measure is paired over the items that have it under both).
    """
    from chunkwise.evaluation.stats import paired_difference_ci

    methods = set(table["method"])
    for m in (reference, larger):
        if m not in methods:
            raise ValueError(f"configuration {m!r} is not in the table; it has {sorted(methods)}")

    def diff(column: str, scale: float) -> tuple[float, float, float]:
        w = _wide(table, column)
        try:
            d = paired_difference_ci(scale * w[larger].to_numpy(float), scale * w[reference].to_numpy(float),
                                     n_resamples=n_resamples, seed=seed)
        except ValueError as exc:
            raise ValueError(f"{column}, {larger} against {reference}: {exc}") from exc
        return tuple(float(v) for v in d)  # type: ignore[return-value]

    recall = diff("context_recall", 100.0)
    per_token = diff("answer_per_1k_tokens", 100.0)
    answer = diff("answer", 100.0)
    tok = _wide(table, "retrieved_tokens")
    ratio = float(tok[larger].mean() / tok[reference].mean())
    if recall[1] > 0 and answer[2] < 0:
        verdict = "supports"
    elif recall[2] < 0 or answer[1] > 0:
        verdict = "contradicts"
    elif answer[1] > -delta:
        verdict = f"no dilution larger than {delta:g} points"
    else:
        verdict = "cannot tell"
    return {"recall_diff": recall, "per_token_diff": per_token, "answer_diff": answer,
            "tokens_ratio": ratio, "verdict": verdict}


def dilution_panel(
    sweep: Sweep,
    entry: Any,
    *,
    tables: Mapping[str, pd.DataFrame] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """The analysis plan's dilution verdict under its primary specification and every declared
    alternative, judged on the answers themselves (:mod:`chunkwise.evaluation.robustness`).

    Each specification (:func:`chunkwise.plan.specifications`) names ``retriever``,
    ``larger_tokens``, ``reference_tokens``, the answer ``metric`` (a column of the sweep's scores),
    ``missing`` (``"drop"``: an item without a score under either size leaves the pair; ``"zero"``: it
    is scored 0, the sensitivity the plan declares) and ``interval`` / ``confidence``. Its value per
    item is the answer score under the larger size minus under the reference, in points.

    Parameters
    ----------
    sweep : Sweep
        :func:`run_sweep`'s output, scored, holding every configuration the plan names.
    entry : chunkwise.plan.PlanEntry
        The plan's ``longer-chunks-dilute`` entry (rule ``difference``).
    tables : mapping, optional
        Metric -> :func:`item_table` of the sweep for that metric (built from ``sweep`` for a
        metric not given). The items are paired as :func:`dilution_test` pairs them, so the
        primary's interval is that function's ``answer_diff``.
    n_resamples, seed
        Of the bootstrap intervals.

    Returns
    -------
    (Robustness, DataFrame)
        :func:`chunkwise.evaluation.robustness.classify`'s result, and one row per specification:
        ``specification``, ``retriever``, ``sizes``, ``metric``, ``missing``, ``interval``,
        ``estimate``, ``low``, ``high`` (points), ``n``, ``mde`` (points at 80% power), ``verdict``.

    Raises
    ------
    ValueError
        If the sweep was not scored, the entry's rule is not ``difference``, or a specification
        names a configuration, metric or ``missing`` value the sweep does not have.
    """
    from chunkwise.evaluation.robustness import classify, contrast
    from chunkwise.plan import specifications

    if sweep.scores is None:
        raise ValueError("the sweep was run with score=False; rerun it with score=True")
    if entry.rule != "difference":
        raise ValueError(f"plan entry {entry.entry_id!r} has rule {entry.rule!r}; the dilution panel reads 'difference'")
    tables = dict(tables or {})
    results, rows = [], []
    for name, spec in specifications(entry):
        metric = spec["metric"]
        if metric not in tables:
            if metric not in sweep.scores.columns:
                raise ValueError(f"{name}: metric {metric!r} is not among the sweep's scores "
                                 f"({', '.join(c for c in sweep.scores.columns if c not in ('ID', 'method'))})")
            tables[metric] = item_table(sweep.answers, sweep.scores, sweep.chunk_texts, metric)
        wide = _wide(tables[metric], "answer")
        larger = configuration_name(spec["retriever"], int(spec["larger_tokens"]))
        ref = configuration_name(spec["retriever"], int(spec["reference_tokens"]))
        for m in (larger, ref):
            if m not in wide.columns:
                raise ValueError(f"{name}: configuration {m!r} is not in the sweep ({', '.join(wide.columns)})")
        a, b = 100.0 * wide[larger].to_numpy(float), 100.0 * wide[ref].to_numpy(float)
        if spec["missing"] == "zero":
            a, b = np.nan_to_num(a, nan=0.0), np.nan_to_num(b, nan=0.0)
        elif spec["missing"] != "drop":
            raise ValueError(f"{name}: missing must be 'drop' or 'zero', got {spec['missing']!r}")
        r = contrast(name, a, reference=b, delta=entry.delta, method=spec["interval"],
                     confidence=spec["confidence"], words=entry.words, n_resamples=n_resamples, seed=seed)
        results.append(r)
        rows.append({"specification": name, "retriever": spec["retriever"],
                     "sizes": f"{spec['larger_tokens']} vs {spec['reference_tokens']}", "metric": metric,
                     "missing": spec["missing"], "interval": spec["interval"], "estimate": r.estimate,
                     "low": r.low, "high": r.high, "n": r.n, "mde": r.mde, "verdict": r.verdict})
    rob = classify(results[0], results[1:], delta=entry.delta, unit="points")
    return rob, pd.DataFrame(rows)


def chapter_answer(
    effects: pd.DataFrame,
    agreement: Mapping[str, Any],
    dilution: Mapping[str, Mapping[str, Any]],
    *,
    reference_size: int,
    answer_metric: str,
    answer_label: str,
    n_items: int,
    pool_articles: int,
    generator: str,
    primary_retriever: str = "dense",
    robustness: Any = None,
) -> str:
    """The chapter's answer box (MyST markdown), every number from the run.

    Parameters
    ----------
    effects : DataFrame
        :func:`size_effects`' output.
    agreement : mapping
        :func:`rank_agreement`'s output (context recall against the answer metric).
    dilution : mapping
        ``{retriever: dilution_test(...)}`` for the largest size against the reference.
    reference_size : int
        The size the effects are against (tokens).
    answer_metric, answer_label : str
        The score column the answer box reads and how to name it.
    n_items : int
        Items per configuration.
    pool_articles : int
        Articles in the retrieval pool.
    generator : str
        The generator's name as the prose gives it.
    primary_retriever : str, default "dense"
        The retriever named first (the dilution verdict of the findings page).
    robustness : chunkwise.evaluation.robustness.Robustness, optional
        :func:`dilution_panel`'s class of the dilution verdict, stated beside it.

    Returns
    -------
    str
        Markdown (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (which
        chunk size to use within the sizes tested: whether any moved the answers beyond the
        noise against ``reference_size``, what the largest costs in tokens the generator
        reads, and the dilution verdict of ``primary_retriever`` with its robustness class),
        then the folded details: four bullet points, each a bold question or finding with its
        numbers and intervals.

    Raises
    ------
    ValueError
        If ``effects`` has no row of ``answer_metric`` or ``primary_retriever`` has no dilution test.
    """
    from chunkwise.answerbox import answer_box, capped, verdict_with_class
    from chunkwise.evaluation.stats import describe_interval

    ans = effects[effects["measure"] == answer_metric]
    if ans.empty:
        raise ValueError(f"effects has no {answer_metric!r} rows; pass size_effects(..., metrics=[{answer_metric!r}])")
    if primary_retriever not in dilution:
        raise ValueError(f"no dilution test for {primary_retriever!r}; got {sorted(dilution)}")
    retrievers = list(dict.fromkeys([primary_retriever, *ans["retriever"]]))
    parts = []
    for r in retrievers:
        rows = ans[ans["retriever"] == r].sort_values("chunk_size_tokens")
        said = [f"{int(x.chunk_size_tokens)} tokens {describe_interval(x.diff, x.low, x.high)}"
                for x in rows.itertuples()]
        parts.append(f"{r}: " + ", ".join(said))
    moved = ans[(ans["low"] > 0) | (ans["high"] < 0)]
    headline = ("**No chunk size moved the answers beyond the noise.**" if moved.empty else
                f"**{len(moved)} of {len(ans)} chunk-size changes moved the answers beyond the noise.**")
    lines = [
        f"- {headline} {answer_label} against {reference_size}-token chunks (CRUD-RAG's default), "
        f"points with paired 95% intervals over {n_items} one-document questions: " + "; ".join(parts) + ".",
    ]
    rho = agreement
    if rho["low"] > 0:
        reading = ": they come in the same order, so here the configuration that retrieves better answers better."
    elif rho["high"] < 0:
        reading = (": they come in opposite orders, so here the configurations that put more of the reference's "
                   "words in front of the generator answered worse.")
    else:
        reading = ": the interval includes 0, so this run cannot say that the better retriever answers better."
    lines.append(
        f"- **Does retrieval predict the answers?** The {rho['n_configs']} configurations ranked by the share of "
        f"the reference answer's words found in the retrieved chunks and by {answer_label} give Spearman's rho "
        f"{rho['rho']:+.2f} [{rho['low']:+.2f}, {rho['high']:+.2f}] (item bootstrap, {rho['n_items']} items "
        f"scored under every configuration)" + reading)
    d = dilution[primary_retriever]
    rec, per, tok = d["recall_diff"], d["per_token_diff"], d["tokens_ratio"]
    klass = f" ({robustness.describe()})" if robustness is not None else ""
    lines.append(
        f"- **Do longer chunks dilute the answers?** With {primary_retriever} retrieval and the largest chunks "
        f"against {reference_size} tokens the generator reads {tok:.1f} times as many tokens and recall of the "
        f"reference's words moves {describe_interval(*rec)} points, while {answer_label} itself moves "
        f"{describe_interval(*d['answer_diff'])}: **{d['verdict']}**{klass}"
        + "".join(f"; {r}: {v['verdict']}" for r, v in dilution.items() if r != primary_retriever)
        + f". {answer_label} per 1,000 retrieved tokens moves {describe_interval(*per)}, a description only: "
        "it falls whenever the tokens grow faster than the score.")
    lines.append(
        f"- The generator is {generator} and the pool {pool_articles} articles, not the paper's models and "
        "its 80,000 documents, so only the direction of each effect can be held against the paper.")
    # The lead: sizes, counts, one ratio and fixed words, so its length is bounded whatever the run gives.
    sizes = sorted({int(x) for x in ans["chunk_size_tokens"]} | {int(reference_size)})
    largest = sizes[-1]
    if moved.empty:
        action = (f"**No size from {sizes[0]} to {largest} tokens moved the answers beyond the noise against "
                  f"CRUD-RAG's {reference_size}-token default; choose by cost**")
    else:
        n_up, n_down = int((moved["low"] > 0).sum()), int((moved["high"] < 0).sum())
        action = (f"**Chunk size matters**: {len(moved)} of {len(ans)} changes from CRUD-RAG's {reference_size}-token "
                  f"default moved the answers beyond the noise ({n_up} up, {n_down} down)")
    said = {"supports": "yes", "contradicts": "no"}.get(str(d["verdict"]), str(d["verdict"]))
    dilute = (verdict_with_class(said, robustness, max_words=6) if robustness is not None else
              f"**{capped(said, 6, 'see the details')}**")
    lead = (f"{action}{': ' if moved.empty else '; '}{largest}-token chunks make the generator read {tok:.1f} times as many tokens. "
            f"Do longer chunks dilute the answers? {dilute}.")
    return answer_box(lead, "\n".join(lines))


#: How :func:`larger_chunks_word` and the paper's stated direction are written.
DIRECTION_WORDS = {"larger": "larger helps", "smaller": "larger hurts"}


def larger_chunks_word(low: float, high: float) -> str:
    """The direction of a larger-minus-reference interval: ``"larger helps"``, ``"larger hurts"``
    or ``"cannot tell"`` (the interval includes 0, or is NaN)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "cannot tell"
    from chunkwise.evaluation.stats import interval_side

    return interval_side(low, high, ("larger helps", "larger hurts", "cannot tell"))


def load_paper_reference(path: Any) -> dict[str, Any]:
    """What CRUD-RAG states about chunk size: ``data/crud/crud_rag_chunk_size_paper.json``.

    Parameters
    ----------
    path : path-like
        The JSON file (``paper``, ``directions``, ``table_rows``; see its ``_about``).

    Returns
    -------
    dict
        ``paper`` (citation), ``about``, ``baseline_setting`` (dict), ``directions`` (DataFrame:
        ``task``, ``direction`` in {"larger", "smaller"}, ``statement``, ``source``) and ``table``
        (DataFrame: ``task``, ``chunk_size_tokens``, ``metric``, ``value`` in percent; empty when
        the paper's numbers are not in the file).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If it is not JSON, lacks a key, or a direction or table row is malformed.
    """
    import json
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file; the chapter's default is ../data/crud/crud_rag_chunk_size_paper.json")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not JSON ({exc})") from None
    for key in ("paper", "directions", "table_rows"):
        if key not in doc:
            raise ValueError(f"{p}: no {key!r} key; see the file's _about for its layout")
    directions = pd.DataFrame(doc["directions"], columns=["task", "direction", "statement", "source"])
    bad = [d for d in directions["direction"] if d not in DIRECTION_WORDS]
    if bad:
        raise ValueError(f"{p}: a direction is 'larger' or 'smaller' (which chunks do better), got {bad[0]!r}")
    table = pd.DataFrame(doc["table_rows"], columns=["task", "chunk_size_tokens", "metric", "value"])
    if not table.empty:
        for col in ("chunk_size_tokens", "value"):
            if not pd.to_numeric(table[col], errors="coerce").notna().all():
                raise ValueError(f"{p}: table_rows' {col} must be numbers")
        table = table.astype({"chunk_size_tokens": int, "value": float})
    return {"paper": doc["paper"], "about": doc.get("_about", ""), "baseline_setting": doc.get("baseline_setting", {}),
            "directions": directions, "table": table}


def pooled_rank_correlation(
    table: pd.DataFrame,
    x: str = "context_recall",
    y: str = "answer",
    *,
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Spearman's rho over every (configuration, item) row, with an interval that resamples items.

    Where :func:`rank_agreement` asks whether the configurations are ordered alike, this asks
    whether, question by question, more of ``x`` goes with more of ``y``. The rows of one item
    are not independent (the same question under every configuration), so the bootstrap draws
    items with replacement and keeps all their rows (a cluster bootstrap).

    Parameters
    ----------
    table : DataFrame
        :func:`item_table`'s output.
    x, y : str
        Columns to correlate; rows missing either are dropped.
    n_resamples, seed, confidence
        Of the percentile cluster bootstrap over items.

    Returns
    -------
    dict
        ``rho``, ``low``, ``high``, ``n_rows`` and ``n_items``. A resample in which either column
        is constant gives no rho and is skipped.

    Raises
    ------
    ValueError
        A column missing, fewer than 3 complete rows or 2 items, a constant column, or a bad
        ``n_resamples`` / ``confidence``.
    """
    from scipy.stats import spearmanr

    _check_bootstrap(n_resamples, confidence)
    for c in ("ID", x, y):
        if c not in table.columns:
            raise ValueError(f"table has no column {c!r}; pass item_table()'s output")
    t = table[["ID", x, y]].dropna()
    ids = t["ID"].astype(str).to_numpy()
    items = np.unique(ids)
    if len(t) < 3 or len(items) < 2:
        raise ValueError(f"need at least 3 rows with both {x} and {y} over 2 or more items, got {len(t)} rows "
                         f"over {len(items)} item(s)")
    ax, ay = t[x].to_numpy(float), t[y].to_numpy(float)
    if np.ptp(ax) == 0 or np.ptp(ay) == 0:
        raise ValueError(f"{x if np.ptp(ax) == 0 else y} is the same on every row: a rank correlation is undefined")
    rho = float(spearmanr(ax, ay).statistic)
    rows_of = {i: np.flatnonzero(ids == i) for i in items}
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_resamples):
        idx = np.concatenate([rows_of[i] for i in rng.choice(items, len(items), replace=True)])
        bx, by = ax[idx], ay[idx]
        if np.ptp(bx) == 0 or np.ptp(by) == 0:
            continue
        boot.append(spearmanr(bx, by).statistic)
    low, high = _percentile_interval(boot, confidence, estimate=rho)
    return {"rho": rho, "low": float(low), "high": float(high), "n_rows": int(len(t)), "n_items": int(len(items))}
