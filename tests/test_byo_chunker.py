"""Bring your own chunker: import paths, entry points and the LangChain / chonkie adapters."""

from __future__ import annotations

import pytest

from chunkwise.chunkers.adapters import OffsetRecoveryError, adapt_chunker, locate_pieces
from chunkwise.chunkers.specs import parse_spec
from chunkwise.evaluation.grid import GridConfig, run_grid

from fakes import GRID_DOCS, questions

TEXT = "Tenants pay rent monthly; late fees apply after five days. The landlord repairs the roof; tenants mow the lawn."


def test_langchain_splitter_offsets_match_langchains_own_start_index():
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=40, chunk_overlap=12)
    ours = adapt_chunker(splitter).split(TEXT)
    theirs = splitter.create_documents([TEXT], metadatas=[{}])
    # the reference: LangChain's add_start_index run in the test
    ref = RecursiveCharacterTextSplitter(chunk_size=40, chunk_overlap=12, add_start_index=True).create_documents([TEXT])
    assert [c.text for c in ours] == [d.page_content for d in theirs]
    assert [c.start for c in ours] == [d.metadata["start_index"] for d in ref]
    assert all(TEXT[c.start:c.end] == c.text for c in ours)
    assert len(ours) > 2 and any(b.start < a.end for a, b in zip(ours, ours[1:]))  # overlapping pieces placed


def test_chonkie_protocol_and_pairs_and_whitespace():
    from plugin_chunkers import WordPairs

    chunks = adapt_chunker(WordPairs()).split("a b  c\nd e")
    assert [(c.text, c.start, c.end) for c in chunks] == [("a b", 0, 3), ("c\nd", 5, 8), ("e", 9, 10)]
    pairs = adapt_chunker(lambda t: [(0, 3), (4, 9)]).split("abc defgh")
    assert [c.text for c in pairs] == ["abc", "defgh"]
    # a splitter that collapses whitespace is placed on the original text
    assert [(c.start, c.end) for c in locate_pieces("one  two\nthree", ["one two", "three"])] == [(0, 8), (9, 14)]


def test_a_rewriting_splitter_fails_clearly():
    from plugin_chunkers import shouting

    with pytest.raises(OffsetRecoveryError, match="rewrote chunk 0"):
        adapt_chunker(shouting, name="shouting").split("quiet words")
    with pytest.raises(TypeError, match="is not a chunker"):
        adapt_chunker(42)


def test_chunk_objects_from_a_plugin_must_be_verbatim():
    """Issue 44, bug 2: Chunk objects three characters off their text were passed through unchecked."""
    from chunkwise.chunk import Chunk

    def off_by_three(text):
        return [Chunk(text[3:10], 0, 7), Chunk(text[10:], 10, len(text))]

    with pytest.raises(OffsetRecoveryError, match="chunk 0's text is not the document's characters"):
        adapt_chunker(off_by_three, name="off").split(TEXT)

    def honest(text):
        return [Chunk(text[:10], 0, 10), Chunk(text[10:], 10, len(text))]

    assert [c.text for c in adapt_chunker(honest, name="ok").split(TEXT)] == [TEXT[:10], TEXT[10:]]


def test_import_path_spec_is_a_grid_row(tmp_path):
    spec = parse_spec("plugin_chunkers:ClauseSplitter")
    assert spec.kind.plugin and not spec.kind.span_cache
    assert [c.text for c in spec.kind.make(spec).split(TEXT)][:2] == ["Tenants pay rent monthly;", "late fees apply after five days."]
    cfg = GridConfig.from_dict({"chunkers": [{"chunker": "plugin_chunkers:ClauseSplitter", "kwargs": {"min_chars": 30}}],
                                "retrievers": ["bm25"], "top_k": [1]})
    (row,) = cfg.chunkers
    assert row.label == "ClauseSplitter(min_chars=30)"
    res = run_grid(GRID_DOCS, questions(), cfg, cache_dir=tmp_path, show_progress=False)
    assert res.table.iloc[0]["chunker"] == "ClauseSplitter(min_chars=30)"
    assert res.table.iloc[0]["n_chunks"] == 2  # one piece per document: no ';' or '.' in the test documents


