"""The Chroma-style retrieval comparison: chunkers scored by span recall / precision / IoU.

Protocol of Chroma's technical report "Evaluating Chunking Strategies for Retrieval"
(Smith & Troynikov, 2024): chunk each of the five corpora, put the chunks of all corpora in one
index, embed the 472 questions with the same model, retrieve the ``top_k`` (5) nearest chunks
per question by cosine similarity, and score the retrieved character spans against the
question's reference excerpts with :func:`chunkwise.evaluation.spans.score_questions`.

Two choices of the report's code can be switched on to reproduce it exactly:

* ``placement="report"`` scores each chunk where that code places it (first occurrence of its
  text, one trailing ``.`` dropped; :func:`chunkwise.evaluation.spans.place_spans`) instead of
  at its true offsets (``"exact"``, the default). Chunkers keep their exact offsets; only the
  scoring moves.
* ``index="hnsw"`` retrieves through a ``chromadb`` HNSW collection (l2 space,
  ``hnsw:search_ef`` 50, as the report ran it) instead of exact search (``"exact"``, the
  default). Needs the optional ``chroma`` extra.

The runs go through the evaluation engine (:func:`run_chroma_grid`, which returns a
:class:`~chunkwise.evaluation.grid.GridResult`), and every function here reads that result:
the report's tables at one retriever and k (:func:`results_table`, :func:`per_corpus_table`),
the same retrieval scored under another placement (:func:`rescore`, :func:`compare_placements`),
two runs side by side (:func:`compare_runs`), paired-bootstrap intervals on the differences
between chunkers (:func:`difference_table`) and the ranking at each k (:func:`best_by_k`).

Everything slow is cached: chunk spans per (chunker, corpus text) as JSON, embeddings in the
embedder's SQLite cache. A warm rerun embeds nothing and chunks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from chunkwise.evaluation.stats import describe_interval, interval_side
from chunkwise.chunk import Chunk
from chunkwise.chunkers.specs import (  # noqa: F401 - re-exported: chapter 2 and its tests use ch.parse_spec
    ChunkerSpec,
    chunk_corpus,
    make_chunker,
    parse_spec,
)
from chunkwise.evaluation.anyof import relevant_targets
from chunkwise.evaluation.cells import CellInputs, score_cell
from chunkwise.evaluation.grid import (
    INDEXES,
    METRICS,
    GridConfig,
    GridResult,
    _first_relevant_rank,
    _omega,
    cell_name,
    ranking_key,
    relevant_items,
    run_grid,
)
from chunkwise.evaluation.spans import MODES, PLACEMENTS, place_spans, score_questions
from chunkwise.evaluation.stats import paired_bootstrap, paired_difference_ci
from chunkwise.retrieval import hnsw_search  # noqa: F401 - re-exported: the report's index

if TYPE_CHECKING:  # pragma: no cover
    from chunkwise.llm.protocol import ChatModel

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


def _check_choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; use one of {allowed!r}.")
    return str(value)


def placed_spans(
    chunks: dict[str, Sequence[Chunk]], corpora: dict[str, str], placement: str = "exact"
) -> dict[str, list[tuple[int, int]]]:
    """The span at which each chunk is scored, per corpus (:func:`~chunkwise.evaluation.spans.place_spans`).

    Raises
    ------
    ValueError
        On an unknown placement, a corpus of ``chunks`` missing from ``corpora``, or (``"report"``)
        a chunk text not found in its corpus.
    """
    _check_choice("placement", placement, PLACEMENTS)
    missing = [name for name in chunks if name not in corpora]
    if missing:
        raise ValueError(f"corpora has no text for {missing}; pass the texts the chunks were cut from.")
    return {
        name: place_spans(corpora[name], [(c.text, c.start, c.end) for c in cs], placement)
        for name, cs in chunks.items()
    }


def _flat_spans(placed: dict[str, list[tuple[int, int]]]) -> tuple[list[str], list[tuple[int, int]]]:
    """The corpus and the span of every chunk, corpus by corpus in order (ranking positions)."""
    docs = [name for name, cs in placed.items() for _ in cs]
    flat = [span for cs in placed.values() for span in cs]
    return docs, flat


def _with_corpus_id(questions: pd.DataFrame) -> pd.DataFrame:
    """``questions`` with ``corpus_id`` = ``corpus`` (the column the scorers read)."""
    return questions.assign(corpus_id=questions["corpus"]) if "corpus" in questions.columns else questions


def score_retrieval(
    chunks: dict[str, Sequence[Chunk]],
    corpora: dict[str, str],
    questions: pd.DataFrame,
    rows: np.ndarray,
    placement: str = "exact",
    mode: str = "chroma",
) -> pd.DataFrame:
    """Score retrieved chunks (positions in the corpus-by-corpus chunk list) at their placed spans.

    Parameters
    ----------
    chunks : dict of corpus name -> list of Chunk
        Every chunk of every corpus, in index order.
    corpora : dict of corpus name -> text
    questions : DataFrame
        Columns ``question_id``, ``corpus``, ``references``.
    rows : array of int, shape (len(questions), top_k)
        Retrieved positions into the flattened chunk list, best first.
    placement : {"exact", "report"}
        Where each chunk is scored, for recall / precision / IoU and for precision_Ω alike.
    mode : {"chroma", "union"}

    Returns
    -------
    DataFrame
        :func:`~chunkwise.evaluation.spans.score_questions`'s per-question table.
    """
    placed = placed_spans(chunks, corpora, placement)
    docs, flat = _flat_spans(placed)
    retrieved = [[(docs[j], *flat[j]) for j in row] for row in np.asarray(rows).tolist()]
    return score_questions(_with_corpus_id(questions), retrieved, placed, mode=mode)


def _skip_llm(specs: Sequence[ChunkerSpec], llm: ChatModel | None) -> list[ChunkerSpec]:
    """``specs`` without the LLM chunker when no LLM client is configured (with a printed note)."""
    out = []
    for spec in specs:
        if spec.kind.needs == "llm" and llm is None:
            print(f"skipped {spec.label}: no LLM configured (set CHUNKWISE_LLM_BASE_URL / CHUNKWISE_LLM_MODEL)")
            continue
        out.append(spec)
    return out


def run_chroma_grid(
    specs: Sequence[ChunkerSpec],
    corpora: dict[str, str],
    questions: pd.DataFrame,
    embedder: Any,
    retrievers: Sequence[str] = ("dense",),
    top_k: Sequence[int] | int = (5,),
    mode: str = "chroma",
    llm: ChatModel | None = None,
    cache_dir: str | Path | None = None,
    progress: Callable[[Any], Any] | None = None,
    show_progress: bool = True,
    placement: str = "exact",
    index: str = "exact",
) -> GridResult:
    """The Chroma protocol on the evaluation engine (:func:`chunkwise.evaluation.grid.run_grid`).

    All corpora go into one index per chunker, as in the report; each chunking is embedded once
    and reused for every retriever and k. LLM specs are skipped (with a printed note) when
    ``llm`` is None.

    Parameters
    ----------
    specs : sequence of ChunkerSpec
    corpora : dict of corpus name -> text
    questions : DataFrame
        From :func:`chunkwise.datasets.load_chroma_questions` (columns question_id, question,
        corpus, references).
    embedder : Embedder
    retrievers : sequence of {"dense", "bm25", "hybrid"}
    top_k : int or sequence of int
    mode : {"chroma", "union"}
    llm : LLMClient, optional
    cache_dir : str or Path, optional
        Chunk-span cache (default ``$CHUNKWISE_CACHE_DIR/spans``).
    progress, show_progress
        A wrapper over the chunker list, or a tqdm bar (``show_progress``).
    placement : {"exact", "report"}
        Where chunks are scored (:func:`chunkwise.evaluation.spans.place_spans`).
    index : {"exact", "hnsw"}
        The dense retriever's index (:func:`chunkwise.retrieval.hnsw_search` for ``"hnsw"``).

    Returns
    -------
    GridResult

    Raises
    ------
    ValueError
        On an unknown placement or index (before any chunking), or when every spec was skipped.
    """
    _check_choice("placement", placement, PLACEMENTS)
    _check_choice("index", index, INDEXES)
    kept = _skip_llm(specs, llm)
    if not kept:
        raise ValueError("no chunker left to run (the LLM chunker needs a configured LLM); list other specs.")
    config = GridConfig(
        chunkers=tuple(kept), retrievers=tuple(retrievers), top_k=top_k, mode=mode, placement=placement, index=index
    )
    return run_grid(
        corpora, questions, config, embedder, llm=llm, cache_dir=cache_dir, show_progress=show_progress, progress=progress
    )


def _at(grid: GridResult, retriever: str | None, top_k: int | None) -> tuple[str, int]:
    """The (retriever, k) a table reads: by default the grid's only retriever and its largest k.

    Raises
    ------
    ValueError
        If ``retriever`` is None and the grid ran several, or the grid has no such retriever / k.
    """
    cfg = grid.config
    if retriever is None:
        if len(cfg.retrievers) != 1:
            raise ValueError(f"the grid ran retrievers {cfg.retrievers}; pass retriever= (one of them).")
        retriever = cfg.retrievers[0]
    k = max(cfg.top_k) if top_k is None else int(top_k)
    _cells_at(grid, retriever, k)
    return retriever, k


def _chunker_cells(
    grid: GridResult, retriever: str | None = None, top_k: int | None = None
) -> list[tuple[ChunkerSpec, pd.Series, pd.DataFrame]]:
    """Per chunker (grid order): its spec, its table row and its per-question rows at one (retriever, k).

    Raises
    ------
    ValueError
        As :func:`_at`.
    """
    retriever, k = _at(grid, retriever, top_k)
    out = []
    for spec in grid.config.chunkers:
        name = cell_name(spec, retriever, k)
        row = grid.table[grid.table["cell"] == name].iloc[0]
        out.append((spec, row, grid.per_question[grid.per_question["cell"] == name]))
    return out


def _chunk_objects(grid: GridResult, spec: ChunkerSpec) -> dict[str, list[Chunk]]:
    """The chunks of ``spec`` as the chunker cut them (true offsets).

    Raises
    ------
    ValueError
        If the grid does not carry them (a result rebuilt from files rather than run).
    """
    chunks = grid.chunk_objects.get(spec.label)
    if chunks is None:
        raise ValueError(f"the grid carries no chunks for {spec.label}; use the GridResult that run_chroma_grid "
                         "returned in this session.")
    return chunks


def _check_questions(grid: GridResult, questions: pd.DataFrame) -> None:
    """Raise ValueError unless ``questions`` are the grid's (same count; same ids in the same order)."""
    ok = len(questions) == len(grid.questions)
    if ok and "question_id" in questions.columns:
        ok = questions["question_id"].astype(str).tolist() == grid.questions["question_id"].astype(str).tolist()
    if not ok:
        raise ValueError(f"questions are not the {len(grid.questions)} questions the grid ran on (same ids, same "
                         "order); pass the questions given to run_chroma_grid.")


