"""The registries of chunker and retriever kinds: one registration makes a kind a grid row."""

from __future__ import annotations

import re

import pytest

from chunkwise.chunk import Chunk
from chunkwise.chunkers import registry as CR
from chunkwise.chunkers.specs import ChunkerSpec, make_chunker, parse_spec
from chunkwise.evaluation.grid import GridConfig, run_grid
from chunkwise.retrieval import registry as RR

from fakes import GRID_DOCS, WordEmbedder, questions


class WordChunker:
    """One chunk per whitespace-separated word (exact offsets)."""

    def split(self, text):
        return [Chunk(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


@pytest.fixture
def word_kind():
    kind = CR.register_chunker(CR.ChunkerKind("Words", lambda s, e, lm: WordChunker(), "one chunk per word", size="none"))
    yield kind
    CR._KINDS.pop("Words", None)


@pytest.fixture
def last_word_retriever():
    def rank(inputs, fused):
        # the last item first, then the rest in reverse order
        n = len(inputs.texts)
        return RR.Ranking([list(range(n - 1, -1, -1))[: inputs.depth] for _ in inputs.questions], 0.0, 0.0)

    kind = RR.register_retriever(RR.RetrieverKind("reverse", rank, "items in reverse order"))
    yield kind
    RR._KINDS.pop("reverse", None)


def test_builtin_kinds_keep_their_rules():
    assert CR.chunker_names()[:4] == ("TokenText", "Recursive", "Kamradt", "KamradtMod")
    assert CR.chunker_kind("Cluster").min_size == 50 and CR.chunker_kind("Cluster").needs == "embedder"
    assert CR.chunker_kind("Late").boundaries_from(ChunkerSpec("Late", 200)) == ChunkerSpec("Recursive", 200, 0)
    assert CR.chunker_kind("Hierarchical").index == "parents"
    assert RR.retriever_names(ranks=True) == ("dense", "bm25", "hybrid", "rerank")
    assert RR.retriever_kind("rerank").uses == ("hybrid",) and RR.retriever_kind("rerank").needs_embedder
    assert RR.retriever_names(ranks=False) == ("none", "hybrid_rerank")  # CRUD-RAG's harness builds them
    assert RR.retriever_kind("hybrid").uses == ("bm25", "dense")
    assert RR.retriever_kind("hybrid_rerank").uses == ("hybrid",)


def test_a_grid_refuses_a_retriever_that_only_builds():
    with pytest.raises(ValueError, match=r"none only builds a per-question retriever.*ranks with dense, bm25, hybrid"):
        GridConfig(chunkers=["Recursive:200"], retrievers=["none"])


def test_a_retriever_set_builds_each_index_once_and_shares_it():
    from chunkwise.retrieval import BM25Retriever, DenseRetriever, HybridRetriever, NoRetriever, RerankRetriever

    class Scorer:  # a reranker: scores by how many words of the question a text holds
        name = "overlap"

        def score(self, question, texts):
            return [float(sum(w in t for w in question.split())) for t in texts]

    chunks = [("a", "seven eight nine"), ("b", "one two three"), ("c", "nine ten")]
    emb = WordEmbedder()
    got = RR.build_retriever_set(chunks, ["hybrid_rerank", "none", "bm25"], language="en", tokenizer="words",
                                 dense=(emb, emb), reranker=Scorer())
    assert list(got) == ["hybrid_rerank", "none", "bm25"]
    assert isinstance(got["none"], NoRetriever) and isinstance(got["bm25"], BM25Retriever)
    rr = got["hybrid_rerank"]
    assert isinstance(rr, RerankRetriever) and isinstance(rr.base, HybridRetriever)
    # the hybrid fuses the very BM25 retriever of the set (one index), and a dense one
    assert rr.base.retrievers[0] is got["bm25"] and isinstance(rr.base.retrievers[1], DenseRetriever)
    assert [h[0] for h in rr.retrieve("nine ten", 2)] == ["c", "a"]
    with pytest.raises(ValueError, match="unknown retriever 'x'"):
        RR.build_retriever_set(chunks, ["x"])
    RR.register_retriever(RR.RetrieverKind("rank_only", lambda inputs, fused: None, "ranks a grid only"))
    try:
        with pytest.raises(ValueError, match="'rank_only' ranks a grid's chunks only"):
            RR.build_retriever_set(chunks, ["rank_only"])
    finally:
        RR._KINDS.pop("rank_only")
    with pytest.raises(ValueError, match="needs a rank function, a build function or both"):
        RR.RetrieverKind("neither", None, "nothing")


def test_a_registered_chunker_is_a_grid_row(word_kind, tmp_path):
    spec = parse_spec("Words")
    assert spec == ChunkerSpec("Words") and spec.kind is word_kind
    with pytest.raises(ValueError, match="Words takes no size"):
        parse_spec("Words:10")
    res = run_grid(GRID_DOCS, questions(), GridConfig(chunkers=["Words"], retrievers=["bm25"], top_k=[1]),
                   cache_dir=tmp_path, show_progress=False)
    row = res.table.iloc[0]
    # six + four words in the two documents
    assert row["n_chunks"] == 10 and row["chunker"] == "Words"


def test_a_registered_retriever_is_a_grid_column(last_word_retriever, tmp_path):
    grid = GridConfig(chunkers=["TokenText:1"], retrievers=["reverse"], top_k=[1])
    res = run_grid(GRID_DOCS, questions(), grid, cache_dir=tmp_path, show_progress=False)
    # TokenText:1 makes one chunk per token; "reverse" returns the last chunk, "ten" of b.txt
    ranked = res.rankings["TokenText 1"]["reverse"]
    assert [r[0] for r in ranked] == [9, 9]
    with pytest.raises(ValueError, match="unknown retriever"):
        GridConfig(chunkers=["TokenText:1"], retrievers=["nope"])


def test_registration_errors_are_clear():
    with pytest.raises(ValueError, match="registered already"):
        CR.register_chunker(CR.ChunkerKind("Recursive", lambda s, e, lm: None, "again"))
    with pytest.raises(ValueError, match="letters and digits"):
        CR.ChunkerKind("my-kind", lambda s, e, lm: None, "bad name")
    with pytest.raises(ValueError, match="needs must be one of"):
        CR.ChunkerKind("Odd", lambda s, e, lm: None, "odd", needs="gpu")
    with pytest.raises(ValueError, match="not registered"):
        RR.register_retriever(RR.RetrieverKind("fusion2", lambda i, f: None, "x", uses=("colbert",)))
    with pytest.raises(ValueError, match="unknown chunker 'Nope'"):
        parse_spec("Nope:10")


def test_needs_are_checked_before_building():
    with pytest.raises(ValueError, match="needs an LLM client"):
        make_chunker(parse_spec("LLM"), None, None)
    with pytest.raises(ValueError, match="needs an embedder"):
        make_chunker(parse_spec("Kamradt"), None, None)
    assert make_chunker(parse_spec("Kamradt"), WordEmbedder()).__class__.__name__ == "SemanticChunker"


# ------------------------------------------------------------------ machine facts


def test_machine_facts_have_one_rule(tmp_path, monkeypatch):
    from pathlib import Path

    from chunkwise import _env
    from chunkwise.chunkers.specs import span_cache_dir
    from chunkwise.datasets.fetch import default_cache_dir
    from chunkwise.embeddings import default_cache_path as emb_path
    from chunkwise.llm.cache import default_cache_path as llm_path
    from chunkwise.llm.weights import default_models_dir, hub_offline

    home = Path.home() / ".cache" / "chunkwise"
    assert _env.cache_root({"CHUNKWISE_CACHE_DIR": "  "}) == home  # blank = unset, everywhere
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    assert [emb_path(), llm_path(), default_models_dir(), default_cache_dir(), span_cache_dir()] == [
        tmp_path / "embeddings.sqlite", tmp_path / "llm.sqlite", tmp_path / "models", tmp_path / "data",
        tmp_path / "spans"]
    assert _env.offline({"TRANSFORMERS_OFFLINE": "Yes"}) and _env.offline({"HF_HUB_OFFLINE": "t"})
    assert not _env.offline({"HF_HUB_OFFLINE": "0"})
    assert hub_offline({"TRANSFORMERS_OFFLINE": "1"})
    assert _env.data_mirror({"CHUNKWISE_DATA_MIRROR": ""}) is None
    assert _env.data_mirror({"CHUNKWISE_DATA_MIRROR": "~/m"}) == Path.home() / "m"


def test_the_old_span_cache_folder_is_renamed_with_its_files(tmp_path, monkeypatch):
    from chunkwise.chunkers.specs import span_cache_dir

    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path))
    old = tmp_path / "chroma_chunks"
    old.mkdir()
    (old / "state_of_the_union-Recursive-200-0-abc.json").write_text("[[0, 5]]")
    assert span_cache_dir() == tmp_path / "spans"
    assert not old.exists()
    assert (tmp_path / "spans" / "state_of_the_union-Recursive-200-0-abc.json").read_text() == "[[0, 5]]"
    old.mkdir()  # a folder of the old name beside an existing new one is left alone
    assert span_cache_dir() == tmp_path / "spans" and old.is_dir()


