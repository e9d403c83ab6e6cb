"""The stitching builder (chunkwise.datasets.stitch) and chapter 6's measures
(chunkwise.experiments.stitched) on hand-made corpora."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from chunkwise.chunk import Chunk
from chunkwise.datasets.stitch import build_condition, segment_documents
from chunkwise.experiments.stitched import (
    cross_fit,
    cross_fit_apply,
    document_retrieval,
    document_retrieval_summary,
    holm_verdicts,
    interaction,
    pattern_verdict,
    unscorable_references,
    paper_table,
    seam_boundaries,
    verdict_words,
)
from chunkwise.tokens import count_tokens

# Three sources, each of paragraphs of one sentence; every paragraph is 6 cl100k tokens
# ("Alpha one is here now." = Alpha, one, is, here, now, .)
WORDS = {"a": "Alpha", "b": "Delta", "c": "Charlie"}
NUMS = ["one", "two", "three", "four", "five", "six", "seven", "eight"]


def _doc(key: str, n: int) -> str:
    return "".join(f"{WORDS[key]} {NUMS[i]} is here now.\n" for i in range(n))


DOCS = {"a": _doc("a", 8), "b": _doc("b", 8), "c": _doc("c", 4)}


def _para(doc: str, i: int) -> tuple[int, int]:
    """Span of paragraph i (without its newline)."""
    lines = DOCS[doc].split("\n")
    start = sum(len(x) + 1 for x in lines[:i])
    return start, start + len(lines[i])


def _questions() -> pd.DataFrame:
    a1 = _para("a", 1)
    a2 = _para("a", 2)
    b5 = _para("b", 5)
    b0 = _para("b", 0)
    c3 = _para("c", 3)
    rows = [
        # crosses the cut between paragraphs 1 and 2 of "a"
        ("q1", "which alpha?", "a", [(a1[0] + 6, a2[0] + 5)]),
        # two references far apart in "b": their segments must share a stitched document
        ("q2", "which bravo?", "b", [b0, b5]),
        ("q3", "which charlie?", "c", [c3]),
    ]
    df = pd.DataFrame(rows, columns=["question_id", "question", "corpus_id", "references"])
    df["reference_texts"] = [[DOCS[d][s:e] for s, e in refs] for d, refs in zip(df["corpus_id"], df["references"])]
    return df


def test_paragraphs_are_six_tokens():
    for key in WORDS:
        assert count_tokens(f"{WORDS[key]} one is here now.\n") == 6


def test_segments_tile_sources_and_pack_paragraphs_by_hand():
    segs = segment_documents(DOCS, None, min_tokens=10, max_tokens=15)
    # two paragraphs (12 tokens) per segment: 4 + 4 + 2
    assert [(s.source, s.source_start // len("Alpha one is here now.\n")) for s in segs][:4] == [
        ("a", 0), ("a", 2), ("a", 4), ("a", 6)
    ]
    assert [s.n_tokens for s in segs] == [12] * 10
    for key, text in DOCS.items():
        assert "".join(s.text for s in segs if s.source == key) == text
    assert [s.segment_id for s in segs] == list(range(len(segs)))


def test_a_reference_moves_the_cut():
    q = _questions()
    segs = segment_documents(DOCS, q, min_tokens=10, max_tokens=15)
    s1, e1 = q.loc[0, "references"][0]
    # no segment starts strictly inside the reference
    assert not [s for s in segs if s.source == "a" and s1 < s.source_start < e1]
    # and without the question, a segment does start inside it (the cut was moved, not absent)
    plain = segment_documents(DOCS, None, min_tokens=10, max_tokens=15)
    assert [s for s in plain if s.source == "a" and s1 < s.source_start < e1]


def test_reference_never_split_with_hand_computed_segments():
    q = _questions()
    segs = segment_documents(DOCS, q, min_tokens=10, max_tokens=15)
    line = len("Alpha one is here now.\n")
    a = [(s.source_start // line, s.source_end // line) for s in segs if s.source == "a"]
    # cuts allowed after paragraphs 0, 2, 3, ... (not after 1): within 15 tokens only the cut
    # after paragraph 0 (6 tokens, under 10), so the segment runs to the first allowed cut that
    # reaches 10 tokens, after paragraph 2 (18 tokens); then [3,5), [5,7), and the 6-token
    # tail [7,8) joins [5,7).
    assert a == [(0, 3), (3, 5), (5, 8)]
    assert [s.n_tokens for s in segs if s.source == "a"] == [18, 12, 18]


@pytest.mark.parametrize("condition", ["real", "stitched", "shuffled"])
def test_offsets_carried_exactly(condition):
    q = _questions()
    segs = segment_documents(DOCS, q, min_tokens=10, max_tokens=15)
    sc = build_condition(DOCS, q, condition, segments=segs, segments_per_document=4, seed=3)
    for _, row in sc.questions.iterrows():
        for (s, e), text in zip(row["references"], row["reference_texts"]):
            assert sc.docs[row["corpus_id"]][s:e] == text
    # the same text in a different order
    assert sorted("".join(sc.docs.values())) == sorted("".join(DOCS.values()))
    assert sc.placements["segment_id"].sort_values().tolist() == list(range(len(segs)))
    # each placement holds its segment verbatim
    for r in sc.placements.itertuples():
        assert sc.docs[r.document][r.start:r.end] == DOCS[r.source][r.source_start:r.source_end]


def test_real_condition_is_the_input():
    q = _questions()
    sc = build_condition(DOCS, q, "real", min_tokens=10, max_tokens=15)
    assert sc.docs == DOCS
    assert [list(r) for r in sc.questions["references"]] == [list(r) for r in q["references"]]
    assert not sc.seam_table()["cross_source"].any()
    assert sc.seam_table()["contiguous"].all()


def test_stitched_seams_join_sources_and_keep_questions_whole():
    q = _questions()
    segs = segment_documents(DOCS, q, min_tokens=10, max_tokens=15)
    sc = build_condition(DOCS, q, "stitched", segments=segs, segments_per_document=3, seed=0)
    seams = sc.seam_table()
    assert len(seams) == len(segs) - len(sc.docs)
    # a seam is where the right segment starts
    for r in seams.itertuples():
        row = sc.placements[sc.placements["segment_id"] == r.right_segment].iloc[0]
        assert row["start"] == r.offset and row["document"] == r.document
    # a (source, text) order where a neighbour of another source always exists: all seams cross
    assert seams["cross_source"].mean() >= 0.8
    # q2's two references (paragraphs 0 and 5 of b) sit in one document
    q2 = sc.questions.set_index("question_id").loc["q2"]
    assert len(q2["evidence_segments"]) == 2
    docs_of = set(sc.placements.set_index("segment_id").loc[q2["evidence_segments"], "document"])
    assert docs_of == {q2["corpus_id"]}
    assert sc.seams()[q2["corpus_id"]] == sorted(seams.loc[seams["document"] == q2["corpus_id"], "offset"].tolist())


def test_same_seed_same_documents_other_seed_other_order():
    q = _questions()
    segs = segment_documents(DOCS, q, min_tokens=10, max_tokens=15)
    one = build_condition(DOCS, q, "stitched", segments=segs, segments_per_document=3, seed=7)
    two = build_condition(DOCS, q, "stitched", segments=segs, segments_per_document=3, seed=7)
    assert one.docs == two.docs
    orders = {
        tuple(build_condition(DOCS, q, "stitched", segments=segs, segments_per_document=3, seed=s).placements["segment_id"])
        for s in range(6)
    }
    assert len(orders) > 1


def test_shuffled_keeps_each_source_in_its_own_document():
    q = _questions()
    sc = build_condition(DOCS, q, "shuffled", min_tokens=10, max_tokens=15, seed=1)
    assert set(sc.docs) == {"a~shuffled", "b~shuffled", "c~shuffled"}
    for key in DOCS:
        assert sorted(DOCS[key].splitlines()) == sorted(sc.docs[f"{key}~shuffled"].splitlines())
    assert not sc.seam_table()["cross_source"].any()


def test_bad_input_is_rejected_clearly():
    q = _questions()
    with pytest.raises(ValueError, match="condition must be"):
        build_condition(DOCS, q, "mixed")
    with pytest.raises(ValueError, match="min_tokens"):
        segment_documents(DOCS, q, min_tokens=20, max_tokens=10)
    bad = q.copy()
    bad.loc[0, "corpus_id"] = "zzz"
    with pytest.raises(ValueError, match="not among the documents"):
        segment_documents(DOCS, bad)
    # segments cut without the questions cannot carry q1
    plain = segment_documents(DOCS, None, min_tokens=10, max_tokens=15)
    with pytest.raises(ValueError, match="crosses the segment cut"):
        build_condition(DOCS, q, "stitched", segments=plain)


# ---------------------------------------------------------------------------- measures


def _corpus_two_docs():
    """A stitched corpus by hand: doc "x" = segments 0 [0, 10) and 1 [10, 20)."""
    placements = pd.DataFrame(
        [(0, "a", 0, 10, "x", 0, 10, 3), (1, "b", 0, 10, "x", 10, 20, 3)],
        columns=["segment_id", "source", "source_start", "source_end", "document", "start", "end", "n_tokens"],
    )
    questions = pd.DataFrame(
        {"question_id": ["q1", "q2"], "corpus_id": ["x", "x"], "references": [[(2, 4)], [(12, 14)]],
         "evidence_segments": [[0], [1]]}
    )
    return SimpleNamespace(docs={"x": "A" * 20}, placements=placements, questions=questions, segment_lookup=lambda: {
        "x": ([0, 10], [0, 1])}, condition="stitched", seam_table=lambda: pd.DataFrame(
        [{"document": "x", "offset": 10, "left_segment": 0, "right_segment": 1, "left_source": "a", "right_source": "b",
          "cross_source": True, "contiguous": False}]))


def test_document_retrieval_by_hand():
    corpus = _corpus_two_docs()
    # chunks: [0, 8) -> segment 0; [8, 15) -> 5 chars in segment 1 vs 2 in 0 -> segment 1; [15, 20) -> 1
    chunks = {"C": {"x": [Chunk("A" * 8, 0, 8), Chunk("A" * 7, 8, 15), Chunk("A" * 5, 15, 20)]}}
    result = SimpleNamespace(
        config=SimpleNamespace(top_k=(1, 2), retrievers=("dense",)),
        questions=pd.DataFrame({"question_id": ["q1", "q2"]}),
        chunk_objects=chunks,
        rankings={"C": {"dense": [[1, 0, 2], [1, 2, 0]]}},
        ranking_key_of=lambda retriever, embedder=None: retriever,  # a grid of one embedder
    )
    df = document_retrieval(result, corpus).set_index(["k", "question_id"])
    # q1 (evidence segment 0): k=1 retrieves segment 1 -> P 0, R 0; k=2 segments {1, 0} -> P 1/2, R 1
    assert df.loc[(1, "q1"), ["doc_precision", "doc_recall", "doc_f1"]].tolist() == [0.0, 0.0, 0.0]
    assert df.loc[(2, "q1"), "doc_precision"] == 0.5 and df.loc[(2, "q1"), "doc_recall"] == 1.0
    assert df.loc[(2, "q1"), "doc_f1"] == pytest.approx(2 / 3)
    # q2 (segment 1): k=2 retrieves chunks 1 and 2, both segment 1 -> one distinct segment, P 1, R 1
    assert df.loc[(2, "q2"), ["doc_precision", "doc_recall"]].tolist() == [1.0, 1.0]
    summary = document_retrieval_summary(document_retrieval(result, corpus)).set_index("k")
    # k=2: mean P = 0.75, mean R = 1.0 -> F1 of means 2*0.75/(1.75)
    assert summary.loc[2, "doc_f1_of_means"] == pytest.approx(1.5 / 1.75)
    # any overlap: chunk [8, 15) touches segments 0 and 1, so at k=1 q1 gets {0, 1}: P 1/2, R 1
    assert df.loc[(1, "q1"), ["doc_precision_any", "doc_recall_any"]].tolist() == [0.5, 1.0]
    assert df.loc[(1, "q1"), "doc_f1_any"] == pytest.approx(2 / 3)
    assert df.loc[(1, "q2"), ["doc_precision_any", "doc_recall_any"]].tolist() == [0.5, 1.0]
    # every segment is some chunk's majority segment here: nothing is unscorable
    un = unscorable_references(result, corpus)
    assert un.loc["C"].tolist() == [0.0, 0.0]
    # one chunk over the whole text: 10 characters of each segment, the tie goes to segment 0, so
    # segment 1 (q2's evidence) can never be credited
    whole = SimpleNamespace(questions=result.questions, chunk_objects={"W": {"x": [Chunk("A" * 20, 0, 20)]}})
    assert unscorable_references(whole, corpus).loc["W"].tolist() == [0.5, 0.5]


def test_seam_boundaries_by_hand():
    text = "One a. Two b. Three c. Four d."
    # sentences at 0-6, 7-13, 14-22, 23-30; a seam at 14 (after sentence 1)
    corpus = SimpleNamespace(
        docs={"x": text},
        seam_table=lambda: pd.DataFrame([{"document": "x", "offset": 14, "contiguous": False, "cross_source": True}]),
    )
    result = SimpleNamespace(chunk_objects={
        "exact": {"x": [Chunk(text[0:14], 0, 14), Chunk(text[14:], 14, len(text))]},
        "off": {"x": [Chunk(text[0:7], 0, 7), Chunk(text[7:], 7, len(text))]},
    })
    df = seam_boundaries(result, corpus, tolerance=0).set_index("chunker")
    assert df.loc["exact", ["seams_found", "boundary_precision", "boundary_recall", "pk"]].tolist() == [1, 1.0, 1.0, 0.0]
    assert df.loc["off", ["seams_found", "boundary_precision", "boundary_recall"]].tolist() == [0, 0.0, 0.0]
    tol = seam_boundaries(result, corpus, tolerance=1).set_index("chunker")
    assert tol.loc["off", "seams_found"] == 1


def test_interaction_by_hand():
    idx = ["q1", "q2", "q3", "q4"]
    stitched = pd.DataFrame({"sem": [1.0, 1.0, 0.5, 1.0], "fix": [0.5, 0.5, 0.0, 0.5]}, index=idx)
    real = pd.DataFrame({"sem": [0.5, 0.5, 0.5, 0.5], "fix": [0.5, 0.5, 0.5, 0.5]}, index=idx)
    out = interaction({"stitched": stitched, "real": real}, "sem", "fix", n_resamples=500)
    # every question gains 0.5 on stitched and 0 on real: the interval collapses to 0.5
    assert out["interaction"] == pytest.approx(0.5)
    assert out["interaction_low"] == pytest.approx(0.5) and out["interaction_high"] == pytest.approx(0.5)
    assert out["gap_control"] == 0.0
    assert verdict_words(out["interaction_low"], out["interaction_high"]) == "supports"
    assert verdict_words(-0.2, 0.1) == "cannot tell" and verdict_words(-0.3, -0.1) == "contradicts"
    with pytest.raises(ValueError, match="different questions"):
        interaction({"stitched": stitched, "real": real.iloc[:3]}, "sem", "fix")


def test_paper_table_gaps():
    t = paper_table().set_index(["embedder", "dataset"])
    assert t.loc[("stella_en_1.5B_v5", "Miracl"), "breakpoint_minus_fixed"] == pytest.approx(12.44)
    assert t.loc[("stella_en_1.5B_v5", "HotpotQA"), "breakpoint_minus_fixed"] == pytest.approx(-3.22)
    assert np.all(t.loc[t["documents"] == "original", "breakpoint_minus_fixed"] < 0)


def test_a_seam_after_a_source_without_final_whitespace_gets_a_line_break():
    """issue 43: '...2000). TheBozdech...' -- a source's last segment without trailing whitespace
    was glued to the next segment's first word."""
    docs = {"a": "Alpha one is here now.\nAlpha two is here (2000).", "b": "Delta one is here now.\nThe end."}
    q = pd.DataFrame({"question_id": ["q"], "question": ["x"], "corpus_id": ["a"], "references": [[(0, 22)]]})
    q["reference_texts"] = [["Alpha one is here now."]]
    segs = segment_documents(docs, q, min_tokens=3, max_tokens=8)
    assert [s.text for s in segs] == ["Alpha one is here now.\n", "Alpha two is here (2000).",
                                      "Delta one is here now.\n", "The end."]
    real = build_condition(docs, q, "real", segments=segs)
    assert real.docs == docs and real.summary()["separators_inserted"] == 0
    for seed in range(8):
        sc = build_condition(docs, q, "stitched", segments=segs, segments_per_document=4, seed=seed)
        (text,) = sc.docs.values()
        seams = sc.seam_table()
        # every moved segment that follows "(2000)." or "The end." starts on a new line
        assert ").A" not in text and ").D" not in text and ".T" not in text.replace(".\nT", "")
        assert "(2000).\n" in text or text.endswith("(2000).")
        assert seams["after_line_break"].all()
        assert (seams["separator"] > 0).sum() == sc.summary()["separators_inserted"]
        # offsets shift with the separators: every segment and reference is still exact
        for r in sc.placements.itertuples():
            assert text[r.start:r.end] == segs[r.segment_id].text
        (refs,) = sc.questions["references"]
        assert [text[s:e] for s, e in refs] == ["Alpha one is here now."]
    sh = build_condition(docs, q, "shuffled", segments=segs, seed=3)
    assert all(t.count("\n") >= 1 for t in sh.docs.values())


