"""Ctrl-C and SIGTERM on ``chunkwise llm serve`` at every phase, with a stub server.

The CLI runs as a real process (``python -c`` on :data:`RUNNER`, which points
:class:`LocalLLMServer` at ``tests/stub_llama_server.py`` instead of ``llama_cpp.server``), so
signals reach it the way they reach a user's terminal session; no model and no llama-cpp-python
are needed. Each test waits for a marker of the phase (a line the CLI prints, or an event the
stub server writes), sends the signal, and then requires: the CLI exits (a generous bound on
what takes well under a second), with the expected status, without a traceback, and every
server process it started is gone.

Most runs start the CLI with SIGINT *ignored*, as a non-interactive shell starts a background
job (``chunkwise llm serve &`` in a script, or a CI step run that way): Python keeps an inherited
``SIG_IGN``, and before the fix ``kill -INT`` did nothing there -- the CLI never returned, the
failure seen in ``test_real_cli_serve_stops_on_ctrl_c`` on a loaded CI machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from procs import DrainedProcess, pid_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and POSIX signals")

STUB_SERVER = Path(__file__).with_name("stub_llama_server.py")
#: Generous upper bound on exiting after the signal (it takes well under a second).
EXIT_BOUND_S = 60.0
#: Generous upper bound on reaching a phase (a Python start-up and an import of chunkwise).
PHASE_BOUND_S = 120.0

#: Runs the real CLI with the stub server; the hooks stand for the slow or unlucky moments.
RUNNER = textwrap.dedent(
    """
    import json, os, sys, time
    cfg = json.loads(os.environ["STUB_CLI"])
    import subprocess
    from chunkwise import cli
    from chunkwise.llm import local, weights

    local.require_llama_cpp = lambda: None  # the stub needs no llama-cpp-python
    _command = local.LocalLLMServer.command

    def command(self):
        cmd = _command(self)
        return [cmd[0], cfg["server_script"], *cmd[3:]]

    local.LocalLLMServer.command = command
    if cfg.get("variant"):
        v = {k: tuple(x) if isinstance(x, list) else x for k, x in cfg["variant"].items()}
        weights.VARIANTS["1.5b"] = weights.ModelVariant(**v)
    if cfg.get("hold_in_fsync"):
        # Assembling a gigabyte of weights: held inside the final fsync until a signal comes.
        def fsync(fd):
            print("runner: assembling the weights", file=sys.stderr, flush=True)
            while True:
                time.sleep(0.05)

        weights.os.fsync = fsync
    if cfg.get("signal_in_popen"):
        # The unluckiest moment: the server is forked and exec'd, Popen has not returned yet.
        # (Sent once the stub has set up its SIGTERM handler, so only the CLI can stop it.)
        import glob
        _execute_child = subprocess.Popen._execute_child

        def execute_child(self, *a, **kw):
            _execute_child(self, *a, **kw)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not any(
                "stubborn" in open(f).read() for f in glob.glob(os.path.join(os.environ["STUB_DIR"], "*.events"))
            ):
                time.sleep(0.02)
            os.kill(os.getpid(), cfg["signal_in_popen"])

        subprocess.Popen._execute_child = execute_child
    sys.exit(cli.main(sys.argv[1:]))
    """
)


class Stubs:
    """The stub servers a test started (their pid and event files in one folder)."""

    def __init__(self, folder: Path) -> None:
        self.dir = folder
        folder.mkdir()

    def pids(self) -> list[int]:
        return sorted(int(p.stem) for p in self.dir.glob("*.pid"))

    def events(self, pid: int) -> list[str]:
        f = self.dir / f"{pid}.events"
        return f.read_text().split() if f.exists() else []

    def alive(self) -> list[int]:
        """Stub servers still running (checked by command line, so a reused pid does not count)."""
        out = []
        for pid in self.pids():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(STUB_SERVER).encode() in argv and pid_alive(pid):
                out.append(pid)
        return out

    def wait_event(self, event: str, proc: DrainedProcess, timeout: float = PHASE_BOUND_S) -> int:
        """Block until some stub server notes ``event``; return its pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid in self.pids():
                if event in self.events(pid):
                    return pid
            time.sleep(0.05)
        raise AssertionError(f"no stub server noted {event!r} within {timeout:g} s\n{proc.output()}")

    def kill_all(self) -> None:
        for pid in self.alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def stubs(tmp_path: Path):
    s = Stubs(tmp_path / "stubs")
    try:
        yield s
    finally:
        s.kill_all()  # whatever happened, no stub outlives its test


