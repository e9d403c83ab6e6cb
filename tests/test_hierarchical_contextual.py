"""HierarchicalChunker / merge_to_parents and ContextualChunker (with a fake LLM)."""

from __future__ import annotations

import re

import pytest

from chunkwise.chunk import Chunk
from chunkwise.chunkers import (
    ContextualChunker,
    FixedTokenChunker,
    HierarchicalChunker,
    RecursiveTokenChunker,
    index_text,
    merge_to_parents,
)
from chunkwise.chunkers.contextual import document_window
from chunkwise.tokens import WhitespaceSpanner
from fakes import FakeChatModel

W = WhitespaceSpanner()

# ---------------------------------------------------------------- hierarchical

TEXT = "Kites fly. Boats sail.\n\nTrains run. Cars park."


def small_to_big():
    return HierarchicalChunker(
        RecursiveTokenChunker(30, 0, length_function=len), RecursiveTokenChunker(12, 0, length_function=len)
    )


def test_split_hierarchy_children_inside_parents_with_links():
    parents, children = small_to_big().split_hierarchy(TEXT)
    # Parents: the two paragraphs (24 + 22 characters do not fit in 30).
    assert [(p.start, p.end) for p in parents] == [(0, 22), (24, 46)]
    assert [p.metadata["n_children"] for p in parents] == [2, 2]
    # Children: the sentences (each under 12 characters), offsets in the document.
    assert [(c.text, c.start, c.end) for c in children] == [
        ("Kites fly.", 0, 10), ("Boats sail.", 11, 22), ("Trains run.", 24, 35), ("Cars park.", 36, 46)
    ]
    assert [(c.metadata["parent_id"], c.metadata["child_index"], c.metadata["n_siblings"]) for c in children] == [
        (0, 0, 2), (0, 1, 2), (1, 0, 2), (1, 1, 2)
    ]
    assert [(c.metadata["parent_start"], c.metadata["parent_end"]) for c in children] == [(0, 22)] * 2 + [(24, 46)] * 2
    assert small_to_big().split(TEXT) == children


def test_default_hierarchy_keeps_exact_offsets():
    doc = "# A\n\n" + "Word " * 400 + "\n\n# B\n\nShort."
    parents, children = HierarchicalChunker().split_hierarchy(doc)
    assert len(parents) == 2 and len(children) >= 3
    for c in children:
        assert doc[c.start : c.end] == c.text
        p = parents[c.metadata["parent_id"]]
        assert p.start <= c.start and c.end <= p.end


def _family():
    """Parents P0 (3 children), P1 (2), P2 (4) and a ranked list with one repeat."""
    parents = [
        Chunk("p0" * 5, 0, 10, {"n_children": 3}),
        Chunk("p1" * 5, 10, 20, {"n_children": 2}),
        Chunk("p2" * 10, 20, 40, {"n_children": 4}),
    ]

    def kid(pid, i):
        s = parents[pid].start + 2 * i
        return Chunk(f"{pid}{i}", s, s + 2, {"parent_id": pid})

    ranked = [kid(1, 0), kid(0, 0), kid(1, 1), kid(2, 0), kid(0, 0), kid(0, 1)]
    return parents, ranked


def label(chunks):
    return [("P%d" % c.metadata["parent_id"]) if "merged_children" in c.metadata else c.text for c in chunks]


def test_merge_with_a_count_threshold():
    parents, ranked = _family()
    out = merge_to_parents(ranked, parents, merge_threshold=2)
    # P1 has 2 retrieved children, P0 has 2 (the repeat of "00" counts once), P2 has 1.
    assert label(out) == ["P1", "P0", "20"]
    assert [c.metadata["merged_children"] for c in out[:2]] == [2, 2]
    assert (out[0].start, out[0].end) == (10, 20)


def test_merge_with_a_fraction_threshold():
    parents, ranked = _family()
    # 0.75: P0 needs ceil(2.25) = 3 (has 2), P1 needs ceil(1.5) = 2 (has 2), P2 needs 3 (has 1).
    assert label(merge_to_parents(ranked, parents, 0.75)) == ["P1", "00", "20", "01"]
    # 0.5: P0 needs 2, P1 needs 1, P2 needs 2.
    assert label(merge_to_parents(ranked, parents, 0.5)) == ["P1", "P0", "20"]
    # 1.0: every child of a parent.
    assert label(merge_to_parents(ranked, parents, 1.0)) == ["P1", "00", "20", "01"]
    # A count nobody reaches: the ranked list, de-duplicated, in rank order.
    assert label(merge_to_parents(ranked, parents, 3)) == ["10", "00", "11", "20", "01"]
    assert merge_to_parents([], parents, 2) == []


def test_merge_with_a_mapping_of_parents_across_documents():
    p = Chunk("abcd", 0, 4, {"n_children": 2})
    kids = [Chunk("ab", 0, 2, {"parent_id": ("doc1", 0)}), Chunk("cd", 2, 4, {"parent_id": ("doc1", 0)}),
            Chunk("ab", 0, 2, {"parent_id": ("doc2", 0)})]
    out = merge_to_parents(kids, {("doc1", 0): p, ("doc2", 0): p}, merge_threshold=2)
    assert [(c.text, c.metadata["parent_id"]) for c in out] == [("abcd", ("doc1", 0)), ("ab", ("doc2", 0))]


