"""The Chroma-style retrieval comparison: chunkers scored by span recall / precision / IoU.

Protocol of Chroma's technical report "Evaluating Chunking Strategies for Retrieval"
(Smith & Troynikov, 2024): chunk each of the five corpora, put the chunks of all corpora in one
index, embed the 472 questions with the same model, retrieve the ``top_k`` (5) nearest chunks
per question by cosine similarity, and score the retrieved character spans against the
question's reference excerpts with :func:`chunkwise.evaluation.spans.score_questions`.

Everything slow is cached: chunk spans per (chunker, corpus text) as JSON, embeddings in the
embedder's SQLite cache. A warm rerun embeds nothing and chunks nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.chunk import Chunk
from chunkwise.chunkers.specs import (  # noqa: F401 - re-exported: chapter 2 and its tests use ch.parse_spec
    ChunkerSpec,
    chunk_corpus,
    make_chunker,
    parse_spec,
)
from chunkwise.evaluation.spans import score_questions, summarize
from chunkwise.retrieval import DenseIndex
from chunkwise.tokens import get_encoding

METRIC_COLUMNS = ("recall", "precision", "precision_omega", "iou")

#: The report's eight all-MiniLM-L6-v2 rows.
REPORT_MINILM_ROWS: tuple[ChunkerSpec, ...] = (
    ChunkerSpec("Recursive", 250, 125),
    ChunkerSpec("TokenText", 250, 125),
    ChunkerSpec("Recursive", 250, 0),
    ChunkerSpec("TokenText", 250, 0),
    ChunkerSpec("Recursive", 200, 0),
    ChunkerSpec("TokenText", 200, 0),
    ChunkerSpec("Cluster", 250, 0),
    ChunkerSpec("Cluster", 200, 0),
)

#: Semantic chunkers the report ran with text-embedding-3-large only; we run them with MiniLM too.
EXTRA_MINILM_ROWS: tuple[ChunkerSpec, ...] = (
    ChunkerSpec("Kamradt", None, 0),
    ChunkerSpec("KamradtMod", 300, 0),
)


@dataclass
class RunResult:
    """The outcome of one spec: per-question scores and chunk statistics."""

    spec: ChunkerSpec
    per_question: pd.DataFrame
    n_chunks: int
    mean_chunk_tokens: float
    seconds: float
    chunks_by_corpus: dict[str, list[Chunk]] = field(repr=False, default_factory=dict)


def evaluate_spec(
    spec: ChunkerSpec,
    corpora: dict[str, str],
    questions: pd.DataFrame,
    embedder: Any,
    question_vectors: np.ndarray,
    top_k: int = 5,
    mode: str = "chroma",
    llm: Any = None,
    cache_dir: str | Path | None = None,
) -> RunResult:
    """Chunk, index, retrieve and score one chunker spec.

    Parameters
    ----------
    spec : ChunkerSpec
    corpora : dict of corpus name -> text
        All corpora go into one index, as in the report.
    questions : DataFrame
        From :func:`chunkwise.datasets.load_chroma_questions` (columns question_id, corpus,
        references).
    embedder : Embedder
        Embeds chunks (cached) and is used by the semantic chunkers.
    question_vectors : numpy.ndarray, shape (len(questions), d)
    top_k : int
    mode : {"chroma", "union"}
        Span metric definitions (see :mod:`chunkwise.evaluation.spans`).

    Returns
    -------
    RunResult
    """
    t0 = time.perf_counter()
    chunks = {name: chunk_corpus(spec, name, text, embedder, llm, cache_dir) for name, text in corpora.items()}
    index = DenseIndex.from_chunks(chunks, embedder)
    rows, _ = index.search(question_vectors, top_k)
    retrieved = [
        [(index.doc_ids[j], int(index.spans[j, 0]), int(index.spans[j, 1])) for j in row] for row in rows
    ]
    q = questions.assign(corpus_id=questions["corpus"])
    spans = {name: [(c.start, c.end) for c in cs] for name, cs in chunks.items()}
    per_q = score_questions(q, retrieved, spans, mode=mode)
    enc = get_encoding("cl100k_base")
    all_chunks = [c for cs in chunks.values() for c in cs]
    tokens = [len(t) for t in enc.encode_ordinary_batch([c.text for c in all_chunks])] if all_chunks else [0]
    return RunResult(
        spec,
        per_q,
        len(all_chunks),
        float(np.mean(tokens)),
        time.perf_counter() - t0,
        chunks,
    )


def results_table(results: Sequence[RunResult], model: str) -> pd.DataFrame:
    """One row per spec: mean and population sd (in percent) of each metric, chunk statistics."""
    rows = []
    for r in results:
        row: dict[str, Any] = {
            "embedding_model": model,
            "chunker": r.spec.chunker,
            "size_tokens": r.spec.size,
            "overlap_tokens": r.spec.overlap,
            "n_chunks": r.n_chunks,
            "mean_chunk_tokens": round(r.mean_chunk_tokens, 1),
        }
        for m in METRIC_COLUMNS:
            vals = r.per_question[m].to_numpy(dtype=float)
            row[f"{m}_mean"] = 100 * float(np.mean(vals))
            row[f"{m}_std"] = 100 * float(np.std(vals))
        row["seconds"] = round(r.seconds, 1)
        rows.append(row)
    return pd.DataFrame(rows)


def per_corpus_table(results: Sequence[RunResult], metric: str = "recall") -> pd.DataFrame:
    """Mean of ``metric`` (percent) per corpus (columns) for each spec (rows)."""
    data = {}
    for r in results:
        data[r.spec.label] = r.per_question.groupby("corpus")[metric].mean() * 100
    return pd.DataFrame(data).T


def load_report(path: str | Path) -> pd.DataFrame:
    """The report's published tables (``chroma_report_results.csv``: facts from Smith & Troynikov, 2024)."""
    return pd.read_csv(path)