def rescore(
    grid: GridResult,
    corpora: dict[str, str],
    questions: pd.DataFrame,
    placement: str | None = None,
    mode: str | None = None,
) -> GridResult:
    """The same retrievals scored under another placement and/or metric mode (nothing re-embedded).

    Every cell is scored again from its stored ranking (:attr:`GridResult.rankings`, the first
    k positions) over the chunks as the chunker cut them (:attr:`GridResult.chunk_objects`),
    each placed by ``placement`` (:func:`placed_spans`).

    Parameters
    ----------
    grid : GridResult
        From :func:`run_chroma_grid` (it carries the rankings and the chunks).
    corpora : dict of corpus name -> text
        The texts the grid ran on.
    questions : DataFrame
        The questions the grid ran on, in the same order (columns ``question_id``, ``corpus``,
        ``references``).
    placement : {"exact", "report"}, optional
        Default the grid's own.
    mode : {"chroma", "union"}, optional
        Default the grid's own.

    Returns
    -------
    GridResult
        A copy (:meth:`GridResult.with_scores`) whose per-question ``recall``, ``precision``,
        ``iou``, ``precision_omega`` (in ``mode``), ``precision_omega_chroma`` /
        ``precision_omega_union``, ``hit`` and ``rr`` (fractions in [0, 1]), the table's means of
        them, ``chunks`` (the scored spans) and ``config.placement`` / ``config.mode`` follow
        the new placement and mode. Rankings, chunk and token counts and times are the run's.

    Raises
    ------
    ValueError
        On an unknown placement or mode; questions that are not the grid's; a grid without
        chunks or rankings for a chunker; a hierarchical chunker (its cells score parents
        merged from the children, which only a run replays) or questions with several
        readings (rerun :func:`run_chroma_grid` with the placement instead).
    """
    cfg = grid.config
    placement = cfg.placement if placement is None else _check_choice("placement", placement, PLACEMENTS)
    mode = cfg.mode if mode is None else _check_choice("mode", mode, MODES)
    _check_questions(grid, questions)
    readings = grid.questions.get("readings")
    if readings is not None and any(isinstance(r, list) and r for r in readings):
        raise ValueError("rescore scores one reference set per question; these questions have readings (any-of "
                         "answers): rerun run_chroma_grid with the placement instead.")
    q = _with_corpus_id(questions)
    targets = relevant_targets(grid.questions)
    per_q = grid.per_question.copy()
    cells = per_q["cell"].to_numpy()
    multi = len(cfg.embedders) > 1
    scored: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for spec in cfg.chunkers:
        if spec.kind.index == "parents":
            raise ValueError(f"{spec.label}: its cells score parents merged from the retrieved children; rerun "
                             "run_chroma_grid with the placement instead of rescoring.")
        ranks = grid.rankings.get(spec.label)
        if ranks is None:
            raise ValueError(f"the grid carries no rankings for {spec.label}; use the GridResult that "
                             "run_chroma_grid returned in this session.")
        placed = placed_spans(_chunk_objects(grid, spec), corpora, placement)
        scored[spec.label] = placed
        docs, flat = _flat_spans(placed)
        spans = np.asarray(flat, dtype=np.int64).reshape(-1, 2)
        omega = _omega(q, None, None, placed)
        relevant = relevant_items(docs, spans, targets)
        n_relevant = np.asarray([int(m.sum()) for m in relevant], dtype=np.int64)
        for row in grid.table[grid.table["chunker"] == spec.label].itertuples(index=False):
            k = int(row.k)
            emb = str(row.embedder) if multi and "embedder" in grid.table.columns else None
            rows = [r[:k] for r in ranks[ranking_key(str(row.retriever), emb)]]
            first = np.asarray([_first_relevant_rank(r, docs, spans, t) for r, t in zip(rows, targets)])
            retrieved = [[(docs[j], *flat[j]) for j in r] for r in rows]
            relevance = [[bool(m[j]) for j in r] for m, r in zip(relevant, rows)]
            values = score_cell(CellInputs(q, retrieved, first, k, omega, mode, None, relevance, n_relevant))
            at = cells == row.cell
            for col, v in values.items():
                per_q.loc[at, col] = v
    return grid.with_scores(per_q, chunks=scored, placement=placement, mode=mode)


