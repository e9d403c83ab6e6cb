"""Stitched, shuffled and real versions of a span-referenced corpus, with the seams recorded.

Qu, Tu & Bao (2025) found semantic chunkers ahead of fixed-size chunking on long documents
*stitched* together from unrelated short ones, and not on real documents. This module builds
that contrast from any corpus whose questions carry reference spans (Chroma's five corpora, or
a reader's own folder), so that one question set is scored under three conditions:

``real``
    The documents as they are. Their segments (below) are kept in order, so the "seams" are
    only the places where a segment ends; nothing was moved.
``stitched``
    Segments of *different* source documents interleaved in a seeded random order, a fixed
    number per new document: every seam joins two sources, a true topic shift.
``shuffled``
    The segments of each source document reordered within it (one new document per source):
    seams exist, but both sides come from the same source, so the topic barely moves. This
    separates "a seam exists" from "the topic changes".

Segments are natural blocks of a source: paragraphs (runs of text between line breaks)
packed to a token range, a paragraph longer than the range cut at sentence ends. A cut is
never placed inside a question's reference span (a reference that crosses a candidate cut
removes that cut, so the segment grows), and the references of one question that lie in
several segments keep those segments in one new document. Every segment is copied verbatim,
its trailing whitespace included, so the three conditions hold exactly the same text in a
different order, and a question's references are carried to their new offsets exactly
(``new_doc[start:end] == reference``). Segments usually end after the whitespace that follows
them (a line break at a paragraph end, a space at a sentence end: :meth:`StitchedCorpus.seam_table`
says which, ``after_line_break``); a source's last segment may end without any, and where such a
segment is moved before another, one line break (:data:`SEPARATOR`) is put between them, so the
stitched and shuffled texts hold that one extra character per such seam (``separator`` in the
seam table) and never glue two words together.

With ``layout="flat"`` every line break of the built texts (and of the references) becomes one
space, character for character, so offsets do not move and no seam, paragraph end or line of
a source can be found by its layout: a chunker that prefers line breaks then has nothing to
prefer, and what is left of a semantic chunker's gain comes from the words. (Qu, Tu & Bao join
their short documents with one line break; removing every line break goes further on purpose,
since here most seams already follow one.)

References
----------
R. Qu, R. Tu and F. Bao, "Is Semantic Chunking Worth the Computational Cost?", Findings of
NAACL 2025 (arXiv:2410.13070): stitched versus original documents.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CONDITIONS",
    "LAYOUTS",
    "SEPARATOR",
    "Segment",
    "StitchedCorpus",
    "build_condition",
    "segment_documents",
]

#: The three conditions :func:`build_condition` builds.
CONDITIONS: tuple[str, ...] = ("real", "stitched", "shuffled")
#: What :func:`build_condition` may do with the texts' line breaks: keep them, or turn each
#: into a space (``"flat"``, offsets unchanged).
LAYOUTS: tuple[str, ...] = ("kept", "flat")
# the characters str.splitlines() breaks at, each replaced by a space in the flat layout
_LINE_BREAKS = str.maketrans({c: " " for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})
#: Inserted at a seam whose left segment does not end in whitespace and whose right one does
#: not start with it (a source's last segment, moved before another): the two words stay apart.
SEPARATOR = "\n"

# a paragraph starts after whitespace that holds a line break
_PARAGRAPH_START = re.compile(r"\s*\n\s*")
_TERMINATOR = re.compile(r"(?<=[.?!])\s+")


@dataclass(frozen=True)
class Segment:
    """A natural block of one source document.

    Attributes
    ----------
    segment_id : int
        Position in the list :func:`segment_documents` returns (sources in input order,
        segments in text order).
    source : str
        Name of the source document.
    source_start, source_end : int
        Half-open character offsets into the source text; ``text == source[source_start:source_end]``.
    n_tokens : int
        Tokens of ``text`` (the encoding given to :func:`segment_documents`).
    text : str
        The segment, verbatim, trailing whitespace included.
    """

    segment_id: int
    source: str
    source_start: int
    source_end: int
    n_tokens: int
    text: str = field(repr=False)


@dataclass
class StitchedCorpus:
    """One condition of the experiment: documents, questions and where every segment went.

    Attributes
    ----------
    condition : str
        ``"real"``, ``"stitched"`` or ``"shuffled"``.
    docs : dict[str, str]
        New document name -> text (for ``real``, the sources themselves).
    questions : pandas.DataFrame
        The input questions, one row each, in input order, with ``corpus_id`` (the new
        document), ``references`` (list of ``(start, end)`` into it), ``reference_texts``
        (verbatim; line breaks as spaces in the flat layout), ``source_corpus`` (the source document) and
        ``evidence_segments`` (sorted ids of the segments holding the references).
    placements : pandas.DataFrame
        One row per segment in new-document order: ``segment_id``, ``source``,
        ``source_start``, ``source_end``, ``document``, ``start``, ``end`` (offsets into the
        new document), ``n_tokens``.
    seed : int or None
        The seed of the random order (None for ``real``).
    layout : {"kept", "flat"}
        Whether the texts keep their line breaks or had each replaced by a space.
    """

    condition: str
    docs: dict[str, str]
    questions: pd.DataFrame
    placements: pd.DataFrame
    seed: int | None = None
    layout: str = "kept"

    def seams(self) -> dict[str, list[int]]:
        """Document -> character offsets where a segment starts after another (sorted).

        For ``real`` these are the segment cuts of the untouched text (no text was moved).
        """
        out: dict[str, list[int]] = {d: [] for d in self.docs}
        for doc, group in self.placements.groupby("document", sort=False):
            out[str(doc)] = [int(s) for s in group["start"].iloc[1:]]
        return out

    def seam_table(self) -> pd.DataFrame:
        """One row per seam: ``document``, ``offset``, ``left_segment``, ``right_segment``,
        ``left_source``, ``right_source``, ``cross_source`` (the two sides come from different
        sources), ``contiguous`` (the right segment follows the left one in its source, so
        the seam moved nothing), ``separator`` (characters put between the two segments: 1
        where :data:`SEPARATOR` was inserted, else 0) and ``after_line_break`` (the whitespace
        that ends the left side holds a line break: a paragraph end, rather than a sentence
        end followed by a space)."""
        rows = []
        for doc, group in self.placements.groupby("document", sort=False):
            g = group.reset_index(drop=True)
            for i in range(1, len(g)):
                left, right = g.iloc[i - 1], g.iloc[i]
                text = self.docs[str(doc)]
                gap = text[int(left["end"]) : int(right["start"])]
                before = text[max(0, int(left["end"]) - 64) : int(right["start"])]
                rows.append(
                    {
                        "document": str(doc),
                        "offset": int(right["start"]),
                        "left_segment": int(left["segment_id"]),
                        "right_segment": int(right["segment_id"]),
                        "left_source": str(left["source"]),
                        "right_source": str(right["source"]),
                        "cross_source": left["source"] != right["source"],
                        "contiguous": left["source"] == right["source"]
                        and int(left["source_end"]) == int(right["source_start"]),
                        "separator": len(gap),
                        "after_line_break": "\n" in before[len(before.rstrip()):],
                    }
                )
        return pd.DataFrame(
            rows,
            columns=["document", "offset", "left_segment", "right_segment", "left_source", "right_source",
                     "cross_source", "contiguous", "separator", "after_line_break"],
        )

    def segment_lookup(self) -> dict[str, tuple[list[int], list[int]]]:
        """Document -> (segment start offsets, segment ids), sorted by offset, for
        :meth:`segments_of_span`."""
        out: dict[str, tuple[list[int], list[int]]] = {}
        for doc, group in self.placements.groupby("document", sort=False):
            out[str(doc)] = (list(map(int, group["start"])), list(map(int, group["segment_id"])))
        return out

    def summary(self) -> dict[str, Any]:
        """Counts for a table: documents, segments, seams, cross-source and contiguous seams,
        seams after a line break, separators inserted, mean segment tokens."""
        seams = self.seam_table()
        return {
            "condition": self.condition,
            "layout": self.layout,
            "documents": len(self.docs),
            "characters": int(sum(len(t) for t in self.docs.values())),
            "segments": int(len(self.placements)),
            "mean_segment_tokens": float(self.placements["n_tokens"].mean()),
            "seams": int(len(seams)),
            "cross_source_seams": int(seams["cross_source"].sum()) if len(seams) else 0,
            "contiguous_seams": int(seams["contiguous"].sum()) if len(seams) else 0,
            "seams_after_line_break": int(seams["after_line_break"].sum()) if len(seams) else 0,
            "separators_inserted": int((seams["separator"] > 0).sum()) if len(seams) else 0,
            "questions": int(len(self.questions)),
        }


# --------------------------------------------------------------------------------------
# input
# --------------------------------------------------------------------------------------


def _questions_frame(docs: Mapping[str, str], questions: Any) -> pd.DataFrame:
    """Normalise questions to question_id / question / corpus_id / references [(s, e)]."""
    if not isinstance(docs, Mapping) or not docs:
        raise ValueError("docs must be a non-empty mapping document name -> text.")
    for name, text in docs.items():
        if not isinstance(text, str):
            raise ValueError(f"document {name!r} must be a str, got {type(text).__name__}.")
    if questions is None:
        return pd.DataFrame(columns=["question_id", "question", "corpus_id", "references"])
    if not isinstance(questions, pd.DataFrame):
        raise ValueError(
            "questions must be a DataFrame with question, corpus_id (or corpus) and references, "
            "e.g. chunkwise.datasets.load_chroma_questions(...)."
        )
    q = questions.copy()
    if "readings" in q.columns and any(isinstance(r, list) and r for r in q["readings"]):
        raise ValueError(
            "questions with any-of excerpts (readings) cannot be stitched: their alternatives would need moving "
            "too. Give each question one excerpt per part of its answer for this experiment."
        )
    if "corpus_id" not in q.columns and "corpus" in q.columns:
        q["corpus_id"] = q["corpus"]
    missing = [c for c in ("question", "corpus_id", "references") if c not in q.columns]
    if missing:
        raise ValueError(f"questions is missing column(s) {missing}; it needs question, corpus_id and references.")
    if "question_id" not in q.columns:
        q["question_id"] = [f"q{i + 1}" for i in range(len(q))]
    refs_out = []
    for qid, doc, refs in zip(q["question_id"], q["corpus_id"], q["references"], strict=True):
        doc = str(doc)
        if doc not in docs:
            raise ValueError(f"question {qid!r} refers to document {doc!r}, which is not among the documents given.")
        refs = json.loads(refs) if isinstance(refs, str) else list(refs)
        spans = []
        for r in refs:
            s, e = (r["start_index"], r["end_index"]) if isinstance(r, Mapping) else (r[0], r[1])
            s, e = int(s), int(e)
            if not 0 <= s <= e <= len(docs[doc]):
                raise ValueError(
                    f"question {qid!r}: reference [{s}, {e}) lies outside document {doc!r} "
                    f"({len(docs[doc])} characters)."
                )
            spans.append((s, e))
        if not spans:
            raise ValueError(f"question {qid!r} has no reference span.")
        refs_out.append(spans)
    q["corpus_id"] = q["corpus_id"].astype(str)
    q["references"] = refs_out
    if "reference_texts" not in q.columns:
        q["reference_texts"] = [[docs[d][s:e] for s, e in spans] for d, spans in zip(q["corpus_id"], refs_out)]
    return q.reset_index(drop=True)


def _check_range(min_tokens: Any, max_tokens: Any) -> tuple[int, int]:
    for name, v in (("min_tokens", min_tokens), ("max_tokens", max_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1 (tokens), got {v!r}.")
    if min_tokens > max_tokens:
        raise ValueError(f"min_tokens ({min_tokens}) must not exceed max_tokens ({max_tokens}).")
    return min_tokens, max_tokens


# --------------------------------------------------------------------------------------
# segments
# --------------------------------------------------------------------------------------


def _candidate_cuts(text: str) -> tuple[list[int], set[int]]:
    """Allowed cut positions (sorted, 0 and len excluded) and which of them start a paragraph.

    A paragraph cut sits at the first character after whitespace holding a line break; a
    sentence cut at the first character of a sentence (robust splitter), or after whitespace
    that follows ``.``, ``?`` or ``!``."""
    from chunkwise.text import split_sentences

    n = len(text)
    paragraph = {m.end() for m in _PARAGRAPH_START.finditer(text) if 0 < m.end() < n}
    sentence = {c.start for c in split_sentences(text, mode="robust") if 0 < c.start < n}
    # a terminator then whitespace also ends a sentence here (LangChain's rule), so lower-cased
    # text (Chroma's finance corpus), which the robust splitter keeps whole, can still be cut
    sentence |= {m.end() for m in _TERMINATOR.finditer(text) if 0 < m.end() < n}
    return sorted(paragraph | sentence), paragraph


def _forbidden(cuts: list[int], spans: Sequence[tuple[int, int]]) -> set[int]:
    """Cuts strictly inside a reference span."""
    bad: set[int] = set()
    for s, e in spans:
        i = bisect.bisect_right(cuts, s)
        while i < len(cuts) and cuts[i] < e:
            bad.add(cuts[i])
            i += 1
    return bad


def segment_documents(
    docs: Mapping[str, str],
    questions: pd.DataFrame | None = None,
    *,
    min_tokens: int = 150,
    max_tokens: int = 500,
    encoding_name: str = "cl100k_base",
) -> list[Segment]:
    """Cut every document into natural segments that never split a reference span.

    Candidate cuts are paragraph starts (after whitespace holding a line break) and, for a
    paragraph longer than ``max_tokens``, sentence starts (:func:`chunkwise.text.split_sentences`,
    robust mode, and the first character after whitespace that follows ``.``, ``?`` or ``!``). A candidate strictly inside a question's reference span is dropped. From
    each segment's start, the segment ends at the first paragraph cut that gives at least
    ``min_tokens`` tokens without passing ``max_tokens``; when no paragraph cut does, at the
    last sentence cut within ``max_tokens`` if that reaches ``min_tokens``; otherwise (a
    reference, a sentence or a table longer than the range) at the first allowed cut that
    reaches ``min_tokens``, so that segment is longer than ``max_tokens``. A last
    piece under ``min_tokens`` joins the segment before it. Segments can still fall under
    ``min_tokens``: a whole source shorter than it is one segment, and sizes are decided on
    the pieces' token counts, which can exceed the joined text's by a token or two per piece. Sizes are decided on token counts
    of the pieces between candidate cuts (a token or two from the exact count of the joined
    text); :attr:`Segment.n_tokens` is the exact count.

    Parameters
    ----------
    docs : mapping str -> str
        Source name -> text.
    questions : DataFrame, optional
        Columns ``question``, ``corpus_id`` (or ``corpus``) and ``references`` (list of
        ``(start, end)`` pairs or ``{"start_index", "end_index"}`` dicts, half-open character
        offsets); their spans are never cut.
    min_tokens, max_tokens : int, default 150, 500
        The segment size range in tokens of ``encoding_name``.
    encoding_name : str, default "cl100k_base"
        The tiktoken encoding that counts tokens.

    Returns
    -------
    list of Segment
        Sources in the order of ``docs``, segments in text order; the segments of a source
        tile it exactly (``"".join(texts) == source``). An empty source gives no segment.

    Raises
    ------
    ValueError
        For empty ``docs``, a non-str text, a question on a missing document, a reference
        outside its document, or an invalid token range.
    """
    from chunkwise.tokens import get_encoding

    min_tokens, max_tokens = _check_range(min_tokens, max_tokens)
    q = _questions_frame(docs, questions)
    enc = get_encoding(encoding_name)
    spans_of: dict[str, list[tuple[int, int]]] = {name: [] for name in docs}
    for doc, refs in zip(q["corpus_id"], q["references"]):
        spans_of[doc].extend(refs)

    out: list[Segment] = []
    for name, text in docs.items():
        if not text:
            continue
        cuts, paragraph = _candidate_cuts(text)
        bad = _forbidden(cuts, spans_of[name])
        cuts = [c for c in cuts if c not in bad]
        bounds = [0, *cuts, len(text)]
        piece_tokens = [len(t) for t in enc.encode_ordinary_batch([text[a:b] for a, b in zip(bounds, bounds[1:])])]
        prefix = np.concatenate([[0], np.cumsum(piece_tokens)])
        ends: list[int] = []  # indices into bounds
        i = 0
        last = len(bounds) - 1
        while i < last:
            best_para = best_any = None
            j = i + 1
            while j <= last and prefix[j] - prefix[i] <= max_tokens:
                if best_para is None and prefix[j] - prefix[i] >= min_tokens and (j == last or bounds[j] in paragraph):
                    best_para = j
                best_any = j
                j += 1
            if best_para is not None:
                end = best_para  # the first paragraph end that reaches min_tokens
            elif best_any is not None and (prefix[best_any] - prefix[i] >= min_tokens or best_any == last):
                end = best_any  # the last cut within max_tokens (the text's end, if it is within)
            else:
                # nothing within max_tokens reaches min_tokens: the first allowed cut that does
                end = j
                while end < last and prefix[end] - prefix[i] < min_tokens:
                    end += 1
            ends.append(end)
            i = end
        if len(ends) > 1 and prefix[ends[-1]] - prefix[ends[-2]] < min_tokens:
            ends.pop(-2)  # the short tail joins the segment before it
        start = 0
        for end in ends:
            a, b = bounds[start], bounds[end]
            seg_text = text[a:b]
            out.append(Segment(len(out), name, a, b, len(enc.encode_ordinary(seg_text)), seg_text))
            start = end
    return out


# --------------------------------------------------------------------------------------
# conditions
# --------------------------------------------------------------------------------------


def _evidence(q: pd.DataFrame, segments: Sequence[Segment]) -> list[list[int]]:
    """Per question, the id of the segment holding each reference (in reference order)."""
    by_source: dict[str, tuple[list[int], list[Segment]]] = {}
    for seg in segments:
        starts, segs = by_source.setdefault(seg.source, ([], []))
        starts.append(seg.source_start)
        segs.append(seg)
    out = []
    for qid, doc, refs in zip(q["question_id"], q["corpus_id"], q["references"]):
        if doc not in by_source:
            raise ValueError(f"question {qid!r}: document {doc!r} has no segment (is it empty?).")
        starts, segs = by_source[doc]
        ids = []
        for s, e in refs:
            i = max(bisect.bisect_right(starts, s) - 1, 0)
            seg = segs[i]
            if e > seg.source_end and s < seg.source_end:
                raise ValueError(
                    f"question {qid!r}: reference [{s}, {e}) crosses the segment cut at {seg.source_end}; "
                    "the segments were not built with these questions (pass them to segment_documents)."
                )
            if s == seg.source_end and i + 1 < len(segs):  # an empty span at a cut
                seg = segs[i + 1]
            ids.append(seg.segment_id)
        out.append(ids)
    return out


def _units(n: int, evidence: list[list[int]]) -> list[list[int]]:
    """Groups of segment ids that must share a document (linked by one question), sorted."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ids in evidence:
        for a in ids[1:]:
            ra, rb = find(ids[0]), find(a)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values())


