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

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from chunkwise.evaluation.stats import describe_interval, interval_side
from chunkwise.llm.cache import NotCachedError

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "STRATEGIES", "NotCachedError", "Strategy", "boundary_stats", "cache_only", "chapter_answer", "ci_words",
    "cold_costs", "compare_to_baseline", "guide_check", "llm_chunker_runs", "questions_inside", "retrieved_columns",
    "runnable_from_cache", "strategy_notes", "strategy_table",
]


def cache_only(client: Any) -> Any:
    """Switch ``client`` (an :class:`~chunkwise.llm.LLMClient`, e.g. ``OnDemandLocalClient``) to
    ``cache_mode="only"``: a request missing from its cache raises
    :class:`~chunkwise.llm.NotCachedError` instead of reaching the model (no server is started).
    Returns the same client.

    Raises
    ------
    ValueError
        If ``client`` is not an LLMClient or has no cache.
    """
    from chunkwise.llm import LLMClient

    if not isinstance(client, LLMClient):
        raise ValueError(f"cache_only needs a chunkwise.llm.LLMClient, got {type(client).__name__}.")
    if client.cache is None:
        raise ValueError("cache_only needs a client with a cache (it has cache=False or cache_mode='off').")
    client.cache_mode = "only"
    return client


def runnable_from_cache(specs: Sequence[str], docs: Mapping[str, str], llm: ChatModel, cache_dir: Any = None) -> dict[str, str]:
    """For each LLM-using spec (``LLM``, ``Contextual:...``), whether it runs from the caches alone.

    Chunks every document with a :func:`cache_only` client (span cache first, then the LLM
    cache). Returns spec -> ``"cached"`` or the reason it would need the model (``"not cached
    for <doc>, <doc>"``, every document with a missing reply, in ``docs`` order); specs that use
    no LLM are left out.
    """
    from chunkwise.chunkers.specs import chunk_corpus, parse_spec

    out = {}
    for s in specs:
        spec = parse_spec(s)
        if spec.kind.needs != "llm":
            continue
        if llm is None:
            out[s] = "no LLM client"
            continue
        missing = []
        for name, text in docs.items():
            try:
                chunk_corpus(spec, name, text, None, llm, cache_dir)
            except NotCachedError:
                missing.append(name)
        out[s] = f"not cached for {', '.join(missing)}" if missing else "cached"
    return out


