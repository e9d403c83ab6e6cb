"""Tests for chunkwise.datasets.local: a reader's documents and questions, validation."""

from __future__ import annotations

import json

import pytest

from chunkwise.datasets.local import (
    closest_passage,
    load_documents,
    load_questions,
    locate_excerpt,
    read_questions,
    validate_questions,
)

DOC_A = "Tea grows on hills.\nThe leaves are picked by hand.\nGreen tea is steamed."
DOC_B = "Coffee grows in the tropics. The cherries are picked by hand."


@pytest.fixture()
def folder(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "tea.md").write_text(DOC_A, encoding="utf-8")
    (d / "sub" / "coffee.txt").write_text(DOC_B, encoding="utf-8")
    (d / "notes.pdf").write_bytes(b"%PDF")
    (d / ".hidden.txt").write_text("secret", encoding="utf-8")
    return d


def test_load_documents_names_are_relative_posix_paths(folder):
    docs = load_documents(folder)
    assert docs == {"sub/coffee.txt": DOC_B, "tea.md": DOC_A}


def test_load_one_file_and_universal_newlines(tmp_path):
    p = tmp_path / "one.txt"
    p.write_bytes(b"a\r\nb\rc")
    assert load_documents(p) == {"one.txt": "a\nb\nc"}


def test_encoding_option_and_clear_errors(tmp_path):
    p = tmp_path / "latin.txt"
    p.write_bytes("café".encode("cp1252"))
    with pytest.raises(ValueError, match=r"latin.txt is not valid utf-8 \(byte 3.*--encoding"):
        load_documents(tmp_path)
    assert load_documents(tmp_path, encoding="cp1252") == {"latin.txt": "café"}
    (tmp_path / "latin.txt").unlink()
    (tmp_path / "x.txt").write_bytes(b"\x00\x01binary")
    with pytest.raises(ValueError, match="x.txt looks like a binary file"):
        load_documents(tmp_path)
    (tmp_path / "x.txt").unlink()
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(ValueError, match=r"has no readable document \(1 file\(s\) skipped\): x.csv has an unknown type '\.csv'"):
        load_documents(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        load_documents(tmp_path / "nope")
    with pytest.raises(ValueError, match="unknown encoding"):
        load_documents(tmp_path / "x.csv", encoding="no-such-codec")


def test_locate_excerpt_exact_overlapping_and_whitespace():
    assert locate_excerpt("aaaa", "aa") == ([(0, 2), (1, 3), (2, 4)], "exact")
    text = "The leaves are\n  picked by hand."
    # 'are picked' differs only in whitespace: true offsets of 'are\n  picked'
    spans, how = locate_excerpt(text, " are picked ")
    assert how == "whitespace" and spans == [(11, 23)]
    assert text[11:23] == "are\n  picked"
    assert locate_excerpt(text, "tea") == ([], "")


def test_closest_passage_points_at_the_near_miss():
    off, passage, ratio = closest_passage(DOC_A, "The leaves were picked by hand.")
    assert off == DOC_A.index("The leaves")
    assert passage == "The leaves are picked by hand"
    assert 0.8 < ratio < 1.0
    assert closest_passage(DOC_A, "!!!") == (-1, "", 0.0)


def write_jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return path


def test_plain_excerpts_are_located_with_true_offsets(folder, tmp_path):
    qpath = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"question": "How is tea picked?", "document": "tea.md", "excerpt": "The leaves are picked by hand."},
            {"question": "Where does coffee grow?", "excerpts": ["Coffee grows in the tropics."]},
            {"question_id": "green", "question": "How is green tea made?", "excerpt": "Green  tea is\nsteamed."},
        ],
    )
    docs = load_documents(folder)
    report = validate_questions(docs, read_questions(qpath))
    assert report.ok
    q = report.questions.set_index("question_id")
    assert q.loc["q1", "corpus_id"] == "tea.md"
    assert q.loc["q1", "references"] == [{"content": "The leaves are picked by hand.", "start_index": 20, "end_index": 50}]
    assert q.loc["q2", "corpus_id"] == "sub/coffee.txt"
    assert q.loc["q2", "references"][0]["start_index"] == 0
    ref = q.loc["green", "references"][0]
    assert (ref["start_index"], ref["end_index"]) == (51, 72)
    assert ref["content"] == "Green tea is steamed."
    assert [i.kind for i in report.warnings] == ["whitespace_match"]


