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


# ------------------------------------------------------------------ like for like (issue #58)

def _wide(values: dict, names=("chunker", "embedder", "retriever", "budget"), n_q: int = 4, noise=None):
    """A wide table: values maps a cell tuple -> the score of every question (plus noise[i])."""
    cols = list(values)
    data = np.array([[values[c] + (noise[i] if noise is not None else 0.0) for c in cols] for i in range(n_q)])
    return pd.DataFrame(data, index=[f"q{i + 1}" for i in range(n_q)],
                        columns=pd.MultiIndex.from_tuples(cols, names=list(names)))


MINI, E5 = "all-MiniLM-L6-v2", "multilingual-e5-small"


def test_parse_read():
    from chunkwise.experiments.whatmatters import parse_read

    assert parse_read("512 tokens") == ("budget", 512)
    assert parse_read("1,024 tokens") == ("budget", 1024)
    assert parse_read("k = 5") == ("k", 5) and parse_read("k=10") == ("k", 10)
    for bad in ("512", "five tokens", "k = five", "top 5"):
        with pytest.raises(ValueError, match="read must be"):
            parse_read(bad)


def test_runtime_arm_is_each_runtimes_own_policy():
    from chunkwise.experiments.whatmatters import runtime_arm

    assert runtime_arm(MINI) == "truncate at the window"
    assert runtime_arm("all-mpnet-base-v2") == "truncate at the window"
    assert runtime_arm(E5) == "mean of windows"
    with pytest.raises(ValueError, match="not in the embedding model table"):
        runtime_arm("my-own-model")


def test_mixed_scores_take_each_embedder_from_its_runtimes_arm():
    from chunkwise.experiments.whatmatters import mixed_scores

    cells = [(c, e, "dense", 512) for c in ("c1", "c2") for e in (MINI, E5)]
    trunc = _wide({c: 0.1 for c in cells})
    mean = _wide({c: 0.9 for c in cells})
    mixed = mixed_scores({"truncate at the window": trunc, "mean of windows": mean})
    assert mixed.columns.equals(trunc.columns) and mixed.index.equals(trunc.index)
    assert mixed.xs(MINI, axis=1, level="embedder").to_numpy().tolist() == [[0.1, 0.1]] * 4
    assert mixed.xs(E5, axis=1, level="embedder").to_numpy().tolist() == [[0.9, 0.9]] * 4
    with pytest.raises(ValueError, match="was not run"):
        mixed_scores({"truncate at the window": trunc})
    with pytest.raises(ValueError, match="same cells and questions"):
        mixed_scores({"truncate at the window": trunc, "mean of windows": mean.iloc[:2]})


def test_factor_effects_by_hand():
    from chunkwise.experiments.whatmatters import factor_effects

    # dense: c1e1 .2, c1e2 .6, c2e1 .4, c2e2 .8; bm25 (copied under both embedders) c1 .5, c2 .5
    values = {("c1", "e1", "dense", 512): 0.2, ("c1", "e2", "dense", 512): 0.6,
              ("c2", "e1", "dense", 512): 0.4, ("c2", "e2", "dense", 512): 0.8}
    values.update({(c, e, "bm25", 512): 0.5 for c in ("c1", "c2") for e in ("e1", "e2")})
    out = factor_effects(_wide(values), n_resamples=200).set_index(["factor", "within"])
    assert out.loc[("chunker", "dense"), ["contrast", "low", "high"]].tolist() == pytest.approx([0.2, 0.2, 0.2])
    assert out.loc[("embedder", "dense"), "contrast"] == pytest.approx(0.4)
    assert out.loc[("embedder", "dense"), ["best", "worst"]].tolist() == ["e2", "e1"]
    assert out.loc[("embedder", "dense"), "pairs"] == "e2 - e1 | e2 - e1"
    # BM25 reads no vectors and its chunkers tie: rows of 0 with a note, not a contrast
    assert out.loc[("embedder", "bm25"), "contrast"] == 0.0
    assert out.loc[("embedder", "bm25"), "note"] == "no question moves with the embedder here"
    # the retriever pooled: dense means .5 = bm25 .5 on every question
    assert out.loc[("retriever", "pooled"), "range"] == pytest.approx(0.0)
    assert list(out.index) == [("chunker", "dense"), ("embedder", "dense"), ("chunker", "bm25"),
                               ("embedder", "bm25"), ("retriever", "pooled")]
    with pytest.raises(ValueError, match="unknown factor"):
        factor_effects(_wide(values), factors=("k",))


