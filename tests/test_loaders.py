"""Document loaders (chunkwise.datasets.loaders): PDF, Word and HTML beside plain text, and every
skipped file named with its reason."""

from __future__ import annotations

import pytest

from chunkwise.datasets.loaders import read_document
from chunkwise.datasets.local import load_documents, read_questions, validate_questions
from fakes import make_docx, text_pdf


def two_page_pdf(path):
    """Two text pages, merged with pypdf from two one-page PDFs."""
    import io

    from pypdf import PdfReader, PdfWriter

    w = PdfWriter()
    for lines in (["Soil needs lime."], ["Water at dawn."]):
        w.add_page(PdfReader(io.BytesIO(text_pdf(lines))).pages[0])
    with open(path, "wb") as f:
        w.write(f)


def blank_pdf(path, password=None):
    from pypdf import PdfWriter

    w = PdfWriter()
    w.add_blank_page(width=200, height=200)
    if password:
        w.encrypt(user_password=password, owner_password=password)
    with open(path, "wb") as f:
        w.write(f)


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "soil.md").write_text("# Soil\n\nSoil needs lime in autumn.\n")
    (tmp_path / "report.pdf").write_bytes(text_pdf(["Soil needs lime.", "Water at dawn."]))
    two_page_pdf(tmp_path / "pages.pdf")
    make_docx(tmp_path / "notes.docx")
    (tmp_path / "page.html").write_text(
        "<html><head><style>p {color: red}</style><script>var x = 1;</script></head>"
        "<body><nav><a href='/'>Home</a> | <a href='/tools'>Tools</a></nav><h1>Tools</h1><p>Clean the <b>spade</b> after use.</p><p>Oil it\n   monthly.</p>"
        "<table><tr><th>tool</th><th>oil</th></tr><tr><td>spade</td><td>monthly</td></tr></table></body></html>"
    )
    (tmp_path / "scan.pdf").write_bytes(b"")  # replaced below
    blank_pdf(tmp_path / "scan.pdf")
    blank_pdf(tmp_path / "locked.pdf", password="secret")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "data.xlsx").write_bytes(b"\x00")
    return tmp_path


def test_each_format_gives_its_text(folder):
    docs = load_documents(folder)
    assert docs["report.pdf"] == "Soil needs lime.\nWater at dawn."
    assert docs["pages.pdf"] == "Soil needs lime.\n\nWater at dawn."  # pages joined by a blank line
    assert docs["notes.docx"] == "Raised beds\n\nFill the beds with compost in March.\n\ncrop | spacing\nkale | 45 cm\n\nWater weekly."
    # inline tags stay in their line, blocks become paragraphs, table rows "cell | cell" lines
    assert docs["page.html"] == "Tools\n\nClean the spade after use.\n\nOil it\nmonthly.\n\ntool | oil\nspade | monthly"
    assert docs["soil.md"] == "# Soil\n\nSoil needs lime in autumn.\n"
    assert docs.kinds == {"notes.docx": ".docx", "page.html": ".html", "pages.pdf": ".pdf", "report.pdf": ".pdf",
                          "soil.md": ".md"}


def test_every_skipped_file_is_named_with_its_reason(folder):
    docs = load_documents(folder)
    reasons = {s.name: s.reason for s in docs.skipped}
    assert set(reasons) == {"scan.pdf", "locked.pdf", "broken.docx", "empty.txt", "data.xlsx"}
    assert reasons["scan.pdf"].startswith("has no text layer (1 page(s)") and "OCR" in reasons["scan.pdf"]
    assert reasons["locked.pdf"].startswith("is an encrypted PDF that needs a password")
    assert reasons["broken.docx"].startswith("is not a readable Word .docx file")
    assert reasons["empty.txt"] == "is empty."
    assert reasons["data.xlsx"].startswith("has an unknown type '.xlsx'")


def test_questions_about_pdf_and_word_files_validate(folder, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "When water?", "document": "report.pdf", "excerpt": "Water at dawn."}\n'
                 '{"question": "Kale spacing?", "document": "notes.docx", "excerpt": "kale | 45 cm"}\n')
    docs = load_documents(folder)
    report = validate_questions(docs, read_questions(q))
    assert report.ok
    refs = [r[0] for r in report.questions["references"]]
    assert [docs[d][r["start_index"]:r["end_index"]] for d, r in zip(report.questions["corpus_id"], refs)] == [
        "Water at dawn.", "kale | 45 cm"]


