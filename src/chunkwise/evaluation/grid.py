"""The evaluation engine: chunker x retriever x top_k over documents and questions with reference spans.

One engine serves the Chroma protocol (chapter 2) and a reader's own documents (``chunkwise
evaluate``). Its input is a set of documents (name -> text), questions whose answers are known
*character spans* in those documents, a list of chunker specs, a list of retrievers and a list
of ``top_k`` values. Its output is one row per *cell* (chunker x retriever x k) with retrieval
quality and cost side by side, and the per-question scores that
:mod:`chunkwise.evaluation.stats` resamples to tell real differences from noise.

What is computed once
---------------------
- each chunking: once per (spec, document text), cached as spans on disk
  (:func:`chunkwise.chunkers.specs.chunk_corpus`, the cache chapter 2 fills);
- each chunking's embeddings: one ``embedder.embed`` call over all its chunks (a caching
  embedder computes only texts it has not seen), shared by the dense and hybrid retrievers;
- the questions' embeddings: one call for the whole grid;
- each retriever's ranking: once per chunking at the largest depth needed; every ``k`` is a
  prefix of it. A cell at ``k`` therefore sees exactly the first ``k`` chunks of the ranking at
  the largest ``k`` (for dense and BM25 this is what a search at ``k`` returns; the hybrid
  fusion is taken over each retriever's top ``max(hybrid_depth, max k)`` and then cut).

Protocol (as in Chroma's report): the chunks of *all* documents go into one index; a retrieved
chunk from another document than the question's counts as retrieved text that is not
relevant.

Metrics per cell (means over questions; :mod:`chunkwise.evaluation.spans`):
``recall``, ``precision``, ``iou`` and ``precision_omega`` in the chosen ``mode``, plus
``precision_omega_chroma`` and ``precision_omega_union``; ``hit_rate`` (share of questions
with at least one reference character retrieved), ``mrr`` (mean of ``1 / rank`` of the
first retrieved chunk that shares a character with a reference, 0 when none in the top k),
``ndcg`` and ``map`` (NDCG@k and mean average precision@k, a chunk relevant when it shares a
character with a reference; :mod:`chunkwise.evaluation.cells` defines every metric).

Cost per cell: ``n_chunks``, ``mean_chunk_tokens``, ``embedded_tokens`` (cl100k_base tokens of
all chunks the dense index embeds; 0 for BM25), ``index_seconds`` (chunking + embedding or
BM25 indexing, as measured in this run: near 0 when caches were warm), ``retrieved_tokens``
(mean cl100k_base tokens of the retrieved chunks per question) and ``query_ms`` (milliseconds
per question to retrieve: the median time to embed one question alone with the uncached model,
measured on up to 8 questions, plus the mean search time per question).
LLM costs: ``llm_calls`` (Contextual: one per chunk, cached or not; LLM chunker: the calls made
in this run; it has no span cache, so every run replays its calls from the LLM cache),
``llm_cache_hits``, ``llm_seconds``, ``llm_prompt_tokens`` and ``llm_completion_tokens`` (model
seconds and tokens of the original requests, replayed from the LLM cache, so a warm run still
reports the cold model cost).

Strategies beyond plain chunking:

- ``Hierarchical:child:parent[:merge_threshold]``: the children are indexed (``n_chunks``,
  ``embedded_tokens`` and precision_Ω are the children's); for each question and ``k`` the top
  ``k`` children go through :func:`chunkwise.chunkers.merge_to_parents`, and the merged list
  (parents replacing enough of their children) is what recall, precision, IoU, MRR and
  ``retrieved_tokens`` score;
- ``Contextual:size``: each chunk is embedded and BM25-indexed as its context + the chunk
  (:func:`chunkwise.chunkers.index_text`; ``embedded_tokens`` counts that text); the scored span
  is the chunk;
- ``Late:size``: the recursive chunks of ``size`` tokens, each vector from
  :class:`chunkwise.chunkers.LateChunkingEmbedder` (``late_embedder``) instead of the embedder.

Interrupted runs resume: chunk spans, embeddings and BM25 indexes are cached by content.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from chunkwise.evaluation.anyof import expand_readings, relevant_targets
from chunkwise.evaluation.cells import METRICS, PUBLIC_METRICS, CellInputs, aggregate_cell, score_cell
from chunkwise.evaluation.cells import metric as _metric
from chunkwise.evaluation.spans import place_spans, score_questions
from chunkwise.evaluation.stats import BootstrapResult, paired_bootstrap
from chunkwise.chunkers.contextual import index_text
from chunkwise.chunkers.hierarchical import merge_to_parents
from chunkwise.chunkers.specs import ChunkerSpec, chunk_corpus, chunk_hierarchy, parse_spec, span_cache_dir
from chunkwise._validation import Interval, check_param
from chunkwise.retrieval.registry import RankInputs, Ranking, RetrieverKind, retriever_kind, retriever_names
from chunkwise.tokens import get_encoding

if TYPE_CHECKING:
    from chunkwise.llm.protocol import ChatModel

__all__ = [
    "DEFAULT_GRID",
    "METRICS",
    "RETRIEVERS",
    "GridConfig",
    "GridResult",
    "AxisEmbedder",
    "check_inputs",
    "chunkings_of",
    "embedder_axis",
    "run_grid",
    "run_kinds",
]

#: The built-in retrievers (:mod:`chunkwise.retrieval.registry` holds them, with any a user
#: registers: :func:`~chunkwise.retrieval.registry.retriever_names`).
RETRIEVERS: tuple[str, ...] = ("dense", "bm25", "hybrid")

#: Vector indexes of the dense retriever: exact cosine search, or chromadb's HNSW graph.
INDEXES: tuple[str, ...] = ("exact", "hnsw")

# METRICS (the per-question metric columns, fractions in [0, 1]) come from the cell scorer,
# chunkwise.evaluation.cells, where each metric's name and definition live.

def _retriever_order(names: Sequence[str], kinds: Mapping[str, RetrieverKind] | None = None,
                     ) -> tuple[list[str], dict[str, list[str]]]:
    """Retrievers to rank, each after those it fuses, and each one's closure (itself and
    everything it fuses, transitively: whose index and query time it includes). ``kinds``: the
    kinds of this run by name (default: the registry's)."""
    order: list[str] = []
    closure: dict[str, list[str]] = {}

    def visit(name: str) -> list[str]:
        if name in closure:
            return closure[name]
        kind = kinds[name] if kinds is not None and name in kinds else retriever_kind(name)
        members = [name]
        for u in kind.uses:
            members += [m for m in visit(u) if m not in members]
        closure[name] = members
        order.append(name)
        return members

    for n in names:
        visit(n)
    return order, closure


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------


def _as_spec(item: Any) -> ChunkerSpec:
    if isinstance(item, ChunkerSpec):
        return item
    if isinstance(item, str):
        return parse_spec(item.strip())
    if isinstance(item, Mapping):
        from chunkwise.chunkers.registry import chunker_kind

        if "chunker" not in item:
            raise ValueError(f"chunker {dict(item)!r}: name the kind, e.g. chunker = 'Recursive', size = 200.")
        text = str(item["chunker"])
        kind = chunker_kind(text)
        unknown = set(item) - {"chunker", "kwargs", *kind.table_fields}
        if unknown:
            raise ValueError(
                f"chunker {dict(item)!r}: {text} takes the keys chunker, {', '.join(kind.table_fields)}"
                + (" and kwargs" if kind.plugin else "") + f", not {', '.join(sorted(unknown))}."
            )
        if "kwargs" in item:
            import dataclasses

            kwargs = item["kwargs"]
            if not isinstance(kwargs, Mapping):
                raise ValueError(f"chunker {dict(item)!r}: kwargs must be a table of keyword arguments.")
            if not kind.plugin:
                raise ValueError(f"chunker {text!r}: kwargs are for your own chunkers ('package.module:ClassName'), "
                                 "built-in kinds take their settings in the spec.")
            spec = parse_spec(text)
            return dataclasses.replace(spec, options=tuple(sorted((str(k), v) for k, v in kwargs.items())))
        # the kind's table keys, in order, become the spec's fields; an overlap of 0 is no overlap
        values = [(key, item.get(key)) for key in kind.table_fields]
        given = [(key, v) for key, v in values if v is not None and not (key == "overlap" and not v)]
        fields = [v for _, v in values[:len(given)]]
        if any(v is None or (key == "overlap" and not v) for key, v in values[:len(given)]):
            missing = next(key for key, v in values if v is None)
            raise ValueError(f"chunker {dict(item)!r} has {given[-1][0]} but no {missing}.")
        return parse_spec(":".join([text, *(str(v) for v in fields)]))
    raise ValueError(f"chunker {item!r} must be a spec string such as 'Recursive:200' or a table.")


def _check_top_k(values: Any) -> tuple[int, ...]:
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        values = [values]
    try:
        items = list(values)
    except TypeError:
        raise ValueError(f"top_k must be a list of ints >= 1, got {values!r}.") from None
    if not items:
        raise ValueError("top_k is empty; give at least one k >= 1, e.g. [1, 3, 5, 10].")
    out = []
    for k in items:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"top_k values must be ints >= 1, got {k!r}; k is the number of chunks retrieved.")
        out.append(int(k))
    return tuple(sorted(set(out)))


