"""Find a public data file: a local mirror first, else a pinned, hash-checked download.

Every data file the book uses is listed in the package's download manifest,
``chunkwise/datasets/manifest.tsv`` (shipped as package data, read with
:mod:`importlib.resources`). Each row names a file by a relative path
(``"chroma/questions_df.csv"``), its sha256 and the raw URL of that file at a pinned upstream
commit (empty for a file only a mirror provides). :func:`data_path` turns a relative path into
a local file:

1. **Mirror.** If a mirror folder is configured (the ``mirror`` argument, else the environment
   variable ``CHUNKWISE_DATA_MIRROR``) and holds ``<mirror>/<relpath>``, its sha256 is checked
   against the manifest and that path is returned. A wrong hash is an error, never a reason to
   download: a mirror that disagrees with the manifest must be fixed, not papered over.
2. **Cache.** A file downloaded earlier, ``<cache>/<relpath>``, is returned when its hash matches.
3. **Download.** Otherwise :func:`pooch.retrieve` fetches the upstream URL into the cache with
   ``known_hash="sha256:..."`` and pooch's own progress bar. The cache is the ``cache_dir``
   argument, else ``$CHUNKWISE_CACHE_DIR/data``, else ``~/.cache/chunkwise/data``. Because the
   cache keeps the manifest's layout, a filled cache can itself serve as a mirror.

On a machine without internet and without a mirror the download fails and :func:`data_path` raises
a :class:`RuntimeError` that says to set ``CHUNKWISE_DATA_MIRROR`` or go online.

Hashing a large file takes time, so a verified digest is remembered in memory for the life of the
process, keyed by ``(resolved path, size in bytes, modification time in ns)``: a file is hashed
again only when it changes on disk (or moves).
"""

from __future__ import annotations

import csv
import hashlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path, PurePosixPath
from types import MappingProxyType

import pooch

from chunkwise import _env

__all__ = [
    "CACHE_ENV",
    "MIRROR_ENV",
    "ManifestEntry",
    "data_path",
    "default_cache_dir",
    "load_manifest",
    "sha256_file",
]

#: Environment variable naming a local mirror folder laid out as the manifest's paths.
MIRROR_ENV = _env.MIRROR_ENV
#: Environment variable naming chunkwise's cache root (downloads go to its ``data`` folder).
CACHE_ENV = _env.CACHE_ENV

_MANIFEST_PACKAGE = "chunkwise.datasets"
_MANIFEST_NAME = "manifest.tsv"
_MANIFEST_COLUMNS = ("path", "sha256", "upstream_url")
_CHUNK = 1 << 20  # bytes read per step while hashing

# (resolved path, size, mtime_ns) -> sha256 hex digest of that file's bytes.
_DIGESTS: dict[tuple[str, int, int], str] = {}
_DIGESTS_LOCK = threading.Lock()


@dataclass(frozen=True)
class ManifestEntry:
    """One row of the download manifest.

    Attributes
    ----------
    path : str
        Relative POSIX path of the file, e.g. ``"chroma/corpora/finance.md"``; the same path
        inside a mirror folder and inside the download cache.
    sha256 : str
        Lower-case hex sha256 of the file's bytes (64 characters).
    upstream_url : str or None
        Raw URL of the file at a pinned upstream commit, or ``None`` for a file that is
        available only from a mirror.
    """

    path: str
    sha256: str
    upstream_url: str | None


@lru_cache(maxsize=1)
def _manifest() -> Mapping[str, ManifestEntry]:
    text = resources.files(_MANIFEST_PACKAGE).joinpath(_MANIFEST_NAME).read_text(encoding="utf-8")
    reader = csv.DictReader(text.splitlines(), delimiter="\t")
    if tuple(reader.fieldnames or ()) != _MANIFEST_COLUMNS:
        raise ValueError(
            f"{_MANIFEST_NAME}: expected columns {_MANIFEST_COLUMNS}, got {reader.fieldnames}"
        )
    entries: dict[str, ManifestEntry] = {}
    for lineno, row in enumerate(reader, start=2):
        path, digest = row["path"].strip(), row["sha256"].strip().lower()
        url = (row["upstream_url"] or "").strip() or None
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"{_MANIFEST_NAME}:{lineno}: bad sha256 {digest!r} for {path!r}")
        if path in entries:
            raise ValueError(f"{_MANIFEST_NAME}:{lineno}: duplicate path {path!r}")
        entries[path] = ManifestEntry(path, digest, url)
    return MappingProxyType(entries)


def load_manifest() -> Mapping[str, ManifestEntry]:
    """Return the download manifest.

    Returns
    -------
    Mapping[str, ManifestEntry]
        Read-only mapping from relative path (e.g. ``"chroma/questions_df.csv"``) to its
        :class:`ManifestEntry`, in manifest order. Parsed once per process.

    Raises
    ------
    ValueError
        If the manifest has the wrong columns, a malformed hash or a duplicate path.
    """
    return _manifest()


