"""Tests for chunkwise.llm: retries, cache, JSON extraction and repair, configuration.

Everything runs against a stub OpenAI-compatible server on 127.0.0.1 (a thread running
``http.server``) whose replies are scripted per test; nothing leaves the machine and no
test sleeps for more than a fraction of a second.
"""

from __future__ import annotations

import json
import pickle
import socket
import sqlite3
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chunkwise.llm import (
    CACHE_MODES,
    LLMCache,
    LLMClient,
    LLMError,
    LLMJSONError,
    LLMRequestError,
    LLMResponse,
    cache_key,
    default_cache_path,
    extract_json,
    is_configured,
    iter_json_candidates,
)
from chunkwise.llm import client as client_mod

MODEL = "stub-model"
ENV_NAMES = (
    "CHUNKWISE_LLM_BASE_URL",
    "CHUNKWISE_LLM_MODEL",
    "CHUNKWISE_LLM_API_KEY",
    "CHUNKWISE_LLM_CACHE_MODE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


# -- stub server --------------------------------------------------------------------------


class StubLLM:
    """Scripted OpenAI-compatible server state.

    ``push`` queues replies; each reply is a dict with ``status`` (default 200), ``text``
    (assistant content for a 200), ``raw`` (a raw body instead), ``headers`` and ``delay``
    (seconds to wait before answering). With the queue empty the server answers 200 with
    ``"echo: <last message content>"``.
    """

    def __init__(self) -> None:
        self.script: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.models = [MODEL]
        self.lock = threading.Lock()
        self.url = ""

    def push(self, *replies: dict[str, Any] | str) -> None:
        with self.lock:
            for r in replies:
                self.script.append({"text": r} if isinstance(r, str) else r)

    def next_reply(self) -> dict[str, Any] | None:
        with self.lock:
            return self.script.popleft() if self.script else None

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]


def _completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def _make_handler(stub: StubLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: str | bytes, headers: dict[str, str] | None = None) -> None:
            data = body.encode("utf-8") if isinstance(body, str) else body
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout test)
                pass

        def do_GET(self) -> None:
            with stub.lock:
                stub.requests.append({"method": "GET", "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
            if self.path.rstrip("/").endswith("/v1/models"):
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in stub.models]
                self._send(200, json.dumps({"object": "list", "data": data}))
            else:
                self._send(404, json.dumps({"error": {"message": "not found"}}))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            with stub.lock:
                stub.requests.append(
                    {"method": "POST", "path": self.path, "body": body, "headers": {k.lower(): v for k, v in self.headers.items()}}
                )
            if self.path != "/v1/chat/completions":
                self._send(404, json.dumps({"error": {"message": "not found"}}))
                return
            reply = stub.next_reply() or {}
            if reply.get("delay"):
                time.sleep(reply["delay"])
            status = int(reply.get("status", 200))
            if "raw" in reply:
                payload = reply["raw"]
            elif status == 200:
                text = reply.get("text")
                if text is None:
                    last = (body or {}).get("messages", [{}])[-1].get("content", "")
                    text = f"echo: {last}"
                payload = json.dumps(_completion((body or {}).get("model", MODEL), text))
            else:
                payload = json.dumps({"error": {"message": f"stub error {status}", "type": "stub", "code": status}})
            self._send(status, payload, reply.get("headers"))

    return Handler


@pytest.fixture
def stub() -> Any:
    state = StubLLM()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "default-cache"))


def make_client(stub: StubLLM, tmp_path: Path, **kw: Any) -> LLMClient:
    kw.setdefault("base_url", stub.url)
    kw.setdefault("model", MODEL)
    kw.setdefault("api_key", "test-key")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("max_retries", 3)
    kw.setdefault("backoff", 0.001)
    kw.setdefault("cache", tmp_path / "llm.sqlite")
    return LLMClient(**kw)


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


USER = [{"role": "user", "content": "hello"}]


# -- chat and retries ---------------------------------------------------------------------


