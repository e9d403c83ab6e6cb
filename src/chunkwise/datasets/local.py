"""A reader's own documents and questions: load, locate the gold excerpts, validate.

Documents
---------
:func:`load_documents` reads a folder (searched recursively) or one file: ``.txt`` / ``.md``
decoded with ``encoding`` (default UTF-8) in text mode with universal newlines (``\\r\\n``
becomes ``\\n``, as Python's ``open`` does and as Chroma's evaluation reads its corpora), and
PDF, Word (.docx) and HTML converted to text (:mod:`chunkwise.datasets.loaders`). Files that
cannot be read are skipped and listed with the reason (``Documents.skipped``).
Every offset in chunkwise is a character offset (Python ``str`` index) into that text. A
document's name is its path relative to the folder, with ``/`` separators (for one file: its
file name).

Questions
---------
:func:`read_questions` reads a questions file in one of two forms:

- **Chroma's format** (Smith & Troynikov, 2024): CSV with columns ``question``,
  ``references`` (a JSON list of ``{"content", "start_index", "end_index"}``, half-open
  character offsets) and ``corpus_id`` (the document's name; a bare file stem such as
  ``finance`` for ``finance.md`` is accepted when it is unambiguous).
- **A plain form** with verbatim gold excerpts that chunkwise locates in the documents: CSV,
  JSONL or YAML records with ``question``, optionally ``document`` (else every document is
  searched), and ``excerpt`` (one string) or ``excerpts`` (a list; in CSV a JSON list; an item
  that is itself a list is an any-of slot, see :mod:`chunkwise.evaluation.anyof`). YAML
  needs the PyYAML package, which the environment has through its dependencies; without it
  YAML files are refused with a message to use CSV or JSONL.

An optional ``question_id`` column/field names each question (default: ``q<row>``).

:func:`validate_questions` checks every question against the documents *before* anything is
embedded and reports every problem, not just the first: a missing document (with the
closest names), an excerpt that is not in its document (with the closest source text and its
offset), an excerpt found in several places (the first is used; a warning), offsets that do
not reproduce the excerpt (with where the excerpt really is), offsets out of range, empty
questions or excerpts. Excerpts are matched exactly first, then ignoring differences in
whitespace (runs of spaces / newlines), and the true offsets in the document are recorded.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from chunkwise.text import whitespace_pattern
from chunkwise.datasets.loaders import (
    LOADERS,
    Documents,
    SkippedFile,
    UnreadableDocument,
    _universal,
    file_encoding,
    printable_name,
    read_document,
)

__all__ = [
    "DOCUMENT_SUFFIXES",
    "QuestionIssue",
    "ValidationReport",
    "load_documents",
    "load_questions",
    "locate_excerpt",
    "question_tags",
    "read_questions",
    "validate_questions",
]

#: File suffixes read as documents (case-insensitive): every suffix with a loader.
DOCUMENT_SUFFIXES: tuple[str, ...] = tuple(LOADERS)

PathLike = str | os.PathLike[str]


# --------------------------------------------------------------------------------------
# documents
# --------------------------------------------------------------------------------------


def _keep(out: Documents, name: str, text: str) -> None:
    """Store a document's text as a plain ``str``, and a PDF's page map in ``out.page_starts``."""
    starts = getattr(text, "page_starts", None)
    if starts is not None:
        out.page_starts[name] = list(starts)
    out[name] = str(text)


def load_documents(
    path: PathLike,
    *,
    encoding: str = "utf-8",
    suffixes: Sequence[str] = DOCUMENT_SUFFIXES,
) -> Documents:
    """Read a folder of documents (recursively) or a single file, as text.

    Plain text and Markdown are decoded with ``encoding``; PDF, Word (.docx) and HTML files
    are converted to text by :mod:`chunkwise.datasets.loaders` (what each conversion loses is
    listed there). Offsets everywhere refer to that text.

    Parameters
    ----------
    path : str or os.PathLike
        A folder (every file in any subfolder; hidden files and folders skipped without a word)
        or one file (a suffix without a loader is read as plain text). Links to files are read
        (one to a file outside the folder is named in ``.linked``, with its target);
        links to folders are not followed (a link can loop, or read the same files twice) and,
        like broken links and anything that is not a regular file, are listed as skipped.
    encoding : str, default "utf-8"
        Codec of text files. Text is read with universal newlines.
    suffixes : sequence of str
        Suffixes to read in a folder (default every suffix with a loader), case-insensitive.

    Returns
    -------
    Documents
        A ``dict`` of document name (path relative to ``path`` with ``/``; for one file its
        file name) -> text, sorted by name, with ``.skipped``: every file of the folder that
        was not loaded, with its reason (unknown type, empty, binary, undecodable, encrypted
        PDF, PDF without a text layer, damaged file, a report chunkwise wrote, a link to a
        folder, a broken link, a file the system refuses to read), ``.kinds``: name -> suffix,
        ``.renamed``: printable name -> ``repr`` of the name on disk, and ``.linked``: name ->
        target of each document read through a link to a file outside the folder.

        A file name that is not valid UTF-8 (bytes written by an older Windows or Latin-1
        system, e.g. ``caf\\xe9.txt``) is still loaded: a user expects the document read, and
        the name is only its label. Its name is the printable form of
        :func:`~chunkwise.datasets.loaders.printable_name`, each undecodable byte written as
        ``\\xNN`` (``caf\\xe9.txt``): use that name in a questions file's ``document``
        field (in JSON and double-quoted YAML with the backslash escaped, ``"caf\\\\xe9.txt"``), or rename
        the file to valid UTF-8 (``convmv`` does so in bulk).

    Raises
    ------
    ValueError
        If ``path`` does not exist, the encoding is unknown, one given file cannot be read, or
        a folder has no readable document (the message lists every file skipped and why).
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise ValueError(f"documents path {str(path)!r} does not exist; pass a folder of documents or one file.")
    out = Documents()
    if root.is_file():
        name = printable_name(root.name)
        _keep(out, name, read_document(root, name, encoding, unknown_as_text=True))
        out.kinds[name] = root.suffix.lower()
        if name != root.name:
            out.renamed[name] = repr(root.name)
        return out
    wanted = tuple(s.lower() for s in suffixes)
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        name = printable_name(rel.as_posix())
        if p.is_symlink() and not p.exists():
            target = printable_name(os.readlink(p))
            out.skipped.append(SkippedFile(name, f"is a broken link (to {target}, which does not exist); remove it "
                                                 "or restore its target."))
            continue
        if p.is_dir():
            if p.is_symlink():
                target = printable_name(os.readlink(p))
                out.skipped.append(SkippedFile(
                    name, f"is a link to a folder ({target}), which chunkwise does not follow (a link can loop or "
                    "read the same files twice); copy or move those files into the documents folder."))
            continue
        if not p.is_file():
            out.skipped.append(SkippedFile(name, "is not a regular file (a pipe, socket or device); only files are "
                                                 "read."))
            continue
        if p.suffix.lower() not in wanted:
            kinds = ", ".join(wanted)
            out.skipped.append(SkippedFile(name, f"has an unknown type {p.suffix.lower() or '(no suffix)'!r}; chunkwise reads {kinds}"))
            continue
        if name in out:  # a printable name that another file has verbatim
            out.skipped.append(SkippedFile(name, f"(on disk {rel.as_posix()!r}) has the printable name of another "
                                                 "file; rename it to valid UTF-8."))
            continue
        try:
            _keep(out, name, read_document(p, name, encoding))
            out.kinds[name] = p.suffix.lower()
            if name != rel.as_posix():
                out.renamed[name] = repr(rel.as_posix())
            if p.is_symlink():
                target = p.resolve()
                if not target.is_relative_to(root.resolve()):
                    out.linked[name] = printable_name(str(target))
        except UnreadableDocument as exc:
            out.skipped.append(SkippedFile(name, exc.reason))
        except OSError as exc:  # permissions, a file gone meanwhile, an I/O error
            out.skipped.append(SkippedFile(name, f"cannot be read ({type(exc).__name__}: {exc.strerror or exc}); "
                                                 "check its permissions."))
    if not out:
        detail = "; ".join(f"{s.name} {s.reason}" for s in out.skipped[:10]) or "the folder is empty"
        raise ValueError(f"documents folder {str(path)!r} has no readable document ({len(out.skipped)} file(s) skipped): {detail}")
    return out


