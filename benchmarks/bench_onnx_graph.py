"""The transformer alone: PyTorch against the exported graph on ONNX Runtime, plain and fused.

``benchmarks/bench_onnx.py`` times the whole embedder (``backend="torch"`` against ``"onnx"``). This
one asks whether a better graph would change the answer: it tokenises the texts once, then times
(1) sentence-transformers' ``encode`` on PyTorch, (2) the graph chunkwise exports (``chunkwise.embeddings.onnx``)
on ONNX Runtime and (3) the same graph after onnxruntime's own BERT fusion
(``onnxruntime.transformers.optimizer.optimize_model``: attention, skip-layer-norm, bias-GELU), with
mean pooling and L2 normalisation done in numpy for (2) and (3). Best of ``--repeats`` passes after
a warm-up; prints texts/s, each ratio to PyTorch and the largest difference of normalised vectors.

    PYTHONPATH=src python benchmarks/bench_onnx_graph.py [--n 300] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="900-character windows (default 300)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import onnxruntime as ort
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    from chunkwise.datasets import load_chroma_corpora
    from chunkwise.embeddings import make_embedder
    from chunkwise.embeddings import onnx as _onnx

    torch.set_num_threads(args.threads)
    corpora = load_chroma_corpora(["state_of_the_union", "wikitexts"])
    text = " ".join(corpora.values()) if isinstance(corpora, dict) else " ".join(map(str, corpora))
    texts = [text[i:i + 900] for i in range(0, 900 * args.n, 900)]
    emb = make_embedder("all-MiniLM-L6-v2", backend="onnx", cache_dir=False)
    emb.embed(texts[:2])  # loads the model and exports (or finds) its graph
    if emb.backend_in_use != "onnx":
        raise SystemExit("the onnx backend did not load (install the onnx extra: make venv)")
    st = emb._model._model  # the loaded SentenceTransformer behind the cached embedder
    plain = _onnx.onnx_model_dir(emb.name.rsplit("|", 1)[0], _onnx.state_digest(st[0].auto_model)) / "model.onnx"
    fused = Path(tempfile.mkdtemp()) / "fused.onnx"
    cfg = st[0].auto_model.config
    opt = optimize_model(str(plain), model_type="bert", num_heads=cfg.num_attention_heads,
                         hidden_size=cfg.hidden_size)
    opt.save_model_to_file(str(fused))
    fusions = {k: v for k, v in opt.get_fused_operator_statistics().items() if v}
    torch_model = make_embedder("all-MiniLM-L6-v2", backend="torch", cache_dir=False)
    torch_model.embed(texts[:2])
    st_torch = torch_model._model._model
    tok = st_torch.tokenizer
    batches = [tok(texts[i:i + 64], padding=True, truncation=True, max_length=st_torch.max_seq_length,
                   return_tensors="np") for i in range(0, len(texts), 64)]

    def pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        m = mask[..., None].astype(np.float32)
        v = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def graph_runner(path: Path):
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        return lambda: np.vstack([pool(sess.run(None, {k: b[k].astype(np.int64) for k in names})[0],
                                       b["attention_mask"]) for b in batches])

    runs = {"pytorch": lambda: st_torch.encode(texts, batch_size=64, normalize_embeddings=True),
            "onnx (chunkwise export)": graph_runner(plain),
            "onnx (fused)": graph_runner(fused)}
    timing, vectors = {}, {}
    for name, run in runs.items():
        run()
        best = float("inf")
        for _ in range(args.repeats):
            t = time.perf_counter()
            vectors[name] = np.asarray(run())
            best = min(best, time.perf_counter() - t)
        timing[name] = best
    print(f"{len(texts)} windows of 900 characters, batches of 64, {args.threads} threads, "
          f"onnxruntime {ort.__version__}, torch {torch.__version__}; fused: {fusions}")
    for name in runs:
        diff = np.abs(vectors[name] - vectors["pytorch"]).max()
        print(f"{name:26s} {len(texts) / timing[name]:6.1f} texts/s  {timing['pytorch'] / timing[name]:.2f}x "
              f"pytorch's speed  largest difference {diff:.1e}")
    print(f"1-minute load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
