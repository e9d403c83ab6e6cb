"""Graph RAG index and local search on a two-topic toy corpus (fake embedder, stub LLM)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chunkwise.llm.client import LLMJSONError, LLMResponse
from chunkwise.crud.rag.chunking import CorpusChunk
from chunkwise.crud.rag.graphrag import (
    COMMUNITY_SCHEMA,
    EXTRACTION_SCHEMA,
    GraphIndex,
    GraphRAGLocalRetriever,
    normalise_name,
)
from chunkwise.retrieval import Hit, Retriever
from fakes import CharEmbedder, FakeChatModel, FixedOutputEmbedder

SPORTS = [
    "杭州市体育局于5月1日发放体育消费券，每张面额50元。",
    "市民可在支付宝领取体育消费券，每人限领一张。",
    "杭州市体育局表示，体育消费券可在杭州的游泳馆使用。",
]
LIBRARY = [
    "The City Library opens a new reading room on Monday.",
    "Librarian Anna Smith of the city  library runs a reading club.",
    "The Reading Club of the City Library meets in the reading room every Friday.",
]
BAD = "这段文字让模型输出了坏的JSON。"
BAD_ERROR = "Expecting value: line 1 column 1 (char 0)"


def E(name, type_, desc):
    return {"name": name, "type": type_, "description": desc}


def R(src, tgt, desc):
    return {"source": src, "target": tgt, "description": desc}


#: Scripted extraction replies, routed on the chunk text inside the prompt.
EXTRACTIONS = {
    SPORTS[0]: {
        "entities": [E("杭州市体育局", "organization", "发放体育消费券的政府部门。"),
                     E("体育消费券", "product", "每张面额50元的消费券。")],
        "relations": [R("杭州市体育局", "体育消费券", "杭州市体育局于5月1日发放体育消费券。")],
    },
    SPORTS[1]: {
        "entities": [E("支付宝", "product", "领取体育消费券的平台。"),
                     E("体育消费券", "product", "每人限领一张。")],
        "relations": [R("支付宝", "体育消费券", "市民在支付宝领取体育消费券。")],
    },
    SPORTS[2]: {
        "entities": [E("杭州市体育局", "organization", "发放体育消费券的政府部门。"),
                     E("体育消费券", "Product", "可在游泳馆使用。"),
                     E("杭州", "location", "体育消费券的使用城市。")],
        "relations": [R("体育消费券", "杭州", "体育消费券可在杭州使用。"),
                      R("杭州市体育局", "杭州", "杭州市体育局位于杭州。"),
                      R("体育消费券", "杭州市体育局", "杭州市体育局介绍体育消费券。")],
    },
    LIBRARY[0]: {
        "entities": [E("City Library", "organization", "A public library."),
                     E("Reading Room", "location", "A new room of the library, opened on Monday.")],
        "relations": [R("City Library", "Reading Room", "The library opens the reading room.")],
    },
    LIBRARY[1]: {
        "entities": [E("Anna Smith", "person", "A librarian."),
                     E("city  library", "Organization", "Employs Anna Smith."),
                     E("Reading Club", "event", "A club run by Anna Smith.")],
        "relations": [R("Anna Smith", "CITY LIBRARY", "Anna Smith works at the library."),
                      R("Anna Smith", "Reading Club", "Anna Smith runs the reading club.")],
    },
    LIBRARY[2]: {
        "entities": [E("Reading Club", "event", "Meets every Friday."),
                     E(" City Library ", "location", "A public library."),
                     E("reading room", "location", "Where the club meets.")],
        "relations": [R("Reading Club", "Reading Room", "The club meets in the reading room."),
                      R("Reading Club", "City Library", "The club belongs to the library.")],
    },
}

SPORTS_NODES = ["杭州市体育局", "体育消费券", "支付宝", "杭州"]
LIBRARY_NODES = ["city library", "reading room", "anna smith", "reading club"]
SPORTS_REPORT = {"title": "杭州体育消费券", "summary": "杭州市体育局发放体育消费券，市民在支付宝领取。"}
LIBRARY_REPORT = {"title": "City Library", "summary": "The city library and its reading club."}


def _scripted(call):
    """Graph RAG's replies: a report per community schema, the extraction of the chunk in the prompt."""
    if call.schema is COMMUNITY_SCHEMA:
        return dict(SPORTS_REPORT if "体育消费券" in call.prompt else LIBRARY_REPORT)
    assert call.schema is EXTRACTION_SCHEMA
    for text, value in EXTRACTIONS.items():
        if text in call.prompt:
            return json.loads(json.dumps(value))
    raise AssertionError(f"unscripted prompt: {call.prompt!r}")