@dataclass(frozen=True)
class GridConfig:
    """The grid to run.

    Parameters
    ----------
    chunkers : sequence of ChunkerSpec, spec strings or tables
        Spec strings as :func:`chunkwise.chunkers.specs.parse_spec` reads them:
        ``"TokenText:200"``, ``"Recursive:400:100"`` (size and overlap in cl100k_base tokens),
        ``"Kamradt"`` (semantic chunker, LangChain defaults), ``"KamradtMod:300"``,
        ``"Cluster:200"``, ``"Sentence:200"``, ``"Structure:400"``, ``"LLM"``,
        ``"Semantic:percentile:80:0:150"`` (LangChain's semantic chunker with explicit settings),
        ``"Hierarchical:100:400:0.5"`` (children of 100 tokens indexed, their parent of up to 400
        returned when half of its children are retrieved), ``"Contextual:200"`` (needs ``llm``)
        and ``"Late:200"`` (late-chunking vectors). A TOML table ``{chunker, ...}`` with the
        kind's ``table_fields`` also works (``size``, ``overlap``; Hierarchical ``size``,
        ``parent_size``, ``merge_threshold``; Semantic ``breakpoint_threshold_type``,
        ``breakpoint_threshold_amount``, ``buffer_size``, ``min_chunk_size``); a key the kind
        does not take is an error.
    retrievers : sequence of str
        Registered retrievers that can rank a grid (``"dense"``, ``"bm25"``, ``"hybrid"``, and any a
        user adds); build-only kinds (``"none"``, ``"hybrid_rerank"``) are refused.
    top_k : sequence of int >= 1
    mode : {"chroma", "union"}, default "chroma"
        Definition of recall / precision / IoU / precision_Ω (chapter 2 uses "chroma").
    language : {"en", "zh"}, default "en"
        The documents' language; chooses the BM25 tokenizer (:mod:`chunkwise.retrieval.lexical`).
    bm25_tokenizer : str or None
        ``"stem"`` (default) or ``"words"`` for English, ``"jieba"`` (default) or ``"char"`` for
        Chinese.
    placement : {"exact", "report"}, default "exact"
        Where a chunk's text sits in its document: ``"exact"`` uses the chunker's own spans;
        ``"report"`` re-places each chunk's text the way Chroma's evaluation code does (one
        trailing ``.`` dropped, first occurrence; :func:`chunkwise.evaluation.spans.place_spans`).
    index : {"exact", "hnsw"}, default "exact"
        The dense retriever's vector index: exact cosine search, or an HNSW graph through
        ``chromadb`` (the setup of Chroma's report: one collection, l2 space,
        ``hnsw:search_ef`` 50; :func:`chunkwise.retrieval.hnsw_search`, optional ``chroma``
        extra). Used by the dense and hybrid retrievers.
    hybrid_depth : int, default 50
        Hits taken from each of BM25 and dense before reciprocal rank fusion (at least the
        largest k).
    rrf_c : float, default 60
        The RRF constant (Cormack et al., 2009); weights are 0.5 / 0.5.
    embedders : sequence of str, default ()
        The embedder axis: model names (``"all-MiniLM-L6-v2"``, ``"all-mpnet-base-v2"``,
        ``"multilingual-e5-small"``; :func:`chunkwise.embeddings.make_embedder`). Empty: one
        embedder, given to :func:`run_grid` (or the run setting ``embedder``). With two or more,
        every retriever that reads vectors has a cell per embedder, named
        ``"chunker | embedder | retriever | k=5"``.

    Raises
    ------
    ValueError
        For an empty or invalid chunker list, an unknown retriever, a k < 1, or an unknown
        mode / language / tokenizer.
    """

    chunkers: tuple[ChunkerSpec, ...]
    retrievers: tuple[str, ...] = RETRIEVERS
    top_k: tuple[int, ...] = (1, 3, 5, 10)
    mode: str = "chroma"
    language: str = "en"
    bm25_tokenizer: str | None = None
    placement: str = "exact"
    index: str = "exact"
    hybrid_depth: int = 50
    rrf_c: float = 60.0
    embedders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        items = [self.chunkers] if isinstance(self.chunkers, (str, ChunkerSpec)) else list(self.chunkers)
        if not items:
            raise ValueError("the grid has no chunker; list at least one spec, e.g. 'Recursive:200'.")
        specs = tuple(_as_spec(c) for c in items)
        if len({s.key() for s in specs}) != len(specs):
            raise ValueError(f"the grid lists a chunker twice: {[s.label for s in specs]}.")
        object.__setattr__(self, "chunkers", specs)
        rets = [self.retrievers] if isinstance(self.retrievers, str) else list(self.retrievers)
        known = retriever_names(ranks=True)
        bad = [r for r in rets if r not in known]
        if bad or not rets:
            builds_only = [r for r in bad if r in retriever_names(ranks=False)]
            why = (f" ({', '.join(builds_only)} only builds a per-question retriever, for CRUD-RAG's harness)"
                   if builds_only else "")
            raise ValueError(f"unknown retriever(s) {bad or rets}{why}; a grid ranks with {', '.join(known)}.")
        object.__setattr__(self, "retrievers", tuple(dict.fromkeys(rets)))
        object.__setattr__(self, "top_k", _check_top_k(self.top_k))
        if self.mode not in ("chroma", "union"):
            raise ValueError(f"mode must be 'chroma' or 'union', got {self.mode!r}.")
        from chunkwise.retrieval import LANGUAGES

        if self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {sorted(LANGUAGES)}, got {self.language!r}.")
        if self.bm25_tokenizer is not None and self.bm25_tokenizer not in LANGUAGES[self.language]:
            raise ValueError(
                f"bm25_tokenizer for language {self.language!r} must be one of {list(LANGUAGES[self.language])}, "
                f"got {self.bm25_tokenizer!r}."
            )
        if self.placement not in ("exact", "report"):
            raise ValueError(f"placement must be 'exact' or 'report', got {self.placement!r}.")
        if self.index not in INDEXES:
            raise ValueError(f"unknown index {self.index!r}; use one of {INDEXES!r}.")
        object.__setattr__(self, "hybrid_depth", check_param("hybrid_depth", self.hybrid_depth, [Interval(int, 1, None)]))
        check_param("rrf_c", self.rrf_c, [Interval(float, 0, None)])
        embs = [self.embedders] if isinstance(self.embedders, str) else list(self.embedders or ())
        if any(not isinstance(e, str) or not e.strip() or "|" in e for e in embs):
            raise ValueError(f"embedders must be a list of model names such as ['all-MiniLM-L6-v2', "
                             f"'all-mpnet-base-v2'] (no '|'), got {self.embedders!r}.")
        from chunkwise.embeddings import embedder_identity

        seen: dict[str, str] = {}
        for e in embs:
            model = embedder_identity(e)
            if model in seen:
                same = "twice" if seen[model].strip() == e.strip() else f"twice ({seen[model]!r} and {e!r} name one model)"
                raise ValueError(f"the grid lists the embedder {model} {same}; keep one of them.")
            seen[model] = e
        object.__setattr__(self, "embedders", tuple(e.strip() for e in embs))

    @property
    def tokenizer(self) -> str:
        """The BM25 tokenizer in use."""
        from chunkwise.retrieval import LANGUAGES

        return self.bm25_tokenizer or LANGUAGES[self.language][0]

    @property
    def n_cells(self) -> int:
        """Cells of the grid: a retriever that reads vectors has one per embedder, the others one."""
        n_emb = max(1, len(self.embedders))
        _, closure = _retriever_order(self.retrievers)
        per_k = sum(
            n_emb if any(retriever_kind(u).needs_embedder for u in closure[r]) else 1 for r in self.retrievers
        )
        return len(self.chunkers) * per_k * len(self.top_k)

    @property
    def search_depth(self) -> int:
        """How many chunks each ranking holds (fewer when a retriever returns fewer): the
        largest k, or ``hybrid_depth`` when it is larger and a fused retriever runs."""
        order, _ = _retriever_order(self.retrievers)
        max_k = max(self.top_k)
        return max(self.hybrid_depth, max_k) if any(retriever_kind(r).uses for r in order) else max_k

    @property
    def cell_names(self) -> list[str]:
        """The names of the grid's cells in the order :func:`run_grid` writes them (chunker, then
        embedder, then retriever, then k), known before anything runs."""
        order, closure = _retriever_order(self.retrievers)
        reads = {r: any(retriever_kind(u).needs_embedder for u in closure[r]) for r in self.retrievers}
        multi = len(self.embedders) > 1
        names = []
        for spec in self.chunkers:
            for i, emb in enumerate(self.embedders if multi else [None]):
                for retriever in self.retrievers:
                    if multi and not reads[retriever] and i > 0:
                        continue
                    label = (emb if reads[retriever] else "-") if multi else None
                    names += [cell_name(spec, retriever, k, label) for k in self.top_k]
        return names

    def describe(self) -> str:
        """One line: which grid this is."""
        embs = (f"{len(self.embedders)} embedders ({', '.join(self.embedders)}) x "
                if len(self.embedders) > 1 else "")
        return (
            f"{len(self.chunkers)} chunkers ({', '.join(s.label for s in self.chunkers)}) x {embs}"
            f"{len(self.retrievers)} retrievers ({', '.join(self.retrievers)}) x k in "
            f"{{{', '.join(map(str, self.top_k))}}} = {self.n_cells} cells; {self.mode} span metrics"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunkers": [
                {"chunker": s.chunker, "kwargs": dict(s.options)} if s.options and s.kind.plugin else _spec_string(s)
                for s in self.chunkers
            ],
            "retrievers": list(self.retrievers),
            "top_k": list(self.top_k),
            "mode": self.mode,
            "language": self.language,
            "bm25_tokenizer": self.tokenizer,
            "placement": self.placement,
            "index": self.index,
            "hybrid_depth": self.hybrid_depth,
            "rrf_c": self.rrf_c,
            **({"embedders": list(self.embedders)} if self.embedders else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base: GridConfig | None = None) -> GridConfig:
        """A grid from a mapping (e.g. parsed TOML); missing keys come from ``base``.

        Keys: ``chunkers``, ``retrievers``, ``top_k``, ``mode``, ``language``,
        ``bm25_tokenizer``, ``placement``, ``index``, ``hybrid_depth``, ``rrf_c``, ``embedders``. Other keys are
        refused, except the run settings read by :func:`run_settings` (``embedder``, ``metric``,
        ``baseline``, ``n_resamples``, ``seed``). ``embedders = [...]`` (the embedder axis) and the
        single ``embedder = "..."`` are alternatives: giving both is an error.
        """
        known = {
            "chunkers", "retrievers", "top_k", "mode", "language", "bm25_tokenizer", "placement", "index", "hybrid_depth",
            "rrf_c", "embedders",
        }
        if "embedders" in data and "embedder" in data:
            raise ValueError("give either embedders = [...] (the embedder axis) or embedder = '...' (one), not both.")
        if "embedders" in data and not data["embedders"]:
            raise ValueError("embedders = [] lists no embedder: name at least one (embedders = ['all-MiniLM-L6-v2']), "
                             "or drop the key to use the run's embedder.")
        run_keys = set(RUN_SETTINGS)
        unknown = set(data) - known - run_keys
        if unknown:
            raise ValueError(
                f"unknown grid setting(s) {sorted(unknown)}; use {', '.join(sorted(known | run_keys))}."
            )
        base = base or DEFAULT_GRID
        kwargs = {k: data[k] for k in known if k in data}
        merged = {**{k: getattr(base, k) for k in known}, **kwargs}
        if "bm25_tokenizer" not in data and "language" in data:
            merged["bm25_tokenizer"] = None
        return cls(**merged)

    @classmethod
    def from_toml(cls, path: str | Path) -> tuple[GridConfig, dict[str, Any]]:
        """Read a grid (and the run settings) from a TOML file.

        Returns
        -------
        (GridConfig, dict)
            The grid, and :func:`run_settings` of the file.

        Raises
        ------
        ValueError
            For a missing file, invalid TOML, or an invalid setting.
        """
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"grid config {str(path)!r} does not exist.")
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"grid config {p.name} is not valid TOML: {exc}.") from exc
        data = data.get("grid", data)
        return cls.from_dict(data), run_settings(data)


