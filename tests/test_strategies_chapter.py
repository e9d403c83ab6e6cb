"""Tests for chunkwise.experiments.strategies (chapter 5's tables) and the cache-only LLM client."""

from __future__ import annotations

import pandas as pd
import pytest

from chunkwise.evaluation.grid import GridConfig, run_grid
from chunkwise.experiments import strategies as S

from fakes import GRID_DOCS, WordEmbedder, questions

DOC = "One two. Three four. Five six."  # sentences (0,8) (9,20) (21,30)


def test_boundary_stats_counts_cuts_inside_sentences_by_hand():
    out = S.boundary_stats(
        {"d": DOC},
        {
            "clean": {"d": [(0, 8), (9, 30)]},        # cut at a sentence end
            "mid": {"d": [(0, 5), (5, 30)]},          # cut inside "One two."
            "before_stop": {"d": [(0, 7), (7, 30)]},  # cut just before the full stop (separator kept at start)
        },
    )
    assert out.loc["clean", "mid_sentence_cuts"] == 0.0
    assert out.loc["mid", "mid_sentence_cuts"] == 1.0
    assert out.loc["before_stop", "mid_sentence_cuts"] == 0.0
    # "One two." = One / two / . (3 cl100k_base tokens); "Three four. Five six." = 6 tokens
    assert out.loc["clean", "n_chunks"] == 2 and out.loc["clean", "max_tokens"] == 6
    assert out.loc["clean", "mean_tokens"] == 4.5 and out.loc["clean", "cv_tokens"] == pytest.approx(0.33)
    with pytest.raises(ValueError, match="not among the documents"):
        S.boundary_stats({"d": DOC}, {"x": {"e": [(0, 1)]}})


def test_ci_words_follow_the_interval():
    assert S.ci_words(0.5, 2.0, "recall", "R").startswith("recall higher than R")
    assert S.ci_words(-2.0, -0.1, "recall", "R").startswith("recall lower than R")
    assert S.ci_words(-0.1, 2.0, "recall", "R").startswith("recall not distinguishable from R")


def test_cold_costs_sum_the_coldest_rows(tmp_path):
    p = tmp_path / "cold.csv"
    p.write_text(
        "spec,corpus,index_seconds,n_embedded,late_windows,late_encoder_tokens,n_chunks,load_1min,cpus,measured_utc\n"
        "Hierarchical:200:800,a,10.0,24,0,0,49,12.0,2,x\n"
        "Hierarchical:200:800,a,30.0,49,0,0,49,13.0,2,x\n"   # the fresh-cache rerun wins
        "Hierarchical:200:800,b,5.0,10,0,0,10,14.0,2,x\n"
        "Recursive:200,a,0.0,0,0,0,45,12.0,2,x\n"            # warm: not a cold cost
        "Late:200,a,20.0,0,65,16390,45,12.8,2,x\n"           # late: no embedder texts but encoder windows
        "Late:200,z,99.0,0,65,16390,45,12.8,2,x\n"           # corpus not asked for
    )
    c = S.cold_costs(p, ["a", "b"])
    assert c.loc["Hierarchical:200:800:0.5", "cold_seconds"] == 35.0
    assert c.loc["Hierarchical:200:800:0.5", "corpora_measured"] == 2
    assert c.loc["Hierarchical:200:800:0.5", "max_load"] == 14.0
    assert c.loc["Late:200", "late_windows"] == 65 and c.loc["Late:200", "cold_seconds"] == 20.0
    assert "Recursive:200" not in c.index
    assert S.cold_costs(tmp_path / "missing.csv", ["a"]).empty


def test_cache_only_client_refuses_misses(tmp_path):
    from chunkwise.llm import LLMClient

    llm = S.cache_only(LLMClient(base_url="http://127.0.0.1:9/v1", model="m", api_key="k", cache=str(tmp_path / "c.sqlite")))
    with pytest.raises(S.NotCachedError, match="not in the LLM cache"):
        llm.chat("hello", max_tokens=5)
    status = S.runnable_from_cache(["Recursive:2", "Contextual:2"], GRID_DOCS, llm, tmp_path / "spans")
    assert status == {"Contextual:2": "not cached for a.txt, b.txt"}  # every document missing; specs without an LLM are left out
    assert S.runnable_from_cache(["Contextual:2"], GRID_DOCS, None) == {"Contextual:2": "no LLM client"}
    with pytest.raises(ValueError, match="needs a chunkwise.llm.LLMClient"):
        S.cache_only(object())