def test_chat_returns_response_and_sends_params(stub: StubLLM, tmp_path: Path) -> None:
    client = make_client(stub, tmp_path)
    r = client.chat(USER, max_tokens=20, seed=3, top_p=0.5)
    assert isinstance(r, LLMResponse)
    assert r.text == "echo: hello" and r.model == MODEL and r.cached is False
    assert r.usage == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert r.finish_reason == "stop" and r.latency_s > 0 and len(r.key) == 64
    (req,) = stub.chat_requests
    body = req["body"]
    assert body["model"] == MODEL and body["messages"] == USER
    assert body["temperature"] == 0.0 and body["max_tokens"] == 20 and body["seed"] == 3
    assert body["top_p"] == 0.5 and "response_format" not in body
    assert req["headers"].get("authorization") == "Bearer test-key"
    assert "test-key" not in repr(client)


def test_string_messages_become_one_user_message(stub: StubLLM, tmp_path: Path) -> None:
    r = make_client(stub, tmp_path, cache=False).chat("hi there")
    assert r.text == "echo: hi there"
    assert stub.chat_requests[0]["body"]["messages"] == [{"role": "user", "content": "hi there"}]


def test_retry_500_then_200(stub: StubLLM, tmp_path: Path) -> None:
    stub.push({"status": 500}, "recovered")
    client = make_client(stub, tmp_path)
    r = client.chat(USER)
    assert r.text == "recovered"
    assert len(stub.chat_requests) == 2
    s = client.stats()
    assert s["requests"] == 2 and s["retries"] == 1 and s["calls"] == 1


def test_retry_429_and_503(stub: StubLLM, tmp_path: Path) -> None:
    stub.push({"status": 429}, {"status": 503}, "fine")
    r = make_client(stub, tmp_path).chat(USER)
    assert r.text == "fine" and len(stub.chat_requests) == 3


def test_backoff_is_exponential_and_honours_retry_after(stub: StubLLM, tmp_path: Path) -> None:
    client = make_client(stub, tmp_path, backoff=0.1, cache=False)
    sleeps: list[float] = []
    client._sleep = sleeps.append  # record instead of sleeping
    stub.push({"status": 500}, {"status": 502}, {"status": 504}, "ok")
    assert client.chat(USER).text == "ok"
    assert sleeps == pytest.approx([0.1, 0.2, 0.4])

    sleeps.clear()
    stub.push({"status": 429, "headers": {"Retry-After": "1.5"}}, "ok2")
    assert client.chat([{"role": "user", "content": "x"}]).text == "ok2"
    assert sleeps == pytest.approx([1.5])


def test_failure_after_max_retries_names_endpoint_and_attempts(stub: StubLLM, tmp_path: Path) -> None:
    stub.push(*[{"status": 500}] * 10)
    client = make_client(stub, tmp_path, max_retries=2)
    with pytest.raises(LLMRequestError) as info:
        client.chat(USER)
    err = info.value
    assert len(stub.chat_requests) == 3
    assert err.attempts == 3 and err.status_code == 500 and err.endpoint == stub.url
    msg = str(err)
    assert stub.url in msg and "3 attempts" in msg and "max_retries=2" in msg and "500" in msg
    assert client.stats()["requests"] == 3
    assert len(LLMCache(tmp_path / "llm.sqlite")) == 0  # failures are not cached


def test_non_retryable_error_fails_at_once(stub: StubLLM, tmp_path: Path) -> None:
    stub.push({"status": 400}, "never reached")
    with pytest.raises(LLMRequestError) as info:
        make_client(stub, tmp_path).chat(USER)
    assert info.value.attempts == 1 and info.value.status_code == 400
    assert "non-retryable" in str(info.value) and len(stub.chat_requests) == 1


def test_connection_error_is_retried_then_reported(tmp_path: Path) -> None:
    url = dead_url()
    client = LLMClient(base_url=url, model="m", max_retries=2, backoff=0.0, cache=False, timeout=2.0)
    t0 = time.perf_counter()
    with pytest.raises(LLMRequestError) as info:
        client.chat(USER)
    assert time.perf_counter() - t0 < 5
    assert info.value.attempts == 3 and url in str(info.value)
    assert "APIConnectionError" in str(info.value)
    assert client.stats()["requests"] == 3


def test_timeout_is_retried(stub: StubLLM, tmp_path: Path) -> None:
    stub.push({"delay": 0.6, "text": "too late"}, "in time")
    client = make_client(stub, tmp_path, timeout=0.2)
    assert client.chat(USER).text == "in time"
    assert client.stats()["retries"] == 1


# -- cache --------------------------------------------------------------------------------


