"""A subprocess for tests whose output is always drained and which is always stopped.

A test that starts a process with ``stdout=PIPE`` and reads only some lines (or none) leaves
the rest in a 64 KiB pipe; a child that writes more blocks in ``write`` and looks hung.
:class:`DrainedProcess` reads both pipes on two threads for the whole life of the process,
keeps every line, lets the test wait for a line, and on leaving the ``with`` block kills the
process group if it is still there and joins the readers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO


class DrainedProcess:
    """Run ``cmd`` in its own session with both output pipes read continuously.

    Parameters
    ----------
    cmd : sequence of str
    env : mapping, optional
        The child's environment (default: this process's).
    ignore_sigint : bool, default False
        Start the child with SIGINT ignored, as a non-interactive shell starts a background
        job (``cmd &`` in a script): an ignored disposition survives ``exec``. False: SIGINT's
        default disposition, whatever this process inherited.
    cwd : str, optional
    """

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        ignore_sigint: bool = False,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.cmd = list(cmd)
        self.lines: dict[str, list[str]] = {"out": [], "err": []}
        self._cond = threading.Condition()
        # Otherwise the child gets SIGINT's default disposition explicitly: a test runner that was
        # itself started as a background job of a script (CI harnesses do) passes an ignore on.
        disposition = signal.SIG_IGN if ignore_sigint else signal.SIG_DFL
        preexec = lambda: signal.signal(signal.SIGINT, disposition)  # noqa: E731
        self.proc = subprocess.Popen(
            self.cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,  # its own group: the cleanup can kill everything it left in it
            preexec_fn=preexec,
        )
        self._readers = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, "out"), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, "err"), daemon=True),
        ]
        for t in self._readers:
            t.start()

    def _drain(self, stream: IO[str], key: str) -> None:
        for line in stream:
            with self._cond:
                self.lines[key].append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        """Everything read so far, for assertion messages."""
        with self._cond:
            return self._unlocked_output()

    def wait_for(self, needle: str, stream: str = "err", timeout: float = 120.0) -> str:
        """Block until a line of ``stream`` ("out" or "err") contains ``needle``; return it.

        Raises AssertionError (with all output) when the process ends without such a line or
        ``timeout`` seconds pass.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[stream][seen:]:
                    if needle in line:
                        return line
                seen = len(self.lines[stream])
                readers_done = not any(t.is_alive() for t in self._readers)
                left = deadline - time.monotonic()
                if readers_done or left <= 0:
                    why = "the process closed its output" if readers_done else f"{timeout:g} s passed"
                    raise AssertionError(f"no line with {needle!r} on std{stream} ({why})\n{self._unlocked_output()}")
                self._cond.wait(min(left, 1.0))

    def _unlocked_output(self) -> str:
        return (
            f"$ {' '.join(self.cmd)}\n--- stdout ---\n" + "\n".join(self.lines["out"])
            + "\n--- stderr ---\n" + "\n".join(self.lines["err"])
        )

    def send_signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """The exit status; AssertionError with all output when it takes over ``timeout`` s."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout:g} s\n{self.output()}") from None
        for t in self._readers:
            t.join(timeout=30)
        return rc

    def close(self) -> None:
        """Kill the process group if anything in it is still there, reap, join the readers."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        else:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # grandchildren left in its group
            except (ProcessLookupError, PermissionError):
                pass
        for t in self._readers:
            t.join(timeout=30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> DrainedProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
