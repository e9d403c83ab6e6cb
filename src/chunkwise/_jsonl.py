"""Append-only JSONL record stores: the resumable caches of the LLM-built indexes.

PG-RAG's document records, RAPTOR's summaries and Graph-RAG's extractions are all written one
JSON line per finished unit of work, flushed at once, so a run killed at any moment loses at
most the unit in progress.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["JSONLStore"]


class JSONLStore:
    """Append-only JSONL file of records keyed by one field; the last record of a key wins.

    A last line cut by a kill is dropped (the file is truncated after its last newline) so its
    work is redone; a malformed line elsewhere is an error that names the line.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder of the file (created on the first :meth:`put`).
    filename : str
    key : str, default "key"
        The record field that identifies a unit of work.
    fsync : bool, default False
        Also ``os.fsync`` every record (survives a machine crash, not only a killed process).

    Raises
    ------
    ValueError
        If ``folder`` exists and is not a folder, or a line other than the last is not a JSON
        object with the key field.
    """

    def __init__(self, folder: str | os.PathLike[str], filename: str, *, key: str = "key", fsync: bool = False) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"store {self.folder} exists and is not a folder")
        self.path = self.folder / filename
        self.key = key
        self.fsync = fsync
        self.records: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            lines = self.path.read_text(encoding="utf-8").split("\n")
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    if i >= len(lines) - 2:  # a last line cut by a kill
                        continue
                    raise ValueError(f"{self.path}: line {i + 1} is not JSON; fix or delete that line") from None
                if not isinstance(rec, dict) or key not in rec:
                    raise ValueError(f"{self.path}: line {i + 1} is not a record with a {key!r}")
                self.records[str(rec[key])] = rec
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):
                with open(self.path, "r+b") as f:
                    f.truncate(data.rfind(b"\n") + 1)

    def get(self, key: str) -> dict[str, Any] | None:
        """The record of ``key``, or None."""
        return self.records.get(key)

    def put(self, rec: dict[str, Any]) -> None:
        """Append ``rec`` (must hold the key field) and flush it to disk."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        self.records[str(rec[self.key])] = rec
