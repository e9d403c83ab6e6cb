"""The evaluation grid on Ray: chunking, embedding and exact retrieval spread over a cluster.

:func:`chunkwise.evaluation.grid.run_grid` runs in one process. :class:`RayEngine` runs the same
grid with its heavy stages on Ray (a local start by default, ``address=`` for a cluster) and
gives the same :class:`~chunkwise.evaluation.grid.GridResult`, cell by cell and question by
question (``tests/test_ray_engine.py`` checks it):

1. **Chunking** -- a Ray Data ``flat_map`` over the documents: each row is one document, each
   output row one chunk of one chunker spec (``chunker``, ``document``, ``position``, ``start``,
   ``end``, ``text_sha256``). The driver checks each chunk's hash against its own copy of the
   text and writes the spans into the span cache (:func:`chunkwise.chunkers.specs.store_spans`),
   where the grid reads them. Chunkings already in the cache are not recomputed. Chunkers that cut
   with a model (semantic chunkers through the embedder, LLM chunkers) and Hierarchical specs
   run on the driver, inside the grid, as in the local engine.
2. **Embedding** -- only the texts whose content-cache key (:func:`chunkwise.embeddings.cache_key`)
   is missing, through ``map_batches`` over a pool of actors that each load the model once
   (``embed_actors``; ``num_gpus`` per actor for a GPU cluster, with an embedder built for that
   device). Work goes in parts of ``part_size`` texts: each part is written as Parquet
   (``key``, ``embedder``, ``vector``) under ``work_dir`` and imported into the cache
   (:func:`import_embeddings`) before the next starts, so a run killed in this stage loses at
   most one part and a rerun embeds only what is still missing.
3. **Retrieval, exact** -- the chunk vectors and the BM25 index are cut into ``n_shards``
   contiguous shards, one Ray task each (two phases for BM25). Every shard returns its own
   top ``depth`` per question with scores; the merge keeps the global top ``depth`` ordered by
   score, ties by chunk position, which is the local engine's order (a global top-k item is in
   its shard's top-k, so nothing is lost). BM25 first gathers the document frequencies, the
   number of chunks and the average length from every shard (phase 1 tasks; the tokenized
   shards stay in Ray's object store), and each shard scores with those global values (phase 2), with bm25s' own float32 arithmetic, so sharding cannot change a score.
   Approximate search (``index = "hnsw"``) is not sharded: it runs on the driver, as locally.
4. **Scoring and the bootstrap** -- on the driver, unchanged (the grid itself).

What stays on the driver: reading the documents, model-cut chunkings, late chunking's token
vectors, the rank fusion of ``hybrid`` (it reads the shards' merged rankings), every metric
and the statistics. Ray and its Data library come with the ``scale`` extra
(``pip install 'chunkwise[scale]'``).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RayEngine", "StageTiming", "import_embeddings", "merge_top_k", "run_grid_ray"]


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise RuntimeError(
            "the Ray engine needs Ray and Ray Data: pip install 'chunkwise[scale]' (or 'ray[data]'), "
            f"then rerun ({exc})."
        ) from exc
    return ray


@dataclass
class StageTiming:
    """One stage of a Ray run: its name, wall seconds and how many items it processed
    (chunkings computed, texts embedded, questions ranked)."""

    stage: str
    seconds: float
    items: int
    detail: str = ""


# --------------------------------------------------------------------------------------
# merging per-shard results
# --------------------------------------------------------------------------------------


def merge_top_k(parts: Sequence[tuple[np.ndarray, np.ndarray]], depth: int) -> list[list[int]]:
    """The global top ``depth`` per question from each shard's top ``depth``.

    Parameters
    ----------
    parts : sequence of (indices, scores)
        One pair per shard; ``indices[i]`` the global chunk positions of question ``i``'s
        candidates in that shard (a 1-D int array, or a list of them when shards return
        different lengths), ``scores[i]`` their scores.
    depth : int, >= 1

    Returns
    -------
    list of list of int
        Per question, the ``depth`` positions of highest score across all shards, ties broken
        by the lower position (as :func:`chunkwise.retrieval.index.top_k_cosine` and
        :meth:`chunkwise.retrieval.BM25Retriever.retrieve` break them on one index).

    Raises
    ------
    ValueError
        If ``depth < 1`` or the shards disagree on the number of questions.
    """
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be an int >= 1, got {depth!r}.")
    if not parts:
        return []
    n_q = {len(idx) for idx, _ in parts}
    if len(n_q) != 1:
        raise ValueError(f"shards returned results for different numbers of questions: {sorted(n_q)}.")
    out = []
    for i in range(n_q.pop()):
        idx = np.concatenate([np.asarray(p[0][i], dtype=np.int64) for p in parts])
        sc = np.concatenate([np.asarray(p[1][i], dtype=np.float32) for p in parts])
        order = np.lexsort((idx, -sc))[:depth]
        out.append([int(j) for j in idx[order]])
    return out


def _bounds(n: int, n_shards: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) ranges of ``n`` items in at most ``n_shards`` non-empty shards."""
    n_shards = max(1, min(int(n_shards), n))
    edges = np.linspace(0, n, n_shards + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


# --------------------------------------------------------------------------------------
# the Ray parts (module-level so workers import them by name)
# --------------------------------------------------------------------------------------


def _dense_shard(queries: np.ndarray, keys: np.ndarray, offset: int, depth: int) -> tuple[np.ndarray, np.ndarray]:
    from chunkwise.retrieval.index import top_k_cosine

    idx, scores = top_k_cosine(queries, keys, depth)
    return idx.astype(np.int64) + offset, scores


class _BM25Shard:
    """One shard of a BM25 index: its chunks' term counts, scored with the corpus-wide statistics.

    The score of a chunk for one query token is bm25s' Lucene value, computed as bm25s computes
    it (the idf as float32, the term-frequency part in float64 with ``l_avg`` a float64, the
    product stored as float32), and a query's score adds those float32 values token by token in
    query order, so each chunk's score equals the unsharded index's bit for bit.
    """

    def __init__(self, texts: list[str], offset: int, language: str, tokenizer: str | None) -> None:
        from chunkwise.retrieval.lexical import tokenize

        self.offset = offset
        self.language, self.tokenizer = language, tokenizer
        tokens = [tokenize(t, language, tokenizer) for t in texts]
        self.lengths = [len(t) for t in tokens]
        self.counts = [Counter(t) for t in tokens]
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def stats(self) -> tuple[int, int, dict[str, int]]:
        """(chunks, total tokens, document frequency of each token) of this shard."""
        df: Counter[str] = Counter()
        for c in self.counts:
            df.update(c.keys())
        return len(self.counts), int(sum(self.lengths)), dict(df)

    def set_globals(self, df: Mapping[str, int], n_docs: int, total_len: int, k1: float, b: float) -> int:
        """Build this shard's postings with the corpus-wide statistics; returns its posting count."""
        import math

        l_avg = np.float64(total_len) / n_docs  # what numpy's mean of the integer lengths gives
        # only this shard's tokens: the corpus vocabulary may be far larger than one shard's
        mine = set().union(*self.counts) if self.counts else set()
        idf = {t: np.float32(math.log(1 + (n_docs - df[t] + 0.5) / (df[t] + 0.5))) for t in mine}
        rows: dict[str, list[tuple[int, np.float32]]] = {}
        for j, (c, l_d) in enumerate(zip(self.counts, self.lengths)):
            if not c:
                continue
            voc = list(c.keys())
            tf = np.array(list(c.values()), dtype=np.float32)
            tfc = tf / (k1 * ((1 - b) + b * l_d / l_avg) + tf)
            values = (np.array([idf[t] for t in voc], dtype=np.float32) * tfc).astype(np.float32)
            for t, v in zip(voc, values):
                rows.setdefault(t, []).append((j, v))
        self.postings = {
            t: (np.array([j for j, _ in r], dtype=np.int64), np.array([v for _, v in r], dtype=np.float32))
            for t, r in rows.items()
        }
        return sum(len(r) for r in rows.values())

    def top(self, questions: list[list[str]], depth: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Each question's (global positions, scores) of its top ``depth`` chunks with a positive
        score in this shard, best first, ties by position. ``questions``: query tokens, already
        cut to the corpus vocabulary."""
        n = len(self.counts)
        out_idx, out_sc = [], []
        for q in questions:
            s = np.zeros(n, dtype=np.float32)
            for t in q:
                posting = self.postings.get(t)
                if posting is not None:
                    s[posting[0]] += posting[1]
            positive = np.flatnonzero(s > 0)
            order = positive[np.lexsort((positive, -s[positive]))][:depth]
            out_idx.append(order.astype(np.int64) + self.offset)
            out_sc.append(s[order])
        return out_idx, out_sc


def _bm25_tokenize(texts: list[str], offset: int, language: str, tokenizer: str | None) -> tuple[Any, Any]:
    """Ray task, phase 1 of sharded BM25: (the shard's statistics, the shard itself). The shard
    stays in the object store; only the statistics travel to the driver."""
    shard = _BM25Shard(texts, offset, language, tokenizer)
    return shard.stats(), shard


def _bm25_top(shard: _BM25Shard, df: Mapping[str, int], n_docs: int, total_len: int, queries: list[list[str]],
              depth: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Ray task, phase 2: score the shard's chunks with the corpus-wide statistics."""
    shard.set_globals(df, n_docs, total_len, 1.2, 0.75)
    return shard.top(queries, depth)


def _chunk_rows(row: dict[str, Any], kinds: Sequence[Any]) -> list[dict[str, Any]]:
    """Ray Data ``flat_map``: one document row in, one row per chunk of each of its specs out.

    ``kinds``: the driver's chunker kinds of these specs, registered here first, so a kind the
    user registered (or replaced) on the driver cuts the same way in the worker."""
    from chunkwise.chunkers.registry import register_chunker
    from chunkwise.chunkers.specs import make_chunker, parse_spec

    for kind in kinds:
        register_chunker(kind, replace=True)
    text = row["text"]
    out = []
    for spec_string in row["specs"]:
        spec = parse_spec(spec_string)
        for i, c in enumerate(make_chunker(spec, None).split(text)):
            out.append({
                "chunker": spec_string,
                "document": row["document"],
                "position": i,
                "start": int(c.start),
                "end": int(c.end),
                "text_sha256": hashlib.sha256(text[c.start:c.end].encode("utf-8", "surrogatepass")).hexdigest(),
            })
    return out


class _EmbedActor:
    """Ray Data ``map_batches`` actor: loads the model once, embeds batches of (key, text)."""

    def __init__(self, model: Any, name: str) -> None:
        self.model = model
        self.name = name

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        texts = [str(t) for t in batch["text"]]
        vectors = np.asarray(self.model.embed(texts), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ValueError(f"embedder {self.name!r} returned shape {vectors.shape} for {len(texts)} texts.")
        return pd.DataFrame({"key": list(batch["key"]), "embedder": self.name, "vector": [v.tolist() for v in vectors]})


# --------------------------------------------------------------------------------------
# Parquet -> content cache
# --------------------------------------------------------------------------------------


def import_embeddings(path: str | Path, cache: Any) -> int:
    """Import the Parquet files of a Ray embedding stage into an embedding cache.

    Parameters
    ----------
    path : str or Path
        A Parquet file or a folder of them, with columns ``key`` (:func:`chunkwise.embeddings.cache_key`),
        ``vector`` (list of floats) and optionally ``embedder``.
    cache : chunkwise.embeddings.EmbeddingCache

    Returns
    -------
    int
        Vectors imported (existing keys are overwritten with the same values).

    Raises
    ------
    ValueError
        If a file lacks the columns or holds a non-finite vector (the cache refuses it).
    """
    import pyarrow.parquet as pq

    path = Path(path)
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    n = 0
    for f in files:
        table = pq.read_table(f)
        if not {"key", "vector"} <= set(table.column_names):
            raise ValueError(f"{f}: an embedding part needs the columns key and vector, has {table.column_names}.")
        keys = table.column("key").to_pylist()
        vectors = table.column("vector").to_pylist()
        cache.put_many((k, np.asarray(v, dtype=np.float32)) for k, v in zip(keys, vectors))
        n += len(keys)
    return n


# --------------------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------------------


@dataclass
class RayEngine:
    """Run an evaluation grid with its chunking, embedding and retrieval on Ray.

    Parameters
    ----------
    address : str, optional
        ``ray.init(address=...)``: ``None`` starts Ray on this machine (``num_cpus`` CPUs);
        ``"auto"`` or ``"ray://host:10001"`` joins a running cluster. An already initialised
        Ray session is used as it is.
    num_cpus : int, optional
        CPUs of a local start (default: all of this machine's).
    n_shards : int, optional
        Shards of the retrieval stage (default: the cluster's CPU count).
    embed_actors : int, optional
        Embedding actors, each with its own copy of the model and one CPU (Ray gives a one-CPU
        worker one thread; default: the cluster's CPU count).
    num_gpus : float, default 0
        GPUs per embedding actor (build the embedder for that device, e.g.
        ``SentenceTransformerEmbedder(device="cuda")``). The same embedder object also serves
        the driver (one query timed for ``query_ms``, semantic chunkers), so run the driver
        where that device exists too.
    batch_size : int, default 64
        Texts per ``map_batches`` batch.
    part_size : int, default 4096
        Texts per embedding part (each part is written and imported before the next starts).
    work_dir : str or Path, optional
        Parquet parts and, for an embedder without a content cache of its own, the cache that
        holds its vectors (default ``$CHUNKWISE_CACHE_DIR/ray``).
    show_progress : bool, default False
        Ray Data's progress bars.
    connect_timeout : float, default 30
        Seconds to wait for the cluster at ``address`` (a TCP connection first, then Ray's own
        handshake) before giving up with one message that names the address and what to check.

    Attributes
    ----------
    stages : list of StageTiming
        After :meth:`run`: each stage's wall seconds and item count.

    Raises
    ------
    ValueError
        At construction, for a non-positive count, size or timeout.
    """

    address: str | None = None
    num_cpus: int | None = None
    n_shards: int | None = None
    embed_actors: int | None = None
    num_gpus: float = 0.0
    batch_size: int = 64
    part_size: int = 4096
    work_dir: str | Path | None = None
    show_progress: bool = False
    connect_timeout: float = 30.0
    stages: list[StageTiming] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("num_cpus", "n_shards", "embed_actors"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be an int >= 1 or None, got {v!r}.")
        for name in ("batch_size", "part_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}.")
        if isinstance(self.num_gpus, bool) or not isinstance(self.num_gpus, (int, float)) or self.num_gpus < 0:
            raise ValueError(f"num_gpus must be a number >= 0, got {self.num_gpus!r}.")
        t = self.connect_timeout
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float("inf"):
            raise ValueError(f"connect_timeout must be a number of seconds > 0, got {t!r}.")

    # ---------------------------------------------------------------- setup

    def _ray(self) -> Any:
        ray = _import_ray()
        if not ray.is_initialized():
            import logging

            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "logging_level": logging.WARNING}
            if self.address is None:
                kwargs["num_cpus"] = self.num_cpus
            if self.address in (None, "local"):  # a start here, not a connection: no time limit
                ray.init(address=self.address, **kwargs)
            else:
                _connect(ray, self.address, self.connect_timeout, kwargs)
        import logging

        logging.getLogger("ray.data").setLevel(logging.INFO if self.show_progress else logging.WARNING)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = bool(self.show_progress)
        if hasattr(ctx, "print_on_execution_start"):
            ctx.print_on_execution_start = False
        return ray

    def _cpus(self, ray: Any) -> int:
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def _work_dir(self) -> Path:
        if self.work_dir is not None:
            return Path(self.work_dir).expanduser()
        from chunkwise._env import cache_root

        return cache_root() / "ray"

    def _timed(self, stage: str, t0: float, items: int, detail: str = "") -> None:
        self.stages.append(StageTiming(stage, time.perf_counter() - t0, items, detail))

    # ---------------------------------------------------------------- stage 1

    def chunk(self, docs: Mapping[str, str], specs: Sequence[Any], cache_dir: str | Path | None = None) -> int:
        """Chunk ``docs`` with every spec that cuts without a model, on Ray, into the span cache.

        Returns the number of (spec, document) chunkings computed (0 when all were cached).

        Raises
        ------
        RuntimeError
            If a worker's chunk does not match the driver's text (the workers read other data).
        """
        from chunkwise.chunkers.specs import span_cache_file, store_spans

        t0 = time.perf_counter()
        boundary: dict[str, Any] = {}
        for spec in specs:
            b = spec.boundary_spec
            if b.kind.needs == "none" and b.kind.span_cache and b.kind.index != "parents" and b.kind.wrap is None:
                boundary.setdefault(b.spec_string(), b)
        todo: dict[str, list[str]] = {}
        for key, spec in boundary.items():
            for name, text in docs.items():
                if not span_cache_file(spec, name, text, cache_dir=cache_dir).exists():
                    todo.setdefault(name, []).append(key)
        n = sum(len(v) for v in todo.values())
        if not n:
            self._timed("chunking", t0, 0, "all chunkings cached")
            return 0
        ray = self._ray()
        rows = [{"document": name, "text": docs[name], "specs": keys} for name, keys in todo.items()]
        kinds = list({b.kind.name: b.kind for b in boundary.values()}.values())
        out = ray.data.from_items(rows).flat_map(_chunk_rows, fn_kwargs={"kinds": kinds}).to_pandas()
        groups = out.groupby(["chunker", "document"], sort=False) if len(out) else []
        for (key, name), part in groups:
            part = part.sort_values("position")
            text = docs[name]
            for s, e, h in zip(part["start"], part["end"], part["text_sha256"]):
                if hashlib.sha256(text[int(s):int(e)].encode("utf-8", "surrogatepass")).hexdigest() != h:
                    raise RuntimeError(f"{key} on {name!r}: a worker's chunk [{s}, {e}) differs from the driver's "
                                       "text; the workers must read the same documents.")
            store_spans(span_cache_file(boundary[key], name, text, cache_dir=cache_dir),
                        list(zip(part["start"].astype(int), part["end"].astype(int))))
        # a document a chunker cut into nothing has no rows: it still gets its (empty) cache file
        done = set(zip(out["chunker"], out["document"])) if len(out) else set()
        for name, keys in todo.items():
            for key in keys:
                if (key, name) not in done:
                    store_spans(span_cache_file(boundary[key], name, docs[name], cache_dir=cache_dir), [])
        self._timed("chunking", t0, n, f"{len(out)} chunks")
        return n

    # ---------------------------------------------------------------- stage 2

    def embed(self, embedder: Any, texts: Iterable[str], cache: Any = None) -> int:
        """Embed the texts of ``texts`` missing from ``embedder``'s content cache, on Ray.

        Parameters
        ----------
        embedder : object
            A chunkwise caching embedder (:func:`chunkwise.embeddings.uncached_parts`), or any
            object with ``name`` and ``embed`` together with ``cache``.
        texts : iterable of str
        cache : EmbeddingCache, optional
            Where the vectors go when ``embedder`` keeps no content cache.

        Returns
        -------
        int
            Texts embedded (0 when every one was cached).

        Raises
        ------
        ValueError
            If the embedder has no cache and none is given, or returns malformed vectors.
        """
        from chunkwise.embeddings import cache_key, uncached_parts

        t0 = time.perf_counter()
        parts = uncached_parts(embedder)
        model, store = parts if parts is not None else (embedder, cache)
        if store is None:
            raise ValueError(f"embedder {getattr(embedder, 'name', embedder)!r} has no content cache; give cache= "
                             "(an EmbeddingCache) so the vectors can reach the grid.")
        name = str(model.name)
        folder = self._work_dir() / "parts" / hashlib.sha256(name.encode()).hexdigest()[:16]
        if folder.exists():  # parts of an interrupted run that were written but not yet imported
            import_embeddings(folder, store)
            _remove(folder)
        unique = list(dict.fromkeys(texts))
        keys = [cache_key(name, t) for t in unique]
        have = store.get_many(keys)
        missing = [(k, t) for k, t in zip(keys, unique) if k not in have]
        if not missing:
            self._timed(f"embedding ({name})", t0, 0, "all cached")
            return 0
        ray = self._ray()
        actors = self.embed_actors or self._cpus(ray)
        for p, start in enumerate(range(0, len(missing), self.part_size)):
            batch = missing[start:start + self.part_size]
            ds = ray.data.from_items([{"key": k, "text": t} for k, t in batch])
            ds = ds.map_batches(
                _EmbedActor, fn_constructor_kwargs={"model": model, "name": name}, batch_size=self.batch_size,
                batch_format="pandas", compute=ray.data.ActorPoolStrategy(size=actors),
                num_gpus=self.num_gpus or None,
            )
            # the vectors come back to the driver, which writes the part on its own disk (the workers
            # of a cluster may share none), atomically: a half-written part never exists
            import pyarrow as pa
            import pyarrow.parquet as pq

            part_dir = folder / f"part-{p:05d}"
            part_dir.mkdir(parents=True, exist_ok=True)
            for i, table in enumerate(ds.iter_batches(batch_format="pyarrow", batch_size=None)):
                tmp = part_dir / f"{i:05d}.parquet.tmp"
                pq.write_table(pa.table({c: table.column(c) for c in ("key", "embedder", "vector")}), tmp)
                tmp.replace(part_dir / f"{i:05d}.parquet")
            got = import_embeddings(part_dir, store)
            if got != len(batch):
                raise RuntimeError(f"embedding part {p} of {name!r}: {got} vectors came back for {len(batch)} texts.")
            _remove(part_dir)
        _remove(folder)
        if folder.parent.is_dir() and not any(folder.parent.iterdir()):
            folder.parent.rmdir()
        self._timed(f"embedding ({name})", t0, len(missing), f"{actors} actor(s)")
        return len(missing)

    # ---------------------------------------------------------------- stage 3

    def sharded_rankers(self) -> list[Any]:
        """``dense`` and ``bm25`` kinds that rank on Ray shards, for
        :func:`~chunkwise.evaluation.grid.run_grid`'s ``rankers`` (``hybrid`` then fuses their
        merged rankings). The registry is not touched, so two grids may run side by side.

        Returns
        -------
        list of RetrieverKind
            The registered kinds' names, summaries, ``uses`` and build functions, with sharded
            rank functions (approximate dense search stays on the driver, as locally).
        """
        from chunkwise.retrieval.registry import RetrieverKind, retriever_kind

        ray = self._ray()
        n_shards = self.n_shards or self._cpus(ray)
        originals = {n: retriever_kind(n) for n in ("dense", "bm25")}
        dense_remote = ray.remote(_dense_shard)
        tokenize_remote, top_remote = ray.remote(_bm25_tokenize), ray.remote(_bm25_top)
        engine = self

        def dense(inputs: Any, fused: Mapping[str, Any]) -> Any:
            if inputs.config.index != "exact":
                return originals["dense"].rank(inputs, fused)  # approximate search: on the driver, as locally
            from chunkwise.retrieval.registry import Ranking

            t_all = t0 = time.perf_counter()
            vectors = inputs.vectors()
            index_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            q_ref = ray.put(np.asarray(inputs.query_vectors))
            futures = [dense_remote.remote(q_ref, ray.put(vectors[a:b]), a, inputs.depth)
                       for a, b in _bounds(len(vectors), n_shards)]
            ranked = merge_top_k(ray.get(futures), inputs.depth)
            query = inputs.query_embed_seconds + (time.perf_counter() - t0) / len(inputs.questions)
            engine._timed("retrieval (dense)", t_all, len(inputs.questions), f"{len(futures)} shard(s)")
            return Ranking(ranked, index_seconds, query)

        def bm25(inputs: Any, fused: Mapping[str, Any]) -> Any:
            from chunkwise.retrieval.lexical import tokenize
            from chunkwise.retrieval.registry import Ranking

            t_all = t0 = time.perf_counter()
            language, tokenizer = inputs.config.language, inputs.config.tokenizer
            parts = [tokenize_remote.options(num_returns=2).remote(inputs.texts[a:b], a, language, tokenizer)
                     for a, b in _bounds(len(inputs.texts), n_shards)]
            stats = ray.get([p[0] for p in parts])
            df: Counter[str] = Counter()
            for _, _, d in stats:
                df.update(d)
            index_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            queries = [[t for t in tokenize(q, language, tokenizer) if t in df] for q in inputs.questions]
            df_ref, q_ref = ray.put(dict(df)), ray.put(queries)
            n_docs, total = sum(s[0] for s in stats), sum(s[1] for s in stats)
            tops = [top_remote.remote(p[1], df_ref, n_docs, total, q_ref, inputs.depth) for p in parts]
            ranked = merge_top_k(ray.get(tops), inputs.depth)
            engine._timed("retrieval (bm25)", t_all, len(inputs.questions), f"{len(parts)} shard(s)")
            return Ranking(ranked, index_seconds, (time.perf_counter() - t0) / len(inputs.questions))

        replaced = {"dense": dense, "bm25": bm25}
        return [RetrieverKind(name, fn, originals[name].summary, needs_embedder=originals[name].needs_embedder,
                              uses=originals[name].uses, build=originals[name].build)
                for name, fn in replaced.items()]

    # ---------------------------------------------------------------- the grid

    def run(
        self,
        docs: Mapping[str, str],
        questions: pd.DataFrame,
        config: Any = None,
        embedder: Any = None,
        *,
        query_embedder: Any = None,
        embedders: Mapping[str, Any] | None = None,
        llm: Any = None,
        late_embedder: Any = None,
        cache_dir: str | Path | None = None,
        show_progress: bool = True,
        progress: Callable[[Iterable[Any]], Iterable[Any]] | None = None,
    ) -> Any:
        """Run the grid as :func:`chunkwise.evaluation.grid.run_grid` does (same parameters, same
        result), with stages 1-3 of the module docstring on Ray.

        ``GridResult.n_embedded`` counts the texts the Ray stage embedded plus any the driver did
        (semantic chunkers' windows, late chunking); :attr:`stages` has each stage's time.

        Raises
        ------
        ValueError
            As :func:`~chunkwise.evaluation.grid.run_grid`.
        RuntimeError
            Without Ray (``pip install 'chunkwise[scale]'``), or when a worker fails (its error
            in the message; what finished is cached).
        """
        from chunkwise.embeddings import CachedEmbedder, EmbeddingCache, uncached_parts
        from chunkwise.evaluation.grid import DEFAULT_GRID, GridConfig, check_inputs, embedder_axis

        self.stages = []
        t_start = time.perf_counter()
        config = DEFAULT_GRID if config is None else config
        if not isinstance(config, GridConfig):
            raise ValueError("config must be a GridConfig (see GridConfig.from_toml / GridConfig.from_dict).")
        q = check_inputs(docs, questions)
        axis = embedder_axis(config, embedder, query_embedder, embedders)
        with _ray_errors():
            self._ray()

        # embedders without a content cache of their own get one in the work folder
        work_cache: Any = None

        def cached(e: Any) -> Any:
            nonlocal work_cache
            parts = uncached_parts(e) if e is not None else None
            if e is None or (parts is not None and parts[1] is not None):
                return e
            if work_cache is None:
                self._work_dir().mkdir(parents=True, exist_ok=True)
                work_cache = EmbeddingCache(self._work_dir() / "embeddings.sqlite")
            # no content cache, or one with persistence off: the vectors reach the grid through the work cache
            return CachedEmbedder(parts[0] if parts is not None else e, work_cache)

        wrapped: dict[int, Any] = {}
        axis = [a._replace(passage=wrapped.setdefault(id(a.passage), cached(a.passage)),
                           query=wrapped.setdefault(id(a.query), cached(a.query))) for a in axis]

        with _ray_errors():
            return self._stages(docs, questions, q, config, axis, embedders, llm, late_embedder, cache_dir,
                                show_progress, progress, t_start)

    def _stages(self, docs: Mapping[str, str], questions: pd.DataFrame, q: pd.DataFrame, config: Any,
                axis: list[Any], embedders: Any, llm: Any, late_embedder: Any, cache_dir: Any,
                show_progress: bool, progress: Any, t_start: float) -> Any:
        from chunkwise.chunkers.contextual import index_text
        from chunkwise.chunkers.specs import chunk_corpus
        from chunkwise.evaluation.grid import run_grid, run_kinds
        from chunkwise.retrieval.registry import retriever_kind

        self.chunk(docs, config.chunkers, cache_dir)

        needs_vectors = any(retriever_kind(u).needs_embedder for r in config.retrievers
                            for u in (r, *retriever_kind(r).uses))
        n_ray = 0
        if needs_vectors and axis[0].passage is not None:
            texts: list[str] = []
            for spec in config.chunkers:
                if spec.kind.index == "late" or spec.kind.needs != "none" or not spec.boundary_spec.kind.span_cache:
                    continue  # cut or embedded with a model, or a plugin: on the driver, inside the grid
                for name, text in docs.items():
                    texts += [index_text(c) for c in chunk_corpus(spec, name, text, None, None, cache_dir)]
            jobs: dict[int, tuple[Any, list[str]]] = {}
            for a in axis:
                jobs.setdefault(id(a.passage), (a.passage, []))[1].extend(texts)
                jobs.setdefault(id(a.query), (a.query, []))[1].extend(str(t) for t in q["question"])
            for model, items in jobs.values():
                n_ray += self.embed(model, items)

        t0 = time.perf_counter()
        counted = {id(m): m for a in axis for m in (a.passage, a.query) if m is not None}
        before = {k: getattr(m, "n_embedded", 0) for k, m in counted.items()}
        sharded = [k for k in self.sharded_rankers() if k.name in run_kinds(config)]
        if len(axis) > 1 or embedders is not None:
            models: dict[str, Any] = {"embedders": {a.label: (a.passage, a.query) for a in axis}}
        else:
            models = {"embedder": axis[0].passage, "query_embedder": axis[0].query}
        result = run_grid(docs, questions, config, **models, llm=llm, late_embedder=late_embedder,
                          rankers=sharded, cache_dir=cache_dir, show_progress=show_progress, progress=progress)
        driver = sum(int(getattr(m, "n_embedded", 0) or 0) - int(before[k] or 0) for k, m in counted.items())
        self._timed("grid on the driver (retrieval on shards, scoring)", t0, len(q), f"{driver} texts embedded here")
        return replace(result, n_embedded=n_ray + driver, seconds=time.perf_counter() - t_start)


def _unreachable(address: str, why: str) -> RuntimeError:
    """The one message for a cluster address that does not answer."""
    return RuntimeError(
        f"no Ray cluster answers at --ray-address {address} ({why}). Check that Ray runs there (`ray start --head` "
        "on that machine; `ray status` on it lists the cluster), the host name and the port (the head's GCS port, "
        "6379 by default, as host:6379; or ray://host:10001 for Ray Client; 'auto' from a machine of the cluster), "
        "and that no firewall blocks it; or leave out --ray-address to start Ray on this machine. Nothing was run.")


def _connect(ray: Any, address: str, timeout: float, kwargs: Mapping[str, Any]) -> None:
    """``ray.init(address=...)`` that gives up after ``timeout`` seconds with one message.

    Ray itself retries an unreachable address without end (its GCS client logs a line every
    few seconds), so a mistyped address would hang a CI job: a ``host:port`` address is first
    tried with a plain TCP connection (``timeout`` seconds), then Ray's handshake runs in a
    daemon thread that is given up after ``timeout`` seconds more.
    """
    import socket
    import threading

    if address != "auto":
        rest = address.split("://", 1)[1] if "://" in address else address
        host, sep, port_text = rest.rstrip("/").rpartition(":")
        if not sep:
            host, port_text = rest.rstrip("/"), ("10001" if address.startswith("ray://") else "6379")
        host = host.strip("[]")
        try:
            port = int(port_text)
        except ValueError:
            raise _unreachable(address, f"{port_text!r} is not a port number") from None
        try:
            socket.create_connection((host, port), timeout=timeout).close()
        except socket.gaierror as exc:
            raise _unreachable(address, f"the host name {host!r} does not resolve: {exc.strerror or exc}") from None
        except TimeoutError:
            raise _unreachable(address, f"no answer within {timeout:g} s") from None
        except OSError as exc:
            raise _unreachable(address, f"{exc.strerror or exc}") from None

    outcome: dict[str, Any] = {}

    def init() -> None:
        try:
            ray.init(address=address, **kwargs)
            outcome["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = exc

    import logging
    import signal
    import sys

    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
        # what ray.init does in the main thread (from another it only warns): SIGTERM exits through atexit
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
    quiet = _DropMessage("SIGTERM handler is not set")
    ray_logger = logging.getLogger("ray._private.worker")
    ray_logger.addFilter(quiet)
    try:
        worker = threading.Thread(target=init, name="ray-init", daemon=True)
        worker.start()
        worker.join(timeout)
    finally:
        ray_logger.removeFilter(quiet)
    if worker.is_alive():
        raise _unreachable(address, f"something listens there, but Ray's handshake did not finish within {timeout:g} s")
    if "error" in outcome:
        exc = outcome["error"]
        if isinstance(exc, (ConnectionError, TimeoutError, ray.exceptions.RayError)):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise _unreachable(address, f"{type(exc).__name__}: {first}") from exc
        raise exc


class _DropMessage:
    """A logging filter that drops the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def filter(self, record: Any) -> bool:
        return not str(record.getMessage()).startswith(self.prefix)


@contextmanager
def _ray_errors() -> Iterator[None]:
    """A failure inside Ray (a worker's exception, a lost node, an unreachable cluster) as a
    RuntimeError that keeps its message; what finished before it stays cached."""
    ray = _import_ray()
    try:
        yield
    except (ray.exceptions.RayError, ConnectionError) as exc:
        raise RuntimeError(f"the Ray engine stopped ({type(exc).__name__}): {exc}\nWhat finished is cached; "
                           "rerun the same command to resume.") from exc


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def run_grid_ray(docs: Mapping[str, str], questions: pd.DataFrame, config: Any = None, embedder: Any = None, *,
                 engine: RayEngine | None = None, **kwargs: Any) -> Any:
    """:func:`chunkwise.evaluation.grid.run_grid` on Ray: ``(engine or RayEngine()).run(...)``.

    Takes run_grid's parameters; ``engine`` a configured :class:`RayEngine` (cluster address,
    shards, actors). Returns the same :class:`~chunkwise.evaluation.grid.GridResult`.
    """
    return (engine or RayEngine()).run(docs, questions, config, embedder, **kwargs)
