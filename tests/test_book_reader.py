"""The book's conventions for readers and teachers: answer box, objectives, exercises, captions."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from chunkwise import book

ROOT = Path(__file__).resolve().parents[1]

BOX = "````{admonition} What this chapter finds\n:class: tip\n\n```{glue:md} ans\n:format: myst\n```\n\n````"
OBJ = "```{admonition} Learning objectives\n:class: note\n\n- read a table\n```"


def _exercise(label: str) -> list:
    sol = new_code_cell("answer = 1 + 1")
    sol.metadata["tags"] = ["solution"]
    return [
        new_markdown_cell(f"```{{exercise}}\n:label: {label}\n\nPredict 1 + 1.\n```\n\n"
                          f"```{{solution-start}} {label}\n:class: dropdown\n```"),
        sol,
        new_markdown_cell("It is 2.\n\n```{solution-end}\n```"),
    ]


def _chapter(path: Path, *, box: bool = True, objectives: bool = True, exercises=("c-ex1", "c-ex2")) -> Path:
    params = new_code_cell("n = 1")
    params.metadata["tags"] = ["parameters"]
    cells = [new_markdown_cell("# A chapter")]
    if box:
        c = new_markdown_cell(BOX)
        c.metadata["tags"] = ["answer-box"]
        cells.append(c)
    if objectives:
        c = new_markdown_cell(OBJ)
        c.metadata["tags"] = ["learning-objectives"]
        cells.append(c)
    cells += [params, new_code_cell("from myst_nb import glue\nglue('ans', 'two', display=False)")]
    cells.append(new_markdown_cell("## Exercises"))
    for label in exercises:
        cells += _exercise(label)
    nbformat.write(new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                        "language": "python"}}), path)
    return path


def test_a_chapter_with_box_objectives_and_exercises_passes(tmp_path):
    got = book.check_chapter(_chapter(tmp_path / "c.ipynb"))
    assert got == {"answer_keys": ["ans"], "exercises": ["c-ex1", "c-ex2"]}


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"box": False}, "second cell must be a Markdown cell tagged 'answer-box'"),
        ({"objectives": False}, "no Markdown cell tagged 'learning-objectives'"),
        ({"exercises": ("c-ex1",)}, "1 exercises; a chapter has 2 to 4"),
        ({"exercises": tuple(f"c-ex{i}" for i in range(5))}, "5 exercises; a chapter has 2 to 4"),
    ],
)
def test_a_chapter_missing_a_reader_convention_fails(tmp_path, kw, message):
    with pytest.raises(book.NotebookCheckError, match=message):
        book.check_chapter(_chapter(tmp_path / "c.ipynb", **kw))


def test_an_exercise_without_a_solution_code_cell_fails(tmp_path):
    path = _chapter(tmp_path / "c.ipynb")
    nb = nbformat.read(path, 4)
    for c in nb.cells:
        if "solution" in c.metadata.get("tags", []):
            c.metadata["tags"] = []
            break
    nbformat.write(nb, path)
    with pytest.raises(book.NotebookCheckError, match="the solution of 'c-ex1' has no code cell tagged 'solution'"):
        book.check_chapter(path)


def test_an_answer_box_with_three_backticks_around_a_glue_fence_fails(tmp_path):
    path = _chapter(tmp_path / "c.ipynb")
    nb = nbformat.read(path, 4)
    nb.cells[1].source = BOX[1:-1]  # ```{admonition} ... ```: the inner fence would close it
    nbformat.write(nb, path)
    with pytest.raises(book.NotebookCheckError, match="needs a longer outer fence"):
        book.check_chapter(path)


def test_an_answer_box_that_glues_nothing_fails(tmp_path):
    path = _chapter(tmp_path / "c.ipynb")
    nb = nbformat.read(path, 4)
    nb.cells[1].source = "```{admonition} What this chapter finds\n:class: tip\n\nTyped by hand: 42.\n```"
    nbformat.write(nb, path)
    with pytest.raises(book.NotebookCheckError, match="glues nothing from the run"):
        book.check_chapter(path)


@pytest.mark.parametrize("name", book.NOTEBOOKS)
def test_every_chapter_of_the_book_opens_with_its_answer_and_has_exercises(name):
    got = book.check_chapter(ROOT / "notebooks" / name)
    assert got["answer_keys"] and 2 <= len(got["exercises"]) <= 4


def test_reader_problems_in_an_executed_chapter(tmp_path):
    path = _chapter(tmp_path / "c.ipynb")
    nb = nbformat.read(path, 4)
    fig = new_code_cell("plot()", execution_count=1)
    fig.outputs = [new_output("display_data", {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})]
    nb.cells.append(fig)
    nb.cells.append(new_markdown_cell("Inline: {glue:md}`missing_key`."))
    nbformat.write(nb, path)
    problems = book.reader_problems(path)
    assert any("a figure without a caption" in p for p in problems)
    assert any("an exercise solution that was not executed" in p for p in problems)  # never run
    assert any("'missing_key', which the run did not glue" in p for p in problems)
    assert any("'ans', which the run did not glue" in p for p in problems)
    # Executed, captioned and glued: nothing left.
    nb = nbformat.read(path, 4)
    nb.cells = [c for c in nb.cells if "missing_key" not in c.source]
    for c in nb.cells:
        if c.cell_type == "code":
            c.execution_count = 1
            if "glue(" in c.source:
                c.outputs = [new_output("display_data", {"application/papermill.record/text/plain": "'two'"},
                                        metadata={"scrapbook": {"name": "ans", "mime_prefix": "application/papermill.record/"}})]
    nb.cells[-1].metadata["mystnb"] = {"figure": {"caption": "Look at the slope.", "name": "fig-x"}}
    nbformat.write(nb, path)
    assert book.reader_problems(path) == []


@pytest.mark.integration
def test_a_solution_that_raises_fails_the_chapter_run(tmp_path):
    path = _chapter(tmp_path / "c.ipynb")
    nb = nbformat.read(path, 4)
    for c in nb.cells:
        if "solution" in c.metadata.get("tags", []):
            c.source = "raise ValueError('the exercise rotted')"
            break
    nbformat.write(nb, path)
    with pytest.raises(book.NotebookExecutionError, match="the exercise rotted"):
        book.execute_notebook(path, {}, tmp_path / "out", progress_bar=False)


def test_tidy_and_the_reader_check_on_raw_table_cells(tmp_path):
    import nbformat
    import pandas as pd
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from chunkwise import book

    df = pd.DataFrame({"a": [-0.04, 1.26, float("nan")], "b": ["x", None, "y"], "n": [1, 2, 3]})
    t = book.tidy(df, decimals=1)
    assert t["a"].tolist() == [0.0, 1.3, "–"] and str(t["a"].iloc[0]) == "0.0"
    assert t["b"].tolist() == ["x", "–", "y"] and t["n"].tolist() == [1, 2, 3]

    def page(frame):
        cell = new_code_cell("frame")
        cell.outputs = [new_output("execute_result", {"text/html": frame.to_html(), "text/plain": "x"},
                                   execution_count=1)]
        path = tmp_path / "ch.ipynb"
        nbformat.write(new_notebook(cells=[cell]), path)
        return book.reader_problems(path)

    raw = page(df.round(1))
    assert raw == ["ch.ipynb cell 0: a table shows '-0.0', 'NaN' (write a dash or a word for a missing "
                   "value; a value that rounds to zero has no sign)"]
    assert page(t) == []
    wide = pd.DataFrame([range(15)], columns=[f"c{i}" for i in range(15)])
    assert page(wide) == ["ch.ipynb cell 0: a table of 16 columns, wider than the page (at most 14: split it or "
                          "show the columns the text reads)"]
