"""Fill chapter 4's committed LLM cache: generated questions over Chroma's five corpora.

Runs :func:`chunkwise.experiments.questions.generate_questions` on chapter 4's passages (seed 0,
1,000-character passages, round robin over the corpora, all-MiniLM-L6-v2 near-duplicate filter at
0.85), through the local model and ``data/own/llm_cache.sqlite``. Arguments: N REPAIRS [MARGIN [MODE
[PREVIOUS]]]; MODE defaults to copy and PREVIOUS to 3 (Chroma's method, the first rows of the
keep-rate table in ``data/own/README.md``); chapter 4's run is ``95 2 0 sentence_numbers 0``. Every reply is cached as it
arrives, so an interrupted run resumes; a larger ``n`` asks only for the new candidates.

    PYTHONPATH=src python benchmarks/own_questions_cache.py 27 0       # copy mode, 3 earlier questions shown
    PYTHONPATH=src python benchmarks/own_questions_cache.py 27 2 200   # the same passages, 2 repairs, 200-char margin
    PYTHONPATH=src python benchmarks/own_questions_cache.py 27 0 0 sentence_numbers  # numbered sentences
    PYTHONPATH=src python benchmarks/own_questions_cache.py 27 2 0 sentence_numbers 0  # no earlier questions shown
    PYTHONPATH=src python benchmarks/own_questions_cache.py 95 2 0 sentence_numbers 0  # chapter 4's run: 74 kept

Prints the keep rate and the drops by reason, and appends one line to ``data/own/generation_runs.csv``.
"""

from __future__ import annotations

import csv
import os
import datetime as dt
import sys
import time
from pathlib import Path

from chunkwise.datasets import load_chroma_corpora
from chunkwise.embeddings import SentenceTransformerEmbedder
from chunkwise.experiments.questions import generate_questions
from chunkwise.llm import LocalLLMServer, OnDemandLocalClient

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ["state_of_the_union", "wikitexts", "chatlogs", "finance", "pubmed"]
LOG = ROOT / "data" / "own" / "generation_runs.csv"


def main(n: int, content_repairs: int, margin: int, excerpt_mode: str = "copy", n_previous: int = 3) -> None:
    texts = load_chroma_corpora(CORPORA)
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", show_progress_bar=False)
    t0 = time.perf_counter()
    with OnDemandLocalClient(server=LocalLLMServer(n_threads=int(os.environ.get("CHUNKWISE_LLM_THREADS", "1"))), cache=str(ROOT / "data" / "own" / "llm_cache.sqlite"),
                             timeout=1800.0) as llm:
        result = generate_questions(texts, n, llm, embedder, seed=0, window_chars=1000, allocation="equal",
                                    dedup_threshold=0.85, content_repairs=content_repairs,
                                    excerpt_margin_chars=margin, excerpt_mode=excerpt_mode,
                                    n_previous=n_previous,
                                    progress=lambda line: print(line, flush=True))
    wall = time.perf_counter() - t0
    st = result.llm_stats
    print(result.describe(), flush=True)
    row = {"finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "candidates": n,
           "content_repairs": content_repairs, "excerpt_margin_chars": margin,
           "excerpt_mode": excerpt_mode, "n_previous": n_previous, "kept": len(result.questions),
           **{f"dropped_{k}": v for k, v in result.dropped.items()},
           "llm_calls": st["calls"], "cache_hits": st["cache_hits"], "model_seconds": round(st["latency_s"], 1),
           "wall_seconds": round(wall, 1)}
    print(row, flush=True)
    rows = []
    if LOG.exists():
        with LOG.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    for old in rows:  # lines written before the column existed were all made in copy mode
        old.setdefault("excerpt_mode", "copy")
        old.setdefault("n_previous", 3)
    with LOG.open("w", newline="") as fh:
        w = csv.DictWriter(fh, list(row))
        w.writeheader()
        w.writerows([{k: old.get(k, "") for k in row} for old in rows] + [row])

if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5, 6):
        sys.exit(__doc__)
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) >= 4 else 0,
         sys.argv[4] if len(sys.argv) >= 5 else "copy", int(sys.argv[5]) if len(sys.argv) == 6 else 3)
