"""Fill the committed LLM cache of the LLM-based rows (chapter 5; chapter 2's once all five corpora are cached), one resumable stage at a time.

A stage is one spec on some of Chroma's corpora: ``LLM`` (Chroma's LLMSemanticChunker protocol:
50-token recursive pieces, windows of about 800 tokens, the model names the split points) or
``Contextual:200`` (a context per recursive 200-token chunk, documents in order so llama.cpp reuses
the document block's prompt). Every reply goes to ``data/strategies/llm_cache.sqlite`` as soon as
it arrives, so an interrupted stage resumes from the cache; commit the file after each stage.
Each finished stage appends one line (calls, cache hits, model seconds, prompt and generated
tokens, wall seconds) to ``data/strategies/llm_stages.csv``.

    PYTHONPATH=src python benchmarks/chroma_llm_stages.py Contextual:200 state_of_the_union chatlogs wikitexts
    PYTHONPATH=src python benchmarks/chroma_llm_stages.py LLM chatlogs state_of_the_union wikitexts

Run it at normal priority, on an otherwise idle machine if you can. llama.cpp runs on
``CHUNKWISE_LLM_THREADS`` threads (default 1): two threads are faster on an idle two-core machine,
but lose most of their speed (minutes per request, measured) as soon as anything else needs a core.
"""

from __future__ import annotations

import csv
import os
import datetime as dt
import sys
import time
from pathlib import Path

from chunkwise.chunkers.specs import chunk_corpus, parse_spec
from chunkwise.datasets import load_chroma_corpora
from chunkwise.llm import LocalLLMServer, OnDemandLocalClient

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "data" / "strategies" / "llm_cache.sqlite"
LOG = ROOT / "data" / "strategies" / "llm_stages.csv"
FIELDS = ["finished_utc", "spec", "corpus", "chunks", "llm_calls", "cache_hits", "requests", "retries", "model_seconds",
          "prompt_tokens", "completion_tokens", "wall_seconds"]


def main(spec_text: str, corpora: list[str]) -> None:
    spec = parse_spec(spec_text)
    texts = load_chroma_corpora(corpora)
    server = LocalLLMServer(n_threads=int(os.environ.get("CHUNKWISE_LLM_THREADS", "1")))
    with OnDemandLocalClient(server=server, cache=str(CACHE), timeout=1800.0) as llm:
        for name in corpora:
            llm.reset_stats()
            t0 = time.perf_counter()
            chunks = chunk_corpus(spec, name, texts[name], None, llm)
            wall = time.perf_counter() - t0
            st = llm.stats()
            row = {"finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                   "spec": spec_text, "corpus": name, "chunks": len(chunks), "llm_calls": st["calls"],
                   "cache_hits": st["cache_hits"], "requests": st["requests"], "retries": st["retries"], "model_seconds": round(st["latency_s"], 1),
                   "prompt_tokens": st.get("prompt_tokens", ""), "completion_tokens": st.get("completion_tokens", ""),
                   "wall_seconds": round(wall, 1)}
            print(row, flush=True)
            new = not LOG.exists()
            with LOG.open("a", newline="") as fh:
                w = csv.DictWriter(fh, FIELDS)
                if new:
                    w.writeheader()
                w.writerow(row)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
