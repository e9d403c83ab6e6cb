"""The book's status section (written from what is built) and the repository's citation and
reproduction notes."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from chunkwise import book

REPO = Path(__file__).resolve().parents[1]


def _write_notebook(path: Path, cells) -> Path:
    nb = new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path



def test_chapter_status_reports_every_toc_entry_from_what_is_built(tmp_path):
    root = tmp_path / "b"
    root.mkdir()
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n"
        "  - caption: One\n    chapters:\n      - file: generated/a\n      - file: notes\n"
        "  - caption: Two\n    chapters:\n      - file: generated/b\n        sections:\n"
        "          - file: generated/c\n",
        encoding="utf-8",
    )
    (root / "notes.md").write_text("# Notes\n", encoding="utf-8")
    a = _write_notebook(root / "generated" / "a.ipynb", [new_markdown_cell("Intro text\n# Chapter A\n"),
                                                        new_code_cell("1")])
    nb = nbformat.read(str(a), as_version=4)
    nb.metadata["papermill"] = {"start_time": "2026-12-01T21:15:43.217740+00:00", "duration": 125.4,
                                "parameters": {"n": 3, "mode": "robust"}, "exception": None}
    nbformat.write(nb, str(a))
    _write_notebook(root / "generated" / "b.ipynb", [new_markdown_cell("# Chapter B")])
    rows = book.chapter_status(root)
    assert [(r["file"], r["kind"], r["title"]) for r in rows] == [
        ("generated/a", "notebook", "Chapter A"),
        ("notes", "page", None),
        ("generated/b", "notebook", "Chapter B"),
        ("generated/c", "missing", None),
    ]
    assert rows[0]["executed"] == "2026-12-01T21:15:43.217740+00:00"
    assert rows[0]["duration_s"] == 125.4 and rows[0]["parameters"] == {"mode": "robust", "n": 3}
    assert rows[0]["failed"] is False and rows[2]["executed"] is None
    md = book.status_markdown(rows).splitlines()
    assert md[2] == "| {doc}`Chapter A <generated/a>` | executed | 2026-12-01 21:15 | 2 min | `mode`, `n` |"
    assert md[3] == "| {doc}`notes` | page | - | - | - |"
    assert md[4] == "| {doc}`Chapter B <generated/b>` | notebook, not executed by papermill | - | - | - |"
    assert md[5] == "| `generated/c` | not built: run `chunkwise run-notebooks --only c` | - | - | - |"
    out = book.write_status_page(root)
    assert out == root / "generated" / "status.md" and out.read_text(encoding="utf-8") == "\n".join(md) + "\n"
    with pytest.raises(FileNotFoundError, match="_toc.yml"):
        book.chapter_status(tmp_path / "nothing")
    (root / "_toc.yml").write_text("chapters: [\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid YAML"):
        book.chapter_status(root)


def test_intro_status_is_generated_from_the_toc():
    intro = (REPO / "book" / "intro.md").read_text(encoding="utf-8")
    assert "```{include} generated/status.md" in intro and "will follow" not in intro
    files = [r["file"] for r in book.chapter_status(REPO / "book")]
    assert files == [f"generated/{Path(n).stem}" for n in book.NOTEBOOKS]


def test_citation_file_and_reproduction_notes_cover_the_book():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    # CFF 1.2.0's required keys, and each reference's (authors, title, type).
    assert cff["cff-version"] == "1.2.0"
    assert all(cff.get(k) for k in ("message", "title", "authors"))
    refs = cff["references"]
    assert all(r.get("authors") and r.get("title") and r.get("type") for r in refs)
    ids = {i["value"] for r in refs for i in r.get("identifiers", [])}
    assert ids == {"arXiv:2405.16933", "arXiv:2401.17043"}  # PG-RAG and CRUD-RAG
    assert {"Evaluating Chunking Strategies for Retrieval",
            "Semantic Chunking for RAG: Methods, Trade-Offs, and Testing"} <= {r["title"] for r in refs}
    notes = (REPO / "REPRODUCING.md").read_text(encoding="utf-8")
    for name in book.NOTEBOOKS:  # every chapter has its row of needs and times
        assert f"(`{Path(name).stem}`)" in notes, name


def test_html_frame_carries_a_whole_page_in_srcdoc():
    import html

    page = '<!DOCTYPE html><html><head><style>body { margin: 0 }</style></head><body>"A" & <b>B</b></body></html>'
    frame = book.html_frame(page, height=420, title='cuts "1"')
    assert frame.startswith('<div><iframe title="cuts &quot;1&quot;" srcdoc="') and frame.endswith("</iframe></div>")
    srcdoc = frame.split('srcdoc="', 1)[1].split('" style=', 1)[0]
    assert '"' not in srcdoc and "<" not in srcdoc and html.unescape(srcdoc) == page
    assert 'style="width: 100%; height: 420px; border: 0;"' in frame
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="height must be a positive int"):
            book.html_frame(page, height=bad)
    with pytest.raises(ValueError, match="page must be an HTML string"):
        book.html_frame(b"<p>", height=10)
