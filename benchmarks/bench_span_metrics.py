"""Batch span metrics vs. a per-question Python loop, on all questions of the Chroma mirror.

Reads ``questions_df.csv`` (472 questions, references as JSON lists of
``{content, start_index, end_index}``) and the five corpora, chunks every corpus into fixed
200-character windows, and "retrieves" 5 random chunks of the question's own corpus per
question (fixed seed). Then, for each mode (union, chroma), it times

* the batch engine, ``score_questions`` (numpy interval arithmetic, chunk tables sorted once),
* a plain loop calling ``span_scores`` (and ``precision_omega``) once per question,

checks that both give identical numbers, and prints both times and their ratio, once for the
three retrieval metrics alone and once including precision_Omega. Times are the best of
``--repeat`` runs.

Run: ``.venv/bin/python benchmarks/bench_span_metrics.py [--data PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from chunkwise.evaluation.spans import precision_omega, score_questions, span_scores

ROOT = Path(__file__).resolve().parents[1]
CHUNK_CHARS = 200
K = 5


def default_data_dir() -> Path:
    mirror = os.environ.get("CHUNKWISE_DATA_MIRROR")
    base = Path(mirror) if mirror else ROOT.parent / "shared" / "data"
    return base / "chroma"


def best_of(repeat: int, fn):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    questions = pd.read_csv(args.data / "questions_df.csv")
    questions["references"] = questions["references"].apply(json.loads)

    chunks: dict[str, list[tuple[int, int]]] = {}
    for corpus in questions["corpus_id"].unique():
        text = (args.data / "corpora" / f"{corpus}.md").read_text(encoding="utf-8")
        chunks[corpus] = [(i, min(i + CHUNK_CHARS, len(text))) for i in range(0, len(text), CHUNK_CHARS)]

    rng = np.random.default_rng(args.seed)
    retrieved = []
    for corpus in questions["corpus_id"]:
        pick = rng.choice(len(chunks[corpus]), size=K, replace=False)
        retrieved.append([chunks[corpus][int(i)] for i in pick])

    refs = [[(r["start_index"], r["end_index"]) for r in rs] for rs in questions["references"]]
    corpora = questions["corpus_id"].tolist()
    print(
        f"{len(questions)} questions, {sum(map(len, refs))} references, "
        f"{sum(map(len, chunks.values()))} chunks of {CHUNK_CHARS} chars in {len(chunks)} corpora, "
        f"{K} retrieved per question (seed {args.seed}); best of {args.repeat}"
    )

    all_ok = True
    for mode in ("union", "chroma"):

        def loop(with_omega: bool, mode=mode):
            rows = []
            for ret, rs, corpus in zip(retrieved, refs, corpora):
                s = span_scores(ret, rs, mode=mode)
                omega = precision_omega(chunks[corpus], rs, mode=mode) if with_omega else np.nan
                rows.append((s.recall, s.precision, omega, s.iou))
            return np.array(rows)

        def batch(with_omega: bool, mode=mode):
            df = score_questions(questions, retrieved, chunks if with_omega else None, mode=mode)
            return df[["recall", "precision", "precision_omega", "iou"]].to_numpy()

        for with_omega, label in ((False, "recall/precision/iou"), (True, "+ precision_omega")):
            t_loop, r_loop = best_of(args.repeat, lambda: loop(with_omega))
            t_batch, r_batch = best_of(args.repeat, lambda: batch(with_omega))
            same = np.array_equal(r_loop, r_batch, equal_nan=True)
            all_ok &= same
            print(
                f"[{mode:6s}] {label:22s} loop {t_loop * 1e3:9.2f} ms   batch {t_batch * 1e3:7.2f} ms   "
                f"ratio {t_loop / t_batch:7.1f}x   identical: {same}"
            )
        df = score_questions(questions, retrieved, chunks, mode=mode)
        means = df[["recall", "precision", "precision_omega", "iou"]].mean()
        print(f"[{mode:6s}] means: " + ", ".join(f"{k} {v:.4f}" for k, v in means.items()))

    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
