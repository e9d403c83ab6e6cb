"""Run CRUD-RAG's baselines over QA items: retrieve, generate, record; resumable."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from chunkwise.crud.rag.answer import CRUD_MAX_NEW_TOKENS, CRUD_TEMPERATURE, answer_many, build_prompt, model_identity
from chunkwise.crud.rag.retrievers import CRUD_TOP_K, build_retrievers

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = ["RESULT_COLUMNS", "run_baselines"]

#: Columns of :func:`run_baselines`' table, in order.
RESULT_COLUMNS = (
    "task",
    "ID",
    "method",
    "retriever",
    "top_k",
    "question",
    "retrieved_ids",
    "retrieved_scores",
    "answer",
    "parse_status",
    "parse_ok",
    "raw",
    "model_identity",
    "gold_answer",
    "cached",
    "retrieval_s",
    "generation_s",
)


def _request_sha1(identity: str, prompt: str, temperature: float, max_tokens: int) -> str:
    """sha1 of everything that produces an answer: the model, the prompt (question and retrieved
    contexts, in order) and the generation settings."""
    request = [identity, prompt, float(temperature), int(max_tokens)]
    return hashlib.sha1(json.dumps(request, ensure_ascii=False).encode("utf-8")).hexdigest()


def _key(task: str, item_id: str, method: str, request_sha1: str) -> str:
    return json.dumps([task, item_id, method, request_sha1], ensure_ascii=False)


def _read_checkpoint(path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return done
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i >= len(lines) - 2:  # a line cut by an interruption: redo that row
                continue
            raise ValueError(f"{path}: line {i + 1} is not JSON; fix or delete the checkpoint") from None
        if "request_sha1" not in row:  # written before rows were keyed by their request: redo
            continue
        done[_key(row["task"], row["ID"], row["method"], row["request_sha1"])] = row
    return done


def _retriever_label(r: Any) -> str:
    name = getattr(r, "name", type(r).__name__)
    extra = getattr(r, "model", None) or getattr(getattr(r, "reranker", None), "name", None)
    return f"{name} ({extra})" if extra else str(name)


def run_baselines(
    items: Iterable[Mapping[str, Any]],
    corpus_chunks: Sequence[Any] | None,
    retrievers: Mapping[str, Any] | Sequence[str],
    llm: ChatModel,
    *,
    top_k: int = CRUD_TOP_K,
    checkpoint: str | os.PathLike[str] | None = None,
    temperature: float = CRUD_TEMPERATURE,
    max_tokens: int = CRUD_MAX_NEW_TOKENS,
    show_progress: bool = False,
    build_kwargs: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Answer every item with every retrieval method; one row per (item, method).

    Parameters
    ----------
    items : iterable of mapping
        QA items with ``ID``, ``questions`` and ``answers`` (and ``task``), e.g. the rows of
        :func:`chunkwise.crud.data.load_crud_qa`.
    corpus_chunks : sequence, optional
        The chunks retrieved from (:func:`chunkwise.crud.rag.chunking.chunk_articles`); used to build
        the retrievers when ``retrievers`` is a list of method names.
    retrievers : mapping of str -> Retriever, or sequence of method names
        Method name -> retriever (``retrieve(question, top_k)``), or names for
        :func:`chunkwise.crud.rag.retrievers.build_retrievers` (``"none"``, ``"bm25"``, ``"dense"``,
        ``"hybrid"``, ``"hybrid_rerank"``).
    llm : ChatModel
        The generator (:class:`chunkwise.llm.LLMClient`); also the rerank fallback when built here.
    top_k : int, default 8
    checkpoint : str or os.PathLike, optional
        A JSONL file: every finished row is appended (and flushed) as soon as it is done. A row is
        keyed by the task, ID, method and the sha1 of its generation request -- model identity,
        prompt (the question and the retrieved contexts, in order) and ``temperature`` /
        ``max_tokens`` -- so an answer is reused only when everything that produced it is the
        same: a different pool, index, walk setting or ``top_k`` changes the contexts and hence
        the key. Retrieval therefore always runs (its LLM calls, e.g. reranking, come from the
        LLM client's cache); the generation call is skipped for a stored row. Together with the
        LLM client's cache this makes an interrupted run resume where it stopped. Rows written
        by older versions (without ``request_sha1``) are not reused.
    temperature, max_tokens
        Generation settings (CRUD-RAG's 0.1 and 1280).
    show_progress : bool, default False
    build_kwargs : mapping, optional
        Extra arguments for ``build_retrievers``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RESULT_COLUMNS`, rows in item order then method order:
        ``retrieved_ids`` / ``retrieved_scores`` (lists, best first), ``answer`` (parsed),
        ``parse_status`` / ``parse_ok`` (see :func:`chunkwise.crud.rag.answer.parse_response`),
        ``raw`` (the reply), ``model_identity`` (the generator), ``retriever`` (name and model),
        ``gold_answer``, ``cached`` (reply from the LLM cache), ``retrieval_s``
        (seconds, this run) and ``generation_s`` (seconds the generation request took when the
        answer was generated: for a reply from the LLM cache, its original latency).

    Notes
    -----
    Retrieval runs first for every (item, method), in order; the answers not in the
    checkpoint are then generated through the LLM's batch call
    (:func:`chunkwise.crud.rag.answer.answer_many`: cache first, the misses at most
    ``llm.max_concurrency`` at once, sorted by prompt prefix) in blocks of
    ``4 * max_concurrency`` rows, each block checkpointed when done. An LLM error is raised
    after the rest of its block has finished; no row is written for it.
    """
    if isinstance(retrievers, Mapping):
        methods = dict(retrievers)
    else:
        names = [str(m) for m in retrievers]
        if corpus_chunks is None:
            raise ValueError("corpus_chunks are needed to build retrievers from method names")
        methods = build_retrievers(corpus_chunks, names, llm=llm, **dict(build_kwargs or {}))
    for name, r in methods.items():
        if not callable(getattr(r, "retrieve", None)):
            raise TypeError(f"retriever {name!r} has no retrieve(question, top_k) method")
    identity = model_identity(llm)
    path = Path(checkpoint) if checkpoint is not None else None
    done = _read_checkpoint(path) if path is not None else {}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)

    items = list(items)
    bar = None
    if show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(items) * len(methods), desc="CRUD-RAG baselines", unit="answer")
    rows: list[dict[str, Any] | None] = []
    todo: list[tuple[int, str, dict[str, Any], Any, str]] = []  # (row, key, row base, hits, request)
    try:
        # 1. retrieval for every (item, method), in order; stored answers are reused at once
        for item in items:
            task = str(item.get("task", ""))
            item_id = str(item["ID"])
            question = str(item["questions"])
            for method, retriever in methods.items():
                t0 = time.perf_counter()
                hits = list(retriever.retrieve(question, top_k))
                t1 = time.perf_counter()
                request = _request_sha1(identity, build_prompt(question, hits), temperature, max_tokens)
                key = _key(task, item_id, method, request)
                if key in done:  # same model, prompt and settings: the stored answer is this answer
                    row = dict(done[key], retriever=_retriever_label(retriever), top_k=int(top_k),
                               question=question, retrieved_ids=[str(h[0]) for h in hits],
                               retrieved_scores=[float(h[2]) for h in hits],
                               gold_answer=str(item.get("answers", "")), retrieval_s=t1 - t0)
                    rows.append(row)
                    if bar is not None:
                        bar.update(1)
                    continue
                base = {
                    "task": task,
                    "ID": item_id,
                    "method": method,
                    "retriever": _retriever_label(retriever),
                    "top_k": int(top_k),
                    "question": question,
                    "retrieved_ids": [str(h[0]) for h in hits],
                    "retrieved_scores": [float(h[2]) for h in hits],
                    "gold_answer": str(item.get("answers", "")),
                    "retrieval_s": t1 - t0,
                }
                rows.append(None)
                todo.append((len(rows) - 1, key, base, hits, request))
        # 2. generation of the missing answers through the LLM's batch call, a block at a time
        #    (each block's rows are checkpointed as soon as it is done)
        block = max(1, 4 * int(getattr(llm, "max_concurrency", 1) or 1))
        for start in range(0, len(todo), block):
            part = todo[start:start + block]
            gens = answer_many([(b["question"], hits) for _, _, b, hits, _ in part], llm,
                               temperature=temperature, max_tokens=max_tokens)
            for (pos, key, base, _hits, request), gen in zip(part, gens):
                row = {
                    **base,
                    "answer": gen.text,
                    "parse_status": gen.status,
                    "parse_ok": gen.ok,
                    "raw": gen.raw,
                    "model_identity": gen.model_identity,
                    "cached": gen.cached,
                    "generation_s": gen.latency_s,
                }
                if path is not None:
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(json.dumps(dict(row, request_sha1=request), ensure_ascii=False) + "\n")
                        f.flush()
                done[key] = row
                rows[pos] = row
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return pd.DataFrame([r for r in rows if r is not None], columns=list(RESULT_COLUMNS))
