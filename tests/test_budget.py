"""Retrieval at a matched token budget (chunkwise.evaluation.budget), by hand.

Grid: test_grid's two documents cut by TokenText:2 (a0 "one two" [0, 7), a1 " three four" [7, 18),
a2 " five six", b0 "seven eight", b1 " nine ten" [11, 20); 2 cl100k_base tokens each), dense with the
word-count embedder, k = 1, 2 (search depth 2). Q1 "three four" ranks a1 then a0; Q2 "one two nine"
ranks a0 (cosine 0.82) then b1 (0.41).
"""

from __future__ import annotations

import math

import pytest

from chunkwise.evaluation.budget import token_budget_view
from chunkwise.evaluation.grid import GridConfig, run_grid

from fakes import GRID_DOCS, WordEmbedder, questions


@pytest.fixture()
def result(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["dense"], top_k=[1, 2])
    return run_grid(GRID_DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)


def test_a_budget_of_whole_chunks_equals_the_k_cell(result):
    view = token_budget_view(result, 4)
    row = view.table.iloc[0]
    k2 = result.table.set_index("cell").loc["TokenText 2 | dense | k=2"]
    assert row["cell"] == "TokenText 2 | dense | budget=4"
    for m in ("recall", "precision", "iou"):
        assert row[m] == pytest.approx(k2[m])
    assert row["chunks_read"] == 2.0 and row["n_short"] == 0


def test_the_chunk_crossing_the_budget_is_cut_to_its_first_tokens(result):
    view = token_budget_view(result, 3)
    pq = view.per_question.set_index("question_id")
    # Q1 reads a1 (2 tokens) and the first token of a0, "one" [0, 3): the reference [8, 18) is whole,
    # retrieved 11 + 3 characters -> precision 10 / 14
    assert pq.loc["Q1", "recall"] == pytest.approx(1.0)
    assert pq.loc["Q1", "precision"] == pytest.approx(10 / 14)
    # Q2 reads a0 (2 tokens, another document) and " nine" [11, 16) of b1: 4 of the reference's 8 characters
    assert pq.loc["Q2", "recall"] == pytest.approx(0.5)
    assert pq["tokens_read"].tolist() == [3.0, 3.0] and pq["chunks_read"].tolist() == [2.0, 2.0]
    assert view.table.iloc[0]["recall"] == pytest.approx(0.75)


def test_a_ranking_shorter_than_the_budget_is_nan_with_its_reason(result):
    view = token_budget_view(result, 100)
    row = view.table.iloc[0]
    assert math.isnan(row["recall"]) and row["n_short"] == 2 and row["n_questions"] == 0
    assert "searched 2 deep" in row["note"] and "larger top_k" in row["note"]
    with pytest.raises(ValueError, match="budget_tokens must be an int >= 1"):
        token_budget_view(result, 0)


def test_budget_bootstrap_compares_chunkers_at_equal_reading(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2", "TokenText:4"], retrievers=["dense"], top_k=[1, 2])
    res = run_grid(GRID_DOCS, questions(), cfg, WordEmbedder(), cache_dir=tmp_path, show_progress=False)
    view = token_budget_view(res, 4)
    boot = view.bootstrap("recall", n_resamples=500, seed=0)
    assert list(boot.table.index) == ["TokenText 2 | dense | budget=4", "TokenText 4 | dense | budget=4"]
    assert set(view.per_question["tokens_read"]) == {4.0}


def test_evaluate_token_budget_writes_budget_csv(tmp_path, capsys):
    import pandas as pd

    from chunkwise.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."}\n'
                 '{"question": "Where do beans climb?", "excerpt": "Beans climb the north fence."}\n')
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["Sentence:12", "TokenText:40"]\nretrievers = ["bm25"]\ntop_k = [1]\n')
    args = ["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg), "--no-progress",
            "--out", str(tmp_path / "r")]
    assert main(args + ["--token-budget", "0"]) == 1
    assert "--token-budget must be a whole number of tokens >= 1" in capsys.readouterr().err
    assert main(args + ["--token-budget", "8"]) == 0
    out = capsys.readouterr().out
    assert "at a matched budget of 8 retrieved tokens per question" in out
    table = pd.read_csv(tmp_path / "r" / "budget.csv")
    assert list(table["cell"]) == ["Sentence 12 | bm25 | budget=8", "TokenText 40 | bm25 | budget=8"]
    # one 40-token chunk holds the whole text (21 tokens): at 8 tokens each question reads "Kale wants 45 cm
    # between plants" (the sentence's first 8 of 9 tokens): Q1 31 of its 32 characters, Q2 (from character 33) 0
    row = table.set_index("chunker").loc["TokenText 40"]
    assert row["chunks_read"] == 1.0 and row["recall"] == pytest.approx((31 / 32 + 0) / 2)
