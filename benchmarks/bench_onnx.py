"""all-MiniLM-L6-v2 through ONNX Runtime against PyTorch: speed, vector difference, rankings (#46).

Question: is ``backend="onnx"`` (:mod:`chunkwise.embeddings.onnx`: the transformer exported once from the same
weights, fp32, graph optimisations on) faster than PyTorch on chunk-sized text, and does it give the
same vectors and the same ranked lists? Both backends encode the same texts in one process: ``--n``
windows of about ``--chars`` characters (whole words), spread evenly over three Chroma corpora
(state_of_the_union, chatlogs, wikitexts; the data mirror; overlapping, see :func:`cut_windows`), batch size 64, normalised, no embedding
cache, ``--threads`` threads for each (``torch.set_num_threads``; ONNX Runtime's intra-op threads
follow it). Both models are loaded first (the first ONNX load on a machine also exports the graph
into the cache root: its time is printed apart) and warmed up on one batch, then timed in turns
(``--repeats`` rounds, each backend once per round, so load from other work hits both alike); the
best round of each counts.

Prints texts/s and CPU seconds for each, the ratio, the largest absolute difference of the normalised
vectors (windows and questions), and for up to ``--questions`` Chroma questions on those corpora the
share whose ranked top-5 windows (by cosine similarity, over all windows) are identical under the
two backends, in order and as sets.

Run: ``.venv/bin/python benchmarks/bench_onnx.py`` (the data mirror from ``$CHUNKWISE_DATA_MIRROR``;
needs the ``onnx`` extra). About 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from chunkwise.datasets.chroma import load_chroma_corpora, load_chroma_questions
from chunkwise.embeddings import make_embedder

CORPORA = ("state_of_the_union", "chatlogs", "wikitexts")


def cut_windows(corpora: dict[str, str], n: int, chars: int) -> list[str]:
    """``n`` windows of about ``chars`` characters (whole words), each corpus's share in proportion to its
    length, starts spread evenly over it. The three corpora hold about 207,000 characters, so 600
    windows of 900 overlap their neighbours (a stride of about 345 characters): near-duplicate windows
    make near-ties in the rankings, a harder test of identical top-5 lists than disjoint ones."""
    bodies = {name: " ".join(text.split()) for name, text in corpora.items()}
    total = sum(len(b) for b in bodies.values())
    exact = [n * len(b) / total for b in bodies.values()]
    per = [int(x) for x in exact]
    for i in sorted(range(len(per)), key=lambda i: per[i] - exact[i])[: n - sum(per)]:
        per[i] += 1  # largest remainders
    windows: list[str] = []
    for (name, body), k in zip(bodies.items(), per):
        if len(body) <= chars:
            raise ValueError(f"{name} has {len(body)} characters, too few for a window of {chars}")
        for s in np.linspace(0, len(body) - chars - 1, k).astype(int):
            a = body.rfind(" ", 0, s) + 1  # start and end on word boundaries
            b = body.rfind(" ", a, a + chars + 1)
            windows.append(body[a : b if b > a else a + chars])
    return windows


def top5(docs: np.ndarray, queries: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :5]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--chars", type=int, default=900)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import onnxruntime
    import torch

    torch.set_num_threads(args.threads)
    windows = cut_windows(load_chroma_corpora(CORPORA), args.n, args.chars)
    questions = load_chroma_questions(CORPORA)["question"].tolist()
    if len(questions) > args.questions:  # spread evenly over the corpora's questions
        questions = [questions[i] for i in np.linspace(0, len(questions) - 1, args.questions).astype(int)]
    lengths = [len(t) for t in windows]
    print(f"{len(windows)} windows from {', '.join(CORPORA)}: {min(lengths)}-{max(lengths)} characters, "
          f"mean {np.mean(lengths):.0f}; {len(questions)} questions; torch {torch.__version__}, onnxruntime "
          f"{onnxruntime.__version__}, {args.threads} threads, {platform.processor() or platform.machine()}, "
          f"best of {args.repeats}")

    embs, models = {}, {}
    for backend in ("torch", "onnx"):
        t0 = time.perf_counter()
        embs[backend] = make_embedder("all-MiniLM-L6-v2", cache_dir=False, normalize_embeddings=True,
                                      batch_size=64, backend=backend)
        models[backend] = embs[backend].model  # loaded (and for onnx: exported or read) outside the timing
        print(f"{backend}: loaded in {time.perf_counter() - t0:.1f} s, running on {embs[backend].backend_in_use}")
        models[backend].encode(windows[:64], batch_size=64)  # warm-up
    if embs["onnx"].backend_in_use != "onnx":
        raise SystemExit("ONNX Runtime did not run (see the warning above): install the onnx extra")

    load_before = os.getloadavg()[0]
    best = {b: float("inf") for b in models}
    cpu = {b: float("inf") for b in models}
    vecs = {}
    for _ in range(args.repeats):
        for backend, model in models.items():
            t0, c0 = time.perf_counter(), time.process_time()
            vecs[backend] = model.encode(windows, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
            best[backend] = min(best[backend], time.perf_counter() - t0)
            cpu[backend] = min(cpu[backend], time.process_time() - c0)
    load_after = os.getloadavg()[0]
    qvecs = {b: m.encode(questions, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
             for b, m in models.items()}

    rate = {b: len(windows) / best[b] for b in models}
    for b in models:
        print(f"{b:<5} {best[b]:6.2f} s  {rate[b]:7.1f} texts/s  ({cpu[b]:6.1f} CPU s)")
    print(f"onnx / torch: {rate['onnx'] / rate['torch']:.2f}x the texts per second, "
          f"{cpu['onnx'] / cpu['torch']:.2f}x the CPU seconds")
    diff_w = float(np.abs(vecs["onnx"] - vecs["torch"]).max())
    diff_q = float(np.abs(qvecs["onnx"] - qvecs["torch"]).max())
    print(f"largest absolute difference of normalised vectors: {diff_w:.2g} (windows), {diff_q:.2g} (questions)")
    a, b = top5(vecs["torch"], qvecs["torch"]), top5(vecs["onnx"], qvecs["onnx"])
    same_order = float(np.mean(np.all(a == b, axis=1)))
    same_set = float(np.mean([set(x) == set(y) for x, y in zip(a, b)]))
    print(f"identical top-5 windows for {len(questions)} questions: {same_order:.1%} in order, {same_set:.1%} as sets")
    print(f"1-minute load average {load_before:.2f} before, {load_after:.2f} after ({os.cpu_count()} CPUs): "
          "well above the thread count means other work shared the CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
