"""PG-RAG indexing of a corpus, resumable: extraction -> verification -> mind map -> fusion.

:class:`PGIndexer` keeps one JSON line per finished document in ``documents.jsonl`` inside its
folder (written and flushed as soon as the document is done). Killing the process at any moment
loses at most the document in progress -- and even its LLM replies are in the LLM client's
cache, so redoing it costs seconds. Documents already in the file are never redone; adding
documents later appends to it and rebuilds the (cheap, embedding-cached) fused graph.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chunkwise._jsonl import JSONLStore
from chunkwise.crud.pgrag.extract import (
    ROUGE_THRESHOLD,
    SEMANTIC_THRESHOLD,
    Extraction,
    extract_verified_fcis_many,
)
from chunkwise.crud.pgrag.graph import FACT_ALPHA, FACT_THRESHOLD, TOPIC_ALPHA, TOPIC_THRESHOLD, PseudoGraph, super_node_stats
from chunkwise.crud.pgrag.mindmap import MindMapNode, fact_paths, generate_mindmaps, parse_mindmap

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = ["DocumentRecord", "PGIndexer", "compression_ratio"]

DocumentRecord = dict  # {"doc_id", "sha1", "n_chars", "extraction", "mindmap", "n_paths", "seconds", "llm_calls"}


def _sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def compression_ratio(source_chars: int, graph_chars: int) -> float:
    """Text compression ratio of an index: source characters / characters the index stores.

    PG-RAG reports "text reduction rates" up to 2.64 on single-document tasks (arXiv
    2405.16933). We count characters (not tokens): the source documents' lengths against the
    pseudo-graph's node labels, each node once.

    Raises
    ------
    ValueError
        If ``graph_chars`` is not positive.
    """
    if graph_chars <= 0:
        raise ValueError("the index stores no text; the compression ratio is undefined")
    return float(source_chars) / float(graph_chars)


class PGIndexer:
    """Build and persist a PG-RAG pseudo-graph for a document collection, resumably.

    Parameters
    ----------
    folder : str or os.PathLike
        Where ``documents.jsonl`` (one record per indexed document) and the fused graph
        (``graph/``) are kept.
    llm : chunkwise.llm.ChatModel
        For FCI extraction and mind maps (its response cache makes reruns free).
    embedder : object with ``embed(texts) -> ndarray``
        Passage-side embedder for verification and node embeddings.
    max_attempts : int, default 3
        FCI extraction attempts per document (verification failures are regenerated).
    rouge_threshold, semantic_threshold : float
        FCI verification thresholds (the authors' 0.15 / 0.85).
    topic_threshold, fact_threshold : float or "fitted"
        Fusion thresholds (the authors' 0.92 / 0.98), or ``"fitted"`` to the embedding space
        (:func:`chunkwise.crud.pgrag.graph.fit_fusion_threshold`).
    topic_alpha, fact_alpha : float in (0, 1)
        Shares of cross-document pairs the fitted thresholds fuse (defaults 1% and 0.1%).

    Raises
    ------
    ValueError
        For thresholds outside their range.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        llm: ChatModel,
        embedder: Any,
        *,
        max_attempts: int = 3,
        rouge_threshold: float = ROUGE_THRESHOLD,
        semantic_threshold: float = SEMANTIC_THRESHOLD,
        topic_threshold: float | str = TOPIC_THRESHOLD,
        fact_threshold: float | str = FACT_THRESHOLD,
        topic_alpha: float = TOPIC_ALPHA,
        fact_alpha: float = FACT_ALPHA,
    ) -> None:
        for name, v in (("rouge_threshold", rouge_threshold), ("semantic_threshold", semantic_threshold)):
            if not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        for name, v in (("topic_threshold", topic_threshold), ("fact_threshold", fact_threshold)):
            if v == "fitted":
                continue
            if isinstance(v, (str, bool)) or not isinstance(v, (int, float)) or not -1.0 <= float(v) <= 1.0:
                raise ValueError(f"{name} must be a cosine in [-1, 1] or 'fitted', got {v!r}")
        for name, v in (("topic_alpha", topic_alpha), ("fact_alpha", fact_alpha)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) < 1.0:
                raise ValueError(f"{name} must be a share in (0, 1), got {v!r}")
        self.folder = Path(folder)
        self.llm = llm
        self.embedder = embedder
        self.max_attempts = max_attempts
        self.rouge_threshold = float(rouge_threshold)
        self.semantic_threshold = float(semantic_threshold)
        self.topic_threshold = topic_threshold if topic_threshold == "fitted" else float(topic_threshold)
        self.fact_threshold = fact_threshold if fact_threshold == "fitted" else float(fact_threshold)
        self.topic_alpha = float(topic_alpha)
        self.fact_alpha = float(fact_alpha)

    @property
    def records_path(self) -> Path:
        return self.folder / "documents.jsonl"

    def records(self) -> dict[str, DocumentRecord]:
        """Finished documents: doc id -> record (a line cut by a kill at the end is ignored)."""
        return dict(JSONLStore(self.folder, "documents.jsonl", key="doc_id").records)

    def index_document(self, doc_id: str, text: str) -> DocumentRecord:
        """Extract + verify FCIs, build the mind map; return the record (not written).

        A batch of one through :meth:`index_documents` (the step is written once).

        Raises
        ------
        ValueError
            If ``text`` is empty.
        Exception
            The document's error: a failed request, the ``RuntimeError`` of an extraction that
            never gave usable JSON, or the :class:`~chunkwise.llm.LLMJSONError` of its mind map.
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("extract_fcis needs a non-empty document text")
        records, error = self.index_documents([(doc_id, text)])
        if error is not None:
            raise error
        return records[0]

    def index_documents(self, docs: Sequence[tuple[str, str]]) -> tuple[list[DocumentRecord], Exception | None]:
        """Index several documents, each LLM stage as one batch.

        Extraction rounds (:func:`~chunkwise.crud.pgrag.extract.extract_verified_fcis_many`) and mind
        maps (:func:`~chunkwise.crud.pgrag.mindmap.generate_mindmaps`) go through the LLM's batch call
        (cache first, the misses at most ``llm.max_concurrency`` at once). ``seconds`` of a
        record is its share of the stage's wall time (the stage time divided by the documents
        in it: with concurrent requests one document's own time is not observable);
        ``llm_calls`` counts its own calls.

        Returns
        -------
        (records, first_error)
            The records of the documents that finished, in input order (not written), and the
            error of the first document that failed (``None`` when none did).
        """
        if not docs:
            return [], None
        texts = [t for _, t in docs]
        t0 = time.perf_counter()
        exts, ext_calls = extract_verified_fcis_many(
            texts, self.llm, self.embedder, max_attempts=self.max_attempts,
            rouge_threshold=self.rouge_threshold, semantic_threshold=self.semantic_threshold,
        )
        t1 = time.perf_counter()
        ok = [i for i, e in enumerate(exts) if isinstance(e, Extraction)]
        maps, map_calls = generate_mindmaps([(exts[i].topic, exts[i].facts) for i in ok], self.llm)  # type: ignore[union-attr]
        t2 = time.perf_counter()
        mm_of = dict(zip(ok, zip(maps, map_calls)))
        records: list[DocumentRecord] = []
        first_error: Exception | None = None
        for i, (doc_id, text) in enumerate(docs):
            ext = exts[i]
            if not isinstance(ext, Extraction):
                first_error = first_error or ext
                continue
            mm, calls = mm_of[i]
            if isinstance(mm, Exception):
                first_error = first_error or mm
                continue
            records.append({
                "doc_id": str(doc_id), "sha1": _sha1(text), "n_chars": len(text),
                "extraction": ext.to_dict(), "mindmap": mm.to_json(), "n_paths": len(fact_paths(mm)),
                "seconds": {"extraction": (t1 - t0) / len(docs), "mindmap": (t2 - t1) / max(1, len(ok))},
                "llm_calls": ext_calls[i] + calls,
            })
        return records, first_error

    def add_documents(
        self, docs: Iterable[tuple[str, str]], *, show_progress: bool = False
    ) -> list[str]:
        """Index every document not yet in the folder; append the records block by block.

        Documents are indexed in blocks of ``4 * llm.max_concurrency`` (:meth:`index_documents`:
        each LLM stage of a block is one batch); a block's records are appended as soon as it
        is done, and a failure is raised after the block's other documents are written.

        Parameters
        ----------
        docs : iterable of (doc_id, text)
        show_progress : bool, default False
            A tqdm bar over the documents to do.

        Returns
        -------
        list of str
            Ids indexed by this call (documents already there are skipped).

        Raises
        ------
        ValueError
            If a document id is already indexed with a different text (sha1), or ids repeat.
        """
        docs = [(str(d), t) for d, t in docs]
        ids = [d for d, _ in docs]
        if len(set(ids)) != len(ids):
            raise ValueError("document ids must be unique")
        done = self.records()
        todo = []
        for doc_id, text in docs:
            rec = done.get(doc_id)
            if rec is None:
                todo.append((doc_id, text))
            elif rec["sha1"] != _sha1(text):
                raise ValueError(
                    f"document {doc_id!r} is indexed with a different text; use a new id or delete its line in {self.records_path}"
                )
        store = JSONLStore(self.folder, "documents.jsonl", key="doc_id", fsync=True)
        bar = None
        if show_progress and todo:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(todo), desc="PG-RAG indexing", unit="doc")
        out = []
        block = max(1, 4 * int(getattr(self.llm, "max_concurrency", 1) or 1))
        try:
            for start in range(0, len(todo), block):
                part = todo[start:start + block]
                recs, first_error = self.index_documents(part)
                for rec in recs:  # the documents that finished, in order
                    store.put(rec)
                    out.append(rec["doc_id"])
                    if bar is not None:
                        bar.update(1)
                if first_error is not None:
                    raise first_error
        finally:
            if bar is not None:
                bar.close()
        return out

    def graph(self, doc_ids: Sequence[str] | None = None) -> PseudoGraph:
        """The fused pseudo-graph of the indexed documents (all, or ``doc_ids`` in that order).

        Saved under ``<folder>/graph`` when built over all documents.

        Raises
        ------
        KeyError
            If a requested document is not indexed.
        """
        recs = self.records()
        order = list(recs) if doc_ids is None else [str(d) for d in doc_ids]
        missing = [d for d in order if d not in recs]
        if missing:
            raise KeyError(f"not indexed yet: {missing[:5]}{'...' if len(missing) > 5 else ''}; call add_documents first")
        maps = [(d, parse_mindmap(recs[d]["mindmap"], recs[d]["extraction"]["topic"])) for d in order]
        g = PseudoGraph.build(maps, self.embedder, topic_threshold=self.topic_threshold, fact_threshold=self.fact_threshold,
                              topic_alpha=self.topic_alpha, fact_alpha=self.fact_alpha)
        if doc_ids is None:
            g.save(self.folder / "graph")
        return g

    def stats(self, doc_ids: Sequence[str] | None = None) -> dict[str, Any]:
        """Indexing statistics: documents, verified share, attempts, seconds per document,
        LLM calls, source characters, graph characters and the compression ratio."""
        recs = self.records()
        order = list(recs) if doc_ids is None else [str(d) for d in doc_ids]
        rs = [recs[d] for d in order]
        if not rs:
            raise ValueError("no indexed documents")
        g = self.graph(None if doc_ids is None else order)
        src = sum(r["n_chars"] for r in rs)
        secs = [r["seconds"]["extraction"] + r["seconds"]["mindmap"] for r in rs]
        return {
            "documents": len(rs),
            "verified": sum(bool(r["extraction"]["verified"]) for r in rs),
            "attempts": sum(len(r["extraction"]["attempts"]) for r in rs),
            "seconds_per_doc": sum(secs) / len(secs),
            "llm_calls": sum(int(r.get("llm_calls", 0)) for r in rs),
            "source_chars": src,
            "graph_chars": g.n_chars(),
            "compression_ratio": compression_ratio(src, g.n_chars()),
            **g.summary(),
            **super_node_stats(g),
        }


# re-exported for type hints in records
_ = (Extraction, MindMapNode)