# --------------------------------------------------------------------------------------
# questions files
# --------------------------------------------------------------------------------------


def _parse_list(value: Any, what: str, where: str) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                parsed = json.loads(s)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: {what} is not valid JSON ({exc.msg} at character {exc.pos}).") from exc
            if not isinstance(parsed, list):
                raise ValueError(f"{where}: {what} must be a JSON list.")
            return parsed
        return [value]
    if value is None:
        return []
    raise ValueError(f"{where}: {what} must be a list or a string, got {type(value).__name__}.")


def question_tags(value: Any, where: str = "a question") -> list[str]:
    """A question's ``tags`` (the groups it belongs to) as a list of distinct strings.

    Accepts a list of strings, a JSON list in a string (``'["billing", "refunds"]'``), a
    comma-separated string (``"billing, refunds"``, as a CSV cell) or nothing (``None``,
    ``""``, NaN: no tags). Order is kept, duplicates dropped, surrounding spaces stripped.

    Raises
    ------
    ValueError
        For a tag that is not a non-empty string, naming ``where``.
    """
    if value is None or (isinstance(value, float) and value != value):
        return []
    if isinstance(value, str) and not value.strip().startswith("["):
        items: list[Any] = [t for t in value.split(",") if t.strip()]
    else:
        items = _parse_list(value, "tags", where)
    out: list[str] = []
    for t in items:
        if not isinstance(t, str) or not t.strip():
            raise ValueError(f"{where}: tags must be non-empty strings (a list, or names separated by commas), "
                             f"got {t!r}.")
        if t.strip() not in out:
            out.append(t.strip())
    return out


