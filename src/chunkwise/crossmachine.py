"""Compare a run of the book made on another machine: which printed values moved, and did a verdict change.

On another CPU, float differences of about 1e-7 can flip a percentile breakpoint or a near-tie: a
chunker cuts one document once more, a cell at the k boundary swaps places, and a few printed values
move by 0.1 to 0.5 points while every conclusion stands. :func:`chunkwise.provenance.compare_runs`
says that something moved; :func:`compare_runs_cross_machine` (``chunkwise compare-runs
--cross-machine``) lists each moved number with its size and says whether any sentence that states
a verdict, or any sentence of a chapter's answer box, changed its words. The verdict words are the
book's own (:func:`verdict_vocabulary`: the findings page's verdict classes, the robustness classes,
the analysis plan's words).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, Sequence

from chunkwise.provenance import _VOLATILE, _answer_text, _close, _read_json, _results_values, _stems

__all__ = [
    "ChangedSentence",
    "CrossMachineComparison",
    "MovedValue",
    "compare_runs_cross_machine",
    "cross_machine_total",
    "verdict_vocabulary",
]

#: Verdict words the chapters print that no constant of :mod:`chunkwise.findings` or plan entry holds:
#: the pattern rule's outcomes (:func:`chunkwise.evaluation.robustness.pattern`), the directions of
#: the chapters' contrasts, the words of the bootstrap verdict (:func:`chunkwise.evaluation.stats.verdict`)
#: and of the robustness panel (:func:`chunkwise.answerbox.robustness_words`), and the bold yes/no of a lead.
_BOOK_VERDICT_WORDS = (
    "supports", "contradicts", "ahead", "behind", "beyond the noise", "within the noise", "winner",
    "no winner", "ruled out", "in play", "agree", "disagree", "**yes**", "**no**",
)
#: Results values that are a verdict on their own (``"k_winner_changes": "no"``), too common as words in prose.
_VERDICT_VALUES = ("yes", "no")

#: A printed number: not part of a word (``L6``, ``row0``, ``T_1a2b3``), optional sign, thousands commas.
_VALUE = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: Where a printed text is cut into sentences: line breaks, and a sentence end before a capital,
#: a bold verdict or a bracket.
_SENTENCE_BREAK = re.compile(r"\s*\n\s*|(?<=[.!?])\s+(?=[A-Z*(\[])")
#: The output views a reader sees, best first: one per output, so a table is not counted twice.
_VIEWS = ("application/papermill.record/text/markdown", "text/markdown", "text/html",
          "application/papermill.record/text/plain", "text/plain")


def verdict_vocabulary(plan_file: str | os.PathLike[str] | None = None) -> tuple[str, ...]:
    """The words with which the book states a verdict, longest first.

    Gathered from the book's own constants rather than a list of this module's:
    :data:`chunkwise.findings.VERDICTS` (the findings page's classes),
    :data:`chunkwise.findings.INCONCLUSIVE_WORDS`, the robustness classes
    (:data:`chunkwise.findings.ROBUSTNESS_MEANINGS`, the same as
    :data:`chunkwise.evaluation.robustness.CLASSES`), the ``words`` of every entry of the analysis
    plan (``"chunker ahead"``, ``"fixed as good or better"``, ...) and the few words the chapters print
    that no constant holds (``supports``, ``contradicts``, ``ahead``, ``behind``, ``beyond the noise``,
    ``in play``, a bold ``**yes**`` / ``**no**``, ...).

    Parameters
    ----------
    plan_file : path, optional
        The analysis plan to read the entries' words from. Default: ``data/findings/plan.toml`` of the
        repository. A missing or malformed plan is skipped (the constants remain).

    Returns
    -------
    tuple of str
        Lower-case phrases, longest first, without duplicates.
    """
    from chunkwise import findings

    words = {*findings.VERDICTS, *findings.INCONCLUSIVE_WORDS, *findings.ROBUSTNESS_MEANINGS, *_BOOK_VERDICT_WORDS}
    words.discard("reproduction")  # the findings table's class of a plain reproduction; a common word in prose
    try:
        from chunkwise import plan

        for entry in plan.load_plan(plan_file, check=False).entries.values():
            words.update(str(w) for w in entry.words.values())
    except (OSError, ValueError):  # no repository around an installed package, or a malformed plan
        pass
    return tuple(sorted({w.strip().lower() for w in words if w.strip()}, key=lambda w: (-len(w), w)))


def _verdict_matcher(vocabulary: Sequence[str]) -> re.Pattern[str]:
    """A search for any phrase of ``vocabulary`` as whole words; a bare yes / no counts only as a whole
    value (:data:`_VERDICT_VALUES`), not as a word of a sentence ("no interval")."""
    phrases = [w for w in vocabulary if w.strip().lower() not in _VERDICT_VALUES]
    if not phrases:
        return re.compile(r"(?!)")  # matches nothing
    alternatives = "|".join(re.escape(w) for w in sorted(phrases, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])", re.IGNORECASE)


@dataclass(frozen=True)
class MovedValue:
    """One number that moved between two runs while the words around it stayed the same.

    Attributes
    ----------
    where : str
        Where it is printed: ``"cell 5 (stdout)"``, ``"cell 9 (answer box)"``, ``"cell 4 (table)"``, or a
        results-file key path such as ``"results['recall'][2]"``.
    context : str
        The sentence, line or table row around the number as run ``a`` prints it (cut to about 90
        characters), ``""`` for a plain number in a results file.
    before, after : str
        The number as printed by run ``a`` and run ``b`` (``repr`` of a results-file number).
    """

    where: str
    context: str
    before: str
    after: str

    @property
    def move(self) -> float:
        """``after - before``, in the printed unit (points, %, a count): signed, rounded to the printed
        decimals (``41.2 -> 41.5`` moves by 0.3, not 0.30000000000000426)."""
        move = _as_float(self.after) - _as_float(self.before)
        if any(c in "eE" for c in self.before + self.after):
            return move
        decimals = max(len(t.partition(".")[2]) for t in (self.before, self.after))
        return round(move, decimals)

    @property
    def relative(self) -> float:
        """``move / |before|`` (a fraction, signed); NaN when ``before`` is 0."""
        base = abs(_as_float(self.before))
        return self.move / base if base else math.nan

    def describe(self) -> str:
        """One line: ``cell 2 (stdout) "recall 41.2%": 41.2 -> 41.5 (+0.3, +0.728% relative)``."""
        context = f" {_quote(self.context)}" if self.context else ""
        head = f"{self.where}{context}: {self.before} -> {self.after}"
        if self.move == 0:
            return f"{head} (the same value, printed differently)"
        if not math.isfinite(self.move):
            return f"{head} (to or from a value that is not a finite number)"
        rel = self.relative
        rel_text = f"{100 * rel:+.3g}% relative" if math.isfinite(rel) else "relative move undefined: before is 0"
        return f"{head} ({_signed(self.move)}, {rel_text})"


@dataclass(frozen=True)
class ChangedSentence:
    """A sentence (or a results value) whose words differ between two runs, numbers masked.

    Attributes
    ----------
    where : str
        As :attr:`MovedValue.where`.
    before, after : str or None
        The sentence in run ``a`` and in run ``b``; None where one run has no counterpart.
    verdict : bool
        It states a verdict in either run: it holds a phrase of :func:`verdict_vocabulary`.
    answer : bool
        It is a sentence of the chapter's answer box (the glued ``*_answer`` Markdown).
    verdict_words : str
        The verdict phrases of the sentence when they differ between the runs, ``"ahead -> cannot tell"``;
        ``""`` when they are the same (another word of a verdict sentence changed) or there are none.
    """

    where: str
    before: str | None
    after: str | None
    verdict: bool
    answer: bool
    verdict_words: str = ""

    def describe(self) -> str:
        """One line: ``verdict sentence changed in cell 3 (stdout): "ahead" -> "cannot tell"``."""
        kind = {(True, True): "answer-box verdict sentence", (True, False): "answer-box sentence",
                (False, True): "verdict sentence", (False, False): "other sentence"}[(self.answer, self.verdict)]
        before, after = _around_change(self.before, self.after)
        words = f" (verdict words: {self.verdict_words})" if self.verdict_words else ""
        return f"{kind} changed in {self.where}{words}: {before} -> {after}"


@dataclass
class CrossMachineComparison:
    """How one chapter's run ``b`` (made on another machine) differs from run ``a``, value by value
    (see :func:`compare_runs_cross_machine`).

    Attributes
    ----------
    stem : str
        The notebook's stem.
    cells : int
        Cells in ``a``'s notebook.
    moved : list of MovedValue
        Numbers printed in the cells' outputs that moved (words around them identical).
    moved_results : list of MovedValue
        Numbers of the results file (``results/<stem>.json``) that moved, by key path; numbers inside a
        text value (``"+3.8 [+0.3, +7.6]"``) included.
    changed : list of ChangedSentence
        Sentences of the outputs, and text values of the results file, whose words changed (numbers
        masked); keys present in one run only.
    unpaired : list of str
        Outputs that could not be paired (a cell with more outputs in one run, another kind of output).
    problem : str or None
        Why the cells were not compared (a missing notebook, another number of cells), else None.
    has_answer : bool
        Both runs record an answer box.
    """

    stem: str
    cells: int = 0
    moved: list[MovedValue] = field(default_factory=list)
    moved_results: list[MovedValue] = field(default_factory=list)
    changed: list[ChangedSentence] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)
    problem: str | None = None
    has_answer: bool = False

    @property
    def verdict_changes(self) -> list[ChangedSentence]:
        """The changed sentences that state a verdict."""
        return [c for c in self.changed if c.verdict]

    @property
    def answer_changes(self) -> list[ChangedSentence]:
        """The changed sentences of the answer box."""
        return [c for c in self.changed if c.answer]

    @property
    def same(self) -> bool:
        """True when nothing moved or changed and the cells could be compared."""
        return self.problem is None and not (self.moved or self.moved_results or self.changed or self.unpaired)

    def summary(self) -> str:
        """One line: values moved, and whether a verdict or answer-box sentence changed."""
        verdicts, answers = len(self.verdict_changes), len(self.answer_changes)
        parts = [f"{self.stem}: " + (f"cells not compared ({self.problem})" if self.problem else f"{self.cells} cells"),
                 f"{_n(len(self.moved), 'printed value')} moved",
                 f"{_n(len(self.moved_results), 'results value')} moved",
                 f"{_n(verdicts, 'verdict sentence')} changed" if verdicts else "no verdict sentence changed"]
        if answers:
            parts.append(f"answer box changed ({_n(answers, 'sentence')})")
        else:
            parts.append("answer box unchanged" if self.has_answer else "no answer box in either run")
        others = len(self.changed) - len([c for c in self.changed if c.verdict or c.answer])
        if others:
            parts.append(f"{_n(others, 'other sentence or label', 'other sentences or labels')} changed")
        if self.unpaired:
            parts.append(f"{_n(len(self.unpaired), 'output')} not paired")
        return ", ".join(parts)

    def details(self) -> list[str]:
        """Every moved value and changed sentence, one line each (for the report below :meth:`summary`)."""
        return ([f"moved {m.describe()}" for m in self.moved + self.moved_results]
                + [c.describe() for c in self.changed] + [f"not paired: {u}" for u in self.unpaired])


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _around_change(x: str | None, y: str | None, limit: int = 160, margin: int = 50) -> tuple[str, str]:
    """Two sentences quoted for a report line: whole when short, else the stretch where they differ with
    ``margin`` characters either side (so a long sentence never hides its changed words); ``(none)``
    for a missing side."""
    if x is None or y is None:
        return ("(none)" if x is None else _quote(x, limit)), ("(none)" if y is None else _quote(y, limit))
    x, y = " ".join(x.split()), " ".join(y.split())
    if max(len(x), len(y)) <= limit:
        return _quote(x, limit), _quote(y, limit)
    prefix = len(os.path.commonprefix([x, y]))
    suffix = len(os.path.commonprefix([x[prefix:][::-1], y[prefix:][::-1]]))
    start = max(0, prefix - margin)
    if start:  # begin at a word
        space = x.find(" ", start, prefix)
        start = space + 1 if space >= 0 else start

    def cut(text: str) -> str:
        end = min(len(text), len(text) - suffix + margin)
        if end < len(text):  # end at a word
            space = text.rfind(" ", len(text) - suffix, end)
            end = space if space >= 0 else end
        return '"' + ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "") + '"'

    return cut(x), cut(y)


def _as_float(text: str) -> float:
    return float(text.replace(",", ""))


def _signed(x: float) -> str:
    if not math.isfinite(x):
        return f"{x:+}"
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):+d}"
    return f"{x:+.3g}"


def _quote(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return '"' + (text if len(text) <= limit else text[:limit - 3] + "...") + '"'


#: A table column of durations (``seconds``, ``LLM time (s)``), masked as :data:`_VOLATILE` masks ``12 s``.
_DURATION_HEADING = re.compile(r"(?i)\b(?:seconds|minutes|hours)\b|\((?:s|ms|min|h)\)")


class _HtmlText(HTMLParser):
    """The visible text of an HTML output: one line per block or table row, a row's cells joined with
    ``" | "``, a cell spanning rows repeated in each, and each data cell led by its column's heading
    (``"recall: 41.2"``); a column of durations reads ``<T>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._text: list[str] = []
        self._skip = 0
        self._row: list[tuple[str, bool, int, int]] | None = None  # (text, is_heading, colspan, rowspan)
        self._cell: list[str] | None = None
        self._cell_attrs: tuple[bool, int, int] = (False, 1, 1)
        self._carry: dict[int, tuple[str, bool, int]] = {}  # column -> (text, is_heading, rows left)
        self._in_head = False
        self._head_rows: list[list[str]] = []
        self._header: list[str] = []

    @staticmethod
    def _span(attrs: list[tuple[str, str | None]], name: str) -> int:
        value = dict(attrs).get(name) or "1"
        return max(1, int(value)) if value.isdigit() else 1

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1
        elif tag == "table":
            self._flush()
            self._head_rows, self._header, self._carry = [], [], {}
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._flush()
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self._cell_attrs = (tag == "th", self._span(attrs, "colspan"), self._span(attrs, "rowspan"))
        elif tag in ("br", "p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "caption"):
            self._flush()

    def _full_row(self, row: list[tuple[str, bool, int, int]]) -> list[tuple[str, bool]]:
        """The row's cells by column: its own, with the cells of rows above that span into it."""
        full: list[tuple[str, bool]] = []
        pending = list(row)
        while pending or len(full) in self._carry:
            col = len(full)
            if col in self._carry:
                text, heading, left = self._carry.pop(col)
                if left > 1:
                    self._carry[col] = (text, heading, left - 1)
                full.append((text, heading))
                continue
            text, heading, colspan, rowspan = pending.pop(0)
            for _ in range(colspan):
                if rowspan > 1:
                    self._carry[len(full)] = (text, heading, rowspan - 1)
                full.append((text, heading))
        return full

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script"):
            self._skip = max(0, self._skip - 1)
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append((" ".join("".join(self._cell).split()), *self._cell_attrs))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            row, self._row = self._full_row(self._row), None
            if self._in_head or (all(heading for _, heading in row) and not self._header):
                self._head_rows.append([text for text, _ in row])
                self._header = max(self._head_rows, key=lambda r: sum(bool(c) for c in r))
                self.lines.append(" | ".join(text for text, _ in row))
                return
            out = []
            for i, (text, heading) in enumerate(row):
                label = self._header[i] if i < len(self._header) and not heading else ""
                if label and _DURATION_HEADING.search(label):
                    text = "<T>"
                out.append(f"{label}: {text}" if label else text)
            self.lines.append(" | ".join(out))
        elif tag == "thead":
            self._in_head = False
        elif tag in ("p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "table"):
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        (self._cell if self._cell is not None else self._text).append(data)

    def _flush(self) -> None:
        text = " ".join("".join(self._text).split())
        if text:
            self.lines.append(text)
        self._text = []

    def text(self) -> str:
        self._flush()
        return "\n".join(self.lines)


def _html_text(html: str) -> str:
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return parser.text()


def _is_answer(out: Mapping[str, Any]) -> bool:
    name = ((out.get("metadata") or {}).get("scrapbook") or {}).get("name", "")
    return str(name).endswith("_answer") and "application/papermill.record/text/markdown" in (out.get("data") or {})


def _output_view(out: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(label, visible text)`` of one output, volatile text masked; None for a picture."""
    if "text" in out:
        text = out["text"]
        label, value = str(out.get("name", "text")), "".join(text) if isinstance(text, list) else str(text)
    else:
        data = out.get("data") or {}
        mime = next((m for m in _VIEWS if m in data), None)
        if mime is None:
            mime = next((m for m in sorted(data) if not m.startswith("image/")), None)
            if mime is None:
                return None
        raw = data[mime]
        if isinstance(raw, list):
            value = "".join(raw)
        else:
            value = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True)
        name = ((out.get("metadata") or {}).get("scrapbook") or {}).get("name")
        if _is_answer(out):
            label = "answer box"
        elif mime.startswith("application/papermill.record/"):
            label = f"glued {name}" if name else "glued value"
        elif mime == "text/html":
            label, value = "table" if "<table" in value else "html", _html_text(value)
        else:
            label = {"text/markdown": "markdown", "text/plain": "text"}.get(mime, mime)
    return label, _VOLATILE.sub("<T>", value)


def _sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE_BREAK.split(text)) if s]


def _number_moved(x: str, y: str, rtol: float | None) -> bool:
    if x == y:
        return False
    if rtol is None:
        return True
    try:
        return not math.isclose(_as_float(x), _as_float(y), rel_tol=rtol, abs_tol=1e-12)
    except ValueError:
        return True


def _snippet(sentence: str, match: re.Match[str], width: int = 90) -> str:
    """The part of ``sentence`` around ``match``: all of it when short, else the number's neighbourhood."""
    if len(sentence) <= width:
        return sentence
    if " | " in sentence:  # a table row: its row headings and the number's cell
        cells, pos = [], 0
        for cell in sentence.split(" | "):
            cells.append((pos, cell))
            pos += len(cell) + 3
        headings = []
        for _, cell in cells:
            if ": " in cell:
                break
            headings.append(cell)
        index = max(i for i, (start, _) in enumerate(cells) if start <= match.start())
        if index >= len(headings):
            gap = ["..."] if index > len(headings) else []
            return " | ".join([*headings, *gap, cells[index][1]])
    start = max(0, match.start() - (width - 30))
    end = min(len(sentence), match.end() + 25)
    if start:  # begin and end at a word
        space = sentence.find(" ", start, match.start())
        start = space + 1 if space >= 0 else start
    if end < len(sentence):
        space = sentence.rfind(" ", match.end(), end)
        end = space if space >= 0 else end
    return ("..." if start else "") + sentence[start:end] + ("..." if end < len(sentence) else "")


#: Gives the verdict phrases of a text, in order (see :func:`compare_runs_cross_machine`).
_Phrases = Callable[[str | None], list[str]]


def _changed(where: str, before: str | None, after: str | None, is_verdict: _Phrases,
             answer: bool) -> ChangedSentence:
    """A :class:`ChangedSentence`; ``is_verdict(text)`` gives the verdict phrases of ``text``, in order."""
    words = [is_verdict(text) for text in (before, after)]
    moved = " -> ".join(", ".join(w) or "none" for w in words) if words[0] != words[1] else ""
    return ChangedSentence(where, before, after, bool(words[0] or words[1]), answer, moved)


def _compare_texts(x: str, y: str, where: str, rtol: float | None, is_verdict: _Phrases, answer: bool,
                   moved: list[MovedValue], changed: list[ChangedSentence]) -> None:
    """Pair the sentences of ``x`` and ``y`` by their words (numbers masked); list the numbers that moved in
    each pair and the sentences whose words differ."""
    if x == y:
        return
    sx, sy = _sentences(x), _sentences(y)
    kx, ky = [_VALUE.sub("#", s) for s in sx], [_VALUE.sub("#", s) for s in sy]
    matcher = difflib.SequenceMatcher(a=kx, b=ky, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for s, t in zip(sx[i1:i2], sy[j1:j2]):
                for u, v in zip(_VALUE.finditer(s), _VALUE.finditer(t)):
                    if _number_moved(u.group(), v.group(), rtol):
                        moved.append(MovedValue(where, _snippet(s, u), u.group(), v.group()))
            continue
        before, after = sx[i1:i2], sy[j1:j2]
        for k in range(max(len(before), len(after))):
            s = before[k] if k < len(before) else None
            t = after[k] if k < len(after) else None
            changed.append(_changed(where, s, t, is_verdict, answer))


def _compare_values(x: Any, y: Any, where: str, rtol: float | None, is_verdict: _Phrases,
                    moved: list[MovedValue], changed: list[ChangedSentence]) -> None:
    """Walk two results values side by side (mappings by key, lists by position)."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if number(x) and number(y):
        if x != x and y != y:
            return
        if x != y and not _close(x, y, rtol):
            moved.append(MovedValue(where, "", repr(x), repr(y)))
    elif isinstance(x, str) and isinstance(y, str):
        _compare_texts(x, y, where, rtol, is_verdict, False, moved, changed)
    elif isinstance(x, dict) and isinstance(y, dict):
        for key in [*x, *(k for k in y if k not in x)]:
            path = f"{where}[{key!r}]"
            if key in x and key in y:
                _compare_values(x[key], y[key], path, rtol, is_verdict, moved, changed)
            else:
                value = json.dumps(x.get(key, y.get(key)), sort_keys=True)
                before, after = (value, None) if key in x else (None, value)
                changed.append(_changed(path, before, after, is_verdict, False))
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y)):
            _compare_values(u, v, f"{where}[{i}]", rtol, is_verdict, moved, changed)
    elif x != y:
        before, after = json.dumps(x, sort_keys=True), json.dumps(y, sort_keys=True)
        changed.append(_changed(where, before, after, is_verdict, False))


def compare_runs_cross_machine(a: str | os.PathLike[str], b: str | os.PathLike[str],
                               chapters: Sequence[str] | None = None, *, rtol: float | None = None,
                               vocabulary: Sequence[str] | None = None) -> list[CrossMachineComparison]:
    """Compare a run made on another machine with run ``a``, value by value and verdict by verdict.

    On another CPU, float differences of about 1e-7 can flip a percentile breakpoint or a near-tie, so a
    few printed values move (a chunk count by one, a recall by 0.1 to 0.5 points) while every conclusion
    stands. This lists each number that moved and says whether any sentence that states a verdict, or
    any sentence of an answer box, changed its words. Outputs are read as the reader sees them (one view
    per output: the answer box's Markdown, a table's cells under their column headings, the printed
    text; pictures skipped), with durations, rates, timestamps and addresses masked as in
    :func:`~chunkwise.provenance.compare_runs` (and a table column headed ``seconds`` or ``... (s)``).
    Each output is cut into sentences (and lines, and table rows), which are paired by their words with
    numbers masked: in a pair whose words agree, each differing number is a :class:`MovedValue` (one
    printed differently with the same value, ``38.3`` against ``38.300000``, too, with a move of 0); a
    sentence without a partner of the same words is a :class:`ChangedSentence` (a verdict sentence when
    it holds a phrase of ``vocabulary`` in either run). The results files are walked key by key
    (mappings by key, lists by position, text values as sentences). A chapter that one run lacks is
    named (:attr:`CrossMachineComparison.problem`) and not walked, as in
    :func:`~chunkwise.provenance.compare_runs`.

    Parameters
    ----------
    a, b : path
        Folders as written by ``chunkwise run-notebooks --out`` (or ``book/published``): executed
        ``<stem>.ipynb`` files and ``results/<stem>.json``. ``a`` is the reference.
    chapters : sequence of str, optional
        Stems to compare. Default: every notebook in ``a``.
    rtol : float, optional
        Relative tolerance under which a number has not moved (default: none; any printed difference
        moves it).
    vocabulary : sequence of str, optional
        The verdict phrases (case-insensitive, whole words). Default: :func:`verdict_vocabulary`. A bare
        ``yes`` or ``no`` counts only as a whole text value (``"k_winner_changes": "no"``), not as a word
        of a sentence.

    Returns
    -------
    list of CrossMachineComparison
        One per chapter, in the order of ``chapters`` (or sorted). A :class:`MovedValue` gives the
        number before and after as printed, its move in the printed unit (:attr:`MovedValue.move`) and
        relative to the value before (:attr:`MovedValue.relative`, a fraction).

    Raises
    ------
    chunkwise.provenance.PublishError
        If ``a`` or ``b`` is not a folder, ``a`` holds no notebook, or a file is not valid JSON.
    """
    a, b = Path(a), Path(b)
    stems = _stems(a, b, chapters)
    matcher = _verdict_matcher(verdict_vocabulary() if vocabulary is None else vocabulary)

    def is_verdict(text: str | None) -> list[str]:
        """The verdict phrases of ``text``, in order (a whole value of yes / no counts as one)."""
        if text is None:
            return []
        whole = text.strip().strip('"').lower()
        return [whole] if whole in _VERDICT_VALUES else [m.lower() for m in matcher.findall(text)]

    report = []
    for stem in stems:
        cmp = CrossMachineComparison(stem)
        report.append(cmp)
        na, nb = a / f"{stem}.ipynb", b / f"{stem}.ipynb"
        missing = [str(p) for p in (na, nb) if not p.is_file()]
        if missing:  # as compare_runs: a chapter one run lacks is named, its results file not walked
            cmp.problem = "missing " + ", ".join(missing)
            continue
        cells_a, cells_b = _read_json(na).get("cells", []), _read_json(nb).get("cells", [])
        cmp.cells = len(cells_a)
        answers = _answer_text(cells_a), _answer_text(cells_b)
        cmp.has_answer = None not in answers
        if len(cells_a) != len(cells_b):
            cmp.problem = f"{len(cells_a)} cells against {len(cells_b)}: the source notebooks differ"
            cells_a = cells_b = []
            if answers[0] is not None and answers[1] is not None:  # the cells cannot be paired, the answers can
                _compare_texts(_VOLATILE.sub("<T>", answers[0]), _VOLATILE.sub("<T>", answers[1]),
                               "answer box", rtol, is_verdict, True, cmp.moved, cmp.changed)
        for i, (ca, cb) in enumerate(zip(cells_a, cells_b)):
            oa, ob = ca.get("outputs", []) or [], cb.get("outputs", []) or []
            if len(oa) != len(ob):
                cmp.unpaired.append(f"cell {i}: {len(oa)} outputs against {len(ob)}")
                continue
            for out_a, out_b in zip(oa, ob):
                va, vb = _output_view(out_a), _output_view(out_b)
                if va is None and vb is None:
                    continue
                if va is None or vb is None or va[0] != vb[0]:
                    kinds = (va[0] if va else "picture", vb[0] if vb else "picture")
                    cmp.unpaired.append(f"cell {i}: a {kinds[0]} output against a {kinds[1]} output")
                    continue
                _compare_texts(va[1], vb[1], f"cell {i} ({va[0]})", rtol, is_verdict, _is_answer(out_a),
                               cmp.moved, cmp.changed)
        ra, rb = a / "results" / f"{stem}.json", b / "results" / f"{stem}.json"
        values_a, values_b = (_results_values(_read_json(r)) if r.is_file() else {} for r in (ra, rb))
        _compare_values(values_a, values_b, "results", rtol, is_verdict, cmp.moved_results, cmp.changed)
    return report


def cross_machine_total(report: Sequence[CrossMachineComparison]) -> str:
    """The last line of a cross-machine report: how many values moved, the largest move and where, and
    whether any verdict or answer-box sentence changed (naming where, up to five)."""
    def moved_part(kind: str, items: list[tuple[str, MovedValue]]) -> str:
        if not items:
            return f"0 {kind} values moved"
        stem, top = max(items, key=lambda p: abs(p[1].move))
        return (f"{_n(len(items), kind + ' value')} moved (largest {_signed(abs(top.move)).lstrip('+')}, "
                f"{top.before} -> {top.after} "
                f"in {stem} {top.where})")

    printed = [(c.stem, m) for c in report for m in c.moved]
    results = [(c.stem, m) for c in report for m in c.moved_results]
    flagged = [(c.stem, s) for c in report for s in c.changed if s.verdict or s.answer]
    if flagged:
        verdicts, answers = sum(s.verdict for _, s in flagged), sum(s.answer for _, s in flagged)
        flips = sum(bool(s.verdict_words) for _, s in flagged)
        named = ", ".join(f"{stem} {s.where}" for stem, s in flagged[:5]) + (", ..." if len(flagged) > 5 else "")
        words = (f"{_n(len(flagged), 'verdict or answer-box sentence')} changed ({verdicts} stating a verdict, "
                 f"{flips} of them with other verdict words, {answers} in an answer box: {named})")
    else:
        words = "no verdict or answer-box sentence changed"
    others = sum(len(c.changed) for c in report) - len(flagged)
    unpaired = sum(len(c.unpaired) for c in report)
    problems = sum(c.problem is not None for c in report)
    tail = [f"{_n(others, 'other sentence or label', 'other sentences or labels')} changed"] if others else []
    tail += [f"{_n(unpaired, 'output')} not paired"] if unpaired else []
    tail += [f"{_n(problems, 'chapter')} whose cells could not be compared"] if problems else []
    return "total: " + "; ".join([moved_part("printed", printed) + ", " + moved_part("results", results), words,
                                  *tail])
