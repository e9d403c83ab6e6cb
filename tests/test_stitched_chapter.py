"""Chapter 6's notebook plumbing, moved into chunkwise.experiments.stitched (#57): the per-question
frames, the cross-fitted primary column, the contrasts, and the tables and sentences the chapter
shows, on small hand-made inputs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from chunkwise.chunk import Chunk
from chunkwise.experiments import stitched as X

Q = ["q1", "q2", "q3", "q4"]


class _Grid:
    """A grid result that only answers ``scores(metric)``: per-question frames whose columns are
    the grid's cells ``"<chunker> | dense | k=<k>"``."""

    def __init__(self, by_metric: dict[str, pd.DataFrame], k: int = 5):
        self.by_metric = {m: f.rename(columns=lambda c: f"{c} | dense | k={k}") for m, f in by_metric.items()}

    def scores(self, metric: str) -> pd.DataFrame:
        return self.by_metric[metric]


def _segment_table(frame: pd.DataFrame, k: int = 5) -> pd.DataFrame:
    """A document_retrieval-style long table (chunker, k, question_id, doc_f1) from a wide frame."""
    long = frame.rename_axis("question_id").reset_index().melt(id_vars="question_id", var_name="chunker",
                                                                value_name="doc_f1")
    return long.assign(k=k)


# ---------------------------------------------------------------------------- the moved helpers


def test_cost_tracker_records_each_spec_when_the_grid_is_done_with_it():
    model = SimpleNamespace(n_requested=0, n_embedded=0)
    costs: list[dict] = []
    tracked = X.cost_tracker(costs, "stitched, seed 1", model)(
        [SimpleNamespace(label="TokenText 200"), SimpleNamespace(label="Kamradt")])
    for spec, (asked, new) in zip(tracked, [(10, 4), (7, 0)]):
        assert len(costs) == (0 if spec.label == "TokenText 200" else 1)  # recorded once the next is asked
        model.n_requested += asked
        model.n_embedded += new
    assert [(c["condition"], c["chunker"], c["texts_requested"], c["texts_embedded"]) for c in costs] == [
        ("stitched, seed 1", "TokenText 200", 10, 4), ("stitched, seed 1", "Kamradt", 7, 0)]
    assert all(c["seconds"] >= 0 for c in costs)
    with pytest.raises(TypeError, match="n_embedded"):
        X.cost_tracker([], "real", SimpleNamespace(n_requested=0))
    with pytest.raises(TypeError, match="list to append to"):
        X.cost_tracker(None, "real", model)


def test_chunker_scores_keeps_the_dense_cells_at_k_in_the_labels_order():
    wide = pd.DataFrame({"A | dense | k=5": [0.1, 0.2], "B | dense | k=5": [0.3, 0.4],
                         "A | dense | k=1": [0.9, 0.9], "C | bm25 | k=5": [0.5, 0.5]}, index=["q1", "q2"])
    result = SimpleNamespace(scores=lambda metric: wide if metric == "recall" else None)
    out = X.chunker_scores(result, ["B", "A", "Z"], "recall", 5)
    assert list(out.columns) == ["B", "A"]  # Z was not run; A at k=1 and C's BM25 cell are not read
    assert out.loc["q2"].tolist() == [0.4, 0.2]
    with pytest.raises(ValueError, match="no dense cell at k=3"):
        X.chunker_scores(result, ["A", "B"], "recall", 3)


