"""Throughput of the embedded local model with llama.cpp server slots (``parallel=N``).

Takes ``--requests`` FCI-extraction requests of chapter 3 from the committed LLM cache
(``data/crud/llm_cache.sqlite``: Chinese news articles of 500-850 prompt tokens, the chapter's
most frequent generation-heavy call), caps their replies at ``--max-tokens``, and sends them
through :class:`chunkwise.llm.local.LocalLLMServer` clients, cache off, once per level of
``--levels``: llama.cpp's ``llama-server`` started with that many slots and a client with as
many requests in flight. With ``--llama-cpp-python`` it first does the same with
llama-cpp-python's server (one request at a time), the book's default. Per level it prints the
wall time, the prompt and generated tokens the server reported, generated tokens per second and
the speed-up over the first level. Every server is stopped on every path (``with`` blocks).

What it shows on two CPU cores: slots multiply the generation rate (one batched forward pass per
token for all slots), not the prompt rate, so the gain depends on the calls' mix.

Needs the ``llm`` extra, the local weights and a ``llama-server`` executable
(``make llama-server``; ``--server-binary`` or ``$CHUNKWISE_LLAMA_SERVER``).

Run: ``.venv/bin/python benchmarks/bench_local_slots.py [--requests 8] [--max-tokens 128]
[--levels 1,4] [--llama-cpp-python] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from chunkwise.llm.local import ENV_LLAMA_SERVER, LocalLLMServer
from chunkwise.llm.weights import resolve_gguf

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "data" / "crud" / "llm_cache.sqlite"
#: The FCI extraction prompt's system message starts so (chunkwise.crud.pgrag.extract).
FCI_SYSTEM = "You turn a news article into verifiable facts"


def fci_requests(n: int) -> list[list[dict[str, str]]]:
    """The first ``n`` FCI-extraction requests of the committed cache, oldest first."""
    if not CACHE.is_file():
        raise SystemExit(f"{CACHE} is missing: run from a chunkwise checkout")
    con = sqlite3.connect(f"file:{CACHE}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT request FROM responses ORDER BY created_at").fetchall()
    finally:
        con.close()
    out = []
    for (raw,) in rows:
        req = json.loads(raw) if raw else None
        msgs = req.get("messages") if isinstance(req, dict) else None
        if msgs and msgs[0].get("content", "").startswith(FCI_SYSTEM):
            out.append(msgs)
            if len(out) == n:
                return out
    raise SystemExit(f"{CACHE} holds only {len(out)} FCI requests; ask for fewer")


def run_level(server: LocalLLMServer, requests: list[Any], max_tokens: int) -> dict[str, Any]:
    with server:
        client = server.client(cache=False, max_retries=0)
        client.chat("ok", max_tokens=1)  # loads the weights into memory; not measured
        t0 = time.perf_counter()
        results = client.chat_many(requests, max_tokens=max_tokens, temperature=0.0, errors="raise")
        wall = time.perf_counter() - t0
    prompt = sum(r.get().usage.get("prompt_tokens", 0) for r in results)
    generated = sum(r.get().usage.get("completion_tokens", 0) for r in results)
    return {
        "server": server.backend,
        "slots": server.parallel,
        "requests": len(requests),
        "wall_s": round(wall, 1),
        "prompt_tokens": prompt,
        "generated_tokens": generated,
        "generated_per_s": round(generated / wall, 2),
        "requests_per_min": round(60 * len(requests) / wall, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=8, help="FCI requests per level (default 8)")
    ap.add_argument("--max-tokens", type=int, default=128, help="reply cap, tokens (default 128)")
    ap.add_argument("--levels", default="1,4", help="comma-separated llama-server slot counts (default 1,4)")
    ap.add_argument("--server-binary", default=os.environ.get(ENV_LLAMA_SERVER),
                    help=f"llama-server executable (default ${ENV_LLAMA_SERVER})")
    ap.add_argument("--llama-cpp-python", action="store_true",
                    help="first measure llama-cpp-python's server (one request at a time)")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    ap.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--levels must be comma-separated ints, got {args.levels!r}")
    if not levels or min(levels) < 1 or args.requests < 1 or args.max_tokens < 1:
        ap.error("--levels, --requests and --max-tokens need ints >= 1")
    if not args.server_binary:
        ap.error(f"no llama-server executable: pass --server-binary or set ${ENV_LLAMA_SERVER} (make llama-server)")
    requests = fci_requests(args.requests)
    weights = resolve_gguf()
    rows = []
    if args.llama_cpp_python:
        rows.append(run_level(LocalLLMServer(weights, n_threads=args.threads), requests, args.max_tokens))
    for n in levels:
        srv = LocalLLMServer(weights, n_threads=args.threads, n_ctx=4096, parallel=n, server_binary=args.server_binary)
        rows.append(run_level(srv, requests, args.max_tokens))
    base = rows[0]["generated_per_s"]
    for r in rows:
        r["speedup"] = round(r["generated_per_s"] / base, 2)
    cols = list(rows[0])
    print(f"{weights.name}, {args.threads} threads, {args.requests} FCI requests per level, "
          f"replies capped at {args.max_tokens} tokens, cache off")
    print("  ".join(f"{c:>16}" for c in cols))
    for r in rows:
        print("  ".join(f"{r[c]!s:>16}" for c in cols))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