def _bad_chunk_fails(call):
    """The BAD chunk's extraction never gives JSON: the LLMJSONError chat_json raises after its repairs."""
    if call.schema is EXTRACTION_SCHEMA and BAD in call.prompt:
        return LLMJSONError("not JSON", reply="oops", error=BAD_ERROR, attempts=3,
                            response=LLMResponse(text="oops", model="stub"))
    return None


def scripted_llm():
    return FakeChatModel(_scripted, fail=_bad_chunk_fails)


def _chunks():
    chunks = [CorpusChunk(f"sports#{k}", "sports", t, 0, len(t), len(t)) for k, t in enumerate(SPORTS)]
    chunks += [CorpusChunk(f"library#{k}", "library", t, 0, len(t), len(t)) for k, t in enumerate(LIBRARY)]
    chunks.append(CorpusChunk("bad#0", "bad", BAD, 0, len(BAD), len(BAD)))
    return chunks


def _embedder():
    return CharEmbedder(SPORTS + LIBRARY + [BAD, json.dumps(EXTRACTIONS, ensure_ascii=False)])


@pytest.fixture()
def built():
    llm = scripted_llm()
    emb = _embedder()
    index = GraphIndex.build(_chunks(), llm, emb)
    return index, llm, emb


def test_normalise_name():
    assert normalise_name("  City\u3000 LIBRARY \n") == "city library"
    assert normalise_name("杭州市 体育局") == "杭州市 体育局"
    assert normalise_name("ＡＢＣ") == "abc"  # full-width -> half-width under NFKC


def test_graph_nodes_edges_and_attributes(built):
    index, llm, _ = built
    g = index.graph
    assert list(g.nodes) == SPORTS_NODES + LIBRARY_NODES
    assert index.entity_names == SPORTS_NODES + LIBRARY_NODES
    edges = {frozenset((a, b)): d["weight"] for a, b, d in g.edges(data=True)}
    assert edges == {
        frozenset(("杭州市体育局", "体育消费券")): 2.0,
        frozenset(("支付宝", "体育消费券")): 1.0,
        frozenset(("体育消费券", "杭州")): 1.0,
        frozenset(("杭州市体育局", "杭州")): 1.0,
        frozenset(("city library", "reading room")): 1.0,
        frozenset(("anna smith", "city library")): 1.0,
        frozenset(("anna smith", "reading club")): 1.0,
        frozenset(("reading club", "reading room")): 1.0,
        frozenset(("reading club", "city library")): 1.0,
    }
    coupon = g.nodes["体育消费券"]
    assert coupon["type"] == "product"
    assert coupon["description"] == "每张面额50元的消费券。 每人限领一张。 可在游泳馆使用。"
    assert coupon["chunk_ids"] == ["sports#0", "sports#1", "sports#2"]
    lib = g.nodes["city library"]
    assert lib["type"] == "organization"  # 2 organisation mentions vs 1 location
    assert lib["description"] == "A public library. Employs Anna Smith."
    assert lib["chunk_ids"] == ["library#0", "library#1", "library#2"]
    e = g.edges["杭州市体育局", "体育消费券"]
    assert e["chunk_ids"] == ["sports#0", "sports#2"]
    assert e["description"] == "杭州市体育局于5月1日发放体育消费券。 杭州市体育局介绍体育消费券。"
    assert index.chunk_entities["sports#2"] == ["杭州市体育局", "体育消费券", "杭州"]
    assert index.chunk_entities["library#1"] == ["anna smith", "city library", "reading club"]
    # embeddings: one L2-normalised row per entity, of "name: description"
    assert index.entity_embeddings.shape == (8, len(_embedder().index))
    assert np.allclose(np.linalg.norm(index.entity_embeddings, axis=1), 1.0, atol=1e-5)
    assert np.allclose(index.entity_embeddings[1], _embedder().embed([f"体育消费券: {coupon['description']}"])[0])
    # 7 extractions (one failed) + 2 community reports, all at temperature 0
    assert len(llm.calls) == index.llm_calls == 9
    assert index.reused_extractions == index.reused_summaries == 0
    assert all(c.kwargs["temperature"] == 0.0 for c in llm.calls)
    assert SPORTS[0] in llm.prompts[0] and "same language as the text" in llm.prompts[0]