def _arrange(items: list[int], source_of: Sequence[str], rng: np.random.Generator) -> list[int]:
    """Order segment ids so that neighbours come from different sources whenever possible.

    Each step draws a source other than the previous one, with probability proportional to
    its remaining segments, and then one of its segments at random; a source holding more than
    half of what remains is drawn first, so the rule can only fail when one source holds more
    than half of the document's segments (then its extra segments meet at some seams)."""
    left: dict[str, list[int]] = {}
    for i in items:
        left.setdefault(source_of[i], []).append(i)
    for ids in left.values():
        rng.shuffle(ids)
    order: list[int] = []
    prev = None
    remaining = len(items)
    while remaining:
        names = sorted(s for s, ids in left.items() if ids)
        heavy = [s for s in names if 2 * len(left[s]) > remaining + 1 - (prev == s) and s != prev]
        choices = heavy or [s for s in names if s != prev] or names
        weights = np.asarray([len(left[s]) for s in choices], dtype=float)
        src = choices[int(rng.choice(len(choices), p=weights / weights.sum()))]
        order.append(left[src].pop())
        prev = src
        remaining -= 1
    return order


def _assign_stitched(
    segments: Sequence[Segment], units: list[list[int]], segments_per_document: int, rng: np.random.Generator
) -> list[list[int]]:
    """Deal the units into documents, each source spread evenly, units kept whole."""
    n_docs = max(1, round(len(segments) / segments_per_document))
    docs: list[list[int]] = [[] for _ in range(n_docs)]
    per_source: dict[str, list[list[int]]] = {}
    for unit in units:
        per_source.setdefault(segments[unit[0]].source, []).append(unit)
    count = np.zeros(n_docs)
    for source in sorted(per_source, key=lambda s: (-sum(len(u) for u in per_source[s]), s)):
        source_units = per_source[source]
        order = rng.permutation(len(source_units))
        # big units first, so the small ones even out the counts
        order = sorted(order, key=lambda k: -len(source_units[k]))
        of_source = np.zeros(n_docs)
        for k in order:
            unit = source_units[k]
            # fewest segments of this source, then fewest in all, then at random
            key = of_source * (count.max() + 1) + count + rng.random(n_docs) * 0.5
            d = int(np.argmin(key))
            docs[d].extend(unit)
            of_source[d] += len(unit)
            count[d] += len(unit)
    return [d for d in docs if d]


