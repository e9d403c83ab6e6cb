"""The embedding cache: content-addressed vectors on disk, and the wrapper that puts any embedder behind it.

- :func:`cache_key` -- ``sha256(embedder.name + "\\0" + text)``, the content address of one vector;
- :class:`EmbeddingCache` -- the vectors in SQLite (WAL, one transaction per write);
- :class:`CachedEmbedder` -- any :class:`~chunkwise.embeddings.base.Embedder` behind that cache: each
  distinct text computed at most once, every output checked before it is stored;
- :func:`resolve_cache` -- an embedder's ``cache_dir`` argument turned into a cache;
- :func:`uncached_parts` -- the model and the cache of a caching embedder, apart (the Ray engine).

The embedder's ``name`` is the namespace of its keys (:func:`chunkwise.embeddings.models.cache_name`
spells it for the models of the table). Caches are safe to delete.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise._sqlite import CacheFileError, SQLiteStore
from chunkwise.embeddings.base import Embedder, check_output, check_texts, check_unicode

__all__ = [
    "CACHE_FILENAME",
    "CacheFileError",
    "CachedEmbedder",
    "EmbeddingCache",
    "cache_key",
    "default_cache_path",
    "resolve_cache",
    "uncached_parts",
]

#: File name of the default cache inside the cache directory.
CACHE_FILENAME = "embeddings.sqlite"


def default_cache_path() -> Path:
    """Default location of the embedding cache.

    Returns
    -------
    pathlib.Path
        ``$CHUNKWISE_CACHE_DIR/embeddings.sqlite`` when the environment variable is set and
        non-empty, else ``~/.cache/chunkwise/embeddings.sqlite``. Nothing is created here.
    """
    from chunkwise._env import cache_root

    return cache_root() / CACHE_FILENAME


def cache_key(embedder_name: str, text: str) -> str:
    """Content address of one (embedder, text) pair.

    Parameters
    ----------
    embedder_name : str
        The embedder's ``name``.
    text : str
        The text embedded.

    Returns
    -------
    str
        Hex sha256 of ``embedder_name + "\\0" + text`` in UTF-8 (lone surrogates are kept
        via ``surrogatepass`` rather than raising).
    """
    data = embedder_name.encode("utf-8", "surrogatepass") + b"\0" + text.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


_SQLITE_MAX_VARS = 900  # stay under SQLITE_MAX_VARIABLE_NUMBER of old builds (999)


class EmbeddingCache(SQLiteStore):
    """Content-addressed on-disk store of embedding vectors (SQLite).

    One row per key ``sha256(embedder name + "\\0" + text)`` holding the vector as
    little-endian ``float32`` bytes and its dimension. The file (and its parent directory)
    is created on first use, not at construction. The database runs in WAL mode with a busy
    timeout, so several processes may read while one writes; writes are one transaction per
    :meth:`put_many` call, so an interrupted run keeps everything stored before it stopped.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The SQLite file. Default :func:`default_cache_path`.
    timeout : float, default 30.0
        Seconds to wait for a lock held by another connection before failing.

    Raises
    ------
    CacheFileError
        From any read or write when the file is not an SQLite database, lies under a regular
        file, or the disk is full; the message names the file and what to do.

    Notes
    -----
    Entries whose stored byte length does not match ``4 * dim``, and entries holding a NaN or
    infinite value (written by an older version that did not check), are treated as misses:
    the vector is computed again and overwrites the entry. A non-finite vector is never a
    valid result, and recomputing it is exactly what deleting the cache would do, so a
    broken entry cannot keep failing runs after the model is fixed. The cache is safe to
    delete while no process uses it.
    """

    SCHEMA = (
        "CREATE TABLE IF NOT EXISTS embeddings ("
        " key TEXT PRIMARY KEY,"
        " dim INTEGER NOT NULL,"
        " vec BLOB NOT NULL"
        ")"
    )
    TABLE = "embeddings"
    FILENAME = CACHE_FILENAME
    KIND = "embedding cache"

    def __init__(self, path: str | os.PathLike[str] | None = None, *, timeout: float = 30.0) -> None:
        super().__init__(path if path is not None else default_cache_path(), timeout=timeout)

    # -- reads / writes ---------------------------------------------------------------

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """Look up vectors by key.

        Parameters
        ----------
        keys : iterable of str
            Keys from :func:`cache_key`.

        Returns
        -------
        dict of str to numpy.ndarray
            Only the keys found with a well-formed, finite vector; each value has shape
            ``(dim,)`` and dtype ``float32``. If the cache file does not exist yet, returns
            ``{}`` without creating it.

        Raises
        ------
        CacheFileError
            If the file is not a readable SQLite database (the message says it is safe to
            delete).
        """
        keys = list(dict.fromkeys(keys))
        if not keys or (self._conn is None and not self.path.exists()):
            return {}
        found: dict[str, np.ndarray] = {}
        with self._lock, self._guard("reading"):
            conn = self._connect()
            for i in range(0, len(keys), _SQLITE_MAX_VARS):
                part = keys[i : i + _SQLITE_MAX_VARS]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    f"SELECT key, dim, vec FROM embeddings WHERE key IN ({marks})", part
                ).fetchall()
                for key, dim, blob in rows:
                    if dim >= 0 and len(blob) == 4 * dim:
                        vec = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                        if np.isfinite(vec).all():  # a NaN/inf row is a miss (see Notes)
                            found[key] = vec
        return found

    def put_many(self, items: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]]) -> None:
        """Store vectors (one transaction; existing keys are overwritten).

        Parameters
        ----------
        items : mapping or iterable of (str, array_like)
            Key and 1-D vector pairs; vectors are stored as little-endian ``float32``.

        Raises
        ------
        ValueError
            If a vector is not one-dimensional or holds NaN or infinity (nothing is stored).
        CacheFileError
            If the write fails (disk full, not a database, ...); the transaction is rolled
            back, entries stored by earlier calls are kept, and the message names the file.
        """
        pairs = items.items() if isinstance(items, Mapping) else items
        rows = []
        for key, vec in pairs:
            arr = np.asarray(vec, dtype="<f4")
            if arr.ndim != 1:
                raise ValueError(f"cache values must be 1-D vectors, got shape {arr.shape} for key {key!r}.")
            if not np.isfinite(arr).all():
                raise ValueError(
                    f"refusing to cache a vector holding NaN or infinity (key {key!r}) in {self.path}; "
                    "nothing was stored. Fix the embedder that produced it."
                )
            rows.append((key, int(arr.shape[0]), arr.tobytes()))
        if not rows:
            return
        with self._lock, self._guard("writing"):
            self._write(
                self._connect(), "INSERT OR REPLACE INTO embeddings (key, dim, vec) VALUES (?, ?, ?)", rows
            )

    def __len__(self) -> int:
        if self._conn is None and not self.path.exists():
            return 0
        with self._lock, self._guard("reading"):
            return int(self._connect().execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.get_many([key]))

    def clear(self) -> None:
        """Delete every entry (the file stays)."""
        if self._conn is None and not self.path.exists():
            return
        with self._lock, self._guard("clearing"):
            self._connect().execute("DELETE FROM embeddings")


class CachedEmbedder:
    """Put any :class:`Embedder` behind a content-addressed cache.

    Within one :meth:`embed` call each distinct text is looked up once and, on a miss,
    sent to the inner embedder once; the output rows follow the input order. Misses are
    sent in chunks of ``chunk_size`` texts and each chunk is stored before the next is
    computed, so an interrupted run resumes where it stopped.

    Parameters
    ----------
    inner : Embedder
        The embedder that computes vectors. Its ``name`` is the cache namespace.
    cache : EmbeddingCache or None
        Where vectors persist. ``None`` disables persistence (deduplication, validation
        and counters still apply).
    chunk_size : int, default 1024
        Largest number of texts sent to ``inner.embed`` in one call.
    show_progress_bar : bool, default False
        Show a tqdm bar over the texts sent to the model.

    Attributes
    ----------
    name : str
        Same as ``inner.name``.
    n_requested : int
        Texts asked for through :meth:`embed` (duplicates counted) since the last
        :meth:`reset_counters`.
    n_embedded : int
        Texts actually sent to the inner embedder since the last :meth:`reset_counters`.
    dim : int or None
        Vector dimension once known (from a computed or cached vector, or ``inner.dim``).
    max_tokens : int or None
        ``inner.max_tokens`` (the model's window in its own word pieces), or ``None`` when
        the inner embedder does not say.
    truncates : bool or None
        ``inner.truncates``: whether text past ``max_tokens`` is cut off; ``None`` when unknown.
    """

    def __init__(
        self,
        inner: Embedder,
        cache: EmbeddingCache | None = None,
        *,
        chunk_size: int = 1024,
        show_progress_bar: bool = False,
    ) -> None:
        if not isinstance(getattr(inner, "name", None), str) or not callable(getattr(inner, "embed", None)):
            raise TypeError(
                f"inner must be an Embedder (a str `name` and an `embed` method), got {type(inner).__name__}."
            )
        if cache is not None and not isinstance(cache, EmbeddingCache):
            raise TypeError(f"cache must be an EmbeddingCache or None, got {type(cache).__name__}.")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}.")
        self.inner = inner
        self.cache = cache
        self.chunk_size = chunk_size
        self.show_progress_bar = bool(show_progress_bar)
        self._dim: int | None = None
        self.n_requested = 0
        self.n_embedded = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int | None:
        if self._dim is None:
            inner_dim = getattr(self.inner, "dim", None)
            if isinstance(inner_dim, int) and not isinstance(inner_dim, bool):
                return inner_dim
        return self._dim

    @property
    def max_tokens(self) -> int | None:
        value = getattr(self.inner, "max_tokens", None)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def truncates(self) -> bool | None:
        value = getattr(self.inner, "truncates", None)
        return value if isinstance(value, bool) else None

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's length in the inner model's own tokens (``inner.token_counts``; never cached).

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        numpy.ndarray of int64, shape (n,)

        Raises
        ------
        TypeError
            If ``texts`` is a single string or holds a non-string.
        NotImplementedError
            If the inner embedder cannot count tokens.
        """
        items = check_texts(texts)
        count = getattr(self.inner, "token_counts", None)
        if not callable(count):
            raise NotImplementedError(
                f"embedder {self.name!r} ({type(self.inner).__name__}) cannot count tokens "
                "(it has no token_counts method)."
            )
        return np.asarray(count(items), dtype=np.int64).reshape(len(items))

    def reset_counters(self) -> None:
        """Set :attr:`n_requested` and :attr:`n_embedded` back to 0."""
        self.n_requested = 0
        self.n_embedded = 0

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, cache={self.cache!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``, computing only what neither this call nor the cache already has.

        Parameters
        ----------
        texts : sequence of str, length n
            Texts to embed. Duplicates are fine (computed once). An empty string is passed
            to the model like any other text.

        Returns
        -------
        numpy.ndarray, shape (n, d), dtype float32
            Row ``i`` is the vector of ``texts[i]``. For ``n == 0``: shape ``(0, d)`` if
            ``d`` is known, else ``(0, 0)``; the model is not called.

        Raises
        ------
        TypeError
            If ``texts`` is a single string or an item is not a ``str`` (the message names
            the index).
        ValueError
            If a text to be computed holds a lone surrogate code point (no UTF-8 form: no
            tokenizer can encode it; checked before the model is called), or
            if the inner embedder returns a number of vectors different from the number of
            texts sent (e.g. it silently dropped one), a non-2-D array, vectors whose
            dimension differs from earlier/cached ones under the same name, or a vector holding
            NaN or infinity (checked before anything of that batch is cached).
        """
        items = check_texts(texts)
        self.n_requested += len(items)
        if not items:
            dim = self.dim
            return np.zeros((0, dim if dim is not None else 0), dtype=np.float32)

        name = self.name
        unique = list(dict.fromkeys(items))
        keys = {t: cache_key(name, t) for t in unique}
        vectors: dict[str, np.ndarray] = {}
        if self.cache is not None:
            hits = self.cache.get_many(keys.values())
            for t in unique:
                v = hits.get(keys[t])
                if v is not None:
                    vectors[t] = v
        if vectors:
            dims = {v.shape[0] for v in vectors.values()}
            if self._dim is not None:
                dims.add(self._dim)
            if len(dims) > 1:
                raise ValueError(
                    f"cached vectors under embedder name {name!r} have different dimensions "
                    f"{sorted(dims)}; the cache mixes models under one name -- delete it or "
                    "give the embedders distinct names."
                )
            self._dim = dims.pop()

        missing = [t for t in unique if t not in vectors]
        check_unicode(missing, items, name)
        if missing:
            bar = None
            if self.show_progress_bar:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(missing), desc=f"embedding ({name})", unit="text")
            try:
                for i in range(0, len(missing), self.chunk_size):
                    part = missing[i : i + self.chunk_size]
                    out = check_output(self.inner.embed(part), len(part), name, self._dim, part)
                    self.n_embedded += len(part)
                    self._dim = int(out.shape[1])
                    if self.cache is not None:
                        self.cache.put_many((keys[t], out[j]) for j, t in enumerate(part))
                    for j, t in enumerate(part):
                        vectors[t] = out[j]
                    if bar is not None:
                        bar.update(len(part))
            finally:
                if bar is not None:
                    bar.close()

        result = np.stack([vectors[t] for t in items]).astype(np.float32, copy=False)
        return result


def uncached_parts(embedder: Any) -> tuple[Any, EmbeddingCache | None] | None:
    """The model behind a caching embedder and the cache in front of it.

    A distributed run (:mod:`chunkwise.evaluation.distributed`) sends the model to its workers
    and fills the cache from their results, so the embedder itself then answers from the cache.

    Parameters
    ----------
    embedder : object
        A :class:`CachedEmbedder`, or an embedder of :mod:`chunkwise.embeddings` that wraps one
        (:class:`~chunkwise.embeddings.SentenceTransformerEmbedder`,
        :class:`~chunkwise.embeddings.OpenAIEmbedder`, :func:`~chunkwise.embeddings.make_embedder`'s).

    Returns
    -------
    (inner, cache) or None
        ``inner`` computes vectors without any cache (``name``, ``embed``); a
        sentence-transformers model pickles without its loaded weights (the copy loads them); ``cache`` is the :class:`EmbeddingCache` (None when persistence is off).
        None for an embedder that keeps no content cache of this module.
    """
    cached = embedder if isinstance(embedder, CachedEmbedder) else getattr(embedder, "_cached", None)
    if not isinstance(cached, CachedEmbedder):
        return None
    return cached.inner, cached.cache


def resolve_cache(cache_dir: str | os.PathLike[str] | EmbeddingCache | None | bool) -> EmbeddingCache | None:
    """Turn an embedder's ``cache_dir`` argument into a cache.

    ``None``: the default file (:func:`default_cache_path`); a directory:
    ``<dir>/embeddings.sqlite``; an :class:`EmbeddingCache`: itself; ``False``: no cache.

    Raises
    ------
    ValueError
        For ``True`` (ambiguous: pass a directory or None).
    """
    if cache_dir is False:
        return None
    if cache_dir is None:
        return EmbeddingCache(default_cache_path())
    if isinstance(cache_dir, EmbeddingCache):
        return cache_dir
    if cache_dir is True:
        raise ValueError("cache_dir must be a directory, an EmbeddingCache, None (default) or False.")
    return EmbeddingCache(Path(cache_dir).expanduser() / CACHE_FILENAME)
