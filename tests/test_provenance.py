"""Provenance of a chapter's run and the published run (issue 46): fingerprints, staleness,
publishing, and ``build-book --published``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from chunkwise import book, cli, provenance

REPO = Path(__file__).resolve().parents[1]


def _notebook(path: Path, code: list[str], title: str = "# Chapter") -> Path:
    nb = new_notebook()
    nb.cells = [new_markdown_cell(title), *[new_code_cell(c) for c in code]]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _package(root: Path) -> Path:
    """src/chunkwise with a -> (relative, inside a function) b, and c imported by nobody."""
    pkg = root / "src" / "chunkwise"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.1.0"\n', encoding="utf-8")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n    return b.g()\n", encoding="utf-8")
    (pkg / "sub" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "sub" / "b.py").write_text("def g():\n    return 1\n", encoding="utf-8")
    (pkg / "c.py").write_text("X = 1\n", encoding="utf-8")
    return root / "src"


def test_chapter_modules_follow_imports_through_the_package(tmp_path):
    src = _package(tmp_path)
    nb = _notebook(tmp_path / "nb.ipynb", ["import numpy as np\nfrom chunkwise.a import f", "%matplotlib inline\nf()"])
    assert provenance.chapter_modules(nb, src) == [
        "chunkwise/__init__.py", "chunkwise/a.py", "chunkwise/sub/__init__.py", "chunkwise/sub/b.py",
    ]


def test_code_cell_hashes_skip_papermills_injected_cell(tmp_path):
    source = _notebook(tmp_path / "s.ipynb", ["x = 1", "print(x)"])
    executed = nbformat.read(str(source), as_version=4)
    executed.cells.insert(2, new_code_cell("x = 2", metadata={"tags": ["injected-parameters"]}))
    nbformat.write(executed, str(tmp_path / "e.ipynb"))
    assert provenance.code_cell_hashes(source) == provenance.code_cell_hashes(tmp_path / "e.ipynb")
    assert len(provenance.code_cell_hashes(source)) == 2


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    _package(root)
    nb = _notebook(root / "notebooks" / "ch.ipynb", ["n = 1", "from chunkwise.a import f", "print(f())"])
    cells = nbformat.read(str(nb), as_version=4)
    cells.cells[1].metadata["tags"] = ["parameters"]
    nbformat.write(cells, str(nb))
    return root


def test_stale_reasons_name_cells_and_modules_that_changed(tmp_path):
    root = _repo(tmp_path)
    record = provenance.run_provenance(root / "notebooks" / "ch.ipynb", root)
    assert record["notebook"] == "notebooks/ch.ipynb"
    assert record["commit"] is None  # not a git repository: recorded as unknown, not invented
    assert provenance.stale_reasons(record, root) == []

    # a module nobody imports, and prose: not a reason
    (root / "src" / "chunkwise" / "c.py").write_text("X = 2\n", encoding="utf-8")
    nb = nbformat.read(str(root / "notebooks" / "ch.ipynb"), as_version=4)
    nb.cells[0].source = "# Chapter, retitled"
    nbformat.write(nb, str(root / "notebooks" / "ch.ipynb"))
    assert provenance.stale_reasons(record, root) == []

    nb.cells[3].source = "print(f() + 1)"
    nbformat.write(nb, str(root / "notebooks" / "ch.ipynb"))
    (root / "src" / "chunkwise" / "sub" / "b.py").write_text("def g():\n    return 2\n", encoding="utf-8")
    assert provenance.stale_reasons(record, root) == [
        "code cell 3 of notebooks/ch.ipynb changed",
        "changed since: src/chunkwise/sub/b.py",
    ]


def test_a_record_without_fingerprints_is_refused_with_what_to_do():
    with pytest.raises(provenance.PublishError, match="rerun the chapter"):
        provenance.stale_reasons({"commit": "abc"}, REPO)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _run_repo(tmp_path: Path, monkeypatch) -> Path:
    """A git repository with one registered chapter, committed, with a tiny book."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = _repo(tmp_path)
    (root / "pyproject.toml").write_text('[project]\nname = "chunkwise"\n', encoding="utf-8")
    bookdir = root / "book"
    bookdir.mkdir()
    (bookdir / "_config.yml").write_text(
        "title: tiny\nonly_build_toc_files: true\nexecute:\n  execute_notebooks: 'off'\n", encoding="utf-8")
    (bookdir / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: generated/ch\n",
                                      encoding="utf-8")
    (bookdir / "intro.md").write_text("# Tiny book\n", encoding="utf-8")
    # the notebook imports the tiny package: put it first on the kernel's path
    monkeypatch.setenv("PYTHONPATH", str(root / "src"))
    monkeypatch.setenv("CHUNKWISE_ROOT", str(root))
    monkeypatch.setattr(book, "NOTEBOOKS", ("ch.ipynb",))
    _git(root, "init", "-q")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "tiny")
    return root


