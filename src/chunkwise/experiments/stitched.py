"""Chapter 6: when does semantic chunking pay off? Stitched versus real documents.

Qu, Tu & Bao (2025) report semantic (breakpoint) chunkers ahead of fixed-size chunking on
documents stitched from unrelated short ones, and behind it on real documents. This module
runs that contrast on one protocol: the same questions and reference spans under three
conditions built by :func:`chunkwise.datasets.stitch.build_condition` (``real``, ``stitched``,
``shuffled``), every chunker through the evaluation engine (:func:`~chunkwise.evaluation.grid.run_grid`),
and adds what the engine does not measure:

- :func:`document_retrieval` -- the paper's document-level measure with a segment as the
  "document": a retrieved chunk counts for the segment that holds most of its characters;
- :func:`seam_boundaries` -- each chunker's cuts against the known seams (Pk, WindowDiff,
  boundary precision / recall within a tolerance, in sentences);
- :func:`seam_cosines` -- how far the cosine between the sentences on either side of a seam
  drops below that of neighbouring sentences inside a segment;
- :func:`interaction` -- (semantic - fixed on stitched) - (semantic - fixed on real) per
  question, with a paired bootstrap interval, and :func:`verdict_words` that turns it into
  the chapter's sentence.

References
----------
R. Qu, R. Tu and F. Bao, "Is Semantic Chunking Worth the Computational Cost?", Findings of
NAACL 2025 (arXiv:2410.13070), Table 1 (document retrieval F1@5, stella_en_1.5B_v5) and the
authors' ``additional_results.md`` (toastedqu/SmartChunk @ 12094d6; all-mpnet-base-v2,
bge-large-en-v1.5).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "PAPER_F1_AT_5",
    "chapter_answer",
    "cross_fit",
    "cross_fit_apply",
    "holm_verdicts",
    "pattern_verdict",
    "document_retrieval",
    "interaction",
    "layout_difference",
    "paper_table",
    "seam_boundaries",
    "unscorable_references",
    "seam_cosines",
    "stitched_panel",
    "verdict_words",
    # the chapter's runs, and the tables and sentences its notebook shows
    "CONDITIONS",
    "ChapterRuns",
    "Contrasts",
    "MEASURE_LABELS",
    "PANEL_TITLES",
    "PRIMARY",
    "beside_paper",
    "chapter_results",
    "chosen_settings",
    "chunker_scores",
    "condition_measures",
    "conditions_paragraph",
    "conditions_shown",
    "contrasts",
    "cost_lines",
    "cost_table",
    "cost_tracker",
    "direction_words",
    "exploratory_contrasts",
    "exploratory_figure",
    "exploratory_row",
    "exploratory_tables",
    "in_points",
    "interval_text",
    "layout_paragraph",
    "layout_table",
    "p_value_text",
    "panel_tables",
    "paper_direction_sentence",
    "paper_direction_table",
    "primary_paragraph",
    "primary_table",
    "retrieval_table",
    "retrieval_tables",
    "robustness_panels",
    "robustness_paragraph",
    "run_arms",
    "run_chapter",
    "seam_table",
    "seam_tables",
    "seams_paragraph",
    "second_embedder_paragraph",
    "second_embedder_table",
    "seed_spread",
    "seed_table",
    "segment_scores",
    "stitched_drawing",
    "window_shares",
    "with_primary",
]

#: Document-retrieval F1@5 (%) reported by Qu, Tu & Bao: (embedder, dataset, stitched,
#: fixed-size, breakpoint, clustering). stella_en_1.5B_v5 from the paper's Table 1 (arXiv v1);
#: all-mpnet-base-v2 and bge-large-en-v1.5 from ``additional_results.md`` (SmartChunk @ 12094d6).
#: HotpotQA, MSMARCO, ConditionalQA and Qasper are the paper's "original" documents.
PAPER_F1_AT_5: tuple[tuple[str, str, bool, float, float, float], ...] = (
    ("stella_en_1.5B_v5", "Miracl", True, 69.45, 81.89, 67.35),
    ("stella_en_1.5B_v5", "NQ", True, 43.79, 63.93, 41.01),
    ("stella_en_1.5B_v5", "Scidocs", True, 16.82, 17.60, 19.87),
    ("stella_en_1.5B_v5", "Scifact", True, 35.27, 36.27, 35.70),
    ("stella_en_1.5B_v5", "BioASQ", True, 61.86, 61.87, 62.49),
    ("stella_en_1.5B_v5", "NFCorpus", True, 21.36, 21.07, 22.12),
    ("stella_en_1.5B_v5", "HotpotQA", False, 90.59, 87.37, 84.79),
    ("stella_en_1.5B_v5", "MSMARCO", False, 93.58, 92.23, 93.18),
    ("stella_en_1.5B_v5", "ConditionalQA", False, 68.11, 64.44, 65.94),
    ("stella_en_1.5B_v5", "Qasper", False, 90.99, 89.27, 90.77),
    ("all-mpnet-base-v2", "Miracl", True, 60.20, 69.93, 59.72),
    ("all-mpnet-base-v2", "NQ", True, 37.05, 49.57, 36.60),
    ("all-mpnet-base-v2", "Scidocs", True, 15.18, 15.68, 17.85),
    ("all-mpnet-base-v2", "Scifact", True, 27.74, 43.76, 28.99),
    ("all-mpnet-base-v2", "BioASQ", True, 47.42, 56.07, 47.72),
    ("all-mpnet-base-v2", "NFCorpus", True, 14.71, 16.34, 16.15),
    ("all-mpnet-base-v2", "HotpotQA", False, 71.73, 65.09, 65.84),
    ("all-mpnet-base-v2", "MSMARCO", False, 91.46, 89.88, 90.05),
    ("all-mpnet-base-v2", "ConditionalQA", False, 60.46, 56.10, 60.44),
    ("all-mpnet-base-v2", "Qasper", False, 79.47, 78.99, 79.46),
    ("bge-large-en-v1.5", "Miracl", True, 63.78, 76.72, 60.96),
    ("bge-large-en-v1.5", "NQ", True, 48.34, 57.05, 45.95),
    ("bge-large-en-v1.5", "Scidocs", True, 18.06, 18.47, 20.49),
    ("bge-large-en-v1.5", "Scifact", True, 29.24, 45.00, 30.36),
    ("bge-large-en-v1.5", "BioASQ", True, 61.66, 66.36, 61.39),
    ("bge-large-en-v1.5", "NFCorpus", True, 18.77, 19.79, 19.75),
    ("bge-large-en-v1.5", "HotpotQA", False, 87.36, 76.05, 78.18),
    ("bge-large-en-v1.5", "MSMARCO", False, 90.93, 90.09, 89.51),
    ("bge-large-en-v1.5", "ConditionalQA", False, 54.75, 54.45, 54.59),
    ("bge-large-en-v1.5", "Qasper", False, 81.03, 76.33, 77.15),
)


def paper_table() -> pd.DataFrame:
    """:data:`PAPER_F1_AT_5` as a table with ``breakpoint - fixed`` (points).

    Returns
    -------
    DataFrame
        Columns ``embedder``, ``dataset``, ``documents`` ("stitched" / "original"),
        ``fixed``, ``breakpoint``, ``clustering``, ``breakpoint_minus_fixed``.
    """
    df = pd.DataFrame(PAPER_F1_AT_5, columns=["embedder", "dataset", "stitched", "fixed", "breakpoint", "clustering"])
    df.insert(2, "documents", np.where(df.pop("stitched"), "stitched", "original"))
    df["breakpoint_minus_fixed"] = (df["breakpoint"] - df["fixed"]).round(2)
    return df


# --------------------------------------------------------------------------------------
# document retrieval (segments as documents)
# --------------------------------------------------------------------------------------


def _majority_segment(lookup: tuple[list[int], list[int]], ends: list[int], start: int, end: int) -> int:
    """Id of the segment holding most characters of ``[start, end)`` (the first on a tie)."""
    starts, ids = lookup
    i = max(bisect.bisect_right(starts, start) - 1, 0)
    best, best_len = ids[i], -1
    while i < len(starts) and starts[i] < max(end, start + 1):
        overlap = min(end, ends[i]) - max(start, starts[i])
        if overlap > best_len:
            best, best_len = ids[i], overlap
        i += 1
    return best


def _overlapped_segments(lookup: tuple[list[int], list[int]], ends: list[int], start: int, end: int) -> set[int]:
    """Ids of every segment sharing at least one character with ``[start, end)``."""
    starts, ids = lookup
    i = max(bisect.bisect_right(starts, start) - 1, 0)
    out = set()
    while i < len(starts) and starts[i] < end:
        if min(end, ends[i]) > max(start, starts[i]):
            out.add(ids[i])
        i += 1
    return out


def document_retrieval(
    result: Any, corpus: Any, retriever: str = "dense", top_k: Sequence[int] | None = None,
    embedder: str | None = None,
) -> pd.DataFrame:
    """Segment-retrieval F1: Qu, Tu & Bao's document-retrieval measure with a segment of our
    corpora in the role of their short document.

    It is *not* the paper's number: the paper scores retrieval of its short source documents
    from the long stitched one; here the unit is the segment, so it is named segment-retrieval
    F1 in the book. A retrieved chunk is labelled with the segment holding most of its
    characters (the ``_any`` columns instead credit every segment the chunk overlaps, an upper
    reading; :func:`unscorable_references` says how many evidence segments the majority rule
    can never credit). At each k,
    the retrieved segments are the distinct labels of the top-k chunks; per question,
    ``doc_recall = |relevant & retrieved| / |relevant|`` and ``doc_precision = |relevant &
    retrieved| / |retrieved|``, where the relevant segments are those holding the question's
    references (the paper's Appendix D, with its documents replaced by our segments).
    ``doc_f1`` is the per-question harmonic mean (0 when both are 0); the paper's code takes the
    F1 of the averaged precision and recall instead, which :func:`document_retrieval_summary`
    reports.

    Parameters
    ----------
    result : GridResult
        From :func:`~chunkwise.evaluation.grid.run_grid` on ``corpus.docs`` and
        ``corpus.questions`` (its ``rankings`` and ``chunk_objects`` are read).
    corpus : StitchedCorpus
        The condition the grid ran on.
    retriever : str, default "dense"
    top_k : sequence of int, optional
        Default: the grid's ``top_k``.
    embedder : str, optional
        In a grid of several embedders, the one whose ranking is read (required there for a
        retriever that reads vectors).

    Returns
    -------
    DataFrame
        One row per (chunker, k, question): ``chunker``, ``k``, ``question_id``,
        ``doc_precision``, ``doc_recall``, ``doc_f1`` and the any-overlap
        ``doc_precision_any``, ``doc_recall_any``, ``doc_f1_any`` (fractions).

    Raises
    ------
    ValueError
        If the grid did not run ``retriever`` (with ``embedder``) or a k beyond its search
        depth, or its questions are not those of ``corpus``.
    """
    ks = tuple(top_k) if top_k is not None else tuple(result.config.top_k)
    if retriever not in result.config.retrievers:
        raise ValueError(f"the grid did not run retriever {retriever!r}; it ran {list(result.config.retrievers)}.")
    key = result.ranking_key_of(retriever, embedder)
    q = result.questions
    cq = corpus.questions.assign(question_id=corpus.questions["question_id"].astype(str)).set_index("question_id")
    missing = [qid for qid in q["question_id"] if qid not in cq.index]
    if missing:
        raise ValueError(f"question {missing[0]!r} of the grid is not a question of this corpus condition.")
    evidence = [set(cq.loc[qid, "evidence_segments"]) for qid in q["question_id"]]
    lookup = corpus.segment_lookup()
    ends_of = {d: list(map(int, g["end"])) for d, g in corpus.placements.groupby("document", sort=False)}
    def prf(got: set[int], ev: set[int]) -> tuple[float, float, float]:
        hit = len(got & ev)
        p = hit / len(got) if got else 0.0
        r = hit / len(ev)
        return p, r, 2 * p * r / (p + r) if p + r else 0.0

    rows = []
    for label, by_doc in result.chunk_objects.items():
        labels = [
            _majority_segment(lookup[doc], ends_of[doc], c.start, c.end) for doc, chunks in by_doc.items() for c in chunks
        ]
        touched = [
            _overlapped_segments(lookup[doc], ends_of[doc], c.start, c.end) for doc, chunks in by_doc.items() for c in chunks
        ]
        ranked_all = result.rankings[label][key]
        for k in ks:
            if any(len(r) < k and len(r) < len(labels) for r in ranked_all):
                raise ValueError(f"k={k} is deeper than the grid searched; rerun it with {k} in top_k.")
            for qid, ranked, ev in zip(q["question_id"], ranked_all, evidence):
                majority = prf({labels[j] for j in ranked[:k]}, ev)
                anyof = prf(set().union(*(touched[j] for j in ranked[:k])), ev)
                rows.append((label, k, qid, *majority, *anyof))
    return pd.DataFrame(rows, columns=["chunker", "k", "question_id", "doc_precision", "doc_recall", "doc_f1",
                                       "doc_precision_any", "doc_recall_any", "doc_f1_any"])


def unscorable_references(result: Any, corpus: Any) -> pd.DataFrame:
    """How many evidence segments :func:`document_retrieval` can never credit, per chunker.

    Under the majority rule a segment counts as retrieved only through a chunk that holds more
    of its characters than of any other segment's; a segment that is no chunk's majority
    segment (it sits inside a chunk dominated by a longer neighbour) can never be found, so its
    question can never reach full ``doc_recall`` whatever the retriever does.

    Returns
    -------
    DataFrame
        Index = chunker label: ``share_evidence_unscorable`` (fraction of the (question,
        evidence segment) pairs whose segment is no chunk's majority segment) and
        ``share_questions_unscorable`` (fraction of questions none of whose evidence segments
        can be credited).
    """
    q = result.questions
    cq = corpus.questions.assign(question_id=corpus.questions["question_id"].astype(str)).set_index("question_id")
    evidence = [set(cq.loc[qid, "evidence_segments"]) for qid in q["question_id"].astype(str)]
    lookup = corpus.segment_lookup()
    ends_of = {d: list(map(int, g["end"])) for d, g in corpus.placements.groupby("document", sort=False)}
    rows = {}
    for label, by_doc in result.chunk_objects.items():
        credited = {_majority_segment(lookup[doc], ends_of[doc], c.start, c.end)
                    for doc, chunks in by_doc.items() for c in chunks}
        pairs = [seg in credited for ev in evidence for seg in ev]
        rows[label] = {
            "share_evidence_unscorable": 1 - float(np.mean(pairs)) if pairs else np.nan,
            "share_questions_unscorable": float(np.mean([not (ev & credited) for ev in evidence])) if evidence else np.nan,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def document_retrieval_summary(per_question: pd.DataFrame) -> pd.DataFrame:
    """Means per (chunker, k) of :func:`document_retrieval`, plus ``doc_f1_of_means`` (the
    paper's aggregation: F1 of the averaged precision and recall). Fractions."""
    cols = [c for c in ("doc_precision", "doc_recall", "doc_f1", "doc_precision_any", "doc_recall_any", "doc_f1_any")
            if c in per_question.columns]
    g = per_question.groupby(["chunker", "k"], sort=False)[cols].mean()
    p, r = g["doc_precision"], g["doc_recall"]
    g["doc_f1_of_means"] = np.where(p + r > 0, 2 * p * r / (p + r).where(p + r > 0, 1), 0.0)
    return g.reset_index()


# --------------------------------------------------------------------------------------
# boundaries against the seams
# --------------------------------------------------------------------------------------


def _seam_sentences(text: str, seam_offsets: Sequence[int], sentence_spans: list[tuple[int, int]]) -> list[int]:
    """Seams as sentence boundaries (split after sentence i), the mapping chunk cuts get."""
    from chunkwise.evaluation.boundaries import boundaries_from_chunks

    if not seam_offsets:
        return []
    cuts = [0, *seam_offsets, len(text)]
    spans = list(zip(cuts, cuts[1:]))
    return boundaries_from_chunks(spans, sentence_spans)[0]


def seam_boundaries(
    result: Any,
    corpus: Any,
    *,
    tolerance: int = 1,
    seams: str = "moved",
) -> pd.DataFrame:
    """Each chunker's cuts scored against the corpus's seams, in sentences.

    Both the chunk cuts and the seams are mapped onto the document's sentences
    (:func:`chunkwise.text.split_sentences`, robust mode) with
    :func:`~chunkwise.evaluation.boundaries.boundaries_from_chunks`, then compared with
    :func:`~chunkwise.evaluation.boundaries.boundary_scores` per document. Matches, predicted
    and gold boundaries are summed over documents (micro precision / recall / F1); Pk and
    WindowDiff are averaged over documents weighted by their sentence counts.

    Parameters
    ----------
    result : GridResult
        Run on ``corpus.docs`` (its ``chunk_objects`` are read: the chunkers' own offsets).
    corpus : StitchedCorpus
    tolerance : int, default 1
        A seam counts as found when a cut lies within this many sentences of it.
    seams : {"moved", "all"}, default "moved"
        ``"moved"``: only seams whose two sides were not neighbours in their source (in
        ``real`` there are none, so every cut counts as an extra split); ``"all"``: every
        segment start.

    Returns
    -------
    DataFrame
        One row per chunker: ``chunker``, ``n_cuts``, ``n_seams``, ``seams_found``,
        ``boundary_precision``, ``boundary_recall``, ``boundary_f1``, ``pk``, ``windowdiff``,
        ``mid_sentence_cuts`` (share of cuts inside a sentence).

    Raises
    ------
    ValueError
        For an unknown ``seams`` value or a negative tolerance.
    """
    from chunkwise.evaluation.boundaries import boundaries_from_chunks, boundary_scores
    from chunkwise.text import split_sentences

    if seams not in ("moved", "all"):
        raise ValueError(f"seams must be 'moved' or 'all', got {seams!r}.")
    if isinstance(tolerance, bool) or not isinstance(tolerance, int) or tolerance < 0:
        raise ValueError(f"tolerance must be an int >= 0 (sentences), got {tolerance!r}.")
    table = corpus.seam_table()
    if seams == "moved" and len(table):
        table = table[~table["contiguous"]]
    offsets = {d: sorted(map(int, g["offset"])) for d, g in table.groupby("document")} if len(table) else {}
    sentences = {d: [(c.start, c.end) for c in split_sentences(t)] for d, t in corpus.docs.items()}
    gold = {d: _seam_sentences(corpus.docs[d], offsets.get(d, []), sentences[d]) for d in corpus.docs}
    rows = []
    for label, by_doc in result.chunk_objects.items():
        found = n_pred = n_gold = mid = cuts = 0
        pk_sum = wd_sum = weight = 0.0
        for doc, chunks in by_doc.items():
            sent = sentences[doc]
            if len(sent) < 2:
                continue
            pred, n_mid = boundaries_from_chunks([(c.start, c.end) for c in chunks], sent)
            sc = boundary_scores(pred, gold[doc], len(sent), tolerance)
            found += sc.shifts_found
            n_pred += len(pred)
            n_gold += len(gold[doc])
            mid += n_mid
            cuts += max(len(chunks) - 1, 0)
            pk_sum += sc.pk * len(sent)
            wd_sum += sc.windowdiff * len(sent)
            weight += len(sent)
        precision = found / n_pred if n_pred else 1.0
        recall = found / n_gold if n_gold else float("nan")
        f1 = 2 * precision * recall / (precision + recall) if n_gold and precision + recall else (0.0 if n_gold else float("nan"))
        rows.append(
            {
                "chunker": label,
                "n_cuts": cuts,
                "n_seams": n_gold,
                "seams_found": found,
                "boundary_precision": precision,
                "boundary_recall": recall,
                "boundary_f1": f1,
                "pk": pk_sum / weight if weight else float("nan"),
                "windowdiff": wd_sum / weight if weight else float("nan"),
                "mid_sentence_cuts": mid / cuts if cuts else 0.0,
            }
        )
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# how sharp are the seams
# --------------------------------------------------------------------------------------


def seam_cosines(corpus: Any, embedder: Any) -> dict[str, Any]:
    """Cosine similarity of the sentences on either side of each seam, against neighbours inside
    a segment.

    For every seam: the last sentence before it and the first after it
    (:func:`chunkwise.text.split_sentences`, robust mode). For every segment with at least two
    sentences: its middle pair of neighbouring sentences, the reference of "no seam here".

    Parameters
    ----------
    corpus : StitchedCorpus
    embedder : Embedder
        Any chunkwise embedder (``embed(list[str]) -> (n, dim)``); a cached one makes reruns free.

    Returns
    -------
    dict
        ``condition``, ``seams`` (seams with a sentence on each side), ``cross_source_seams``,
        ``cosine_across_seams`` (mean), ``cosine_within_segments`` (mean over the middle
        pairs), ``drop`` (within minus across), and ``pairs_within``.
    """
    from chunkwise.text import split_sentences

    table = corpus.seam_table()
    seam_at = {(r.document, r.offset): bool(r.cross_source) for r in table.itertuples()} if len(table) else {}
    across: list[tuple[str, str]] = []
    cross = 0
    within: list[tuple[str, str]] = []
    for doc, group in corpus.placements.groupby("document", sort=False):
        text = corpus.docs[str(doc)]
        sents = split_sentences(text)
        starts = [c.start for c in sents]
        for start, end in zip(group["start"], group["end"]):
            start, end = int(start), int(end)
            inside = [c for c in sents[bisect.bisect_left(starts, start):bisect.bisect_left(starts, end)] if c.end <= end]
            if len(inside) >= 2:
                m = len(inside) // 2
                within.append((inside[m - 1].text, inside[m].text))
            if (str(doc), start) in seam_at:
                i = bisect.bisect_left(starts, start)
                if 0 < i < len(sents) and sents[i - 1].end <= start:
                    across.append((sents[i - 1].text, sents[i].text))
                    cross += seam_at[(str(doc), start)]

    def mean_cos(pairs: list[tuple[str, str]]) -> float:
        if not pairs:
            return float("nan")
        a = np.asarray(embedder.embed([p[0] for p in pairs]), dtype=np.float64)
        b = np.asarray(embedder.embed([p[1] for p in pairs]), dtype=np.float64)
        a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return float((a * b).sum(axis=1).mean())

    c_across, c_within = mean_cos(across), mean_cos(within)
    return {
        "condition": corpus.condition,
        "seams": len(across),
        "cross_source_seams": cross,
        "cosine_across_seams": c_across,
        "cosine_within_segments": c_within,
        "drop": c_within - c_across,
        "pairs_within": len(within),
    }


# --------------------------------------------------------------------------------------
# the interaction
# --------------------------------------------------------------------------------------


def interaction(
    scores: Mapping[str, pd.DataFrame],
    method: str,
    reference: str,
    *,
    treated: str = "stitched",
    control: str = "real",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """(method - reference under ``treated``) - (method - reference under ``control``), paired.

    Parameters
    ----------
    scores : mapping condition -> DataFrame
        Per-question scores, rows = question ids (the same set in every condition), columns =
        chunker labels (e.g. ``GridResult.scores("recall")`` with cells renamed to chunkers).
    method, reference : str
        Two columns (a semantic chunker and the fixed-size or recursive baseline).
    treated, control : str, default "stitched", "real"
    n_resamples, seed
        Of the paired bootstrap over questions (:func:`chunkwise.evaluation.stats.paired_difference_ci`).

    Returns
    -------
    dict
        ``gap_treated``, ``gap_control`` (mean method - reference in each condition),
        ``interaction`` (their difference) and its 95% percentile interval
        ``interaction_low`` / ``interaction_high``; also the intervals of the two gaps
        (``gap_treated_low`` ...). Same units as the scores. Each of the three has its
        two-sided bootstrap p-value (``interaction_p`` ...;
        :func:`~chunkwise.evaluation.stats.paired_difference_p`), for :func:`holm_verdicts`.

    Raises
    ------
    ValueError
        If a condition or column is missing or the conditions hold different questions.
    """
    from chunkwise.evaluation.stats import paired_difference_ci, paired_difference_p

    for cond in (treated, control):
        if cond not in scores:
            raise ValueError(f"no scores for condition {cond!r}; have {sorted(scores)}.")
        for col in (method, reference):
            if col not in scores[cond].columns:
                raise ValueError(f"condition {cond!r} has no column {col!r}; have {list(scores[cond].columns)}.")
    t, c = scores[treated], scores[control]
    if set(map(str, t.index)) != set(map(str, c.index)):
        raise ValueError("the two conditions hold different questions; the interaction needs the same questions in both.")
    c = c.copy()
    c.index = c.index.map(str)
    t = t.copy()
    t.index = t.index.map(str)
    c = c.loc[t.index]
    gap_t = (t[method] - t[reference]).to_numpy(dtype=float)
    gap_c = (c[method] - c[reference]).to_numpy(dtype=float)
    out: dict[str, float] = {}
    for name, (a, b) in {
        "gap_treated": (t[method].to_numpy(float), t[reference].to_numpy(float)),
        "gap_control": (c[method].to_numpy(float), c[reference].to_numpy(float)),
        "interaction": (gap_t, gap_c),
    }.items():
        d, lo, hi = paired_difference_ci(a, b, n_resamples=n_resamples, seed=seed)
        out[name], out[f"{name}_low"], out[f"{name}_high"] = d, lo, hi
        out[f"{name}_p"] = paired_difference_p(a, b, n_resamples=n_resamples, seed=seed)
    return out


def arm_difference(
    arms: Mapping[str, Mapping[str, pd.DataFrame]],
    method: str,
    reference: str,
    *,
    treated: str = "stitched",
    control: str = "real",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """How one :func:`interaction` differs between two arms run on the same questions, paired.

    An *arm* is the experiment run once more with one thing changed and the questions kept
    (every line break a space, another embedder). A question's *stitching gain* in an arm is
    ``(method - reference)`` on ``treated`` minus the same on ``control``; this returns each
    arm's gain and the first arm's minus the second's, with paired bootstrap intervals over
    the questions (a difference of interactions, so each question counts once in all of it).

    Parameters
    ----------
    arms : mapping of two arm names -> (mapping condition -> DataFrame)
        In order: the first arm, the second. Each holds per-question scores as for
        :func:`interaction` (rows = question ids, the same in all four frames; columns =
        chunker labels).
    method, reference : str
        Two columns.
    treated, control : str, default "stitched", "real"
    n_resamples, seed
        Of the paired bootstrap over questions.

    Returns
    -------
    dict
        ``interaction_<first>``, ``interaction_<second>`` and ``difference`` (first minus
        second), each with ``_low`` / ``_high`` (95% percentile interval) and ``_p``
        (two-sided bootstrap p-value). Same units as the scores.

    Raises
    ------
    ValueError
        If there are not two arms, a condition or column is missing, or the arms hold
        different questions.
    """
    if not isinstance(arms, Mapping):
        raise TypeError(f"arms must be a mapping of two arm names to {{condition: scores}}, got "
                        f"{type(arms).__name__}.")
    if len(arms) != 2:
        raise ValueError(f"arm_difference compares two arms; got {len(arms)} ({', '.join(map(str, arms))}).")
    gains = {}
    for arm, scores in arms.items():
        for cond in (treated, control):
            if cond not in scores:
                raise ValueError(f"the {arm} arm has no scores for condition {cond!r}; have {sorted(scores)}.")
            for col in (method, reference):
                if col not in scores[cond].columns:
                    raise ValueError(f"the {arm} arm's {cond!r} scores have no column {col!r}.")
        t, c = scores[treated].copy(), scores[control].copy()
        t.index, c.index = t.index.map(str), c.index.map(str)
        for cond, frame in ((treated, t), (control, c)):
            if frame.index.has_duplicates:
                dup = frame.index[frame.index.duplicated()][0]
                raise ValueError(f"the {arm} arm's {cond!r} scores repeat question {dup!r}; give one row per "
                                 "question (the index is the question id).")
        if set(t.index) != set(c.index):
            raise ValueError(f"the {arm} arm's conditions hold different questions.")
        c = c.loc[t.index]
        gains[arm] = (t[method] - t[reference]) - (c[method] - c[reference])
    first, second = gains
    if set(gains[first].index) != set(gains[second].index):
        raise ValueError("the two arms hold different questions; the comparison needs the same questions in both.")
    frames = {arm: pd.DataFrame({"gain": g, "none": 0.0}) for arm, g in gains.items()}
    frames[second] = frames[second].loc[frames[first].index]
    r = interaction(frames, "gain", "none", treated=first, control=second, n_resamples=n_resamples, seed=seed)
    names = {"gap_treated": f"interaction_{first}", "gap_control": f"interaction_{second}",
             "interaction": "difference"}
    return {key.replace(old, new, 1): v for key, v in r.items() for old, new in names.items() if key.startswith(old)}


def layout_difference(
    kept: Mapping[str, pd.DataFrame],
    flat: Mapping[str, pd.DataFrame],
    method: str,
    reference: str,
    *,
    treated: str = "stitched",
    control: str = "real",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, float]:
    """How much of an :func:`interaction` the texts' line breaks carry, paired over questions.

    The same contrast is measured twice on the same questions: with the line breaks kept, and
    with every line break a space (:func:`chunkwise.datasets.stitch.build_condition`,
    ``layout="flat"``), where no seam is marked by layout. A question's *stitching gain* is
    ``(method - reference)`` on ``treated`` minus the same on ``control``; this returns the
    gain with the layout kept, without it, and their difference (the part of the gain that
    removing the layout takes away), each with its paired bootstrap interval
    (:func:`arm_difference` with the arms ``kept`` and ``flat``).

    Parameters
    ----------
    kept, flat : mapping condition -> DataFrame
        Per-question scores of each arm as for :func:`interaction` (rows = question ids, the
        same in all four frames; columns = chunker labels).
    method, reference : str
        Two columns.
    treated, control : str, default "stitched", "real"
    n_resamples, seed
        Of the paired bootstrap over questions.

    Returns
    -------
    dict
        ``interaction_kept``, ``interaction_flat`` and ``layout_part`` (kept minus flat), each
        with ``_low`` / ``_high`` (95% percentile interval) and ``_p`` (two-sided bootstrap
        p-value). Same units as the scores.

    Raises
    ------
    ValueError
        If a condition or column is missing, or the arms hold different questions.
    """
    r = arm_difference({"kept": kept, "flat": flat}, method, reference, treated=treated, control=control,
                       n_resamples=n_resamples, seed=seed)
    return {(key.replace("difference", "layout_part", 1) if key.startswith("difference") else key): v
            for key, v in r.items()}


def arm_corpora(subset: Sequence[str], corpora: Sequence[str]) -> list[str]:
    """The corpora of an arm that reruns the chapter on part of its corpora, checked.

    Parameters
    ----------
    subset : sequence of str
        The arm's Chroma corpus names (e.g. the second embedder's).
    corpora : sequence of str
        The chapter's corpora.

    Returns
    -------
    list of str
        ``subset`` in the chapter's order, without repeats.

    Raises
    ------
    ValueError
        If ``subset`` names fewer than two corpora (stitching interleaves documents) or a
        corpus the chapter did not load.
    """
    if isinstance(corpora, str):
        raise TypeError(f"corpora must be a list of corpus names, got the string {corpora!r}; wrap it in a list.")
    corpora = list(dict.fromkeys(corpora))
    subset = [subset] if isinstance(subset, str) else list(subset)
    bad = [c for c in [*subset, *corpora] if not isinstance(c, str)]
    if bad:
        raise TypeError(f"corpus names must be strings, got {bad[0]!r} ({type(bad[0]).__name__}).")
    if not subset:
        raise ValueError(f"the arm names no corpus; give some of the chapter's corpora ({', '.join(corpora)}).")
    missing = [c for c in subset if c not in corpora]
    if missing:
        raise ValueError(f"the arm's corpora {', '.join(missing)} are not among the chapter's corpora "
                         f"({', '.join(corpora)}); add them to `corpora` or choose among those.")
    chosen = [c for c in corpora if c in subset]
    if len(chosen) < 2:
        raise ValueError(f"the arm names one corpus ({chosen[0]}); stitching interleaves the segments of "
                         "several documents, so give at least two of the chapter's corpora.")
    return chosen


def paper_direction(embedder: str) -> pd.DataFrame:
    """The direction of Qu, Tu & Bao's breakpoint-minus-fixed gap for one embedder, by document kind.

    Parameters
    ----------
    embedder : str
        One of the embedders of :data:`PAPER_F1_AT_5` (``"stella_en_1.5B_v5"``,
        ``"all-mpnet-base-v2"``, ``"bge-large-en-v1.5"``).

    Returns
    -------
    DataFrame
        Index ``documents`` ("stitched", "original"); columns ``datasets`` (count),
        ``breakpoint_ahead`` (datasets where breakpoint F1@5 > fixed-size), ``mean_gap``,
        ``min_gap``, ``max_gap`` (points of document-retrieval F1@5, breakpoint minus fixed).

    Raises
    ------
    ValueError
        If the paper reports nothing for ``embedder``.
    """
    paper = paper_table()
    rows = paper[paper["embedder"] == embedder]
    if rows.empty:
        raise ValueError(f"Qu, Tu & Bao report no rows for {embedder!r}; choose one of "
                         f"{', '.join(dict.fromkeys(paper['embedder']))}.")
    gap = rows["breakpoint"] - rows["fixed"]
    g = gap.groupby(rows["documents"])
    out = pd.DataFrame({"datasets": g.size(), "breakpoint_ahead": (gap > 0).groupby(rows["documents"]).sum(),
                        "mean_gap": g.mean(), "min_gap": g.min(), "max_gap": g.max()})
    return out.loc[["stitched", "original"]]


def pattern_verdict(gap_treated_low: float, gap_treated_high: float, interaction_low: float,
                    interaction_high: float) -> str:
    """The paper's pattern, judged on both of its parts.

    Qu, Tu & Bao's finding has two parts: on stitched documents the semantic chunker is *ahead*
    of the reference, and stitching moves the gap its way. So:

    - ``"supports"`` needs both intervals above 0: the stitched gap and the interaction;
    - ``"contradicts"`` when either lies below 0 (behind on stitched text, or stitching moves
      the gap against it);
    - otherwise ``"cannot tell"`` (e.g. a chunker that gains from stitching but is not ahead
      on stitched text).
    """
    if gap_treated_low > 0 and interaction_low > 0:
        return "supports"
    if gap_treated_high < 0 or interaction_high < 0:
        return "contradicts"
    return "cannot tell"


def holm_verdicts(rows: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """:func:`pattern_verdict` for a family of exploratory contrasts, with Holm's correction.

    Parameters
    ----------
    rows : DataFrame
        One row per contrast with :func:`interaction`'s ``gap_treated``, ``interaction`` and
        their ``_p`` values.
    alpha : float, default 0.05
        Family-wise error rate.

    Returns
    -------
    DataFrame
        ``rows`` with ``gap_treated_p_holm`` and ``interaction_p_holm`` (adjusted over the
        ``2 * len(rows)`` tests of the family) and ``verdict_holm``: ``"supports"`` when both
        adjusted p-values are below ``alpha`` and both estimates above 0, ``"contradicts"``
        when either is below ``alpha`` with its estimate below 0, else ``"cannot tell"``.
    """
    from chunkwise.evaluation.stats import holm

    out = rows.copy()
    adjusted = holm(np.concatenate([out["gap_treated_p"].to_numpy(float), out["interaction_p"].to_numpy(float)]))
    out["gap_treated_p_holm"] = adjusted[: len(out)]
    out["interaction_p_holm"] = adjusted[len(out):]
    words = []
    for r in out.itertuples():
        gap_pos = r.gap_treated_p_holm < alpha and r.gap_treated > 0
        gap_neg = r.gap_treated_p_holm < alpha and r.gap_treated < 0
        int_pos = r.interaction_p_holm < alpha and r.interaction > 0
        int_neg = r.interaction_p_holm < alpha and r.interaction < 0
        words.append("supports" if gap_pos and int_pos else "contradicts" if gap_neg or int_neg else "cannot tell")
    out["verdict_holm"] = words
    return out


def cross_fit(scores: pd.DataFrame, folds: int = 2, seed: int = 0) -> tuple[pd.Series, list[str], pd.Series]:
    """The best of several settings, chosen without looking at the questions it is scored on.

    The questions are split at random (``seed``) into ``folds`` folds of near-equal size; for
    each fold the setting (column) with the highest mean on the *other* folds is chosen, and
    its scores on this fold are kept. The result is an honest per-question score of "the best
    setting of the sweep" (2-fold cross-fitting): choosing on the test questions themselves
    would favour whichever setting got lucky on them.

    Parameters
    ----------
    scores : DataFrame
        Rows = questions, columns = the settings of a sweep (e.g. breakpoint percentiles).
    folds : int, default 2
    seed : int, default 0
        The fold split; use the same seed in every condition of a paired comparison.

    Returns
    -------
    (Series, list of str, Series)
        Per-question scores (index = ``scores.index``), the setting chosen for each fold, and
        each question's fold (for :func:`cross_fit_apply`, which reads another measure of the
        same choice).

    Raises
    ------
    ValueError
        For fewer than ``folds`` questions, ``folds < 2`` or an empty sweep.
    """
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an int >= 2, got {folds!r}.")
    if scores.shape[1] < 1:
        raise ValueError("cross_fit needs at least one setting (column).")
    n = len(scores)
    if n < folds:
        raise ValueError(f"cross_fit needs at least {folds} questions, got {n}.")
    fold_of = np.random.default_rng(int(seed)).permutation(np.arange(n) % folds)
    out = pd.Series(np.nan, index=scores.index, dtype=float)
    chosen = []
    values = scores.to_numpy(dtype=float)
    for f in range(folds):
        train = values[fold_of != f]
        best = int(np.nanargmax(np.nanmean(train, axis=0)))
        chosen.append(str(scores.columns[best]))
        out.iloc[np.flatnonzero(fold_of == f)] = values[fold_of == f, best]
    return out, chosen, pd.Series(fold_of, index=scores.index)


def cross_fit_apply(other: pd.DataFrame, chosen: Sequence[str], fold: pd.Series) -> pd.Series:
    """Per question, ``other``'s value for the setting :func:`cross_fit` chose for its fold
    (another measure of the same choice, e.g. precision beside the recall it was chosen on).

    Raises
    ------
    ValueError
        If ``other`` lacks a question or a chosen setting.
    """
    missing = [c for c in chosen if c not in other.columns]
    if missing or not set(fold.index) <= set(other.index):
        raise ValueError("other must hold every question of the fold split and every chosen setting.")
    return pd.Series([float(other.loc[q, chosen[int(f)]]) for q, f in fold.items()], index=fold.index)


def stitched_panel(
    entry: Any,
    frames: Mapping[tuple[str, str, int], Mapping[str, pd.DataFrame]],
    corpus_of: Mapping[Any, str],
    *,
    method_column: str,
    labels: Mapping[str, str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """One of chapter 6's plan entries under its primary specification and every declared
    alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification (:func:`chunkwise.plan.specifications`) names ``metric``, ``reference``,
    ``corpora`` (``"all five, pooled"`` or one corpus), ``interval`` / ``confidence`` and, where the
    entry has them, ``layout`` and ``seed``. Its per-question values come from ``frames``: the gap
    is the method minus the reference (points), the interaction the stitched gap minus the real gap.

    - rule ``pattern`` (``mixed-content``): :func:`~chunkwise.evaluation.robustness.pattern` on the
      stitched gap and the interaction;
    - rule ``difference`` with ``condition`` ``"stitched"`` or ``"real"`` (``qtb-stitched``,
      ``qtb-real``): :func:`~chunkwise.evaluation.robustness.contrast` on that condition's gap.

    Parameters
    ----------
    entry : chunkwise.plan.PlanEntry
    frames : mapping
        ``{(metric, layout, seed): {"real": DataFrame, "stitched": DataFrame}}``: per-question
        scores (fractions; rows = question ids, the same in both conditions; columns = chunker
        labels plus ``method_column``, the cross-fitted method). Seed-only keys may leave out
        ``layout`` values other than the primary's.
    corpus_of : mapping
        Question id -> corpus name (for the per-corpus alternatives).
    method_column : str
        The column of the method under test (the cross-fitted breakpoint chunker).
    labels : mapping, optional
        Chunker spec -> column label (``"TokenText:200"`` -> ``"TokenText 200"``); specs are used
        as they are without it.
    n_resamples, seed
        Of the bootstrap intervals (the same seed for every specification, so the primary's
        interval equals :func:`interaction`'s).

    Returns
    -------
    (Robustness, DataFrame)
        The class, and one row per specification: ``specification``, ``estimate``, ``low``, ``high``
        (points), ``n``, ``mde`` (points, 80% power), ``verdict`` and, for the pattern rule, the stitched
        gap (``gap``, ``gap_low``, ``gap_high``).

    A declared alternative whose scores the run does not have (a corpus, seed or arm a parameter
    profile left out) is skipped and named in the class's ``not_run``; the primary must be there.

    Raises
    ------
    ValueError
        Naming the specification: the primary's (metric, layout, seed) missing from ``frames``, a
        reference column missing, a corpus with fewer than 2 questions, or an unknown condition.
    """
    from chunkwise.evaluation.robustness import classify, contrast, pattern
    from chunkwise.plan import specifications

    labels = dict(labels or {})
    results, rows, not_run = [], [], []
    corpus_of = {str(q): c for q, c in corpus_of.items()}  # ids as text: the grid's and the loader's agree
    present = set(corpus_of.values())
    for name, spec in specifications(entry):
        key = (str(spec["metric"]), str(spec.get("layout", "line breaks kept")), int(spec.get("seed", 0)))
        absent = key not in frames or (spec["corpora"] != "all five, pooled" and spec["corpora"] not in present)
        if absent and name != "primary":
            not_run.append(name)  # a run with fewer corpora, seeds or arms (a parameter profile)
            continue
        if key not in frames:
            raise ValueError(f"{entry.entry_id}, {name}: no scores for (metric, layout, seed) = {key}; "
                             f"the chapter has {sorted(frames)}")
        real, stitched = frames[key]["real"], frames[key]["stitched"]
        ref = labels.get(spec["reference"], spec["reference"])
        for cond, f in (("real", real), ("stitched", stitched)):
            for col in (method_column, ref):
                if col not in f.columns:
                    raise ValueError(f"{entry.entry_id}, {name}: the {cond} scores have no column {col!r}")
        in_stitched = set(stitched.index)
        ids = [q for q in real.index if q in in_stitched]
        if spec["corpora"] != "all five, pooled":
            ids = [q for q in ids if corpus_of.get(str(q)) == spec["corpora"]]
            if len(ids) < 2:
                raise ValueError(f"{entry.entry_id}, {name}: corpus {spec['corpora']!r} has {len(ids)} questions here")
        r_, s_ = real.loc[ids], stitched.loc[ids]
        # fractions in, points out (scale), each difference on its two arms as interaction() computes it
        gap_real = (r_[method_column] - r_[ref]).to_numpy(float)
        gap_st = (s_[method_column] - s_[ref]).to_numpy(float)
        kw = dict(delta=entry.delta, scale=100.0, method=spec["interval"], confidence=spec["confidence"],
                  n_resamples=n_resamples, seed=seed)
        if entry.rule == "pattern":
            r = pattern(name, s_[method_column].to_numpy(float), gap_st, gap_reference=s_[ref].to_numpy(float),
                        interaction_reference=gap_real, **kw)
        elif spec.get("condition") in ("stitched", "real"):
            cond = s_ if spec["condition"] == "stitched" else r_
            r = contrast(name, cond[method_column].to_numpy(float), reference=cond[ref].to_numpy(float),
                         words=entry.words, **kw)
        else:
            raise ValueError(f"{entry.entry_id}, {name}: a difference entry needs condition 'stitched' or 'real', "
                             f"got {spec.get('condition')!r}")
        results.append(r)
        rows.append({"specification": name, "estimate": r.estimate, "low": r.low, "high": r.high, "n": r.n,
                     "mde": r.mde, "verdict": r.verdict, **r.extra})
    rob = classify(results[0], results[1:], delta=entry.delta, unit=entry.unit, not_run=not_run)
    return rob, pd.DataFrame(rows)


def verdict_words(low: float, high: float) -> str:
    """``"supports"`` when the interval lies above 0, ``"contradicts"`` below 0, else
    ``"cannot tell"``."""
    from chunkwise.evaluation.stats import interval_side

    return interval_side(low, high, ("supports", "contradicts", "cannot tell"))


def chapter_answer(
    head: Mapping[str, float],
    head_doc: Mapping[str, float],
    head_shuffled: Mapping[str, float],
    by_seed: pd.DataFrame,
    exploratory: pd.DataFrame,
    *,
    fixed: str,
    baseline: str,
    n_questions: int,
    corpora: Sequence[str],
    embedder: str,
    cosine_drop: Mapping[str, float],
    k: int = 5,
    head_flat: Mapping[str, float] | None = None,
    layout: Mapping[str, float] | None = None,
    second_embedder: str | None = None,
    head_second: Mapping[str, float] | None = None,
    second_difference: Mapping[str, float] | None = None,
    second_corpora: Sequence[str] = (),
    second_n_questions: int | None = None,
    robustness: Any = None,
    kamradt: Mapping[str, float] | None = None,
    kamradt_label: str = "Kamradt",
    amendments: Sequence[Mapping[str, str]] = (),
) -> str:
    """Chapter 6's answer, built from its intervals (so it stays right when the run changes).

    Parameters
    ----------
    head, head_doc, head_shuffled : mapping
        :func:`interaction` of the primary contrast (in points): span recall stitched vs real,
        segment-retrieval F1 stitched vs real, span recall shuffled vs real.
    by_seed : DataFrame
        One row per stitching seed with ``interaction`` (points), the primary's first.
    exploratory : DataFrame
        :func:`holm_verdicts` of the exploratory contrasts, with ``treated``, ``chunker``.
    fixed, baseline : str
        The two references' labels.
    n_questions : int
    corpora : sequence of str
        Chroma corpora of the run (all five are named "all five").
    embedder : str
    cosine_drop : mapping {"stitched", "shuffled"} -> float
        How far the cosine of neighbouring sentences drops across the seams (:func:`seam_cosines`).
    k : int, default 5
    head_flat : mapping, optional
        :func:`interaction` of the primary contrast with every line break a space (points).
    layout : mapping, optional
        :func:`layout_difference` of the primary contrast (points): the part of its
        interaction that removing the line breaks takes away.
    second_embedder, head_second, second_difference, second_corpora, second_n_questions : optional
        The arm with a second embedder (cutting and retrieving): its name, the primary
        contrast's :func:`interaction` with it (points), :func:`arm_difference` of the arms
        ``second`` and ``first`` (the second embedder's interaction minus ``embedder``'s on the
        same questions, points), the corpora and the number of questions of that arm.

    robustness : Robustness, optional
        The plan's ``mixed-content`` panel (:func:`stitched_panel`): the lead states the verdict with
        its class in a few words (:func:`chunkwise.answerbox.robustness_words`), the details name
        the alternatives it flips under.
    kamradt : mapping, optional
        :func:`interaction` of ``kamradt_label`` (LangChain's defaults) against ``fixed`` (points):
        the chapter's headline row until 2026-12-05: its verdict in the lead, its interval in the details.
    amendments : sequence of mapping
        The plan entry's amendments (:func:`chunkwise.plan.amendments`), stated in the details.

    Returns
    -------
    str
        The answer box (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (what
        to do about mixed content, the verdict with the interaction's interval and the robustness
        class in a few words, Kamradt's verdict), then folded details: the primary verdict
        (:func:`pattern_verdict`) with both intervals and the corpora, the spread over stitching
        seeds, segment-retrieval F1, the shuffled control, the Holm-corrected count of the
        exploratory rows, the robustness sentence naming each alternative that disagrees,
        Kamradt's row with its interval, the arm without line breaks and the arm with a second
        embedder (when given), what the test can and cannot settle, and the amendments.
    """
    from chunkwise.answerbox import answer_box, capped, robustness_words
    from chunkwise.evaluation.stats import describe_interval

    def ci(r: Mapping[str, float], name: str) -> str:
        return describe_interval(r[name], r[f"{name}_low"], r[f"{name}_high"])

    words = pattern_verdict(head["gap_treated_low"], head["gap_treated_high"], head["interaction_low"],
                            head["interaction_high"])
    claim = "the guide's claim that semantic chunking gains where one file mixes unrelated content"
    reading = {"supports": f"**supports** {claim}", "contradicts": f"**contradicts** {claim}",
               "cannot tell": f"**cannot tell** whether {claim} holds here"}[words]
    lo, hi = float(by_seed["interaction"].min()), float(by_seed["interaction"].max())
    drop_st, drop_sh = cosine_drop["stitched"], cosine_drop["shuffled"]
    shuffle_note = (f"its seams lower the cosine of neighbouring sentences {drop_sh / drop_st:.0%} as far as "
                    "the stitched ones, so it is only in part the control without a topic change it was meant "
                    "to be" if drop_sh > 0.25 * drop_st else
                    f"its seams lower that cosine by only {drop_sh:.3f} (stitched {drop_st:.3f})")
    st = exploratory[exploratory["treated"] == "stitched"]
    n_sup, n_con = int((st["verdict_holm"] == "supports").sum()), int((st["verdict_holm"] == "contradicts").sum())
    backers = list(dict.fromkeys(r.chunker for r in st.itertuples() if r.verdict_holm == "supports"))
    n_sem = st["chunker"].nunique()
    if head_flat is not None and layout is not None:
        flat_words = pattern_verdict(head_flat["gap_treated_low"], head_flat["gap_treated_high"],
                                     head_flat["interaction_low"], head_flat["interaction_high"])
        flat_text = (
            f"With every line break turned into a space, so that no seam is marked by layout, the same test "
            f"gives {ci(head_flat, 'gap_treated')} on stitched text and an interaction of "
            f"{ci(head_flat, 'interaction')} ({flat_words}); the part of the interaction that the line breaks "
            f"carried (kept minus none) is {ci(layout, 'layout_part')} points. "
        )
        layout_settles = ", on seams with and without a line break"
        layout_open = ""
    else:
        flat_text = ""
        layout_settles = " and seams that mostly follow a line break"
        layout_open = (", or whether a gain comes from meaning rather than layout (a chunker that prefers line "
                       "breaks finds most seams without embeddings)")
    scope = ("all five of Chroma's corpora, pooled" if len(corpora) == 5
             else f"{len(corpora)} of Chroma's five corpora ({', '.join(corpora)}), pooled")
    embedders_settled = f"with one small embedder ({embedder})"
    second_text = ""
    if second_embedder is not None and head_second is not None and second_difference is not None:
        second_words = pattern_verdict(head_second["gap_treated_low"], head_second["gap_treated_high"],
                                       head_second["interaction_low"], head_second["interaction_high"])
        second_text = (
            f"With {second_embedder} cutting and retrieving, on {', '.join(second_corpora)} "
            f"({second_n_questions} questions), the stitched gap is {ci(head_second, 'gap_treated')} and the "
            f"interaction {ci(head_second, 'interaction')} ({second_words}); {embedder}'s interaction on the same "
            f"questions is {ci(second_difference, 'interaction_first')}, a difference of "
            f"{ci(second_difference, 'difference')} points. "
        )
        embedders_settled = (f"with {embedder}, and with {second_embedder} on "
                             f"{len(second_corpora)} of the corpora")
    # the lead: what to do and how sure, in fixed wording with counts and at most two short labels
    # (no corpus names, no list of alternatives), so it stays within the answer box's 60 words
    fixed_name = capped(f"fixed-size {fixed}", 3, "the fixed-size reference")
    lead = {
        "supports": f"**Where one file mixes unrelated content, try a tuned breakpoint chunker over "
                    f"{fixed_name}**: stitching widens its lead by",
        "contradicts": f"**Mixed content is no reason to swap {fixed_name} for a breakpoint chunker**: "
                       "stitching changes its lead by",
        "cannot tell": f"**Mixed content is no proven reason to swap {fixed_name} for a breakpoint "
                       "chunker**: stitching changes its lead by",
    }[words]
    how_sure = f"**{words}**" + (f"; {robustness_words(robustness)}" if robustness is not None else "")
    pooled = "Chroma's five corpora" if len(corpora) == 5 else f"{len(corpora)} of Chroma's corpora"
    lead += f" {ci(head, 'interaction')} recall points pooled over {pooled} ({how_sure})."
    kamradt_text = ""
    if kamradt is not None:
        k_words = pattern_verdict(kamradt["gap_treated_low"], kamradt["gap_treated_high"],
                                  kamradt["interaction_low"], kamradt["interaction_high"])
        k_name = capped(kamradt_label, 2, "The semantic chunker")
        lead += f" {k_name} at LangChain's defaults, the guide's own chunker: **{k_words}**."
        kamradt_text = (f"{kamradt_label} at LangChain's defaults, the guide's own chunker, against {fixed}: an "
                        f"interaction of {ci(kamradt, 'interaction')} recall points ({k_words}). ")
    rob_text = (f"The declared alternatives ({words}): {robustness.describe()}. " if robustness is not None
                else "")
    amended = "".join(f" Amended {a['date']}: {a['reason']} Before: {a['previous']}." for a in amendments)
    details = (
        f"The declared test, the breakpoint chunker at its cross-fitted best setting against fixed-size "
        f"{fixed}, on {{term}}`span recall`@{k}: {ci(head, 'gap_treated')} points on stitched text and "
        f"{ci(head, 'gap_control')} on real text, an {{term}}`interaction` of {ci(head, 'interaction')} "
        f"(paired 95% intervals, {n_questions} questions, {scope}), so this test {reading}; on {len(by_seed)} "
        "random "
        f"stitching orders the interaction runs {lo:+.1f} to {hi:+.1f} points. Segment-retrieval F1@{k} "
        f"gives {ci(head_doc, 'gap_treated')} on stitched text and an interaction of "
        f"{ci(head_doc, 'interaction')}. Shuffling segments within their corpus moves the recall gap by "
        f"{ci(head_shuffled, 'interaction')}; {shuffle_note}. Of the {len(st)} exploratory contrasts "
        f"({n_sem} semantic chunkers against {fixed} and {baseline}, in both measures), {n_sup} "
        f"support{'s' if n_sup == 1 else ''} the pattern and {n_con} contradict{'s' if n_con == 1 else ''} it "
        "after Holm's correction"
        + (f" (chunkers with one in support: {', '.join(backers)})" if backers else "") + ". "
        + rob_text
        + kamradt_text
        + flat_text
        + second_text
        + f"What it settles: the direction of the paper's pattern on {scope}, {embedders_settled}"
        f"{layout_settles}. What it cannot: the size of the paper's gains on its datasets and "
        f"embedders{layout_open}." + amended
    )
    return answer_box(lead, details)


# --------------------------------------------------------------------------------------
# the chapter's runs, and the tables and sentences its notebook shows
# --------------------------------------------------------------------------------------

#: The column the chapter's per-question score frames give the primary contrast's method: the
#: breakpoint chunker at the best setting of its sweep, chosen by cross-fitting (:func:`with_primary`).
PRIMARY = "breakpoint, cross-fitted"

#: The chapter's display labels for measure names it uses in its own sense
#: (:func:`chunkwise.labels.labelled`): its document F1 is segment-retrieval F1 (segments as the
#: documents), and the seams have scores of their own.
MEASURE_LABELS: dict[str, str] = {
    "doc_f1": "segment F1", "doc_f1_any": "segment F1 (any)", "doc_f1_of_means": "segment F1 of means",
    "unscorable": "evidence unscorable (%)", "drop": "cosine drop at seams", "pk": "Pk",
    "windowdiff": "WindowDiff",
}

#: The three conditions of the main grid, in the chapter's order.
CONDITIONS: tuple[str, ...] = ("real", "shuffled", "stitched")


def cost_tracker(costs: list[dict[str, Any]], condition: str,
                 model: Any) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """A ``progress`` hook for :func:`~chunkwise.evaluation.grid.run_grid` that records what each
    chunker cost.

    Parameters
    ----------
    costs : list
        Appended to, one dict per chunker spec: ``condition``, ``chunker`` (the spec's label),
        ``seconds`` (wall-clock seconds from handing the spec out to the grid asking for the next
        one), ``texts_requested`` and ``texts_embedded`` (how far ``model.n_requested`` and
        ``model.n_embedded`` grew meanwhile: texts asked for, and those not found in the embedding
        cache).
    condition : str
        Written into each record (e.g. ``"stitched, seed 1"``).
    model : embedder
        The embedder the grid uses, with the counters ``n_requested`` and ``n_embedded``
        (:class:`chunkwise.embeddings.cache.CachedEmbedder` and the embedders built on it).

    Returns
    -------
    callable
        ``tracked(specs)``: a generator over ``specs`` that records a spec when the grid asks for
        the one after it (or ends).

    Raises
    ------
    TypeError
        If ``costs`` cannot be appended to or ``model`` has no text counters.
    """
    if not hasattr(costs, "append"):
        raise TypeError(f"costs must be a list to append to, got {type(costs).__name__}.")
    missing = [a for a in ("n_requested", "n_embedded") if not hasattr(model, a)]
    if missing:
        raise TypeError(f"the model {type(model).__name__} does not count texts (no {', '.join(missing)}); "
                        "give the embedder the grid runs with.")

    def tracked(specs: Iterable[Any]) -> Iterator[Any]:
        """Yield each chunker spec of ``specs``; record its seconds and texts once the grid is done
        with it."""
        for spec in specs:
            t0, r0, e0 = time.perf_counter(), model.n_requested, model.n_embedded
            yield spec
            costs.append({"condition": condition, "chunker": spec.label,
                          "seconds": time.perf_counter() - t0,
                          "texts_requested": model.n_requested - r0,
                          "texts_embedded": model.n_embedded - e0})
    return tracked


def chunker_scores(result: Any, labels: Iterable[str], metric: str, k: int) -> pd.DataFrame:
    """Per-question scores of a dense grid at one ``k``, one column per chunker.

    Parameters
    ----------
    result : GridResult
        A grid with the ``dense`` retriever (:func:`~chunkwise.evaluation.grid.run_grid`).
    labels : iterable of str
        Chunker labels (``"TokenText 200"``), in the order wanted; a label the grid did not run is
        left out.
    metric : str
        A per-question metric of the grid (``"recall"``, ``"iou"``, ...; fractions).
    k : int
        The retrieval depth.

    Returns
    -------
    DataFrame
        Rows = question ids (the grid's), columns = the labels the grid has at ``k``, in the order of
        ``labels``.

    Raises
    ------
    ValueError
        If the grid has none of the labels at depth ``k``.
    """
    cells = {f"{lab} | dense | k={k}": lab for lab in labels}
    wide = result.scores(metric)
    kept = [c for c in cells if c in wide.columns]
    if not kept:
        raise ValueError(f"the grid has no dense cell at k={k} for any of {', '.join(cells.values())}; "
                         f"its cells: {', '.join(map(str, wide.columns))}.")
    return wide[kept].rename(columns=cells)


def segment_scores(per_question: pd.DataFrame, labels: Iterable[str], k: int,
                   column: str = "doc_f1") -> pd.DataFrame:
    """One segment-retrieval measure at one ``k``, one column per chunker.

    Parameters
    ----------
    per_question : DataFrame
        :func:`document_retrieval`'s table (a row per chunker, ``k`` and question).
    labels : iterable of str
        Chunker labels, in the order wanted; every one must be in ``per_question``.
    k : int
        The retrieval depth.
    column : str, default "doc_f1"
        The measure (``doc_f1``, ``doc_precision``, ``doc_recall``, ``doc_f1_any``...; fractions).

    Returns
    -------
    DataFrame
        Rows = question ids, columns = ``labels``.

    Raises
    ------
    ValueError
        If ``per_question`` has no row at ``k``, no column ``column``, or lacks a label.
    """
    if column not in per_question.columns:
        raise ValueError(f"no measure {column!r} in the segment-retrieval table; have {list(per_question.columns)}.")
    at_k = per_question[per_question["k"] == k]
    if at_k.empty:
        raise ValueError(f"the segment-retrieval table has no row at k={k}; it has k = "
                         f"{sorted(set(per_question['k']))}.")
    d = at_k.pivot(index="question_id", columns="chunker", values=column)
    labels = list(labels)
    missing = [lab for lab in labels if lab not in d.columns]
    if missing:
        raise ValueError(f"no segment-retrieval scores for {', '.join(missing)} at k={k}.")
    return d[labels]


def interval_text(r: Mapping[str, float], name: str) -> str:
    """``r[name]`` with its interval ``r[name + "_low"]``, ``r[name + "_high"]`` as the book prints
    it, e.g. ``"+3.3 [-1.1, +5.0]"`` (:func:`~chunkwise.evaluation.stats.describe_interval`).

    Parameters
    ----------
    r : mapping
        An :func:`interaction`-style result (any unit; usually points, :func:`in_points`).
    name : str
        ``"interaction"``, ``"gap_treated"``, ``"difference"``, ...

    Returns
    -------
    str

    Raises
    ------
    KeyError
        If ``r`` lacks the estimate or an end of its interval.
    """
    from chunkwise.evaluation.stats import describe_interval

    return describe_interval(r[name], r[name + "_low"], r[name + "_high"])


def direction_words(low: float, high: float, a: str, b: str) -> str:
    """Which of two things a paired interval of ``a - b`` puts ahead.

    Parameters
    ----------
    low, high : float
        The interval's ends (any unit).
    a, b : str
        The two names (``"breakpoint"``, ``"fixed-size"``).

    Returns
    -------
    str
        ``"<a> ahead"`` when ``low > 0``, ``"<b> ahead"`` when ``high < 0``, else
        ``"no difference shown"`` (:func:`~chunkwise.evaluation.stats.interval_side`).
    """
    from chunkwise.evaluation.stats import interval_side

    return interval_side(low, high, (f"{a} ahead", f"{b} ahead", "no difference shown"))


def in_points(r: Mapping[str, float]) -> dict[str, float]:
    """An :func:`interaction`-style result of fractions in points: every value times 100 but the
    p-values (keys ending in ``_p``).

    Parameters
    ----------
    r : mapping
        Name -> number.

    Returns
    -------
    dict
        The same keys, in the same order.
    """
    return {k: (100 * v if not k.endswith("_p") else v) for k, v in r.items()}


def with_primary(frames: Mapping[str, pd.DataFrame], sweep: Sequence[str], *, folds: int = 2,
                 seed: int = 0) -> tuple[dict[str, pd.DataFrame], dict[str, list[str]]]:
    """Each condition's scores plus the primary contrast's method: the best setting of ``sweep``,
    chosen by :func:`cross_fit` in each condition (column :data:`PRIMARY`).

    Parameters
    ----------
    frames : mapping condition -> DataFrame
        Per-question scores (rows = question ids, columns = chunker labels), one of them ``"real"``;
        every condition is put in the real condition's question order first, so the folds fall
        alike in every condition.
    sweep : sequence of str
        The columns of the sweep (the breakpoint chunker's settings).
    folds, seed : int
        Of :func:`cross_fit`'s random split of the questions.

    Returns
    -------
    (dict, dict)
        Condition -> the frame with :data:`PRIMARY` added; condition -> the setting chosen per fold.

    Raises
    ------
    ValueError
        If there is no ``"real"`` condition, a condition lacks a question of the real one or a
        setting of the sweep (or :func:`cross_fit`'s errors).
    """
    if "real" not in frames:
        raise ValueError(f"with_primary orders the questions as the real condition does; got {sorted(frames)}.")
    order = frames["real"].index
    out, chosen = {}, {}
    for cond, f in frames.items():
        missing = [s for s in sweep if s not in f.columns]
        if missing or not set(order) <= set(f.index):
            raise ValueError(f"the {cond} scores lack " + (f"the settings {', '.join(missing)}" if missing
                                                           else "questions of the real condition") + ".")
        f = f.loc[order]
        best, picks, _ = cross_fit(f[list(sweep)], folds=folds, seed=seed)
        out[cond], chosen[cond] = f.assign(**{PRIMARY: best}), picks
    return out, chosen


def exploratory_row(rows: pd.DataFrame, metric: str, chunker: str, reference: str,
                    treated: str = "stitched") -> pd.Series:
    """One exploratory contrast of :func:`exploratory_contrasts`.

    Parameters
    ----------
    rows : DataFrame
        :func:`exploratory_contrasts`' table.
    metric, chunker, reference, treated : str
        Which row: ``"recall"`` or ``"doc_f1"``, the semantic chunker's label, the reference's label,
        ``"stitched"`` or ``"shuffled"``.

    Returns
    -------
    Series
        The row (points).

    Raises
    ------
    ValueError
        If the table has no such row.
    """
    found = rows[(rows.metric == metric) & (rows.chunker == chunker) & (rows.reference == reference)
                 & (rows.treated == treated)]
    if found.empty:
        raise ValueError(f"no exploratory row for {metric}, {chunker} against {reference}, {treated}.")
    return found.iloc[0]


def p_value_text(p: float) -> str:
    """A p-value as the exploratory table prints it: ``"< 0.001"`` below 0.001, else three decimals
    (``"0.042"``)."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


@dataclass
class ChapterRuns:
    """Every grid chapter 6 runs, and what they ran on (:func:`run_chapter`, then :func:`run_arms`).

    Attributes
    ----------
    texts : dict
        Corpus name -> text (Chroma's corpora).
    questions : DataFrame
        The corpora's questions (:func:`chunkwise.datasets.load_chroma_questions`).
    embedder : embedder
        The chapter's embedder (cutting and retrieving).
    labels : dict
        Chunker spec -> label, for every chunker of the main grid (the chunkers, then the sweep).
    segments : object
        The segmentation every condition is built from
        (:func:`chunkwise.datasets.stitch.segment_documents`).
    conditions, results : dict
        Condition (``real``, ``shuffled``, ``stitched``) -> its corpus
        (:func:`chunkwise.datasets.stitch.build_condition`) and its grid.
    fixed, baseline : str
        The two references' specs.
    primary_sweep : list of str
        The breakpoint settings of the primary contrast (specs).
    settings : dict
        What the arms reuse: ``corpora``, ``embedding_model``, ``mode``, ``min_tokens``, ``max_tokens``,
        ``segments_per_document``, ``seed``, ``mirror``, ``cache_dir``.
    cost_records : list of dict
        :func:`cost_tracker`'s records, one per grid and chunker, in the order run.
    started : float
        :func:`time.perf_counter` when the run began.
    seed_results : dict
        Other stitching seed -> the grid of the reference and the sweep on that stitched order.
    flat_conditions, flat_results : dict
        ``real`` / ``stitched`` with every line break a space -> the corpus and the grid of the
        reference, the baseline and the sweep (empty without that arm).
    second_corpora : list of str
        The second-embedder arm's corpora (empty without that arm).
    second_questions : DataFrame or None
        Their questions.
    second_conditions : dict
        ``real`` / ``stitched`` on those corpora -> the corpus.
    second_results : dict
        ``(arm, condition)`` -> the grid of the reference and the sweep, ``arm`` ``"first"`` (the
        chapter's embedder) or ``"second"``.
    """

    texts: dict[str, str]
    questions: pd.DataFrame
    embedder: Any
    labels: dict[str, str]
    segments: Any
    conditions: dict[str, Any]
    results: dict[str, Any]
    fixed: str
    baseline: str
    primary_sweep: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    cost_records: list[dict[str, Any]] = field(default_factory=list)
    started: float = 0.0
    seed_results: dict[int, Any] = field(default_factory=dict)
    flat_conditions: dict[str, Any] = field(default_factory=dict)
    flat_results: dict[str, Any] = field(default_factory=dict)
    second_corpora: list[str] = field(default_factory=list)
    second_questions: pd.DataFrame | None = None
    second_conditions: dict[str, Any] = field(default_factory=dict)
    second_results: dict[tuple[str, str], Any] = field(default_factory=dict)

    @property
    def costs(self) -> pd.DataFrame:
        """:attr:`cost_records` as a table: ``condition``, ``chunker``, ``seconds``,
        ``texts_requested``, ``texts_embedded``, a row per grid and chunker."""
        return pd.DataFrame(self.cost_records)

    @cached_property
    def segment_retrieval(self) -> dict[str, pd.DataFrame]:
        """Condition -> :func:`document_retrieval` of its grid (computed once)."""
        return {c: document_retrieval(self.results[c], self.conditions[c]) for c in self.conditions}

    def scores(self, condition: str, metric: str, k: int) -> pd.DataFrame:
        """Per-question scores of one condition's grid at depth ``k`` (:func:`chunker_scores`):
        rows = question ids, one column per chunker label (fractions).

        Raises
        ------
        KeyError
            If there is no such condition.
        """
        return chunker_scores(self.results[condition], self.labels.values(), metric, k)

    def segment_scores(self, condition: str, k: int, column: str = "doc_f1") -> pd.DataFrame:
        """Per-question segment-retrieval ``column`` of one condition at depth ``k``
        (:func:`segment_scores`): rows = question ids, one column per chunker label (fractions).

        Raises
        ------
        KeyError
            If there is no such condition.
        """
        return segment_scores(self.segment_retrieval[condition], self.labels.values(), k, column)


def run_chapter(
    corpora: Sequence[str],
    chunkers: Sequence[str],
    primary_sweep: Sequence[str],
    *,
    fixed: str,
    baseline: str,
    model: str,
    top_k: Sequence[int],
    mode: str,
    min_tokens: int,
    max_tokens: int,
    segments_per_document: int,
    seed: int = 0,
    mirror: Any = None,
    cache_dir: Any = None,
) -> ChapterRuns:
    """Load Chroma's corpora, build the three conditions of one segmentation and run the main grid
    on each (:func:`run_arms` runs the primary contrast's arms after it).

    The main grid runs ``chunkers`` and ``primary_sweep`` with the dense retriever at ``top_k`` in
    the ``real``, ``shuffled`` and ``stitched`` condition (:data:`CONDITIONS`), reading and filling
    the chunk-span cache (``cache_dir``) and the embedding cache; each chunker's seconds and texts
    are recorded (:func:`cost_tracker`).

    Parameters
    ----------
    corpora : sequence of str
        Chroma corpus names.
    chunkers, primary_sweep : sequence of str
        Chunker specs: the chapter's rows, and the breakpoint settings of the primary contrast.
    fixed, baseline : str
        The two references' specs; both must be among ``chunkers`` or ``primary_sweep``.
    model : str
        The chapter's sentence-transformers model (cutting and retrieving).
    top_k : sequence of int
        Retrieval depths.
    mode : str
        The grid's metric mode (``"chroma"``).
    min_tokens, max_tokens : int
        The segments' size range, cl100k_base tokens.
    segments_per_document : int
        Segments per stitched (and shuffled) document.
    seed : int, default 0
        The stitched and shuffled orders.
    mirror, cache_dir : path, optional
        The data mirror and the chunk-span cache.

    Returns
    -------
    ChapterRuns
        Without arms yet.

    Raises
    ------
    ValueError
        If ``fixed`` or ``baseline`` is not among the chunkers run; the loaders and the grid raise
        for unknown corpora or specs.
    """
    from chunkwise.chunkers.specs import parse_spec
    from chunkwise.datasets import load_chroma_corpora, load_chroma_questions
    from chunkwise.datasets.stitch import build_condition, segment_documents
    from chunkwise.embeddings import SentenceTransformerEmbedder
    from chunkwise.evaluation.grid import GridConfig, run_grid

    grid_chunkers = list(dict.fromkeys([*chunkers, *primary_sweep]))
    for role, spec in (("fixed", fixed), ("baseline", baseline)):
        if spec not in grid_chunkers:
            raise ValueError(f"the {role} reference {spec!r} is not among the chunkers run; add it to "
                             "`chunkers`.")
    started = time.perf_counter()
    texts = load_chroma_corpora(corpora, mirror=mirror)
    questions = load_chroma_questions(corpora, mirror=mirror)
    embedder = SentenceTransformerEmbedder(model, show_progress_bar=False)
    labels = {s: parse_spec(s).label for s in grid_chunkers}
    segments = segment_documents(texts, questions, min_tokens=min_tokens, max_tokens=max_tokens)
    conditions = {
        c: build_condition(texts, questions, c, segments=segments,
                           segments_per_document=segments_per_document, seed=seed)
        for c in CONDITIONS
    }
    grid = GridConfig(chunkers=grid_chunkers, retrievers=["dense"], top_k=list(top_k), mode=mode)
    results: dict[str, Any] = {}
    costs: list[dict[str, Any]] = []
    for cond, corpus in conditions.items():
        results[cond] = run_grid(corpus.docs, corpus.questions, grid, embedder, cache_dir=cache_dir,
                                 progress=cost_tracker(costs, cond, embedder))
    settings = {"corpora": list(corpora), "embedding_model": model, "mode": mode, "min_tokens": min_tokens,
                "max_tokens": max_tokens, "segments_per_document": segments_per_document, "seed": seed,
                "mirror": mirror, "cache_dir": cache_dir}
    return ChapterRuns(texts=texts, questions=questions, embedder=embedder, labels=labels, segments=segments,
                       conditions=conditions, results=results, fixed=fixed, baseline=baseline,
                       primary_sweep=list(primary_sweep), settings=settings, cost_records=costs,
                       started=started)


def run_arms(runs: ChapterRuns, *, k: int, extra_seeds: Sequence[int] = (), flat_arm: bool = True,
             second_embedder: str | None = None, second_corpora: Sequence[str] = ()) -> ChapterRuns:
    """Run the primary contrast's arms after the main grid (:func:`run_chapter`).

    The primary contrast (the fixed-size reference and the sweep, at ``k`` only) runs again on the
    stitched orders of ``extra_seeds``; with ``flat_arm`` the reference, the baseline and the sweep
    run on real and stitched text with every line break a space; with ``second_embedder`` the
    primary contrast runs on ``second_corpora`` with that embedder and with the chapter's, so that
    the two are paired over the same questions. The settings (segments, seed, caches) are the main
    run's; costs are appended to :attr:`ChapterRuns.cost_records` in the order run.

    Parameters
    ----------
    runs : ChapterRuns
        :func:`run_chapter`'s, with no arm run yet.
    k : int
        The depth of the arms' grids.
    extra_seeds : sequence of int
        Other stitched orders.
    flat_arm : bool, default True
        Run the arm without line breaks.
    second_embedder : str, optional
        A model name for :func:`chunkwise.embeddings.make_embedder`; None skips that arm.
    second_corpora : sequence of str
        That arm's corpora (:func:`arm_corpora`).

    Returns
    -------
    ChapterRuns
        ``runs`` itself, its arms filled in.

    Raises
    ------
    ValueError
        If ``runs`` already holds an arm, or :func:`arm_corpora` refuses the second arm's corpora.
    """
    from chunkwise.datasets import load_chroma_questions
    from chunkwise.datasets.stitch import build_condition, segment_documents
    from chunkwise.embeddings import make_embedder
    from chunkwise.evaluation.grid import GridConfig, run_grid

    if runs.seed_results or runs.flat_results or runs.second_results:
        raise ValueError("these runs already hold their arms; run_arms runs them once.")
    texts, questions, embedder, costs = runs.texts, runs.questions, runs.embedder, runs.cost_records
    st = runs.settings
    fixed, baseline, primary_sweep = runs.fixed, runs.baseline, runs.primary_sweep
    cache_dir, mode, per_doc, seed = st["cache_dir"], st["mode"], st["segments_per_document"], st["seed"]
    # the primary contrast again on other random orders of the stitched condition
    primary_specs = list(dict.fromkeys([fixed, *primary_sweep]))
    seed_grid = GridConfig(chunkers=primary_specs, retrievers=["dense"], top_k=[k], mode=mode)
    for s in extra_seeds:
        st_s = build_condition(texts, questions, "stitched", segments=runs.segments,
                               segments_per_document=per_doc, seed=s)
        runs.seed_results[s] = run_grid(st_s.docs, st_s.questions, seed_grid, embedder, cache_dir=cache_dir,
                                        progress=cost_tracker(costs, f"stitched, seed {s}", embedder))
    # the primary contrast and the baseline again with every line break a space (no layout cue)
    if flat_arm:
        flat_grid = GridConfig(chunkers=list(dict.fromkeys([fixed, baseline, *primary_sweep])),
                               retrievers=["dense"], top_k=[k], mode=mode)
        for cond in ("real", "stitched"):
            flat = runs.flat_conditions[cond] = build_condition(
                texts, questions, cond, segments=runs.segments, segments_per_document=per_doc, seed=seed,
                layout="flat")
            runs.flat_results[cond] = run_grid(flat.docs, flat.questions, flat_grid, embedder, cache_dir=cache_dir,
                                               progress=cost_tracker(costs, f"{cond}, no line breaks", embedder))
    # the primary contrast with a second embedder cutting and retrieving, and with the chapter's, on
    # the same (smaller) set of corpora, so the two interactions are paired over the same questions
    if second_embedder:
        sub_corpora = arm_corpora(second_corpora, st["corpora"])
        sub_texts = {c: texts[c] for c in sub_corpora}
        sub_questions = load_chroma_questions(sub_corpora, mirror=st["mirror"])
        sub_segments = segment_documents(sub_texts, sub_questions, min_tokens=st["min_tokens"],
                                         max_tokens=st["max_tokens"])
        second_model = make_embedder(second_embedder)
        second_grid = GridConfig(chunkers=primary_specs, retrievers=["dense"], top_k=[k], mode=mode)
        runs.second_corpora, runs.second_questions = sub_corpora, sub_questions
        for cond in ("real", "stitched"):
            c_ = runs.second_conditions[cond] = build_condition(
                sub_texts, sub_questions, cond, segments=sub_segments, segments_per_document=per_doc, seed=seed)
            for arm, model, name in (("first", embedder, st["embedding_model"]),
                                     ("second", second_model, second_embedder)):
                runs.second_results[arm, cond] = run_grid(
                    c_.docs, c_.questions, second_grid, model, cache_dir=cache_dir,
                    progress=cost_tracker(costs, f"{cond}, {name}, {len(sub_corpora)} corpora", model))
    return runs


@dataclass
class Contrasts:
    """The contrasts chapter 6 reads (:func:`contrasts`); every interval in points.

    Attributes
    ----------
    recall, segment_f1 : dict
        Condition -> per-question span recall / segment-retrieval F1 at the chapter's ``k``
        (fractions; a column per chunker label plus :data:`PRIMARY`), from :func:`with_primary`.
    chosen_recall, chosen_segment_f1 : dict
        Condition -> the sweep setting chosen per fold on each measure.
    head, head_doc, head_shuffled : Series
        :func:`interaction` of :data:`PRIMARY` against the fixed-size reference: span recall and
        segment-retrieval F1 stitched against real, span recall shuffled against real.
    verdict : str
        :func:`pattern_verdict` of ``head``.
    recall_by_seed : dict
        Other stitching seed -> ``{"real", "stitched"}`` recall frames with :data:`PRIMARY`.
    by_seed : DataFrame
        One row per stitching seed (the chapter's first): ``seed``, ``head``'s keys, ``verdict``.
    recall_flat : dict or None
        Recall frames of the arm without line breaks (None without it).
    head_flat, layout_primary, layout_baseline : Series or None
        The primary contrast without line breaks, and :func:`layout_difference` of the primary
        contrast and of the baseline against the reference.
    exploratory : DataFrame
        :func:`exploratory_contrasts`.
    head_second : dict
        ``(arm, measure)`` -> :func:`interaction` of the primary contrast in the second-embedder arm
        (``arm`` ``"first"`` / ``"second"``, ``measure`` ``"recall"`` / ``"doc_f1"``); empty without it.
    second_difference : dict
        Measure -> :func:`arm_difference` of ``second`` against ``first``.
    """

    recall: dict[str, pd.DataFrame]
    chosen_recall: dict[str, list[str]]
    segment_f1: dict[str, pd.DataFrame]
    chosen_segment_f1: dict[str, list[str]]
    head: pd.Series
    head_doc: pd.Series
    head_shuffled: pd.Series
    verdict: str
    recall_by_seed: dict[int, dict[str, pd.DataFrame]]
    by_seed: pd.DataFrame
    exploratory: pd.DataFrame
    recall_flat: dict[str, pd.DataFrame] | None = None
    head_flat: pd.Series | None = None
    layout_primary: pd.Series | None = None
    layout_baseline: pd.Series | None = None
    head_second: dict[tuple[str, str], pd.Series] = field(default_factory=dict)
    second_difference: dict[str, pd.Series] = field(default_factory=dict)


def exploratory_contrasts(by_metric: Mapping[str, Mapping[str, pd.DataFrame]], semantic: Sequence[str],
                          references: Sequence[str], *, n_resamples: int = 10_000, seed: int = 0,
                          alpha: float = 0.05) -> pd.DataFrame:
    """Every semantic chunker against every reference, in the stitched and the shuffled condition,
    Holm-corrected as one family (:func:`holm_verdicts`).

    Parameters
    ----------
    by_metric : mapping metric -> (mapping condition -> DataFrame)
        Per-question scores (fractions; rows = question ids, columns = chunker labels) of the
        conditions ``real``, ``stitched`` and ``shuffled``, per metric (``"recall"``, ``"doc_f1"``).
    semantic, references : sequence of str
        Column labels.
    n_resamples, seed
        Of the paired bootstrap over questions.
    alpha : float, default 0.05
        Family-wise error rate.

    Returns
    -------
    DataFrame
        One row per metric, chunker, reference and treated condition (in that nesting): ``metric``,
        ``chunker``, ``reference``, ``treated``, :func:`interaction`'s keys in points (p-values as
        they are), and :func:`holm_verdicts`' columns.

    Raises
    ------
    ValueError
        As :func:`interaction` (a missing condition, column or question).
    """
    rows = []
    for metric, by_cond in by_metric.items():
        for sem in semantic:
            for ref in references:
                for treated in ("stitched", "shuffled"):
                    r = interaction(by_cond, sem, ref, treated=treated, control="real",
                                    n_resamples=n_resamples, seed=seed)
                    rows.append({"metric": metric, "chunker": sem, "reference": ref,
                                 "treated": treated, **in_points(r)})
    return holm_verdicts(pd.DataFrame(rows), alpha=alpha)


def contrasts(runs: ChapterRuns, sweep: Sequence[str], fixed: str, *, baseline: str, semantic: Sequence[str],
              k: int, folds: int = 2, n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05) -> Contrasts:
    """Every contrast chapter 6 reads, from its grids.

    The primary contrast (declared before the run): :data:`PRIMARY` (the best of ``sweep``,
    cross-fitted per condition) minus ``fixed``, on span recall and segment-retrieval F1 at ``k``,
    stitched against real and shuffled against real; the same on the other stitching seeds, without
    line breaks (with how much of the stitching gain the line breaks carry, for the primary and for
    ``baseline``), and in the second-embedder arm; and every ``semantic`` chunker against ``fixed``
    and ``baseline`` (:func:`exploratory_contrasts`).

    Parameters
    ----------
    runs : ChapterRuns
    sweep : sequence of str
        The sweep's chunker labels.
    fixed, baseline : str
        The references' labels.
    semantic : sequence of str
        The exploratory rows' chunker labels.
    k : int
        The depth read.
    folds : int, default 2
        :func:`cross_fit`'s folds.
    n_resamples, seed
        Of the paired bootstrap over questions (``seed`` also splits the folds).
    alpha : float, default 0.05
        Family-wise error rate of the exploratory rows.

    Returns
    -------
    Contrasts
        Intervals in points.

    Raises
    ------
    ValueError
        As :func:`with_primary` and :func:`interaction` (a missing column, condition or question).
    """
    labels = list(runs.labels.values())
    rec, chosen_rec = with_primary({c: runs.scores(c, "recall", k) for c in runs.conditions}, sweep,
                                   folds=folds, seed=seed)
    docf, chosen_doc = with_primary({c: runs.segment_scores(c, k) for c in runs.conditions}, sweep,
                                    folds=folds, seed=seed)
    boot = dict(n_resamples=n_resamples, seed=seed)
    head = pd.Series(in_points(interaction(rec, PRIMARY, fixed, **boot)))
    head_doc = pd.Series(in_points(interaction(docf, PRIMARY, fixed, **boot)))
    head_shuf = pd.Series(in_points(interaction(rec, PRIMARY, fixed, treated="shuffled", **boot)))
    words = pattern_verdict(head["gap_treated_low"], head["gap_treated_high"],
                            head["interaction_low"], head["interaction_high"])
    seed_rows = [{"seed": seed, **head}]
    rec_by_seed = {}
    for s, res in runs.seed_results.items():
        rec_by_seed[s], _ = with_primary({"real": rec["real"][labels],
                                          "stitched": chunker_scores(res, labels, "recall", k)},
                                         sweep, folds=folds, seed=seed)
        seed_rows.append({"seed": s, **in_points(interaction(rec_by_seed[s], PRIMARY, fixed, **boot))})
    by_seed = pd.DataFrame(seed_rows)
    by_seed["verdict"] = [pattern_verdict(r.gap_treated_low, r.gap_treated_high, r.interaction_low,
                                          r.interaction_high) for r in by_seed.itertuples()]
    # the same test without line breaks, and how much of each stitching gain the layout carries
    rec_flat = head_flat = layout_prim = layout_base = None
    if runs.flat_results:
        rec_flat, _ = with_primary({c: chunker_scores(runs.flat_results[c], labels, "recall", k)
                                    for c in runs.flat_results}, sweep, folds=folds, seed=seed)
        head_flat = pd.Series(in_points(interaction(rec_flat, PRIMARY, fixed, **boot)))
        rec_kept = {c: rec[c] for c in ("real", "stitched")}
        layout_prim, layout_base = (pd.Series(in_points(layout_difference(rec_kept, rec_flat, m, fixed, **boot)))
                                    for m in (PRIMARY, baseline))
    # the exploratory rows: every semantic chunker against both references, Holm-corrected
    by_metric = {"recall": {c: runs.scores(c, "recall", k) for c in runs.conditions},
                 "doc_f1": {c: runs.segment_scores(c, k) for c in runs.conditions}}
    inter = exploratory_contrasts(by_metric, semantic, (fixed, baseline), alpha=alpha, **boot)
    # the arm with a second embedder: the primary contrast with each embedder on the same questions
    head2, diff2 = {}, {}
    if runs.second_results:
        frames2: dict[str, dict[str, Any]] = {"recall": {}, "doc_f1": {}}
        for arm in ("first", "second"):
            frames2["recall"][arm], _ = with_primary(
                {c: chunker_scores(runs.second_results[arm, c], labels, "recall", k)
                 for c in runs.second_conditions}, sweep, folds=folds, seed=seed)
            dq = {c: document_retrieval(runs.second_results[arm, c], runs.second_conditions[c])
                  for c in runs.second_conditions}
            frames2["doc_f1"][arm], _ = with_primary(
                {c: segment_scores(d, [fixed, *sweep], k) for c, d in dq.items()}, sweep, folds=folds,
                seed=seed)
        for m, f in frames2.items():
            for arm in ("first", "second"):
                head2[arm, m] = pd.Series(in_points(interaction(f[arm], PRIMARY, fixed, **boot)))
            diff2[m] = pd.Series(in_points(arm_difference({"second": f["second"], "first": f["first"]},
                                                          PRIMARY, fixed, **boot)))
    return Contrasts(recall=rec, chosen_recall=chosen_rec, segment_f1=docf, chosen_segment_f1=chosen_doc,
                     head=head, head_doc=head_doc, head_shuffled=head_shuf, verdict=words,
                     recall_by_seed=rec_by_seed, by_seed=by_seed, exploratory=inter, recall_flat=rec_flat,
                     head_flat=head_flat, layout_primary=layout_prim, layout_baseline=layout_base,
                     head_second=head2, second_difference=diff2)


# ------------------------------------------------------------------ the notebook's tables and sentences


def condition_measures(conditions: Mapping[str, Any], embedder: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The conditions side by side: their counts (:meth:`~chunkwise.datasets.stitch.Condition.summary`)
    and how sharp their seams are (:func:`seam_cosines`).

    Parameters
    ----------
    conditions : mapping condition -> corpus
        :func:`chunkwise.datasets.stitch.build_condition`'s corpora, all of one layout.
    embedder : embedder
        The model the cosines are measured with (the semantic chunkers' own).

    Returns
    -------
    (DataFrame, DataFrame)
        The table (index ``condition``; the summary's counts without ``layout``, then
        ``cosine_across_seams``, ``cosine_within_segments`` and ``drop``, cosines in [-1, 1]) and
        :func:`seam_cosines`' rows (index ``condition``).

    Raises
    ------
    ValueError
        If ``conditions`` is empty.
    """
    if not conditions:
        raise ValueError("condition_measures needs at least one condition.")
    cond_table = pd.DataFrame([conditions[c].summary() for c in conditions]).set_index("condition")
    cond_table = cond_table.drop(columns="layout")  # line breaks kept in all three
    cos = pd.DataFrame([seam_cosines(conditions[c], embedder) for c in conditions])
    cos = cos.set_index("condition")
    cond_table = cond_table.join(cos[["cosine_across_seams", "cosine_within_segments", "drop"]])
    return cond_table, cos


def conditions_shown(cond_table: pd.DataFrame) -> pd.DataFrame:
    """:func:`condition_measures`' table as the chapter shows it: conditions as columns (a measure per
    row, so it fits the page), characters with thousands separators, mean segment tokens as a whole
    number, cosines to three decimals.

    Parameters
    ----------
    cond_table : DataFrame
        :func:`condition_measures`' first table.

    Returns
    -------
    DataFrame
        Transposed, of objects (formatted strings and the counts as they are).
    """
    formats = {"characters": "{:,}", "mean_segment_tokens": "{:.0f}", "cosine_across_seams": "{:.3f}",
               "cosine_within_segments": "{:.3f}", "drop": "{:.3f}"}
    shown = cond_table.astype(object).apply(
        lambda col: col.map(formats[col.name].format) if col.name in formats else col)
    return shown.T


def conditions_paragraph(cond_table: pd.DataFrame, stitched_summary: Mapping[str, Any]) -> str:
    """The sentences under the conditions table: segments, seams, the cosine drop of each condition,
    what that says about the shuffled control, and how many stitched seams follow a line break.

    Parameters
    ----------
    cond_table : DataFrame
        :func:`condition_measures`' table, with the rows ``real``, ``shuffled`` and ``stitched``.
    stitched_summary : mapping
        The stitched condition's summary (``seams``, ``seams_after_line_break``,
        ``separators_inserted``).

    Returns
    -------
    str
        Markdown. The shuffled control is called partial when its drop is more than a quarter of
        the stitched one.

    Raises
    ------
    KeyError
        If a condition or a measure is missing.
    ValueError
        If the stitched condition has no seam.
    """
    c = cond_table
    if not stitched_summary["seams"]:
        raise ValueError("the stitched condition has no seam; give more than one segment per document.")
    drop_share = c.loc["shuffled", "drop"] / c.loc["stitched", "drop"]
    n_sep = stitched_summary["separators_inserted"]
    share_lb = stitched_summary["seams_after_line_break"] / stitched_summary["seams"]
    layout = (f" {share_lb:.0%} of the stitched seams follow a line break (a paragraph end, or the "
              f"line break put where a segment ended without whitespace: {n_sep} "
              f"seam{'s' if n_sep != 1 else ''}); the rest follow a sentence end and a space, where "
              "no paragraph break fell in the size range.")
    return (
        f"Each condition holds {int(c.loc['real', 'segments']):,} segments "
        f"({c.loc['real', 'mean_segment_tokens']:.0f} tokens on average). The stitched condition has "
        f"{int(c.loc['stitched', 'seams']):,} seams in {int(c.loc['stitched', 'documents'])} "
        f"documents, {int(c.loc['stitched', 'cross_source_seams']):,} of them between two corpora; "
        f"across them the cosine of neighbouring sentences drops by {c.loc['stitched', 'drop']:.3f} "
        f"below its value inside a segment ({c.loc['stitched', 'cosine_within_segments']:.3f}). "
        f"Shuffling within a corpus gives {int(c.loc['shuffled', 'seams']):,} seams with a drop of "
        f"{c.loc['shuffled', 'drop']:.3f}, and the real segment ends {c.loc['real', 'drop']:.3f}: "
        + (f"the shuffled seams drop {drop_share:.0%} as far as the stitched ones, so on these corpora "
           "shuffling moves the topic too (paragraphs of one corpus reordered), and the shuffled "
           "condition isolates 'a seam without a topic change' only in part."
           if drop_share > 0.25 else
           "the shuffled seams are much softer than the stitched ones, as intended.") + layout)


def retrieval_table(result: Any, per_question: pd.DataFrame, corpus: Any, k: int) -> pd.DataFrame:
    """One condition's retrieval and chunks at depth ``k``, a row per chunker.

    Parameters
    ----------
    result : GridResult
        The condition's grid (dense retriever).
    per_question : DataFrame
        :func:`document_retrieval` of that grid.
    corpus : object
        The condition (:func:`chunkwise.datasets.stitch.build_condition`).
    k : int
        The depth.

    Returns
    -------
    DataFrame
        Index ``chunker``; ``recall``, ``iou``, ``precision_omega`` (span metrics, percent),
        ``doc_f1``, ``doc_f1_any`` (mean per-question segment-retrieval F1, percent),
        ``doc_f1_of_means`` (F1 of the mean precision and recall, percent), ``unscorable`` (percent
        of the evidence segments no chunk's majority segment: :func:`unscorable_references`),
        ``n_chunks`` (int) and ``mean_tokens`` (cl100k_base tokens per chunk).

    Raises
    ------
    ValueError
        If the grid has no row at depth ``k``.
    """
    t = result.table
    t = t[t["k"] == k].set_index("chunker")
    if t.empty:
        raise ValueError(f"the grid has no row at k={k}; it has k = {sorted(set(result.table['k']))}.")
    d = document_retrieval_summary(per_question)
    d = d[d["k"] == k].set_index("chunker")
    return pd.DataFrame({
        "recall": 100 * t["recall"], "iou": 100 * t["iou"],
        "precision_omega": 100 * t["precision_omega"],
        "doc_f1": 100 * d["doc_f1"], "doc_f1_any": 100 * d["doc_f1_any"],
        "doc_f1_of_means": 100 * d["doc_f1_of_means"],
        "unscorable": 100 * unscorable_references(result, corpus)["share_evidence_unscorable"],
        "n_chunks": t["n_chunks"].astype(int), "mean_tokens": t["mean_chunk_tokens"],
    })


def retrieval_tables(by_condition: Mapping[str, pd.DataFrame], k: int) -> list[tuple[str, Any]]:
    """:func:`retrieval_table` of each condition as the chapter shows them: one table per condition
    without the two columns that compare the conditions, then those two for all conditions in one
    table, so that each fits the page.

    Parameters
    ----------
    by_condition : mapping condition -> DataFrame
        :func:`retrieval_table` per condition.
    k : int
        The depth, for the titles.

    Returns
    -------
    list of (str, Styler)
        A Markdown title and a table (one decimal, the chapter's labels) each, in display order.

    Raises
    ------
    ValueError
        If ``by_condition`` is empty.
    """
    from chunkwise.labels import labelled

    if not by_condition:
        raise ValueError("retrieval_tables needs at least one condition.")
    out = []
    for cond, table in by_condition.items():
        shown = labelled(table.drop(columns=["doc_f1_of_means", "unscorable"]), MEASURE_LABELS)
        out.append((f"**{cond}** (k = {k})",
                    shown.style.format("{:.1f}", subset=[c for c in shown.columns if c != "chunks"])))
    moved_out = pd.concat({c: t[["doc_f1_of_means", "unscorable"]] for c, t in by_condition.items()},
                          axis=1, names=["condition", None]).swaplevel(axis=1)
    moved_out = moved_out[["doc_f1_of_means", "unscorable"]]
    out.append((f"**all three conditions** (k = {k})",
                labelled(moved_out, MEASURE_LABELS).style.format("{:.1f}")))
    return out


def primary_table(head: Mapping[str, float], head_doc: Mapping[str, float], head_shuffled: Mapping[str, float],
                  k: int, head_flat: Mapping[str, float] | None = None) -> pd.DataFrame:
    """The primary contrast's rows as the chapter shows them.

    Parameters
    ----------
    head, head_doc, head_shuffled : mapping
        :func:`interaction` (points) on span recall and segment-retrieval F1 (stitched against
        real) and on span recall (shuffled against real).
    k : int
        The depth, for the measure names.
    head_flat : mapping, optional
        The same on span recall with every line break a space (a fourth row).

    Returns
    -------
    DataFrame
        ``measure``, ``condition``, ``gap real``, ``gap in condition``, ``interaction`` (estimates
        with their 95% intervals, :func:`interval_text`) and ``verdict`` (:func:`pattern_verdict`).
    """
    rows = [{"measure": f"span recall@{k}", "condition": "stitched", **head},
            {"measure": f"segment-retrieval F1@{k}", "condition": "stitched", **head_doc},
            {"measure": f"span recall@{k}", "condition": "shuffled", **head_shuffled}]
    if head_flat is not None:  # both conditions without line breaks: its own real gap
        rows.append({"measure": f"span recall@{k}",
                     "condition": "stitched, no line breaks (against real, no line breaks)", **head_flat})
    prim = pd.DataFrame(rows)
    return pd.DataFrame({
        "measure": prim["measure"],
        "condition": prim["condition"],
        "gap real": [interval_text(r, "gap_control") for _, r in prim.iterrows()],
        "gap in condition": [interval_text(r, "gap_treated") for _, r in prim.iterrows()],
        "interaction": [interval_text(r, "interaction") for _, r in prim.iterrows()],
        "verdict": [pattern_verdict(r.gap_treated_low, r.gap_treated_high, r.interaction_low,
                                    r.interaction_high) for r in prim.itertuples()],
    })


def chosen_settings(chosen_recall: Mapping[str, Sequence[str]], chosen_segment_f1: Mapping[str, Sequence[str]],
                    sweep: Sequence[str], labels: Mapping[str, str]) -> pd.DataFrame:
    """The sweep settings cross-fitting chose, per condition and fold, in short words.

    Parameters
    ----------
    chosen_recall, chosen_segment_f1 : mapping condition -> sequence of str
        :func:`with_primary`'s choices (chunker labels, one per fold) on each measure.
    sweep : sequence of str
        The sweep's chunker specs; a breakpoint spec ``Semantic:percentile:80:0:150`` reads
        "80th percentile", any other its label.
    labels : mapping
        Spec -> label.

    Returns
    -------
    DataFrame
        Rows "chosen on recall (per fold)" and "chosen on segment F1 (per fold)", a column per
        condition (those of ``chosen_recall``), each cell the folds' settings joined by commas.

    Raises
    ------
    KeyError
        If a chosen label is not one of the sweep's.
    """
    short = {labels[s]: (f"{s.split(':')[2]}th percentile" if s.count(":") == 4 else labels[s]) for s in sweep}
    return pd.DataFrame({c: [", ".join(short[x] for x in chosen_recall[c]),
                             ", ".join(short[x] for x in chosen_segment_f1[c])] for c in chosen_recall},
                        index=["chosen on recall (per fold)", "chosen on segment F1 (per fold)"])


def seed_table(by_seed: pd.DataFrame) -> pd.DataFrame:
    """The primary contrast per stitching seed, as the chapter shows it.

    Parameters
    ----------
    by_seed : DataFrame
        :attr:`Contrasts.by_seed` (points).

    Returns
    -------
    DataFrame
        ``stitching seed``, ``gap stitched``, ``interaction`` (with 95% intervals) and ``verdict``.
    """
    return pd.DataFrame({"stitching seed": by_seed["seed"],
                         "gap stitched": [interval_text(r, "gap_treated") for _, r in by_seed.iterrows()],
                         "interaction": [interval_text(r, "interaction") for _, r in by_seed.iterrows()],
                         "verdict": by_seed["verdict"]})


def seed_spread(by_seed: pd.DataFrame) -> str:
    """How far the interaction runs over the stitching seeds: ``"+1.0 to +6.3 points over 3
    stitching seeds"``.

    Parameters
    ----------
    by_seed : DataFrame
        :attr:`Contrasts.by_seed` (``interaction`` in points).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        If ``by_seed`` is empty.
    """
    if by_seed.empty:
        raise ValueError("seed_spread needs at least one stitching seed.")
    spread_range = (f"{by_seed['interaction'].min():+.1f} to "
                    f"{by_seed['interaction'].max():+.1f} points")
    return f"{spread_range} over {len(by_seed)} stitching seeds"


def primary_paragraph(head: Mapping[str, float], verdict: str, spread: str, fixed: str, k: int,
                      n_questions: int) -> str:
    """The sentence under the primary contrast's tables.

    Parameters
    ----------
    head : mapping
        :func:`interaction` of the primary contrast on span recall (points).
    verdict : str
        Its :func:`pattern_verdict`.
    spread : str
        :func:`seed_spread`.
    fixed : str
        The reference's label.
    k, n_questions : int

    Returns
    -------
    str
        Markdown.
    """
    return (f"Breakpoint (cross-fitted) minus {fixed}, span recall@{k}: "
            f"{interval_text(head, 'gap_control')} points on real text, {interval_text(head, 'gap_treated')} "
            f"on stitched text, an interaction of {interval_text(head, 'interaction')} (paired 95% intervals, "
            f"{n_questions} questions): **{verdict}**. Across stitching seeds the interaction runs "
            f"{spread}.")


def layout_table(layout_primary: Mapping[str, float], layout_baseline: Mapping[str, float], fixed: str,
                 baseline: str) -> pd.DataFrame:
    """The stitching gain with and without line breaks, for the primary contrast and the baseline.

    Parameters
    ----------
    layout_primary, layout_baseline : mapping
        :func:`layout_difference` (points) of the primary contrast and of the baseline, each against
        the fixed-size reference.
    fixed, baseline : str
        The two labels.

    Returns
    -------
    DataFrame
        ``contrast``, ``interaction, line breaks kept``, ``interaction, no line breaks`` and
        ``kept minus none`` (estimates with 95% intervals).
    """
    lay = pd.DataFrame([{"contrast": f"breakpoint (cross-fitted) minus {fixed}", **layout_primary},
                        {"contrast": f"{baseline} minus {fixed}", **layout_baseline}])
    return pd.DataFrame({
        "contrast": lay["contrast"],
        "interaction, line breaks kept": [interval_text(r, "interaction_kept") for _, r in lay.iterrows()],
        "interaction, no line breaks": [interval_text(r, "interaction_flat") for _, r in lay.iterrows()],
        "kept minus none": [interval_text(r, "layout_part") for _, r in lay.iterrows()],
    })


def layout_paragraph(head_flat: Mapping[str, float], layout_baseline: Mapping[str, float], fixed: str,
                     baseline: str, k: int) -> str:
    """The sentence under the table of the arm without line breaks.

    Parameters
    ----------
    head_flat : mapping
        :func:`interaction` of the primary contrast without line breaks (points).
    layout_baseline : mapping
        :func:`layout_difference` of the baseline against ``fixed`` (points).
    fixed, baseline : str
        The labels.
    k : int

    Returns
    -------
    str
        Markdown.
    """
    flat_words = pattern_verdict(head_flat["gap_treated_low"], head_flat["gap_treated_high"],
                                 head_flat["interaction_low"], head_flat["interaction_high"])
    return (f"Without line breaks the breakpoint chunker is {interval_text(head_flat, 'gap_treated')} points "
            f"against {fixed} on stitched text and {interval_text(head_flat, 'gap_control')} on real text, an "
            f"interaction of {interval_text(head_flat, 'interaction')}: **{flat_words}**. {baseline}'s gain from "
            f"stitching goes from {interval_text(layout_baseline, 'interaction_kept')} to "
            f"{interval_text(layout_baseline, 'interaction_flat')} points (paired 95% intervals, span "
            f"recall@{k}).")


#: The plan entries chapter 6 reads (:func:`robustness_panels`), with what each one's estimate is.
PANEL_TITLES: dict[str, str] = {
    "mixed-content": "interaction, span recall (stitched gap minus real gap)",
    "qtb-stitched": "stitched gap, segment-retrieval F1",
    "qtb-real": "real gap, segment-retrieval F1",
}


def robustness_panels(plan: Mapping[str, Any], runs: ChapterRuns, found: Contrasts, sweep: Sequence[str], *,
                      k: int, folds: int = 2, n_resamples: int = 10_000,
                      seed: int = 0) -> dict[str, tuple[Any, pd.DataFrame]]:
    """:func:`stitched_panel` of each of the chapter's plan entries (:data:`PANEL_TITLES`).

    The per-question frames: span recall, span IoU and segment-retrieval F1 with the line breaks
    kept (stitching seed ``seed``), span recall on the other stitching seeds and without line breaks
    (where the run has them), each with :data:`PRIMARY` cross-fitted per condition.

    Parameters
    ----------
    plan : mapping
        :func:`chunkwise.plan.load_plan`'s entries.
    runs : ChapterRuns
    found : Contrasts
        :func:`contrasts` of ``runs``.
    sweep : sequence of str
        The sweep's labels.
    k, folds, n_resamples, seed
        As for :func:`contrasts`.

    Returns
    -------
    dict
        Entry id -> (Robustness, DataFrame), as :func:`stitched_panel` returns them (points).

    Raises
    ------
    KeyError
        If the plan lacks an entry.
    ValueError
        As :func:`stitched_panel`.
    """
    iou_frames, _ = with_primary({c: runs.scores(c, "iou", k) for c in runs.conditions}, sweep,
                                 folds=folds, seed=seed)
    frames = {("recall", "line breaks kept", seed): found.recall,
              ("iou", "line breaks kept", seed): iou_frames,
              ("doc_f1", "line breaks kept", seed): found.segment_f1}
    for s, f in found.recall_by_seed.items():
        frames["recall", "line breaks kept", s] = f
    if found.recall_flat is not None:
        frames["recall", "no line breaks", seed] = found.recall_flat
    corpus_of = dict(zip(runs.questions["question_id"], runs.questions["corpus"]))
    return {e: stitched_panel(plan[e], frames, corpus_of, method_column=PRIMARY, labels=runs.labels,
                              n_resamples=n_resamples, seed=seed)
            for e in PANEL_TITLES}


def panel_tables(plan: Mapping[str, Any], panels: Mapping[str, tuple[Any, pd.DataFrame]]) -> list[tuple[str, Any]]:
    """Each robustness panel as the chapter shows it: its question, what is estimated and its class,
    then one row per specification.

    Parameters
    ----------
    plan : mapping
        The plan's entries (for their questions).
    panels : mapping
        :func:`robustness_panels`.

    Returns
    -------
    list of (str, Styler)
        A Markdown title and a table (``specification``, ``estimate [95% interval]``, the stitched
        gap where the entry has one, ``n``, ``detectable`` (points at 80% power) and ``verdict``;
        no index) per panel.

    Raises
    ------
    KeyError
        If a panel is not one of :data:`PANEL_TITLES`.
    """
    from chunkwise.evaluation.stats import describe_interval

    out = []
    for e, (rob, rows) in panels.items():
        title = f"**{plan[e].question}** ({PANEL_TITLES[e]}, points): **{rob.describe()}**"
        shown = rows.assign(**{"estimate [95% interval]": [describe_interval(r.estimate, r.low, r.high)
                                                            for r in rows.itertuples()],
                               "detectable": [f"{m:.1f}" for m in rows["mde"]]})
        cols = ["specification", "estimate [95% interval]", "n", "detectable", "verdict"]
        if "gap" in rows:
            shown["stitched gap"] = [describe_interval(r.gap, r.gap_low, r.gap_high) for r in rows.itertuples()]
            cols.insert(2, "stitched gap")
        out.append((title, shown[cols].style.hide(axis="index")))
    return out


def robustness_paragraph(robustness: Any, rows: pd.DataFrame, baseline: str, guide: str,
                         kamradt: Mapping[str, float], amendments: Sequence[Mapping[str, str]] = ()) -> str:
    """The sentences of the robustness section: the declared test's verdict and class, the
    interaction against the two other references, its range over the corpora, the guide's
    chunker's interaction, and the plan's amendments.

    Parameters
    ----------
    robustness : Robustness
        The ``mixed-content`` panel's class (:func:`robustness_panels`).
    rows : DataFrame
        That panel's rows (points); those named ``"... only"`` are the per-corpus ones.
    baseline, guide : str
        The baseline's and the guide's chunker's labels.
    kamradt : mapping
        :func:`interaction` of ``guide`` against the fixed-size reference (points).
    amendments : sequence of mapping
        :func:`chunkwise.plan.amendments` of the entry (``date``, ``reason``, ``previous``).

    Returns
    -------
    str
        Markdown.
    """
    from chunkwise.evaluation.stats import describe_interval

    per_corpus = rows[rows["specification"].str.endswith(" only")]
    return (
        f"The declared test is **{robustness.primary.verdict}** under its primary specification, and its "
        f"class is **{robustness.describe()}**. Against {baseline} and Structure 200 the interaction is "
        + " and ".join(f"{describe_interval(r.estimate, r.low, r.high)} ({r.verdict})" for r in rows.itertuples()
                       if r.specification in ("against Recursive 200", "against Structure 200"))
        + (". Per corpus it runs from " + f"{per_corpus['estimate'].min():+.1f} to "
           f"{per_corpus['estimate'].max():+.1f} points ({len(per_corpus)} corpora, each with its own interval "
           "above), so the pooled number is an average over corpora that differ." if len(per_corpus) else ".")
        + f" {guide} at LangChain's defaults, the chapter's headline row until the amendment below, gives an "
        f"interaction of {interval_text(kamradt, 'interaction')} on the same questions."
        + "".join(f" **Amendment ({a['date']})**: {a['reason']} Before: {a['previous']}." for a in amendments))


def second_embedder_table(head_second: Mapping[tuple[str, str], Mapping[str, float]],
                          second_difference: Mapping[str, Mapping[str, float]],
                          embedders: Sequence[tuple[str, str]], k: int) -> pd.DataFrame:
    """The primary contrast with each embedder of the second-embedder arm, and their difference.

    Parameters
    ----------
    head_second, second_difference : mapping
        :attr:`Contrasts.head_second` and :attr:`Contrasts.second_difference` (points).
    embedders : sequence of (arm, name)
        ``(("first", <the chapter's model>), ("second", <the second model>))``.
    k : int

    Returns
    -------
    DataFrame
        Per measure (span recall, then segment-retrieval F1) a row per embedder (``gap real``,
        ``gap stitched``, ``interaction`` with 95% intervals, ``verdict``), then a row "<second>
        minus <first>" with the difference of the interactions.

    Raises
    ------
    KeyError
        If an arm or a measure is missing.
    """
    (_, first), (_, second) = embedders
    rows = []
    for m, measure in (("recall", f"span recall@{k}"), ("doc_f1", f"segment-retrieval F1@{k}")):
        for arm, model in embedders:
            r = head_second[arm, m]
            rows.append({"measure": measure, "embedder": model,
                         "gap real": interval_text(r, "gap_control"),
                         "gap stitched": interval_text(r, "gap_treated"),
                         "interaction": interval_text(r, "interaction"),
                         "verdict": pattern_verdict(r["gap_treated_low"], r["gap_treated_high"],
                                                    r["interaction_low"], r["interaction_high"])})
        rows.append({"measure": measure, "embedder": f"{second} minus {first}",
                     "gap real": "", "gap stitched": "",
                     "interaction": interval_text(second_difference[m], "difference"), "verdict": ""})
    return pd.DataFrame(rows)


def window_shares(second_results: Mapping[tuple[str, str], Any], embedders: Sequence[tuple[str, str]],
                  chunkers: Sequence[str]) -> pd.DataFrame | None:
    """The share of chunks longer than each embedder's window in the second-embedder arm.

    Parameters
    ----------
    second_results : mapping (arm, condition) -> GridResult
        :attr:`ChapterRuns.second_results`.
    embedders : sequence of (arm, name)
        As for :func:`second_embedder_table`.
    chunkers : sequence of str
        The rows (chunker labels), in order.

    Returns
    -------
    DataFrame or None
        Percent of each chunker's chunks over the window, a column per (condition, embedder name);
        None when no embedder of the arm reports its window.

    Raises
    ------
    KeyError
        If a chunker has no share.
    """
    conditions = list(dict.fromkeys(cond for _, cond in second_results))
    over = {}
    for arm, model in embedders:
        for cond in conditions:
            t = second_results[arm, cond].truncation()
            if t is not None:
                over[cond, model] = 100 * t.droplevel("embedder")["share_chunks_over_window"]
    return pd.DataFrame(over).loc[list(chunkers)] if over else None


def second_embedder_paragraph(found: Contrasts, runs: ChapterRuns, *, embedder: str, second_embedder: str | None,
                              fixed: str, k: int) -> str:
    """The sentences of the second-embedder section: the primary contrast with the second embedder,
    with the chapter's on the same questions, their difference, and (for an embedder of the paper)
    the direction of our gaps beside the paper's (:func:`paper_direction_sentence`).

    Parameters
    ----------
    found : Contrasts
        :func:`contrasts` (points): its ``head_second`` and ``second_difference``.
    runs : ChapterRuns
        :func:`run_arms`' (the arm's corpora and questions).
    embedder : str
        The chapter's model.
    second_embedder : str or None
        The second model; None when the arm did not run.
    fixed : str
        The reference's label.
    k : int

    Returns
    -------
    str
        Markdown; without the arm, the sentence that says it was left out.

    Raises
    ------
    KeyError
        If the arm's intervals are missing although ``second_embedder`` is given.
    """
    if not second_embedder:
        return "This run left the second embedder out (`second_embedder = None`)."
    r2, d2 = found.head_second["second", "recall"], found.second_difference["recall"]
    words2 = pattern_verdict(r2["gap_treated_low"], r2["gap_treated_high"],
                             r2["interaction_low"], r2["interaction_high"])
    text = (f"With {second_embedder} cutting and retrieving on {', '.join(runs.second_corpora)} "
            f"({len(runs.second_questions)} questions), the breakpoint chunker is "
            f"{interval_text(r2, 'gap_treated')} points against {fixed} on stitched text and "
            f"{interval_text(r2, 'gap_control')} on real text, an interaction of {interval_text(r2, 'interaction')}: "
            f"**{words2}** (span recall@{k}). With {embedder} on the same "
            f"questions the interaction is {interval_text(found.head_second['first', 'recall'], 'interaction')}, "
            f"so the larger embedder changes it by {interval_text(d2, 'difference')} points.")
    if second_embedder in set(paper_table()["embedder"]):
        text += paper_direction_sentence(second_embedder, found.head_second["second", "doc_f1"], k)
    return text


def paper_direction_table(embedder: str, ours: Mapping[str, float]) -> pd.DataFrame:
    """Qu, Tu & Bao's breakpoint-minus-fixed gaps for one embedder beside ours.

    Parameters
    ----------
    embedder : str
        An embedder of :data:`PAPER_F1_AT_5`.
    ours : mapping
        :func:`interaction` of the primary contrast on segment-retrieval F1 with that embedder
        (points).

    Returns
    -------
    DataFrame
        Index ``documents`` ("stitched", "original (ours: real)"); the paper's dataset count, the
        datasets where breakpoint is ahead, the mean gap with its range (document F1@5, points), and
        our gap with its 95% interval.

    Raises
    ------
    ValueError
        If the paper has no rows for ``embedder`` (:func:`paper_direction`).
    """
    pdir = paper_direction(embedder)
    return pd.DataFrame({
        "paper: datasets": pdir["datasets"].to_numpy(),
        "paper: breakpoint ahead": pdir["breakpoint_ahead"].to_numpy(),
        "paper: gap, mean (range)": [f"{r.mean_gap:+.1f} ({r.min_gap:+.1f} to {r.max_gap:+.1f})"
                                     for r in pdir.itertuples()],
        "ours: segment-retrieval F1 gap": [interval_text(ours, "gap_treated"), interval_text(ours, "gap_control")],
    }, index=pd.Index(["stitched", "original (ours: real)"], name="documents"))


def paper_direction_sentence(embedder: str, ours: Mapping[str, float], k: int) -> str:
    """The sentence that sets the direction of our gaps beside the paper's for one embedder.

    Parameters
    ----------
    embedder : str
        An embedder of :data:`PAPER_F1_AT_5`.
    ours : mapping
        :func:`interaction` of the primary contrast on segment-retrieval F1 with it (points): each
        gap is read as "breakpoint ahead", "fixed-size ahead" or "no difference shown"
        (:func:`direction_words`).
    k : int
        Our depth.

    Returns
    -------
    str
        Markdown, starting with a space (it follows :func:`second_embedder_paragraph`).

    Raises
    ------
    ValueError
        If the paper has no rows for ``embedder``.
    """
    pdir = paper_direction(embedder)
    st, og = pdir.loc["stitched"], pdir.loc["original"]

    def way(gap: str) -> str:
        """Which chunker the gap ``gap`` puts ahead."""
        return direction_words(ours[gap + "_low"], ours[gap + "_high"], "breakpoint", "fixed-size")

    return (f" The paper's {embedder} rows put breakpoint chunking ahead of fixed-size "
            f"on {int(st.breakpoint_ahead)} of {int(st.datasets)} stitched datasets and "
            f"{int(og.breakpoint_ahead)} of {int(og.datasets)} original ones (document "
            f"F1@5); ours, on segment-retrieval F1@{k}: "
            f"{way('gap_treated')} on stitched text ({interval_text(ours, 'gap_treated')}) and "
            f"{way('gap_control')} on real text ({interval_text(ours, 'gap_control')}); directions "
            "only, as their "
            "datasets are not ours.")


def exploratory_figure(rows: pd.DataFrame, semantic: Sequence[str], references: Sequence[str], k: int) -> Any:
    """The exploratory recall gaps in one figure: per reference a panel, per semantic chunker the gap
    in each condition with its 95% interval (real blue, shuffled grey, stitched red).

    Parameters
    ----------
    rows : DataFrame
        :func:`exploratory_contrasts` (points).
    semantic, references : sequence of str
        The chunkers (x axis) and the references (one panel each).
    k : int
        The depth, for the axis label.

    Returns
    -------
    matplotlib.figure.Figure
        Made with pyplot (``plt.show()`` shows it), 11 x 3.8 inches.

    Raises
    ------
    ValueError
        If a row is missing (:func:`exploratory_row`) or there is no reference.
    """
    import textwrap

    import matplotlib.pyplot as plt

    if not references:
        raise ValueError("exploratory_figure needs at least one reference.")
    fig, axes = plt.subplots(1, len(references), figsize=(11, 3.8), sharey=True, squeeze=False)
    axes = axes[0]
    colours = (("real", "tab:blue"), ("shuffled", "tab:grey"), ("stitched", "tab:red"))
    for ax, ref in zip(axes, references):
        for j, sem in enumerate(semantic):
            for i, (cond, colour) in enumerate(colours):
                if cond == "real":
                    r = exploratory_row(rows, "recall", sem, ref)
                    mid, lo, hi = r["gap_control"], r["gap_control_low"], r["gap_control_high"]
                else:
                    r = exploratory_row(rows, "recall", sem, ref, cond)
                    mid, lo, hi = r["gap_treated"], r["gap_treated_low"], r["gap_treated_high"]
                ax.errorbar(j + (i - 1) * 0.22, mid, yerr=[[mid - lo], [hi - mid]], fmt="o",
                            color=colour, label=cond if j == 0 else None, capsize=3)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(range(len(semantic)), [textwrap.fill(s, 13) for s in semantic], fontsize=8)
        ax.set_title(f"semantic minus {ref}")
    axes[0].set_ylabel(f"recall@{k} difference (points)")
    axes[0].legend(frameon=False, fontsize=8)
    fig.tight_layout()
    return fig


def exploratory_tables(rows: pd.DataFrame, k: int) -> list[tuple[str, Any]]:
    """The exploratory contrasts in numbers, one table per measure (so that each fits the page).

    Parameters
    ----------
    rows : DataFrame
        :func:`exploratory_contrasts` (points).
    k : int
        The depth, for the titles.

    Returns
    -------
    list of (str, Styler)
        Per measure present (span recall, segment F1): a Markdown title and a table with the
        contrast, the condition, the gaps and the interaction with their 95% intervals, the
        Holm-adjusted p-values of the gap and the interaction (:func:`p_value_text`), the
        uncorrected verdict and Holm's (no index).
    """
    show = rows.copy()
    show["gap_real"] = [interval_text(r, "gap_control") for _, r in show.iterrows()]
    show["gap_treated_ci"] = [interval_text(r, "gap_treated") for _, r in show.iterrows()]
    show["interaction_ci"] = [interval_text(r, "interaction") for _, r in show.iterrows()]
    show["verdict"] = [pattern_verdict(r.gap_treated_low, r.gap_treated_high, r.interaction_low,
                                       r.interaction_high) for r in show.itertuples()]
    # the Holm verdict reads both adjusted p-values: the gap's (in the condition) and the interaction's
    show["p_holm"] = [f"{p_value_text(g)}, {p_value_text(i)}"
                      for g, i in zip(show["gap_treated_p_holm"], show["interaction_p_holm"])]
    show["contrast"] = show["chunker"] + " − " + show["reference"]
    out = []
    for metric, measure in {"recall": f"span recall@{k}", "doc_f1": f"segment F1@{k}"}.items():
        part = show[show["metric"] == metric]
        if not len(part):
            continue
        out.append((f"**{measure}** (points; gap = semantic minus reference)",
                    part[["contrast", "treated", "gap_real", "gap_treated_ci", "interaction_ci", "p_holm",
                          "verdict", "verdict_holm"]].rename(columns={
                              "treated": "condition", "gap_real": "gap real", "gap_treated_ci": "gap in condition",
                              "interaction_ci": "interaction", "p_holm": "p (Holm): gap, interaction",
                              "verdict": "verdict", "verdict_holm": "verdict (Holm)"}).style.hide(axis="index")))
    return out


def seam_table(results: Mapping[str, Any], conditions: Mapping[str, Any], tolerance: int = 1) -> pd.DataFrame:
    """:func:`seam_boundaries` of the stitched and the shuffled condition in one table.

    Parameters
    ----------
    results, conditions : mapping condition -> GridResult / corpus
        With ``stitched`` and ``shuffled``.
    tolerance : int, default 1
        Sentences: a seam is found by a cut this close.

    Returns
    -------
    DataFrame
        Index (``condition``, ``chunker``); :func:`seam_boundaries`' columns plus ``cuts_per_seam``.

    Raises
    ------
    KeyError
        If a condition is missing.
    """
    bounds = pd.concat({c: seam_boundaries(results[c], conditions[c], tolerance=tolerance).set_index("chunker")
                        for c in ("stitched", "shuffled")}, names=["condition"])
    bounds["cuts_per_seam"] = bounds["n_cuts"] / bounds["n_seams"]
    return bounds


def seam_tables(bounds: pd.DataFrame) -> list[Any]:
    """:func:`seam_table` as two tables that fit the page: the cuts and seams counted, then the
    boundary scores.

    Parameters
    ----------
    bounds : DataFrame
        :func:`seam_table`.

    Returns
    -------
    list of Styler
        Two tables with the chapter's labels and formats (shares as percent, scores to two or three
        decimals).
    """
    from chunkwise.labels import label as label_of, labelled

    formats = {"cuts_per_seam": "{:.2f}", "boundary_precision": "{:.2f}", "boundary_recall": "{:.2f}",
               "boundary_f1": "{:.2f}", "pk": "{:.3f}", "windowdiff": "{:.3f}", "mid_sentence_cuts": "{:.0%}"}
    out = []
    for cols in (["n_cuts", "n_seams", "seams_found", "cuts_per_seam", "mid_sentence_cuts"],
                 ["boundary_precision", "boundary_recall", "boundary_f1", "pk", "windowdiff"]):
        out.append(labelled(bounds[cols], MEASURE_LABELS).style.format(
            {label_of(c, MEASURE_LABELS): f for c, f in formats.items() if c in cols}))
    return out


def seams_paragraph(bounds: pd.DataFrame, guide: str, fixed: str, tolerance: int) -> str:
    """The sentence under the seam tables: the guide's chunker and the fixed-size reference on
    stitched text, and the chunker with the best boundary F1.

    Parameters
    ----------
    bounds : DataFrame
        :func:`seam_table`.
    guide, fixed : str
        Chunker labels.
    tolerance : int
        The tolerance the table was measured with (sentences).

    Returns
    -------
    str
        Markdown.

    Raises
    ------
    KeyError
        If the stitched rows lack ``guide`` or ``fixed``.
    """
    b = bounds.loc["stitched"]
    best = b["boundary_f1"].idxmax()
    return (f"On stitched text {guide} finds {b.loc[guide, 'boundary_recall']:.0%} of the seams "
            f"within {tolerance} sentence(s) with {int(b.loc[guide, 'n_cuts'])} cuts for "
            f"{int(b.loc[guide, 'n_seams'])} seams (precision "
            f"{b.loc[guide, 'boundary_precision']:.2f}); {fixed}, which cuts by position only, finds "
            f"{b.loc[fixed, 'boundary_recall']:.0%} (precision "
            f"{b.loc[fixed, 'boundary_precision']:.2f}). The best boundary F1 is {best}'s "
            f"({b.loc[best, 'boundary_f1']:.2f}, Pk {b.loc[best, 'pk']:.3f}).")


def stitched_drawing(corpus: Any, result: Any, labels: Iterable[str], document: int = 0,
                     chars: int = 5000) -> tuple[str, str]:
    """One stitched document drawn once per chunker, its segments in the first row.

    Parameters
    ----------
    corpus : object
        The stitched condition (:func:`chunkwise.datasets.stitch.build_condition`).
    result : GridResult
        Its grid.
    labels : iterable of str
        The chunkers drawn, in order.
    document : int, default 0
        Which document, in the order of the documents' names.
    chars : int, default 5000
        Characters drawn from the start of the document.

    Returns
    -------
    (str, str)
        A line naming the document, its length, segments and sources; and the drawing framed for a
        notebook (:func:`chunkwise.book.html_frame`, 900 px high, captioned).

    Raises
    ------
    ValueError
        If there is no document ``document``.
    """
    from chunkwise.book import html_frame
    from chunkwise.figures import chunk_boundaries_html

    names = sorted(corpus.docs)
    if not 0 <= document < len(names):
        raise ValueError(f"there is no stitched document {document}; choose 0 to {len(names) - 1}.")
    name = names[document]
    text = corpus.docs[name]
    in_doc = corpus.placements["document"] == name
    seg_spans = [(int(a), int(b)) for a, b in corpus.placements.loc[in_doc, ["start", "end"]].to_numpy()]
    drawn = {"seams (segments)": seg_spans}
    drawn.update({lab: result.chunks[lab][name] for lab in labels})
    sources = corpus.placements.loc[in_doc, "source"].tolist()
    line = (f"{name}: {len(text):,} characters, {len(seg_spans)} segments from "
            f"{', '.join(dict.fromkeys(sources))}")
    shown = min(chars, len(text))
    page = chunk_boundaries_html(text, drawn, title=f"{name}, characters 0-{shown}", window=(0, shown))
    return line, html_frame(page, height=900, title="chunk boundaries and seams of one stitched document",
                            caption=f"{name}: its segments in the first row (each colour change a "
                                    "seam between two corpora), then one row per chunker.")


def beside_paper(runs: ChapterRuns, order: Sequence[Any], sweep: Sequence[str], fixed: str, *, k: int,
                 embedder: str, folds: int = 2, seed: int = 0, clustering: str = "Cluster:200") -> pd.DataFrame:
    """Qu, Tu & Bao's document-retrieval F1@5 (:func:`paper_table`) with our segment-retrieval rows
    below, stitched then real ("original").

    Ours are F1 of means, as their evaluation code computes it: the fixed-size reference's and the
    clustering chunker's from :func:`document_retrieval_summary`; the breakpoint row from the mean
    precision and recall of the settings cross-fitting chooses on segment F1 (:func:`cross_fit`,
    :func:`cross_fit_apply`).

    Parameters
    ----------
    runs : ChapterRuns
    order : sequence
        The question order of the folds (the real condition's, :attr:`Contrasts.segment_f1`).
    sweep : sequence of str
        The sweep's labels.
    fixed : str
        The reference's label.
    k : int
    embedder : str
        Our model, for the ``embedder`` column.
    folds, seed : int
        Of the cross-fitting.
    clustering : str, default "Cluster:200"
        The clustering chunker's spec; NaN in its column when the run has none.

    Returns
    -------
    DataFrame
        :func:`paper_table`'s columns (F1 in percent), the paper's rows and then ours.

    Raises
    ------
    ValueError
        As :func:`cross_fit` and :func:`segment_scores`.
    """
    paper = paper_table()
    ours = []
    for cond in ("stitched", "real"):
        d = document_retrieval_summary(runs.segment_retrieval[cond])
        d = d[d["k"] == k].set_index("chunker")["doc_f1_of_means"] * 100
        # the cross-fitted breakpoint row: the settings chosen on segment F1, read on precision
        # and recall
        _, picks, fold = cross_fit(runs.segment_scores(cond, k).loc[order][list(sweep)], folds=folds, seed=seed)
        p_mean = cross_fit_apply(runs.segment_scores(cond, k, "doc_precision"), picks, fold).mean()
        r_mean = cross_fit_apply(runs.segment_scores(cond, k, "doc_recall"), picks, fold).mean()
        bp = 100 * 2 * p_mean * r_mean / (p_mean + r_mean) if p_mean + r_mean else 0.0
        ours.append({"embedder": embedder + " (ours)", "dataset": "Chroma's five corpora",
                     "documents": "stitched" if cond == "stitched" else "original", "fixed": d[fixed],
                     "breakpoint": bp,
                     "clustering": d[runs.labels[clustering]] if clustering in runs.labels else np.nan,
                     "breakpoint_minus_fixed": bp - d[fixed]})
    return pd.concat([paper, pd.DataFrame(ours)], ignore_index=True)


def cost_table(costs: pd.DataFrame, conditions: Iterable[str], labels: Iterable[str]) -> pd.DataFrame:
    """Seconds and texts per chunker and condition of the main grid.

    Parameters
    ----------
    costs : DataFrame
        :attr:`ChapterRuns.costs`.
    conditions : iterable of str
        The main grid's conditions (other rows of ``costs`` are the arms').
    labels : iterable of str
        The chunkers (rows), in order.

    Returns
    -------
    DataFrame
        Index chunker; columns (``seconds`` / ``texts_requested`` / ``texts_embedded``, condition),
        the counts as int.

    Raises
    ------
    KeyError
        If a chunker has no cost row.
    """
    conditions = list(conditions)
    main_costs = costs[costs["condition"].isin(conditions)]
    table = main_costs.pivot(index="chunker", columns="condition",
                             values=["seconds", "texts_requested", "texts_embedded"])
    table = table.loc[list(labels)]
    counts = [c for c in table.columns if c[0] != "seconds"]
    table[counts] = table[counts].astype(int)
    return table


def cost_lines(costs: pd.DataFrame, conditions: Iterable[str], embedders: Sequence[str] = (),
               second_corpora: Sequence[str] = ()) -> list[str]:
    """What the arms of the run cost, one line each: the other stitching seeds, the conditions
    without line breaks, and each embedder of the second-embedder arm.

    Parameters
    ----------
    costs : DataFrame
        :attr:`ChapterRuns.costs`.
    conditions : iterable of str
        The main grid's conditions (left out here).
    embedders : sequence of str
        The second-embedder arm's two model names (the chapter's first); empty without that arm.
    second_corpora : sequence of str
        That arm's corpora.

    Returns
    -------
    list of str
        Seconds (rounded) and texts embedded (not found in the cache) per arm that ran.
    """
    extra = costs[~costs["condition"].isin(list(conditions))]
    lines = []
    for what, part in (("more stitching seed(s)", extra[extra["condition"].str.contains("seed")]),
                       ("conditions without line breaks",
                        extra[extra["condition"].str.contains("no line breaks")])):
        if len(part):
            lines.append(f"the primary contrast on {part['condition'].nunique()} {what}: "
                         f"{part['seconds'].sum():.0f} s, {int(part['texts_embedded'].sum()):,} texts embedded")
    for name in embedders:
        part = extra[extra["condition"].str.contains(f", {name}, ", regex=False)]
        lines.append(f"the primary contrast with {name} on {', '.join(second_corpora)}: "
                     f"{part['seconds'].sum():.0f} s, {int(part['texts_embedded'].sum()):,} texts embedded")
    return lines


def chapter_results(found: Contrasts, panels: Mapping[str, tuple[Any, pd.DataFrame]], *, spread: str,
                    sweep: Sequence[str], fixed: str, guide: str, n_questions: int, cond_table: pd.DataFrame,
                    bounds: pd.DataFrame, kamradt: Mapping[str, float], corpora: Sequence[str],
                    second_embedder: str | None = None, second_corpora: Sequence[str] = ()) -> dict[str, Any]:
    """What chapter 6 hands to the findings page (:func:`chunkwise.findings.write_results`).

    Parameters
    ----------
    found : Contrasts
        :func:`contrasts` (points).
    panels : mapping
        :func:`robustness_panels`.
    spread : str
        :func:`seed_spread`.
    sweep : sequence of str
        The sweep's labels.
    fixed, guide : str
        The reference's and the guide's chunker's labels.
    n_questions : int
    cond_table : DataFrame
        :func:`condition_measures`' table.
    bounds : DataFrame
        :func:`seam_table`.
    kamradt : mapping
        :func:`interaction` of ``guide`` against ``fixed`` (points).
    corpora : sequence of str
    second_embedder : str, optional
        The second-embedder arm's model, when it ran.
    second_corpora : sequence of str
        Its corpora.

    Returns
    -------
    dict
        The verdicts (the plan's words for the two gaps, :func:`pattern_verdict` for the
        interaction), the intervals as text (points), counts of the exploratory verdicts after Holm's
        correction, the seams' cosine drops and recalls (fractions), the arms' intervals where they
        ran, and each panel's class (``class_<entry>``).

    Raises
    ------
    KeyError
        If a panel, a condition or a chunker is missing.
    """
    stitched_rows = found.exploratory[found.exploratory.treated == "stitched"]
    head, head_doc = found.head, found.head_doc
    res = {
        "stitched_gap_doc_f1": panels["qtb-stitched"][0].primary.verdict,  # the plan's words
        "real_gap_doc_f1": panels["qtb-real"][0].primary.verdict,
        "stitched_gap_doc_f1_ci": interval_text(head_doc, "gap_treated"),
        "real_gap_doc_f1_ci": interval_text(head_doc, "gap_control"),
        "interaction_verdict": found.verdict,
        "stitched_gap_recall_ci": interval_text(head, "gap_treated"),
        "interaction_recall_ci": interval_text(head, "interaction"),
        "interaction_seed_spread": spread,
        "interaction_doc_f1_ci": interval_text(head_doc, "interaction"),
        "primary": "the breakpoint chunker (best of " + ", ".join(sweep) + ", cross-fitted)",
        "fixed": fixed,
        "n_questions": int(n_questions),
        "n_supports": int((stitched_rows["verdict_holm"] == "supports").sum()),
        "n_contradicts": int((stitched_rows["verdict_holm"] == "contradicts").sum()),
        "n_interactions": int(len(stitched_rows)),
        "seam_cosine_drop_stitched": float(cond_table.loc["stitched", "drop"]),
        "seam_cosine_drop_shuffled": float(cond_table.loc["shuffled", "drop"]),
        "seams_stitched": int(cond_table.loc["stitched", "seams"]),
        "guide_seam_recall": float(bounds.loc[("stitched", guide), "boundary_recall"]),
        "fixed_seam_recall": float(bounds.loc[("stitched", fixed), "boundary_recall"]),
        "corpora": ", ".join(corpora),
    }
    if found.head_flat is not None:
        res["interaction_flat_recall_ci"] = interval_text(found.head_flat, "interaction")
        res["layout_part_recall_ci"] = interval_text(found.layout_primary, "layout_part")
    if second_embedder:
        res["second_embedder"] = second_embedder
        res["second_embedder_corpora"] = ", ".join(second_corpora)
        res["interaction_second_embedder_recall_ci"] = interval_text(found.head_second["second", "recall"],
                                                                     "interaction")
        res["interaction_second_minus_first_recall_ci"] = interval_text(found.second_difference["recall"],
                                                                        "difference")
    res["kamradt_interaction_recall_ci"] = interval_text(kamradt, "interaction")
    for e, (rob, _) in panels.items():
        res[f"class_{e.replace('-', '_')}"] = rob.cls
    return res
