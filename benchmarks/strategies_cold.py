"""Cold costs of chapter 5's strategies on the Chroma corpora: one corpus at a time, one spec at a time.

Writes (appends to) ``data/strategies/cold_seconds.csv``: for each (spec, corpus) the seconds the
engine spent chunking and embedding (``index_seconds`` of the dense retriever), the texts the
embedder computed (``n_embedded``: 0 means the run was warm, so its seconds are not a cold cost),
and, for late chunking, the windows and MiniLM word pieces run through the encoder. Run it before
the chapter on a machine with empty caches; the chapter reads the file. Rows already in the file
are skipped, so an interrupted run resumes.

    PYTHONPATH=src nice -n 10 python benchmarks/strategies_cold.py Late:200 Sentence:200 --corpora chatlogs
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from chunkwise.chunkers import LateChunkingEmbedder
from chunkwise.datasets import load_chroma_corpora, load_chroma_questions
from chunkwise.embeddings import SentenceTransformerEmbedder
from chunkwise.evaluation.grid import GridConfig, run_grid

FIELDS = ["spec", "corpus", "index_seconds", "n_embedded", "late_windows", "late_encoder_tokens", "n_chunks",
          "load_1min", "cpus", "measured_utc"]


class CountingLate(LateChunkingEmbedder):
    """Sums ``last_stats`` over calls (one call per document)."""

    def reset(self) -> None:
        self.total = {"windows": 0, "tokens_encoded": 0}

    def embed_spans(self, text, spans):
        out = super().embed_spans(text, spans)
        for k in self.total:
            self.total[k] += self.last_stats[k]
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--corpora", nargs="+", default=["chatlogs", "state_of_the_union", "wikitexts", "pubmed", "finance"])
    ap.add_argument("--fresh-cache", action="store_true",
                    help="embed into an empty temporary cache (cold cost of specs whose vectors are already cached)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "data" / "strategies" / "cold_seconds.csv"))
    a = ap.parse_args()
    out = Path(a.out)
    done = set()
    if out.exists():
        with out.open() as f:
            # a row counts as done when it was cold (embedded something, or every chunk under --fresh-cache)
            done = {
                (r["spec"], r["corpus"]) for r in csv.DictReader(f)
                if not a.fresh_cache or int(r["n_embedded"] or 0) >= int(r["n_chunks"])
            }
    import tempfile

    tmp = tempfile.TemporaryDirectory(prefix="chunkwise-cold-")
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", show_progress_bar=False,
                                      **({"cache_dir": tmp.name} if a.fresh_cache else {}))
    late = CountingLate("all-MiniLM-L6-v2")
    texts = load_chroma_corpora(a.corpora)
    qs = load_chroma_questions(a.corpora)
    for corpus in a.corpora:
        for spec in a.specs:
            if (spec, corpus) in done:
                continue
            late.reset()
            if a.fresh_cache:  # an empty cache for every (spec, corpus): nothing shared between specs
                tmp = tempfile.TemporaryDirectory(prefix="chunkwise-cold-")
                emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", show_progress_bar=False, cache_dir=tmp.name)
                late = CountingLate("all-MiniLM-L6-v2", cache_dir=tmp.name)  # late vectors cold too
                late.reset()
            t0 = time.perf_counter()
            res = run_grid({corpus: texts[corpus]}, qs[qs["corpus"] == corpus],
                           GridConfig(chunkers=[spec], retrievers=["dense"], top_k=[5]), emb,
                           late_embedder=late, show_progress=False,
                           **({"cache_dir": Path(tmp.name) / "spans"} if a.fresh_cache else {}))
            row = res.table.iloc[0]
            rec = {"spec": spec, "corpus": corpus, "index_seconds": round(float(row["index_seconds"]), 1),
                   "n_embedded": res.n_embedded, "late_windows": late.total["windows"],
                   "late_encoder_tokens": late.total["tokens_encoded"], "n_chunks": int(row["n_chunks"]),
                   "load_1min": round(os.getloadavg()[0], 1), "cpus": os.cpu_count(),
                   "measured_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")}
            new = not out.exists()
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a", newline="") as f:
                w = csv.DictWriter(f, fieldnames=FIELDS)
                if new:
                    w.writeheader()
                w.writerow(rec)
            print(rec, f"wall {time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
