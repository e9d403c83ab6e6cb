"""Issue 44: hostile inputs to the loaders and the splitter adapter (bugs 3-9 and 11, and the
'poor' loader messages). Each hostile file is built here, in ``tmp_path``."""

from __future__ import annotations

import os
import zlib

import pandas as pd
import pytest

from chunkwise.chunkers.adapters import OffsetRecoveryError, adapt_chunker, locate_pieces
from chunkwise.datasets.loaders import read_document
from chunkwise.datasets.local import load_documents, read_questions, validate_questions

from fakes import make_docx, text_pdf


def skipped(docs) -> dict[str, str]:
    return {s.name: s.reason for s in docs.skipped}


def pdf_from_objects(objs: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of the given objects (1 0 obj is the catalog), cross-reference table computed."""
    out = b"%PDF-1.7\n"
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, trailer, xref)
    return out


def page_objects(content: bytes, stream_dict: bytes = b"") -> list[bytes]:
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d %s>>\nstream\n" % (len(content), stream_dict) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]


def aes256_pdf() -> bytes:
    """A PDF encrypted with AES-256 (/V 5 /R 6) and an empty user password, as Acrobat writes for
    'restrict editing'. pypdf's writer needs the cryptography package to write one, so the Encrypt
    dictionary is written by hand: pypdf needs cryptography to open it at all."""
    try:
        import cryptography  # noqa: F401
    except ImportError:
        pass
    else:  # pragma: no cover - with cryptography pypdf may open it; the test is about its absence
        pytest.skip("cryptography is installed: pypdf can try AES-256 itself")
    objs = page_objects(b"BT /F1 12 Tf 72 720 Td (Secret words.) Tj ET")
    objs.append(
        b"<< /Filter /Standard /V 5 /R 6 /Length 256 /P -4 /O <" + b"00" * 48 + b"> /U <" + b"00" * 48
        + b"> /OE <" + b"00" * 32 + b"> /UE <" + b"00" * 32 + b"> /Perms <" + b"00" * 16
        + b"> /CF << /StdCF << /CFM /AESV3 /AuthEvent /DocOpen /Length 32 >> >> /StmF /StdCF /StrF /StdCF >>"
    )
    return pdf_from_objects(objs, b"/Encrypt 6 0 R /ID [<" + b"11" * 16 + b"> <" + b"11" * 16 + b">] ")


def inflating_pdf() -> bytes:
    """A PDF whose content stream is 78 kB compressed and 80 MB inflated: past pypdf's
    zlib_maximum_output_length (75 MB), so pypdf raises LimitReachedError reading the page."""
    content = zlib.compress(b"BT /F1 12 Tf 72 720 Td (Boom) Tj ET" + b" " * 80_000_000, 9)
    return pdf_from_objects(page_objects(content, b"/Filter /FlateDecode "))


def vmerge_docx(path):
    """A .docx whose first table row has a cell marked as the continuation of a vertical merge
    (no row above it): python-docx's ``row.cells`` raises 'no tr above topmost tr'."""
    import docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    d = docx.Document()
    d.add_paragraph("Before the table.")
    t = d.add_table(rows=2, cols=2)
    t.cell(0, 0).text, t.cell(0, 1).text = "", "pH"
    t.cell(1, 0).text, t.cell(1, 1).text = "lime", "6.5"
    vm = OxmlElement("w:vMerge")
    vm.set(qn("w:val"), "continue")
    t.cell(0, 0)._tc.get_or_add_tcPr().append(vm)
    d.add_paragraph("After the table.")
    d.save(path)


def good_folder(path):
    path.mkdir(parents=True, exist_ok=True)
    (path / "soil.md").write_text("Soil needs lime in autumn.\n", encoding="utf-8")
    (path / "report.pdf").write_bytes(text_pdf(["Water at dawn."]))
    make_docx(path / "notes.docx")
    return path


# --------------------------------------------------------------------------------------
# bug 3: a chunkwise report inside the documents folder
# --------------------------------------------------------------------------------------


def test_bug3_a_chunkwise_report_in_the_documents_folder_is_not_read_as_a_document(tmp_path):
    from chunkwise.evaluation.grid import GridConfig, run_grid

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Kale wants 45 cm. Beans climb the fence.", encoding="utf-8")
    (folder / "b.txt").write_text("Leeks need deep soil.", encoding="utf-8")
    (folder / "mine.html").write_text("<html><body><p>My own page about chunkwise reports.</p></body></html>")
    docs = load_documents(folder)
    q = pd.DataFrame({"question_id": ["Q1"], "question": ["beans fence?"], "corpus_id": ["a.txt"],
                      "references": [[{"start_index": 18, "end_index": 40}]]})
    res = run_grid(docs, q, GridConfig(chunkers=["Sentence:8"], retrievers=["bm25"], top_k=[1]),
                   cache_dir=tmp_path / "cache", show_progress=False)
    from chunkwise.figures import write_report

    paths = write_report(res, folder / "chunkwise_report", None, docs)  # `evaluate --docs .` run from inside the folder
    assert {"html", "boundaries"} <= set(paths)
    again = load_documents(folder)  # the second run
    assert set(again) == {"a.txt", "b.txt", "mine.html"}
    reasons = skipped(again)
    for page in ("chunkwise_report/report.html", "chunkwise_report/boundaries.html"):
        assert reasons[page].startswith("is a report written by chunkwise"), reasons[page]
        assert "--out" in reasons[page]
    assert 'name="generator" content="chunkwise' in paths["html"].read_text(encoding="utf-8")
    assert 'name="generator" content="chunkwise' in paths["boundaries"].read_text(encoding="utf-8")


def test_bug3_pages_chunkwise_wrote_before_the_generator_tag_are_skipped_too(tmp_path):
    from chunkwise.figures import GENERATOR_META, chunk_boundaries_html

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Kale wants 45 cm.", encoding="utf-8")
    page = chunk_boundaries_html("Kale wants 45 cm.", {"Sentence": [(0, 17)]}, [(0, 4)], title="a.txt")
    (folder / "old_boundaries.html").write_text(page.replace(GENERATOR_META, ""), encoding="utf-8")
    (folder / "generated.htm").write_text(
        "<html><head><meta content='chunkwise 0.0.9' name=generator></head><body>x</body></html>")
    reasons = skipped(load_documents(folder))
    assert reasons["old_boundaries.html"].startswith("is a report written by chunkwise")
    assert reasons["generated.htm"].startswith("is a report written by chunkwise")


# --------------------------------------------------------------------------------------
# bugs 4, 5, 6: one bad PDF or .docx does not stop the folder
# --------------------------------------------------------------------------------------


def test_bug4_an_aes256_pdf_without_cryptography_is_listed_as_skipped(tmp_path):
    folder = good_folder(tmp_path / "docs")
    (folder / "locked.pdf").write_bytes(aes256_pdf())
    docs = load_documents(folder)
    assert set(docs) == {"soil.md", "report.pdf", "notes.docx"}
    reason = skipped(docs)["locked.pdf"]
    assert reason.startswith("is an encrypted PDF (AES) that pypdf can open only with the cryptography")
    assert "pip install cryptography" in reason
    assert "\n" not in reason


def test_bug5_a_pdf_past_pypdfs_inflation_limit_is_listed_as_skipped(tmp_path):
    folder = good_folder(tmp_path / "docs")
    (folder / "bomb.pdf").write_bytes(inflating_pdf())
    docs = load_documents(folder)
    assert set(docs) == {"soil.md", "report.pdf", "notes.docx"}
    reason = skipped(docs)["bomb.pdf"]
    assert reason.startswith("is not a readable PDF (LimitReachedError: Limit reached while decompressing")
    assert "\n" not in reason


def test_bug6_a_docx_with_a_vertical_merge_in_its_first_row_loads(tmp_path):
    folder = good_folder(tmp_path / "docs")
    vmerge_docx(folder / "merged.docx")
    docs = load_documents(folder)
    assert set(docs) == {"soil.md", "report.pdf", "notes.docx", "merged.docx"}
    assert docs["merged.docx"] == "Before the table.\n\n | pH\nlime | 6.5\n\nAfter the table."
    assert docs.skipped == []


def test_bug6_any_docx_failure_is_a_skip_naming_the_file(tmp_path, monkeypatch):
    """A .docx that python-docx opens but the extraction cannot walk is skipped with the error, not
    raised through the folder (the walk is stubbed to fail as python-docx's row.cells did)."""
    from chunkwise.datasets import loaders

    folder = good_folder(tmp_path / "docs")

    def boom(*a, **k):
        raise ValueError("no tr above topmost tr in w:tbl")

    monkeypatch.setattr(loaders, "_docx_blocks", boom)
    docs = load_documents(folder)
    assert set(docs) == {"soil.md", "report.pdf"}
    assert skipped(docs)["notes.docx"] == (
        "could not be converted to text (ValueError: no tr above topmost tr in w:tbl); "
        "save it again from Word or as PDF and retry.")


# --------------------------------------------------------------------------------------
# bug 7: a file name that is not valid UTF-8
# --------------------------------------------------------------------------------------


def test_bug7_a_file_name_with_a_non_utf8_byte_is_loaded_under_a_printable_name(tmp_path, capsys):
    from chunkwise.cli import main

    folder = tmp_path / "docs"
    folder.mkdir()
    raw = os.path.join(os.fsdecode(bytes(folder)), os.fsdecode(b"caf\xe9.txt"))
    try:
        with open(raw, "w", encoding="utf-8") as f:
            f.write("Tea grows on hills. The leaves are picked by hand.")
    except (UnicodeEncodeError, OSError):  # pragma: no cover - a file system that refuses such names
        pytest.skip("this file system does not store non-UTF-8 file names")
    (folder / "ok.txt").write_text("Coffee grows in the tropics.", encoding="utf-8")
    docs = load_documents(folder)
    assert set(docs) == {"caf\\xe9.txt", "ok.txt"}
    assert docs.renamed == {"caf\\xe9.txt": repr(os.fsdecode(b"caf\xe9.txt"))}
    for name in docs:
        name.encode("utf-8")  # every name prints and serialises
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Where does tea grow?", "excerpt": "Tea grows on hills."}\n'
                 '{"question": "Picked how?", "document": "caf\\\\xe9.txt", "excerpt": "picked by hand"}\n',
                 encoding="utf-8")
    report = validate_questions(docs, read_questions(q))
    assert report.ok and list(report.questions["corpus_id"]) == ["caf\\xe9.txt", "caf\\xe9.txt"]
    assert main(["questions", "validate", "--docs", str(folder), "--questions", str(q)]) == 0
    assert "surrogates" not in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# bug 8: nested HTML tables
