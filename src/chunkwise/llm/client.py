"""One client for any OpenAI-compatible chat-completions endpoint.

:class:`LLMClient` wraps the official ``openai`` package so the same code talks to the
OpenAI API, a local ``llama-cpp-python`` server, vLLM, Ollama's OpenAI endpoint, or any
other server that speaks ``POST /v1/chat/completions``. On top of the ``openai`` client it
adds what reproducible experiments need:

- **configuration from the environment** -- ``CHUNKWISE_LLM_BASE_URL``,
  ``CHUNKWISE_LLM_MODEL``, ``CHUNKWISE_LLM_API_KEY`` (falling back to ``OPENAI_BASE_URL`` and
  ``OPENAI_API_KEY``); :meth:`LLMClient.from_env` returns ``None`` when nothing is
  configured, so callers can report "skipped: no LLM configured";
- **retries** with exponential backoff on connection errors, timeouts, HTTP 429 and 5xx
  (the ``openai`` client runs with ``max_retries=0``; the loop here is explicit and tested),
  ending in an :class:`LLMRequestError` that names the endpoint and the number of attempts;
- **a content-addressed response cache** (:mod:`chunkwise.llm.cache`), so reruns and
  readers of a committed cache make no requests;
- **usage accounting** -- per reply (:class:`LLMResponse`) and summed on the client
  (:meth:`LLMClient.stats`);
- **structured output** -- :meth:`LLMClient.chat_json` asks for JSON, extracts it robustly
  from the reply (code fences, leading prose), validates it against a JSON schema or a
  callable, and re-asks with the error at most ``max_repairs`` times before raising
  :class:`LLMJSONError`;
- **batches with bounded concurrency** -- :meth:`LLMClient.chat_many` and
  :meth:`LLMClient.chat_json_many` look every request up in the cache first, send only the
  misses from at most ``max_concurrency`` worker threads, and return one
  :class:`LLMResult` per request in input order (a reply, or the error of that item);
  :class:`SequentialBatches` gives the same batch calls, as loops, to any class with ``chat``
  and ``chat_json`` (the protocol the pipelines use is :class:`chunkwise.llm.ChatModel`).

References
----------
.. [1] OpenAI API reference, "Create chat completion",
   https://platform.openai.com/docs/api-reference/chat/create
.. [2] openai-python, https://github.com/openai/openai-python
.. [3] JSON Schema validation with the ``jsonschema`` package,
   https://python-jsonschema.readthedocs.io/
"""

from __future__ import annotations

import json
import math
import numbers
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai

from chunkwise.llm import _deadline
from chunkwise.llm.cache import (
    CACHE_MODES,
    LLMCache,
    NotCachedError,
    canonical_json,
    document_key,
    request_document,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_CACHE_MODE",
    "ENV_MODEL",
    "LLMClient",
    "LLMError",
    "LLMJSONError",
    "LLMRequestError",
    "LLMResponse",
    "LLMResult",
    "SequentialBatches",
    "model_cost",
    "ENV_MAX_CONCURRENCY",
    "DEFAULT_MAX_CONCURRENCY",
    "extract_json",
    "is_configured",
    "iter_json_candidates",
]

#: Environment variable naming the endpoint, e.g. ``http://127.0.0.1:8080/v1``.
ENV_BASE_URL = "CHUNKWISE_LLM_BASE_URL"
#: Environment variable naming the model (as the endpoint knows it).
ENV_MODEL = "CHUNKWISE_LLM_MODEL"
#: Environment variable holding the API key (local servers usually need none).
ENV_API_KEY = "CHUNKWISE_LLM_API_KEY"
#: Environment variable selecting the cache mode for :meth:`LLMClient.from_env`.
ENV_CACHE_MODE = "CHUNKWISE_LLM_CACHE_MODE"

#: Environment variable giving the default :attr:`LLMClient.max_concurrency`.
ENV_MAX_CONCURRENCY = "CHUNKWISE_LLM_MAX_CONCURRENCY"
#: Requests in flight at once in a batch call when neither the call, the client nor the environment says.
DEFAULT_MAX_CONCURRENCY = 4

#: Endpoint used when no base URL is configured.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: Key sent to endpoints that need none (the ``openai`` client insists on some key).
_PLACEHOLDER_KEY = "sk-no-key-required"
#: Upper bound of one backoff sleep, seconds (also caps a server's ``Retry-After``).
MAX_BACKOFF_S = 60.0
#: Characters of the last reply quoted in an :class:`LLMJSONError`.
_REPLY_QUOTE_CHARS = 1000
#: At most this many JSON candidates are tried per reply.
_MAX_CANDIDATES = 32
#: At most this many ``{`` / ``[`` positions are tried when scanning prose.
_MAX_SCAN_POSITIONS = 256


# -- errors -------------------------------------------------------------------------------


class LLMError(RuntimeError):
    """Base class of the errors raised by :mod:`chunkwise.llm`."""


class LLMRequestError(LLMError):
    """A request failed: the last of its retries, or an error that is not retried.

    Attributes
    ----------
    endpoint : str
        The base URL the request went to.
    model : str or None
        The model requested.
    attempts : int
        Requests made (1 + retries used).
    status_code : int or None
        HTTP status of the last failure, when there was a response.
    last_error : BaseException or None
        The last underlying exception (also chained as ``__cause__``).
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str,
        model: str | None,
        attempts: int,
        status_code: int | None = None,
        last_error: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.model = model
        self.attempts = attempts
        self.status_code = status_code
        self.last_error = last_error


class LLMJSONError(LLMError):
    """:meth:`LLMClient.chat_json` got no valid JSON after all its repair attempts.

    Attributes
    ----------
    reply : str
        The last reply, in full (the message quotes it truncated).
    error : str
        The last extraction or validation error.
    attempts : int
        Replies obtained (1 + repairs).
    response : LLMResponse
        The last response.
    """

    def __init__(self, message: str, *, reply: str, error: str, attempts: int, response: LLMResponse) -> None:
        super().__init__(message)
        self.reply = reply
        self.error = error
        self.attempts = attempts
        self.response = response


# -- response -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LLMResponse:
    """One chat reply.

    Attributes
    ----------
    text : str
        The assistant message content (``""`` when the server sent none).
    model : str
        Model name reported by the server.
    usage : dict
        ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (ints; 0 when unreported).
    latency_s : float
        Seconds the successful request took. For a cached reply this is the latency of
        the original call, so timings replay from a committed cache.
    cached : bool
        Whether the reply came from the cache (no request was made).
    finish_reason : str or None
        ``"stop"``, ``"length"``, ... when reported.
    key : str or None
        The cache key of the request (for a cached reply: the key it was found under).
    """

    text: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    key: str | None = None


@dataclass(frozen=True)
class LLMResult:
    """The outcome of one item of a batch call (:meth:`LLMClient.chat_many`, :meth:`LLMClient.chat_json_many`).

    Exactly one of ``output`` and ``error`` is set: a failed item holds its exception, never
    an empty reply in its place.

    Attributes
    ----------
    index : int
        Position of the request in the batch.
    output : LLMResponse, tuple of (Any, LLMResponse), or None
        What the single call (:meth:`~LLMClient.chat` or :meth:`~LLMClient.chat_json`) returned.
    error : Exception or None
        What the single call raised (usually :class:`LLMRequestError` or :class:`LLMJSONError`).
    calls : int or None
        Chat calls the item made, cached or not (1 for :meth:`~LLMClient.chat_many`; for a JSON
        item 1 + its repairs), as counted in :meth:`LLMClient.stats` ``calls``; ``None`` when
        unknown (an llm object without ``stats``).
    """

    index: int
    output: Any = None
    error: Exception | None = None
    calls: int | None = None

    @property
    def ok(self) -> bool:
        """Whether the item succeeded."""
        return self.error is None

    def get(self) -> Any:
        """The single call's return value; raises its exception when the item failed."""
        if self.error is not None:
            raise self.error
        return self.output

    @property
    def response(self) -> LLMResponse | None:
        """The reply (for a JSON item: the one the value came from; for an :class:`LLMJSONError`: the last)."""
        if isinstance(self.output, LLMResponse):
            return self.output
        if isinstance(self.output, tuple):
            return self.output[1]
        return getattr(self.error, "response", None)

    @property
    def value(self) -> Any:
        """The validated JSON value of a :meth:`~LLMClient.chat_json_many` item (``None`` otherwise)."""
        return self.output[0] if isinstance(self.output, tuple) else None


