"""The book's notebooks: registry, parameter handling and papermill execution.

Every chapter of the book is a notebook in ``notebooks/``, committed without outputs and
with exactly one cell tagged ``parameters``.  :func:`execute_notebook` runs one of them with
papermill into ``book/generated/``; Jupyter Book then renders the executed copies without
executing anything itself (see ``book/_config.yml``).

Parameters are checked before a kernel is started (bug case B23):

- the notebook must have exactly one ``parameters`` cell, made only of ``name = value``
  assignments (parsed with :mod:`ast`, not with papermill's line-based regex, which
  misreads a default such as ``s = "a=b"``);
- every passed name must be declared in that cell;
- the cell papermill is about to inject is parsed back and must reproduce every value
  exactly (strings with quotes, backslashes or ``=`` included).

A *parameter profile* (``notebooks/profiles/<name>.json``, read by :func:`load_profile`) is a
named set of such values per chapter, e.g. the ``ci`` profile that keeps continuous
integration inside its time limit while every cell of every chapter still runs. A chapter
executed under a profile says so on its page (:func:`execute_notebook`, ``origin``).
"""

from __future__ import annotations

import ast
import json
import re
import contextlib
import logging
import math
import os
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "NOTEBOOKS",
    "NotebookCheckError",
    "NotebookExecutionError",
    "OutputDirError",
    "PROFILES_DIR",
    "available_profiles",
    "check_cell_timeout",
    "check_chapter",
    "check_notebook",
    "check_output_dir",
    "check_parameter_type",
    "coerce_parameter",
    "execute_notebook",
    "find_repo_root",
    "html_frame",
    "load_profile",
    "tidy",
    "warnings_as_notes",
    "parameters_cell_defaults",
    "parameters_cell_names",
    "profile_about",
    "registered_notebooks",
    "resolve_notebook",
    "chapter_status",
    "reader_problems",
    "status_markdown",
    "write_status_page",
]

#: Notebooks of the book, in reading order: file names inside ``notebooks/``.
#: ``chunkwise run-notebooks`` executes these into ``book/generated/<name>.ipynb``;
#: ``book/_toc.yml`` lists the generated copies.
NOTEBOOKS: tuple[str, ...] = (
    "01_handbook_boundaries.ipynb", "02_chroma_recall.ipynb", "03_crud_pgrag.ipynb", "03b_crud_chunk_size.ipynb",
    "04_your_own_data.ipynb",
    "05_strategies.ipynb", "06_stitched_vs_real.ipynb", "07_what_matters.ipynb",
)

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
#: Folder of parameter profiles, inside the notebooks folder: ``<name>.json``.
PROFILES_DIR = "profiles"
#: Optional top-level key of a profile: one sentence on what it is for (shown on the pages).
PROFILE_ABOUT_KEY = "_about"
#: Tag of the note added to a chapter executed under a profile.
PROFILE_NOTE_TAG = "parameter-profile-note"
DEFAULT_KERNEL = "python3"
#: Tag of a chapter's second cell: the "What this chapter finds" box, glued from the run.
ANSWER_TAG = "answer-box"
#: Tag of the cell that lists a chapter's learning objectives.
OBJECTIVES_TAG = "learning-objectives"
#: Tag of the code cells of an exercise's solution (executed with the chapter, shown folded).
SOLUTION_TAG = "solution"
#: How many exercises a chapter has.
EXERCISES_PER_CHAPTER = (2, 4)

# Marks a default that is not a Python literal (e.g. ``Path("x")``): its type is unknown.
_NOT_A_LITERAL = object()


class NotebookCheckError(ValueError):
    """A notebook breaks the book's conventions (parameters cell, outputs, parameter names)."""


class NotebookExecutionError(RuntimeError):
    """A notebook raised (or its kernel died) while papermill executed it.

    Attributes
    ----------
    notebook : str
        The notebook's file name.
    output_path : pathlib.Path
        The executed copy; papermill saves it before raising, with the traceback in the
        failing cell.
    detail : str
        One line: where it failed, the exception name and message.
    """

    def __init__(self, notebook: str, output_path: Path, detail: str) -> None:
        self.notebook = notebook
        self.output_path = Path(output_path)
        self.detail = detail
        super().__init__(
            f"notebook {notebook} failed: {detail}\n"
            f"  the executed copy with the traceback is {self.output_path}"
        )


class OutputDirError(OSError):
    """The folder for executed notebooks cannot be used (a file, unwritable, not creatable)."""


_log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- paths


def find_repo_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The repository root (:func:`chunkwise._env.repo_root`, the one home of the rule).

    Raises
    ------
    FileNotFoundError
        As :func:`chunkwise._env.repo_root`.
    """
    from chunkwise._env import repo_root

    return repo_root(start)


def resolve_notebook(name: str | os.PathLike[str], notebooks_dir: str | os.PathLike[str]) -> Path:
    """Find a notebook by path, by file name in ``notebooks_dir`` or by stem (``.ipynb`` optional)."""
    candidate = Path(name)
    if candidate.suffix == ".ipynb" and candidate.is_file():
        return candidate.resolve()
    file_name = candidate.name if candidate.suffix == ".ipynb" else f"{candidate.name}.ipynb"
    path = Path(notebooks_dir) / file_name
    if not path.is_file():
        raise FileNotFoundError(f"notebook {file_name} not found in {notebooks_dir}")
    return path.resolve()


# ----------------------------------------------------------------- parameters cell


def _read(path: str | os.PathLike[str]):
    """Read a notebook; a file that is not one raises :class:`NotebookCheckError` naming it."""
    import nbformat
    from nbformat.reader import NotJSONError

    try:
        return nbformat.read(os.fspath(path), as_version=4)
    except UnicodeDecodeError as exc:
        raise NotebookCheckError(
            f"{path}: not a notebook: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); pass a .ipynb file"
        ) from None
    except NotJSONError:
        raise NotebookCheckError(f"{path}: not a notebook: not JSON; pass a .ipynb file") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON, but not nbformat 4
        raise NotebookCheckError(
            f"{path}: not a notebook ({type(exc).__name__}: {exc}); pass a .ipynb file"
        ) from None


def _cells_without_id(path: str | os.PathLike[str]) -> list[int]:
    """Indices of cells with no ``id`` in the file (nbformat >= 4.5 only).

    Read from the raw JSON: :func:`nbformat.read` fills missing ids in memory with a warning.
    """
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if (raw.get("nbformat"), raw.get("nbformat_minor", 0)) < (4, 5):
        return []
    return [i for i, c in enumerate(raw.get("cells", [])) if not c.get("id")]


def _tags(cell: Mapping[str, Any]) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []) or [])


def _parameters_cell_source(nb, path: str | os.PathLike[str]) -> str:
    cells = [c for c in nb.cells if PARAMETERS_TAG in _tags(c)]
    if len(cells) != 1:
        found = "no cell" if not cells else f"{len(cells)} cells"
        raise NotebookCheckError(
            f"{path}: expected exactly one cell tagged {PARAMETERS_TAG!r}, found {found} "
            f"(without it papermill silently injects parameters at the top of the notebook)"
        )
    cell = cells[0]
    if cell.cell_type != "code":
        raise NotebookCheckError(
            f"{path}: the cell tagged {PARAMETERS_TAG!r} is a {cell.cell_type} cell, not code"
        )
    return cell.source


def _parse_assignments(source: str, path: str | os.PathLike[str]) -> dict[str, ast.expr]:
    """Map each name assigned in a parameters cell to its value node (last assignment wins)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotebookCheckError(
            f"{path}: parameters cell is not valid Python (line {exc.lineno}: {exc.msg})"
        ) from exc
    found: dict[str, ast.expr] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            for target in stmt.targets:
                found[target.id] = stmt.value
        elif (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.value is not None
        ):
            found[stmt.target.id] = stmt.value
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # a docstring-like string or a bare constant: harmless
        elif isinstance(stmt, ast.Pass):
            continue
        else:
            raise NotebookCheckError(
                f"{path}: parameters cell line {stmt.lineno}: only `name = value` assignments "
                f"with a default are allowed, found {ast.unparse(stmt)!r}"
            )
    return found


