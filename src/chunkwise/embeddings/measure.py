"""What an embedder does with texts, measured: how much of each text its window holds, and the
texts and seconds its calls took."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkwise.embeddings.base import check_texts

__all__ = ["TimedEmbedder", "embedded_chars"]


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
        embedder built by :func:`~chunkwise.embeddings.make_embedder`).
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
    items = check_texts(texts)
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