def compare_with_report(ours: pd.DataFrame, report: pd.DataFrame, model: str) -> pd.DataFrame:
    """Our rows beside the report's for ``model``, with deltas in percentage points.

    Rows are matched on (chunker, size, overlap); ours without a published counterpart keep
    NaN in the reported columns.
    """
    rep = report[report["embedding_model"] == model].copy()
    key = ["chunker", "size_tokens", "overlap_tokens"]
    for df in (rep, ours):
        df["size_tokens"] = pd.to_numeric(df["size_tokens"], errors="coerce")
        df["overlap_tokens"] = pd.to_numeric(df["overlap_tokens"], errors="coerce").fillna(0).astype(int)
    merged = ours.merge(rep, on=key, how="left", suffixes=("", "_reported"))
    out = merged[key].copy()
    out["chunk_tokens"] = merged["mean_chunk_tokens"]
    out["chunk_tokens_reported"] = merged["mean_chunk_tokens_reported"]
    for m in METRIC_COLUMNS:
        out[f"{m}"] = merged[f"{m}_mean"].round(1)
        out[f"{m}_reported"] = merged[f"{m}_mean_reported"]
        out[f"{m}_delta"] = (merged[f"{m}_mean"] - merged[f"{m}_mean_reported"]).round(1)
    return out


def plot_recall_vs_precision_omega(table: pd.DataFrame, report: pd.DataFrame | None = None, model: str = ""):
    """Recall against precision_Ω, one point per chunker, marker size by mean chunk tokens.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, (_, r) in enumerate(table.iterrows()):
        label = r["chunker"] + (f" {int(r['size_tokens'])}" if pd.notna(r["size_tokens"]) else "")
        if r["overlap_tokens"]:
            label += f"/{int(r['overlap_tokens'])}"
        ax.scatter(r["precision_omega_mean"], r["recall_mean"], s=20 + r["mean_chunk_tokens"] / 3,
                   color=f"C{i % 10}", alpha=0.8, label=f"{label} ({r['mean_chunk_tokens']:.0f} tok)")
    if report is not None:
        rep = report[report["embedding_model"] == model]
        ax.scatter(rep["precision_omega_mean"], rep["recall_mean"], marker="x", color="k", label="reported")
    ax.set_xlabel("precision_Ω (%)")
    ax.set_ylabel("recall (%)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def run_comparison(
    specs: Sequence[ChunkerSpec],
    corpora: dict[str, str],
    questions: pd.DataFrame,
    embedder: Any,
    top_k: int = 5,
    mode: str = "chroma",
    llm: Any = None,
    cache_dir: str | Path | None = None,
    progress: Callable[[Any], Any] | None = None,
    show_progress: bool = True,
) -> list[RunResult]:
    """Evaluate every spec (questions embedded once), with a progress bar over specs.

    LLM specs are skipped (with a printed note) when ``llm`` is None. ``show_progress=False``
    (or a ``progress`` wrapper of your own) replaces the tqdm bar, e.g. in executed notebooks.
    """
    from tqdm.auto import tqdm

    qv = np.asarray(embedder.embed(list(questions["question"])))
    out = []
    if progress is not None:
        bar = progress(specs)
    elif show_progress:
        bar = tqdm(list(specs), desc="chunkers", unit="chunker")
    else:
        bar = list(specs)
    for spec in bar:
        if spec.chunker == "LLM" and llm is None:
            print(f"skipped {spec.label}: no LLM configured (set CHUNKWISE_LLM_BASE_URL / CHUNKWISE_LLM_MODEL)")
            continue
        out.append(evaluate_spec(spec, corpora, questions, embedder, qv, top_k, mode, llm, cache_dir))
    return out


def precision_omega_by_mode(results: Sequence[RunResult], questions: pd.DataFrame) -> pd.DataFrame:
    """Mean precision_Ω (percent) of each spec under both metric definitions.

    precision_Ω depends only on the chunk boundaries and the references, never on the
    embedding model or the retriever, so this table separates chunking/metric effects from
    retrieval effects. ``chroma``: chunks that touch *or abut* a reference, IoU of their union
    with the references; ``union``: chunks that share a character, precision of their union.
    """
    q = questions.assign(corpus_id=questions["corpus"])
    empty = [[] for _ in range(len(q))]
    rows = []
    for r in results:
        spans = {name: [(c.start, c.end) for c in cs] for name, cs in r.chunks_by_corpus.items()}
        row = {"chunker": r.spec.label, "mean_chunk_tokens": round(r.mean_chunk_tokens, 1)}
        for mode in ("chroma", "union"):
            row[f"precision_omega_{mode}"] = 100 * score_questions(q, empty, spans, mode=mode)["precision_omega"].mean()
        rows.append(row)
    return pd.DataFrame(rows).round(1)