def test_segment_scores_pivots_one_measure_at_one_depth():
    per_question = pd.DataFrame({
        "chunker": ["A", "A", "B", "B", "A"], "k": [5, 5, 5, 5, 1], "question_id": ["q1", "q2", "q1", "q2", "q1"],
        "doc_f1": [0.5, 1.0, 0.0, 0.25, 0.75], "doc_recall": [1.0, 1.0, 0.0, 0.5, 1.0]})
    out = X.segment_scores(per_question, ["B", "A"], 5)
    assert list(out.columns) == ["B", "A"] and out.loc["q2"].tolist() == [0.25, 1.0]
    assert X.segment_scores(per_question, ["A"], 1, "doc_recall").loc["q1", "A"] == 1.0
    with pytest.raises(ValueError, match="no row at k=10"):
        X.segment_scores(per_question, ["A"], 10)
    with pytest.raises(ValueError, match="no measure 'doc_iou'"):
        X.segment_scores(per_question, ["A"], 5, "doc_iou")
    with pytest.raises(ValueError, match="no segment-retrieval scores for C"):
        X.segment_scores(per_question, ["A", "C"], 5)


def test_interval_text_direction_words_points_and_p_values():
    r = {"gap": 3.3, "gap_low": -1.1, "gap_high": 5.0, "gap_p": 0.2}
    assert X.interval_text(r, "gap") == "+3.3 [-1.1, +5.0]"
    with pytest.raises(KeyError):
        X.interval_text({"gap": 1.0, "gap_low": 0.0}, "gap")
    assert X.direction_words(0.5, 2.0, "breakpoint", "fixed-size") == "breakpoint ahead"
    assert X.direction_words(-2.0, -0.1, "breakpoint", "fixed-size") == "fixed-size ahead"
    assert X.direction_words(-1.0, 1.0, "a", "b") == "no difference shown"
    assert X.direction_words(float("nan"), 1.0, "a", "b") == "no difference shown"
    # every value times 100 but the p-values, in the same order
    assert X.in_points({"gap": 0.25, "gap_p": 0.03, "interaction": -0.5}) == {
        "gap": 25.0, "gap_p": 0.03, "interaction": -50.0}
    assert list(X.in_points({"b": 1, "a_p": 1, "a": 1})) == ["b", "a_p", "a"]
    assert X.p_value_text(0.0004) == "< 0.001"
    assert X.p_value_text(0.001) == "0.001"
    assert X.p_value_text(0.04251) == "0.043"


def test_with_primary_cross_fits_in_the_real_order_in_every_condition():
    real = pd.DataFrame({"S70": [1.0, 0.0], "S80": [0.0, 1.0], "F": [0.3, 0.4]}, index=["q1", "q2"])
    # the stitched frame comes in another order; S80 is best on both questions there
    stitched = pd.DataFrame({"S70": [0.1, 0.2], "S80": [0.6, 0.9], "F": [0.5, 0.5]}, index=["q2", "q1"])
    out, chosen = X.with_primary({"real": real, "stitched": stitched}, ["S70", "S80"], folds=2, seed=0)
    # real: each question favours another setting, chosen on the other question, so each gets 0
    assert out["real"][X.PRIMARY].tolist() == [0.0, 0.0] and sorted(chosen["real"]) == ["S70", "S80"]
    assert list(out["stitched"].index) == ["q1", "q2"]
    assert out["stitched"][X.PRIMARY].tolist() == [0.9, 0.6] and chosen["stitched"] == ["S80", "S80"]
    assert list(out["stitched"].columns) == ["S70", "S80", "F", X.PRIMARY]
    with pytest.raises(ValueError, match="orders the questions as the real condition"):
        X.with_primary({"stitched": stitched}, ["S70"])
    with pytest.raises(ValueError, match="the stitched scores lack the settings S90"):
        X.with_primary({"real": real.assign(S90=0.0), "stitched": stitched}, ["S70", "S90"])
    with pytest.raises(ValueError, match="questions of the real condition"):
        X.with_primary({"real": real, "stitched": stitched.iloc[:1]}, ["S70"])


def test_exploratory_row_finds_one_contrast():
    rows = pd.DataFrame({"metric": ["recall", "recall", "doc_f1"], "chunker": ["K", "K", "K"],
                         "reference": ["F", "F", "F"], "treated": ["stitched", "shuffled", "stitched"],
                         "interaction": [1.0, 2.0, 3.0]})
    assert X.exploratory_row(rows, "recall", "K", "F", "shuffled")["interaction"] == 2.0
    assert X.exploratory_row(rows, "doc_f1", "K", "F")["interaction"] == 3.0
    with pytest.raises(ValueError, match="no exploratory row for recall, K against R, stitched"):
        X.exploratory_row(rows, "recall", "K", "R")


