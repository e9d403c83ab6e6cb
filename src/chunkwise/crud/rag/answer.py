"""Answer generation for CRUD-RAG's question answering, and a robust reader of the answer tag.

CRUD-RAG (``src/tasks/quest_answer.py``, ``QuestAnswer.model_generation``) fills its prompt
``src/prompts/quest_answer.txt`` with the question and the retrieved text, asks the model
(temperature 0.1, at most 1280 new tokens: ``quick_start.py`` defaults) to write the answer
between ``<response>`` and ``</response>``, and keeps ``reply.split('<response>')[-1]
.split('</response>')[0].strip()`` -- whatever the reply looks like; an empty result marks the item
invalid. We use our own prompt (:data:`QA_PROMPT`, in Chinese, with the same answer tag) and
:func:`parse_response`, which extracts the same text in the well-formed case and *names* every
other case instead of silently passing it on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "CRUD_MAX_NEW_TOKENS",
    "CRUD_TEMPERATURE",
    "PARSE_STATUSES",
    "QA_PROMPT",
    "QA_PROMPT_NO_CONTEXT",
    "AnswerResult",
    "ParsedResponse",
    "answer",
    "answer_many",
    "build_prompt",
    "model_identity",
    "parse_response",
]

#: CRUD-RAG's generation temperature (``quick_start.py --temperature``).
CRUD_TEMPERATURE = 0.1
#: CRUD-RAG's generation limit (``quick_start.py --max_new_tokens``).
CRUD_MAX_NEW_TOKENS = 1280

#: Our question-answering prompt (with retrieved passages).
QA_PROMPT = (
    "你是一名严谨的新闻问答助手。下面是从新闻资料库中检索到的若干段资料，"
    "请主要依据这些资料回答问题；资料不足时，可以结合你已有的知识补充，但不要编造资料中没有的具体数字或细节。"
    "回答要简洁、准确，直接给出要点。\n\n"
    "检索到的资料：\n{contexts}\n\n"
    "问题：{question}\n\n"
    "请把最终答案写在<response>和</response>两个标签之间，标签外不要写其他内容。"
)

#: The same prompt without retrieval (the "w/o RAG" baseline).
QA_PROMPT_NO_CONTEXT = (
    "你是一名严谨的新闻问答助手。本题不提供检索资料，请依据你已有的知识回答问题；"
    "不确定的具体数字或细节不要编造。回答要简洁、准确，直接给出要点。\n\n"
    "问题：{question}\n\n"
    "请把最终答案写在<response>和</response>两个标签之间，标签外不要写其他内容。"
)

#: Every status :func:`parse_response` can report; only ``"ok"`` is a clean parse.
PARSE_STATUSES = (
    "ok",  # exactly one <response>...</response> with non-empty content
    "multiple_tags",  # several tag pairs (or stray tags): the last non-empty pair is used
    "unclosed_tag",  # <response> without </response>: the text after the last <response>
    "missing_open_tag",  # </response> without <response>: the text before the first </response>
    "missing_tags",  # no answer tag at all: the whole reply (thinking removed) is the text
    "unclosed_think",  # the reply is an unfinished <think> block (usually hit max_tokens)
    "empty",  # nothing to use: empty reply or empty tag content
)

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_OPEN = re.compile(r"<\s*response\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"<\s*/\s*response\s*>", re.IGNORECASE)
_PAIR = re.compile(r"<\s*response\s*>(.*?)<\s*/\s*response\s*>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ParsedResponse:
    """The answer read from a reply.

    Attributes
    ----------
    text : str
        The answer (stripped); ``""`` for ``"empty"`` and ``"unclosed_think"``.
    status : str
        One of :data:`PARSE_STATUSES`.
    """

    text: str
    status: str

    @property
    def ok(self) -> bool:
        """True only for a clean parse (``status == "ok"``)."""
        return self.status == "ok"


def parse_response(raw: str | None) -> ParsedResponse:
    """Extract the answer from ``<response>...</response>``, reporting anything unusual.

    ``<think>...</think>`` blocks are removed first (and everything before a stray ``</think>``);
    an unfinished ``<think>`` block hides everything after it. Then, by the answer tags left:

    - one ``<response>...</response>`` pair: its content, status ``"ok"``;
    - several pairs or unbalanced extra tags: the last pair with non-empty content,
      ``"multiple_tags"``;
    - only ``<response>``: the text after the last one, ``"unclosed_tag"`` (typically cut by
      ``max_tokens``);
    - only ``</response>``: the text before the first one, ``"missing_open_tag"``;
    - no tag: the whole remaining reply, ``"missing_tags"``.

    Whatever the case, an empty result has status ``"empty"`` (or ``"unclosed_think"``).

    Parameters
    ----------
    raw : str or None
        The model's reply.

    Returns
    -------
    ParsedResponse

    Examples
    --------
    >>> parse_response("<think>hmm</think><response> 北京 </response>")
    ParsedResponse(text='北京', status='ok')
    >>> parse_response("答案是北京").status
    'missing_tags'
    """
    body = raw or ""
    body = _THINK_BLOCK.sub("", body)
    closes = list(_THINK_CLOSE.finditer(body))
    if closes:  # a closing tag without its opening one: what precedes it is thinking
        body = body[closes[-1].end():]
    m = _THINK_OPEN.search(body)
    unfinished_think = m is not None
    if m is not None:
        body = body[: m.start()]

    opens = list(_OPEN.finditer(body))
    ends = list(_CLOSE.finditer(body))
    if not opens and not ends:
        text = body.strip()
        if not text:
            return ParsedResponse("", "unclosed_think" if unfinished_think else "empty")
        return ParsedResponse(text, "missing_tags")
    if opens and not ends:
        text = body[opens[-1].end():].strip()
        return ParsedResponse(text, "unclosed_tag" if text else "empty")
    if ends and not opens:
        text = body[: ends[0].start()].strip()
        return ParsedResponse(text, "missing_open_tag" if text else "empty")
    contents = [p.group(1).strip() for p in _PAIR.finditer(body)]
    if len(opens) == 1 and len(ends) == 1 and len(contents) == 1:
        return ParsedResponse(contents[0], "ok" if contents[0] else "empty")
    nonempty = [c for c in contents if c]
    if not nonempty:
        # e.g. "</response> text <response>": no well-formed pair
        text = body[opens[-1].end():].strip() if opens[-1].start() > ends[-1].start() else ""
        return ParsedResponse(text, "multiple_tags" if text else "empty")
    return ParsedResponse(nonempty[-1], "multiple_tags")


def _context_text(c: Any) -> str:
    if isinstance(c, str):
        return c
    text = getattr(c, "text", None)
    if isinstance(text, str):
        return text
    return str(c[1])


def build_prompt(question: str, contexts: Sequence[Any] = ()) -> str:
    """The user message for ``question`` and its retrieved ``contexts`` (strings or hits).

    Passages are numbered ``[1]``, ``[2]``, ... in retrieval order; with no context the
    no-retrieval prompt is used.
    """
    texts = [_context_text(c).strip() for c in contexts]
    texts = [t for t in texts if t]
    if not texts:
        return QA_PROMPT_NO_CONTEXT.format(question=question.strip())
    joined = "\n".join(f"[{i}] {t}" for i, t in enumerate(texts, start=1))
    return QA_PROMPT.format(contexts=joined, question=question.strip())


def model_identity(llm: ChatModel) -> str:
    """What identifies the generating model: ``llm.model_identity``, else ``llm.name``, else its type."""
    for attr in ("model_identity", "name"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(llm).__name__


@dataclass(frozen=True)
class AnswerResult:
    """One generated answer.

    Attributes
    ----------
    text : str
        The parsed answer (see :func:`parse_response`).
    raw : str
        The reply as received.
    model_identity : str
    status : str
        The parse status (:data:`PARSE_STATUSES`).
    cached : bool
        Whether the reply came from the LLM cache.
    usage : dict
        Token counts reported for the reply (empty when unknown).
    prompt : str
        The user message sent.
    latency_s : float
        Seconds the request took when the reply was generated (for a cached reply: the
        original call's); NaN when the llm does not report it.
    """

    text: str
    raw: str
    model_identity: str
    status: str = "ok"
    cached: bool = False
    usage: dict[str, int] = field(default_factory=dict)
    prompt: str = ""
    latency_s: float = float("nan")

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def answer(
    question: str,
    contexts: Sequence[Any],
    llm: ChatModel,
    *,
    temperature: float = CRUD_TEMPERATURE,
    max_tokens: int = CRUD_MAX_NEW_TOKENS,
    **chat_kw: Any,
) -> AnswerResult:
    """Answer ``question`` from ``contexts`` with ``llm`` (one chat request, cached by the client).

    A batch of one through :func:`answer_many` (the step is written once).

    Parameters
    ----------
    question : str
    contexts : sequence of str or Hit
        Retrieved passages, best first; empty for the no-retrieval baseline.
    llm : ChatModel
        E.g. :class:`chunkwise.llm.LLMClient`. ``chat`` may return an object with ``.text``
        (and optionally ``.cached``, ``.usage``) or a plain string.
    temperature, max_tokens
        CRUD-RAG's 0.1 and 1280 by default.
    **chat_kw
        Further arguments for ``chat`` (e.g. ``seed``).

    Returns
    -------
    AnswerResult
        Parse failures are recorded in ``status``, never raised.

    Raises
    ------
    chunkwise.llm.LLMError
        When the request fails (never turned into an empty answer).
    """
    return answer_many([(question, contexts)], llm, temperature=temperature, max_tokens=max_tokens, **chat_kw)[0]


def _result(resp: Any, prompt: str, llm: ChatModel) -> AnswerResult:
    if isinstance(resp, str):
        raw, cached, usage, latency = resp, False, {}, float("nan")
    else:
        raw = getattr(resp, "text", "") or ""
        cached = bool(getattr(resp, "cached", False))
        usage = dict(getattr(resp, "usage", {}) or {})
        latency = getattr(resp, "latency_s", None)
        latency = float(latency) if isinstance(latency, (int, float)) and not isinstance(latency, bool) else float("nan")
    parsed = parse_response(raw)
    return AnswerResult(
        text=parsed.text, raw=raw, model_identity=model_identity(llm), status=parsed.status,
        cached=cached, usage=usage, prompt=prompt, latency_s=latency,
    )


def answer_many(
    questions_contexts: Sequence[tuple[str, Sequence[Any]]],
    llm: ChatModel,
    *,
    temperature: float = CRUD_TEMPERATURE,
    max_tokens: int = CRUD_MAX_NEW_TOKENS,
    max_concurrency: int | None = None,
    order: str = "prefix",
    **chat_kw: Any,
) -> list[AnswerResult]:
    """:func:`answer` for many independent questions, through the LLM's batch call.

    The requests are exactly those :func:`answer` sends, so the replies (and the cache keys)
    are the same; cached ones are never sent, the others go out at most ``max_concurrency`` at
    once (:meth:`chunkwise.llm.LLMClient.chat_many`; one at a time for an llm without it), by
    default sorted so that prompts with a common prefix follow each other (``order="prefix"``:
    a llama.cpp server then computes the shared instructions and first passages once).

    Parameters
    ----------
    questions_contexts : sequence of (question, contexts)
        As the first two arguments of :func:`answer`.
    llm, temperature, max_tokens, **chat_kw
        As in :func:`answer`.
    max_concurrency : int, optional
        Requests in flight at once (default: the client's).
    order : {"prefix", "input"}, default "prefix"
        Send order of the misses (results are in input order either way).

    Returns
    -------
    list of AnswerResult
        In input order.

    Raises
    ------
    chunkwise.llm.LLMError
        The first failed request's error, raised after all the others have finished (their
        replies are cached); a failure is never turned into an empty answer.
    """
    from chunkwise.llm.batch import chat_many

    prompts = [build_prompt(q, c) for q, c in questions_contexts]
    results = chat_many(
        llm, [[{"role": "user", "content": p}] for p in prompts], max_concurrency=max_concurrency,
        errors="raise", order=order, temperature=temperature, max_tokens=max_tokens, **chat_kw,
    )
    return [_result(r.output, p, llm) for r, p in zip(results, prompts)]
