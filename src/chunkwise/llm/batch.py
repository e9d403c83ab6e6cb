"""Batch LLM calls for any chat model, including one with ``chat`` / ``chat_json`` only.

The pipelines of chunkwise take a :class:`~chunkwise.llm.ChatModel` and make their
independent calls through :func:`chat_many` and :func:`chat_json_many`: they are the model's
own ``chat_many`` / ``chat_json_many`` (for :class:`~chunkwise.llm.LLMClient`: the cache
first, the misses sent concurrently, at most ``max_concurrency`` at once). An older object
with ``chat`` and ``chat_json`` only gets the loops of
:class:`~chunkwise.llm.SequentialBatches` (one call after another, in input order). Either way
the result is one :class:`~chunkwise.llm.LLMResult` per request, in input order, holding the
reply or the exception of that item.

Examples
--------
>>> from chunkwise.llm.batch import chat_many
>>> results = chat_many(llm, ["2+2=", "3+3="], max_tokens=4)   # doctest: +SKIP
>>> [r.get().text for r in results]                            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise.llm.client import LLMResult, SequentialBatches

__all__ = ["chat_json_many", "chat_many", "has_batch"]


def has_batch(llm: Any) -> bool:
    """Whether ``llm`` has the batch calls of a :class:`~chunkwise.llm.ChatModel` (``chat_many``, ``chat_json_many``)."""
    return callable(getattr(llm, "chat_many", None)) and callable(getattr(llm, "chat_json_many", None))


class _Looped(SequentialBatches):
    """An object with ``chat`` / ``chat_json`` only, given the loops of :class:`SequentialBatches`."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm

    def chat(self, messages: Any, **kw: Any) -> Any:
        return self._llm.chat(messages, **kw)

    def chat_json(self, messages: Any, **kw: Any) -> Any:
        return self._llm.chat_json(messages, **kw)

    def __getattr__(self, name: str) -> Any:  # stats (call counts), when the object has them
        if name == "_llm":
            raise AttributeError(name)
        return getattr(self._llm, name)


def _batched(llm: Any) -> Any:
    return llm if has_batch(llm) else _Looped(llm)


def chat_many(
    llm: Any,
    requests: Sequence[Any],
    *,
    max_concurrency: int | None = None,
    errors: str = "return",
    progress: bool | str = False,
    order: str = "input",
    **common: Any,
) -> list[LLMResult]:
    """Independent ``llm.chat`` calls: ``llm.chat_many``, or a loop when the object has no batch calls.

    Parameters
    ----------
    llm : ChatModel, or an object with ``chat(messages, **kw) -> LLMResponse``
    requests, max_concurrency, errors, progress, order, **common
        As in :meth:`LLMClient.chat_many <chunkwise.llm.LLMClient.chat_many>`. Without batch
        calls ``max_concurrency`` and ``order`` have no effect (one call at a time, in input
        order).

    Returns
    -------
    list of LLMResult
        One per request, in input order.

    Raises
    ------
    ValueError
        For ``errors`` not in ``{"return", "raise"}``.
    Exception
        With ``errors="raise"``: the first failed item's error, after all items ran.
    """
    return _batched(llm).chat_many(requests, max_concurrency=max_concurrency, errors=errors, progress=progress,
                                   order=order, **common)


def chat_json_many(
    llm: Any,
    requests: Sequence[Any],
    schema: Mapping[str, Any] | None = None,
    *,
    max_concurrency: int | None = None,
    errors: str = "return",
    progress: bool | str = False,
    order: str = "input",
    **common: Any,
) -> list[LLMResult]:
    """Independent ``llm.chat_json`` calls: ``llm.chat_json_many``, or a loop when the object has no batch calls.

    Parameters
    ----------
    llm : ChatModel, or an object with ``chat_json(messages, schema=..., **kw) -> (value, LLMResponse)``
    requests, schema, max_concurrency, errors, progress, order, **common
        As in :meth:`LLMClient.chat_json_many <chunkwise.llm.LLMClient.chat_json_many>`
        (``validator``, ``max_repairs`` and ``json_mode`` go in ``common``).

    Returns
    -------
    list of LLMResult
        One per request, in input order; ``get()`` gives ``(value, response)``.
    """
    return _batched(llm).chat_json_many(
        requests, schema, max_concurrency=max_concurrency, errors=errors, progress=progress, order=order, **common,
    )
