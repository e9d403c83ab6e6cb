"""Per question group views (issue 44): the questions' tags, GridResult.group_table and evaluate's groups.csv.

Grid: test_grid's two documents cut by TokenText:2, BM25. Q1 "three four" retrieves a1 " three four"
first (recall 1 at k = 1 and 2); Q2 "one two nine" retrieves a0 "one two" then b1 " nine ten"
(recall 0 at k = 1, 1 at k = 2).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from chunkwise.datasets.local import question_tags
from chunkwise.evaluation.grid import GridConfig, format_groups, run_grid

from fakes import GRID_DOCS, questions


def test_question_tags_forms():
    assert question_tags(["billing", " refunds ", "billing"]) == ["billing", "refunds"]
    assert question_tags("billing, refunds") == ["billing", "refunds"]
    assert question_tags('["a, b", "c"]') == ["a, b", "c"]
    assert question_tags(None) == [] and question_tags("") == [] and question_tags(float("nan")) == []
    with pytest.raises(ValueError, match="row 3: tags must be non-empty strings"):
        question_tags([1], "q.jsonl row 3")


@pytest.fixture()
def result(tmp_path):
    q = questions()
    q["tags"] = [["x"], ["x", "y"]]
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["bm25"], top_k=[1, 2])
    return run_grid(GRID_DOCS, q, cfg, cache_dir=tmp_path, show_progress=False)


def test_group_table_by_hand(result):
    assert result.groups == {"x": ["Q1", "Q2"], "y": ["Q2"]}
    g = result.group_table("recall", n_resamples=4000, seed=0).set_index(["group", "cell"])
    k1, k2 = "TokenText 2 | bm25 | k=1", "TokenText 2 | bm25 | k=2"
    assert g.loc[("all", k1), "mean"] == pytest.approx(0.5) and g.loc[("all", k2), "mean"] == pytest.approx(1.0)
    # paired differences k2 - k1: Q1 0, Q2 1 -> mean 0.5; a resample's mean is 0, 0.5 or 1 with
    # probabilities 1/4, 1/2, 1/4, so the 95% percentile interval is [0, 1]
    assert g.loc[("all", k2), ["diff", "diff_low", "diff_high"]].tolist() == pytest.approx([0.5, 0.0, 1.0])
    assert g.loc[("x", k2), "mean"] == pytest.approx(1.0) and bool(g.loc[("x", k2), "best"])
    # group y holds Q2 alone: k=1 0, k=2 1; its difference +1 with no interval
    assert g.loc[("y", k1), "mean"] == 0.0 and g.loc[("y", k2), "diff"] == pytest.approx(1.0)
    assert math.isnan(g.loc[("y", k2), "diff_low"]) and int(g.loc[("y", k2), "n_questions"]) == 1
    text = format_groups(result.group_table("recall", n_resamples=4000, seed=0))
    assert text.splitlines() == [
        "all (2 questions): best TokenText 2 | bm25 | k=2 100.0% [100.0, 100.0]; vs the baseline +50.0 [0.0, 100.0] "
        "(within the noise)",
        "x (2 questions): best TokenText 2 | bm25 | k=2 100.0% [100.0, 100.0]; vs the baseline +50.0 [0.0, 100.0] "
        "(within the noise)",
        "y (1 question): best TokenText 2 | bm25 | k=2 100.0% (one question: no interval)",
    ]


def test_group_table_needs_tags(tmp_path):
    cfg = GridConfig(chunkers=["TokenText:2"], retrievers=["bm25"], top_k=[1])
    res = run_grid(GRID_DOCS, questions(), cfg, cache_dir=tmp_path, show_progress=False)
    assert res.groups == {}
    with pytest.raises(ValueError, match="no question has tags"):
        res.group_table()


def test_evaluate_writes_groups_from_the_questions_tags(tmp_path, capsys):
    from chunkwise.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.csv"
    q.write_text('question,excerpt,tags\n"Kale spacing?",Kale wants 45 cm between plants.,"spacing, brassicas"\n'
                 '"Where do beans climb?",Beans climb the north fence.,support\n'
                 '"What soil for leeks?",Leeks need deep soil.,\n')
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["Sentence:12"]\nretrievers = ["bm25"]\ntop_k = [1]\n')
    assert main(["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg), "--no-progress",
                 "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "per question group (tags; recall" in out
    assert "spacing (1 question): best Sentence 12 | bm25 | k=1 100.0% (one question: no interval)" in out
    groups = pd.read_csv(tmp_path / "r" / "groups.csv")
    assert list(groups["group"]) == ["all", "spacing", "brassicas", "support"]
    assert "<h2>Per question group</h2>" in (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
