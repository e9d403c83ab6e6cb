"""Engine wiring of the Hierarchical, Contextual and Late specs (chunkwise.chunkers.specs + evaluation.grid).

Hand example for Hierarchical:2:5 (children: recursive 2 cl100k_base tokens; parents: structure blocks of
up to 5 tokens):

    H = "one two three four\\n\\nfive six seven eight"
        parents  P0 (0,18) "one two three four"        P1 (20,40) "five six seven eight"
        children c0 (0,7)  c1 (8,18)                   c2 (20,28) c3 (29,40)
    B = "nine ten"  -> one parent (0,8) with one child (0,8)

Bag-of-words cosines: Q1 "three four one" ranks c1 (0.816), c0 (0.408), then ties;
Q2 "seven eight nine" ranks c3 (0.816), b0 (0.408), then ties.
"""

from __future__ import annotations

import re

import pytest

from chunkwise.chunkers.specs import ChunkerSpec, chunk_corpus, parse_spec
from chunkwise.evaluation.grid import GridConfig, run_grid

from fakes import GRID_DOCS, FakeChatModel, WordEmbedder, questions

H = "one two three four\n\nfive six seven eight"


def hier_questions():
    import pandas as pd

    return pd.DataFrame(
        {
            "question_id": ["Q1", "Q2"],
            "question": ["three four one", "seven eight nine"],
            "corpus_id": ["h.txt", "h.txt"],
            "references": [[{"start_index": 8, "end_index": 18}], [{"start_index": 29, "end_index": 40}]],
        }
    )


def cell(result, chunker, k, retriever="dense"):
    t = result.table
    return t[(t["chunker"] == chunker) & (t["k"] == k) & (t["retriever"] == retriever)].iloc[0]


# ------------------------------------------------------------------ parsing


def test_parse_new_specs_and_keep_old_keys():
    assert parse_spec("Hierarchical:100:400") == ChunkerSpec("Hierarchical", 100, 0, 400, 0.5)
    h = parse_spec("Hierarchical:100:400:2")
    assert h.merge_threshold == 2 and isinstance(h.merge_threshold, int)
    assert h.label == "Hierarchical 100/400 merge 2"
    assert parse_spec(h.spec_string()) == h
    assert parse_spec("Contextual:200") == ChunkerSpec("Contextual", 200)
    assert parse_spec("Late:200").boundary_spec == ChunkerSpec("Recursive", 200, 0)
    # chapter 2's span-cache keys are unchanged by the new fields
    assert ChunkerSpec("Recursive", 250, 125).key() == "Recursive|250|125"
    assert parse_spec("Kamradt").key() == "Kamradt|None|0"
    # the kinds' own key fields (defined in chunkers/kinds.py since #57) keep their keys
    assert parse_spec("Hierarchical:100:400").key() == "Hierarchical|100|0|400|0.5"
    assert parse_spec("Hierarchical:100:400:2").key() == "Hierarchical|100|0|400|2"
    assert parse_spec("Contextual:200").key() == "Contextual|200|0"


