"""Content-addressed SQLite cache of chat-completion responses.

Every reply an :class:`~chunkwise.llm.client.LLMClient` receives can be stored under a key
that is the SHA-256 of a canonical JSON document holding everything that determines the
request:

- the *model identity* -- ``model_identity`` when the caller gives one (for a local model,
  ``"<name>@sha256:<sha256 of the weights file>"``), else ``"<model>@<base_url>"``;
- the messages, exactly as sent;
- the sampling parameters: ``temperature``, ``max_tokens``, ``seed``, ``response_format`` and
  any extra keyword arguments passed through to the endpoint.

Two requests that differ in any of these get different keys; the same request always gets
the same key on any machine, so a cache file can be committed with a project and replayed
without the model (a run in mode ``"use"`` then makes no request at all).

Each row stores the reply text, the model name the server reported, the finish reason, the
token usage, the latency of the original call and the time it was stored, plus the model
identity and the request document for auditing.

Cache modes (see :data:`CACHE_MODES`):

``"use"``
    look up first; on a miss, call the model and store the reply;
``"refresh"``
    never read; call the model and store (overwrite) the reply;
``"off"``
    neither read nor write.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise._sqlite import CacheFileError, SQLiteStore

__all__ = [
    "CACHE_FILENAME",
    "CACHE_MODES",
    "KEY_VERSION",
    "CacheEntry",
    "CacheFileError",
    "LLMCache",
    "cache_key",
    "canonical_json",
    "default_cache_path",
    "document_key",
    "request_document",
]

#: File name of the cache inside the cache directory.
CACHE_FILENAME = "llm.sqlite"

#: Accepted values of ``cache_mode`` (:class:`~chunkwise.llm.LLMClient`).
CACHE_MODES = ("use", "refresh", "off", "only")


class NotCachedError(LookupError):
    """A request missing from the cache of a client in ``cache_mode="only"`` (no model is asked)."""

#: Version of the key document; bump it if its layout ever changes.
KEY_VERSION = 1


def default_cache_path() -> Path:
    """Default location of the LLM response cache.

    Returns
    -------
    pathlib.Path
        ``$CHUNKWISE_CACHE_DIR/llm.sqlite`` when the environment variable is set and
        non-empty, else ``~/.cache/chunkwise/llm.sqlite``. Nothing is created here.
    """
    from chunkwise._env import cache_root

    return cache_root() / CACHE_FILENAME


def canonical_json(obj: Any) -> str:
    """Serialise ``obj`` deterministically (sorted keys, compact, UTF-8 kept).

    Parameters
    ----------
    obj : Any
        A JSON-serialisable value (dicts, lists, str, int, float, bool, None).

    Returns
    -------
    str
        The canonical JSON text.

    Raises
    ------
    TypeError
        If ``obj`` holds something JSON cannot represent (a key must never depend on
        ``repr`` of an arbitrary object).
    ValueError
        If ``obj`` holds NaN or infinity.
    """
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def request_document(
    model_identity: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    seed: int | None = None,
    response_format: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The document a cache key is the hash of.

    Parameters
    ----------
    model_identity : str
        Identity of the model (see the module docstring).
    messages : sequence of mapping
        Chat messages (``{"role": ..., "content": ...}``), in order.
    temperature : float or None, default 0.0
        Sampling temperature; integers are normalised to float so ``0`` and ``0.0`` agree.
    max_tokens : int or None
        Completion length limit.
    seed : int or None
        Sampling seed.
    response_format : mapping or None
        E.g. ``{"type": "json_object"}``.
    extra : mapping or None
        Any other parameters sent to the endpoint.

    Returns
    -------
    dict
        ``{"v", "model", "messages", "params"}``.
    """
    if not isinstance(model_identity, str) or not model_identity:
        raise ValueError(f"model_identity must be a non-empty str, got {model_identity!r}.")
    temp = None if temperature is None else float(temperature)
    if temp is not None and not math.isfinite(temp):
        raise ValueError(f"temperature must be finite, got {temperature!r}.")
    return {
        "v": KEY_VERSION,
        "model": model_identity,
        "messages": [dict(m) for m in messages],
        "params": {
            "temperature": temp,
            "max_tokens": max_tokens,
            "seed": seed,
            "response_format": dict(response_format) if response_format is not None else None,
            "extra": dict(extra or {}),
        },
    }


