"""What every embedder is, and the checks on what goes in and comes out.

An :class:`Embedder` is anything with a ``name`` (its identity in cache keys) and an
``embed(texts) -> ndarray`` method. The checks here are shared by the cache
(:mod:`~chunkwise.embeddings.cache`) and the models: a text must be a ``str`` with a UTF-8 form,
and a model's output must be one finite vector per text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "check_output", "check_texts", "check_unicode"]


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


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list of str, or a TypeError naming the problem (a single string, an item that is
    not a ``str`` and its index)."""
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


def check_unicode(texts: Sequence[str], items: Sequence[str], name: str) -> None:
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


def check_output(
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