# -- configuration ------------------------------------------------------------------------


def _env_value(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if value is not None and value.strip():
            return value.strip()
    return None


def is_configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether an LLM endpoint is configured in the environment.

    Configured means a base URL (``CHUNKWISE_LLM_BASE_URL`` or ``OPENAI_BASE_URL``) or a
    model (``CHUNKWISE_LLM_MODEL``) is set. An ``OPENAI_API_KEY`` alone does not count:
    a key exported for other tools should not make experiments start spending on it.

    Parameters
    ----------
    env : mapping, optional
        The environment to read; default ``os.environ``.

    Returns
    -------
    bool
    """
    env = os.environ if env is None else env
    return _env_value(env, ENV_BASE_URL, "OPENAI_BASE_URL", ENV_MODEL) is not None


# -- JSON extraction ----------------------------------------------------------------------

_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
_OPEN_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?\n(.*)\Z", re.DOTALL)


def iter_json_candidates(text: str, limit: int = _MAX_CANDIDATES) -> Iterator[Any]:
    """Yield the JSON values found in an LLM reply, most likely first.

    Tried in order: the whole reply; the body of each fenced code block (```` ```json ````
    or plain ```` ``` ````, also an unclosed one at the end); then every ``{`` or ``[`` in
    the text decoded with :meth:`json.JSONDecoder.raw_decode`, which finds a value after
    leading prose and ignores trailing prose. ``<think>...</think>`` blocks are removed
    first. Duplicates are skipped; the search is bounded.

    Parameters
    ----------
    text : str
        The reply.
    limit : int, default 32
        At most this many values are yielded.

    Yields
    ------
    Any
        Decoded JSON values.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}.")
    text = _THINK_RE.sub("", text).strip()
    decoder = json.JSONDecoder()
    seen: set[str] = set()
    count = 0

    def emit(value: Any) -> bool:
        nonlocal count
        try:
            sig = canonical_json(value)
        except (TypeError, ValueError):  # NaN etc.: still a candidate, just not deduplicated
            sig = repr(value)
        if sig in seen:
            return False
        seen.add(sig)
        count += 1
        return True

    def scan(segment: str) -> Iterator[Any]:
        pos, tried = 0, 0
        while tried < _MAX_SCAN_POSITIONS:
            starts = [i for i in (segment.find("{", pos), segment.find("[", pos)) if i >= 0]
            if not starts:
                return
            start = min(starts)
            tried += 1
            try:
                value, end = decoder.raw_decode(segment, start)
            except ValueError:
                pos = start + 1
                continue
            yield value
            pos = end

    def whole(segment: str) -> Iterator[Any]:
        segment = segment.strip()
        if not segment:
            return
        try:
            yield json.loads(segment)
        except ValueError:
            return

    fenced = [m.group(1) for m in _FENCE_RE.finditer(text)]
    if not fenced:
        m = _OPEN_FENCE_RE.search(text)
        if m:
            fenced = [m.group(1)]
    sources: list[Iterator[Any]] = [whole(text)]
    sources += [whole(body) for body in fenced]
    sources += [scan(body) for body in fenced]
    sources.append(scan(text))
    for source in sources:
        for value in source:
            if emit(value):
                yield value
                if count >= limit:
                    return


def extract_json(text: str) -> Any:
    """The first JSON value in an LLM reply (see :func:`iter_json_candidates`).

    Parameters
    ----------
    text : str
        The reply.

    Returns
    -------
    Any
        The decoded value.

    Raises
    ------
    ValueError
        If the reply holds no decodable JSON value.

    Examples
    --------
    >>> extract_json('Sure! Here it is:\\n```json\\n{"a": 1}\\n```')
    {'a': 1}
    >>> extract_json('The answer is {"b": [1, 2]} as requested.')
    {'b': [1, 2]}
    """
    for value in iter_json_candidates(text, limit=1):
        return value
    raise ValueError(f"no JSON value found in the reply: {_quote(text, 200)}")


def _quote(text: str, limit: int) -> str:
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... [{len(text) - limit} more chars]"


def _json_error_detail(text: str) -> str:
    try:
        json.loads(_THINK_RE.sub("", text).strip())
    except ValueError as exc:
        return str(exc)
    return "no JSON value"


# -- the client ---------------------------------------------------------------------------


class LLMClient:
    """Chat client for any OpenAI-compatible endpoint, with retries, cache and accounting.

    Parameters
    ----------
    base_url : str, optional
        Endpoint root including ``/v1``, e.g. ``"http://127.0.0.1:8080/v1"``. Default:
        ``$CHUNKWISE_LLM_BASE_URL``, else ``$OPENAI_BASE_URL``, else
        :data:`DEFAULT_BASE_URL` (the OpenAI API).
    model : str, optional
        Model name as the endpoint knows it. Default ``$CHUNKWISE_LLM_MODEL``; when still
        unset, the endpoint's ``GET /models`` is asked on first use and its model is used
        if it serves exactly one (a local server usually does).
    api_key : str, optional
        Default ``$CHUNKWISE_LLM_API_KEY``, else ``$OPENAI_API_KEY``. A placeholder is sent
        to a non-default endpoint when no key is set (local servers need none); the OpenAI
        API itself requires a key.
    timeout : float, default 60.0
        Seconds per request attempt, as a total deadline: connecting, sending, and receiving the
        whole reply must end within it (a server that trickles its reply cannot hold a call
        longer). A timed-out attempt is retried like a connection error.
    max_retries : int, default 3
        Retries after the first attempt on connection errors, timeouts, HTTP 429 and 5xx
        (so at most ``1 + max_retries`` requests per call). Other errors are not retried.
    backoff : float, default 0.5
        Sleep before retry ``i`` (1-based) is ``backoff * 2**(i-1)`` seconds, at least the
        server's ``Retry-After`` when it sends one, at most :data:`MAX_BACKOFF_S`.
    cache : LLMCache, str, os.PathLike, None or False, default None
        ``None``: the default cache file (``$CHUNKWISE_CACHE_DIR/llm.sqlite`` or
        ``~/.cache/chunkwise/llm.sqlite``); a path: that SQLite file (e.g. one committed
        with a project); an :class:`~chunkwise.llm.cache.LLMCache`: that cache; ``False``:
        no cache (same as ``cache_mode="off"``).
    cache_mode : {"use", "refresh", "off", "only"}, default "use"
        ``"use"``: read, and write on a miss; ``"refresh"``: never read, always write;
        ``"off"``: neither; ``"only"``: read, and raise
        :class:`~chunkwise.llm.cache.NotCachedError` on a miss instead of sending the request
        (a book chapter that must rebuild from committed replies, with no model running).
    model_identity : str, optional
        What identifies the model in cache keys. Give it when the same weights may be
        served from different URLs, e.g. ``"qwen2.5-coder-1.5b@sha256:<weights sha256>"``
        for a local model. Default ``"<model>@<base_url>"``.
    max_concurrency : int >= 1, optional
        Requests in flight at once in the batch calls :meth:`chat_many` and
        :meth:`chat_json_many` (each call may override it). Default
        ``$CHUNKWISE_LLM_MAX_CONCURRENCY``, else :data:`DEFAULT_MAX_CONCURRENCY` (4). Use 1 for
        an endpoint that serves one request at a time (llama-cpp-python's server; the clients
        of :class:`~chunkwise.llm.local.LocalLLMServer` default to its number of slots), since
        requests queued at the server use up their deadline while they wait.

    Attributes
    ----------
    base_url : str
    cache : LLMCache or None
    cache_mode : str

    Raises
    ------
    ValueError
        At construction: a base URL without ``http://`` or ``https://``, a ``timeout`` or
        ``backoff`` that is not a finite number of seconds (``timeout > 0``, ``backoff >= 0``),
        a negative ``max_retries``, a ``max_concurrency`` (or its environment variable) that is
        not an int >= 1, an unknown ``cache_mode``, or no API key for the OpenAI API.

    Notes
    -----
    In mode ``"use"`` a cached reply is returned for an identical request even at
    ``temperature > 0``: the cache records one sample per request, which is what makes a
    run replayable. Use ``seed`` or different messages to obtain another sample, or mode
    ``"refresh"`` to resample and overwrite.

    Examples
    --------
    >>> client = LLMClient.from_env()                            # doctest: +SKIP
    >>> if client is None:                                       # doctest: +SKIP
    ...     print("skipped: no LLM configured")
    >>> r = client.chat([{"role": "user", "content": "Say hi"}])  # doctest: +SKIP
    >>> r.text, r.cached, client.stats()["calls"]                # doctest: +SKIP
    ('Hi!', False, 1)
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        cache: LLMCache | str | os.PathLike[str] | None | bool = None,
        cache_mode: str = "use",
        model_identity: str | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        env = os.environ
        resolved_url = base_url or _env_value(env, ENV_BASE_URL, "OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = str(resolved_url).rstrip("/")
        _check_base_url(self.base_url, env=env)
        self._model = model or _env_value(env, ENV_MODEL)
        key = api_key or _env_value(env, ENV_API_KEY, "OPENAI_API_KEY")
        if key is None:
            if self.base_url == DEFAULT_BASE_URL.rstrip("/"):
                raise ValueError(
                    f"No API key for {self.base_url}: set {ENV_API_KEY} or OPENAI_API_KEY, "
                    f"or point {ENV_BASE_URL} at another OpenAI-compatible endpoint."
                )
            key = _PLACEHOLDER_KEY
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}.")
        _check_seconds("timeout", timeout, positive=True)
        _check_seconds("backoff", backoff, positive=False)
        if cache_mode not in CACHE_MODES:
            raise ValueError(f"cache_mode must be one of {CACHE_MODES}, got {cache_mode!r}.")
        if cache_mode == "only" and cache is False:
            raise ValueError('cache_mode="only" answers from the cache alone; give a cache, not cache=False.')
        if model_identity is not None and (not isinstance(model_identity, str) or not model_identity):
            raise ValueError(f"model_identity must be a non-empty str, got {model_identity!r}.")
        if max_concurrency is None:
            raw = _env_value(env, ENV_MAX_CONCURRENCY)
            if raw is None:
                max_concurrency = DEFAULT_MAX_CONCURRENCY
            else:
                try:
                    max_concurrency = int(raw)
                except ValueError:
                    raise ValueError(
                        f"${ENV_MAX_CONCURRENCY} must be an int >= 1 (requests in flight at once), got {raw!r}."
                    ) from None
                _check_concurrency(f"${ENV_MAX_CONCURRENCY}", max_concurrency)
        _check_concurrency("max_concurrency", max_concurrency)
        #: Requests in flight at once in :meth:`chat_many` / :meth:`chat_json_many` (default of their argument).
        self.max_concurrency = max_concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.cache_mode = cache_mode
        self._model_identity = model_identity
        if cache is False or cache_mode == "off":
            self.cache: LLMCache | None = None
        elif cache is None or cache is True:
            self.cache = LLMCache()
        elif isinstance(cache, LLMCache):
            self.cache = cache
        elif isinstance(cache, (str, os.PathLike)):
            self.cache = LLMCache(Path(cache))
        else:
            raise TypeError(f"cache must be an LLMCache, a path, None or False, got {type(cache).__name__}.")
        http_client = _HTTPClient(timeout=self.timeout)
        _deadline.install(http_client)  # `timeout` is a deadline per attempt, not per read
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=key, timeout=self.timeout, max_retries=0,
            http_client=http_client,
        )
        self._sleep: Callable[[float], None] = time.sleep
        self._lock = threading.Lock()
        self._stats = self._zero_stats()

    # -- construction ---------------------------------------------------------------

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> LLMClient | None:
        """A client configured from the environment, or ``None`` when none is configured.

        Parameters
        ----------
        env : mapping, optional
            Environment to test with :func:`is_configured`; default ``os.environ``. The
            values themselves are read from ``os.environ`` by the constructor unless
            given in ``env`` (then they are passed explicitly).
        **overrides
            Constructor arguments (``timeout``, ``cache``, ``model_identity``, ...).
            ``cache_mode`` defaults to ``$CHUNKWISE_LLM_CACHE_MODE`` when that is set.

        Returns
        -------
        LLMClient or None
            ``None`` when :func:`is_configured` is false, so a caller can print
            "skipped: no LLM configured".
        """
        source = os.environ if env is None else env
        if not is_configured(source):
            return None
        overrides.setdefault("base_url", _env_value(source, ENV_BASE_URL, "OPENAI_BASE_URL"))
        overrides.setdefault("model", _env_value(source, ENV_MODEL))
        overrides.setdefault("api_key", _env_value(source, ENV_API_KEY, "OPENAI_API_KEY"))
        mode = _env_value(source, ENV_CACHE_MODE)
        if mode is not None:
            overrides.setdefault("cache_mode", mode.lower())
        return cls(**overrides)

    def __repr__(self) -> str:
        return (
            f"LLMClient(base_url={self.base_url!r}, model={self._model!r}, "
            f"cache_mode={self.cache_mode!r}, cache={self.cache!r})"
        )

    # -- identity -------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The model name; asks the endpoint's ``GET /models`` once when none was configured."""
        if self._model is None:
            page = self._call_with_retries(lambda: self._client.models.list(), "list models", model=None)[0]
            ids = sorted({m.id for m in getattr(page, "data", []) or []})
            if len(ids) != 1:
                raise LLMError(
                    f"No model configured and {self.base_url}/models lists {len(ids)} models "
                    f"({', '.join(ids[:10])}{', ...' if len(ids) > 10 else ''}); "
                    f"pass model= or set {ENV_MODEL}."
                )
            self._model = ids[0]
        return self._model

    @property
    def model_identity(self) -> str:
        """What identifies the model in cache keys (see the class docstring)."""
        if self._model_identity is not None:
            return self._model_identity
        return f"{self.model}@{self.base_url}"

    # -- accounting -----------------------------------------------------------------

    @staticmethod
    def _zero_stats() -> dict[str, Any]:
        return {
            "calls": 0,
            "cache_hits": 0,
            "requests": 0,
            "retries": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "latency_s": 0.0,
            "cached_prompt_tokens": 0,
            "cached_completion_tokens": 0,
            "cached_latency_s": 0.0,
        }

    def stats(self) -> dict[str, Any]:
        """Totals since construction (or :meth:`reset_stats`).

        Returns
        -------
        dict
            ``calls`` (:meth:`chat` calls, cached or not), ``cache_hits``, ``requests``
            (HTTP requests made, retries included), ``retries``, and, over the replies
            obtained from the endpoint (not the cache), ``prompt_tokens``,
            ``completion_tokens``, ``total_tokens`` and ``latency_s`` (summed seconds); over the
            replies served from the cache, what they cost when they were made:
            ``cached_prompt_tokens``, ``cached_completion_tokens``, ``cached_latency_s`` (so a
            run replayed from a committed cache can still report the model time it stands for).
        """
        with self._lock:
            return dict(self._stats)

    def reset_stats(self) -> None:
        """Set all :meth:`stats` counters to zero."""
        with self._lock:
            self._stats = self._zero_stats()

    def _count(self, **inc: float) -> None:
        with self._lock:
            for name, value in inc.items():
                self._stats[name] += value

    # -- requests -------------------------------------------------------------------

    @staticmethod
    def _retryable(exc: BaseException) -> bool:
        if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
            return True
        if isinstance(exc, openai.APIStatusError):
            return exc.status_code == 429 or exc.status_code >= 500
        return False

    def _delay(self, retry: int, exc: BaseException) -> float:
        delay = self.backoff * (2 ** (retry - 1))
        response = getattr(exc, "response", None)
        if response is not None:
            try:
                delay = max(delay, float(response.headers.get("retry-after", "")))
            except (TypeError, ValueError):
                pass
        return min(max(delay, 0.0), MAX_BACKOFF_S)

    def _call_with_retries(self, fn: Callable[[], Any], what: str, *, model: str | None) -> tuple[Any, float]:
        """Run ``fn`` with the retry policy; return (result, seconds of the successful try)."""
        attempts = self.max_retries + 1
        last: BaseException | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self._count(retries=1)
                self._sleep(self._delay(attempt - 1, last))  # type: ignore[arg-type]
            self._count(requests=1)
            start = time.perf_counter()
            try:
                with _deadline.deadline(self.timeout):
                    result = fn()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                # A 200 reply whose body is not JSON: not an OpenAI-compatible endpoint (or a
                # broken proxy); retrying would not help.
                body = getattr(exc, "doc", None)
                quoted = f": {_quote(body, 200)}" if isinstance(body, str) else ""
                raise LLMRequestError(
                    f"LLM {what} to {self.base_url} (model {model!r}): the server answered but its "
                    f"body is not valid JSON ({exc}){quoted}; check that the base URL is the "
                    "root of an OpenAI-compatible API (usually ending in /v1).",
                    endpoint=self.base_url, model=model, attempts=attempt, status_code=None,
                    last_error=exc,
                ) from exc
            except openai.OpenAIError as exc:
                last = exc
                if self._retryable(exc) and attempt < attempts:
                    continue
                status = getattr(exc, "status_code", None)
                if self._retryable(exc):
                    msg = (
                        f"LLM {what} to {self.base_url} (model {model!r}) failed after "
                        f"{attempt} attempt{'s' if attempt != 1 else ''} "
                        f"(max_retries={self.max_retries}): {_describe(exc)}"
                    )
                    if isinstance(exc, openai.APITimeoutError):
                        msg += (
                            f" No complete reply within timeout={self.timeout:g} s (a deadline per "
                            "attempt); pass a larger timeout= for a slow model or server."
                        )
                else:
                    msg = (
                        f"LLM {what} to {self.base_url} (model {model!r}) failed on attempt "
                        f"{attempt} with a non-retryable error: {_describe(exc)}"
                    )
                raise LLMRequestError(
                    msg, endpoint=self.base_url, model=model, attempts=attempt,
                    status_code=status, last_error=exc,
                ) from exc
            return result, time.perf_counter() - start
        raise AssertionError("unreachable")  # pragma: no cover

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> LLMResponse:
        """One chat completion, from the cache when possible.

        Parameters
        ----------
        messages : sequence of mapping, or str
            Chat messages ``{"role": ..., "content": ...}``; a plain string is sent as one
            user message.
        temperature : float or None, default 0.0
            Sampling temperature (``None``: not sent, the server's default).
        max_tokens : int >= 1, optional
            Completion length limit (tokens of the model's tokenizer). On a cache miss, a cached reply of the same request
            *without* a limit is used when it stopped on its own within ``max_tokens``
            completion tokens (the limit cannot have changed it).
        seed : int, optional
            Sampling seed, for endpoints that honour it.
        response_format : mapping, optional
            E.g. ``{"type": "json_object"}``.
        **extra
            Further JSON-serialisable parameters passed to the endpoint (``top_p``,
            ``stop``, ``extra_body``, ...). They are part of the cache key.

        Returns
        -------
        LLMResponse

        Raises
        ------
        LLMRequestError
            When the request fails after its retries, or with an error that is not retried
            (e.g. HTTP 400, 401, 404), or the response has no choices.
        TypeError, ValueError
            For malformed messages, a ``max_tokens`` that is not an int >= 1, or parameters that
            JSON cannot represent.
        """
        prep = self._prepare(
            messages, temperature=temperature, max_tokens=max_tokens, seed=seed,
            response_format=response_format, extra=extra,
        )
        self._count(calls=1)
        hit = self._lookup(prep)
        if hit is not None:
            return hit
        return self._send(prep)

    def _prepare(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        *,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        response_format: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> _Prepared:
        """Check one request and compute its cache key (no I/O except model discovery)."""
        msgs = _normalise_messages(messages)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise ValueError(f"max_tokens must be an int >= 1 or None (no limit), got {max_tokens!r}.")
        extra = dict(extra or {})
        model = self.model
        identity = self.model_identity
        doc = request_document(
            identity, msgs, temperature=temperature, max_tokens=max_tokens, seed=seed,
            response_format=response_format, extra=extra,
        )
        params: dict[str, Any] = {"model": model, "messages": msgs}
        if temperature is not None:
            params["temperature"] = float(temperature)
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if seed is not None:
            params["seed"] = seed
        if response_format is not None:
            params["response_format"] = dict(response_format)
        params.update(extra)
        return _Prepared(key=document_key(doc), doc=doc, params=params, model=model, identity=identity,
                         max_tokens=max_tokens)

    def _lookup(self, prep: _Prepared) -> LLMResponse | None:
        """The cached reply of a prepared request (counted as a hit), or ``None``."""
        if self.cache is None or self.cache_mode not in ("use", "only"):
            return None
        entry, found = self.cache.get(prep.key), prep.key
        if entry is None and prep.max_tokens is not None:
            entry, found = self._uncapped_entry(prep.doc, prep.max_tokens)
        if entry is None:
            return None
        usage = _usage_ints(entry.usage)
        self._count(cache_hits=1, cached_prompt_tokens=usage.get("prompt_tokens", 0),
                    cached_completion_tokens=usage.get("completion_tokens", 0),
                    cached_latency_s=float(entry.latency_s or 0.0))
        return LLMResponse(
            text=entry.text, model=entry.model, usage=usage,
            latency_s=entry.latency_s, cached=True, finish_reason=entry.finish_reason, key=found,
        )

    def _send(self, prep: _Prepared) -> LLMResponse:
        """Send a prepared request (with retries and the deadline), store and return the reply.

        Safe to call from several threads at once: the deadline is a context variable of the
        calling thread, the ``openai`` client and its connection pool are thread-safe, and the
        cache serialises its writes (:class:`~chunkwise.llm.cache.LLMCache`).
        """
        model, params = prep.model, prep.params
        if self.cache_mode == "only":
            raise NotCachedError(
                f"a chat completion for model {model!r} is not in the LLM cache {self.cache!r} "
                '(cache_mode="only" sends no request; use cache_mode="use" to ask the model).'
            )
        completion, latency = self._call_with_retries(
            lambda: self._client.chat.completions.create(**params), "chat completion", model=model
        )
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMRequestError(
                f"LLM chat completion from {self.base_url} (model {model!r}) returned no choices: "
                f"{_quote(str(completion), 300)}",
                endpoint=self.base_url, model=model, attempts=1,
            )
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        usage = _usage_ints(getattr(completion, "usage", None))
        response = LLMResponse(
            text=text,
            model=str(getattr(completion, "model", None) or model),
            usage=usage,
            latency_s=latency,
            cached=False,
            finish_reason=getattr(choice, "finish_reason", None),
            key=prep.key,
        )
        self._count(
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            total_tokens=usage["total_tokens"],
            latency_s=latency,
        )
        if self.cache is not None and self.cache_mode in ("use", "refresh"):
            self.cache.put(
                prep.key, text=response.text, model=response.model, usage=usage, latency_s=latency,
                finish_reason=response.finish_reason, model_identity=prep.identity, request=prep.doc,
            )
        return response

    def _uncapped_entry(self, doc: Mapping[str, Any], max_tokens: int) -> tuple[Any, str | None]:
        """The cached reply of the same request without ``max_tokens``, when the cap cannot change it.

        A reply that ended on its own (``finish_reason == "stop"``) after at most ``max_tokens``
        completion tokens is exactly what the capped request returns, so adding a length cap
        to a caller does not throw away its cached replies. Returns ``(entry, key)`` or
        ``(None, None)``.
        """
        uncapped = dict(doc)
        uncapped["params"] = {**doc["params"], "max_tokens": None}
        key = document_key(uncapped)
        entry = self.cache.get(key) if self.cache is not None else None
        if entry is None or entry.finish_reason != "stop":
            return None, None
        used = _usage_ints(entry.usage)["completion_tokens"]
        if not 0 < used <= max_tokens:
            return None, None
        return entry, key

    # -- structured output ----------------------------------------------------------

    def chat_json(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        schema: Mapping[str, Any] | None = None,
        validator: Callable[[Any], Any] | None = None,
        max_repairs: int = 2,
        json_mode: bool = True,
        **kw: Any,
    ) -> tuple[Any, LLMResponse]:
        """Ask for JSON; extract, validate, and repair it.

        The reply is searched for JSON values (:func:`iter_json_candidates`); the first one
        that passes ``schema`` and ``validator`` is returned. When none does, the model is
        asked again with the original messages, its reply, and a user message stating the
        error (and the schema, when given) -- at most ``max_repairs`` times. Repair requests
        go through :meth:`chat`, so they are cached under their full messages and a replay
        from the cache reproduces the whole exchange.

        Parameters
        ----------
        messages : sequence of mapping, or str
            As in :meth:`chat`. The prompt should ask for JSON (the OpenAI API rejects
            ``json_object`` mode when no message mentions JSON).
        schema : mapping, optional
            A JSON Schema the value must satisfy (checked with the ``jsonschema`` package,
            using the draft the schema declares, else the latest).
        validator : callable, optional
            Called with the decoded value after the schema check. It accepts the value by
            returning ``None`` or ``True``; it rejects it by returning ``False`` or an error
            string, or by raising ``ValueError``, ``TypeError``, ``KeyError`` or
            ``AssertionError`` (whose message is sent back to the model).
        max_repairs : int, default 2
            Re-asks after the first reply (so at most ``1 + max_repairs`` replies).
        json_mode : bool, default True
            Send ``response_format={"type": "json_object"}`` (unless ``response_format`` is
            given in ``kw``). Set False for endpoints that do not support it.
        **kw
            Passed to :meth:`chat` (``temperature``, ``max_tokens``, ``seed``, ...).

        Returns
        -------
        tuple of (Any, LLMResponse)
            The validated value and the response it came from.

        Raises
        ------
        LLMJSONError
            When the last reply is still unusable; its message quotes that reply
            (truncated) and the error.
        LLMRequestError
            When a request fails (see :meth:`chat`).
        jsonschema.exceptions.SchemaError
            When ``schema`` itself is not a valid JSON Schema.
        """
        job = self._json_job(messages, schema, validator, max_repairs, json_mode, kw)
        out = self._json_advance(job, send=True)
        assert out is not None
        return out

    def _json_job(
        self,
        messages: Sequence[Mapping[str, Any]] | str,
        schema: Mapping[str, Any] | None,
        validator: Callable[[Any], Any] | None,
        max_repairs: int,
        json_mode: bool,
        kw: dict[str, Any],
    ) -> _JSONJob:
        """Check the arguments of one :meth:`chat_json` call; return its state before the first turn."""
        if isinstance(max_repairs, bool) or not isinstance(max_repairs, int) or max_repairs < 0:
            raise ValueError(f"max_repairs must be an int >= 0, got {max_repairs!r}.")
        if validator is not None and not callable(validator):
            raise TypeError("validator must be callable.")
        schema_validator = _schema_validator(schema) if schema is not None else None
        kw = dict(kw)
        if json_mode and kw.get("response_format") is None:
            kw["response_format"] = {"type": "json_object"}
        base = _normalise_messages(messages)
        return _JSONJob(base=base, convo=base, kw=kw, schema=schema, schema_validator=schema_validator,
                        validator=validator, max_repairs=max_repairs)

    def _json_advance(self, job: _JSONJob, *, send: bool) -> tuple[Any, LLMResponse] | None:
        """Run the turns of a :meth:`chat_json` exchange.

        With ``send=False`` only cached turns are taken: at the first miss the prepared request
        is parked in ``job.pending`` and ``None`` is returned (the batch call then hands the job
        to a worker). With ``send=True`` the exchange runs to its end.
        """
        while True:
            if job.pending is not None:
                if not send:
                    return None
                prep, job.pending = job.pending, None
                # Looked up again: an identical request of the same batch may have filled it.
                response = self._lookup(prep) or self._send(prep)
            else:
                kw = dict(job.kw)
                extra = {k: kw.pop(k) for k in list(kw) if k not in _CHAT_PARAMS}
                prep = self._prepare(job.convo, extra=extra, **kw)
                self._count(calls=1)
                job.turns += 1
                response = self._lookup(prep)
                if response is None:
                    if not send:
                        job.pending = prep
                        return None
                    response = self._send(prep)
            job.response = response
            value, error = _first_valid(response.text, job.schema_validator, job.validator)
            if error is None:
                return value, response
            job.error = error
            job.attempt += 1
            if job.attempt > job.max_repairs:
                attempts = job.max_repairs + 1
                raise LLMJSONError(
                    f"LLM reply from {self.base_url} (model {self._model!r}) was not valid JSON after "
                    f"{attempts} attempt{'s' if attempts != 1 else ''} ({job.max_repairs} repairs). "
                    f"Last error: {error}. Last reply: {_quote(response.text, _REPLY_QUOTE_CHARS)}",
                    reply=response.text, error=str(error), attempts=attempts, response=response,
                )
            job.convo = [
                *job.base,
                {"role": "assistant", "content": response.text},
                {"role": "user", "content": _repair_prompt(error, job.schema)},
            ]

    # -- batches --------------------------------------------------------------------

    def chat_many(
        self,
        requests: Sequence[Any],
        *,
        max_concurrency: int | None = None,
        errors: str = "return",
        progress: bool | str = False,
        order: str = "input",
        **common: Any,
    ) -> list[LLMResult]:
        """Many independent :meth:`chat` calls, at most ``max_concurrency`` in flight at once.

        Every request is first looked up in the response cache, in the calling thread; only the
        misses are sent, from a pool of worker threads, each with the retries and the total
        deadline of :meth:`chat` (the deadline is per request attempt and per thread, so a slow
        request cannot shorten another's). Replies are stored in the cache as they arrive (the
        cache serialises concurrent writes). Identical requests in one batch are sent once: the
        later ones are served by the cache, as they would be in a loop of :meth:`chat` calls.

        Parameters
        ----------
        requests : sequence
            Each item is what :meth:`chat` takes as ``messages`` (a str, or a sequence of
            message mappings), or a mapping ``{"messages": ..., **chat_kwargs}`` whose keyword
            arguments (``max_tokens``, ``temperature``, ...) override ``common`` for that item.
        max_concurrency : int >= 1, optional
            Requests in flight at once. Default :attr:`max_concurrency` of the client. An
            endpoint that serves one request at a time (llama-cpp-python's server) queues the
            others, and the queueing counts against each request's deadline: use 1 there.
        errors : {"return", "raise"}, default "return"
            ``"return"``: an item that fails holds its exception (:attr:`LLMResult.error`); no
            error is turned into an empty reply. ``"raise"``: after every item has finished
            (so completed replies are cached), the error of the first failed item, in input
            order, is raised.
        progress : bool or str, default False
            Show a ``tqdm`` progress bar (a str is used as its description).
        order : {"input", "prefix"}, default "input"
            The order in which the misses are sent (results are always in input order).
            ``"prefix"``: sorted by their messages, so requests that share a prefix (the same
            instructions and passages) follow each other and a server with a prompt-prefix
            cache (llama.cpp keeps the last prompt's KV cache; vLLM's automatic prefix
            caching) computes the shared part once. The cache key of a request does not depend
            on it, so neither do the replies served from the cache.
        **common
            Keyword arguments of :meth:`chat` for every item (``temperature``,
            ``max_tokens``, ``seed``, ``response_format``, extra endpoint parameters).

        Returns
        -------
        list of LLMResult
            One per request, in input order; :meth:`LLMResult.get` gives what :meth:`chat`
            would have returned, or raises its error.

        Raises
        ------
        TypeError, ValueError
            Before any request is sent, for a malformed request (the message names its
            index), a bad ``max_concurrency``, ``errors``, ``order`` or ``progress``.
        LLMError
            With ``errors="raise"``, the first item's error (see above).
        chunkwise.llm.cache.CacheFileError
            When the cache file cannot be read.

        Examples
        --------
        >>> results = client.chat_many(["2+2=", "3+3="], max_tokens=4)   # doctest: +SKIP
        >>> [r.get().text for r in results]                              # doctest: +SKIP
        ['4', '6']
        """
        errors, workers = self._batch_options(errors, max_concurrency, order)
        preps: list[_Prepared | None] = []
        results: list[LLMResult | None] = []
        for i, request in enumerate(requests):
            messages, kw = _split_request(request, common, i)
            extra = {k: kw.pop(k) for k in list(kw) if k not in _CHAT_PARAMS}
            try:
                prep = self._prepare(messages, extra=extra, **kw)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"requests[{i}]: {exc}") from exc
            preps.append(prep)
            results.append(None)
        bar = _progress_bar(progress, len(preps))
        try:
            pending: dict[str, list[int]] = {}
            for i, prep in enumerate(preps):
                assert prep is not None
                self._count(calls=1)
                hit = self._lookup(prep)
                if hit is not None:
                    results[i] = LLMResult(index=i, output=hit, calls=1)
                    _tick(bar)
                else:
                    pending.setdefault(prep.key, []).append(i)

            def run(indices: list[int]) -> None:
                for i in indices:
                    prep = preps[i]
                    assert prep is not None
                    try:
                        out = self._lookup(prep) or self._send(prep)
                        results[i] = LLMResult(index=i, output=out, calls=1)
                    except Exception as exc:  # noqa: BLE001 - held per item, re-raised by get()
                        results[i] = LLMResult(index=i, error=exc, calls=1)
                    _tick(bar)

            groups = list(pending.values())
            if order == "prefix":
                groups.sort(key=lambda g: _order_key(preps[g[0]].params["messages"]))  # type: ignore[union-attr]
            if groups:
                self._before_batch_sends()
            self._run_groups(groups, run, workers)
        finally:
            if bar is not None:
                bar.close()
        return _finish(results, errors)

    def chat_json_many(
        self,
        requests: Sequence[Any],
        schema: Mapping[str, Any] | None = None,
        validator: Callable[[Any], Any] | None = None,
        max_repairs: int = 2,
        json_mode: bool = True,
        *,
        max_concurrency: int | None = None,
        errors: str = "return",
        progress: bool | str = False,
        order: str = "input",
        **common: Any,
    ) -> list[LLMResult]:
        """Many independent :meth:`chat_json` calls, at most ``max_concurrency`` in flight at once.

        As :meth:`chat_many`, for validated JSON: each item runs the whole exchange of
        :meth:`chat_json` (the reply, and its repairs when it does not validate). The turns
        found in the cache are taken in the calling thread; an item goes to a worker thread at
        its first turn that is not cached.

        Parameters
        ----------
        requests : sequence
            As in :meth:`chat_many`; a mapping item may also override ``schema``,
            ``validator``, ``max_repairs`` and ``json_mode``.
        schema, validator, max_repairs, json_mode
            As in :meth:`chat_json`, for every item.
        max_concurrency, errors, progress, order, **common
            As in :meth:`chat_many` (``order="prefix"`` sorts by the first turn's messages).

        Returns
        -------
        list of LLMResult
            One per request, in input order; :meth:`LLMResult.get` gives ``(value, response)``
            as :meth:`chat_json` returns it, or raises its error (:class:`LLMJSONError` when
            the replies never validated, :class:`LLMRequestError` when a request failed).

        Raises
        ------
        TypeError, ValueError, jsonschema.exceptions.SchemaError
            Before any request is sent, for a malformed request (named by index), an invalid
            schema, or bad batch options.
        LLMError
            With ``errors="raise"``: the first failed item's error, after all have finished.
        """
        errors, workers = self._batch_options(errors, max_concurrency, order)
        jobs: list[_JSONJob] = []
        for i, request in enumerate(requests):
            messages, kw = _split_request(request, common, i)
            opts = {
                "schema": kw.pop("schema", schema),
                "validator": kw.pop("validator", validator),
                "max_repairs": kw.pop("max_repairs", max_repairs),
                "json_mode": kw.pop("json_mode", json_mode),
            }
            try:
                job = self._json_job(messages, opts["schema"], opts["validator"], opts["max_repairs"],
                                     opts["json_mode"], kw)
                kw2 = dict(job.kw)
                extra = {k: kw2.pop(k) for k in list(kw2) if k not in _CHAT_PARAMS}
                self._prepare(job.convo, extra=extra, **kw2)  # check the request before any is sent
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"requests[{i}]: {exc}") from exc
            jobs.append(job)
        results: list[LLMResult | None] = [None] * len(jobs)
        bar = _progress_bar(progress, len(jobs))
        try:
            pending: dict[str, list[int]] = {}
            for i, job in enumerate(jobs):
                try:
                    out = self._json_advance(job, send=False)
                except Exception as exc:  # noqa: BLE001 - e.g. cached replies that never validate
                    results[i] = LLMResult(index=i, error=exc, calls=job.turns)
                    _tick(bar)
                    continue
                if out is not None:
                    results[i] = LLMResult(index=i, output=out, calls=job.turns)
                    _tick(bar)
                else:
                    assert job.pending is not None
                    pending.setdefault(job.pending.key, []).append(i)

            def run(indices: list[int]) -> None:
                for i in indices:
                    try:
                        out = self._json_advance(jobs[i], send=True)
                        results[i] = LLMResult(index=i, output=out, calls=jobs[i].turns)
                    except Exception as exc:  # noqa: BLE001 - held per item, re-raised by get()
                        results[i] = LLMResult(index=i, error=exc, calls=jobs[i].turns)
                    _tick(bar)

            groups = list(pending.values())
            if order == "prefix":
                groups.sort(key=lambda g: _order_key(jobs[g[0]].pending.params["messages"]))  # type: ignore[union-attr]
            if groups:
                self._before_batch_sends()
            self._run_groups(groups, run, workers)
        finally:
            if bar is not None:
                bar.close()
        return _finish(results, errors)

    def _batch_options(self, errors: str, max_concurrency: int | None, order: str = "input") -> tuple[str, int]:
        if errors not in ("return", "raise"):
            raise ValueError(f"errors must be 'return' or 'raise', got {errors!r}.")
        if order not in ("input", "prefix"):
            raise ValueError(f"order must be 'input' or 'prefix', got {order!r}.")
        workers = self.max_concurrency if max_concurrency is None else max_concurrency
        _check_concurrency("max_concurrency", workers)
        return errors, workers

    def _before_batch_sends(self) -> None:
        """Called in the calling thread before a batch sends its cache misses (from worker threads).

        A client that must set something up in the calling thread does it here: the embedded
        local model starts its server, whose parent-death signal follows the thread that
        started it (:class:`~chunkwise.llm.local.OnDemandLocalClient`). Nothing by default.
        """

    @staticmethod
    def _run_groups(groups: list[list[int]], run: Callable[[list[int]], None], workers: int) -> None:
        """Run ``run(group)`` for every group, at most ``workers`` at once, started in list order.

        With one worker (or one group) everything runs in the calling thread. Otherwise daemon
        worker threads take the groups from a FIFO queue. On an exception in the calling thread
        (Ctrl-C) or a ``BaseException`` escaping ``run``, no further group is started and the
        exception is raised at once; requests already in flight end by their own deadline in
        their daemon threads, which never hold up the interpreter's exit.
        """
        if not groups:
            return
        if workers == 1 or len(groups) == 1:
            for group in groups:
                run(group)
            return
        todo: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
        for group in groups:
            todo.put(group)
        stop = threading.Event()
        failures: list[BaseException] = []

        def worker() -> None:
            while not stop.is_set():
                try:
                    group = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    run(group)
                except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                    failures.append(exc)
                    stop.set()
                    return

        threads = [
            threading.Thread(target=worker, name=f"chunkwise-llm-{i}", daemon=True)
            for i in range(min(workers, len(groups)))
        ]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.1)  # short waits, so Ctrl-C reaches the calling thread at once
        except BaseException:
            stop.set()
            raise
        if failures:
            raise failures[0]