def test_seam_table_says_whether_a_seam_follows_a_line_break():
    docs = {"a": "One two three four. Five six seven eight.\n\nNine ten eleven."}
    q = pd.DataFrame({"question_id": ["q"], "question": ["x"], "corpus_id": ["a"], "references": [[(0, 4)]]})
    q["reference_texts"] = [["One "]]
    segs = segment_documents(docs, q, min_tokens=4, max_tokens=6)
    real = build_condition(docs, q, "real", segments=segs)
    # cuts: after "four. " (a sentence end, a space) and after the blank line (a paragraph end)
    assert [s.text for s in segs] == ["One two three four. ", "Five six seven eight.\n\n", "Nine ten eleven."]
    assert real.seam_table()["after_line_break"].tolist() == [False, True]
    assert real.summary()["seams_after_line_break"] == 1


def test_flat_layout_turns_every_line_break_into_a_space_and_keeps_offsets():
    """issue 43: an arm whose seams carry no layout cue (no line break anywhere)."""
    docs = {"a": "Alpha one is here now.\r\nAlpha two is here (2000).", "b": "Delta one is here now.\n\nThe end."}
    q = pd.DataFrame({"question_id": ["q"], "question": ["x"], "corpus_id": ["a"], "references": [[(0, 24)]]})
    q["reference_texts"] = [["Alpha one is here now.\r\n"]]
    segs = segment_documents(docs, q, min_tokens=3, max_tokens=8)
    real = build_condition(docs, q, "real", segments=segs, layout="flat")
    assert real.docs == {"a": "Alpha one is here now.  Alpha two is here (2000).",
                         "b": "Delta one is here now.  The end."}
    assert real.layout == "flat" and real.summary()["layout"] == "flat"
    assert real.questions["reference_texts"].tolist() == [["Alpha one is here now.  "]]
    for seed in range(6):
        kept = build_condition(docs, q, "stitched", segments=segs, segments_per_document=4, seed=seed)
        flat = build_condition(docs, q, "stitched", segments=segs, segments_per_document=4, seed=seed,
                               layout="flat")
        (k_text,), (f_text,) = kept.docs.values(), flat.docs.values()
        # same order, same offsets; only the line breaks differ (a separator becomes a space)
        assert len(f_text) == len(k_text) and "\n" not in f_text and "\r" not in f_text
        assert f_text == k_text.replace("\r", " ").replace("\n", " ")
        pd.testing.assert_frame_equal(flat.placements, kept.placements)
        assert not flat.seam_table()["after_line_break"].any()
        (refs,) = flat.questions["references"]
        assert [f_text[s:e] for s, e in refs] == ["Alpha one is here now.  "]
    with pytest.raises(ValueError, match="layout must be one of kept, flat"):
        build_condition(docs, q, "real", segments=segs, layout="none")


