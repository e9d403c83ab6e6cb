"""An evaluation set written by an LLM, and how far its rankings agree with another set's.

Generation (:func:`generate_questions`, ``chunkwise questions generate``)
-------------------------------------------------------------------------
The method of Chroma's *synthetic evaluation* (Smith & Troynikov, 2024, section 4; their
``SyntheticEvaluation`` class), written with chunkwise's :class:`~chunkwise.llm.LLMClient`:

1. **sample a passage** -- candidate ``i`` picks a document (round robin over the documents,
   or with probability proportional to their length) and a window of ``window_chars``
   characters at a uniformly random start, both drawn from ``numpy.random.default_rng([seed,
   i])``; the window is trimmed to whole words. Chroma samples 4,000-character windows; the
   default here is 1,000 so that a small local model on a CPU reads the passage quickly;
2. **ask for a question and where its answer is** -- one chat request (temperature 0.3, a
   sampling seed per candidate), answered as JSON and validated against a schema by
   :meth:`LLMClient.chat_json <chunkwise.llm.LLMClient.chat_json>` (which re-asks with the
   error up to ``max_repairs`` times; with ``content_repairs`` it also re-asks, that many more
   times, when the question talks about "the passage" or its references cannot be used,
   stating the problem). With ``excerpt_mode="sentence_numbers"`` (the default) the passage is
   shown one numbered sentence per line and the reply is ``{"question": str, "sentences":
   [int, ...]}`` (:data:`NUMBERED_RESPONSE_SCHEMA`); with ``"copy"`` (Chroma's method) the
   passage is shown as it is and the reply is ``{"question": str, "excerpts": [str, ...]}``
   (:data:`RESPONSE_SCHEMA`), the sentences copied verbatim. Up to ``n_previous`` questions
   already accepted for the same document can be shown so the model asks something new (none
   by default: the local model copied them);
3. **keep only references that are in the document** -- numbered sentences are the document's
   own text (runs of consecutive numbers joined into one reference; a number outside the
   passage drops the candidate). Copied excerpts are located in the window
   with :func:`chunkwise.datasets.local.locate_excerpt` (exact match first, then ignoring
   differences in whitespace) and recorded with their true character offsets in the document
   (the document's text at those offsets is the recorded ``content``). Quote marks and
   ellipses the model puts around an excerpt are stripped first. A candidate with an excerpt
   that is not in the passage is dropped (Chroma drops it too). In both modes references
   shorter than ``min_excerpt_chars`` are left out (the candidate drops when none is left),
   and a question that talks about "the passage" is dropped;
4. **drop near-duplicate questions** -- exact repeats (case and whitespace folded), then, in
   candidate order, every question whose cosine similarity to an already kept question of the
   same document exceeds ``dedup_threshold`` under the given embedder. Chroma used 0.78 with
   OpenAI's text-embedding-3-large; the default here, 0.85 with all-MiniLM-L6-v2, is a
   different scale (MiniLM's cosines run higher for related sentences).

Every candidate's fate is recorded (:attr:`GenerationResult.candidates`) and counted by
reason (:attr:`GenerationResult.dropped`): ``request_failed``, ``malformed_json``,
``excerpt_not_found``, ``excerpt_too_short``, ``refers_to_passage``, ``duplicate``.

The output (:meth:`GenerationResult.write`) is a JSONL questions file that ``chunkwise
evaluate`` and ``chunkwise questions validate`` read (``question_id``, ``question``,
``corpus_id``, ``references`` = ``[{content, start_index, end_index}]``), each record marked
``"reviewed": false`` and carrying the model identity, the prompt version and the prompt's
sha256; a ``<name>.generation.json`` file beside it holds the run's settings and counts.

Cached and resumable: every request goes through the client's SQLite response cache, and a
candidate's request depends only on the seed, its index and the questions accepted before it
(themselves replayed from the cache), so an interrupted run, rerun with the same settings,
replays every answered request and asks only for the rest; a larger ``n`` extends a smaller
run's candidates without changing them.

Agreement between two question sets (:func:`rank_agreement`)
------------------------------------------------------------
Whether a cheap question set ranks grid cells the way another set does: Spearman's rho and
Kendall's tau-b between the cells' mean scores under each set, with bootstrap intervals that
resample the questions of each set independently (the two sets are different questions, so
nothing is paired) and contain the estimate
(:func:`chunkwise.evaluation.intervals.rank_correlation_interval`).

References
----------
.. [1] B. Smith and A. Troynikov, "Evaluating Chunking Strategies for Retrieval", Chroma
   technical report, 2024, https://research.trychroma.com/evaluating-chunking (the
   synthetic-evaluation pipeline; our prompt and code are our own).
.. [2] M. G. Kendall, "The treatment of ties in ranking problems", Biometrika 33, 1945
   (tau-b); C. Spearman, "The proof and measurement of association between two things",
   Am. J. Psychol. 15, 1904.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from chunkwise.datasets.local import locate_excerpt
from chunkwise.evaluation.intervals import interval_text, rank_correlation_interval
from chunkwise.evaluation.stats import interval_side

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "DROP_REASONS",
    "EXCERPT_MODES",
    "NUMBERED_PROMPT_SHA256",
    "NUMBERED_PROMPT_VERSION",
    "NUMBERED_RESPONSE_SCHEMA",
    "PROMPT_SHA256",
    "PROMPT_VERSION",
    "RESPONSE_SCHEMA",
    "GenerationResult",
    "RankAgreement",
    "agreement_table",
    "build_messages",
    "build_numbered_messages",
    "cell_subsets",
    "cell_table",
    "chapter_answer",
    "generate_questions",
    "one_line",
    "passage_sentences",
    "rank_agreement",
    "sample_window",
]

#: Why a candidate question can be dropped, in the order the checks run.
DROP_REASONS: tuple[str, ...] = (
    "request_failed",
    "malformed_json",
    "excerpt_not_found",
    "excerpt_too_short",
    "refers_to_passage",
    "duplicate",
)

#: Bump when the prompt or the schema changes (it is also part of every cache key).
PROMPT_VERSION = "qgen-1"

_SYSTEM = (
    "You write test questions for a search system. You get a passage taken from the document "
    "{document!r}. Write ONE question that a reader of the whole document could ask and that "
    "the passage answers, and copy the sentences of the passage that hold the answer.\n"
    "Rules:\n"
    "- The excerpts are copied from the passage character for character: no rewording, no "
    "ellipsis, no added quotes. Give 1 to 3 excerpts, each at least a full sentence.\n"
    "- The question must make sense on its own: name its subject, never say 'the passage', "
    "'the text' or 'the excerpt'.\n"
    "- Ask something different from the earlier questions listed.\n"
    'Answer with JSON only, in this form: {{"question": "...", "excerpts": ["...", "..."]}}'
)
_USER = "Earlier questions about this document:\n{previous}\n\nPassage:\n<<<\n{passage}\n>>>"

#: JSON schema of a reply.
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 8},
        "excerpts": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "maxItems": 5,
        },
    },
    "required": ["question", "excerpts"],
}

#: sha256 of the prompt templates and the schema: recorded with every generated question.
PROMPT_SHA256 = hashlib.sha256(
    json.dumps([PROMPT_VERSION, _SYSTEM, _USER, RESPONSE_SCHEMA], sort_keys=True).encode("utf-8")
).hexdigest()

#: Prompt version of ``excerpt_mode="sentence_numbers"`` (part of every cache key of that mode).
NUMBERED_PROMPT_VERSION = "qgen-2-numbered"

_SYSTEM_NUMBERED = (
    "You write test questions for a search system. You get a passage taken from the document "
    "{document!r}, one sentence per line, each line starting with its number in brackets. Write ONE "
    "question that a reader of the whole document could ask and that the passage answers, and give the "
    "numbers of the sentences that hold the answer.\n"
    "Rules:\n"
    "- Give 1 to 3 sentence numbers, only of sentences needed for the answer.\n"
    "- The question must make sense on its own: name its subject, never say 'the passage', "
    "'the text', 'the sentence' or a sentence number.\n"
    "- Ask something different from the earlier questions listed.\n"
    'Answer with JSON only, in this form: {{"question": "...", "sentences": [2, 3]}}'
)
_USER_NUMBERED = "Earlier questions about this document:\n{previous}\n\nPassage, one numbered sentence per line:\n{passage}"

#: JSON schema of a reply in ``excerpt_mode="sentence_numbers"``.
NUMBERED_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 8},
        "sentences": {
            "type": "array",
            "items": {"type": "integer"},
            "minItems": 1,
            "maxItems": 5,
        },
    },
    "required": ["question", "sentences"],
}

#: sha256 of the numbered mode's prompt templates and schema.
NUMBERED_PROMPT_SHA256 = hashlib.sha256(
    json.dumps([NUMBERED_PROMPT_VERSION, _SYSTEM_NUMBERED, _USER_NUMBERED, NUMBERED_RESPONSE_SCHEMA],
               sort_keys=True).encode("utf-8")
).hexdigest()

#: The ways a candidate's references are obtained (``excerpt_mode``).
EXCERPT_MODES: tuple[str, ...] = ("copy", "sentence_numbers")

_REFERS = re.compile(r"\b(the|this|above|given|following)\s+(passage|text|excerpt|paragraph)s?\b", re.IGNORECASE)
_NAMES_NUMBER = re.compile(r"\b(sentences?|lines?)\s*\[?\d+", re.IGNORECASE)
_STRIP = " \t\r\n\"'`\u201c\u201d\u2018\u2019"
_ELLIPSIS = ("...", "\u2026")


# --------------------------------------------------------------------------------------
# sampling and prompting
# --------------------------------------------------------------------------------------


def sample_window(text: str, window_chars: int, rng: np.random.Generator) -> tuple[int, int]:
    """A random window of ``text``, trimmed to whole words.

    The start is uniform in ``[0, len(text) - window_chars]``; a start inside a word moves
    forward past the next whitespace, an end inside a word moves back to the previous
    whitespace (when that leaves a non-empty window). A text no longer than ``window_chars``
    is taken whole.

    Parameters
    ----------
    text : str
    window_chars : int >= 1
        Window length in characters.
    rng : numpy.random.Generator

    Returns
    -------
    (start, end) : tuple of int
        Half-open character offsets into ``text``.
    """
    n = len(text)
    if n <= window_chars:
        return 0, n
    start = int(rng.integers(0, n - window_chars + 1))
    end = start + window_chars
    if start > 0 and not text[start - 1].isspace():
        m = re.compile(r"\s+").search(text, start, end)
        if m is not None and m.end() < end:
            start = m.end()
    if end < n and not text[end].isspace():
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
        if cut > start:
            end = cut
    return start, end


def build_messages(document: str, passage: str, previous: Sequence[str] = ()) -> list[dict[str, str]]:
    """The chat messages of one candidate (system rules, earlier questions, the passage).

    Parameters
    ----------
    document : str
        The document's name (shown to the model).
    passage : str
        The sampled window.
    previous : sequence of str
        Questions already accepted for this document ("(none)" when empty).
    """
    prev = "\n".join(f"- {q}" for q in previous) if previous else "(none)"
    return [
        {"role": "system", "content": _SYSTEM.format(document=document)},
        {"role": "user", "content": _USER.format(previous=prev, passage=passage)},
    ]


def passage_sentences(text: str, start: int, end: int, max_chars: int = 300) -> list[tuple[int, int]]:
    """The sentences of the passage ``text[start:end]`` as document offsets.

    Sentences come from :func:`chunkwise.text.split_sentences` (robust mode) run on the passage;
    the first and last may be cut by the window's edges. A robust sentence longer than
    ``max_chars`` characters is split again at every ``.``, ``?`` or ``!`` followed by whitespace
    (the ``"langchain"`` mode): text without capitals after its full stops (Chroma's finance
    corpus is lower-case) is otherwise one sentence per passage, and the model cannot point at
    the part that answers.

    Returns
    -------
    list of (int, int)
        Half-open character offsets into ``text``, in order; empty for a blank passage.
    """
    from chunkwise.text import split_sentences

    out: list[tuple[int, int]] = []
    for c in split_sentences(text[start:end]):
        if len(c.text) <= max_chars:
            out.append((start + c.start, start + c.end))
            continue
        for piece in split_sentences(c.text, "langchain"):
            if piece.text.strip():
                out.append((start + c.start + piece.start, start + c.start + piece.end))
    return out


def build_numbered_messages(
    document: str, sentences: Sequence[str], previous: Sequence[str] = ()
) -> list[dict[str, str]]:
    """The chat messages of one candidate in ``excerpt_mode="sentence_numbers"``.

    Parameters
    ----------
    document : str
        The document's name (shown to the model).
    sentences : sequence of str
        The passage's sentences, shown one per line as ``[1] ...`` with their whitespace folded
        to single spaces.
    previous : sequence of str
        Questions already accepted for this document ("(none)" when empty).
    """
    prev = "\n".join(f"- {q}" for q in previous) if previous else "(none)"
    lines = "\n".join(f"[{n}] {' '.join(t.split())}" for n, t in enumerate(sentences, start=1))
    return [
        {"role": "system", "content": _SYSTEM_NUMBERED.format(document=document)},
        {"role": "user", "content": _USER_NUMBERED.format(previous=prev, passage=lines)},
    ]


def _numbered_references(
    value: Mapping[str, Any], spans: Sequence[tuple[int, int]], text: str, min_excerpt_chars: int
) -> tuple[list[dict[str, Any]], tuple[str, str, str] | None]:
    """References of a numbered reply: runs of consecutive sentence numbers become one span.

    Returns (references, problem); problem is (reason, detail, message for the model) or None."""
    numbers = sorted({int(x) for x in value["sentences"]})
    bad = [x for x in numbers if not 1 <= x <= len(spans)]
    if bad:
        return [], ("excerpt_not_found", f"no sentence {bad[0]} in the passage (it has {len(spans)})",
                    f"There is no sentence {bad[0]}: the passage has sentences 1 to {len(spans)}. Give the "
                    "numbers of the sentences that hold the answer.")
    runs: list[list[int]] = []
    for x in numbers:
        if runs and x == runs[-1][-1] + 1:
            runs[-1].append(x)
        else:
            runs.append([x])
    refs = []
    for run in runs:
        s, e = spans[run[0] - 1][0], spans[run[-1] - 1][1]
        if e - s >= min_excerpt_chars:
            refs.append({"content": text[s:e], "start_index": s, "end_index": e})
    if not refs:
        return [], ("excerpt_too_short", "every chosen sentence is shorter than min_excerpt_chars",
                    f"The sentences you chose are shorter than {min_excerpt_chars} characters. Give the numbers "
                    "of the full sentences that hold the answer.")
    return refs, None


def _refers(question: str, excerpt_mode: str) -> str | None:
    """The words by which a question points at its passage (or a numbered sentence), or None."""
    m = _REFERS.search(question) or (_NAMES_NUMBER.search(question) if excerpt_mode == "sentence_numbers" else None)
    return m.group(0) if m else None


def _clean_excerpt(excerpt: str) -> str:
    s = excerpt.strip(_STRIP)
    changed = True
    while changed:
        changed = False
        for e in _ELLIPSIS:
            if s.startswith(e):
                s, changed = s[len(e):].strip(_STRIP), True
            if s.endswith(e):
                s, changed = s[: -len(e)].strip(_STRIP), True
    return s


def _norm_question(q: str) -> str:
    return " ".join(q.casefold().split())


# --------------------------------------------------------------------------------------
# generation
# --------------------------------------------------------------------------------------


@dataclass
class GenerationResult:
    """What :func:`generate_questions` produced.

    Attributes
    ----------
    questions : list of dict
        Kept questions, in candidate order: ``question_id`` (``gen-<candidate index>``),
        ``question``, ``corpus_id``, ``references`` (``[{content, start_index, end_index}]``,
        half-open character offsets into the document), ``reviewed`` (False), ``model``,
        ``prompt_version``, ``prompt_sha256``, ``window`` (``[start, end]`` of the passage).
    candidates : DataFrame
        One row per candidate: ``candidate``, ``document``, ``window_start``, ``window_end``,
        ``question`` (None when there was no valid reply), ``kept`` (bool), ``reason`` (one of
        :data:`DROP_REASONS` or None), ``detail`` (text), ``cached`` (bool: the reply came from
        the cache).
    settings : dict
        The generation settings, the model identity and the prompt version / sha256.
    llm_stats : dict
        :meth:`LLMClient.stats` over the run (``calls``, ``cache_hits``, ...).
    """

    questions: list[dict[str, Any]]
    candidates: pd.DataFrame
    settings: dict[str, Any]
    llm_stats: dict[str, Any] = field(default_factory=dict)

    @property
    def dropped(self) -> dict[str, int]:
        """Number of dropped candidates per reason (every reason of :data:`DROP_REASONS`)."""
        counts = Counter(r for r in self.candidates["reason"] if r is not None and r == r)
        return {r: int(counts.get(r, 0)) for r in DROP_REASONS}

    @property
    def frame(self) -> pd.DataFrame:
        """The kept questions as the DataFrame :func:`chunkwise.evaluation.grid.run_grid` takes."""
        cols = ["question_id", "question", "corpus_id", "references"]
        return pd.DataFrame([{c: q[c] for c in cols} for q in self.questions], columns=cols)

    def summary(self) -> dict[str, Any]:
        """Settings and counts, JSON-ready (what ``<out>.generation.json`` holds)."""
        return {
            **self.settings,
            "n_candidates": int(len(self.candidates)),
            "n_kept": len(self.questions),
            "dropped": self.dropped,
            "kept_per_document": {
                str(k): int(v) for k, v in Counter(q["corpus_id"] for q in self.questions).items()
            },
            "llm_calls": int(self.llm_stats.get("calls", 0)),
            "llm_cache_hits": int(self.llm_stats.get("cache_hits", 0)),
        }

    def describe(self) -> str:
        """One line: kept / candidates and the drops by reason."""
        drops = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in self.dropped.items() if n)
        return (
            f"{len(self.questions)} of {len(self.candidates)} candidate questions kept"
            + (f"; dropped: {drops}" if drops else "; none dropped")
        )

    def write(self, path: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write the questions (JSONL) and the summary (``<stem>.generation.json``) beside it.

        Returns
        -------
        (questions path, summary path)
        """
        out = Path(path)
        if out.suffix.lower() not in (".jsonl", ".json"):
            raise ValueError(f"output {str(path)!r} must end in .jsonl (the questions file is JSON Lines).")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for q in self.questions:
                f.write(json.dumps(q, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
        meta = out.with_name(out.name.rsplit(".", 1)[0] + ".generation.json")
        meta.write_text(json.dumps(self.summary(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return out, meta


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}.")
    return int(value)


def generate_questions(
    docs: Mapping[str, str],
    n: int,
    llm: ChatModel,
    embedder: Any = None,
    *,
    seed: int = 0,
    window_chars: int = 1000,
    allocation: str = "equal",
    n_previous: int = 0,
    min_excerpt_chars: int = 20,
    dedup_threshold: float | None = 0.85,
    max_repairs: int = 1,
    content_repairs: int = 2,
    excerpt_margin_chars: int = 0,
    excerpt_mode: str = "sentence_numbers",
    temperature: float = 0.3,
    max_tokens: int = 300,
    max_consecutive_failures: int = 3,
    progress: Callable[[str], None] | None = None,
) -> GenerationResult:
    """Ask an LLM for ``n`` candidate questions with verbatim excerpts; keep the good ones.

    The method and every rule are described in the module docstring.

    Parameters
    ----------
    docs : mapping str -> str
        Document name -> text (e.g. :func:`chunkwise.datasets.local.load_documents`).
    n : int >= 1
        Candidate questions to ask for (one LLM request each, plus repairs). Fewer are kept.
    llm : ChatModel
        Any chunkwise LLM client (:class:`~chunkwise.llm.OnDemandLocalClient` for the local
        model, :meth:`LLMClient.from_env <chunkwise.llm.LLMClient.from_env>` for an endpoint).
        Its response cache makes the run resumable.
    embedder : Embedder, optional
        Embeds the questions for the near-duplicate filter (e.g.
        :class:`~chunkwise.embeddings.SentenceTransformerEmbedder`); ``None`` keeps only the
        exact-repeat filter.
    seed : int, default 0
        Seeds the choice of documents and windows.
    window_chars : int, default 1000
        Passage length in characters (Chroma's pipeline used 4,000 with GPT-4; a shorter
        passage keeps a small local model's prompt short, fast and its copying accurate).
    allocation : {"equal", "proportional"}, default "equal"
        ``"equal"``: candidate ``i`` uses document ``i mod (number of documents)`` (documents
        in name order); ``"proportional"``: a document drawn with probability proportional to
        its length in characters.
    n_previous : int, default 0
        Earlier accepted questions of the same document shown to the model, so that it asks
        something new. Measured with the local 1.5B model (``data/own/generation_runs.csv``): with
        3 it copied an earlier question more often than it avoided one (9 of 27 candidates
        dropped as duplicates, against 1 of 27 with 0), so the default shows none and leaves
        repeats to the duplicate filter.
    min_excerpt_chars : int, default 20
        Excerpts shorter than this (characters, after stripping) are left out of the
        references; a candidate with no excerpt left is dropped (``excerpt_too_short``).
    dedup_threshold : float or None, default 0.85
        Cosine similarity above which a question is a near duplicate of a kept one of the same
        document; ``None`` disables the embedding filter.
    max_repairs : int, default 1
        Re-asks after a reply that is not valid JSON for the mode's schema (:data:`NUMBERED_RESPONSE_SCHEMA` by default, :data:`RESPONSE_SCHEMA` in copy mode).
    content_repairs : int, default 2
        Further re-asks after a reply whose content would drop the candidate: a question that
        talks about "the passage", an excerpt that is not in the passage, or excerpts that are
        all shorter than ``min_excerpt_chars``. The model gets its reply back with the problem
        stated (through :meth:`LLMClient.chat_json <chunkwise.llm.LLMClient.chat_json>`'s
        validator), so it can name the subject or copy the sentence exactly. JSON and content
        re-asks share one budget of ``max_repairs + content_repairs``. A candidate's first
        request is the same as with 0 as long as the questions accepted before it for its
        document are, so cached replies are reused and the keep rate can be measured with and
        without repairs on the same passages (chapter 4 does).
    excerpt_margin_chars : int, default 0
        Where an excerpt is searched: the passage widened by this many characters of the
        document on each side (0: the passage alone). The window is cut at word boundaries,
        not sentence boundaries, so a model that copies a whole sentence crossing the window's
        edge quotes the document verbatim but not the passage; with a margin that sentence is
        found (it must still overlap the passage). The reference is the document's own text
        at the found offsets either way. Not used with ``excerpt_mode="sentence_numbers"``.
    excerpt_mode : {"sentence_numbers", "copy"}, default "sentence_numbers"
        How the model gives the answer's location. ``"copy"`` (Chroma's method, prompt
        :data:`PROMPT_VERSION`): it copies the sentences, and an excerpt it rewords is not found.
        ``"sentence_numbers"`` (prompt :data:`NUMBERED_PROMPT_VERSION`): the passage is shown one
        sentence per line, numbered (sentences of :func:`chunkwise.text.split_sentences`), the
        model answers ``{"question": ..., "sentences": [2, 3]}`` and the references are the
        document's text of those sentences (consecutive numbers joined into one reference), so
        they are verbatim by construction; a number outside the passage counts as
        ``excerpt_not_found``, and a question that names a sentence number as
        ``refers_to_passage``. On the same 27 passages of Chroma's corpora the local 1.5B model
        kept 10 questions copying (Chroma's method), 14 naming sentences, and 21 naming
        sentences with two content repairs and no earlier questions shown (the defaults).
    temperature : float, default 0.3
        Sampling temperature. Every request also carries its own sampling seed (from ``seed``
        and the candidate index), which is part of its cache key: two candidates with the same
        passage (a document shorter than the window) are two samples, not one cached reply.
    max_tokens : int, default 300
        Reply length limit (tokens of the model's tokenizer).
    max_consecutive_failures : int, default 3
        Raise after this many requests in a row fail (a dead server), instead of dropping
        every remaining candidate. Answered requests stay in the cache.
    progress : callable, optional
        Called with one line per candidate.

    Returns
    -------
    GenerationResult

    Raises
    ------
    ValueError
        For no documents, an empty document, ``n < 1``, an unknown ``allocation``, a
        ``dedup_threshold`` outside (0, 1], or an embedder that returns the wrong number of
        vectors.
    chunkwise.llm.LLMRequestError
        After ``max_consecutive_failures`` failed requests in a row.
    """
    from chunkwise.llm import LLMJSONError, LLMRequestError

    if not docs:
        raise ValueError("no documents to generate questions from; load a folder with load_documents first.")
    empty = [name for name, text in docs.items() if not str(text).strip()]
    if empty:
        raise ValueError(f"document {empty[0]!r} is empty; remove it from the documents folder.")
    n = _check_int("n", n, 1)
    window_chars = _check_int("window_chars", window_chars, 200)
    n_previous = _check_int("n_previous", n_previous, 0)
    min_excerpt_chars = _check_int("min_excerpt_chars", min_excerpt_chars, 1)
    max_consecutive_failures = _check_int("max_consecutive_failures", max_consecutive_failures, 1)
    content_repairs = _check_int("content_repairs", content_repairs, 0)
    excerpt_margin_chars = _check_int("excerpt_margin_chars", excerpt_margin_chars, 0)
    max_repairs = _check_int("max_repairs", max_repairs, 0)
    if excerpt_mode not in EXCERPT_MODES:
        raise ValueError(f"excerpt_mode must be one of {EXCERPT_MODES}, got {excerpt_mode!r}.")
    numbered = excerpt_mode == "sentence_numbers"
    prompt_version, prompt_sha = (
        (NUMBERED_PROMPT_VERSION, NUMBERED_PROMPT_SHA256) if numbered else (PROMPT_VERSION, PROMPT_SHA256)
    )
    if allocation not in ("equal", "proportional"):
        raise ValueError(f"allocation must be 'equal' or 'proportional', got {allocation!r}.")
    if dedup_threshold is not None and not (0.0 < float(dedup_threshold) <= 1.0):
        raise ValueError(f"dedup_threshold must be in (0, 1] or None, got {dedup_threshold!r}.")

    names = sorted(docs)
    lengths = np.array([len(docs[d]) for d in names], dtype=float)
    probs = lengths / lengths.sum()
    identity = llm.model_identity
    llm.reset_stats()
    rows: list[dict[str, Any]] = []
    accepted: dict[str, list[str]] = {d: [] for d in names}
    kept: list[dict[str, Any]] = []
    failures = 0
    for i in range(n):
        rng = np.random.default_rng([int(seed), i])
        if allocation == "equal":
            doc = names[i % len(names)]
            rng.random()  # keep the stream aligned with "proportional"
        else:
            doc = names[int(rng.choice(len(names), p=probs))]
        text = docs[doc]
        ws, we = sample_window(text, window_chars, rng)
        passage = text[ws:we]
        ms, me = max(0, ws - excerpt_margin_chars), min(len(text), we + excerpt_margin_chars)
        search = _Search(text, ws, we, ms, me)
        row: dict[str, Any] = {
            "candidate": i, "document": doc, "window_start": ws, "window_end": we,
            "question": None, "kept": False, "reason": None, "detail": "", "cached": False,
        }
        rows.append(row)
        previous = accepted[doc][-n_previous:] if n_previous else []
        rejected: list[tuple[str, str, str]] = []  # (reason, detail, message sent back) of content checks
        validator = None
        if numbered:
            spans = passage_sentences(text, ws, we)
            messages = build_numbered_messages(doc, [text[a:b] for a, b in spans], previous)
            schema = NUMBERED_RESPONSE_SCHEMA
            if content_repairs:
                validator = _numbered_validator(spans, text, min_excerpt_chars, rejected)
        else:
            messages = build_messages(doc, passage, previous)
            schema = RESPONSE_SCHEMA
            if content_repairs:
                validator = _content_validator(search, min_excerpt_chars, rejected)
        try:
            value, response = llm.chat_json(
                messages, schema=schema, max_repairs=max_repairs + content_repairs, temperature=temperature,
                max_tokens=max_tokens, seed=(int(seed) * 1_000_003 + i) % 2**31,
                **({"validator": validator} if validator is not None else {}),
            )
            failures = 0
        except LLMJSONError as exc:
            failures = 0
            last = rejected[-1] if rejected and rejected[-1][2] in str(exc.error) else None
            reason, detail = (last[0], last[1]) if last else ("malformed_json", str(exc.error)[:300])
            row.update(reason=reason, detail=detail, cached=exc.response.cached)
            _report(progress, row)
            continue
        except LLMRequestError as exc:
            failures += 1
            row.update(reason="request_failed", detail=str(exc)[:300])
            _report(progress, row)
            if failures >= max_consecutive_failures:
                raise
            continue
        question = " ".join(str(value["question"]).split())
        row.update(question=question, cached=response.cached)
        refers = _refers(question, excerpt_mode)
        if refers:
            row.update(reason="refers_to_passage", detail=refers)
            _report(progress, row)
            continue
        refs: list[dict[str, Any]] = []
        problem: tuple[str, str] | None = None
        short: list[str] = []
        if numbered:
            refs, found = _numbered_references(value, spans, text, min_excerpt_chars)
            problem = None if found is None else (found[0], found[1])
        for raw in [] if numbered else value["excerpts"]:
            excerpt = _clean_excerpt(str(raw))
            span = search.find(excerpt)
            if span is None:
                problem = ("excerpt_not_found", f"not in the passage: {excerpt[:120]!r}")
                break
            s, e = span
            if e - s < min_excerpt_chars:
                short.append(text[s:e])
                continue
            if all((r["start_index"], r["end_index"]) != (s, e) for r in refs):
                refs.append({"content": text[s:e], "start_index": s, "end_index": e})
        if problem is None and not refs:
            problem = ("excerpt_too_short", "every excerpt is shorter than min_excerpt_chars: "
                       + ", ".join(repr(x) for x in short[:3]))
        if problem is not None:
            row.update(reason=problem[0], detail=problem[1])
            _report(progress, row)
            continue
        refs.sort(key=lambda r: r["start_index"])
        accepted[doc].append(question)
        kept.append({"candidate": i, "document": doc, "question": question, "references": refs, "window": [ws, we]})
        row["kept"] = True
        _report(progress, row)

    # duplicates: exact repeats, then near duplicates by embedding similarity (same document)
    survivors: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for k in kept:
        key = (k["document"], _norm_question(k["question"]))
        if key in seen:
            _drop(rows, k["candidate"], "duplicate", f"same question as candidate {seen[key]}")
            continue
        seen[key] = k["candidate"]
        survivors.append(k)
    nearest: dict[int, float] = {}
    if embedder is not None and dedup_threshold is not None and len(survivors) > 1:
        from chunkwise.evaluation.grid import _embed
        from chunkwise.retrieval import unit_rows

        vecs = unit_rows(_embed(embedder, [k["question"] for k in survivors], "generated question"))
        final: list[int] = []
        for j, k in enumerate(survivors):
            same = [f for f in final if survivors[f]["document"] == k["document"]]
            if same:
                sims = vecs[same] @ vecs[j]
                best = int(np.argmax(sims))
                nearest[k["candidate"]] = float(sims[best])
                if sims[best] > float(dedup_threshold):
                    other = survivors[same[best]]
                    _drop(rows, k["candidate"], "duplicate",
                          f"cosine {sims[best]:.3f} to candidate {other['candidate']}: {other['question']!r}")
                    continue
            final.append(j)
        survivors = [survivors[j] for j in final]

    questions = [
        {
            "question_id": f"gen-{k['candidate']:04d}",
            "question": k["question"],
            "corpus_id": k["document"],
            "references": k["references"],
            "reviewed": False,
            "model": identity,
            "prompt_version": prompt_version,
            "prompt_sha256": prompt_sha,
            "window": k["window"],
        }
        for k in survivors
    ]
    frame = pd.DataFrame(rows, columns=[
        "candidate", "document", "window_start", "window_end", "question", "kept", "reason", "detail", "cached",
    ])
    for col in ("question", "reason"):  # keep None (pandas' string inference would make it NaN)
        frame[col] = pd.Series([r[col] for r in rows], dtype=object, index=frame.index)
    if nearest:
        frame["nearest_kept_cosine"] = frame["candidate"].map(nearest)
    settings = {
        "model": identity,
        "prompt_version": prompt_version,
        "prompt_sha256": prompt_sha,
        "excerpt_mode": excerpt_mode,
        "n": n,
        "seed": int(seed),
        "window_chars": window_chars,
        "allocation": allocation,
        "n_previous": n_previous,
        "min_excerpt_chars": min_excerpt_chars,
        "dedup_threshold": None if dedup_threshold is None else float(dedup_threshold),
        "dedup_embedder": None if embedder is None or dedup_threshold is None else str(getattr(embedder, "name", type(embedder).__name__)),
        "max_repairs": max_repairs,
        "content_repairs": content_repairs,
        "excerpt_margin_chars": excerpt_margin_chars,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "documents": names,
    }
    return GenerationResult(questions, frame, settings, llm.stats())


@dataclass(frozen=True)
class _Search:
    """Where a candidate's excerpts are looked for: ``text[ms:me]``, a span that must overlap the
    passage ``[ws, we)``."""

    text: str
    ws: int
    we: int
    ms: int
    me: int

    def find(self, excerpt: str) -> tuple[int, int] | None:
        """Document offsets of the first match overlapping the passage, or None."""
        if not excerpt:
            return None
        spans, _how = locate_excerpt(self.text[self.ms:self.me], excerpt, limit=50)
        for a, b in spans:
            s, e = self.ms + a, self.ms + b
            if s < self.we and e > self.ws:
                return s, e
        return None


def _content_validator(
    search: _Search, min_excerpt_chars: int, rejected: list[tuple[str, str, str]]
) -> Callable[[Any], None]:
    """A :meth:`LLMClient.chat_json` validator that sends a reply back when its content would drop
    the candidate (the same rules as the checks after the reply); each rejection is appended to
    ``rejected`` as (reason, detail, message) so the caller can name the reason of a final failure."""

    def check(value: Any) -> None:
        _check_refers(value, "copy", rejected)
        long_enough = 0
        for n, raw in enumerate(value["excerpts"], start=1):
            excerpt = _clean_excerpt(str(raw))
            span = search.find(excerpt)
            if span is None:
                msg = (f"Excerpt {n} is not in the passage character for character: {excerpt[:160]!r}. Copy whole "
                       "sentences from the passage exactly as they are written, without rewording or shortening.")
                rejected.append(("excerpt_not_found", f"not in the passage: {excerpt[:120]!r}", msg))
                raise ValueError(msg)
            long_enough += span[1] - span[0] >= min_excerpt_chars
        if not long_enough:
            msg = (f"Every excerpt is shorter than {min_excerpt_chars} characters. Copy the full sentences of the "
                   "passage that hold the answer.")
            rejected.append(("excerpt_too_short", "every excerpt is shorter than min_excerpt_chars", msg))
            raise ValueError(msg)

    return check


def _check_refers(value: Any, excerpt_mode: str, rejected: list[tuple[str, str, str]]) -> None:
    """Send a reply back when its question points at the passage (see :func:`_refers`)."""
    refers = _refers(" ".join(str(value["question"]).split()), excerpt_mode)
    if refers:
        msg = (f"The question says {refers!r}. Ask it so that it makes sense without the passage: "
               "name its subject (who or what it is about).")
        rejected.append(("refers_to_passage", refers, msg))
        raise ValueError(msg)


def _numbered_validator(
    spans: Sequence[tuple[int, int]], text: str, min_excerpt_chars: int, rejected: list[tuple[str, str, str]]
) -> Callable[[Any], None]:
    """The content validator of ``excerpt_mode="sentence_numbers"`` (same rules as the checks after
    the reply; rejections recorded in ``rejected`` as in :func:`_content_validator`)."""

    def check(value: Any) -> None:
        _check_refers(value, "sentence_numbers", rejected)
        _, problem = _numbered_references(value, spans, text, min_excerpt_chars)
        if problem is not None:
            rejected.append(problem)
            raise ValueError(problem[2])

    return check


def _drop(rows: list[dict[str, Any]], candidate: int, reason: str, detail: str) -> None:
    row = rows[candidate]
    row.update(kept=False, reason=reason, detail=detail)


def _report(progress: Callable[[str], None] | None, row: Mapping[str, Any]) -> None:
    if progress is None:
        return
    status = "kept" if row["kept"] else row["reason"]
    src = " (cache)" if row["cached"] else ""
    q = f": {row['question']}" if row["question"] else ""
    progress(f"candidate {row['candidate']} [{row['document']}] {status}{src}{q}")


# --------------------------------------------------------------------------------------
# rank agreement between two question sets
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankAgreement:
    """Agreement between the cell rankings of two question sets (:func:`rank_agreement`).

    Attributes
    ----------
    cells : list of str
        The cells compared (present in both score tables).
    means_a, means_b : ndarray
        Each cell's mean score under set A and under set B, in ``cells`` order.
    spearman, kendall : float
        Spearman's rho and Kendall's tau-b of ``means_a`` against ``means_b``.
    spearman_ci, kendall_ci : (float, float)
        Bootstrap intervals that contain the estimate
        (:func:`~chunkwise.evaluation.intervals.rank_correlation_interval`); NaN when undefined.
    confidence : float
    n_resamples : int
    n_questions_a, n_questions_b : int
    """

    cells: list[str]
    means_a: np.ndarray
    means_b: np.ndarray
    spearman: float
    kendall: float
    spearman_ci: tuple[float, float]
    kendall_ci: tuple[float, float]
    confidence: float
    n_resamples: int
    n_questions_a: int
    n_questions_b: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_cells": len(self.cells),
            "n_questions_a": self.n_questions_a,
            "n_questions_b": self.n_questions_b,
            "spearman": self.spearman,
            "spearman_ci": list(self.spearman_ci),
            "kendall": self.kendall,
            "kendall_ci": list(self.kendall_ci),
            "confidence": self.confidence,
            "n_resamples": self.n_resamples,
        }

    def describe(self) -> str:
        pct = round(100 * self.confidence)

        def one(name: str, value: float, ci: tuple[float, float]) -> str:
            if math.isnan(value):
                return f"{name} undefined (one set gives every cell the same mean)"
            text = interval_text(*ci, brackets="", sep=" to ", why="no resample ranked the cells")
            return f"{name} = {value:.2f} ({text if text.startswith('no ') else f'{pct}% CI {text}'})"

        return (
            f"over {len(self.cells)} cells: {one('Spearman rho', self.spearman, self.spearman_ci)}, "
            f"{one('Kendall tau-b', self.kendall, self.kendall_ci)}; "
            f"{self.n_questions_a} vs {self.n_questions_b} questions"
        )


def _rankdata(x: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties share their mean rank)."""
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ra, rb = _rankdata(a), _rankdata(b)
    ra = ra - ra.mean(axis=-1, keepdims=True)
    rb = rb - rb.mean(axis=-1, keepdims=True)
    den = np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (ra * rb).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def _kendall_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall's tau-b per row (pairs over the last axis)."""
    i, j = np.triu_indices(a.shape[-1], k=1)
    da = np.sign(a[..., i] - a[..., j])
    db = np.sign(b[..., i] - b[..., j])
    num = (da * db).sum(axis=-1)
    den = np.sqrt(np.abs(da).sum(axis=-1) * np.abs(db).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _as_scores(scores: Any, name: str) -> pd.DataFrame:
    if not isinstance(scores, pd.DataFrame):
        raise ValueError(f"{name} must be a DataFrame of per-question scores (rows = questions, columns = cells), "
                         f"e.g. GridResult.scores('recall'); got {type(scores).__name__}.")
    if scores.shape[0] < 2:
        raise ValueError(f"{name} has {scores.shape[0]} question(s); at least 2 are needed to resample.")
    values = scores.to_numpy(dtype=float)
    if np.isnan(values).any():
        raise ValueError(f"{name} has missing scores; drop the questions or cells with NaN first.")
    return scores


def rank_agreement(
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> RankAgreement:
    """Do two question sets rank the same cells alike? Spearman and Kendall with bootstrap CIs.

    Each set's questions are resampled with replacement independently (``numpy`` generator
    seeded with ``seed``); in each resample the cells' means are recomputed under both sets
    and correlated. The intervals come from those correlations by
    :func:`~chunkwise.evaluation.intervals.rank_correlation_interval` (the lower to the higher
    end of the percentile and basic intervals), which contains the estimate.

    Parameters
    ----------
    scores_a, scores_b : DataFrame
        Per-question scores, rows = questions, columns = cells (e.g.
        :meth:`GridResult.scores <chunkwise.evaluation.grid.GridResult.scores>`). The cells
        both have are compared, in ``scores_a``'s order.
    n_resamples : int, default 2000
    confidence : float, default 0.95
    seed : int, default 0

    Resampling adds noise to both sets' means, which can only scramble ranks, so the resampled
    correlations sit mostly below the point estimate, at times nearly all of them: their
    percentile interval can then exclude the estimate, and the basic interval (reflected around
    it) lies above it; the interval given spans both.

    Returns
    -------
    RankAgreement
        Correlations are NaN when one set gives every cell the same mean.

    Raises
    ------
    ValueError
        Fewer than 3 shared cells, fewer than 2 questions, missing scores, or bad settings.
    """
    a = _as_scores(scores_a, "scores_a")
    b = _as_scores(scores_b, "scores_b")
    cells = [c for c in a.columns if c in set(b.columns)]
    if len(cells) < 3:
        raise ValueError(f"the two score tables share {len(cells)} cell(s); a rank correlation needs at least 3.")
    n_resamples = _check_int("n_resamples", n_resamples, 1)
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    xa = a[cells].to_numpy(dtype=float)
    xb = b[cells].to_numpy(dtype=float)
    ma, mb = xa.mean(axis=0), xb.mean(axis=0)
    rho = float(_spearman_rows(ma[None], mb[None])[0])
    tau = float(_kendall_rows(ma[None], mb[None])[0])
    rng = np.random.default_rng(seed)
    rhos, taus = [], []
    batch = 200
    for start in range(0, n_resamples, batch):
        size = min(batch, n_resamples - start)
        ia = rng.integers(0, xa.shape[0], size=(size, xa.shape[0]))
        ib = rng.integers(0, xb.shape[0], size=(size, xb.shape[0]))
        ra = np.stack([np.bincount(r, minlength=xa.shape[0]) for r in ia]) @ xa / xa.shape[0]
        rb = np.stack([np.bincount(r, minlength=xb.shape[0]) for r in ib]) @ xb / xb.shape[0]
        rhos.append(_spearman_rows(ra, rb))
        taus.append(_kendall_rows(ra, rb))
    return RankAgreement(
        cells=cells, means_a=ma, means_b=mb, spearman=rho, kendall=tau,
        spearman_ci=rank_correlation_interval(rho, np.concatenate(rhos), float(confidence)),
        kendall_ci=rank_correlation_interval(tau, np.concatenate(taus), float(confidence)),
        confidence=float(confidence),
        n_resamples=n_resamples, n_questions_a=int(xa.shape[0]), n_questions_b=int(xb.shape[0]),
    )


def llm_for_generation(cache: str | os.PathLike[str] | None = None, cache_mode: str = "use", n_threads: int = 2) -> Any:
    """The LLM :func:`generate_questions` uses by default.

    The endpoint configured with ``CHUNKWISE_LLM_BASE_URL`` / ``CHUNKWISE_LLM_MODEL`` when set
    (:meth:`LLMClient.from_env <chunkwise.llm.LLMClient.from_env>`), else the embedded local
    model (:class:`~chunkwise.llm.OnDemandLocalClient`: the server starts on the first cache
    miss only, with ``n_threads`` CPU threads; 900 s per request, since a 1.5B model on two
    busy cores can take minutes per question).

    Parameters
    ----------
    cache : path, optional
        The SQLite response cache (default: chunkwise's default cache file).
    cache_mode : {"use", "refresh", "off"}
    n_threads : int, default 2
    """
    from chunkwise.llm import LLMClient, LocalLLMServer, OnDemandLocalClient

    client = LLMClient.from_env(cache=cache, cache_mode=cache_mode)
    if client is not None:
        return client
    return OnDemandLocalClient(
        server=LocalLLMServer(n_threads=n_threads), cache=cache, cache_mode=cache_mode, timeout=900.0
    )


def iter_candidates(result: GenerationResult, reason: str | None = None) -> Iterable[dict[str, Any]]:
    """Rows of :attr:`GenerationResult.candidates` as dicts, optionally only one drop reason."""
    frame = result.candidates
    if reason is not None:
        if reason not in DROP_REASONS:
            raise ValueError(f"unknown reason {reason!r}; use one of {', '.join(DROP_REASONS)}.")
        frame = frame[frame["reason"] == reason]
    return frame.to_dict("records")


def chapter_answer(
    generated: Any,
    n_grid: int,
    llm_stats: Mapping[str, int],
    runs: Mapping[str, Any],
    rerun: Any,
    boots: Mapping[tuple[str, str], Any],
    overall: Any = None,
    at_k5: Any = None,
    robustness: Any = None,
) -> tuple[str, str]:
    """Chapter 4's answer box and its run facts, built from the run.

    Parameters
    ----------
    generated : GenerationResult
        The generated set (``questions``, ``candidates``, ``dropped``).
    n_grid : int
        Generated questions on the corpora of the grid.
    llm_stats : mapping
        ``calls`` and ``cache_hits`` of the generation.
    runs : mapping name -> GridResult
        The grid under each question set (``"published"``, ``"generated"``).
    rerun : GridResult
        The generated set's grid again (warm).
    boots : mapping (set name, metric) -> BootstrapResult
        Recall and IoU at k = 5 under each set.
    overall, at_k5 : RankAgreement, optional
        :func:`rank_agreement` of the two sets over all cells and over the cells at k = 5; both
        needed when both sets ran.
    robustness : Robustness, optional
        The plan's ``own-rank`` panel (:func:`rank_agreement_panel`): the lead gives its class in a
        few words (:func:`chunkwise.answerbox.robustness_words`), the details its full sentence
        with the alternatives it flips under.

    Returns
    -------
    (str, str)
        The answer box (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (what
        a generated set is good for here, the verdict on the rank agreement at k = 5 with its
        interval and robustness class, whether the generated set names a winner, and that its
        questions are unreviewed), then folded details with every sentence and interval behind
        it; and the run facts (a Markdown list).
    """
    from chunkwise.answerbox import answer_box, robustness_words

    def pct(x: float) -> str:
        return f"{100 * x:.1f}"

    def ci_words(lo: float, hi: float) -> str:
        text = interval_text(lo, hi, brackets="", sep=" to ", why="too few questions")
        return text if text.startswith("no ") else f"95% CI {text}"

    n_kept, n_cand = len(generated.questions), len(generated.candidates)
    drop_reasons = sorted(((n, k.replace("_", " ")) for k, n in generated.dropped.items() if n), reverse=True)
    drop_words = ", ".join(f"{k} {n}" for n, k in drop_reasons) or "none dropped"
    facts = [
        f"- generated set: {n_kept} questions kept of {n_cand} candidates, {n_grid} of them on the corpora of "
        f"the grid; dropped by reason: {drop_words}; LLM calls {llm_stats['calls']}, from the cache "
        f"{llm_stats['cache_hits']}",
    ]
    for name, r in runs.items():
        facts.append(f"- grid with the {name} set ({len(r.questions)} questions): {r.seconds:.1f} s, "
                     f"{r.n_embedded} texts embedded")
    facts.append(f"- the generated set's grid again, warm: {rerun.seconds:.1f} s, {rerun.n_embedded} texts embedded")
    sentences = []
    if {"published", "generated"} <= set(runs):
        if overall is None or at_k5 is None:
            raise ValueError("with both question sets, pass the rank agreements overall and at_k5.")
        pub = runs["published"]
        bp, bg = boots[("published", "recall")], boots[("generated", "recall")]
        facts.append(f"- rank agreement on recall, all cells: {overall.describe()}")
        facts.append(f"- rank agreement on recall at k = 5: {at_k5.describe()}")
        for metric in ("recall", "iou"):
            p_, g_ = boots[("published", metric)], boots[("generated", metric)]
            facts.append(
                f"- {metric} at k = 5: best cell {p_.best} under the published set (best in "
                f"{p_.table.loc[p_.best, 'p_best']:.0%} of resamples), {g_.best} under the generated set "
                f"({g_.table.loc[g_.best, 'p_best']:.0%}); the generated set's best is "
                f"{'in play' if g_.best in p_.in_play else 'ruled out'} under the published set; "
                f"{len(p_.in_play)} vs {len(g_.in_play)} of {len(p_.table)} cells in play")
        sentences.append(
            f"The local model kept {n_kept} of its {n_cand} candidate questions"
            + (f", {n_grid} of them on the corpora of the grid, where the published set has "
               f"{len(pub.questions)}." if n_grid < n_kept else
               f"; the published set has {len(pub.questions)} questions on the same corpora."))
        sentences.append(
            f"Over all {len(overall.cells)} cells of the grid the two sets' rankings agree with Spearman's rho "
            f"{overall.spearman:.2f} ({ci_words(*overall.spearman_ci)}); among the {len(at_k5.cells)} cells at "
            f"k = 5, where only the chunker and the retriever change, rho is {at_k5.spearman:.2f} "
            f"({ci_words(*at_k5.spearman_ci)})"
            + (", an interval that reaches 0" if round(at_k5.spearman_ci[0], 2) <= 0 else "")
            + (", so much of the overall agreement comes from k, which both sets order alike."
               if overall.spearman > at_k5.spearman else "."))

        def verdict_words(b: Any, name: str) -> str:
            p = b.table.loc[b.best, "p_best"]
            if b.winner is not None:
                return f"the {name} set names a winner, {b.best} (best in {p:.0%} of resamples)"
            return f"the {name} set names no winner (its best cell, {b.best}, is best in only {p:.0%} of resamples)"

        def in_play_words(b: Any) -> str:
            n = len(b.in_play)
            return f"all {n}" if n == len(b.table) else f"{n} of {len(b.table)}"

        sentences.append(
            f"On recall at k = 5, {verdict_words(bp, 'published')} and keeps {in_play_words(bp)} cells in play; "
            f"{verdict_words(bg, 'generated')} and keeps {in_play_words(bg)} in play.")
        if bg.best == bp.best:
            sentences.append("Both sets have the same best cell.")
        else:
            row = bp.table.loc[bg.best]
            sentences.append(
                f"Under the published questions the generated set's best cell is {pct(-row['diff_best'])} recall "
                f"points behind their best (paired bootstrap 95% CI {pct(-row['diff_best_high'])} to "
                f"{pct(-row['diff_best_low'])}), so it is {'ruled out' if bg.best in bp.ruled_out else 'still in play'}.")
        sentences.append(
            f"What the run cannot show is whether the {n_grid} generated questions in the grid are right: nobody "
            "reviewed them, and the model that wrote them also chose their answers.")
        lo, hi = at_k5.spearman_ci
        verdict = interval_side(lo, hi, ("agree", "disagree", "cannot tell"))
        # the lead: fixed wording per branch, numbers and counts only (no cell names), so it stays
        # within the answer box's 60 words whatever the run
        lead = {
            "agree": "**A locally generated question set can shortlist chunker and retriever.**",
            "disagree": "**Do not choose chunker and retriever with a locally generated question set.**",
            "cannot tell": "**Check a locally generated question set against reviewed questions before "
                           "choosing with it.**",
        }[verdict]
        how_sure = f"**{verdict}**" + (f"; {robustness_words(robustness)}" if robustness is not None
                                       else "")
        lead += f" Rank agreement at k = 5: rho {at_k5.spearman:.2f} ({ci_words(lo, hi)}), {how_sure}."
        if bg.winner is None:
            lead += f" It names no winner: {in_play_words(bg)} cells in play (checked set: {len(bp.in_play)})."
        elif bg.best == bp.best:
            lead += " Its winner is the checked set's best cell."
        else:
            lead += (f" Its winner is {'ruled out' if bg.best in bp.ruled_out else 'in play'} under the "
                     "checked set.")
        lead += f" Nobody reviewed its {n_grid} questions."
        if robustness is not None:
            sentences.append(f"\n\n**Robustness of the rank agreement** ({robustness.primary.verdict}): "
                             f"{robustness.describe()}.")
    else:
        sentences.append(
            f"No checked question set was given, so the chapter generated {n_kept} questions from {n_cand} "
            f"candidates ({n_grid} in the grid) and evaluated the grid with them, but could not test whether "
            "they rank the cells as a checked set would.")
        lead = (f"**Read the {n_kept} generated questions before trusting a verdict from them**: with no checked "
                "set, this run could not test whether they rank the cells as reviewed questions would.")
    return answer_box(lead, " ".join(sentences).replace(" \n\n", "\n\n")), "\n".join(facts)



def rank_agreement_panel(
    published: Any,
    generated: Any,
    entry: Any,
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[Any, pd.DataFrame]:
    """The analysis plan's ``own-rank`` verdict under its primary specification and each declared
    alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification names ``statistic`` (``"Spearman's rho"`` or ``"Kendall's tau-b"``),
    ``cells`` (``"k = 5: chunker x retriever"``: every cell at k = 5; ``"k = 5: dense, chunkers
    only"``) and ``metric``; its estimate is :func:`rank_agreement` of the two runs' per-question
    scores over those cells, with its interval, and its verdict the plan's words for
    :func:`chunkwise.evaluation.robustness.difference_verdict` (above 0: agree).

    Parameters
    ----------
    published, generated : GridResult
        The grid scored with the published questions and with the generated ones.
    entry : chunkwise.plan.PlanEntry

    Returns
    -------
    (Robustness, DataFrame)
        The class, and one row per specification: ``specification``, ``statistic``, ``cells``,
        ``metric``, ``n_cells``, ``estimate``, ``low``, ``high``, ``verdict``.

    Raises
    ------
    ValueError
        For a statistic or cell set the function does not know, or fewer than 3 cells.
    """
    from chunkwise.evaluation.robustness import SpecResult, classify, difference_verdict
    from chunkwise.plan import specifications

    t = published.table
    results, rows = [], []
    for name, spec in specifications(entry):
        at5 = t[t["k"] == 5]
        if spec["cells"] == "k = 5: chunker x retriever":
            cells = list(at5["cell"])
        elif spec["cells"] == "k = 5: dense, chunkers only":
            cells = list(at5.loc[at5["retriever"] == "dense", "cell"])
        else:
            raise ValueError(f"{name}: unknown cell set {spec['cells']!r}")
        ra = rank_agreement(published.scores(spec["metric"])[cells], generated.scores(spec["metric"])[cells],
                            n_resamples=n_resamples, seed=seed)
        if spec["statistic"] == "Spearman's rho":
            est, (lo, hi) = ra.spearman, ra.spearman_ci
        elif spec["statistic"] == "Kendall's tau-b":
            est, (lo, hi) = ra.kendall, ra.kendall_ci
        else:
            raise ValueError(f"{name}: unknown statistic {spec['statistic']!r}")
        generic = difference_verdict(lo, hi, entry.delta)
        verdict = entry.words.get(generic.replace(" ", "_"), generic)
        results.append(SpecResult(name, float(est), float(lo), float(hi), verdict,
                                  int(min(ra.n_questions_a, ra.n_questions_b)), float("nan"), {}, generic))
        rows.append({"specification": name, "statistic": spec["statistic"], "cells": spec["cells"],
                     "metric": spec["metric"], "n_cells": len(cells), "estimate": float(est), "low": float(lo),
                     "high": float(hi), "verdict": verdict})
    return classify(results[0], results[1:], delta=entry.delta, unit=entry.unit), pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# the chapter's tables
# --------------------------------------------------------------------------------------


def one_line(text: Any) -> str:
    """A text with every run of whitespace (newlines included) made one space, ends stripped.

    Parameters
    ----------
    text : object
        Converted with :class:`str` first (``None`` -> ``"None"``).

    Returns
    -------
    str
        ``"a\\n\\n b "`` -> ``"a b"``: no literal newline on the page.
    """
    return " ".join(str(text).split())


def cell_table(runs: Mapping[str, Any], metric: str) -> pd.DataFrame:
    """One grid metric per cell, one column per question set, in percent.

    Parameters
    ----------
    runs : mapping of str to GridResult
        Question-set name -> the grid scored with that set (same grid, so the same cells);
        the first run's ``table`` gives each cell's ``chunker``, ``retriever`` and ``k``.
    metric : str
        A column of the grids' tables with values in [0, 1] (``"recall"``, ``"iou"``, ...).

    Returns
    -------
    pandas.DataFrame
        Indexed by ``cell`` in the first run's order: ``chunker``, ``retriever``, ``k``, then
        one column per run, named by its key: ``100 * metric`` rounded to 1 decimal (NaN for a
        cell the run lacks).

    Raises
    ------
    ValueError
        If ``runs`` is empty.
    KeyError
        If a run's table lacks ``cell`` or ``metric``, or the first lacks ``chunker``,
        ``retriever`` or ``k``.
    """
    if not runs:
        raise ValueError("cell_table needs at least one run")
    t = pd.DataFrame({name: r.table.set_index("cell")[metric] * 100 for name, r in runs.items()})
    meta = next(iter(runs.values())).table.set_index("cell")[["chunker", "retriever", "k"]]
    return meta.join(t.round(1))


def cell_subsets(table: pd.DataFrame, top_k: Sequence[int]) -> list[tuple[str, list[str]]]:
    """The sets of grid cells whose rankings the chapter compares between two question sets.

    Parameters
    ----------
    table : pandas.DataFrame
        A grid's table (:attr:`GridResult.table <chunkwise.evaluation.grid.GridResult.table>`):
        one row per cell with ``cell``, ``retriever`` and ``k``.
    top_k : sequence of int
        The k values of the grid, one subset each.

    Returns
    -------
    list of (str, list of str)
        In this order: ``("all cells", every cell)``; ``("k = K", the cells at K)`` for each K
        of ``top_k``; ``("dense, k = 5 (chunkers only)", the dense cells at k = 5)``. Cells keep
        the table's order; a subset can be empty (e.g. no k = 5 in the grid).

    Raises
    ------
    AttributeError
        If ``table`` lacks ``cell``, ``retriever`` or ``k``.
    """
    t = table
    out = [("all cells", list(t.cell))]
    out += [(f"k = {k}", list(t.cell[t.k == k])) for k in top_k]
    out.append(("dense, k = 5 (chunkers only)", list(t.cell[(t.k == 5) & (t.retriever == "dense")])))
    return out


def agreement_table(
    published: Any,
    generated: Any,
    top_k: Sequence[int],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """How far the generated questions rank the grid's cells as the published ones do, per cell set.

    For each metric (``recall``, then ``iou``) and each subset of :func:`cell_subsets` with at
    least 3 cells: :func:`rank_agreement` of the published set's scores against the generated
    set's, and, as a control, against a sample of the published questions themselves, as many
    as the generated set has (at most all of them), drawn without replacement once per metric
    from one ``numpy`` generator seeded with ``seed`` (recall's sample first).

    Parameters
    ----------
    published, generated : GridResult
        The same grid scored with each question set.
    top_k : sequence of int
        The grid's k values (:func:`cell_subsets`).
    n_resamples : int, default 2000
        Bootstrap resamples of every :func:`rank_agreement`.
    seed : int, default 0
        Seeds the control samples and every :func:`rank_agreement`.

    Returns
    -------
    pandas.DataFrame
        One row per (metric, subset), rounded to 2 decimals: ``metric``, ``cells`` (the subset's
        label), ``n_cells``, ``spearman``, ``spearman_ci`` and ``kendall_ci`` (text ``"lo to
        hi"``), ``kendall``, and ``control spearman (N published q.)`` with N the control
        sample's size. Empty (no columns) if no subset has 3 cells.

    Raises
    ------
    ValueError
        From :func:`rank_agreement`: fewer than 2 questions in a set, missing scores, or a bad
        ``n_resamples``.
    """
    rng = np.random.default_rng(seed)
    n_gen = len(generated.questions)
    rows = []
    for metric in ("recall", "iou"):
        sp, sg = published.scores(metric), generated.scores(metric)
        control_rows = rng.choice(len(sp), size=min(n_gen, len(sp)), replace=False)
        for label, cells in cell_subsets(published.table, top_k):
            if len(cells) < 3:
                continue
            ra = rank_agreement(sp[cells], sg[cells], n_resamples=n_resamples, seed=seed)
            ctl = rank_agreement(sp[cells], sp.iloc[control_rows][cells],
                                 n_resamples=n_resamples, seed=seed)
            rows.append({
                "metric": metric, "cells": label, "n_cells": len(cells),
                "spearman": ra.spearman,
                "spearman_ci": interval_text(*ra.spearman_ci, brackets="", sep=" to "),
                "kendall": ra.kendall,
                "kendall_ci": interval_text(*ra.kendall_ci, brackets="", sep=" to "),
                f"control spearman ({len(control_rows)} published q.)": ctl.spearman,
            })
    return pd.DataFrame(rows).round(2)
