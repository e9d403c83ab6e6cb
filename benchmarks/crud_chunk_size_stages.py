"""Fill the committed CRUD-RAG LLM cache for the chunk-size sweep (issue 42), one resumable stage at a time.

CRUD-RAG (Lyu et al., 2024, arXiv 2401.17043) varies the chunk size of its retrieval corpus and
scores the answers by BLEU, ROUGE-L, BERTScore and RAGQuestEval. This script runs that sweep with
chapter 3's harness on its one-document items (the 50 of the mirror), its pool of articles
(``data/crud/pool_bm25_top2.json``), its local generator and its committed caches: for one chunk
size (cl100k_base tokens, no overlap, CRUD-RAG's sentence-packing rule) it chunks the pool,
retrieves ``top_k`` = 8 chunks per question with each method, generates the answers, then scores
them. Every LLM reply goes to ``data/crud/llm_cache.sqlite`` as soon as it arrives and every new
e5 vector to ``data/crud/embeddings``, so an interrupted stage resumes from the caches; commit both
after each stage. Chunk size 128 is chapter 3's own setting: its stage must make no new request.

A stage is ``generate`` (the answers: one LLM call per item and method) or ``score`` (BLEU,
ROUGE-L, the embedding cosine and RAGQuestEval, :data:`chunkwise.crud.chunk_size.SWEEP_METRICS`;
RAGQuestEval answers the benchmark's questions from each generated
text, one LLM call per answer). Each finished stage appends a line (stage, chunk size, methods,
items, LLM calls, cache hits, requests, model seconds, prompt / completion tokens, wall seconds)
to ``data/crud/chunk_size_stages.csv``; ``score`` also writes the per-item scores to
``data/crud/chunk_size_scores_<size>.csv`` (the table a chapter section will read).

    PYTHONPATH=src python benchmarks/crud_chunk_size_stages.py generate 64
    PYTHONPATH=src python benchmarks/crud_chunk_size_stages.py score 64 --methods bm25 dense

Run it at normal priority, on an otherwise idle machine if you can; llama.cpp runs on
``CHUNKWISE_LLM_THREADS`` threads (default 1).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CRUD = ROOT / "data" / "crud"
LOG = CRUD / "chunk_size_stages.csv"
TASK = "questanswer_1doc"
POOL_TASKS = ("questanswer_1doc", "questanswer_2docs", "questanswer_3docs")
FIELDS = ["finished_utc", "stage", "chunk_size_tokens", "methods", "items", "chunks", "llm_calls", "cache_hits",
          "requests", "model_seconds", "prompt_tokens", "completion_tokens", "wall_seconds"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=("generate", "score"))
    ap.add_argument("chunk_size", type=int, help="chunk size in cl100k_base tokens (CRUD-RAG's default: 128)")
    ap.add_argument("--methods", nargs="+", default=["bm25", "dense"], choices=("bm25", "dense", "hybrid"),
                    help="retrievers (default: bm25 dense)")
    ap.add_argument("--top-k", type=int, default=8, help="chunks per question (CRUD-RAG's default 8)")
    ap.add_argument("--n-items", type=int, default=None, help="first N one-document items (default: all 50)")
    args = ap.parse_args(argv)
    if args.chunk_size < 16:
        ap.error(f"chunk_size must be at least 16 tokens, got {args.chunk_size}")
    if args.n_items is not None and args.n_items < 1:
        ap.error(f"--n-items must be positive, got {args.n_items}")
    if args.top_k < 1:
        ap.error(f"--top-k must be positive, got {args.top_k}")

    from chunkwise.crud import experiment as crud
    from chunkwise.crud.chunk_size import run_sweep
    from chunkwise.crud.embedders import make_dense_embedders
    from chunkwise.llm import OnDemandLocalClient

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # chapter 3's pool: every question of its three tasks, top 2 BM25 articles each (the committed
        # membership file matches only that item set); the sweep answers the one-document items
        pool_items = crud.load_items(list(POOL_TASKS), None, source="mirror")
        pool_file = CRUD / "pool_bm25_top2.json"
        committed = pool_file.read_bytes()
        pool = crud.build_pool(pool_items, 2, pool_file=pool_file, add_gold=False)
        if pool_file.read_bytes() != committed:
            pool_file.write_bytes(committed)
            raise SystemExit(f"the pool did not match {pool_file.name} (restored): chapter 3's items or "
                             "data changed; rerun chapter 3 first")
        items = [i for i in pool_items if i["task"] == TASK][: args.n_items]
        passage_emb, query_emb, dense_label = make_dense_embedders("auto", cache_dir=CRUD / "embeddings")
    llm = OnDemandLocalClient(cache=CRUD / "llm_cache.sqlite")
    print(f"{len(items)} items, pool {len(pool)} articles; dense: {dense_label}; generator: {llm.model_identity}",
          flush=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sweep = run_sweep(items, pool, llm, [args.chunk_size], retrievers=list(args.methods), top_k=args.top_k,
                          dense=(query_emb, passage_emb), score_embedder=passage_emb,
                          score=args.stage == "score", checkpoint=crud.default_checkpoint(), show_progress=True)
    n_chunks = int(sweep.configs["chunks"].iloc[0])
    print(f"{n_chunks} chunks of <= {args.chunk_size} tokens", flush=True)
    if args.stage == "score":
        scores = sweep.scores.copy()
        scores.insert(3, "chunk_size_tokens", args.chunk_size)
        out = CRUD / f"chunk_size_scores_{args.chunk_size}.csv"
        scores.to_csv(out, index=False)
        print(f"wrote {out.relative_to(ROOT)}", flush=True)
        cols = [c for c in scores.columns if c.startswith(("bleu", "rouge", "quest", "embedding"))]
        print((100 * scores.groupby("method")[cols].mean()).round(2).to_string())
    st = llm.stats()
    row = {
        "finished_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "stage": args.stage, "chunk_size_tokens": args.chunk_size, "methods": " ".join(args.methods),
        "items": len(items), "chunks": n_chunks, "llm_calls": st["calls"], "cache_hits": st["cache_hits"],
        "requests": st["requests"], "model_seconds": round(st["latency_s"], 1),
        "prompt_tokens": st["prompt_tokens"], "completion_tokens": st["completion_tokens"],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    new = not LOG.exists()
    with LOG.open("a", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