def _gguf(tmp_path: Path) -> Path:
    f = tmp_path / "stub-model.gguf"
    f.write_bytes(b"GGUF" + b"\0" * 64)
    return f


def _fake_parts(tmp_path: Path) -> tuple[dict, Path]:
    """Two importable weight 'parts' and the variant that names them (as JSON-ready fields)."""
    site = tmp_path / "site"
    chunks = [b"GGUF" + b"a" * 100, b"b" * 50]
    modules = []
    for i, chunk in enumerate(chunks, 1):
        mod = site / f"stubpart_{i}"
        (mod / "data").mkdir(parents=True)
        (mod / "data" / "part.bin").write_bytes(chunk)
        (mod / "__init__.py").write_text(
            "import os\ndef get_part_path():\n"
            "    return os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'part.bin')\n"
        )
        modules.append(mod.name)
    variant = {
        "key": "stub", "name": "Stub-Q4", "filename": "stub.gguf",
        "sha256": hashlib.sha256(b"".join(chunks)).hexdigest(),
        "modules": modules, "requirements": [f"stub-part{i}==1.0" for i in (1, 2)],
        "hub_repo": "Stub/Stub-GGUF", "hub_filename": "stub-q4.gguf", "hub_name": "Stub-Instruct-Q4",
    }
    return variant, site


def _start_cli(
    tmp_path: Path, stubs: Stubs, cli_args: list[str], *, mode: str = "ok",
    ignore_sigint: bool = True, site: Path | None = None, **hooks: object,
) -> DrainedProcess:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(
        [p for p in (str(site) if site else None, src, env.get("PYTHONPATH")) if p]
    )
    env.update(
        STUB_DIR=str(stubs.dir), STUB_MODE=mode, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
        CHUNKWISE_CACHE_DIR=str(tmp_path / "cache"),
        STUB_CLI=json.dumps({"server_script": str(STUB_SERVER), **hooks}),
    )
    env.pop("CHUNKWISE_LLM_GGUF", None)
    cmd = [sys.executable, "-c", RUNNER, "llm", "serve", "--startup-timeout", "600", *cli_args]
    return DrainedProcess(cmd, env=env, ignore_sigint=ignore_sigint)


def _finished(proc: DrainedProcess, stubs: Stubs, expected_rc: int) -> None:
    rc = proc.wait(timeout=EXIT_BOUND_S)
    out = proc.output()
    assert rc == expected_rc, out
    assert "Traceback" not in out, out
    assert stubs.alive() == [], f"server processes left running\n{out}"


@pytest.mark.parametrize("inherited", ["sigint-ignored", "default"])
def test_ctrl_c_while_serving_stops_cli_and_server(tmp_path: Path, stubs: Stubs, inherited: str) -> None:
    # The stub floods its stdout and stderr (1 MiB each, then 64 KiB per request): they go to
    # the log file, so neither the server nor the health check can block on them.
    log = tmp_path / "server.log"
    with _start_cli(tmp_path, stubs, ["--model-path", str(_gguf(tmp_path)), "--log", str(log)],
                    mode="flood", ignore_sigint=inherited == "sigint-ignored") as proc:
        proc.wait_for("Ctrl-C to stop", timeout=PHASE_BOUND_S)
        assert proc.wait_for("base_url:", stream="out").startswith("base_url: http://127.0.0.1:")
        [pid] = stubs.alive()
        proc.send_signal(signal.SIGINT)
        _finished(proc, stubs, 0)
        assert "stopping the server" in proc.output()
    assert log.stat().st_size > 2 << 20  # both floods reached the log


