"""A small SQLite-file store shared by the on-disk caches (embeddings, LLM responses).

One connection per process (reopened after a fork), safe across threads behind a lock, WAL
journal so several readers can work while one process writes, and picklable by path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class CacheFileError(RuntimeError):
    """A cache file cannot be created, read or written.

    The message names the file, says what went wrong (a file that is not an SQLite
    database, a full disk, a path under a regular file, ...) and what to do. Caches only
    hold results that can be recomputed, so deleting a broken one is always safe.

    Attributes
    ----------
    path : pathlib.Path
        The cache file.
    """

    def __init__(self, message: str, *, path: Path) -> None:
        super().__init__(message)
        self.path = path


def _file_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a directory, if any."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


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
    CacheFileError
        From any read or write (see :meth:`_guard`): the file is not an SQLite database
        (garbage or corrupted), lies under a regular file, the disk is full, or the database
        stays locked; the message names the file and what to do.
    """

    SCHEMA: str = ""
    #: The table :attr:`SCHEMA` creates (read by :meth:`compact`).
    TABLE: str = ""
    FILENAME: str = "cache.sqlite"
    #: Words naming the cache in messages (e.g. "embedding cache").
    KIND: str = "cache"

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

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn SQLite and file-system errors met while ``action`` into one-line :class:`CacheFileError`.

        ``action`` is a verb phrase for the message (``"reading"``, ``"writing"``).
        """
        try:
            yield
        except sqlite3.Error as exc:
            raise self._error(action, exc) from exc
        except OSError as exc:
            raise self._error(action, exc) from exc

    def _error(self, action: str, exc: BaseException) -> CacheFileError:
        """The one-line error for ``exc``, met while ``action`` the file (see :meth:`_guard`)."""
        name = f"{self.KIND} {os.path.abspath(self.path)!r}"
        reason = str(exc).strip() or type(exc).__name__
        low = reason.lower() if isinstance(exc, sqlite3.Error) else ""
        blocker = _file_ancestor(self.path) if isinstance(exc, OSError) else None
        if blocker is not None:
            msg = (
                f"Cannot create the {name}: {str(blocker)!r} is a regular file, not a folder; "
                "choose another cache path (or set CHUNKWISE_CACHE_DIR to a folder)."
            )
        elif isinstance(exc, sqlite3.DatabaseError) and any(
            word in low for word in ("not a database", "malformed", "encrypted")
        ):
            msg = (
                f"The {name} is not a readable SQLite database ({reason}); it only holds results "
                "that can be recomputed, so it is safe to delete: remove it (with any '-wal' and "
                "'-shm' file beside it) and rerun, or restore a committed copy with `git checkout`."
            )
        elif "disk is full" in low or "disk i/o" in low or getattr(exc, "errno", None) in (
            errno.ENOSPC, errno.EIO, errno.EDQUOT
        ):
            msg = (
                f"Disk full or I/O error while {action} the {name}: {reason}; what earlier calls "
                "stored is kept. Free disk space, or point CHUNKWISE_CACHE_DIR (or the cache path) "
                "at another disk, and rerun."
            )
        elif "locked" in low or "busy" in low:
            msg = (
                f"The {name} stayed locked by another process for more than {self.timeout:g} s "
                f"while {action} it ({reason}); wait for that process to finish, or use another "
                "cache path."
            )
        else:
            msg = (
                f"Error while {action} the {name}: {type(exc).__name__}: {reason}; check that the "
                "file and its folder are writable (the cache is safe to delete)."
            )
        return CacheFileError(msg, path=self.path)

    def _connect(self) -> sqlite3.Connection:
        """The open connection (opened, with the schema created, on first use).

        Raises
        ------
        CacheFileError
            If the file cannot be created or is not an SQLite database.
        """
        # A connection must not cross a fork: reopen in a child process.
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        with self._guard("opening"):
            return self._open()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            str(self.path), timeout=self.timeout, check_same_thread=False, isolation_level=None
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            try:
                conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError:  # e.g. a file system without shared memory
                pass
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(self.SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _write(self, conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Run ``sql`` over ``rows`` in one transaction; on failure roll back and re-raise the real error.

        SQLite rolls a transaction back by itself on some errors (``SQLITE_FULL``,
        ``SQLITE_IOERR``); an explicit ``ROLLBACK`` then fails with "no transaction is
        active", which must not hide the error that caused it.
        """
        with self._transaction(conn):
            conn.executemany(sql, rows)

    @staticmethod
    @contextlib.contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; on any error roll back (if SQLite has not already) and re-raise."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def compact(self) -> tuple[int, int]:
        """Rewrite the file in the current table layout and give its free pages back.

        Files written by earlier versions of chunkwise store their table ``WITHOUT ROWID``.
        SQLite advises that layout only for rows smaller than about a twentieth of a page
        (SQLite documentation, "The WITHOUT ROWID Optimization", section 4, "When To Use
        WITHOUT ROWID"); a 384-float vector (1.5 KB) or a chat request (several KB) is larger,
        and such a file takes about twice the space of its data. This method copies every row
        into a table of the current :attr:`SCHEMA` (by column name, in one transaction), drops
        the old table and runs ``VACUUM``. On a file already in the current layout it only runs
        ``VACUUM``. Keys and values are unchanged, so every lookup returns what it returned
        before. Run it while no other process uses the file.

        Returns
        -------
        tuple of (int, int)
            The file's size in bytes before and after, counting its ``-wal`` file (0 and 0
            when the file does not exist; nothing is created).

        Raises
        ------
        CacheFileError
            If the file is not an SQLite database, another process holds it locked, or the
            disk fills up while copying (the transaction is rolled back and the file keeps
            its old layout).
        """
        def size() -> int:
            wal = self.path.with_name(self.path.name + "-wal")
            return sum(p.stat().st_size for p in (self.path, wal) if p.exists())

        if self._conn is None and not self.path.exists():
            return 0, 0
        before = size()
        table = self.TABLE
        with self._lock, self._guard("compacting"):
            conn = self._connect()
            (sql,) = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            if "WITHOUT ROWID" in " ".join(sql.upper().split()):
                old = f"{table}_without_rowid"
                with self._transaction(conn):
                    conn.execute(f"ALTER TABLE {table} RENAME TO {old}")
                    conn.execute(self.SCHEMA)
                    columns = [row[1] for row in conn.execute(f"PRAGMA table_info({old})")]
                    names = ", ".join(columns)
                    conn.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {old}")
                    conn.execute(f"DROP TABLE {old}")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return before, size()

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
