"""Candidate passages for hand-written questions (chunkwise.datasets.locate, `questions locate`)."""

from __future__ import annotations

import json

import pytest

from chunkwise.cli import main
from chunkwise.datasets.locate import candidate_passages

DOCS = {
    "beds.md": "Raised beds are filled with compost in March. Kale needs 45 cm between plants. "
               "Beans climb the north fence.",
    "tools.md": "Clean the spade after use. Oil the shears monthly. The shed key hangs by the door.",
}


def test_best_window_holds_the_answer_and_offsets_are_exact():
    found = candidate_passages(DOCS, ["How much space does kale need?", "Where does the shed key hang?"], top_n=2,
                               window_sentences=1)
    first = found[found["rank"] == 1].set_index("question_id")
    assert first.loc["q1", "excerpt"] == "Kale needs 45 cm between plants."
    assert first.loc["q2", "excerpt"] == "The shed key hangs by the door."
    for r in found.itertuples():
        assert DOCS[r.document][r.start:r.end] == r.excerpt and r.score > 0
    # the second candidate never overlaps the first
    q1 = found[found["question_id"] == "q1"]
    assert len(q1) <= 2 and (len(q1) < 2 or q1.iloc[1]["start"] >= q1.iloc[0]["end"]
                             or q1.iloc[1]["document"] != q1.iloc[0]["document"])


def test_document_filter_and_no_shared_word():
    found = candidate_passages(DOCS, [{"question": "kale spacing", "document": "tools.md"}, "xylophone?"])
    assert found.empty  # kale is not in tools.md; no window has "xylophone"
    with pytest.raises(ValueError, match="not among the documents"):
        candidate_passages(DOCS, [{"question": "a", "document": "nope.md"}])


def test_cli_writes_a_draft_that_validates(tmp_path, capsys):
    d = tmp_path / "docs"
    d.mkdir()
    for name, text in DOCS.items():
        (d / name).write_text(text)
    q = tmp_path / "q.txt"
    q.write_text("How much space does kale need?\nWhen are the beds filled?\n")
    out = tmp_path / "draft.jsonl"
    assert main(["questions", "locate", "--docs", str(d), "--questions", str(q), "--window", "1", "--out", str(out)]) == 0
    assert "1. beds.md [" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["excerpt"] for r in rows] == ["Kale needs 45 cm between plants.", "Raised beds are filled with compost in March."]
    assert all(r["reviewed"] is False for r in rows)
    assert main(["questions", "validate", "--docs", str(d), "--questions", str(out)]) == 0
