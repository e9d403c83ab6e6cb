"""Where a chunk is scored: true offsets ("exact") or the Chroma report code's placement ("report").

The report's code finds each chunk's text in the corpus: one trailing "." dropped, then the
FIRST occurrence. The hand corpus below has a repeated passage, so the second copy's chunk is
scored at the first copy under "report".

Hand corpus (20 characters), fixed windows of 4 characters:

    offsets  0-4   4-8   8-12  12-16 16-20
    text     AAAA  wxyz  BBBB  wxyz  CCCC
    chunk    0     1     2     3     4

"report" places chunk 3 ("wxyz", truly 12-16) at the first copy, 4-8; the others stay.

The chapter-2 functions read a :class:`~chunkwise.evaluation.grid.GridResult`; the grids here
are run by the engine with a chunker kind cutting those windows and a retriever that returns
given rankings (:func:`grid_of`), so the hand-computed values below score real engine output.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from chunkwise.chunk import Chunk
from chunkwise.chunkers import registry as CR
from chunkwise.evaluation.grid import GridConfig, run_grid
from chunkwise.evaluation.spans import place_spans, score_questions
from chunkwise.experiments import chroma as ch
from chunkwise.retrieval import registry as RR

CORPUS = "AAAAwxyzBBBBwxyzCCCC"
CHUNKS = [(CORPUS[s : s + 4], s, s + 4) for s in range(0, 20, 4)]
# q0: reference 13-15 ("xy" of the SECOND copy); q1: reference 5-7 ("xy" of the FIRST copy).
# Both retrieve only chunk 3 (top_k = 1).
QUESTIONS = pd.DataFrame(
    {"question_id": [0, 1], "question": ["x", "y"], "corpus": ["c", "c"], "references": [[(13, 15)], [(5, 7)]]}
)


class Windows:
    """Windows of ``size`` characters at their true offsets (the last one shorter)."""

    def __init__(self, size):
        self.size = size

    def split(self, text):
        return [Chunk(text[s : s + self.size], s, min(s + self.size, len(text))) for s in range(0, len(text), self.size)]


class Words:
    """One chunk per whitespace-separated word."""

    def split(self, text):
        return [Chunk(m.group(), m.start(), m.end()) for m in re.finditer(r"\S+", text)]


#: What the retriever ``given`` returns: one ranking per chunking, in the order the grid runs them.
_GIVEN: list[list[list[int]]] = []


@pytest.fixture(autouse=True)
def hand_kinds():
    """Chunker kinds ``WindowA:n`` and ``WindowC:n`` (the same windows of n characters under two
    names, for two chunkers with one chunking) and ``Words``; the retriever ``given``."""
    kinds = [CR.ChunkerKind("WindowA", lambda spec, e, lm: Windows(spec.size), "windows of n characters"),
             CR.ChunkerKind("WindowC", lambda spec, e, lm: Windows(spec.size), "windows of n characters"),
             CR.ChunkerKind("Words", lambda spec, e, lm: Words(), "one chunk per word", size="none")]
    for kind in kinds:
        CR.register_chunker(kind)
    RR.register_retriever(RR.RetrieverKind(
        "given", lambda inputs, fused: RR.Ranking([list(r) for r in _GIVEN.pop(0)], 0.0, 0.0), "given rankings"))
    yield
    for kind in kinds:
        CR._KINDS.pop(kind.name, None)
    RR._KINDS.pop("given", None)
    _GIVEN.clear()


def grid_of(tmp_path, chunkers, rankings, corpus=CORPUS, questions=QUESTIONS, placement="exact"):
    """The engine's grid of ``chunkers`` on one corpus ``"c"``, top_k = 1, retriever ``given``:
    ``rankings[i]`` is what it returns for the i-th chunker (one list of positions per question)."""
    _GIVEN[:] = rankings
    config = GridConfig(chunkers=chunkers, retrievers=["given"], top_k=[1], placement=placement)
    return run_grid({"c": corpus}, questions, config, cache_dir=tmp_path, show_progress=False)


def test_exact_placement_returns_true_offsets():
    assert place_spans(CORPUS, CHUNKS, "exact") == [(0, 4), (4, 8), (8, 12), (12, 16), (16, 20)]
    assert place_spans(CORPUS, CHUNKS) == place_spans(CORPUS, CHUNKS, "exact")  # the default


def test_report_placement_scores_a_repeat_at_its_first_copy():
    assert place_spans(CORPUS, CHUNKS, "report") == [(0, 4), (4, 8), (8, 12), (4, 8), (16, 20)]


@pytest.mark.parametrize(
    "placement, expected",
    [
        # exact: chunk 3 is 12-16.
        #   q0: N = |12-16 ∩ 13-15| = 2 -> recall 2/2 = 1, precision 2/4, iou 2/(4 + 0) = 0.5.
        #       precision_Omega: only 12-16 touches 13-15 -> 2 / |12-16 ∪ 13-15| = 2/4 = 0.5.
        #   q1: 12-16 misses 5-7 -> recall, precision, iou 0.
        #       precision_Omega: only 4-8 touches 5-7 -> 2/4 = 0.5.
        ("exact", {"recall": [1.0, 0.0], "precision": [0.5, 0.0], "iou": [0.5, 0.0],
                   "precision_omega": [0.5, 0.5]}),
        # report: chunk 3 is scored at 4-8.
        #   q0: 4-8 misses 13-15 -> 0, 0, 0. precision_Omega: the spans are 0-4, 4-8, 8-12,
        #       4-8, 16-20; none touches 13-15 (8-12 ends at 12 < 13, 16-20 starts at 16 > 15),
        #       so 0.
        #   q1: 4-8 covers 5-7 -> recall 1, precision 2/4, iou 0.5. precision_Omega: 4-8
        #       (twice) touches -> 2/4 = 0.5.
        ("report", {"recall": [0.0, 1.0], "precision": [0.0, 0.5], "iou": [0.0, 0.5],
                    "precision_omega": [0.0, 0.5]}),
    ],
)
def test_the_two_placements_give_different_scores(placement, expected):
    spans = place_spans(CORPUS, CHUNKS, placement)
    retrieved = [[spans[3]], [spans[3]]]
    q = QUESTIONS.assign(corpus_id=QUESTIONS["corpus"])
    got = score_questions(q, retrieved, {"c": spans}, mode="chroma")
    for metric, values in expected.items():
        assert got[metric].tolist() == pytest.approx(values), metric


def test_chroma_driver_scores_the_same_retrieval_under_both_placements(tmp_path):
    chunks = {"c": [Chunk(t, s, e) for t, s, e in CHUNKS]}
    rows = np.array([[3], [3]])
    exact = ch.score_retrieval(chunks, {"c": CORPUS}, QUESTIONS, rows, "exact", "chroma")
    report = ch.score_retrieval(chunks, {"c": CORPUS}, QUESTIONS, rows, "report", "chroma")
    assert exact["recall"].tolist() == [1.0, 0.0] and report["recall"].tolist() == [0.0, 1.0]
    assert exact["precision_omega"].tolist() == [0.5, 0.5]
    assert report["precision_omega"].tolist() == [0.0, 0.5]
    # The engine's grid of the same chunks and retrieval scores what score_retrieval scores.
    grid = grid_of(tmp_path, ["WindowA:4"], [[[3], [3]]])
    assert [(c.text, c.start, c.end) for c in grid.chunk_objects["WindowA 4"]["c"]] == CHUNKS
    cols = ["recall", "precision", "iou", "precision_omega"]
    pd.testing.assert_frame_equal(grid.per_question[cols], exact[cols])
    again = ch.rescore(grid, {"c": CORPUS}, QUESTIONS, placement="report")
    assert again.config.placement == "report" and grid.config.placement == "exact"
    pd.testing.assert_frame_equal(again.per_question[cols], report[cols])
    assert again.table.loc[0, "recall"] == 0.5 and again.table.loc[0, "precision_omega"] == 0.25
    # hit and 1/rank follow the placement: q0's only chunk misses under "report", q1's hits.
    assert again.per_question["hit"].tolist() == [0.0, 1.0] and again.per_question["rr"].tolist() == [0.0, 1.0]
    assert grid.per_question["rr"].tolist() == [1.0, 0.0]
    assert again.chunks["WindowA 4"]["c"][3] == (4, 8)
    # rescoring equals running the engine at that placement (nothing re-embedded either way here)
    run_report = grid_of(tmp_path, ["WindowA:4"], [[[3], [3]]], placement="report")
    pd.testing.assert_frame_equal(again.per_question, run_report.per_question)
    # precision_Omega alone, per mode and placement (chroma: q0 0.5 / 0.0, q1 0.5 / 0.5).
    pom_exact = ch.precision_omega_by_mode(grid, QUESTIONS)
    pom_report = ch.precision_omega_by_mode(grid, QUESTIONS, {"c": CORPUS}, "report")
    assert pom_exact.loc[0, "precision_omega_chroma"] == 50.0
    assert pom_report.loc[0, "precision_omega_chroma"] == 25.0
    moves = ch.placement_moves(grid, {"c": CORPUS})
    assert moves[["n_chunks", "moved", "trimmed"]].values.tolist() == [[5, 1, 0]]
    with pytest.raises(ValueError, match="needs corpora"):
        ch.precision_omega_by_mode(grid, QUESTIONS, placement="report")
    with pytest.raises(ValueError, match="unknown placement 'first'"):
        ch.rescore(grid, {"c": CORPUS}, QUESTIONS, placement="first")
    with pytest.raises(ValueError, match="not the 2 questions the grid ran on"):
        ch.rescore(grid, {"c": CORPUS}, QUESTIONS.iloc[::-1], placement="report")


def test_report_placement_drops_exactly_one_trailing_dot(tmp_path):
    corpus = "Tea. Tea. Rain.. a."
    chunks = [("Tea.", 0, 4), ("Tea.", 5, 9), ("Rain..", 10, 16), ("a.", 17, 19)]
    # "Tea." -> "Tea" first at 0 -> (0, 3), for both copies; "Rain.." -> "Rain." at 10 ->
    # (10, 15) (dropping both dots would give (10, 14)); "a." -> "a": its first occurrence is
    # the "a" of the first "Tea" at 2, so (2, 3).
    assert place_spans(corpus, chunks, "report") == [(0, 3), (0, 3), (10, 15), (2, 3)]
    q = pd.DataFrame({"question_id": [0], "question": ["x"], "corpus": ["c"], "references": [[(0, 3)]]})
    grid = grid_of(tmp_path, ["Words"], [[[0]]], corpus, q)
    assert [(c.text, c.start, c.end) for c in grid.chunk_objects["Words"]["c"]] == chunks
    moves = ch.placement_moves(grid, {"c": corpus})
    # moved: chunk 1 (5 -> 0) and chunk 3 (17 -> 2); trimmed in place: chunks 0 and 2.
    assert moves[["moved", "trimmed"]].values.tolist() == [[2, 2]]


def test_report_placement_names_a_chunk_that_is_not_in_the_corpus():
    with pytest.raises(ValueError, match=r"chunks\[1\] \(text starting 'zzz'\) does not occur"):
        place_spans("abcabc", [("abc", 0, 3), ("zzz", 3, 6)], "report")


@pytest.mark.parametrize(
    "chunks, match",
    [
        ([("abc", 0, 9)], r"chunks\[0\].*past the corpus \(6 characters\)"),
        ([("abc", 3, 1)], r"chunks\[0\].*start > end"),
        ([("abc", 0)], r"chunks\[0\].*not a \(text, start, end\) triple"),
        ([(3, 0, 3)], r"chunks\[0\]: the text must be a str"),
    ],
)
def test_place_spans_rejects_bad_chunks(chunks, match):
    with pytest.raises(ValueError, match=match):
        place_spans("abcabc", chunks, "exact")


def test_unknown_placement_and_index_are_named():
    with pytest.raises(ValueError, match="unknown placement 'first'"):
        place_spans("abc", [("abc", 0, 3)], "first")
    with pytest.raises(ValueError, match="unknown index 'faiss'"):
        ch.run_chroma_grid([], {}, pd.DataFrame({"question": []}), None, index="faiss")


def test_hnsw_index_finds_the_exact_neighbours_on_a_small_set():
    pytest.importorskip("chromadb")
    from chunkwise.retrieval import top_k_cosine

    rng = np.random.default_rng(0)
    keys = rng.normal(size=(300, 16)).astype(np.float32)
    keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    queries = keys[:20] + 0.05 * rng.normal(size=(20, 16)).astype(np.float32)
    exact, _ = top_k_cosine(queries, keys, 5)
    approx = ch.hnsw_search(keys, queries, top_k=5)
    assert approx.shape == (20, 5)
    # l2 on unit vectors ranks as cosine does; with search_ef 50 over 300 points the graph
    # search is exhaustive enough to return the same neighbours.
    assert (approx == exact).mean() >= 0.98
    assert (approx[:, 0] == np.arange(20)).all()


def test_compare_placements_gives_gains_and_ranks(tmp_path):
    # A retrieves chunk 3 for both questions: recall per question report [0, 1], exact [1, 0]
    #   -> 50 % under both placements.
    # C retrieves chunk 3 for q0 and chunk 1 (4-8 under both placements) for q1:
    #   report: q0 4-8 misses 13-15 (0), q1 4-8 covers 5-7 (1) -> 50 %;
    #   exact:  q0 12-16 covers 13-15 (1), q1 (1) -> 100 %.
    # precision_Omega depends on the chunks only: 25 % (report) vs 50 % (exact) for both.
    grid = grid_of(tmp_path, ["WindowA:4", "WindowC:4"], [[[3], [3]], [[3], [1]]])
    corpora = {"c": CORPUS}
    report = ch.rescore(grid, corpora, QUESTIONS, placement="report")
    exact = ch.rescore(report, corpora, QUESTIONS, placement="exact")
    pd.testing.assert_frame_equal(exact.per_question, grid.per_question)  # back where it was
    cmp = ch.compare_placements(report, exact)
    assert cmp["chunker"].tolist() == ["WindowA 4", "WindowC 4"]
    assert cmp["recall_report"].tolist() == [50.0, 50.0]
    assert cmp["recall_exact"].tolist() == [50.0, 100.0]
    assert cmp["recall_gain"].tolist() == [0.0, -50.0]
    assert cmp["precision_omega_gain"].tolist() == [-25.0, -25.0]
    assert cmp["rank_report"].tolist() == [1, 1] and cmp["rank_exact"].tolist() == [2, 1]
    swapped = grid_of(tmp_path, ["WindowC:4", "WindowA:4"], [[[3], [1]], [[3], [3]]])
    with pytest.raises(ValueError, match="must hold the same specs"):
        ch.compare_placements(report, swapped)
    # the same per-chunker tables read one (retriever, k); a k the grid did not run is named
    assert ch.results_table(report, "m")["recall_mean"].tolist() == [50.0, 50.0]
    assert ch.per_corpus_table(exact, "recall").loc["WindowC 4", "c"] == 100.0
    with pytest.raises(ValueError, match=r"no cells for retriever 'given' at k=5"):
        ch.results_table(grid, "m", top_k=5)
    with pytest.raises(ValueError, match=r"no cells for retriever 'dense'"):
        ch.compare_placements(report, exact, retriever="dense")
    with pytest.raises(ValueError, match="unknown metric 'recal'"):
        ch.per_corpus_table(grid, "recal")


def test_precision_omega_vs_tables_keeps_rows_both_tables_have():
    ours = pd.DataFrame(
        {"chunker": ["TokenText", "TokenText", "Cluster"], "size_tokens": [200, 250, 200],
         "overlap_tokens": [0, 0, 0], "precision_omega_mean": [20.98, 18.06, 33.0]}
    )
    report = pd.DataFrame(
        {"embedding_model": ["all-MiniLM-L6-v2", "text-embedding-3-large", "all-MiniLM-L6-v2",
                             "all-MiniLM-L6-v2", "text-embedding-3-large"],
         "chunker": ["TokenText", "TokenText", "TokenText", "Cluster", "Cluster"],
         "size_tokens": [200, 200, 250, 200, 200], "overlap_tokens": [0, 0, 0, "", ""],
         "precision_omega_mean": [19.1, 21.0, 16.4, 33.6, 34.0]}
    )
    got = ch.precision_omega_vs_tables(ours, report)
    # TokenText 250 is only in the MiniLM table -> dropped. 20.98 is 0.02 from 21.0 (OpenAI
    # table) and 1.88 from 19.1; 33.0 is 0.6 from 33.6 (MiniLM) and 1.0 from 34.0.
    assert got["chunker"].tolist() == ["TokenText", "Cluster"]
    assert got["embedder_free"].tolist() == [True, False]
    assert got["closer"].tolist() == ["text-embedding-3-large", "all-MiniLM-L6-v2"]


def test_compare_with_report_code_matches_rows_and_names_a_missing_search():
    ours = pd.DataFrame(
        {"chunker": ["TokenText", "Recursive"], "size_tokens": [200, 200], "overlap_tokens": [0, 0],
         "recall_mean": [77.99, 75.62], "precision_mean": [4.6, 6.19],
         "precision_omega_mean": [20.98, 29.94], "iou_mean": [4.58, 6.16]}
    )
    code = pd.DataFrame(
        {"chunker": ["TokenText", "TokenText"], "size_tokens": [200, 200], "overlap_tokens": [0, 0],
         "search": ["a", "b"], "recall_mean": [77.84, 77.99], "precision_mean": [4.6, 4.6],
         "precision_omega_mean": [20.98, 20.98], "iou_mean": [4.58, 4.58]}
    )
    got = ch.compare_with_report_code(ours, code, "a")
    assert got["chunker"].tolist() == ["TokenText"]  # Recursive is not in the file
    assert got.loc[0, "recall_delta"] == pytest.approx(0.15)
    assert got.loc[0, "precision_omega_delta"] == pytest.approx(0.0)
    assert ch.compare_with_report_code(ours, code, "b").loc[0, "recall_delta"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="search 'c' is not in the file"):
        ch.compare_with_report_code(ours, code, "c")
