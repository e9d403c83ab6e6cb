"""Throughput of LLMClient.chat_many against an endpoint that serves requests concurrently.

Starts :class:`chunkwise.llm.fake_server.FakeChatServer` on 127.0.0.1 (a thread per
connection, every request answered after a fixed ``--latency`` seconds: a stand-in for a vLLM
or OpenAI endpoint with free capacity), sends the same ``--requests`` distinct prompts with
``max_concurrency`` 1, 2, 4, 8, ... (cache off, so every request is sent), and prints per level
the wall time, the requests per second, the speed-up over ``max_concurrency=1`` and the ideal
speed-up ``min(N, requests)``, plus the most requests the server saw in flight at once. The
server is stopped on every path (``with`` block).

What it shows: with N workers the client keeps N requests in flight, so throughput is close to
N times the sequential rate while the endpoint has capacity. Against llama-cpp-python's server,
which answers one request at a time, the ratio would be 1 (see ``chunkwise llm serve --help``);
llama.cpp's ``llama-server`` with slots is measured by ``bench_local_slots.py``.

Run: ``.venv/bin/python benchmarks/bench_llm_concurrency.py [--requests 32] [--latency 0.2]
[--levels 1,2,4,8] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from chunkwise.llm import LLMClient
from chunkwise.llm.fake_server import FakeChatServer


def run(requests: int, latency: float, levels: list[int]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with FakeChatServer(latency_s=latency) as server:
        client = LLMClient(base_url=server.base_url, model="fake-model", cache=False, timeout=60.0, max_retries=0)
        client.chat("warm-up")  # opens the first connection; not measured
        base_rate = None
        for n in levels:
            server.reset()
            prompts = [f"request {i} at concurrency {n}" for i in range(requests)]
            t0 = time.perf_counter()
            results = client.chat_many(prompts, max_concurrency=n, errors="raise")
            wall = time.perf_counter() - t0
            assert [r.get().text for r in results] == [f"echo: {p}" for p in prompts]
            rate = requests / wall
            base_rate = rate if base_rate is None else base_rate
            rows.append({
                "max_concurrency": n,
                "requests": requests,
                "wall_s": round(wall, 3),
                "requests_per_s": round(rate, 2),
                "speedup": round(rate / base_rate, 2),
                "ideal": min(n, requests) / min(levels[0], requests),
                "max_in_flight": server.max_in_flight,
            })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=32, help="distinct prompts per level (default 32)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds the fake server waits per request (default 0.2)")
    ap.add_argument("--levels", default="1,2,4,8", help="comma-separated max_concurrency values; the first is the baseline")
    ap.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--levels must be comma-separated ints, got {args.levels!r}")
    if not levels or min(levels) < 1:
        ap.error("--levels needs ints >= 1")
    if args.requests < 1 or not args.latency > 0:
        ap.error("--requests must be >= 1 and --latency > 0")
    rows = run(args.requests, args.latency, levels)
    cols = list(rows[0])
    print(f"fake endpoint, {args.latency:g} s per request, {args.requests} requests per level, cache off")
    print("  ".join(f"{c:>15}" for c in cols))
    for r in rows:
        print("  ".join(f"{r[c]!s:>15}" for c in cols))
    for r in rows[1:]:
        print(f"ratio {r['max_concurrency']}-way / {levels[0]}-way throughput: {r['speedup']:.2f} "
              f"(ideal {r['ideal']:g})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