def test_pattern_verdict_needs_the_stitched_gap_and_the_interaction():
    assert pattern_verdict(0.5, 2.0, 1.0, 3.0) == "supports"
    # gains from stitching but not ahead on stitched text (tuned Semantic's case): cannot tell
    assert pattern_verdict(-3.0, 1.0, 2.0, 9.0) == "cannot tell"
    assert pattern_verdict(-3.0, -1.0, 2.0, 9.0) == "contradicts"
    assert pattern_verdict(1.0, 3.0, -4.0, -1.0) == "contradicts"


def test_holm_verdicts_by_hand():
    rows = pd.DataFrame({"gap_treated": [2.0, 1.0, -1.0], "gap_treated_p": [0.001, 0.02, 0.5],
                         "interaction": [3.0, 2.0, -2.0], "interaction_p": [0.004, 0.03, 0.01]})
    out = holm_verdicts(rows)
    # six tests sorted: .001 x6 = .006, .004 x5 = .02, .01 x4 = .04, .02 x3 = .06, .03 x2 = .06, .5 x1 = .5
    assert out["gap_treated_p_holm"].tolist() == pytest.approx([0.006, 0.06, 0.5])
    assert out["interaction_p_holm"].tolist() == pytest.approx([0.02, 0.06, 0.04])
    assert out["verdict_holm"].tolist() == ["supports", "cannot tell", "contradicts"]