def _record(raw: Mapping[str, Any], row: int, source: str) -> dict[str, Any]:
    """One question record from a CSV row / JSON object / YAML mapping."""
    where = f"{source} row {row}"
    keys = {str(k).strip().lower(): v for k, v in raw.items() if k is not None}
    if "question" not in keys:
        raise ValueError(f"{where} has no 'question' field; each question needs question and excerpt(s) or references.")
    qid = keys.get("question_id", keys.get("id"))
    qid = f"q{row}" if qid is None or str(qid).strip() == "" else str(qid).strip()
    doc = keys.get("document", keys.get("corpus_id", keys.get("corpus")))
    doc = None if doc is None or str(doc).strip() == "" else str(doc).strip()
    refs: list[dict[str, Any]] = []
    if "references" in keys and keys["references"] not in (None, ""):
        for i, item in enumerate(_parse_list(keys["references"], "references", where)):
            if isinstance(item, str):
                refs.append({"content": item, "start_index": None, "end_index": None})
            elif isinstance(item, Mapping):
                refs.append(
                    {
                        "content": item.get("content"),
                        "start_index": item.get("start_index"),
                        "end_index": item.get("end_index"),
                    }
                )
            else:
                raise ValueError(f"{where}: references[{i}] must be an object with content, start_index, end_index.")
    for key in ("excerpt", "excerpts"):
        if key in keys and keys[key] not in (None, ""):
            for item in _parse_list(keys[key], key, where):
                slot = len(refs) and max(r.get("slot", i) for i, r in enumerate(refs)) + 1
                if isinstance(item, list):  # any one of these alternatives answers this part
                    if not item or not all(isinstance(a, str) for a in item):
                        raise ValueError(f"{where}: an any-of item of {key} must be a non-empty list of excerpts (strings).")
                    refs.extend({"content": a, "start_index": None, "end_index": None, "slot": slot} for a in item)
                else:
                    refs.append({"content": item, "start_index": None, "end_index": None, "slot": slot})
    if not refs:
        raise ValueError(f"{where} (question {qid!r}) has no excerpt, excerpts or references.")
    for i, r in enumerate(refs):
        r.setdefault("slot", i)  # a reference with offsets is its own slot
    answer = keys.get("reference_answer")
    if answer is not None and not isinstance(answer, str):
        raise ValueError(f"{where}: reference_answer must be a string (the answer the excerpts support).")
    return {
        "question_id": qid,
        "row": row,
        "question": "" if keys["question"] is None else str(keys["question"]),
        "document": doc,
        "references": refs,
        "reference_answer": answer.strip() if isinstance(answer, str) and answer.strip() else None,
        "tags": question_tags(keys.get("tags"), where),
    }