def parameters_cell_names(path: str | os.PathLike[str]) -> list[str]:
    """Return the names assigned in the notebook's single ``parameters`` cell, in order.

    Raises
    ------
    NotebookCheckError
        If the notebook has no or several ``parameters`` cells, or the cell holds anything
        but ``name = value`` assignments.
    """
    nb = _read(path)
    return list(_parse_assignments(_parameters_cell_source(nb, path), path))


def _literal_value(node: ast.expr) -> Any:
    """Evaluate a literal, including papermill's ``float('nan')`` / ``float('-inf')``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return float(node.args[0].value)
    return ast.literal_eval(node)


def parameters_cell_defaults(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Return ``{name: default}`` for the parameters cell.

    Defaults that are not Python literals (e.g. ``Path("x")``) map to an internal marker;
    :func:`coerce_parameter` then treats their type as unknown.
    """
    nb = _read(path)
    defaults: dict[str, Any] = {}
    for name, node in _parse_assignments(_parameters_cell_source(nb, path), path).items():
        try:
            defaults[name] = _literal_value(node)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            defaults[name] = _NOT_A_LITERAL
    return defaults


# ------------------------------------------------------------------ notebook check


_FIGURE_CALLS = ("plt.show()", "plt.subplots(", "plt.figure(")


def check_notebook(path: str | os.PathLike[str]) -> list[str]:
    """Check that a source notebook follows the book's conventions.

    A source notebook has exactly one code cell tagged ``parameters`` made only of
    ``name = value`` assignments, an ``id`` on every cell (nbformat 4.5), no outputs, no
    execution counts, and no papermill
    ``injected-parameters`` cell (which would mean an executed copy was committed), and a
    caption (``mystnb.figure.caption``) on every cell that draws with matplotlib
    (``plt.subplots(``, ``plt.figure(``, ``plt.show()``), checked here so a missing caption
    fails in seconds rather than after the chapter has run.

    Returns
    -------
    list of str
        The names declared in the parameters cell.

    Raises
    ------
    NotebookCheckError
        Listing every problem found.
    """
    nb = _read(path)
    problems: list[str] = []
    names: list[str] = []
    try:
        names = list(_parse_assignments(_parameters_cell_source(nb, path), path))
    except NotebookCheckError as exc:
        problems.append(str(exc).removeprefix(f"{path}: "))
    with_outputs = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("outputs")
    ]
    counted = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and c.get("execution_count") is not None
    ]
    if with_outputs:
        problems.append(f"cells {with_outputs} have outputs")
    if counted:
        problems.append(f"cells {counted} have execution counts")
    if with_outputs or counted:
        problems.append(
            "clear them before committing (Jupyter: Edit > Clear Outputs of All Cells, then save)"
        )
    without_id = _cells_without_id(path)
    if without_id:
        problems.append(
            f"cells {without_id} have no 'id' (required since nbformat 4.5; open and save the notebook "
            "in Jupyter, or run nbformat.validator.normalize on it)"
        )
    if any(INJECTED_TAG in _tags(c) for c in nb.cells):
        problems.append(
            f"has a papermill {INJECTED_TAG!r} cell: this is an executed copy, not a source notebook"
        )
    uncaptioned = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        and any(call in c.source for call in _FIGURE_CALLS)
        and not c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption")
    ]
    if uncaptioned:
        problems.append(
            f"cells {uncaptioned} draw a figure without a caption (set the cell's metadata "
            "mystnb.figure.caption; the book refuses uncaptioned figures only after executing)"
        )
    if problems:
        raise NotebookCheckError(f"{path}: " + "; ".join(problems))
    return names


_GLUE_REF = re.compile(r"\{glue(?::md|:text|:any)?\}`([^`]+)`|```\{glue(?::md|:any)?\}\s+(\S+)")
_EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n(?:[ \t]*:[^\n]*\n)*?[ \t]*:label:[ \t]*(\S+)")
_SOLUTION_START = re.compile(r"```\{solution-start\}[ \t]+(\S+)")
_SOLUTION_END = re.compile(r"```\{solution-end\}")