def model_cost(before: Mapping[str, Any], after: Mapping[str, Any], what: str) -> float:
    """The model cost ``what`` (``"latency_s"``, ``"prompt_tokens"``, ``"completion_tokens"``)
    of the calls made between two :meth:`LLMClient.stats` snapshots, replies served from the
    cache counted at what they cost when they were made (their ``cached_*`` counters), so a run
    replayed from a committed cache reports the cold cost."""
    return float(after.get(what, 0) - before.get(what, 0)
                 + after.get("cached_" + what, 0) - before.get("cached_" + what, 0))


# -- batches as loops ---------------------------------------------------------------------


class SequentialBatches:
    """The batch calls of a chat model as loops over its own ``chat`` and ``chat_json``.

    A base class for chat models that send one request at a time (test doubles, thin wrappers
    of another model): a subclass defines ``chat`` and ``chat_json`` and gets ``chat_many`` and
    ``chat_json_many`` with the arguments, results and errors of :class:`LLMClient`'s -- one
    :class:`LLMResult` per request, in input order, holding the reply or that item's exception
    (``errors="raise"``: the first failed item's error, after every item has run). The calls
    are made one after another in input order: ``max_concurrency`` and ``order`` are accepted
    and have no effect. :attr:`LLMResult.calls` is taken from ``stats()["calls"]`` when the
    model has ``stats``, else ``None``.

    :func:`chunkwise.llm.batch.chat_many` gives these loops to an object that has ``chat`` and
    ``chat_json`` only.
    """

    if TYPE_CHECKING:  # supplied by the subclass

        def chat(self, messages: Any, **kw: Any) -> Any: ...

        def chat_json(self, messages: Any, **kw: Any) -> tuple[Any, Any]: ...

    def chat_many(
        self,
        requests: Sequence[Any],
        *,
        max_concurrency: int | None = None,
        errors: str = "return",
        progress: bool | str = False,
        order: str = "input",
        **common: Any,
    ) -> list[LLMResult]:
        """``chat`` for every request, in input order (see the class docstring)."""
        return self._loop(lambda messages, kw: self.chat(messages, **kw), requests, common, errors, progress, order)

    def chat_json_many(
        self,
        requests: Sequence[Any],
        schema: Mapping[str, Any] | None = None,
        *,
        max_concurrency: int | None = None,
        errors: str = "return",
        progress: bool | str = False,
        order: str = "input",
        **common: Any,
    ) -> list[LLMResult]:
        """``chat_json`` for every request, in input order; ``validator``, ``max_repairs`` and
        ``json_mode`` go in ``common`` or in a request mapping (see the class docstring)."""

        def call(messages: Any, kw: dict[str, Any]) -> Any:
            item_schema = kw.pop("schema", schema)
            if item_schema is not None:
                kw["schema"] = item_schema
            return self.chat_json(messages, **kw)

        return self._loop(call, requests, common, errors, progress, order)

    def _calls_so_far(self) -> int | None:
        """``stats()["calls"]`` when the model counts its calls, else ``None``."""
        stats = getattr(self, "stats", None)
        try:
            value = stats() if callable(stats) else None
        except Exception:  # noqa: BLE001 - a model whose stats fail simply does not count
            return None
        calls = value.get("calls") if isinstance(value, dict) else None
        return int(calls) if isinstance(calls, int) and not isinstance(calls, bool) else None

    def _loop(
        self,
        call: Callable[[Any, dict[str, Any]], Any],
        requests: Sequence[Any],
        common: Mapping[str, Any],
        errors: str,
        progress: bool | str,
        order: str,
    ) -> list[LLMResult]:
        if errors not in ("return", "raise"):
            raise ValueError(f"errors must be 'return' or 'raise', got {errors!r}.")
        if order not in ("input", "prefix"):
            raise ValueError(f"order must be 'input' or 'prefix', got {order!r}.")
        items = [_split_request(r, common, i) for i, r in enumerate(requests)]
        bar = _progress_bar(progress, len(items))
        results: list[LLMResult | None] = []
        try:
            for i, (messages, kw) in enumerate(items):
                before = self._calls_so_far()
                try:
                    output, error = call(messages, dict(kw)), None
                except Exception as exc:  # noqa: BLE001 - held per item, re-raised by get()
                    output, error = None, exc
                after = self._calls_so_far()
                calls = after - before if before is not None and after is not None else None
                results.append(LLMResult(index=i, output=output, error=error, calls=calls))
                _tick(bar)
        finally:
            if bar is not None:
                bar.close()
        return _finish(results, errors)


