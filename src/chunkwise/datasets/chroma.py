"""The Chroma chunking-evaluation benchmark: five corpora and 472 questions with gold excerpts.

Smith and Troynikov (2024) evaluate chunking strategies by *token-level* retrieval quality:
each question comes with one or more reference excerpts, given as character spans in one of
five English corpora, and a chunking is scored by how much of the retrieved text overlaps
those excerpts (recall, precision, IoU). This module loads that data, pinned to the upstream
repository ``brandonstarxel/chunking_evaluation`` at commit ``d451fc4`` (MIT licence), through
:func:`chunkwise.datasets.fetch.data_path` (local mirror or hash-checked download).

======================  ==================================================  =========  ==========
short name              content                                             questions  references
======================  ==================================================  =========  ==========
``state_of_the_union``  the 2024 US State of the Union address                     76          95
``wikitexts``           WikiText articles (tokenised Wikipedia, ``<unk>``)        144         249
``chatlogs``            chat-assistant conversations (Python-repr lists)           56         108
``finance``             lower-cased excerpts of company financial reports          97         143
``pubmed``              PubMed Central open-access articles                        99         195
======================  ==================================================  =========  ==========

Total: 472 questions, 790 reference spans.

Offsets
-------
Reference offsets are Python ``str`` indices (Unicode code points, i.e. *characters*, not
bytes or tokens), half-open: ``corpus[start:end] == content``. Upstream reads each corpus with
``open(path, 'r')`` (text mode, universal newlines) and its questions with ``pandas.read_csv``
plus ``json.loads``. We read the corpora as UTF-8 in the same text mode. None of the pinned
corpora contains a ``'\\r'``, so text mode and a plain byte decode give the same string and the
offsets hold for both; :func:`load_chroma_questions` checks every span anyway.

References
----------
.. [1] B. Smith and A. Troynikov, "Evaluating Chunking Strategies for Retrieval", Chroma
   technical report, July 2024. https://research.trychroma.com/evaluating-chunking
.. [2] https://github.com/brandonstarxel/chunking_evaluation (data under
   ``chunking_evaluation/evaluation_framework/general_evaluation_data``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping

import pandas as pd

from chunkwise.datasets.fetch import data_path

__all__ = [
    "CHROMA_CORPORA",
    "CHROMA_QUESTIONS_PATH",
    "chroma_corpus_name",
    "chroma_corpus_path",
    "check_chroma_references",
    "load_chroma_corpora",
    "load_chroma_questions",
]

#: Short names of the five corpora, in the order of the technical report.
CHROMA_CORPORA: tuple[str, ...] = (
    "state_of_the_union",
    "wikitexts",
    "chatlogs",
    "finance",
    "pubmed",
)

#: Manifest path of the questions file.
CHROMA_QUESTIONS_PATH = "chroma/questions_df.csv"

_COLUMNS = ["question_id", "question", "corpus", "references", "reference_texts"]

PathLike = str | os.PathLike[str]


def chroma_corpus_path(name: str) -> str:
    """Return the manifest path of a corpus, e.g. ``"chroma/corpora/finance.md"``.

    Parameters
    ----------
    name : str
        A short corpus name from :data:`CHROMA_CORPORA`.

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`CHROMA_CORPORA`.
    """
    if name not in CHROMA_CORPORA:
        raise ValueError(f"unknown Chroma corpus {name!r}; expected one of {CHROMA_CORPORA}")
    return f"chroma/corpora/{name}.md"


def chroma_corpus_name(corpus_id: object) -> str:
    """Map upstream's ``corpus_id`` to a short corpus name.

    Upstream's ``corpus_id`` is whatever string identified the corpus when the questions were
    written: a bare name (``"finance"``), a file name (``"finance.md"``) or a POSIX or Windows
    path to the file (``"…/general_evaluation_data/corpora/finance.md"``). The last path
    component is taken, a ``.md``/``.txt`` suffix dropped, case folded and ``-``/space read as
    ``_``.

    Parameters
    ----------
    corpus_id : object
        Upstream's identifier, usually a ``str``.

    Returns
    -------
    str
        One of :data:`CHROMA_CORPORA`.

    Raises
    ------
    ValueError
        If the identifier does not name one of the five corpora.
    """
    text = str(corpus_id).strip()
    stem = re.split(r"[\\/]", text)[-1]
    stem = re.sub(r"\.(md|txt)$", "", stem, flags=re.IGNORECASE)
    key = re.sub(r"[\s\-]+", "_", stem).lower()
    if key not in CHROMA_CORPORA:
        raise ValueError(
            f"corpus_id {corpus_id!r} does not name a Chroma corpus; "
            f"expected one of {CHROMA_CORPORA}"
        )
    return key


def _select(corpora: str | Iterable[str] | None) -> tuple[str, ...]:
    if corpora is None:
        return CHROMA_CORPORA
    if isinstance(corpora, str):
        names: tuple[str, ...] = (corpora,)
    else:
        try:
            names = tuple(corpora)
        except TypeError:
            raise TypeError(
                f"corpora must be a corpus name or a list of names from {CHROMA_CORPORA}, "
                f"got {type(corpora).__name__} {corpora!r:.80}."
            ) from None
    unknown = [n for n in names if n not in CHROMA_CORPORA]
    if unknown:
        raise ValueError(f"unknown Chroma corpora {unknown}; expected names from {CHROMA_CORPORA}")
    # Keep the canonical order, drop repeats.
    return tuple(n for n in CHROMA_CORPORA if n in names)


def load_chroma_corpora(
    corpora: str | Iterable[str] | None = None,
    mirror: PathLike | None = None,
    *,
    cache_dir: PathLike | None = None,
) -> dict[str, str]:
    """Load Chroma benchmark corpora as text.

    Parameters
    ----------
    corpora : str or iterable of str, optional
        Short names from :data:`CHROMA_CORPORA` (a single name is accepted). Default: all five.
    mirror : str or os.PathLike, optional
        Local data mirror; default ``$CHUNKWISE_DATA_MIRROR``
        (see :func:`chunkwise.datasets.fetch.data_path`).
    cache_dir : str or os.PathLike, optional
        Download cache; default ``$CHUNKWISE_CACHE_DIR/data`` or ``~/.cache/chunkwise/data``.

    Returns
    -------
    dict[str, str]
        Short name -> full corpus text, in :data:`CHROMA_CORPORA` order. Texts are decoded as
        UTF-8 in text mode with universal newlines, as upstream's ``open(path, 'r')`` does;
        reference offsets index these strings in characters.

    Raises
    ------
    TypeError
        If ``corpora`` is neither a name nor an iterable of names (e.g. an int).
    ValueError
        On an unknown corpus name, or a mirror file whose sha256 is wrong.
    RuntimeError
        If a file is neither in the mirror nor downloadable (e.g. offline without a mirror).
    """
    out: dict[str, str] = {}
    for name in _select(corpora):
        path = data_path(chroma_corpus_path(name), mirror=mirror, cache_dir=cache_dir)
        with open(path, encoding="utf-8") as f:  # text mode, universal newlines, like upstream
            out[name] = f.read()
    return out


def check_chroma_references(questions: pd.DataFrame, corpora: Mapping[str, str]) -> None:
    """Check that every reference span reproduces its excerpt.

    Parameters
    ----------
    questions : pandas.DataFrame
        As returned by :func:`load_chroma_questions`: columns ``question_id``, ``corpus``,
        ``references`` (list of ``(start, end)``) and ``reference_texts`` (list of str).
    corpora : Mapping[str, str]
        Short name -> corpus text, for every corpus named in ``questions``.

    Raises
    ------
    ValueError
        On the first question whose corpus is missing, whose ``references`` and
        ``reference_texts`` differ in length, or where ``corpus[start:end] != text`` or the span
        lies outside ``0 <= start <= end <= len(corpus)``. The message gives the question index
        (``question_id``), the corpus and the span.
    """
    for qid, name, spans, texts in zip(
        questions["question_id"],
        questions["corpus"],
        questions["references"],
        questions["reference_texts"],
        strict=True,
    ):
        if name not in corpora:
            raise ValueError(f"question {qid}: corpus {name!r} was not loaded")
        corpus = corpora[name]
        if len(spans) != len(texts):
            raise ValueError(
                f"question {qid} (corpus {name!r}): {len(spans)} spans but {len(texts)} texts"
            )
        for j, ((start, end), text) in enumerate(zip(spans, texts, strict=True)):
            if not 0 <= start <= end <= len(corpus):
                raise ValueError(
                    f"question {qid} (corpus {name!r}), reference {j}: span [{start}, {end}) is "
                    f"outside the corpus of {len(corpus)} characters"
                )
            found = corpus[start:end]
            if found != text:
                raise ValueError(
                    f"question {qid} (corpus {name!r}), reference {j}: corpus[{start}:{end}] "
                    f"does not match the reference text: expected {text[:80]!r}, "
                    f"found {found[:80]!r}"
                )


def load_chroma_questions(
    corpora: str | Iterable[str] | None = None,
    mirror: PathLike | None = None,
    *,
    cache_dir: PathLike | None = None,
) -> pd.DataFrame:
    """Load the benchmark's questions and their gold reference spans, checked against the corpora.

    Parameters
    ----------
    corpora : str or iterable of str, optional
        Keep only questions on these corpora (short names). Default: all five.
    mirror : str or os.PathLike, optional
        Local data mirror; default ``$CHUNKWISE_DATA_MIRROR``.
    cache_dir : str or os.PathLike, optional
        Download cache; default ``$CHUNKWISE_CACHE_DIR/data`` or ``~/.cache/chunkwise/data``.

    Returns
    -------
    pandas.DataFrame
        One row per question, shape ``(n_questions, 5)`` (472 rows for all corpora), upstream's
        row order, a fresh ``RangeIndex``. Columns:

        - ``question_id`` (int64): the row's position in upstream ``questions_df.csv``
          (0-471), stable under corpus filtering;
        - ``question`` (str);
        - ``corpus`` (str): short name from :data:`CHROMA_CORPORA`;
        - ``references`` (list of ``(start, end)`` int tuples): half-open character offsets
          into the corpus text of :func:`load_chroma_corpora`, one to five per question;
        - ``reference_texts`` (list of str): the excerpts, ``corpus[start:end]``.

    Raises
    ------
    ValueError
        On an unknown corpus name or ``corpus_id``, malformed references, a mirror file with
        the wrong sha256, or a span whose text differs from its excerpt (message: question
        index and corpus; see :func:`check_chroma_references`).
    RuntimeError
        If a file is neither in the mirror nor downloadable.
    """
    names = _select(corpora)
    path = data_path(CHROMA_QUESTIONS_PATH, mirror=mirror, cache_dir=cache_dir)
    # keep_default_na=False: a question reading "NA" or "None" stays a string.
    raw = pd.read_csv(path, encoding="utf-8", dtype=str, keep_default_na=False)
    missing = {"question", "references", "corpus_id"} - set(raw.columns)
    if missing:
        raise ValueError(f"{CHROMA_QUESTIONS_PATH}: missing columns {sorted(missing)}")

    rows = []
    for qid, (question, refs_json, corpus_id) in enumerate(
        zip(raw["question"], raw["references"], raw["corpus_id"], strict=True)
    ):
        name = chroma_corpus_name(corpus_id)
        if name not in names:
            continue
        try:
            refs = json.loads(refs_json)
            spans = [(int(r["start_index"]), int(r["end_index"])) for r in refs]
            texts = [str(r["content"]) for r in refs]
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(
                f"question {qid} (corpus {name!r}): malformed references: {exc}"
            ) from exc
        if not spans:
            raise ValueError(f"question {qid} (corpus {name!r}): no references")
        rows.append((qid, question, name, spans, texts))

    df = pd.DataFrame(rows, columns=_COLUMNS)
    df["question_id"] = df["question_id"].astype("int64")
    used = [n for n in names if n in set(df["corpus"])]
    check_chroma_references(df, load_chroma_corpora(used, mirror=mirror, cache_dir=cache_dir))
    return df
