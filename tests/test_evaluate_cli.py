"""Tests for `chunkwise questions validate` and `chunkwise evaluate` (BM25-only grids: no model needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from chunkwise.cli import main
from fakes import WordEmbedder

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "examples" / "garden"


def test_validate_the_committed_example(capsys):
    status = main(["questions", "validate", "--docs", str(EXAMPLE / "docs"), "--questions", str(EXAMPLE / "questions.jsonl")])
    out = capsys.readouterr()
    assert status == 0
    assert "20 questions, 27 excerpts: 0 error(s) in 0 question(s), 0 warning(s); 20 question(s) usable." in out.out
    assert "3 document(s)" in out.err


def test_validate_reports_errors_and_exits_1(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The kettle boils at noon. Tea follows.", encoding="utf-8")
    q = tmp_path / "q.csv"
    q.write_text("question,document,excerpt\nWhen?,a.txt,The kettle boil at noon\nWho?,b.txt,Tea\n", encoding="utf-8")
    status = main(["questions", "validate", "--docs", str(docs), "--questions", str(q)])
    err = capsys.readouterr().err
    assert status == 1
    assert "ERROR q1 (row 1) excerpt 1 in a.txt: excerpt 'The kettle boil at noon' was not found; closest source text at offset 0" in err
    assert "ERROR q2 (row 2): document 'b.txt' is not in the documents folder." in err
    assert "2 error(s)" in err


def test_validate_clear_error_for_bad_folder(tmp_path, capsys):
    (tmp_path / "x.md").write_bytes("naïve".encode("latin-1"))
    q = tmp_path / "q.csv"
    q.write_text("question,excerpt\nA?,b\n")
    status = main(["questions", "validate", "--docs", str(tmp_path), "--questions", str(q)])
    err = capsys.readouterr().err
    assert status == 1
    # every file of the folder is named with its reason: the questions file is no document
    assert err.startswith("chunkwise: error: documents folder") and "has no readable document (2 file(s) skipped)" in err
    assert "x.md is not valid utf-8" in err and "--encoding" in err and "q.csv has an unknown type '.csv'" in err
    assert "Traceback" not in err


def test_evaluate_bm25_grid_writes_report(tmp_path, capsys):
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["TokenText:50", "Recursive:50"]\nretrievers = ["bm25"]\ntop_k = [1, 3]\nn_resamples = 500\n')
    out = tmp_path / "report"
    status = main([
        "evaluate", "--docs", str(EXAMPLE / "docs"), "--questions", str(EXAMPLE / "questions.jsonl"),
        "--config", str(cfg), "--out", str(out), "--no-progress",
    ])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "grid from" in captured.err and "2 chunkers (TokenText 50, Recursive 50) x 1 retrievers (bm25) x k in {1, 3} = 4 cells" in captured.err
    assert "recall over 20 questions, 500 paired bootstrap resamples (seed 0)." in captured.out
    table = pd.read_csv(out / "table.csv")
    assert len(table) == 4 and set(table["retriever"]) == {"bm25"}
    report = json.loads((out / "report.json").read_text())
    assert report["n_questions"] == 20 and report["bootstrap"]["n_resamples"] == 500
    assert (out / "boundaries.html").read_text().count("<h2>") == 2


def test_evaluate_stops_before_embedding_on_question_errors(tmp_path, capsys):
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "x?", "document": "soil.md", "excerpt": "not in the text at all, surely"}\n')
    status = main(["evaluate", "--docs", str(EXAMPLE / "docs"), "--questions", str(q), "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert status == 1
    assert "1 question error(s) (listed above); nothing was embedded." in err
    assert not (tmp_path / "r").exists()


def test_evaluate_bad_config_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["Recursive:0"]\n')
    status = main(["evaluate", "--docs", str(EXAMPLE / "docs"), "--questions", str(EXAMPLE / "questions.jsonl"), "--config", str(cfg)])
    err = capsys.readouterr().err
    assert status == 1
    assert err.strip().splitlines() == ["chunkwise: error: size in 'Recursive:0' must be >= 1 token."]


def test_evaluate_with_one_question_still_writes_the_report(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence.")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."}\n')
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["Recursive:8"]\nretrievers = ["bm25"]\ntop_k = [1]\n')
    status = main(["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(cfg),
                   "--out", str(tmp_path / "rep"), "--no-progress"])
    captured = capsys.readouterr()
    assert status == 0
    assert "only 1 usable question" in captured.err
    import json

    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["bootstrap"] is None and rep["n_questions"] == 1 and len(rep["cells"]) == 1


def test_check_cli_exit_codes(tmp_path, capsys):
    """The same run passes (0); a missing baseline is bad input (2); an unknown cell not comparable (3)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."}\n'
                 '{"question": "Where do beans climb?", "excerpt": "Beans climb the north fence."}\n')
    good = tmp_path / "grid.toml"
    good.write_text('chunkers = ["Sentence:12"]\nretrievers = ["bm25"]\ntop_k = [1]\n')
    base = tmp_path / "base"
    assert main(["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(good), "--out", str(base),
                 "--no-progress"]) == 0
    capsys.readouterr()
    args = ["check", "--docs", str(docs), "--questions", str(q), "--baseline", str(base)]
    assert main(args + ["--out", str(tmp_path / "new")]) == 0
    assert "\nPASS: Sentence 12 | bm25 | k=1: recall 100.0% now, 100.0% in the baseline" in capsys.readouterr().out
    assert (tmp_path / "new" / "check.json").is_file()
    assert main(args + ["--cell", "nope | dense | k=1"]) == 3
    assert main(["check", "--docs", str(docs), "--questions", str(q), "--baseline", str(tmp_path / "missing")]) == 2
    assert "report.json is missing" in capsys.readouterr().err
    # issue 44, bug 1: --out naming the baseline folder is refused before anything is written
    before = (base / "report.json").read_bytes()
    assert main(args + ["--out", str(base)]) == 2
    assert "would overwrite the baseline" in capsys.readouterr().err
    assert (base / "report.json").read_bytes() == before
    # issue 44, bug 10: a report.json holding [] is bad input (2), not "a drop beyond the noise" (1)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "report.json").write_text("[]")
    (base / "per_question.csv").replace(tmp_path / "empty" / "per_question.csv")
    assert main(["check", "--docs", str(docs), "--questions", str(q), "--baseline", str(tmp_path / "empty")]) == 2
    assert "is not a chunkwise report" in capsys.readouterr().err