def test_sigterm_while_serving_stops_cli_and_server(tmp_path: Path, stubs: Stubs) -> None:
    with _start_cli(tmp_path, stubs, ["--model-path", str(_gguf(tmp_path))]) as proc:
        proc.wait_for("Ctrl-C to stop", timeout=PHASE_BOUND_S)
        proc.send_signal(signal.SIGTERM)
        _finished(proc, stubs, 0)


def test_ctrl_c_while_assembling_weights_leaves_no_partial_file(tmp_path: Path, stubs: Stubs) -> None:
    variant, site = _fake_parts(tmp_path)
    with _start_cli(tmp_path, stubs, ["--no-hub"], site=site, variant=variant, hold_in_fsync=True) as proc:
        proc.wait_for("runner: assembling the weights", timeout=PHASE_BOUND_S)
        models = tmp_path / "cache" / "models"
        assert [p.name for p in models.glob("*.partial")] != []  # caught in the middle
        proc.send_signal(signal.SIGINT)
        _finished(proc, stubs, 130)
        assert "interrupted before the server was ready" in proc.output()
    assert stubs.pids() == []  # no server was started
    assert sorted(p.name for p in models.iterdir() if p.name != "sha256-cache.json") == []


def test_ctrl_c_while_the_server_loads(tmp_path: Path, stubs: Stubs) -> None:
    with _start_cli(tmp_path, stubs, ["--model-path", str(_gguf(tmp_path))], mode="hang") as proc:
        stubs.wait_event("hanging", proc)  # started, never answers the health check
        proc.send_signal(signal.SIGINT)
        _finished(proc, stubs, 130)
        assert "interrupted before the server was ready" in proc.output()


@pytest.mark.parametrize("inherited", ["sigint-ignored", "default"])
def test_ctrl_c_inside_popen_does_not_orphan_the_server(tmp_path: Path, stubs: Stubs, inherited: str) -> None:
    # The signal lands after the fork and exec, before Popen returns a handle. The stub ignores
    # SIGTERM, so the parent-death signal cannot clean up an orphan either: only the CLI can.
    with _start_cli(tmp_path, stubs, ["--model-path", str(_gguf(tmp_path))], mode="stubborn",
                    ignore_sigint=inherited == "sigint-ignored", signal_in_popen=int(signal.SIGINT)) as proc:
        stubs.wait_event("sigterm-ignored", proc)  # the CLI is stopping it
        if proc.proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # second Ctrl-C: no more waiting
        _finished(proc, stubs, 130)


def test_second_ctrl_c_during_shutdown_kills_the_server(tmp_path: Path, stubs: Stubs) -> None:
    with _start_cli(tmp_path, stubs, ["--model-path", str(_gguf(tmp_path))], mode="stubborn") as proc:
        proc.wait_for("Ctrl-C to stop", timeout=PHASE_BOUND_S)
        proc.send_signal(signal.SIGINT)
        stubs.wait_event("sigterm-ignored", proc)  # inside stop(): SIGTERM sent, grace period running
        proc.send_signal(signal.SIGINT)
        _finished(proc, stubs, 0)
        assert "killed the server" in proc.output()


def test_a_killed_parent_takes_a_busy_server_with_it(tmp_path: Path, stubs: Stubs) -> None:
    # A parent that dies without stopping its server (SIGKILL here; a Jupyter kernel killed by its
    # manager while stop() waited, in the case that was seen) leaves the server to the
    # parent-death signal. The stub ignores SIGTERM, as a llama.cpp server busy with a generation
    # in effect does (uvicorn waits for the request), so only SIGKILL can end it.
    with _start_cli(tmp_path, stubs, ["--model-path", str(_gguf(tmp_path))], mode="stubborn") as proc:
        proc.wait_for("Ctrl-C to stop", timeout=PHASE_BOUND_S)
        [pid] = stubs.alive()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=EXIT_BOUND_S)
        deadline = time.monotonic() + EXIT_BOUND_S
        while pid in stubs.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stubs.alive() == [], f"the server outlived its killed parent\n{proc.output()}"
        assert "sigterm-ignored" not in stubs.events(pid)  # it got SIGKILL, not a SIGTERM it could ignore