def test_cache_hit_makes_no_request_and_counts(stub: StubLLM, tmp_path: Path) -> None:
    client = make_client(stub, tmp_path)
    first = client.chat(USER)
    second = client.chat(USER)
    assert len(stub.chat_requests) == 1
    assert second.cached and not first.cached
    assert (second.text, second.usage, second.key) == (first.text, first.usage, first.key)
    assert second.latency_s == pytest.approx(first.latency_s)
    s = client.stats()
    assert s["calls"] == 2 and s["cache_hits"] == 1 and s["requests"] == 1
    assert s["prompt_tokens"] == 7 and s["completion_tokens"] == 3 and s["total_tokens"] == 10
    assert s["latency_s"] == pytest.approx(first.latency_s)
    # the cached reply's original cost is counted apart: 7 prompt + 3 generated tokens
    assert s["cached_prompt_tokens"] == 7 and s["cached_completion_tokens"] == 3
    assert s["cached_latency_s"] == pytest.approx(first.latency_s)
    client.reset_stats()
    assert client.stats()["calls"] == 0 and client.stats()["cached_latency_s"] == 0.0


def test_cache_is_shared_through_the_file(stub: StubLLM, tmp_path: Path) -> None:
    make_client(stub, tmp_path).chat(USER)
    again = make_client(stub, tmp_path).chat(USER)
    assert again.cached and len(stub.chat_requests) == 1
    with sqlite3.connect(tmp_path / "llm.sqlite") as conn:
        (row,) = conn.execute("SELECT text, usage, created_at, request FROM responses").fetchall()
    assert row[0] == "echo: hello" and json.loads(row[1])["total_tokens"] == 10
    assert row[2] > 0 and json.loads(row[3])["messages"] == USER


def test_refresh_mode_ignores_reads_but_writes(stub: StubLLM, tmp_path: Path) -> None:
    stub.push("old", "new")
    assert make_client(stub, tmp_path).chat(USER).text == "old"
    refreshed = make_client(stub, tmp_path, cache_mode="refresh").chat(USER)
    assert refreshed.text == "new" and not refreshed.cached and len(stub.chat_requests) == 2
    replay = make_client(stub, tmp_path).chat(USER)
    assert replay.cached and replay.text == "new" and len(stub.chat_requests) == 2


def _raw_completion(text: str, finish_reason: str, completion_tokens: int) -> dict[str, Any]:
    body = _completion(MODEL, text)
    body["choices"][0]["finish_reason"] = finish_reason
    body["usage"] = {"prompt_tokens": 7, "completion_tokens": completion_tokens, "total_tokens": 7 + completion_tokens}
    return {"raw": json.dumps(body)}


def test_capped_request_reuses_an_uncapped_reply_only_when_the_cap_cannot_change_it(
    stub: StubLLM, tmp_path: Path
) -> None:
    short = [{"role": "user", "content": "short"}]
    cut = [{"role": "user", "content": "cut"}]
    stub.push(_raw_completion("ok", "stop", 40), _raw_completion("long...", "length", 40))
    client = make_client(stub, tmp_path)
    first = client.chat(short)
    client.chat(cut)
    assert len(stub.chat_requests) == 2

    # ended on its own after 40 tokens: a cap of 40 (or more) returns the same reply
    for cap in (40, 1024):
        again = client.chat(short, max_tokens=cap)
        assert again.cached and again.text == "ok" and again.key == first.key
    assert len(stub.chat_requests) == 2 and client.stats()["cache_hits"] == 2

    # a cap below the stored length, or a stored reply cut by length: the model is asked
    stub.push("capped at 39", "capped at 100")
    below = client.chat(short, max_tokens=39)
    assert not below.cached and below.text == "capped at 39" and below.key != first.key
    assert client.chat(cut, max_tokens=100).text == "capped at 100"
    assert [r["body"].get("max_tokens") for r in stub.chat_requests[2:]] == [39, 100]

    # refresh mode never reads, so it never falls back either
    refresh = make_client(stub, tmp_path, cache_mode="refresh")
    assert not refresh.chat(short, max_tokens=1024).cached and len(stub.chat_requests) == 5


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "1024"])
def test_max_tokens_must_be_a_positive_int(stub: StubLLM, tmp_path: Path, bad: Any) -> None:
    # -1 would mean "no limit" to llama.cpp: refused before any request
    client = make_client(stub, tmp_path)
    with pytest.raises(ValueError, match="max_tokens must be an int >= 1 or None"):
        client.chat(USER, max_tokens=bad)
    assert stub.chat_requests == []


