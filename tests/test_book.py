"""The book machinery: parameter injection (bug case B23) and strict book builds (B24)."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from chunkwise import book, cli

REPO = Path(__file__).resolve().parents[1]

# The values of bug case B23, plus a few more that break naive quoting.
JSON_TEXT = '{"k": "v"}'
WINDOWS_PATH = r"C:\new\table"
TRICKY = 'quote " backslash-quote \\" end\\ tab\t newline\n é \u2028 ${x} {y}'

DUMP_CELL = (
    "import json\n"
    "print(json.dumps({'cfg': cfg, 'path': path, 's': s, 'text': text, 'n': n, "
    "'ratio': ratio, 'flag': flag, 'sizes': sizes}))"
)


def _write_notebook(path: Path, cells, kernel: bool = True) -> Path:
    nb = new_notebook()
    nb.cells = cells
    if kernel:
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def _params_cell(source: str):
    return new_code_cell(source, metadata={"tags": ["parameters"]})


def tiny_notebook(path: Path) -> Path:
    """A notebook with a parameters cell (note the default with `=` inside) that prints its values."""
    return _write_notebook(
        path,
        [
            new_markdown_cell("# Tiny"),
            _params_cell(
                'cfg = "{}"\n'
                'path = ""\n'
                's = "a=b"  # a default containing "="\n'
                'text = ""\n'
                "n = 1\n"
                "ratio = 0.5\n"
                "flag = False\n"
                "sizes = [1, 2]\n"
            ),
            new_code_cell(DUMP_CELL),
        ],
    )


def printed_values(executed: Path) -> dict:
    nb = nbformat.read(str(executed), as_version=4)
    texts = [
        out["text"]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stdout"
    ]
    assert texts, "the notebook printed nothing"
    return json.loads(texts[-1])


# ------------------------------------------------------------------- B23: injection


def test_injected_strings_round_trip_exactly(tmp_path, caplog):
    source = tiny_notebook(tmp_path / "nb" / "tiny.ipynb")
    params = {"cfg": JSON_TEXT, "path": WINDOWS_PATH, "s": "c=d", "text": TRICKY, "ratio": math.inf}
    with caplog.at_level(logging.WARNING):
        out = book.execute_notebook(source, params, tmp_path / "out", progress_bar=False)

    assert out == (tmp_path / "out" / "tiny.ipynb").resolve()
    values = printed_values(out)
    assert values["cfg"] == JSON_TEXT
    assert values["path"] == WINDOWS_PATH
    assert values["text"] == TRICKY
    assert values["s"] == "c=d"
    assert values["ratio"] == math.inf
    assert (values["n"], values["sizes"]) == (1, [1, 2])  # untouched defaults survive
    # papermill's regex inspection misreads `s = "a=b"` and would warn that `s` is unknown;
    # names are checked with ast instead, so no spurious warning reaches the user.
    noise = ("unknown parameter", "Unable to parse line")
    assert not [r for r in caplog.records if any(n in r.getMessage() for n in noise)]

    nb = nbformat.read(str(out), as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    injected = [i for i, t in enumerate(tags) if "injected-parameters" in t]
    assert injected == [tags.index(["parameters"]) + 1]


def test_cli_parameters_round_trip_exactly(tmp_path, monkeypatch, capsys):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "chunkwise"\n', encoding="utf-8")
    tiny_notebook(root / "notebooks" / "tiny.ipynb")
    monkeypatch.setenv("CHUNKWISE_ROOT", str(root))
    monkeypatch.setattr(book, "NOTEBOOKS", ("tiny.ipynb",))

    rc = cli.main(
        [
            "run-notebooks", "--no-progress",
            "-p", "cfg", JSON_TEXT,
            "-p", "path", WINDOWS_PATH,
            "-p", "s", "x=y=z",
            "-p", "n", "7",
            "-p", "ratio", "1e-3",
            "-p", "flag", "true",
            "-p", "sizes", "[3, 4]",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    values = printed_values(root / "book" / "generated" / "tiny.ipynb")
    assert values == {
        "cfg": JSON_TEXT, "path": WINDOWS_PATH, "s": "x=y=z", "text": "",
        "n": 7, "ratio": 0.001, "flag": True, "sizes": [3, 4],
    }
    # the run record the findings page reads: what was injected and where it came from
    from chunkwise.findings import load_run_records

    record = load_run_records(root / "book" / "generated" / "results")["tiny"]
    assert record["parameters"]["n"] == 7 and record["parameters"]["sizes"] == [3, 4]
    assert set(record["origin"].values()) == {"command line"}


def test_cli_rejects_undeclared_parameter(tmp_path, monkeypatch, capsys):
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "chunkwise"\n', encoding="utf-8")
    tiny_notebook(root / "notebooks" / "tiny.ipynb")
    monkeypatch.setenv("CHUNKWISE_ROOT", str(root))
    monkeypatch.setattr(book, "NOTEBOOKS", ("tiny.ipynb",))

    assert cli.main(["run-notebooks", "-p", "nope", "1"]) == 1
    err = capsys.readouterr().err
    assert "'nope'" in err and "tiny.ipynb" in err
    assert not (root / "book" / "generated" / "tiny.ipynb").exists()

    assert cli.main(["run-notebooks", "-p", "n", "seven"]) == 1
    assert "'n' is an int" in capsys.readouterr().err

    assert cli.main(["run-notebooks", "--only", "other"]) == 1
    assert "not a registered notebook" in capsys.readouterr().err


@pytest.mark.parametrize("raw", [JSON_TEXT, WINDOWS_PATH, "a=b", "", " spaced ", "True", "1", "null", TRICKY])
def test_string_parameters_are_taken_verbatim(raw):
    assert book.coerce_parameter("x", raw, "default") == raw


@pytest.mark.parametrize(
    ("raw", "default", "expected"),
    [
        ("7", 1, 7),
        ("-3", 0, -3),
        ("2.5", 1.0, 2.5),
        ("3", 1.0, 3.0),
        ("nan", 1.0, float("nan")),
        ("TRUE", False, True),
        ("no", True, False),
        ('["a", "b"]', ["x"], ["a", "b"]),
        ("(1, 2)", (0,), [1, 2]),
        ('{"k": [1, 2]}', {}, {"k": [1, 2]}),
        ("12", None, 12),
        ("None", None, None),
        ("a=b", None, "a=b"),
        (WINDOWS_PATH, None, WINDOWS_PATH),
    ],
)
def test_non_string_parameters_take_the_default_type(raw, default, expected):
    value = book.coerce_parameter("x", raw, default)
    assert type(value) is type(expected)
    assert value == expected or (isinstance(value, float) and math.isnan(value) and math.isnan(expected))


@pytest.mark.parametrize(("raw", "default"), [("1.5", 1), ("maybe", True), ("x", 0.1), ("{", []), ("[1]", {})])
def test_bad_parameter_values_name_the_parameter(raw, default):
    with pytest.raises(ValueError, match="'x'"):
        book.coerce_parameter("x", raw, default)


def test_undeclared_parameter_is_rejected_before_running(tmp_path):
    source = tiny_notebook(tmp_path / "tiny.ipynb")
    with pytest.raises(book.NotebookCheckError, match="does not declare parameter.*'nope'"):
        book.execute_notebook(source, {"nope": 1}, tmp_path / "out", progress_bar=False)
    assert not (tmp_path / "out" / "tiny.ipynb").exists()


def test_uninjectable_value_is_rejected(tmp_path):
    source = tiny_notebook(tmp_path / "tiny.ipynb")
    with pytest.raises(book.NotebookCheckError, match="'cfg'"):
        book.execute_notebook(source, {"cfg": (1, 2)}, tmp_path / "out", progress_bar=False)


def test_notebook_without_parameters_tag_is_rejected(tmp_path):
    path = _write_notebook(tmp_path / "untagged.ipynb", [new_code_cell('x = "a"'), new_code_cell("print(x)")])
    with pytest.raises(book.NotebookCheckError, match="exactly one cell tagged 'parameters', found no cell"):
        book.check_notebook(path)
    # papermill would inject at the top silently; we refuse before starting a kernel.
    with pytest.raises(book.NotebookCheckError, match="tagged 'parameters'"):
        book.execute_notebook(path, {"x": "b"}, tmp_path / "out", progress_bar=False)
    assert not (tmp_path / "out").exists()


def test_check_notebook_reports_every_problem(tmp_path):
    cell = new_code_cell("1 + 1", execution_count=3)
    cell.outputs = [new_output("execute_result", {"text/plain": "2"}, execution_count=3)]
    path = _write_notebook(
        tmp_path / "messy.ipynb", [_params_cell("a = 1"), _params_cell("b = 2"), cell]
    )
    with pytest.raises(book.NotebookCheckError) as info:
        book.check_notebook(path)
    message = str(info.value)
    assert "found 2 cells" in message
    assert "have outputs" in message and "execution counts" in message


def test_check_notebook_refuses_a_figure_cell_without_a_caption(tmp_path):
    # Chapter 7 once reached CI with an uncaptioned figure: the book refused it only after executing.
    draw = new_code_cell("fig, ax = plt.subplots()\nplt.show()")
    path = _write_notebook(tmp_path / "fig.ipynb", [_params_cell("a = 1"), new_code_cell("a"), draw])
    with pytest.raises(book.NotebookCheckError, match=r"cells \[2\] draw a figure without a caption"):
        book.check_notebook(path)
    draw.metadata["mystnb"] = {"figure": {"caption": "What a reader should look for."}}
    path = _write_notebook(tmp_path / "fig.ipynb", [_params_cell("a = 1"), new_code_cell("a"), draw])
    assert book.check_notebook(path) == ["a"]


@pytest.mark.filterwarnings("ignore:Cell is missing an id field")  # nbformat, reading the broken file
def test_check_notebook_requires_cell_ids(tmp_path):
    path = _write_notebook(tmp_path / "ids.ipynb", [_params_cell("a = 1"), new_code_cell("a"), new_code_cell("a + 1")])
    assert book.check_notebook(path) == ["a"]
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert (raw["nbformat"], raw["nbformat_minor"]) >= (4, 5)
    del raw["cells"][2]["id"]  # e.g. a cell added by a script that wrote the JSON by hand
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(book.NotebookCheckError, match=r"cells \[2\] have no 'id'"):
        book.check_notebook(path)


def test_parameters_cell_must_hold_only_assignments(tmp_path):
    path = _write_notebook(tmp_path / "imp.ipynb", [_params_cell("import os\nx = os.sep")])
    with pytest.raises(book.NotebookCheckError, match="only `name = value` assignments"):
        book.parameters_cell_names(path)


def test_parameters_cell_names_and_defaults(tmp_path):
    path = _write_notebook(
        tmp_path / "ok.ipynb",
        [_params_cell('"""Parameters."""\nk: int = 5\ns = "a=b"\np = Path("x")\nk2 = k3 = None\n')],
    )
    assert book.parameters_cell_names(path) == ["k", "s", "p", "k2", "k3"]
    defaults = book.parameters_cell_defaults(path)
    assert defaults["k"] == 5 and defaults["s"] == "a=b" and defaults["k2"] is None
    assert book.coerce_parameter("p", "y", defaults["p"]) == "y"  # non-literal default: untyped


def test_check_notebook_cli(tmp_path, capsys):
    good = _write_notebook(tmp_path / "good.ipynb", [_params_cell("n = 1"), new_code_cell("n")])
    bad = _write_notebook(tmp_path / "bad.ipynb", [new_code_cell("n = 1")])
    assert cli.main(["check-notebook", str(good)]) == 0
    assert "parameters: n" in capsys.readouterr().out
    assert cli.main(["check-notebook", str(good), str(bad)]) == 1
    assert "bad.ipynb" in capsys.readouterr().err


@pytest.mark.parametrize("name", book.NOTEBOOKS)
def test_registered_notebooks_follow_the_conventions(name):
    path = REPO / "notebooks" / name
    if not path.exists():
        pytest.skip(f"{name} is registered but not written yet")
    names = book.check_notebook(path)  # exactly one parameters cell, no outputs
    assert names, f"{name}: the parameters cell declares nothing"


def test_registry_and_toc_agree():
    toc = (REPO / "book" / "_toc.yml").read_text(encoding="utf-8")
    for name in book.NOTEBOOKS:
        if (REPO / "notebooks" / name).exists():
            assert f"generated/{Path(name).stem}" in toc, f"{name} is missing from book/_toc.yml"


def test_failing_notebook_names_itself_and_its_executed_copy(tmp_path):
    source = _write_notebook(tmp_path / "boom.ipynb", [_params_cell("n = 1"), new_code_cell("1/0")])
    with pytest.raises(book.NotebookExecutionError) as info:
        book.execute_notebook(source, {}, tmp_path / "out", progress_bar=False)
    err = info.value
    assert err.notebook == "boom.ipynb"
    assert err.output_path.is_file()
    assert "ZeroDivisionError" in str(err) and str(err.output_path) in str(err)


# --------------------------------------------------------------------- repo root


def test_find_repo_root(tmp_path, monkeypatch):
    monkeypatch.delenv("CHUNKWISE_ROOT", raising=False)
    assert book.find_repo_root(REPO / "src" / "chunkwise") == REPO
    other = tmp_path / "other"
    (other / "deep").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "something-else"\n', encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="CHUNKWISE_ROOT"):
        book.find_repo_root(other / "deep")
    monkeypatch.setenv("CHUNKWISE_ROOT", str(other))
    assert book.find_repo_root(REPO) == other.resolve()


# -------------------------------------------------------------- B24: strict builds


def _tiny_book(root: Path, notebook_cells, execute: str, stored_outputs=None) -> Path:
    pytest.importorskip("jupyter_book", reason="the book extra is not installed")
    root.mkdir(parents=True)
    (root / "_config.yml").write_text(
        "title: tiny\n"
        "only_build_toc_files: true\n"
        "execute:\n"
        f"  execute_notebooks: {execute}\n"
        "  timeout: 120\n"
        "  allow_errors: false\n",
        encoding="utf-8",
    )
    (root / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: chapter\n", encoding="utf-8"
    )
    (root / "intro.md").write_text("# Tiny book\n\nOne chapter.\n", encoding="utf-8")
    cells = [new_markdown_cell("# Chapter"), *notebook_cells]
    if stored_outputs:
        for index, outputs in stored_outputs.items():
            cells[index].outputs = outputs
            cells[index].execution_count = 1
    _write_notebook(root / "chapter.ipynb", cells)
    return root


def test_build_book_passes_a_clean_book(tmp_path):
    root = _tiny_book(tmp_path / "ok", [new_code_cell("print(6 * 7)")], execute="force")
    assert cli.main(["build-book", "--book", str(root)]) == 0
    assert (root / "_build" / "html" / "chapter.html").is_file()


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "no-strict"])
def test_build_book_fails_on_a_failing_notebook(tmp_path, capsys, strict):
    root = _tiny_book(tmp_path / "bad", [new_code_cell("1/0")], execute="force")
    flag = "--strict" if strict else "--no-strict"
    assert cli.main(["build-book", flag, "--book", str(root)]) != 0
    reports = list((root / "_build" / "html" / "reports").rglob("*"))
    assert reports, "jupyter-book wrote no execution report"
    assert "execution reports" in capsys.readouterr().err


def test_build_book_fails_on_a_stored_error_output(tmp_path, capsys):
    # What a failed papermill run leaves behind: a book that executes nothing would show it.
    error = new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])
    root = _tiny_book(tmp_path / "stored", [new_code_cell("1/0")], execute="off", stored_outputs={1: [error]})
    assert cli.main(["build-book", "--no-strict", "--book", str(root)]) != 0
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_remote_assets_are_detected(tmp_path):
    (tmp_path / "page.html").write_text(
        '<html><head><script src="https://cdn.example/x.js"></script>'
        '<link rel="stylesheet" href="//cdn.example/x.css">'
        '<link rel="stylesheet" href="_static/local.css"><script src="_static/y.js"></script>'
        '</head><body><a href="https://example.org">prose link</a></body></html>',
        encoding="utf-8",
    )
    found = cli.remote_assets(tmp_path)
    assert list(found) == ["page.html"]
    assert len(found["page.html"]) == 2 and all("cdn.example" in t for t in found["page.html"])


def test_book_config_is_offline_and_explicit():
    yaml = pytest.importorskip("yaml")

    config = yaml.safe_load((REPO / "book" / "_config.yml").read_text(encoding="utf-8"))
    assert config["execute"]["execute_notebooks"] == "off"
    assert isinstance(config["execute"]["timeout"], int)  # B24: never the implicit 30 s
    assert config["only_build_toc_files"] is True
    sphinx = config["sphinx"]
    assert "sphinx-mathjax-offline" in sphinx["extra_extensions"]
    assert "://" not in sphinx["config"]["mathjax_path"]
    assert not config["launch_buttons"]["thebe"] and not config["launch_buttons"]["binderhub_url"]


# ------------------------------------------- issue 13: interrupted, concurrent, bad input


def _tiny_repo(tmp_path: Path, monkeypatch, cells=None) -> Path:
    """A repository with one registered notebook, ``tiny.ipynb``, found through CHUNKWISE_ROOT."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "chunkwise"\n', encoding="utf-8")
    if cells is None:
        tiny_notebook(root / "notebooks" / "tiny.ipynb")
    else:
        _write_notebook(root / "notebooks" / "tiny.ipynb", cells)
    monkeypatch.setenv("CHUNKWISE_ROOT", str(root))
    monkeypatch.setattr(book, "NOTEBOOKS", ("tiny.ipynb",))
    return root


