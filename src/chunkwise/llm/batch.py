"""Batch LLM calls for any llm object: the client's concurrent batch call, or a plain loop.

The pipelines of chunkwise accept any object with ``chat`` / ``chat_json`` (an
:class:`~chunkwise.llm.LLMClient`, or a small fake in tests). :func:`chat_many` and
:func:`chat_json_many` give them one way to make independent calls: when the object has the
batch methods of :class:`~chunkwise.llm.LLMClient` they are used (cache first, the misses
sent concurrently, at most ``max_concurrency`` at once); otherwise the calls are made one
after another in input order. Either way the result is one
:class:`~chunkwise.llm.LLMResult` per request, in input order, holding the reply or the
exception of that item.

Examples
--------
>>> from chunkwise.llm.batch import chat_many
>>> results = chat_many(llm, ["2+2=", "3+3="], max_tokens=4)   # doctest: +SKIP
>>> [r.get().text for r in results]                            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chunkwise.llm.client import LLMResult, _finish, _progress_bar, _split_request, _tick

__all__ = ["chat_json_many", "chat_many", "has_batch"]


def has_batch(llm: Any) -> bool:
    """Whether ``llm`` has the concurrent batch calls of :class:`~chunkwise.llm.LLMClient`."""
    return callable(getattr(llm, "chat_many", None)) and callable(getattr(llm, "chat_json_many", None))


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
    """Independent ``llm.chat`` calls: concurrent through ``llm.chat_many`` when it exists.

    Parameters
    ----------
    llm : object
        Has ``chat(messages, **kw) -> LLMResponse``; :meth:`LLMClient.chat_many
        <chunkwise.llm.LLMClient.chat_many>` is used when present.
    requests, max_concurrency, errors, progress, order, **common
        As in :meth:`LLMClient.chat_many <chunkwise.llm.LLMClient.chat_many>`. Without a batch
        method ``max_concurrency`` and ``order`` are ignored (one call at a time, in input
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
    if has_batch(llm):
        return llm.chat_many(requests, max_concurrency=max_concurrency, errors=errors, progress=progress,
                             order=order, **common)
    return _loop(lambda messages, kw: llm.chat(messages, **kw), requests, common, errors, progress, order, llm)


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
    """Independent ``llm.chat_json`` calls: concurrent through ``llm.chat_json_many`` when it exists.

    Parameters
    ----------
    llm : object
        Has ``chat_json(messages, schema=..., **kw) -> (value, LLMResponse)``.
    requests, schema, max_concurrency, errors, progress, order, **common
        As in :meth:`LLMClient.chat_json_many <chunkwise.llm.LLMClient.chat_json_many>`
        (``validator``, ``max_repairs`` and ``json_mode`` go in ``common``).

    Returns
    -------
    list of LLMResult
        One per request, in input order; ``get()`` gives ``(value, response)``.
    """
    if has_batch(llm):
        return llm.chat_json_many(
            requests, schema, max_concurrency=max_concurrency, errors=errors, progress=progress, order=order,
            **common,
        )
    def call(messages: Any, kw: dict[str, Any]) -> Any:
        item_schema = kw.pop("schema", schema)
        if item_schema is not None:
            kw["schema"] = item_schema
        return llm.chat_json(messages, **kw)

    return _loop(call, requests, common, errors, progress, order, llm)


def _calls(llm: Any) -> int | None:
    """``llm.stats()["calls"]`` when the llm counts its calls, else ``None``."""
    stats = getattr(llm, "stats", None)
    try:
        value = stats() if callable(stats) else None
    except Exception:  # noqa: BLE001 - an llm whose stats fail simply does not count
        return None
    calls = value.get("calls") if isinstance(value, dict) else None
    return int(calls) if isinstance(calls, int) and not isinstance(calls, bool) else None


def _loop(
    call: Callable[[Any, dict[str, Any]], Any],
    requests: Sequence[Any],
    common: Mapping[str, Any],
    errors: str,
    progress: bool | str,
    order: str,
    llm: Any,
) -> list[LLMResult]:
    if errors not in ("return", "raise"):
        raise ValueError(f"errors must be 'return' or 'raise', got {errors!r}.")
    if order not in ("input", "prefix"):
        raise ValueError(f"order must be 'input' or 'prefix', got {order!r}.")
    items = [_split_request(r, common, i) for i, r in enumerate(requests)]
    bar = _progress_bar(progress, len(items))
    results: list[LLMResult | None] = []
    try:
        for i, (messages, kw) in enumerate(items):
            before = _calls(llm)
            try:
                output, error = call(messages, dict(kw)), None
            except Exception as exc:  # noqa: BLE001 - held per item, re-raised by get()
                output, error = None, exc
            after = _calls(llm)
            calls = after - before if before is not None and after is not None else None
            results.append(LLMResult(index=i, output=output, error=error, calls=calls))
            _tick(bar)
    finally:
        if bar is not None:
            bar.close()
    return _finish(results, errors)