def _corpus_two_segments():
    """Document "x" = segment 0 [0, 10) and segment 1 [10, 20); q1's evidence is 0, q2's is 1."""
    placements = pd.DataFrame([(0, "a", 0, 10, "x", 0, 10, 3), (1, "b", 0, 10, "x", 10, 20, 3)],
                              columns=["segment_id", "source", "source_start", "source_end", "document",
                                       "start", "end", "n_tokens"])
    questions = pd.DataFrame({"question_id": ["q1", "q2"], "corpus_id": ["x", "x"],
                              "references": [[(2, 4)], [(12, 14)]], "evidence_segments": [[0], [1]]})
    return SimpleNamespace(docs={"x": "A" * 20}, placements=placements, questions=questions,
                           segment_lookup=lambda: {"x": ([0, 10], [0, 1])}, condition="stitched")


def test_retrieval_table_by_hand():
    corpus = _corpus_two_segments()
    result = SimpleNamespace(
        config=SimpleNamespace(top_k=(1, 2), retrievers=("dense",)),
        questions=pd.DataFrame({"question_id": ["q1", "q2"]}),
        chunk_objects={"C": {"x": [Chunk("A" * 8, 0, 8), Chunk("A" * 7, 8, 15), Chunk("A" * 5, 15, 20)]}},
        rankings={"C": {"dense": [[1, 0, 2], [1, 2, 0]]}},
        ranking_key_of=lambda retriever, embedder=None: retriever,
        table=pd.DataFrame({"chunker": ["C", "C"], "k": [1, 2], "recall": [0.25, 0.5], "iou": [0.1, 0.2],
                            "precision_omega": [0.05, 0.1], "n_chunks": [3.0, 3.0],
                            "mean_chunk_tokens": [6.5, 6.5]}),
    )
    t = X.retrieval_table(result, X.document_retrieval(result, corpus), corpus, 2)
    row = t.loc["C"]
    assert (row["recall"], row["iou"], row["precision_omega"]) == (50.0, 20.0, 10.0)
    # k=2: q1 retrieves segments {1, 0} (P 1/2, R 1, F1 2/3), q2 segment {1} (F1 1): mean F1 5/6;
    # mean P 3/4 and mean R 1 give the F1 of means 2 * 0.75 / 1.75
    assert row["doc_f1"] == pytest.approx(100 * 5 / 6)
    assert row["doc_f1_of_means"] == pytest.approx(100 * 1.5 / 1.75)
    assert row["unscorable"] == 0.0 and t["n_chunks"].dtype == int and row["mean_tokens"] == 6.5
    with pytest.raises(ValueError, match="no row at k=5"):
        X.retrieval_table(result, X.document_retrieval(result, corpus), corpus, 5)
    shown = X.retrieval_tables({"real": t, "stitched": t}, 2)
    assert [title for title, _ in shown] == ["**real** (k = 2)", "**stitched** (k = 2)",
                                             "**all three conditions** (k = 2)"]
    # the two columns that compare the conditions leave the per-condition tables
    assert "segment F1 of means" not in shown[0][1].data.columns
    assert list(shown[2][1].data.columns.get_level_values(1)) == ["real", "stitched", "real", "stitched"]


# ---------------------------------------------------------------------------- the contrasts