# ------------------------------------------------------------------ parameter profiles


def _profile_repo(tmp_path, monkeypatch, profile) -> Path:
    """A repository with the tiny notebook registered and ``profiles/test.json`` = ``profile``."""
    root = tmp_path / "repo"
    (root / "notebooks" / "profiles").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "chunkwise"\n', encoding="utf-8")
    tiny_notebook(root / "notebooks" / "tiny.ipynb")
    text = profile if isinstance(profile, str) else json.dumps(profile)
    (root / "notebooks" / "profiles" / "test.json").write_text(text, encoding="utf-8")
    monkeypatch.setenv("CHUNKWISE_ROOT", str(root))
    monkeypatch.setattr(book, "NOTEBOOKS", ("tiny.ipynb",))
    return root


def test_interrupted_execution_leaves_no_temporary_and_keeps_the_chapter(tmp_path, monkeypatch):
    """Issue 13 bug 3: Ctrl-C (KeyboardInterrupt is not an Exception) left .<name>.running.ipynb,
    which Sphinx then read."""
    import papermill

    source = tiny_notebook(tmp_path / "nb" / "tiny.ipynb")
    out = tmp_path / "out"
    out.mkdir()
    (out / "tiny.ipynb").write_text("the last good chapter", encoding="utf-8")

    def interrupted(input_path, output_path, **kw):
        Path(output_path).write_text("half a chapter", encoding="utf-8")  # papermill saves as it goes
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    with pytest.raises(KeyboardInterrupt):
        book.execute_notebook(source, {}, out, progress_bar=False)
    # no hidden temporary is left; what ran is kept as the failed copy (not a page: only the TOC is built)
    assert sorted(p.name for p in out.iterdir()) == ["tiny.failed.ipynb", "tiny.ipynb"]
    assert (out / "tiny.ipynb").read_text(encoding="utf-8") == "the last good chapter"
    assert (out / "tiny.failed.ipynb").read_text(encoding="utf-8") == "half a chapter"