def test_per_corpus_effects_and_their_spread():
    from chunkwise.experiments.whatmatters import corpus_spread, per_corpus_effects

    # the chunker moves corpus A's questions by .3 and corpus B's by .1 (questions q1-q4 A, q5-q8 B)
    cols = [(c, "e1", "dense", 512) for c in ("c1", "c2")]
    data = np.array([[0.2, 0.5]] * 4 + [[0.2, 0.3]] * 4)
    wide = pd.DataFrame(data, index=[f"q{i}" for i in range(1, 9)],
                        columns=pd.MultiIndex.from_tuples(cols, names=["chunker", "embedder", "retriever", "budget"]))
    corpus_of = {f"q{i}": "A" if i <= 4 else "B" for i in range(1, 9)}
    out = per_corpus_effects(wide, corpus_of, factors=("chunker",), n_resamples=200)
    rows = out[(out["factor"] == "chunker")].set_index("corpus")
    assert rows.loc["A", "contrast"] == pytest.approx(0.3) and rows.loc["B", "contrast"] == pytest.approx(0.1)
    assert rows["n_questions"].tolist() == [4, 4]
    spread = corpus_spread(out).set_index(["factor", "within"])
    assert spread.loc[("chunker", "dense")].tolist() == ["B", pytest.approx(0.1), "A", pytest.approx(0.3)]
    with pytest.raises(ValueError, match="have no corpus"):
        per_corpus_effects(wide, {"q1": "A"})


def test_complete_rows_keeps_the_questions_every_table_scores():
    from chunkwise.experiments.whatmatters import complete_rows

    a = _wide({("c1", "e1", "dense", 512): 0.5, ("c2", "e1", "dense", 512): 0.4})
    b = a.copy()
    a.iloc[1, 0] = np.nan
    b.iloc[3, 1] = np.nan
    (ka, kb), dropped = complete_rows(a, b)
    assert list(ka.index) == ["q1", "q3"] and list(kb.index) == ["q1", "q3"] and dropped == 2


def test_budget_scores_on_a_real_grid(tmp_path):
    from fakes import GRID_DOCS, WordEmbedder, questions

    from chunkwise.evaluation.budget import token_budget_view
    from chunkwise.evaluation.grid import GridConfig, run_grid
    from chunkwise.experiments.whatmatters import budget_scores

    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense", "bm25", "hybrid"], top_k=[1, 2],
                     embedders=["w1", "w2"])
    pair = (WordEmbedder(), WordEmbedder())
    result = run_grid(GRID_DOCS, questions(), cfg, embedders={"w1": pair, "w2": pair}, cache_dir=tmp_path,
                      show_progress=False)
    wide = budget_scores(result, "recall", [3, 4])
    assert wide.columns.names == ["chunker", "embedder", "retriever", "budget"]
    assert wide.shape == (2, 1 * 2 * 3 * 2)
    view = token_budget_view(result, 3).per_question.set_index(["cell", "question_id"])
    for q in ("Q1", "Q2"):  # each cell is the budget view's score; BM25 copied under both embedders
        assert wide.loc[q, ("TokenText 2", "w2", "dense", 3)] == view.loc[("TokenText 2 | w2 | dense | budget=3", q),
                                                                          "recall"]
        assert wide.loc[q, ("TokenText 2", "w1", "bm25", 3)] == wide.loc[q, ("TokenText 2", "w2", "bm25", 3)]
    assert wide.loc["Q2", ("TokenText 2", "w1", "dense", 3)] == pytest.approx(0.5)  # by hand in test_budget
    with pytest.raises(ValueError, match="at least one token budget"):
        budget_scores(result, "recall", [])