def test_cross_fit_never_scores_a_question_with_the_setting_chosen_on_it():
    # each question favours another setting: chosen on the other question, each gets 0
    s = pd.DataFrame({"A": [1.0, 0.0], "B": [0.0, 1.0]}, index=["q1", "q2"])
    out, chosen, fold = cross_fit(s, folds=2, seed=0)
    assert out.tolist() == [0.0, 0.0] and sorted(chosen) == ["A", "B"]
    # the same choice read on another measure: each question gets the other question's setting
    other = pd.DataFrame({"A": [10.0, 20.0], "B": [30.0, 40.0]}, index=["q1", "q2"])
    assert cross_fit_apply(other, chosen, fold).tolist() == [30.0, 20.0]
    # a setting best everywhere is chosen in every fold
    s2 = pd.DataFrame({"A": [0.9, 0.8, 0.7, 0.6], "B": [0.1, 0.2, 0.3, 0.4]}, index=list("abcd"))
    out2, chosen2, _ = cross_fit(s2, folds=2, seed=3)
    assert chosen2 == ["A", "A"] and out2.tolist() == [0.9, 0.8, 0.7, 0.6]
    with pytest.raises(ValueError, match="at least 2 questions"):
        cross_fit(s2.iloc[:1])


def test_chapter_answer_from_the_intervals():
    from chunkwise.experiments.stitched import chapter_answer

    def r(g_lo, g, g_hi, i_lo, i, i_hi, c=(-5.0, -3.0, -1.0)):
        return {"gap_treated": g, "gap_treated_low": g_lo, "gap_treated_high": g_hi, "interaction": i,
                "interaction_low": i_lo, "interaction_high": i_hi, "gap_control": c[1], "gap_control_low": c[0],
                "gap_control_high": c[2]}

    explo = pd.DataFrame({"treated": ["stitched", "stitched", "shuffled"], "chunker": ["K", "S", "K"],
                          "verdict_holm": ["contradicts", "supports", "supports"]})
    seeds = pd.DataFrame({"interaction": [4.0, 1.5, 6.25]})
    kw = dict(fixed="TokenText 200", baseline="Recursive 200", n_questions=472, corpora=["a"] * 5,
              embedder="all-MiniLM-L6-v2", cosine_drop={"stitched": 0.2, "shuffled": 0.02})
    text = chapter_answer(r(0.5, 2.0, 3.5, 1.0, 4.0, 7.0), r(-1, 1, 3, -2, 0.04, 2), r(-1, 0, 1, -3, -1, 1),
                          seeds, explo, **kw)
    assert "+2.0 [+0.5, +3.5] points on stitched text and -3.0 [-5.0, -1.0] on real text" in text
    assert "an {term}`interaction` of +4.0 [+1.0, +7.0]" in text and "this test **supports**" in text
    assert "on 3 random stitching orders the interaction runs +1.5 to +6.2 points" in text
    assert "an interaction of 0.0 [-2.0, +2.0]" in text  # rounds to zero: no sign
    assert "1 supports the pattern and 1 contradicts it after Holm's correction (chunkers with one in " \
           "support: S)" in text
    assert "by only 0.020 (stitched 0.200)" in text and "all five of Chroma's corpora" in text
    # ahead on stitched text is needed too: a gain from stitching alone cannot tell
    assert "**cannot tell**" in chapter_answer(r(-2, 1, 4, 1, 4, 7), r(-1, 1, 3, -2, 0, 2), r(-1, 0, 1, -3, -1, 1),
                                               seeds, explo, **kw)