def test_cli_interrupt_is_one_line_and_exit_code_130(tmp_path, monkeypatch, capsys):
    root = _tiny_repo(tmp_path, monkeypatch)
    generated = root / "book" / "generated"
    generated.mkdir(parents=True)
    (generated / "tiny.ipynb").write_text("good", encoding="utf-8")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(book, "execute_notebook", interrupted)
    try:
        rc = cli.main(["run-notebooks", "--no-progress"])
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt escaped run-notebooks (a traceback for the user)")
    assert rc == 130
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 2 and err[0].startswith("chunkwise: executing tiny.ipynb")
    assert err[1] == (
        f"chunkwise: interrupted while executing tiny.ipynb: its kernel is shut down, the last good chapter "
        f"{generated / 'tiny.ipynb'} is kept"
    )


def test_concurrent_runs_do_not_share_a_temporary_and_the_later_one_says_it_won(tmp_path, caplog):
    """Issue 13: two runs of one chapter wrote the same .<name>.running.ipynb; the later silently
    replaced the other's chapter."""
    out = tmp_path / "out"
    out.mkdir()
    other_running = out / ".tiny.running.ipynb"  # another run's temporary (the old fixed name)
    other_running.write_text("another run in progress", encoding="utf-8")
    chapter = (out / "tiny.ipynb").resolve()
    source = _write_notebook(
        tmp_path / "nb" / "tiny.ipynb",
        [
            _params_cell("n = 1"),
            # While this run executes, another run finishes and writes the chapter.
            new_code_cell(f"open({str(chapter)!r}, 'w').write('the other run')"),
            new_code_cell("import glob, os\nprint(sorted(os.path.basename(p) for p in glob.glob("
                          f"{str(out)!r} + '/.tiny.*.running.ipynb')))"),
        ],
    )
    with caplog.at_level(logging.WARNING, logger="chunkwise.book"):
        result = book.execute_notebook(source, {"n": 2}, out, progress_bar=False)
    assert result == chapter
    nb = nbformat.read(str(chapter), as_version=4)  # this run's executed copy, not 'the other run'
    own = json.loads(nb.cells[-1].outputs[0]["text"].replace("'", '"'))
    assert len(own) == 1 and own[0] != other_running.name  # a temporary of its own
    assert other_running.read_text(encoding="utf-8") == "another run in progress"
    assert not (out / own[0]).exists()
    warned = [r.getMessage() for r in caplog.records if r.name == "chunkwise.book"]
    assert len(warned) == 1 and "another run wrote" in warned[0] and str(chapter) in warned[0]


