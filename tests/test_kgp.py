"""KGP passage graph and LLM-guided traversal on a toy corpus (fake embedder, the shared fake chat model)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from chunkwise.crud.rag.kgp import NEXT_EVIDENCE_PROMPT, KGPRetriever, PassageGraph
from chunkwise.retrieval import Hit, Retriever, tokenize_zh
from fakes import CharEmbedder, FakeChatModel, FixedOutputEmbedder

# A: the amount, B: the venues, D: when to claim -- all about the same entity (上海体育消费券);
# C: unrelated Chinese; L1-L3: unrelated English library passages.
CORPUS = [
    ("A", "上海体育消费券总额为5000万元，由上海市体育局发放。"),
    ("B", "上海体育消费券可在全市500家体育场馆使用，包括游泳馆和羽毛球馆。"),
    ("D", "上海体育消费券每周五上午10点开放领取，每人限领一次。"),
    ("C", "杭州今天天气晴朗，最高气温25度。"),
    ("L1", "The city library opens a new reading room on Monday."),
    ("L2", "Library members can borrow ten books for three weeks."),
    ("L3", "Late returns at the library cost ten cents per day."),
]
QUESTION = "上海体育消费券的总额是多少？"
VENUES = "可以使用消费券的体育场馆有哪些"
CLAIM = "消费券每周几上午开放领取"




def scripted(*replies):
    """The shared fake chat model answering the replies in turn (the last one repeats)."""
    return FakeChatModel(list(replies))


@pytest.fixture(scope="module")
def embedder():
    return CharEmbedder([t for _, t in CORPUS])


@pytest.fixture(scope="module")
def graph(embedder):
    return PassageGraph.build(CORPUS, embedder, lexical_threshold=0.2, semantic_k=1)


def _pairs(*pairs):
    return {frozenset(p) for p in pairs}


# ------------------------------------------------------------------------------------------
# graph
# ------------------------------------------------------------------------------------------


def test_graph_edges_hand_checked(graph):
    # TF-IDF cosines (jieba tokens): A-B 0.237, A-D 0.224, B-D 0.154, library pairs <= 0.14,
    # Chinese-English 0 -> with threshold 0.2 only A-B and A-D.
    assert graph.edges_by_rule("lexical") == _pairs(("A", "B"), ("A", "D"))
    # char-bag cosines: nearest of A is B (0.582), of B is A, of D is A (0.517), of C is A
    # (0.102), of L1 is L2 (0.784), of L2 is L1, of L3 is L2 (0.769).
    assert graph.edges_by_rule("semantic") == _pairs(("A", "B"), ("A", "D"), ("A", "C"), ("L1", "L2"), ("L2", "L3"))
    g = graph.graph
    assert g.number_of_nodes() == 7 and g.number_of_edges() == 5
    assert g.edges["A", "B"]["rules"] == ("lexical", "semantic")
    assert g.edges["A", "C"]["rules"] == ("semantic",)
    assert g.edges["A", "C"]["lexical"] == 0.0
    assert g.edges["A", "B"]["semantic"] == pytest.approx(0.5820, abs=1e-4)
    assert g.edges["L1", "L2"]["semantic"] == pytest.approx(0.7842, abs=1e-4)
    assert graph.neighbours("A") == ["B", "D", "C"]
    assert graph.neighbours("L3") == ["L2"]
    assert graph.embeddings.shape == (7, len(CharEmbedder([t for _, t in CORPUS]).index))


def test_lexical_weight_matches_tfidf_by_hand(graph):
    # smoothed idf = ln((1 + n) / (1 + df)) + 1, raw counts, l2 norm (scikit-learn's defaults)
    docs = [Counter(tokenize_zh(t)) for _, t in CORPUS]
    n = len(docs)
    df = Counter(tok for d in docs for tok in d)

    def vec(d):
        v = {tok: c * (math.log((1 + n) / (1 + df[tok])) + 1) for tok, c in d.items()}
        norm = math.sqrt(sum(x * x for x in v.values()))
        return {tok: x / norm for tok, x in v.items()}

    a, d = vec(docs[0]), vec(docs[2])
    expected = sum(a[t] * d.get(t, 0.0) for t in a)
    assert expected == pytest.approx(0.2235, abs=1e-4)
    assert graph.graph.edges["A", "D"]["lexical"] == pytest.approx(expected, abs=1e-9)


def test_rules_can_be_switched_off(embedder):
    lexical_only = PassageGraph.build(CORPUS, embedder, lexical_threshold=0.2, semantic_k=0)
    assert set(map(frozenset, lexical_only.graph.edges())) == _pairs(("A", "B"), ("A", "D"))
    semantic_only = PassageGraph.build(CORPUS, embedder, lexical_threshold=None, semantic_k=2)
    assert semantic_only.edges_by_rule("lexical") == set()
    # second neighbours: A->D, B->D (0.363), D->B, C->B (0.098), L1->L3, L2->L3, L3->L1
    assert semantic_only.edges_by_rule("semantic") == _pairs(
        ("A", "B"), ("A", "D"), ("A", "C"), ("B", "D"), ("B", "C"), ("L1", "L2"), ("L2", "L3"), ("L1", "L3")
    )


def test_save_load_roundtrip(graph, tmp_path):
    graph.save(tmp_path / "g")
    back = PassageGraph.load(tmp_path / "g")
    assert back.ids == graph.ids and back.texts == graph.texts
    assert np.array_equal(back.embeddings, graph.embeddings)
    assert {frozenset(e) for e in back.graph.edges()} == {frozenset(e) for e in graph.graph.edges()}
    assert back.graph.edges["A", "B"] == graph.graph.edges["A", "B"]
    assert (back.lexical_threshold, back.semantic_k) == (0.2, 1)


# ------------------------------------------------------------------------------------------
# traversal
# ------------------------------------------------------------------------------------------


def test_seed_then_second_passage_through_graph(graph, embedder):
    llm = scripted(VENUES)
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, budget=8, max_steps=1, per_step=1)
    assert isinstance(kgp, Retriever) and kgp.name == "kgp"
    hits = kgp.retrieve(QUESTION, top_k=8)
    assert [h.chunk_id for h in hits] == ["A", "B"]
    assert all(isinstance(h, Hit) for h in hits)
    assert hits[1].text == CORPUS[1][1]
    # seed score = cosine with the question; B's = cosine with the LLM's text
    q = embedder.embed([QUESTION])[0]
    m = embedder.embed([VENUES])[0]
    assert hits[0].score == pytest.approx(float(graph.embeddings[0] @ q), abs=1e-6)
    assert hits[0].score == pytest.approx(0.6768, abs=1e-4)
    assert hits[1].score == pytest.approx(float(graph.embeddings[1] @ m), abs=1e-6)
    # plain similarity to the question would have ranked D (0.464) above B (0.447)
    sims = graph.embeddings @ q
    assert sims[2] > sims[1]
    trace = kgp.last_trace
    assert trace["seeds"] == ["A"]
    assert trace["steps"] == [{"missing": VENUES, "reply": VENUES, "n_candidates": 3, "added": ["B"],
                               "scores": [hits[1].score]}]
    assert trace["stop"] == "max_steps"
    assert len(llm.calls) == 1
    assert llm.prompts[0] == NEXT_EVIDENCE_PROMPT.format(question=QUESTION, evidence="[1] " + CORPUS[0][1])


def test_llm_reply_steers_the_step(graph, embedder):
    llm = scripted(f'"{CLAIM}"\nextra line')
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, max_steps=1, per_step=1)
    assert [h.chunk_id for h in kgp.retrieve(QUESTION)] == ["A", "D"]
    assert kgp.last_trace["steps"][0]["missing"] == CLAIM  # first line, quotes stripped


def test_only_graph_neighbours_are_candidates(graph, embedder):
    # an English "missing" text matches the library passages, but they are not linked to A:
    # all candidates (B, D, C) score 0 and the tie goes to corpus order
    kgp = KGPRetriever(graph, scripted("library books"), embedder, n_seeds=1, max_steps=1, per_step=1)
    hits = kgp.retrieve(QUESTION)
    assert [h.chunk_id for h in hits] == ["A", "B"]
    assert hits[0].score == pytest.approx(0.6768, abs=1e-4)
    assert hits[1].score == 0.0
    assert kgp.last_trace["steps"][0]["n_candidates"] == 3


def test_multi_step_and_no_neighbours_stop(graph, embedder):
    llm = scripted(VENUES, CLAIM, "天气")
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, budget=8, max_steps=10, per_step=1)
    hits = kgp.retrieve(QUESTION)
    assert [h.chunk_id for h in hits] == ["A", "B", "D", "C"]
    assert [s["added"] for s in kgp.last_trace["steps"]] == [["B"], ["D"], ["C"]]
    assert kgp.last_trace["stop"] == "no_neighbours"
    assert len(llm.calls) == 3  # no call once no unvisited neighbour is left
    assert "[2] " + CORPUS[1][1] in llm.prompts[1]


def test_english_question(graph, embedder):
    llm = scripted("late return fines per day")
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, max_steps=2, per_step=1)
    hits = kgp.retrieve("When does the city library open the new reading room?")
    assert [h.chunk_id for h in hits] == ["L1", "L2", "L3"]  # L3 only reachable through L2
    assert kgp.last_trace["stop"] == "max_steps"


def test_budget_and_max_steps_limits(graph, embedder):
    llm = scripted(VENUES)
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, budget=2, max_steps=5, per_step=2)
    assert [h.chunk_id for h in kgp.retrieve(QUESTION)] == ["A", "B"]
    assert len(llm.calls) == 1 and kgp.last_trace["stop"] == "limit"

    llm = scripted(VENUES)
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, budget=8, max_steps=1, per_step=2)
    assert [h.chunk_id for h in kgp.retrieve(QUESTION)] == ["A", "B", "D"]
    assert len(llm.calls) == 1 and kgp.last_trace["stop"] == "max_steps"

    llm = scripted(VENUES)
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=2, budget=8, max_steps=0)
    assert [h.chunk_id for h in kgp.retrieve(QUESTION)] == ["A", "D"]  # seeds only
    assert len(llm.calls) == 0

    # top_k below the budget caps the traversal (same prefix, fewer calls)
    llm = scripted(VENUES)
    kgp = KGPRetriever(graph, llm, embedder, n_seeds=1, budget=8, max_steps=5, per_step=1)
    assert [h.chunk_id for h in kgp.retrieve(QUESTION, top_k=1)] == ["A"]
    assert len(llm.calls) == 0 and kgp.last_trace["stop"] == "limit"
    assert kgp.retrieve(QUESTION, top_k=0) == [] and len(llm.calls) == 0


def test_empty_reply_falls_back_to_question(graph, embedder):
    kgp = KGPRetriever(graph, scripted("   \n"), embedder, n_seeds=1, max_steps=1, per_step=1)
    hits = kgp.retrieve(QUESTION)
    # neighbours of A by cosine with the question: D 0.464 > B 0.447
    assert [h.chunk_id for h in hits] == ["A", "D"]
    assert kgp.last_trace["steps"][0]["missing"] == ""


# ------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chunks, kwargs, match",
    [
        ([], {}, "empty"),
        ([("a", "x"), ("a", "y")], {}, "unique"),
        ([("a", "  ")], {}, "no text"),
        ([("a", "x")], {"lexical_threshold": 0.0}, r"\(0, 1\]"),
        ([("a", "x")], {"lexical_threshold": 1.5}, r"\(0, 1\]"),
        ([("a", "x")], {"lexical_threshold": "0.3"}, "lexical_threshold"),
        ([("a", "x")], {"semantic_k": -1}, "semantic_k"),
        ([("a", "x")], {"semantic_k": True}, "semantic_k"),
        ([5], {}, "is not a CorpusChunk"),
    ],
)
def test_build_validation(embedder, chunks, kwargs, match):
    with pytest.raises(ValueError, match=match):
        PassageGraph.build(chunks, embedder, **kwargs)


def test_build_bad_embeddings():
    with pytest.raises(ValueError, match="2 texts"):
        PassageGraph.build(["a", "b"], FixedOutputEmbedder(np.ones((3, 4))))
    with pytest.raises(ValueError, match="NaN"):
        PassageGraph.build(["a", "b"], FixedOutputEmbedder(np.full((2, 4), np.nan)))
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        PassageGraph.build(["a", "b"], FixedOutputEmbedder(np.ones(4)))


def test_retriever_validation(graph, embedder):
    llm = scripted(VENUES)
    for kwargs, match in [
        ({"n_seeds": 0}, "n_seeds"),
        ({"budget": 0}, "budget"),
        ({"max_steps": -1}, "max_steps"),
        ({"per_step": 0}, "per_step"),
        ({"budget": 2.5}, "budget"),
    ]:
        with pytest.raises(ValueError, match=match):
            KGPRetriever(graph, llm, embedder, **kwargs)
    with pytest.raises(ValueError, match="PassageGraph"):
        KGPRetriever(object(), llm, embedder)
    with pytest.raises(ValueError, match="chat"):
        KGPRetriever(graph, object(), embedder)
    kgp = KGPRetriever(graph, llm, embedder)
    with pytest.raises(ValueError, match="question"):
        kgp.retrieve("  ")
    with pytest.raises(ValueError, match="top_k"):
        kgp.retrieve(QUESTION, top_k=-1)
    wrong_dim = KGPRetriever(graph, llm, FixedOutputEmbedder(np.ones((1, 3))))
    with pytest.raises(ValueError, match="dimension"):
        wrong_dim.retrieve(QUESTION)
    with pytest.raises(KeyError):
        graph.neighbours("nope")
    with pytest.raises(ValueError, match="rule"):
        graph.edges_by_rule("both")


def test_semantic_ties_go_to_corpus_order():
    texts = [("x", "同一段文字"), ("y", "同一段文字"), ("z", "同一段文字"), ("w", "完全不同")]
    emb = CharEmbedder([t for _, t in texts])
    g = PassageGraph.build(texts, emb, lexical_threshold=None, semantic_k=1)
    # x -> y (tie with z, y first), y -> x, z -> x, w -> x (all cosines 0, x first)
    assert g.edges_by_rule("semantic") == _pairs(("x", "y"), ("x", "z"), ("x", "w"))
    lex = PassageGraph.build(texts, emb, lexical_threshold=1.0, semantic_k=0)
    # identical texts have TF-IDF cosine 1 (up to round-off) and meet the threshold 1.0
    assert lex.edges_by_rule("lexical") == _pairs(("x", "y"), ("x", "z"), ("y", "z"))