def cache_key(
    model_identity: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    seed: int | None = None,
    response_format: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Content address of one chat request.

    Parameters
    ----------
    model_identity, messages, temperature, max_tokens, seed, response_format, extra
        As in :func:`request_document`.

    Returns
    -------
    str
        64 hex digits: ``sha256(canonical_json(request_document(...)))``.

    Examples
    --------
    >>> k1 = cache_key("m@http://x/v1", [{"role": "user", "content": "hi"}])
    >>> k2 = cache_key("m@http://x/v1", [{"role": "user", "content": "hi"}], temperature=0)
    >>> k1 == k2, len(k1)
    (True, 64)
    """
    doc = request_document(
        model_identity,
        messages,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        response_format=response_format,
        extra=extra,
    )
    return document_key(doc)


def document_key(doc: Mapping[str, Any]) -> str:
    """Content address of a request document (:func:`request_document`'s output).

    Returns
    -------
    str
        64 hex digits: ``sha256(canonical_json(doc))`` of its UTF-8 bytes.
    """
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """One stored reply.

    Attributes
    ----------
    key : str
        The content address (:func:`cache_key`).
    text : str
        The reply text.
    model : str
        Model name reported by the server.
    usage : dict
        Token usage (``prompt_tokens``, ``completion_tokens``, ``total_tokens``).
    latency_s : float
        Wall-clock seconds of the original call (the successful attempt).
    created_at : float
        Unix time the entry was stored.
    finish_reason : str or None
        Why generation stopped (``"stop"``, ``"length"``, ...), when reported.
    model_identity : str or None
        The model identity the key was made with.
    """

    key: str
    text: str
    model: str
    usage: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    created_at: float = 0.0
    finish_reason: str | None = None
    model_identity: str | None = None


class LLMCache(SQLiteStore):
    """Content-addressed on-disk store of chat replies (SQLite).

    The file (and its parent directory) is created on first use, not at construction.
    The database runs in WAL mode with a busy timeout, so several processes may read while
    one writes. To commit a cache with a project, pass a path inside the repository.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The SQLite file. Default :func:`default_cache_path`.
    timeout : float, default 30.0
        Seconds to wait for a lock held by another connection before failing.

    Raises
    ------
    CacheFileError
        From any read or write when the file is not an SQLite database (garbage or corrupted:
        the message says it is safe to delete), lies under a regular file, or the disk is full.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> c = LLMCache(pathlib.Path(tempfile.mkdtemp()) / "llm.sqlite")
    >>> c.put("k", text="hello", model="m", usage={"prompt_tokens": 3}, latency_s=0.1)
    >>> c.get("k").text, len(c)
    ('hello', 1)
    """

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS responses ("
        " key TEXT PRIMARY KEY,"
        " model_identity TEXT,"
        " model TEXT NOT NULL,"
        " text TEXT NOT NULL,"
        " finish_reason TEXT,"
        " usage TEXT NOT NULL,"
        " latency_s REAL NOT NULL,"
        " created_at REAL NOT NULL,"
        " request TEXT"
        ")"
    )
    TABLE = "responses"
    FILENAME = CACHE_FILENAME
    KIND = "LLM response cache"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        super().__init__(path if path is not None else default_cache_path(), timeout=timeout)

    # -- access -----------------------------------------------------------------------

    def get(self, key: str) -> CacheEntry | None:
        """Look up one key.

        Parameters
        ----------
        key : str
            A content address from :func:`cache_key`.

        Returns
        -------
        CacheEntry or None
            The stored reply, or ``None`` on a miss (also when the file does not exist yet,
            which is not created by a read).
        """
        with self._lock, self._guard("reading"):
            if self._conn is None and not self.path.exists():
                return None
            row = (
                self._connect()
                .execute(
                    "SELECT model_identity, model, text, finish_reason, usage, latency_s, created_at"
                    " FROM responses WHERE key = ?",
                    (key,),
                )
                .fetchone()
            )
        if row is None:
            return None
        identity, model, text, finish, usage, latency, created = row
        try:
            usage_d = json.loads(usage)
        except ValueError:
            usage_d = {}
        return CacheEntry(
            key=key,
            text=text,
            model=model,
            usage=usage_d if isinstance(usage_d, dict) else {},
            latency_s=float(latency),
            created_at=float(created),
            finish_reason=finish,
            model_identity=identity,
        )

    def put(
        self,
        key: str,
        *,
        text: str,
        model: str,
        usage: Mapping[str, Any] | None = None,
        latency_s: float = 0.0,
        finish_reason: str | None = None,
        model_identity: str | None = None,
        request: Mapping[str, Any] | None = None,
        created_at: float | None = None,
    ) -> None:
        """Store (or overwrite) one reply.

        Parameters
        ----------
        key : str
            The content address.
        text : str
            Reply text.
        model : str
            Model name reported by the server.
        usage : mapping, optional
            Token usage.
        latency_s : float, default 0.0
            Seconds the call took.
        finish_reason : str, optional
            Why generation stopped.
        model_identity : str, optional
            Identity the key was made with (stored for auditing).
        request : mapping, optional
            The request document (:func:`request_document`), stored for auditing.
        created_at : float, optional
            Unix time; default now.
        """
        row = (
            key,
            model_identity,
            str(model),
            str(text),
            finish_reason,
            canonical_json(dict(usage or {})),
            float(latency_s),
            float(time.time() if created_at is None else created_at),
            canonical_json(dict(request)) if request is not None else None,
        )
        with self._lock, self._guard("writing"):
            self._connect().execute(
                "INSERT OR REPLACE INTO responses"
                " (key, model_identity, model, text, finish_reason, usage, latency_s, created_at, request)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )

    def delete(self, key: str) -> bool:
        """Remove one entry; return whether it existed."""
        with self._lock, self._guard("writing"):
            if self._conn is None and not self.path.exists():
                return False
            cur = self._connect().execute("DELETE FROM responses WHERE key = ?", (key,))
            return cur.rowcount > 0

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __len__(self) -> int:
        with self._lock, self._guard("reading"):
            if self._conn is None and not self.path.exists():
                return 0
            return int(self._connect().execute("SELECT COUNT(*) FROM responses").fetchone()[0])
