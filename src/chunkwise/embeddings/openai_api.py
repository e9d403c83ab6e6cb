"""Embeddings from an OpenAI-compatible ``/embeddings`` endpoint, cached like the local models.

Cache name ``"openai:<model>"``. Runs only with an API key (``OPENAI_API_KEY`` or ``api_key``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from chunkwise.embeddings.cache import CachedEmbedder, EmbeddingCache, resolve_cache

__all__ = ["OpenAIEmbedder"]


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