def test_plugin_errors_say_what_to_do():
    with pytest.raises(ValueError, match="cannot import module 'no_such_pkg.mod'.*installed"):
        parse_spec("no_such_pkg.mod:Splitter")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        parse_spec("plugin_chunkers:Nope")
    with pytest.raises(ValueError, match="kwargs are for your own chunkers"):
        GridConfig.from_dict({"chunkers": [{"chunker": "Recursive", "size": 200, "kwargs": {"a": 1}}]})
    with pytest.raises(ValueError, match="entry-point group 'chunkwise.chunkers'"):
        parse_spec("nosuchthing")


def test_entry_point_plugins_are_found(monkeypatch):
    import importlib.metadata as md

    from chunkwise.chunkers import registry as CR

    ep = md.EntryPoint(name="clauses", value="plugin_chunkers:ClauseSplitter", group=CR.PLUGIN_GROUP)
    real = md.entry_points
    monkeypatch.setattr(md, "entry_points", lambda **kw: md.EntryPoints([ep]) if kw.get("group") == CR.PLUGIN_GROUP
                        else real(**kw))
    try:
        spec = parse_spec("clauses")
        assert spec.kind.plugin and spec.kind.make(spec).split("a; b.")[0].text == "a;"
    finally:
        CR._KINDS.pop("clauses", None)


def test_a_misspelled_kwarg_is_a_clear_error(tmp_path):
    cfg = GridConfig.from_dict({"chunkers": [{"chunker": "plugin_chunkers:ClauseSplitter", "kwargs": {"minchars": 3}}],
                                "retrievers": ["bm25"], "top_k": [1]})
    with pytest.raises(ValueError, match=r"building it with kwargs \{'minchars': 3\} failed .*check the kwargs table"):
        run_grid(GRID_DOCS, questions(), cfg, cache_dir=tmp_path, show_progress=False)


def test_chonkie_chunkers_keep_their_offsets():
    chonkie = pytest.importorskip("chonkie")

    text = TEXT * 4
    for chunker in (chonkie.TokenChunker(chunk_size=30, chunk_overlap=5), chonkie.SentenceChunker(chunk_size=40),
                    chonkie.RecursiveChunker(chunk_size=40)):
        theirs = chunker.chunk(text)
        ours = adapt_chunker(chunker).split(text)
        assert [(c.start, c.end) for c in ours] == [(c.start_index, c.end_index) for c in theirs]
        assert all(text[c.start:c.end] == c.text for c in ours) and len(ours) > 3


def test_a_plugin_from_a_temporary_module(tmp_path, monkeypatch):
    (tmp_path / "tmp_clauses.py").write_text(
        "class Halves:\n"
        "    def __init__(self, parts=2):\n"
        "        self.parts = parts\n"
        "    def split(self, text):\n"
        "        step = -(-len(text) // self.parts)\n"
        "        return [(i, min(i + step, len(text))) for i in range(0, len(text), step)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = GridConfig.from_dict({"chunkers": [{"chunker": "tmp_clauses:Halves", "kwargs": {"parts": 3}}],
                                "retrievers": ["bm25"], "top_k": [1]})
    res = run_grid(GRID_DOCS, questions(), cfg, cache_dir=tmp_path / "c", show_progress=False)
    # "one two three four five six" (27 chars) in thirds of 9, "seven eight nine ten" (20) in 7 / 7 / 6
    assert res.chunks["Halves(parts=3)"] == {"a.txt": [(0, 9), (9, 18), (18, 27)], "b.txt": [(0, 7), (7, 14), (14, 20)]}