def read_records(path: PathLike, *, encoding: str = "utf-8") -> tuple[list[Any], Path]:
    """The raw records of a questions file: CSV rows, JSON Lines / a JSON list, or a YAML list
    (or a mapping with a ``questions`` list), with the file's path.

    Raises
    ------
    ValueError
        For a missing or undecodable file, an unknown suffix, or malformed CSV / JSON / YAML.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise ValueError(f"questions file {str(path)!r} does not exist.")
    data = p.read_bytes()
    encoding = file_encoding(data, encoding)  # a UTF-16/32 byte-order mark decides, per file
    try:
        text = _universal(data.decode(encoding))
    except UnicodeDecodeError as exc:
        raise ValueError(f"questions file {p.name} is not valid {encoding}; pass its encoding with "
                         "--encoding.") from exc
    suffix = p.suffix.lower()
    records: list[Mapping[str, Any]]
    if suffix == ".csv":
        csv.field_size_limit(2**31 - 1)
        try:
            reader = csv.DictReader(io.StringIO(text, newline=""))
            records = list(reader)
        except csv.Error as exc:
            raise ValueError(f"questions file {p.name} is not valid CSV: {exc}.") from exc
        if reader.fieldnames is None:
            raise ValueError(f"questions file {p.name} is empty.")
    elif suffix in (".jsonl", ".json"):
        stripped = text.strip()
        if stripped.startswith("["):
            try:
                records = json.loads(stripped)
            except json.JSONDecodeError as exc:
                raise ValueError(f"questions file {p.name} is not valid JSON: {exc.msg} (line {exc.lineno}).") from exc
        else:
            records = []
            for i, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"questions file {p.name} line {i} is not valid JSON: {exc.msg}.") from exc
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise ValueError(
                f"questions file {p.name} is YAML but PyYAML is not installed; write it as CSV or JSONL "
                "(same fields) or pip install pyyaml."
            ) from exc
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"questions file {p.name} is not valid YAML: {exc}.") from exc
        if isinstance(loaded, Mapping) and "questions" in loaded:
            loaded = loaded["questions"]
        if not isinstance(loaded, list):
            raise ValueError(f"questions file {p.name} must hold a list of questions (or a 'questions:' list).")
        records = loaded
    else:
        raise ValueError(f"questions file {p.name} has an unknown suffix {suffix!r}; use .csv, .jsonl or .yaml.")
    return records, p


def read_questions(path: PathLike, *, encoding: str = "utf-8") -> list[dict[str, Any]]:
    """Parse a questions file (CSV, JSONL or YAML; see the module docstring) without checking it.

    Parameters
    ----------
    path : str or os.PathLike
        ``.csv``, ``.jsonl`` / ``.json`` (one object per line, or a JSON list), ``.yaml`` /
        ``.yml`` (a list of mappings, or a mapping with a ``questions`` list).
    encoding : str, default "utf-8"

    Returns
    -------
    list of dict
        ``question_id``, ``row`` (1-based record number), ``question``, ``document`` (None when
        not given), ``references``: list of ``{"content", "start_index", "end_index"}``
        (offsets None for plain excerpts).

    Raises
    ------
    ValueError
        For a missing or empty file, an unknown suffix, malformed CSV / JSON / YAML, a record
        without ``question`` or without any excerpt, duplicate question ids, or YAML without
        PyYAML installed.
    """
    records, p = read_records(path, encoding=encoding)
    if not records:
        raise ValueError(f"questions file {p.name} holds no questions.")
    out = []
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, Mapping):
            raise ValueError(f"{p.name} row {i} must be an object with question and excerpt(s), got {type(rec).__name__}.")
        out.append(_record(rec, i, p.name))
    seen: dict[str, int] = {}
    for rec in out:
        if rec["question_id"] in seen:
            raise ValueError(
                f"{p.name}: question_id {rec['question_id']!r} is used by rows {seen[rec['question_id']]} and "
                f"{rec['row']}; give every question its own id."
            )
        seen[rec["question_id"]] = rec["row"]
    return out


# --------------------------------------------------------------------------------------
# locating excerpts
# --------------------------------------------------------------------------------------


def locate_excerpt(text: str, excerpt: str, limit: int = 50) -> tuple[list[tuple[int, int]], str]:
    """Every place where ``excerpt`` occurs in ``text``.

    Exact occurrences first (``text[s:e] == excerpt``, overlapping ones included); when there
    is none, occurrences that differ only in whitespace (the excerpt's words separated by any
    run of whitespace; leading/trailing whitespace of the excerpt ignored).

    Parameters
    ----------
    text, excerpt : str
    limit : int, default 50
        Stop after this many occurrences.

    Returns
    -------
    spans : list of (start, end)
        Half-open character offsets into ``text``, in order; empty when not found.
    how : {"exact", "whitespace", ""}
        Which rule matched ("" when nothing did).
    """
    spans: list[tuple[int, int]] = []
    if excerpt:
        i = text.find(excerpt)
        while i != -1 and len(spans) < limit:
            spans.append((i, i + len(excerpt)))
            i = text.find(excerpt, i + 1)
    if spans:
        return spans, "exact"
    pat = whitespace_pattern(excerpt)
    if pat is None:
        return [], ""
    pos = 0
    while len(spans) < limit:
        m = pat.search(text, pos)
        if m is None:
            break
        spans.append((m.start(), m.end()))
        pos = m.start() + 1
    return spans, ("whitespace" if spans else "")


_WORD = re.compile(r"\w+")


def closest_passage(text: str, excerpt: str) -> tuple[int, str, float]:
    """The passage of ``text`` most similar to ``excerpt`` (for 'not found' messages).

    Windows of as many words as the excerpt are scored by how many of their words occur in
    the excerpt (case-folded); the best few are compared character by character with
    :class:`difflib.SequenceMatcher` and the most similar is returned.

    Returns
    -------
    (offset, passage, similarity) : tuple
        Character offset of the passage in ``text``, the passage, and difflib's ratio in
        [0, 1]. ``(-1, "", 0.0)`` when the excerpt has no word or the text is empty.
    """
    ex_words = [w.lower() for w in _WORD.findall(excerpt)]
    tokens = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    if not ex_words or not tokens:
        return -1, "", 0.0
    vocab = set(ex_words)
    m = len(ex_words)
    hits = [1 if w in vocab else 0 for w, _, _ in tokens]
    prefix = [0]
    for h in hits:
        prefix.append(prefix[-1] + h)
    n_win = max(1, len(tokens) - m + 1)
    scores = [(prefix[min(i + m, len(tokens))] - prefix[i], -i) for i in range(n_win)]
    scores.sort(reverse=True)
    candidates: list[int] = []
    for _, neg_i in scores:
        i = -neg_i
        if all(abs(i - c) >= max(1, m // 2) for c in candidates):
            candidates.append(i)
        if len(candidates) >= 5:
            break
    best = (-1, "", -1.0)
    for i in candidates:
        start = tokens[i][1]
        end = tokens[min(i + m, len(tokens)) - 1][2]
        passage = text[start:end]
        ratio = difflib.SequenceMatcher(None, excerpt.strip(), passage, autojunk=False).ratio()
        if ratio > best[2]:
            best = (start, passage, ratio)
    return best[0], best[1], max(best[2], 0.0)


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionIssue:
    """One problem found by :func:`validate_questions`.

    Attributes
    ----------
    severity : {"error", "warning"}
        Errors stop ``chunkwise evaluate`` (exit code 1); warnings do not.
    kind : str
        ``missing_document``, ``ambiguous_document``, ``not_found``, ``several_places``,
        ``offset_mismatch``, ``out_of_range``, ``empty_question``, ``empty_excerpt``,
        ``whitespace_match``.
    question_id : str
    row : int
        1-based record number in the questions file.
    document : str or None
    excerpt_index : int or None
        Position of the excerpt in the question's list.
    message : str
        What is wrong and what to do.
    closest_text : str or None
        For ``not_found``: the most similar source passage.
    closest_offset : int or None
        Its character offset in ``document``.
    """

    severity: str
    kind: str
    question_id: str
    row: int
    document: str | None
    excerpt_index: int | None
    message: str
    closest_text: str | None = None
    closest_offset: int | None = None

    def line(self) -> str:
        """One readable line: ``ERROR q3 (row 3) excerpt 1 in a.md: ...``."""
        where = f"{self.question_id} (row {self.row})"
        if self.excerpt_index is not None:
            where += f" excerpt {self.excerpt_index + 1}"
        if self.document is not None and self.kind != "missing_document":
            where += f" in {self.document}"
        return f"{self.severity.upper()} {where}: {self.message}"


@dataclass
class ValidationReport:
    """Outcome of :func:`validate_questions`.

    Attributes
    ----------
    issues : list of QuestionIssue
    questions : DataFrame
        The questions without errors, ready for the evaluation engine: ``question_id``,
        ``question``, ``corpus_id`` (document name), ``references`` (list of
        ``{"content", "start_index", "end_index"}`` with true offsets) and ``readings`` (None,
        or for a question with any-of slots its readings, ``{"corpus_id", "references"}``
        each; the first reading fills ``corpus_id`` and ``references``).
    n_questions : int
        Questions read from the file.
    """

    issues: list[QuestionIssue]
    questions: pd.DataFrame
    n_questions: int
    n_references: int = field(default=0)

    @property
    def errors(self) -> list[QuestionIssue]:
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[QuestionIssue]:
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    def lines(self) -> list[str]:
        """Every issue as one line, errors first, then a summary line."""
        ordered = self.errors + self.warnings
        out = [i.line() for i in ordered]
        n_bad = len({i.question_id for i in self.errors})
        out.append(
            f"{self.n_questions} questions, {self.n_references} excerpts: {len(self.errors)} error(s) in "
            f"{n_bad} question(s), {len(self.warnings)} warning(s); {len(self.questions)} question(s) usable."
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_questions": self.n_questions,
            "n_references": self.n_references,
            "n_usable": len(self.questions),
            "issues": [i.__dict__ for i in self.issues],
        }


def _short(s: str, n: int = 80) -> str:
    s = " ".join(s.split())
    return repr(s if len(s) <= n else s[: n - 1] + "…")


def _resolve_document(name: str, docs: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """The document a question names: exact name, else a unique file-name or stem match."""
    if name in docs:
        return name, []
    base = re.split(r"[\\/]", name)[-1]
    by_base = [d for d in docs if d.rsplit("/", 1)[-1] == base]
    if len(by_base) == 1:
        return by_base[0], []
    stem = re.sub(r"\.(md|txt)$", "", base, flags=re.IGNORECASE)
    by_stem = [d for d in docs if re.sub(r"\.(md|txt)$", "", d.rsplit("/", 1)[-1], flags=re.IGNORECASE) == stem]
    if len(by_stem) == 1:
        return by_stem[0], []
    return None, by_base or by_stem


#: Most readings (one alternative per any-of slot, all in one document) a question may have.
MAX_READINGS = 256


def _validate_any_of(
    qid: str, question: str, refs: list[dict[str, Any]], docs: Mapping[str, str], search_docs: list[str], add: Any
) -> dict[str, Any] | None:
    """A question with any-of slots: locate every alternative, list its readings.

    A reading takes one alternative per slot, all in one document; the question is scored
    against its best-retrieved reading (:mod:`chunkwise.evaluation.anyof`).
    """
    import itertools

    slots: dict[int, list[str]] = {}
    for idx, r in enumerate(refs):
        if r.get("start_index") not in (None, "") or r.get("end_index") not in (None, ""):
            add("error", "out_of_range", None, idx, "any-of alternatives are plain excerpts; drop the offsets.")
            return None
        content = "" if r.get("content") is None else str(r.get("content"))
        if not content.strip():
            add("error", "empty_excerpt", None, idx, "an any-of alternative is empty; paste the source text verbatim.")
            return None
        slots.setdefault(int(r["slot"]), []).append(content)
    where: dict[str, dict[str, tuple[int, int]]] = {}  # alternative -> document -> first span
    idx = 0
    for alternatives in slots.values():
        for alt in alternatives:
            found = {}
            for d in search_docs:
                spans, how = locate_excerpt(docs[d], alt, limit=1)
                if spans:
                    found[d] = spans[0]
            if not found:
                elsewhere = [d for d in docs if d not in search_docs and locate_excerpt(docs[d], alt, limit=1)[0]]
                if elsewhere:  # the question names one document; the alternative is in another
                    add("error", "not_found", search_docs[0], idx,
                        f"any-of alternative {_short(alt)} is not in {search_docs[0]}, the document the question "
                        f"names, but it is in {', '.join(elsewhere[:3])}: fix the question's document, or the "
                        "alternative.")
                    return None
                best = max(((d, *closest_passage(docs[d], alt)) for d in search_docs), key=lambda c: c[3],
                           default=(None, -1, "", 0.0))
                d_best, off, passage, ratio = best
                hint = (f"; closest source text in {d_best} at offset {off} ({100 * ratio:.0f}% similar): "
                        f"{_short(passage)}") if passage else ""
                where_said = f"in {search_docs[0]}" if len(search_docs) == 1 and len(docs) > 1 else "in any document"
                add("error", "not_found", None, idx,
                    f"any-of alternative {_short(alt)} was not found {where_said}{hint}.")
                return None
            where[alt] = found
            idx += 1
    readings = []
    for d in search_docs:
        per_slot = [[a for a in alts if d in where[a]] for alts in slots.values()]
        if not all(per_slot):
            continue
        for combo in itertools.product(*per_slot):
            spans = [where[a][d] for a in combo]
            readings.append({"corpus_id": d, "references": [
                {"content": docs[d][s:e], "start_index": s, "end_index": e} for s, e in spans]})
            if len(readings) > MAX_READINGS:
                add("error", "too_many_readings", None, None,
                    f"the any-of slots give more than {MAX_READINGS} readings; give fewer alternatives or name the document.")
                return None
    if not readings:
        add("error", "not_found", None, None,
            "no document holds an alternative of every part of the answer; each reading must lie in one document.")
        return None
    first = readings[0]
    return {"question_id": qid, "question": question, "corpus_id": first["corpus_id"],
            "references": first["references"], "readings": readings}


def validate_questions(
    docs: Mapping[str, str],
    questions: Sequence[Mapping[str, Any]] | pd.DataFrame,
) -> ValidationReport:
    """Check every question against the documents and locate its excerpts.

    Parameters
    ----------
    docs : mapping document name -> text
        From :func:`load_documents`.
    questions : list of dict or DataFrame
        From :func:`read_questions` (a DataFrame with the same columns also works; a
        ``corpus_id`` column is read as ``document``).

    Returns
    -------
    ValidationReport
        Every issue (errors and warnings) and the usable questions with true offsets. Rules:

        - the named document must exist (exact name, or a unique file name / stem match);
        - a plain excerpt is located exactly, else ignoring whitespace (a warning says so);
          found in several places -> warning, the first is used; not found -> error with the
          closest passage and its offset;
        - a reference with offsets must satisfy ``0 <= start <= end <= len(doc)`` and
          ``doc[start:end] == content``; otherwise an error that says where the content
          really is (or the closest passage);
        - without a document, the excerpts are searched in every document; the question's
          document is the first one holding all of them.

    Raises
    ------
    ValueError
        If ``docs`` is empty.
    """
    if not docs:
        raise ValueError("no documents to validate the questions against; load a folder with load_documents first.")
    if isinstance(questions, pd.DataFrame):
        recs = []
        for i, r in enumerate(questions.to_dict("records"), start=1):
            r = dict(r)
            if "document" not in r and "corpus_id" in r:
                r["document"] = r["corpus_id"]
            r.setdefault("row", i)
            r.setdefault("question_id", f"q{i}")
            refs = r.get("references")
            if isinstance(refs, str):
                refs = json.loads(refs)
            r["references"] = [
                x if isinstance(x, Mapping) else {"content": None, "start_index": x[0], "end_index": x[1]}
                for x in (refs or [])
            ]
            recs.append(r)
        questions = recs
    issues: list[QuestionIssue] = []
    usable: list[dict[str, Any]] = []
    n_refs = 0
    for q in questions:
        qid, row = str(q["question_id"]), int(q.get("row", 0))
        refs = list(q.get("references") or [])
        n_refs += len(refs)
        bad = False

        def add(severity: str, kind: str, doc: str | None, idx: int | None, msg: str, **kw: Any) -> None:
            nonlocal bad
            issues.append(QuestionIssue(severity, kind, qid, row, doc, idx, msg, **kw))
            bad = bad or severity == "error"

        if not str(q.get("question") or "").strip():
            add("error", "empty_question", q.get("document"), None, "the question text is empty; write the question.")
        try:
            tags = question_tags(q.get("tags"), f"question {qid!r}")
        except ValueError as exc:
            add("error", "bad_tags", q.get("document"), None, str(exc))
            tags = []
        named = q.get("document")
        if named is not None and str(named).strip():
            doc, candidates = _resolve_document(str(named), docs)
            if doc is None:
                if candidates:
                    msg = f"document {str(named)!r} matches several files ({', '.join(candidates[:5])}); use the path relative to the folder."
                else:
                    close = difflib.get_close_matches(str(named), list(docs), n=3, cutoff=0.5)
                    hint = f" Closest: {', '.join(close)}." if close else f" Documents: {', '.join(list(docs)[:5])}{' …' if len(docs) > 5 else ''}."
                    msg = f"document {str(named)!r} is not in the documents folder.{hint}"
                add("error", "missing_document", str(named), None, msg)
                continue
            search_docs = [doc]
        else:
            search_docs = list(docs)
        if not refs:
            add("error", "empty_excerpt", None, None, "the question has no excerpt; add the source text that answers it.")
            continue

        if any(r.get("slot") is not None for r in refs) and len({r.get("slot") for r in refs}) < len(refs):
            row = _validate_any_of(qid, str(q.get("question")), refs, docs, search_docs, add)
            if row is not None and not bad:
                usable.append({**row, "reference_answer": _answer_of(q), "tags": tags})
            continue

        # Candidate documents for a question without a document: those holding every excerpt.
        if len(search_docs) > 1:
            holding = [
                d
                for d in search_docs
                if all(locate_excerpt(docs[d], str(r.get("content") or ""), limit=1)[0] for r in refs)
            ]
            if holding:
                if len(holding) > 1:
                    add(
                        "warning",
                        "ambiguous_document",
                        holding[0],
                        None,
                        f"the excerpts occur in {len(holding)} documents ({', '.join(holding[:5])}); using "
                        f"{holding[0]}. Add a document column to choose.",
                    )
                search_docs = holding[:1]
        located: list[dict[str, Any]] = []
        for idx, ref in enumerate(refs):
            content = ref.get("content")
            content = None if content is None else str(content)
            s_raw, e_raw = ref.get("start_index"), ref.get("end_index")
            has_offsets = s_raw not in (None, "") and e_raw not in (None, "")
            doc_for_msg = search_docs[0] if len(search_docs) == 1 else None
            if has_offsets:
                try:
                    s, e = int(s_raw), int(e_raw)
                    if s != float(s_raw) or e != float(e_raw):
                        raise ValueError
                except (TypeError, ValueError):
                    add("error", "out_of_range", doc_for_msg, idx, f"offsets ({s_raw!r}, {e_raw!r}) must be integers (character offsets).")
                    continue
                d = search_docs[0]
                text = docs[d]
                if not 0 <= s <= e <= len(text):
                    add(
                        "error",
                        "out_of_range",
                        d,
                        idx,
                        f"offsets ({s}, {e}) are outside the document (0 to {len(text)} characters); "
                        "offsets are half-open character positions, not bytes or tokens.",
                    )
                    continue
                if content is None or content == "" or text[s:e] == content:
                    located.append({"content": text[s:e], "start_index": s, "end_index": e})
                    continue
                spans, how = locate_excerpt(text, content)
                if spans:
                    where = ", ".join(f"({a}, {b})" for a, b in spans[:5])
                    add(
                        "error",
                        "offset_mismatch",
                        d,
                        idx,
                        f"offsets ({s}, {e}) give {_short(text[s:e])} but the excerpt {_short(content)} is at "
                        f"{where}{' (ignoring whitespace)' if how == 'whitespace' else ''}; fix the offsets or drop "
                        "them to let chunkwise locate the excerpt.",
                        closest_text=text[spans[0][0] : spans[0][1]],
                        closest_offset=spans[0][0],
                    )
                else:
                    off, passage, ratio = closest_passage(text, content)
                    add(
                        "error",
                        "offset_mismatch",
                        d,
                        idx,
                        f"offsets ({s}, {e}) give {_short(text[s:e])}, not {_short(content)}, and the excerpt is "
                        f"nowhere in the document; closest source text at offset {off} ({100 * ratio:.0f}% similar): "
                        f"{_short(passage)}.",
                        closest_text=passage or None,
                        closest_offset=off if off >= 0 else None,
                    )
                continue
            # plain excerpt
            if content is None or not content.strip():
                add("error", "empty_excerpt", doc_for_msg, idx, "the excerpt is empty; paste the source text verbatim.")
                continue
            found = None
            for d in search_docs:
                spans, how = locate_excerpt(docs[d], content)
                if spans:
                    found = (d, spans, how)
                    break
            if found is None:
                best = (-1, "", 0.0, None)
                for d in search_docs:
                    off, passage, ratio = closest_passage(docs[d], content)
                    if ratio > best[2]:
                        best = (off, passage, ratio, d)
                off, passage, ratio, d = best
                if d is None:
                    msg = f"excerpt {_short(content)} was not found (nothing similar either); paste it verbatim from the document."
                else:
                    msg = (
                        f"excerpt {_short(content)} was not found; closest source text at offset {off} "
                        f"({100 * ratio:.0f}% similar): {_short(passage)}. Paste the excerpt verbatim."
                    )
                if named is not None and len(docs) > 1:
                    for other in docs:
                        if other in search_docs:
                            continue
                        spans_o, _ = locate_excerpt(docs[other], content, limit=1)
                        if spans_o:
                            msg += f" It occurs in {other} at {spans_o[0]}; check the question's document."
                            break
                add("error", "not_found", d if d is not None else doc_for_msg, idx, msg,
                    closest_text=passage or None, closest_offset=off if off >= 0 else None)
                continue
            d, spans, how = found
            if len(search_docs) > 1:
                search_docs = [d]
            s, e = spans[0]
            if how == "whitespace":
                add("warning", "whitespace_match", d, idx,
                    f"excerpt {_short(content)} matched only when ignoring whitespace, at ({s}, {e}); the "
                    "document's text there is used.")
            if len(spans) > 1:
                where = ", ".join(f"({a}, {b})" for a, b in spans[:5]) + (" …" if len(spans) > 5 else "")
                add("warning", "several_places", d, idx,
                    f"excerpt {_short(content)} occurs {len(spans)}{'+' if len(spans) >= 50 else ''} times, at "
                    f"{where}; the first is used. Lengthen the excerpt to make it unique.")
            located.append({"content": docs[d][s:e], "start_index": s, "end_index": e})
        if bad:
            continue
        usable.append(
            {
                "question_id": qid,
                "question": str(q.get("question")),
                "corpus_id": search_docs[0],
                "references": located,
                "readings": None,
                "reference_answer": _answer_of(q),
                "tags": tags,
            }
        )
    columns = ["question_id", "question", "corpus_id", "references", "readings"]
    if any(u.get("reference_answer") is not None for u in usable):  # the answer stage's reference
        columns.append("reference_answer")
    if any(u.get("tags") for u in usable):  # question groups: per-group tables (GridResult.group_table)
        columns.append("tags")
    frame = pd.DataFrame(usable, columns=columns)
    return ValidationReport(issues, frame, len(questions), n_refs)


def _answer_of(q: Mapping[str, Any]) -> str | None:
    """A question's ``reference_answer`` (for ``chunkwise evaluate --answers``), or None."""
    value = q.get("reference_answer")
    return value.strip() if isinstance(value, str) and value.strip() else None


def load_questions(
    path: PathLike,
    docs: Mapping[str, str],
    *,
    encoding: str = "utf-8",
) -> pd.DataFrame:
    """Read, locate and validate a questions file; raise if any question has an error.

    Returns
    -------
    DataFrame
        As :attr:`ValidationReport.questions`.

    Raises
    ------
    ValueError
        As :func:`read_questions`, or with the first few error lines of
        :func:`validate_questions` (run ``chunkwise questions validate`` for all of them).
    """
    report = validate_questions(docs, read_questions(path, encoding=encoding))
    if not report.ok:
        first = "; ".join(i.line() for i in report.errors[:3])
        more = f" (and {len(report.errors) - 3} more)" if len(report.errors) > 3 else ""
        raise ValueError(f"{len(report.errors)} problem(s) in {Path(path).name}: {first}{more}.")
    if report.questions.empty:
        raise ValueError(f"{Path(path).name} has no usable question.")
    return report.questions