def test_off_mode_neither_reads_nor_writes(stub: StubLLM, tmp_path: Path) -> None:
    path = tmp_path / "off.sqlite"
    client = make_client(stub, tmp_path, cache=path, cache_mode="off")
    assert client.cache is None
    client.chat(USER)
    client.chat(USER)
    assert len(stub.chat_requests) == 2 and not path.exists()
    assert client.stats()["cache_hits"] == 0
    no_cache = make_client(stub, tmp_path, cache=False)
    no_cache.chat(USER)
    assert len(stub.chat_requests) == 3


def test_default_cache_path_follows_env(stub: StubLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cdir"))
    assert default_cache_path() == tmp_path / "cdir" / "llm.sqlite"
    client = make_client(stub, tmp_path, cache=None)
    assert client.cache is not None and client.cache.path == tmp_path / "cdir" / "llm.sqlite"
    client.chat(USER)
    assert (tmp_path / "cdir" / "llm.sqlite").exists()
    monkeypatch.delenv("CHUNKWISE_CACHE_DIR")
    assert default_cache_path() == Path.home() / ".cache" / "chunkwise" / "llm.sqlite"


def test_cache_key_changes_with_every_input() -> None:
    base = cache_key("m@u", USER)
    assert base == cache_key("m@u", USER, temperature=0)  # 0 and 0.0 agree
    variants = [
        cache_key("m@u", USER, temperature=0.7),
        cache_key("m@u", [{"role": "user", "content": "hello!"}]),
        cache_key("other@u", USER),
        cache_key("m@u", USER, max_tokens=5),
        cache_key("m@u", USER, seed=1),
        cache_key("m@u", USER, response_format={"type": "json_object"}),
        cache_key("m@u", USER, extra={"top_p": 0.9}),
    ]
    assert len({base, *variants}) == len(variants) + 1
    with pytest.raises(TypeError):
        cache_key("m@u", USER, extra={"obj": object()})


def test_client_keys_follow_temperature_messages_and_identity(stub: StubLLM, tmp_path: Path) -> None:
    client = make_client(stub, tmp_path)
    a = client.chat(USER)
    b = client.chat(USER, temperature=0.5)
    c = client.chat([{"role": "user", "content": "other"}])
    assert len({a.key, b.key, c.key}) == 3 and len(stub.chat_requests) == 3
    assert client.model_identity == f"{MODEL}@{stub.url}"

    # Same model identity behind another URL: the cache answers, nothing is requested.
    ident = "stub-model@sha256:" + "ab" * 32
    first = make_client(stub, tmp_path, model_identity=ident).chat(USER)
    assert not first.cached and first.key != a.key and len(stub.chat_requests) == 4
    elsewhere = make_client(stub, tmp_path, base_url=dead_url(), model_identity=ident, max_retries=0)
    replay = elsewhere.chat(USER)
    assert replay.cached and replay.key == first.key and len(stub.chat_requests) == 4


def test_llm_cache_roundtrip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.sqlite"
    cache = LLMCache(path)
    assert cache.get("nope") is None and len(cache) == 0 and not path.exists()
    cache.put("k", text="t", model="m", usage={"prompt_tokens": 1}, latency_s=0.25, finish_reason="stop")
    entry = cache.get("k")
    assert entry is not None and (entry.text, entry.model, entry.latency_s) == ("t", "m", 0.25)
    assert entry.usage == {"prompt_tokens": 1} and entry.finish_reason == "stop" and entry.created_at > 0
    assert "k" in cache and len(cache) == 1
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.get("k") == entry
    assert cache.delete("k") and "k" not in cache
    cache.close()
    with pytest.raises(ValueError, match="directory"):
        LLMCache(tmp_path)


# -- JSON ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here you go:\n```\n[1, 2, 3]\n```\nAnything else?', [1, 2, 3]),
        ('Here is the result: {"a": {"b": [1, 2]}} Hope it helps.', {"a": {"b": [1, 2]}}),
        ('<think>maybe {"draft": true}</think>\n{"final": true}', {"final": True}),
        ('```json\n{"a": "unclosed fence"}\n', {"a": "unclosed fence"}),
        ("As noted in [citation] the answer is {\"x\": 2}", {"x": 2}),
        ("42", 42),
    ],
)
def test_extract_json(text: str, expected: Any) -> None:
    assert extract_json(text) == expected