def test_strategy_table_and_guide_check(tmp_path):
    cfg = GridConfig(chunkers=["Recursive:2", "TokenText:2"], retrievers=["dense"], top_k=[1])
    res = run_grid(GRID_DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    t = S.strategy_table(res, "Recursive 2", "dense", 1, n_resamples=200)
    assert list(t.index) == ["Recursive 2", "TokenText 2"]
    assert t.loc["Recursive 2", "recall_ci"] == "baseline"
    # paired difference of the means, in points
    assert t.loc["TokenText 2", "recall_diff"] == pytest.approx(t.loc["TokenText 2", "recall"] - t.loc["Recursive 2", "recall"], abs=0.11)
    with pytest.raises(ValueError, match="baseline 'Nope'"):
        S.strategy_table(res, "Nope", "dense", 1)
    # a chunker that scores exactly as the baseline on every question: "same scores", not "[+0.0, +0.0]"
    import dataclasses

    pq = res.per_question.copy()
    cell = {c: res.table.set_index("chunker").loc[c, "cell"] for c in ("Recursive 2", "TokenText 2")}
    for m in ("recall", "precision_omega"):
        pq.loc[pq["cell"] == cell["TokenText 2"], m] = pq.loc[pq["cell"] == cell["Recursive 2"], m].to_numpy()
    same = S.strategy_table(dataclasses.replace(res, per_question=pq), "Recursive 2", "dense", 1, n_resamples=200)
    assert list(same["recall_ci"]) == ["baseline", "same scores"]
    first = pq.index[pq["cell"] == cell["TokenText 2"]][0]
    pq.loc[first, "recall"] = 1.0 - pq.loc[first, "recall"]  # one question differs: an interval again
    other = S.strategy_table(dataclasses.replace(res, per_question=pq), "Recursive 2", "dense", 1, n_resamples=200)
    assert other.loc["TokenText 2", "recall_ci"].startswith("[")
    shapes = S.boundary_stats(GRID_DOCS, res.chunks)
    check = S.guide_check(t, shapes, pd.DataFrame(columns=["cold_seconds"]),
                          {"Recursive:2": "Recursive 2", "TokenText:2": "TokenText 2"}, "Recursive 2", {"LLM": "not cached"})
    assert check.loc["LLM-based", "measured_cost"] == "not run: not cached"
    assert check.loc["Sentence-based", "retrieval"] == "not run"


def _table(rows):
    """A strategy_table-shaped frame: label -> (recall, diff, low, high, po, po_diff, po_low, po_high, n_chunks, llm)."""
    cols = ["recall", "recall_diff", "recall_low", "recall_high", "precision_omega", "precision_omega_diff",
            "precision_omega_low", "precision_omega_high", "n_chunks", "llm_calls"]
    t = pd.DataFrame.from_dict(rows, orient="index", columns=cols)
    t["llm_seconds"] = 60.0 * t["llm_calls"]
    t["embedded_tokens"] = 1000
    for m in ("recall", "precision_omega"):
        t[f"{m}_ci"] = [f"[{lo:+.1f}, {hi:+.1f}]" for lo, hi in zip(t[f"{m}_low"], t[f"{m}_high"])]
    return t


def test_chapter_answer_is_built_from_the_tables_and_grows_with_their_rows():
    base = (95.9, 0, 0, 0, 23.2, 0, 0, 0, 104, 0)
    all_ = _table({"R": base, "T": (91.5, -4.4, -8.5, -0.3, 20.2, -3.0, -4.6, -1.6, 92, 0),
                   "S": (95.3, -0.7, -4.8, 3.3, 22.4, -0.8, -1.8, 0.1, 101, 0),
                   "C": (90.0, -5.9, -10.0, -2.3, 30.5, 7.2, 5.1, 9.5, 174, 0)})
    small = _table({"R": base, "K": (100.0, 6.9, -0.1, 18.8, 10.8, -10.1, -16.8, -2.7, 10, 0),
                    "X": (100.0, 6.9, 0.0, 18.9, 20.9, 0.0, 0.0, 0.0, 15, 15)})
    cold = pd.DataFrame({"cold_seconds": [117.0, 294.0, 77.0], "corpora_measured": [3, 3, 3]}, index=["R", "K", "T"])
    text = S.chapter_answer(all_, "R", where_all="2 corpora", n_questions=132, table_small=small,
                            small_labels=["K", "X"], where_small="the first 100 characters of a", n_questions_small=20,
                            cold_by_label=cold, not_run={"LLM": "not cached for a"})
    assert text.startswith(
        "On 2 corpora (132 questions; dense retrieval, 5 chunks per question), the baseline, R, recalls 95.9% of the "
        "evidence at a precision_Ω of 23.2%: none has a higher recall beyond the noise; T (-4.4 points [-8.5, -0.3]) "
        "and C (-5.9 points [-10.0, -2.3]) have a lower recall; the other one is within the noise. In precision_Ω, "
        "C (+7.2 points [+5.1, +9.5]) has a higher precision_Ω; T (-3.0 points [-4.6, -1.6]) has a lower "
        "precision_Ω; the other one is within the noise. Of the strategies without an LLM, K cost the most to index "
        "from empty caches (294 s on 3 "
        "corpora, 2.5x R's 117 s); X made 15 LLM calls for 15 chunks (900 s of model time). ")
    assert text.endswith(
        "On the first 100 characters of a (20 questions), where K and X ran, K's precision_Ω (-10.1 points "
        "[-16.8, -2.7]) is lower than R's, and every other difference is within the noise; the LLM-based strategy "
        "did not run (not cached for a).")
    # both metrics beyond the noise: one clause per strategy, worded by direction
    small.loc["K", ["recall_low", "recall_high", "recall_diff"]] = [-22.3, -7.6, -15.0]
    text = S.chapter_answer(all_, "R", where_all="2 corpora", n_questions=132, table_small=small,
                            small_labels=["K", "X"], where_small="a", n_questions_small=132)
    assert text.endswith("where K and X ran, K's recall (-15.0 points [-22.3, -7.6]) and precision_Ω (-10.1 points "
                         "[-16.8, -2.7]) are lower than R's, and every other difference is within the noise.")
    small.loc["K", ["recall_low", "recall_high", "recall_diff"]] = [7.6, 22.3, 15.0]
    text = S.chapter_answer(all_, "R", where_all="2 corpora", n_questions=132, table_small=small,
                            small_labels=["K", "X"], where_small="a", n_questions_small=132)
    assert "K's recall is higher (+15.0 points [+7.6, +22.3]) and its precision_Ω is lower (-10.1 points" in text
    # a row added later (e.g. the LLM chunker once cached) enters every sentence it belongs to
    grown = pd.concat([all_, _table({"L": (97.0, 1.1, 0.2, 2.0, 25.0, 1.8, -0.2, 3.9, 60, 120)})])
    text = S.chapter_answer(grown, "R", where_all="5 corpora", n_questions=472)
    assert "L (+1.1 points [+0.2, +2.0]) has a higher recall; T" in text and "L made 120 LLM calls" in text
    assert "did not run" not in text and "where" not in text
    # a row of both tables (the LLM chunker on all corpora and on the small ones): its cost is stated once,
    # the main run's
    small_l = pd.concat([small, _table({"L": (99.0, 2.0, 0.5, 3.5, 26.0, 0.0, -1.0, 1.0, 20, 40)})])
    text = S.chapter_answer(grown, "R", where_all="5 corpora", n_questions=472, table_small=small_l,
                            small_labels=["K", "X", "L"], where_small="a", n_questions_small=132)
    assert text.count("L made") == 1 and "L made 120 LLM calls" in text
    assert "X made 15 LLM calls" in text  # a row of the small table only keeps its cost
    assert S.compare_to_baseline(all_.loc[["R", "S"]], "R", "recall", "recall") == (
        "the other strategy is within the noise of it")


def test_strategy_notes_list_each_row_with_its_interval_and_costs():
    t = _table({"R": (95.9, 0, 0, 0, 23.2, 0, 0, 0, 104, 0), "X": (100.0, 6.9, 0.0, 18.9, 20.9, 0.0, 0.0, 0.0, 15, 15)})
    t.loc["R", ["recall_ci", "precision_omega_ci"]] = "baseline"
    cold = pd.DataFrame({"cold_seconds": [116.7], "corpora_measured": [3]}, index=["R"])
    assert S.strategy_notes(t, "2 corpora", cold) == [
        ("- **R** [2 corpora]: recall 95.9% (baseline), precision_Ω 23.2% (baseline); 104 chunks, 1,000 tokens "
         "embedded, 117 s cold (3 corpora)"),
        ("- **X** [2 corpora]: recall 100.0% ([+0.0, +18.9]), precision_Ω 20.9% ([+0.0, +0.0]); 15 chunks, 1,000 "
         "tokens embedded, 15 LLM calls (900 s)"),
    ]


def test_findings_results_of_chapter_5_hand_values():
    import pandas as pd

    from chunkwise.experiments import strategies as S

    table = pd.DataFrame({"recall_diff": [0.0, 3.1], "recall_low": [0.0, 0.4], "recall_high": [0.0, 5.9]},
                         index=["Recursive 200", "Contextual 200"])
    labels = {"Recursive:200": "Recursive 200", "Contextual:200": "Contextual 200"}
    cold = pd.DataFrame({"cold_seconds": [10.0, 12.0, 50.0, 40.0]},
                        index=["TokenText:200", "Recursive:200", "Cluster:200", "Late:200"])
    got = S.findings_results(table, cold, labels, "Recursive 200", 120, "state_of_the_union, chatlogs")
    assert got["contextual_vs_recursive"] == "contextual ahead"
    assert got["contextual_vs_recursive_ci"] == "+3.1 [+0.4, +5.9]"
    assert (got["contextual_n_questions"], got["contextual_corpora"]) == (120, "state_of_the_union, chatlogs")
    # low tier (10, 12) below medium tier (40, 50): the guide's order holds
    assert got["cost_order_agrees"] == "yes"
    assert got["cost_order"].startswith("Fixed-size 10 s (lowest) < Recursive character 12 s (low) < Late chunking 40 s")
    assert got["cost_closest_pair"].startswith("Recursive character (low) 12.0 s against Late chunking (medium) 40.0 s, "
                                               "a margin of +28.0 s")
    # the order holds, but one pair lies within the plan's margin: one timing cannot order them
    assert S.findings_results(table, cold, labels, "Recursive 200", 1, "x",
                              margin_seconds=30.0)["cost_order_agrees"] == "cannot tell"
    cold.loc["Recursive:200", "cold_seconds"] = 45.0  # a low-cost strategy above a medium one
    assert S.findings_results(table, cold, labels, "Recursive 200", 1, "x")["cost_order_agrees"] == "no"
    # ... by 5 s: within a 10-s margin that cannot tell either
    assert S.findings_results(table, cold, labels, "Recursive 200", 1, "x",
                              margin_seconds=10.0)["cost_order_agrees"] == "cannot tell"
    # the LLM chunker has no cold row: its model seconds in the small table place it (highest tier)
    llm_table = pd.concat([table, pd.DataFrame({"recall_diff": [-7.0], "recall_low": [-9.0], "recall_high": [-5.0],
                                                "llm_seconds": [600.0]}, index=["LLM"])])
    cold.loc["Recursive:200", "cold_seconds"] = 12.0
    got = S.findings_results(llm_table, cold, {**labels, "LLM": "LLM"}, "Recursive 200", 1, "x")
    assert got["cost_order"].endswith("Semantic (cluster) 50 s (medium) < LLM-based (model time alone) 600 s (highest)")
    assert got["cost_order_agrees"] == "yes"
    table.loc["Contextual 200", ["recall_low", "recall_high"]] = [-1.0, 5.9]
    assert S.findings_results(table, cold, labels, "Recursive 200", 1, "x")["contextual_vs_recursive"] == "cannot tell"
    assert S.findings_results(table.drop(index="Contextual 200"), cold, labels, "Recursive 200", 1,
                              "x")["contextual_vs_recursive"] == "not run"


def test_llm_vs_report_puts_our_cost_beside_the_published_gpt4o_row():
    from pathlib import Path

    report = pd.read_csv(Path(__file__).resolve().parents[1] / "data" / "chroma" / "chroma_report_results.csv")
    runs = pd.DataFrame(
        {"pieces": [40, 10, 50], "windows": [3, 1, 4], "repairs": [1, 0, 1], "windows_without_split": [0, 1, 1],
         "chunks": [5, 1, 6], "mean_chunk_tokens": [100.0, 160.0, 110.0], "llm_seconds": [30.0, 12.0, 42.0],
         "llm_prompt_tokens": [3000, 900, 3900], "llm_completion_tokens": [40, 5, 45]},
        index=["a", "b", "all"])
    t = S.llm_vs_report(runs, 79.34, 17.56, report, "ours")
    assert t["ours"].tolist() == ["110", "79.3", "17.6", "5", "1", "1", "3,900", "45", "42"]
    gpt = t.columns[1]
    assert gpt == "Chroma's report (GPT-4o, text-embedding-3-large, five corpora)"
    assert t[gpt].tolist()[:3] == ["240", "91.9", "19.9"]   # the report's published row
    assert set(t[gpt].tolist()[3:]) == {"not given"}
    with pytest.raises(ValueError, match="no 'all' row"):
        S.llm_vs_report(runs.drop(index="all"), 1.0, 1.0, report, "ours")
    with pytest.raises(ValueError, match="GPT-4o"):
        S.llm_vs_report(runs, 1.0, 1.0, report[report.chunker != "LLM (GPT-4o)"], "ours")
