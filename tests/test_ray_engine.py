"""The Ray engine (chunkwise.evaluation.distributed) gives the local engine's result, exactly.

The shard-merge and sharded-BM25 properties run without Ray; the engine tests share one Ray
session of two CPUs (``ray.init(num_cpus=2)``) and are skipped where Ray is not installed (the
``scale`` extra; ``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chunkwise.embeddings import CachedEmbedder, EmbeddingCache
from chunkwise.evaluation.distributed import RayEngine, _BM25Shard, _bounds, _dense_shard, import_embeddings, merge_top_k
from chunkwise.evaluation.grid import GridConfig, run_grid
from chunkwise.retrieval.index import top_k_cosine
from chunkwise.retrieval.lexical import BM25Retriever, tokenize

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from ray_fakes import HashEmbedder, logged, paragraph_kind  # noqa: E402

ROOT = HERE.parent
GARDEN = ROOT / "data" / "examples" / "garden"
# what differs between two runs of the same grid: wall-clock measurements
TIMED = ["index_seconds", "query_ms", "llm_seconds"]


# ------------------------------------------------------------------ merge properties (no Ray)


@pytest.mark.parametrize("seed", range(6))
def test_merged_shard_top_k_equals_global_top_k(seed):
    rng = np.random.default_rng(seed)
    n, d, depth = int(rng.integers(5, 120)), 8, int(rng.integers(1, 12))
    keys = rng.standard_normal((n, d)).astype(np.float32)
    # exact ties: repeated rows (the same chunk text twice) and a query equal to a key
    for _ in range(n // 4):
        keys[rng.integers(n)] = keys[rng.integers(n)]
    queries = np.vstack([rng.standard_normal((6, d)).astype(np.float32), keys[:2]])
    want, _ = top_k_cosine(queries, keys, depth)
    for n_shards in (1, 2, 3, 7, n):
        parts = [_dense_shard(queries, keys[a:b], a, depth) for a, b in _bounds(n, n_shards)]
        assert merge_top_k(parts, depth) == [list(map(int, r)) for r in want], n_shards


def test_merge_top_k_breaks_ties_by_position_and_checks_input():
    parts = [(np.array([[4, 5]]), np.array([[0.5, 0.2]], dtype=np.float32)),
             (np.array([[1, 9]]), np.array([[0.5, 0.4]], dtype=np.float32))]
    assert merge_top_k(parts, 3) == [[1, 4, 9]]
    with pytest.raises(ValueError, match="depth"):
        merge_top_k(parts, 0)
    with pytest.raises(ValueError, match="different numbers of questions"):
        merge_top_k([parts[0], (np.zeros((2, 1), int), np.zeros((2, 1), np.float32))], 2)


def _words_corpus(n_docs: int, seed: int) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(60)] + ["garden", "soil", "water", "compost", "fence", "rain", "seeds"]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    docs = {}
    for i in range(n_docs):
        sentences = []
        for _ in range(int(rng.integers(3, 9))):
            words = rng.choice(vocab, size=int(rng.integers(4, 14)), p=p)
            sentences.append(" ".join(words).capitalize() + ".")
        if i % 9 == 0:  # repeated boilerplate: identical chunks, tied scores
            sentences.append("Water the compost before the rain.")
        docs[f"doc{i:03d}.txt"] = " ".join(sentences)
    return docs


@pytest.mark.parametrize("language,tokenizer", [("en", "stem"), ("en", "words")])
def test_sharded_bm25_scores_equal_unsharded_bit_for_bit(language, tokenizer):
    texts = list(_words_corpus(80, seed=3).values()) + ["", "the of and"]  # a chunk with no token
    whole = BM25Retriever([(str(i), t) for i, t in enumerate(texts)], language=language, tokenizer=tokenizer)
    questions = ["water the compost garden", "w1 w1 w2 soil", "fence rain seeds w40", "nothing matches zzz"]
    for n_shards in (1, 3, 8):
        shards = [_BM25Shard(texts[a:b], a, language, tokenizer) for a, b in _bounds(len(texts), n_shards)]
        stats = [s.stats() for s in shards]
        df: dict[str, int] = {}
        for _, _, d in stats:
            for t, c in d.items():
                df[t] = df.get(t, 0) + c
        for s in shards:
            s.set_globals(df, sum(x[0] for x in stats), sum(x[1] for x in stats), 1.2, 0.75)
        queries = [[t for t in tokenize(q, language, tokenizer) if t in df] for q in questions]
        parts = [s.top(queries, len(texts)) for s in shards]
        for i, q in enumerate(questions):
            expected = whole.scores(q)
            got = np.zeros(len(texts), dtype=np.float32)
            for idx_list, sc_list in parts:
                got[idx_list[i]] = sc_list[i]
            assert np.array_equal(got, np.where(expected > 0, expected, 0)), (n_shards, q)
        merged = merge_top_k(parts, 10)
        assert merged == [[int(h.chunk_id) for h in whole.retrieve(q, 10)] for q in questions], n_shards


# ------------------------------------------------------------------ the engine on Ray


@pytest.fixture(scope="session")
def ray_session():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    # Ray's workers import the fake embedder's module from this folder
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), *(p for p in [old] if p)])
    import logging

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _twice(log, questions) -> list[str]:
    """Texts the log shows embedded more than once, leaving out the questions: the grid times a
    query by embedding a few questions again with the uncached model (``query_ms``)."""
    import hashlib
    from collections import Counter

    asked = {hashlib.sha256(str(q).encode()).hexdigest() for q in questions["question"]}
    return [h for h, n in Counter(logged(log)).items() if n > 1 and h not in asked]


def _same_result(local, distributed):
    a = local.table.drop(columns=[c for c in TIMED if c in local.table.columns])
    b = distributed.table.drop(columns=[c for c in TIMED if c in distributed.table.columns])
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(local.per_question, distributed.per_question)
    assert local.rankings == distributed.rankings
    assert local.chunks == distributed.chunks


def _garden():
    from chunkwise.datasets.local import load_documents, load_questions

    docs = load_documents(GARDEN / "docs")
    return docs, load_questions(GARDEN / "questions.jsonl", docs)


def test_ray_engine_equals_local_engine_on_the_garden_example(ray_session, tmp_path):
    docs, questions = _garden()
    config, _ = GridConfig.from_toml(GARDEN / "grid.toml")
    local = run_grid(docs, questions, config, CachedEmbedder(HashEmbedder("hash", tmp_path / "local.log")),
                     cache_dir=tmp_path / "spans-local", show_progress=False)
    engine = RayEngine(work_dir=tmp_path / "ray", part_size=64, batch_size=16)
    log = tmp_path / "ray.log"
    result = engine.run(docs, questions, config, HashEmbedder("hash", log), cache_dir=tmp_path / "spans-ray",
                        show_progress=False)
    _same_result(local, result)
    # each distinct text embedded once (the chunks of every chunker, the questions, Kamradt's windows)
    assert _twice(log, questions) == [] and len(set(logged(log))) == result.n_embedded
    assert [s.stage for s in engine.stages][:2] == ["chunking", "embedding (hash)"]
    assert engine.stages[0].items == 5 * len(docs)  # Kamradt cuts with the model: on the driver
    n_fixed = sum(len(c) for spec, cs in result.chunk_objects.items() if not spec.startswith("Kamradt")
                  for c in cs.values())
    assert engine.stages[1].items >= len(set(c.text for spec, cs in result.chunk_objects.items()
                                             if not spec.startswith("Kamradt") for d in cs.values() for c in d))
    assert n_fixed > 0
    # a rerun: every chunking and vector cached, nothing embedded, the same result
    again = engine.run(docs, questions, config, HashEmbedder("hash", log), cache_dir=tmp_path / "spans-ray",
                       show_progress=False)
    assert again.n_embedded == 0 and engine.stages[0].items == 0
    _same_result(local, again)


def _synthetic(n_docs: int = 200, n_questions: int = 60, seed: int = 11):
    docs = _words_corpus(n_docs, seed)
    rng = np.random.default_rng(seed)
    names = sorted(docs)
    rows = []
    for i in range(n_questions):
        name = names[int(rng.integers(len(names)))]
        text = docs[name]
        start = int(rng.integers(0, max(1, len(text) - 80)))
        end = min(len(text), start + int(rng.integers(20, 80)))
        rows.append({"question_id": f"q{i}", "question": " ".join(text[start:end].split()[1:6]) or "garden",
                     "corpus_id": name, "references": [{"start_index": start, "end_index": end}]})
    return docs, pd.DataFrame(rows)


def test_ray_engine_equals_local_engine_on_200_documents_and_two_embedders(ray_session, tmp_path):
    docs, questions = _synthetic()
    config = GridConfig.from_dict({
        "chunkers": ["TokenText:40", "Recursive:60", "Recursive:60:20", "Sentence:50"],
        "retrievers": ["dense", "bm25", "hybrid"], "top_k": [1, 3, 10], "embedders": ["h1", "h2"],
    })
    local = run_grid(docs, questions, config,
                     embedders={n: CachedEmbedder(HashEmbedder(n, tmp_path / f"local-{n}.log")) for n in ("h1", "h2")},
                     cache_dir=tmp_path / "spans-local", show_progress=False)
    engine = RayEngine(work_dir=tmp_path / "ray", n_shards=3, part_size=500, batch_size=100)
    result = engine.run(docs, questions, config,
                        embedders={n: HashEmbedder(n, tmp_path / f"ray-{n}.log") for n in ("h1", "h2")},
                        cache_dir=tmp_path / "spans-ray", show_progress=False)
    _same_result(local, result)
    assert len(set(result.table["cell"])) == 4 * (2 * 2 + 1) * 3  # dense and hybrid per embedder, one BM25
    for n in ("h1", "h2"):
        assert _twice(tmp_path / f"ray-{n}.log", questions) == []
        assert set(logged(tmp_path / f"ray-{n}.log")) == set(logged(tmp_path / f"local-{n}.log"))


def test_a_run_killed_in_the_embedding_stage_resumes_without_embedding_anything_twice(ray_session, tmp_path):
    docs, questions = _synthetic(n_docs=40, n_questions=12, seed=5)
    config = GridConfig.from_dict({"chunkers": ["TokenText:30"], "retrievers": ["dense"], "top_k": [3]})
    log = tmp_path / "emb.log"
    engine = RayEngine(work_dir=tmp_path / "ray", part_size=40, batch_size=20, embed_actors=1)
    # the crash comes when the third part starts: two parts (80 texts) are done and imported
    with pytest.raises(Exception, match="simulated crash"):
        engine.run(docs, questions, config, HashEmbedder("h", log, fail_after=80), cache_dir=tmp_path / "spans",
                   show_progress=False)
    assert len(logged(log)) == 80
    assert len(EmbeddingCache(tmp_path / "ray" / "embeddings.sqlite")) == 80
    result = engine.run(docs, questions, config, HashEmbedder("h", log), cache_dir=tmp_path / "spans",
                        show_progress=False)
    assert _twice(log, questions) == []  # no text embedded twice
    assert result.n_embedded == len(set(logged(log))) - 80 > 0
    local = run_grid(docs, questions, config, CachedEmbedder(HashEmbedder("h", tmp_path / "local.log")),
                     cache_dir=tmp_path / "spans-local", show_progress=False)
    _same_result(local, result)


def test_a_chunker_kind_registered_on_the_driver_cuts_the_same_on_the_workers(ray_session, tmp_path):
    from chunkwise.chunkers.registry import _KINDS, register_chunker

    docs = {"a.md": "Tea at noon.\n\nSoil tests in spring.\nThe kit is in the shed.\n\n\nWater at dusk.",
            "b.md": "Compost turns weekly.\n\nBeans climb the fence."}
    questions = pd.DataFrame([
        {"question": "Where is the soil kit?", "corpus_id": "a.md", "references": [(36, 59)]},
        {"question": "What climbs the fence?", "corpus_id": "b.md", "references": [(23, 45)]},
    ])
    original = _KINDS.get("Recursive")
    register_chunker(paragraph_kind(), replace=True)
    register_chunker(paragraph_kind("Recursive"), replace=True)  # a built-in replaced on the driver only
    try:
        config = GridConfig.from_dict({"chunkers": ["Paragraph", "Recursive"], "retrievers": ["bm25", "dense"],
                                       "top_k": [1, 2]})
        local = run_grid(docs, questions, config, CachedEmbedder(HashEmbedder("h", tmp_path / "l.log")),
                         cache_dir=tmp_path / "spans-local", show_progress=False)
        result = RayEngine(work_dir=tmp_path / "ray").run(docs, questions, config, HashEmbedder("h", tmp_path / "r.log"),
                                                          cache_dir=tmp_path / "spans-ray", show_progress=False)
    finally:
        register_chunker(original, replace=True)
        _KINDS.pop("Paragraph", None)
    _same_result(local, result)
    recursive = next(label for label in result.chunks if label.startswith("Recursive"))
    assert result.chunks[recursive]["a.md"] == [(0, 12), (14, 59), (62, 76)]  # paragraphs, as on the driver  # paragraphs, not 4-token pieces


def test_a_worker_failure_is_a_runtime_error_that_says_how_to_resume(ray_session, tmp_path):
    docs, questions = _synthetic(n_docs=5, n_questions=3, seed=2)
    config = GridConfig.from_dict({"chunkers": ["TokenText:30"], "retrievers": ["dense"], "top_k": [1]})
    with pytest.raises(RuntimeError, match="(?s)simulated crash.*rerun the same command to resume"):
        RayEngine(work_dir=tmp_path / "ray").run(docs, questions, config,
                                                 HashEmbedder("h", tmp_path / "e.log", fail_after=0),
                                                 cache_dir=tmp_path / "spans", show_progress=False)


def test_parquet_parts_import_into_the_content_cache(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    vecs = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    pq.write_table(pa.table({"key": ["a", "b"], "embedder": ["m", "m"], "vector": [v.tolist() for v in vecs]}),
                   tmp_path / "part.parquet")
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    assert import_embeddings(tmp_path, cache) == 2
    got = cache.get_many(["a", "b"])
    assert np.array_equal(got["a"], vecs[0]) and np.array_equal(got["b"], vecs[1])
    pq.write_table(pa.table({"key": ["c"]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="key and vector"):
        import_embeddings(tmp_path / "bad.parquet", cache)


def test_engine_settings_are_checked():
    with pytest.raises(ValueError, match="n_shards"):
        RayEngine(n_shards=0)
    with pytest.raises(ValueError, match="part_size"):
        RayEngine(part_size=0)
    with pytest.raises(ValueError, match="num_gpus"):
        RayEngine(num_gpus=-1)