def test_layout_difference_by_hand():
    from chunkwise.experiments.stitched import layout_difference

    q = ["q1", "q2", "q3", "q4"]

    def frame(sem, fix):
        return pd.DataFrame({"S": sem, "F": fix}, index=q)

    # kept arm: stitching gain per question (S-F stitched) - (S-F real) = [2, 4, 0, 2] -> mean 2
    kept = {"real": frame([1, 1, 1, 1], [1, 1, 1, 1]), "stitched": frame([3, 5, 1, 3], [1, 1, 1, 1])}
    # flat arm: gains [1, 1, 0, 0] -> mean 0.5; kept minus flat = [1, 3, 0, 2] -> mean 1.5
    flat = {"real": frame([0, 0, 0, 0], [0, 0, 0, 0]), "stitched": frame([2, 1, 0, 0], [1, 0, 0, 0])}
    r = layout_difference(kept, flat, "S", "F", n_resamples=2000, seed=0)
    assert r["interaction_kept"] == pytest.approx(2.0) and r["interaction_flat"] == pytest.approx(0.5)
    assert r["layout_part"] == pytest.approx(1.5)
    # the differences [1, 3, 0, 2] resampled: the interval lies within their range and holds the mean
    assert 0.0 <= r["layout_part_low"] <= 1.5 <= r["layout_part_high"] <= 3.0
    assert set(r) >= {"interaction_kept_low", "interaction_flat_high", "layout_part_p"}
    # questions in another order in one arm are paired by id
    flat_shuffled = {c: f.iloc[::-1] for c, f in flat.items()}
    assert layout_difference(kept, flat_shuffled, "S", "F", n_resamples=2000, seed=0) == r
    with pytest.raises(ValueError, match="different questions"):
        layout_difference(kept, {c: f.iloc[:3] for c, f in flat.items()}, "S", "F", n_resamples=200)
    with pytest.raises(ValueError, match="no column 'X'"):
        layout_difference(kept, flat, "X", "F", n_resamples=200)