def build_condition(
    docs: Mapping[str, str],
    questions: pd.DataFrame,
    condition: str,
    *,
    segments: Sequence[Segment] | None = None,
    segments_per_document: int = 20,
    seed: int = 0,
    min_tokens: int = 150,
    max_tokens: int = 500,
    encoding_name: str = "cl100k_base",
    layout: str = "kept",
) -> StitchedCorpus:
    """Build one condition (``real``, ``stitched`` or ``shuffled``) of a span-referenced corpus.

    Parameters
    ----------
    docs : mapping str -> str
        Source name -> text (e.g. :func:`chunkwise.datasets.load_chroma_corpora`).
    questions : DataFrame
        ``question``, ``corpus_id`` (or ``corpus``), ``references`` (half-open character
        spans) and optionally ``question_id`` and ``reference_texts``; e.g.
        :func:`chunkwise.datasets.load_chroma_questions` or a validated own-data set.
    condition : {"real", "stitched", "shuffled"}
        See the module docstring.
    segments : sequence of Segment, optional
        From :func:`segment_documents` on the same ``docs`` and ``questions``; built with
        ``min_tokens`` / ``max_tokens`` / ``encoding_name`` when omitted. Pass the same list
        to all three conditions so that they hold the same segments.
    segments_per_document : int, default 20
        ``stitched`` only: segments per new document (the number of documents is the number
        of segments divided by this, rounded; a question whose references lie in several
        segments keeps them in one document, so sizes vary a little).
    seed : int, default 0
        Seed of the random orders (``stitched`` and ``shuffled``); the same inputs and seed
        give the same documents.
    min_tokens, max_tokens, encoding_name
        As in :func:`segment_documents`.
    layout : {"kept", "flat"}, default "kept"
        ``"flat"`` replaces every line break of the built documents and of the references
        (``\n``, ``\r`` and the other characters :meth:`str.splitlines` breaks at) by one
        space, so no seam or paragraph end is marked by layout; offsets are unchanged, and the
        separator a seam may need is a space. The segments are the same either way.

    Returns
    -------
    StitchedCorpus
        New documents are named ``stitched-000``, ``stitched-001``, ... (``stitched``),
        ``<source>~shuffled`` (``shuffled``) or keep their names (``real``). In ``stitched``,
        neighbouring segments come from different sources except where one source holds more
        than half of a document's segments (:meth:`StitchedCorpus.seam_table` flags such seams).
        An empty source has no segment, so it is in no condition (``real`` included); no
        question can refer to it.

    Raises
    ------
    ValueError
        For an unknown condition or layout, ``segments_per_document < 2``, a ``seed`` that is not
        an int >= 0, fewer than two non-empty
        sources for ``stitched``, segments that cut a reference, and the input errors of
        :func:`segment_documents`.
    """
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {', '.join(CONDITIONS)}, got {condition!r}.")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}.")
    separator = " " if layout == "flat" else SEPARATOR
    if isinstance(segments_per_document, bool) or not isinstance(segments_per_document, int) or segments_per_document < 2:
        raise ValueError(f"segments_per_document must be an int >= 2, got {segments_per_document!r}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a whole number >= 0 (e.g. seed=0), got {seed!r}.")
    q = _questions_frame(docs, questions)
    if segments is None:
        segments = segment_documents(docs, q, min_tokens=min_tokens, max_tokens=max_tokens, encoding_name=encoding_name)
    segments = list(segments)
    for i, seg in enumerate(segments):
        if seg.segment_id != i or seg.source not in docs or docs[seg.source][seg.source_start:seg.source_end] != seg.text:
            raise ValueError(
                f"segment {i} does not belong to these documents; build the segments with segment_documents(docs, questions)."
            )
    evidence = _evidence(q, segments)
    source_of = [s.source for s in segments]
    rng = np.random.default_rng(seed)

    arrangement: list[tuple[str, list[int]]] = []
    if condition == "real":
        for name in docs:
            ids = [s.segment_id for s in segments if s.source == name]
            if ids:
                arrangement.append((name, ids))
    elif condition == "shuffled":
        for name in docs:
            ids = [s.segment_id for s in segments if s.source == name]
            if ids:
                arrangement.append((f"{name}~shuffled", [ids[k] for k in rng.permutation(len(ids))]))
    else:
        if len({s.source for s in segments}) < 2:
            raise ValueError("stitching needs segments of at least two non-empty documents.")
        units = _units(len(segments), evidence)
        groups = _assign_stitched(segments, units, segments_per_document, rng)
        width = max(3, len(str(len(groups) - 1)))
        for d, ids in enumerate(groups):
            arrangement.append((f"stitched-{d:0{width}d}", _arrange(ids, source_of, rng)))

    new_docs: dict[str, str] = {}
    rows = []
    where: dict[int, tuple[str, int]] = {}
    for name, ids in arrangement:
        parts: list[str] = []
        pos = 0
        prev: Segment | None = None
        for i in ids:
            seg = segments[i]
            text = seg.text
            moved = prev is not None and not (prev.source == seg.source and prev.source_end == seg.source_start)
            if moved and prev is not None and not prev.text[-1:].isspace() and not text[:1].isspace():
                # a segment that does not end in whitespace (a source's last one) before a moved
                # segment: one line break keeps the two words apart (Qu, Tu & Bao join with "\n")
                parts.append(separator)
                pos += len(separator)
            parts.append(text)
            prev = seg
            rows.append((seg.segment_id, seg.source, seg.source_start, seg.source_end, name, pos, pos + len(text), seg.n_tokens))
            where[seg.segment_id] = (name, pos)
            pos += len(text)
        new_docs[name] = "".join(parts)
    if layout == "flat":
        new_docs = {name: text.translate(_LINE_BREAKS) for name, text in new_docs.items()}
    placements = pd.DataFrame(
        rows, columns=["segment_id", "source", "source_start", "source_end", "document", "start", "end", "n_tokens"]
    )

    out_q = q.copy()
    out_q["source_corpus"] = q["corpus_id"]
    new_doc_col, new_refs = [], []
    for qid, refs, ids in zip(q["question_id"], q["references"], evidence):
        names = {where[i][0] for i in ids}
        if len(names) != 1:  # cannot happen: units keep a question's segments together
            raise RuntimeError(f"question {qid!r}: its references were placed in {sorted(names)}.")
        new_doc_col.append(names.pop())
        new_refs.append(
            [(where[i][1] + s - segments[i].source_start, where[i][1] + e - segments[i].source_start) for (s, e), i in zip(refs, ids)]
        )
    out_q["corpus_id"] = new_doc_col
    if "corpus" in out_q.columns:
        out_q["corpus"] = new_doc_col
    out_q["references"] = new_refs
    out_q["evidence_segments"] = [sorted(set(ids)) for ids in evidence]
    if layout == "flat":
        out_q["reference_texts"] = [[t.translate(_LINE_BREAKS) for t in texts] for texts in out_q["reference_texts"]]
    for qid, doc, refs, texts in zip(out_q["question_id"], out_q["corpus_id"], new_refs, out_q["reference_texts"]):
        for (s, e), t in zip(refs, texts):
            if new_docs[doc][s:e] != t:  # a guard on the whole construction, never expected
                raise RuntimeError(f"question {qid!r}: reference moved to [{s}, {e}) of {doc!r} does not match its text.")
    return StitchedCorpus(condition, new_docs, out_q, placements, None if condition == "real" else seed, layout)
