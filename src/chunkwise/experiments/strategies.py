"""Chapter 5: every strategy of the chunking guide's table, measured on the Chroma protocol.

The guide the book starts from (``shared/seeds``; "Semantic Chunking for RAG", table "Semantic
Chunking vs. Other Chunking Strategies") lists eight strategies with a "Cost to run" and a "Watch
out for" column, and mentions contextual chunking. This module names one engine spec per
strategy (:data:`STRATEGIES`), gathers one row per strategy from a
:class:`~chunkwise.evaluation.grid.GridResult` with paired bootstrap intervals against a
baseline (:func:`strategy_table`), adds boundary statistics that test the "Watch out for"
claims (:func:`boundary_stats`), and reads the cold costs measured by
``benchmarks/strategies_cold.py`` (:func:`cold_costs`).
"""

from __future__ import annotations

import bisect
import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.tokens import get_encoding

__all__ = ["STRATEGIES", "Strategy", "boundary_stats", "cold_costs", "strategy_table"]


@dataclass(frozen=True)
class Strategy:
    """One row of the guide's table and the spec that measures it.

    Attributes
    ----------
    name : str
        The guide's row name.
    spec : str
        The engine spec (:func:`chunkwise.chunkers.specs.parse_spec`).
    guide_cost, guide_watch : str
        The guide's "Cost to run" and "Watch out for" claims, paraphrased (facts cited from the
        guide, not its wording).
    """

    name: str
    spec: str
    guide_cost: str
    guide_watch: str


#: The guide's rows (and contextual chunking, which it discusses below the table), one spec each;
#: sizes in cl100k_base tokens, 200 where a size applies (the size of the guide's quoted
#: recursive result and of chapter 2's best rows).
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("Fixed-size", "TokenText:200", "lowest", "cuts through sentences and topics"),
    Strategy("Recursive character", "Recursive:200", "low", "LangChain's default length counts characters"),
    Strategy("Sentence-based", "Sentence:200", "low", "sentence detection fails on abbreviations and code"),
    Strategy("Structure-based", "Structure:200", "low", "uneven chunks when formatting is inconsistent"),
    Strategy("Semantic (Kamradt)", "Kamradt", "medium: every sentence window is embedded at ingestion",
             "no size cap in LangChain; the threshold is relative to the document"),
    Strategy("Semantic (cluster)", "Cluster:200", "medium: every sentence window is embedded at ingestion",
             "(Chroma's variant with a size cap)"),
    Strategy("Hierarchical", "Hierarchical:200:800:0.5", "medium: more chunks to embed and store",
             "more index and retriever plumbing"),
    Strategy("LLM-based", "LLM", "highest: tens of minutes in Chroma's test",
             "cost, latency, and text rewritten by the model"),
    Strategy("Late chunking", "Late:200", "medium: one long-context embedding pass per document",
             "needs token vectors from a long-context embedding model"),
    Strategy("Contextual", "Contextual:200", "(not in the table) one LLM call per chunk",
             "(not in the table) works on top of any boundaries"),
)


def boundary_stats(docs: Mapping[str, str], chunkings: Mapping[str, Mapping[str, Sequence[tuple[int, int]]]]) -> pd.DataFrame:
    """Shape of each chunking: sizes and where its boundaries fall.

    Parameters
    ----------
    docs : mapping name -> text
    chunkings : mapping label -> (document -> list of (start, end))
        E.g. :attr:`chunkwise.evaluation.grid.GridResult.chunks`.

    Returns
    -------
    DataFrame, one row per label
        ``n_chunks``; ``mean_tokens``, ``max_tokens`` and ``cv_tokens`` (standard deviation /
        mean) of the chunks' cl100k_base token counts; ``mid_sentence_cuts``: share of chunk
        ends, the documents' own ends excluded, that fall inside a sentence of chunkwise's
        robust splitter (:func:`chunkwise.text.split_sentences`), i.e. not in the whitespace
        between one sentence's end and the next one's start.

    Raises
    ------
    ValueError
        If a chunking names a document not in ``docs``.
    """
    from chunkwise.text import split_sentences

    enc = get_encoding("cl100k_base")
    ok_ends: dict[str, list[tuple[int, int]]] = {}
    for name, text in docs.items():
        sents = split_sentences(text)
        gaps = []
        for a, b in zip(sents, sents[1:]):
            gaps.append((a.end, b.start))
        ok_ends[name] = gaps
    rows = []
    for label, by_doc in chunkings.items():
        sizes: list[int] = []
        cuts = inside = 0
        for name, spans in by_doc.items():
            if name not in docs:
                raise ValueError(f"chunking {label!r} names document {name!r}, which is not among the documents.")
            text = docs[name]
            sizes += [len(t) for t in enc.encode_ordinary_batch([text[s:e] for s, e in spans])]
            gaps = ok_ends[name]
            gap_starts = [g[0] for g in gaps]
            for _, e in spans:
                if e >= len(text.rstrip()):
                    continue
                cuts += 1
                i = bisect.bisect_right(gap_starts, e) - 1
                if not (i >= 0 and gaps[i][0] <= e <= gaps[i][1]):
                    inside += 1
        arr = np.asarray(sizes, dtype=float) if sizes else np.zeros(1)
        rows.append({
            "chunker": label,
            "n_chunks": len(sizes),
            "mean_tokens": round(float(arr.mean()), 1),
            "max_tokens": int(arr.max()),
            "cv_tokens": round(float(arr.std() / arr.mean()), 2) if arr.mean() else 0.0,
            "mid_sentence_cuts": round(inside / cuts, 3) if cuts else 0.0,
        })
    return pd.DataFrame(rows).set_index("chunker")


