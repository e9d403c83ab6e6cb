"""LocalLLMServer with llama.cpp's ``llama-server`` and parallel slots (``parallel=N``).

The executable is a stand-in written here (standard library only): it takes the options
:meth:`LocalLLMServer.command` passes to ``llama-server``, answers ``GET /v1/models`` with the
alias and ``POST /v1/chat/completions`` after a fixed delay, serving requests on threads, and
records how many requests were in flight at once. So the tests check what the project sends
(the command line, the number of requests in flight) without compiling llama.cpp.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from chunkwise import cli
from chunkwise.llm import local as local_mod
from chunkwise.llm.local import ENV_LLAMA_SERVER, ENV_PARALLEL, LocalLLMServer, OnDemandLocalClient
from chunkwise.llm.weights import GGUFWeights

STUB = textwrap.dedent(
    """\
    #!{python}
    import argparse, json, os, threading, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    p = argparse.ArgumentParser()
    for name in ("model", "alias", "host", "port", "threads", "threads-batch", "ctx-size", "parallel"):
        p.add_argument("--" + name)
    for name in ("repeat-penalty", "repeat-last-n", "top-k", "top-p", "min-p"):
        p.add_argument("--" + name)
    p.add_argument("--no-kv-unified", action="store_true")
    p.add_argument("--cont-batching", action="store_true")
    a = p.parse_args()
    out = os.environ["STUB_OUT"]
    with open(os.path.join(out, "argv.json"), "w") as fh:
        json.dump(vars(a), fh)
    lock = threading.Lock()
    state = {{"now": 0, "max": 0}}


    class H(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, obj):
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send({{"object": "list", "data": [{{"id": a.alias, "object": "model"}}]}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            time.sleep(float(os.environ.get("STUB_DELAY", "0.5")))
            with lock:
                state["now"] -= 1
                with open(os.path.join(out, "max_in_flight"), "w") as fh:
                    fh.write(str(state["max"]))
            prompt = body["messages"][-1]["content"]
            self._send({{
                "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{{"index": 0, "finish_reason": "stop",
                              "message": {{"role": "assistant", "content": "echo " + prompt}}}}],
                "usage": {{"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
            }})


    ThreadingHTTPServer((a.host, int(a.port)), H).serve_forever()
    """
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (ENV_LLAMA_SERVER, ENV_PARALLEL, "CHUNKWISE_LLM_MAX_CONCURRENCY",
                 "CHUNKWISE_LLM_BASE_URL", "CHUNKWISE_LLM_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def weights(tmp_path: Path) -> GGUFWeights:
    path = tmp_path / "w.gguf"
    path.write_bytes(b"GGUFweights")
    return GGUFWeights(path, "cd" * 32, "Fake-Coder-Q4", "path")


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text(STUB.format(python=sys.executable))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "stub_out"
    out.mkdir()
    monkeypatch.setenv("STUB_OUT", str(out))
    return binary


def test_parallel_above_one_needs_llama_server(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="parallel=2 needs llama.cpp's llama-server.*make llama-server"):
        LocalLLMServer(parallel=2)
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="parallel must be a positive int"):
            LocalLLMServer(parallel=bad, server_binary="/x/llama-server")  # type: ignore[arg-type]
    monkeypatch.setenv(ENV_PARALLEL, "3")
    with pytest.raises(ValueError, match="parallel=3 needs"):
        LocalLLMServer()
    for raw in ("three", "0"):
        monkeypatch.setenv(ENV_PARALLEL, raw)
        with pytest.raises(ValueError, match=rf"\${ENV_PARALLEL} must be a positive integer, got '{raw}'"):
            LocalLLMServer(server_binary="/x/llama-server")
    monkeypatch.setenv(ENV_PARALLEL, "1")
    srv = LocalLLMServer()
    assert (srv.parallel, srv.backend, srv.server_binary) == (1, "llama-cpp-python", None)


def test_a_missing_or_non_executable_binary_says_how_to_build_one(tmp_path: Path, weights: GGUFWeights) -> None:
    with pytest.raises(RuntimeError, match=r"does not exist; build llama.cpp's server with `make llama-server`"):
        LocalLLMServer(weights, server_binary=tmp_path / "nope", parallel=2).start()
    plain = tmp_path / "llama-server"
    plain.write_text("not a program")
    with pytest.raises(RuntimeError, match="is not an executable file"):
        LocalLLMServer(weights, server_binary=plain).start()


def test_llama_server_command_line(weights: GGUFWeights, stub: Path) -> None:
    srv = LocalLLMServer(weights, port=8124, n_ctx=1000, n_threads=3, parallel=4, server_binary=stub,
                         extra_args=["--n-gpu-layers", "99"])
    assert srv.backend == "llama-server"
    assert srv.command() == [
        str(stub), "--model", str(weights.path), "--alias", "Fake-Coder-Q4", "--host", "127.0.0.1",
        "--port", "8124", "--threads", "3", "--threads-batch", "3", "--ctx-size", "4000",
        "--parallel", "4", "--no-kv-unified", "--cont-batching",
        # llama-cpp-python's server's sampling defaults, so both decode a request alike
        "--repeat-penalty", "1.1", "--repeat-last-n", "64", "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05",
        "--n-gpu-layers", "99",
    ]


def test_slots_serve_a_batch_together(weights: GGUFWeights, stub: Path, tmp_path: Path) -> None:
    out = Path(os.environ["STUB_OUT"])
    with LocalLLMServer(weights, n_ctx=1000, parallel=3, server_binary=stub, startup_timeout=60) as srv:
        argv = json.loads((out / "argv.json").read_text())
        assert (argv["parallel"], argv["ctx_size"], argv["alias"]) == ("3", "3000", "Fake-Coder-Q4")
        info = srv.info()
        assert (info["backend"], info["parallel"]) == ("llama-server", 3)
        client = srv.client(cache=tmp_path / "llm.sqlite")
        assert client.max_concurrency == 3
        assert client.timeout == 900.0  # 300 s per slot: each request shares the machine with two others
        assert client.model_identity == "Fake-Coder-Q4@sha256:" + "cd" * 32
        prompts = [f"q{i}" for i in range(6)]
        replies = client.chat_many(prompts, max_tokens=4)
        assert [r.output.text for r in replies] == [f"echo q{i}" for i in range(6)]  # input order
        # Six requests of 0.5 s each through three slots: three at once, never more.
        assert (out / "max_in_flight").read_text() == "3"
        pid = srv.pid
    assert not srv.running and pid is not None


def test_on_demand_client_takes_slots_from_the_environment(
    weights: GGUFWeights, stub: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_LLAMA_SERVER, str(stub))
    monkeypatch.setenv(ENV_PARALLEL, "2")
    monkeypatch.setenv("STUB_DELAY", "0.3")
    started_in: list[str] = []

    class Recorded(LocalLLMServer):
        def start(self) -> LocalLLMServer:
            started_in.append(threading.current_thread().name)
            return super().start()

    with OnDemandLocalClient(server=Recorded(weights, startup_timeout=60), weights=weights,
                             cache=tmp_path / "llm.sqlite") as client:
        assert (client.server.backend, client.server.parallel, client.max_concurrency) == ("llama-server", 2, 2)
        assert client.timeout == 600.0
        assert not client.server.running  # nothing sent yet
        replies = client.chat_many(["a", "b", "c", "d"], max_tokens=4)
        assert [r.output.text for r in replies] == ["echo a", "echo b", "echo c", "echo d"]
        assert (Path(os.environ["STUB_OUT"]) / "max_in_flight").read_text() == "2"
    assert not client.server.running
    # Started once, by the calling thread, not by a batch worker: the server's parent-death
    # signal follows the thread that started it.
    assert started_in == [threading.main_thread().name]


def test_cli_serve_passes_slots_and_reports_the_concurrency(
    weights: GGUFWeights, stub: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, object] = {}

    class Started(LocalLLMServer):
        def wait(self, timeout: float | None = None) -> int | None:
            seen["argv"] = json.loads((Path(os.environ["STUB_OUT"]) / "argv.json").read_text())
            raise KeyboardInterrupt  # Ctrl-C once it serves

    monkeypatch.setattr(local_mod, "LocalLLMServer", Started)
    rc = cli.main(["llm", "serve", "--model-path", str(weights.path), "--parallel", "4",
                   "--server-binary", str(stub), "--n-ctx", "512"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "starting llama-server, 4 slots" in err
    assert "CHUNKWISE_LLM_MAX_CONCURRENCY=4" in out
    argv = seen["argv"]
    assert isinstance(argv, dict) and (argv["parallel"], argv["ctx_size"]) == ("4", "2048")
    assert cli.main(["llm", "serve", "--parallel", "2"]) == 1
    assert "make llama-server" in capsys.readouterr().err
