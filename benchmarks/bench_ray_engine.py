"""The evaluation grid in one process against the same grid on Ray, on this machine.

Question: what does the Ray engine (``chunkwise evaluate --engine ray``,
:class:`chunkwise.evaluation.distributed.RayEngine`) cost or save on one small machine, where
nothing is gained from more hardware? Both engines run one grid on Chroma corpora with
all-MiniLM-L6-v2, each from empty caches of its own (chunk spans, BM25 indexes, embeddings), in
turns: local, Ray, then each once more with its caches warm. Ray starts locally with
``--cpus`` CPUs (its start-up is timed separately: a cluster pays it once, not per grid).
The two results must be identical cell by cell and question by question (timing columns
aside); the script stops if they are not.

Prints one row per run: wall seconds, texts embedded, and for Ray the seconds of each stage;
then Ray's wall time as a multiple of the local engine's, cold and warm, and the load average
(other work on the machine slows both; the ratio moves less than the seconds).

Run: ``.venv/bin/python benchmarks/bench_ray_engine.py`` (needs the ``scale`` extra and the data
mirror in ``$CHUNKWISE_DATA_MIRROR``). About 5-10 minutes on two cores with the defaults.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

TIMED = ["index_seconds", "query_ms", "llm_seconds"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpora", default="state_of_the_union,chatlogs", help="Chroma corpora (comma-separated)")
    ap.add_argument("--chunkers", default="TokenText:200,Recursive:200,Recursive:400:100")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray start")
    ap.add_argument("--device", default="cpu", help="torch device of the embedding model, e.g. cuda (driver and actors)")
    ap.add_argument("--gpus-per-actor", type=float, default=0.0, help="GPUs per Ray embedding actor (with --device cuda)")
    ap.add_argument("--actors", type=int, default=None, help="embedding actors (default: one per CPU)")
    args = ap.parse_args()

    import ray

    from chunkwise.datasets.chroma import load_chroma_corpora, load_chroma_questions
    from chunkwise.embeddings import SentenceTransformerEmbedder
    from chunkwise.evaluation.distributed import RayEngine
    from chunkwise.evaluation.grid import GridConfig, run_grid

    corpora = args.corpora.split(",")
    docs = load_chroma_corpora(corpora)
    questions = load_chroma_questions(corpora)
    config = GridConfig.from_dict({"chunkers": args.chunkers.split(","), "retrievers": ["dense", "bm25", "hybrid"],
                                   "top_k": [1, 5, 10]})
    print(f"grid: {config.describe()}; {len(docs)} corpora, {sum(map(len, docs.values())):,} characters, "
          f"{len(questions)} questions; all-MiniLM-L6-v2 on {args.device}; Ray with {args.cpus} CPUs")
    root = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    t0 = time.perf_counter()
    ray.init(num_cpus=args.cpus, num_gpus=1 if args.gpus_per_actor else 0, include_dashboard=False,
             log_to_driver=False, logging_level=logging.WARNING)
    start_s = time.perf_counter() - t0
    rows, results = [], {}
    try:
        for temperature in ("cold", "warm"):
            for name in ("local", "ray"):
                where = root / name
                embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device=args.device, cache_dir=where)
                t0 = time.perf_counter()
                if name == "local":
                    result = run_grid(docs, questions, config, embedder, cache_dir=where / "spans",
                                      show_progress=False)
                    stages = ""
                else:
                    engine = RayEngine(work_dir=where / "ray", num_gpus=args.gpus_per_actor, embed_actors=args.actors)
                    result = engine.run(docs, questions, config, embedder, cache_dir=where / "spans",
                                        show_progress=False)
                    merged: dict[str, float] = {}
                    for st in engine.stages:
                        merged[st.stage] = merged.get(st.stage, 0.0) + st.seconds
                    stages = "; ".join(f"{k} {v:.1f} s" for k, v in merged.items())
                wall = time.perf_counter() - t0
                rows.append({"engine": name, "caches": temperature, "wall_s": round(wall, 1),
                             "texts_embedded": result.n_embedded, "stages": stages})
                results[(name, temperature)] = result
                print(rows[-1], flush=True)
    finally:
        ray.shutdown()
    for temperature in ("cold", "warm"):
        a, b = results[("local", temperature)], results[("ray", temperature)]
        pd.testing.assert_frame_equal(a.table.drop(columns=TIMED, errors="ignore"),
                                      b.table.drop(columns=TIMED, errors="ignore"))
        pd.testing.assert_frame_equal(a.per_question, b.per_question)
    table = pd.DataFrame(rows)
    print(f"\nRay start-up (ray.init, {args.cpus} CPUs): {start_s:.1f} s, not in the rows below")
    print(table.to_string(index=False))
    w = table.set_index(["engine", "caches"])["wall_s"]
    print(f"\nRay / local wall time: cold {w['ray', 'cold'] / w['local', 'cold']:.2f}x, "
          f"warm {w['ray', 'warm'] / w['local', 'warm']:.2f}x; identical tables and per-question scores")
    print(f"load average (1, 5, 15 min): {os.getloadavg()}")


if __name__ == "__main__":
    main()