def test_embedder_chunker_steps_by_hand():
    from chunkwise.experiments.whatmatters import embedder_chunker_steps

    values = {("c1", "e1", "dense", 5): 0.2, ("c1", "e2", "dense", 5): 0.6,
              ("c2", "e1", "dense", 5): 0.4, ("c2", "e2", "dense", 5): 0.8}
    out = embedder_chunker_steps({"old": _wide(values, names=("chunker", "embedder", "retriever", "k"))},
                                 n_resamples=200)
    assert out.loc["old", ["embedder", "chunker", "difference"]].tolist() == pytest.approx([40.0, 20.0, 20.0])
    assert out.loc["old", "verdict"] == "embedder ahead"


def _facts(**changes):
    from chunkwise.evaluation.robustness import Robustness, SpecResult
    from chunkwise.experiments.whatmatters import Facts

    effects = pd.DataFrame([
        {"factor": "chunker", "within": "dense", "contrast": 0.052, "low": 0.031, "high": 0.074, "range": 0.06,
         "worst": "Kamradt", "best": "Cluster 200", "note": ""},
        {"factor": "embedder", "within": "dense", "contrast": 0.081, "low": 0.06, "high": 0.10, "range": 0.081,
         "note": ""},
        {"factor": "embedder", "within": "bm25", "contrast": 0.0, "low": 0.0, "high": 0.0, "range": 0.0,
         "note": "no question moves with the embedder here"},
        {"factor": "retriever", "within": "pooled", "contrast": 0.034, "low": 0.02, "high": 0.05, "range": 0.04,
         "note": ""}])
    spec = SpecResult("primary", 2.9, 0.4, 5.3, "embedder ahead", 472, 2.5)
    alts = (SpecResult("IoU instead of recall", -1.0, -3.0, 1.0, "cannot tell", 472, 2.5),
            SpecResult("hybrid retrieval", 2.0, 0.1, 4.0, "embedder ahead", 472, 2.5))
    rob = Robustness("fragile", spec, alts, (("IoU instead of recall", "cannot tell"),), 2.0, "recall points", ())
    old = pd.DataFrame({"range": [0.319, 0.089]}, index=pd.Index(["k", "chunker"], name="factor"))
    steps = pd.DataFrame({"embedder": [3.4, 8.1], "chunker": [8.9, 5.2], "difference": [4.0, 2.9],
                          "low": [0.8, 0.4], "high": [7.4, 5.3], "verdict": ["embedder ahead"] * 2},
                         index=pd.Index(["each runtime's own, k = 5", "truncate at the window, 512 tokens"]))
    spread = pd.DataFrame([{"factor": "chunker", "within": "dense", "low_corpus": "chatlogs", "low": 0.01,
                            "high_corpus": "finance", "high": 0.12}])
    base = dict(budget=512, policy="truncate at the window", effects=effects, robustness=rob, old_ranges=old,
                steps=steps, corpus_spread=spread, transfer={"n_pairs": 15, "n_clear": 3, "n_reverses": 1},
                corpora=["state_of_the_union", "chatlogs", "wikitexts", "finance", "pubmed"], n_questions=472,
                n_chunkers=6, n_embedders=2, retrievers=["dense", "bm25", "hybrid"], budgets=[256, 512, 1024, 2048],
                matched="cannot tell")
    base.update(changes)
    return Facts(**base)