def test_a_run_records_its_commit_and_a_stale_published_run_is_flagged(tmp_path, monkeypatch, capsys):
    root = _run_repo(tmp_path, monkeypatch)
    run = tmp_path / "run"
    book.execute_notebook(root / "notebooks" / "ch.ipynb", {}, run, progress_bar=False)
    record = json.loads((run / "results" / "runs" / "ch.json").read_text(encoding="utf-8"))
    prov = record["provenance"]
    assert prov["commit"] == _git(root, "rev-parse", "HEAD") and prov["dirty"] is False
    assert prov["machine"]["cores"] >= 1
    assert sorted(prov["modules"]) == ["chunkwise/__init__.py", "chunkwise/a.py",
                                       "chunkwise/sub/__init__.py", "chunkwise/sub/b.py"]

    assert cli.main(["publish", str(run)]) == 0
    published = root / "book" / "published"
    assert (published / "ch.ipynb").is_file() and (published / "results" / "runs" / "ch.json").is_file()

    # unchanged source: the page states its run, no banner
    assert provenance.stage_published(root / "book", root) == {"ch": []}
    page = nbformat.read(str(root / "book" / "generated" / "ch.ipynb"), as_version=4)
    note = page.cells[1]
    assert provenance.PROVENANCE_TAG in note.metadata["tags"]
    assert prov["commit"][:10] in note.source and "default parameters" in note.source
    assert "older than" not in note.source

    # the code the chapter calls changes: the banner names it, and staging twice keeps one note
    (root / "src" / "chunkwise" / "a.py").write_text("def f():\n    return 3\n", encoding="utf-8")
    assert provenance.stage_published(root / "book", root) == {
        "ch": ["changed since: src/chunkwise/a.py", "no longer imported: src/chunkwise/sub/__init__.py, "
               "src/chunkwise/sub/b.py"]}
    page = nbformat.read(str(root / "book" / "generated" / "ch.ipynb"), as_version=4)
    notes = [c for c in page.cells if provenance.PROVENANCE_TAG in c.metadata.get("tags", [])]
    assert len(notes) == 1 and "published run is older than this source" in notes[0].source
    assert "src/chunkwise/a.py" in notes[0].source


def test_publish_refuses_a_profile_run_and_uncommitted_changes(tmp_path, monkeypatch, capsys):
    root = _run_repo(tmp_path, monkeypatch)
    run = tmp_path / "run"
    nb = root / "notebooks" / "ch.ipynb"
    cells = nbformat.read(str(nb), as_version=4)
    cells.cells[3].source = "print(f(), 'edited')"
    nbformat.write(cells, str(nb))
    # uncommitted: the notebook now differs from HEAD
    book.execute_notebook(nb, {}, run, progress_bar=False)
    assert cli.main(["publish", str(run)]) == 1
    assert "uncommitted changes" in capsys.readouterr().err
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "edited")
    book.execute_notebook(nb, {"n": 2}, run, progress_bar=False)
    assert cli.main(["publish", str(run)]) == 1
    assert "ran with parameters ['n']" in capsys.readouterr().err
    assert not (root / "book" / "published").exists()
    assert cli.main(["publish", str(tmp_path / "nowhere")]) == 1
    assert "run-notebooks --only ch" in capsys.readouterr().err


def test_build_book_published_builds_without_executing(tmp_path, monkeypatch, capsys):
    pytest.importorskip("jupyter_book", reason="the book extra is not installed")
    root = _run_repo(tmp_path, monkeypatch)
    shutil.copytree(REPO / "data" / "findings", root / "data" / "findings")  # the findings page's registry
    run = tmp_path / "run"
    book.execute_notebook(root / "notebooks" / "ch.ipynb", {}, run, progress_bar=False)
    assert cli.main(["publish", str(run)]) == 0
    (root / "src" / "chunkwise" / "sub" / "b.py").write_text("def g():\n    return 5\n", encoding="utf-8")
    assert cli.main(["build-book", "--no-strict", "--published", "--book", str(root / "book")]) == 0
    err = capsys.readouterr().err
    assert "ch: OLDER THAN THE SOURCE: changed since: src/chunkwise/sub/b.py" in err
    html = (root / "book" / "_build" / "html" / "generated" / "ch.html").read_text(encoding="utf-8")
    assert "published run is older than this source" in html
    # the stored output of the run (f() was 1 then), not a re-execution (5 now)
    assert "<pre>1\n</pre>" in html.replace("<span></span>", "")