# -- helpers ------------------------------------------------------------------------------

#: Keyword arguments of :meth:`LLMClient.chat` that are not passed through as ``extra``.
_CHAT_PARAMS = frozenset({"temperature", "max_tokens", "seed", "response_format"})


@dataclass(frozen=True)
class _Prepared:
    """One checked request: its cache key and document, and the parameters to send."""

    key: str
    doc: dict[str, Any]
    params: dict[str, Any]
    model: str
    identity: str
    max_tokens: int | None


@dataclass
class _JSONJob:
    """The state of one :meth:`LLMClient.chat_json` exchange (see ``_json_advance``)."""

    base: list[dict[str, Any]]
    convo: list[dict[str, Any]]
    kw: dict[str, Any]
    schema: Mapping[str, Any] | None
    schema_validator: Any
    validator: Callable[[Any], Any] | None
    max_repairs: int
    attempt: int = 0
    turns: int = 0
    pending: _Prepared | None = None
    response: LLMResponse | None = None
    error: str | None = None


def _split_request(request: Any, common: Mapping[str, Any], index: int) -> tuple[Any, dict[str, Any]]:
    """``(messages, kwargs)`` of one batch item: a mapping with ``"messages"`` overrides ``common``."""
    if isinstance(request, Mapping) and "role" not in request:
        if "messages" not in request:
            raise TypeError(
                f"requests[{index}] is a mapping without 'messages' (and is not a message: no 'role'); "
                "give a str, a list of messages, or {'messages': ..., **chat_kwargs}."
            )
        kw = {**common, **{k: v for k, v in request.items() if k != "messages"}}
        return request["messages"], kw
    if isinstance(request, Mapping):
        raise TypeError(
            f"requests[{index}] is a single message; wrap it in a list ([message]) or give "
            "{'messages': [message], ...}."
        )
    return request, dict(common)