def test_merge_and_hierarchy_bad_input():
    parents, ranked = _family()
    for bad in (0, -1, 1.5, 0.0, True, "2", None):
        with pytest.raises(ValueError, match="merge_threshold must be an int >= 1"):
            merge_to_parents(ranked, parents, bad)
    with pytest.raises(ValueError, match="parent_id"):
        merge_to_parents([Chunk("a", 0, 1)], parents, 2)
    with pytest.raises(ValueError, match="not an index into the 3 parents"):
        merge_to_parents([Chunk("a", 0, 1, {"parent_id": 7})], parents, 2)
    with pytest.raises(ValueError, match="not an index"):
        merge_to_parents([Chunk("a", 0, 1, {"parent_id": -1})], parents, 2)
    with pytest.raises(ValueError, match="n_children"):
        merge_to_parents([Chunk("a", 0, 1, {"parent_id": 0})], [Chunk("ab", 0, 2)], 0.5)
    with pytest.raises(TypeError, match="Chunk objects"):
        merge_to_parents(["a"], parents, 2)
    with pytest.raises(TypeError, match="parent_chunker must have a split"):
        HierarchicalChunker(parent_chunker=object())
    with pytest.raises(TypeError, match="child_chunker must have a split"):
        HierarchicalChunker(child_chunker="recursive")
    with pytest.raises(TypeError, match="text must be a str"):
        small_to_big().split(3)


# ---------------------------------------------------------------- contextual


def _context(call):
    chunk = re.search(r"<chunk>\n(.*?)\n</chunk>", call.prompt, re.S).group(1)
    return f" CTX {chunk.split()[0]} \n"


def context_llm(cached=False, blank=False):
    """Answers 'CTX <first word of the chunk>' (or a blank reply); records every call."""
    return FakeChatModel("  " if blank else _context, cached=cached)


TEN = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"  # word k spans [3k, 3k + 2)


def test_contextual_adds_context_and_keeps_the_span():
    llm = context_llm()
    base = FixedTokenChunker(4, tokenizer=W)
    chunker = ContextualChunker(base, llm, context_max_tokens=50, tokenizer=W)
    chunks = chunker.split(TEN)
    assert [(c.text, c.start, c.end) for c in chunks] == [(c.text, c.start, c.end) for c in base.split(TEN)]
    assert [c.metadata["context"] for c in chunks] == ["CTX w0", "CTX w4", "CTX w8"]
    assert chunks[1].metadata["index_text"] == "CTX w4\n\nw4 w5 w6 w7"
    assert index_text(chunks[1]) == "CTX w4\n\nw4 w5 w6 w7"
    assert index_text(Chunk("plain", 0, 5)) == "plain"
    # The whole document (10 tokens <= 3000) is in every prompt, before the chunk.
    assert all(p.index("<document>\n" + TEN + "\n</document>") < p.index("<chunk>") for p in llm.prompts)
    assert [(c.kwargs["temperature"], c.kwargs["max_tokens"]) for c in llm.calls] == [(0.0, 50)] * 3
    assert chunker.last_stats == {"llm_calls": 3, "cache_hits": 0, "truncated": 0}
    assert chunks[0].metadata["n_tokens"] == 4  # the base chunker's metadata is kept


def test_document_window_rule_by_hand():
    units = W.token_spans(TEN)
    cum = list(range(11))
    # Chunk w4 w5 (12, 17), budget 6: 4 tokens left, 2 before and 2 after -> w2..w7.
    assert document_window(cum, units, 12, 17, 6) == (6, 23)
    # At the start nothing fits before: all 4 go after -> w0..w5.
    assert document_window(cum, units, 0, 5, 6) == (0, 17)
    # At the end: 2 before would leave 2 unused after, so 4 go before -> w4..w9.
    assert document_window(cum, units, 24, 29, 6) == (12, 29)
    # Odd remainder: 3 left -> 1 before, 2 after -> w3..w7.
    assert document_window(cum, units, 12, 17, 5) == (9, 23)
    # Chunk alone over budget: just the chunk.
    assert document_window(cum, units, 12, 23, 2) == (12, 23)


def test_long_documents_are_shown_as_a_window_around_the_chunk():
    llm = context_llm()
    chunker = ContextualChunker(FixedTokenChunker(2, tokenizer=W), llm, max_document_tokens=6, tokenizer=W)
    chunks = chunker.split(TEN)
    assert [c.metadata["document_window"] for c in chunks] == [[0, 17], [0, 17], [6, 23], [12, 29], [12, 29]]
    assert "<document>\nw0 w1 w2 w3 w4 w5 [...]\n</document>" in llm.prompts[0]
    assert "<document>\n[...] w2 w3 w4 w5 w6 w7 [...]\n</document>" in llm.prompts[2]
    assert "<document>\n[...] w4 w5 w6 w7 w8 w9\n</document>" in llm.prompts[4]
    assert chunker.last_stats["truncated"] == 5


