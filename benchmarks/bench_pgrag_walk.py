"""PG-RAG matrix walk vs. the depth-first reference, on a random forest of 10,000 fact paths.

Builds random mind maps (topic -> routes -> facts, depth up to ``--depth``, 1-4 children per
node) until there are ``--paths`` root-to-leaf paths, with ``--dim``-d unit embeddings where each
child is its parent plus Gaussian noise (``--noise`` per coordinate, renormalised), so the walk
climbs above the facts on some anchors and stops on others. KPs are noisy copies of random fact
embeddings. For each KP count it times

* ``matrix_walk`` (vectorised numpy: similarity, control, path, dyeing matrices, aggregation),
* ``dfs_walk`` (plain recursive Python over the same trees, same rules),

checks that both select the same paths with the same scores (and the same anchors and
sub-roots), and prints both times and their ratio. Times are the best of ``--repeat`` runs; the
:class:`PathTable` (validation, index of paths per node) is built once, outside the timings.
BLAS runs on one thread unless ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``)
is set. The last two columns describe the walks: the share of anchors whose walk climbs above
their fact, and the mean number of paths under a sub-root (rows of a path matrix).

Run: ``.venv/bin/python benchmarks/bench_pgrag_walk.py [--paths 10000] [--kps 1,4,16]``.
"""

from __future__ import annotations

import argparse
import os
import time

# One BLAS thread unless the caller says otherwise: both walks are then single-threaded (the
# reference is plain Python), and on a busy machine a second BLAS thread that has to wait for a
# core costs milliseconds per matrix product.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from chunkwise.crud.pgrag.walk import (  # noqa: E402
    AMBIGUOUS_THRESHOLD_CODE,
    AMBIGUOUS_THRESHOLD_PAPER,
    SUPPORT_THRESHOLD_CODE,
    SUPPORT_THRESHOLD_PAPER,
    TOP_N,
    PathTable,
    WalkResult,
    dfs_walk,
    matrix_walk,
)

THRESHOLDS = {
    "code": (SUPPORT_THRESHOLD_CODE, AMBIGUOUS_THRESHOLD_CODE),
    "paper": (SUPPORT_THRESHOLD_PAPER, AMBIGUOUS_THRESHOLD_PAPER),
}


def random_forest(
    rng: np.random.Generator, n_paths: int, dim: int, depth: int, noise: float
) -> tuple[list[list[int]], np.ndarray]:
    """Topics with random subtrees until ``n_paths`` root-to-leaf paths exist (extra ones dropped)."""
    vecs: list[np.ndarray] = []
    paths: list[list[int]] = []

    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.linalg.norm(v)

    def grow(vec: np.ndarray, prefix: list[int], level: int) -> None:
        node = len(vecs)
        vecs.append(vec)
        here = prefix + [node]
        if level == depth - 1 or (level > 0 and rng.random() < 0.25):
            paths.append(here)
            return
        for _ in range(int(rng.integers(1, 5))):
            grow(unit(vec + noise * rng.standard_normal(dim)), here, level + 1)

    while len(paths) < n_paths:
        grow(unit(rng.standard_normal(dim)), [], 0)
    return paths[:n_paths], np.array(vecs, dtype=np.float32)


def best_of(repeat: int, fn):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def same(a: WalkResult, b: WalkResult) -> bool:
    return (
        np.array_equal(a.paths, b.paths)
        and np.allclose(a.scores, b.scores, rtol=1e-9, atol=1e-12)
        and np.allclose(a.path_scores, b.path_scores, rtol=1e-9, atol=1e-12)
        and np.array_equal(a.anchors, b.anchors)
        and np.array_equal(a.sub_roots, b.sub_roots)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--noise", type=float, default=0.01)
    parser.add_argument("--kps", type=str, default="1,4,16")
    parser.add_argument("--top-n", type=int, default=TOP_N)
    parser.add_argument("--thresholds", choices=sorted(THRESHOLDS), default="code")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    paths, emb = random_forest(rng, args.paths, args.dim, args.depth, args.noise)
    t0 = time.perf_counter()
    table = PathTable.from_paths(paths, emb)
    t_table = time.perf_counter() - t0
    support, ambiguous = THRESHOLDS[args.thresholds]
    n_topics = len(np.unique(table.path_topic))
    print(
        f"{table.n_paths} fact paths under {n_topics} topics, {len(emb)} nodes, depth <= {table.max_depth}, "
        f"d={args.dim}, edge noise {args.noise}; thresholds {args.thresholds} ({support} / {ambiguous}), "
        f"top_n = anchors per KP = {args.top_n}; PathTable built in {t_table * 1e3:.1f} ms; "
        f"best of {args.repeat}; OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}"
    )

    depth_of = {int(n): j for row in table.path_nodes for j, n in enumerate(row) if n >= 0}
    all_ok = True
    print(f"{'KPs':>4}  {'matrix_walk':>12}  {'dfs_walk':>10}  {'ratio':>7}  {'identical':>9}  "
          f"{'walks above fact':>16}  {'paths/walk':>10}")
    for n_kp in (int(x) for x in args.kps.split(",")):
        leaves = table.leaf_ids[rng.choice(table.n_paths, n_kp, replace=False)]
        kp = emb[leaves].astype(np.float64) + 0.02 * rng.standard_normal((n_kp, args.dim))
        kp /= np.linalg.norm(kp, axis=1, keepdims=True)
        kw = dict(support=support, ambiguous=ambiguous, top_n=args.top_n)
        t_mat, r_mat = best_of(args.repeat, lambda: matrix_walk(kp, table, **kw))
        t_dfs, r_dfs = best_of(args.repeat, lambda: dfs_walk(kp, table, **kw))
        ok = same(r_mat, r_dfs)
        all_ok &= ok
        above = float(np.mean(r_mat.sub_roots != table.leaf_ids[r_mat.anchors]))
        under = [
            int(np.sum(table.path_nodes[:, depth_of[int(s)]] == s)) for s in r_mat.sub_roots.ravel()
        ]
        print(
            f"{n_kp:>4}  {t_mat * 1e3:9.2f} ms  {t_dfs * 1e3:7.1f} ms  {t_dfs / t_mat:6.1f}x  {str(ok):>9}  "
            f"{above:15.0%}  {np.mean(under):10.2f}"
        )
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