def _runs() -> X.ChapterRuns:
    """Four questions; on stitched text the sweep's S1 is 0.5 ahead of F on every question, on real
    and shuffled text nothing differs."""
    flat = pd.DataFrame({"F": 0.5, "S1": 0.5, "S2": 0.5, "K": 0.5}, index=Q)
    stitched = flat.assign(S1=1.0, S2=0.0, K=0.25)
    frames = {"real": flat, "shuffled": flat.copy(), "stitched": stitched}
    labels = {"F:1": "F", "S:1": "S1", "S:2": "S2", "K:1": "K"}
    runs = X.ChapterRuns(
        texts={}, questions=pd.DataFrame({"question_id": Q, "corpus": ["a", "a", "b", "b"]}), embedder=None,
        labels=labels, segments=None, conditions={c: None for c in frames},
        results={c: _Grid({"recall": f, "iou": f}) for c, f in frames.items()},
        fixed="F:1", baseline="K:1", primary_sweep=["S:1", "S:2"],
        seed_results={1: _Grid({"recall": stitched[["F", "S1", "S2"]]})})
    runs.__dict__["segment_retrieval"] = {c: _segment_table(f) for c, f in frames.items()}  # no chunks here
    return runs


def test_chapter_runs_scores_in_the_labels_order():
    runs = _runs()
    assert list(runs.scores("stitched", "recall", 5).columns) == ["F", "S1", "S2", "K"]
    assert runs.scores("stitched", "recall", 5).loc["q3", "K"] == 0.25
    assert runs.segment_scores("stitched", 5).loc["q1", "S1"] == 1.0
    assert runs.costs.empty


def test_contrasts_by_hand():
    found = X.contrasts(_runs(), ["S1", "S2"], "F", baseline="K", semantic=["K"], k=5, n_resamples=200)
    # stitched: S1 chosen in both folds, 0.5 ahead of F on every question; real and shuffled: no gap
    assert found.chosen_recall["stitched"] == ["S1", "S1"]
    assert (found.head["gap_treated"], found.head["gap_control"], found.head["interaction"]) == (50.0, 0.0, 50.0)
    assert found.head["interaction_low"] == 50.0 and found.head["interaction_high"] == 50.0
    assert found.verdict == "supports"
    assert found.head_doc["interaction"] == 50.0  # the same numbers as segment F1
    assert found.head_shuffled["interaction"] == 0.0
    # the other stitching seed holds the same scores: the same interaction
    assert found.by_seed["seed"].tolist() == [0, 1] and found.by_seed["interaction"].tolist() == [50.0, 50.0]
    assert found.by_seed["verdict"].tolist() == ["supports", "supports"]
    # K (0.25 on stitched, 0.5 elsewhere) against F and against itself, in two conditions and two measures
    ex = found.exploratory
    assert len(ex) == 2 * 1 * 2 * 2
    row = X.exploratory_row(ex, "recall", "K", "F")
    assert (row["gap_treated"], row["interaction"]) == (-25.0, -25.0)
    assert X.exploratory_row(ex, "recall", "K", "F", "shuffled")["interaction"] == 0.0  # shuffled = real
    assert X.exploratory_row(ex, "doc_f1", "K", "K", "shuffled")["interaction"] == 0.0
    # no arm ran without line breaks or with a second embedder
    assert found.head_flat is None and found.layout_primary is None and found.head_second == {}


def test_chosen_settings_seed_table_and_spread():
    sweep = ["Semantic:percentile:70:0:150", "Kamradt"]
    labels = {"Semantic:percentile:70:0:150": "Semantic 70", "Kamradt": "Kamradt"}
    t = X.chosen_settings({"real": ["Semantic 70", "Kamradt"]}, {"real": ["Kamradt", "Kamradt"]}, sweep, labels)
    assert t.loc["chosen on recall (per fold)", "real"] == "70th percentile, Kamradt"
    assert t.loc["chosen on segment F1 (per fold)", "real"] == "Kamradt, Kamradt"
    by_seed = pd.DataFrame({"seed": [0, 1, 2], "interaction": [4.0, 1.5, 6.25], "interaction_low": [1.0, -1.0, 2.0],
                            "interaction_high": [7.0, 4.0, 9.0], "gap_treated": [2.0, 1.0, 3.0],
                            "gap_treated_low": [0.5, -0.5, 1.0], "gap_treated_high": [3.5, 2.5, 5.0],
                            "verdict": ["supports", "cannot tell", "supports"]})
    assert X.seed_spread(by_seed) == "+1.5 to +6.2 points over 3 stitching seeds"
    shown = X.seed_table(by_seed)
    assert shown.loc[1, ["gap stitched", "interaction"]].tolist() == ["+1.0 [-0.5, +2.5]", "+1.5 [-1.0, +4.0]"]
    with pytest.raises(ValueError, match="at least one stitching seed"):
        X.seed_spread(by_seed.iloc[:0])