def test_build_book_published_without_a_published_run_says_so(tmp_path, capsys):
    bookdir = tmp_path / "book"
    bookdir.mkdir()
    (bookdir / "_config.yml").write_text("title: t\n", encoding="utf-8")
    (bookdir / "_toc.yml").write_text("format: jb-book\nroot: intro\n", encoding="utf-8")
    pytest.importorskip("jupyter_book", reason="the book extra is not installed")
    assert cli.main(["build-book", "--published", "--book", str(bookdir)]) == 1
    assert "no published run to read" in capsys.readouterr().err


def test_a_chapter_missing_from_the_published_run_is_shown_without_outputs_and_named(tmp_path, monkeypatch, capfd):
    pytest.importorskip("jupyter_book", reason="the book extra is not installed")
    root = _run_repo(tmp_path, monkeypatch)
    shutil.copytree(REPO / "data" / "findings", root / "data" / "findings")
    # a second chapter, in the book but never run: numbers glued inline and as a directive
    nb = _notebook(root / "notebooks" / "later.ipynb", ["print(41 + 1)"], title="# Later chapter")
    later = nbformat.read(str(nb), as_version=4)
    later.cells.append(new_markdown_cell("Recall was {glue:text}`later_recall:.1f` points.\n\n"
                                         "```{glue:md} later_answer\n:format: myst\n```\n"))
    nbformat.write(later, str(nb))
    (root / "book" / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: generated/ch\n  - file: generated/later\n",
        encoding="utf-8")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "a second chapter")
    run = tmp_path / "run"
    book.execute_notebook(root / "notebooks" / "ch.ipynb", {}, run, progress_bar=False)
    assert cli.main(["publish", str(run)]) == 0
    capfd.readouterr()
    assert cli.main(["build-book", "--no-strict", "--published", "--book", str(root / "book")]) == 0
    out, err = capfd.readouterr()
    assert "NOT IN THE PUBLISHED RUN (its page shows the code without outputs): later" in err
    assert "No key" not in out + err  # no glue lookups left for numbers that were never computed
    html = (root / "book" / "_build" / "html" / "generated" / "later.html").read_text(encoding="utf-8")
    assert "This chapter is not in the published run." in html
    assert html.count("(not in the published run)") == 2
    assert "print" in html and "42" not in html  # the code, never executed


def _run_folder(root: Path, texts: list[str], results: dict, image: str = "AAAA", extra_cell: bool = False) -> Path:
    """A `run-notebooks --out` folder with one chapter whose code cells print `texts`."""
    nb = new_notebook(cells=[new_markdown_cell("# A chapter")])
    for text in texts:
        cell = new_code_cell("print(...)")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text),
                        nbformat.v4.new_output("display_data", data={"image/png": image, "text/plain": "<Figure>"})]
        nb.cells.append(cell)
    if extra_cell:
        nb.cells.append(new_code_cell("pass"))
    root.mkdir()
    nbformat.write(nb, root / "01_x.ipynb")
    (root / "results").mkdir()
    (root / "results" / "01_x.json").write_text(
        json.dumps({"chapter": "01_x", "written_utc": str(root), "results": results}), encoding="utf-8")
    return root