# --------------------------------------------------------------------------------------


def test_bug8_a_nested_html_tables_cells_appear_once(tmp_path):
    p = tmp_path / "nested.html"
    p.write_text(
        "<html><body><p>Prices.</p><table>"
        "<tr><th>crop</th><th>detail</th></tr>"
        "<tr><td>kale</td><td><table><tr><td>seed</td><td>2 EUR</td></tr><tr><td>plant</td><td>5 EUR</td></tr>"
        "</table></td></tr>"
        "<tbody><tr><td>leek</td><td>3 EUR</td></tr></tbody>"
        "</table><p>End.</p></body></html>",
        encoding="utf-8",
    )
    text = read_document(p)
    for cell in ("seed", "2 EUR", "plant", "5 EUR", "kale", "leek"):
        assert text.count(cell) == 1, (cell, text)
    assert text == "Prices.\n\ncrop | detail\nkale | seed | 2 EUR\nplant | 5 EUR\nleek | 3 EUR\n\nEnd."


# --------------------------------------------------------------------------------------
# bug 9: a splitter that collapses whitespace
# --------------------------------------------------------------------------------------


def test_bug9_a_whitespace_collapsing_splitter_is_placed_even_when_a_piece_recurs_verbatim_later():
    text = "Rent is  due monthly. Rent is due monthly. Fees apply."

    def collapse(t):  # sentence splitter that normalises spaces, as many do
        return [" ".join(s.split()) + "." for s in t.split(".") if s.strip()]

    assert collapse(text) == ["Rent is due monthly.", "Rent is due monthly.", "Fees apply."]
    chunks = adapt_chunker(collapse, name="collapse").split(text)
    assert [(c.start, c.end) for c in chunks] == [(0, 21), (22, 42), (43, 54)]
    assert [c.text for c in chunks] == ["Rent is  due monthly.", "Rent is due monthly.", "Fees apply."]