def _r(g, c, i):
    """An interaction in points: (estimate, low, high) of the stitched gap, the real gap, the interaction."""
    out = {}
    for name, (mid, lo, hi) in (("gap_treated", g), ("gap_control", c), ("interaction", i)):
        out.update({name: mid, name + "_low": lo, name + "_high": hi})
    return out


def test_primary_table_and_paragraph():
    head = _r((2.0, 0.5, 3.5), (-3.0, -5.0, -1.0), (5.0, 2.0, 8.0))
    shuf = _r((-1.0, -2.0, 1.0), (-3.0, -5.0, -1.0), (2.0, -1.0, 4.0))
    t = X.primary_table(head, head, shuf, 5)
    assert t["measure"].tolist() == ["span recall@5", "segment-retrieval F1@5", "span recall@5"]
    assert t.loc[0, ["gap real", "interaction", "verdict"]].tolist() == ["-3.0 [-5.0, -1.0]", "+5.0 [+2.0, +8.0]",
                                                                          "supports"]
    assert t.loc[2, "verdict"] == "cannot tell"  # behind on shuffled text is not ahead
    assert len(X.primary_table(head, head, shuf, 5, head_flat=head)) == 4
    text = X.primary_paragraph(head, "supports", "+1.5 to +6.2 points over 3 stitching seeds", "TokenText 200",
                               5, 472)
    assert text == ("Breakpoint (cross-fitted) minus TokenText 200, span recall@5: -3.0 [-5.0, -1.0] points on "
                    "real text, +2.0 [+0.5, +3.5] on stitched text, an interaction of +5.0 [+2.0, +8.0] (paired "
                    "95% intervals, 472 questions): **supports**. Across stitching seeds the interaction runs "
                    "+1.5 to +6.2 points over 3 stitching seeds.")


def test_layout_table_and_paragraph():
    lay_p = {"interaction_kept": 5.0, "interaction_kept_low": 2.0, "interaction_kept_high": 8.0,
             "interaction_flat": 1.0, "interaction_flat_low": -2.0, "interaction_flat_high": 4.0,
             "layout_part": 4.0, "layout_part_low": 1.0, "layout_part_high": 7.0}
    t = X.layout_table(lay_p, lay_p, "TokenText 200", "Recursive 200")
    assert t["contrast"].tolist() == ["breakpoint (cross-fitted) minus TokenText 200",
                                      "Recursive 200 minus TokenText 200"]
    assert t.loc[0, "kept minus none"] == "+4.0 [+1.0, +7.0]"
    flat = _r((-1.0, -3.0, 1.0), (0.0, -1.0, 1.0), (-1.0, -4.0, 2.0))
    text = X.layout_paragraph(flat, lay_p, "TokenText 200", "Recursive 200", 5)
    assert text.startswith("Without line breaks the breakpoint chunker is -1.0 [-3.0, +1.0] points against "
                           "TokenText 200 on stitched text and 0.0 [-1.0, +1.0] on real text")
    assert "**cannot tell**. Recursive 200's gain from stitching goes from +5.0 [+2.0, +8.0] to " \
           "+1.0 [-2.0, +4.0] points" in text