@pytest.mark.parametrize("raw", ["0.5", "0", "-5", "abc", "1e3"])
def test_cli_cell_timeout_must_be_whole_seconds(tmp_path, monkeypatch, capsys, raw):
    """Issue 13: 0.5 failed with a traitlets TraitError after a kernel started; 0 and -5 meant no limit."""
    root = _tiny_repo(tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as info:
        cli.main(["run-notebooks", "--cell-timeout", raw])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --cell-timeout: expected a whole number of seconds >= 1, or 'none' for no limit; got {raw!r}" in err
    assert not (root / "book").exists()


def test_cell_timeout_values(tmp_path):
    assert cli._cell_timeout("none") is None and cli._cell_timeout("30") == 30
    assert book.check_cell_timeout(None) is None and book.check_cell_timeout(60.0) == 60
    source = tiny_notebook(tmp_path / "tiny.ipynb")
    for bad in (0.5, 0, -5, True, "10"):
        with pytest.raises(ValueError, match="cell_timeout must be a whole number of seconds >= 1"):
            book.execute_notebook(source, {}, tmp_path / "out", progress_bar=False, cell_timeout=bad)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_cli_out_that_is_a_file_or_unwritable_is_one_line(tmp_path, monkeypatch, capsys):
    """Issue 13: --out at a file or an unwritable place gave a raw FileExistsError / PermissionError."""
    root = _tiny_repo(tmp_path, monkeypatch)
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    assert cli.main(["run-notebooks", "--out", str(a_file)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"chunkwise: error: --out: output folder {a_file} is a file, not a folder; pass a folder (or a new path)"
    assert cli.main(["run-notebooks", "--out", str(a_file / "sub")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"output folder {a_file / 'sub'} cannot be created or written (a parent of it is a file)" in err

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", denied)
    assert cli.main(["run-notebooks", "--out", str(tmp_path / "locked")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"chunkwise: error: --out: output folder {tmp_path / 'locked'} cannot be created or written "
                   "(Permission denied); pass a folder you can write to")
    assert not (root / "book").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [(b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not UTF-8 text (byte 0x89 at offset 0)"), (b"hello", "not JSON"),
     (b"[1, 2]", "not a notebook (")],
    ids=["binary", "text", "json-list"],
)
def test_check_notebook_names_a_file_that_is_not_a_notebook(tmp_path, capsys, content, reason):
    path = tmp_path / "picture.ipynb"
    path.write_bytes(content)
    assert cli.main(["check-notebook", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"chunkwise: error: {path}: not a notebook") and reason in err and "\n" not in err
    with pytest.raises(book.NotebookCheckError, match="pass a .ipynb file"):
        book.execute_notebook(path, {}, tmp_path / "out", progress_bar=False)


def _copy_of_the_real_book(tmp_path: Path) -> Path:
    pytest.importorskip("jupyter_book", reason="the book extra is not installed")
    root = tmp_path / "book"
    root.mkdir()
    for src in [*(REPO / "book").glob("*.md"), *(REPO / "book").glob("*.yml"), REPO / "book" / "references.bib"]:
        (root / src.name).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    return root


def test_build_book_before_run_notebooks_says_what_to_do(tmp_path, capsys):
    """Issue 13: three 'nonexisting document' warnings, and --no-strict reported 'book built'."""
    root = _copy_of_the_real_book(tmp_path)
    for flag in ("--strict", "--no-strict"):
        assert cli.main(["build-book", flag, "--book", str(root)]) == 1
        err = capsys.readouterr().err.strip()
        assert err == (
            f"chunkwise: error: 8 page(s) of {root.resolve() / '_toc.yml'} do not exist yet (generated/01_handbook_boundaries, "
            "generated/02_chroma_recall, generated/03_crud_pgrag, generated/03b_crud_chunk_size, "
            "generated/04_your_own_data, generated/05_strategies, "
            "generated/06_stitched_vs_real, generated/07_what_matters): "
            "run `chunkwise run-notebooks` first "
            f"(it executes the notebooks into {root.resolve() / 'generated'})"
        )
    assert not (root / "_build").exists()  # refused before Sphinx ran


def test_strict_build_ignores_a_leftover_temporary_chapter(tmp_path, capsys):
    """Issue 13 bug 3: Sphinx read book/generated/.<name>.running.ipynb ("document isn't included in
    any toctree": strict builds failed, --no-strict published a hidden page)."""
    root = _copy_of_the_real_book(tmp_path)
    generated = root / "generated"
    generated.mkdir()
    import csv

    with (REPO / "data" / "findings" / "headline.csv").open(encoding="utf-8", newline="") as fh:
        sections = [(r["chapter"], r["section"]) for r in csv.DictReader(fh)]
    for name in book.NOTEBOOKS:
        stem = Path(name).stem
        # the sections the findings page links to (a missing anchor is a strict-build warning)
        heads = [new_markdown_cell(f"## {sec}") for ch, sec in dict.fromkeys(sections) if ch == stem and sec]
        _write_notebook(generated / name, [new_markdown_cell(f"# {stem}"), *heads, new_code_cell("1 + 1")])
    _write_notebook(generated / ".01_handbook_boundaries.running.ipynb", [new_markdown_cell("# half a chapter")])
    _write_notebook(generated / ".02_chroma_recall.k2j4x8.running.ipynb", [new_markdown_cell("# another")])
    assert cli.main(["build-book", "--book", str(root)]) == 0, capsys.readouterr().err
    html = root / "_build" / "html"
    assert (html / "generated" / "01_handbook_boundaries.html").is_file()
    assert not [p for p in html.rglob("*") if "running" in p.name]


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.integration
def test_ctrl_c_on_run_notebooks_end_to_end(tmp_path, monkeypatch):
    """Issue 13, the slow case: Ctrl-C in a terminal during `run-notebooks` (SIGINT to the
    foreground process group) printed a 40-line KeyboardInterrupt traceback and left the
    temporary chapter behind. Now: one line, exit code 130, the last good chapter kept, nothing
    left in book/generated, the kernel stopped. Bounds are generous (kernel start on a busy machine)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = _tiny_repo(
        tmp_path, monkeypatch,
        cells=[_params_cell("n = 1"),
               new_code_cell("import os, time\nopen('started', 'w').write(str(os.getpid()))\ntime.sleep(300)")],
    )
    generated = root / "book" / "generated"
    generated.mkdir(parents=True)
    (generated / "tiny.ipynb").write_text("the last good chapter", encoding="utf-8")
    marker = root / "notebooks" / "started"  # the kernel runs in notebooks/
    env = dict(os.environ, CHUNKWISE_ROOT=str(root), PYTHONPATH=os.pathsep.join(
        [str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    # book.NOTEBOOKS is monkeypatched only in this process: run the CLI with the tiny registry.
    code = ("import sys; from chunkwise import book, cli; book.NOTEBOOKS = ('tiny.ipynb',); "
            "sys.exit(cli.main(['run-notebooks', '--no-progress']))")
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    kernel_pid = None
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=err, env=env,
                                cwd=root, start_new_session=True,
                                # SIGINT's default, even when pytest itself inherited an ignore
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            deadline = time.monotonic() + 240
            while not (marker.is_file() and marker.read_text()) and proc.poll() is None:
                assert time.monotonic() < deadline, "the kernel did not start the cell within 240 s"
                time.sleep(0.2)
            assert proc.poll() is None, err_path.read_text(encoding="utf-8", errors="replace")
            kernel_pid = int(marker.read_text())
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
            rc = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    try:
        assert rc == 130, stderr
        assert "Traceback" not in stderr, stderr
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert lines[-1] == (f"chunkwise: interrupted while executing tiny.ipynb: its kernel is shut down, "
                             f"the last good chapter {generated / 'tiny.ipynb'} is kept, what ran is in "
                             f"{generated / 'tiny.failed.ipynb'}"), stderr
        assert len(lines) <= 3, stderr
        # no hidden temporary left for Sphinx; the partial run is the (never published) failed copy
        assert sorted(p.name for p in generated.iterdir()) == ["tiny.failed.ipynb", "tiny.ipynb"]
        assert (generated / "tiny.ipynb").read_text(encoding="utf-8") == "the last good chapter"
        deadline = time.monotonic() + 60
        while _alive(kernel_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(kernel_pid), "the kernel outlived the interrupted run"
    finally:
        if kernel_pid is not None and _alive(kernel_pid):
            os.kill(kernel_pid, signal.SIGKILL)


def test_toc_fallback_scan_skips_dot_files(tmp_path):
    """When _toc.yml cannot be parsed, the error-output scan falls back to every notebook: never a
    run's temporary (.<name>.<pid>-<random>.running.ipynb) nor a checkpoint copy."""
    (tmp_path / "_toc.yml").write_text("format: [not a toc\n", encoding="utf-8")
    for rel in ("generated/ch.ipynb", "generated/.ch.12-ab.running.ipynb", ".ipynb_checkpoints/ch-checkpoint.ipynb",
                "_build/jupyter_execute/ch.ipynb"):
        _write_notebook(tmp_path / rel, [new_code_cell("1")])
    assert cli._toc_notebooks(tmp_path) == [tmp_path / "generated" / "ch.ipynb"]


def test_ci_profile_names_declared_parameters_of_the_right_type():
    notebooks = REPO / "notebooks"
    raw = json.loads((notebooks / "profiles" / "ci.json").read_text(encoding="utf-8"))
    loaded = book.load_profile("ci", notebooks)
    assert set(loaded) == {f"{stem}.ipynb" for stem in raw if stem != "_about"}
    assert loaded, "the ci profile changes nothing"
    for file_name, values in loaded.items():
        defaults = book.parameters_cell_defaults(notebooks / file_name)
        for name, value in values.items():
            assert name in defaults, f"{file_name} has no parameter {name!r}"
            default = defaults[name]
            if default is not None:  # same JSON-visible type as the default
                kinds = (int, float) if isinstance(default, float) else (list if isinstance(default, tuple) else type(default))
                assert isinstance(value, kinds) and isinstance(value, bool) == isinstance(default, bool), (
                    f"{file_name}: {name} = {value!r} does not have the type of {default!r}"
                )
    # Chapter 2 runs on a subset of its corpora, each one a real corpus name.
    from chunkwise.datasets import CHROMA_CORPORA

    corpora = loaded["02_chroma_recall.ipynb"]["corpora"]
    assert corpora and set(corpora) < set(CHROMA_CORPORA)
    assert book.profile_about("ci", notebooks).strip()


def test_chapter3_defaults_are_the_50_question_run_and_their_pool_files_match():
    notebooks = REPO / "notebooks"
    defaults = book.parameters_cell_defaults(notebooks / "03_crud_pgrag.ipynb")
    assert defaults["qa_source"] == "mirror" and defaults["pool_add_gold"] is False and defaults["fusion"] == "fitted"
    assert defaults["gold_variant"] is True
    for name in ("pool_file", "gold_variant_pool_file"):
        doc = json.loads((notebooks / defaults[name]).read_text(encoding="utf-8"))
        assert doc["top_n"] == defaults["pool_top_n"], name
        gold_ids = {d for ids in doc["gold"].values() for d in ids}
        if name == "pool_file":  # every item alike: no gold article, 50 + 3 + 3 items, 103 articles
            assert doc["add_gold"] is False and not gold_ids and len(doc["gold"]) == 56
            assert set(doc["origin"]) == {"bm25"} and len(doc["ids"]) == 103
        else:  # the variant: the same BM25 documents plus the 13 gold articles of the 10 items that have one
            base = json.loads((notebooks / defaults["pool_file"]).read_text(encoding="utf-8"))
            assert doc["add_gold"] is True and len(gold_ids) == 13 and len(doc["ids"]) == 116
            assert set(doc["ids"]) == set(base["ids"]) | gold_ids
            assert sum(bool(ids) for ids in doc["gold"].values()) == 10


def test_subset10_profile_is_the_earlier_10_item_run():
    notebooks = REPO / "notebooks"
    loaded = book.load_profile("subset10", notebooks)
    assert set(loaded) == {"03_crud_pgrag.ipynb"}
    values = loaded["03_crud_pgrag.ipynb"]
    assert values == {"qa_source": "subset", "pool_add_gold": True,
                      "pool_file": "../data/crud/pool_top2.json", "fusion": "authors"}
    assert book.profile_about("subset10", notebooks).strip()
    doc = json.loads((notebooks / values["pool_file"]).read_text(encoding="utf-8"))
    gold_ids = {d for ids in doc["gold"].values() for d in ids}
    assert doc["add_gold"] is True and len(doc["gold"]) == 10 and len(gold_ids) == 13 and len(doc["ids"]) == 27


@pytest.mark.parametrize(
    "profile, needle",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "must be a JSON object"),
        ({"nope": {"n": 1}}, "'nope' is not a registered notebook; registered: tiny"),
        ({"tiny": [1]}, "the entry of tiny must be an object"),
        ({"tiny": {"m": 1}}, "tiny.ipynb does not declare parameter 'm'"),
        ({"tiny": {"n": "7"}}, "parameter 'n' is a int (default 1); got '7' (str)"),
        ({"tiny": {"n": True}}, "parameter 'n' is a int"),
        ({"tiny": {"flag": 0}}, "parameter 'flag' is a bool"),
        ({"tiny": {"sizes": {"a": 1}}}, "parameter 'sizes' is a list"),
        ({"_about": 3}, "'_about' must be a string"),
    ],
)
def test_bad_profiles_are_rejected_before_any_kernel_starts(tmp_path, monkeypatch, capsys, profile, needle):
    root = _profile_repo(tmp_path, monkeypatch, profile)
    assert cli.main(["run-notebooks", "--profile", "test"]) == 1
    err = capsys.readouterr().err
    assert needle in err, err
    assert not (root / "book" / "generated").exists()  # nothing was executed


def test_unknown_profile_lists_the_available_ones(tmp_path, monkeypatch, capsys):
    root = _profile_repo(tmp_path, monkeypatch, {"tiny": {"n": 2}})
    assert cli.main(["run-notebooks", "--profile", "cj"]) == 1
    err = capsys.readouterr().err
    assert "unknown parameter profile 'cj'" in err and "available profiles: test" in err
    assert cli.main(["run-notebooks", "--profile", "../notebooks/profiles/test"]) == 1
    assert "unknown parameter profile" in capsys.readouterr().err
    assert not (root / "book" / "generated").exists()


def test_profile_values_are_injected_and_p_wins(tmp_path, monkeypatch, capsys):
    about = "Used by the tests."
    root = _profile_repo(tmp_path, monkeypatch, {"_about": about, "tiny": {"n": 5, "s": "p=q", "ratio": 2}})
    rc = cli.main(["run-notebooks", "--no-progress", "--profile", "test", "-p", "n", "7"])
    assert rc == 0, capsys.readouterr().err
    out = root / "book" / "generated" / "tiny.ipynb"
    values = printed_values(out)
    assert (values["n"], values["s"], values["ratio"], values["flag"]) == (7, "p=q", 2, False)
    nb = nbformat.read(str(out), as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    injected = tags.index(["injected-parameters"])
    note = nb.cells[injected + 1]
    assert note.cell_type == "markdown" and note.metadata["tags"] == [book.PROFILE_NOTE_TAG]
    assert note.source.startswith("```{note}") and "**test** parameter profile" in note.source
    assert about in note.source
    assert "- `n = 7` (command line)" in note.source
    assert "- `s = 'p=q'` (profile test)" in note.source and "- `ratio = 2` (profile test)" in note.source
    assert len({c.get("id") for c in nb.cells}) == len(nb.cells)
    nbformat.validate(nb)
    from chunkwise.findings import build_line, load_run_records

    records = load_run_records(root / "book" / "generated" / "results")
    assert records["tiny"]["origin"] == {"n": "command line", "s": "profile test", "ratio": "profile test"}
    assert build_line(["tiny"], records).startswith("**This build used the `test` parameter profile** "
                                                    "(tiny: n, ratio, s)")


def test_without_a_profile_the_page_gets_no_note(tmp_path, monkeypatch, capsys):
    root = _profile_repo(tmp_path, monkeypatch, {"tiny": {"n": 5}})
    assert cli.main(["run-notebooks", "--no-progress", "-p", "n", "3"]) == 0, capsys.readouterr().err
    nb = nbformat.read(str(root / "book" / "generated" / "tiny.ipynb"), as_version=4)
    assert printed_values(root / "book" / "generated" / "tiny.ipynb")["n"] == 3
    assert not [c for c in nb.cells if book.PROFILE_NOTE_TAG in c.metadata.get("tags", [])]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_book_passes_the_profile_only_when_asked():
    def dry_run(*extra):
        done = subprocess.run(
            ["make", "-n", "-C", str(REPO), "book", *extra],
            capture_output=True, text=True, check=True,
            env={**os.environ, "MAKEFLAGS": ""},
        )
        return [line for line in done.stdout.splitlines() if "run-notebooks" in line]

    assert dry_run() == [".venv/bin/chunkwise run-notebooks"]
    assert dry_run("BOOK_PROFILE=ci") == [".venv/bin/chunkwise run-notebooks --profile ci"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci and "make book BOOK_PROFILE=ci" in ci


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="uses /proc to see the kernel process")
def test_ctrl_c_on_run_notebooks_shuts_the_kernel_down(tmp_path):
    """The papermill kernel is a child process too: Ctrl-C must leave none behind."""
    from procs import DrainedProcess, pid_alive

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "chunkwise"\n', encoding="utf-8")
    pid_file = tmp_path / "kernel.pid"
    _write_notebook(
        root / "notebooks" / "01_handbook_boundaries.ipynb",
        [
            _params_cell("n = 1"),
            # 200 kB of output first: the kernel's output travels over ZeroMQ, not a pipe.
            new_code_cell(f"import os, time\nprint('x' * 200_000)\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)"),
        ],
    )
    env = {**os.environ, "CHUNKWISE_ROOT": str(root)}
    cmd = [sys.executable, "-m", "chunkwise.cli", "run-notebooks", "--only", "01_handbook_boundaries", "--no-progress"]
    with DrainedProcess(cmd, env=env) as proc:
        deadline = time.monotonic() + 180  # a kernel start on a busy machine
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            assert proc.proc.poll() is None, proc.output()
            time.sleep(0.1)
        kernel = int(pid_file.read_text())
        assert pid_alive(kernel)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, proc.output()
        assert "interrupted while executing 01_handbook_boundaries.ipynb" in proc.output()
    deadline = time.monotonic() + 30  # normally gone before the command returns
    while pid_alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(kernel), "the kernel outlived run-notebooks"
    generated = root / "book" / "generated"
    assert sorted(p.name for p in generated.iterdir()) == ["01_handbook_boundaries.failed.ipynb"]


def test_warnings_as_notes_prints_each_message_once_without_a_path(capsys):
    import warnings

    from chunkwise.book import warnings_as_notes

    with warnings_as_notes() as notes:
        warnings.warn("reranking with the LLM's yes/no judgement (offline)")
        warnings.warn("only 10 items", UserWarning)
        warnings.warn("reranking with the LLM's yes/no judgement (offline)")
        assert notes == []  # filled when the block ends
    out = capsys.readouterr()
    assert out.out == "note: reranking with the LLM's yes/no judgement (offline)\nnote: only 10 items\n"
    assert out.err == "" and notes == ["reranking with the LLM's yes/no judgement (offline)", "only 10 items"]
    # warnings outside the block are untouched
    with pytest.warns(UserWarning, match="after"):
        warnings.warn("after")


def test_every_chunk_drawing_in_a_chapter_has_a_caption():
    """issue 43: chunk drawings (html_frame) without captions."""
    import ast

    from chunkwise.book import find_repo_root

    root = find_repo_root()
    sources = []  # (where, code): the notebooks' code cells and the chapter modules they call
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        sources += [(path.name, "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "code"]
    for path in sorted((root / "src" / "chunkwise").rglob("*.py")):
        if path.name != "book.py":  # html_frame's own module
            sources.append((str(path.relative_to(root)), path.read_text(encoding="utf-8")))
    calls = 0
    for where, code in sources:
        if "html_frame(" not in code:
            continue
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "html_frame"
                                               or getattr(node.func, "attr", None) == "html_frame"):
                calls += 1
                assert "caption" in {k.arg for k in node.keywords}, f"{where}: html_frame without caption"
    assert calls >= 4


def test_html_frame_caption_is_escaped_under_the_frame():
    from chunkwise.book import html_frame

    out = html_frame("<p>x</p>", height=10, title="t", caption="cuts <b> & seams")
    assert out.endswith('<p class="caption" style="font-size: 0.9em; color: #444;">cuts &lt;b&gt; &amp; seams</p></div>')
    with pytest.raises(ValueError, match="caption must be a non-empty string"):
        html_frame("<p>x</p>", caption=" ")
