"""Tests for chunkwise.evaluation.grid (the chunker x retriever x top_k engine) and chunkwise.figures.

The hand example: two documents cut by TokenText:2 (two cl100k_base tokens per chunk):

    a = "one two three four five six"  -> a0 "one two" (0,7), a1 " three four" (7,18), a2 " five six" (18,27)
    b = "seven eight nine ten"         -> b0 "seven eight" (0,11), b1 " nine ten" (11,20)

The embedder is a bag of the words one..ten, so cosine ranks are known:

    Q1 "three four"   (doc a, reference (8,18) "three four"): dense a1 (cos 1), then a0, a2, b0, b1 (cos 0,
                      ties by index); BM25 only a1 scores > 0.
    Q2 "one two nine" (doc b, reference (12,20) "nine ten"): dense a0 (2/sqrt(6)), b1 (1/sqrt(6)), then a1,
                      a2, b0; BM25 a0 (two matching words) then b1 (one).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from chunkwise.embeddings import CachedEmbedder
from chunkwise.evaluation.grid import DEFAULT_GRID, GridConfig, format_table, run_grid
from chunkwise.figures import chunk_boundaries_html, write_report
from fakes import GRID_DOCS as DOCS
from fakes import WordEmbedder, questions


@pytest.fixture()
def result(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], top_k=[1, 2])
    return run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)


def cell(result, retriever, k):
    t = result.table
    return t[(t["retriever"] == retriever) & (t["k"] == k)].iloc[0]


def test_dense_cells_by_hand(result):
    k1, k2 = cell(result, "dense", 1), cell(result, "dense", 2)
    # k=1: Q1 gets a1 (7,18): N=10, recall 1, precision 10/11; Q2 gets a0 from the other document: 0.
    assert k1["recall"] == pytest.approx(0.5)
    assert k1["precision"] == pytest.approx((10 / 11) / 2)
    assert k1["iou"] == pytest.approx((10 / 11) / 2)
    assert k1["hit_rate"] == pytest.approx(0.5)
    assert k1["mrr"] == pytest.approx(0.5)
    assert k1["retrieved_tokens"] == pytest.approx(2.0)
    # k=2: Q1 a1 + a0 -> precision 10/18; Q2 a0 (7 other chars) + b1 (11,20): N=8, precision 8/16,
    # first relevant chunk at rank 2 -> rr 1/2.
    assert k2["recall"] == pytest.approx(1.0)
    assert k2["precision"] == pytest.approx((10 / 18 + 0.5) / 2)
    assert k2["iou"] == pytest.approx((10 / 18 + 0.5) / 2)
    assert k2["mrr"] == pytest.approx(0.75)
    assert k2["retrieved_tokens"] == pytest.approx(4.0)
    assert k2["n_chunks"] == 5 and k2["embedded_tokens"] == 10


def test_precision_omega_both_modes_by_hand(result):
    row = cell(result, "dense", 1)
    # chroma: Q1's reference (8,18) is touched by a1 and abutted by a2 -> union (7,27): 10/20;
    #         Q2's (12,20) by b1 only -> 8/9.  union: a1 only -> 10/11; b1 -> 8/9.
    assert row["precision_omega_chroma"] == pytest.approx((0.5 + 8 / 9) / 2)
    assert row["precision_omega_union"] == pytest.approx((10 / 11 + 8 / 9) / 2)
    assert row["precision_omega"] == row["precision_omega_chroma"]


def test_bm25_returns_only_matching_chunks(result):
    k2 = cell(result, "bm25", 2)
    # Q1: only a1 matches "three four" -> precision stays 10/11 at k=2, 2 tokens retrieved.
    # Q2: a0 then b1, as dense.
    assert k2["precision"] == pytest.approx((10 / 11 + 0.5) / 2)
    assert k2["retrieved_tokens"] == pytest.approx((2 + 4) / 2)
    assert k2["mrr"] == pytest.approx(0.75)
    assert k2["embedded_tokens"] == 0
    hy = cell(result, "hybrid", 2)
    assert hy["precision"] == pytest.approx(cell(result, "dense", 2)["precision"])


def test_per_question_scores_and_bootstrap(result):
    wide = result.scores("mrr")
    assert list(wide.index) == ["Q1", "Q2"]
    assert wide.loc["Q2", "TokenText 2 | dense | k=2"] == pytest.approx(0.5)
    assert wide.shape == (2, 6)  # 1 chunker x 3 retrievers x 2 k
    boot = result.bootstrap("recall", n_resamples=200)
    assert boot.table.loc["TokenText 2 | dense | k=2", "mean"] == pytest.approx(1.0)
    assert set(boot.table.index) == set(result.cells)
    text = format_table(result.table, boot)
    assert text.splitlines()[1].lstrip().startswith("TokenText 2 |")
    with pytest.raises(ValueError, match="not a cell"):
        result.bootstrap("recall", baseline="nope")


def test_each_chunking_is_embedded_once(tmp_path):
    inner = WordEmbedder()
    emb = CachedEmbedder(inner, None)
    cfg = GridConfig(chunkers=["TokenText:2", "TokenText:3"], top_k=[1, 2, 3])
    run_grid(DOCS, questions(), cfg, emb, cache_dir=tmp_path, show_progress=False)
    # 2 questions + 5 chunks (TokenText:2) + 4 chunks (TokenText:3: "one two three", " four five six",
    # "seven eight nine", " ten"), for 3 retrievers x 3 k each.
    assert emb.n_embedded == 2 + 5 + 4
    # questions once, each chunking once (the uncached latency sample goes to the model directly)
    assert [len(c) for c in inner.calls if not set(c) <= {"three four", "one two nine"}] == [5, 4]


def test_rerun_reads_chunk_cache(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], top_k=[1])
    first = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    files = sorted(p.name for p in tmp_path.glob("*.json"))
    assert len(files) == 2  # one span file per document
    second = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    pd.testing.assert_frame_equal(
        first.table.drop(columns=["index_seconds", "query_ms"]), second.table.drop(columns=["index_seconds", "query_ms"])
    )


def test_save_writes_the_report_folder(result, tmp_path):
    boot = result.bootstrap("recall", n_resamples=100)
    paths = write_report(result, tmp_path / "out", boot, DOCS)
    data = json.loads(paths["report"].read_text())
    assert data["bootstrap"]["verdict"] == boot.verdict
    assert len(data["cells"]) == 6 and data["grid"]["top_k"] == [1, 2]
    assert pd.read_csv(paths["table"]).shape[0] == 6
    assert paths["figure_cost"].stat().st_size > 0
    html = paths["boundaries"].read_text()
    assert "<script" not in html and "TokenText 2: 3 chunks" in html
    # a long document is drawn around its first excerpt: a.txt's starts at 8 -> window (8 - 10 // 4, 6 + 10)
    html = write_report(result, tmp_path / "out2", boot, DOCS, document="a.txt", max_chars=10)["boundaries"].read_text()
    assert "27 characters; showing 6-16." in html


class WrongCount(WordEmbedder):
    def embed(self, texts):
        out = super().embed(texts)
        return out[:-1] if len(texts) == 5 else out  # drops a vector of the chunks only


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GridConfig(chunkers=["TokenText:2"], top_k=[0]), "top_k values must be ints >= 1"),
        (lambda: GridConfig(chunkers=["TokenText:2"], top_k=[]), "top_k is empty"),
        (lambda: GridConfig(chunkers=["Recursive:abc"]), "must be integers"),
        (lambda: GridConfig(chunkers=["Recursive:200:300"]), "overlap"),
        (lambda: GridConfig(chunkers=["Nope:200"]), "unknown chunker 'Nope'"),
        (lambda: GridConfig(chunkers=[]), "no chunker"),
        (lambda: GridConfig(chunkers=["TokenText:2"], retrievers=["sparse"]), "unknown retriever"),
        (lambda: GridConfig(chunkers=["TokenText:2"], placement="fuzzy"), "placement"),
        (lambda: GridConfig.from_dict({"chunkers": ["TokenText:2"], "topk": [1]}), "unknown grid setting"),
    ],
)
def test_bad_config_gets_one_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_run_inputs(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], top_k=[1])
    with pytest.raises(ValueError, match="returned 4 vectors for 5 chunks"):
        run_grid(DOCS, questions(), cfg, WrongCount(), cache_dir=tmp_path, show_progress=False)
    q = questions()
    q.loc[1, "corpus_id"] = "c.txt"
    with pytest.raises(ValueError, match="question 'Q2' refers to document 'c.txt'"):
        run_grid(DOCS, q, cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    with pytest.raises(ValueError, match="needs an embedder"):
        run_grid(DOCS, questions(), cfg, None, cache_dir=tmp_path, show_progress=False)
    with pytest.raises(ValueError, match="non-empty mapping"):
        run_grid({}, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)


def test_bm25_only_grid_needs_no_embedder(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["bm25"], top_k=[1])
    res = run_grid(DOCS, questions(), cfg, None, cache_dir=tmp_path, show_progress=False)
    assert res.table["recall"].tolist() == [0.5]


def test_toml_config(tmp_path):
    p = tmp_path / "grid.toml"
    p.write_text(
        'chunkers = ["TokenText:2", {chunker = "Recursive", size = 50, overlap = 10}]\n'
        'retrievers = ["bm25"]\ntop_k = [3, 1]\nmetric = "mrr"\nseed = 4\n'
    )
    cfg, run = GridConfig.from_toml(p)
    assert [s.label for s in cfg.chunkers] == ["TokenText 2", "Recursive 50 overlap 10"]
    assert cfg.top_k == (1, 3) and cfg.retrievers == ("bm25",)
    assert run["metric"] == "mrr" and run["seed"] == 4 and run["n_resamples"] == 10_000
    assert DEFAULT_GRID.n_cells == 84
    p.write_text("chunkers = [")
    with pytest.raises(ValueError, match="not valid TOML"):
        GridConfig.from_toml(p)


def test_boundaries_html_escapes_and_marks_chunks():
    text = "<b>x</b> & more text"
    html = chunk_boundaries_html(text, {"A <1>": [(0, 8), (8, 20)], "B": [(0, 12), (6, 20)]}, [(3, 8)], title="t&t")
    assert "<b>" not in html and "</b>" not in html and "&lt;b&gt;" in html and "&amp; m" in html
    assert "<h1>t&amp;t</h1>" in html and "A &lt;1&gt;: 2 chunks; 0 of 1 excerpts cut by a boundary" in html
    assert "B: 2 chunks; 1 of 1 excerpts cut by a boundary" in html
    assert html.count('class="b"') == 4 + 1  # 4 chunk markers + the legend's sample
    assert 'class="ov"' in html.split("<h2>B")[1]  # characters 6-12 lie in two chunks
    assert "<script" not in html and "http" not in html
    with pytest.raises(ValueError, match=r"chunkings\['B'\]\[0\] = \(0, 99\) is outside the text"):
        chunk_boundaries_html(text, {"B": [(0, 99)]})
    assert math.isfinite(len(html))


def test_chapter_2_runs_on_the_engine(tmp_path):
    # run_chroma_grid is the engine with chapter 2's defaults, and chapter 2's tables read its cells:
    # TokenText:2 at k=1 retrieves a1 for Q1 (recall 1) and a0, from the other document, for Q2 (recall 0).
    from chunkwise.experiments import chroma as ch

    q = questions().rename(columns={"corpus_id": "corpus"})
    grid = ch.run_chroma_grid([ch.parse_spec("TokenText:2")], DOCS, q, WordEmbedder(), top_k=1, cache_dir=tmp_path,
                              show_progress=False)
    assert grid.per_question["recall"].tolist() == [1.0, 0.0]
    assert grid.rankings["TokenText 2"]["dense"] == [[1], [0]]
    assert [c.text for c in grid.chunk_objects["TokenText 2"]["b.txt"]] == ["seven eight", " nine ten"]
    table = ch.results_table(grid, "words")
    assert table[["chunker", "size_tokens", "overlap_tokens", "n_chunks"]].values.tolist() == [["TokenText", 2, 0, 5]]
    # recall [1, 0]: mean 50 %, population sd 50 %
    assert table.loc[0, "recall_mean"] == 50.0 and table.loc[0, "recall_std"] == 50.0
    assert ch.per_corpus_table(grid, "recall").loc["TokenText 2"].tolist() == [100.0, 0.0]


def test_chapter_2_tables_name_a_missing_retriever_or_k(tmp_path):
    from chunkwise.experiments import chroma as ch

    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense", "bm25"], top_k=[1, 2])
    grid = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    with pytest.raises(ValueError, match=r"ran retrievers \('dense', 'bm25'\); pass retriever="):
        ch.results_table(grid, "words")
    with pytest.raises(ValueError, match=r"no cells for retriever 'hybrid' at k=2"):
        ch.results_table(grid, "words", "hybrid")
    with pytest.raises(ValueError, match=r"no cells for retriever 'bm25' at k=3"):
        ch.per_corpus_table(grid, "recall", "bm25", 3)
    # by default the largest k: at k=2 dense retrieves a1, a0 for Q1 and a0, b1 for Q2
    assert ch.results_table(grid, "words", "dense")["recall_mean"].tolist() == [100.0]
    assert ch.results_table(grid, "words", "dense", 1)["recall_mean"].tolist() == [50.0]


def test_engine_report_placement_equals_rescoring_the_same_retrieval(tmp_path):
    # "one two one two three" cut into one-token chunks: " two" at (11, 15) also occurs at (3, 7),
    # so the report's placement scores it there. The engine run with placement="report" must give
    # what chapter 2's rescore gives for the exact run's retrieval, and differ from exact.
    from chunkwise.experiments import chroma as ch

    docs = {"d": "one two one two three"}
    q = pd.DataFrame({"question_id": ["A", "B"], "question": ["two", "two three"], "corpus": ["d", "d"],
                      "references": [[(4, 7)], [(12, 21)]]})
    spec = [ch.parse_spec("TokenText:1")]
    exact = ch.run_chroma_grid(spec, docs, q, WordEmbedder(), top_k=2, cache_dir=tmp_path, show_progress=False)
    report = ch.run_chroma_grid(spec, docs, q, WordEmbedder(), top_k=2, cache_dir=tmp_path, show_progress=False,
                                placement="report")
    again = ch.rescore(exact, docs, q, placement="report")
    assert again.config == report.config and again.chunks == report.chunks
    pd.testing.assert_frame_equal(again.per_question, report.per_question)
    metrics = ["recall", "precision", "iou", "precision_omega", "precision_omega_chroma", "precision_omega_union",
               "hit_rate", "mrr"]
    pd.testing.assert_frame_equal(again.table[metrics], report.table[metrics])
    assert int(ch.placement_moves(exact, docs)["moved"].sum()) >= 1
    assert not np.allclose(exact.per_question["recall"].to_numpy(), report.per_question["recall"].to_numpy())
    # the mode switches the same way: union rescoring equals a union run
    union = ch.run_chroma_grid(spec, docs, q, WordEmbedder(), top_k=2, mode="union", cache_dir=tmp_path,
                               show_progress=False)
    pd.testing.assert_frame_equal(ch.rescore(exact, docs, q, mode="union").per_question, union.per_question)


def test_engine_hnsw_index_gives_the_exact_neighbours_on_a_small_set(tmp_path):
    pytest.importorskip("chromadb")
    cfg = dict(chunkers=["TokenText:2"], retrievers=["dense"], top_k=[1])
    exact = run_grid(DOCS, questions(), GridConfig(**cfg), WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    hnsw = run_grid(DOCS, questions(), GridConfig(**cfg, index="hnsw"), WordEmbedder(), cache_dir=tmp_path,
                    show_progress=False)
    assert hnsw.rankings["TokenText 2"]["dense"] == exact.rankings["TokenText 2"]["dense"] == [[1], [0]]
    with pytest.raises(ValueError, match="unknown index 'faiss'"):
        GridConfig(**cfg, index="faiss")


def test_chapter_2_difference_and_best_by_k_tables(tmp_path):
    # Per question (dense, k=1): TokenText:2 recall [1, 0]; Recursive:3 cuts a into "one two three"
    # / " four five six" and b into "seven eight nine" / " ten": Q1 retrieves a0 (0,13), covering
    # 8-13 of the reference 8-18 (recall 0.5); Q2 "one two nine" also retrieves a0 (cos 2/3 against
    # 1/3 for b0), from the other document (recall 0).
    from chunkwise.experiments import chroma as ch

    cfg = GridConfig(chunkers=["TokenText:2", "Recursive:3"], retrievers=["dense"], top_k=[1])
    grid = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    scores = grid.scores("recall")
    np.testing.assert_allclose(scores.iloc[:, 1].to_numpy(), [0.5, 0.0])
    d = ch.difference_table(grid, "TokenText 2", top_k=1, n_resamples=500)
    assert d.loc[0, ["diff", "diff_low", "diff_high"]].tolist() == [0.0, 0.0, 0.0]
    assert d.loc[1, "mean"] == pytest.approx(25.0) and d.loc[1, "diff"] == pytest.approx(-25.0)
    # Resampling two questions with paired differences -0.5 and 0: resampled means -0.5, -0.25, 0.
    assert d.loc[1, "diff_low"] == pytest.approx(-50.0) and d.loc[1, "diff_high"] == pytest.approx(0.0)
    assert ch.pair_difference(grid, "Recursive 3", "TokenText 2", top_k=1, n_resamples=500) == pytest.approx((-25.0, -50.0, 0.0))
    b = ch.best_by_k(grid, n_resamples=500)
    assert b.loc[0, "k"] == 1 and set(b.loc[0, "in_play"].split(", ")) == {"TokenText 2", "Recursive 3"}
    # TokenText 2 is best unless both draws are Q2 (a tie, split): P(best) = 3/4 + 1/8 < 90%.
    assert b.loc[0, "best"] == "TokenText 2" and b.loc[0, "runner_up"] == "Recursive 3"
    assert b.loc[0, "lead"] == pytest.approx(25.0) and b.loc[0, "winner"] == ""
    assert ch.by_k_table(grid).loc["Recursive 3", "k=1"] == pytest.approx(25.0)
    with pytest.raises(ValueError, match="baseline 'Fixed' is not a chunker"):
        ch.difference_table(grid, "Fixed", top_k=1)
    with pytest.raises(ValueError, match="no cells for retriever 'bm25'"):
        ch.difference_table(grid, "TokenText 2", retriever="bm25", top_k=1)


def test_sentence_and_structure_specs_run_their_chunkers(tmp_path):
    from chunkwise.chunkers import SentenceChunker, StructureChunker

    docs = {"n.md": "# Tea\n\nTea grows on hills. It is picked by hand.\n\n# Coffee\n\nCoffee grows in the tropics.\n"}
    q = pd.DataFrame({"question": ["where does coffee grow"], "corpus_id": ["n.md"],
                      "references": [[{"start_index": docs["n.md"].index("Coffee grows"), "end_index": len(docs["n.md"]) - 1}]]})
    cfg = GridConfig(chunkers=["Sentence:8", "Structure:20"], retrievers=["bm25"], top_k=[1])
    res = run_grid(docs, q, cfg, None, cache_dir=tmp_path, show_progress=False)
    assert res.chunks["Sentence 8"]["n.md"] == [c.span for c in SentenceChunker(8).split(docs["n.md"])]
    assert res.chunks["Structure 20"]["n.md"] == [c.span for c in StructureChunker(20).split(docs["n.md"])]
    assert res.table.set_index("chunker").loc["Structure 20", "recall"] == 1.0
    with pytest.raises(ValueError, match="Structure takes no overlap"):
        GridConfig(chunkers=["Structure:20:5"])


def test_llm_chunker_result_names_a_side_only_when_the_interval_excludes_zero():
    from chunkwise.experiments import chroma as ch

    runs = pd.DataFrame({"windows": [10, 24], "repairs": [1, 2], "mean_chunk_tokens": [100.0, 127.5]},
                        index=["pubmed", "all"])
    got = ch.llm_chunker_result((-5.62, -9.88, -1.35), runs, "Qwen", "Recursive 200")
    assert got == {"llm_model": "Qwen", "llm_baseline": "Recursive 200", "llm_vs_recursive": "recursive ahead",
                   "llm_vs_recursive_ci": "-5.6 [-9.9, -1.4]", "llm_mean_chunk_tokens": 128, "llm_requests": 26}
    assert ch.llm_chunker_result((2.0, 0.1, 3.9), runs, "Qwen")["llm_vs_recursive"] == "LLM ahead"
    assert ch.llm_chunker_result((1.3, -1.6, 4.2), runs, "Qwen")["llm_vs_recursive"] == "cannot tell"
    none = ch.llm_chunker_result(None, None, "Qwen")
    assert (none["llm_vs_recursive"], none["llm_vs_recursive_ci"]) == ("not run", "-")
    with pytest.raises(ValueError, match="both diff and llm_runs"):
        ch.llm_chunker_result((1.0, 0.5, 1.5), None, "Qwen")
    with pytest.raises(ValueError, match="no 'all' row"):
        ch.llm_chunker_result((1.0, 0.5, 1.5), runs.drop(index="all"), "Qwen")


def test_k_winner_result_names_a_change_only_when_both_leads_exceed_the_noise(monkeypatch):
    from types import SimpleNamespace

    from chunkwise.experiments import chroma as ch

    grid = SimpleNamespace(config=SimpleNamespace(top_k=[1, 5, 10]))
    ranking = pd.DataFrame({"retriever": ["dense"] * 3, "k": [1, 5, 10], "best": ["A", "A", "B"]})
    # (a, b, k) -> (difference, low, high) of a minus b, in points
    table = {("A", "B", 10): (-3.0, -5.0, -1.0), ("A", "B", 5): (2.0, 0.5, 3.5)}
    monkeypatch.setattr(ch, "pair_difference", lambda g, a, b, m, r, k, n, s: table[(a, b, k)])
    got = ch.k_winner_result(grid, ranking, ref_k=5)
    assert got == {"k_winner_small": "A", "k_winner_large": "B", "k_large": 10, "k_winner_changes": "yes",
                   "k_winner_gap_ci": "-3.0 [-5.0, -1.0]"}
    table[("A", "B", 5)] = (2.0, -0.5, 3.5)  # the old winner's lead at k=5 is within the noise
    assert ch.k_winner_result(grid, ranking, ref_k=5)["k_winner_changes"] == "cannot tell"
    ranking.loc[2, "best"] = "A"
    assert ch.k_winner_result(grid, ranking, ref_k=5)["k_winner_changes"] == "no"
    # the same first place, but tied with the runner-up (both at 100%): cannot tell
    ranking["runner_up"], ranking["best_mean"], ranking["lead"] = "B", [90.0, 95.0, 100.0], [1.0, 2.0, 0.0]
    tie = ch.k_winner_result(grid, ranking, ref_k=5)
    assert tie["k_winner_changes"] == "cannot tell"
    assert tie["k_winner_gap_ci"] == "0 (at k=10 A ties with B at 100.0%: no first place to compare)"
    with pytest.raises(ValueError, match="smaller than its largest"):
        ch.k_winner_result(grid, ranking, ref_k=10)
    with pytest.raises(ValueError, match="no retriever 'bm25'"):
        ch.k_winner_result(grid, ranking, ref_k=5, retriever="bm25")


def test_k_winner_sentence_says_a_tie_apart_from_a_change():
    from chunkwise.experiments import chroma as ch

    outcomes = {
        "dense": {"k_winner_changes": "cannot tell", "k_winner_small": "A", "k_winner_large": "A"},  # a tie
        "bm25": {"k_winner_changes": "no", "k_winner_small": "A", "k_winner_large": "A"},
        "hybrid": {"k_winner_changes": "cannot tell", "k_winner_small": "A", "k_winner_large": "B"},
    }
    assert ch.k_winner_sentence(outcomes, 5, 15) == (
        "With dense search, the chunker that ranks first at k = 5 shares first place with another at one of "
        "the two k, so the data cannot tell whether the winner changes; with BM25, the chunker that ranks "
        "first at k = 5 still ranks first at k = 15; with hybrid retrieval, a different chunker ranks first "
        "at k = 15, but at least one of the two leads is within the noise.")


def test_with_scores_replaces_metric_values_without_warnings(tmp_path):
    import warnings

    cfg = GridConfig(chunkers=["Recursive:2"], retrievers=["dense"], top_k=[1])
    res = run_grid(DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    pq = res.per_question.copy()
    pq["recall"] = 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "Mean of empty slice" once reached chapter 2's readers
        again = res.with_scores(pq)
    assert again.table["recall"].tolist() == [0.5]
    with pytest.raises(ValueError, match="lack metric column"):
        res.with_scores(pq.drop(columns=["iou"]))