def test_extract_json_errors_and_bounds() -> None:
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("I cannot answer that.")
    many = " ".join(f'{{"i": {i}}}' for i in range(100))
    values = list(iter_json_candidates(many))
    assert len(values) == 32 and values[0] == {"i": 0}
    assert list(iter_json_candidates("{" * 5000)) == []  # bounded, no value


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def test_chat_json_fenced_reply_and_json_mode(stub: StubLLM, tmp_path: Path) -> None:
    stub.push('Result:\n```json\n{"answer": "yes"}\n```')
    client = make_client(stub, tmp_path)
    obj, r = client.chat_json(USER, schema=SCHEMA)
    assert obj == {"answer": "yes"} and isinstance(r, LLMResponse)
    assert stub.chat_requests[0]["body"]["response_format"] == {"type": "json_object"}

    stub.push('{"answer": "no"}')
    obj, _ = client.chat_json([{"role": "user", "content": "q2"}], json_mode=False)
    assert obj == {"answer": "no"} and "response_format" not in stub.chat_requests[1]["body"]


def test_chat_json_picks_the_candidate_that_validates(stub: StubLLM, tmp_path: Path) -> None:
    stub.push('Example: {"x": 1}. Answer: {"answer": "ok"}')
    obj, _ = make_client(stub, tmp_path).chat_json(USER, schema=SCHEMA)
    assert obj == {"answer": "ok"} and len(stub.chat_requests) == 1


def test_chat_json_repairs_malformed_then_valid(stub: StubLLM, tmp_path: Path) -> None:
    stub.push("{answer: oops", '{"answer": 3}', '{"answer": "fixed"}')
    client = make_client(stub, tmp_path)
    obj, r = client.chat_json(USER, schema=SCHEMA, max_repairs=2)
    assert obj == {"answer": "fixed"} and not r.cached
    reqs = stub.chat_requests
    assert len(reqs) == 3
    second = reqs[1]["body"]["messages"]
    assert second[:1] == USER and second[1] == {"role": "assistant", "content": "{answer: oops"}
    assert second[2]["role"] == "user" and "no valid JSON" in second[2]["content"]
    third = reqs[2]["body"]["messages"]
    assert third[1]["content"] == '{"answer": 3}'
    assert "is not of type 'string'" in third[2]["content"] and '"required"' in third[2]["content"]
    assert client.stats()["calls"] == 3

    # The repairs are cached under their full messages: a replay makes no request.
    again, r2 = make_client(stub, tmp_path).chat_json(USER, schema=SCHEMA, max_repairs=2)
    assert again == obj and r2.cached and len(stub.chat_requests) == 3


def test_chat_json_raises_after_max_repairs_with_last_reply(stub: StubLLM, tmp_path: Path) -> None:
    bad = [json.dumps({"wrong": i, "pad": "z" * 3000}) for i in range(5)]
    stub.push(*bad)
    client = make_client(stub, tmp_path)
    with pytest.raises(LLMJSONError) as info:
        client.chat_json(USER, schema=SCHEMA, max_repairs=2)
    err = info.value
    assert len(stub.chat_requests) == 3 and err.attempts == 3
    assert err.reply == bad[2] and err.response.text == bad[2]
    msg = str(err)
    assert '{"wrong": 2' in msg and "more chars" in msg and len(msg) < 2500
    assert "'answer' is a required property" in msg and "2 repairs" in msg
    assert isinstance(err, LLMError)


def test_chat_json_zero_repairs(stub: StubLLM, tmp_path: Path) -> None:
    stub.push("not json at all")
    with pytest.raises(LLMJSONError, match="not json at all"):
        make_client(stub, tmp_path).chat_json(USER, max_repairs=0)
    assert len(stub.chat_requests) == 1


def test_chat_json_callable_validator(stub: StubLLM, tmp_path: Path) -> None:
    def positive(value: Any) -> str | None:
        if value["n"] <= 0:
            return "n must be positive"
        return None

    stub.push('{"n": -1}', '{"m": 1}', '{"n": 4}')
    obj, _ = make_client(stub, tmp_path).chat_json(USER, validator=positive, max_repairs=2)
    assert obj == {"n": 4}
    reqs = stub.chat_requests
    assert "n must be positive" in reqs[1]["body"]["messages"][-1]["content"]
    assert "KeyError" in reqs[2]["body"]["messages"][-1]["content"]


