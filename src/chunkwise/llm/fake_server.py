"""A fake OpenAI-compatible chat server with a fixed latency, for tests and throughput benchmarks.

:class:`FakeChatServer` answers ``POST /v1/chat/completions`` and ``GET /v1/models`` on
127.0.0.1 from a thread per connection (``http.server.ThreadingHTTPServer``), so it serves any
number of requests at once, like a vLLM or OpenAI endpoint with free capacity. Every chat
request waits ``latency_s`` seconds and then answers ``"echo: <content of the last message>"``
(or the reply of :attr:`FakeChatServer.reply`), with usage counted in characters. It records
what a test needs to check a client: every request body, the number of chat requests, and the
largest number of requests in flight at once. A request whose last message contains
:data:`FAIL_MARKER` gets an HTTP 400 quoting that message (not retried by
:class:`~chunkwise.llm.LLMClient`); one
containing :data:`SLOW_MARKER` waits ``slow_latency_s`` instead.

It is a measuring instrument, not a model: nothing is generated. Start and stop it with
``with FakeChatServer(...) as server:``; the serving thread is stopped and the socket closed
on every path.

Examples
--------
>>> from chunkwise.llm import LLMClient
>>> from chunkwise.llm.fake_server import FakeChatServer
>>> with FakeChatServer(latency_s=0.01) as server:
...     client = LLMClient(base_url=server.base_url, model="fake", cache=False)
...     print(client.chat("hi").text, server.chat_count)
echo: hi 1
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAIL_MARKER", "SLOW_MARKER", "FakeChatServer"]

#: A last message containing this gets HTTP 400.
FAIL_MARKER = "<<fail>>"
#: A last message containing this waits ``slow_latency_s`` before its answer.
SLOW_MARKER = "<<slow>>"


class FakeChatServer:
    """An OpenAI-compatible chat endpoint on 127.0.0.1 that answers after a fixed latency.

    Parameters
    ----------
    latency_s : float, default 0.05
        Seconds every chat request waits before its answer (>= 0).
    slow_latency_s : float, default 5.0
        Seconds a request holding :data:`SLOW_MARKER` waits.
    model : str, default "fake-model"
        The one model ``GET /v1/models`` lists.
    reply : callable, optional
        ``reply(request_body) -> str``: the assistant text; default ``"echo: <last content>"``.

    Attributes
    ----------
    requests : list of dict
        Bodies of the chat requests received, in arrival order.
    max_in_flight : int
        Most chat requests being served at the same moment.

    Raises
    ------
    ValueError
        For a negative or non-finite latency.
    """

    def __init__(
        self,
        latency_s: float = 0.05,
        *,
        slow_latency_s: float = 5.0,
        model: str = "fake-model",
        reply: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        for name, value in (("latency_s", latency_s), ("slow_latency_s", slow_latency_s)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < float("inf"):
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}.")
        self.latency_s = float(latency_s)
        self.slow_latency_s = float(slow_latency_s)
        self.model = model
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- state ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the fake server is not running; use it inside `with FakeChatServer(...)`")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def chat_count(self) -> int:
        """Chat requests received so far."""
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        """Forget the requests received and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self.max_in_flight = 0

    def _enter(self, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> FakeChatServer:
        """Bind a free port and serve from a background thread; return ``self``."""
        if self._server is not None:
            return self
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        server, thread = self._server, self._thread
        self._server, self._thread = None, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(fake: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints

        def log_message(self, *args: Any) -> None:  # no output: the server is silent
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up
                pass

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/v1/models"):
                self._send(200, {"object": "list", "data": [{"id": fake.model, "object": "model", "owned_by": "fake"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found"}})
                return
            try:
                body = json.loads(raw)
                messages = body["messages"]
                last = str(messages[-1].get("content", ""))
            except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                self._send(400, {"error": {"message": "malformed chat request"}})
                return
            fake._enter(body)
            try:
                time.sleep(fake.slow_latency_s if SLOW_MARKER in last else fake.latency_s)
                if FAIL_MARKER in last:
                    status, payload = 400, {"error": {"message": f"fake failure requested by {last[:80]!r}",
                                                "type": "invalid_request_error"}}
                else:
                    text = fake.reply(body) if fake.reply is not None else f"echo: {last}"
                    prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
                    status, payload = 200, {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", fake.model),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        # characters, not tokens: the fake has no tokenizer
                        "usage": {"prompt_tokens": prompt_chars, "completion_tokens": len(text),
                                  "total_tokens": prompt_chars + len(text)},
                    }
            finally:
                # Leave before answering: once the client has the answer it may send the next
                # request, which must not count as overlapping this one.
                fake._leave()
            self._send(status, payload)

    return Handler
