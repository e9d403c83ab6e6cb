"""RAPTOR tree and retrievers on a two-topic toy corpus (fake embedder, the shared fake chat model)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chunkwise.crud.rag.chunking import CorpusChunk
from chunkwise.crud.rag.raptor import (
    CollapsedTreeRetriever,
    RaptorTree,
    TreeTraversalRetriever,
    reducer_name,
)
from chunkwise.retrieval import Hit, Retriever
from chunkwise.tokens import count_tokens
from fakes import CharEmbedder, FakeChatModel, WrongCountEmbedder

SPORTS = [
    "体育消费券于2023年5月1日在杭州发放，每张面额50元。",
    "市民可在体育场馆使用消费券，购买游泳和羽毛球服务。",
    "杭州市体育局表示，消费券共发放3万张，先到先得。",
    "领取消费券需要在支付宝上实名登记，每人限领一张。",
    "消费券有效期为30天，过期作废，不能兑换现金。",
]
LIBRARY = [
    "The city library opens a new reading room on Monday, June 3.",
    "Library members can borrow up to ten books for three weeks.",
    "The library catalogue lists more than 200,000 titles online.",
    "Librarian Anna Smith runs a free reading club every Friday.",
    "Late returns at the library cost ten cents per book per day.",
]




def _first_sentences(call):
    """Summary = the first sentence of each passage, joined."""
    body = call.prompt.split("Passages:\n", 1)[1].rsplit("\n\nSummary:", 1)[0]
    firsts = []
    for passage in body.split("\n\n"):
        for sep in ("。", ". "):
            passage = passage.split(sep)[0]
        firsts.append(passage.strip())
    return " ".join(firsts)


def summary_llm():
    return FakeChatModel(_first_sentences)


def _chunks():
    chunks = []
    for k, t in enumerate(SPORTS):
        chunks.append(CorpusChunk(f"sports#{k}", "sports", t, 0, len(t), count_tokens(t)))
    for k, t in enumerate(LIBRARY):
        chunks.append(CorpusChunk(f"library#{k}", "library", t, 0, len(t), count_tokens(t)))
    return chunks


@pytest.fixture()
def setup():
    emb = CharEmbedder(SPORTS + LIBRARY)
    llm = summary_llm()
    tree = RaptorTree.build(_chunks(), emb, llm, reduction_dim=2)
    return tree, emb, llm


def _leaves(tree, node_id):
    node = tree.nodes[node_id]
    if node.level == 0:
        return {node_id}
    out = set()
    for c in node.children:
        out |= _leaves(tree, c)
    return out


def test_tree_shape_and_level1_separates_topics(setup):
    tree, emb, llm = setup
    assert reducer_name() in ("umap", "pca")
    assert tree.reducer == reducer_name()
    assert tree.levels[0] == [f"sports#{k}" for k in range(5)] + [f"library#{k}" for k in range(5)]
    assert tree.depth >= 2  # level 1 (topic clusters) and a root above
    assert len(tree.root_ids) == 1
    level1 = tree.levels[1]
    assert len(level1) >= 2
    covered = set()
    for nid in level1:
        node = tree.nodes[nid]
        assert node.level == 1 and nid.startswith("raptor:1:")
        topics = {c.split("#")[0] for c in node.children}
        assert len(topics) == 1, f"cluster {nid} mixes topics: {node.children}"
        covered |= set(node.children)
        assert node.embedding.shape == (emb.embed(["x"]).shape[1],)
        assert np.isclose(np.linalg.norm(node.embedding), 1.0, atol=1e-5)
    assert covered == set(tree.levels[0])  # every leaf is in some cluster
    assert _leaves(tree, tree.root_ids[0]) == set(tree.levels[0])
    # one LLM call per summary node; the stub's summary keeps each child's first sentence
    assert len(llm.calls) == len(tree) - 10 == tree.llm_calls
    assert tree.reused_summaries == 0
    first = tree.nodes[level1[0]]
    assert all(tree.nodes[c].text.split("。")[0].split(". ")[0] in first.text for c in first.children)
    assert "same language as the passages" in llm.prompts[0]


def test_tree_traversal_returns_the_right_topic(setup):
    tree, emb, _ = setup
    r = TreeTraversalRetriever(tree, emb, top_k_per_level=1)
    assert isinstance(r, Retriever) and r.name == "tree_traversal"
    hits = r.retrieve("library books reading room", top_k=10)
    assert all(isinstance(h, Hit) for h in hits)
    # one node per level: root, a library cluster (level 1 ...), one library leaf
    assert len(hits) == tree.depth + 1
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    leaves = [h for h in hits if tree.nodes[h.chunk_id].level == 0]
    assert len(leaves) == 1 and leaves[0].chunk_id.startswith("library#")
    for h in hits:
        node = tree.nodes[h.chunk_id]
        if 0 < node.level < tree.depth:
            assert all(leaf.startswith("library#") for leaf in _leaves(tree, h.chunk_id))
    hits = TreeTraversalRetriever(tree, emb, top_k_per_level=2).retrieve("体育消费券 杭州 发放", top_k=20)
    leaf_ids = [h.chunk_id for h in hits if tree.nodes[h.chunk_id].level == 0]
    assert len(leaf_ids) == 2 and all(i.startswith("sports#") for i in leaf_ids)
    assert len(TreeTraversalRetriever(tree, emb).retrieve("体育消费券", top_k=1)) == 1
    assert TreeTraversalRetriever(tree, emb).retrieve("体育消费券", top_k=0) == []


def test_collapsed_tree_respects_token_budget(setup):
    tree, emb, _ = setup
    budget = 60
    r = CollapsedTreeRetriever(tree, emb, max_tokens=budget)
    assert isinstance(r, Retriever) and r.name == "collapsed_tree"
    hits = r.retrieve("The library catalogue lists titles online", top_k=50)
    used = sum(count_tokens(h.text) for h in hits)
    assert 0 < used <= budget
    assert hits[0].chunk_id == "library#2"  # the near-verbatim leaf wins
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # greedy prefix of the ranking: the next-ranked node would have overflowed the budget
    pool = tree.all_nodes()
    q = emb.embed(["The library catalogue lists titles online"])[0]
    ranked = sorted(range(len(pool)), key=lambda i: (-float(pool[i].embedding @ q), i))
    assert [h.chunk_id for h in hits] == [pool[i].id for i in ranked[: len(hits)]]
    nxt = pool[ranked[len(hits)]]
    assert used + count_tokens(nxt.text) > budget
    # top_k caps as well; a large budget takes every node of every level
    assert len(r.retrieve("library", top_k=2)) == 2
    all_hits = CollapsedTreeRetriever(tree, emb, max_tokens=10**6).retrieve("library", top_k=100)
    assert len(all_hits) == len(tree)
    assert {tree.nodes[h.chunk_id].level for h in all_hits} == set(range(tree.depth + 1))
    # a budget smaller than the best node returns nothing
    assert CollapsedTreeRetriever(tree, emb, max_tokens=1).retrieve("library", top_k=5) == []


def test_store_makes_rebuild_free(tmp_path):
    emb = CharEmbedder(SPORTS + LIBRARY)
    llm1 = summary_llm()
    t1 = RaptorTree.build(_chunks(), emb, llm1, reduction_dim=2, store=tmp_path)
    lines = (tmp_path / "summaries.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(llm1.calls) == len(lines) == len(t1) - 10 > 0
    rec = json.loads(lines[0])
    assert set(rec) == {"key", "level", "children", "text"} and len(rec["key"]) == 40
    llm2 = summary_llm()
    t2 = RaptorTree.build(_chunks(), emb, llm2, reduction_dim=2, store=tmp_path)
    assert len(llm2.calls) == 0 and t2.llm_calls == 0 and t2.reused_summaries == len(llm1.calls)
    assert t2.levels == t1.levels
    assert [n.text for n in t2.all_nodes()] == [n.text for n in t1.all_nodes()]
    assert len((tmp_path / "summaries.jsonl").read_text(encoding="utf-8").splitlines()) == len(lines)
    # a line cut by a kill is dropped and that summary redone
    path = tmp_path / "summaries.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:15], encoding="utf-8")
    llm3 = summary_llm()
    RaptorTree.build(_chunks(), emb, llm3, reduction_dim=2, store=tmp_path)
    assert len(llm3.calls) == 1
    assert len(path.read_text(encoding="utf-8").splitlines()) == len(lines)


def test_small_inputs_and_input_forms():
    emb = CharEmbedder(SPORTS + LIBRARY)
    llm = summary_llm()
    one = RaptorTree.build(["only one chunk."], emb, llm)
    assert one.depth == 0 and one.root_ids == ["0"] and len(llm.calls) == 0
    hits = TreeTraversalRetriever(one, emb).retrieve("chunk", top_k=3)
    assert [h.chunk_id for h in hits] == ["0"]
    pair = RaptorTree.build([("a", LIBRARY[0]), ("b", LIBRARY[1])], emb, llm)
    assert pair.depth == 1 and pair.nodes[pair.root_ids[0]].children == ("a", "b") and len(llm.calls) == 1
    capped = RaptorTree.build(_chunks(), emb, summary_llm(), reduction_dim=2, max_levels=1)
    assert capped.depth == 1


def test_validation_errors():
    emb = CharEmbedder(SPORTS)
    llm = summary_llm()
    chunks = _chunks()
    with pytest.raises(ValueError, match="empty"):
        RaptorTree.build([], emb, llm)
    with pytest.raises(ValueError, match="unique"):
        RaptorTree.build([("a", "x"), ("a", "y")], emb, llm)
    with pytest.raises(ValueError, match="no text"):
        RaptorTree.build([("a", "  ")], emb, llm)
    for kw, match in [
        ({"max_levels": 0}, "max_levels"),
        ({"reduction_dim": 0}, "reduction_dim"),
        ({"max_clusters": 0}, "max_clusters"),
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"max_summary_tokens": -1}, "max_summary_tokens"),
        ({"max_levels": True}, "max_levels"),
        ({"random_state": "x"}, "random_state"),
        ({"random_state": -1}, "random_state must be an int >= 0"),
    ]:
        with pytest.raises(ValueError, match=match):
            RaptorTree.build(chunks, emb, llm, **kw)
    assert len(llm.calls) == 0
    assert len(RaptorTree.build(chunks[:2], emb, summary_llm(), threshold=np.float32(0.1))) >= 2
    with pytest.raises(ValueError, match="llm must have a chat"):
        RaptorTree.build(chunks, emb, None)
    with pytest.raises(ValueError, match="embedder must have an embed"):
        RaptorTree.build(chunks, None, llm)

    with pytest.raises(ValueError, match="vectors"):
        RaptorTree.build(chunks, WrongCountEmbedder(+1, dim=3, dtype=np.float32), llm)
    tree = RaptorTree.build(chunks[:2], emb, llm)
    with pytest.raises(ValueError, match="top_k_per_level"):
        TreeTraversalRetriever(tree, emb, top_k_per_level=0)
    with pytest.raises(ValueError, match="max_tokens"):
        CollapsedTreeRetriever(tree, emb, max_tokens=0)
    with pytest.raises(ValueError, match="top_k"):
        TreeTraversalRetriever(tree, emb).retrieve("x", top_k=-1)
    with pytest.raises(ValueError, match="top_k"):
        CollapsedTreeRetriever(tree, emb).retrieve("x", top_k=1.5)
    for retriever in (TreeTraversalRetriever(tree, emb), CollapsedTreeRetriever(tree, emb)):
        for question in ("", "  \n", None):
            with pytest.raises(ValueError, match="question must be a non-empty string"):
                retriever.retrieve(question, top_k=3)


def test_default_parameters_also_separate_topics():
    emb = CharEmbedder(SPORTS + LIBRARY)
    tree = RaptorTree.build(_chunks(), emb, summary_llm())  # reduction_dim=10, capped at n - 2
    assert len(tree.root_ids) == 1
    for level in tree.levels[1:-1]:
        for nid in level:
            topics = {leaf.split("#")[0] for leaf in _leaves(tree, nid)}
            assert len(topics) == 1