@pytest.mark.parametrize("text, label, key, spec_string", [
    # the span cache keys of the published runs: moving the special cases into the registry kept them
    ("Hierarchical:200:800:0.5", "Hierarchical 200/800 merge 0.5", "Hierarchical|200|0|800|0.5", "Hierarchical:200:800:0.5"),
    ("Semantic:percentile:80:0:150", "Semantic percentile 80 buffer 0 min 150",
     'Semantic|None|0|{"breakpoint_threshold_amount": 80.0, "breakpoint_threshold_type": "percentile", '
     '"buffer_size": 0, "min_chunk_size": 150}', "Semantic:percentile:80:0:150"),
    ("Recursive:200:0", "Recursive 200", "Recursive|200|0", "Recursive:200"),
    ("TokenText:250:125", "TokenText 250 overlap 125", "TokenText|250|125", "TokenText:250:125"),
    ("Kamradt", "Kamradt", "Kamradt|None|0", "Kamradt"),
])
def test_labels_keys_and_spec_strings_are_unchanged(text, label, key, spec_string):
    from chunkwise.chunkers.specs import parse_spec

    spec = parse_spec(text)
    assert (spec.label, spec.key(), spec.spec_string()) == (label, key, spec_string)
    assert parse_spec(spec.spec_string()) == spec


def test_a_grid_table_takes_the_kinds_own_fields_in_order():
    def spec(table):
        return GridConfig(chunkers=[table], retrievers=["bm25"]).chunkers[0].spec_string()

    assert spec({"chunker": "TokenText", "size": 250, "overlap": 125}) == "TokenText:250:125"
    assert spec({"chunker": "Recursive", "size": 200, "overlap": 0}) == "Recursive:200"
    assert spec({"chunker": "Hierarchical", "size": 200, "parent_size": 800, "merge_threshold": 0.5}) == (
        "Hierarchical:200:800:0.5")
    assert spec({"chunker": "Kamradt"}) == "Kamradt"
    with pytest.raises(ValueError, match="has overlap but no size"):
        spec({"chunker": "Recursive", "overlap": 5})
    with pytest.raises(ValueError, match="Recursive takes the keys chunker, size, overlap, not parent_size"):
        spec({"chunker": "Recursive", "size": 200, "parent_size": 800})
    with pytest.raises(ValueError, match="has parent_size but no size"):
        spec({"chunker": "Hierarchical", "parent_size": 800})
