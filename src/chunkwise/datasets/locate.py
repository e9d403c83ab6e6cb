"""Help for hand-written questions: propose the passages of the documents that may answer them.

Writing an evaluation set by hand is mostly finding, for each question, the verbatim passage
that answers it. :func:`candidate_passages` does the searching without any embedding model:
every document is cut into windows of consecutive sentences (chunkwise's robust splitter), the
windows are ranked for each question with BM25 (:class:`chunkwise.retrieval.BM25Retriever`,
stemmed English or jieba Chinese words), and the best few that do not overlap a better one are
returned with their document and exact character offsets. A person then picks, trims and
confirms each excerpt; ``chunkwise questions locate --out`` writes the top candidates as a draft
questions file marked ``"reviewed": false`` for that purpose.

Lexical matching finds passages that share the question's words; a question phrased with other
words than its answer gets weak or wrong candidates, which the ``score`` column shows (0 = no
shared word).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["candidate_passages", "read_plain_questions"]


def read_plain_questions(path: str | Path, *, encoding: str = "utf-8") -> list[dict[str, Any]]:
    """Questions without excerpts: ``.txt`` (one per line), or CSV / JSONL / YAML records with a
    ``question`` field (and optionally ``document`` and ``question_id``), read as
    :func:`chunkwise.datasets.local.read_records` reads a questions file.

    Raises
    ------
    ValueError
        For a missing file, an unknown suffix, malformed records, a record without
        ``question``, two records with one ``question_id``, or no question.
    """
    from chunkwise.datasets.loaders import file_encoding
    from chunkwise.datasets.local import read_records

    p = Path(path).expanduser()
    if p.suffix.lower() == ".txt" and p.is_file():
        data = p.read_bytes()
        try:
            text = data.decode(file_encoding(data, encoding))  # a UTF-16/32 byte-order mark decides, per file
        except UnicodeDecodeError as exc:
            raise ValueError(f"questions file {p.name} is not valid {encoding}; pass its encoding with "
                             "--encoding.") from exc
        rows: list[Any] = [{"question": line.strip()} for line in text.splitlines() if line.strip()]
    else:
        rows, p = read_records(p, encoding=encoding)
    out = []
    seen: dict[str, int] = {}
    for i, r in enumerate(rows, 1):
        q = str(r.get("question") or "").strip() if isinstance(r, Mapping) else ""
        if not q:
            raise ValueError(f"{p.name} record {i} has no question.")
        doc = r.get("document")
        qid = str(r.get("question_id") or f"q{i}")
        if qid in seen:
            raise ValueError(f"{p.name} records {seen[qid]} and {i} share the question_id {qid!r}; give each question "
                             "its own id (or leave question_id out: records are then numbered q1, q2, ...).")
        seen[qid] = i
        out.append({"question_id": qid, "question": q, "document": str(doc) if doc not in (None, "") else None})
    if not out:
        raise ValueError(f"questions file {p.name} holds no question.")
    return out


def _windows(docs: Mapping[str, str], window_sentences: int) -> list[tuple[str, int, int]]:
    from chunkwise.text import split_sentences

    out = []
    for name, text in docs.items():
        sents = split_sentences(text)
        for i in range(len(sents)):
            j = min(i + window_sentences, len(sents)) - 1
            out.append((name, sents[i].start, sents[j].end))
            if j == len(sents) - 1:
                break
    return out


def candidate_passages(
    docs: Mapping[str, str],
    questions: Sequence[Mapping[str, Any]] | Sequence[str],
    *,
    top_n: int = 3,
    window_sentences: int = 2,
    language: str = "en",
) -> pd.DataFrame:
    """The ``top_n`` best non-overlapping sentence windows for each question, by BM25.

    Parameters
    ----------
    docs : mapping name -> text
    questions : sequence of str or of dicts with ``question`` (and optionally ``question_id``,
        ``document``: then only that document is searched)
    top_n : int, default 3
    window_sentences : int, default 2
        Sentences per window (windows start at every sentence, so they overlap).
    language : {"en", "zh"}, default "en"
        The BM25 tokenizer.

    Returns
    -------
    DataFrame
        One row per candidate: ``question_id``, ``question``, ``rank`` (1 = best),
        ``document``, ``start``, ``end`` (character offsets, ``docs[document][start:end] ==
        excerpt``), ``excerpt``, ``score`` (BM25; 0 rows are never returned). A question with
        no candidate (no word in common with any window) has no row.

    Raises
    ------
    ValueError
        For empty ``docs``, ``top_n`` or ``window_sentences`` < 1, or a question naming a
        document that is not in ``docs``.
    """
    from chunkwise.retrieval import BM25Retriever

    if not docs:
        raise ValueError("docs is empty; load the documents first.")
    for name, v in (("top_n", top_n), ("window_sentences", window_sentences)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}.")
    qs = [{"question": q} if isinstance(q, str) else dict(q) for q in questions]
    windows = _windows(docs, window_sentences)
    index = BM25Retriever([(str(i), docs[d][s:e]) for i, (d, s, e) in enumerate(windows)], language=language)
    rows = []
    for i, q in enumerate(qs, 1):
        qid, text, only = str(q.get("question_id") or f"q{i}"), str(q["question"]), q.get("document")
        if only is not None and only not in docs:
            raise ValueError(f"question {qid!r} names document {only!r}, which is not among the documents.")
        chosen: list[tuple[str, int, int, float]] = []
        for hit in index.retrieve(text, len(windows)):
            d, s, e = windows[int(hit[0])]
            if only is not None and d != only:
                continue
            if any(d == cd and s < ce and cs < e for cd, cs, ce, _ in chosen):
                continue  # overlaps a better candidate
            chosen.append((d, s, e, float(hit[2])))
            if len(chosen) == top_n:
                break
        for rank, (d, s, e, score) in enumerate(chosen, 1):
            rows.append((qid, text, rank, d, s, e, docs[d][s:e], score))
    return pd.DataFrame(rows, columns=["question_id", "question", "rank", "document", "start", "end", "excerpt", "score"])
