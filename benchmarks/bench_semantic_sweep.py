"""The handbook chapter's whole sweep, done by chunkwise and by langchain-experimental.

chunkwise embeds each distinct sentence window once for the whole sweep and reuses the
distances for every threshold setting; a LangChain user makes one ``SemanticChunker`` call per
setting, and each call embeds every window again. Both use the same sentence-transformers
model (all-MiniLM-L6-v2, CPU) with no on-disk cache, and the same grid as the notebook's defaults.

Prints: texts embedded by each, wall time of each, the two ratios, and whether every chunking is
identical (LangChain's strings vs chunkwise's ``split_text``). Targets: >= 20x fewer embedded
texts and >= 10x less time.

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_semantic_sweep.py``.
"""

from __future__ import annotations

import argparse
import time

from chunkwise.embeddings import SentenceTransformerEmbedder
from chunkwise.experiments import handbook as hb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--buffer-sizes", type=int, nargs="+", default=[0, 1, 2, 3])
    args = parser.parse_args()

    from langchain_core.embeddings import Embeddings
    from langchain_experimental.text_splitter import SemanticChunker as LCSemanticChunker

    texts = hb.load_handbook()
    settings = hb.sweep_settings(args.buffer_sizes, hb.threshold_grid(), (None, 150))

    # One model object shared by both sides, so loading time is not part of either measurement.
    ours_embedder = SentenceTransformerEmbedder(args.model, cache_dir=False)
    model = ours_embedder.model
    model.encode(["warm-up sentence"])

    class LCEmbeddings(Embeddings):
        """What a LangChain user would pass: the same model, every call computed."""

        def __init__(self) -> None:
            self.n_embedded = 0

        def embed_documents(self, docs: list[str]) -> list[list[float]]:
            self.n_embedded += len(docs)
            return model.encode(docs).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    # chunkwise: one sweep per text, distinct windows embedded once.
    t0 = time.perf_counter()
    table, analyses, memo = hb.run_sweep(texts, ours_embedder, settings)
    t_ours = time.perf_counter() - t0
    ours_texts = {
        (name, i): [c.metadata["joined_text"] for c in analyses[(name, i)].chunks]
        for name in texts
        for i in range(len(settings))
    }

    # LangChain: one SemanticChunker call per (text, setting), as a user would write it.
    lc_emb = LCEmbeddings()
    t0 = time.perf_counter()
    lc_texts = {}
    for name, text in texts.items():
        for i, s in enumerate(settings):
            chunker = LCSemanticChunker(
                lc_emb,
                buffer_size=s["buffer_size"],
                breakpoint_threshold_type=s["breakpoint_threshold_type"],
                breakpoint_threshold_amount=s["breakpoint_threshold_amount"],
                min_chunk_size=s["min_chunk_size"],
            )
            lc_texts[(name, i)] = chunker.split_text(text.text.strip())
    t_lc = time.perf_counter() - t0

    # chunkwise drops LangChain's empty final piece when a file ends in a newline, so LangChain
    # is given the stripped text (identical sentences).
    ours_stripped = {}
    for name, text in texts.items():
        stripped = text.text.strip()
        for i, (s, an) in enumerate(hb.semantic_sweep(stripped, memo, settings)):
            ours_stripped[(name, i)] = [c.metadata["joined_text"] for c in an.chunks]
    identical = sum(ours_stripped[k] == lc_texts[k] for k in lc_texts)
    same_as_file = sum(ours_texts[k] == lc_texts[k] for k in lc_texts)

    n_runs = len(lc_texts)
    print(f"sweep: {len(settings)} settings x {len(texts)} texts = {n_runs} chunkings, model {args.model}")
    print(f"{'':28s}{'chunkwise':>12s}{'langchain':>12s}{'ratio':>10s}")
    print(f"{'texts embedded':28s}{memo.n_embedded:>12d}{lc_emb.n_embedded:>12d}{lc_emb.n_embedded / max(memo.n_embedded, 1):>9.1f}x")
    print(f"{'wall time (s)':28s}{t_ours:>12.2f}{t_lc:>12.2f}{t_lc / t_ours:>9.1f}x")
    print(f"identical chunkings: {identical} of {n_runs} (same text); {same_as_file} of {n_runs} on the raw files")
    ok = identical == n_runs and lc_emb.n_embedded >= 20 * memo.n_embedded and t_lc >= 10 * t_ours
    print("targets (>= 20x fewer texts, >= 10x less time, all identical):", "met" if ok else "NOT met")
    return 0 if identical == n_runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
