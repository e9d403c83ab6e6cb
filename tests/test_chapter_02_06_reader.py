"""Chapters 2 and 6 as readers and teachers see them, checked on the source notebook (no execution).

The executed chapter is checked by ``chunkwise build-book`` (:func:`chunkwise.book.reader_problems`);
these tests catch the same slips before a run: the answer box, the exercises, glue keys that no
cell glues, and exercise solutions that rebind names the rest of the chapter uses.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from chunkwise import book

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
#: (notebook, prefix of its glue keys)
CHAPTERS = pytest.mark.parametrize(("NOTEBOOK", "PREFIX"), [
    (NOTEBOOKS / "02_chroma_recall.ipynb", "ch2_"), (NOTEBOOKS / "06_stitched_vs_real.ipynb", "ch6_"),
    (NOTEBOOKS / "07_what_matters.ipynb", "ch7_"),
], ids=["02", "06", "07"])
GLUED = re.compile(r"glue\(\s*[\"']([^\"']+)[\"']")


class _Binder(ast.NodeVisitor):
    """Names a cell binds for the cells after it (not those local to a def or a comprehension)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.names.add(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.names.add(node.name)

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.names.update((a.asname or a.name).split(".")[0] for a in node.names)

    visit_ImportFrom = visit_Import  # type: ignore[assignment]

    def _local(self, node: ast.AST) -> None:
        pass

    visit_Lambda = visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _local


def _bound(source: str) -> set[str]:
    binder = _Binder()
    binder.visit(ast.parse(source))
    return binder.names


def _code_cells(notebook):
    return [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]


@CHAPTERS
def test_answer_box_objectives_and_exercises(NOTEBOOK, PREFIX):
    found = book.check_chapter(NOTEBOOK)
    assert found["answer_keys"] == [f"{PREFIX}answer"]
    assert found["exercises"] == [f"{PREFIX[:-1]}-ex{i}" for i in (1, 2, 3)]
    gluing = [c for c in _code_cells(NOTEBOOK) if f"{PREFIX}answer" in GLUED.findall(c.source)]
    assert len(gluing) == 1 and "remove-input" in gluing[0].metadata.get("tags", [])


@CHAPTERS
def test_every_glue_reference_is_glued_and_prefixed(NOTEBOOK, PREFIX):
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    glued = {k for c in cells if c.cell_type == "code" for k in GLUED.findall(c.source)}
    referenced = {a or b for c in cells if c.cell_type == "markdown" for a, b in book._GLUE_REF.findall(c.source)}
    assert referenced <= glued, sorted(referenced - glued)
    assert all(k.startswith(PREFIX) for k in glued | referenced), sorted(glued | referenced)


@CHAPTERS
def test_solutions_leave_the_chapter_names_alone(NOTEBOOK, PREFIX):
    cells = _code_cells(NOTEBOOK)
    solutions = [c for c in cells if book.SOLUTION_TAG in c.metadata.get("tags", [])]
    assert solutions
    chapter = set(book.parameters_cell_names(NOTEBOOK))
    for c in cells:
        if c not in solutions:
            tree = ast.parse(c.source)
            chapter |= _bound(c.source) | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for c in solutions:
        clash = _bound(c.source) & chapter
        assert not clash, f"solution cell {c.id} rebinds {sorted(clash)}, which the chapter uses"