#: Run settings a grid TOML may hold besides the grid (defaults used by ``chunkwise evaluate``).
RUN_SETTINGS: dict[str, Any] = {
    "embedder": "all-MiniLM-L6-v2",
    "metric": "recall",
    "baseline": None,
    "n_resamples": 10_000,
    "seed": 0,
}


def run_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """The run settings of a config mapping, defaults filled in (:data:`RUN_SETTINGS`)."""
    out = dict(RUN_SETTINGS)
    out.update({k: data[k] for k in RUN_SETTINGS if k in data})
    if out["metric"] not in METRICS_PUBLIC:
        raise ValueError(f"metric must be one of {', '.join(METRICS_PUBLIC)}, got {out['metric']!r}.")
    return out


#: Metrics a verdict can be about (table column names; :data:`chunkwise.evaluation.cells.PUBLIC_METRICS`).
METRICS_PUBLIC: tuple[str, ...] = PUBLIC_METRICS


def _spec_string(spec: ChunkerSpec) -> str:
    return spec.spec_string()


#: The default grid of ``chunkwise evaluate``: fixed-size and recursive chunks of 100, 200 and
#: 400 cl100k_base tokens without overlap, the semantic chunker with LangChain's defaults; dense,
#: BM25 and hybrid retrieval; k = 1, 3, 5, 10 (84 cells).
DEFAULT_GRID = GridConfig(
    chunkers=(
        ChunkerSpec("TokenText", 100),
        ChunkerSpec("TokenText", 200),
        ChunkerSpec("TokenText", 400),
        ChunkerSpec("Recursive", 100),
        ChunkerSpec("Recursive", 200),
        ChunkerSpec("Recursive", 400),
        ChunkerSpec("Kamradt"),
    ),
)


# --------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------


def cell_name(spec: ChunkerSpec, retriever: str, k: int, embedder: str | None = None) -> str:
    """``"Recursive 200 | dense | k=5"``; in a grid of several embedders
    ``"Recursive 200 | all-mpnet-base-v2 | dense | k=5"`` (``-`` for a retriever that reads no vectors)."""
    if embedder is None:
        return f"{spec.label} | {retriever} | k={k}"
    return f"{spec.label} | {embedder} | {retriever} | k={k}"


def ranking_key(retriever: str, embedder: str | None = None) -> str:
    """Key of a ranking in :attr:`GridResult.rankings` (the retriever, with the embedder in a
    grid of several)."""
    return retriever if embedder is None else f"{embedder} | {retriever}"