def test_chapter_answer_from_its_facts():
    from chunkwise.answerbox import MAX_LEAD_WORDS, visible_words
    from chunkwise.experiments.whatmatters import chapter_answer

    lead, details = _split(chapter_answer(_facts()))
    assert lead == ("**At 512 retrieved tokens, each model truncated at its window: embedder 8.1 [6.0, 10.0], "
                    "chunker 5.2 [3.1, 7.4], retriever 3.4 [2.0, 5.0] recall points.** Embedder versus chunker "
                    "(dense): **embedder ahead** (fragile: 1 of 2 declared alternatives disagree). Read by k, k's "
                    "31.9 points measure how much text is read.")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    for text in ("embedder (bm25) 0.0 [0.0, 0.0] (no question moves with the embedder here)",
                 "chunker (dense) 5.2 [3.1, 7.4] (Kamradt to Cluster 200)",
                 "chunker (dense) from 1.0 (chatlogs) to 12.0 (finance)",
                 "each runtime's own, k = 5: embedder 3.4, chunker 8.9, difference +4.0 [+0.8, +7.4] (embedder ahead)",
                 "The earlier reading's ranges (each runtime's own policy, k a factor): k 31.9; chunker 8.9.",
                 "3 of 15 chunker pairs have a chunker x embedder contrast whose interval excludes 0, 1 reverse",
                 "(the small grid): **cannot tell**",
                 "pooled over five Chroma corpora (state_of_the_union, chatlogs", "472 questions), six chunkers, two embedders, three retrievers, "
                 "budgets 256, 512, 1,024, 2,048 tokens",
                 "**Robustness of the embedder-versus-chunker verdict** (embedder ahead): fragile"):
        assert text in details, text
    # the factors are ordered by their contrast, whatever their order in the table
    eff = _facts().effects.copy()
    eff.loc[0, ["contrast", "low", "high"]] = [0.2, 0.15, 0.25]
    lead = _split(chapter_answer(_facts(effects=eff)))[0]
    assert "at its window: chunker 20.0 [15.0, 25.0], embedder" in lead
    with pytest.raises(ValueError, match="no retriever row within 'pooled'"):
        chapter_answer(_facts(effects=eff.iloc[:3]))


def test_chapter_answer_names_the_chunkers_that_fit_every_window():
    from chunkwise.answerbox import MAX_LEAD_WORDS, visible_words
    from chunkwise.experiments.whatmatters import chapter_answer

    fit = {"chunkers": ["TokenText 200", "Recursive 200", "Cluster 200", "Sentence 200"], "embedder": 6.9,
           "chunker": 8.8, "difference": -1.9, "low": -4.4, "high": 0.6, "verdict": "cannot tell"}
    lead, details = _split(chapter_answer(_facts(fitting=fit)))
    assert ("(fragile: 1 of 2 declared alternatives disagree). Without the two chunkers that outgrow the "
            "windows: **cannot tell**. Read by k") in lead
    assert visible_words(lead) <= MAX_LEAD_WORDS
    same = _split(chapter_answer(_facts(fitting={**fit, "verdict": "embedder ahead"})))[0]
    assert "Without the two chunkers that outgrow the windows: the same. Read" in same
    # the longest robustness class: the k sentence gives way, the lead stays within its limit
    from chunkwise.evaluation.robustness import Robustness, SpecResult

    longest = Robustness("no effect larger than delta", SpecResult("primary", 0.1, -1.0, 1.0, "embedder ahead", 472,
                                                                   2.5),
                         tuple(SpecResult(f"a{i}", 0.0, -1.0, 1.0, "cannot tell", 472, 2.5) for i in range(12)),
                         (), 12.5, "recall points", ("x",) * 11)
    lead = _split(chapter_answer(_facts(fitting=fit, robustness=longest)))[0]
    assert visible_words(lead) <= MAX_LEAD_WORDS and "Without the two chunkers" in lead
    assert ("On the four chunkers whose chunks fit every window (TokenText 200, Recursive 200, Cluster 200, "
            "Sentence 200), embedder 6.9, chunker 8.8, difference -1.9 [-4.4, +0.6] (cannot tell). Does") in details
    assert "whose chunks fit every window" not in _split(chapter_answer(_facts()))[1]


