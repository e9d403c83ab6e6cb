"""LLM access for chunkwise: one client for any OpenAI-compatible endpoint.

- :class:`ChatModel` -- what the pipelines need of a chat model (a protocol: ``chat``,
  ``chat_json``, their batch calls ``chat_many`` / ``chat_json_many``, ``model_identity``,
  ``max_concurrency``, ``stats``); every pipeline takes its model as one;
- :class:`LLMClient` -- the chat model for any OpenAI-compatible endpoint: chat completions
  with retries, a content-addressed response cache (``cache_mode="only"``: replies from the
  cache alone, a miss raises :class:`NotCachedError`), usage accounting, validated JSON output
  (:meth:`LLMClient.chat_json`), and batches with bounded concurrency
  (:meth:`LLMClient.chat_many`, :meth:`LLMClient.chat_json_many`);
- :class:`SequentialBatches` -- the batch calls as loops, for a chat model of one's own that
  defines ``chat`` and ``chat_json`` (e.g. a test double);
- :class:`LLMCache` -- the SQLite cache (default ``$CHUNKWISE_CACHE_DIR/llm.sqlite`` or
  ``~/.cache/chunkwise/llm.sqlite``; any path, e.g. one committed with a project);
- :func:`is_configured` / :meth:`LLMClient.from_env` -- configuration from
  ``CHUNKWISE_LLM_BASE_URL``, ``CHUNKWISE_LLM_MODEL``, ``CHUNKWISE_LLM_API_KEY``;
- :class:`LocalLLMServer` -- the embedded default: llama.cpp's OpenAI-compatible server on
  127.0.0.1 with weights from :func:`resolve_gguf` (``chunkwise llm serve`` on the command line).

Examples
--------
>>> from chunkwise.llm import LLMClient
>>> client = LLMClient.from_env()                   # doctest: +SKIP
>>> if client is None:                              # doctest: +SKIP
...     print("skipped: no LLM configured")
"""

from chunkwise.llm.cache import (
    CACHE_MODES,
    CacheEntry,
    CacheFileError,
    LLMCache,
    NotCachedError,
    cache_key,
    default_cache_path,
)
from chunkwise.llm.local import LocalLLMServer, LocalLLMServerError, OnDemandLocalClient, local_or_env_client
from chunkwise.llm.weights import GGUFWeights, resolve_gguf
from chunkwise.llm.client import (
    LLMClient,
    LLMError,
    LLMJSONError,
    LLMRequestError,
    LLMResponse,
    LLMResult,
    SequentialBatches,
    extract_json,
    is_configured,
    iter_json_candidates,
)
from chunkwise.llm.protocol import ChatModel

__all__ = [
    "GGUFWeights",
    "LocalLLMServer",
    "LocalLLMServerError",
    "OnDemandLocalClient",
    "local_or_env_client",
    "resolve_gguf",
    "CACHE_MODES",
    "CacheEntry",
    "CacheFileError",
    "ChatModel",
    "LLMCache",
    "LLMClient",
    "NotCachedError",
    "LLMError",
    "LLMJSONError",
    "LLMRequestError",
    "LLMResponse",
    "LLMResult",
    "SequentialBatches",
    "cache_key",
    "default_cache_path",
    "extract_json",
    "is_configured",
    "iter_json_candidates",
]
