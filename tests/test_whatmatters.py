"""Chapter 7's factor analysis (chunkwise.experiments.whatmatters), on hand-made per-question scores."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from chunkwise.experiments.whatmatters import balanced_scores, factor_ranges, ranking_agreement, variance_shares


def _result(values, questions=("q1", "q2", "q3", "q4"), noise=None):
    """A GridResult stand-in: values maps (chunker, embedder, retriever, k) -> score of every question."""
    rows = []
    for (c, e, r, k), v in values.items():
        for i, q in enumerate(questions):
            rows.append({"chunker": c, "embedder": e, "retriever": r, "k": k, "question_id": q,
                         "recall": v + (noise[i] if noise is not None else 0.0)})
    return SimpleNamespace(per_question=pd.DataFrame(rows))


# dense: c1e1 .2, c1e2 .6, c2e1 .4, c2e2 .8; bm25 (no embedder) c1 .5, c2 .5
GRID = {
    ("c1", "e1", "dense", 5): 0.2, ("c1", "e2", "dense", 5): 0.6,
    ("c2", "e1", "dense", 5): 0.4, ("c2", "e2", "dense", 5): 0.8,
    ("c1", "-", "bm25", 5): 0.5, ("c2", "-", "bm25", 5): 0.5,
}


def test_balanced_scores_repeat_the_no_embedder_cells_under_every_embedder():
    wide = balanced_scores(_result(GRID))
    assert wide.shape == (4, 8)  # 2 chunkers x 2 embedders x 2 retrievers x 1 k
    assert wide[("c1", "e2", "bm25", 5)].tolist() == [0.5] * 4
    assert list(wide.index) == ["q1", "q2", "q3", "q4"]
    with pytest.raises(ValueError, match="not a full factorial"):
        balanced_scores(_result({k: v for k, v in GRID.items() if k != ("c2", "e2", "dense", 5)}))


def test_factor_ranges_by_hand():
    dense = {k: v for k, v in GRID.items() if k[2] == "dense"}
    out = factor_ranges(balanced_scores(_result(dense)), n_resamples=200).set_index("factor")
    # chunker: c1 (.2+.6)/2 = .4, c2 .6 -> range .2; embedder: e1 .3, e2 .7 -> range .4
    assert out.loc["embedder", ["worst", "best"]].tolist() == ["e1", "e2"]
    assert out.loc["embedder", "range"] == pytest.approx(0.4)
    assert out.loc["chunker", "range"] == pytest.approx(0.2)
    assert out.loc["k", "range"] == 0.0 and out.loc["k", "n_levels"] == 1
    # every question scores alike: the intervals collapse on the point
    assert out.loc["embedder", ["range_low", "range_high"]].tolist() == pytest.approx([0.4, 0.4])
    assert list(out.index[:2]) == ["embedder", "chunker"]


def test_variance_shares_by_hand():
    dense = {k: v for k, v in GRID.items() if k[2] == "dense"}
    out = variance_shares(balanced_scores(_result(dense)), n_resamples=200).set_index("source")
    # cell means .2 .6 .4 .8 around .5: total SS .2; chunker 2 x (.1^2 + .1^2) = .04, embedder 2 x (.2^2 + .2^2) = .16
    assert out.loc["embedder", "share"] == pytest.approx(0.8)
    assert out.loc["chunker", "share"] == pytest.approx(0.2)
    assert out.loc["interactions", "share"] == pytest.approx(0.0, abs=1e-12)
    assert out.loc["embedder", ["share_low", "share_high"]].tolist() == pytest.approx([0.8, 0.8])


def test_variance_shares_with_bm25_put_the_embedder_gap_in_an_interaction():
    out = variance_shares(balanced_scores(_result(GRID)), n_resamples=200).set_index("source")
    # with bm25 (.5 everywhere) the embedder's effect exists under dense only: part of it is interaction
    assert 0 < out.loc["embedder", "share"] < 0.8
    assert out.loc["interactions", "share"] > 0
    assert out["share"].sum() == pytest.approx(1.0)


def test_ranking_agreement_by_hand():
    values = {("c1", "e1", "dense", 5): 0.1, ("c2", "e1", "dense", 5): 0.2, ("c3", "e1", "dense", 5): 0.3,
              ("c1", "e2", "dense", 5): 0.3, ("c2", "e2", "dense", 5): 0.2, ("c3", "e2", "dense", 5): 0.1,
              ("c1", "e3", "dense", 5): 0.15, ("c2", "e3", "dense", 5): 0.25, ("c3", "e3", "dense", 5): 0.35}
    out = ranking_agreement(balanced_scores(_result(values)), n_resamples=200).set_index(["a", "b"])
    assert out.loc[("e1", "e2"), "rho"] == pytest.approx(-1.0)
    assert out.loc[("e1", "e3"), "rho"] == pytest.approx(1.0)
    assert bool(out.loc[("e1", "e3"), "same_best"]) and not bool(out.loc[("e1", "e2"), "same_best"])
    assert out.loc[("e1", "e2"), ["rho_low", "rho_high"]].tolist() == pytest.approx([-1.0, -1.0])
    with pytest.raises(ValueError, match="at least 3 levels"):
        ranking_agreement(balanced_scores(_result({k: v for k, v in values.items() if k[0] != "c3"})), n_resamples=200)


def test_noisy_questions_give_intervals_around_the_point():
    noise = np.array([-0.1, 0.1, -0.05, 0.05])
    dense = {k: v for k, v in GRID.items() if k[2] == "dense"}
    out = factor_ranges(balanced_scores(_result(dense, noise=noise)), n_resamples=500).set_index("factor")
    # the noise is shared by every cell of a question: differences between levels stay exact
    assert out.loc["embedder", "diff_low"] == pytest.approx(0.4) and out.loc["embedder", "diff_high"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="n_resamples"):
        factor_ranges(balanced_scores(_result(dense)), n_resamples=10)


def test_range_difference_by_hand():
    from chunkwise.experiments.whatmatters import range_difference

    dense = {k: v for k, v in GRID.items() if k[2] == "dense"}
    out = range_difference(balanced_scores(_result(dense)), "embedder", "chunker", n_resamples=200)
    assert out["range_a"] == pytest.approx(0.4) and out["range_b"] == pytest.approx(0.2)
    assert out["diff"] == pytest.approx(0.2)
    assert [out["diff_low"], out["diff_high"]] == pytest.approx([0.2, 0.2])


def _split(box):
    """(lead, details) of an answer box."""
    from chunkwise.answerbox import DETAILS_TITLE

    lead, details = box.split(f":::{{dropdown}} {DETAILS_TITLE}")
    assert details.endswith("\n\n:::\n")
    return lead.strip(), details.strip()[:-3].strip()


def test_chapter_answer_from_the_tables():
    from chunkwise.experiments.whatmatters import chapter_answer, range_verdict

    ranges = pd.DataFrame({"range": [0.319, 0.089, 0.034], "range_low": [0.292, 0.06, 0.025],
                           "range_high": [0.346, 0.119, 0.044], "best": ["10", "Cluster 200", "e5"]},
                          index=pd.Index(["k", "chunker", "embedder"], name="factor"))
    ev = {"diff": 0.021, "diff_low": 0.004, "diff_high": 0.038,
          "range_diff": 0.033, "range_low": 0.015, "range_high": 0.075}
    agree = pd.DataFrame({"rho": [0.83, -0.09, 0.31]})
    trunc = pd.DataFrame({"ref_chars_past_window": [0.649, 0.1, 0.0, 0.0]},
                         index=pd.MultiIndex.from_tuples([("Kamradt", "MiniLM"), ("Kamradt", "mpnet"),
                                                          ("TokenText 200", "MiniLM"), ("TokenText 200", "mpnet")]))
    iou = pd.DataFrame({"range": [0.085], "best": ["Cluster 200"]}, index=["chunker"])
    text = chapter_answer(ranges, ev, agree, {"MiniLM": "Kamradt", "mpnet": "Cluster 200"},
                          largest_chunker="Kamradt", iou_ranges=iou, truncation=trunc,
                          matched_chunker="Kamradt", matched_word="cannot tell", n_questions=276,
                          corpora=["state_of_the_union", "chatlogs"], retrievers=["dense", "bm25", "hybrid"],
                          top_k=[1, 3, 5, 10])
    lead, text = _split(text)
    assert lead == ("**Set k first: it moves mean recall most, 31.9 points (interval 29.2 to 34.6).** Under dense "
                    "retrieval the embedder matters more than the chunker (**embedder ahead**).")
    assert text.startswith("On 276 questions of Chroma's state_of_the_union, chatlogs corpora, the factor with the "
                           "largest range of mean recall is **k** (31.9 points, interval 29.2 to 34.6), then "
                           "chunker (8.9), embedder (3.4). ")
    assert ("the embedder's best-minus-worst contrast minus the chunker's, each pair chosen on the other half of "
            "the questions, is +2.1 [+0.4, +3.8] points: **embedder ahead**") in text
    assert "the difference of their ranges picked on all questions is +3.3 [+1.5, +7.5] points (basic" in text
    assert "rho from -0.09 to 0.83" in text and "Kamradt under MiniLM, Cluster 200 under mpnet" in text
    assert "Kamradt loses 65% of its reference characters to MiniLM's window" in text
    assert text.endswith("Verdicts cover these corpora, two chunkers, two embedders, three retrievers and k in "
                         "{1, 3, 5, 10}.")
    assert range_verdict(0.01, 0.05) == "embedder ahead" and range_verdict(-0.05, -0.01) == "chunker ahead"
    assert "By share of the variance" not in text
    # the variance figure orders embedder above chunker: the box says so instead of contradicting it
    shares = pd.DataFrame({"source": ["k", "embedder", "chunker", "chunker × embedder", "residual"],
                           "share": [0.6, 0.2, 0.1, 0.05, 0.05]})
    kwargs = dict(largest_chunker="Kamradt", iou_ranges=iou, truncation=trunc, matched_chunker="Kamradt",
                  matched_word="cannot tell", n_questions=276, corpora=["state_of_the_union", "chatlogs"],
                  retrievers=["dense", "bm25", "hybrid"], top_k=[1, 3, 5, 10])
    text = chapter_answer(ranges, ev, agree, {"MiniLM": "Kamradt", "mpnet": "Cluster 200"},
                          variance_shares=shares, **kwargs)
    # the lead follows: it does not rank chunker above embedder, and says the shares' order is no finding
    assert _split(text)[0] == (
        "**Set k first: it moves mean recall most, 31.9 points (interval 29.2 to 34.6).** The other factors' order "
        "is not a finding (range and variance share differ). Under dense retrieval the embedder matters more than "
        "the chunker (**embedder ahead**).")
    assert ("then chunker (8.9), embedder (3.4). By share of the variance of the cell means (the figure below) "
            "the order is k, embedder, chunker: the two statistics weigh a factor differently, so the order of "
            "close factors is not a finding. Under dense retrieval") in text
    same = shares.assign(share=[0.6, 0.1, 0.2, 0.05, 0.05])
    assert "By share" not in chapter_answer(ranges, ev, agree, {"MiniLM": "Kamradt"}, variance_shares=same, **kwargs)


def test_chapter_answer_lead_fits_the_box_and_never_ranks_against_the_variance_figure():
    from chunkwise.answerbox import MAX_LEAD_WORDS, visible_words
    from chunkwise.evaluation.robustness import Robustness, SpecResult
    from chunkwise.experiments.whatmatters import chapter_answer

    def panel(cls, flips=(), n_alt=3, not_run=(), delta=2.0, unit="points"):
        spec = SpecResult("primary", 3.8, 0.3, 7.6, "embedder ahead", 276, 3.0)
        alts = tuple(SpecResult(f"alternative {i}", 1.0, -1.0, 3.0, "cannot tell", 276, 3.0) for i in range(n_alt))
        return Robustness(cls, spec, alts, tuple(flips), delta, unit, tuple(not_run))

    # the published run (chapter 7, 2026-12): by range k, chunker, retriever, embedder; by variance share
    # k, retriever, chunker, embedder; embedder ahead under the cross-fitted contrast, fragile
    ranges = pd.DataFrame({"range": [0.319, 0.089, 0.074, 0.034], "range_low": [0.291, 0.06, 0.05, 0.02],
                           "range_high": [0.345, 0.12, 0.1, 0.05], "best": ["10", "Recursive 200", "hybrid", "e5"]},
                          index=pd.Index(["k", "chunker", "retriever", "embedder"], name="factor"))
    ev = {"diff": 0.038, "diff_low": 0.003, "diff_high": 0.076, "range_diff": 0.032, "range_low": 0.015,
          "range_high": 0.075}
    shares = pd.DataFrame({"source": ["k", "retriever", "chunker", "embedder", "interactions"],
                           "share": [0.7, 0.1, 0.08, 0.02, 0.1]})
    trunc = pd.DataFrame({"ref_chars_past_window": [0.649, 0.0]},
                         index=pd.MultiIndex.from_tuples([("Kamradt", "all-MiniLM-L6-v2"),
                                                          ("TokenText 200", "all-MiniLM-L6-v2")]))
    kwargs = dict(largest_chunker="Kamradt", iou_ranges=pd.DataFrame({"range": [0.085], "best": ["Cluster 200"]},
                                                                     index=["chunker"]),
                  truncation=trunc, matched_chunker="Kamradt", matched_word="cannot tell", n_questions=276,
                  corpora=["state_of_the_union", "chatlogs", "wikitexts"], retrievers=["dense", "bm25", "hybrid"],
                  top_k=[1, 3, 5, 10])
    best_by = {"all-MiniLM-L6-v2": "Recursive 200", "all-mpnet-base-v2": "Recursive 200",
               "multilingual-e5-small": "Kamradt"}
    agree = pd.DataFrame({"rho": [0.83, -0.09, 0.5]})
    flips = [("IoU instead of recall", "chunker ahead"), ("hybrid retrieval", "chunker ahead")]
    rob = panel("fragile", flips=flips, not_run=["every embedder truncated at its window"])
    box = chapter_answer(ranges, ev, agree, best_by, variance_shares=shares, robustness=rob, **kwargs)
    lead, details = _split(box)
    assert lead == ("**Set k first: it moves mean recall most, 31.9 points (interval 29.1 to 34.5).** The other "
                    "factors' order is not a finding (range and variance share differ). Embedder versus chunker "
                    "under dense retrieval: **embedder ahead** (fragile: 2 of 3 declared alternatives disagree; 1 "
                    "not run here), though the variance shares rank the chunker higher.")
    # every number of the box stays in its details, the robustness sentence with the names of its flips
    for text in ("**k** (31.9 points, interval 29.1 to 34.5), then chunker (8.9), retriever (7.4), embedder (3.4)",
                 "the order is k, retriever, chunker, embedder: the two statistics weigh a factor differently",
                 "is +3.8 [+0.3, +7.6] points: **embedder ahead**", "+3.2 [+1.5, +7.5] points (basic",
                 "rho from -0.09 to 0.83", "Kamradt under multilingual-e5-small",
                 "under IoU the chunker's range is 8.5 points with Cluster 200 best",
                 "Kamradt loses 65% of its reference characters to all-MiniLM-L6-v2's window",
                 "\n\n**Robustness of the embedder-versus-chunker verdict** (embedder ahead): fragile: 2 of 3 declared "
                 "alternatives disagree (IoU instead of recall gives chunker ahead; hybrid retrieval gives chunker "
                 "ahead); 1 declared alternatives not run here (every embedder truncated at its window)."):
        assert text in details, text
    # the longest lead: another factor leads by variance share, the shares rank the two the other way,
    # the longest robustness class
    shares_top = shares.assign(source=["retriever", "k", "chunker", "embedder", "interactions"])
    longest = panel("no effect larger than delta", n_alt=12, delta=12.5, unit="recall points", not_run=["a"] * 11)
    lead = _split(chapter_answer(ranges, ev, agree, best_by, variance_shares=shares_top, robustness=longest,
                                 **kwargs))[0]
    assert lead.startswith("**No factor is clearly first: k has the largest range of mean recall, 31.9 points "
                           "(interval 29.1 to 34.5), retriever the largest variance share.** Embedder versus")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    # chunker ahead where the shares agree, and cannot tell
    ev_c = {**ev, "diff": -0.038, "diff_low": -0.076, "diff_high": -0.003}
    lead = _split(chapter_answer(ranges, ev_c, agree, best_by, variance_shares=shares, robustness=longest,
                                 **kwargs))[0]
    assert "Under dense retrieval the chunker matters more than the embedder (**chunker ahead**; no effect" in lead
    assert visible_words(lead) <= MAX_LEAD_WORDS
    lead = _split(chapter_answer(ranges, {**ev, "diff_low": -0.01}, agree, best_by, **kwargs))[0]
    assert lead.endswith("Under dense retrieval, whether the embedder or the chunker matters more: **cannot tell**.")


def _one_factor(columns: dict[str, list[float]], name: str = "f") -> pd.DataFrame:
    """A wide table with one factor: rows = questions, one column per level."""
    wide = pd.DataFrame(columns)
    wide.columns = pd.MultiIndex.from_tuples([(c,) for c in columns], names=[name])
    return wide


def test_cross_fitted_contrast_by_hand():
    from chunkwise.experiments.whatmatters import cross_fitted_contrast, halves

    # level a beats b on every question by 0.1, 0.2, 0.3, 0.4: every half picks a - b, so each
    # question is scored by its own difference and the contrast is their mean, 0.25
    wide = _one_factor({"a": [0.5, 0.6, 0.7, 0.8], "b": [0.4, 0.4, 0.4, 0.4]})
    out = cross_fitted_contrast(wide, "f", n_resamples=200)
    assert out["contrast"] == pytest.approx(0.25) and out["pairs"] == "a - b | a - b"
    assert out["per_question"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert out["low"] <= 0.25 <= out["high"]
    first, second = halves(4, 0)
    assert sorted([*first, *second]) == [0, 1, 2, 3] and len(first) == len(second) == 2
    with pytest.raises(ValueError, match="at least 4 questions"):
        cross_fitted_contrast(wide.head(3), "f")
    with pytest.raises(ValueError, match="factor must be one of"):
        cross_fitted_contrast(wide, "g")


def test_a_factor_without_effect_percentile_range_excludes_its_estimate_cross_fit_contains_it():
    # a minus b per question: mean exactly 0, so the range (|mean|) is 0; a resample's |mean| is
    # almost never 0, so the percentile interval of the re-picked range lies above 0
    d = [0.5, -0.2, -0.3, 0.4, -0.4, 0.35, -0.25, -0.1]
    wide = _one_factor({"a": [0.5 + x for x in d], "b": [0.5] * len(d)})
    row = factor_ranges(wide, n_resamples=2000).set_index("factor").loc["f"]
    assert row["range"] == pytest.approx(0.0, abs=1e-12)
    assert row["range_pct_low"] > row["range"]  # percentile: the estimate is outside its interval
    assert row["range_low"] == 0.0 and row["range_high"] == 0.0  # basic, 2 * 0 - q, clipped at 0: [0, 0]
    # the cross-fitted contrast: the pair picked on each half, scored on the other, by hand
    from chunkwise.experiments.whatmatters import halves

    first, second = halves(len(d), 0)
    dd = np.asarray(d)
    expected = np.empty(len(d))
    for choose, score in ((first, second), (second, first)):
        expected[score] = dd[score] if dd[choose].mean() > 0 else -dd[score]  # a - b, or b - a
    assert row["xfit"] == pytest.approx(expected.mean())
    assert row["xfit_low"] <= row["xfit"] <= row["xfit_high"]
    assert row["xfit_low"] < 0 < row["xfit_high"]  # no effect: the interval straddles 0


def test_range_difference_primary_is_cross_fitted_and_the_alternative_is_the_basic_range_interval():
    from chunkwise.experiments.whatmatters import range_difference

    noise = np.array([-0.1, 0.1, -0.05, 0.05])
    dense = {k: v for k, v in GRID.items() if k[2] == "dense"}
    ev = range_difference(balanced_scores(_result(dense, noise=noise)), "embedder", "chunker", n_resamples=500)
    # embedder e2 - e1 = 0.4 and chunker c2 - c1 = 0.2 on every question: both halves pick those pairs
    assert ev["contrast_a"] == pytest.approx(0.4) and ev["contrast_b"] == pytest.approx(0.2)
    assert ev["diff"] == pytest.approx(0.2) and ev["diff_low"] == pytest.approx(0.2) and ev["diff_high"] == pytest.approx(0.2)
    assert ev["pairs_a"] == "e2 - e1 | e2 - e1" and ev["pairs_b"] == "c2 - c1 | c2 - c1"
    assert ev["range_diff"] == pytest.approx(0.2)
    # basic = the percentile interval reflected around the estimate
    assert ev["range_low"] == pytest.approx(2 * ev["range_diff"] - ev["range_pct_high"])
    assert ev["range_high"] == pytest.approx(2 * ev["range_diff"] - ev["range_pct_low"])
