"""The chunk-size sweep's measures (chunkwise.crud.chunk_size), by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

pytest.importorskip("jieba")

from chunkwise.crud import chunk_size as cs  # noqa: E402
from chunkwise.tokens import count_tokens  # noqa: E402


def test_context_recall_is_multiset_recall_of_the_gold_tokens():
    # gold tokens {red: 2, apple: 1}; contexts hold red once and apple once -> 2 / 3
    assert cs.context_recall(["a red car", "green apple"], "red apple red") == pytest.approx(2 / 3)
    assert cs.context_recall(["red red apple"], "red apple red") == 1.0
    assert cs.context_recall([], "red") == 0.0
    assert math.isnan(cs.context_recall(["red"], "   "))
    with pytest.raises(TypeError, match="gold must be a str"):
        cs.context_recall(["x"], None)
    with pytest.raises(TypeError, match="contexts must be strings"):
        cs.context_recall(["x", 3], "x")


def _sweep():
    chunks = {"dense": {"d#0": "red apple", "d#1": "blue sky"},
              "dense@512": {"d#0": "red apple and blue sky over the green hill"}}
    answers = pd.DataFrame([
        {"ID": "1", "method": "dense", "retrieved_ids": ["d#1"], "gold_answer": "red apple"},
        {"ID": "2", "method": "dense", "retrieved_ids": ["d#0", "d#1"], "gold_answer": "blue sky"},
        {"ID": "1", "method": "dense@512", "retrieved_ids": ["d#0"], "gold_answer": "red apple"},
        {"ID": "2", "method": "dense@512", "retrieved_ids": ["d#0"], "gold_answer": "blue sky"},
    ])
    scores = pd.DataFrame({"ID": ["1", "2", "1", "2"], "method": ["dense", "dense", "dense@512", "dense@512"],
                           "quest_avg_f1": [0.2, 0.8, 0.5, float("nan")]})
    return answers, scores, chunks


def test_item_table_joins_recall_tokens_and_the_answer_metric():
    answers, scores, chunks = _sweep()
    t = cs.item_table(answers, scores, chunks).set_index(["method", "ID"])
    assert t.loc[("dense", "1"), "context_recall"] == 0.0          # "blue sky" holds neither word
    assert t.loc[("dense", "2"), "context_recall"] == 1.0
    assert t.loc[("dense@512", "1"), "context_recall"] == 1.0
    long = count_tokens("red apple and blue sky over the green hill")
    assert t.loc[("dense@512", "2"), "retrieved_tokens"] == long
    assert t.loc[("dense", "2"), "retrieved_tokens"] == count_tokens("red apple") + count_tokens("blue sky")
    assert t.loc[("dense@512", "1"), "answer_per_1k_tokens"] == pytest.approx(0.5 / long * 1000)
    assert math.isnan(t.loc[("dense@512", "2"), "answer"])         # not scored: NaN, never 0
    with pytest.raises(ValueError, match="no chunk texts for method 'dense@512'"):
        cs.item_table(answers, scores, {"dense": chunks["dense"]})
    with pytest.raises(ValueError, match="is not among its chunks"):
        cs.item_table(answers, scores, {"dense": chunks["dense"], "dense@512": {"x": "y"}})
    with pytest.raises(ValueError, match="scores must have ID, method and 'bleu'"):
        cs.item_table(answers, scores, chunks, metric="bleu")


def _table(recall, answer, tokens):
    rows = []
    for method in recall:
        for i in range(6):
            rows.append({"method": method, "ID": str(i), "context_recall": recall[method],
                         "retrieved_tokens": tokens[method], "answer": answer[method],
                         "answer_per_1k_tokens": answer[method] / tokens[method] * 1000})
    return pd.DataFrame(rows)


def test_rank_agreement_on_constant_items_is_exact():
    t = _table({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 0.3, "b": 0.4, "c": 0.9}, {"a": 1, "b": 1, "c": 1})
    r = cs.rank_agreement(t, n_resamples=200)
    assert (r["rho"], r["low"], r["high"], r["n_configs"], r["n_items"]) == (1.0, 1.0, 1.0, 3, 6)
    t2 = _table({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 0.9, "b": 0.4, "c": 0.3}, {"a": 1, "b": 1, "c": 1})
    assert cs.rank_agreement(t2, n_resamples=200)["rho"] == -1.0
    with pytest.raises(ValueError, match="at least 3 configurations"):
        cs.rank_agreement(t[t.method != "c"])


def test_dilution_is_judged_on_the_answers_not_the_score_per_token():
    # recall 50% -> 80%; answer 0.5 over 100 tokens (500 points per 1k) -> 0.6 over 400 (150):
    # the per-token score falls by construction, the answers rise, so the claim is contradicted
    t = _table({"dense": 0.5, "dense@512": 0.8}, {"dense": 0.5, "dense@512": 0.6},
               {"dense": 100, "dense@512": 400})
    d = cs.dilution_test(t, "dense", "dense@512", n_resamples=500)
    assert d["recall_diff"] == pytest.approx((30.0, 30.0, 30.0))
    assert d["per_token_diff"] == pytest.approx((-350.0, -350.0, -350.0))
    assert d["answer_diff"] == pytest.approx((10.0, 10.0, 10.0))
    assert d["tokens_ratio"] == 4.0 and d["verdict"] == "contradicts"
    # the answers fall by 10 points while recall rises: supports
    t3 = _table({"dense": 0.5, "dense@512": 0.8}, {"dense": 0.5, "dense@512": 0.4},
                {"dense": 100, "dense@512": 400})
    assert cs.dilution_test(t3, "dense", "dense@512", n_resamples=500)["verdict"] == "supports"
    # the answers hold level: no dilution larger than the margin
    t4 = _table({"dense": 0.5, "dense@512": 0.8}, {"dense": 0.5, "dense@512": 0.5},
                {"dense": 100, "dense@512": 400})
    assert cs.dilution_test(t4, "dense", "dense@512", n_resamples=500, delta=5.0)["verdict"] == \
        "no dilution larger than 5 points"
    # recall down: the claim's premise fails -> contradicts
    t2 = _table({"dense": 0.5, "dense@512": 0.4}, {"dense": 0.5, "dense@512": 0.6},
                {"dense": 100, "dense@512": 400})
    assert cs.dilution_test(t2, "dense", "dense@512", n_resamples=500)["verdict"] == "contradicts"
    with pytest.raises(ValueError, match="configuration 'dense@64' is not in the table"):
        cs.dilution_test(t, "dense@64", "dense@512")


def test_dilution_cannot_tell_when_the_recall_interval_reaches_zero():
    t = _table({"dense": 0.5, "dense@512": 0.5}, {"dense": 0.5, "dense@512": 0.5}, {"dense": 100, "dense@512": 100})
    bump = [0.1, -0.1] * 3
    t.loc[t.method == "dense@512", "context_recall"] = [0.5 + b for b in bump]
    d = cs.dilution_test(t, "dense", "dense@512", n_resamples=2000)
    assert d["recall_diff"][0] == pytest.approx(0.0, abs=1e-9)
    assert d["recall_diff"][1] < 0 < d["recall_diff"][2]
    assert d["per_token_diff"] == pytest.approx((0.0, 0.0, 0.0))
    assert d["verdict"] == "no dilution larger than 5 points"  # the answers held exactly level
    t.loc[t.method == "dense@512", "answer"] = [0.5 + 3 * b for b in bump]  # answers +-30 points
    assert cs.dilution_test(t, "dense", "dense@512", n_resamples=2000)["verdict"] == "cannot tell"


def test_bad_inputs_get_clear_errors_not_silent_numbers():
    with pytest.raises(TypeError, match="wrap it in a list"):
        cs.context_recall("red apple", "red")
    assert cs.context_recall((c for c in ["red apple"]), "red") == 1.0   # a generator is read once
    t = _table({"s": 0.2, "l": 0.5}, {"s": 0.5, "l": 0.4}, {"s": 100, "l": 400})
    t.loc[(t.method == "s") & (t.ID != "0"), ["answer", "answer_per_1k_tokens"]] = float("nan")
    with pytest.raises(ValueError, match="answer_per_1k_tokens, l against s: a paired interval needs at least 2"):
        cs.dilution_test(t, "s", "l", n_resamples=100)
    three = _table({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 0.3, "b": 0.4, "c": float("nan")}, {"a": 1, "b": 1, "c": 1})
    with pytest.raises(ValueError, match=r"configuration\(s\) \['c'\] have no context_recall or no answer"):
        cs.rank_agreement(three)
    flat = _table({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 0.4, "b": 0.4, "c": 0.4}, {"a": 1, "b": 1, "c": 1})
    with pytest.raises(ValueError, match="same mean answer: a rank correlation is undefined"):
        cs.rank_agreement(flat)
    with pytest.raises(ValueError, match="repeats item '0' of configuration 'a'"):
        cs.rank_agreement(pd.concat([flat, flat.iloc[:1]]))
    with pytest.raises(ValueError, match="confidence must be a number in \\(0, 1\\)"):
        cs.rank_agreement(flat, confidence=95)
    answers, scores, chunks = _sweep()
    answers.loc[0, "retrieved_ids"] = "['d#1']"
    with pytest.raises(TypeError, match="ast.literal_eval"):
        cs.item_table(answers, scores, chunks)


def test_rank_agreement_uses_only_items_every_configuration_has():
    t = _table({"a": 0.1, "b": 0.2, "c": 0.3}, {"a": 0.3, "b": 0.4, "c": 0.9}, {"a": 1, "b": 1, "c": 1})
    # item 0 of c: recall 0.95 would make c's mean jump; it has no answer, so item 0 leaves every configuration
    t.loc[(t.method == "c") & (t.ID == "0"), ["context_recall", "answer"]] = [0.95, float("nan")]
    r = cs.rank_agreement(t, n_resamples=100)
    assert r["n_items"] == 5 and r["means"].loc["c", "context_recall"] == pytest.approx(0.3)


def _tiny_sweep(top_k=1, sizes=(16, 64)):
    from types import SimpleNamespace

    from fakes import FakeChatModel

    pool = SimpleNamespace(
        texts=["上海今天下雨。上海明天也下雨。市民出门请带伞。", "北京今天很热。北京明天更热。注意防暑降温。"],
        ids=["d", "e"])
    items = [{"ID": "i1", "task": "questanswer_1doc", "questions": "上海下雨吗？", "answers": "上海下雨"},
             {"ID": "i2", "task": "questanswer_1doc", "questions": "北京热吗？", "answers": "北京很热"}]
    llm = FakeChatModel("<response>上海下雨</response>")
    sweep = cs.run_sweep(items, pool, llm, list(sizes), retrievers=("bm25",), top_k=top_k, metrics=("rouge_l",))
    return sweep, pool, llm


def test_run_sweep_answers_every_item_under_every_size_and_scores_by_hand():
    from chunkwise.crud.rag import chunk_articles

    sweep, pool, llm = _tiny_sweep()
    assert list(sweep.configs["method"]) == ["bm25@16", "bm25@64"]
    for size in (16, 64):
        chunks = chunk_articles(pool.texts, pool.ids, chunk_size=size, chunk_overlap=0)
        row = sweep.configs.set_index("method").loc[f"bm25@{size}"]
        assert row["chunks"] == len(chunks) and row["chunk_size_tokens"] == size
        assert sweep.chunk_texts[f"bm25@{size}"] == {c.chunk_id: c.text for c in chunks}
    assert sweep.configs.set_index("method").loc["bm25@16", "chunks"] > 2  # sentences apart at 16 tokens
    assert sweep.configs.set_index("method").loc["bm25@64", "chunks"] == 2  # one chunk per article at 64
    assert len(llm.prompts) == 4 and len(sweep.answers) == 4  # 2 items x 2 sizes, one generation each
    # the answer equals item 1's gold answer and shares no word with item 2's: ROUGE-L 1 and 0
    s = sweep.scores.set_index(["method", "ID"])["rouge_l"]
    assert s[("bm25@16", "i1")] == pytest.approx(1.0) and s[("bm25@64", "i1")] == pytest.approx(1.0)
    assert s[("bm25@16", "i2")] == pytest.approx(0.0) and s[("bm25@64", "i2")] == pytest.approx(0.0)

    table = cs.item_table(sweep.answers, sweep.scores, sweep.chunk_texts, "rouge_l")
    means = cs.sweep_means(sweep, table, ["rouge_l"])
    assert list(means["rouge_l"]) == pytest.approx([50.0, 50.0])
    assert list(means["context_recall"]) == pytest.approx([100.0, 100.0])  # top-1 holds the gold words
    tokens = {(r.method, r.ID): r.retrieved_tokens for r in table.itertuples()}
    whole = count_tokens(pool.texts[0], "cl100k_base")
    assert tokens[("bm25@64", "i1")] == whole  # the whole article is the one chunk at 64 tokens
    assert tokens[("bm25@16", "i1")] < whole

    eff = cs.size_effects(sweep, table, 16, ["rouge_l"], n_resamples=200).set_index("measure")
    assert eff.loc["rouge_l", ["diff", "low", "high"]].tolist() == pytest.approx([0.0, 0.0, 0.0])
    d_tok = (tokens[("bm25@64", "i1")] - tokens[("bm25@16", "i1")]
             + tokens[("bm25@64", "i2")] - tokens[("bm25@16", "i2")]) / 2
    assert eff.loc["retrieved_tokens", "diff"] == pytest.approx(d_tok) and d_tok > 0
    assert eff.loc["rouge_l", "n"] == 2 and eff.loc["rouge_l", "chunk_size_tokens"] == 64


def test_run_sweep_without_scoring_and_its_errors():
    sweep, _, _ = _tiny_sweep(sizes=(16,))
    from types import SimpleNamespace

    from fakes import FakeChatModel

    pool = SimpleNamespace(texts=["上海下雨。"], ids=["d"])
    items = [{"ID": "i1", "task": "questanswer_1doc", "questions": "上海下雨吗？", "answers": "下雨"}]
    llm = FakeChatModel("<response>下雨</response>")
    only = cs.run_sweep(items, pool, llm, [32], retrievers=("bm25",), score=False)
    assert only.scores is None and list(only.answers["method"]) == ["bm25@32"]
    with pytest.raises(ValueError, match="score=True"):
        cs.sweep_means(only, pd.DataFrame())
    for bad, match in [([], "chunk_sizes is empty"), ([8], "at least 16"), ([64, 64], "repeats"),
                       ([64.0], "an int")]:
        with pytest.raises(ValueError, match=match):
            cs.run_sweep(items, pool, llm, bad, retrievers=("bm25",))
    with pytest.raises(ValueError, match="retrievers must be some of"):
        cs.run_sweep(items, pool, llm, [64], retrievers=("pg_rag",))
    with pytest.raises(ValueError, match="top_k must be a positive int"):
        cs.run_sweep(items, pool, llm, [64], retrievers=("bm25",), top_k=0)
    table = cs.item_table(sweep.answers, sweep.scores, sweep.chunk_texts, "rouge_l")
    with pytest.raises(ValueError, match="no configuration at the reference size 128"):
        cs.size_effects(sweep, table, 128, ["rouge_l"])
    assert cs.configuration_name("dense", 256) == "dense@256"


def test_larger_chunks_word_reads_the_interval():
    assert cs.larger_chunks_word(0.5, 3.0) == "larger helps"
    assert cs.larger_chunks_word(-3.0, -0.1) == "larger hurts"
    assert cs.larger_chunks_word(-1.0, 2.0) == "cannot tell"
    assert cs.larger_chunks_word(0.0, 2.0) == "cannot tell"  # touching 0 is not beyond it
    assert cs.larger_chunks_word(float("nan"), 1.0) == "cannot tell"


def test_the_committed_paper_reference_loads_and_bad_files_fail_clearly(tmp_path):
    from pathlib import Path

    ref = cs.load_paper_reference(Path(__file__).parents[1] / "data" / "crud" / "crud_rag_chunk_size_paper.json")
    d = ref["directions"].set_index("task")
    assert d.loc["questanswer_1doc", "direction"] == "smaller"
    assert ref["baseline_setting"]["chunk_size_tokens"] == 128 and "2401.17043" in ref["paper"]
    assert list(ref["table"].columns) == ["task", "chunk_size_tokens", "metric", "value"]
    good = {"paper": "p", "directions": [{"task": "t", "direction": "larger", "statement": "s", "source": "x"}],
            "table_rows": [{"task": "t", "chunk_size_tokens": "64", "metric": "bleu", "value": 41.5}]}
    import json

    f = tmp_path / "p.json"
    f.write_text(json.dumps(good))
    t = cs.load_paper_reference(f)["table"]
    assert t.loc[0, "chunk_size_tokens"] == 64 and t.loc[0, "value"] == 41.5
    for broken, match in [({**good, "directions": [{"task": "t", "direction": "up"}]}, "'larger' or 'smaller'"),
                          ({k: v for k, v in good.items() if k != "table_rows"}, "no 'table_rows' key"),
                          ({**good, "table_rows": [{"task": "t", "chunk_size_tokens": "big", "metric": "m",
                                                    "value": 1}]}, "must be numbers")]:
        f.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=match):
            cs.load_paper_reference(f)
    f.write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        cs.load_paper_reference(f)
    with pytest.raises(FileNotFoundError, match="no such file"):
        cs.load_paper_reference(tmp_path / "missing.json")


def test_chapter_answer_states_each_number_it_is_given():
    effects = pd.DataFrame([
        {"retriever": "dense", "chunk_size_tokens": 64, "measure": "quest_avg_f1", "diff": 1.0, "low": -2.0,
         "high": 4.0, "n": 50},
        {"retriever": "dense", "chunk_size_tokens": 512, "measure": "quest_avg_f1", "diff": -6.0, "low": -9.0,
         "high": -3.0, "n": 50},
        {"retriever": "bm25", "chunk_size_tokens": 512, "measure": "quest_avg_f1", "diff": 0.0, "low": -3.0,
         "high": 3.0, "n": 50},
    ])
    agreement = {"rho": 0.4, "low": -0.5, "high": 1.0, "n_configs": 4, "n_items": 48}
    dil = {"recall_diff": (5.0, 2.0, 8.0), "per_token_diff": (-1.5, -2.0, -1.0), "answer_diff": (-6.0, -9.0, -3.0),
           "tokens_ratio": 3.96, "verdict": "supports"}
    box = cs.chapter_answer(effects, agreement, {"dense": dil, "bm25": {**dil, "verdict": "cannot tell"}},
                            reference_size=128, answer_metric="quest_avg_f1", answer_label="F1", n_items=50,
                            pool_articles=103, generator="model X")
    lead, text = _answer_parts(box)
    assert lead == ("**Chunk size matters**: 1 of 3 changes from CRUD-RAG's 128-token default moved the answers beyond "
                    "the noise (0 up, 1 down); 512-token chunks make the generator read 4.0 times as many tokens. Do "
                    "longer chunks dilute the answers? **yes**.")
    lines = text.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("- **1 of 3 chunk-size changes moved the answers beyond the noise.**")
    assert "dense: 64 tokens +1.0 [-2.0, +4.0], 512 tokens -6.0 [-9.0, -3.0]; bm25: 512 tokens 0.0 [-3.0, +3.0]" in lines[0]
    assert "Spearman's rho +0.40 [-0.50, +1.00]" in lines[1] and "the interval includes 0" in lines[1]
    for low, high, words in ((0.2, 0.9, "the same order"), (-0.9, -0.2, "opposite orders")):
        line = _answer_parts(cs.chapter_answer(effects, {**agreement, "low": low, "high": high}, {"dense": dil},
                                               reference_size=128, answer_metric="quest_avg_f1", answer_label="F1",
                                               n_items=50, pool_articles=103, generator="m"))[1].splitlines()[1]
        assert words in line
    assert "4.0 times as many tokens" in lines[2] and "+5.0 [+2.0, +8.0]" in lines[2]
    assert "F1 itself moves -6.0 [-9.0, -3.0]: **supports**; bm25: cannot tell." in lines[2]
    assert "per 1,000 retrieved tokens moves -1.5 [-2.0, -1.0], a description only" in lines[2]
    assert "model X" in lines[3] and "103 articles" in lines[3]
    quiet = effects.assign(low=-10.0, high=10.0)
    assert "**No chunk size moved the answers beyond the noise.**" in cs.chapter_answer(
        quiet, {**agreement, "low": 0.1}, {"dense": dil}, reference_size=128, answer_metric="quest_avg_f1",
        answer_label="F1", n_items=50, pool_articles=103, generator="m")
    with pytest.raises(ValueError, match="no 'rouge_l' rows"):
        cs.chapter_answer(effects, agreement, {"dense": dil}, reference_size=128, answer_metric="rouge_l",
                          answer_label="R", n_items=50, pool_articles=1, generator="m")


def _answer_parts(box):
    """The lead and the folded details of an answer box."""
    from chunkwise.answerbox import DETAILS_TITLE

    lead, rest = box.split(f"\n\n:::{{dropdown}} {DETAILS_TITLE}\n\n")
    assert rest.endswith("\n\n:::\n")
    return lead, rest[:-len("\n\n:::\n")]


def _dilution_panel(cls, verdict, *, n_alt=7, flips=(), not_run=()):
    from chunkwise.evaluation.robustness import Robustness, SpecResult

    primary = SpecResult("primary", 3.24, -0.58, 7.18, verdict, 48, 5.54, generic="not below delta")
    alts = tuple(SpecResult(f"alt {i}", 1.2, -6.2, 9.1, "cannot tell", 41, 11.3) for i in range(n_alt))
    return Robustness(cls, primary, alts, tuple(flips), 5.0, "points of RAGQuestEval F1", tuple(not_run))


def test_chapter_answer_lead_for_the_published_run_and_the_longest_case():
    from chunkwise.answerbox import MAX_LEAD_WORDS, visible_words

    # the published run (chapter 3b): RAGQuestEval avg F1 against 128 tokens, 50 one-document questions
    rows = [("dense", 64, 4.9, -1.3, 11.6), ("dense", 256, -1.0, -6.0, 3.9), ("dense", 512, 3.2, -0.6, 7.2),
            ("bm25", 64, 3.2, -3.8, 10.5), ("bm25", 256, 1.7, -4.1, 8.4), ("bm25", 512, 1.2, -6.2, 9.1)]
    effects = pd.DataFrame([{"retriever": r, "chunk_size_tokens": t, "measure": "quest_avg_f1", "diff": d, "low": lo,
                             "high": hi, "n": 50} for r, t, d, lo, hi in rows])
    agreement = {"rho": -0.19, "low": -0.79, "high": 0.40, "n_configs": 8, "n_items": 38}
    dil = {"recall_diff": (10.0, 7.9, 12.1), "per_token_diff": (-24.1, -32.0, -17.0), "answer_diff": (3.2, -0.6, 7.2),
           "tokens_ratio": 3.7, "verdict": "no dilution larger than 5 points"}
    flips = [("BM25 retrieval", "cannot tell"), ("BM25, unreadable answers scored 0", "cannot tell"),
             ("ROUGE-L instead of RAGQuestEval", "cannot tell"),
             ("256 instead of 512 tokens", "larger does not help by more than 5 points")]
    panel = _dilution_panel("fragile", "larger does not hurt by more than 5 points", flips=flips)
    kw = dict(reference_size=128, answer_metric="quest_avg_f1", answer_label="RAGQuestEval avg F1", n_items=50,
              pool_articles=103, generator="the local Qwen2.5-Coder-1.5B-Instruct-Q4_K_M")
    box = cs.chapter_answer(effects, agreement, {"dense": dil, "bm25": {**dil, "verdict": "cannot tell"}},
                            robustness=panel, **kw)
    lead, details = _answer_parts(box)
    assert lead == ("**No size from 64 to 512 tokens moved the answers beyond the noise against CRUD-RAG's 128-token "
                    "default; choose by cost**: 512-token chunks make the generator read 3.7 times as many tokens. "
                    "Do longer chunks dilute the answers? **no dilution larger than 5 points** (fragile: 4 of 7 "
                    "declared alternatives disagree).")
    assert visible_words(lead) <= MAX_LEAD_WORDS
    lines = details.splitlines()
    assert len(lines) == 4 and lines[0].startswith("- **No chunk size moved the answers beyond the noise.**")
    assert ("dense: 64 tokens +4.9 [-1.3, +11.6], 256 tokens -1.0 [-6.0, +3.9], 512 tokens +3.2 [-0.6, +7.2]; "
            "bm25: 64 tokens +3.2 [-3.8, +10.5], 256 tokens +1.7 [-4.1, +8.4], 512 tokens +1.2 [-6.2, +9.1].") in lines[0]
    assert "The 8 configurations" in lines[1] and "Spearman's rho -0.19 [-0.79, +0.40]" in lines[1]
    assert "38 items scored under every configuration" in lines[1]
    assert ("the generator reads 3.7 times as many tokens and recall of the reference's words moves +10.0 [+7.9, "
            "+12.1] points, while RAGQuestEval avg F1 itself moves +3.2 [-0.6, +7.2]: **no dilution larger than 5 "
            "points** (fragile: 4 of 7 declared alternatives disagree (BM25 retrieval gives cannot tell; BM25, "
            "unreadable answers scored 0 gives cannot tell; ROUGE-L instead of RAGQuestEval gives cannot tell; 256 "
            "instead of 512 tokens gives larger does not help by more than 5 points)); bm25: cannot tell.") in lines[2]
    assert "per 1,000 retrieved tokens moves -24.1 [-32.0, -17.0], a description only" in lines[2]
    assert "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M" in lines[3] and "103 articles" in lines[3]
    # the longest lead: sizes moved, a six-word verdict, the longest robustness words
    moved = effects.assign(low=[1.0, -9.0, 1.0, 1.0, -9.0, 1.0], high=[9.0, -1.0, 9.0, 9.0, -1.0, 9.0])
    longest = _dilution_panel("no effect larger than delta", "x", n_alt=12, not_run=["y"] * 11)
    lead, _ = _answer_parts(cs.chapter_answer(
        moved, agreement, {"dense": {**dil, "tokens_ratio": 123.45}}, robustness=longest,
        **{**kw, "reference_size": 100000}))
    assert lead.startswith("**Chunk size matters**: 6 of 6 changes from CRUD-RAG's 100000-token default moved the "
                           "answers beyond the noise (4 up, 2 down); 100000-token chunks make the generator read 123.5")
    assert "**no dilution larger than 5 points** (no effect larger than 5 points; all 12 alternatives agree; 11 not " \
           "run here)." in lead
    assert visible_words(lead) <= MAX_LEAD_WORDS
    lead, _ = _answer_parts(cs.chapter_answer(
        effects, agreement, {"dense": {**dil, "verdict": "a verdict that is far too long for the lead"}}, **kw))
    assert lead.endswith("Do longer chunks dilute the answers? **see the details**.")


def test_pooled_rank_correlation_by_hand_and_its_cluster_bootstrap():
    from scipy.stats import spearmanr

    # two configurations x three items; x and y rank the six rows identically -> rho 1 in every resample
    t = pd.DataFrame({"method": ["a"] * 3 + ["b"] * 3, "ID": ["1", "2", "3"] * 2,
                      "context_recall": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "answer": [1, 2, 3, 4, 5, 6]})
    r = cs.pooled_rank_correlation(t, n_resamples=300)
    assert (r["rho"], r["n_rows"], r["n_items"]) == (1.0, 6, 3)
    assert r["low"] == pytest.approx(1.0) and r["high"] == pytest.approx(1.0)
    # one reversed pair: the point value is scipy's on the six rows; NaN rows are dropped first
    t2 = t.assign(answer=[1, 2, 3, 4, 6, 5])
    t2.loc[len(t2)] = {"method": "c", "ID": "1", "context_recall": float("nan"), "answer": 9}
    r2 = cs.pooled_rank_correlation(t2, n_resamples=300)
    assert r2["rho"] == pytest.approx(spearmanr([.1, .2, .3, .4, .5, .6], [1, 2, 3, 4, 6, 5]).statistic)
    assert r2["n_rows"] == 6 and r2["low"] <= r2["rho"] <= r2["high"]
    with pytest.raises(ValueError, match="same on every row"):
        cs.pooled_rank_correlation(t.assign(answer=1.0))
    with pytest.raises(ValueError, match="at least 3 rows"):
        cs.pooled_rank_correlation(t.iloc[:2])
    with pytest.raises(ValueError, match="no column 'answer'"):
        cs.pooled_rank_correlation(t.drop(columns="answer"))
