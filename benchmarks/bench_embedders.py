"""Encoding speed of the two offline English embedders: all-MiniLM-L6-v2 against all-mpnet-base-v2.

Question: how much more does mpnet (110M parameters, 768-d, 384-word-piece window) cost per text
than MiniLM (22M, 384-d, 256) on chunk-sized text? Both models encode the same texts, cut from the
Chroma report's five corpora (``<mirror>/chroma/corpora/*.md``): ``--n`` pieces of about
``--chars`` characters (whole words), spread evenly over each corpus. PyTorch on the CPU with
``--threads`` threads, batch size 64, no embedding cache; both models are loaded and warmed up on
one batch first, then timed in turns (``--repeats`` rounds, each model once per round, so load
from other work hits both alike); the best round of each counts. About 2-3 minutes here.

Prints, for each model: its window, the texts' mean length in its own word pieces and how many
exceed the window (those are truncated), texts/s and the process's CPU seconds; then mpnet's cost
as a multiple of MiniLM's, in wall time and in CPU time (the CPU-time ratio moves less when other
work shares the machine; the load average is printed to show whether it did).

Run: ``.venv/bin/python benchmarks/bench_embedders.py`` (the data mirror from
``$CHUNKWISE_DATA_MIRROR``, or ``--corpora DIR``; mpnet needs the ``embedders`` extra).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from chunkwise._env import data_mirror
from chunkwise.embeddings import make_embedder


def cut_texts(corpora: list[Path], n: int, chars: int) -> list[str]:
    """``n`` pieces of about ``chars`` characters (whole words), spread evenly over the corpora."""
    per = [n // len(corpora) + (1 if i < n % len(corpora) else 0) for i in range(len(corpora))]
    texts: list[str] = []
    for path, k in zip(corpora, per):
        body = " ".join(path.read_text(encoding="utf-8").split())
        if len(body) < chars * k:
            raise ValueError(f"{path} has {len(body)} characters, too few for {k} pieces of {chars}")
        starts = np.linspace(0, len(body) - chars - 1, k).astype(int)
        for s in starts:
            a = body.rfind(" ", 0, s) + 1  # start and end on word boundaries
            b = body.rfind(" ", a, a + chars + 1)
            texts.append(body[a : b if b > a else a + chars])
    return texts


def bench(names: list[str], texts: list[str], repeats: int) -> list[dict]:
    """Load and warm up every model, then time them in turns (round r: each model once), so a
    load that comes and goes on the machine hits both alike; the best round of each counts."""
    embs = [make_embedder(name, cache_dir=False, batch_size=64) for name in names]
    models = [emb.model for emb in embs]  # loaded outside the timing
    for model in models:
        model.encode(texts[:64], batch_size=64)  # warm-up
    best = [float("inf")] * len(names)
    cpu = [float("inf")] * len(names)
    dims = [0] * len(names)
    for _ in range(repeats):
        for i, model in enumerate(models):
            t0, c0 = time.perf_counter(), time.process_time()
            vecs = model.encode(texts, batch_size=64, convert_to_numpy=True)
            best[i] = min(best[i], time.perf_counter() - t0)
            cpu[i] = min(cpu[i], time.process_time() - c0)
            dims[i] = vecs.shape[1]
    rows = []
    for name, emb, dim, seconds, cpu_s in zip(names, embs, dims, best, cpu):
        counts = emb.token_counts(texts)
        rows.append({
            "name": name, "dim": dim, "window": emb.max_tokens, "mean_tokens": float(counts.mean()),
            "over": int((counts > emb.max_tokens).sum()), "seconds": seconds, "rate": len(texts) / seconds,
            "cpu_s": cpu_s,
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", type=Path, default=None, help="folder of the Chroma corpora (*.md)")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--chars", type=int, default=900)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    folder = args.corpora or ((data_mirror() or Path("data")) / "chroma" / "corpora")
    corpora = sorted(folder.glob("*.md"))
    if not corpora:
        parser.error(f"no *.md corpora in {folder}; pass --corpora or set CHUNKWISE_DATA_MIRROR")
    texts = cut_texts(corpora, args.n, args.chars)
    lengths = [len(t) for t in texts]
    print(f"{len(texts)} texts from {len(corpora)} corpora in {folder}: {min(lengths)}-{max(lengths)} characters, "
          f"mean {np.mean(lengths):.0f}; torch {torch.__version__}, {args.threads} threads, "
          f"{platform.processor() or platform.machine()}, best of {args.repeats}")
    load_before = os.getloadavg()[0]
    rows = bench(["all-MiniLM-L6-v2", "all-mpnet-base-v2"], texts, args.repeats)
    load_after = os.getloadavg()[0]
    for r in rows:
        print(f"{r['name']:<18} {r['dim']:>4}-d window {r['window']:>3}  mean {r['mean_tokens']:6.1f} word pieces, "
              f"{r['over']:>3} over the window   {r['seconds']:6.2f} s  {r['rate']:7.1f} texts/s  "
              f"({r['cpu_s']:6.1f} CPU s)")
    mini, mpnet = rows
    print(f"mpnet costs {mini['rate'] / mpnet['rate']:.2f}x MiniLM's time per text (MiniLM {mini['rate']:.1f}, "
          f"mpnet {mpnet['rate']:.1f} texts/s); {mpnet['cpu_s'] / mini['cpu_s']:.2f}x its CPU time")
    print(f"1-minute load average {load_before:.2f} before, {load_after:.2f} after ({os.cpu_count()} CPUs): "
          "well above the thread count means other work shared the CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
