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
from collections.abc import Mapping, Sequence
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