@dataclass
class GridResult:
    """Everything :func:`run_grid` measured.

    Attributes
    ----------
    config : GridConfig
    table : DataFrame
        One row per cell in grid order (chunker, then retriever, then k): ``cell``,
        ``chunker``, ``retriever``, ``k``, ``n_questions``, the metric means (fractions) and
        the cost columns (see the module docstring).
    per_question : DataFrame
        One row per (cell, question): ``cell``, ``question_id``, ``corpus`` and every metric
        of :data:`METRICS` plus ``retrieved_tokens``.
    chunks : dict
        Spec label -> document -> list of (start, end) chunk spans (where they are scored, i.e.
        after the ``placement`` rule).
    questions : DataFrame
        The questions scored.
    embedder : str
        Name of the chunk embedder.
    seconds : float
        Wall time of the run.
    n_embedded : int or None
        Texts sent to the embedding model during the run (None when the embedder does not
        count); 0 on a fully warm cache.
    chunk_objects : dict
        Spec label -> document -> list of :class:`~chunkwise.chunk.Chunk` as the chunker cut
        them (true offsets, whatever the placement), so a caller can score the same retrieval
        under another placement.
    rankings : dict
        Spec label -> ranking key -> one list per question of retrieved item positions, best
        first, at the depth the run searched (at least the largest k). Positions index the
        chunks of ``chunk_objects[label]`` taken document by document, in order. The key is
        the retriever, or ``"<embedder> | <retriever>"`` in a grid of several embedders
        (``"- | bm25"`` for a retriever that reads no vectors); :meth:`ranking_key_of` and
        :meth:`ranking_of` find it.
    embedders : dict
        Embedder label -> the passage embedder whose vectors a retriever read (the truncation
        diagnostic's embedders); empty when no retriever of the grid reads vectors (BM25 alone).

    The report folder of a result (tables, figures, HTML pages) is written by
    :func:`chunkwise.figures.write_report`: the presentation layer reads a result, the engine
    draws nothing.
    """

    config: GridConfig
    table: pd.DataFrame
    per_question: pd.DataFrame
    chunks: dict[str, dict[str, list[tuple[int, int]]]] = field(repr=False)
    questions: pd.DataFrame = field(repr=False)
    embedder: str = ""
    seconds: float = 0.0
    n_embedded: int | None = None
    chunk_objects: dict[str, dict[str, list[Any]]] = field(repr=False, default_factory=dict)
    rankings: dict[str, dict[str, list[list[int]]]] = field(repr=False, default_factory=dict)
    embedders: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def cells(self) -> list[str]:
        return list(self.table["cell"])

    def ranking_key_of(self, retriever: str, embedder: str | None = None) -> str:
        """The key of :attr:`rankings` for ``retriever`` (and ``embedder`` in a grid of several).

        Raises
        ------
        ValueError
            If the grid did not run ``retriever``, or ran several embedders and ``embedder`` is
            None or not one of them (a retriever that reads no vectors, such as BM25, needs none).
        """
        if len(self.config.embedders) <= 1:
            return ranking_key(retriever)
        ran = list(dict.fromkeys(self.table.loc[self.table["retriever"] == retriever, "embedder"].astype(str)))
        if not ran:
            raise ValueError(f"the grid did not run retriever {retriever!r}; it ran {list(self.config.retrievers)}.")
        if ran == ["-"]:
            return ranking_key(retriever, "-")
        if embedder is None or embedder not in ran:
            raise ValueError(f"the grid ran {retriever!r} with several embedders ({', '.join(ran)}); name one "
                             f"of them{'' if embedder is None else f' (not {embedder!r})'}.")
        return ranking_key(retriever, embedder)

    def ranking_of(self, cell: str) -> tuple[str, list[list[int]]]:
        """The chunker label and per-question ranking (item positions, best first) behind ``cell``.

        Raises
        ------
        ValueError
            If ``cell`` is not a cell of the table.
        """
        rows = self.table[self.table["cell"] == cell]
        if rows.empty:
            raise ValueError(f"cell {cell!r} is not in the result.")
        row = rows.iloc[0]
        label = str(row["chunker"])
        embedder = str(row["embedder"]) if "embedder" in rows.columns else None
        return label, self.rankings[label][self.ranking_key_of(str(row["retriever"]), embedder)]

    def scores(self, metric: str = "recall") -> pd.DataFrame:
        """Per-question scores of ``metric``: rows = questions, columns = cells (grid order).

        ``metric`` is a per-question column (:data:`METRICS`); ``hit_rate`` and ``mrr`` are
        read as ``hit`` and ``rr``.
        """
        col = _metric(metric).name
        if col not in self.per_question.columns:
            raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS_PUBLIC)}.")
        wide = self.per_question.pivot(index="question_id", columns="cell", values=col)
        order = list(dict.fromkeys(self.per_question["question_id"]))
        return wide.loc[order, self.cells]

    def bootstrap(
        self,
        metric: str = "recall",
        baseline: str | None = None,
        cost: str | None = "retrieved_tokens",
        **kwargs: Any,
    ) -> BootstrapResult:
        """Paired bootstrap of ``metric`` over the questions (:func:`~chunkwise.evaluation.stats.paired_bootstrap`).

        Parameters
        ----------
        metric : str, default "recall"
        baseline : str, optional
            A cell name; default the first cell.
        cost : str or None, default "retrieved_tokens"
            Table column used as each cell's cost in the verdict.
        **kwargs
            Passed on (``n_resamples``, ``seed``, ``confidence``, ``winner_threshold``).
        """
        if baseline is not None and baseline not in self.cells:
            close = [c for c in self.cells if baseline.lower() in c.lower()][:3]
            raise ValueError(f"baseline {baseline!r} is not a cell of the grid{'; did you mean ' + ', '.join(close) if close else ''}.")
        costs = None
        if cost is not None:
            if cost not in self.table.columns:
                raise ValueError(f"cost {cost!r} is not a column of the table.")
            costs = dict(zip(self.table["cell"], self.table[cost]))
        return paired_bootstrap(
            self.scores(metric),
            baseline,
            cost=costs,
            metric=metric,
            cost_name=(cost or "cost").replace("_", " "),
            **kwargs,
        )

    @property
    def groups(self) -> dict[str, list[str]]:
        """Question groups from the questions' ``tags``: tag -> question ids (in question order);
        empty when no question has a tag. A question with several tags is in each group."""
        if "tags" not in self.questions.columns:
            return {}
        out: dict[str, list[str]] = {}
        for qid, tags in zip(self.questions["question_id"].astype(str), self.questions["tags"]):
            for t in tags if isinstance(tags, (list, tuple)) else []:
                out.setdefault(str(t), []).append(qid)
        return out

    def group_table(
        self,
        metric: str = "recall",
        baseline: str | None = None,
        n_resamples: int = 10_000,
        seed: int = 0,
        confidence: float = 0.95,
    ) -> pd.DataFrame:
        """Each cell's ``metric`` within each question group, with paired intervals against the baseline.

        A group is a tag of the questions file (:attr:`groups`); ``"all"`` (every question)
        comes first. Within a group the bootstrap resamples only its questions
        (:func:`~chunkwise.evaluation.stats.paired_bootstrap`, same seed for every group), so a
        group's interval is as wide as its question count makes it: a difference between cells
        is a finding in that group only when its interval excludes 0.

        Parameters
        ----------
        metric : str, default "recall"
            A per-question metric (:data:`METRICS`).
        baseline : str, optional
            The cell differences are taken against; default the first cell.
        n_resamples, seed, confidence
            Of the bootstrap.

        Returns
        -------
        DataFrame
            One row per (group, cell): ``group``, ``n_questions``, ``cell``, ``mean``,
            ``mean_low``, ``mean_high``, ``diff``, ``diff_low``, ``diff_high`` (against
            ``baseline``; fractions), ``p_best`` and ``best`` (the group's best cell by mean).
            A group of one question has its mean and NaN intervals.

        Raises
        ------
        ValueError
            If no question has a tag, or for an unknown metric or baseline.
        """
        groups = self.groups
        if not groups:
            raise ValueError("no question has tags: add a tags field to the questions file (e.g. "
                             '"tags": ["billing"]) to get per-group tables.')
        if baseline is not None and baseline not in self.cells:
            raise ValueError(f"baseline {baseline!r} is not a cell of the grid.")
        wide = self.scores(metric)
        wide.index = wide.index.astype(str)
        rows = []
        for group, ids in {"all": list(wide.index), **groups}.items():
            part = wide.loc[ids]
            means = part.mean(axis=0)
            best = str(means.idxmax())
            if len(ids) >= 2:
                boot = paired_bootstrap(part, baseline, metric=metric, n_resamples=n_resamples, seed=seed,
                                        confidence=confidence)
                t = boot.table
            else:
                t = pd.DataFrame(index=part.columns, columns=["mean_low", "mean_high", "diff", "diff_low", "diff_high",
                                                              "p_best"], dtype=float)
                base = baseline or part.columns[0]
                t["diff"] = part.iloc[0] - part.iloc[0][base]
            for cell in part.columns:
                rows.append({"group": group, "n_questions": len(ids), "cell": cell, "mean": float(means[cell]),
                             **{c: float(t.loc[cell, c]) for c in ("mean_low", "mean_high", "diff", "diff_low",
                                                                    "diff_high", "p_best")},
                             "best": cell == best})
        return pd.DataFrame(rows)

    def with_scores(
        self, per_question: pd.DataFrame, chunks: dict[str, dict[str, list[tuple[int, int]]]] | None = None, **config: Any
    ) -> GridResult:
        """A copy with new per-question scores and the table's metric means recomputed from them.

        For scoring the same retrieval another way (chapter 2's
        :func:`chunkwise.experiments.chroma.rescore` scores it under another placement): the
        rankings, chunk objects, questions and the table's cost columns are kept.

        Parameters
        ----------
        per_question : DataFrame
            The rows of :attr:`per_question` (same ``cell`` and ``question_id``, same order,
            one per (cell, question)) with new values in the metric columns (:data:`METRICS`,
            fractions in [0, 1]).
        chunks : dict, optional
            Spec label -> document -> list of (start, end): where the chunks are now scored
            (default: kept).
        **config
            The :class:`GridConfig` fields the new scores follow, e.g. ``placement="exact"`` or
            ``mode="union"``.

        Returns
        -------
        GridResult
            ``table`` with ``recall``, ``precision``, ``iou``, ``precision_omega*`` (NaN-skipping),
            ``hit_rate`` and ``mrr`` the means of the new per-question columns of each cell.

        Raises
        ------
        ValueError
            If ``per_question`` does not have the grid's rows in order or lacks a metric column,
            or for a field or value :class:`GridConfig` refuses.
        """
        old = self.per_question
        same_rows = len(per_question) == len(old) and all(
            c in per_question.columns and (per_question[c].to_numpy() == old[c].to_numpy()).all()
            for c in ("cell", "question_id")
        )
        if not same_rows:
            raise ValueError("per_question must hold the grid's rows (cell, question_id) in the same order; "
                             "change only the metric values.")
        aggregate_cell(per_question.iloc[:1])  # every metric column present, else ValueError (one row: no empty mean)
        unknown = sorted(set(config) - set(GridConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(f"{unknown} are not GridConfig fields; use {sorted(GridConfig.__dataclass_fields__)}.")
        table = self.table.copy()
        by_cell = per_question.groupby("cell", sort=False)
        for i, cell in zip(table.index, table["cell"]):
            for col, value in aggregate_cell(by_cell.get_group(cell)).items():
                table.at[i, col] = value
        return replace(
            self,
            config=replace(self.config, **config),
            table=table,
            per_question=per_question.reset_index(drop=True),
            chunks=self.chunks if chunks is None else chunks,
        )

    def per_question_table(self) -> pd.DataFrame:
        """:attr:`per_question` with each question's text (``question``, after ``question_id``),
        as ``per_question.csv`` holds it: ``chunkwise check`` pairs a baseline's questions with a
        new run's by their text when automatic ids shift."""
        text = dict(zip(self.questions["question_id"].astype(str), self.questions["question"].astype(str)))
        out = self.per_question.copy()
        out.insert(int(out.columns.get_loc("question_id")) + 1, "question", out["question_id"].astype(str).map(text))
        return out

    def to_dict(self, boot: BootstrapResult | None = None) -> dict[str, Any]:
        """JSON-ready report: config, cells, run facts and (optionally) the bootstrap."""
        table = json.loads(self.table.to_json(orient="records"))
        return {
            "grid": self.config.to_dict(),
            "grid_description": self.config.describe(),
            "embedder": self.embedder,
            "n_questions": int(len(self.questions)),
            "n_documents": int(len({d for spans in self.chunks.values() for d in spans})),
            "seconds": round(self.seconds, 2),
            "n_embedded": self.n_embedded,
            "cells": table,
            "bootstrap": boot.to_dict() if boot is not None else None,
        }

    def diagnostics(self, docs: Mapping[str, str], floor_tokens: int = 32) -> pd.DataFrame:
        """Each chunking's sizes and breakages (:func:`chunkwise.evaluation.diagnostics.chunk_diagnostics`)
        over ``docs``, one row per chunker label, with the embedders' truncation
        (:func:`~chunkwise.evaluation.diagnostics.truncation_diagnostics`): ``window_tokens`` (the
        embedder's window in its own word pieces), ``chunks_over_window`` (share of chunks cut by
        it) and ``ref_chars_past_window`` (share of reference characters no chunk embeds); in a
        grid of several embedders each column once per embedder, as ``column:embedder``. The
        truncation columns are absent when no embedder knows its window."""
        from chunkwise.evaluation.diagnostics import chunk_diagnostics

        diag = chunk_diagnostics(docs, self.chunks, floor_tokens=floor_tokens)
        trunc = self.truncation()
        if trunc is None:
            return diag
        multi = len(self.embedders) > 1
        for emb, part in trunc.groupby(level="embedder", sort=False):
            part = part.droplevel("embedder")
            for src, name in (("window_tokens", "window_tokens"), ("share_chunks_over_window", "chunks_over_window"),
                              ("share_reference_chars_unembedded", "ref_chars_past_window")):
                diag[f"{name}:{emb}" if multi else name] = part[src].reindex(diag.index)
        return diag

    def truncation(self) -> pd.DataFrame | None:
        """Chunks longer than each embedder's window and the reference characters past it, per
        chunking x embedder (:func:`chunkwise.evaluation.diagnostics.truncation_diagnostics`);
        None when no embedder of the run knows its window (one whose tokenizer fails to load
        gets a row that says why in ``note``)."""
        from chunkwise.evaluation.diagnostics import truncation_diagnostics

        def knows_window(e: Any) -> bool:
            try:
                return getattr(e, "max_tokens", None) is not None and callable(getattr(e, "token_counts", None))
            except Exception:  # noqa: BLE001 - a tokenizer that cannot load: its row says why
                return True

        known = {k: e for k, e in self.embedders.items() if knows_window(e)}
        if not known or not self.chunk_objects:
            return None
        late = [s.label for s in self.config.chunkers if s.kind.index == "late"]
        return truncation_diagnostics(self.chunk_objects, self.questions, known, late=late)


def chunkings_of(result: GridResult, document: str) -> dict[str, list[tuple[int, int]]]:
    """Each chunker's spans of one document (for :func:`chunkwise.figures.chunk_boundaries_html`)."""
    return {label: spans.get(document, []) for label, spans in result.chunks.items()}


# --------------------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------------------


def check_inputs(docs: Any, questions: Any) -> pd.DataFrame:
    """Validate a grid's documents and questions; return the questions in the grid's own form.

    Returns
    -------
    DataFrame
        One row per question with ``question``, ``corpus_id``, ``references`` (list of
        ``(start, end)`` character offsets) and ``question_id``.

    Raises
    ------
    ValueError
        For empty or non-text documents, no questions, missing columns, or a question whose
        document is not in ``docs`` (:func:`run_grid`'s errors).
    """
    if not isinstance(docs, Mapping) or not docs:
        raise ValueError("docs must be a non-empty mapping document name -> text.")
    for name, text in docs.items():
        if not isinstance(text, str):
            raise ValueError(f"document {name!r} must be a str, got {type(text).__name__}.")
    if not isinstance(questions, pd.DataFrame):
        raise ValueError("questions must be a DataFrame with question, corpus_id and references (see chunkwise.datasets.local).")
    q = questions.copy()
    if "corpus_id" not in q.columns and "corpus" in q.columns:
        q["corpus_id"] = q["corpus"]
    missing = [c for c in ("question", "corpus_id", "references") if c not in q.columns]
    if missing:
        raise ValueError(f"questions is missing column(s) {missing}; it needs question, corpus_id and references.")
    if q.empty:
        raise ValueError("questions is empty; there is nothing to evaluate.")
    if "question_id" not in q.columns:
        q["question_id"] = [f"q{i + 1}" for i in range(len(q))]
    q["question_id"] = q["question_id"].astype(str)
    if q["question_id"].duplicated().any():
        dup = q.loc[q["question_id"].duplicated(), "question_id"].iloc[0]
        raise ValueError(f"question_id {dup!r} occurs twice; ids must be unique.")
    q["corpus_id"] = q["corpus_id"].astype(str)
    for qid, doc in zip(q["question_id"], q["corpus_id"]):
        if doc not in docs:
            raise ValueError(
                f"question {qid!r} refers to document {doc!r}, which is not among the {len(docs)} documents; "
                "run `chunkwise questions validate` to check the questions against the folder."
            )
    q["references"] = [json.loads(r) if isinstance(r, str) else list(r) for r in q["references"]]
    q = q.reset_index(drop=True)
    return q


def _embed(embedder: Any, texts: list[str], what: str) -> np.ndarray:
    if not callable(getattr(embedder, "embed", None)):
        raise ValueError(f"the {what} embedder must have an embed(texts) method, got {type(embedder).__name__}.")
    out = np.asarray(embedder.embed(texts)) if texts else np.zeros((0, 1), dtype=np.float32)
    if out.ndim != 2 or out.shape[0] != len(texts):
        got = out.shape[0] if out.ndim >= 1 else 0
        raise ValueError(
            f"the embedder {getattr(embedder, 'name', type(embedder).__name__)!r} returned {got} vectors for "
            f"{len(texts)} {what}s; it must return one row per text."
        )
    return out


def _query_seconds(embedder: Any, questions: list[str], n: int = 8) -> float:
    """Median seconds to embed one question on its own, with the model itself.

    The cache is bypassed where the embedder exposes its model (``CachedEmbedder.inner``,
    ``SentenceTransformerEmbedder``'s model), since a real query is new text; one warm-up call
    first, then up to ``n`` questions one at a time.
    """
    model = getattr(embedder, "inner", None) or getattr(embedder, "_model", None) or embedder
    if not callable(getattr(model, "embed", None)):  # no direct access to the model: time the embedder
        model = embedder
    sample = questions[: n + 1]
    if not sample:
        return 0.0
    model.embed(sample[:1])  # warm-up; a failing model raises here, it is not timed as a cache
    times = []
    for text in sample[1:] or sample:
        t0 = time.perf_counter()
        model.embed([text])
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


class _Placed(NamedTuple):
    """A chunk's text with the span the placement rule gave it (may differ in length)."""

    text: str
    start: int
    end: int


def _place(chunks: dict[str, list[Any]], docs: Mapping[str, str], placement: str) -> dict[str, list[Any]]:
    """Chunks re-placed in their documents by :func:`chunkwise.evaluation.spans.place_spans`."""
    out = {}
    for name, cs in chunks.items():
        spans = place_spans(docs[name], [(c.text, c.start, c.end) for c in cs], placement=placement)
        # the chunk's own text is what gets embedded; only its place (the scored span) changes
        out[name] = [_Placed(c.text, int(s), int(e)) for c, (s, e) in zip(cs, spans)]
    return out


def relevant_items(
    doc_ids: Sequence[str], spans: np.ndarray, targets: Sequence[Sequence[tuple[str, int, int]]]
) -> list[np.ndarray]:
    """Per question, a boolean mask over the items: which share a character with one of its
    references (``(document, start, end)``, any reading; the rule of hit rate and MRR)."""
    ids = np.asarray(doc_ids, dtype=object)
    starts, ends = spans[:, 0], spans[:, 1]
    out = []
    for tq in targets:
        mask = np.zeros(len(ids), dtype=bool)
        for doc, a, b in tq:
            if a < b:
                mask |= (ids == doc) & (starts < b) & (a < ends)
        out.append(mask)
    return out


def _first_relevant_rank(
    ranked: Sequence[int], doc_ids: Sequence[str], spans: np.ndarray, targets: Sequence[tuple[str, int, int]]
) -> int:
    """1-based rank of the first chunk sharing a character with a reference (``(document,
    start, end)``, any reading of an any-of question); 0 when none."""
    for r, j in enumerate(ranked, start=1):
        s, e = int(spans[j, 0]), int(spans[j, 1])
        for doc, a, b in targets:
            if doc_ids[j] == doc and s < b and a < e and a < b:
                return r
    return 0


def _llm_cost(spec: ChunkerSpec, chunks: Mapping[str, list[Any]], before: Any, llm: ChatModel | None) -> dict[str, Any]:
    """LLM cost columns of one chunking: ``llm_calls``, ``llm_cache_hits``, ``llm_seconds``,
    ``llm_prompt_tokens`` and ``llm_completion_tokens``.

    Contextual: one call per chunk (cached or not), ``llm_seconds`` the summed latency of the
    original requests. LLM chunker: the calls made in this run and the model seconds they
    stand for. Seconds and tokens count replies served from the LLM cache at what they cost
    when they were made (:meth:`chunkwise.llm.LLMClient.stats`' ``cached_*`` counters), so a
    run replayed from a committed cache reports the cold cost.
    """
    from chunkwise.llm.client import model_cost

    after = llm.stats() if before is not None else None

    def grew(name: str) -> float:
        return 0.0 if after is None else model_cost(before, after, name)

    hits = int(after["cache_hits"] - before["cache_hits"]) if after is not None else 0
    tokens = {"llm_prompt_tokens": int(grew("prompt_tokens")), "llm_completion_tokens": int(grew("completion_tokens"))}
    if spec.kind.llm_cost == "per_chunk":
        cs = [c for v in chunks.values() for c in v]
        secs = sum(float(c.metadata.get("context_seconds", 0.0)) for c in cs)
        return {"llm_calls": len(cs), "llm_cache_hits": hits, "llm_seconds": round(secs, 2), **tokens}
    if spec.kind.llm_cost == "calls" and after is not None:
        return {"llm_calls": int(after["calls"] - before["calls"]), "llm_cache_hits": hits,
                "llm_seconds": round(grew("latency_s"), 2), **tokens}
    return {"llm_calls": 0, "llm_cache_hits": 0, "llm_seconds": 0.0, "llm_prompt_tokens": 0, "llm_completion_tokens": 0}


class _ParentMerge:
    """Small-to-big scoring: ranked children -> :func:`merge_to_parents` -> item indices.

    Items ``0..n-1`` are the children (the index), ``n + i`` the ``i``-th parent over all
    documents, so a merged parent is scored with its own span and tokens.
    """

    def __init__(self, spec: ChunkerSpec, children: Mapping[str, list[Any]], parents: Mapping[str, list[Any]], enc: Any):
        from chunkwise.chunk import Chunk

        self.threshold = spec.merge_threshold
        self.children: list[Any] = []
        self.parents: dict[tuple[str, int], Any] = {}
        self.parent_index: dict[tuple[str, int], int] = {}
        self.parent_rows: list[tuple[str, int, int]] = []
        for name, kids in children.items():
            for c in kids:
                self.children.append(Chunk(c.text, c.start, c.end, {"parent_id": (name, c.metadata["parent_id"])}))
            for p in parents[name]:
                key = (name, p.metadata["parent_id"])
                self.parents[key] = Chunk(p.text, p.start, p.end, dict(p.metadata))
                self.parent_index[key] = len(self.parent_rows)
                self.parent_rows.append((name, p.start, p.end))
        self.parent_tokens = [len(t) for t in enc.encode_ordinary_batch([p.text for p in self.parents.values()])]
        self.child_pos = {id(c): i for i, c in enumerate(self.children)}

    def extend(self, doc_ids: list[str], spans: np.ndarray, tokens: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Item arrays with the parents appended after the children."""
        ids = list(doc_ids) + [r[0] for r in self.parent_rows]
        sp = np.concatenate([spans, np.asarray([(s, e) for _, s, e in self.parent_rows], dtype=np.int64).reshape(-1, 2)])
        tk = np.concatenate([tokens, np.asarray(self.parent_tokens, dtype=np.int64)])
        return ids, sp, tk

    def merge(self, ranked: Sequence[int]) -> list[int]:
        """Item indices of the merged list for the ranked child indices ``ranked``."""
        n = len(self.children)
        out = []
        for c in merge_to_parents([self.children[j] for j in ranked], self.parents, self.threshold):
            if "merged_children" in c.metadata:
                out.append(n + self.parent_index[c.metadata["parent_id"]])
            else:
                out.append(self.child_pos[id(c)])
        return out


def run_grid(
    docs: Mapping[str, str],
    questions: pd.DataFrame,
    config: GridConfig = DEFAULT_GRID,
    embedder: Any = None,
    *,
    query_embedder: Any = None,
    embedders: Mapping[str, Any] | None = None,
    llm: ChatModel | None = None,
    late_embedder: Any = None,
    rankers: Iterable[RetrieverKind] | Mapping[str, RetrieverKind] | None = None,
    cache_dir: str | Path | None = None,
    show_progress: bool = True,
    progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
) -> GridResult:
    """Run every cell of ``config`` over ``docs`` and ``questions``.

    Parameters
    ----------
    docs : mapping str -> str
        Document name -> text (e.g. :func:`chunkwise.datasets.local.load_documents`).
    questions : DataFrame
        Columns ``question``, ``corpus_id`` (document name; ``corpus`` accepted) and
        ``references`` (list of ``{"start_index", "end_index"}`` dicts or ``(start, end)``
        pairs, half-open character offsets); ``question_id`` optional. E.g.
        :attr:`chunkwise.datasets.local.ValidationReport.questions`.
    config : GridConfig, default DEFAULT_GRID
    embedder : Embedder
        A grid of one embedder: embeds the chunks (and the questions unless ``query_embedder``
        is given) and serves the semantic chunkers. Use a caching embedder (any chunkwise
        embedder is one) so reruns embed nothing. Needed by dense / hybrid retrieval and the
        semantic chunkers.
    query_embedder : Embedder, optional
        For models with distinct query and passage encoders (e5's prefixes).
    embedders : mapping str -> Embedder or (passage, query) pair, optional
        The embedder axis: label -> embedder, in axis order (the labels must be
        ``config.embedders`` when that is set). Instead of ``embedder``. Every retriever that
        reads vectors (its kind or one it fuses ``needs_embedder``) gets one cell per embedder;
        the others (BM25) one cell, labelled ``-`` in the embedder place. Chunkers that need an
        embedder cut with the *first* embedder, so every embedder scores the same chunks.
    llm : ChatModel, optional
        For ``LLM`` and ``Contextual`` chunker specs (a cached client: a rerun makes no request).
    late_embedder : LateChunkingEmbedder, optional
        Chunk vectors of ``Late`` specs for the (first) embedder (default: a
        :class:`~chunkwise.chunkers.LateChunkingEmbedder` of ``embedder.model_id``, else
        all-MiniLM-L6-v2). The questions are still embedded by ``query_embedder``/``embedder``,
        which must be the same model.
    rankers : iterable of RetrieverKind (or mapping name -> RetrieverKind), optional
        The retrieval of this run, handed in (as BEIR hands its retriever to the evaluator): each
        kind ranks in place of the registered kind of its name, for this call only; the registry
        is not touched. Every other retriever the grid lists (or fuses) ranks with its registered
        kind. E.g. ``rankers=[rerank_kind("BAAI/bge-reranker-v2-m3")]`` with ``"rerank"`` in
        ``config.retrievers``, or the Ray engine's sharded ``dense`` and ``bm25``. A kind must keep
        the registered kind's ``uses`` and ``needs_embedder`` (the grid's depth and cells are
        planned from them); register a new name for a new retriever.
    cache_dir : str or Path, optional
        Chunk-span cache folder (default ``$CHUNKWISE_CACHE_DIR/spans``, shared with
        chapter 2); BM25 indexes go to its ``bm25`` subfolder.
    show_progress : bool, default True
        A tqdm bar over the chunkers.
    progress : callable, optional
        Wraps the chunker list instead of tqdm.

    Returns
    -------
    GridResult
        Cells named :func:`cell_name` (``"chunker | retriever | k=5"``; with two or more
        embedders ``"chunker | embedder | retriever | k=5"``).

    Raises
    ------
    ValueError
        For empty documents or questions, a question whose document is missing, a grid that
        needs an embedder without one, both ``embedder`` and ``embedders``, labels that are not
        ``config.embedders``, an embedder that returns the wrong number of vectors, a ranker that
        is not a :class:`RetrieverKind` of a retriever the grid ranks with the registered kind's
        ``uses`` and ``needs_embedder``, or (from the chunkers) an invalid spec.
    """
    t_start = time.perf_counter()
    if not isinstance(config, GridConfig):
        raise ValueError("config must be a GridConfig (see GridConfig.from_toml / GridConfig.from_dict).")
    q = check_inputs(docs, questions)
    kinds = run_kinds(config, rankers)
    order, closure = _retriever_order(config.retrievers, kinds)
    reads_vectors = {name: any(kinds[u].needs_embedder for u in closure[name]) for name in order}
    needs_dense = any(reads_vectors.values())
    needs_semantic = any(s.kind.needs == "embedder" for s in config.chunkers)
    axis = embedder_axis(config, embedder, query_embedder, embedders)
    multi = len(axis) > 1
    if axis[0].passage is None and (needs_dense or needs_semantic):
        raise ValueError("this grid needs an embedder (dense / hybrid retrieval or a semantic chunker); pass embedder=.")
    chunking_embedder = axis[0].passage
    counted = list({id(m): m for e in axis for m in (e.passage, e.query) if m is not None}.values())
    n_before = [getattr(m, "n_embedded", None) for m in counted]
    enc = get_encoding("cl100k_base")

    texts_q = [str(t) for t in q["question"]]
    # any-of answers: one row per reading, each question keeps its best (chunkwise.evaluation.anyof)
    has_readings = "readings" in q.columns and any(isinstance(r, list) and r for r in q["readings"])
    qx, owner = expand_readings(q) if has_readings else (None, None)
    readings = (qx, owner) if qx is not None else None
    targets_q = relevant_targets(q)
    max_k = max(config.top_k)
    depth = config.search_depth
    qv: dict[str, np.ndarray | None] = {e.label: None for e in axis}
    embed_q_seconds: dict[str, float] = {e.label: 0.0 for e in axis}
    if needs_dense:
        for e in axis:
            qv[e.label] = _embed(e.query, texts_q, "question")
            embed_q_seconds[e.label] = _query_seconds(e.query, texts_q)
    bm25_cache = (Path(cache_dir) / "bm25") if cache_dir is not None else None
    if bm25_cache is None:
        bm25_cache = span_cache_dir(None).parent / "bm25"
    late_embedders: dict[str, Any] = {axis[0].label: late_embedder} if late_embedder is not None else {}

    rows: list[dict[str, Any]] = []
    per_q: list[pd.DataFrame] = []
    chunk_spans: dict[str, dict[str, list[tuple[int, int]]]] = {}
    chunk_objects: dict[str, dict[str, list[Any]]] = {}
    all_rankings: dict[str, dict[str, list[list[int]]]] = {}
    specs = list(config.chunkers)
    if progress is not None:
        bar: Iterable[ChunkerSpec] = progress(specs)
    elif show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(specs, desc="chunkers", unit="chunker")
    else:
        bar = specs
    for spec in bar:
        t0 = time.perf_counter()
        llm_before = llm.stats() if callable(getattr(llm, "stats", None)) else None
        parents_of: dict[str, list[Any]] = {}
        if spec.kind.index == "parents":
            if config.placement != "exact":
                raise ValueError(f"{spec.label}: hierarchical retrieval is scored with placement='exact' only.")
            chunks = {}
            for name, text in docs.items():
                parents_of[name], chunks[name] = chunk_hierarchy(spec, name, text, cache_dir)
        else:
            chunks = {name: chunk_corpus(spec, name, text, chunking_embedder, llm, cache_dir)
                      for name, text in docs.items()}
        chunk_seconds = time.perf_counter() - t0
        llm_cost = _llm_cost(spec, chunks, llm_before, llm)
        # what is embedded and BM25-indexed: the chunk, or (Contextual) its context + the chunk
        texts_index = [index_text(c) for cs in chunks.values() for c in cs]
        raw_chunks = chunks
        chunk_objects[spec.label] = raw_chunks
        if config.placement != "exact":
            chunks = _place(chunks, docs, config.placement)
        chunk_spans[spec.label] = {name: [(c.start, c.end) for c in cs] for name, cs in chunks.items()}
        doc_ids = [name for name, cs in chunks.items() for _ in cs]
        texts = [c.text for cs in chunks.values() for c in cs]
        if not texts:
            raise ValueError(f"{spec.label} produced no chunks (are all documents empty?).")
        if texts_index != texts and not any(t.strip() for t in texts_index):
            raise ValueError(f"chunker {spec.label!r}: all {len(texts_index)} of its chunks carry an empty index_text, "
                             "so there is nothing to embed or index; return the text to index as index_text (or leave "
                             "it out: the chunk's own text is indexed).")
        spans = np.asarray([(c.start, c.end) for cs in chunks.values() for c in cs], dtype=np.int64)
        tokens = np.asarray([len(t) for t in enc.encode_ordinary_batch(texts)], dtype=np.int64)
        index_tokens = (
            np.asarray([len(t) for t in enc.encode_ordinary_batch(texts_index)], dtype=np.int64)
            if texts_index != texts else tokens
        )
        merge = None
        if parents_of:
            # items 0..n-1 are the children, n.. the parents: merged retrievals point at parents
            merge = _ParentMerge(spec, chunks, parents_of, enc)
            doc_ids, spans, tokens = merge.extend(doc_ids, spans, tokens)

        # precision_Omega depends only on the chunking: once per mode.
        omega = _omega(q, qx, owner, chunk_spans[spec.label])
        # which items share a character with each question's references (NDCG, AP); R counts the index
        relevant = relevant_items(doc_ids, spans, targets_q)
        n_relevant = np.asarray([int(m[: len(texts)].sum()) for m in relevant], dtype=np.int64)

        shared: dict[str, Ranking] = {}  # rankings of retrievers that read no vectors: once per chunking
        all_rankings[spec.label] = {}
        for e in axis:
            def chunk_vectors(spec: ChunkerSpec = spec, raw_chunks: Mapping[str, list[Any]] = raw_chunks,
                              texts_index: list[str] = texts_index, e: AxisEmbedder = e) -> np.ndarray:
                if spec.kind.index == "late":
                    if e.label not in late_embedders:
                        from chunkwise.chunkers import LateChunkingEmbedder

                        late_embedders[e.label] = LateChunkingEmbedder(getattr(e.passage, "model_id", "all-MiniLM-L6-v2"))
                    late = late_embedders[e.label]
                    return np.concatenate([late.embed_chunks(docs[n], cs) for n, cs in raw_chunks.items()])
                return _embed(e.passage, texts_index, "chunk")

            inputs = RankInputs(texts_index, texts_q, depth, config, chunk_vectors, qv[e.label],
                                embed_q_seconds[e.label], bm25_cache)
            ranked_by: dict[str, Ranking] = {}
            for name in order:
                if not reads_vectors[name] and name in shared:
                    ranked_by[name] = shared[name]
                    continue
                kind = kinds[name]
                ranked_by[name] = kind.rank(inputs, {u: ranked_by[u] for u in kind.uses})
                if not reads_vectors[name]:
                    shared[name] = ranked_by[name]
            index_seconds = {name: chunk_seconds + sum(ranked_by[u].index_seconds for u in closure[name]) for name in order}
            query_seconds = {name: sum(ranked_by[u].query_seconds for u in closure[name]) for name in order}

            for retriever in config.retrievers:
                if not reads_vectors[retriever] and e is not axis[0]:
                    continue  # the same ranking for every embedder: one cell
                emb_label = e.label if (reads_vectors[retriever] or not multi) else "-"
                ranked_all = ranked_by[retriever].ranked
                all_rankings[spec.label][ranking_key(retriever, emb_label if multi else None)] = ranked_all
                first = np.asarray(
                    [_first_relevant_rank(r[:max_k], doc_ids, spans, t) for r, t in zip(ranked_all, targets_q)]
                )
                for k in config.top_k:
                    ranked = [r[:k] for r in ranked_all]
                    if merge is not None:
                        ranked = [merge.merge(r) for r in ranked]
                        first = np.asarray(
                            [_first_relevant_rank(r, doc_ids, spans, t) for r, t in zip(ranked, targets_q)]
                        )
                    retrieved = [[(doc_ids[j], int(spans[j, 0]), int(spans[j, 1])) for j in r] for r in ranked]
                    relevance = [[bool(m[j]) for j in r] for m, r in zip(relevant, ranked)]
                    scores = score_cell(CellInputs(q, retrieved, first, k, omega, config.mode, readings,
                                                   relevance, n_relevant))
                    ret_tokens = np.asarray([int(tokens[r].sum()) if r else 0 for r in ranked], dtype=np.float64)
                    name = cell_name(spec, retriever, k, emb_label if multi else None)
                    frame = pd.DataFrame(
                        {
                            "cell": name,
                            "chunker": spec.label,
                            "embedder": emb_label,
                            "retriever": retriever,
                            "k": k,
                            "question_id": q["question_id"],
                            "corpus": q["corpus_id"],
                            **scores,
                            "retrieved_tokens": ret_tokens,
                        }
                    )
                    per_q.append(frame)
                    rows.append(
                        {
                            "cell": name,
                            "chunker": spec.label,
                            "spec": _spec_string(spec),
                            "embedder": emb_label,
                            "retriever": retriever,
                            "k": k,
                            "n_questions": len(q),
                            **aggregate_cell(scores),
                            "n_chunks": len(texts),
                            "mean_chunk_tokens": float(tokens[: len(texts)].mean()),
                            # tokens the index embeds: only where the retriever (or one it fuses) reads vectors
                            "embedded_tokens": int(index_tokens.sum()) if reads_vectors[retriever] else 0,
                            **llm_cost,
                            "index_seconds": float(index_seconds[retriever]),
                            "retrieved_tokens": float(ret_tokens.mean()),
                            "query_ms": 1000.0 * float(query_seconds[retriever]),
                        }
                    )
    n_after = [getattr(m, "n_embedded", None) for m in counted]
    n_embedded = (
        int(sum(a - b for a, b in zip(n_after, n_before)))
        if counted and all(isinstance(v, int) for v in (*n_before, *n_after)) else None
    )
    return GridResult(
        config=config,
        table=pd.DataFrame(rows),
        per_question=pd.concat(per_q, ignore_index=True),
        chunks=chunk_spans,
        questions=q,
        embedder=", ".join(e.label for e in axis),
        seconds=time.perf_counter() - t_start,
        n_embedded=n_embedded,
        chunk_objects=chunk_objects,
        rankings=all_rankings,
        # only embedders whose vectors a retriever read: a BM25-only grid embeds nothing, so has no truncation
        embedders={e.label: e.passage for e in axis if e.passage is not None} if needs_dense else {},
    )


class AxisEmbedder(NamedTuple):
    """One level of the embedder axis: its label and its passage / query embedders."""

    label: str
    passage: Any
    query: Any


def _embedder_name(embedder: Any) -> str:
    return str(getattr(embedder, "name", type(embedder).__name__ if embedder is not None else ""))


def run_kinds(config: GridConfig, rankers: Iterable[RetrieverKind] | Mapping[str, RetrieverKind] | None = None,
              ) -> dict[str, RetrieverKind]:
    """The retriever kind each name of the grid ranks with: ``rankers`` where given, else the
    registered kind (see :func:`run_grid`'s ``rankers``).

    Returns
    -------
    dict of str -> RetrieverKind
        Every retriever the grid lists and every one they fuse, transitively.

    Raises
    ------
    ValueError
        If an item is not a :class:`RetrieverKind` with a rank function, names no retriever of the
        grid (listed or fused), is given twice, or changes the registered kind's ``uses`` or
        ``needs_embedder``.
    """
    items = list(rankers.values()) if isinstance(rankers, Mapping) else list(rankers or ())
    _, closure = _retriever_order(config.retrievers)
    ranked = list(dict.fromkeys(u for name in config.retrievers for u in closure[name]))
    given: dict[str, RetrieverKind] = {}
    for kind in items:
        if not isinstance(kind, RetrieverKind) or kind.rank is None:
            raise ValueError(f"rankers must be RetrieverKind objects with a rank function, got {kind!r}; build one "
                             "with chunkwise.retrieval.registry.RetrieverKind (or rerank_kind).")
        if kind.name in given:
            raise ValueError(f"rankers gives the retriever {kind.name!r} twice; give one kind per name.")
        if kind.name not in ranked:
            raise ValueError(f"rankers gives {kind.name!r}, which this grid does not rank (it ranks with "
                             f"{', '.join(ranked)}); list it in GridConfig.retrievers.")
        registered = retriever_kind(kind.name)
        if (kind.uses, kind.needs_embedder) != (registered.uses, registered.needs_embedder):
            raise ValueError(f"the ranker {kind.name!r} has uses={kind.uses}, needs_embedder={kind.needs_embedder}; "
                             f"the registered kind has uses={registered.uses}, needs_embedder="
                             f"{registered.needs_embedder}, from which the grid is planned. Register it under a "
                             "new name instead.")
        given[kind.name] = kind
    return {name: given.get(name) or retriever_kind(name) for name in ranked}


def embedder_axis(config: GridConfig, embedder: Any, query_embedder: Any,
                   embedders: Mapping[str, Any] | None) -> list[AxisEmbedder]:
    """The grid's embedders in axis order (one entry, possibly without a model, for a grid of one).

    The arguments are :func:`run_grid`'s. Raises ValueError as it does for the embedders.
    """
    if embedders is None:
        if len(config.embedders) > 1:
            raise ValueError(
                f"the grid lists {len(config.embedders)} embedders ({', '.join(config.embedders)}); pass "
                "embedders={label: embedder} (chunkwise.embeddings.make_embedder builds them by name)."
            )
        label = config.embedders[0] if config.embedders else _embedder_name(embedder)
        return [AxisEmbedder(label, embedder, query_embedder or embedder)]
    if embedder is not None or query_embedder is not None:
        raise ValueError("pass either embedder= (a grid of one embedder) or embedders= (the embedder axis), not both.")
    if not isinstance(embedders, Mapping) or not embedders:
        raise ValueError("embedders must be a non-empty mapping label -> embedder (or (passage, query) pair).")
    labels = list(config.embedders) or [str(k) for k in embedders]
    if set(labels) != {str(k) for k in embedders} or len(labels) != len(embedders):
        raise ValueError(f"embedders has labels {sorted(map(str, embedders))}, the grid lists {labels}; give one "
                         "embedder per name of GridConfig.embedders.")
    by_label = {str(k): v for k, v in embedders.items()}
    out = []
    for label in labels:
        value = by_label[label]
        passage, query = value if isinstance(value, tuple) else (value, value)
        if not callable(getattr(passage, "embed", None)) or not callable(getattr(query, "embed", None)):
            raise ValueError(f"embedder {label!r} must have an embed(texts) method (or be a (passage, query) pair of them).")
        out.append(AxisEmbedder(label, passage, query))
    return out


def _omega(q: pd.DataFrame, qx: pd.DataFrame | None, owner: Sequence[int] | None,
           spans: Mapping[str, list[tuple[int, int]]]) -> dict[str, np.ndarray]:
    """Each question's precision_Ω under one chunking, per mode (the best reading's for any-of questions)."""
    if qx is None:
        empty: list[list[Any]] = [[] for _ in range(len(q))]
        return {m: score_questions(q, empty, spans, mode=m)["precision_omega"].to_numpy() for m in ("chroma", "union")}
    empty_x: list[list[Any]] = [[] for _ in range(len(qx))]
    omega = {}
    for m in ("chroma", "union"):
        om = score_questions(qx, empty_x, spans, mode=m)["precision_omega"].to_numpy(dtype=float)
        best = np.full(len(q), np.nan)
        for j, o in enumerate(owner if owner is not None else []):
            if not np.isnan(om[j]) and (np.isnan(best[o]) or om[j] > best[o]):
                best[o] = om[j]
        omega[m] = best
    return omega


def format_table(table: pd.DataFrame, boot: BootstrapResult | None = None, metric: str = "recall") -> str:
    """The cell table as aligned text (percent metrics, costs), sorted by ``metric``.

    With ``boot`` the columns ``CI`` (the metric's own percentile interval) and ``P(best)``
    are added.
    """
    t = table.copy()
    percent = ["recall", "precision", "iou", "precision_omega", "hit_rate", "mrr",
               *(c for c in ("ndcg", "map") if c in t.columns)]
    view = pd.DataFrame({"cell": t["cell"]})
    for c in percent:
        view[c.replace("precision_omega", "prec_Ω")] = (100 * t[c]).map(lambda v: f"{v:5.1f}")
    if boot is not None:
        bt = boot.table.reindex(t["cell"])
        view[f"{metric} CI"] = [f"{100 * lo:4.1f}-{100 * hi:4.1f}" for lo, hi in zip(bt["mean_low"], bt["mean_high"])]
        view["P(best)"] = [f"{100 * p:4.0f}%" for p in bt["p_best"]]
    view["ret_tok"] = t["retrieved_tokens"].map(lambda v: f"{v:7.0f}")
    view["query_ms"] = t["query_ms"].map(lambda v: f"{v:6.1f}")
    view["index_s"] = t["index_seconds"].map(lambda v: f"{v:6.1f}")
    order = t[metric].to_numpy().argsort(kind="stable")[::-1] if metric in t.columns else np.arange(len(t))
    return view.iloc[order].to_string(index=False)



def format_groups(groups: pd.DataFrame) -> str:
    """One line per question group of :meth:`GridResult.group_table`: its question count, its
    best cell's mean (percent, with the cell's own interval) and that cell's difference to the
    baseline with the paired interval, said to be beyond the noise only when the interval
    excludes 0.

    Parameters
    ----------
    groups : DataFrame
        From :meth:`GridResult.group_table`.
    """

    def pct(x: float) -> str:
        return "n/a" if pd.isna(x) else f"{100 * x:.1f}"

    lines = []
    for group, part in groups.groupby("group", sort=False):
        best = part[part["best"]].iloc[0]
        n = int(best["n_questions"])
        line = f"{group} ({n} question{'s' if n != 1 else ''}): best {best['cell']} {pct(best['mean'])}%"
        if pd.isna(best["diff_low"]):
            lines.append(line + " (one question: no interval)")
        elif best["diff"] == 0 and best["diff_low"] == 0 and best["diff_high"] == 0:
            lines.append(line + f" [{pct(best['mean_low'])}, {pct(best['mean_high'])}], the baseline itself")
        else:
            noise = "beyond the noise" if best["diff_low"] > 0 else "within the noise"
            lines.append(line + f" [{pct(best['mean_low'])}, {pct(best['mean_high'])}]; vs the baseline "
                         f"{'+' if best['diff'] >= 0 else ''}{pct(best['diff'])} [{pct(best['diff_low'])}, "
                         f"{pct(best['diff_high'])}] ({noise})")
    return "\n".join(lines)