def check_chapter(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check that a chapter notebook follows the book's conventions for readers and teachers.

    On top of :func:`check_notebook`'s rules, a chapter has:

    - a first cell that is Markdown and starts with the ``# `` title;
    - a second cell, Markdown, tagged ``answer-box``: an admonition titled "What this chapter
      finds" whose text is glued from the run (``{glue:md}`` references, glued by a code cell
      with ``myst_nb.glue``; :func:`reader_problems` checks in the executed copy that they were);
    - a Markdown cell tagged ``learning-objectives`` among its first five cells;
    - 2 to 4 exercises (sphinx-exercise ``{exercise}`` directives with a ``:label:``), each with a
      ``{solution-start} <label>`` ... ``{solution-end}`` pair that holds at least one code cell
      tagged ``solution`` (executed with the chapter, so a solution that raises fails the run).

    Returns
    -------
    dict
        ``answer_keys`` (glue keys of the answer box), ``exercises`` (labels, in order).

    Raises
    ------
    NotebookCheckError
        Listing every problem found.
    """
    nb = _read(path)
    cells = nb.cells
    problems: list[str] = []
    if not cells or cells[0].cell_type != "markdown" or not cells[0].source.lstrip().startswith("# "):
        problems.append("the first cell must be Markdown starting with the chapter's '# ' title")
    answer_keys: list[str] = []
    if len(cells) < 2 or ANSWER_TAG not in _tags(cells[1]) or cells[1].cell_type != "markdown":
        problems.append(f"the second cell must be a Markdown cell tagged {ANSWER_TAG!r} (the chapter's answer box)")
    else:
        box = cells[1].source
        if "What this chapter finds" not in box:
            problems.append("the answer box must be titled 'What this chapter finds'")
        if "```{glue" in box and not box.lstrip().startswith("````"):
            problems.append(
                "the answer box nests a ```{glue:md} fence, so its admonition needs a longer outer fence "
                "(````{admonition} ... ````); with three backticks the inner fence closes it early"
            )
        answer_keys = [a or b for a, b in _GLUE_REF.findall(box)]
        if not answer_keys:
            problems.append("the answer box glues nothing from the run (use {glue:md}`key`)")
    if not any(OBJECTIVES_TAG in _tags(c) and c.cell_type == "markdown" for c in cells[:5]):
        problems.append(f"no Markdown cell tagged {OBJECTIVES_TAG!r} among the first five cells")
    labels: list[str] = []
    open_label: str | None = None
    solution_cells: dict[str, int] = {}
    for i, c in enumerate(cells):
        if c.cell_type == "markdown":
            for m in re.finditer(
                r"```\{exercise\}.*?```|```\{solution-start\}[^\n]*|```\{solution-end\}", c.source, re.S
            ):
                text = m.group(0)
                if text.startswith("```{exercise}"):
                    lab = _EXERCISE.match(text + "\n")
                    if not lab:
                        problems.append(f"cell {i}: an exercise has no ':label:'")
                    else:
                        labels.append(lab.group(1))
                elif text.startswith("```{solution-start}"):
                    start = _SOLUTION_START.match(text)
                    if open_label is not None:
                        problems.append(f"cell {i}: solution of {open_label!r} is not closed before the next one")
                    open_label = start.group(1) if start else "?"
                    solution_cells.setdefault(open_label, 0)
                else:
                    if open_label is None:
                        problems.append(f"cell {i}: solution-end without solution-start")
                    open_label = None
        elif open_label is not None and SOLUTION_TAG in _tags(c):
            solution_cells[open_label] += 1
    if open_label is not None:
        problems.append(f"the solution of {open_label!r} is never closed (solution-end)")
    lo, hi = EXERCISES_PER_CHAPTER
    if not lo <= len(labels) <= hi:
        problems.append(f"{len(labels)} exercises; a chapter has {lo} to {hi}")
    for lab in labels:
        if lab not in solution_cells:
            problems.append(f"exercise {lab!r} has no solution (solution-start {lab})")
        elif solution_cells[lab] == 0:
            problems.append(f"the solution of {lab!r} has no code cell tagged {SOLUTION_TAG!r}")
    if problems:
        raise NotebookCheckError(f"{path}: " + "; ".join(problems))
    return {"answer_keys": answer_keys, "exercises": labels}


def reader_problems(path: str | os.PathLike[str]) -> list[str]:
    """What an executed chapter shows a reader that the book does not allow.

    - a figure (an ``image/png`` or ``image/svg+xml`` output) from a cell without a caption
      (cell metadata ``mystnb.figure.caption``);
    - a cell tagged ``solution`` that was not executed;
    - a ``{glue...}`` reference in a Markdown cell to a key that no output of the run glued;
    - a table (an HTML output) with a cell that reads ``nan``, ``NaN``, ``None``, ``<NA>`` or a
      negative zero (``-0.0``, ``-0``): missing values need a word or a dash, and a value
      that rounds to zero has no sign;
    - a table with more than :data:`MAX_TABLE_COLUMNS` columns, index included, which the page
      cannot show (split it, or show the columns the text reads).

    Returns
    -------
    list of str
        One line per problem (empty when none).
    """
    nb = _read(path)
    out: list[str] = []
    name = Path(path).name
    glued = {
        o.get("metadata", {}).get("scrapbook", {}).get("name")
        for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    }
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown":
            for key in sorted({a or b for a, b in _GLUE_REF.findall(c.source)} - glued):
                out.append(f"{name} cell {i}: {{glue}} of {key!r}, which the run did not glue")
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        images = [o for o in c.get("outputs", []) if {"image/png", "image/svg+xml"} & set(o.get("data", {}))]
        caption = c.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption")
        if images and not caption:
            out.append(f"{name} cell {i}: a figure without a caption (set metadata mystnb.figure.caption)")
        if SOLUTION_TAG in _tags(c) and c.get("execution_count") is None:
            out.append(f"{name} cell {i}: an exercise solution that was not executed")
        for o in c.get("outputs", []):
            page = o.get("data", {}).get("text/html")
            if not page:
                continue
            page = "".join(page) if isinstance(page, list) else page
            if "srcdoc=" in page:  # a drawing framed as a page (html_frame), not a table
                continue
            for rows in _html_tables(page):
                n_cols = max((len(r) for r in rows), default=0)
                bad = sorted({x for r in rows[1:] for x in r[1:] if _RAW_CELL.fullmatch(x)})
                if bad:
                    out.append(f"{name} cell {i}: a table shows {', '.join(map(repr, bad))} (write a dash or a "
                               "word for a missing value; a value that rounds to zero has no sign)")
                if n_cols > MAX_TABLE_COLUMNS:
                    out.append(f"{name} cell {i}: a table of {n_cols} columns, wider than the page (at most "
                               f"{MAX_TABLE_COLUMNS}: split it or show the columns the text reads)")
    return out


#: Widest table a chapter may show (columns, index included).
MAX_TABLE_COLUMNS = 14
#: Table cells a reader should never see.
_RAW_CELL = re.compile(r"nan|NaN|None|<NA>|NaT|-0(\.0+)?%?")


def _html_tables(page: str) -> list[list[list[str]]]:
    """The tables of an HTML page: per table, its rows of cell texts (header rows included)."""
    from html.parser import HTMLParser

    class _Tables(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tables: list[list[list[str]]] = []
            self.stack: list[list[list[str]]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag == "table":
                self.stack.append([])
            elif tag == "tr" and self.stack:
                self.stack[-1].append([])
            elif tag in ("td", "th") and self.stack and self.stack[-1]:
                self.cell = []

        def handle_endtag(self, tag: str) -> None:
            if tag in ("td", "th") and self.cell is not None and self.stack and self.stack[-1]:
                self.stack[-1][-1].append("".join(self.cell).strip())
                self.cell = None
            elif tag == "table" and self.stack:
                self.tables.append([r for r in self.stack.pop() if r])

        def handle_data(self, data: str) -> None:
            if self.cell is not None:
                self.cell.append(data)

    parser = _Tables()
    parser.feed(page)
    return parser.tables


# ---------------------------------------------------------------- CLI value typing

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _resolve_untyped(raw: str) -> Any:
    """papermill ``-p`` style: None/True/False/int/float when the text is exactly one, else the text."""
    if raw in {"None", "none", "null"}:
        return None
    if raw in {"True", "true"}:
        return True
    if raw in {"False", "false"}:
        return False
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def coerce_parameter(name: str, raw: str, default: Any) -> Any:
    """Turn a command-line string into a parameter value, typed by the notebook's default.

    Parameters
    ----------
    name : str
        The parameter's name (for error messages).
    raw : str
        The text given on the command line, e.g. after ``-p name``.
    default : object
        The default assigned in the parameters cell (from :func:`parameters_cell_defaults`).

    Returns
    -------
    object
        - ``str`` default: ``raw`` unchanged, byte for byte (no YAML/JSON parsing, so
          ``{"k": "v"}``, ``C:\\new\\table`` and ``a=b`` stay the strings they are);
        - ``bool`` default: ``true/false/1/0/yes/no/on/off`` (any case);
        - ``int`` / ``float`` default: ``int(raw)`` / ``float(raw)``;
        - ``list`` / ``tuple`` / ``dict`` default: ``raw`` read as JSON, else as a Python
          literal, of the same kind (tuples are passed as lists);
        - ``None`` or non-literal default: ``None``, ``True``, ``False``, an int or a float
          when ``raw`` spells exactly one (as papermill's ``-p``), else ``raw`` unchanged.

    Raises
    ------
    ValueError
        If ``raw`` cannot be read as the default's type.
    """
    if isinstance(default, str):
        return raw
    if isinstance(default, bool):
        low = raw.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(
            f"parameter {name!r} is a bool (default {default!r}); got {raw!r}, "
            f"expected one of true/false/1/0/yes/no/on/off"
        )
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(
                f"parameter {name!r} is an int (default {default!r}); got {raw!r}"
            ) from None
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise ValueError(
                f"parameter {name!r} is a float (default {default!r}); got {raw!r}"
            ) from None
    if isinstance(default, (list, tuple, dict)):
        import json

        try:
            value = json.loads(raw)
        except ValueError:
            try:
                value = ast.literal_eval(raw)
            except (ValueError, TypeError, SyntaxError, RecursionError):
                value = _NOT_A_LITERAL
        wanted = dict if isinstance(default, dict) else (list, tuple)
        if value is _NOT_A_LITERAL or not isinstance(value, wanted):
            kind = type(default).__name__
            raise ValueError(
                f"parameter {name!r} is a {kind} (default {default!r}); got {raw!r}, "
                f"expected a JSON or Python {kind} literal"
            )
        return list(value) if isinstance(value, tuple) else value
    return _resolve_untyped(raw)


# ------------------------------------------------------------------------ profiles


def _kind(default: Any) -> str:
    return "list" if isinstance(default, tuple) else type(default).__name__


def check_parameter_type(notebook: str, name: str, value: Any, default: Any) -> None:
    """Require ``value`` (read from JSON) to have the type of the parameter's default.

    bool for a bool default, int (not bool) for an int, int or float for a float, str for a
    str, list for a list or tuple, dict for a dict; a ``None`` or non-literal default accepts
    any value (what papermill can inject is checked later).

    Raises
    ------
    NotebookCheckError
        Naming the notebook, the parameter, the expected type and the value.
    """
    if default is None or default is _NOT_A_LITERAL:
        return
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(default, str):
        ok = isinstance(value, str)
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, list)
    elif isinstance(default, dict):
        ok = isinstance(value, dict)
    else:
        ok = True
    if not ok:
        raise NotebookCheckError(
            f"{notebook}: parameter {name!r} is a {_kind(default)} (default {default!r}); "
            f"got {value!r} ({type(value).__name__})"
        )


def available_profiles(notebooks_dir: str | os.PathLike[str]) -> list[str]:
    """Names of the parameter profiles in ``<notebooks_dir>/profiles/`` (``<name>.json``)."""
    folder = Path(notebooks_dir) / PROFILES_DIR
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def load_profile(
    name: str,
    notebooks_dir: str | os.PathLike[str],
    notebooks: Sequence[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Read and check the parameter profile ``<notebooks_dir>/profiles/<name>.json``.

    A profile is a JSON object ``{notebook stem: {parameter: value}}``, e.g.
    ``{"02_chroma_recall": {"corpora": ["chatlogs"]}}``, plus an optional ``"_about"``
    string saying what it is for. Every notebook must be registered, every parameter declared
    in that notebook's ``parameters`` cell, and every value of the default's type
    (:func:`check_parameter_type`) -- all checked here, before any kernel starts.

    Parameters
    ----------
    name : str
        The profile's name (the file name without ``.json``).
    notebooks_dir : path-like
        The notebooks folder.
    notebooks : sequence of str, optional
        The registered notebook file names (default :data:`NOTEBOOKS`).

    Returns
    -------
    dict
        ``{notebook file name: {parameter: value}}`` (the ``"_about"`` text is not included;
        see :func:`profile_about`).

    Raises
    ------
    NotebookCheckError
        Unknown profile (the message lists the available ones), a file that is not a JSON
        object of objects, an unregistered notebook, an undeclared parameter or a value of
        the wrong type.
    """
    registered = list(NOTEBOOKS if notebooks is None else notebooks)
    path = Path(notebooks_dir) / PROFILES_DIR / f"{name}.json"
    if not name or Path(name).name != name or not path.is_file():
        have = ", ".join(available_profiles(notebooks_dir)) or "none"
        raise NotebookCheckError(
            f"unknown parameter profile {name!r}: no {path}; available profiles: {have}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise NotebookCheckError(f"profile {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise NotebookCheckError(
            f"profile {path} must be a JSON object {{notebook stem: {{parameter: value}}}}, "
            f"got a {type(data).__name__}"
        )
    about = data.get(PROFILE_ABOUT_KEY)
    if about is not None and not isinstance(about, str):
        raise NotebookCheckError(f"profile {path}: {PROFILE_ABOUT_KEY!r} must be a string")
    stems = {Path(n).stem: n for n in registered}
    out: dict[str, dict[str, Any]] = {}
    for stem, values in data.items():
        if stem == PROFILE_ABOUT_KEY:
            continue
        if stem not in stems:
            raise NotebookCheckError(
                f"profile {path}: {stem!r} is not a registered notebook; registered: "
                f"{', '.join(stems)}"
            )
        if not isinstance(values, dict):
            raise NotebookCheckError(
                f"profile {path}: the entry of {stem} must be an object {{parameter: value}}, "
                f"got {values!r}"
            )
        file_name = stems[stem]
        defaults = parameters_cell_defaults(resolve_notebook(file_name, notebooks_dir))
        for pname, value in values.items():
            if pname not in defaults:
                raise NotebookCheckError(
                    f"profile {path}: {file_name} does not declare parameter {pname!r} in its "
                    f"parameters cell (it declares: {', '.join(defaults) or 'nothing'})"
                )
            check_parameter_type(file_name, pname, value, defaults[pname])
        out[file_name] = dict(values)
    return out


def profile_about(name: str, notebooks_dir: str | os.PathLike[str]) -> str:
    """The profile's ``"_about"`` sentence ("" when it has none); call after :func:`load_profile`."""
    path = Path(notebooks_dir) / PROFILES_DIR / f"{name}.json"
    about = json.loads(path.read_text(encoding="utf-8")).get(PROFILE_ABOUT_KEY)
    return about if isinstance(about, str) else ""


def _profile_note(parameters: Mapping[str, Any], origin: Mapping[str, str], about: str) -> str:
    """The Markdown of the note that says a page ran with other values than the published build."""
    profiles = sorted({o.removeprefix("profile ") for o in origin.values() if o.startswith("profile ")})
    if profiles:
        head = (
            f"This page was executed under the **{', '.join(profiles)}** parameter profile "
            f"(`notebooks/{PROFILES_DIR}/{profiles[0]}.json`), not with the chapter's defaults"
        )
    else:
        head = "This page was executed with parameters changed from the chapter's defaults"
    lines = [
        "```{note}",
        head + ", so its numbers are not the published ones."
        + (f" {about.strip()}" if about.strip() else ""),
        "Injected parameters:",
        "",
    ]
    for pname, value in parameters.items():
        lines.append(f"- `{pname} = {value!r}` ({origin.get(pname, 'command line')})")
    lines += ["", "`make book` (no profile) builds the published chapter.", "```"]
    return "\n".join(lines)


def _add_profile_note(executed: Path, note: str) -> None:
    """Insert ``note`` as a Markdown cell right after papermill's injected-parameters cell."""
    import nbformat

    nb = nbformat.read(os.fspath(executed), as_version=4)
    where = next((i + 1 for i, c in enumerate(nb.cells) if INJECTED_TAG in _tags(c)), None)
    if where is None:
        where = next((i + 1 for i, c in enumerate(nb.cells) if PARAMETERS_TAG in _tags(c)), 0)
    ids = {c.get("id") for c in nb.cells}
    cell_id = PROFILE_NOTE_TAG
    while cell_id in ids:
        cell_id += "-1"
    cell = nbformat.v4.new_markdown_cell(note, metadata={"tags": [PROFILE_NOTE_TAG]})
    cell["id"] = cell_id
    nb.cells.insert(where, cell)
    nbformat.write(nb, os.fspath(executed))


# ----------------------------------------------------------------------- execution


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same type, recursively (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _check_injection(parameters: Mapping[str, Any], kernel_name: str) -> None:
    """Parse the cell papermill will inject and require each value to come back exactly."""
    from papermill.translators import translate_parameters

    source = translate_parameters(kernel_name, "python", dict(parameters), "Parameters")
    try:
        assigned = _parse_assignments(source, "injected parameters")
    except NotebookCheckError as exc:
        raise NotebookCheckError(f"papermill would inject invalid Python: {exc}\n{source}") from exc
    for name, value in parameters.items():
        node = assigned.get(name)
        try:
            back = _literal_value(node) if node is not None else _NOT_A_LITERAL
        except (ValueError, TypeError, SyntaxError, RecursionError):
            back = _NOT_A_LITERAL
        if not _same(back, value):
            raise NotebookCheckError(
                f"parameter {name!r}: the injected cell would not reproduce {value!r} "
                f"(got {'no literal' if back is _NOT_A_LITERAL else repr(back)}); pass "
                f"str, int, float, bool, None, or lists/dicts of them"
            )


class _DropPapermillParameterWarnings(logging.Filter):
    """papermill's regex inspection warns about defaults containing ``=`` ("Unable to parse
    line", then "Passed unknown parameter") although they are fine; names were already
    checked with :mod:`ast`, so those two messages are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.startswith("Unable to parse line") or msg.startswith("Passed unknown parameter"))


@contextlib.contextmanager
def _quiet_parameter_inspection() -> Iterator[None]:
    loggers = [logging.getLogger("papermill"), logging.getLogger("papermill.translators")]
    flt = _DropPapermillParameterWarnings()
    for lg in loggers:
        lg.addFilter(flt)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(flt)


def check_cell_timeout(value: Any) -> int | None:
    """Return a valid per-cell time limit: ``None`` (no limit) or a whole number of seconds >= 1.

    Raises
    ------
    ValueError
        For anything else (``0``, negatives, fractions, bools, strings): papermill's engine
        would treat ``0`` or a negative as "no limit" and fail on a fraction only after
        starting a kernel.
    """
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"cell_timeout must be a whole number of seconds >= 1, or None for no limit; got {value!r}"
        )
    return value


def check_output_dir(out_dir: str | os.PathLike[str]) -> Path:
    """Create ``out_dir`` if needed and check that a file can be written in it.

    Returns
    -------
    pathlib.Path
        The folder, resolved.

    Raises
    ------
    OutputDirError
        One line naming the folder: it is a file, or cannot be created or written.
    """
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"output folder {out} is a file, not a folder; pass a folder (or a new path)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            reason = "a parent of it is a file"
        raise OutputDirError(
            f"output folder {out} cannot be created or written ({reason}); pass a folder you can write to"
        ) from None
    return out.resolve()


def _kernel_manager_with_log(log: Any, env: Mapping[str, str] | None = None) -> type:
    """A jupyter-client kernel manager that starts the kernel with its stderr in ``log``
    and ``env`` added to its environment (e.g. ``CHUNKWISE_RESULTS_DIR``, where a chapter's
    :func:`chunkwise.findings.write_results` writes).

    The kernel process writes its own log lines (startup notes, and on Ctrl-C an "Exception in
    message handler" traceback from the race between the interrupted cell and the shutdown
    request) to the inherited stderr, i.e. the user's terminal; cell output is not affected
    (ipykernel sends it to the notebook).
    """
    from jupyter_client.manager import AsyncKernelManager

    class _LoggedKernelManager(AsyncKernelManager):
        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
            kw.setdefault("stderr", log)  # Popen keyword, passed down to the kernel launch
            if env:
                kw["env"] = {**(kw.get("env") or os.environ), **env}
            await super().start_kernel(**kw)

    return _LoggedKernelManager


def _file_state(path: Path) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size) of a file, or None when it does not exist."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def execute_notebook(
    name: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    notebooks_dir: str | os.PathLike[str] | None = None,
    kernel_name: str = DEFAULT_KERNEL,
    progress_bar: bool = True,
    cell_timeout: float | None = None,
    origin: Mapping[str, str] | None = None,
    about: str = "",
) -> Path:
    """Execute one notebook with papermill and return the path of the executed copy.

    Parameters
    ----------
    name : str or path-like
        A notebook file name or stem in ``notebooks_dir`` (e.g. ``"01_handbook_boundaries"``),
        or a path to an ``.ipynb`` file.
    parameters : mapping, optional
        ``{name: value}`` injected after the ``parameters`` cell. Values must be str, int,
        float, bool, None, or lists/dicts of them; each name must be declared in the
        notebook's parameters cell. Empty or ``None``: the notebook runs on its defaults and
        nothing is injected.
    out_dir : path-like, optional
        Folder for the executed copy ``<stem>.ipynb``; default ``<repo>/book/generated``.
    notebooks_dir : path-like, optional
        Where notebook names are looked up; default ``<repo>/notebooks``.
    kernel_name : str
        Jupyter kernel to run, default ``"python3"``.
    progress_bar : bool
        Show papermill's per-cell tqdm progress bar.
    cell_timeout : int, optional
        Whole seconds one cell may run (>= 1); ``None`` (default) means no limit, since full
        chunking and evaluation runs can take long.
    origin : mapping, optional
        Where each injected value came from, e.g. ``{"corpora": "profile ci", "top_k":
        "command line"}``. When given (and something was injected), a note is added to the
        executed copy right after papermill's ``injected-parameters`` cell: the page says that
        it ran under that profile, with which values, and that its numbers are not the
        published ones.
    about : str
        One sentence for that note (a profile's ``"_about"``).

    Returns
    -------
    pathlib.Path
        The executed notebook. The kernel's working directory is the notebook's own folder,
        so paths such as ``../data/handbook/handbook.txt`` resolve as they do in Jupyter. The
        kernel's ``CHUNKWISE_RESULTS_DIR`` is ``<out_dir>/results``, where the chapter's
        :func:`chunkwise.findings.write_results` call writes its results file; after a
        successful run ``<out_dir>/results/runs/<stem>.json`` records the injected parameters
        and their origin (empty at the defaults) for the findings page.

    Notes
    -----
    The notebook is executed into a temporary file of its own in ``out_dir``
    (``.<stem>.<pid>-<random>.running.ipynb``; Sphinx ignores dot-files), which replaces
    ``<stem>.ipynb`` only when every cell ran. A failed run keeps its copy as
    ``<stem>.failed.ipynb``; an interrupted one (Ctrl-C) leaves nothing. Either way the last
    good chapter stays. Two runs of one notebook into the same folder do not share a file: the
    one that finishes last replaces the chapter, and a warning (logger ``chunkwise.book``) says
    so. The kernel process's own stderr (not the cells' output, which is in the notebook) goes
    to a log file beside the temporary; it is kept as ``<stem>.failed.kernel.log`` when the
    kernel died or timed out, and named in the error.

    Raises
    ------
    NotebookCheckError
        Before execution: no or several ``parameters`` cells, an undeclared parameter name,
        or a value papermill cannot inject exactly.
    ValueError
        Before execution: ``cell_timeout`` is not None or a whole number >= 1.
    OutputDirError
        Before execution: ``out_dir`` is a file or cannot be created or written.
    NotebookExecutionError
        A cell raised, timed out or the kernel died; the executed copy (with the
        traceback) is still written and named in the message.
    KeyboardInterrupt
        Passed on after the kernel is shut down; what ran is kept as ``<stem>.failed.ipynb``.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    parameters = dict(parameters or {})
    cell_timeout = check_cell_timeout(cell_timeout)
    as_path = Path(name)
    if as_path.suffix == ".ipynb" and as_path.is_file():
        source = as_path.resolve()
    else:
        if notebooks_dir is None:
            notebooks_dir = find_repo_root() / "notebooks"
        source = resolve_notebook(name, notebooks_dir)
    if out_dir is None:
        out_dir = find_repo_root() / "book" / "generated"

    declared = parameters_cell_names(source)
    unknown = [p for p in parameters if p not in declared]
    if unknown:
        raise NotebookCheckError(
            f"{source.name} does not declare parameter(s) {', '.join(map(repr, unknown))} in its "
            f"parameters cell; it declares: {', '.join(declared) or '(none)'}"
        )
    if parameters:
        _check_injection(parameters, kernel_name)

    out_dir = check_output_dir(out_dir)
    output = (out_dir / source.name).resolve()
    # Execute into a side file of this run's own: a failed run must not replace the last good
    # chapter, and a second run of the same notebook must not write into this one's file.
    # (Not mkstemp: its 0600 mode would carry over to the chapter.)
    running = out_dir / f".{source.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.running.ipynb"
    failed = output.with_name(f"{source.stem}.failed.ipynb")
    kernel_log = running.with_suffix(".kernel.log")
    failed_log = output.with_name(f"{source.stem}.failed.kernel.log")
    log_file = open(kernel_log, "wb")  # noqa: SIM115 - closed in the finally below
    # The chapter's findings results go beside the executed copy: <out_dir>/results/<stem>.json.
    results_env = {"CHUNKWISE_RESULTS_DIR": os.fspath(out_dir / "results")}
    engine_kwargs: dict[str, Any] = {"kernel_manager_class": _kernel_manager_with_log(log_file, results_env)}
    if cell_timeout is not None:
        engine_kwargs["execution_timeout"] = cell_timeout
    before = _file_state(output)
    # what the numbers depend on, taken before the kernel starts (chunkwise.provenance)
    from chunkwise.provenance import run_provenance

    try:
        repo_root = find_repo_root(source.parent)
    except FileNotFoundError:
        repo_root = source.parent.parent
    provenance = run_provenance(source, repo_root)
    try:
        try:
            with _quiet_parameter_inspection():
                papermill.execute_notebook(
                    os.fspath(source),
                    os.fspath(running),
                    parameters=parameters,
                    kernel_name=kernel_name,
                    language="python",
                    progress_bar=progress_bar,
                    cwd=os.fspath(source.parent),
                    **engine_kwargs,
                )
        except PapermillExecutionError as exc:
            detail = f"code cell In [{exc.exec_count}]: {exc.ename}: {exc.evalue}"
            _keep_failed(running, failed)
            raise NotebookExecutionError(source.name, failed, detail) from exc
        except Exception as exc:  # kernel death, cell timeout, missing kernel, ...
            _keep_failed(running, failed)
            log_file.close()
            detail = f"{type(exc).__name__}: {exc}"
            if kernel_log.is_file() and kernel_log.stat().st_size:
                kernel_log.replace(failed_log)
                detail += f" (the kernel's own log is {failed_log})"
            raise NotebookExecutionError(source.name, failed, detail) from exc
        except BaseException:  # Ctrl-C: papermill has shut the kernel down; keep what ran
            _keep_failed(running, failed)
            raise
        if _file_state(output) != before:
            _log.warning(
                "%s: another run wrote %s while this one executed; this run finished later and "
                "replaces it", source.name, output,
            )
        if origin is not None and parameters:
            _add_profile_note(running, _profile_note(parameters, origin, about))
        running.replace(output)
        _write_run_record(out_dir / "results", source.stem, parameters, origin, provenance)
    finally:
        # Ctrl-C (KeyboardInterrupt), SystemExit, ...: never leave the hidden partial copy behind.
        running.unlink(missing_ok=True)
        log_file.close()
        kernel_log.unlink(missing_ok=True)
    failed.unlink(missing_ok=True)
    failed_log.unlink(missing_ok=True)
    return output


def _write_run_record(
    results: Path, stem: str, parameters: Mapping[str, Any], origin: Mapping[str, str] | None,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """``<results>/runs/<stem>.json``: the parameters a chapter ran with and where each came from
    (a profile, the command line), read by :func:`chunkwise.findings.load_run_records` so the
    findings page can say which build it reports, and the run's provenance (commit, machine,
    source fingerprints: :func:`chunkwise.provenance.run_provenance`)."""
    import json

    folder = results / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    origin = dict(origin or {})
    record = {
        "chapter": stem,
        "parameters": {k: v for k, v in parameters.items()},
        "origin": {k: origin.get(k, "command line") for k in parameters},
    }
    if provenance is not None:
        record["provenance"] = dict(provenance)
    tmp = folder / f".{stem}.{os.getpid()}.json"
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str), encoding="utf-8")
    tmp.replace(folder / f"{stem}.json")


def _keep_failed(running: Path, failed: Path) -> None:
    """Move a failed run's executed copy aside (``<name>.failed.ipynb``), keeping the good chapter."""
    if running.exists():
        running.replace(failed)


def registered_notebooks(only: Sequence[str] | None = None) -> list[str]:
    """Return registry entries, all of them or those named in ``only`` (with or without ``.ipynb``).

    Raises
    ------
    ValueError
        If a name in ``only`` is not in :data:`NOTEBOOKS`.
    """
    if not only:
        return list(NOTEBOOKS)
    chosen: list[str] = []
    for item in only:
        file_name = item if item.endswith(".ipynb") else f"{item}.ipynb"
        file_name = Path(file_name).name
        if file_name not in NOTEBOOKS:
            raise ValueError(
                f"{item!r} is not a registered notebook; registered: {', '.join(NOTEBOOKS)}"
            )
        if file_name not in chosen:
            chosen.append(file_name)
    return chosen


# --------------------------------------------------------------------- book status

#: Where :func:`write_status_page` writes the intro's status table, relative to the book folder.
STATUS_PAGE = Path("generated") / "status.md"
#: The teaching page's table of measured chapter times (written beside the status page).
TIMINGS_PAGE = Path("generated") / "timings.md"


def _toc_files(toc: Any) -> list[str]:
    """Every ``file`` entry of a parsed ``_toc.yml`` below its root, in reading order."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("file"), str):
                found.append(node["file"])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for key in ("parts", "chapters", "sections"):
        walk((toc or {}).get(key) or [])
    return found


def _notebook_title(nb: Mapping[str, Any]) -> str | None:
    """The first level-one Markdown heading of a notebook, or None."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        for line in text.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return None


def chapter_status(book_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """What the book holds right now: every page of ``_toc.yml`` and its executed notebook.

    Parameters
    ----------
    book_dir : path
        The Jupyter Book folder (with ``_toc.yml``).

    Returns
    -------
    list of dict
        One dict per entry of the table of contents below its root, in reading order:
        ``file`` (as in ``_toc.yml``), ``kind`` (``"notebook"``, ``"page"`` for a Markdown page,
        ``"missing"`` when neither ``<file>.ipynb`` nor ``<file>.md`` exists), ``title`` (first
        ``# `` heading of a notebook, else None), and for notebooks executed by papermill
        ``executed`` (UTC start time, ISO 8601), ``duration_s`` (seconds the kernel ran, float),
        ``parameters`` (the values passed to papermill; empty dict = the notebook's defaults)
        and ``failed`` (papermill recorded an exception); these four are None when the
        notebook carries no papermill record.

    Raises
    ------
    FileNotFoundError
        If ``book_dir`` has no ``_toc.yml``.
    ValueError
        If ``_toc.yml`` is not valid YAML or an executed notebook is not valid JSON.
    """
    import yaml

    book = Path(book_dir)
    toc_path = book / "_toc.yml"
    if not toc_path.is_file():
        raise FileNotFoundError(f"{toc_path} does not exist; pass the book folder (the one with _toc.yml).")
    try:
        toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ValueError(f"{toc_path} is not valid YAML ({exc}); fix the table of contents.") from None
    rows: list[dict[str, Any]] = []
    for file in _toc_files(toc):
        stem = file[:-6] if file.endswith(".ipynb") else file[:-3] if file.endswith(".md") else file
        row: dict[str, Any] = {"file": file, "kind": "missing", "title": None, "executed": None,
                               "duration_s": None, "parameters": None, "failed": None}
        nb_path, md_path = book / f"{stem}.ipynb", book / f"{stem}.md"
        if nb_path.is_file():
            try:
                nb = json.loads(nb_path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ValueError(f"{nb_path} is not a valid notebook ({exc}); rerun chunkwise run-notebooks.") from None
            row["kind"] = "notebook"
            row["title"] = _notebook_title(nb)
            pm = (nb.get("metadata") or {}).get("papermill")
            if isinstance(pm, dict):
                row["executed"] = pm.get("start_time")
                duration = pm.get("duration")
                row["duration_s"] = float(duration) if isinstance(duration, (int, float)) else None
                row["parameters"] = dict(pm.get("parameters") or {})
                row["failed"] = bool(pm.get("exception"))
        elif md_path.is_file():
            row["kind"] = "page"
        rows.append(row)
    return rows


def _format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def status_markdown(rows: Sequence[Mapping[str, Any]], stale: Mapping[str, Sequence[str]] | None = None) -> str:
    """The status table of :func:`chapter_status` as MyST Markdown (one row per page).

    Pages link with ``{doc}`` roles relative to the book's root, so the text is meant to be
    included from a page in the book folder (the intro). A chapter whose executed notebook is
    missing says how to make it; a run with parameters names them. ``stale`` is
    ``{chapter stem: reasons}`` (:func:`chunkwise.provenance.load_stale`): a chapter with
    reasons is marked "older than its source" (its page's banner names what changed).
    """
    lines = [
        "| page | state | executed (UTC) | kernel time | parameters |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        link = f"{{doc}}`{r['title']} <{r['file']}>`" if r.get("title") else f"{{doc}}`{r['file']}`"
        if r["kind"] == "missing":
            name = Path(r["file"]).name
            lines.append(f"| `{r['file']}` | not built: run `chunkwise run-notebooks --only {name}` | - | - | - |")
            continue
        if r["kind"] == "page":
            lines.append(f"| {link} | page | - | - | - |")
            continue
        if r.get("executed") is None:
            lines.append(f"| {link} | notebook, not executed by papermill | - | - | - |")
            continue
        when = str(r["executed"]).replace("T", " ")[:16]
        took = _format_duration(r["duration_s"]) if r.get("duration_s") is not None else "-"
        params = ", ".join(f"`{k}`" for k in r["parameters"]) if r.get("parameters") else "defaults"
        state = "failed (see the page)" if r.get("failed") else "executed"
        if (stale or {}).get(Path(r["file"]).name.removesuffix(".ipynb")):
            state += "; **run older than its source** (the page says what changed)"
        lines.append(f"| {link} | {state} | {when} | {took} | {params} |")
    return "\n".join(lines) + "\n"


def write_status_page(book_dir: str | os.PathLike[str]) -> Path:
    """Write :func:`status_markdown` of :func:`chapter_status` to ``<book_dir>/generated/status.md``
    (with the stale marks of :func:`chunkwise.provenance.load_stale`).

    ``chunkwise build-book`` calls this before building, and the intro includes the file, so
    the intro's status section always describes the chapters of the build it is part of.

    Returns
    -------
    pathlib.Path
        The file written.

    Raises
    ------
    FileNotFoundError, ValueError
        As :func:`chapter_status`.
    """
    from chunkwise.provenance import load_stale

    book = Path(book_dir)
    rows = chapter_status(book)
    out = book / STATUS_PAGE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(status_markdown(rows, load_stale(book / "generated")), encoding="utf-8")
    (book / TIMINGS_PAGE).write_text(timings_markdown(rows), encoding="utf-8")
    return out


def timings_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """How long each chapter's kernel ran in the run this build holds, for the teaching page.

    One row per executed notebook of :func:`chapter_status` (title, kernel time, executed date,
    parameters), then the total; the teaching page includes it, so its timings are always the
    measured ones of the published (or generated) run, never numbers typed into prose.
    """
    lines = ["| chapter | kernel time | executed (UTC) | parameters |", "|---|---|---|---|"]
    total = 0.0
    for r in rows:
        if r.get("kind") != "notebook" or r.get("duration_s") is None:
            continue
        total += float(r["duration_s"])
        params = ", ".join(f"`{k}`" for k in r["parameters"]) if r.get("parameters") else "defaults"
        lines.append(f"| {r.get('title') or r['file']} | {_format_duration(float(r['duration_s']))} | "
                     f"{str(r.get('executed') or '-').replace('T', ' ')[:16]} | {params} |")
    if len(lines) == 2:
        return "No chapter of this build was executed by papermill, so there is no measured time to show.\n"
    lines.append(f"| all of the above | {_format_duration(total)} | | |")
    return "\n".join(lines) + "\n"


def tidy(df: Any, decimals: int | None = None, missing: str = "–") -> Any:
    """A table as a reader should see it: no ``NaN`` and no negative zero.

    Parameters
    ----------
    df : DataFrame
    decimals : int, optional
        Round the float columns to this many decimals first.
    missing : str, default "–"
        Shown for a missing value (the column becomes text where it has one).

    Returns
    -------
    DataFrame
        A copy: float columns rounded (when asked) with ``-0.0`` made ``0.0``; every missing
        value replaced by ``missing``. Whole numbers in a float column with a missing value
        keep their decimals (``12.0``), so read the table's unit from its column name.
    """
    import pandas as pd

    out = df.copy()
    for c in out.columns:
        col = out[c]
        if pd.api.types.is_float_dtype(col):
            col = col.round(decimals) if decimals is not None else col
            col = col + 0.0  # -0.0 + 0.0 == 0.0
            if col.isna().any():
                col = col.astype(object).where(col.notna(), missing)
            out[c] = col
        elif col.isna().any():
            out[c] = col.astype(object).where(col.notna(), missing)
    return out


def html_frame(page: str, height: int = 600, title: str = "figure", caption: str | None = None) -> str:
    """Wrap a standalone HTML page in an ``<iframe srcdoc=...>`` for a notebook output.

    A chapter shows a complete HTML document (for example
    :func:`chunkwise.figures.chunk_boundaries_html`) with ``IPython.display.HTML(html_frame(page))``:
    the frame keeps the page's own ``<style>`` from restyling the book around it, and as the
    page travels inside the attribute, the static book needs no file, script or server for it.

    Parameters
    ----------
    page : str
        The HTML document.
    height : int
        Frame height in CSS pixels (the page scrolls inside the frame beyond it).
    title : str
        The frame's accessible name.
    caption : str, optional
        What the drawing shows, printed under the frame (plain text, escaped); every chapter's
        drawing has one.

    Returns
    -------
    str
        One ``<iframe>`` element (full width, no border) in a ``<div>``, followed by the
        caption in a ``<p class="caption">`` when one is given.

    Raises
    ------
    ValueError
        If ``page`` is not a string or ``height`` not a positive int.
    """
    import html as _html

    if not isinstance(page, str):
        raise ValueError(f"page must be an HTML string, got {type(page).__name__}.")
    if isinstance(height, bool) or not isinstance(height, int) or height < 1:
        raise ValueError(f"height must be a positive int (CSS pixels), got {height!r}.")
    # Inside a <div>: IPython's HTML() warns about a bare <iframe> (it suggests IFrame, which
    # needs a URL the static book does not have).
    if caption is not None and (not isinstance(caption, str) or not caption.strip()):
        raise ValueError(f"caption must be a non-empty string or None, got {caption!r}.")
    below = (
        f'<p class="caption" style="font-size: 0.9em; color: #444;">{_html.escape(caption)}</p>' if caption else ""
    )
    return (
        f'<div><iframe title="{_html.escape(title, quote=True)}" srcdoc="{_html.escape(page, quote=True)}" '
        f'style="width: 100%; height: {height}px; border: 0;"></iframe>{below}</div>'
    )


@contextlib.contextmanager
def warnings_as_notes(prefix: str = "note") -> Iterator[list[str]]:
    """Show the warnings raised inside the block as one plain line each, after it.

    A warning in an executed chapter prints the file and line that raised it (a path on the
    machine that ran the book) and the source line; a reader needs only what it says. Inside
    this block every warning is recorded instead, and at the end each distinct message is
    printed once as ``"{prefix}: {message}"``, in the order first raised.

    Yields
    ------
    list of str
        The distinct messages, filled in when the block ends (for a glue sentence).

    Examples
    --------
    >>> import warnings
    >>> with warnings_as_notes() as notes:
    ...     warnings.warn("reranking with a fallback")
    ...     warnings.warn("reranking with a fallback")
    note: reranking with a fallback
    >>> notes
    ['reranking with a fallback']
    """
    import warnings

    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield messages
        finally:
            for w in caught:
                text = str(w.message)
                if text not in messages:
                    messages.append(text)
    for text in messages:
        print(f"{prefix}: {text}")
