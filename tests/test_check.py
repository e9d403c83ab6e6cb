"""chunkwise check's comparison (chunkwise.evaluation.check) on hand-made reports."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from chunkwise.evaluation.check import BaselineError, check_against_baseline

CELL = "Recursive 200 | dense | k=5"


def baseline(tmp_path, recall, cells=None):
    folder = tmp_path / "base"
    folder.mkdir(exist_ok=True)
    ids = [f"q{i}" for i in range(len(recall))]
    pd.DataFrame({"cell": CELL, "question_id": ids, "recall": recall}).to_csv(folder / "per_question.csv", index=False)
    cells = cells or [{"cell": CELL, "recall": sum(recall) / len(recall)}]
    (folder / "report.json").write_text(json.dumps({"cells": cells, "grid": {}}))
    return folder


def new(recall, cell=CELL):
    return pd.DataFrame({"cell": cell, "question_id": [f"q{i}" for i in range(len(recall))], "recall": recall})


def test_a_drop_beyond_the_noise_fails(tmp_path):
    base = baseline(tmp_path, [1.0] * 8)
    r = check_against_baseline(new([0, 0, 0, 0, 0, 0, 1, 1]), base, n_resamples=2000)
    assert r.status == 1 and r.diff == pytest.approx(-0.75) and r.diff_high < 0
    assert r.message.startswith("FAIL: Recursive 200 | dense | k=5: recall 25.0% now, 100.0% in the baseline")


def test_a_drop_inside_the_noise_passes(tmp_path):
    base = baseline(tmp_path, [1.0] * 8)
    # one question of eight lost: a resample misses it with probability (7/8)^8 = 34%, so the
    # interval's upper end is 0 and the drop is not beyond the noise
    r = check_against_baseline(new([1] * 7 + [0]), base, n_resamples=2000)
    assert r.status == 0 and r.diff == pytest.approx(-0.125) and r.diff_high == 0.0
    assert "no drop beyond the noise" in r.message
    same = check_against_baseline(new([1.0] * 8), base, n_resamples=500)
    assert same.status == 0 and same.diff == 0 and same.message.endswith("no drop.")


def test_floor_fails_whatever_the_noise(tmp_path):
    base = baseline(tmp_path, [1.0] * 8)
    r = check_against_baseline(new([1] * 7 + [0]), base, floor=0.9, n_resamples=500)
    assert r.status == 1 and "below the floor of 90.0%" in r.message
    assert check_against_baseline(new([1] * 7 + [0]), base, floor=0.85, n_resamples=500).status == 0


def test_not_comparable_and_bad_input(tmp_path):
    base = baseline(tmp_path, [1.0, 0.5, 0.0])
    assert check_against_baseline(new([1.0, 1.0, 1.0], cell="other | bm25 | k=1"), base).status == 3
    only_one = new([1.0]).assign(question_id=["q2"])
    assert check_against_baseline(only_one, base).status == 3
    with pytest.raises(BaselineError, match="unknown metric"):
        check_against_baseline(new([1.0] * 3), base, metric="f1")
    with pytest.raises(BaselineError, match="report.json is missing"):
        check_against_baseline(new([1.0] * 3), tmp_path / "nowhere")


def test_default_cell_is_the_baselines_best(tmp_path):
    cells = [{"cell": "TokenText 200 | dense | k=5", "recall": 0.4}, {"cell": CELL, "recall": 0.5}]
    base = baseline(tmp_path, [1.0, 0.0], cells=cells)
    r = check_against_baseline(new([1.0, 0.0]), base, n_resamples=500)
    assert r.cell == CELL and r.n_shared == 2 and r.status == 0


def test_automatic_ids_that_shift_are_paired_by_question_text(tmp_path):
    """Issue 44: a question inserted at the top shifts q1, q2 ...; pairing by id compared unrelated questions."""
    folder = tmp_path / "base"
    folder.mkdir()
    texts = [f"question {i}" for i in range(6)]
    pd.DataFrame({"cell": CELL, "question_id": [f"q{i + 1}" for i in range(6)], "question": texts,
                  "recall": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]}).to_csv(folder / "per_question.csv", index=False)
    (folder / "report.json").write_text(json.dumps({"cells": [{"cell": CELL, "recall": 0.5}], "grid": {}}))
    # the new run: one new question first, every old question one id later, scores unchanged
    new_texts = ["a new question", *texts]
    new_pq = pd.DataFrame({"cell": CELL, "question_id": [f"q{i + 1}" for i in range(7)], "question": new_texts,
                           "recall": [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]})
    out = check_against_baseline(new_pq, folder, cell=CELL, n_resamples=2000)
    # by id, q1..q6 would pair 0/1 against 1/0 (a drop of 100 points on half the questions)
    assert out.status == 0 and out.n_shared == 6 and out.diff == 0.0
    assert "paired by question text; 6 question(s) changed id" in out.message
    # texts that repeat cannot be paired by text: a changed id is then refused, not silently mispaired
    dup = new_pq.assign(question=["same"] * 7)
    out = check_against_baseline(dup, folder, cell=CELL, n_resamples=2000)
    assert out.status == 3 and "name different questions" in out.message