def test_chapter_answer_with_the_arm_without_line_breaks():
    from chunkwise.experiments.stitched import chapter_answer

    def r(g, i):
        return {"gap_treated": g, "gap_treated_low": g - 1, "gap_treated_high": g + 1, "interaction": i,
                "interaction_low": i - 1.5, "interaction_high": i + 1.5, "gap_control": -3.0,
                "gap_control_low": -5.0, "gap_control_high": -1.0}

    explo = pd.DataFrame({"treated": ["stitched"], "chunker": ["K"], "verdict_holm": ["contradicts"]})
    kw = dict(fixed="TokenText 200", baseline="Recursive 200", n_questions=10, corpora=["a", "b"],
              embedder="m", cosine_drop={"stitched": 0.2, "shuffled": 0.02})
    layout = {"layout_part": 3.0, "layout_part_low": 1.0, "layout_part_high": 4.5}
    text = chapter_answer(r(2.0, 4.0), r(1, 1), r(0, 0), pd.DataFrame({"interaction": [4.0]}), explo, **kw,
                          head_flat=r(0.5, 1.0), layout=layout)
    assert ("With every line break turned into a space, so that no seam is marked by layout, the same test "
            "gives +0.5 [-0.5, +1.5] on stitched text and an interaction of +1.0 [-0.5, +2.5] (cannot tell); "
            "the part of the interaction that the line breaks carried (kept minus none) is +3.0 [+1.0, +4.5] "
            "points.") in text
    assert "on seams with and without a line break" in text and "rather than layout" not in text
    assert "2 of Chroma's five corpora (a, b)" in text
    # without the arm the answer says what it cannot separate
    assert "rather than layout" in chapter_answer(r(2.0, 4.0), r(1, 1), r(0, 0), pd.DataFrame({"interaction": [4.0]}),
                                                  explo, **kw)


def test_arm_difference_by_hand_and_names_its_arms():
    """issue 41: the primary contrast with a second embedder, paired with the first over the questions."""
    from chunkwise.experiments.stitched import arm_difference

    q = ["q1", "q2", "q3"]

    def frame(sem, fix):
        return pd.DataFrame({"S": sem, "F": fix}, index=q)

    # second arm: gains (S-F stitched) - (S-F real) = [3, 0, 3] -> mean 2; first arm: [1, 0, -1] -> 0
    second = {"real": frame([0, 1, 0], [0, 0, 0]), "stitched": frame([3, 1, 3], [0, 0, 0])}
    first = {"real": frame([1, 1, 1], [1, 1, 1]), "stitched": frame([2, 1, 0], [1, 1, 1])}
    r = arm_difference({"second": second, "first": first}, "S", "F", n_resamples=2000, seed=0)
    assert r["interaction_second"] == pytest.approx(2.0) and r["interaction_first"] == pytest.approx(0.0)
    # per question [2, 0, 4]: mean 2, the resampled means lie within [0, 4]
    assert r["difference"] == pytest.approx(2.0)
    assert 0.0 <= r["difference_low"] <= 2.0 <= r["difference_high"] <= 4.0
    assert set(r) >= {"interaction_second_low", "interaction_first_high", "difference_p"}
    with pytest.raises(ValueError, match="compares two arms; got 1"):
        arm_difference({"second": second}, "S", "F", n_resamples=200)
    with pytest.raises(ValueError, match="the first arm has no scores for condition 'real'"):
        arm_difference({"second": second, "first": {"stitched": first["stitched"]}}, "S", "F", n_resamples=200)


def test_arm_corpora_keeps_the_chapters_order_and_refuses_unknown_corpora():
    from chunkwise.experiments.stitched import arm_corpora

    chapter = ["state_of_the_union", "wikitexts", "chatlogs", "finance", "pubmed"]
    assert arm_corpora(["chatlogs", "state_of_the_union", "chatlogs"], chapter) == ["state_of_the_union", "chatlogs"]
    with pytest.raises(ValueError, match="names one corpus \\(pubmed\\).*at least two"):
        arm_corpora("pubmed", chapter)
    with pytest.raises(ValueError, match="wikitexts are not among the chapter's corpora"):
        arm_corpora(["wikitexts"], ["state_of_the_union", "chatlogs"])
    with pytest.raises(ValueError, match="names no corpus"):
        arm_corpora([], chapter)
    assert arm_corpora(["chatlogs", "pubmed"], (c for c in chapter + ["chatlogs"])) == ["chatlogs", "pubmed"]
    with pytest.raises(TypeError, match="got the string 'state_of_the_union'; wrap it in a list"):
        arm_corpora(["state_of_the_union", "chatlogs"], "state_of_the_union")
    with pytest.raises(TypeError, match="corpus names must be strings, got 1"):
        arm_corpora([1, 2], chapter)