def test_evaluate_refuses_an_out_that_is_a_file_before_any_work(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants.")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."}\n')
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    assert main(["evaluate", "--docs", str(docs), "--questions", str(q), "--out", str(taken), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "Traceback" not in err and "document(s)" not in err  # nothing was read


def test_two_embedder_grid_through_evaluate_and_check(tmp_path, monkeypatch, capsys):
    """A grid of two embedders writes its report.html, and check reruns it (helper-4's crash)."""
    from chunkwise import cli_own_data

    # two tiny deterministic embedders: one dimension per word of the garden text, plus 1e-3
    vocab = {"fake-a": ["kale", "beans", "leeks", "spacing", "climb"], "fake-b": ["plants", "fence", "soil"]}
    monkeypatch.setattr(cli_own_data, "_make_embedders",
                        lambda name, progress=False: (WordEmbedder(vocab[name], name, offset=1e-3),) * 2)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Kale wants 45 cm between plants. Beans climb the north fence. Leeks need deep soil.")
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Kale spacing?", "excerpt": "Kale wants 45 cm between plants."}\n'
                 '{"question": "Where do beans climb?", "excerpt": "Beans climb the north fence."}\n')
    grid = tmp_path / "grid.toml"
    grid.write_text('chunkers = ["Sentence:12"]\nretrievers = ["dense", "bm25", "hybrid"]\ntop_k = [1]\n'
                    'embedders = ["fake-a", "fake-b"]\n')
    base = tmp_path / "base"
    assert main(["evaluate", "--docs", str(docs), "--questions", str(q), "--config", str(grid), "--out", str(base),
                 "--no-progress"]) == 0
    table = pd.read_csv(base / "table.csv")
    assert list(table["cell"]) == ["Sentence 12 | fake-a | dense | k=1", "Sentence 12 | - | bm25 | k=1",
                                   "Sentence 12 | fake-a | hybrid | k=1", "Sentence 12 | fake-b | dense | k=1",
                                   "Sentence 12 | fake-b | hybrid | k=1"]
    page = (base / "report.html").read_text(encoding="utf-8")
    assert "<h2>Questions</h2>" in page and "Sentence 12 | fake-b | hybrid | k=1" in page
    capsys.readouterr()
    args = ["check", "--docs", str(docs), "--questions", str(q), "--baseline", str(base), "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "new")]) == 0
    assert (tmp_path / "new" / "report.html").is_file()
    capsys.readouterr()
    assert main(args + ["--embedder", "fake-a"]) == 2
    assert "conflicts with the grid's embedders" in capsys.readouterr().err