def _order_key(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Sort key that puts requests with a common prefix of messages next to each other."""
    return [(str(m.get("role", "")), str(m.get("content", ""))) for m in messages]


def _check_concurrency(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1 (requests in flight at once), got {value!r}.")


def _progress_bar(progress: bool | str, total: int) -> Any:
    if not isinstance(progress, (bool, str)):
        raise TypeError(f"progress must be a bool or a str (the bar's description), got {type(progress).__name__}.")
    if progress is False or progress == "":
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=progress if isinstance(progress, str) else "LLM calls", unit="call")


def _tick(bar: Any) -> None:
    if bar is not None:
        bar.update(1)


def _finish(results: list[LLMResult | None], errors: str) -> list[LLMResult]:
    out = [r for r in results if r is not None]
    assert len(out) == len(results), "a batch item got no result"
    if errors == "raise":
        for r in out:
            if r.error is not None:
                raise r.error
    return out



class _HTTPClient(openai.DefaultHttpxClient):  # type: ignore[misc,valid-type]
    """openai's default HTTP client, closed (sockets released) when the LLMClient is dropped."""

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _check_base_url(url: str, *, env: Mapping[str, str]) -> None:
    """Raise ValueError, naming where the URL came from, when it lacks http:// or https://."""
    if url.lower().startswith(("http://", "https://")):
        return
    where = "base_url"
    for name in (ENV_BASE_URL, "OPENAI_BASE_URL"):
        value = _env_value(env, name)
        if value is not None and value.rstrip("/") == url:
            where = f"base_url (from ${name})"
            break
    raise ValueError(
        f"{where} must start with http:// or https://, got {url!r}; e.g. "
        f"'http://{url.split('://')[-1].lstrip('/')}' for a local server."
    )


def _check_seconds(name: str, value: Any, *, positive: bool) -> None:
    """Raise ValueError unless ``value`` is a finite real number of seconds (> 0 or >= 0)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and (value > 0 if positive else value >= 0):
        return
    bound = "> 0" if positive else ">= 0"
    raise ValueError(f"{name} must be a finite number of seconds {bound}, got {value!r}.")



def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    text = str(exc) or name
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{name} (HTTP {status}): {text}" if status is not None else f"{name}: {text}"


def _usage_ints(usage: Any) -> dict[str, int]:
    out = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
        out[name] = int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
    if not out["total_tokens"]:
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out


def _normalise_messages(messages: Sequence[Mapping[str, Any]] | str) -> list[dict[str, Any]]:
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not isinstance(messages, Sequence) or isinstance(messages, (bytes, bytearray)):
        raise TypeError(f"messages must be a sequence of mappings or a str, got {type(messages).__name__}.")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m:
            raise TypeError(f"messages[{i}] must be a mapping with a 'role', got {m!r}.")
        out.append(dict(m))
    if not out:
        raise ValueError("messages must not be empty.")
    return out


def _schema_validator(schema: Mapping[str, Any]) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def _schema_errors(validator: Any, value: Any) -> str | None:
    from jsonschema.exceptions import relevance

    errors = sorted(validator.iter_errors(value), key=relevance)
    if not errors:
        return None
    parts = []
    for err in errors[:3]:
        where = "/".join(str(p) for p in err.absolute_path) or "<root>"
        parts.append(f"{err.message} (at {where})")
    more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
    return "schema validation failed: " + "; ".join(parts) + more


def _custom_errors(validator: Callable[[Any], Any], value: Any) -> str | None:
    try:
        verdict = validator(value)
    except (ValueError, TypeError, KeyError, AssertionError) as exc:
        return f"validation failed: {type(exc).__name__}: {exc}"
    if verdict is None or verdict is True:
        return None
    if verdict is False:
        return "validation failed: the value was rejected by the validator"
    return f"validation failed: {verdict}"


def _first_valid(
    text: str, schema_validator: Any, validator: Callable[[Any], Any] | None
) -> tuple[Any, str | None]:
    first_error: str | None = None
    found = False
    for value in iter_json_candidates(text):
        found = True
        error = _schema_errors(schema_validator, value) if schema_validator is not None else None
        if error is None and validator is not None:
            error = _custom_errors(validator, value)
        if error is None:
            return value, None
        if first_error is None:
            first_error = error
    if not found:
        return None, f"the reply contains no valid JSON ({_json_error_detail(text)})"
    return None, first_error


def _repair_prompt(error: str, schema: Mapping[str, Any] | None) -> str:
    lines = [f"Your previous reply could not be used: {error}."]
    if schema is not None:
        text = canonical_json(dict(schema))
        if len(text) <= 4000:
            lines.append(f"The JSON must validate against this JSON Schema: {text}")
    lines.append("Reply again with only the corrected JSON, no explanation and no code fences.")
    return "\n".join(lines)
