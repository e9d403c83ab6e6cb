"""Where the local model's time went, from an LLM response cache, and what prompt-prefix order saves.

Reads a :class:`chunkwise.llm.LLMCache` SQLite file (default: chapter 3's committed
``data/crud/llm_cache.sqlite``). Every row holds the request, the reply's token usage
(``prompt_tokens`` and ``completion_tokens``, tokens of the model's own tokenizer) and the
latency of the original call, and ``created_at`` gives the order the calls were made in. From
these it prints:

1. **totals** -- calls, seconds, prompt and completion tokens;
2. **a least-squares fit** ``latency = a + b * prompt_tokens + c * completion_tokens`` and the
   share of the summed latency each term explains (prompt processing vs generation);
3. **prefix reuse** -- llama-cpp-python keeps the KV cache of the previous prompt and evaluates
   only the tokens after the longest common prefix. For each call, the prefix shared with the
   call before it (in characters of the concatenated ``role\\ncontent`` of the messages, turned
   into tokens with the call's own tokens-per-character ratio: an estimate) is counted as
   reused; a second fit ``latency = a + b1 * new_prompt_tokens + b2 * reused_prompt_tokens +
   c * completion_tokens`` shows whether reused tokens cost anything;
4. **ordering** -- for each kind of request (the first 60 characters of the messages: one
   prompt template, i.e. one batch of independent calls), the estimated reused tokens in the
   recorded order and when the calls of that kind are sent sorted by their messages
   (``order="prefix"`` of :meth:`chunkwise.llm.LLMClient.chat_many`), and the seconds that
   would save at the fitted cost ``b1`` per new prompt token.

Run: ``.venv/bin/python benchmarks/llm_cache_profile.py [--cache data/crud/llm_cache.sqlite]``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _text(request: dict) -> str:
    return "".join(f"{m.get('role', '')}\n{m.get('content', '')}\n" for m in request.get("messages", []))


def _lcp(a: str, b: str) -> int:
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


def _reused(order: list[int], texts: list[str], ptoks: np.ndarray) -> float:
    total, prev = 0.0, ""
    for i in order:
        total += ptoks[i] * _lcp(texts[i], prev) / max(1, len(texts[i]))
        prev = texts[i]
    return total


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    pred = x @ coef
    r2 = 1.0 - float(((y - pred) ** 2).sum()) / float(((y - y.mean()) ** 2).sum())
    return coef, r2


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=ROOT / "data" / "crud" / "llm_cache.sqlite")
    ap.add_argument("--kinds", type=int, default=8, help="request kinds to list (largest first)")
    args = ap.parse_args(argv)
    if not args.cache.is_file():
        ap.error(f"--cache {str(args.cache)!r} is not a file; give an LLM cache (SQLite) path")
    with sqlite3.connect(f"file:{args.cache}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT usage, latency_s, request FROM responses WHERE request IS NOT NULL ORDER BY created_at"
        ).fetchall()
    if len(rows) < 4:
        ap.error(f"{args.cache} holds {len(rows)} replies with their requests; need at least 4")
    texts, p, c, lat = [], [], [], []
    for usage, latency, request in rows:
        u = json.loads(usage)
        texts.append(_text(json.loads(request)))
        p.append(float(u.get("prompt_tokens", 0)))
        c.append(float(u.get("completion_tokens", 0)))
        lat.append(float(latency))
    P, C, L = np.array(p), np.array(c), np.array(lat)
    order = list(range(len(texts)))
    R = np.array([0.0] + [P[i] * _lcp(texts[i], texts[i - 1]) / max(1, len(texts[i])) for i in order[1:]])
    one = np.ones_like(P)

    print(f"cache: {args.cache}")
    print(f"calls {len(L)}, latency {L.sum():.0f} s, prompt tokens {P.sum():.0f}, completion tokens {C.sum():.0f}")
    coef, r2 = _fit(np.c_[one, P, C], L)
    print(f"fit latency = {coef[0]:.3f} + {coef[1] * 1000:.2f} ms * prompt_tokens + "
          f"{coef[2] * 1000:.1f} ms * completion_tokens   (R^2 {r2:.3f})")
    print(f"  share of the summed latency: prompt {coef[1] * P.sum() / L.sum():.1%}, "
          f"generation {coef[2] * C.sum() / L.sum():.1%}, constant {coef[0] * len(L) / L.sum():.1%}")
    coef2, r22 = _fit(np.c_[one, P - R, R, C], L)
    b_new = float(coef2[1])
    print(f"with prefix reuse: {b_new * 1000:.2f} ms per new prompt token, {coef2[2] * 1000:.2f} ms per reused "
          f"prompt token, {coef2[3] * 1000:.1f} ms per completion token   (R^2 {r22:.3f})")
    print(f"  estimated reused prompt tokens in the recorded order: {R.sum():.0f} of {P.sum():.0f} "
          f"({R.sum() / P.sum():.1%})")

    kinds: dict[str, list[int]] = {}
    for i in order:
        kinds.setdefault(texts[i][:60], []).append(i)
    print(f"\nper request kind (first 60 characters; {len(kinds)} kinds), reused prompt tokens, estimated:")
    print(f"{'calls':>6} {'prompt tok':>10} {'recorded':>9} {'sorted':>9} {'saves s':>8}  kind")
    gain_total = 0.0
    for key, idx in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        rec = _reused(idx, texts, P)
        srt = _reused(sorted(idx, key=lambda i: texts[i]), texts, P)
        gain_total += max(0.0, srt - rec)
        if len(idx) >= 2 and args.kinds > 0:
            args.kinds -= 1
            label = key.replace("\n", " ")[:48]
            print(f"{len(idx):>6} {P[idx].sum():>10.0f} {rec:>9.0f} {srt:>9.0f} {(srt - rec) * b_new:>8.0f}  {label}")
    print(f"sorting every kind's calls by their messages: +{gain_total:.0f} reused prompt tokens, "
          f"about {gain_total * b_new:.0f} s of {L.sum():.0f} s ({gain_total * b_new / L.sum():.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
