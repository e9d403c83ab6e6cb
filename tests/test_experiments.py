"""The chapters' drivers: handbook scoring and the Chroma comparison on small inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from chunkwise.chunk import Chunk
from chunkwise.evaluation.boundaries import boundaries_from_chunks
from chunkwise.experiments import chroma as ch
from chunkwise.experiments import handbook as hb
from test_semantic import FakeEmbedder


def test_boundaries_from_chunks_maps_cuts_to_reference_sentences():
    # Sentences: [0,10) [11,20) [21,30); chunk cuts at 10 (gap), 25 (inside sentence 2, nearer
    # its start 21 than its end 30 -> boundary 1), and a final chunk.
    sents = [(0, 10), (11, 20), (21, 30)]
    bounds, mid = boundaries_from_chunks([(0, 10), (11, 25), (25, 30)], sents)
    assert bounds == [0, 1] and mid == 1
    # A cut at 28 is nearer the end of sentence 2 -> boundary 2 does not exist (last sentence).
    assert boundaries_from_chunks([(0, 28), (28, 30)], sents) == ([], 1)
    # A cut exactly at a sentence end maps to that sentence's boundary.
    assert boundaries_from_chunks([(0, 20), (21, 30)], sents) == ([1], 0)
    with pytest.raises(ValueError, match="overlap"):
        boundaries_from_chunks([(0, 5)], [(0, 10), (5, 12)])


def test_handbook_loads_and_scores_the_gold_split():
    texts = hb.load_handbook()
    hand = texts["handbook"]
    assert hand.n_sentences == 18 and hand.gold == [5, 11]
    s = hand.sentences
    gold_chunks = [
        Chunk(hand.text[s[a].start : s[b].end], s[a].start, s[b].end) for a, b in ((0, 5), (6, 11), (12, 17))
    ]
    scores = hb.score_chunks(gold_chunks, hand)
    assert scores["shifts_found"] == "2 of 2" and scores["extra_splits"] == 0
    assert scores["pk"] == 0.0 and scores["windowdiff"] == 0.0 and scores["f1"] == 1.0


def test_handbook_sweep_embeds_each_window_once():
    texts = hb.load_handbook()
    settings = hb.sweep_settings([0, 1], hb.threshold_grid(), (None, 150))
    table, analyses, memo = hb.run_sweep(texts, FakeEmbedder(), settings)
    assert len(table) == 2 * len(settings)
    # LangChain's regex sees 19 non-empty pieces in the handbook (the a.m. split) and 18 in the
    # control text; each distinct window (over both texts and both buffer sizes) is embedded once.
    from chunkwise.chunkers.semantic import combine_sentences
    from chunkwise.text import split_sentences

    distinct = set()
    for t in texts.values():
        pieces = [p.text for p in split_sentences(t.text, "langchain") if p.text.strip()]
        for b in (0, 1):
            distinct.update(combine_sentences(pieces, b))
    assert len(distinct) <= 2 * 19 + 2 * 18
    assert memo.n_embedded == len(distinct)
    assert memo.n_requested == len(settings) * (19 + 18)
    pct = table[(table.threshold == "percentile") & table.min_chunk_size.isna()]
    assert sorted(set(zip(pct.amount, pct.chunks))) == [(80.0, 5), (90.0, 3), (95.0, 2)]


def test_percentile_break_table_matches_formula():
    t = hb.percentile_break_table(gap_counts=(17, 100), percentiles=(80, 90, 95), trials=20)
    assert (t.min_breaks == t.predicted_breaks).all() and (t.max_breaks == t.predicted_breaks).all()
    assert t.set_index(["gaps", "percentile"]).loc[(100, 90), "chunks"] == 11  # the Bedrock example


def test_parse_spec():
    assert ch.parse_spec("Recursive:250:125") == ch.ChunkerSpec("Recursive", 250, 125)
    assert ch.parse_spec("Kamradt") == ch.ChunkerSpec("Kamradt", None, 0)
    with pytest.raises(ValueError, match="unknown chunker"):
        ch.parse_spec("Sentence:10")
    with pytest.raises(ValueError, match="needs a size"):
        ch.parse_spec("TokenText")


def test_chroma_driver_end_to_end_on_small_corpora(tmp_path):
    corpora = {"a": "Alpha beta gamma. " * 40, "b": "Delta epsilon zeta. " * 40}
    questions = pd.DataFrame(
        {
            "question_id": [0, 1],
            "question": ["alpha beta", "delta zeta"],
            "corpus": ["a", "b"],
            "references": [[(0, 17)], [(20, 60)]],
        }
    )
    emb = FakeEmbedder()
    results = ch.run_comparison(
        [ch.ChunkerSpec("TokenText", 20, 0), ch.ChunkerSpec("LLM")], corpora, questions, emb,
        top_k=2, mode="union", llm=None, cache_dir=tmp_path, progress=lambda s: s,
    )
    assert len(results) == 1  # the LLM row is skipped without a client
    r = results[0]
    assert r.per_question.shape[0] == 2 and r.mean_chunk_tokens <= 20
    assert ((r.per_question[["recall", "precision", "iou"]] >= 0) & (r.per_question[["recall", "precision", "iou"]] <= 1)).all().all()
    # The span cache makes the second run chunk nothing new and give identical scores.
    again = ch.run_comparison([ch.ChunkerSpec("TokenText", 20, 0)], corpora, questions, emb, top_k=2,
                              mode="union", cache_dir=tmp_path, progress=lambda s: s)[0]
    pd.testing.assert_frame_equal(again.per_question, r.per_question)
    table = ch.results_table(results, "fake")
    report = pd.DataFrame(
        [{"embedding_model": "fake", "chunker": "TokenText", "size_tokens": 20, "mean_chunk_tokens": 20,
          "overlap_tokens": 0, "recall_mean": 50.0, "precision_mean": 1.0, "precision_omega_mean": 1.0, "iou_mean": 1.0}]
    )
    cmp = ch.compare_with_report(table, report, "fake")
    assert cmp.loc[0, "recall_delta"] == pytest.approx(round(table.loc[0, "recall_mean"] - 50.0, 1))
    assert np.isclose(cmp.loc[0, "recall_reported"], 50.0)


@pytest.mark.parametrize(
    "bad",
    ["TokenText:250:-5", "TokenText:250:250", "TokenText:-1", "KamradtMod:30", "Recursive:250:125:7",
     "Kamradt:300", "Cluster:250:50", "LLM:10"],
)
def test_parse_spec_rejects_invalid_specs_up_front(bad):
    with pytest.raises(ValueError):
        ch.parse_spec(bad)


def test_crud_harness_tables_keep_missing_cells_visible():
    from chunkwise.experiments import crud as cx

    answers = pd.DataFrame(
        {
            "task": ["questanswer_1doc"] * 4,
            "ID": ["a", "a", "b", "b"],
            "method": ["bm25", "none", "bm25", "none"],
            "answer": ["上海今天晴转多云", "不知道", "北京是首都", ""],
            "parse_ok": [True, True, True, False],
            "parse_status": ["ok", "ok", "ok", "missing_tags"],
            "gold_answer": ["上海今天晴转多云", "上海今天晴转多云", "北京是首都", "北京是首都"],
            "model_identity": ["stub@sha256:0"] * 4,
        }
    )
    scores = cx.score_answers(answers, metrics=("bleu_crud", "rouge_l"))
    assert scores.loc[0, "rouge_l"] == pytest.approx(1.0) and scores.loc[0, "bleu_crud"] == pytest.approx(1.0)
    assert np.isnan(scores.loc[3, "rouge_l"]) and scores.loc[3, "missing"]  # unparsed -> missing, not 0
    with pytest.raises(ValueError, match="quest_eval needs an LLM"):
        cx.score_answers(answers, metrics=("quest_eval",))
    tables = cx.task_tables(scores, ["bleu_crud", "rouge_l"])
    t = tables["questanswer_1doc"]
    assert t.loc["bm25", "rouge_l"] == pytest.approx(100.0)
    assert t.loc["none", "n_missing"] == 1 and t.loc["none", "n_items"] == 2
    assert t.loc["bm25", "model"] == "stub@sha256:0"
