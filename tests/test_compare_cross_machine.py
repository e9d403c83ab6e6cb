"""``chunkwise compare-runs --cross-machine`` (issue 61): every moved value with its size, and whether a
verdict or answer-box sentence changed its words. The run folders are written by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from chunkwise import cli, crossmachine, provenance

STEM = "02_x"
STYLE = "<style type=\"text/css\">\n#T_ab12c_row0_col0 { background-color: #{color}; }\n</style>\n"


def _table(rows: list[tuple[str, str, str]], color: str = "fde725", table_id: str = "T_ab12c") -> dict:
    """A pandas Styler's display output: a style block, a heading row, one row per chunker."""
    body = "".join(f'<tr><th id="{table_id}_level0_row{i}" class="row_heading">{name}</th>'
                   f'<td id="{table_id}_row{i}_col0" class="data row{i} col0">{recall}</td>'
                   f'<td id="{table_id}_row{i}_col1" class="data row{i} col1">{tokens}</td></tr>\n'
                   for i, (name, recall, tokens) in enumerate(rows))
    html = (STYLE.replace("{color}", color) + f'<table id="{table_id}">\n<thead><tr><th class="blank"></th>'
            '<th class="col_heading">recall@1</th><th class="col_heading">mean tokens</th></tr></thead>\n'
            f"<tbody>\n{body}</tbody></table>\n")
    return {"output_type": "display_data", "metadata": {},
            "data": {"text/html": html, "text/plain": "<pandas.io.formats.style.Styler at 0x7f749f48bd10>"}}


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _answer(markdown: str) -> dict:
    return {"output_type": "display_data",
            "metadata": {"scrapbook": {"name": "x_answer", "mime_prefix": "application/papermill.record/"}},
            "data": {"application/papermill.record/text/markdown": markdown,
                     "application/papermill.record/text/plain": repr(markdown)}}


