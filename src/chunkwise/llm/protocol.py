"""What chunkwise's pipelines need of a chat model: the :class:`ChatModel` protocol.

Every LLM step of the package (PG-RAG's extraction and mind maps, RAPTOR's summaries, Graph
RAG's extractions and reports, KGP's next-evidence step, the answer generator, the LLM
reranker, RAGQuestEval, the contextual and LLM chunkers, question generation) takes its model
as a :class:`ChatModel`. :class:`~chunkwise.llm.LLMClient` (and so
:class:`~chunkwise.llm.OnDemandLocalClient`) is one: a cached, concurrent client for any
OpenAI-compatible endpoint. A class with ``chat`` and ``chat_json`` of its own gets the batch
calls from :class:`~chunkwise.llm.SequentialBatches` (one request at a time), as the tests'
shared fake does.

Independent requests of a step go out as one batch (``chat_many`` / ``chat_json_many``: the
cache first, the misses concurrently); the single calls serve the steps that are sequential by
nature (KGP's walk, question generation, the LLM chunker's window walk, PG-RAG's key points).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from chunkwise.llm.client import LLMResponse, LLMResult

__all__ = ["ChatModel"]


class ChatModel(Protocol):
    """A chat model as the pipelines use it (structural: no base class needed).

    Attributes
    ----------
    model_identity : str
        What identifies the model (in cache keys, run checkpoints and result tables).
    max_concurrency : int
        Requests the model takes in flight at once; pipelines size their blocks of work by it
        (``4 * max_concurrency`` documents or answers per checkpointed block).

    Methods
    -------
    chat(messages, **kw) -> LLMResponse
        One completion (``temperature``, ``max_tokens``, ``seed``, ...), as
        :meth:`LLMClient.chat <chunkwise.llm.LLMClient.chat>`.
    chat_json(messages, schema=None, **kw) -> (value, LLMResponse)
        Validated JSON (``validator``, ``max_repairs``, ``json_mode``, chat parameters), as
        :meth:`LLMClient.chat_json <chunkwise.llm.LLMClient.chat_json>`; raises
        :class:`~chunkwise.llm.LLMJSONError` when the replies never validate.
    chat_many(requests, *, max_concurrency=None, errors="return", progress=False, order="input", **common)
        Independent ``chat`` calls: one :class:`~chunkwise.llm.LLMResult` per request, in input
        order, as :meth:`LLMClient.chat_many <chunkwise.llm.LLMClient.chat_many>`.
    chat_json_many(requests, schema=None, *, max_concurrency=None, errors="return", progress=False, order="input", **common)
        Independent ``chat_json`` calls, as :meth:`LLMClient.chat_json_many
        <chunkwise.llm.LLMClient.chat_json_many>`.
    stats() -> dict
        Counters since construction or :meth:`reset_stats`; pipelines read ``calls`` (chat
        calls, repairs included, cached or not), ``cache_hits`` and ``latency_s``.
    reset_stats()
        Set the counters to zero.
    """

    max_concurrency: int

    @property
    def model_identity(self) -> str: ...

    def chat(self, messages: Sequence[Mapping[str, Any]] | str, **kw: Any) -> LLMResponse: ...

    def chat_json(
        self, messages: Sequence[Mapping[str, Any]] | str, schema: Mapping[str, Any] | None = None, **kw: Any
    ) -> tuple[Any, LLMResponse]: ...

    def chat_many(
        self,
        requests: Sequence[Any],
        *,
        max_concurrency: int | None = None,
        errors: str = "return",
        progress: bool | str = False,
        order: str = "input",
        **common: Any,
    ) -> list[LLMResult]: ...

    def chat_json_many(
        self,
        requests: Sequence[Any],
        schema: Mapping[str, Any] | None = None,
        *,
        max_concurrency: int | None = None,
        errors: str = "return",
        progress: bool | str = False,
        order: str = "input",
        **common: Any,
    ) -> list[LLMResult]: ...

    def stats(self) -> dict[str, Any]: ...

    def reset_stats(self) -> None: ...
