"""Reranking: a cross-encoder, or an LLM's yes/no judgement, reorders a retriever's candidates.

CRUD-RAG's ``hybrid_rerank`` baseline reranks the union of the BM25 and dense top-k lists with
BAAI/bge-reranker-base; :class:`RerankRetriever` does the same with any reranker, and
:func:`make_reranker` falls back to :class:`LLMYesNoReranker` when no cross-encoder can be loaded
(offline).
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from chunkwise._env import cache_root
from chunkwise._env import offline as _offline_flag
from chunkwise._sqlite import SQLiteStore
from chunkwise.retrieval.base import DEFAULT_TOP_K, Hit, check_top_k

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "DEFAULT_CROSS_ENCODER",
    "CachedReranker",
    "CrossEncoderReranker",
    "LLMYesNoReranker",
    "RerankRetriever",
    "RerankScoreCache",
    "make_reranker",
    "parse_yes_no",
]

#: The default cross-encoder (CRUD-RAG's reranker: ``hybrid_rerank.py`` loads a local copy of it).
DEFAULT_CROSS_ENCODER = "BAAI/bge-reranker-base"


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` (default BAAI/bge-reranker-base), loaded lazily.

    ``score(question, texts)`` returns the model's relevance scores (higher is better; the
    model's own activation, a monotone map of FlagReranker's logits, so the ranking is the same).
    """

    def __init__(self, model: str = DEFAULT_CROSS_ENCODER, batch_size: int = 32, device: str | None = "cpu", max_length: int = 512) -> None:
        self.model_id = model
        self.batch_size = batch_size
        self.device = device
        self.max_length = max_length
        self.name = f"cross-encoder:{model}"
        self._model: Any = None

    def load(self) -> Any:
        """Load the model once.

        Raises
        ------
        RuntimeError
            When the weights cannot be loaded (no network with ``HF_HUB_OFFLINE`` set, a wrong id, a
            folder without a model); the message names the model and what to do.
        """
        if self._model is None:
            from sentence_transformers import CrossEncoder

            try:
                self._model = CrossEncoder(self.model_id, device=self.device, max_length=self.max_length)
            except (OSError, ValueError) as exc:
                where = "HF_HUB_OFFLINE is set, so only a local copy can load" if _offline_flag() else \
                    "is the id right and the hub reachable?"
                raise RuntimeError(
                    f"cannot load the cross-encoder {self.model_id!r} ({type(exc).__name__}: {exc}); {where}. "
                    "Pass a hub model id that this machine can download, or a folder holding the model's "
                    "weights (sentence-transformers' CrossEncoder format)."
                ) from exc
        return self._model

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text for ``question`` (higher is better; loads the model)."""
        if not texts:
            return []
        out = self.load().predict([(question, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False)
        return [float(x) for x in np.asarray(out, dtype=np.float64).reshape(len(texts))]


class RerankScoreCache(SQLiteStore):
    """Content-addressed on-disk store of reranker scores (SQLite), so a rerun scores nothing.

    One row per key ``sha256(reranker name + "\\0" + question + "\\0" + passage)`` holding the score
    as a float. Created on first write, WAL journal, one transaction per :meth:`put_many`, so an
    interrupted run keeps what it stored (:class:`chunkwise._sqlite.SQLiteStore`).

    Parameters
    ----------
    path : path-like, optional
        The SQLite file. Default ``$CHUNKWISE_CACHE_DIR/rerank.sqlite``.

    Raises
    ------
    CacheFileError
        From a read or write of a broken file (the message says it is safe to delete).
    """

    SCHEMA = "CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, score REAL NOT NULL)"
    TABLE = "scores"
    FILENAME = "rerank.sqlite"
    KIND = "reranker score cache"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        super().__init__(path if path is not None else cache_root() / self.FILENAME, timeout=timeout)

    @staticmethod
    def key(reranker: str, question: str, passage: str) -> str:
        """The cache key of one (question, passage) pair under the reranker called ``reranker``."""
        return hashlib.sha256("\0".join((reranker, question, passage)).encode("utf-8")).hexdigest()

    def get_many(self, keys: Sequence[str]) -> dict[str, float]:
        """The stored scores of ``keys`` (only those found; ``{}`` before the file exists)."""
        keys = list(dict.fromkeys(keys))
        if not keys or (self._conn is None and not self.path.exists()):
            return {}
        found: dict[str, float] = {}
        with self._lock, self._guard("reading"):
            conn = self._connect()
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                rows = conn.execute(f"SELECT key, score FROM scores WHERE key IN ({','.join('?' * len(part))})",
                                    part).fetchall()
                found.update((k, float(v)) for k, v in rows)
        return found

    def put_many(self, items: Sequence[tuple[str, float]]) -> None:
        """Store ``(key, score)`` pairs in one transaction.

        Raises
        ------
        ValueError
            If a score is not a finite number (nothing is stored).
        """
        rows = [(k, float(v)) for k, v in items]
        bad = [k for k, v in rows if not np.isfinite(v)]
        if bad:
            raise ValueError(f"refusing to cache {len(bad)} non-finite reranker score(s) in {self.path}; "
                             "nothing was stored. Fix the reranker that produced them.")
        if rows:
            with self._lock, self._guard("writing"):
                self._write(self._connect(), "INSERT OR REPLACE INTO scores (key, score) VALUES (?, ?)", rows)


class CachedReranker:
    """A reranker whose scores are looked up in a :class:`RerankScoreCache` first.

    Only the (question, passage) pairs the cache lacks reach ``reranker.score``; their scores are
    stored before they are returned. ``n_scored`` counts them.

    Parameters
    ----------
    reranker : object with ``score(question, texts) -> list[float]`` and ``name``
        The name is part of the key: two models never share a score.
    cache : RerankScoreCache, optional
        Default: the file in the cache root.

    Raises
    ------
    ValueError
        (from :meth:`score`) If the reranker returns a wrong number of scores or a non-finite one.
    """

    def __init__(self, reranker: Any, cache: RerankScoreCache | None = None) -> None:
        self.reranker = reranker
        self.name = str(reranker.name)
        self.cache = cache if cache is not None else RerankScoreCache()
        self.n_scored = 0

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """One score per text for ``question`` (higher is better), from the cache where stored."""
        keys = [RerankScoreCache.key(self.name, question, t) for t in texts]
        found = self.cache.get_many(keys)
        todo = list(dict.fromkeys(i for i, k in enumerate(keys) if k not in found))
        if todo:
            fresh = [float(x) for x in self.reranker.score(question, [texts[i] for i in todo])]
            if len(fresh) != len(todo):
                raise ValueError(f"reranker {self.name!r} returned {len(fresh)} scores for {len(todo)} passages.")
            if not all(np.isfinite(fresh)):
                raise ValueError(f"reranker {self.name!r} returned a non-finite score for {question!r}.")
            self.cache.put_many([(keys[i], v) for i, v in zip(todo, fresh)])
            found.update((keys[i], v) for i, v in zip(todo, fresh))
            self.n_scored += len(todo)
        return [found[k] for k in keys]


_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_YES_RE = re.compile(r"^(?:(?:yes|y|true)\b|是|有帮助|有用|相关|能|可以)")
_NO_RE = re.compile(r"^(?:(?:no|n|false)\b|否|不|没有|无|無)")


def parse_yes_no(reply: str) -> bool | None:
    """Read a yes/no judgement: ``True``, ``False``, or ``None`` when the reply says neither.

    Thinking blocks are removed; then the first word decides (``yes``/``是``/``有帮助``... or
    ``no``/``否``/``不``/``没有``...); failing that, a lone ``yes`` or ``no`` word anywhere.
    """
    text = _THINK_RE.sub("", reply or "")
    if "</think>" in text.lower():
        text = text[text.lower().rfind("</think>") + len("</think>"):]
    text = text.strip().strip("\"'“”‘’`*「」【】[]()（）:：.。!！ \n\t").lower()
    if not text:
        return None
    if _NO_RE.match(text):  # before yes: "不是" starts with 不
        return False
    if _YES_RE.match(text):
        return True
    words = set(re.findall(r"[a-z]+", text))
    if "yes" in words and "no" not in words:
        return True
    if "no" in words and "yes" not in words:
        return False
    return None


_YES_NO_PROMPT = (
    "请判断下面这段文字能否帮助回答问题。\n\n"
    "问题：{question}\n\n"
    "文字：{passage}\n\n"
    "这段文字对回答该问题有帮助吗？只回答 yes 或 no，不要解释。"
)


class LLMYesNoReranker:
    """Rerank by an LLM's yes/no judgement of each passage: score 1 for yes, 0 otherwise.

    The offline substitute for a cross-encoder: one chat request per (question, passage), at
    temperature 0, through the client's response cache (and a per-process memo), so a rerun
    makes no requests. Replies that are neither yes nor no score 0 and are counted in
    :attr:`n_unparsed`. The prompt is written in Chinese, for CRUD-RAG's questions; its text is
    part of the response cache's keys, so changing it re-asks every judgement.

    Parameters
    ----------
    llm : ChatModel
        E.g. :class:`chunkwise.llm.LLMClient`; ``chat`` may return an object with ``.text`` or a
        string.
    max_tokens : int, default 8
    """

    def __init__(self, llm: ChatModel, max_tokens: int = 8) -> None:
        if not callable(getattr(llm, "chat", None)):
            raise TypeError("llm must have a chat(messages, ...) method (e.g. chunkwise.llm.LLMClient)")
        self.llm = llm
        self.max_tokens = max_tokens
        identity = getattr(llm, "model_identity", None) or type(llm).__name__
        self.name = f"llm-yes-no:{identity}"
        self._memo: dict[tuple[str, str], float] = {}
        self.n_calls = 0
        self.n_unparsed = 0

    def judge(self, question: str, passage: str) -> float:
        """1.0 when the LLM says the passage helps answer the question, else 0.0 (memoised).

        A batch of one through :meth:`score` (the step is written once)."""
        return self.score(question, [passage])[0]

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """1.0 or 0.0 per text: whether the LLM says it helps answer ``question``, in order.

        Judgements are memoised per (question, text); the ones not memoised go out as one batch
        through the LLM's batch call (:func:`chunkwise.llm.batch.chat_many`: cached replies
        first, the misses at most ``llm.max_concurrency`` at once); a failed request is raised
        after the others have finished. A reply that is neither yes nor no counts as no and
        is counted in ``n_unparsed``.
        """
        from chunkwise.llm.batch import chat_many

        new = list(dict.fromkeys(t for t in texts if (question, t) not in self._memo))
        if new:
            prompts = [_YES_NO_PROMPT.format(question=question, passage=t) for t in new]
            results = chat_many(self.llm, [[{"role": "user", "content": p}] for p in prompts], errors="raise",
                                temperature=0.0, max_tokens=self.max_tokens)
            for t, res in zip(new, results):
                resp = res.output
                self.n_calls += 1
                verdict = parse_yes_no(getattr(resp, "text", resp) if not isinstance(resp, str) else resp)
                if verdict is None:
                    self.n_unparsed += 1
                self._memo[(question, t)] = 1.0 if verdict else 0.0
        return [self._memo[(question, t)] for t in texts]


def make_reranker(model: str | None = "auto", llm: ChatModel | None = None) -> Any:
    """A reranker: the cross-encoder when it loads, else the LLM yes/no judge.

    Parameters
    ----------
    model : str or None, default "auto"
        ``"auto"``: try :data:`DEFAULT_CROSS_ENCODER` (skipped when ``HF_HUB_OFFLINE`` is set), fall back
        to ``llm``. A model id or folder: that cross-encoder, no fallback. ``"llm"`` or ``None``:
        the LLM judge.
    llm : ChatModel, optional

    Raises
    ------
    RuntimeError
        When no cross-encoder loads and no ``llm`` is given.
    """
    if model in (None, "llm"):
        if llm is None:
            raise RuntimeError("the LLM reranker needs an llm")
        return LLMYesNoReranker(llm)
    if model == "auto":
        why = "HF_HUB_OFFLINE is set"
        if not _offline_flag():
            ce = CrossEncoderReranker(DEFAULT_CROSS_ENCODER)
            try:
                ce.load()
                return ce
            except Exception as exc:  # offline, missing weights
                why = f"{type(exc).__name__}: {exc}"
        if llm is None:
            raise RuntimeError(f"no cross-encoder reranker ({why}) and no llm for the yes/no fallback")
        warnings.warn(
            f"reranking with the LLM's yes/no judgement in place of {DEFAULT_CROSS_ENCODER} ({why}).",
            UserWarning,
            stacklevel=2,
        )
        return LLMYesNoReranker(llm)
    ce = CrossEncoderReranker(model)
    ce.load()
    return ce


class RerankRetriever:
    """Rerank a hybrid retriever's candidates (CRUD-RAG's ``EnsembleRerankRetriever``).

    The candidates are every chunk of the fused lists (up to ``2 * top_k``); they are ordered by
    the reranker's score, ties by their hybrid (RRF) rank, and the ``top_k`` best returned with
    the reranker's score.

    Parameters
    ----------
    base : HybridRetriever
        Anything with ``candidates(question, top_k)`` (or ``retrieve``).
    reranker : object with ``score(question, texts) -> list[float]`` and ``name``
    name : str, default "hybrid_rerank"
    """

    def __init__(self, base: Any, reranker: Any, name: str = "hybrid_rerank") -> None:
        self.base = base
        self.reranker = reranker
        self.name = name

    def retrieve(self, question: str, top_k: int = DEFAULT_TOP_K) -> list[Hit]:
        """The ``top_k`` best candidates by the reranker's score (ties by the base's order).

        Raises
        ------
        ValueError
            If ``top_k`` is not an int >= 0, or the reranker returns a wrong number of scores.
        """
        top_k = check_top_k(top_k)
        get = getattr(self.base, "candidates", None) or self.base.retrieve
        cands = list(get(question, top_k))
        if not cands or top_k == 0:
            return []
        scores = self.reranker.score(question, [h[1] for h in cands])
        if len(scores) != len(cands):
            raise ValueError(f"the reranker returned {len(scores)} scores for {len(cands)} passages")
        order = sorted(range(len(cands)), key=lambda i: (-float(scores[i]), i))[:top_k]
        return [Hit(cands[i][0], cands[i][1], float(scores[i])) for i in order]