def test_arm_difference_refuses_repeated_questions_and_a_list_of_arms():
    from chunkwise.experiments.stitched import arm_difference

    f = pd.DataFrame({"S": [1, 2], "F": [0, 0]}, index=["q1", "q2"])
    arm = {"real": f, "stitched": f}
    with pytest.raises(TypeError, match="arms must be a mapping"):
        arm_difference([arm, arm], "S", "F")
    twice = {"real": f, "stitched": pd.concat([f, f.iloc[:1]])}
    with pytest.raises(ValueError, match="the b arm's 'stitched' scores repeat question 'q1'"):
        arm_difference({"a": arm, "b": twice}, "S", "F", n_resamples=100)


def test_paper_direction_counts_the_mpnet_rows():
    from chunkwise.experiments.stitched import paper_direction

    d = paper_direction("all-mpnet-base-v2")
    # stitched: Miracl +9.73, NQ +12.52, Scidocs +0.50, Scifact +16.02, BioASQ +8.65, NFCorpus +1.63
    assert d.loc["stitched", "datasets"] == 6 and d.loc["stitched", "breakpoint_ahead"] == 6
    assert d.loc["stitched", "mean_gap"] == pytest.approx((9.73 + 12.52 + 0.50 + 16.02 + 8.65 + 1.63) / 6)
    # original: HotpotQA -6.64, MSMARCO -1.58, ConditionalQA -4.36, Qasper -0.48
    assert d.loc["original", "breakpoint_ahead"] == 0 and d.loc["original", "min_gap"] == pytest.approx(-6.64)
    with pytest.raises(ValueError, match="report no rows for 'MiniLM'"):
        paper_direction("MiniLM")


def test_chapter_answer_with_a_second_embedder():
    from chunkwise.experiments.stitched import chapter_answer

    def r(g, i):
        return {"gap_treated": g, "gap_treated_low": g - 1, "gap_treated_high": g + 1, "interaction": i,
                "interaction_low": i - 1.5, "interaction_high": i + 1.5, "gap_control": -3.0,
                "gap_control_low": -5.0, "gap_control_high": -1.0}

    explo = pd.DataFrame({"treated": ["stitched"], "chunker": ["K"], "verdict_holm": ["contradicts"]})
    kw = dict(fixed="TokenText 200", baseline="Recursive 200", n_questions=10, corpora=["a", "b"],
              embedder="m", cosine_drop={"stitched": 0.2, "shuffled": 0.02})
    diff = {"interaction_first": 4.0, "interaction_first_low": 1.0, "interaction_first_high": 7.0,
            "difference": 2.0, "difference_low": -1.0, "difference_high": 5.5}
    text = chapter_answer(r(2.0, 4.0), r(1, 1), r(0, 0), pd.DataFrame({"interaction": [4.0]}), explo, **kw,
                          second_embedder="big", head_second=r(3.0, 6.0), second_difference=diff,
                          second_corpora=["a"], second_n_questions=4)
    assert ("With big cutting and retrieving, on a (4 questions), the stitched gap is +3.0 [+2.0, +4.0] and the "
            "interaction +6.0 [+4.5, +7.5] (supports); m's interaction on the same questions is +4.0 [+1.0, +7.0], "
            "a difference of +2.0 [-1.0, +5.5] points.") in text
    assert "with m, and with big on 1 of the corpora" in text and "one small embedder" not in text
    assert "with one small embedder (m)" in chapter_answer(r(2.0, 4.0), r(1, 1), r(0, 0),
                                                          pd.DataFrame({"interaction": [4.0]}), explo, **kw)


