"""Texts embedded by the grid engine vs by a per-cell pipeline, for one grid.

A per-cell pipeline treats every cell (chunker x retriever x top_k) as its own experiment:
it chunks the documents (a semantic chunker embeds their sentences to do so), embeds every
chunk, embeds every question, and retrieves k chunks. The engine
(:func:`chunkwise.evaluation.grid.run_grid`) chunks and embeds each chunking once, embeds the
questions once, and reuses the rankings for every retriever and every k.

Both sides use the same counting embedder (deterministic pseudo-random unit vectors from a hash
of the text, so no model runs and the count is exact): the engine's embedder sits behind a
:class:`chunkwise.embeddings.CachedEmbedder` without persistent cache (what every chunkwise
embedder does within a run), the per-cell pipeline calls the model for every text it meets.
Chunk-span caches are disabled on both sides (a fresh temporary folder per cell for the
per-cell pipeline, one for the engine).

Prints, per side, the texts sent to the model, and their ratio. (Wall time is not compared
here: without a model it measures only bookkeeping; with a real model embedding dominates and
scales with the texts embedded.)

Run: ``.venv/bin/python benchmarks/bench_grid_embedding.py [--docs D --questions Q] [--config grid.toml]``
(default: the example garden folder with the default grid of ``chunkwise evaluate``;
``--chroma [CORPUS ...]`` uses Chroma corpora, e.g. ``--chroma pubmed`` (117k cl100k_base tokens,
99 questions), and their questions instead).
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time

import numpy as np

from chunkwise.datasets.local import load_documents, read_questions, validate_questions
from chunkwise.embeddings import CachedEmbedder
from chunkwise.evaluation.grid import DEFAULT_GRID, GridConfig, run_grid
from chunkwise.chunkers.specs import chunk_corpus


class CountingEmbedder:
    """Unit vectors seeded by the sha256 of each text; counts every text it embeds."""

    name = "bench-counting-embedder"

    def __init__(self, dim: int = 32) -> None:
        self.dim = dim
        self.n_texts = 0

    def embed(self, texts):
        self.n_texts += len(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


def per_cell(docs, questions, config: GridConfig) -> tuple[int, float]:
    """Texts embedded (and seconds, bookkeeping only) when every cell is run on its own."""
    from chunkwise.retrieval import BM25Retriever, top_k_cosine

    model = CountingEmbedder()
    texts_q = list(questions["question"])
    t0 = time.perf_counter()
    for spec in config.chunkers:
        for retriever in config.retrievers:
            for k in config.top_k:
                with tempfile.TemporaryDirectory() as tmp:
                    chunks = [c for name, text in docs.items() for c in chunk_corpus(spec, name, text, model, None, tmp)]
                texts = [c.text for c in chunks]
                if retriever in ("dense", "hybrid"):
                    top_k_cosine(model.embed(texts_q), model.embed(texts), k)
                if retriever in ("bm25", "hybrid"):
                    bm25 = BM25Retriever(
                        [(str(i), t) for i, t in enumerate(texts)], language=config.language, tokenizer=config.tokenizer
                    )
                    for q in texts_q:
                        bm25.retrieve(q, k)
    return model.n_texts, time.perf_counter() - t0


def engine(docs, questions, config: GridConfig) -> tuple[int, float]:
    model = CountingEmbedder()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run_grid(docs, questions, config, CachedEmbedder(model, None), cache_dir=tmp, show_progress=False)
    return model.n_texts, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", default="data/examples/garden/docs")
    ap.add_argument("--questions", default="data/examples/garden/questions.jsonl")
    ap.add_argument("--config", default=None, help="grid TOML (default: the default grid of chunkwise evaluate)")
    ap.add_argument("--chroma", nargs="*", default=None, metavar="CORPUS",
                    help="Chroma corpora (default all five) and their questions instead of --docs/--questions")
    args = ap.parse_args()
    if args.chroma is not None:
        from chunkwise.datasets import load_chroma_corpora, load_chroma_questions

        docs = load_chroma_corpora(args.chroma or None)
        questions = load_chroma_questions().rename(columns={"corpus": "corpus_id"})
        questions = questions[questions["corpus_id"].isin(list(docs))].reset_index(drop=True)
    else:
        docs = load_documents(args.docs)
        questions = validate_questions(docs, read_questions(args.questions)).questions
    config = GridConfig.from_toml(args.config)[0] if args.config else DEFAULT_GRID
    print(f"grid: {config.describe()}")
    print(f"documents: {len(docs)} ({sum(map(len, docs.values()))} characters), questions: {len(questions)}")
    n_engine, s_engine = engine(docs, questions, config)
    n_cell, s_cell = per_cell(docs, questions, config)
    print(f"{'pipeline':<10} {'texts embedded':>15}")
    print(f"{'per cell':<10} {n_cell:>15}")
    print(f"{'engine':<10} {n_engine:>15}")
    print(f"ratio (per cell / engine): {n_cell / max(n_engine, 1):.1f}x more texts embedded by the per-cell pipeline")


if __name__ == "__main__":
    main()