def test_bug9_a_piece_out_of_order_is_blamed_as_out_of_order_not_as_rewritten():
    with pytest.raises(OffsetRecoveryError, match=r"chunk 1 \('alpha'\) occurs only before character 7 \(at 0\)"):
        locate_pieces("alpha beta", ["beta", "alpha"], who="backwards")


# --------------------------------------------------------------------------------------
# bug 11: UTF-16 text
# --------------------------------------------------------------------------------------


def test_bug11_utf16_text_is_read_with_encoding_utf16(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "wide.txt").write_bytes("Tea grows on hills.\r\nCafé au lait.".encode("utf-16"))
    (folder / "ok.md").write_text("plain", encoding="utf-8")
    assert load_documents(folder, encoding="utf-16")["wide.txt"] == (
        "Tea grows on hills.\nCafé au lait.")
    assert read_document(folder / "wide.txt", encoding="UTF16") == "Tea grows on hills.\nCafé au lait."
    # without --encoding: not "binary"; since issue 59 the byte-order mark names the encoding, per file
    assert load_documents(folder)["wide.txt"] == "Tea grows on hills.\nCafé au lait."
    # a real binary file is still refused as binary under a UTF-16 encoding
    (folder / "bin.txt").write_bytes(b"\x00\x00\x00\x01\x02\x03")
    assert "binary" in skipped(load_documents(folder, encoding="utf-16"))["bin.txt"]


