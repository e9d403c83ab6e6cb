"""Embedding backends and batching side by side, in one process, interleaved (#61).

Question: how much faster than PyTorch as sentence-transformers ships it is each identical-vector way
of embedding the book's texts on this CPU, and do the vectors and ranked lists stay the same?

Rows (all all-MiniLM-L6-v2, batch 64, normalised, no embedding cache, ``--threads`` threads):

- ``torch, one call``: ``SentenceTransformer.encode`` on the whole list (its batches sorted by characters),
  the reference;
- ``torch, word-piece batches``: chunkwise's ``_STModel.embed`` on PyTorch (batches by word pieces);
- ``onnx, one call`` and ``onnx, word-piece batches``: the same through ONNX Runtime;
- the backend ``backend="auto"`` picked on this machine (its stored record is printed).

Texts: ``--n`` Chroma windows of 150 to 1,500 characters (whole words, lengths spread evenly; three
corpora from the data mirror) and every sentence of the first ``--sentences`` of them, mixed in one
list in a fixed shuffled order, as the semantic chunkers send them. Each row is timed ``--repeats``
rounds in turns, the best round counts; the ratio is against the reference's best. Prints the largest
absolute difference of the normalised vectors from the reference and the share of 200 questions whose
top-5 texts are identical, with the 1-minute load average (well above the thread count: other work
shared the CPUs and the ratios are not clean).

Run: ``.venv/bin/python benchmarks/bench_backends.py`` (about 3 minutes on 2 idle cores).
"""

from __future__ import annotations

import argparse
import os
import re
import time

import numpy as np

from chunkwise.datasets.chroma import load_chroma_corpora, load_chroma_questions
from chunkwise.embeddings import autobackend, make_embedder, padding_share, wordpiece_batches

CORPORA = ("state_of_the_union", "chatlogs", "wikitexts")


def texts_for(n: int, sentences: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    bodies = [" ".join(t.split()) for t in load_chroma_corpora(CORPORA).values()]
    body = " ".join(bodies)
    windows = []
    for i, length in enumerate(np.linspace(150, 1500, n).astype(int)):
        start = int(rng.integers(0, len(body) - length - 1))
        a = body.rfind(" ", 0, start) + 1
        b = body.rfind(" ", a, a + length + 1)
        windows.append(body[a : b if b > a else a + length])
    pieces = [s for w in windows[:sentences] for s in re.split(r"(?<=[.!?])\s+", w) if len(s) > 3]
    items = windows + pieces
    return [items[i] for i in rng.permutation(len(items))]


def top5(docs: np.ndarray, queries: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :5]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    texts = texts_for(args.n, args.sentences)
    questions = load_chroma_questions(CORPORA)["question"].tolist()
    questions = [questions[i] for i in np.linspace(0, len(questions) - 1, 200).astype(int)]
    embs = {b: make_embedder("all-MiniLM-L6-v2", cache_dir=False, normalize_embeddings=True, batch_size=64,
                             backend=b) for b in ("torch", "onnx", "auto")}
    for b, e in embs.items():
        e.model  # noqa: B018 - load (and export / measure) outside the timing
    inner = {b: e._model for b, e in embs.items()}
    lengths = np.minimum(inner["torch"].token_counts(texts), inner["torch"].max_tokens)
    char_order = np.argsort([-len(t) for t in texts], kind="stable")
    char_batches = [char_order[i : i + 64] for i in range(0, len(texts), 64)]
    print(f"{len(texts)} texts ({args.n} windows, {len(texts) - args.n} sentences), {lengths.sum()} word pieces; "
          f"padded slots: {padding_share(lengths, char_batches):.1%} sorted by characters, "
          f"{padding_share(lengths, wordpiece_batches(lengths, 64)):.1%} by word pieces; "
          f"{autobackend.cpu_model()}, {args.threads} threads, best of {args.repeats}")
    choice = embs["auto"].backend_choice
    print(f"backend='auto' chose {choice['backend']}: {choice['reason']} "
          f"({'stored' if choice.get('stored') else 'measured now'})")

    def one_call(b: str):
        return lambda items: np.asarray(embs[b].model.encode(items, batch_size=64, normalize_embeddings=True,
                                                            convert_to_numpy=True), dtype=np.float32)

    rows = {"torch, one call": one_call("torch"), "torch, word-piece batches": inner["torch"].embed,
            "onnx, one call": one_call("onnx"), "onnx, word-piece batches": inner["onnx"].embed}
    for f in rows.values():
        f(texts[:64])  # warm-up
    load_before = os.getloadavg()[0]
    best = {name: float("inf") for name in rows}
    vecs = {}
    for _ in range(args.repeats):
        for name, f in rows.items():
            t0 = time.perf_counter()
            vecs[name] = f(texts)
            best[name] = min(best[name], time.perf_counter() - t0)
    load_after = os.getloadavg()[0]
    ref = "torch, one call"
    qv = rows[ref](questions)
    ranked = top5(vecs[ref], qv)
    print(f"{'row':<27} {'best s':>7} {'texts/s':>8} {'x ref':>6} {'max |diff|':>11} {'same top-5':>10}")
    for name in rows:
        diff = float(np.abs(vecs[name] - vecs[ref]).max())
        same = float(np.mean(np.all(top5(vecs[name], qv) == ranked, axis=1)))
        print(f"{name:<27} {best[name]:7.2f} {len(texts) / best[name]:8.1f} {best[ref] / best[name]:6.2f} "
              f"{diff:11.2g} {same:10.1%}")
    print(f"1-minute load average {load_before:.2f} before, {load_after:.2f} after ({os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