def test_chapter_answer_on_one_corpus_has_no_spread_sentence():
    from chunkwise.experiments.whatmatters import chapter_answer

    details = _split(chapter_answer(_facts(corpora=["state_of_the_union"], n_questions=76)))[1]
    assert "Per corpus" not in details
    assert "pooled over one Chroma corpus (state_of_the_union; 76 questions)" in details


def test_run_arms_cuts_the_same_chunks_in_every_arm_with_the_runtimes_own_embedder(tmp_path, monkeypatch):
    """Both policy arms on a real model (all-MiniLM-L6-v2): Kamradt's spans in each arm are those the
    unwrapped embedder cuts, seeded into the arms' own span folder; the shared span cache gets no file
    under a wrapper's name."""
    from chunkwise.chunkers.specs import chunk_corpus, parse_spec
    from chunkwise.embeddings import embedder_pair
    from chunkwise.evaluation.grid import GridConfig
    from chunkwise.experiments.whatmatters import POLICY_ARMS, run_arms, same_chunks

    sentences = [f"Sentence {i} talks about {'gardens' if i < 8 else 'taxes'} and {'roses' if i < 8 else 'audits'}."
                 for i in range(16)]
    docs = {"d.txt": " ".join(sentences)}
    start = docs["d.txt"].index("Sentence 9 ")
    qs = pd.DataFrame({"question": ["What about taxes?"], "corpus_id": ["d.txt"],
                       "references": [[(start, start + len(sentences[9]))]], "question_id": ["Q1"]})
    cfg = GridConfig(chunkers=["TokenText:20", "Kamradt"], retrievers=["dense"], top_k=[1, 2],
                     embedders=["all-MiniLM-L6-v2"])
    cache = tmp_path / "emb.sqlite"
    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "root"))
    runs = run_arms(docs, qs, cfg, cache_dir=cache, span_dir=tmp_path / "arms")
    assert list(runs) == list(POLICY_ARMS)
    assert same_chunks({a: r["result"] for a, r in runs.items()})
    base = embedder_pair("all-MiniLM-L6-v2", cache)[0]
    own = chunk_corpus(parse_spec("Kamradt"), "d.txt", docs["d.txt"], base, None, tmp_path / "own")
    got = [tuple(map(int, x)) for x in runs["mean of windows"]["result"].chunks["Kamradt"]["d.txt"]]
    assert got == [(c.start, c.end) for c in own] and len(got) >= 2
    names = {p.name for p in (tmp_path / "arms").glob("*Kamradt*.json")}
    assert len(names) == 2  # one Kamradt file per arm (the wrappers' names differ)
    own_file = list((tmp_path / "own").glob("*Kamradt*.json"))[0].name
    assert own_file not in names  # the unwrapped cut keeps its own key
    # the shared span cache holds the unwrapped cut only, never a file under a wrapper's name
    assert [p.name for p in (tmp_path / "root" / "spans").glob("*.json")] == [own_file]
    assert runs["truncate at the window"]["axis"]["all-MiniLM-L6-v2"][0].name.endswith("|long=truncate@256")
    with pytest.raises(ValueError, match="needs a GridConfig with embedders"):
        run_arms(docs, qs, GridConfig(chunkers=["TokenText:20"], retrievers=["dense"]))


def test_the_reranker_level_is_a_fourth_retriever_only_when_a_model_is_named():
    from chunkwise.experiments import whatmatters as W

    assert W.reranker_level(["dense", "bm25", "hybrid"]) == (["dense", "bm25", "hybrid"], [])
    levels, rankers = W.reranker_level(["dense", "bm25", "hybrid"], "org/some-reranker", candidates=20)
    assert levels == ["dense", "bm25", "hybrid", "rerank"]
    assert [k.name for k in rankers] == ["rerank"] and rankers[0].uses == ("hybrid",)
    assert "org/some-reranker" in rankers[0].summary
    with pytest.raises(ValueError, match="name its cross-encoder with reranker="):
        W.reranker_level(["dense", "rerank"], "org/some-reranker")