def test_conditions_paragraph_reads_the_shuffled_drop_against_the_stitched_one():
    table = pd.DataFrame({"segments": [100, 100, 100], "mean_segment_tokens": [207.4, 207.4, 207.4],
                          "seams": [80, 80, 80], "documents": [5, 5, 5], "cross_source_seams": [0, 0, 64],
                          "drop": [0.01, 0.1, 0.3], "cosine_within_segments": [0.5, 0.5, 0.5]},
                         index=["real", "shuffled", "stitched"])
    summary = {"seams": 80, "seams_after_line_break": 60, "separators_inserted": 1}
    text = X.conditions_paragraph(table, summary)
    assert text.startswith("Each condition holds 100 segments (207 tokens on average). The stitched condition "
                           "has 80 seams in 5 documents, 64 of them between two corpora;")
    # 0.1 / 0.3 = 33% > 25%: shuffling moved the topic too
    assert "the shuffled seams drop 33% as far as the stitched ones" in text
    assert text.endswith(" 75% of the stitched seams follow a line break (a paragraph end, or the line break put "
                         "where a segment ended without whitespace: 1 seam); the rest follow a sentence end and "
                         "a space, where no paragraph break fell in the size range.")
    soft = X.conditions_paragraph(table.assign(drop=[0.01, 0.03, 0.3]), {**summary, "separators_inserted": 2})
    assert "the shuffled seams are much softer than the stitched ones, as intended." in soft and "2 seams)" in soft
    with pytest.raises(ValueError, match="no seam"):
        X.conditions_paragraph(table, {**summary, "seams": 0})
    shown = X.conditions_shown(table)
    assert shown.loc["mean_segment_tokens", "stitched"] == "207" and shown.loc["drop", "shuffled"] == "0.100"


def test_paper_direction_sentence_reads_each_gap():
    ours = _r((2.0, 0.5, 3.5), (-3.0, -5.0, -1.0), (5.0, 2.0, 8.0))
    # all-mpnet-base-v2: breakpoint ahead on 6 of 6 stitched datasets, 0 of 4 original ones
    assert X.paper_direction_sentence("all-mpnet-base-v2", ours, 5) == (
        " The paper's all-mpnet-base-v2 rows put breakpoint chunking ahead of fixed-size on 6 of 6 stitched "
        "datasets and 0 of 4 original ones (document F1@5); ours, on segment-retrieval F1@5: breakpoint ahead "
        "on stitched text (+2.0 [+0.5, +3.5]) and fixed-size ahead on real text (-3.0 [-5.0, -1.0]); "
        "directions only, as their datasets are not ours.")
    t = X.paper_direction_table("all-mpnet-base-v2", ours)
    assert t.loc["stitched", "paper: breakpoint ahead"] == 6
    assert t.loc["original (ours: real)", "ours: segment-retrieval F1 gap"] == "-3.0 [-5.0, -1.0]"
    with pytest.raises(ValueError, match="report no rows"):
        X.paper_direction_sentence("MiniLM", ours, 5)


