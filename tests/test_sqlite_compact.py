"""The on-disk caches' table layout and :meth:`SQLiteStore.compact`.

Both caches once stored their table ``WITHOUT ROWID``. With rows of 1.5 KB (a 384-float
vector) or several KB (a chat request), SQLite then keeps most of each row on overflow pages
and the file is about twice its data: the committed chapter-3 embedding cache held 7.5 MB of
vectors in 22.5 MB. These tests build files in the old layout with plain ``sqlite3`` (what an
earlier chunkwise wrote), check that they still read and write, and that ``compact`` turns them
into the current layout with every value intact and the file about half the size.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from chunkwise.embeddings import CacheFileError, EmbeddingCache
from chunkwise.llm.cache import LLMCache

OLD_EMBEDDINGS = (
    "CREATE TABLE embeddings (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec BLOB NOT NULL) WITHOUT ROWID"
)
OLD_RESPONSES = (
    "CREATE TABLE responses (key TEXT PRIMARY KEY, model_identity TEXT, model TEXT NOT NULL,"
    " text TEXT NOT NULL, finish_reason TEXT, usage TEXT NOT NULL, latency_s REAL NOT NULL,"
    " created_at REAL NOT NULL, request TEXT) WITHOUT ROWID"
)


def table_sql(path: Path, table: str) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]


def old_file(path: Path, schema: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(schema)
    conn.close()


def vectors(n: int = 600, dim: int = 384) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {f"{i:064x}": rng.standard_normal(dim).astype(np.float32) for i in range(n)}


def test_new_files_are_rowid_tables(tmp_path: Path) -> None:
    emb = EmbeddingCache(tmp_path / "e.sqlite")
    emb.put_many({"k": np.ones(3, dtype=np.float32)})
    llm = LLMCache(tmp_path / "l.sqlite")
    llm.put("k", text="t", model="m")
    emb.close(), llm.close()
    assert "WITHOUT ROWID" not in table_sql(tmp_path / "e.sqlite", "embeddings").upper()
    assert "WITHOUT ROWID" not in table_sql(tmp_path / "l.sqlite", "responses").upper()


def test_an_old_embedding_file_still_works_and_compacts_to_about_half(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    old_file(path, OLD_EMBEDDINGS)
    vecs = vectors()
    cache = EmbeddingCache(path)
    cache.put_many(vecs)  # the old layout still takes writes ...
    got = cache.get_many(vecs)  # ... and reads
    assert all(np.array_equal(got[k], v) for k, v in vecs.items())

    before, after = cache.compact()
    # 600 x 1,536 bytes of vectors = 0.92 MB. Measured (SQLite 3.40, 4 KB pages): 2.83 MB in
    # the old layout with its WAL, 1.29 MB after.
    assert 2.0e6 < before < 4.0e6
    assert 0.92e6 < after < 1.6e6
    assert after < 0.6 * before
    assert "WITHOUT ROWID" not in table_sql(path, "embeddings").upper()
    assert len(cache) == 600
    got = EmbeddingCache(path).get_many(vecs)
    assert all(np.array_equal(got[k], v) for k, v in vecs.items())
    # idempotent: a second run only vacuums
    again = cache.compact()
    assert again[0] == after and abs(again[1] - after) <= 4096


def test_an_old_llm_cache_compacts_with_every_column_intact(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    old_file(path, OLD_RESPONSES)
    cache = LLMCache(path)
    request = {"messages": [{"role": "user", "content": "新闻 " * 800}]}
    for i in range(100):
        cache.put(f"k{i}", text=f"reply {i}", model="qwen", usage={"prompt_tokens": i},
                  latency_s=i / 10, finish_reason="stop", model_identity="gguf:abc",
                  request=request, created_at=1000.0 + i)
    rows_before = sqlite3.connect(path).execute("SELECT * FROM responses ORDER BY key").fetchall()
    before, after = cache.compact()
    assert after < before
    assert "WITHOUT ROWID" not in table_sql(path, "responses").upper()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT * FROM responses ORDER BY key").fetchall() == rows_before
        assert json.loads(conn.execute("SELECT request FROM responses WHERE key='k7'").fetchone()[0]) == request
    entry = LLMCache(path).get("k42")
    assert (entry.text, entry.usage, entry.latency_s, entry.created_at) == ("reply 42", {"prompt_tokens": 42}, 4.2, 1042.0)


def test_compact_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    assert EmbeddingCache(tmp_path / "none.sqlite").compact() == (0, 0)
    assert not (tmp_path / "none.sqlite").exists()


def test_compact_on_a_garbage_file_names_it(tmp_path: Path) -> None:
    path = tmp_path / "embeddings.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(CacheFileError, match="safe to delete"):
        EmbeddingCache(path).compact()