def default_cache_dir() -> Path:
    """Return the folder downloads go to when no ``cache_dir`` is given.

    Returns
    -------
    pathlib.Path
        ``$CHUNKWISE_CACHE_DIR/data`` when that variable is set and non-empty, else
        ``~/.cache/chunkwise/data``. Nothing is created here.
    """
    from chunkwise._env import cache_root

    return cache_root() / "data"


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Return the sha256 hex digest of a file's bytes, memoised per file version.

    Parameters
    ----------
    path : str or os.PathLike
        File to hash.

    Returns
    -------
    str
        Lower-case hex digest (64 characters). A digest is reused, without reading the file
        again, while the file's resolved path, size and modification time are unchanged.

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _DIGESTS_LOCK:
        cached = _DIGESTS.get(key)
    if cached is not None:
        return cached
    digest = _hash_bytes(p)
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest
    return digest


def _hash_bytes(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _normalise_relpath(relpath: str | os.PathLike[str]) -> str:
    raw = os.fspath(relpath).replace("\\", "/")
    pure = PurePosixPath(raw)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"data path must be relative to the data root, got {raw!r}")
    return pure.as_posix()


def _check(path: Path, entry: ManifestEntry, where: str) -> Path:
    actual = sha256_file(path)
    if actual != entry.sha256:
        raise ValueError(
            f"sha256 mismatch for {entry.path!r} in {where} ({path}): "
            f"expected {entry.sha256}, got {actual}. The file differs from the pinned upstream "
            f"version; replace it with a correct copy (or delete it so it can be downloaded)."
        )
    return path


def data_path(
    relpath: str | os.PathLike[str],
    mirror: str | os.PathLike[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Return a local, hash-verified copy of a data file listed in the manifest.

    Parameters
    ----------
    relpath : str or os.PathLike
        The file's path relative to the data root, as in the manifest, e.g.
        ``"chroma/corpora/finance.md"`` (``/`` separators; ``\\`` is accepted).
    mirror : str or os.PathLike, optional
        A folder laid out like the manifest (``<mirror>/chroma/corpora/finance.md``). Defaults
        to ``$CHUNKWISE_DATA_MIRROR``; an empty value means no mirror.
    cache_dir : str or os.PathLike, optional
        Where downloads go (the manifest's layout is kept below it). Defaults to
        :func:`default_cache_dir`.

    Returns
    -------
    pathlib.Path
        The mirror's file when the mirror holds it, else the cached (possibly just downloaded)
        file. Its sha256 equals the manifest's.

    Raises
    ------
    ValueError
        If ``relpath`` is not in the manifest; if the mirror's copy has the wrong sha256 (the
        message names the file, the expected and the actual hash); or if a downloaded file
        does not match the manifest's hash.
    RuntimeError
        If the file is not in the mirror and cannot be downloaded (offline, HTTP error, or a
        mirror-only file); the message says to set ``CHUNKWISE_DATA_MIRROR`` or go online.

    Notes
    -----
    The mirror's copy is used only when its hash is right; a wrong hash raises rather than
    silently downloading, so that a broken mirror gets noticed. Verified hashes are memoised
    (see :func:`sha256_file`).
    """
    rel = _normalise_relpath(relpath)
    manifest = load_manifest()
    entry = manifest.get(rel)
    if entry is None:
        raise ValueError(f"{rel!r} is not in the chunkwise data manifest ({len(manifest)} files)")

    if mirror is None:
        from chunkwise._env import data_mirror

        mirror = data_mirror()
    mirror_note = "no mirror is configured"
    if mirror is not None:
        mirror_root = Path(mirror).expanduser()
        candidate = mirror_root / rel
        if candidate.is_file():
            return _check(candidate, entry, f"mirror {mirror_root}")
        mirror_note = (
            f"the mirror {mirror_root} does not hold it"
            if mirror_root.is_dir()
            else f"the mirror {mirror_root} is not a folder"
        )

    cache_root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cached = cache_root / rel
    if cached.is_file() and sha256_file(cached) == entry.sha256:
        return cached

    advice = (
        f"Set {MIRROR_ENV} to a folder holding a copy of the data laid out as the manifest "
        f"(e.g. <mirror>/{rel}), or go online so it can be downloaded."
    )
    if entry.upstream_url is None:
        raise RuntimeError(
            f"{rel!r} is available only from a local mirror and {mirror_note}. {advice}"
        )
    try:
        got = pooch.retrieve(
            entry.upstream_url,
            known_hash=f"sha256:{entry.sha256}",
            fname=cached.name,
            path=cached.parent,
            progressbar=True,
        )
    except ValueError as exc:  # pooch: the downloaded bytes do not match known_hash
        raise ValueError(
            f"downloaded {rel!r} from {entry.upstream_url} but its sha256 is not the "
            f"manifest's {entry.sha256}: {exc}"
        ) from exc
    except Exception as exc:  # offline, DNS, HTTP errors, permissions...
        raise RuntimeError(
            f"could not download {rel!r} from {entry.upstream_url} "
            f"({type(exc).__name__}: {exc}); {mirror_note}. This machine may be offline. {advice}"
        ) from exc
    return Path(got)