def test_chapter_answer_lead_fits_the_box_and_the_details_keep_every_interval():
    from chunkwise.answerbox import DETAILS_TITLE, MAX_LEAD_WORDS, visible_words
    from chunkwise.evaluation.robustness import Robustness, SpecResult
    from chunkwise.experiments.stitched import chapter_answer

    def r(gap, inter, ctrl=(-4.7, -9.0, -0.4)):
        return {"gap_treated": gap[0], "gap_treated_low": gap[1], "gap_treated_high": gap[2], "interaction": inter[0],
                "interaction_low": inter[1], "interaction_high": inter[2], "gap_control": ctrl[0],
                "gap_control_low": ctrl[1], "gap_control_high": ctrl[2]}

    def panel(cls, verdict, flips=(), n_alt=14, not_run=(), delta=2.0, unit="points"):
        spec = SpecResult("primary", 10.4, 4.5, 16.3, verdict, 472, 6.0)
        alts = tuple(SpecResult(f"alternative {i}", 1.0, -1.0, 3.0, verdict, 472, 6.0) for i in range(n_alt))
        return Robustness(cls, spec, alts, tuple(flips), delta, unit, tuple(not_run))

    # the published run (chapter 6, 2026-12)
    names = ["against Recursive 200", "against Structure 200", "state_of_the_union only", "wikitexts only",
             "chatlogs only", "finance only", "pubmed only"]
    flips = list(zip(names, ["cannot tell", "contradicts"] + ["cannot tell"] * 5))
    explo = pd.DataFrame({"treated": ["stitched"] * 20, "chunker": [f"C{i % 5}" for i in range(20)],
                          "verdict_holm": ["supports"] + ["contradicts"] * 10 + ["cannot tell"] * 9})
    kw = dict(fixed="TokenText 200", baseline="Recursive 200", n_questions=472,
              corpora=["state_of_the_union", "wikitexts", "chatlogs", "finance", "pubmed"],
              embedder="all-MiniLM-L6-v2", cosine_drop={"stitched": 0.2, "shuffled": 0.114})
    box = chapter_answer(r((5.7, 1.4, 10.0), (10.4, 4.5, 16.3)), r((2.3, 0.6, 4.1), (3.6, 1.2, 5.9)),
                         r((0, 0, 0), (9.9, 4.3, 15.5)), pd.DataFrame({"interaction": [10.4, 14.4, 12.0]}), explo,
                         **kw, robustness=panel("fragile", "supports", flips=flips),
                         kamradt=r((-5.0, -9.0, -1.0), (-16.7, -23.8, -9.5)),
                         amendments=[{"date": "2026-12-05", "reason": "The headline row changed.",
                                      "previous": "interaction -16.7 [-23.8, -9.5], 'contradicts'"}])
    lead, details = box.split(f":::{{dropdown}} {DETAILS_TITLE}")
    assert lead.strip() == (
        "**Where one file mixes unrelated content, try a tuned breakpoint chunker over fixed-size TokenText 200**: "
        "stitching widens its lead by +10.4 [+4.5, +16.3] recall points pooled over Chroma's five corpora "
        "(**supports**; fragile: 7 of 14 declared alternatives disagree). Kamradt at LangChain's defaults, the "
        "guide's own chunker: **contradicts**.")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    for text in ("+5.7 [+1.4, +10.0] points on stitched text and -4.7 [-9.0, -0.4] on real text",
                 "an {term}`interaction` of +10.4 [+4.5, +16.3] (paired 95% intervals, 472 questions, all five of "
                 "Chroma's corpora, pooled)", "the interaction runs +10.4 to +14.4 points",
                 "+2.3 [+0.6, +4.1] on stitched text and an interaction of +3.6 [+1.2, +5.9]",
                 "moves the recall gap by +9.9 [+4.3, +15.5]", "57% as far as the stitched ones",
                 "1 supports the pattern and 10 contradict it after Holm's correction",
                 "The declared alternatives (supports): fragile: 7 of 14 declared alternatives disagree (against "
                 "Recursive 200 gives cannot tell; against Structure 200 gives contradicts; state_of_the_union only",
                 "pubmed only gives cannot tell)",
                 "Kamradt at LangChain's defaults, the guide's own chunker, against TokenText 200: an interaction of "
                 "-16.7 [-23.8, -9.5] recall points (contradicts)",
                 "Amended 2026-12-05: The headline row changed. Before: interaction -16.7 [-23.8, -9.5], 'contradicts'."):
        assert text in details, text
    # the longest lead: "cannot tell" with the longest robustness class, labels at their word caps
    longest = panel("no effect larger than delta", "cannot tell", n_alt=12, delta=12.5, unit="recall points",
                    not_run=["a"] * 11)
    box = chapter_answer(r((-1.0, -2.0, 0.5), (10.4, -4.5, 16.3)), r((2.3, 0.6, 4.1), (3.6, 1.2, 5.9)),
                         r((0, 0, 0), (9.9, 4.3, 15.5)), pd.DataFrame({"interaction": [10.4]}), explo,
                         **{**kw, "fixed": "TokenText 200/50", "corpora": ["a", "b", "c"]},
                         robustness=longest, kamradt=r((-5.0, -9.0, 1.0), (-16.7, -23.8, 9.5)),
                         kamradt_label="Kamradt p95")
    lead = box.split(":::{dropdown}")[0]
    assert lead.strip() == (
        "**Mixed content is no proven reason to swap fixed-size TokenText 200/50 for a breakpoint chunker**: "
        "stitching changes its lead by +10.4 [-4.5, +16.3] recall points pooled over 3 of Chroma's corpora "
        "(**cannot tell**; no effect larger than 12.5 recall points; all 12 alternatives agree; 11 not run here). "
        "Kamradt p95 at LangChain's defaults, the guide's own chunker: **cannot tell**.")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    assert "2 of Chroma's five corpora" not in lead and "3 of Chroma's five corpora (a, b, c), pooled" in box
    # contradicts: keep the fixed-size chunker
    box = chapter_answer(r((-5.7, -10.0, -1.4), (-10.4, -16.3, -4.5)), r((2.3, 0.6, 4.1), (3.6, 1.2, 5.9)),
                         r((0, 0, 0), (9.9, 4.3, 15.5)), pd.DataFrame({"interaction": [-10.4]}), explo, **kw)
    assert box.startswith("**Mixed content is no reason to swap fixed-size TokenText 200 for a breakpoint chunker**: "
                          "stitching changes its lead by -10.4 [-16.3, -4.5] recall points pooled over Chroma's five "
                          "corpora (**contradicts**).\n\n:::{dropdown}")
    # a longer label is not put in the lead
    box = chapter_answer(r((5.7, 1.4, 10.0), (10.4, 4.5, 16.3)), r((2.3, 0.6, 4.1), (3.6, 1.2, 5.9)),
                         r((0, 0, 0), (9.9, 4.3, 15.5)), pd.DataFrame({"interaction": [10.4]}), explo,
                         **{**kw, "fixed": "a fixed-size chunker of two hundred tokens"},
                         kamradt=r((-5.0, -9.0, -1.0), (-16.7, -23.8, -9.5)), kamradt_label="Kamradt at percentile 95")
    lead = box.split(":::{dropdown}")[0]
    assert "over the fixed-size reference**" in lead and "The semantic chunker at LangChain's" in lead
    assert "Kamradt at percentile 95 at LangChain's defaults, the guide's own chunker, against a fixed-size" in box