def test_second_embedder_paragraph_and_table():
    head2 = {(arm, m): _r((2.0, 0.5, 3.5), (-3.0, -5.0, -1.0), (5.0, 2.0, 8.0))
             for arm in ("first", "second") for m in ("recall", "doc_f1")}
    diff = {m: {"difference": 1.0, "difference_low": -2.0, "difference_high": 4.0} for m in ("recall", "doc_f1")}
    found = SimpleNamespace(head_second=head2, second_difference=diff)
    runs = SimpleNamespace(second_corpora=["chatlogs", "wikitexts"], second_questions=pd.DataFrame(index=range(7)))
    assert X.second_embedder_paragraph(found, runs, embedder="m1", second_embedder=None, fixed="F", k=5) == (
        "This run left the second embedder out (`second_embedder = None`).")
    text = X.second_embedder_paragraph(found, runs, embedder="m1", second_embedder="m2", fixed="F", k=5)
    assert text == ("With m2 cutting and retrieving on chatlogs, wikitexts (7 questions), the breakpoint chunker "
                    "is +2.0 [+0.5, +3.5] points against F on stitched text and -3.0 [-5.0, -1.0] on real text, "
                    "an interaction of +5.0 [+2.0, +8.0]: **supports** (span recall@5). With m1 on the same "
                    "questions the interaction is +5.0 [+2.0, +8.0], so the larger embedder changes it by "
                    "+1.0 [-2.0, +4.0] points.")  # m2 is not one of the paper's embedders: no paper sentence
    with_paper = X.second_embedder_paragraph(found, runs, embedder="m1", second_embedder="all-mpnet-base-v2",
                                             fixed="F", k=5)
    assert with_paper.endswith("directions only, as their datasets are not ours.")
    t = X.second_embedder_table(head2, diff, (("first", "m1"), ("second", "m2")), 5)
    assert t["embedder"].tolist() == ["m1", "m2", "m2 minus m1"] * 2
    assert t.loc[2, ["gap real", "interaction", "verdict"]].tolist() == ["", "+1.0 [-2.0, +4.0]", ""]


def test_exploratory_tables_per_measure_with_holm_p_values():
    rows = pd.DataFrame([{"metric": "recall", "chunker": "K", "reference": "F", "treated": "stitched",
                          **_r((2.0, 0.5, 3.5), (-3.0, -5.0, -1.0), (5.0, 2.0, 8.0)),
                          "gap_treated_p_holm": 0.0002, "interaction_p_holm": 0.02, "verdict_holm": "supports"}])
    tables = X.exploratory_tables(rows, 5)
    assert [title for title, _ in tables] == ["**span recall@5** (points; gap = semantic minus reference)"]
    data = tables[0][1].data
    assert data.iloc[0]["contrast"] == "K − F"
    assert data.iloc[0]["p (Holm): gap, interaction"] == "< 0.001, 0.020"
    assert data.iloc[0][["verdict", "verdict (Holm)"]].tolist() == ["supports", "supports"]


def test_seams_paragraph_names_the_best_boundary_f1():
    bounds = pd.DataFrame({"boundary_recall": [0.5, 0.25], "boundary_precision": [0.2, 0.1], "n_cuts": [40.0, 30.0],
                           "n_seams": [16.0, 16.0], "boundary_f1": [0.3, 0.45], "pk": [0.31, 0.2]},
                          index=pd.MultiIndex.from_tuples([("stitched", "K"), ("stitched", "F")],
                                                          names=["condition", "chunker"]))
    assert X.seams_paragraph(bounds, "K", "F", 1) == (
        "On stitched text K finds 50% of the seams within 1 sentence(s) with 40 cuts for 16 seams (precision "
        "0.20); F, which cuts by position only, finds 25% (precision 0.10). The best boundary F1 is F's (0.45, "
        "Pk 0.200).")


def test_cost_table_and_lines():
    costs = pd.DataFrame([
        ("real", "A", 1.0, 10, 2), ("stitched", "A", 2.0, 20, 0), ("stitched, seed 1", "A", 3.4, 5, 1200),
        ("stitched, seed 2", "A", 0.2, 5, 34), ("real, no line breaks", "A", 4.0, 5, 5),
        ("real, m1, 2 corpora", "A", 1.0, 3, 3), ("real, m2, 2 corpora", "A", 2.6, 3, 3),
    ], columns=["condition", "chunker", "seconds", "texts_requested", "texts_embedded"])
    table = X.cost_table(costs, ["real", "stitched"], ["A"])
    assert table.loc["A", ("texts_requested", "stitched")] == 20 and table[("texts_embedded", "real")].dtype == int
    assert X.cost_lines(costs, ["real", "stitched"], ("m1", "m2"), ["c1", "c2"]) == [
        "the primary contrast on 2 more stitching seed(s): 4 s, 1,234 texts embedded",
        "the primary contrast on 1 conditions without line breaks: 4 s, 5 texts embedded",
        "the primary contrast with m1 on c1, c2: 1 s, 3 texts embedded",
        "the primary contrast with m2 on c1, c2: 3 s, 3 texts embedded",
    ]
    # without the arms only the main grid's rows: no line
    assert X.cost_lines(costs.iloc[:2], ["real", "stitched"]) == []


