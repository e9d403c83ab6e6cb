"""The answer stage: does the chunking that retrieves best also answer best?

For chosen cells of a grid run (:func:`chunkwise.evaluation.grid.run_grid`), each question's
top-k chunks go to a chat model, which answers from them; each answer is scored

- against the question's ``reference_answer`` (when the questions file gives one) by **token F1**
  and **exact match** after SQuAD's normalisation (lower case, punctuation and the articles
  a / an / the removed, whitespace collapsed; Rajpurkar et al., 2016);
- by an LLM **judge** (optional): ``correct`` (does the answer say what the reference says; needs
  a reference answer) and ``grounded`` (is everything the answer claims supported by the
  retrieved chunks), each 1 or 0, from a versioned prompt (:data:`JUDGE_PROMPT_VERSION`).

Every reply goes through the chat model's own cache (an :class:`chunkwise.llm.LLMClient` with a
cache file answers a rerun with no request). A question whose generation or judgement fails has
NaN in that metric and the reason in ``error``: never 0. Costs per question: ``answer_tokens``
(cl100k_base tokens of the answer) and ``answer_seconds`` (the model's latency for the reply; a
cached reply keeps the latency of its original request).

References
----------
.. [1] P. Rajpurkar, J. Zhang, K. Lopyrev and P. Liang, "SQuAD: 100,000+ Questions for Machine
   Comprehension of Text", EMNLP 2016 (exact match and token F1).
.. [2] L. Zheng et al., "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena", NeurIPS 2023
   (an LLM as grader; its biases are why the judge's prompt is versioned and its verdicts are
   reported beside the reference-based scores, not instead of them).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "ANSWER_METRICS",
    "ANSWER_PROMPT_VERSION",
    "JUDGE_PROMPT_VERSION",
    "AnswerResult",
    "answer_cells",
    "answers_text",
    "exact_match",
    "merge_answers",
    "normalize_answer",
    "overlap_f1",
    "select_cells",
    "token_f1",
]

#: Version of the answering prompt (part of every cached request, so a change re-asks).
ANSWER_PROMPT_VERSION = "answer-v1"
#: Version of the judge's prompt.
JUDGE_PROMPT_VERSION = "judge-v1"
#: Per-question answer metrics (fractions in [0, 1]; NaN where undefined or failed).
ANSWER_METRICS: tuple[str, ...] = ("token_f1", "exact_match", "correct", "grounded")

_ANSWER_SYSTEM = (
    f"[{ANSWER_PROMPT_VERSION}] You answer questions about a set of documents. Use only the numbered "
    "context passages. Answer in at most two sentences. If the passages do not contain the answer, reply "
    "exactly: not in the context"
)
_JUDGE_SYSTEM = (
    f"[{JUDGE_PROMPT_VERSION}] You grade an answer to a question. Reply with a JSON object "
    '{"correct": true|false, "grounded": true|false}. "correct": the answer states what the reference '
    'answer states (wording may differ; missing or wrong facts make it false). "grounded": every claim of '
    "the answer is supported by the context passages (an answer saying the passages lack the answer is "
    "grounded only if they do)."
)
_JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}, "grounded": {"type": "boolean"}},
    "required": ["correct", "grounded"],
}
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, punctuation and articles removed, whitespace collapsed."""
    text = str(text).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the normalised texts are equal, else 0.0 (SQuAD's exact match)."""
    return float(normalize_answer(prediction) == normalize_answer(reference))


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's token F1 of the normalised texts (whitespace tokens; multiset overlap).

    Both empty: 1.0; one empty: 0.0.
    """
    return overlap_f1(normalize_answer(prediction).split(), normalize_answer(reference).split())


def overlap_f1(predicted: Sequence[str], reference: Sequence[str]) -> float:
    """F1 of the multiset overlap of two token lists (SQuAD's, whatever the tokenizer).

    1.0 when both are empty, 0.0 when one is or nothing overlaps, else ``2PR / (P + R)`` with
    the overlap over ``len(predicted)`` (P) and ``len(reference)`` (R).
    """
    if not predicted or not reference:
        return float(len(predicted) == len(reference) == 0)
    common = sum((Counter(predicted) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(reference)
    return 2 * precision * recall / (precision + recall)


@dataclass
class AnswerResult:
    """What :func:`answer_cells` measured.

    Attributes
    ----------
    per_question : DataFrame
        One row per (cell, question): ``cell``, ``question_id``, ``answer``, ``token_f1``,
        ``exact_match``, ``correct``, ``grounded`` (fractions; NaN where undefined or failed),
        ``answer_tokens`` (cl100k_base), ``answer_seconds`` and ``error`` (empty when fine).
    table : DataFrame
        One row per cell: the metrics' means over the questions that have them (``n_answered``,
        ``n_failed``), mean ``answer_tokens`` and ``answer_seconds``.
    llm_calls, llm_cache_hits : int
        Chat calls of this run (judge repairs included) and how many the cache served.
    """

    per_question: pd.DataFrame
    table: pd.DataFrame
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompts: dict[str, str] = field(default_factory=lambda: {"answer": _ANSWER_SYSTEM, "judge": _JUDGE_SYSTEM})

    def scores(self, metric: str = "token_f1") -> pd.DataFrame:
        """Per-question ``metric``: rows = questions, columns = cells (for the paired bootstrap).

        Raises
        ------
        ValueError
            For a metric that is not one of :data:`ANSWER_METRICS`.
        """
        if metric not in ANSWER_METRICS:
            raise ValueError(f"unknown answer metric {metric!r}; use one of {', '.join(ANSWER_METRICS)}.")
        wide = self.per_question.pivot(index="question_id", columns="cell", values=metric)
        order = list(dict.fromkeys(self.per_question["question_id"]))
        return wide.loc[order, list(self.table["cell"])]


def check_cell_spec(spec: str | Sequence[str], cells: Sequence[str]) -> list[str] | None:
    """Check an answer-cell spec against the grid's cell names before anything runs.

    Parameters
    ----------
    spec : "best:N", "all", a comma-separated string or a list of cell names
    cells : sequence of str
        The grid's cells (:attr:`GridConfig.cell_names <chunkwise.evaluation.grid.GridConfig.cell_names>`).

    Returns
    -------
    list of str or None
        The named cells; None for ``"best:N"`` (chosen from the results) and ``"all"``.

    Raises
    ------
    ValueError
        For a malformed spec, ``best:0``, or a name that is not a cell of the grid.
    """
    cells = list(cells)
    if isinstance(spec, str):
        text = spec.strip()
        if text == "all":
            return None
        m = re.fullmatch(r"best:(\d+)", text)
        if m:
            if int(m.group(1)) < 1:
                raise ValueError("best:N needs N >= 1.")
            return None
        if text.startswith("best"):
            raise ValueError(f"answer cells {text!r}: write best:N with a whole number N >= 1, e.g. best:3.")
        names = [c.strip() for c in text.split(",") if c.strip()]
    else:
        names = [str(c) for c in spec]
    unknown = [c for c in names if c not in cells]
    if unknown or not names:
        raise ValueError(f"answer cells {unknown or names!r} are not cells of the grid; use 'best:N', 'all' or "
                         f"names such as {cells[0]!r}.")
    return names


def select_cells(result: Any, spec: str | Sequence[str], metric: str = "recall") -> list[str]:
    """The cells to answer: ``"best:N"`` (the N best by ``metric`` in the table), ``"all"``, or names.

    Raises
    ------
    ValueError
        For an unknown cell name or a malformed spec (:func:`check_cell_spec`).
    """
    cells = list(result.table["cell"])
    names = check_cell_spec(spec, cells)
    if names is not None:
        return names
    if spec.strip() == "all":
        return cells
    n = int(spec.strip().split(":")[1])
    order = result.table[metric].to_numpy().argsort(kind="stable")[::-1]
    return [cells[i] for i in order[:n]]


def _contexts(result: Any, cell: str) -> list[list[str]]:
    """Per question, the texts of the cell's retrieved chunks, best first."""
    row = result.table.set_index("cell").loc[cell]
    label = row["chunker"]
    spec = next(s for s in result.config.chunkers if s.label == label)
    if spec.kind.index == "parents":
        raise ValueError(f"{cell}: answers for small-to-big (Hierarchical) cells need the merged parents, which "
                         "the run does not keep; choose another cell.")
    _, ranking = result.ranking_of(cell)
    chunks = [c for cs in result.chunk_objects[label].values() for c in cs]
    k = int(row["k"])
    return [[chunks[j].text for j in ranked[:k]] for ranked in ranking]


def _answer_request(question: str, passages: Sequence[str], max_tokens: int) -> dict[str, Any]:
    context = "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(passages, start=1)) or "(no passage)"
    return {"messages": [{"role": "system", "content": _ANSWER_SYSTEM},
                         {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question}"}],
            "max_tokens": max_tokens, "temperature": 0.0}


def _judge_request(question: str, passages: Sequence[str], answer: str, reference: str | None) -> dict[str, Any]:
    context = "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(passages, start=1)) or "(no passage)"
    ref = reference if reference else "(none given: judge only grounded; set correct to false)"
    return {"messages": [{"role": "system", "content": _JUDGE_SYSTEM},
                         {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question}\n\n"
                                                     f"Reference answer: {ref}\n\nAnswer to grade: {answer}"}],
            "max_tokens": 64, "temperature": 0.0}


def answer_cells(
    result: Any,
    llm: Any,
    cells: Sequence[str] | str = "best:3",
    *,
    judge: bool = True,
    max_answer_tokens: int = 128,
    metric: str = "recall",
) -> AnswerResult:
    """Answer every question from each chosen cell's retrieved chunks, and score the answers.

    Parameters
    ----------
    result : GridResult
        A run of :func:`chunkwise.evaluation.grid.run_grid` (it keeps the rankings and chunks).
        Its questions may carry ``reference_answer`` (str); without it a question gets
        ``token_f1``, ``exact_match`` and ``correct`` NaN.
    llm : ChatModel
        :class:`chunkwise.llm.LLMClient` (with a cache file, so a rerun makes no request) or any
        object with ``chat_many`` / ``chat_json_many`` (:class:`chunkwise.llm.ChatModel`).
    cells : "best:N", "all", a comma-separated string or a list of cell names, default "best:3"
        Which cells to answer (:func:`select_cells`): each costs one generation (and one judge
        call) per question.
    judge : bool, default True
        Also ask ``llm`` for ``correct`` and ``grounded``.
    max_answer_tokens : int, default 128
    metric : str, default "recall"
        The table column ``best:N`` ranks by.

    Returns
    -------
    AnswerResult

    Raises
    ------
    ValueError
        For an unknown cell, a Hierarchical cell, a bad ``max_answer_tokens``, or an ``llm``
        without ``chat_many``.
    """
    from chunkwise.tokens import get_encoding

    if not callable(getattr(llm, "chat_many", None)):
        raise ValueError("llm must be a chat model with chat_many (chunkwise.llm.LLMClient or OnDemandLocalClient).")
    if isinstance(max_answer_tokens, bool) or not isinstance(max_answer_tokens, int) or max_answer_tokens < 1:
        raise ValueError(f"max_answer_tokens must be an int >= 1, got {max_answer_tokens!r}.")
    chosen = select_cells(result, cells, metric)
    q = result.questions
    refs = [r if isinstance(r, str) and r.strip() else None
            for r in (q["reference_answer"] if "reference_answer" in q.columns else [None] * len(q))]
    questions = [str(t) for t in q["question"]]
    ids = list(q["question_id"])
    enc = get_encoding("cl100k_base")
    before = llm.stats() if callable(getattr(llm, "stats", None)) else None
    rows: list[dict[str, Any]] = []
    for cell in chosen:
        contexts = _contexts(result, cell)
        replies = llm.chat_many([_answer_request(qt, ctx, max_answer_tokens) for qt, ctx in zip(questions, contexts)])
        answers: list[str | None] = []
        for qid, reply in zip(ids, replies):
            row: dict[str, Any] = {"cell": cell, "question_id": qid, "answer": None, "error": "",
                                   **dict.fromkeys(ANSWER_METRICS, np.nan),
                                   "answer_tokens": np.nan, "answer_seconds": np.nan}
            if reply.ok:
                resp = reply.output
                row["answer"] = resp.text.strip()
                row["answer_tokens"] = float(len(enc.encode_ordinary(row["answer"])))
                row["answer_seconds"] = float(resp.latency_s)
            else:
                row["error"] = f"generation failed: {type(reply.error).__name__}: {reply.error}"
            answers.append(row["answer"])
            rows.append(row)
        cell_rows = rows[-len(ids):]
        for row, ref in zip(cell_rows, refs):
            if row["answer"] is not None and ref is not None:
                row["token_f1"] = token_f1(row["answer"], ref)
                row["exact_match"] = exact_match(row["answer"], ref)
        if judge:
            todo = [i for i, a in enumerate(answers) if a is not None]
            verdicts = llm.chat_json_many(
                [_judge_request(questions[i], contexts[i], answers[i] or "", refs[i]) for i in todo],
                schema=_JUDGE_SCHEMA,
            )
            for i, v in zip(todo, verdicts):
                row = cell_rows[i]
                if v.ok:
                    value, _ = v.output
                    row["grounded"] = float(bool(value["grounded"]))
                    if refs[i] is not None:
                        row["correct"] = float(bool(value["correct"]))
                else:
                    row["error"] = f"judge failed: {type(v.error).__name__}: {v.error}"
    per_q = pd.DataFrame(rows)
    table_rows = []
    for cell, frame in per_q.groupby("cell", sort=False):
        failed = frame["answer"].isna()
        table_rows.append({
            "cell": cell, "n_answered": int((~failed).sum()), "n_failed": int(failed.sum()),
            **{m: float(frame[m].mean()) if frame[m].notna().any() else np.nan for m in ANSWER_METRICS},
            "answer_tokens": float(frame["answer_tokens"].mean()) if (~failed).any() else np.nan,
            "answer_seconds": float(frame["answer_seconds"].mean()) if (~failed).any() else np.nan,
        })
    after = llm.stats() if before is not None else None
    calls = int(after["calls"] - before["calls"]) if after is not None else 0
    hits = int(after["cache_hits"] - before["cache_hits"]) if after is not None else 0
    return AnswerResult(per_q, pd.DataFrame(table_rows), llm_calls=calls, llm_cache_hits=hits)


def merge_answers(table: pd.DataFrame, answers: AnswerResult) -> pd.DataFrame:
    """The grid's cell table with the answer columns joined (NaN for cells not answered)."""
    extra = answers.table.drop(columns=["n_answered"]).rename(columns={"n_failed": "answers_failed"})
    return table.merge(extra, on="cell", how="left")


def answers_text(answers: AnswerResult, metric: str = "token_f1") -> str:
    """The answer table as aligned text (percent metrics), sorted by ``metric``."""
    t = answers.table.copy()
    view = pd.DataFrame({"cell": t["cell"]})
    for m in ANSWER_METRICS:
        view[m] = (100 * t[m]).map(lambda v: "  n/a" if not np.isfinite(v) else f"{v:5.1f}")
    view["ans_tok"] = t["answer_tokens"].map(lambda v: f"{v:6.1f}" if np.isfinite(v) else "   n/a")
    view["ans_s"] = t["answer_seconds"].map(lambda v: f"{v:6.2f}" if np.isfinite(v) else "   n/a")
    view["failed"] = t["n_failed"]
    order = t[metric].fillna(-1).to_numpy().argsort(kind="stable")[::-1]
    return view.iloc[order].to_string(index=False)