def test_concurrent_requests_give_the_sequential_result_in_order():
    seq = ContextualChunker(FixedTokenChunker(1, tokenizer=W), context_llm(), tokenizer=W).split(TEN)
    llm = context_llm(cached=True)
    chunker = ContextualChunker(FixedTokenChunker(1, tokenizer=W), llm, max_workers=4, tokenizer=W)
    par = chunker.split(TEN)
    assert [c.metadata for c in par] == [c.metadata for c in seq]
    assert [c.metadata["context"] for c in par] == [f"CTX w{k}" for k in range(10)]
    assert chunker.last_stats == {"llm_calls": 10, "cache_hits": 10, "truncated": 0}


def test_blank_reply_leaves_the_chunk_text_as_index_text():
    chunks = ContextualChunker(FixedTokenChunker(5, tokenizer=W), context_llm(blank=True), tokenizer=W).split(TEN)
    assert [c.metadata["context"] for c in chunks] == ["", ""]
    assert [index_text(c) for c in chunks] == [c.text for c in chunks]


def test_contextual_empty_text_and_bad_input():
    llm = context_llm()
    chunker = ContextualChunker(FixedTokenChunker(5, tokenizer=W), llm, tokenizer=W)
    assert chunker.split("") == [] and llm.prompts == []
    with pytest.raises(TypeError, match="base_chunker must have a split"):
        ContextualChunker(object(), llm)
    with pytest.raises(TypeError, match="base_chunker must have a split"):
        ContextualChunker("recursive", llm)  # str.split is not a chunker
    with pytest.raises(TypeError, match="llm must be a chunkwise.llm.LLMClient"):
        ContextualChunker(FixedTokenChunker(5, tokenizer=W), object())
    for kw, msg in (
        ({"max_document_tokens": 0}, "max_document_tokens must be a positive int"),
        ({"context_max_tokens": 2.5}, "context_max_tokens must be a positive int"),
        ({"max_workers": 0}, "max_workers must be a positive int"),
        ({"temperature": -1}, "temperature must be a number >= 0"),
        ({"temperature": "hot"}, "temperature must be a number >= 0"),
    ):
        with pytest.raises(ValueError, match=msg):
            ContextualChunker(FixedTokenChunker(5, tokenizer=W), llm, **kw)
    with pytest.raises(TypeError, match="text must be a str"):
        chunker.split(["a"])

    class Liar:
        def split(self, text):
            return [Chunk("zz", 0, 2)]

    with pytest.raises(ValueError, match="not text\\[start:end\\]"):
        ContextualChunker(Liar(), llm, tokenizer=W).split("ab")


def test_block_windows_share_a_prefix_by_hand():
    from chunkwise.chunkers.contextual import block_window

    units = W.token_spans(TEN)
    cum = list(range(11))
    # budget 6: blocks w0..w5 (0,17) and w6..w9 (18,29)
    assert block_window(cum, units, 0, 5, 6) == (0, 17)
    assert block_window(cum, units, 12, 17, 6) == (0, 17)
    assert block_window(cum, units, 18, 23, 6) == (18, 29)
    # a chunk starting in block 0 and ending in block 1 extends its window to its own end
    assert block_window(cum, units, 12, 23, 6) == (0, 23)
    llm = context_llm()
    chunker = ContextualChunker(FixedTokenChunker(2, tokenizer=W), llm, max_document_tokens=6, tokenizer=W,
                                windows="blocks")
    chunks = chunker.split(TEN)
    assert [c.metadata["document_window"] for c in chunks] == [[0, 17], [0, 17], [0, 17], [18, 29], [18, 29]]
    assert "<document>\n[...] w6 w7 w8 w9\n</document>" in llm.prompts[3]
    with pytest.raises(ValueError, match="windows must be 'centered' or 'blocks'"):
        ContextualChunker(FixedTokenChunker(2, tokenizer=W), llm, windows="middle")


def test_contextual_uses_the_client_batch_call(tmp_path):
    """With an LLMClient the chunk contexts go out through chat_many: concurrently (the fake
    endpoint sees several in flight, never more than max_workers), in chunk order, and a
    second split is served by the cache."""
    from chunkwise.llm import LLMClient
    from chunkwise.llm.fake_server import FakeChatServer

    def reply(body):
        return "CTX " + re.findall(r"<chunk>\s*(.*?)\s*</chunk>", body["messages"][-1]["content"], re.S)[-1]

    with FakeChatServer(latency_s=0.2, reply=reply) as server:
        llm = LLMClient(base_url=server.base_url, model="fake", cache=tmp_path / "llm.sqlite")
        chunker = ContextualChunker(FixedTokenChunker(1, tokenizer=W), llm, max_workers=3, tokenizer=W)
        chunks = chunker.split(TEN)
        assert [c.metadata["context"] for c in chunks] == [f"CTX w{k}" for k in range(10)]
        assert server.chat_count == 10 and 2 <= server.max_in_flight <= 3
        server.reset()
        assert [c.metadata for c in chunker.split(TEN)] == [c.metadata for c in chunks]
        assert server.chat_count == 0 and chunker.last_stats["cache_hits"] == 10