def test_chat_json_rejects_bad_schema_before_asking(stub: StubLLM, tmp_path: Path) -> None:
    import jsonschema

    with pytest.raises(jsonschema.exceptions.SchemaError):
        make_client(stub, tmp_path).chat_json(USER, schema={"type": "no-such-type"})
    assert stub.chat_requests == []


# -- configuration ------------------------------------------------------------------------


def test_from_env_none_when_unset() -> None:
    assert is_configured() is False
    assert LLMClient.from_env() is None
    assert is_configured({"OPENAI_API_KEY": "sk-x"}) is False  # a key alone does not opt in
    assert is_configured({"CHUNKWISE_LLM_BASE_URL": "  "}) is False


def test_from_env_reads_chunkwise_variables(stub: StubLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHUNKWISE_LLM_BASE_URL", stub.url + "/")
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", MODEL)
    monkeypatch.setenv("CHUNKWISE_LLM_API_KEY", "env-key")
    monkeypatch.setenv("CHUNKWISE_LLM_CACHE_MODE", "off")
    assert is_configured()
    client = LLMClient.from_env(max_retries=0)
    assert client is not None
    assert client.base_url == stub.url and client.model == MODEL and client.cache_mode == "off"
    assert client.chat(USER).text == "echo: hello"
    assert stub.chat_requests[0]["headers"]["authorization"] == "Bearer env-key"


def test_from_env_falls_back_to_openai_variables(stub: StubLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    client = LLMClient.from_env(cache=False)
    assert client is not None and client.base_url == stub.url
    # No model configured: the endpoint's single model is discovered via GET /models.
    assert client.model == MODEL
    client.chat(USER)
    assert stub.chat_requests[0]["headers"]["authorization"] == "Bearer openai-key"
    assert any(r["method"] == "GET" for r in stub.requests)


def test_model_discovery_needs_exactly_one_model(stub: StubLLM) -> None:
    stub.models = ["a", "b"]
    client = LLMClient(base_url=stub.url, cache=False, max_retries=0)
    with pytest.raises(LLMError, match="lists 2 models"):
        client.chat(USER)


def test_constructor_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="No API key"):
        LLMClient(model="gpt-x", cache=False)  # the OpenAI API without a key
    assert LLMClient(model="gpt-x", api_key="k", cache=False).base_url == "https://api.openai.com/v1"
    for bad in ({"cache_mode": "sometimes"}, {"max_retries": -1}, {"timeout": 0}, {"backoff": -1.0}):
        with pytest.raises(ValueError):
            LLMClient(base_url="http://127.0.0.1:9/v1", model="m", cache=False, **bad)
    with pytest.raises(TypeError):
        LLMClient(base_url="http://127.0.0.1:9/v1", model="m", cache=3.5)  # type: ignore[arg-type]
    assert CACHE_MODES == ("use", "refresh", "off", "only")
    assert client_mod.MAX_BACKOFF_S >= 1


def test_malformed_messages_rejected_before_any_request(stub: StubLLM, tmp_path: Path) -> None:
    client = make_client(stub, tmp_path)
    with pytest.raises(TypeError):
        client.chat([{"content": "no role"}])
    with pytest.raises(ValueError):
        client.chat([])
    assert stub.chat_requests == []


def test_cache_mode_only_answers_hits_and_refuses_misses(stub: StubLLM, tmp_path: Path) -> None:
    from chunkwise.llm import NotCachedError

    first = make_client(stub, tmp_path).chat(USER)  # fills the cache
    only = make_client(stub, tmp_path, cache_mode="only")
    again = only.chat(USER)
    assert again.cached and again.text == first.text == "echo: hello"
    with pytest.raises(NotCachedError, match='cache_mode="only" sends no request'):
        only.chat([{"role": "user", "content": "not asked before"}])
    hit, miss = only.chat_many([USER, [{"role": "user", "content": "also new"}]])
    assert hit.output.cached and isinstance(miss.error, NotCachedError) and miss.output is None
    assert len(stub.chat_requests) == 1  # only the first client's request reached the server
    with pytest.raises(ValueError, match="give a cache"):
        make_client(stub, tmp_path, cache=False, cache_mode="only")