def llm_chunker_runs(docs: Mapping[str, str], llm: ChatModel) -> pd.DataFrame:
    """What the LLM chunker's model did on each document: windows, re-asks, splits and cost.

    Runs :class:`~chunkwise.chunkers.LLMSemanticChunker` (the ``"LLM"`` spec's settings: 50-token
    pieces, windows of about 800 tokens) on each document through ``llm`` (a cache-only client
    replays the committed replies and raises :class:`~chunkwise.llm.NotCachedError` on a miss).

    Returns
    -------
    DataFrame indexed by document
        ``pieces``, ``windows`` (answered requests), ``repairs`` (re-asks after an invalid reply),
        ``windows_without_split``, ``chunks``, ``mean_chunk_tokens`` (cl100k_base),
        ``llm_seconds``, ``llm_prompt_tokens``, ``llm_completion_tokens`` (what the requests cost
        when they were made, cached or not), and a last row ``all`` with the sums (the mean
        weighted by chunks).
    """
    from chunkwise.chunkers.specs import make_chunker, parse_spec
    from chunkwise.llm.client import model_cost
    from chunkwise.tokens import count_tokens

    rows = {}
    for name, text in docs.items():
        chunker = make_chunker(parse_spec("LLM"), None, llm)
        before = llm.stats()
        chunks = chunker.split(text)
        after = llm.stats()

        st = chunker.last_stats
        rows[name] = {
            "pieces": st["pieces"], "windows": st["windows"], "repairs": st["repairs"],
            "windows_without_split": st["windows_without_split"], "chunks": len(chunks),
            "mean_chunk_tokens": sum(count_tokens(c.text) for c in chunks) / max(len(chunks), 1),
            "llm_seconds": model_cost(before, after, "latency_s"),
            "llm_prompt_tokens": int(model_cost(before, after, "prompt_tokens")),
            "llm_completion_tokens": int(model_cost(before, after, "completion_tokens")),
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    if len(out):
        total = out.sum(numeric_only=True)
        total["mean_chunk_tokens"] = float((out["mean_chunk_tokens"] * out["chunks"]).sum() / max(out["chunks"].sum(), 1))
        out.loc["all"] = total
    ints = [c for c in out.columns if c not in ("mean_chunk_tokens", "llm_seconds")]
    out[ints] = out[ints].astype(int)
    return out.round({"mean_chunk_tokens": 1, "llm_seconds": 0})


REPORT_LLM_ROW = "LLM (GPT-4o)"


def llm_vs_report(runs: pd.DataFrame, recall: float, precision_omega: float, report: pd.DataFrame, ours: str) -> pd.DataFrame:
    """Our LLM-chunker row and its cost beside the report's GPT-4o row, for reading.

    Parameters
    ----------
    runs : DataFrame
        :func:`llm_chunker_runs` output; its ``all`` row gives the chunk size and the cost.
    recall, precision_omega : float
        Our row's means over the questions, in percent (from the chapter's table).
    report : DataFrame
        ``data/chroma/chroma_report_results.csv`` (the report's row :data:`REPORT_LLM_ROW`,
        text-embedding-3-large: Smith & Troynikov, 2024).
    ours : str
        Our column's title (the model, the embedder and the corpora it covers).

    Returns
    -------
    DataFrame of str
        Rows: mean chunk tokens (cl100k_base), recall and precision_Ω (%), requests to the model
        (windows plus re-asks), re-asks after an invalid reply, windows where the model named no
        split, prompt and generated tokens, model seconds; columns ``ours`` and the report's.
        The report gives no cost, so its cost cells say "not given".

    Raises
    ------
    ValueError
        If ``runs`` has no ``all`` row or ``report`` no GPT-4o row.
    """
    if "all" not in runs.index:
        raise ValueError("runs has no 'all' row: pass llm_chunker_runs(...) output for at least one document.")
    rows = report[report["chunker"] == REPORT_LLM_ROW]
    if rows.empty:
        raise ValueError(f"the report file has no {REPORT_LLM_ROW!r} row; pass data/chroma/chroma_report_results.csv.")
    a, g = runs.loc["all"], rows.iloc[0]
    index = ["mean chunk tokens", "recall (%)", "precision_Ω (%)", "requests to the model",
             "re-asks after an invalid reply", "windows with no split named", "prompt tokens",
             "generated tokens", "model seconds"]
    mine = [f"{a['mean_chunk_tokens']:.0f}", f"{recall:.1f}", f"{precision_omega:.1f}",
            f"{int(a['windows'] + a['repairs']):,}", f"{int(a['repairs']):,}",
            f"{int(a['windows_without_split']):,}", f"{int(a['llm_prompt_tokens']):,}",
            f"{int(a['llm_completion_tokens']):,}", f"{float(a['llm_seconds']):,.0f}"]
    theirs = [f"{g['mean_chunk_tokens']:.0f}", f"{g['recall_mean']:.1f}", f"{g['precision_omega_mean']:.1f}"]
    theirs += ["not given"] * (len(index) - len(theirs))
    title = f"Chroma's report ({REPORT_LLM_ROW.split('(')[1].rstrip(')')}, {g['embedding_model']}, five corpora)"
    return pd.DataFrame({ours: mine, title: theirs}, index=index)


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


#: Characters a cut may leave before a sentence's end and still count as a sentence boundary
#: (a recursive splitter that keeps its separator at the start of the next chunk cuts just
#: before the full stop).
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
        Columns of :func:`chunkwise.evaluation.diagnostics.chunk_diagnostics`:
        ``n_chunks``; ``mean_tokens``, ``max_tokens`` and ``cv_tokens`` (standard deviation /
        mean) of the chunks' cl100k_base token counts; ``mid_sentence_cuts``: share of chunk
        ends, the documents' own ends excluded, that fall inside a sentence of chunkwise's
        robust splitter (:func:`chunkwise.text.split_sentences`): not in the whitespace
        between one sentence's end and the next one's start, and not just before a sentence's
        closing punctuation (a cut before the full stop, as a splitter that keeps separators at
        the start of the next chunk makes, counts as a sentence boundary).

    Raises
    ------
    ValueError
        If a chunking names a document not in ``docs``.
    """
    from chunkwise.evaluation.diagnostics import chunk_diagnostics

    cols = ["n_chunks", "mean_tokens", "max_tokens", "cv_tokens", "mid_sentence_cuts"]
    return chunk_diagnostics(docs, chunkings)[cols]


def cold_costs(path: str | Path, corpora: Sequence[str]) -> pd.DataFrame:
    """Cold costs per spec from ``benchmarks/strategies_cold.py``'s CSV, summed over ``corpora``.

    Returns
    -------
    DataFrame indexed by spec string (normalised: ``ChunkerSpec.spec_string()``)
        ``cold_seconds`` (chunking + embedding, from runs that embedded something: texts
        through the embedder, or late-chunking windows through the encoder),
        ``corpora_measured`` (how many of ``corpora`` have a cold row), ``late_windows``,
        ``late_encoder_tokens`` (MiniLM word pieces through the encoder), ``n_embedded`` and
        ``n_chunks`` (texts the embedder computed / chunks: below 1 when some vectors were
        already cached, so the seconds understate a cold run), ``max_load``
        (highest 1-minute load average seen during those runs). Specs without a cold row are
        absent. An empty frame when the file does not exist.
    """
    p = Path(path)
    cols = ["cold_seconds", "corpora_measured", "n_embedded", "n_chunks", "late_windows", "late_encoder_tokens", "max_load"]
    if not p.is_file():
        return pd.DataFrame(columns=cols)
    with p.open() as f:
        recs = [
            r for r in csv.DictReader(f)
            if r["corpus"] in set(corpora) and (int(r["n_embedded"] or 0) > 0 or int(r["late_windows"] or 0) > 0)
        ]
    out: dict[str, dict[str, Any]] = {}
    from chunkwise.chunkers.specs import parse_spec

    coldest: dict[tuple[str, str], dict[str, str]] = {}
    for r in recs:  # several rows of one (spec, corpus): the one that embedded the most
        key = (parse_spec(r["spec"]).spec_string(), r["corpus"])
        if key not in coldest or int(r["n_embedded"] or 0) > int(coldest[key]["n_embedded"] or 0):
            coldest[key] = r
    for (spec, _), r in coldest.items():
        o = out.setdefault(spec, dict.fromkeys(cols, 0.0))
        o["cold_seconds"] += float(r["index_seconds"])
        o["corpora_measured"] += 1
        o["late_windows"] += int(r["late_windows"])
        o["late_encoder_tokens"] += int(r["late_encoder_tokens"])
        o["n_embedded"] += int(r["n_embedded"] or 0)
        o["n_chunks"] += int(r["n_chunks"])
        o["max_load"] = max(o["max_load"], float(r["load_1min"]))
    df = pd.DataFrame.from_dict(out, orient="index", columns=cols)
    return df.astype({c: int for c in cols if c not in ("cold_seconds", "max_load")})


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
        ``metrics``, ``<metric>_diff``, ``<metric>_low``, ``<metric>_high`` and
        ``<metric>_ci`` (paired difference to the baseline and its 95% interval, percentage
        points); ``n_chunks``, ``mean_chunk_tokens``, ``embedded_tokens``,
        ``retrieved_tokens``, ``llm_calls``, ``llm_seconds``, ``llm_prompt_tokens``,
        ``llm_completion_tokens`` (the model cost of the LLM-using rows, replayed from the cache at
        what it cost when made).

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
        out[f"{m}_low"] = (100 * b["diff_low"]).round(1)
        out[f"{m}_high"] = (100 * b["diff_high"]).round(1)
        # a chunker whose every per-question score equals the baseline's (e.g. the same chunks
        # embedded another way that ranks alike) has no interval to show, only that fact
        same = {name: np.array_equal(scores[cell].to_numpy(float), scores[base_cell].to_numpy(float), equal_nan=True)
                for name, cell in zip(sub.index, cells)}
        out[f"{m}_ci"] = [
            "baseline" if name == baseline else "same scores" if same[name] else f"[{100 * lo:+.1f}, {100 * hi:+.1f}]"
            for name, lo, hi in zip(b.index, b["diff_low"], b["diff_high"])
        ]
    for c in ("n_chunks", "mean_chunk_tokens", "embedded_tokens", "retrieved_tokens", "llm_calls", "llm_seconds",
              "llm_prompt_tokens", "llm_completion_tokens"):
        if c in sub.columns:
            out[c] = sub[c].round(1) if sub[c].dtype.kind == "f" else sub[c]
    return out


def retrieved_columns(table: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """A strategy table's quality side: four metrics, then each difference beside its 95% interval.

    Parameters
    ----------
    table : pandas.DataFrame
        From :func:`strategy_table` with its default ``metrics``: ``recall``, ``precision``,
        ``iou``, ``precision_omega`` (percent) and, for ``recall`` and ``precision_omega``,
        ``<metric>_diff``, ``_low``, ``_high`` (percentage points) and ``_ci``.
    baseline : str
        The baseline's label, named in the new columns' headers.

    Returns
    -------
    pandas.DataFrame
        Same index: ``recall``, ``precision``, ``IoU``, ``precision_Ω`` as they are, then
        ``recall minus <baseline>`` and ``precision_Ω minus <baseline>``: for a row whose
        ``_ci`` is an interval (``"[...]"``), the difference and interval in words
        (:func:`~chunkwise.evaluation.stats.describe_interval`), else the ``_ci`` text itself
        (``"baseline"``, ``"same scores"``).

    Raises
    ------
    KeyError
        If ``table`` lacks one of the columns above.
    """
    out = table[["recall", "precision", "iou", "precision_omega"]].rename(
        columns={"iou": "IoU", "precision_omega": "precision_Ω"})
    for m, name in (("recall", "recall"), ("precision_omega", "precision_Ω")):
        out[f"{name} minus {baseline}"] = [
            ci if not ci.startswith("[") else describe_interval(d, lo, hi)
            for d, lo, hi, ci in zip(table[f"{m}_diff"], table[f"{m}_low"], table[f"{m}_high"],
                                     table[f"{m}_ci"])]
    return out


def questions_inside(questions: pd.DataFrame, texts: Mapping[str, str]) -> pd.DataFrame:
    """The questions about one of ``texts`` whose reference excerpts all end inside that text.

    Used when the corpora are cut to their first characters: a question whose excerpt lies
    past the cut could never be answered.

    Parameters
    ----------
    questions : pandas.DataFrame
        One row per question with ``corpus`` and ``references``: a non-empty list of
        references, each a mapping with ``end_index`` or a ``(start, end)`` pair (characters).
    texts : mapping of str to str
        Corpus name -> the (possibly cut) text.

    Returns
    -------
    pandas.DataFrame
        The rows of ``questions`` (index and order kept) whose corpus is in ``texts`` and whose
        largest reference end is at most that text's length.

    Raises
    ------
    ValueError
        If a kept corpus's question has no reference.
    KeyError
        If ``questions`` lacks ``corpus`` or ``references``, or a mapping reference lacks
        ``end_index``.
    """
    def inside(corpus: str, references: Sequence[Any]) -> bool:
        if corpus not in texts:
            return False
        ends = [r["end_index"] if isinstance(r, dict) else r[1] for r in references]
        return max(ends) <= len(texts[corpus])

    keep = [inside(c, refs) for c, refs in zip(questions["corpus"], questions["references"])]
    return questions.loc[np.array(keep, dtype=bool)]


def ci_words(low: float, high: float, what: str, baseline: str) -> str:
    """``"higher than <baseline>"``, ``"lower than ..."`` or ``"not distinguishable from ..."``
    for a paired interval ``[low, high]`` of ``what`` (points), never stronger than the interval."""
    side = interval_side(low, high, ("higher than", "lower than", "not distinguishable from"))
    return f"{what} {side} {baseline} ([{low:+.1f}, {high:+.1f}] points)"


def guide_check(
    table: pd.DataFrame,
    shapes: pd.DataFrame,
    cold: pd.DataFrame,
    labels: Mapping[str, str],
    baseline: str,
    not_run: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The guide's "Cost to run" and "Watch out for" claims next to what was measured.

    Parameters
    ----------
    table : DataFrame
        :func:`strategy_table` (indexed by chunker label; the strategies that ran).
    shapes : DataFrame
        :func:`boundary_stats` of the same chunkings.
    cold : DataFrame
        :func:`cold_costs` (indexed by spec string).
    labels : mapping spec string -> chunker label
        Which row of ``table`` each strategy's spec produced.
    baseline : str
        The baseline's chunker label (a row of ``table`` and ``shapes``).
    not_run : mapping spec string -> reason, optional

    Returns
    -------
    DataFrame, one row per strategy of :data:`STRATEGIES`
        ``strategy``, ``guide_cost``, ``measured_cost``, ``guide_watch``, ``measured_watch``,
        ``retrieval`` (recall and precision_Ω against the baseline, worded by
        :func:`ci_words`).
    """
    from chunkwise.chunkers.specs import parse_spec

    not_run = dict(not_run or {})
    base_spec = next((s for s, lab in labels.items() if lab == baseline), None)
    base_cold = float(cold.loc[base_spec, "cold_seconds"]) if base_spec in cold.index else float("nan")
    rows = []
    for st in STRATEGIES:
        spec = parse_spec(st.spec).spec_string()
        label = labels.get(spec)
        row = {"strategy": st.name, "spec": spec, "guide_cost": st.guide_cost, "guide_watch": st.guide_watch}
        if label is None or label not in table.index:
            reason = not_run.get(spec, "not in this run")
            row.update(measured_cost=f"not run: {reason}", measured_watch="not run", retrieval="not run")
            rows.append(row)
            continue
        t, sh = table.loc[label], shapes.loc[label]
        cost = [f"{int(t['n_chunks'])} chunks", f"{int(t['embedded_tokens']):,} tokens embedded"]
        if spec in cold.index:
            c = cold.loc[spec]
            ratio = float(c["cold_seconds"]) / base_cold if base_cold > 0 else float("nan")
            part = "" if c["n_embedded"] >= c["n_chunks"] or c["late_windows"] else " (partly warm)"
            cost.append(f"{c['cold_seconds']:.0f} s cold on {int(c['corpora_measured'])} corpora{part}"
                        + (f" = {ratio:.1f}x {baseline}" if spec != base_spec and ratio == ratio else ""))
            if c["late_windows"]:
                cost.append(f"{int(c['late_windows'])} encoder windows, {int(c['late_encoder_tokens']):,} word pieces encoded")
        if t.get("llm_calls", 0):
            cost.append(f"{int(t['llm_calls'])} LLM calls ({t['llm_seconds']:.0f} s of model time)")
        b = shapes.loc[baseline]
        kind = st.name.split()[0]
        if kind == "Fixed-size":
            watch = f"{sh['mid_sentence_cuts']:.0%} of its cuts fall inside a sentence ({baseline}: {b['mid_sentence_cuts']:.0%})"
        elif kind == "Recursive":
            watch = f"chunkwise sizes it in cl100k_base tokens: largest chunk {int(sh['max_tokens'])} tokens"
        elif kind == "Sentence-based":
            watch = (f"{sh['mid_sentence_cuts']:.0%} of cuts inside a sentence of the same splitter; whether that splitter "
                     "errs on abbreviations or code needs gold sentence boundaries, not measured here")
        elif kind == "Structure-based":
            watch = f"chunk-size spread (sd/mean) {sh['cv_tokens']:.2f} ({baseline}: {b['cv_tokens']:.2f})"
        elif kind == "Semantic":
            watch = (f"largest chunk {int(sh['max_tokens'])} tokens, mean {sh['mean_tokens']:.0f}, spread {sh['cv_tokens']:.2f} "
                     f"({baseline}: {int(b['max_tokens'])}, {b['mean_tokens']:.0f}, {b['cv_tokens']:.2f})")
        elif kind == "Hierarchical":
            watch = (f"the retriever merges children into parents: {t['retrieved_tokens']:.0f} tokens retrieved per question "
                     f"({baseline}: {table.loc[baseline, 'retrieved_tokens']:.0f})")
        elif kind == "Late":
            watch = "all-MiniLM-L6-v2 gives token vectors but sees 256 word pieces at a time: windows, not whole documents"
        elif kind == "Contextual":
            watch = "boundaries are the recursive chunker's; only the indexed text changes"
        else:
            watch = ""
        row.update(
            measured_cost="; ".join(cost),
            measured_watch=watch,
            retrieval="baseline" if label == baseline else "; ".join([
                ci_words(t["recall_low"], t["recall_high"], "recall", baseline),
                ci_words(t["precision_omega_low"], t["precision_omega_high"], "precision_Ω", baseline),
            ]),
        )
        rows.append(row)
    return pd.DataFrame(rows).set_index("strategy")


def _diff_ci(row: Mapping[str, Any], metric: str) -> str:
    """``"-4.4 points [-8.5, -0.3]"`` from a :func:`strategy_table` row."""
    return f"{row[f'{metric}_diff']:+.1f} points [{row[f'{metric}_low']:+.1f}, {row[f'{metric}_high']:+.1f}]"


def _side(row: Mapping[str, Any], metric: str) -> str:
    """``"ahead"``, ``"behind"`` or ``"within"`` for a row's paired interval of ``metric`` (as
    :func:`ci_words`: never stronger than the interval as shown, to one decimal)."""
    low, high = row[f"{metric}_low"], row[f"{metric}_high"]
    return interval_side(low, high)


def _names(items: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def compare_to_baseline(table: pd.DataFrame, baseline: str, metric: str, what: str) -> str:
    """One clause: which rows of a :func:`strategy_table` are ahead of / behind ``baseline`` in
    ``metric`` beyond the noise (their 95% paired interval excludes 0), with the difference and
    its interval, and how many are within the noise.

    E.g. ``"none has a higher recall beyond the noise; TokenText 200 (-4.4 points [-8.5, -0.3])
    has a lower recall; the other 5 are within the noise"``.
    """
    others = table.drop(index=baseline)
    ahead = [f"{lab} ({_diff_ci(r, metric)})" for lab, r in others.iterrows() if _side(r, metric) == "ahead"]
    behind = [f"{lab} ({_diff_ci(r, metric)})" for lab, r in others.iterrows() if _side(r, metric) == "behind"]
    n_within = len(others) - len(ahead) - len(behind)
    if not ahead and not behind:
        return f"all {n_within} other strategies are within the noise of it" if n_within != 1 else (
            "the other strategy is within the noise of it")
    clauses = [f"{_names(ahead)} {'has' if len(ahead) == 1 else 'have'} a higher {what}" if ahead
               else f"none has a higher {what} beyond the noise"]
    if behind:
        clauses.append(f"{_names(behind)} {'has' if len(behind) == 1 else 'have'} a lower {what}")
    if n_within:
        clauses.append("the other one is within the noise" if n_within == 1
                       else f"the other {n_within} are within the noise")
    return "; ".join(clauses)


def chapter_answer(
    table_all: pd.DataFrame,
    baseline: str,
    *,
    where_all: str,
    n_questions: int,
    table_small: pd.DataFrame | None = None,
    small_labels: Sequence[str] = (),
    where_small: str = "",
    n_questions_small: int = 0,
    cold_by_label: pd.DataFrame | None = None,
    not_run: Mapping[str, str] | None = None,
    retriever: str = "dense retrieval",
    top_k: int = 5,
) -> str:
    """Chapter 5's answer box, built from its tables (so it stays right when rows are added or the
    corpora change).

    Parameters
    ----------
    table_all : DataFrame
        :func:`strategy_table` of the main run (every strategy against ``baseline``).
    baseline : str
        The baseline's chunker label (a row of ``table_all``).
    where_all : str
        The main run's corpora in words (e.g. ``"2 corpora"``); ``n_questions`` its questions.
    table_small, small_labels, where_small, n_questions_small
        The small slice's :func:`strategy_table`, the rows that ran on it only (e.g. Kamradt,
        contextual), the slice in words and its questions; left out when ``small_labels`` is empty.
    cold_by_label : DataFrame, optional
        :func:`cold_costs` re-indexed by chunker label: names the strategy with the highest cold
        indexing cost against the baseline's.
    not_run : mapping spec -> reason, optional
        Strategies that did not run (e.g. LLM calls not cached).

    Returns
    -------
    str
        The answer box (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (which
        strategy to use for recall and how sure, from the 95% paired intervals; the one that gains
        most precision_Ω; whether the strategies run on the small slice only beat the baseline;
        which costs the most), then folded details: recall and precision_Ω against the baseline
        with the intervals of the rows beyond the noise, the costs (cold seconds, LLM calls), the
        small slice, and what did not run (named by :data:`STRATEGIES`).
    """
    from chunkwise.answerbox import answer_box

    base = table_all.loc[baseline]
    sentences = [
        f"On {where_all} ({n_questions} questions; {retriever}, {top_k} chunks per question), the baseline, "
        f"{baseline}, recalls {base['recall']:.1f}% of the evidence at a precision_Ω of "
        f"{base['precision_omega']:.1f}%: "
        + compare_to_baseline(table_all, baseline, "recall", "recall") + "."]
    sentences.append("In precision_Ω, " + compare_to_baseline(table_all, baseline, "precision_omega", "precision_Ω")
                     + ".")
    costs = []
    top_cold = top_llm = None  # (label, cold seconds, x baseline), (label, LLM calls, model seconds)
    labels = list(table_all.index) + [lab for lab in small_labels if table_small is not None]
    if cold_by_label is not None and baseline in cold_by_label.index:
        cold = cold_by_label.loc[[lab for lab in dict.fromkeys(labels) if lab in cold_by_label.index]]
        base_s = float(cold_by_label.loc[baseline, "cold_seconds"])
        llm = {lab for tab in (table_all, table_small) if tab is not None and "llm_calls" in tab.columns
               for lab in tab.index[tab["llm_calls"] > 0]}
        cold = cold[(cold.index != baseline) & ~cold.index.isin(list(llm))]  # LLM time is stated on its own
        if len(cold) and base_s > 0:
            top = cold["cold_seconds"].astype(float).idxmax()
            c = cold.loc[top]
            top_cold = (top, float(c["cold_seconds"]), float(c["cold_seconds"]) / base_s)
            costs.append(f"of the strategies without an LLM, {top} cost the most to index from empty caches "
                         f"({c['cold_seconds']:.0f} s on "
                         f"{int(c['corpora_measured'])} corpora, {c['cold_seconds'] / base_s:.1f}x {baseline}'s "
                         f"{base_s:.0f} s)")
    for tab in (table_all, table_small if small_labels else None):
        if tab is None or "llm_calls" not in tab.columns:
            continue
        for lab, r in tab[tab["llm_calls"] > 0].iterrows():
            if tab is table_small and lab in table_all.index:
                continue  # a row of both tables: its cost on the main run is the one stated
            costs.append(f"{lab} made {int(r['llm_calls']):,} LLM calls for {int(r['n_chunks']):,} chunks "
                         f"({r['llm_seconds']:,.0f} s of model time)")
            if top_llm is None or float(r["llm_seconds"]) > top_llm[2]:
                top_llm = (lab, int(r["llm_calls"]), float(r["llm_seconds"]))
    if costs:
        text = "; ".join(dict.fromkeys(costs))
        sentences.append(text[0].upper() + text[1:] + ".")
    small = [lab for lab in small_labels if table_small is not None and lab in table_small.index]
    if small:
        beyond = []
        for lab in small:
            row = table_small.loc[lab]
            found = [(what, "higher" if _side(row, m) == "ahead" else "lower", _diff_ci(row, m))
                     for m, what in (("recall", "recall"), ("precision_omega", "precision_Ω"))
                     if _side(row, m) != "within"]
            if len(found) == 1 or (found and found[0][1] == found[1][1]):
                beyond.append(f"{lab}'s " + " and ".join(f"{what} ({d})" for what, _, d in found)
                              + f" {'is' if len(found) == 1 else 'are'} {found[0][1]} than {baseline}'s")
            elif found:
                beyond.append(f"{lab}'s " + " and its ".join(f"{what} is {word} ({d})" for what, word, d in found)
                              + f" than {baseline}'s")
        head = f"On {where_small} ({n_questions_small} questions), where {_names(small)} ran, "
        sentences.append(head + (_names(beyond) + ", and every other difference is within the noise" if beyond
                                 else f"every difference from {baseline} is within the noise"))
    if not_run:
        from chunkwise.chunkers.specs import parse_spec

        names = {parse_spec(st.spec).spec_string(): st.name for st in STRATEGIES}
        missing = [names.get(parse_spec(spec).spec_string(), spec) for spec in not_run]
        clause = (f"the {_names(missing)} {'strategy' if len(missing) == 1 else 'strategies'} did not run "
                  f"({_names(list(dict.fromkeys(not_run.values())))})")
        if small:
            sentences[-1] += "; " + clause
        else:
            sentences.append(clause[0].upper() + clause[1:])
    if small or not_run:
        sentences[-1] += "."
    lead = _answer_lead(table_all, baseline, n_questions, table_small, small, n_questions_small,
                        top_cold, top_llm, len(not_run or ()))
    return answer_box(lead, " ".join(sentences))


def _short_label(label: str, instead: str) -> str:
    """``label`` when it has at most 4 words (every label of :data:`STRATEGIES` has), else
    ``instead``: a lead names at most four strategies and must stay within 60 words."""
    from chunkwise.answerbox import capped

    return capped(label, 4, instead)


def _answer_lead(table_all: pd.DataFrame, baseline: str, n_questions: int, table_small: pd.DataFrame | None,
                 small: Sequence[str], n_questions_small: int, top_cold: tuple[str, float, float] | None,
                 top_llm: tuple[str, int, float] | None, n_not_run: int) -> str:
    """The lead of :func:`chapter_answer`: fixed wording, counts, and at most four labels (each
    replaced by a generic phrase past 4 words), so it stays within the answer box's 60 words."""
    others = table_all.drop(index=baseline)

    def ahead_of(table: pd.DataFrame, metric: str) -> pd.DataFrame:
        return table[[_side(r, metric) == "ahead" for _, r in table.iterrows()]]

    base = _short_label(baseline, "the baseline")
    sure = f"{n_questions} questions, 95% paired intervals"
    ahead = ahead_of(others, "recall")
    if len(ahead):
        best = ahead["recall_diff"].astype(float).idxmax()
        lead = (f"**Consider {_short_label(best, 'the strategy with the largest gain')}: it recalls "
                f"{_diff_ci(ahead.loc[best], 'recall')} more than {base}** ({sure}).")
    else:
        lead = f"**Keep {base}: no other strategy recalls more beyond the noise** ({sure})."
    po_ahead = ahead_of(others, "precision_omega")
    if len(po_ahead):
        best_po = po_ahead["precision_omega_diff"].astype(float).idxmax()
        lead += (f" For precision_Ω: {_short_label(best_po, 'another strategy')}, "
                 f"{po_ahead.loc[best_po, 'precision_omega_diff']:+.1f} points.")
    else:
        lead += " None gains precision_Ω."
    if small:
        n_up = sum(any(_side(table_small.loc[lab], m) == "ahead" for m in ("recall", "precision_omega"))
                   for lab in small)
        lead += (f" Of {len(small)} also compared on {n_questions_small} questions, "
                 + ("none is ahead." if not n_up else f"{n_up} {'is' if n_up == 1 else 'are'} ahead."))
    if top_llm is not None and (top_cold is None or top_llm[2] >= top_cold[1]):
        lead += f" {_short_label(top_llm[0], 'An LLM strategy')} costs the most ({top_llm[2]:,.0f} s of model time)."
    elif top_cold is not None:
        lead += (f" {_short_label(top_cold[0], 'One strategy')} costs the most to index ({top_cold[2]:.1f}x "
                 f"{base}).")
    if n_not_run:
        lead += f" {n_not_run} did not run."
    return lead


def strategy_notes(
    table: pd.DataFrame, where: str, cold_by_label: pd.DataFrame | None = None
) -> list[str]:
    """One Markdown list item per row of a :func:`strategy_table`: recall and precision_Ω with
    the paired interval against the baseline, chunks, tokens embedded, LLM calls and cold
    seconds (when measured). ``where`` says which corpora the row ran on."""
    cold = cold_by_label if cold_by_label is not None else pd.DataFrame(columns=["cold_seconds", "corpora_measured"])
    out = []
    for lab, r in table.iterrows():
        extra = f", {int(r['llm_calls']):,} LLM calls ({r['llm_seconds']:,.0f} s)" if r.get("llm_calls", 0) else ""
        cs = cold["cold_seconds"].get(lab)
        n_cold = cold["corpora_measured"].get(lab)
        cold_txt = f", {cs:.0f} s cold ({int(n_cold)} corpora)" if cs is not None and pd.notna(cs) else ""
        out.append(f"- **{lab}** [{where}]: recall {r['recall']:.1f}% ({r['recall_ci']}), precision_Ω "
                   f"{r['precision_omega']:.1f}% ({r['precision_omega_ci']}); {int(r['n_chunks']):,} chunks, "
                   f"{int(r['embedded_tokens']):,} tokens embedded{extra}{cold_txt}")
    return out


#: The guide's "Cost to run" words, in increasing order of cost (the first word of the column).
COST_TIERS = {"lowest": 0, "low": 0, "medium": 1, "highest": 2}


def findings_results(
    table_small: pd.DataFrame,
    cold: pd.DataFrame,
    labels: Mapping[str, str],
    baseline: str,
    n_questions_small: int,
    small_corpora: str,
    contextual_spec: str = "Contextual:200",
    margin_seconds: float = 0.0,
) -> dict[str, Any]:
    """Chapter 5's numbers for the findings page (:func:`chunkwise.findings.write_results`).

    Parameters
    ----------
    table_small : DataFrame
        :func:`strategy_table` of the corpora contextual chunking ran on (recall interval against
        ``baseline``).
    cold : DataFrame
        :func:`cold_costs` (cold seconds per spec string).
    labels : mapping spec string -> chunker label
    baseline : str
        The baseline's label (Recursive 200).
    n_questions_small : int
        Questions scored in ``table_small``.
    small_corpora : str
        What ``table_small`` covers, in words.
    contextual_spec : str
    margin_seconds : float, default 0.0
        The analysis plan's practical margin for the cost order (entry ``cost-column``): each
        timing is one unrepeated run, so two strategies whose cold seconds differ by no more than
        this are not ordered by it.

    Returns
    -------
    dict
        ``contextual_vs_recursive`` (``"contextual ahead"`` / ``"recursive ahead"`` when the
        95% paired recall interval lies above / below 0, ``"cannot tell"``, or ``"not run"``),
        ``contextual_vs_recursive_ci`` (``"+d [low, high]"`` points), ``contextual_n_questions``,
        ``contextual_corpora``; ``cost_order_agrees`` (``"yes"`` when every strategy the guide
        rates low-cost has fewer cold seconds than every one it rates medium, and any rated
        highest has more than all others, each by more than ``margin_seconds``; ``"no"`` when a
        pair is ordered the other way by more than the margin; ``"cannot tell"`` when every pair out
        of order or within the margin is within it; ``"not measured"`` with fewer than one measured
        strategy in two tiers), ``cost_closest_pair`` (the cross-tier pair with the smallest margin,
        and its seconds) and ``cost_closest_margin`` (that margin, seconds) and ``cost_order`` (the measured order, cheapest first,
        with the guide's word). A strategy without a cold-seconds row that made LLM calls in
        ``table_small`` (the LLM chunker) enters with its model seconds there, a lower bound of
        its cold cost on the same corpora.
    """
    from chunkwise.chunkers.specs import parse_spec

    out: dict[str, Any] = {"contextual_n_questions": int(n_questions_small), "contextual_corpora": small_corpora}
    ctx = labels.get(parse_spec(contextual_spec).spec_string())
    if ctx is None or ctx not in table_small.index:
        out.update(contextual_vs_recursive="not run", contextual_vs_recursive_ci="-")
    else:
        r = table_small.loc[ctx]
        side = _side(r, "recall")
        out["contextual_vs_recursive"] = {"ahead": "contextual ahead", "behind": "recursive ahead"}.get(side, "cannot tell")
        out["contextual_vs_recursive_ci"] = describe_interval(r["recall_diff"], r["recall_low"], r["recall_high"])
    measured = []
    for st in STRATEGIES:
        spec = parse_spec(st.spec).spec_string()
        tier = COST_TIERS.get(st.guide_cost.split(":")[0].strip().lower())
        if tier is None:
            continue
        lab = labels.get(spec)
        if spec in cold.index:
            measured.append((float(cold.loc[spec, "cold_seconds"]), tier, st.name, st.guide_cost.split(":")[0]))
        elif lab in table_small.index and float(table_small.loc[lab].get("llm_seconds", 0) or 0) > 0:
            # an LLM strategy has no cold-seconds row: its model time on the same corpora is a lower bound
            measured.append((float(table_small.loc[lab, "llm_seconds"]), tier, st.name + " (model time alone)",
                             st.guide_cost.split(":")[0]))
    measured.sort()
    out["cost_order"] = " < ".join(f"{name} {sec:.0f} s ({word})" for sec, _, name, word in measured) or "-"
    tiers = {t for _, t, _, _ in measured}
    if len(tiers) < 2:
        out["cost_order_agrees"] = "not measured"
    else:
        margin = float(margin_seconds)
        pairs = [(b[0] - a[0], a, b) for a in measured for b in measured if a[1] < b[1]]
        if any(gap < -margin for gap, _, _ in pairs):
            out["cost_order_agrees"] = "no"
        elif all(gap > margin for gap, _, _ in pairs):
            out["cost_order_agrees"] = "yes"
        else:
            out["cost_order_agrees"] = "cannot tell"
        gap, a, b = min(pairs, key=lambda x: x[0])
        out["cost_closest_margin"] = round(float(gap), 2)
        out["cost_closest_pair"] = (f"{a[2]} ({a[3]}) {a[0]:.1f} s against {b[2]} ({b[3]}) {b[0]:.1f} s, "
                                    f"a margin of {gap:+.1f} s (the plan's margin: {margin:g} s, one unrepeated timing)")
    return out


def cost_column_panel(
    table_small: pd.DataFrame,
    cold_path: str | Path,
    corpora: Sequence[str],
    labels: Mapping[str, str],
    baseline: str,
    entry: Any,
) -> Any:
    """The analysis plan's ``cost-column`` verdict under its primary specification and each
    declared alternative (:mod:`chunkwise.evaluation.robustness`).

    A specification names ``corpora`` (``"all five"`` = ``corpora``, or one corpus) and ``timing``;
    only ``"one run"`` timings exist (``benchmarks/strategies_cold.py``), so an alternative that
    needs repeated timings is reported as not run. Each specification's verdict is
    :func:`findings_results`' ``cost_order_agrees`` with the plan's margin (``entry.delta``
    seconds); its estimate is the smallest cross-tier margin in seconds (no interval: one timing,
    so low = high = the estimate, and no detectable effect).

    Returns
    -------
    chunkwise.evaluation.robustness.Robustness

    Raises
    ------
    ValueError
        When the primary specification has no measured strategies in two tiers.
    """
    from chunkwise.evaluation.robustness import SpecResult, classify
    from chunkwise.plan import specifications

    results, not_run = [], []
    for name, spec in specifications(entry):
        chosen = list(corpora) if spec["corpora"] == "all five" else [spec["corpora"]]
        if spec["timing"] != "one run" or not set(chosen) <= set(corpora):
            if name == "primary":
                raise ValueError(f"the primary specification of {entry.entry_id!r} needs {spec}, which this run lacks")
            not_run.append(name)
            continue
        r = findings_results(table_small, cold_costs(cold_path, chosen), labels, baseline, 0, "",
                             margin_seconds=entry.delta)
        if r["cost_order_agrees"] == "not measured":
            if name == "primary":
                raise ValueError(f"no cold timings in two cost tiers for {', '.join(chosen)} in {cold_path}")
            not_run.append(name)
            continue
        gap = float(r["cost_closest_margin"])
        results.append(SpecResult(name, gap, gap, gap, r["cost_order_agrees"], len(chosen), float("nan"),
                                  generic=r["cost_order_agrees"]))
    return classify(results[0], results[1:], delta=entry.delta, unit="seconds", not_run=not_run)


def contextual_panel(
    result: Any,
    entry: Any,
    labels: Mapping[str, str],
    top_k: int,
    contextual_spec: str = "Contextual:200",
    *,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """The analysis plan's ``contextual`` verdict under its primary specification and each declared
    alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification names ``reference`` (a chunker spec, e.g. ``"Recursive:200"``), ``retriever``
    and ``metric`` (a span metric of the grid); its value per question is the contextual chunker
    minus the reference in points at ``top_k``. A retriever the grid did not run is reported as not
    run.

    Parameters
    ----------
    result : chunkwise.evaluation.grid.GridResult
        The grid that ran the contextual chunker and the reference (chapter 5's small corpora).
    entry : chunkwise.plan.PlanEntry
    labels : mapping
        Spec string -> the grid's chunker label.
    top_k : int
    contextual_spec : str, default "Contextual:200"

    Returns
    -------
    (Robustness, DataFrame)
        The class, and one row per specification run: ``specification``, ``retriever``, ``metric``,
        ``estimate``, ``low``, ``high`` (points), ``n``, ``mde``, ``verdict``.

    Raises
    ------
    ValueError
        When the primary's cells are not in the grid.
    """
    from chunkwise.chunkers.specs import parse_spec
    from chunkwise.evaluation.robustness import classify, contrast
    from chunkwise.plan import specifications

    ctx = labels.get(parse_spec(contextual_spec).spec_string(), parse_spec(contextual_spec).label)
    results, rows, not_run = [], [], []
    for name, spec in specifications(entry):
        ref = labels.get(parse_spec(spec["reference"]).spec_string(), parse_spec(spec["reference"]).label)
        wide = result.scores(spec["metric"])
        a, b = (f"{lab} | {spec['retriever']} | k={top_k}" for lab in (ctx, ref))
        if a not in wide.columns or b not in wide.columns:
            if name == "primary":
                raise ValueError(f"the grid has no cells {a!r} and {b!r}; run the contextual chunker and "
                                 f"{spec['reference']} with {spec['retriever']} retrieval at k={top_k}")
            not_run.append(name)
            continue
        r = contrast(name, wide[a].to_numpy(float), reference=wide[b].to_numpy(float), scale=100.0, delta=entry.delta,
                     method=spec["interval"], confidence=spec["confidence"], words=entry.words,
                     n_resamples=n_resamples, seed=seed)
        results.append(r)
        rows.append({"specification": name, "retriever": spec["retriever"], "metric": spec["metric"],
                     "estimate": r.estimate, "low": r.low, "high": r.high, "n": r.n, "mde": r.mde,
                     "verdict": r.verdict})
    rob = classify(results[0], results[1:], delta=entry.delta, unit=entry.unit, not_run=not_run)
    return rob, pd.DataFrame(rows)