@pytest.mark.parametrize(
    "bad, message",
    [
        ("Hierarchical:100", "Hierarchical:child_tokens:parent_tokens"),
        ("Hierarchical:400:100", "parent size larger"),
        ("Hierarchical:100:400:1.5", "fraction in"),
        ("Hierarchical:100:400:0", "int >= 1"),
        ("Hierarchical:a:400", "must be integers"),
        ("Late", "Late needs a size"),
        ("Contextual:200:20", "Contextual takes no overlap"),
        ("Paragraph:10", "unknown chunker 'Paragraph'"),
    ],
)
def test_bad_specs_get_one_clear_error(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_spec(bad)


# ------------------------------------------------------------------ hierarchical


def test_hierarchical_returns_parents_by_hand(tmp_path):
    docs = {"h.txt": H, "b.txt": "nine ten"}
    cfg = GridConfig(chunkers=["Hierarchical:2:5:2", "Hierarchical:2:5"], retrievers=["dense"], top_k=[1, 2])
    res = run_grid(docs, hier_questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    # the index is the children
    assert res.chunks["Hierarchical 2/5 merge 2"]["h.txt"] == [(0, 7), (8, 18), (20, 28), (29, 40)]
    k1 = cell(res, "Hierarchical 2/5 merge 2", 1)
    assert k1["recall"] == 1.0 and k1["precision"] == 1.0 and k1["retrieved_tokens"] == 2.0
    k2 = cell(res, "Hierarchical 2/5 merge 2", 2)
    # Q1: c1 + c0 = both children of P0 -> P0 (0,18): precision 10/18, 4 tokens.
    # Q2: c3 + b0 (other document, its parent has one child, 1 < 2): no merge -> 11 / (11 + 8).
    assert k2["recall"] == 1.0
    assert k2["precision"] == pytest.approx((10 / 18 + 11 / 19) / 2)
    assert k2["retrieved_tokens"] == pytest.approx(4.0)
    assert k2["mrr"] == 1.0
    assert k2["n_chunks"] == 5 and k2["embedded_tokens"] == 10
    # threshold 0.5: one retrieved child of two is enough -> k=1 already returns the parents
    half = cell(res, "Hierarchical 2/5 merge 0.5", 1)
    assert half["precision"] == pytest.approx((10 / 18 + 11 / 20) / 2)
    with pytest.raises(ValueError, match="placement='exact' only"):
        run_grid(docs, hier_questions(), GridConfig(chunkers=["Hierarchical:2:5"], placement="report"),
                 WordEmbedder(), cache_dir=tmp_path, show_progress=False)


# ------------------------------------------------------------------ contextual


def zebra_llm():
    """Context "zebra" for the chunk holding "nine", "plain" for the others; 1.5 s per reply."""

    def reply(call):
        chunk = re.search(r"<chunk>\n(.*?)\n</chunk>", call.prompt, re.S).group(1)
        return "zebra" if "nine" in chunk else "plain"

    return FakeChatModel(reply, latency_s=1.5)


def test_contextual_indexes_context_but_scores_the_chunk(tmp_path):
    import pandas as pd

    llm = zebra_llm()
    q = pd.DataFrame({"question": ["zebra"], "corpus_id": ["b.txt"],
                      "references": [[{"start_index": 12, "end_index": 20}]]})
    emb = WordEmbedder()
    cfg = GridConfig(chunkers=["Contextual:2"], retrievers=["dense", "bm25"], top_k=[1])
    res = run_grid(GRID_DOCS, q, cfg, emb, llm=llm, cache_dir=tmp_path, show_progress=False)
    # Recursive:2 chunks of b: "seven eight" (0,11), "nine ten" (12,20); only the latter's context says zebra
    row = cell(res, "Contextual 2", 1, "bm25")
    assert row["recall"] == 1.0 and row["precision"] == 1.0  # scored span = the chunk's own (12,20)
    assert res.chunks["Contextual 2"]["b.txt"] == [(0, 11), (12, 20)]
    # one call per chunk, document first in every prompt, in document order
    assert row["llm_calls"] == 5 and len(llm.calls) == 5 and row["llm_seconds"] == pytest.approx(7.5)
    assert all(p.index("<document>") < p.index("<chunk>") for p in llm.prompts)
    # the embedder saw context + chunk; embedded tokens count them: per chunk 2 (chunk) + 1 ("\n\n")
    # + 1 ("plain") or 2 ("zebra" = "zeb" + "ra" in cl100k_base) -> 4 * 4 + 5 = 21
    assert "zebra\n\nnine ten" in emb.calls[-1]
    assert cell(res, "Contextual 2", 1, "dense")["embedded_tokens"] == 21
    with pytest.raises(ValueError, match="needs an LLM client"):
        run_grid(GRID_DOCS, q, cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)


# ------------------------------------------------------------------ late


class NextChunkLate:
    """A stand-in late-chunking embedder: each chunk's vector is the bag of words of the NEXT chunk
    of its document (zero for the last), so retrieval through it is easy to tell apart."""

    def __init__(self):
        self.calls = []

    def embed_chunks(self, text, chunks):
        self.calls.append((text, [(c.start, c.end) for c in chunks]))
        nxt = [c.text for c in chunks[1:]] + [""]
        return WordEmbedder().embed(nxt)


def test_late_uses_late_vectors_and_recursive_boundaries(tmp_path):
    late = NextChunkLate()
    cfg = GridConfig(chunkers=["Recursive:2", "Late:2"], retrievers=["dense"], top_k=[1])
    res = run_grid(GRID_DOCS, questions(), cfg, WordEmbedder(), late_embedder=late, cache_dir=tmp_path,
                   show_progress=False)
    assert res.chunks["Late 2"] == res.chunks["Recursive 2"]
    assert [t for t, _ in late.calls] == [GRID_DOCS["a.txt"], GRID_DOCS["b.txt"]]
    # one span-cache file per document: Late reads Recursive:2's
    assert len(list(tmp_path.glob("*.json"))) == 2
    # Q1 "three four": a1 (8,18) with its own vector (recall 1); with "next chunk" vectors a0 (0,7) wins (recall 0)
    assert cell(res, "Recursive 2", 1)["recall"] == pytest.approx(0.5)
    assert cell(res, "Late 2", 1)["recall"] == 0.0


def test_chunk_corpus_contextual_needs_llm():
    with pytest.raises(ValueError, match="needs an LLM client"):
        chunk_corpus(ChunkerSpec("Contextual", 2), "a", "one two", None, None)


# ------------------------------------------------------------------ Semantic (explicit settings)


def test_semantic_spec_round_trips_and_keeps_older_keys():
    s = parse_spec("Semantic:percentile:80:0:150")
    assert dict(s.options) == {"breakpoint_threshold_type": "percentile", "breakpoint_threshold_amount": 80.0,
                               "buffer_size": 0, "min_chunk_size": 150}
    assert s.label == "Semantic percentile 80 buffer 0 min 150"
    assert s.spec_string() == "Semantic:percentile:80:0:150"
    assert parse_spec(s.spec_string()) == s
    assert s.key() == ('Semantic|None|0|{"breakpoint_threshold_amount": 80.0, "breakpoint_threshold_type": '
                       '"percentile", "buffer_size": 0, "min_chunk_size": null}'.replace("null", "150"))
    g = parse_spec("Semantic:gradient:95:1")
    assert g.label == "Semantic gradient 95 buffer 1" and dict(g.options)["min_chunk_size"] is None
    # specs without options keep the keys chapters 2 and 5 cached under
    assert ChunkerSpec("TokenText", 200, 0).key() == "TokenText|200|0"
    assert parse_spec("Cluster:200").key() == "Cluster|200|0"


@pytest.mark.parametrize(
    "bad, message",
    [
        ("Semantic:percentile:80", "Semantic:threshold_type:amount:buffer_size"),
        ("Semantic:median:80:1", "threshold type 'median'"),
        ("Semantic:percentile:180:1", "must lie in [0, 100]"),
        ("Semantic:percentile:80:x", "integers"),
        ("Semantic:percentile:80:-1", "buffer_size must be >= 0"),
        ("Semantic:percentile:80:1:0", "min_chunk_size must be >= 1"),
    ],
)
def test_bad_semantic_specs(bad, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_spec(bad)


def test_semantic_spec_chunks_as_the_chunker_with_those_settings(tmp_path):
    from chunkwise.chunkers import SemanticChunker

    text = "one two. one two three. seven eight. seven eight nine. one. one two."
    spec = parse_spec("Semantic:percentile:50:0")
    got = chunk_corpus(spec, "a.txt", text, WordEmbedder(), cache_dir=tmp_path)
    want = SemanticChunker(WordEmbedder(), buffer_size=0, breakpoint_threshold_type="percentile",
                           breakpoint_threshold_amount=50).split(text)
    assert [(c.start, c.end) for c in got] == [(c.start, c.end) for c in want]
    assert len(want) > 1  # the setting splits this text, so the comparison can fail
    # the defaults spec gives the Kamradt chunker's spans
    default = chunk_corpus(parse_spec("Semantic:percentile:95:1"), "a.txt", text, WordEmbedder(), cache_dir=tmp_path)
    kamradt = chunk_corpus(parse_spec("Kamradt"), "a.txt", text, WordEmbedder(), cache_dir=tmp_path)
    assert [(c.start, c.end) for c in default] == [(c.start, c.end) for c in kamradt]


# ------------------------------------------------------------------ LLM chunker cost


def test_llm_chunker_cost_is_the_same_when_replayed_from_the_cache(tmp_path):
    import json

    import pandas as pd

    from fakes import ScriptedLLM

    # two documents of about 300 cl100k tokens: six 50-token pieces each, one window, one request
    docs = {name: " ".join(f"Sentence {i} of {name} is about topic {i % 3}." for i in range(30))
            for name in ("a.txt", "b.txt")}
    q = pd.DataFrame({"question": ["topic"], "corpus_id": ["b.txt"],
                      "references": [[{"start_index": 0, "end_index": 30}]]})
    cfg = GridConfig(chunkers=["LLM"], retrievers=["bm25"], top_k=[1])
    # the scripted endpoint reports 10 prompt and 5 generated tokens per reply
    cold_llm = ScriptedLLM([json.dumps({"split_after": [2]})] * 2, tmp_path / "llm.sqlite")
    cold = run_grid(docs, q, cfg, WordEmbedder(), llm=cold_llm, cache_dir=tmp_path, show_progress=False)
    warm_llm = ScriptedLLM([], tmp_path / "llm.sqlite")  # asks nothing: every reply is cached
    warm = run_grid(docs, q, cfg, WordEmbedder(), llm=warm_llm, cache_dir=tmp_path, show_progress=False)
    a, b = cold.table.iloc[0], warm.table.iloc[0]
    assert a["n_chunks"] == b["n_chunks"] == 4  # a split after piece 2 of each document
    assert a["llm_calls"] == b["llm_calls"] == 2 and len(cold_llm.requests) == 2
    assert (a["llm_cache_hits"], b["llm_cache_hits"]) == (0, 2) and warm_llm.requests == []
    assert a["llm_prompt_tokens"] == b["llm_prompt_tokens"] == 20
    assert a["llm_completion_tokens"] == b["llm_completion_tokens"] == 10
    assert b["llm_seconds"] == pytest.approx(a["llm_seconds"], abs=0.01)


def test_llm_chunker_runs_reports_windows_repairs_and_cost_per_document(tmp_path):
    import json

    from chunkwise.experiments.strategies import llm_chunker_runs
    from fakes import ScriptedLLM

    docs = {name: " ".join(f"Sentence {i} of {name} is about topic {i % 3}." for i in range(30))
            for name in ("a.txt", "b.txt")}
    # a.txt: an invalid reply (piece 99 is not shown) then a split after piece 2; b.txt: no split
    llm = ScriptedLLM([json.dumps({"split_after": [99]}), json.dumps({"split_after": [2]}),
                       json.dumps({"split_after": []})], tmp_path / "llm.sqlite")
    runs = llm_chunker_runs(docs, llm)
    assert list(runs.index) == ["a.txt", "b.txt", "all"]
    assert runs.loc["a.txt", ["windows", "repairs", "windows_without_split", "chunks"]].tolist() == [1, 1, 0, 2]
    assert runs.loc["b.txt", ["windows", "repairs", "windows_without_split", "chunks"]].tolist() == [1, 0, 1, 1]
    # 10 prompt and 5 generated tokens per reply (the re-ask included); the same from the cache
    assert runs.loc["all", ["llm_prompt_tokens", "llm_completion_tokens", "chunks"]].tolist() == [30, 15, 3]
    again = llm_chunker_runs(docs, ScriptedLLM([], tmp_path / "llm.sqlite"))
    assert again.drop(columns="llm_seconds").equals(runs.drop(columns="llm_seconds"))
