"""Machine facts, read in one place: the cache root, the offline flag, the data mirror and the
repository root.

Every module that needs one of these asks here, so each has one rule:

- :func:`cache_root` -- ``$CHUNKWISE_CACHE_DIR`` when set to a non-blank value, else
  ``~/.cache/chunkwise``. The embedding cache (``embeddings.sqlite``), the LLM response cache
  (``llm.sqlite``), assembled model weights (``models/``), downloaded data (``data/``), chunk
  spans (``spans/``) and BM25 indexes (``bm25/``) live below it.
- :func:`offline` -- whether ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` holds a true value
  (``1``, ``true``, ``yes``, ``on``, ``y``, ``t``; any case): then nothing tries a model hub.
- :func:`data_mirror` -- ``$CHUNKWISE_DATA_MIRROR`` (a folder laid out as the download
  manifest) or None.
- :func:`repo_root` -- ``$CHUNKWISE_ROOT``, or the nearest folder at or above a start folder
  whose ``pyproject.toml`` declares the ``chunkwise`` project (the book, the findings registry
  and the committed data are found from it).

Nothing here creates a folder.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CACHE_ENV", "MIRROR_ENV", "ROOT_ENV", "cache_root", "data_mirror", "offline", "repo_root"]

#: Environment variable of the cache root.
CACHE_ENV = "CHUNKWISE_CACHE_DIR"
#: Environment variable of the data mirror.
MIRROR_ENV = "CHUNKWISE_DATA_MIRROR"
#: Environment variable that names the repository root explicitly.
ROOT_ENV = "CHUNKWISE_ROOT"
_TRUE = {"1", "true", "yes", "on", "y", "t"}


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """``$CHUNKWISE_CACHE_DIR`` (``~`` expanded) when set and not blank, else ``~/.cache/chunkwise``."""
    env = os.environ if env is None else env
    root = env.get(CACHE_ENV)
    return Path(root).expanduser() if root and root.strip() else Path.home() / ".cache" / "chunkwise"


def offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set to a true value."""
    env = os.environ if env is None else env
    return any(str(env.get(var, "")).strip().lower() in _TRUE for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def data_mirror(env: Mapping[str, str] | None = None) -> Path | None:
    """``$CHUNKWISE_DATA_MIRROR`` as a path (``~`` expanded), or None when unset or blank."""
    env = os.environ if env is None else env
    value = env.get(MIRROR_ENV)
    return Path(value).expanduser() if value and value.strip() else None


def _is_chunkwise_root(folder: Path) -> bool:
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return data.get("project", {}).get("name") == "chunkwise"


def repo_root(start: str | os.PathLike[str] | None = None) -> Path:
    """Return the repository root: ``$CHUNKWISE_ROOT`` or the nearest folder, walking up
    from ``start`` (default: the current directory), whose ``pyproject.toml`` declares the
    ``chunkwise`` project.

    Raises
    ------
    FileNotFoundError
        If ``CHUNKWISE_ROOT`` is set to a folder that does not exist, or no such folder is
        found above ``start``.
    """
    env = os.environ.get(ROOT_ENV)
    if env:
        root = Path(env).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"{ROOT_ENV}={env!r} is not a directory")
        return root
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if _is_chunkwise_root(folder):
            return folder
    raise FileNotFoundError(
        f"no chunkwise repository (a pyproject.toml naming project 'chunkwise') at or above "
        f"{here}; run inside the repository or set {ROOT_ENV}"
    )
