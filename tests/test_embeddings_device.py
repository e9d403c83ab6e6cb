"""The torch device of the sentence-transformers embedders: argument > $CHUNKWISE_EMBED_DEVICE > "cpu",
checked in one place, and a device the machine lacks reported as such (not as a model that failed to load)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from chunkwise.chunkers import LateChunkingEmbedder
from chunkwise.embeddings import (
    DEVICE_ENV,
    SentenceTransformerEmbedder,
    check_device_available,
    make_embedder,
    resolve_device,
)

torch = pytest.importorskip("torch")
needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")


def test_resolve_device_precedence(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert resolve_device() == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "   ")
    assert resolve_device() == "cpu"  # blank means unset
    monkeypatch.setenv(DEVICE_ENV, " cuda:1 ")
    assert resolve_device() == "cuda:1"
    assert resolve_device("cpu") == "cpu"  # the argument wins
    assert resolve_device("mps") == "mps"


@pytest.mark.parametrize("bad", ["gpu", "CUDA", "cuda:", "cuda:x", "cpu ", ""])
def test_resolve_device_rejects_other_names(bad):
    with pytest.raises(ValueError, match=r"device must be 'cpu', 'cuda', 'cuda:<index>' or 'mps'") as info:
        resolve_device(bad)
    assert repr(bad) in str(info.value)


def test_resolve_device_names_the_environment_variable(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "gpu0")
    with pytest.raises(ValueError, match=r"\$CHUNKWISE_EMBED_DEVICE must be .*got 'gpu0'"):
        resolve_device()
    # every constructor goes through the same check, e5 included (it ignores the device)
    with pytest.raises(ValueError, match="CHUNKWISE_EMBED_DEVICE"):
        SentenceTransformerEmbedder(cache_dir=False)
    with pytest.raises(ValueError, match="CHUNKWISE_EMBED_DEVICE"):
        make_embedder("multilingual-e5-small", cache_dir=False)
    with pytest.raises(ValueError, match="CHUNKWISE_EMBED_DEVICE"):
        LateChunkingEmbedder(cache_dir=False)


def test_device_is_not_part_of_the_cache_name(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    on_cpu = SentenceTransformerEmbedder(cache_dir=False)
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    on_gpu = SentenceTransformerEmbedder(cache_dir=False)
    assert (on_cpu.device, on_gpu.device) == ("cpu", "cuda")
    assert on_cpu.name == on_gpu.name == "sentence-transformers/all-MiniLM-L6-v2|normalize=False"
    assert make_embedder("all-MiniLM-L6-v2", cache_dir=False, device="cpu").device == "cpu"
    assert LateChunkingEmbedder(cache_dir=False).device == "cuda"
    assert LateChunkingEmbedder(cache_dir=False, device="cpu").device == "cpu"


def test_the_chosen_device_reaches_sentence_transformers(monkeypatch):
    seen: list[str | None] = []

    class FakeST:
        def __init__(self, path, device=None):
            seen.append(device)

        def encode(self, texts, **kw):
            return np.ones((len(texts), 3), dtype=np.float32)

    fake = types.ModuleType("sentence_transformers")
    fake.SentenceTransformer = FakeST
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    SentenceTransformerEmbedder("acme/model", cache_dir=False).embed(["a"])
    assert seen == ["cpu"]


@needs_no_cuda
def test_missing_cuda_is_reported_as_such(monkeypatch):
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    with pytest.raises(RuntimeError, match=r"sees no CUDA device.*device='cpu' \(or unset \$CHUNKWISE_EMBED_DEVICE\)"):
        check_device_available("cuda")
    emb = SentenceTransformerEmbedder(cache_dir=False)
    with pytest.raises(RuntimeError, match="sees no CUDA device") as info:
        emb.embed(["Tea is served at noon."])
    assert "Could not load" not in str(info.value)  # not blamed on the model files
    late = LateChunkingEmbedder(cache_dir=False)
    with pytest.raises(RuntimeError, match="sees no CUDA device"):
        late.model  # noqa: B018 - loading is what raises
    check_device_available("cpu")  # the CPU is always there: no error


@needs_no_cuda
def test_gpu_book_script_stops_before_running_without_the_device(tmp_path):
    """benchmarks/gpu_book.sh checks the device first: no chapter runs, exit 3, the reason printed."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    venv_python = root / ".venv" / "bin" / "python"
    if not venv_python.exists():
        pytest.skip("the script runs the project's .venv (make venv)")
    env = {**os.environ, "BOOK_DEVICE": "cuda", "CHAPTERS": "01_handbook_boundaries",
           "CHUNKWISE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(["bash", "benchmarks/gpu_book.sh", str(tmp_path / "out")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr
    assert "sees no CUDA device" in done.stderr and "BOOK_DEVICE=cpu measures the CPU instead" in done.stderr
    assert not (tmp_path / "out" / "times.tsv").exists() and not (tmp_path / "out" / "run").exists()