def test_two_communities_match_the_topics(built):
    index, llm, _ = built
    assert index.communities == [SPORTS_NODES, LIBRARY_NODES]
    assert [index.graph.nodes[n]["community"] for n in SPORTS_NODES] == [0, 0, 0, 0]
    assert [index.graph.nodes[n]["community"] for n in LIBRARY_NODES] == [1, 1, 1, 1]
    assert index.community_of("City  LIBRARY") == 1
    assert index.summaries == {
        0: "杭州体育消费券\n杭州市体育局发放体育消费券，市民在支付宝领取。",
        1: "City Library\nThe city library and its reading club.",
    }
    assert index.failed_communities == {}
    sports_prompt = llm.prompts[7]
    assert "- 体育消费券 (product): 每张面额50元的消费券。 每人限领一张。 可在游泳馆使用。" in sports_prompt
    assert "- 杭州市体育局 -> 体育消费券: " in sports_prompt
    assert "city library" not in sports_prompt
    # the most connected entity is listed first
    assert sports_prompt.index("- 体育消费券 (") < sports_prompt.index("- 杭州市体育局 (")


def test_local_search_returns_the_topic_first(built):
    index, _, emb = built
    r = GraphRAGLocalRetriever(index, emb, top_entities=1)
    assert isinstance(r, Retriever) and r.name == "graph_rag"
    sims = r.similarities("杭州体育消费券在哪里领取？")
    # 杭州 is the nearest entity; with its neighbours 体育消费券 and 杭州市体育局 (not 支付宝)
    assert index.entity_names[int(np.argmax(sims))] == "杭州"
    assert sims[4:].tolist() == [0.0, 0.0, 0.0, 0.0]  # no shared characters with the English entities
    hits = r.retrieve("杭州体育消费券在哪里领取？")
    assert all(isinstance(h, Hit) for h in hits)
    assert [h.chunk_id for h in hits] == ["community:0", "sports#2", "sports#0", "sports#1"]
    assert hits[0].text == index.summaries[0]
    assert hits[0].score == pytest.approx(float(sims.max()))
    assert [h.score for h in hits[1:]] == [3.0, 2.0, 1.0]
    assert hits[1].text == SPORTS[2]
    assert [h.chunk_id for h in r.retrieve("杭州体育消费券在哪里领取？", top_k=2)] == ["community:0", "sports#2"]
    assert r.retrieve("杭州体育消费券在哪里领取？", top_k=0) == []

    # nearest: reading room, expanded to city library and reading club (not anna smith);
    # library#0 and library#1 both mention 2 of them: the tie goes to library#0, whose best
    # entity (reading room) is more similar than library#1's (reading club)
    q = "When does the reading club of the city library meet?"
    sims = r.similarities(q)
    assert index.entity_names[int(np.argmax(sims))] == "reading room"
    assert sims[index.entity_names.index("reading room")] > sims[index.entity_names.index("reading club")]
    hits = r.retrieve(q)
    assert [h.chunk_id for h in hits] == ["community:1", "library#2", "library#0", "library#1"]
    assert [h.score for h in hits[1:]] == [3.0, 2.0, 2.0]
    assert hits[0].text == index.summaries[1]


def test_local_search_without_reports_returns_chunks_only():
    index = GraphIndex.build(_chunks(), scripted_llm(), _embedder(), summarize_communities=False)
    assert index.summaries == {} and index.llm_calls == 7
    hits = GraphRAGLocalRetriever(index, _embedder(), top_entities=4).retrieve("杭州体育消费券")
    assert [(h.chunk_id, h.score) for h in hits] == [("sports#2", 3.0), ("sports#0", 2.0), ("sports#1", 2.0)]