def cold_costs(path: str | Path, corpora: Sequence[str]) -> pd.DataFrame:
    """Cold costs per spec from ``benchmarks/strategies_cold.py``'s CSV, summed over ``corpora``.

    Returns
    -------
    DataFrame indexed by spec string
        ``cold_seconds`` (chunking + embedding, from runs that embedded something: texts
        through the embedder, or late-chunking windows through the encoder),
        ``corpora_measured`` (how many of ``corpora`` have a cold row), ``late_windows``,
        ``late_encoder_tokens`` (MiniLM word pieces through the encoder), ``max_load``
        (highest 1-minute load average seen during those runs). Specs without a cold row are
        absent. An empty frame when the file does not exist.
    """
    p = Path(path)
    cols = ["cold_seconds", "corpora_measured", "late_windows", "late_encoder_tokens", "max_load"]
    if not p.is_file():
        return pd.DataFrame(columns=cols)
    with p.open() as f:
        recs = [
            r for r in csv.DictReader(f)
            if r["corpus"] in set(corpora) and (int(r["n_embedded"] or 0) > 0 or int(r["late_windows"] or 0) > 0)
        ]
    out: dict[str, dict[str, Any]] = {}
    for r in recs:
        o = out.setdefault(r["spec"], dict.fromkeys(cols, 0.0))
        o["cold_seconds"] += float(r["index_seconds"])
        o["corpora_measured"] += 1
        o["late_windows"] += int(r["late_windows"])
        o["late_encoder_tokens"] += int(r["late_encoder_tokens"])
        o["max_load"] = max(o["max_load"], float(r["load_1min"]))
    df = pd.DataFrame.from_dict(out, orient="index", columns=cols)
    return df.astype({"corpora_measured": int, "late_windows": int, "late_encoder_tokens": int})


def strategy_table(
    result: Any,
    baseline: str,
    retriever: str = "dense",
    k: int = 5,
    metrics: Sequence[str] = ("recall", "precision_omega"),
    n_resamples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per chunker of ``result`` at (``retriever``, ``k``): metrics, paired CIs, costs.

    Parameters
    ----------
    result : GridResult
    baseline : str
        The baseline chunker label (e.g. ``"Recursive 200"``).
    metrics : sequence of str
        Metrics given a paired interval against the baseline (percentile bootstrap over the
        questions, :meth:`GridResult.bootstrap`).

    Returns
    -------
    DataFrame indexed by chunker label
        ``recall``, ``precision``, ``iou``, ``precision_omega`` (percent); for each of
        ``metrics``, ``<metric>_diff`` and ``<metric>_ci`` (percentage points, baseline
        excluded); ``n_chunks``, ``mean_chunk_tokens``, ``embedded_tokens``,
        ``retrieved_tokens``, ``llm_calls``, ``llm_seconds``.

    Raises
    ------
    ValueError
        When the baseline or the (retriever, k) cell is not in the result.
    """
    t = result.table
    sub = t[(t["retriever"] == retriever) & (t["k"] == k)].set_index("chunker")
    if sub.empty:
        raise ValueError(f"no cell with retriever {retriever!r} and k={k} in the result.")
    if baseline not in sub.index:
        raise ValueError(f"baseline {baseline!r} is not a chunker of the result; use one of {list(sub.index)}.")
    base_cell = sub.loc[baseline, "cell"]
    out = pd.DataFrame(index=sub.index)
    for m in ("recall", "precision", "iou", "precision_omega"):
        out[m] = (100 * sub[m]).round(1)
    cells = list(sub["cell"])
    for m in metrics:
        scores = result.scores(m)[cells]
        from chunkwise.evaluation.stats import paired_bootstrap

        b = paired_bootstrap(scores, base_cell, n_resamples=n_resamples, seed=seed, metric=m).table
        b = b.rename(index=dict(zip(cells, sub.index)))
        out[f"{m}_diff"] = (100 * b["diff"]).round(1)
        out[f"{m}_ci"] = [
            "baseline" if name == baseline else f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"
            for name, lo, hi in zip(b.index, b["diff_low"], b["diff_high"])
        ]
    for c in ("n_chunks", "mean_chunk_tokens", "embedded_tokens", "retrieved_tokens", "llm_calls", "llm_seconds"):
        if c in sub.columns:
            out[c] = sub[c].round(1) if sub[c].dtype.kind == "f" else sub[c]
    return out