def test_embedded_text_may_differ_from_the_scored_span(tmp_path, monkeypatch):
    """issue 44 view: (start, end, index_text) from a plugin; the retrievers read index_text, the
    metrics score the raw span."""
    from fakes import WordEmbedder

    chunks = adapt_chunker(lambda t: [(0, 3, "Garden > Kale\n\nabc"), {"start": 4, "end": 9, "index_text": "X"},
                                      (4, 9)]).split("abc defgh")
    assert [(c.text, c.start, c.end, c.metadata.get("index_text")) for c in chunks] == [
        ("abc", 0, 3, "Garden > Kale\n\nabc"), ("defgh", 4, 9, "X"), ("defgh", 4, 9, None)]
    with pytest.raises(OffsetRecoveryError, match="index_text is a int"):
        adapt_chunker(lambda t: [(0, 3, 7)]).split("abc defgh")
    with pytest.raises(OffsetRecoveryError, match="without 'start' and 'end'"):
        adapt_chunker(lambda t: [{"begin": 0, "end": 3}]).split("abc defgh")

    (tmp_path / "tmp_prefixed.py").write_text(
        "def whole_with_prefix(text):\n"
        "    # one chunk per document; b's embedded text gets the prefix 'one two'\n"
        "    prefix = 'one two ' if text.startswith('seven') else ''\n"
        "    return [(0, len(text), prefix + text)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = GridConfig.from_dict({"chunkers": ["tmp_prefixed:whole_with_prefix"], "retrievers": ["dense"], "top_k": [1]})
    emb = WordEmbedder()
    res = run_grid(GRID_DOCS, questions(), cfg, emb, cache_dir=tmp_path / "c", show_progress=False)
    assert res.chunks[cfg.chunkers[0].label] == {"a.txt": [(0, 27)], "b.txt": [(0, 20)]}
    assert ["one two three four five six", "one two seven eight nine ten"] in emb.calls
    # Q2 "one two nine": cosine to a = 2 / (sqrt 3 * sqrt 6) = 0.47, to b's embedded text 3 / (sqrt 3 * sqrt 6)
    # = 0.71 -> b, recall 8/8; Q1 "three four" -> a, recall 10/10. Without the prefix Q2 would get a (recall 0).
    assert res.table.iloc[0]["recall"] == pytest.approx(1.0)
    assert res.per_question.set_index("question_id").loc["Q2", "recall"] == pytest.approx(1.0)


def test_a_failing_plugin_is_one_line_naming_it_and_the_document(tmp_path, monkeypatch):
    """issue 44, poor messages: a plugin that raises, returns no list or fails to build."""
    (tmp_path / "tmp_bad.py").write_text(
        "class Raises:\n"
        "    def split(self, text):\n"
        "        raise RuntimeError('internal failure')\n"
        "class ReturnsNone:\n"
        "    def split(self, text):\n"
        "        return None\n"
        "class CtorFails:\n"
        "    def __init__(self):\n"
        "        raise ImportError('needs spacy')\n"
        "def reversed_pair(text):\n"
        "    return [(5, 2)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = {
        "tmp_bad:Raises": r"document 'a.txt': tmp_bad:Raises raised RuntimeError: internal failure; the error is the "
                          r"splitter's own",
        "tmp_bad:ReturnsNone": r"document 'a.txt': tmp_bad:ReturnsNone returned NoneType, not a list of chunks",
        "tmp_bad:CtorFails": r"chunker 'tmp_bad:CtorFails': its constructor raised ImportError: needs spacy",
        "tmp_bad:reversed_pair": r"document 'a.txt': tmp_bad:reversed_pair: chunk 0 has reversed offsets \[5, 2\)",
    }
    for spec, message in cases.items():
        cfg = GridConfig.from_dict({"chunkers": [spec], "retrievers": ["bm25"], "top_k": [1]})
        with pytest.raises(ValueError, match=message):
            run_grid(GRID_DOCS, questions(), cfg, cache_dir=tmp_path / "c", show_progress=False)