def test_min_community_size_skips_the_reports_of_small_communities():
    # both communities have 4 entities: a minimum of 4 keeps both reports, 5 drops both
    kept = GraphIndex.build(_chunks(), scripted_llm(), _embedder(), min_community_size=4)
    assert sorted(kept.summaries) == [0, 1] and kept.llm_calls == 9
    index = GraphIndex.build(_chunks(), scripted_llm(), _embedder(), min_community_size=5)
    assert index.summaries == {} and index.failed_communities == {} and index.llm_calls == 7
    hits = GraphRAGLocalRetriever(index, _embedder(), top_entities=4).retrieve("杭州体育消费券")
    assert [h.chunk_id for h in hits] == ["sports#2", "sports#0", "sports#1"]
    with pytest.raises(ValueError, match="min_community_size"):
        GraphIndex.build(_chunks(), scripted_llm(), _embedder(), min_community_size=0)


def test_failed_chunk_is_recorded_with_its_reason(built, tmp_path):
    index, _, _ = built
    assert index.failed == {"bad#0": BAD_ERROR}
    assert index.chunk_entities["bad#0"] == []
    assert "bad#0" in index.chunk_ids and index.chunk_texts["bad#0"] == BAD
    GraphIndex.build(_chunks(), scripted_llm(), _embedder(), store=tmp_path)
    records = [json.loads(line) for line in (tmp_path / "extractions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["chunk_id"] for r in records] == [c.chunk_id for c in _chunks()]
    bad = records[-1]
    assert bad["status"] == "failed" and bad["error"] == BAD_ERROR and bad["entities"] == []
    assert all(r["status"] == "ok" and r["error"] is None for r in records[:-1])
    assert records[0]["entities"] == EXTRACTIONS[SPORTS[0]]["entities"]


def test_rebuild_from_store_makes_no_llm_calls(tmp_path):
    first_llm = scripted_llm()
    first = GraphIndex.build(_chunks(), first_llm, _embedder(), store=tmp_path)
    assert len(first_llm.calls) == 9
    assert (tmp_path / "community_summaries.jsonl").is_file()

    llm = scripted_llm()
    again = GraphIndex.build(_chunks(), llm, _embedder(), store=tmp_path)
    assert len(llm.calls) == again.llm_calls == 0
    assert again.reused_extractions == 7 and again.reused_summaries == 2
    assert list(again.graph.edges(data="weight")) == list(first.graph.edges(data="weight"))
    assert again.communities == first.communities and again.summaries == first.summaries
    assert again.failed == {"bad#0": BAD_ERROR}
    # no LLM at all is fine when the store holds everything
    assert GraphIndex.build(_chunks(), None, _embedder(), store=tmp_path).summaries == first.summaries

    # a last line cut by a kill is dropped and redone
    path = tmp_path / "extractions.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1] + b'{"key": "bad#0\\t')
    llm = scripted_llm()
    GraphIndex.build(_chunks(), llm, _embedder(), store=tmp_path)
    assert len(llm.calls) == 1 and BAD in llm.prompts[0]
    assert path.read_bytes().endswith(b"\n")
    assert all(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())

    # retry_failed re-asks for the failed chunk only
    llm = scripted_llm()
    GraphIndex.build(_chunks(), llm, _embedder(), store=tmp_path, retry_failed=True)
    assert len(llm.calls) == 1 and BAD in llm.prompts[0]

    # a changed chunk text is re-extracted (the key includes the text's sha1)
    chunks = _chunks()
    chunks[0] = chunks[0]._replace(text=SPORTS[0] + " ")
    llm = scripted_llm()
    changed = GraphIndex.build(chunks, llm, _embedder(), store=tmp_path)
    assert len(llm.calls) == 1 and SPORTS[0] in llm.prompts[0]
    assert changed.reused_extractions == 6 and changed.reused_summaries == 2


def test_corrupt_store_line_is_an_error(tmp_path):
    GraphIndex.build(_chunks(), scripted_llm(), _embedder(), store=tmp_path)
    path = tmp_path / "extractions.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = "{not json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        GraphIndex.build(_chunks(), scripted_llm(), _embedder(), store=tmp_path)


def test_build_validation_errors(tmp_path):
    emb, llm = _embedder(), scripted_llm()
    with pytest.raises(ValueError, match="chunks is empty"):
        GraphIndex.build([], llm, emb)
    with pytest.raises(ValueError, match="unique"):
        GraphIndex.build([("a", "x"), ("a", "y")], llm, emb)
    with pytest.raises(ValueError, match="has no text"):
        GraphIndex.build([("a", "  ")], llm, emb)
    with pytest.raises(ValueError, match="single string"):
        GraphIndex.build("abc", llm, emb)
    with pytest.raises(ValueError, match="resolution"):
        GraphIndex.build(_chunks(), llm, emb, resolution=0)
    with pytest.raises(ValueError, match="resolution must be a finite number"):
        GraphIndex.build(_chunks(), llm, emb, resolution=float("inf"))
    with pytest.raises(ValueError, match="summarize_communities must be True or False"):
        GraphIndex.build(_chunks(), llm, emb, summarize_communities="no")
    assert GraphIndex.build(_chunks(), scripted_llm(), emb, resolution=np.float32(1.0)).communities
    with pytest.raises(ValueError, match="seed"):
        GraphIndex.build(_chunks(), llm, emb, seed="0")
    with pytest.raises(ValueError, match="summary_max_tokens"):
        GraphIndex.build(_chunks(), llm, emb, summary_max_tokens=0)
    with pytest.raises(ValueError, match="embedder must have"):
        GraphIndex.build(_chunks(), llm, object())
    with pytest.raises(ValueError, match="llm must have a chat_json"):
        GraphIndex.build(_chunks(), None, emb)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        GraphIndex.build(_chunks(), llm, emb, store=tmp_path / "file")
    assert len(llm.calls) == 0

    with pytest.raises(ValueError, match="returned 1 vectors for 8 texts"):
        GraphIndex.build(_chunks(), scripted_llm(), FixedOutputEmbedder(np.ones((1, 3))), summarize_communities=False)


def test_retriever_validation_errors(built):
    index, _, emb = built
    with pytest.raises(ValueError, match="top_entities"):
        GraphRAGLocalRetriever(index, emb, top_entities=0)
    with pytest.raises(ValueError, match="GraphIndex"):
        GraphRAGLocalRetriever("index", emb)
    with pytest.raises(ValueError, match="query_embedder"):
        GraphRAGLocalRetriever(index, object())
    r = GraphRAGLocalRetriever(index, emb)
    with pytest.raises(ValueError, match="top_k"):
        r.retrieve("杭州", top_k=-1)
    with pytest.raises(ValueError, match="question must be a non-empty string"):
        r.retrieve(None)

    with pytest.raises(ValueError, match="dimension"):
        GraphRAGLocalRetriever(index, FixedOutputEmbedder(np.ones((1, 3)))).retrieve("杭州")


def test_all_chunks_failing_is_an_error_not_an_empty_index(tmp_path):
    chunks = [("b1", BAD), ("b2", BAD + "!")]
    with pytest.raises(RuntimeError, match="failed for all 2 chunks .*chunk b1: .*retry_failed=True"):
        GraphIndex.build(chunks, scripted_llm(), _embedder(), store=tmp_path)
    # nothing is lost: both failures are in the store, and a rebuild re-raises without asking again
    lines = (tmp_path / "extractions.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(x)["status"] for x in lines] == ["failed", "failed"]
    llm = scripted_llm()
    with pytest.raises(RuntimeError, match="failed for all 2 chunks"):
        GraphIndex.build(chunks, llm, _embedder(), store=tmp_path)
    assert len(llm.calls) == 0


def test_empty_question_is_rejected(built):
    index, _, emb = built
    retriever = GraphRAGLocalRetriever(index, emb)
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="question must be a non-empty string"):
            retriever.retrieve(bad)


def test_missing_type_or_description_keeps_the_chunk():
    """A small model that leaves out a relation's description must not lose the chunk's entities."""
    import jsonschema

    reply = {"entities": [{"name": "西湖"}, {"name": "游客", "type": "person"}],
             "relations": [{"source": "游客", "target": "西湖"}]}
    jsonschema.validate(reply, EXTRACTION_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"entities": [{"type": "place"}], "relations": []}, EXTRACTION_SCHEMA)

    sparse = FakeChatModel(lambda call: {"title": "西湖", "summary": "游客与西湖。"} if call.schema is COMMUNITY_SCHEMA
                           else json.loads(json.dumps(reply)))

    text = "西湖景区周末游客增多。"
    index = GraphIndex.build([("u1", text)], sparse, CharEmbedder([text]))
    assert index.failed == {}
    assert sorted(index.graph.nodes) == ["游客", "西湖"]
    assert index.graph.nodes["西湖"]["type"] == "" and index.graph.nodes["游客"]["type"] == "person"
    assert index.graph.edges["游客", "西湖"]["description"] == ""
