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

__all__ = ["chunk_diagnostics", "structure_blocks"]

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
        ``n_chunks``, ``mean_tokens``, ``p10_tokens``, ``median_tokens``, ``p90_tokens``,
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
        t_split = t_all = c_split = c_all = 0
        for name, spans in by_doc.items():
            if name not in docs:
                raise ValueError(f"chunking {label!r} names document {name!r}, which is not among the documents.")
            text = docs[name]
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
