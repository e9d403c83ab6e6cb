"""A user's own embedder, named by its import path: ``"package.module:ClassName"``.

The same route as a user's chunker (:func:`chunkwise._importpath.is_import_path`): the module is
imported (installed, on ``PYTHONPATH``, or in the current folder) and the attribute used:

- a **class** or a **factory** (any other callable) is called -- with ``kind="query"`` or
  ``kind="passage"`` when its signature has a parameter named ``kind`` (a model that embeds questions
  and passages differently; it then gets two embedders, one per side), otherwise with no argument --
  and must return an embedder;
- an **embedder object** (a str ``name`` and an ``embed(texts)`` method) is used as it is.

An embedder is then put behind the embedding cache (:class:`~chunkwise.embeddings.cache.CachedEmbedder`,
the ``cache_dir`` given), keyed by its own ``name``: the name must hold everything that changes its
vectors (model, version, options), as for every embedder (:class:`~chunkwise.embeddings.base.Embedder`).
One that already keeps a chunkwise cache (:func:`~chunkwise.embeddings.cache.uncached_parts`) is used
as it is. A window (``max_tokens``, ``truncates``) and ``token_counts`` are read through when the
embedder has them. Every failure is a ``ValueError`` that names the import path.
"""

from __future__ import annotations

import inspect
from typing import Any

from chunkwise._importpath import is_import_path, load_import_path
from chunkwise.embeddings.cache import CachedEmbedder, resolve_cache, uncached_parts

__all__ = ["is_import_path", "plugin_embedder", "plugin_is_sided"]

_WHAT = "an embedder (a str `name` and an `embed(texts)` method)"


def _is_embedder(obj: Any) -> bool:
    return not inspect.isclass(obj) and isinstance(getattr(obj, "name", None), str) and callable(
        getattr(obj, "embed", None)
    )


def _takes_kind(obj: Any) -> bool:
    try:
        return "kind" in inspect.signature(obj).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def plugin_is_sided(path: str) -> bool:
    """Whether the embedder at ``path`` has two sides: a class or factory with a ``kind`` parameter.

    Raises
    ------
    ValueError
        If the module cannot be imported or has no such attribute.
    """
    obj = load_import_path(path, "embedder")
    return not _is_embedder(obj) and callable(obj) and _takes_kind(obj)


def plugin_embedder(path: str, *, kind: str = "passage", cache_dir: Any = None, show_progress_bar: bool = False) -> Any:
    """The embedder that the import path ``path`` names, behind the embedding cache.

    Parameters
    ----------
    path : str
        ``"package.module:Attribute"`` (:func:`is_import_path`).
    kind : {"passage", "query"}, default "passage"
        Passed to a class or factory whose signature has a ``kind`` parameter.
    cache_dir
        As :func:`~chunkwise.embeddings.make_embedder` (``None``: the default cache file; a folder; an
        ``EmbeddingCache``; ``False``: none).
    show_progress_bar : bool, default False

    Returns
    -------
    CachedEmbedder, or the plugin's own embedder when it keeps a chunkwise cache itself

    Raises
    ------
    ValueError
        If the module cannot be imported, has no such attribute, the attribute is neither an embedder
        nor a class or factory, its constructor raises (the message quotes the error, one line), or
        what it returns is not an embedder.
    """
    obj = load_import_path(path, "embedder")
    if _is_embedder(obj):
        made = obj
    elif callable(obj):
        kwargs = {"kind": kind} if _takes_kind(obj) else {}
        maker = "its constructor" if inspect.isclass(obj) else "its factory"
        try:
            made = obj(**kwargs)
        except Exception as exc:  # noqa: BLE001 - the user's constructor can fail in any way; name it, one line
            raise ValueError(
                f"embedder {path!r}: {maker} raised {type(exc).__name__}: {exc}; the error is the embedder's "
                "own (a missing package, a model it loads, its arguments): fix that and rerun."
            ) from exc
        if not _is_embedder(made):
            raise ValueError(f"embedder {path!r}: {maker} returned a {type(made).__name__}, not {_WHAT}.")
    else:
        raise ValueError(f"embedder {path!r}: the object it names (a {type(obj).__name__}) is neither {_WHAT} "
                         "nor a class or factory that makes one.")
    if uncached_parts(made) is not None:
        return made
    return CachedEmbedder(made, resolve_cache(cache_dir), show_progress_bar=show_progress_bar)
