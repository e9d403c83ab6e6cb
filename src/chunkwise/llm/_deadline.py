"""A total deadline for HTTP requests made through httpx (used by :class:`~chunkwise.llm.LLMClient`).

(``openai`` 3.x sends its requests with ``httpx2`` / ``httpcore2``, the successors of
``httpx`` / ``httpcore`` with the same interfaces; this module uses whichever ``openai`` uses.)

httpx's ``timeout`` bounds each network operation (connect, one read, one write), not the
request: a server that sends one byte every second never trips a 2-second read timeout and
holds the caller for as long as it likes. Here every socket operation of a request is given
at most the time left until the request's deadline, and fails with httpcore's own timeout
error once none is left, so the whole request -- connect, TLS, sending, the response headers
and the body -- ends within the deadline. The failing connection is closed by httpcore, as
after any timeout; no thread or socket outlives the request.

How: the network backend of each of the client's connection pools is wrapped (httpx gives no
public way to choose it, so :func:`install` sets the pool's ``_network_backend``; the test
suite's trickling server checks that the deadline holds). The deadline itself is a context
variable set around one request by :func:`deadline`, so a kept-alive connection serves each
request with that request's deadline, and threads do not share one.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
import warnings
from collections.abc import Iterator
from typing import Any

try:  # the HTTP stack of openai >= 3
    import httpcore2 as httpcore
    import httpx2 as httpx
except ImportError:  # pragma: no cover - openai < 3
    import httpcore  # type: ignore[no-redef]
    import httpx  # type: ignore[no-redef]

__all__ = ["deadline", "install"]

#: ``time.monotonic()`` value at which the current request must end, or ``None`` (no deadline).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("chunkwise_http_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Give every socket operation inside the block at most what is left of ``seconds``.

    Parameters
    ----------
    seconds : float
        Total seconds, counted from entering the block.
    """
    token = _DEADLINE.set(time.monotonic() + float(seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """The timeout for one operation: ``timeout`` capped by the time left; raise ``error`` at 0."""
    end = _DEADLINE.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the request's total deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose reads and writes end by the current deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        tls = self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """A network backend whose connections and streams end by the current deadline."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(
            host, port, _left(timeout, httpcore.ConnectTimeout), local_address=local_address,
            socket_options=socket_options,
        )
        return _DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(
            path, _left(timeout, httpcore.ConnectTimeout), socket_options=socket_options
        )
        return _DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(client: httpx.Client) -> bool:
    """Make ``client``'s connections honour :func:`deadline` (its transport and proxy mounts).

    Parameters
    ----------
    client : httpx.Client

    Returns
    -------
    bool
        ``True`` when every transport was wrapped. ``False`` (with a ``RuntimeWarning``)
        when this httpx/httpcore version hides its network backend elsewhere: ``timeout`` then
        bounds each read, not the request.
    """
    transports = [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]
    ok = True
    for transport in transports:
        if transport is None:  # a mount that means "no proxy": the default transport
            continue
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if isinstance(backend, _DeadlineBackend):
            continue
        if not isinstance(backend, httpcore.NetworkBackend):
            ok = False
            continue
        pool._network_backend = _DeadlineBackend(backend)  # type: ignore[union-attr]
    if not ok:
        warnings.warn(
            f"httpx {httpx.__version__} / httpcore {httpcore.__version__}: cannot set the network "
            "backend, so the LLM timeout bounds each read, not the whole request; install the "
            "versions pinned in chunkwise's pyproject.toml.",
            RuntimeWarning,
            stacklevel=2,
        )
    return ok