def test_compare_runs_masks_timings_and_names_what_moved(tmp_path, capsys):
    before = _run_folder(tmp_path / "a", ["embedded 600 texts in 12.3 s (48.8 texts/s) at 0x7f3a9c\n",
                                          "recall 41.2%\n", "done 2026-12-06T10:00:01Z, 1.01answer/s\n"],
                         {"recall": 41.2, "n": 472})
    # same numbers, other durations, rates, address, timestamp and picture bytes: the same run
    same = _run_folder(tmp_path / "b", ["embedded 600 texts in 9.1 s (61.0 texts/s) at 0x55d1e0\n",
                                        "recall 41.2%\n", "done 2026-12-07T01:02:03Z, 3.59s/answer\n"],
                       {"recall": 41.2, "n": 472}, image="BBBB")
    (cmp,) = provenance.compare_runs(before, same)
    assert cmp.same and cmp.cells == 4 and cmp.differing_cells == [] and cmp.differing_values == []

    moved = _run_folder(tmp_path / "c", ["embedded 601 texts in 9.1 s\n", "recall 41.3%\n",
                                         "done 2026-12-07T01:02:03Z, 3.59s/answer\n"],
                        {"recall": 41.3, "n": 472, "new": 1})
    (cmp,) = provenance.compare_runs(before, moved)
    assert not cmp.same
    assert cmp.differing_cells == [1, 2]  # 0 is the markdown cell; the third code cell only moved timings
    assert "-recall 41.2%" in cmp.diffs[1] and "+recall 41.3%" in cmp.diffs[1]
    assert cmp.differing_values == [("new", "(absent)", 1), ("recall", 41.2, 41.3)]
    assert cmp.summary() == "01_x: 4 cells, 2 with differing outputs, 2 differing results values"

    assert cli.main(["compare-runs", str(before), str(same)]) == 0
    assert cli.main(["compare-runs", str(before), str(moved), "--show"]) == 1
    out = capsys.readouterr().out
    assert "results['recall'] (number, by 0.1): 41.2 -> 41.3" in out
    assert "results['new'] (added): '(absent)' -> 1" in out
    assert "total: 2 differing cells, 2 differing results values (0 of them text: verdicts" in out


def test_compare_runs_rtol_counts_float_noise_as_equal_and_nothing_else(tmp_path, capsys):
    before = _run_folder(tmp_path / "a", ["cosine 0.8123456\n", "verdict: ahead\n"],
                         {"cos": 0.8123456, "rows": [[1.0, 2.5], {"a": 3.0}], "verdict": "ahead", "k": 5})
    noise = _run_folder(tmp_path / "b", ["cosine 0.8123457\n", "verdict: ahead\n"],
                        {"cos": 0.81234561, "rows": [[1.0000001, 2.5], {"a": 3.0}], "verdict": "ahead", "k": 5})
    (exact,) = provenance.compare_runs(before, noise)
    assert exact.differing_cells == [1] and [k for k, _, _ in exact.differing_values] == ["cos", "rows"]
    (loose,) = provenance.compare_runs(before, noise, rtol=1e-6)
    assert loose.same  # 1.2e-7 relative in the cell, 1.2e-8 and 1e-7 in the values
    (tight,) = provenance.compare_runs(before, noise, rtol=2e-8)
    assert [k for k, _, _ in tight.differing_values] == ["rows"]  # 1e-7 > 2e-8; 1.2e-8 relative is within
    # a moved word, a moved tie (5 -> 6) or a changed verdict is never within any tolerance
    flipped = _run_folder(tmp_path / "c", ["cosine 0.8123456\n", "verdict: behind\n"],
                          {"cos": 0.8123456, "rows": [[1.0, 2.5], {"a": 3.0}], "verdict": "behind", "k": 6})
    (cmp,) = provenance.compare_runs(before, flipped, rtol=0.01)
    assert cmp.differing_cells == [2] and cmp.differing_values == [("k", 5, 6), ("verdict", "ahead", "behind")]
    assert provenance.value_change(5, 6) == "number, by 1" and provenance.value_change("ahead", "behind") == "text"
    assert provenance.value_change([1.0, 2.5], [1.25, 2.5]) == "numbers, largest move 0.25"
    assert provenance.value_change({"a": 1}, {"b": 1}) == "text"
    assert (provenance.value_change("(absent)", 1), provenance.value_change(2, "(absent)")) == ("added", "removed")
    assert cli.main(["compare-runs", str(before), str(noise), "--rtol", "1e-6"]) == 0
    assert "numbers within rtol=1e-06 counted equal" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["compare-runs", str(before), str(noise), "--rtol", "-1"])
    assert "expected a finite number >= 0, got '-1'" in capsys.readouterr().err


