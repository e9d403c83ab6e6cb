"""Readable column labels for the book's tables: one map from code names to short labels.

The package's tables keep their code names (``mean_chunk_tokens``, ``recall_ci``...), which the
chapters' code indexes by; a chapter relabels a table only where it shows it::

    from chunkwise.labels import labelled
    labelled(table)            # columns, column levels, index names and index values relabelled

:data:`LABELS` is the one place a label is chosen (issue #60: a reader at 1,280 px should see
"mean tokens", not ``mean_chunk_tokens``, and a column header short enough for the text column).
A name missing from it is shown with its underscores as spaces, so no raw snake_case name
reaches a page; add a better label here rather than renaming in a chapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Code name -> label. Short: a header is read at 0.8rem in a 676-px column beside six others.
#: Units in the label where the number has one (tokens, s, %); "Δ" for a difference, "sd" for a
#: standard deviation, "95% CI" for an interval.
LABELS: dict[str, str] = {
    # sizes and counts
    "size_tokens": "size (tokens)",
    "overlap_tokens": "overlap (tokens)",
    "chunk_tokens": "tokens per chunk",
    "chunk_tokens_reported": "tokens per chunk (report)",
    "n_chunks": "chunks",
    "n_chunks_ours": "chunks (ours)",
    "n_chunks_theirs": "chunks (theirs)",
    "mean_chunk_tokens": "mean tokens",
    "mean_tokens": "mean tokens",
    "mean_tokens_ours": "mean tokens (ours)",
    "mean_tokens_theirs": "mean tokens (theirs)",
    "max_tokens": "max tokens",
    "cv_tokens": "CV of tokens",
    "retrieved_tokens": "tokens retrieved",
    "embedded_tokens": "tokens embedded",
    "window_tokens": "window (tokens)",
    "mean_segment_tokens": "mean segment tokens",
    "n_items": "items",
    "n_missing": "missing",
    "n_shared": "questions",
    "n_cells": "cells",
    "n_levels": "levels",
    "n_ranked": "ranked",
    "n_previous": "earlier questions",
    "n_cuts": "cuts",
    "n_seams": "seams",
    "texts_embedded": "texts embedded",
    "texts_requested": "texts requested",
    # retrieval metrics (Chroma's report and ours)
    "recall": "recall",
    "recall_mean": "recall",
    "recall_std": "recall sd",
    "recall_reported": "recall (report)",
    "recall_delta": "Δ recall",
    "recall_diff": "Δ recall",
    "recall_ci": "Δ recall 95% CI",
    "recall_code": "recall (report's code)",
    "recall_ours": "recall (ours)",
    "recall_theirs": "recall (theirs)",
    "recall_report": "recall (report placement)",
    "recall_exact": "recall (exact placement)",
    "recall_gain": "recall gain",
    "precision_mean": "precision",
    "precision_std": "precision sd",
    "precision_delta": "Δ precision",
    "precision_omega": "precision Ω",
    "precision_omega_mean": "precision Ω",
    "precision_omega_std": "precision Ω sd",
    "precision_omega_delta": "Δ precision Ω",
    "precision_omega_diff": "Δ precision Ω",
    "precision_omega_ci": "Δ precision Ω 95% CI",
    "precision_omega_gain": "precision Ω gain",
    "precision_omega_ours": "precision Ω (ours)",
    "precision_omega_theirs": "precision Ω (theirs)",
    "precision_omega_chroma": "precision Ω (Chroma)",
    "precision_omega_union": "precision Ω (union)",
    "chroma_minus_union": "Chroma − union",
    "iou": "IoU",
    "iou_mean": "IoU",
    "iou_std": "IoU sd",
    "iou_delta": "Δ IoU",
    "rank_report": "rank (report)",
    "rank_exact": "rank (exact)",
    "embedder_free": "embedder-free",
    "identical_boundaries": "same boundaries",
    "doc_f1": "document F1",
    "doc_f1_any": "document F1 (any)",
    "doc_f1_of_means": "document F1 of means",
    # the embedder's window
    "share_chunks_over_window": "chunks over the window (%)",
    "share_reference_chars_unembedded": "evidence not embedded (%)",
    "chunks_over_window": "chunks over the window",
    "ref_chars_past_window": "evidence past the window (chars)",
    # the LLM chunker and costs
    "windows_without_split": "windows without a split",
    "llm_seconds": "LLM time (s)",
    "llm_calls": "LLM calls",
    "llm_prompt_tokens": "prompt tokens",
    "llm_completion_tokens": "completion tokens",
    "cold_seconds": "cold time (s)",
    "max_load": "peak load",
    "x_baseline": "× baseline",
    "guide_cost": "cost (guide)",
    "guide_watch": "watch for (guide)",
    "measured_cost": "cost (measured)",
    "measured_watch": "watch for (measured)",
    # boundaries and seams (chapters 1, 5, 6)
    "shifts_found": "shifts found",
    "inside_sentence": "inside a sentence",
    "mid_sentence_cuts": "mid-sentence cuts",
    "buffer_size": "buffer",
    "buffer_sizes": "buffers",
    "min_chunk_size": "min. chunk size",
    "max_breaks": "most breaks",
    "min_breaks": "fewest breaks",
    "predicted_breaks": "predicted breaks",
    "mean_handbook_chunks": "mean chunks (handbook)",
    "stated_settings": "stated settings",
    "article_chunks": "chunks (article)",
    "ours_chunks": "chunks (ours)",
    "delta_chunks": "Δ chunks",
    "article_shifts_found": "shifts (article)",
    "ours_shifts_found": "shifts (ours)",
    "article_extra_splits": "extra splits (article)",
    "ours_extra_splits": "extra splits (ours)",
    "extra_splits": "extra splits",
    "seams_found": "seams found",
    "cuts_per_seam": "cuts per seam",
    "boundary_precision": "boundary precision",
    "boundary_recall": "boundary recall",
    "boundary_f1": "boundary F1",
    "cross_source_seams": "seams across sources",
    "contiguous_seams": "contiguous seams",
    "cosine_across_seams": "cosine across seams",
    "cosine_within_segments": "cosine within segments",
    "seams_after_line_break": "seams after a line break",
    "separators_inserted": "separators inserted",
    "breakpoint_minus_fixed": "breakpoint − fixed",
    # CRUD-RAG and PG-RAG (chapter 3)
    "graph_rag": "GraphRAG",
    "pg_rag": "PG-RAG",
    "pg_kps": "PG (key points)",
    "metric_missing": "metric missing",
    "questanswer_1doc": "1 document",
    "questanswer_2docs": "2 documents",
    "questanswer_3docs": "3 documents",
    "bleu_crud": "BLEU (CRUD)",
    "bleu_standard": "BLEU",
    "rouge_l": "ROUGE-L",
    "embedding_cosine": "cosine",
    "quest_recall": "QuestEval recall",
    "quest_avg_f1": "QuestEval F1",
    # generated questions (chapter 4)
    "excerpt_mode": "excerpt mode",
    "content_repairs": "repairs",
    "excerpt_margin_chars": "excerpt margin (chars)",
    "dropped_excerpt_not_found": "dropped: excerpt not found",
    "dropped_refers_to_passage": "dropped: refers to the passage",
    "dropped_duplicate": "dropped: duplicate",
    "spearman_ci": "Spearman ρ 95% CI",
    "kendall_ci": "Kendall τ 95% CI",
    # factors (chapter 7)
    "worst_mean": "worst mean",
    "best_mean": "best mean",
    "range_low": "range low",
    "range_high": "range high",
    "diff_low": "Δ low",
    "diff_high": "Δ high",
    "rho_low": "ρ low",
    "rho_high": "ρ high",
    "same_best": "same best",
    # Chroma's corpora
    "state_of_the_union": "State of the Union",
}


def label(name: Any, extra: Mapping[str, str] | None = None) -> Any:
    """The reader's label for a code name: ``extra``, then :data:`LABELS`, else underscores as spaces.

    A name that is not a string (a number, a tuple of a MultiIndex, None) comes back unchanged.

    Examples
    --------
    >>> label("mean_chunk_tokens")
    'mean tokens'
    >>> label("some_new_column")
    'some new column'
    >>> label(5)
    5
    """
    if not isinstance(name, str):
        return name
    if extra and name in extra:
        return extra[name]
    if name in LABELS:
        return LABELS[name]
    return name.replace("_", " ") if "_" in name.strip("_") else name


def labelled(df: Any, extra: Mapping[str, str] | None = None, *, index_values: bool = True) -> Any:
    """A copy of a DataFrame with reader's labels (:func:`label`) for what a page shows as headers.

    Relabels the column names (every level of a MultiIndex), the names of the column and row
    axes, and, with ``index_values`` (default), the row labels (a transposed table's headers).
    Cell values are never touched.

    Parameters
    ----------
    df : pandas.DataFrame
    extra : mapping, optional
        Labels for this table only, taking precedence over :data:`LABELS`.
    index_values : bool
        Also relabel the row labels.

    Raises
    ------
    TypeError
        If ``df`` is not a pandas DataFrame.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"mean_chunk_tokens": [200.0]}, index=pd.Index(["Fixed"], name="chunker"))
    >>> list(labelled(df).columns)
    ['mean tokens']
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"labelled() needs a pandas DataFrame, got {type(df).__name__}")
    out = df.copy()

    def relabel(axis: pd.Index) -> pd.Index:
        if isinstance(axis, pd.MultiIndex):
            axis = axis.set_levels([lev.map(lambda v: label(v, extra)) for lev in axis.levels])
        elif not pd.api.types.is_numeric_dtype(axis.dtype):
            axis = axis.map(lambda v: label(v, extra))
        return axis.set_names([label(n, extra) for n in axis.names])

    out.columns = relabel(out.columns)
    if index_values:
        out.index = relabel(out.index)
    else:
        out.index = out.index.set_names([label(n, extra) for n in out.index.names])
    return out
