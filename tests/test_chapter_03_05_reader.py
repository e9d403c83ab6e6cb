"""Chapters 3 and 5 as readers and teachers see them, checked on the source notebooks (no execution).

The executed chapters are checked by ``chunkwise build-book`` (:func:`chunkwise.book.reader_problems`);
these tests catch the same slips before a run: the answer box and where its text comes from, the
exercises, glue keys that no cell glues, solutions that rebind names the rest of the chapter uses,
and code lines that run off the page.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from chunkwise import book

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# chapter -> (glue prefix, the chunkwise function that writes its answer)
CHAPTERS = {"03_crud_pgrag.ipynb": ("ch3", "crud.chapter_answer("),
            "05_strategies.ipynb": ("ch5", "S.chapter_answer(")}
# glue("key", ...) and glue(f"{m}_vs_{ref}", ...): the key, or an f-string template of keys
GLUED = re.compile(r"glue\(\s*(f?)[\"']([^\"']+)[\"']")


def _cells(name):
    return nbformat.read(NOTEBOOKS / name, as_version=4).cells


def _glued_patterns(cells) -> list[re.Pattern]:
    """What the code cells glue: literal keys, f-string templates (``{...}`` matches anything) and,
    in a cell that glues under a variable (``glue(name, ...)``), the string literals it loops over."""
    out = []
    for c in cells:
        if c.cell_type != "code":
            continue
        for is_f, key in GLUED.findall(c.source):
            pattern = re.escape(key) if not is_f else re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(key))
            out.append(re.compile(pattern + r"\Z"))
        if re.search(r"glue\(\s*[A-Za-z_]", c.source):
            out += [re.compile(re.escape(n.value) + r"\Z") for n in ast.walk(ast.parse(c.source))
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return out


def _bound(source: str) -> set[str]:
    """Names a cell binds for the cells after it (not those local to a comprehension or lambda)."""
    names: set[str] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(ast.parse(source))
    return names


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_the_answer_box_is_glued_from_a_function_of_the_run(name):
    prefix, builder = CHAPTERS[name]
    found = book.check_chapter(NOTEBOOKS / name)
    assert found["answer_keys"] == [f"{prefix}_answer"]
    assert found["exercises"] == [f"{prefix}-ex{i}" for i in (1, 2, 3)]
    cells = _cells(name)
    assert "learning-objectives" in cells[2].metadata.get("tags", [])
    gluing = [c for c in cells if c.cell_type == "code" and ("", f"{prefix}_answer") in GLUED.findall(c.source)]
    assert len(gluing) == 1 and "remove-input" in gluing[0].metadata.get("tags", [])
    assert builder in gluing[0].source  # built from the computed tables, never typed by hand


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_every_glue_reference_is_glued(name):
    cells = _cells(name)
    patterns = _glued_patterns(cells)
    referenced = {a or b for c in cells if c.cell_type == "markdown" for a, b in book._GLUE_REF.findall(c.source)}
    missing = sorted(k for k in referenced if not any(p.match(k) for p in patterns))
    assert not missing


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_solutions_leave_the_chapter_names_alone(name):
    cells = [c for c in _cells(name) if c.cell_type == "code"]
    solutions = [c for c in cells if book.SOLUTION_TAG in c.metadata.get("tags", [])]
    assert len(solutions) == 3
    chapter = set(book.parameters_cell_names(NOTEBOOKS / name))
    for c in cells:
        if c not in solutions:
            chapter |= _bound(c.source) | {n.id for n in ast.walk(ast.parse(c.source)) if isinstance(n, ast.Name)}
    for c in solutions:
        clash = _bound(c.source) & chapter
        assert not clash, f"solution cell {c.id} rebinds {sorted(clash)}, which the chapter uses"


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_code_fits_the_page_and_plumbing_is_hidden(name):
    cells = [c for c in _cells(name) if c.cell_type == "code"]
    for c in cells:
        tags = c.metadata.get("tags", [])
        if "parameters" in tags:  # left as it is (its comments document each parameter)
            assert "hide-input" in tags
            continue
        too_long = [line for line in c.source.splitlines() if len(line) > 100]
        assert not too_long, (c.id, too_long)
    shown = [c.id for c in cells if not {"hide-input", "remove-input", "remove-cell", "solution"}
             & set(c.metadata.get("tags", []))]
    assert len(shown) <= 2, shown  # only the cells whose code is the lesson