def test_compare_runs_reports_what_it_cannot_compare(tmp_path, capsys):
    before = _run_folder(tmp_path / "a", ["x\n"], {})
    longer = _run_folder(tmp_path / "b", ["x\n"], {"added": 1}, extra_cell=True)
    (cmp,) = provenance.compare_runs(before, longer)
    assert cmp.problem == "2 cells against 3: the source notebooks differ" and not cmp.same
    # the cells cannot be paired, the results files still are
    assert cmp.differing_values == [("added", "(absent)", 1)] and cmp.differing_cells == []
    assert cmp.summary() == ("01_x: cells not compared (2 cells against 3: the source notebooks differ); "
                             "1 differing results values")
    (cmp,) = provenance.compare_runs(before, longer, chapters=["02_missing"])
    assert cmp.problem.startswith("missing ") and "02_missing.ipynb" in cmp.problem
    with pytest.raises(provenance.PublishError, match="is not a folder"):
        provenance.compare_runs(tmp_path / "nowhere", before)
    assert cli.main(["compare-runs", str(tmp_path / "nowhere"), str(before)]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_code_v2_fingerprints_ignore_comments_docstrings_and_layout():
    code = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    same = "# a comment\ndef f(x):\n    '''Another docstring.'''\n    return (x +\n            1)\n"
    other = 'def f(x):\n    """Doc."""\n    return x + 2\n'
    fp = provenance.code_fingerprint
    assert fp(code) == fp(same) != fp(other)
    # the raw-text method of older records sees every byte
    assert fp(code, "bytes-v1") != fp(same, "bytes-v1")
    assert fp(code, "bytes-v1") == provenance._sha(code)
    # a cell IPython parses but Python does not: comment-only lines and trailing blanks dropped
    assert fp("%matplotlib inline\n# note\nx = 1  \n") == fp("%matplotlib inline\nx = 1\n")
    assert fp("%matplotlib inline\nx = 1\n") != fp("%matplotlib inline\nx = 2\n")
    # a docstring-only body still parses after removal
    assert fp('def g():\n    """Only a docstring."""\n') == fp("def g():\n    pass\n")
    with pytest.raises(ValueError, match="newer chunkwise"):
        fp("x = 1", "code-v9")


def test_a_comment_only_edit_leaves_the_chapter_current_and_old_records_keep_their_method(tmp_path):
    root = _repo(tmp_path)
    nb_path = root / "notebooks" / "ch.ipynb"
    record = provenance.run_provenance(nb_path, root)
    assert record["fingerprint"] == "code-v2"
    old_record = {**record, "code_cells": provenance.code_cell_hashes(nb_path, "bytes-v1"),
                  "modules": provenance.module_hashes(record["modules"], root / "src", "bytes-v1")}
    del old_record["fingerprint"]  # a record from before the key: raw bytes
    assert provenance.stale_reasons(old_record, root) == []

    b = root / "src" / "chunkwise" / "sub" / "b.py"
    b.write_text('def g():\n    """Returns one."""\n    return 1  # still one\n', encoding="utf-8")
    nb = nbformat.read(str(nb_path), as_version=4)
    nb.cells[3].source = "# show it\nprint(f())"
    nbformat.write(nb, str(nb_path))
    assert provenance.stale_reasons(record, root) == []
    assert provenance.stale_reasons(old_record, root) == [
        "code cell 3 of notebooks/ch.ipynb changed",
        "changed since: src/chunkwise/sub/b.py",
    ]


def _with_answer(folder: Path, text: str) -> Path:
    """Give the chapter in ``folder`` a glued answer box (papermill's scrapbook record)."""
    nb = nbformat.read(folder / "01_x.ipynb", as_version=4)
    cell = new_code_cell("glue('x_answer', ...)")
    cell.outputs = [nbformat.v4.new_output(
        "display_data", data={"application/papermill.record/text/markdown": text},
        metadata={"scrapbook": {"name": "x_answer", "mime_prefix": "application/papermill.record/"}})]
    nb.cells.append(cell)
    nbformat.write(nb, folder / "01_x.ipynb")
    return folder


def test_compare_runs_says_whether_the_answer_box_changed(tmp_path, capsys):
    before = _with_answer(_run_folder(tmp_path / "a", ["x\n"], {}), "**Use A**: +3.1 [+0.2, +6.0] (supports).")
    noise = _with_answer(_run_folder(tmp_path / "b", ["x\n"], {}), "**Use A**: +3.1000001 [+0.2, +6.0] (supports).")
    flipped = _with_answer(_run_folder(tmp_path / "c", ["x\n"], {}), "**Use A**: +3.1 [-0.2, +6.0] (cannot tell).")
    plain = _run_folder(tmp_path / "d", ["x\n"], {})
    assert provenance.compare_runs(before, noise, rtol=1e-6)[0].answer_changed is False
    (cmp,) = provenance.compare_runs(before, flipped, rtol=1e-6)
    assert cmp.answer_changed is True and cmp.summary().endswith("; answer box changed")
    assert cli.main(["compare-runs", str(before), str(flipped), "--rtol", "1e-6"]) == 1
    assert "1 answer boxes that read differently" in capsys.readouterr().out
    assert provenance.compare_runs(plain, plain)[0].answer_changed is None