def placement_moves(grid: GridResult, corpora: dict[str, str]) -> pd.DataFrame:
    """How many chunks the report's placement scores somewhere else, per chunker and corpus.

    Parameters
    ----------
    grid : GridResult
        From :func:`run_chroma_grid` (its chunks, whatever placement it ran with).
    corpora : dict of corpus name -> text

    Returns
    -------
    DataFrame
        One row per (chunker, corpus), chunkers in grid order: ``chunker`` (label), ``corpus``,
        ``n_chunks``, ``moved`` (chunks whose first-occurrence start differs from their true
        start: scored at an earlier copy of the same text) and ``trimmed`` (chunks kept in place
        but one character shorter, the dropped trailing ``.``).

    Raises
    ------
    ValueError
        If the grid carries no chunks, or (from :func:`placed_spans`) a corpus is missing or a
        chunk text is not found in it.
    """
    rows = []
    for spec in grid.config.chunkers:
        chunks = _chunk_objects(grid, spec)
        exact = placed_spans(chunks, corpora, "exact")
        report = placed_spans(chunks, corpora, "report")
        for name in exact:
            e = np.asarray(exact[name], dtype=np.int64).reshape(-1, 2)
            p = np.asarray(report[name], dtype=np.int64).reshape(-1, 2)
            moved = e[:, 0] != p[:, 0]
            rows.append(
                {
                    "chunker": spec.label,
                    "corpus": name,
                    "n_chunks": len(e),
                    "moved": int(moved.sum()),
                    "trimmed": int((~moved & (e[:, 1] != p[:, 1])).sum()),
                }
            )
    return pd.DataFrame(rows)


def results_table(grid: GridResult, model: str, retriever: str | None = None, top_k: int | None = None) -> pd.DataFrame:
    """The report's table: one row per chunker at one (retriever, k) of a grid.

    Parameters
    ----------
    grid : GridResult
    model : str
        The embedding model's name, written in the ``embedding_model`` column.
    retriever : str, optional
        Default the grid's only retriever.
    top_k : int, optional
        Default the grid's largest k.

    Returns
    -------
    DataFrame
        One row per chunker (grid order): ``embedding_model``, ``chunker`` (kind, e.g.
        ``"TokenText"``), ``size_tokens`` and ``overlap_tokens`` (cl100k_base tokens; size NaN
        when the spec has none), ``n_chunks``, ``mean_chunk_tokens`` (1 decimal), for each
        metric of :data:`METRIC_COLUMNS` ``<metric>_mean`` and ``<metric>_std`` (population sd)
        over the questions in percent, and ``seconds`` (the cell's indexing time: chunking and
        embedding, near 0 on warm caches; 1 decimal).

    Raises
    ------
    ValueError
        If ``retriever`` is None and the grid ran several, or the grid has no such retriever / k.
    """
    rows = []
    for spec, cell, pq in _chunker_cells(grid, retriever, top_k):
        row: dict[str, Any] = {
            "embedding_model": model,
            "chunker": spec.chunker,
            "size_tokens": spec.size,
            "overlap_tokens": spec.overlap,
            "n_chunks": int(cell["n_chunks"]),
            "mean_chunk_tokens": round(float(cell["mean_chunk_tokens"]), 1),
        }
        for m in METRIC_COLUMNS:
            vals = pq[m].to_numpy(dtype=float)
            row[f"{m}_mean"] = 100 * float(np.mean(vals))
            row[f"{m}_std"] = 100 * float(np.std(vals))
        row["seconds"] = round(float(cell["index_seconds"]), 1)
        rows.append(row)
    return pd.DataFrame(rows)


def per_corpus_table(
    grid: GridResult, metric: str = "recall", retriever: str | None = None, top_k: int | None = None
) -> pd.DataFrame:
    """Mean of ``metric`` (percent) per corpus (columns, sorted) for each chunker (rows, grid order).

    Parameters
    ----------
    grid : GridResult
    metric : str
        A per-question column of the grid (``recall``, ``precision``, ``iou``,
        ``precision_omega``, ``hit``, ``rr`` ...).
    retriever : str, optional
        Default the grid's only retriever.
    top_k : int, optional
        Default the grid's largest k.

    Returns
    -------
    DataFrame
        Shape (n_chunkers, n_corpora); index the chunker labels.

    Raises
    ------
    ValueError
        For an unknown metric, ``retriever`` None on a grid that ran several, or a retriever /
        k the grid did not run.
    """
    allowed = [m for m in (*METRICS, "retrieved_tokens") if m in grid.per_question.columns]
    if metric not in allowed:
        raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(allowed)}.")
    data = {}
    for spec, _, pq in _chunker_cells(grid, retriever, top_k):
        data[spec.label] = pq.groupby("corpus")[metric].mean() * 100
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


def metric_view(ours: pd.DataFrame, report: pd.DataFrame, model: str, metric: str = "recall") -> pd.DataFrame:
    """One metric of our rows beside the published one, formatted for reading.

    Parameters
    ----------
    ours : DataFrame
        :func:`results_table` output.
    report : DataFrame
        :func:`load_report` output.
    model : str
        The report table to compare with (``embedding_model`` value).
    metric : {"recall", "precision", "precision_omega", "iou"}

    Returns
    -------
    DataFrame
        Index ``chunker`` (e.g. ``"TokenText 250/125"``), string columns ``ours`` (mean, percent,
        2 decimals, unrounded before formatting), ``published`` (as printed in the report) and
        ``delta`` (ours minus published, percentage points); ``–`` where the report has no row.

    Raises
    ------
    ValueError
        For an unknown metric.
    """
    if metric not in METRIC_COLUMNS:
        raise ValueError(f"unknown metric {metric!r}; use one of {METRIC_COLUMNS}.")
    key = ["chunker", "size_tokens", "overlap_tokens"]
    rep = report[report["embedding_model"] == model].copy()
    mine = ours.copy()
    for df in (rep, mine):
        df["size_tokens"] = pd.to_numeric(df["size_tokens"], errors="coerce")
        df["overlap_tokens"] = pd.to_numeric(df["overlap_tokens"], errors="coerce").fillna(0).astype(int)
    col = f"{metric}_mean"
    merged = mine[key + [col]].merge(rep[key + [col]], on=key, how="left", suffixes=("", "_published"))

    def label(r: Any) -> str:
        text = str(r.chunker) + (f" {int(r.size_tokens)}" if pd.notna(r.size_tokens) else "")
        return text + (f"/{int(r.overlap_tokens)}" if r.overlap_tokens else "")

    def fmt(v: float, spec: str) -> str:
        return "–" if pd.isna(v) else format(v, spec)

    delta = merged[col] - merged[f"{col}_published"]
    return pd.DataFrame(
        {
            "ours": [fmt(v, ".2f") for v in merged[col]],
            "published": [fmt(v, ".1f") for v in merged[f"{col}_published"]],
            "delta": [fmt(v, "+.2f") for v in delta],
        },
        index=pd.Index([label(r) for r in merged.itertuples()], name="chunker"),
    )