def test_every_problem_is_reported(folder, tmp_path):
    qpath = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"question": "missing doc", "document": "te.md", "excerpt": "Tea"},
            {"question": "near miss", "document": "tea.md", "excerpt": "The leaves were picked by hand."},
            {"question": "twice", "excerpt": "picked by hand"},
            {"question": "", "document": "tea.md", "excerpt": "Tea grows"},
            {"question": "ok", "document": "tea", "excerpt": "Tea grows"},
        ],
    )
    report = validate_questions(load_documents(folder), read_questions(qpath))
    wrong_doc = validate_questions(
        load_documents(folder), [{"question_id": "w", "question": "?", "document": "tea.md", "references": [{"content": "Coffee grows"}]}]
    )
    assert wrong_doc.errors[0].message.endswith("It occurs in sub/coffee.txt at (0, 12); check the question's document.")
    kinds = {(i.question_id, i.kind, i.severity) for i in report.issues}
    assert ("q1", "missing_document", "error") in kinds
    assert ("q2", "not_found", "error") in kinds
    assert ("q3", "ambiguous_document", "warning") in kinds
    assert ("q4", "empty_question", "error") in kinds
    assert not report.ok and len(report.errors) == 3
    missing = next(i for i in report.issues if i.kind == "missing_document")
    assert "Closest: tea.md" in missing.message
    near = next(i for i in report.issues if i.kind == "not_found")
    assert near.closest_offset == 20 and near.closest_text == "The leaves are picked by hand"
    assert near.line().startswith("ERROR q2 (row 2) excerpt 1 in tea.md: excerpt 'The leaves were picked by hand.' was not found; closest source text at offset 20")
    # q3 (a warning only) and q5 (document given as a stem) are usable
    assert list(report.questions["question_id"]) == ["q3", "q5"]
    assert report.questions.iloc[1]["corpus_id"] == "tea.md"
    assert report.lines()[-1] == "5 questions, 5 excerpts: 3 error(s) in 3 question(s), 1 warning(s); 2 question(s) usable."


def test_chroma_format_offsets_checked(folder, tmp_path):
    refs_ok = [{"content": "Tea grows on hills.", "start_index": 0, "end_index": 19}]
    refs_shifted = [{"content": "The leaves are picked by hand.", "start_index": 21, "end_index": 51}]
    refs_outside = [{"content": "x", "start_index": 5, "end_index": 500}]
    p = tmp_path / "chroma.csv"
    import csv

    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question", "references", "corpus_id"])
        w.writerow(["ok", json.dumps(refs_ok), "tea"])
        w.writerow(["shifted", json.dumps(refs_shifted), "tea.md"])
        w.writerow(["outside", json.dumps(refs_outside), "tea.md"])
    report = validate_questions(load_documents(folder), read_questions(p))
    kinds = [(i.question_id, i.kind) for i in report.errors]
    assert kinds == [("q2", "offset_mismatch"), ("q3", "out_of_range")]
    shifted = report.errors[0]
    assert "is at (20, 50)" in shifted.message and shifted.closest_offset == 20
    assert list(report.questions["question_id"]) == ["q1"]
    with pytest.raises(ValueError, match="2 problem"):
        load_questions(p, load_documents(folder))


def test_read_questions_errors(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text("question,excerpt\nWhat?,\n", encoding="utf-8")
    with pytest.raises(ValueError, match="row 1 .* has no excerpt"):
        read_questions(p)
    p.write_text("title,excerpt\nWhat?,x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no 'question' field"):
        read_questions(p)
    p.write_text("question_id,question,excerpt\na,What?,x\na,Why?,y\n", encoding="utf-8")
    with pytest.raises(ValueError, match="question_id 'a' is used by rows 1 and 2"):
        read_questions(p)
    t = tmp_path / "q.txt"
    t.write_text("x")
    with pytest.raises(ValueError, match="unknown suffix"):
        read_questions(t)
    j = tmp_path / "q.jsonl"
    j.write_text('{"question": "a", "excerpt": "b"}\n{oops\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        read_questions(j)


def test_yaml_questions_when_pyyaml_is_installed(folder, tmp_path):
    pytest.importorskip("yaml")
    p = tmp_path / "q.yaml"
    p.write_text("questions:\n  - question: How is tea picked?\n    document: tea.md\n    excerpts:\n      - picked by hand\n")
    report = validate_questions(load_documents(folder), read_questions(p))
    assert report.ok
    assert report.questions.iloc[0]["references"][0]["start_index"] == DOC_A.index("picked")