# --------------------------------------------------------------------------------------
# poor: links, unreadable files, .docx content dropped without a word
# --------------------------------------------------------------------------------------


def test_symlinked_folders_and_broken_links_are_listed_as_skipped(tmp_path):
    folder = good_folder(tmp_path / "docs")
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "far.txt").write_text("far away", encoding="utf-8")
    try:
        (folder / "linked").symlink_to(other, target_is_directory=True)
        (folder / "gone.txt").symlink_to(tmp_path / "nothing.txt")
    except (OSError, NotImplementedError):  # pragma: no cover - no symlinks here
        pytest.skip("symbolic links are not available")
    (folder / "also.txt").symlink_to(other / "far.txt")  # a link to a file is read
    docs = load_documents(folder)
    assert docs["also.txt"] == "far away"
    reasons = skipped(docs)
    assert reasons["linked"].startswith("is a link to a folder")
    assert reasons["gone.txt"].startswith("is a broken link") and "nothing.txt" in reasons["gone.txt"]


def docx_with_nested_table_sdt_and_insertion(path):
    import docx
    from docx.oxml import parse_xml

    d = docx.Document()
    d.add_paragraph("Intro.")
    outer = d.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "crop"
    inner = outer.cell(0, 1).add_table(rows=1, cols=2)
    inner.cell(0, 0).text, inner.cell(0, 1).text = "kale", "45 cm"
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    body = d.element.body
    sect = body[-1]
    sect.addprevious(parse_xml(
        f'<w:sdt {w}><w:sdtPr/><w:sdtContent><w:p><w:r><w:t>Inside a content control.</w:t></w:r></w:p>'
        '</w:sdtContent></w:sdt>'))
    sect.addprevious(parse_xml(
        f'<w:p {w}><w:r><w:t xml:space="preserve">Water </w:t></w:r>'
        '<w:ins w:id="1" w:author="a" w:date="2024-01-01T00:00:00Z"><w:r><w:t xml:space="preserve">twice </w:t></w:r></w:ins>'
        '<w:del w:id="2" w:author="a" w:date="2024-01-01T00:00:00Z"><w:r><w:delText>once </w:delText></w:r></w:del>'
        '<w:sdt><w:sdtContent><w:r><w:t>weekly</w:t></w:r></w:sdtContent></w:sdt>'
        '<w:hyperlink><w:r><w:t>.</w:t></w:r></w:hyperlink></w:p>'))
    d.save(path)


