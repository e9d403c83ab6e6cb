"""A regression gate for a chunking choice: rerun the grid and compare one cell with a baseline
report, question by question.

A team that chose, say, ``Recursive 200 | dense | k=5`` on its documents keeps the report
folder of that run (``chunkwise evaluate --out baseline``). After the documents, the questions
or the code change, ``chunkwise check`` reruns the grid and compares the tracked cell's
per-question scores with the baseline's on the questions both runs share (a paired design, as
everywhere in chunkwise). It fails only when the drop is beyond the noise: the 95% paired
bootstrap interval of ``new - baseline`` lies entirely below 0
(:func:`chunkwise.evaluation.stats.paired_difference_ci`), or the new mean is under an optional
hard floor. A drop inside the noise passes and is reported with its interval.

Exit codes (:data:`EXIT_CODES`): 0 no drop beyond the noise (and above the floor); 1 a drop
beyond the noise, or below the floor; 2 bad input (missing or malformed baseline, question
errors, unknown metric); 3 not comparable (the tracked cell is missing from one run, or fewer
than 2 shared questions).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from chunkwise.evaluation.cells import METRIC_TABLE, PUBLIC_METRICS

__all__ = ["EXIT_CODES", "CheckResult", "check_against_baseline", "check_options", "load_baseline", "mode_mismatch"]

#: Exit status -> meaning, as ``chunkwise check`` returns them.
EXIT_CODES: dict[int, str] = {
    0: "pass: no drop beyond the noise (and at or above the floor)",
    1: "fail: a drop beyond the noise, or below the floor",
    2: "bad input: baseline, questions, grid or options unusable",
    3: "not comparable: the tracked cell is missing from a run, or fewer than 2 shared questions",
}

# report column -> per-question column, and the metrics a check may track (the cell scorer's table)
_PER_QUESTION = {m.column: m.name for m in METRIC_TABLE if m.column != m.name}
_METRICS = PUBLIC_METRICS


class BaselineError(ValueError):
    """A baseline report folder that cannot be used (exit code 2)."""


@dataclass
class CheckResult:
    """The outcome of one check.

    Attributes
    ----------
    status : int
        The exit code (:data:`EXIT_CODES`).
    cell, metric : str
        What was compared.
    n_shared : int
        Questions scored in both runs.
    baseline_mean, new_mean, diff, diff_low, diff_high : float
        Means over the shared questions (fractions), ``new - baseline`` and its 95% paired
        bootstrap interval; NaN when not comparable.
    floor : float or None
    message : str
        One paragraph in plain words.
    """

    status: int
    cell: str
    metric: str
    n_shared: int
    baseline_mean: float
    new_mean: float
    diff: float
    diff_low: float
    diff_high: float
    floor: float | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_baseline(path: str | Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """Read a report folder written by ``chunkwise evaluate`` (or its ``report.json``).

    Returns
    -------
    (report, per_question)
        The parsed ``report.json`` and ``per_question.csv`` (``question_id`` as str).

    Raises
    ------
    BaselineError
        If the folder lacks either file or they do not parse.
    """
    p = Path(path)
    folder = p.parent if p.is_file() else p
    rep_path, pq_path = folder / "report.json", folder / "per_question.csv"
    for f in (rep_path, pq_path):
        if not f.is_file():
            raise BaselineError(
                f"baseline {str(path)!r}: {f.name} is missing; pass the folder `chunkwise evaluate --out` wrote."
            )
    try:
        report = json.loads(rep_path.read_text(encoding="utf-8"))
        per_q = pd.read_csv(pq_path, dtype={"question_id": str, "cell": str})
    except (ValueError, OSError) as exc:
        raise BaselineError(f"baseline {str(path)!r}: cannot read it ({exc}).") from exc
    if not isinstance(report, dict) or not isinstance(report.get("grid"), dict):
        raise BaselineError(f"baseline {str(path)!r}: report.json is not a chunkwise report (a JSON object with "
                            "'grid' and 'cells'); pass the folder `chunkwise evaluate --out` wrote.")
    if not {"cell", "question_id"} <= set(per_q.columns):
        raise BaselineError(f"baseline {str(path)!r}: per_question.csv lacks the cell / question_id columns.")
    return report, per_q


def check_options(metric: str, floor: float | None) -> None:
    """Refuse an unknown ``metric`` or a ``floor`` outside [0, 1] (before any grid runs).

    Raises
    ------
    BaselineError
        With one line that says what to pass instead.
    """
    if metric not in _METRICS:
        raise BaselineError(f"unknown metric {metric!r}; use one of {', '.join(_METRICS)}.")
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor <= 1):
        raise BaselineError(f"floor must be a fraction in [0, 1] (e.g. 0.8 for 80%), got {floor!r}.")


def mode_mismatch(report: dict[str, Any], mode: str | None) -> str | None:
    """The ``NOT COMPARABLE`` message when the baseline scored its spans in another metric mode
    (``GridConfig.mode``: "chroma" or "union") than ``mode``; None when they agree or ``mode`` is None."""
    if mode is None:
        return None
    base_mode = str((report.get("grid") or {}).get("mode") or "chroma")
    if base_mode == mode:
        return None
    return (f"NOT COMPARABLE: the baseline scored with mode = {base_mode!r}, this run with mode = {mode!r}; the "
            f"metrics differ by definition. Rerun with mode = {base_mode!r} in the grid file, or make a new baseline "
            f"with mode = {mode!r}.")


def _best_cell(report: dict[str, Any], metric: str) -> str:
    cells = report.get("cells") or []
    if not cells:
        raise BaselineError("the baseline report lists no cells.")
    return max(cells, key=lambda c: (c.get(metric, float("-inf")), -cells.index(c)))["cell"]


def check_against_baseline(
    new_per_question: pd.DataFrame,
    baseline: str | Path,
    *,
    cell: str | None = None,
    metric: str = "recall",
    floor: float | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    mode: str | None = None,
) -> CheckResult:
    """Compare one cell of a new run with the baseline report, paired over shared questions.

    Parameters
    ----------
    new_per_question : DataFrame
        ``GridResult.per_question_table()`` of the new run (columns ``cell``, ``question_id``,
        the metrics and, to pair by content, ``question``).
    baseline : path
        A report folder of ``chunkwise evaluate`` (``report.json`` + ``per_question.csv``).
    cell : str, optional
        The tracked cell, e.g. ``"Recursive 200 | dense | k=5"``; default the baseline's best
        cell by ``metric``.
    metric : {"recall", "precision", "iou", "precision_omega", "hit_rate", "mrr", "ndcg", "map"}
    floor : float, optional
        A hard floor for the new mean (a fraction, e.g. 0.8): below it the check fails whatever
        the noise.
    n_resamples, seed
        Of the paired bootstrap.
    mode : {"chroma", "union"}, optional
        The new run's metric mode (``GridConfig.mode``); one that differs from the baseline's
        makes the runs not comparable (exit 3). None: not checked.

    Returns
    -------
    CheckResult

    Raises
    ------
    BaselineError
        For an unusable baseline, an unknown metric or a floor outside [0, 1].
    """
    check_options(metric, floor)
    from chunkwise.evaluation.stats import paired_difference_ci

    report, old = load_baseline(baseline)
    tracked = cell or _best_cell(report, metric)
    col = _PER_QUESTION.get(metric, metric)
    nan = float("nan")

    def result(status: int, message: str, n: int = 0, b: float = nan, a: float = nan,
               d: tuple[float, float, float] = (nan, nan, nan)) -> CheckResult:
        return CheckResult(status, tracked, metric, n, b, a, d[0], d[1], d[2], floor, message)

    mismatch = mode_mismatch(report, mode)
    if mismatch is not None:
        return result(3, mismatch)
    new = new_per_question.assign(question_id=new_per_question["question_id"].astype(str))
    for name, frame in (("baseline", old), ("new run", new)):
        if tracked not in set(frame["cell"]):
            close = sorted(set(frame["cell"]))[:5]
            return result(3, f"NOT COMPARABLE: cell {tracked!r} is not in the {name} (it has {', '.join(close)}...).")
        if col not in frame.columns:
            raise BaselineError(f"the {name} has no per-question {metric!r} scores.")
    o_rows, n_rows = old[old["cell"] == tracked], new[new["cell"] == tracked]
    o, n, pairing = _pair(o_rows, n_rows, col)
    if isinstance(pairing, str) and pairing.startswith("NOT COMPARABLE"):
        return result(3, pairing)
    shared = [q for q in n.index if q in o.index]
    if len(shared) < 2:
        return result(3, f"NOT COMPARABLE: only {len(shared)} question(s) are in both runs; the check needs at least 2.",
                      len(shared))
    a, b = n.loc[shared].to_numpy(float), o.loc[shared].to_numpy(float)
    d = paired_difference_ci(a, b, n_resamples=n_resamples, seed=seed)
    new_mean, old_mean = float(a.mean()), float(b.mean())
    what = (f"{tracked}: {metric} {100 * new_mean:.1f}% now, {100 * old_mean:.1f}% in the baseline, over {len(shared)} "
            f"shared questions{pairing}; difference {100 * d[0]:+.1f} points, 95% paired interval "
            f"[{100 * d[1]:+.1f}, {100 * d[2]:+.1f}]")
    if floor is not None and new_mean < floor:
        return result(1, f"FAIL: {what}; below the floor of {100 * floor:.1f}%.", len(shared), old_mean, new_mean, d)
    if d[2] < 0:
        return result(1, f"FAIL: {what}: a drop beyond the noise.", len(shared), old_mean, new_mean, d)
    verdict = "no drop beyond the noise" if d[0] < 0 else "no drop"
    return result(0, f"PASS: {what}: {verdict}.", len(shared), old_mean, new_mean, d)


_AUTO_ID = re.compile(r"q\d+")  # the ids chunkwise gives questions that have none


def _pair(old: pd.DataFrame, new: pd.DataFrame, col: str) -> tuple[pd.Series, pd.Series, str]:
    """The two runs' scores of one cell keyed so that the same question has the same key.

    By id when the questions file named them (some id in either run is not an automatic
    ``q1``, ``q2`` ...): a question whose text was edited keeps its pair, and the note names it.
    Otherwise by question text when both runs carry it (``per_question.csv`` since the answer
    stage's release) and every text is unique in each run: a question keeps its pair when an
    automatic id shifts because a question was added or removed. Otherwise by id, and then an id
    whose text differs between the runs makes them not comparable.

    Returns
    -------
    (old scores, new scores, note)
        ``note``: text appended to the message, or a ``NOT COMPARABLE: ...`` message.
    """
    by_id = old.set_index("question_id")[col], new.set_index("question_id")[col]
    if "question" not in old.columns or "question" not in new.columns:
        return by_id[0], by_id[1], ""
    ot, nt = old["question"].astype(str), new["question"].astype(str)
    ids = [str(q) for q in (*old["question_id"], *new["question_id"])]
    if not all(_AUTO_ID.fullmatch(q) for q in ids):  # ids given in the questions file: they name the questions
        texts = dict(zip(old["question_id"], ot))
        edited = [str(q) for q, t in zip(new["question_id"], nt) if q in texts and texts[q] != t]
        note = (f" (paired by question_id; {len(edited)} question text(s) changed since the baseline: "
                f"{', '.join(edited[:5])}{' ...' if len(edited) > 5 else ''})") if edited else ""
        return by_id[0], by_id[1], note
    if ot.is_unique and nt.is_unique:
        moved = sum(1 for q, t in zip(new["question_id"], nt)
                    if t in set(ot) and old.loc[ot == t, "question_id"].iloc[0] != q)
        note = f" (paired by question text; {moved} question(s) changed id)" if moved else ""
        return old.set_index(ot)[col], new.set_index(nt)[col], note
    texts = dict(zip(old["question_id"], ot))
    differ = [q for q, t in zip(new["question_id"], nt) if q in texts and texts[q] != t]
    if differ:
        return by_id[0], by_id[1], (
            f"NOT COMPARABLE: question id(s) {', '.join(map(str, differ[:3]))} name different questions in the two "
            "runs and some question texts repeat, so they cannot be paired by text; give every question a "
            "question_id in the questions file.")
    return by_id[0], by_id[1], ""
