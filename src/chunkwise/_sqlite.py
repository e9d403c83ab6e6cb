"""A small SQLite-file store shared by the on-disk caches (embeddings, LLM responses).

One connection per process (reopened after a fork), safe across threads behind a lock, WAL
journal so several readers can work while one process writes, and picklable by path.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any


class SQLiteStore:
    """Base class: subclasses set :attr:`SCHEMA` (``CREATE TABLE IF NOT EXISTS ...``) and :attr:`FILENAME`.

    Parameters
    ----------
    path : path-like
        The SQLite file (created with its folder on first use, never by the constructor).
    timeout : float
        Seconds to wait for a lock held by another process.

    Raises
    ------
    ValueError
        If ``path`` is an existing directory.
    """

    SCHEMA: str = ""
    FILENAME: str = "cache.sqlite"

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = Path(path).expanduser()
        if self.path.exists() and self.path.is_dir():
            raise ValueError(
                f"{type(self).__name__} path must be a file, got the directory {str(self.path)!r}; "
                f"use {str(self.path / self.FILENAME)!r}."
            )
        self.timeout = float(timeout)
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        # A connection must not cross a fork: reopen in a child process.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.path), timeout=self.timeout, check_same_thread=False, isolation_level=None
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError:  # e.g. a file system without shared memory
            pass
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute(self.SCHEMA)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def close(self) -> None:
        """Close the connection (it is reopened on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn, self._pid = None, None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], timeout=state["timeout"])  # type: ignore[misc]