def test_docx_nested_tables_content_controls_and_tracked_insertions_are_extracted(tmp_path):
    docx_with_nested_table_sdt_and_insertion(tmp_path / "rich.docx")
    text = read_document(tmp_path / "rich.docx")
    assert text == ("Intro.\n\ncrop | kale | 45 cm\n\nInside a content control.\n\nWater twice weekly.")
    # the plain document of the loader tests is unchanged
    make_docx(tmp_path / "notes.docx")
    assert read_document(tmp_path / "notes.docx") == (
        "Raised beds\n\nFill the beds with compost in March.\n\ncrop | spacing\nkale | 45 cm\n\nWater weekly.")


def test_a_docx_merged_cell_is_read_once(tmp_path):
    import docx

    d = docx.Document()
    t = d.add_table(rows=2, cols=3)
    a = t.cell(0, 0).merge(t.cell(0, 1))  # horizontal merge
    a.text = "wide"
    t.cell(0, 2).text = "x"
    b = t.cell(1, 2).merge(t.cell(0, 2))  # vertical merge: the text stays in the top cell
    b.text = "tall"
    t.cell(1, 0).text, t.cell(1, 1).text = "p", "q"
    d.save(tmp_path / "m.docx")
    assert read_document(tmp_path / "m.docx") == "wide | tall\np | q |"


# --------------------------------------------------------------------------------------
# poor: Ctrl-C during evaluate
# --------------------------------------------------------------------------------------


def _evaluate_args(tmp_path):
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "data" / "examples" / "garden"
    cfg = tmp_path / "grid.toml"
    cfg.write_text('chunkers = ["TokenText:50"]\nretrievers = ["bm25"]\ntop_k = [1]\nn_resamples = 50\n')
    return ["evaluate", "--docs", str(example / "docs"), "--questions", str(example / "questions.jsonl"),
            "--config", str(cfg), "--out", str(tmp_path / "report"), "--no-progress"]


def test_ctrl_c_during_the_grid_is_one_line_saying_what_is_kept(tmp_path, capsys, monkeypatch):
    from chunkwise.cli import main
    from chunkwise.evaluation import grid

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setenv("CHUNKWISE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(grid, "run_grid", interrupted)
    assert main(_evaluate_args(tmp_path)) == 130
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last == (f"chunkwise: interrupted while chunking, embedding and scoring: the chunks and embeddings "
                    f"finished so far are cached in {tmp_path / 'cache'}; no report was written. Rerun the same "
                    "command to resume from the cache.")
    assert "Traceback" not in err and not (tmp_path / "report").exists()


def test_ctrl_c_while_writing_the_report_says_it_may_be_incomplete(tmp_path, capsys, monkeypatch):
    from chunkwise import figures
    from chunkwise.cli import main

    def interrupted(result, out, *a, **k):
        out.mkdir(parents=True, exist_ok=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "write_report", interrupted)
    assert main(_evaluate_args(tmp_path)) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"chunkwise: interrupted while writing the report: {tmp_path / 'report'} may be incomplete")
    assert last.endswith("rerun the same command to write it again from the cache.")
