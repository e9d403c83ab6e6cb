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
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["context_recall", "dilution_test", "item_table", "rank_agreement"]


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

    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive int, got {n_resamples!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence is a fraction in (0, 1), e.g. 0.95; got {confidence!r}")
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
    q = 100 * (1 - confidence) / 2
    low, high = (np.percentile(boot, [q, 100 - q]) if boot else (np.nan, np.nan))
    return {"rho": rho, "low": float(low), "high": float(high), "n_configs": int(wx.shape[1]),
            "n_items": int(n), "means": means}


def dilution_test(
    table: pd.DataFrame,
    reference: str,
    larger: str,
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """The guide's dilution claim for one pair of configurations (same retriever, larger chunks).

    "A chunker that returns longer chunks can raise recall while diluting what the generator
    reads": with ``larger`` against ``reference``, is ``context_recall`` up and
    ``answer_per_1k_tokens`` down, each by a paired 95% interval that excludes 0?

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
        ``"supports"`` (recall up and per-token score down), ``"contradicts"`` (recall not up or
        per-token score up, each shown by an interval) or ``"cannot tell"``.

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
    if recall[1] > 0 and per_token[2] < 0:
        verdict = "supports"
    elif recall[2] < 0 or per_token[1] > 0:
        verdict = "contradicts"
    else:
        verdict = "cannot tell"
    return {"recall_diff": recall, "per_token_diff": per_token, "answer_diff": answer,
            "tokens_ratio": ratio, "verdict": verdict}