def _run(root: Path, *, recall: str, table: list[tuple[str, str, str]], lead: str, answer: str,
         results: dict, seconds: str = "12.3", extra_cell: bool = False) -> Path:
    """A `run-notebooks --out` folder with one executed chapter and its results file."""
    def code(*outputs: dict) -> dict:
        return {"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "...", "outputs": list(outputs)}

    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# A chapter"},
        code(_stream(f"embedded 600 texts in {seconds} s\nrecall@5 {recall}% over 472 questions\n")),
        code(_table(table, color="fde725" if seconds == "12.3" else "440154")),
        code(_stream(lead)),
        code(_answer(answer)),
    ]
    if extra_cell:
        cells.append(code())
    root.mkdir()
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (root / f"{STEM}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    (root / "results").mkdir()
    (root / "results" / f"{STEM}.json").write_text(
        json.dumps({"chapter": STEM, "written_utc": str(root), "results": results}), encoding="utf-8")
    return root


ROWS = [("Recursive 200", "75.62", "199.1"), ("KamradtMod 300", "36.64", "299.8")]
LEAD = "TokenText 250 leads Recursive 250 by +3.21 [+0.30, +6.25], ahead beyond the noise.\nbest: Cluster 200\n"
ANSWER = ("**Use TokenText 250**: +3.2 [+0.3, +6.3] recall points (**supports**; fragile: 1 of 2 declared "
          "alternatives disagree). Nobody reviewed the 74 questions.")
RESULTS = {"recall": 41.2, "chunks": 1094, "gap_ci": "+3.21 [+0.30, +6.25]", "verdict": "ahead",
           "rows": [{"name": "KamradtMod 300", "recall": 36.64}], "k_winner_changes": "no"}


@pytest.fixture()
def runs(tmp_path: Path) -> dict[str, Path]:
    before = _run(tmp_path / "before", recall="41.2", table=ROWS, lead=LEAD, answer=ANSWER, results=RESULTS)
    # another machine: other timings and colours, the same numbers
    same = _run(tmp_path / "same", recall="41.2", table=ROWS, lead=LEAD, answer=ANSWER, results=RESULTS,
                seconds="9.9")
    # a tie flip: a few numbers move, every word stays
    moved = _run(tmp_path / "moved", recall="41.5", seconds="9.9",
                 table=[ROWS[0], ("KamradtMod 300", "36.43", "299.5")],
                 lead=LEAD.replace("+3.21 [+0.30, +6.25]", "+3.05 [+0.12, +6.01]"),
                 answer=ANSWER.replace("+3.2 [+0.3, +6.3]", "+3.1 [+0.1, +6.0]"),
                 results={**RESULTS, "recall": 41.5, "chunks": 1095, "gap_ci": "+3.05 [+0.12, +6.01]",
                          "rows": [{"name": "KamradtMod 300", "recall": 36.43}]})
    # a verdict flip: the interval reaches 0 and the words change with it
    flipped = _run(tmp_path / "flipped", recall="41.2", table=ROWS, seconds="9.9",
                   lead=("TokenText 250 leads Recursive 250 by +3.05 [-0.12, +6.01], cannot tell.\n"
                         "best: Recursive 200\n"),
                   answer=ANSWER.replace("+3.2 [+0.3, +6.3]", "+3.1 [-0.1, +6.0]").replace(
                       "**supports**", "**cannot tell**"),
                   results={**RESULTS, "gap_ci": "+3.05 [-0.12, +6.01]", "verdict": "cannot tell"})
    return {"before": before, "same": same, "moved": moved, "flipped": flipped}


def _moves(values: list[crossmachine.MovedValue]) -> list[tuple[str, str, str]]:
    return [(m.where, m.before, m.after) for m in values]


def test_the_same_numbers_on_another_machine_move_nothing(runs, capsys):
    (cmp,) = crossmachine.compare_runs_cross_machine(runs["before"], runs["same"])
    assert cmp.same and cmp.cells == 5 and cmp.has_answer
    assert (cmp.moved, cmp.moved_results, cmp.changed, cmp.unpaired, cmp.problem) == ([], [], [], [], None)
    assert cli.main(["compare-runs", runs["before"].as_posix(), runs["same"].as_posix(), "--cross-machine"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "02_x: 5 cells, 0 printed values moved, 0 results values moved, no verdict sentence changed, "
        "answer box unchanged",
        "total: 0 printed values moved, 0 results values moved; no verdict or answer-box sentence changed",
    ]


def test_a_tie_flip_lists_each_moved_value_with_its_size_and_no_verdict_change(runs, capsys):
    (cmp,) = crossmachine.compare_runs_cross_machine(runs["before"], runs["moved"])
    assert _moves(cmp.moved) == [
        ("cell 1 (stdout)", "41.2", "41.5"),
        ("cell 2 (table)", "36.64", "36.43"),
        ("cell 2 (table)", "299.8", "299.5"),
        ("cell 3 (stdout)", "+3.21", "+3.05"),
        ("cell 3 (stdout)", "+0.30", "+0.12"),
        ("cell 3 (stdout)", "+6.25", "+6.01"),
        ("cell 4 (answer box)", "+3.2", "+3.1"),
        ("cell 4 (answer box)", "+0.3", "+0.1"),
        ("cell 4 (answer box)", "+6.3", "+6.0"),
    ]
    assert _moves(cmp.moved_results) == [
        ("results['recall']", "41.2", "41.5"),
        ("results['chunks']", "1094", "1095"),
        ("results['gap_ci']", "+3.21", "+3.05"),
        ("results['gap_ci']", "+0.30", "+0.12"),
        ("results['gap_ci']", "+6.25", "+6.01"),
        ("results['rows'][0]['recall']", "36.64", "36.43"),
    ]
    # sizes: the move in the printed unit and relative to the value before
    recall, row, tokens = cmp.moved[:3]
    assert recall.move == pytest.approx(0.3) and recall.relative == pytest.approx(0.3 / 41.2)
    assert row.move == pytest.approx(-0.21) and row.relative == pytest.approx(-0.21 / 36.64)
    assert cmp.moved_results[1].move == 1 and cmp.moved_results[1].relative == pytest.approx(1 / 1094)
    # where and around what: the table cell under its column heading, the printed line
    assert recall.context == "recall@5 41.2% over 472 questions"
    assert row.context == "KamradtMod 300 | recall@1: 36.64 | mean tokens: 299.8"
    assert recall.describe() == ('cell 1 (stdout) "recall@5 41.2% over 472 questions": 41.2 -> 41.5 '
                                 "(+0.3, +0.728% relative)")
    assert cmp.moved_results[1].describe() == "results['chunks']: 1094 -> 1095 (+1, +0.0914% relative)"
    # numbers only: no sentence changed its words, the answer box included
    assert cmp.changed == [] and cmp.verdict_changes == [] and cmp.answer_changes == [] and not cmp.same
    assert cmp.summary() == ("02_x: 5 cells, 9 printed values moved, 6 results values moved, "
                             "no verdict sentence changed, answer box unchanged")

    assert cli.main(["compare-runs", str(runs["before"]), str(runs["moved"]), "--cross-machine"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == cmp.summary()
    assert '  moved cell 2 (table) "KamradtMod 300 | recall@1: 36.64 | mean tokens: 299.8": 36.64 -> 36.43 ' \
           "(-0.21, -0.573% relative)" in out
    assert "  moved results['rows'][0]['recall']: 36.64 -> 36.43 (-0.21, -0.573% relative)" in out
    assert len([line for line in out if line.startswith("  moved ")]) == 15
    assert out[-1] == ("total: 9 printed values moved (largest 0.3, 41.2 -> 41.5 in 02_x cell 1 (stdout)), "
                       "6 results values moved (largest 1, 1094 -> 1095 in 02_x results['chunks']); "
                       "no verdict or answer-box sentence changed")


def test_a_word_change_from_ahead_to_cannot_tell_is_reported(runs, capsys):
    (cmp,) = crossmachine.compare_runs_cross_machine(runs["before"], runs["flipped"])
    # a sentence whose words changed is listed whole, before and after, and its numbers are not listed as moves
    assert cmp.moved == []
    first = ANSWER.split(" Nobody")[0]
    assert [(c.where, c.before, c.after, c.verdict, c.answer) for c in cmp.changed] == [
        ("cell 3 (stdout)", "TokenText 250 leads Recursive 250 by +3.21 [+0.30, +6.25], ahead beyond the noise.",
         "TokenText 250 leads Recursive 250 by +3.05 [-0.12, +6.01], cannot tell.", True, False),
        ("cell 3 (stdout)", "best: Cluster 200", "best: Recursive 200", False, False),
        ("cell 4 (answer box)", first,
         first.replace("+3.2 [+0.3, +6.3]", "+3.1 [-0.1, +6.0]").replace("**supports**", "**cannot tell**"),
         True, True),
        ("results['verdict']", "ahead", "cannot tell", True, False),
    ]
    assert _moves(cmp.moved_results) == [("results['gap_ci']", "+3.21", "+3.05"),
                                         ("results['gap_ci']", "+0.30", "-0.12"),
                                         ("results['gap_ci']", "+6.25", "+6.01")]
    assert len(cmp.verdict_changes) == 3 and len(cmp.answer_changes) == 1
    assert cmp.summary() == ("02_x: 5 cells, 0 printed values moved, 3 results values moved, "
                             "3 verdict sentences changed, answer box changed (1 sentence), "
                             "1 other sentence or label changed")

    assert cli.main(["compare-runs", str(runs["before"]), str(runs["flipped"]), "--cross-machine"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [c.verdict_words for c in cmp.changed] == [
        "ahead, beyond the noise -> cannot tell", "", "supports, fragile, disagree -> cannot tell, fragile, disagree",
        "ahead -> cannot tell"]
    assert ("  verdict sentence changed in results['verdict'] (verdict words: ahead -> cannot tell): "
            '"ahead" -> "cannot tell"') in out
    assert '  other sentence changed in cell 3 (stdout): "best: Cluster 200" -> "best: Recursive 200"' in out
    assert ("  answer-box verdict sentence changed in cell 4 (answer box) (verdict words: supports, fragile, "
            "disagree -> cannot tell, fragile, disagree): "
            '"**Use TokenText 250**: +3.2 [+0.3, '
            '+6.3] recall points (**supports**; fragile: 1 of 2 declared alternatives disagree)." -> "**Use '
            'TokenText 250**: +3.1 [-0.1, +6.0] recall points (**cannot tell**; fragile: 1 of 2 declared '
            'alternatives disagree)."') in out
    assert out[-1] == ("total: 0 printed values moved, 3 results values moved (largest 0.42, +0.30 -> -0.12 in 02_x "
                       "results['gap_ci']); 3 verdict or answer-box sentences changed (3 stating a verdict, 3 of "
                       "them with other verdict words, 1 in an answer box: 02_x cell 3 (stdout), 02_x cell 4 "
                       "(answer box), 02_x results['verdict']); "
                       "1 other sentence or label changed")


def test_a_long_sentence_is_quoted_around_its_changed_words():
    long = ("On 5 corpora the baseline, Recursive 200, recalls 75.6% of the evidence at a precision of 29.9%: none "
            "has a higher recall beyond the noise; LLM (-7.7 points [-11.9, -3.4]) has a lower recall; the other 6 "
            "are within the noise.")
    changed = crossmachine.ChangedSentence("cell 9 (markdown)", long, long.replace("none has", "Cluster 200 has"),
                                         True, False)
    assert changed.describe() == (
        'verdict sentence changed in cell 9 (markdown): "...75.6% of the evidence at a precision of 29.9%: none has '
        'a higher recall beyond the noise; LLM (-7.7..." -> "...75.6% of the evidence at a precision of 29.9%: '
        'Cluster 200 has a higher recall beyond the noise; LLM (-7.7..."')
    assert changed.verdict_words == ""  # constructed by hand; compare_runs_cross_machine fills it
    added = crossmachine.ChangedSentence("results['x']", None, '"cannot tell"', True, False)
    assert added.describe() == "verdict sentence changed in results['x']: (none) -> \"\"cannot tell\"\""


def test_the_book_words_its_verdicts_with_its_own_constants():
    words = crossmachine.verdict_vocabulary()
    for phrase in ("cannot tell", "fragile", "robust", "inconclusive", "not reproduced", "supports", "ahead",
                   "chunker ahead", "fixed as good or better"):  # the last two: words of plan entries
        assert phrase in words
    assert list(words) == sorted(words, key=lambda w: (-len(w), w))
    # a bare yes / no is a verdict as a whole value only, never as a word of a sentence
    assert crossmachine._verdict_matcher(words).search("there is no interval to give") is None
    assert crossmachine._verdict_matcher(words).search("Can the winner lose? **no**") is not None


def test_cells_that_cannot_be_paired_still_compare_the_answer_and_results(runs, tmp_path):
    longer = _run(tmp_path / "longer", recall="41.2", table=ROWS, lead=LEAD, results={**RESULTS, "new": 1},
                  answer=ANSWER.replace("**supports**", "**contradicts**"), extra_cell=True)
    (cmp,) = crossmachine.compare_runs_cross_machine(runs["before"], longer)
    assert cmp.problem == "5 cells against 6: the source notebooks differ" and not cmp.same
    assert [(c.where, c.before, c.after, c.verdict, c.answer) for c in cmp.changed] == [
        ("answer box", ANSWER.split(" Nobody")[0],
         ANSWER.split(" Nobody")[0].replace("**supports**", "**contradicts**"), True, True),
        ("results['new']", None, "1", False, False),
    ]
    (missing,) = crossmachine.compare_runs_cross_machine(runs["before"], longer, chapters=["03_missing"])
    assert missing.problem.startswith("missing ") and missing.changed == [] and not missing.has_answer
    with pytest.raises(provenance.PublishError, match="is not a folder"):
        crossmachine.compare_runs_cross_machine(tmp_path / "nowhere", longer)
    assert cli.main(["compare-runs", str(tmp_path / "nowhere"), str(longer), "--cross-machine"]) == 2


def test_rtol_keeps_float_noise_out_of_the_list(runs, tmp_path):
    noise = _run(tmp_path / "noise", recall="41.2000001", table=ROWS, lead=LEAD, answer=ANSWER,
                 results={**RESULTS, "recall": 41.2 + 4e-9})
    (exact,) = crossmachine.compare_runs_cross_machine(runs["before"], noise)
    assert _moves(exact.moved) == [("cell 1 (stdout)", "41.2", "41.2000001")]
    assert _moves(exact.moved_results) == [("results['recall']", "41.2", repr(41.2 + 4e-9))]
    assert math.isclose(exact.moved[0].move, 1e-7, rel_tol=1e-6)
    (loose,) = crossmachine.compare_runs_cross_machine(runs["before"], noise, rtol=1e-6)
    assert loose.same
    # a NaN equals only a NaN; a value that turns into one is listed without a size
    missing = _run(tmp_path / "nan_a", recall="41.2", table=ROWS, lead=LEAD, answer=ANSWER,
                   results={"share": math.nan, "kept": math.nan})
    found = _run(tmp_path / "nan_b", recall="41.2", table=ROWS, lead=LEAD, answer=ANSWER,
                 results={"share": 0.5, "kept": math.nan})
    (cmp,) = crossmachine.compare_runs_cross_machine(missing, found)
    assert [m.describe() for m in cmp.moved_results] == [
        "results['share']: nan -> 0.5 (to or from a value that is not a finite number)"]


def _html_run(root: Path, html: str) -> Path:
    nb = {"cells": [{"cell_type": "code", "execution_count": 1, "metadata": {}, "source": "...",
                     "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {},
                                  "data": {"text/html": html, "text/plain": "<Styler>"}}]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    root.mkdir()
    (root / f"{STEM}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root


def _spanned(seconds: str, count: str, policy: str, verdict: str, share: str) -> str:
    """A table with a row heading spanning two rows, a column of durations, and a verdict column."""
    return ("<table><thead><tr><th></th><th></th><th>texts embedded</th><th>seconds</th><th>verdict</th>"
            f"<th>{policy}</th></tr></thead><tbody>"
            f'<tr><th rowspan="2">truncate</th><th>MiniLM</th><td>11,542</td><td>{seconds}</td><td>{verdict}</td>'
            f"<td>{share}</td></tr>"
            f"<tr><th>e5</th><td>{count}</td><td>0</td><td>cannot tell</td><td>0.5</td></tr></tbody></table>")


def test_tables_carry_spanned_headings_mask_durations_and_name_reworded_verdict_rows(tmp_path):
    before = _html_run(tmp_path / "a", _spanned("12", "2,099", "long-text policy", "embedder ahead", "38.3"))
    after = _html_run(tmp_path / "b", _spanned("31", "3,864", "long-text policy", "embedder ahead", "38.300000"))
    (cmp,) = crossmachine.compare_runs_cross_machine(before, after)
    # the seconds column is masked; the spanned heading "truncate" leads the second row too; a long row is
    # quoted by its headings and the number's cell
    html = _spanned("12", "2,099", "long-text policy", "embedder ahead", "38.3")
    assert crossmachine._html_text(html).splitlines() == [
        " |  | texts embedded | seconds | verdict | long-text policy",
        "truncate | MiniLM | texts embedded: 11,542 | seconds: <T> | verdict: embedder ahead | long-text policy: 38.3",
        "truncate | e5 | texts embedded: 2,099 | seconds: <T> | verdict: cannot tell | long-text policy: 0.5",
    ]
    assert [m.describe() for m in cmp.moved] == [
        'cell 0 (table) "truncate | MiniLM | ... | long-text policy: 38.3": 38.3 -> 38.300000 (the same value, '
        "printed differently)",
        'cell 0 (table) "truncate | e5 | texts embedded: 2,099": 2,099 -> 3,864 (+1765, +84.1% relative)',
    ]
    assert cmp.changed == []
    # a renamed column in rows that state verdicts: verdict sentences changed, with the same verdict words
    renamed = _html_run(tmp_path / "c", _spanned("12", "2,099", "long_text_policy", "embedder ahead", "38.3"))
    (cmp,) = crossmachine.compare_runs_cross_machine(before, renamed)
    assert [(c.verdict, c.verdict_words) for c in cmp.changed] == [(False, ""), (True, ""), (True, "")]
    assert cmp.summary() == ("02_x: 1 cells, 0 printed values moved, 0 results values moved, 2 verdict sentences "
                             "changed, no answer box in either run, 1 other sentence or label changed")
    flipped = _html_run(tmp_path / "d", _spanned("12", "2,099", "long-text policy", "chunker ahead", "38.3"))
    (cmp,) = crossmachine.compare_runs_cross_machine(before, flipped)
    assert [(c.where, c.verdict_words) for c in cmp.changed] == [("cell 0 (table)", "embedder ahead -> chunker ahead")]