def test_chapter_results_takes_the_arms_only_where_they_ran():
    head = pd.Series(_r((2.0, 0.5, 3.5), (-3.0, -5.0, -1.0), (5.0, 2.0, 8.0)))
    rob = SimpleNamespace(primary=SimpleNamespace(verdict="ahead"), cls="robust")
    panels = {"mixed-content": (rob, None), "qtb-stitched": (rob, None), "qtb-real": (rob, None)}
    found = SimpleNamespace(head=head, head_doc=head, verdict="supports", head_flat=None, layout_primary=None,
                            exploratory=pd.DataFrame({"treated": ["stitched", "stitched", "shuffled"],
                                                      "verdict_holm": ["supports", "contradicts", "supports"]}))
    cond_table = pd.DataFrame({"drop": [0.3, 0.1], "seams": [80, 80]}, index=["stitched", "shuffled"])
    bounds = pd.DataFrame({"boundary_recall": [0.5, 0.25]},
                          index=pd.MultiIndex.from_tuples([("stitched", "K"), ("stitched", "F")]))
    res = X.chapter_results(found, panels, spread="s", sweep=["S1", "S2"], fixed="F", guide="K", n_questions=472,
                            cond_table=cond_table, bounds=bounds, kamradt=head, corpora=["a", "b"])
    assert res["interaction_recall_ci"] == "+5.0 [+2.0, +8.0]" and res["real_gap_doc_f1_ci"] == "-3.0 [-5.0, -1.0]"
    assert (res["n_supports"], res["n_contradicts"], res["n_interactions"]) == (1, 1, 2)
    assert res["primary"] == "the breakpoint chunker (best of S1, S2, cross-fitted)"
    assert res["guide_seam_recall"] == 0.5 and res["seam_cosine_drop_shuffled"] == 0.1
    assert res["class_qtb_stitched"] == "robust" and res["corpora"] == "a, b"
    assert "interaction_flat_recall_ci" not in res and "second_embedder" not in res
    assert list(res)[:3] == ["stitched_gap_doc_f1", "real_gap_doc_f1", "stitched_gap_doc_f1_ci"]


def test_run_chapter_refuses_a_reference_it_would_not_run():
    with pytest.raises(ValueError, match="the baseline reference 'Recursive:200' is not among the chunkers"):
        X.run_chapter(["a", "b"], ["TokenText:200"], [], fixed="TokenText:200", baseline="Recursive:200",
                      model="m", top_k=[5], mode="chroma", min_tokens=10, max_tokens=20,
                      segments_per_document=2)


def test_run_arms_runs_once():
    runs = _runs()
    with pytest.raises(ValueError, match="already hold their arms"):
        X.run_arms(runs, k=5)


def test_exploratory_figure_has_a_panel_per_reference():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = X.contrasts(_runs(), ["S1", "S2"], "F", baseline="K", semantic=["K"], k=5, n_resamples=50)
    fig = X.exploratory_figure(found.exploratory, ["K"], ("F", "K"), 5)
    try:
        assert len(fig.axes) == 2 and fig.axes[0].get_title() == "semantic minus F"
        assert fig.axes[0].get_ylabel() == "recall@5 difference (points)"
        # three conditions per chunker: the stitched point of K against F sits at -25 points
        ys = [line.get_ydata()[0] for line in fig.axes[0].lines if len(line.get_ydata()) == 1]
        assert -25.0 in ys and 0.0 in ys
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="at least one reference"):
        X.exploratory_figure(found.exploratory, ["K"], (), 5)
    assert np.isfinite(found.head["interaction_p"])