def test_cli_says_what_it_read_and_skipped(folder, tmp_path, capsys):
    from chunkwise.cli import main

    q = tmp_path.parent / "q.jsonl"
    q.write_text('{"question": "When water?", "document": "report.pdf", "excerpt": "Water at dawn."}\n')
    assert main(["questions", "validate", "--docs", str(folder), "--questions", str(q)]) == 0
    err = capsys.readouterr().err
    assert "5 document(s) (1 .docx, 1 .html, 1 .md, 2 .pdf)" in err and "5 file(s) skipped" in err
    assert "skipped: locked.pdf is an encrypted PDF" in err


def test_one_named_file_of_unknown_type_is_read_as_text(tmp_path):
    p = tmp_path / "notes.log"
    p.write_text("plain words")
    assert read_document(p, unknown_as_text=True) == "plain words"
    assert load_documents(p) == {"notes.log": "plain words"}


def test_pdf_page_map_and_page_labels_in_the_report(tmp_path):
    """issue 44 view: every PDF excerpt and retrieved chunk carries its page in report.html."""
    import io

    from pypdf import PdfReader, PdfWriter

    from chunkwise.datasets.loaders import PagedText, page_label
    from chunkwise.evaluation.grid import GridConfig, run_grid

    w = PdfWriter()
    for lines in (["Soil needs lime."], ["Water at dawn."], ["Kale wants space."]):
        w.add_page(PdfReader(io.BytesIO(text_pdf(lines))).pages[0])
    with open(tmp_path / "guide.pdf", "wb") as f:
        w.write(f)
    (tmp_path / "note.txt").write_text("Beans climb.")
    docs = load_documents(tmp_path)
    # "Soil needs lime." (16) + blank line -> page 2 at 18, "Water at dawn." (14) + 2 -> page 3 at 34
    assert docs["guide.pdf"] == "Soil needs lime.\n\nWater at dawn.\n\nKale wants space."
    assert docs.page_starts == {"guide.pdf": [0, 18, 34]} and type(docs["guide.pdf"]) is str
    assert page_label([0, 18, 34], 18, 32) == "p. 2" and page_label([0, 18, 34], 10, 20) == "pp. 1-2"
    assert page_label([0, 18, 34], 34, 51) == "p. 3"
    # universal newlines shift later pages back by one per "\r\n" before them
    assert PagedText("a\nb", [0, 2]).page_starts == [0, 2]
    report = validate_questions(docs, [{"question_id": "q1", "question": "What does kale want?",
                                        "references": [{"content": "Kale wants space."}]},
                                       {"question_id": "q2", "question": "When to water?",
                                        "references": [{"content": "Water at dawn."}]}])
    cfg = GridConfig(chunkers=["Sentence:8"], retrievers=["bm25"], top_k=[1])
    res = run_grid(docs, report.questions, cfg, cache_dir=tmp_path / "c", show_progress=False)
    from chunkwise.figures import write_report

    paths = write_report(res, tmp_path / "r", None, docs)
    page = paths["html"].read_text(encoding="utf-8")
    assert "document guide.pdf (p. 3)" in page and "document guide.pdf (p. 2)" in page
    assert "#1 guide.pdf p. 3 [34, 51)" in page


def test_pdf_text_with_crlf_keeps_page_starts_on_the_normalised_text(tmp_path, monkeypatch):
    from chunkwise.datasets import loaders

    class FakePage:
        def __init__(self, text):
            self.text = text

        def extract_text(self):
            return self.text

    class FakeReader:
        is_encrypted = False

        def __init__(self, path):
            self.pages = [FakePage("a\r\nb"), FakePage("c\r\n\r\nd"), FakePage("e")]

    import pypdf

    monkeypatch.setattr(pypdf, "PdfReader", FakeReader)
    (tmp_path / "x.pdf").write_bytes(b"%PDF-1.4")
    text = loaders.read_document(tmp_path / "x.pdf")
    assert str(text) == "a\nb\n\nc\n\nd\n\ne"
    assert text.page_starts == [0, 5, 11]
    assert [str(text)[s] for s in text.page_starts] == ["a", "c", "e"]
