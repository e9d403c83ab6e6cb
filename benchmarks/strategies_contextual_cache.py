"""Fill chapter 5's committed LLM cache: contextual chunking (Contextual:200) of the small Chroma corpora.

One request per recursive chunk of 200 cl100k_base tokens, through the local model
(:class:`chunkwise.llm.OnDemandLocalClient`), documents one after the other and chunks in document
order, so that llama.cpp reuses the prompt prefix (the document block) across consecutive chunks.
The replies go to ``data/strategies/llm_cache.sqlite``; rerunning makes no request for cached chunks.

    PYTHONPATH=src nice -n 5 python benchmarks/strategies_contextual_cache.py chatlogs state_of_the_union
    PYTHONPATH=src nice -n 5 python benchmarks/strategies_contextual_cache.py --chars=12432 state_of_the_union
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from chunkwise.chunkers.specs import chunk_corpus, parse_spec
from chunkwise.datasets import load_chroma_corpora
from chunkwise.llm import LocalLLMServer, OnDemandLocalClient

ROOT = Path(__file__).resolve().parents[1]


def main(corpora: list[str], chars: int | None = None) -> None:
    spec = parse_spec("Contextual:200")
    texts = {n: t[:chars] for n, t in load_chroma_corpora(corpora).items()}
    # a long timeout: on a loaded 2-core machine the first request of a block can take minutes
    # one thread: with two OpenMP threads on an oversubscribed 2-core machine each waits for the other
    server = LocalLLMServer(n_threads=1)
    with OnDemandLocalClient(server=server, cache=str(ROOT / "data" / "strategies" / "llm_cache.sqlite"),
                             timeout=1800.0) as llm:
        for name in corpora:
            t0 = time.perf_counter()
            chunks = chunk_corpus(spec, name, texts[name], None, llm)
            st = llm.stats()
            print(f"{name}: {len(chunks)} chunks in {time.perf_counter() - t0:.0f} s; LLM calls {st['calls']}, "
                  f"from cache {st['cache_hits']}, model seconds {st['latency_s']:.0f}", flush=True)
            for c in chunks[:3]:
                print("   ", repr(c.metadata["context"][:200]), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    chars = None
    if args and args[0].startswith("--chars="):  # only the first N characters of each corpus
        chars = int(args.pop(0).split("=", 1)[1])
    main(args or ["chatlogs", "state_of_the_union"], chars)
