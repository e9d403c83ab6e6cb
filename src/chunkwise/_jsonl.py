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

    A last line cut by a kill -- anywhere, also inside a multi-byte character -- is dropped (the
    file is truncated after its last newline) so its work is redone; a last record that lost
    only its newline is kept; a malformed line elsewhere is an error that names the line.

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
            data = self.path.read_bytes()
            if data and not data.endswith(b"\n"):  # a last line cut by a kill, maybe inside a character
                head, tail = data[: data.rfind(b"\n") + 1], data[data.rfind(b"\n") + 1 :]
                if self._whole_record(tail):  # only its newline was lost: keep it
                    data += b"\n"
                    with open(self.path, "ab") as f:
                        f.write(b"\n")
                else:
                    data = head
                    with open(self.path, "r+b") as f:
                        f.truncate(len(data))
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                line = data[: exc.start].count(b"\n") + 1
                raise ValueError(f"{self.path}: line {line} is not UTF-8; fix or delete that line") from None
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    if i >= len(lines) - 2:  # the last line, written only in part
                        continue
                    raise ValueError(f"{self.path}: line {i + 1} is not JSON; fix or delete that line") from None
                if not isinstance(rec, dict) or key not in rec:
                    raise ValueError(f"{self.path}: line {i + 1} is not a record with a {key!r}")
                self.records[str(rec[key])] = rec

    def _whole_record(self, line: bytes) -> bool:
        try:
            rec = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return False
        return isinstance(rec, dict) and self.key in rec

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