def plot_recall_vs_precision_omega(table: pd.DataFrame, report: pd.DataFrame | None = None, model: str = ""):
    """Recall against precision_Ω, one point per chunker, marker size by mean chunk tokens.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    from chunkwise.figures import series_style

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, (_, r) in enumerate(table.iterrows()):
        label = r["chunker"] + (f" {int(r['size_tokens'])}" if pd.notna(r["size_tokens"]) else "")
        if r["overlap_tokens"]:
            label += f"/{int(r['overlap_tokens'])}"
        style = series_style(i)
        ax.scatter(r["precision_omega_mean"], r["recall_mean"], s=20 + r["mean_chunk_tokens"] / 3,
                   color=style["color"], marker=style["marker"], alpha=0.8, label=f"{label} ({r['mean_chunk_tokens']:.0f} tok)")
    if report is not None:
        rep = report[report["embedding_model"] == model]
        ax.scatter(rep["precision_omega_mean"], rep["recall_mean"], marker="x", color="k", label="reported")
    ax.set_xlabel("precision_Ω (%)")
    ax.set_ylabel("recall (%)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def precision_omega_by_mode(
    grid: GridResult,
    questions: pd.DataFrame,
    corpora: dict[str, str] | None = None,
    placement: str = "exact",
) -> pd.DataFrame:
    """Mean precision_Ω (percent) of each chunker under both metric definitions.

    precision_Ω depends only on the chunk boundaries and the references, never on the
    embedding model or the retriever, so this table separates chunking/metric effects from
    retrieval effects. ``chroma``: chunks that touch *or abut* a reference, IoU of their union
    with the references; ``union``: chunks that share a character, precision of their union.

    Parameters
    ----------
    grid : GridResult
        From :func:`run_chroma_grid` (its chunks as the chunker cut them).
    questions : DataFrame
        Columns ``question_id``, ``corpus``, ``references``.
    corpora : dict of corpus name -> text, optional
        Needed for ``placement="report"``; without it the chunks' true offsets are used.
    placement : {"exact", "report"}
        ``"report"`` scores the chunks where the report's code places them.

    Returns
    -------
    DataFrame
        One row per chunker (grid order): ``chunker`` (label), ``mean_chunk_tokens``,
        ``precision_omega_chroma`` and ``precision_omega_union`` (percent); rounded to 1 decimal.

    Raises
    ------
    ValueError
        On an unknown placement, ``placement="report"`` without ``corpora``, or a grid that
        carries no chunks.
    """
    _check_choice("placement", placement, PLACEMENTS)
    if placement == "report" and corpora is None:
        raise ValueError("placement='report' needs corpora (the texts) to find each chunk's first occurrence.")
    q = questions.assign(corpus_id=questions["corpus"])
    empty = [[] for _ in range(len(q))]
    rows = []
    for spec in grid.config.chunkers:
        chunks = _chunk_objects(grid, spec)
        if corpora is None:
            spans = {name: [(c.start, c.end) for c in cs] for name, cs in chunks.items()}
        else:
            spans = placed_spans(chunks, corpora, placement)
        tokens = grid.table.loc[grid.table["chunker"] == spec.label, "mean_chunk_tokens"].iloc[0]
        row = {"chunker": spec.label, "mean_chunk_tokens": round(float(tokens), 1)}
        for mode in ("chroma", "union"):
            row[f"precision_omega_{mode}"] = 100 * score_questions(q, empty, spans, mode=mode)["precision_omega"].mean()
        rows.append(row)
    return pd.DataFrame(rows).round(1)


def compare_runs(
    a: GridResult,
    b: GridResult,
    labels: tuple[str, str] = ("a", "b"),
    diff: str = "diff",
    retriever: str | None = None,
    top_k: int | None = None,
) -> pd.DataFrame:
    """Mean metrics (percent) of the same chunkers under two settings, side by side.

    Parameters
    ----------
    a, b : GridResult
        The same chunkers in the same order (e.g. one placement or index each).
    labels : (str, str)
        Column suffixes for ``a`` and ``b``.
    diff : str
        Suffix of the ``a`` minus ``b`` columns (percentage points).
    retriever : str, optional
        The retriever read in both grids; default each grid's only retriever.
    top_k : int, optional
        The k read in both grids; default each grid's largest.

    Returns
    -------
    DataFrame
        One row per chunker: ``chunker`` (label) and, for each metric of
        :data:`METRIC_COLUMNS`, ``<metric>_<labels[0]>``, ``<metric>_<labels[1]>`` and
        ``<metric>_<diff>``; then ``rank_<label>``, the chunker's rank by mean recall under each
        setting (1 = highest, ties share the lower rank).

    Raises
    ------
    ValueError
        If the two grids do not hold the same chunker specs in the same order, or either lacks
        the retriever / k (or ran several retrievers and ``retriever`` is None).
    """
    la, lb = labels
    if list(a.config.chunkers) != list(b.config.chunkers):
        raise ValueError(
            f"{la} and {lb} must hold the same specs in the same order; {la} has "
            f"{[s.label for s in a.config.chunkers]}, {lb} {[s.label for s in b.config.chunkers]}."
        )
    rows = []
    for (spec, _, pa), (_, _, pb) in zip(_chunker_cells(a, retriever, top_k), _chunker_cells(b, retriever, top_k)):
        row: dict[str, Any] = {"chunker": spec.label}
        for m in METRIC_COLUMNS:
            va = 100 * float(pa[m].mean())
            vb = 100 * float(pb[m].mean())
            row[f"{m}_{la}"], row[f"{m}_{lb}"], row[f"{m}_{diff}"] = va, vb, va - vb
        rows.append(row)
    out = pd.DataFrame(rows)
    for label in labels:
        out[f"rank_{label}"] = out[f"recall_{label}"].rank(ascending=False, method="min").astype(int)
    return out


def compare_placements(
    report: GridResult, exact: GridResult, retriever: str | None = None, top_k: int | None = None
) -> pd.DataFrame:
    """The same retrievals scored at the report code's placement and at true offsets.

    :func:`compare_runs` with labels ``("report", "exact")`` and ``<metric>_gain`` = report
    minus exact (percentage points); one of the two grids is typically the other's
    :func:`rescore`, e.g. ``exact = rescore(report, corpora, questions, placement="exact")``.

    Raises
    ------
    ValueError
        If the two grids do not hold the same chunker specs in the same order, or either lacks
        the retriever / k.
    """
    return compare_runs(report, exact, ("report", "exact"), "gain", retriever, top_k)


def precision_omega_vs_tables(
    ours: pd.DataFrame,
    report: pd.DataFrame,
    models: tuple[str, str] = ("all-MiniLM-L6-v2", "text-embedding-3-large"),
) -> pd.DataFrame:
    """Our mean precision_Ω beside the value each published table gives the same chunker.

    precision_Ω depends only on the chunk boundaries and the references, so for a chunker whose
    boundaries do not depend on the embedding model (TokenText, Recursive) both of the report's
    tables should print the same value.

    Parameters
    ----------
    ours : DataFrame
        :func:`results_table` output.
    report : DataFrame
        :func:`load_report` output.
    models : (str, str)
        The two ``embedding_model`` values of the report's tables.

    Returns
    -------
    DataFrame
        The rows of ``ours`` that both tables have: ``chunker, size_tokens, overlap_tokens,
        embedder_free`` (boundaries independent of the embedding model), ``ours`` and one
        column per model, and ``closer``: the model whose table is nearer to ours.
    """
    key = ["chunker", "size_tokens", "overlap_tokens"]

    def norm(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        df["size_tokens"] = pd.to_numeric(df["size_tokens"], errors="coerce")
        df["overlap_tokens"] = pd.to_numeric(df["overlap_tokens"], errors="coerce").fillna(0).astype(int)
        return df

    rep = norm(report)
    out = norm(ours)[key + ["precision_omega_mean"]].rename(columns={"precision_omega_mean": "ours"})
    out["ours"] = out["ours"].round(2)
    for model in models:
        part = rep[rep["embedding_model"] == model][key + ["precision_omega_mean"]]
        out = out.merge(part.rename(columns={"precision_omega_mean": model}), on=key, how="inner")
    out.insert(3, "embedder_free", out["chunker"].isin(["TokenText", "Recursive"]))
    dist = np.abs(out[list(models)].to_numpy(dtype=float) - out[["ours"]].to_numpy(dtype=float))
    out["closer"] = [models[int(i)] for i in np.argmin(dist, axis=1)] if len(out) else []
    return out.reset_index(drop=True)


def compare_with_report_code(ours: pd.DataFrame, code: pd.DataFrame, search: str) -> pd.DataFrame:
    """Our rows beside the numbers the report's own evaluation code gave for the same rows.

    Parameters
    ----------
    ours : DataFrame
        :func:`results_table` output (percent).
    code : DataFrame
        ``data/chroma/report_code_d451fc4_minilm.csv``: columns ``chunker, size_tokens,
        overlap_tokens, search`` and ``<metric>_mean`` in percent.
    search : str
        Which of the code's runs to compare with (a value of its ``search`` column).

    Returns
    -------
    DataFrame
        The rows both have: for each metric ``<metric>`` (ours), ``<metric>_code`` and
        ``<metric>_delta`` (ours minus the code's, percentage points), unrounded.

    Raises
    ------
    ValueError
        If ``search`` is not a value of ``code["search"]``.
    """
    if search not in set(code["search"]):
        raise ValueError(f"search {search!r} is not in the file; it has {sorted(set(code['search']))}.")
    key = ["chunker", "size_tokens", "overlap_tokens"]
    part = code[code["search"] == search]
    merged = ours.merge(part, on=key, how="inner", suffixes=("", "_code"))
    out = merged[key].copy()
    for m in METRIC_COLUMNS:
        out[m] = merged[f"{m}_mean"]
        out[f"{m}_code"] = merged[f"{m}_mean_code"]
        out[f"{m}_delta"] = merged[f"{m}_mean"] - merged[f"{m}_mean_code"]
    return out.reset_index(drop=True)


def _cells_at(grid: GridResult, retriever: str, k: int) -> list[str]:
    cfg = grid.config
    if retriever not in cfg.retrievers or k not in cfg.top_k:
        raise ValueError(
            f"the grid has no cells for retriever {retriever!r} at k={k}; it ran {cfg.retrievers} at k in {cfg.top_k}."
        )
    return [cell_name(spec, retriever, k) for spec in cfg.chunkers]


def difference_table(
    grid: GridResult,
    baseline: str,
    metric: str = "recall",
    retriever: str = "dense",
    top_k: int = 5,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Each chunker's mean and its paired-bootstrap difference to a baseline chunker, at one (retriever, k).

    The bootstrap resamples questions (:func:`chunkwise.evaluation.stats.paired_bootstrap`): every
    chunker sees the same resampled questions, so the intervals are on paired differences.

    Parameters
    ----------
    grid : GridResult
    baseline : str
        A chunker label of the grid (e.g. ``"Recursive 200"``).
    metric : str
        A per-question metric (``recall``, ``precision``, ``iou``, ``precision_omega``, ``hit_rate``, ``mrr``).
    retriever : str
    top_k : int
    n_resamples, seed : int

    Returns
    -------
    DataFrame
        One row per chunker (grid order): ``chunker``, ``mean``, ``diff`` (minus the baseline),
        ``diff_low``, ``diff_high`` (95% percentile interval), ``p_best`` (share of resamples in
        which the chunker has the best mean), ``ruled_out`` (worse than the best beyond the
        noise); means and differences in percentage points, ``p_best`` in percent. The
        :class:`~chunkwise.evaluation.stats.BootstrapResult` is in ``.attrs["bootstrap"]``.

    Raises
    ------
    ValueError
        If ``baseline`` is not a chunker of the grid, or the grid has no such retriever / k.
    """
    cells = _cells_at(grid, retriever, top_k)
    labels = [s.label for s in grid.config.chunkers]
    if baseline not in labels:
        raise ValueError(f"baseline {baseline!r} is not a chunker of the grid; use one of {labels}.")
    scores = grid.scores(metric)[cells]
    scores.columns = labels
    boot = paired_bootstrap(scores, baseline, n_resamples=n_resamples, seed=seed, metric=metric)
    t = boot.table
    out = pd.DataFrame(
        {
            "chunker": labels,
            "mean": 100 * t["mean"].to_numpy(dtype=float),
            "diff": 100 * t["diff"].to_numpy(dtype=float),
            "diff_low": 100 * t["diff_low"].to_numpy(dtype=float),
            "diff_high": 100 * t["diff_high"].to_numpy(dtype=float),
            "p_best": 100 * t["p_best"].to_numpy(dtype=float),
            "ruled_out": t["ruled_out"].to_numpy(dtype=bool),
        }
    )
    out.attrs["bootstrap"] = boot
    return out


def pair_difference(
    grid: GridResult,
    a: str,
    b: str,
    metric: str = "recall",
    retriever: str = "dense",
    top_k: int = 5,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of chunker ``a`` minus chunker ``b`` (percentage points) with its 95% paired-bootstrap interval.

    Returns
    -------
    (difference, low, high) : tuple of float

    Raises
    ------
    ValueError
        If ``a`` or ``b`` is not a chunker of the grid, or the grid has no such retriever / k.
    """
    cells = dict(zip((s.label for s in grid.config.chunkers), _cells_at(grid, retriever, top_k)))
    for label in (a, b):
        if label not in cells:
            raise ValueError(f"{label!r} is not a chunker of the grid; use one of {list(cells)}.")
    scores = grid.scores(metric)
    d, lo, hi = paired_difference_ci(scores[cells[a]], scores[cells[b]], n_resamples=n_resamples, seed=seed)
    return 100 * d, 100 * lo, 100 * hi


def k_winner_result(
    grid: GridResult,
    ranking: pd.DataFrame,
    ref_k: int,
    retriever: str = "dense",
    metric: str = "recall",
    n_resamples: int = 10_000,
    seed: int = 0,
) -> dict[str, Any]:
    """Does the chunker that ranks first at ``ref_k`` still rank first at the grid's largest k?

    The test of the guide's caution that "the chunk size that wins with k=5 isn't necessarily
    the one that wins" at a larger k (Tanner, 2025), for chapter 2's findings results.

    Parameters
    ----------
    grid : GridResult
        A sweep over several k (:func:`run_chroma_grid`).
    ranking : DataFrame
        :func:`best_by_k` of that grid.
    ref_k : int
        The published k (5); must be one of the grid's k.
    retriever, metric : str
    n_resamples, seed : int

    Returns
    -------
    dict
        ``k_winner_changes``: ``"yes"`` when a different chunker ranks first at the largest k
        and both leads (the old first's at ``ref_k``, the new first's at the largest k) have
        95% paired intervals above 0; ``"no"`` when the same chunker ranks first at both and
        leads alone at both (a first place shared with the runner-up, e.g. everyone at 100%,
        is ``"cannot tell"``); ``"cannot tell"`` otherwise. ``k_winner_small`` / ``k_winner_large`` (the first at each
        k), ``k_large``, and ``k_winner_gap_ci``: at the largest k, the ``ref_k`` winner minus
        the first there, ``"+d [low, high]"`` in points (``"0"`` when they are the same).

    Raises
    ------
    ValueError
        When ``ref_k`` or ``retriever`` is not in the grid, or the grid has a single k.
    """
    ks = sorted(grid.config.top_k)
    if ref_k not in ks or len(ks) < 2 or ref_k == ks[-1]:
        raise ValueError(f"ref_k must be one of the grid's k and smaller than its largest; grid k = {ks}, ref_k = {ref_k}.")
    rows = ranking[ranking.retriever == retriever].set_index("k")
    if rows.empty:
        raise ValueError(f"the ranking has no retriever {retriever!r}; run best_by_k on a grid that has it.")
    k_large = ks[-1]
    small, large = rows.loc[ref_k, "best"], rows.loc[k_large, "best"]
    out: dict[str, Any] = {"k_winner_small": small, "k_winner_large": large, "k_large": int(k_large)}
    if small == large:
        tied = [kk for kk in (ref_k, k_large) if "lead" in rows.columns and abs(float(rows.loc[kk, "lead"])) < 1e-9]
        if tied:  # "the same chunker ranks first" on a tie says nothing about which is first
            kk = tied[-1]
            r = rows.loc[kk]
            return {**out, "k_winner_changes": "cannot tell",
                    "k_winner_gap_ci": f"0 (at k={kk} {r['best']} ties with {r['runner_up']} at "
                                       f"{float(r['best_mean']):.1f}%: no first place to compare)"}
        return {**out, "k_winner_changes": "no", "k_winner_gap_ci": "0 (the same chunker ranks first)"}
    d, lo, hi = pair_difference(grid, small, large, metric, retriever, k_large, n_resamples, seed)
    d0, lo0, hi0 = pair_difference(grid, small, large, metric, retriever, ref_k, n_resamples, seed)
    changes = "yes" if (hi < 0 and lo0 > 0) else "cannot tell"
    return {**out, "k_winner_changes": changes, "k_winner_gap_ci": describe_interval(d, lo, hi)}


def k_winner_panel(
    grid: GridResult,
    ranking: pd.DataFrame,
    ref_k: int,
    entry: Any,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> Any:
    """The analysis plan's ``k-winner`` verdict under its primary retriever and each declared
    alternative (:mod:`chunkwise.evaluation.robustness`).

    Each specification names ``retriever``, ``metric`` and ``k_large`` (the larger k, one of the
    grid's). Its verdict is :func:`k_winner_result`'s ``k_winner_changes``; its estimate, at
    ``k_large``, the ``ref_k`` winner minus the chunker ranked first there (points, paired 95%
    interval; 0 when they are the same chunker). A specification whose retriever or k the grid
    does not have is reported as not run.

    Returns
    -------
    chunkwise.evaluation.robustness.Robustness

    Raises
    ------
    ValueError
        When the primary specification's retriever or k is not in the grid.
    """
    from chunkwise.evaluation.robustness import SpecResult, classify
    from chunkwise.plan import specifications

    results, not_run = [], []
    n = int(grid.scores(entry.primary["metric"]).shape[0])
    for name, spec in specifications(entry):
        k_large = int(spec["k_large"])
        if spec["retriever"] not in grid.config.retrievers or k_large not in grid.config.top_k \
                or k_large != max(grid.config.top_k):
            if name == "primary":
                raise ValueError(f"the grid lacks the primary specification of {entry.entry_id!r} ({spec}); its "
                                 f"retrievers are {grid.config.retrievers} and its k {sorted(grid.config.top_k)}")
            not_run.append(name)
            continue
        out = k_winner_result(grid, ranking, ref_k, spec["retriever"], spec["metric"], n_resamples, seed)
        small, large = out["k_winner_small"], out["k_winner_large"]
        if small == large:
            d = lo = hi = 0.0
        else:
            d, lo, hi = pair_difference(grid, small, large, spec["metric"], spec["retriever"], k_large,
                                        n_resamples, seed)
        results.append(SpecResult(name, float(d), float(lo), float(hi), out["k_winner_changes"], n, float("nan"),
                                  {}, out["k_winner_changes"]))
    return classify(results[0], results[1:], delta=entry.delta, unit=entry.unit, not_run=not_run)


def k_winner_sentence(outcomes: dict[str, dict[str, Any]], ref_k: int, k_large: int) -> str:
    """One sentence on whether the first chunker changes with k, per retriever.

    Parameters
    ----------
    outcomes : mapping retriever -> :func:`k_winner_result`
    ref_k, k_large : int
        The two k compared.

    Returns
    -------
    str
        Retrievers grouped by outcome: the same first (``"no"``), a different first with both
        leads beyond the noise (``"yes"``), a different first with a lead within it, or the same
        first tied with the runner-up (both ``"cannot tell"``, said apart).
    """
    names = {"dense": "dense search", "bm25": "BM25", "hybrid": "hybrid retrieval"}
    phrases = {
        "no": f"the chunker that ranks first at k = {ref_k} still ranks first at k = {k_large}",
        "yes": f"a different chunker ranks first at k = {k_large}, with both leads beyond the noise",
        "cannot tell": (f"a different chunker ranks first at k = {k_large}, but at least one of the two "
                        "leads is within the noise"),
        "tie": (f"the chunker that ranks first at k = {ref_k} shares first place with another at one of "
                "the two k, so the data cannot tell whether the winner changes"),
    }
    groups: dict[str, list[str]] = {}
    for retriever, o in outcomes.items():
        key = o["k_winner_changes"]
        if key == "cannot tell" and o["k_winner_small"] == o["k_winner_large"]:
            key = "tie"
        groups.setdefault(key, []).append(names.get(retriever, retriever))

    def join(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    return "With " + "; with ".join(f"{join(rs)}, {phrases[o]}" for o, rs in groups.items()) + "."


def noise_word(low: float, high: float) -> str:
    """``"beyond"`` when a paired interval excludes 0, else ``"within"`` (the noise)."""
    return interval_side(low, high, ("beyond", "beyond", "within"))


def short_label(label: str) -> str:
    """``"TokenText 250 overlap 125"`` -> ``"TokenText 250/125"`` (table rows that fit the page)."""
    return label.replace(" overlap ", "/")


def say(text: str, width: int = 100) -> None:
    """Print a sentence wrapped to the page width (a long output line would scroll sideways).

    Parameters
    ----------
    text : str
        Wrapped by :func:`textwrap.fill`: a newline or tab becomes a space and lines break
        between words.
    width : int, default 100
        Characters per printed line at most (a longer word is cut at the width).

    Raises
    ------
    ValueError
        If ``width`` is not positive.
    """
    import textwrap

    print(textwrap.fill(text, width))


def whole_numbers(df: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """A copy of ``df`` with token sizes and counts shown as integers (a missing value left blank).

    Parameters
    ----------
    df : pandas.DataFrame
        Left unchanged.
    *columns : str
        Columns to convert; a name that is not a column of ``df`` is skipped.

    Returns
    -------
    pandas.DataFrame
        Same shape and index; each named column becomes one of Python ints (values truncated
        toward zero, ``249.9`` -> ``249``), with ``""`` where the value was missing.

    Raises
    ------
    ValueError, TypeError
        If a value of a named column is neither missing nor a number.
    """
    out = df.copy()
    for c in columns:
        if c in out.columns:
            out[c] = ["" if pd.isna(v) else int(v) for v in out[c]]
    return out


def format_points(v: float, signed: bool = False) -> str:
    """A difference in points with two decimals, as the chapter's tables print it, never ``-0.00``.

    Parameters
    ----------
    v : float
        Percentage points.
    signed : bool, default False
        Print a ``+`` before a positive value too.

    Returns
    -------
    str
        ``f"{v:.2f}"`` (``1.234`` -> ``"1.23"``, ``-0.5`` -> ``"-0.50"``), or with ``signed``
        ``f"{v:+.2f}"`` (``"+1.23"``); a value that rounds to zero is written ``"0.00"``
        whatever its sign.

    Raises
    ------
    TypeError, ValueError
        If ``v`` is not a real number.
    """
    text = f"{v:+.2f}" if signed else f"{v:.2f}"
    return text.replace("-0.00", "0.00").replace("+0.00", "0.00")


def precision_omega_at(table: pd.DataFrame, chunker: str, size_tokens: int, overlap_tokens: int) -> float:
    """The mean precision_Ω of one fixed-size row of a results table (ours or the report's).

    Parameters
    ----------
    table : pandas.DataFrame
        A table like :func:`results_table`'s or :func:`load_report`'s, with the columns
        ``chunker`` (the family, e.g. ``"Recursive"``), ``size_tokens``, ``overlap_tokens`` and
        ``precision_omega_mean`` (percent).
    chunker : str
        The chunker family.
    size_tokens, overlap_tokens : int
        Chunk size and overlap in cl100k_base tokens.

    Returns
    -------
    float
        ``precision_omega_mean`` of the first row matching all three, in percent; NaN when no
        row matches.

    Raises
    ------
    AttributeError
        If ``table`` lacks one of the four columns.
    """
    row = table[(table.chunker == chunker) & (table.size_tokens == size_tokens)
                & (table.overlap_tokens == overlap_tokens)]
    return float(row.precision_omega_mean.iloc[0]) if len(row) else float("nan")


def chapter_answer(
    *,
    comparison: pd.DataFrame,
    same_setup: bool,
    placement: str,
    recall_tolerance: float,
    corpora_run: Sequence[str],
    all_five: bool,
    embedding_model: str,
    metric_mode: str,
    top_k: int,
    baseline: str,
    clear: pd.DataFrame,
    n_chunkers: int,
    n_questions: int,
    best: str | None = None,
    runner_up: str | None = None,
    top_here: tuple[float, float, float] | None = None,
    top_true: tuple[float, float, float] | None = None,
    k_sentence: str = "",
    untested: Sequence[str] = (),
    k_robustness: Any = None,
) -> str:
    """Chapter 2's answer, built from its tables.

    Parameters
    ----------
    comparison : DataFrame
        Ours beside the report (``recall_reported``, ``recall_delta``,
        ``precision_omega_reported``, ``precision_omega_delta``; points).
    same_setup : bool
        The run is the report's setup (all-MiniLM-L6-v2, chroma mode, k = 5, all five corpora),
        so its means are comparable with the report's.
    placement : {"report", "exact"}
    recall_tolerance : float
        Points (the findings page's tolerance for the recall rows).
    corpora_run, all_five, embedding_model, metric_mode, top_k
        What the run did, to say why it is not comparable when it is not.
    baseline : str
        The baseline chunker's label.
    clear : DataFrame
        The chunkers whose recall differs from the baseline's beyond the noise: ``chunker``,
        ``diff``, ``diff_low``, ``diff_high`` (points).
    n_chunkers, n_questions : int
    best, runner_up : str, optional
        The first two chunkers; ``top_here`` their paired difference at ``placement`` and
        ``top_true`` at the chunks' true offsets (points, with the interval).
    k_sentence : str
        :func:`k_winner_sentence` (with the plan's verdict, as the chapter glues it).
    untested : sequence of str
        What the run did not test.
    k_robustness : Robustness, optional
        :func:`k_winner_panel`'s result: the lead states the plan's k-winner verdict with its
        robustness class (:func:`chunkwise.answerbox.robustness_words`).

    Returns
    -------
    str
        Markdown (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (which
        chunker to use: the first one, or the first two when their paired difference is within
        the noise; how many chunkers fall behind ``baseline`` beyond the noise and by how much;
        the k-winner verdict with its robustness class when ``k_robustness`` is given), then the
        folded details: ours beside the report (or why the run is not comparable), every
        chunker that differs from the baseline beyond the noise with its interval, the first
        two's difference at both placements, ``k_sentence`` and what the run did not test.
    """
    from chunkwise.answerbox import answer_box
    from chunkwise.evaluation.stats import describe_interval, interval_side

    def interval(d: float, lo: float, hi: float) -> str:
        return describe_interval(d, lo, hi, decimals=2)

    where = "the report's placement" if placement == "report" else "the chunks' true offsets"
    if same_setup:
        rec_all = comparison.dropna(subset=["recall_reported"])
        pom_all = comparison.dropna(subset=["precision_omega_reported"])
        repro = (
            f"At {where}, our {{term}}`span recall` is within {recall_tolerance:g} points of the report's "
            f"all-MiniLM-L6-v2 value for {int((rec_all.recall_delta.abs() <= recall_tolerance).sum())} of "
            f"{len(rec_all)} chunkers (largest gap {rec_all.recall_delta.abs().max():.1f} points), and "
            "{term}`precision_Ω`, which no retriever can move, differs from it by "
            f"{pom_all.precision_omega_delta.min():+.1f} to {pom_all.precision_omega_delta.max():+.1f} points.")
    else:
        how = (f"scores {n_questions} questions on {len(corpora_run)} of the report's five corpora "
               f"({', '.join(corpora_run)})" if not all_five else
               f"runs {embedding_model}, metric mode {metric_mode!r} and top_k = {top_k}")
        repro = (f"This run {how}, so its means are {{term}}`not comparable here` with the report's "
                 "all-MiniLM-L6-v2 values; the chapter's default run makes that comparison.")
    noise = (
        f"Against {short_label(baseline)}, {len(clear)} of the {n_chunkers - 1} other chunkers differ in recall "
        f"beyond the noise of {n_questions} questions (95% {{term}}`paired bootstrap` interval excluding 0)"
        + (": " + "; ".join(f"{short_label(c)} {interval(d_, lo_, hi_)}" for c, d_, lo_, hi_ in
                            zip(clear.chunker, clear["diff"], clear.diff_low, clear.diff_high))
           if len(clear) else "") + ".")
    top = ""
    if runner_up is not None and top_here is not None:
        top = (f"At the top, {short_label(str(best))} leads {short_label(runner_up)} by {interval(*top_here)} at "
               f"{where}, {noise_word(*top_here[1:])} the noise")
        if top_true is not None:
            top += (f", and by {interval(*top_true)} at the chunks' true offsets, "
                    f"{noise_word(*top_true[1:])} it")
        top += "."
    limits = "This run does not test " + " or ".join(untested) + "." if untested else ""
    details = " ".join(s for s in (repro, noise, top, k_sentence, limits) if s)
    return answer_box(_lead(best, runner_up, top_here, top_true, baseline, clear, k_robustness), details)


def _lead(best: str | None, runner_up: str | None, top_here: tuple[float, float, float] | None,
          top_true: tuple[float, float, float] | None, baseline: str, clear: pd.DataFrame,
          k_robustness: Any) -> str:
    """:func:`chapter_answer`'s lead: labels capped at three words, counts and two numbers, so it
    stays under 60 words whatever the run gives."""
    from chunkwise.answerbox import capped, verdict_with_class

    first = capped(short_label(str(best)), 3, "the first chunker")
    second = capped(short_label(str(runner_up)), 3, "the second")
    base = capped(short_label(baseline), 3, "the baseline")
    gap = top_true if top_true is not None else top_here
    if best is None:
        action = "**This run ranks no chunker first**"
    elif runner_up is None or gap is None:
        action = f"**Use {first}, first by recall**"
    elif noise_word(*gap[1:]) == "within":
        action = f"**Use {first} or {second}**, the top two, within the noise of each other"
    elif gap[0] > 0:
        action = f"**Use {first}**, first by recall and ahead of {second} beyond the noise"
    else:
        action = f"**Use {second}**, ahead of {first} beyond the noise at the chunks' true offsets"
    behind = clear[clear["diff_high"] < 0]
    gaps = sorted(abs(float(d)) for d in behind["diff"])
    if not gaps:
        field = f"no chunker falls behind {base} beyond the noise"
    elif len(gaps) == 1:
        field = f"avoid the 1 chunker behind {base} beyond the noise, by {gaps[0]:.1f} points"
    else:
        field = (f"avoid the {len(gaps)} chunkers behind {base} beyond the noise, by {gaps[0]:.1f} to "
                 f"{gaps[-1]:.1f} points")
    lead = f"{action}; {field}."
    if k_robustness is not None:
        lead += f" Can the winner lose at larger k? {verdict_with_class(k_robustness.primary.verdict, k_robustness)}."
    return lead


def llm_chunker_result(
    diff: tuple[float, float, float] | None,
    llm_runs: pd.DataFrame | None,
    model: str,
    baseline: str = "Recursive 200",
) -> dict[str, Any]:
    """Chapter 2's findings keys for the LLM chunker against the recursive baseline.

    The test of the Chroma report's first table, where the LLM chunker (GPT-4o split points)
    has the highest recall (Smith & Troynikov, 2024), with this book's local model instead.

    Parameters
    ----------
    diff : (difference, low, high) or None
        LLM minus ``baseline`` recall in percentage points with its 95% paired-bootstrap
        interval (:func:`pair_difference`); None when the LLM chunker did not run.
    llm_runs : DataFrame or None
        :func:`chunkwise.experiments.strategies.llm_chunker_runs` of the same run (its ``"all"``
        row gives the chunk sizes and the model cost); None when it did not run.
    model : str
        The model that named the split points.
    baseline : str
        The baseline's label, for the text.

    Returns
    -------
    dict
        ``llm_vs_recursive``: ``"LLM ahead"`` when the interval lies above 0, ``"recursive
        ahead"`` when below, ``"cannot tell"`` when it includes 0, ``"not run"`` without a run;
        ``llm_vs_recursive_ci`` (``"+d [low, high]"`` points, ``"-"`` without a run),
        ``llm_mean_chunk_tokens`` (cl100k_base tokens, rounded), ``llm_requests`` (windows plus
        re-asks), ``llm_model`` and ``llm_baseline``.

    Raises
    ------
    ValueError
        If exactly one of ``diff`` and ``llm_runs`` is given, or ``llm_runs`` has no ``"all"`` row.
    """
    if (diff is None) != (llm_runs is None):
        raise ValueError("pass both diff and llm_runs (the LLM chunker ran) or neither (it did not).")
    out: dict[str, Any] = {"llm_model": model, "llm_baseline": baseline}
    if diff is None:
        return {**out, "llm_vs_recursive": "not run", "llm_vs_recursive_ci": "-",
                "llm_mean_chunk_tokens": "-", "llm_requests": "-"}
    if "all" not in llm_runs.index:
        raise ValueError("llm_runs has no 'all' row; pass llm_chunker_runs(...) of the run unchanged.")
    d, lo, hi = diff
    side = interval_side(lo, hi, ("LLM ahead", "recursive ahead", "cannot tell"))
    a = llm_runs.loc["all"]
    return {**out, "llm_vs_recursive": side, "llm_vs_recursive_ci": describe_interval(d, lo, hi),
            "llm_mean_chunk_tokens": int(round(float(a["mean_chunk_tokens"]))),
            "llm_requests": int(a["windows"]) + int(a["repairs"])}


def best_by_k(
    grid: GridResult,
    metric: str = "recall",
    retrievers: Sequence[str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Which chunker ranks first at each (retriever, k), and whether the noise allows naming it.

    Parameters
    ----------
    grid : GridResult
    metric : str
    retrievers : sequence of str, optional
        Default every retriever of the grid.
    n_resamples, seed : int

    Returns
    -------
    DataFrame
        One row per (retriever, k): ``best`` and ``runner_up`` (by observed mean), ``best_mean``
        (percent), ``lead`` = best minus runner-up with ``lead_low`` / ``lead_high`` (95% paired
        interval, percentage points), ``p_best`` (percent of resamples the best is best),
        ``winner`` (the best when ``p_best`` >= 90%, else empty) and ``in_play`` (chunkers not
        ruled out, comma-separated).

    Raises
    ------
    ValueError
        For a retriever the grid did not run.
    """
    cfg = grid.config
    rows = []
    labels = [s.label for s in cfg.chunkers]
    for retriever in retrievers or cfg.retrievers:
        for k in cfg.top_k:
            scores = grid.scores(metric)[_cells_at(grid, retriever, k)]
            scores.columns = labels
            boot = paired_bootstrap(scores, None, n_resamples=n_resamples, seed=seed, metric=metric)
            t = boot.table
            lead = (np.nan, np.nan, np.nan)
            if boot.runner_up is not None:
                lead = paired_difference_ci(scores[boot.best], scores[boot.runner_up], n_resamples=n_resamples, seed=seed)
            rows.append(
                {
                    "retriever": retriever,
                    "k": k,
                    "best": boot.best,
                    "best_mean": 100 * float(t.loc[boot.best, "mean"]),
                    "runner_up": boot.runner_up,
                    "lead": 100 * lead[0],
                    "lead_low": 100 * lead[1],
                    "lead_high": 100 * lead[2],
                    "p_best": 100 * float(t.loc[boot.best, "p_best"]),
                    "winner": boot.winner or "",
                    "in_play": ", ".join(boot.in_play),
                }
            )
    return pd.DataFrame(rows)


def by_k_table(grid: GridResult, metric: str = "recall", retriever: str = "dense") -> pd.DataFrame:
    """Mean ``metric`` (percent) of each chunker (rows) at each k (columns) for one retriever.

    Raises
    ------
    ValueError
        For a retriever the grid did not run.
    """
    if retriever not in grid.config.retrievers:
        raise ValueError(f"the grid did not run retriever {retriever!r}; it ran {grid.config.retrievers}.")
    t = grid.table[grid.table["retriever"] == retriever]
    out = t.pivot(index="chunker", columns="k", values=metric) * 100
    out = out.loc[[s.label for s in grid.config.chunkers]]
    out.columns = [f"k={k}" for k in out.columns]
    return out
