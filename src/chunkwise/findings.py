"""The book's findings: what each chapter measured beside what the publications claim.

Three pieces, so that no number on the findings page is typed by hand:

1. **Results files.** The last cell of each chapter calls :func:`write_results` with the numbers
   it checked, keyed by short names (``"defaults.chunks"``). The file is
   ``<results dir>/<chapter stem>.json``; the results dir is ``$CHUNKWISE_RESULTS_DIR`` when set
   (``chunkwise run-notebooks`` sets it to ``<output folder>/results`` for the kernel), else
   ``<repo>/book/generated/results`` (a chapter run by hand in Jupyter).
2. **The claims registry** ``data/findings/claims.csv`` (committed): one row per published claim
   with its source, where in the source it is, the claim in our words, the published value and
   unit, the tolerance within which ours counts as reproduced, and the chapter and results key
   that measure it; or, for a claim this machine cannot test, what would be needed.
3. **The page.** :func:`findings_markdown` joins the two into one table per source with a
   verdict per claim; :func:`write_findings_page` writes it to ``book/generated/findings.md``,
   which ``chunkwise build-book`` does before Sphinx runs.

Verdicts (:func:`verdict`):

- ``reproduced``: kind ``number`` with ``|ours - published| <= tolerance`` (inclusive; the
  tolerance is in the claim's unit), or kind ``exact`` with ours equal to the published text;
- ``not reproduced``: otherwise, followed by the claim's ``cause`` with the chapter's measured
  values filled in (``{key}`` placeholders name keys of the same results file);
- ``not comparable here``: the claim's ``not_comparable`` column gives a reason (a different
  generator, data pool or embedder) why this machine's number cannot be held against the published
  one by construction; ours and the delta are still shown, and the reason (filled like ``cause``)
  replaces the cause. Kept apart from ``not reproduced``, which says the run disagrees;
- ``inconclusive``: an ``exact`` claim about a direction whose measured word is one of
  :data:`INCONCLUSIVE_WORDS` (its paired interval includes 0);
- ``not testable here``: kind ``untestable``, followed by ``needs`` (placeholders filled the same
  way);
- ``not run in this build``: the chapter's results file does not exist.

4. **Headline questions** ``data/findings/headline.csv``: about twenty questions, each answered by
   one or more claims of the registry; :func:`headline_rows` combines their verdicts and
   :func:`findings_markdown` shows them first, with a link to the chapter section that shows them.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.links import chapter_number, section_link

__all__ = [
    "CLAIM_COLUMNS",
    "Claim",
    "FindingsError",
    "KINDS",
    "RESULTS_ENV",
    "chroma_recall_spread",
    "chroma_results",
    "VERDICTS",
    "VERDICT_MEANINGS",
    "Headline",
    "evaluate",
    "findings_markdown",
    "headline_markdown",
    "headline_rows",
    "plan_markdown",
    "load_headlines",
    "section_link",
    "load_claims",
    "load_results",
    "load_robustness",
    "robustness_status",
    "missing_keys",
    "pgrag_abstract_metrics",
    "required_keys",
    "results_dir",
    "verdict",
    "build_line",
    "load_run_records",
    "write_findings_page",
    "write_results",
]

#: Environment variable naming the folder for results files (set by ``chunkwise run-notebooks``).
RESULTS_ENV = "CHUNKWISE_RESULTS_DIR"
#: Where the findings page is written, relative to the book folder.
FINDINGS_PAGE = Path("generated") / "findings.md"
#: The headline questions alone (the intro includes it), relative to the book folder.
HEADLINE_PAGE = Path("generated") / "headlines.md"
#: The "What should I do?" page's body (:mod:`chunkwise.advice`), relative to the book folder.
ADVICE_PAGE = Path("generated") / "advice.md"
#: The one-line description of the build, included at the top of the intro and findings pages.
BUILD_LINE_PAGE = Path("generated") / "build.md"
#: Subfolder of the results folder with one run record per chapter (``chunkwise.book``).
RUNS_DIR = "runs"
#: Claim kinds of the registry.
KINDS = ("number", "exact", "untestable")
#: Columns of ``data/findings/claims.csv``, in order.
CLAIM_COLUMNS = (
    "claim_id", "source", "location", "group", "claim", "published", "unit", "kind", "tolerance",
    "chapter", "key", "cross_check", "cause", "needs", "not_comparable",
)
#: Columns a registry may leave out (older files): they read as empty.
OPTIONAL_COLUMNS = ("not_comparable",)
#: Verdict classes, in the order the page counts them.
VERDICTS = (
    "reproduced", "not reproduced", "inconclusive", "not comparable here", "not comparable here (profile)",
    "not testable here", "not run in this build",
)
#: What each verdict class means (the page's counts line and legend).
VERDICT_MEANINGS = {
    "reproduced": "ours is within the claim's stated tolerance (or the same text or direction)",
    "not reproduced": "ours is outside the tolerance, or the direction differs; the verdict names the measured cause",
    "inconclusive": "a claim about which method is ahead where our paired 95% interval includes 0",
    "not comparable here": (
        "the published number depends on something this book does not have by construction (a different "
        "generator, data pool or embedder), so a difference says nothing about the publication; the reason is given"
    ),
    "not comparable here (profile)": (
        "the chapter ran with parameters that cut its inputs (a parameter profile such as ci, or values given "
        "on the command line), so a difference from the source says nothing about it; the chapter at its "
        "defaults (`make book`) is the published test"
    ),
    "not testable here": "this offline machine cannot run it; the verdict says what would be needed",
    "not run in this build": "the chapter's results were not produced for this build",
}
#: Measured words of an ``exact`` direction claim that mean "the interval includes 0".
INCONCLUSIVE_WORDS = ("cannot tell", "inconclusive", "no clear difference", "no difference shown", "neither ahead",
                      "tied")
#: Groups whose table is shown open on the page (group name prefixes); the others are folded.
OPEN_GROUPS = ("Headline", "Abstract")
#: Order of sources on the page.
SOURCE_ORDER = ("guide", "Chroma report", "PG-RAG paper", "CRUD-RAG paper", "Qu/Tu/Bao paper", "chunkwise (chapter 4)")
SOURCE_TITLES = {
    "guide": "The semantic-chunking guide (handbook experiment)",
    "Chroma report": "Chroma's technical report, Evaluating Chunking Strategies for Retrieval (2024)",
    "PG-RAG paper": "The PG-RAG paper (Liang et al., 2024, arXiv 2405.16933)",
    "CRUD-RAG paper": "CRUD-RAG: A Comprehensive Chinese Benchmark for Retrieval-Augmented Generation (Lyu et al., 2024, arXiv 2401.17043)",
    "Qu/Tu/Bao paper": "Is Semantic Chunking Worth the Computational Cost? (Qu, Tu & Bao, Findings of NAACL 2025, arXiv 2410.13070)",
    "chunkwise (chapter 4)": "This book's own question (chapter 4): can a drafted question set stand in for a published one?",
}

_EPS = 1e-9


class FindingsError(ValueError):
    """A results file or the claims registry is malformed, or they do not match."""


# ------------------------------------------------------------------------ results files


def results_dir(out_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder for results files: ``out_dir``, else ``$CHUNKWISE_RESULTS_DIR``, else
    ``<repo>/book/generated/results`` (found from the current directory)."""
    if out_dir is not None:
        return Path(out_dir)
    env = os.environ.get(RESULTS_ENV)
    if env:
        return Path(env).expanduser()
    from chunkwise._env import repo_root as find_repo_root

    return find_repo_root() / "book" / "generated" / "results"


def _plain(value: Any, key: str) -> Any:
    """A JSON value for a results file: numbers (numpy ones included) as int/float, NaN as None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (list, tuple, dict)):
        value = value.item()  # numpy scalar
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    raise FindingsError(
        f"results value {key!r} is a {type(value).__name__}; record a number, a string, a bool or None "
        "(format lists as text first)"
    )


def write_results(
    chapter: str, results: Mapping[str, Any], out_dir: str | os.PathLike[str] | None = None, *,
    robustness: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write a chapter's checked numbers to ``<results dir>/<chapter>.json``.

    Parameters
    ----------
    chapter : str
        The chapter's notebook stem, e.g. ``"01_handbook_boundaries"``.
    results : mapping
        ``{key: value}``; keys are the ``key`` column of the claims registry (and any key a
        ``cause``/``needs`` template names); values are numbers (NaN is stored as null), strings,
        bools or None.
    out_dir : path-like, optional
        Folder to write to; default :func:`results_dir`.
    robustness : mapping, optional
        ``{plan entry id: Robustness.as_dict() plus "plan_hash"}``: the robustness panel of each
        headline verdict the chapter computes (:mod:`chunkwise.evaluation.robustness`), stored
        beside ``results`` and read by :func:`load_robustness`. ``plan_hash`` is the entry's hash
        when the chapter ran (:attr:`chunkwise.plan.PlanEntry.hash`), so the findings page can tell a
        verdict computed under the current plan from one computed under an older specification.

    Returns
    -------
    pathlib.Path
        The file written (replaced atomically: a reader never sees half a file).

    Raises
    ------
    FindingsError
        If ``chapter`` is empty or has a path separator, a key is not a non-empty string, or a
        value is not a number, string, bool or None.
    """
    if not isinstance(chapter, str) or not chapter or "/" in chapter or "\\" in chapter:
        raise FindingsError(f"chapter must be a notebook stem such as '01_handbook_boundaries', got {chapter!r}")
    clean: dict[str, Any] = {}
    for key, value in results.items():
        if not isinstance(key, str) or not key:
            raise FindingsError(f"results keys must be non-empty strings, got {key!r}")
        clean[key] = _plain(value, key)
    folder = results_dir(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{chapter}.json"
    payload = {
        "chapter": chapter,
        "written_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "results": clean,
    }
    if robustness:
        panels: dict[str, Any] = {}
        for entry_id, panel in robustness.items():
            if not isinstance(panel, Mapping) or "class" not in panel or not panel.get("plan_hash"):
                raise FindingsError(f"robustness[{entry_id!r}] must be Robustness.as_dict() with a plan_hash, "
                                    f"got {type(panel).__name__}")
            panels[str(entry_id)] = json.loads(json.dumps(panel, allow_nan=False))
        payload["robustness"] = panels
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_results(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Read every ``<chapter>.json`` in ``folder``: ``{chapter: {key: value}}`` (empty if no folder).

    Raises
    ------
    FindingsError
        If a file is not valid JSON or lacks a ``results`` object.
    """
    return {path.stem: data["results"] for path, data in _results_files(folder)}


def _results_files(folder: str | os.PathLike[str]) -> list[tuple[Path, dict[str, Any]]]:
    """Every ``<chapter>.json`` in ``folder`` (sorted; none without the folder), parsed and checked.

    Raises
    ------
    FindingsError
        If a file is not valid JSON or lacks a ``results`` object.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise FindingsError(f"{path} is not valid JSON ({exc}); rerun its chapter") from None
        if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
            raise FindingsError(f"{path} has no 'results' object; rerun its chapter")
        out.append((path, data))
    return out


def load_robustness(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Every robustness panel of the results files in ``folder``: ``{plan entry id: panel}``
    (each panel with ``chapter`` added; empty if none).

    Raises
    ------
    FindingsError
        If a file is not valid JSON or lacks a ``results`` object, or two chapters report the same
        plan entry.
    """
    found: dict[str, dict[str, Any]] = {}
    for path, data in _results_files(folder):
        for entry_id, panel in (data.get("robustness") or {}).items():
            if entry_id in found:
                raise FindingsError(f"plan entry {entry_id!r} is reported by {found[entry_id]['chapter']} and "
                                    f"{path.stem}; one chapter owns each entry")
            found[entry_id] = {**panel, "chapter": path.stem}
    return found


def robustness_status(plan: Any, panels: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Each plan entry's robustness as the findings page states it.

    Parameters
    ----------
    plan : chunkwise.plan.Plan
    panels : mapping
        :func:`load_robustness`'s output.

    Returns
    -------
    dict
        ``{entry id: {"class", "text"}}``: the panel's class and sentence for an entry whose panel
        ran under its current specification; ``"reproduction"`` for reproductions (no sampling);
        ``"not assessed"`` for a declared test whose chapter has not run the panel.

    Raises
    ------
    FindingsError
        When a panel comes from a specification missing from the plan: an entry id the plan does
        not declare, or a ``plan_hash`` that is not the entry's current hash nor any hash its ledger
        recorded (a verdict computed under an undeclared specification).
    """
    out: dict[str, dict[str, str]] = {}
    for entry_id, panel in panels.items():
        if entry_id not in plan.entries:
            raise FindingsError(f"{panel.get('chapter')} reports a robustness panel for {entry_id!r}, which the "
                                f"analysis plan does not declare ({plan.path}); declare it before running it")
        known = {r["hash"] for r in plan.ledger if r["entry"] == entry_id}
        if panel.get("plan_hash") not in known:
            raise FindingsError(f"{panel.get('chapter')}: the panel of {entry_id!r} ran under specification "
                                f"{panel.get('plan_hash')}, which the plan's ledger never recorded; the verdict "
                                "comes from an undeclared specification")
    for entry_id, entry in plan.entries.items():
        if entry.kind == "reproduction":
            out[entry_id] = {"class": "reproduction", "text": "a reproduction against a stated tolerance (no test)"}
            continue
        panel = panels.get(entry_id)
        if panel is None:
            out[entry_id] = {"class": "not assessed",
                             "text": f"the run of {chapter_number(entry.chapter)} in this build has no robustness "
                                     "panel for it (a run older than the analysis plan, or a chapter that does not "
                                     "run this panel)"}
        elif panel["plan_hash"] != entry.hash:
            out[entry_id] = {"class": "not assessed",
                             "text": f"the run used an earlier specification ({panel['plan_hash']}); rerun "
                                     f"{panel['chapter']} under the amended plan"}
        else:
            out[entry_id] = {"class": str(panel["class"]), "text": str(panel.get("describe", panel["class"]))}
    return out


def load_run_records(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The run records ``<folder>/runs/<chapter>.json`` that ``chunkwise run-notebooks`` writes:
    ``{chapter: {"parameters": {...}, "origin": {name: "profile ci" | "command line"}}}``
    (empty when none; a chapter run by hand in Jupyter has none).

    Raises
    ------
    FindingsError
        If a record is not valid JSON or lacks its ``parameters`` object.
    """
    out: dict[str, dict[str, Any]] = {}
    runs = Path(folder) / RUNS_DIR
    if not runs.is_dir():
        return out
    for path in sorted(runs.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise FindingsError(f"{path} is not valid JSON ({exc}); rerun its chapter") from None
        if not isinstance(data, dict) or not isinstance(data.get("parameters"), dict):
            raise FindingsError(f"{path} has no 'parameters' object; rerun its chapter")
        out[path.stem] = {"parameters": data["parameters"], "origin": dict(data.get("origin") or {})}
    return out


def _changed_by(record: Mapping[str, Any] | None) -> str:
    """What set a chapter's non-default parameters: ``"the ci profile"``, ``"the command line"``,
    both, or ``""`` when it ran at its defaults (or has no record)."""
    if not record or not record.get("parameters"):
        return ""
    origins = sorted(set(record.get("origin", {}).values())) or ["command line"]
    names = [f"the {o.removeprefix('profile ')} profile" if o.startswith("profile ") else f"the {o}" for o in origins]
    return " and ".join(names)


def build_line(results_chapters: Sequence[str], records: Mapping[str, Mapping[str, Any]],
               expected: Sequence[str] = ()) -> str:
    """One sentence naming what this build ran: every chapter at its defaults (the published
    experiment), or which chapters a parameter profile or the command line changed, and which
    chapters it does not hold.

    Parameters
    ----------
    results_chapters : sequence of str
        The chapters whose results files this build has.
    records : mapping
        :func:`load_run_records`.
    expected : sequence of str, optional
        The chapters the claims registry reads; those without results are named as not in
        this build.
    """
    if not results_chapters:
        return "**This build ran no chapter**: the verdicts below are all \"not run in this build\"."
    changed = {ch: _changed_by(records.get(ch)) for ch in results_chapters}
    profiles = sorted({r["origin"][k].removeprefix("profile ") for ch in results_chapters
                       for r in [records.get(ch) or {}] for k in (r.get("parameters") or {})
                       if str(r.get("origin", {}).get(k, "")).startswith("profile ")})
    cut = [ch for ch, by in changed.items() if by]
    unknown = [ch for ch in results_chapters if ch not in records]
    absent = [ch for ch in expected if ch not in results_chapters]
    if not cut:
        line = (f"**This build ran {'every chapter' if not unknown and not absent else 'its chapters'} at the "
                "defaults: the published experiment.**")
    else:
        what = f"the `{', '.join(profiles)}` parameter profile" if profiles else "parameters given on the command line"
        params = "; ".join(f"{ch}: {', '.join(sorted(records[ch]['parameters']))}" for ch in cut)
        line = (f"**This build used {what}** ({params}), not the chapters' defaults: its numbers are not the "
                "published run's, and a claim of those chapters that differs from its source is \"not comparable "
                "here (profile)\". `make book` builds the published run.")
    if unknown:
        line += f" Chapters run outside `chunkwise run-notebooks` (parameters not recorded): {', '.join(unknown)}."
    if absent:
        line += (f" **Not in this build: {', '.join(absent)}**; their claims read \"not run in this build\" "
                 "(`chunkwise run-notebooks --only` a chapter runs it).")
    return line


# ------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Claim:
    """One row of the claims registry (see :data:`CLAIM_COLUMNS` and ``data/findings/README.md``)."""

    claim_id: str
    source: str
    location: str
    group: str
    claim: str
    published: str
    unit: str
    kind: str
    tolerance: float | None
    chapter: str
    key: str
    cross_check: str
    cause: str
    needs: str
    not_comparable: str = ""


def _template_fields(text: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(text or "") if f]


def _registry_rows(path: Path, columns: Sequence[str], optional: Sequence[str] = ()) -> list[dict[str, str]]:
    """Rows of a registry CSV (lines starting with ``#`` skipped); a missing column raises
    :class:`FindingsError` naming the file and the expected columns."""
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(row for row in fh if not row.startswith("#"))
        missing = [c for c in columns if c not in (reader.fieldnames or []) and c not in optional]
        if missing:
            raise FindingsError(f"{path} lacks column(s) {', '.join(missing)}; expected {', '.join(columns)}")
        return list(reader)


def load_claims(path: str | os.PathLike[str] | None = None) -> list[Claim]:
    """Read and check the claims registry (default ``<repo>/data/findings/claims.csv``).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    FindingsError
        Naming the row and column: missing columns, duplicate ids, an unknown kind, a ``number``
        claim whose published value or tolerance is not a number (tolerance must be >= 0), a
        testable claim without chapter and key, an untestable one without ``needs``.
    """
    if path is None:
        from chunkwise._env import repo_root as find_repo_root

        path = find_repo_root() / "data" / "findings" / "claims.csv"
    path = Path(path)
    rows = _registry_rows(path, CLAIM_COLUMNS, OPTIONAL_COLUMNS)
    claims: list[Claim] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, start=2):
        where = f"{path} line {n} ({row.get('claim_id')!r})"
        cid = (row["claim_id"] or "").strip()
        if not cid or cid in seen:
            raise FindingsError(f"{where}: claim_id is empty or repeated")
        seen.add(cid)
        kind = row["kind"].strip()
        if kind not in KINDS:
            raise FindingsError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        tol: float | None = None
        if kind == "number":
            try:
                float(row["published"])
                tol = float(row["tolerance"])
            except ValueError:
                raise FindingsError(f"{where}: a number claim needs a numeric published value and tolerance") from None
            if not tol >= 0:
                raise FindingsError(f"{where}: tolerance must be >= 0, got {row['tolerance']!r}")
        if kind in ("number", "exact") and not (row["chapter"].strip() and row["key"].strip()):
            raise FindingsError(f"{where}: a testable claim needs the chapter and results key that measure it")
        if kind == "untestable" and not row["needs"].strip():
            raise FindingsError(f"{where}: an untestable claim must say what would be needed (column needs)")
        claims.append(Claim(
            claim_id=cid, source=row["source"].strip(), location=row["location"].strip(),
            group=row["group"].strip(), claim=row["claim"].strip(), published=row["published"].strip(),
            unit=row["unit"].strip(), kind=kind, tolerance=tol, chapter=row["chapter"].strip(),
            key=row["key"].strip(), cross_check=row["cross_check"].strip(), cause=row["cause"].strip(),
            needs=row["needs"].strip(), not_comparable=(row.get("not_comparable") or "").strip(),
        ))
    return claims


def required_keys(claim: Claim) -> list[str]:
    """Results keys the claim needs from its chapter: its ``key`` and every template field."""
    keys = [claim.key] if claim.key else []
    for text in (claim.cause, claim.needs, claim.not_comparable):
        keys += [k for k in _template_fields(text) if k not in keys]
    return keys


def missing_keys(claims: Sequence[Claim], results: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """``{chapter: [keys the registry needs that its results file lacks]}`` for every chapter
    that has a results file (chapters without one are not listed)."""
    out: dict[str, list[str]] = {}
    for c in claims:
        if not c.chapter or c.chapter not in results:
            continue
        lacking = [k for k in required_keys(c) if k not in results[c.chapter]]
        for k in lacking:
            if k not in out.setdefault(c.chapter, []):
                out[c.chapter].append(k)
    return {ch: ks for ch, ks in out.items() if ks}


# ---------------------------------------------------------------------- cross-checks

#: PG-RAG rows of Table 1; every other row is a baseline ("benchmark" in the paper).
PG_ROWS = ("PG", "PG w. KPs", "PG-RAG")
_PG_METRICS = ("bleu", "rougeL", "bertscore", "f1qe")


def pgrag_abstract_metrics(table: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The abstract's percentage claims recomputed from a Table-1-shaped table.

    The abstract does not define its percentages; here each is a *relative* improvement in
    percent, ``100 * (PG-RAG / other - 1)``.

    Parameters
    ----------
    table : mapping
        ``{method label: {"doc1_bleu": value, ...}}`` in percent, with the paper's labels
        (``"PG-RAG"``, ``"KGP-LLaMA"``, baselines) and columns ``doc{1,2,3}_{bleu,rougeL,bertscore,f1qe}``.

    Returns
    -------
    dict
        ``abstract_overall_1doc`` (mean over the four metrics of PG-RAG over KGP-LLaMA, one
        document), ``abstract_bleu_1doc``, ``abstract_f1qe_1doc`` (the same per metric),
        ``abstract_multi_min_avg`` (per multi-document task, the mean over the metrics of PG-RAG
        over the best baseline of that metric; the smaller of the two tasks), ``abstract_multi_bleu``
        and ``abstract_multi_f1qe`` (PG-RAG over the best baseline, mean of the two
        multi-document tasks). A value is NaN where an input is missing or zero.

    Raises
    ------
    FindingsError
        If the table has no ``PG-RAG`` or ``KGP-LLaMA`` row.
    """
    for need in ("PG-RAG", "KGP-LLaMA"):
        if need not in table:
            raise FindingsError(f"the table has no {need!r} row; pass Table 1 with the paper's method labels")

    def val(method: str, col: str) -> float:
        v = table.get(method, {}).get(col)
        try:
            v = float(v)
        except (TypeError, ValueError):
            return math.nan
        return v

    def rel(a: float, b: float) -> float:
        return 100.0 * (a / b - 1.0) if b and not (math.isnan(a) or math.isnan(b)) else math.nan

    def best_baseline(col: str) -> float:
        vals = [val(m, col) for m in table if m not in PG_ROWS]
        vals = [v for v in vals if not math.isnan(v)]
        return max(vals) if vals else math.nan

    one = {m: rel(val("PG-RAG", f"doc1_{m}"), val("KGP-LLaMA", f"doc1_{m}")) for m in _PG_METRICS}
    multi = {
        d: {m: rel(val("PG-RAG", f"{d}_{m}"), best_baseline(f"{d}_{m}")) for m in _PG_METRICS}
        for d in ("doc2", "doc3")
    }

    def mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs) if xs and not any(math.isnan(x) for x in xs) else math.nan

    return {
        "abstract_overall_1doc": mean(list(one.values())),
        "abstract_bleu_1doc": one["bleu"],
        "abstract_f1qe_1doc": one["f1qe"],
        "abstract_multi_min_avg": min(mean(list(multi[d].values())) for d in multi),
        "abstract_multi_bleu": mean([multi[d]["bleu"] for d in multi]),
        "abstract_multi_f1qe": mean([multi[d]["f1qe"] for d in multi]),
    }


def _model_slug(model: str) -> str:
    """``"all-MiniLM-L6-v2" -> "all_minilm_l6_v2"``: lower case, other characters as ``_``."""
    import re

    return re.sub(r"[^0-9a-z]+", "_", model.lower()).strip("_")


def chroma_recall_spread(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Highest minus lowest mean recall (percentage points) per embedding model.

    ``rows``: records with ``embedding_model`` and ``recall_mean`` (as in
    ``data/chroma/chroma_report_results.csv``). Returns ``{"recall_spread_<model slug>": points}``
    and ``recall_spread_max``, the largest of them.
    """
    by_model: dict[str, list[float]] = {}
    for r in rows:
        by_model.setdefault(str(r["embedding_model"]), []).append(float(r["recall_mean"]))
    out = {f"recall_spread_{_model_slug(m)}": max(v) - min(v) for m, v in by_model.items()}
    if out:
        out["recall_spread_max"] = max(out.values())
    return out


def chroma_results(
    table: Any, report: Any, model: str, prefix: str = "minilm", n_questions: int | None = None
) -> dict[str, Any]:
    """Chapter 2's numbers for the findings page, keyed like the claims registry.

    Parameters
    ----------
    table : pandas.DataFrame
        Our results, one row per chunker: ``chunker``, ``size_tokens``, ``overlap_tokens`` and
        ``<metric>_mean`` in percent for metric in recall, precision, precision_omega, iou (as
        :func:`chunkwise.experiments.chroma.results_table` returns for chapter 2's grid).
    report : pandas.DataFrame
        The report's rows (``data/chroma/chroma_report_results.csv``).
    model : str
        The embedding model whose published rows are checked, e.g. ``"all-MiniLM-L6-v2"``.
    prefix : str
        Key prefix for that model (the registry uses ``"minilm"``).
    n_questions : int, optional
        Questions the run scored.

    Returns
    -------
    dict
        ``<prefix>_<chunker>_<size or na>_<overlap>_<metric>`` (chunker lower-cased, other
        characters as ``_``) for every published row of ``model``: ours, or None when the run
        did not include that chunker; ``recall_spread_<prefix>``: highest minus lowest mean
        recall over our rows (percentage points); ``recall_spread_<prefix>_report_rows``: the same
        over our rows of the chunkers the report ran with ``model`` only (like for like), with
        ``n_chunkers_report_rows``; ``report_recall_spread_<prefix>``: the spread of the report's own
        rows of ``model``; ``n_chunkers`` (our rows) and ``n_questions``.

    Raises
    ------
    FindingsError
        If ``table`` lacks one of the columns above.
    """
    import re

    need = ["chunker", "size_tokens", "overlap_tokens"] + [f"{m}_mean" for m in ("recall", "precision",
                                                                                   "precision_omega", "iou")]
    lacking = [c for c in need if c not in table.columns]
    if lacking:
        raise FindingsError(f"the results table lacks column(s) {', '.join(lacking)}; pass chroma.results_table(...)")

    def size_key(v: Any) -> str:
        x = _number(v)
        return "na" if x is None else str(int(x))

    def row_key(r: Any) -> str:
        chunker = re.sub(r"[^0-9a-z]+", "_", str(r["chunker"]).lower()).strip("_")
        overlap = _number(r["overlap_tokens"])  # no overlap given = none
        return f"{prefix}_{chunker}_{size_key(r['size_tokens'])}_{int(overlap or 0)}"

    ours = {row_key(r): r for _, r in table.iterrows()}
    out: dict[str, Any] = {}
    for _, r in report[report["embedding_model"] == model].iterrows():
        k = row_key(r)
        for m in ("recall", "precision", "precision_omega", "iou"):
            v = _number(ours[k][f"{m}_mean"]) if k in ours else None
            out[f"{k}_{m}"] = None if v is None else round(v, 2)
    recalls = [x for x in (_number(v) for v in table["recall_mean"]) if x is not None]
    out[f"recall_spread_{prefix}"] = round(max(recalls) - min(recalls), 2) if recalls else None
    # like for like: only our rows of the chunkers the report ran with this model
    published = {row_key(r) for _, r in report[report["embedding_model"] == model].iterrows()}
    same = [x for x in (_number(ours[k]["recall_mean"]) for k in published if k in ours) if x is not None]
    out[f"recall_spread_{prefix}_report_rows"] = round(max(same) - min(same), 2) if same else None
    out["n_chunkers_report_rows"] = len(same)
    theirs = [x for x in (_number(v) for v in report.loc[report["embedding_model"] == model, "recall_mean"])
              if x is not None] if "recall_mean" in report.columns else []
    out[f"report_recall_spread_{prefix}"] = round(max(theirs) - min(theirs), 2) if theirs else None
    out["n_chunkers"] = len(table)
    out["n_questions"] = n_questions
    return out


def _cross_checks(root: Path) -> dict[str, dict[str, float]]:
    """Values the published tables themselves imply, for claims made in a publication's prose."""
    out: dict[str, dict[str, float]] = {}
    pg = root / "data" / "crud" / "pgrag_table1_crud_qa.csv"
    if pg.is_file():
        with pg.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(r for r in fh if not r.startswith("#")))
        out["pgrag_table1"] = pgrag_abstract_metrics({r["method"]: r for r in rows})
    ch = root / "data" / "chroma" / "chroma_report_results.csv"
    if ch.is_file():
        with ch.open(encoding="utf-8", newline="") as fh:
            out["chroma_report"] = chroma_recall_spread(list(csv.DictReader(fh)))
    return out


# ------------------------------------------------------------------------------ verdicts


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _fmt(value: Any, decimals: int) -> str:
    x = _number(value)
    if x is not None and not isinstance(value, str):
        return f"{x:.{decimals}f}"
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _fill(template: str, values: Mapping[str, Any]) -> str:
    """Fill ``{key}`` / ``{key:.1f}`` placeholders from a results file (None shows as '-')."""
    shown = {k: (v if v is not None else "-") for k, v in values.items()}
    try:
        return template.format_map(shown)
    except (KeyError, ValueError, IndexError) as exc:
        raise FindingsError(f"template {template!r} cannot be filled from the results ({exc})") from None


def verdict(claim: Claim, results: Mapping[str, Any] | None) -> dict[str, str]:
    """Judge one claim against its chapter's results.

    Parameters
    ----------
    claim : Claim
        A registry row.
    results : mapping or None
        The chapter's ``{key: value}`` (:func:`load_results`); None when the chapter's results
        file does not exist.

    Returns
    -------
    dict
        ``ours`` and ``delta`` (text, formatted with the published value's decimals; ``-`` when
        there is none), ``verdict`` (one of :data:`VERDICTS`) and ``detail`` (the filled cause,
        needs or not-comparable reason).

    Raises
    ------
    FindingsError
        If the results lack a key the claim needs (see :func:`required_keys`).
    """
    dec = _decimals(claim.published)
    if claim.kind == "untestable":
        values = results or {}
        need_fields = _template_fields(claim.needs)
        if need_fields and results is None:
            detail = _fill_or_plain(claim.needs)
        else:
            _require(claim, values)
            detail = _fill(claim.needs, values)
        ours = _fmt(values.get(claim.key), dec) if claim.key and claim.key in values else "-"
        return {"ours": ours, "delta": "-", "verdict": "not testable here", "detail": detail}
    if results is None:
        return {"ours": "-", "delta": "-", "verdict": "not run in this build",
                "detail": f"no results file for {claim.chapter}: run `chunkwise run-notebooks --only {claim.chapter}`"}
    _require(claim, results)
    judged = _judge(claim, results, dec)
    if claim.not_comparable:
        reason = _fill(claim.not_comparable, results)
        return {**judged, "verdict": "not comparable here", "detail": reason}
    if (claim.kind == "exact" and judged["verdict"] == "not reproduced"
            and _norm(judged["ours"]) in INCONCLUSIVE_WORDS):
        return {**judged, "verdict": "inconclusive"}
    return judged


def _judge(claim: Claim, results: Mapping[str, Any], dec: int) -> dict[str, str]:
    """Reproduced or not, from the value alone (see :func:`verdict`)."""
    value = results[claim.key]
    cause = _fill(claim.cause, results) if claim.cause else ""
    if claim.kind == "number":
        x = _number(value)
        if x is None:
            return {"ours": "-", "delta": "-", "verdict": "not reproduced",
                    "detail": "the run gave no value" + (f"; {cause}" if cause else "")}
        delta = x - float(claim.published)
        tol = float(claim.tolerance or 0.0)
        ok = abs(delta) <= tol + _EPS * max(1.0, tol, abs(x))
        if dec == 0 and not float(x).is_integer():
            dec = 1  # a whole published number ("up to 9") beside a measured fraction
        return {"ours": _fmt(x, dec), "delta": f"{delta:+.{dec}f}",
                "verdict": "reproduced" if ok else "not reproduced", "detail": "" if ok else cause}
    shown = _fmt(value, dec)
    ok = _norm(shown) == _norm(claim.published)
    return {"ours": shown, "delta": "-", "verdict": "reproduced" if ok else "not reproduced",
            "detail": "" if ok else cause}


def _norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _fill_or_plain(template: str) -> str:
    """A template whose chapter did not run: its placeholders shown as 'not measured'."""
    return _fill(template, {k: "(not measured in this build)" for k in _template_fields(template)})


def _require(claim: Claim, results: Mapping[str, Any]) -> None:
    lacking = [k for k in required_keys(claim) if k not in results]
    if lacking:
        raise FindingsError(
            f"claim {claim.claim_id}: the results file of {claim.chapter} lacks {', '.join(lacking)}; "
            "add them to the chapter's write_results call (or fix the registry)"
        )


def evaluate(
    claims: Sequence[Claim], results: Mapping[str, Mapping[str, Any]],
    cross_checks: Mapping[str, Mapping[str, float]] | None = None,
    runs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """:func:`verdict` for every claim, plus the claim's fields and ``implied`` (what the
    source's own table implies for a prose claim, formatted, or ``""``).

    With ``runs`` (:func:`load_run_records`), a claim of a chapter that ran with non-default
    parameters (a profile, the command line) is ``not comparable here (profile)`` where it would
    be ``not reproduced`` or ``inconclusive``: its inputs were cut, so the difference says
    nothing about the source."""
    rows = []
    for c in claims:
        row = {**c.__dict__, **verdict(c, results.get(c.chapter) if c.chapter else None)}
        by = _changed_by((runs or {}).get(c.chapter)) if c.chapter else ""
        if by and row["verdict"] in ("not reproduced", "inconclusive"):
            params = ", ".join(sorted((runs or {})[c.chapter]["parameters"]))
            row["detail"] = (f"{c.chapter} ran with {by} ({params}), not its defaults; measured: "
                             f"{row['detail'] or row['ours']}")
            row["verdict"] = "not comparable here (profile)"
        implied = ""
        if c.cross_check:
            name, _, key = c.cross_check.partition(":")
            value = (cross_checks or {}).get(name, {}).get(key or c.key)
            if value is not None and not math.isnan(value):
                implied = _fmt(value, max(_decimals(c.published), 1))
        row["implied"] = implied
        rows.append(row)
    return rows


# ------------------------------------------------------------------------- headline questions

#: Columns of ``data/findings/headline.csv``, in order.
HEADLINE_COLUMNS = ("headline_id", "question", "source", "published", "claims", "chapter", "section")


@dataclass(frozen=True)
class Headline:
    """One headline question of the findings page (``data/findings/headline.csv``).

    ``claims`` are claim ids of the registry, or ``fnmatch`` patterns of them (``pgrag-t1-*``);
    ``section`` is the heading, in ``chapter``, of the section that shows the answer.
    """

    headline_id: str
    question: str
    source: str
    published: str
    claims: tuple[str, ...]
    chapter: str
    section: str


def load_headlines(path: str | os.PathLike[str] | None = None, claims: Sequence[Claim] | None = None) -> list[Headline]:
    """Read the headline questions (default ``<repo>/data/findings/headline.csv``).

    Parameters
    ----------
    path : path-like, optional
    claims : sequence of Claim, optional
        When given, every id or pattern of a headline must match at least one of them.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    FindingsError
        Naming the row: missing columns, a repeated id, an empty question or claim list, or (with
        ``claims``) an id or pattern that matches no claim.
    """
    import fnmatch

    if path is None:
        from chunkwise._env import repo_root as find_repo_root

        path = find_repo_root() / "data" / "findings" / "headline.csv"
    path = Path(path)
    rows = _registry_rows(path, HEADLINE_COLUMNS)
    ids = [c.claim_id for c in claims] if claims is not None else None
    out: list[Headline] = []
    seen: set[str] = set()
    for n, row in enumerate(rows, start=2):
        where = f"{path} line {n} ({row.get('headline_id')!r})"
        hid = (row["headline_id"] or "").strip()
        if not hid or hid in seen:
            raise FindingsError(f"{where}: headline_id is empty or repeated")
        seen.add(hid)
        patterns = tuple(x.strip() for x in (row["claims"] or "").split(";") if x.strip())
        if not (row["question"] or "").strip() or not patterns:
            raise FindingsError(f"{where}: a headline needs a question and at least one claim id")
        if ids is not None:
            empty = [pat for pat in patterns if not fnmatch.filter(ids, pat)]
            if empty:
                raise FindingsError(f"{where}: {', '.join(empty)} match no claim of the registry")
        out.append(Headline(hid, row["question"].strip(), row["source"].strip(), row["published"].strip(), patterns,
                            row["chapter"].strip(), row["section"].strip()))
    return out


def headline_rows(headlines: Sequence[Headline], rows: Sequence[Mapping[str, Any]],
                  robustness: Mapping[str, Mapping[str, str]] | None = None,
                  plan: Any = None) -> list[dict[str, Any]]:
    """Combine each headline's claims (rows of :func:`evaluate`) into one verdict.

    The verdict is the claims' common verdict when they share one; otherwise, with claims not run
    in this build, ``not run in this build``; otherwise ``mixed`` with the counts in ``found``.
    ``found`` says what the run found: for one claim, ours (and the measured cause when it is not
    reproduced); for several, how many fall in each verdict class.

    With ``plan`` and ``robustness`` (:func:`robustness_status`), each headline also gets its plan
    entry's robustness class (``robustness``, ``robustness_text``); without them both are ``""``.

    Returns
    -------
    list of dict
        The headline's fields plus ``verdict``, ``found``, ``n_claims``, ``link``, ``robustness``
        and ``robustness_text``.
    """
    import fnmatch

    by_id = {r["claim_id"]: r for r in rows}
    out = []
    for h in headlines:
        ids: list[str] = []
        for pat in h.claims:
            ids += [i for i in fnmatch.filter(list(by_id), pat) if i not in ids]
        members = [by_id[i] for i in ids]
        counts = {v: sum(m["verdict"] == v for m in members) for v in VERDICTS}
        classes = [v for v in VERDICTS if counts[v]]
        if len(classes) == 1:
            verdict_class = classes[0]
        elif counts["not run in this build"]:
            verdict_class = "not run in this build"
        else:
            verdict_class = "mixed"
        if len(members) == 1:
            m = members[0]
            unit = f" {m['unit']}" if m["unit"] and m["kind"] == "number" and m["ours"] != "-" else ""
            found = f"{m['ours']}{unit}"
            if m["detail"]:
                found = f"{found} ({m['detail']})" if m["ours"] != "-" else m["detail"]
        else:
            found = "; ".join(f"{counts[v]} {v}" for v in classes) + f" of {len(members)} claims"
            if verdict_class == "not comparable here":
                found += f": {members[0]['detail']}"
        entry = plan.for_headline(h.headline_id) if plan is not None else None
        status = (robustness or {}).get(entry.entry_id, {}) if entry is not None else {}
        out.append({**h.__dict__, "verdict": verdict_class, "found": found, "n_claims": len(members),
                    "link": section_link(h.chapter, h.section), "robustness": status.get("class", ""),
                    "robustness_text": status.get("text", "")})
    return out


# ---------------------------------------------------------------------------- the page


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


#: The mark a row of a chapter whose published run is older than its source carries.
STALE_MARK = "run older than its source"


def _stale_note(stale: Mapping[str, Sequence[str]] | None) -> str:
    chapters = sorted(stem for stem, reasons in (stale or {}).items() if reasons)
    if not chapters:
        return ""
    names = ", ".join(chapter_number(c) for c in chapters)
    return (f"```{{warning}}\nThe published run of {names} is older than its source: their "
            f"headline rows are marked \"{STALE_MARK}\", and each chapter's banner names what changed.\n```")


def headline_markdown(headlines: Sequence[Mapping[str, Any]],
                      stale: Mapping[str, Sequence[str]] | None = None) -> str:
    """The headline questions (:func:`headline_rows`) as one MyST table: question, what the source
    says, what this book finds, the verdict, and a link to the section that shows it. A row whose
    chapter has stale reasons in ``stale`` (:func:`chunkwise.provenance.load_stale`) carries
    :data:`STALE_MARK` beside its verdict."""
    lines = ["| question | the source says | this book finds | verdict (robustness) | where |", "|---|---|---|---|---|"]
    for h in headlines:
        klass = f" ({h['robustness']})" if h.get("robustness") else ""
        if (stale or {}).get(h.get("chapter", "")):
            klass += f"; *{STALE_MARK}*"
        lines.append("| " + " | ".join(_cell(x) for x in (
            h["question"], f"{h['published']} ({h['source']})", h["found"], f"**{h['verdict']}**{klass}", h["link"],
        )) + " |")
    return "\n".join(lines)


#: What each robustness class means (the plan section of the findings page).
ROBUSTNESS_MEANINGS = {
    "robust": "every alternative the analysis plan declares reaches the primary's verdict",
    "fragile": "at least one declared alternative reaches another verdict (named)",
    "cannot tell": "the primary specification cannot tell; the run's detectable effect at 80% power is given",
    "no effect larger than delta": "the interval lies inside the plan's practical margin, and every alternative agrees",
    "not assessed": "a test declared in the plan whose run in this build has no panel for it",
    "reproduction": "a number held against a published one with a stated tolerance: no sampling, no panel",
}


def _class_text(cls: str, text: str) -> str:
    """``**class**`` followed by the rest of its sentence (the sentence repeats the class first)."""
    rest = text[len(cls):] if text.startswith(cls) else (f": {text}" if text and text != cls else "")
    return f"**{cls}**{rest}"


def plan_markdown(plan: Any, status: Mapping[str, Mapping[str, str]]) -> str:
    """The analysis plan as the findings page shows it: the classes, then per test entry its
    question, primary specification, number of declared alternatives, class and every amendment
    (date, reason, what the previous specification gave)."""
    from chunkwise.plan import amendments

    lines = ["## The analysis plan and how each verdict survives it", "",
             "Each headline verdict is computed under the primary specification declared in "
             "`data/findings/plan.toml` and rerun under every alternative declared there "
             "(another reference, metric, corpus, seed, interval method, missing-answer rule). Its class:", ""]
    lines += [f"- **{k}**: {v};" for k, v in ROBUSTNESS_MEANINGS.items()]
    lines[-1] = lines[-1].rstrip(";") + "."
    lines.append("")
    tests = [e for e in plan.entries.values() if e.kind == "test"]
    lines += ["| question | primary specification | alternatives | robustness |", "|---|---|---|---|"]
    for e in tests:
        spec = ", ".join(f"{k} {v}" for k, v in e.primary.items() if k != "confidence")
        st = status.get(e.entry_id, {"class": "not assessed", "text": ""})
        lines.append("| " + " | ".join(_cell(x) for x in (
            e.question, f"{spec}; margin ±{e.delta:g} {e.unit}", len(e.alternatives),
            _class_text(st["class"], st["text"]))) + " |")
    lines.append("")
    changed = [(e, amendments(plan, e.entry_id)) for e in plan.entries.values()]
    changed = [(e, a) for e, a in changed if a]
    lines += ["### Amendments", ""]
    if not changed:
        lines += ["No entry has been changed since it was declared.", ""]
    for e, amends in changed:
        for a in amends:
            lines.append(f"- **{e.entry_id}**, {a['date']}: {a['reason']} Before: {a['previous']}.")
    lines.append("")
    return "\n".join(lines)


def findings_markdown(rows: Sequence[Mapping[str, Any]], headlines: Sequence[Mapping[str, Any]] = (),
                      plan_section: str = "", stale: Mapping[str, Sequence[str]] | None = None) -> str:
    """The findings tables as MyST Markdown: a count of verdicts, an overview (verdicts per
    group), then per source one table per group; groups not named in :data:`OPEN_GROUPS` are
    folded into a sphinx-design ``dropdown`` titled with their verdict counts.

    ``headlines`` (from :func:`headline_rows`) come first, one table of the headline questions.
    ``rows`` come from :func:`evaluate`. Columns: claim, where (in the source), published (and
    what the source's own table implies, for a prose claim), ours, delta (ours minus published),
    tolerance, verdict (with the measured cause or what would be needed).

    ``stale`` (:func:`chunkwise.provenance.load_stale`): chapters whose published run is older
    than their source; the page opens with a warning naming them, their headline rows carry
    :data:`STALE_MARK`, and each source's section names its stale chapters once.
    """
    import re
    from collections import Counter

    def claims(n: int) -> str:
        return f"{n} claim{'' if n == 1 else 's'}"

    def shown_delta(delta: Any) -> str:
        # "-0.0" (a negative difference rounded to zero) reads as a sign without a difference
        text = str(delta)
        return text[1:] if re.fullmatch(r"-0(\.0+)?", text) else text

    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    order = VERDICTS
    lines: list[str] = []
    note = _stale_note(stale)
    if note:
        lines += [note, ""]
    if headlines:
        lines += ["## The headline questions", "",
                  "One row per question a publication (or this book) answers; each is judged by the claims "
                  "listed under its source below, and links to the section that shows the evidence.", "",
                  headline_markdown(headlines, stale), ""]
    if plan_section:
        lines += [plan_section, ""]
    lines += [
        "## Every claim",
        "",
        f"**{claims(len(rows))} checked in this build:** "
        + ", ".join(f"{counts[v]} {v}" for v in order if counts.get(v)) + ". The classes:",
        "",
    ]
    lines += [f"- **{v}**: {VERDICT_MEANINGS[v]}{f' ({counts[v]})' if counts.get(v) else ' (none in this build)'};"
              for v in order]
    lines[-1] = lines[-1].rstrip(";") + "."
    lines.append("")
    sources = [s for s in SOURCE_ORDER if any(r["source"] == s for r in rows)]
    sources += sorted({r["source"] for r in rows} - set(sources))
    # Overview: one line per table below, a column per verdict class this build has (the list
    # above names the empty ones), so the table fits the text column.
    present = [v for v in order if counts.get(v)]
    lines += ["| source | claims | " + " | ".join(present) + " |", "|---|---|" + "---|" * len(present)]
    for source in sources:
        groups_seen: list[str] = []
        for r in rows:
            if r["source"] == source and r["group"] not in groups_seen:
                groups_seen.append(r["group"])
        for group in groups_seen:
            mine = [r for r in rows if r["source"] == source and r["group"] == group]
            n = {v: sum(r["verdict"] == v for r in mine) for v in order}
            name = f"{source}: {group}" if group else source
            lines.append("| " + " | ".join(_cell(x) for x in (name, len(mine), *(n[v] for v in present))) + " |")
    lines.append("")
    for source in sources:
        mine = [r for r in rows if r["source"] == source]
        n_ok = sum(r["verdict"] == "reproduced" for r in mine)
        lines += [f"### {SOURCE_TITLES.get(source, source)}", "",
                  f"{claims(len(mine))}, {n_ok} reproduced.", ""]
        behind = sorted({r["chapter"] for r in mine if (stale or {}).get(r.get("chapter") or "")})
        if behind:  # said once per source, not on every row
            lines += [f"*The claims of {', '.join(chapter_number(c) for c in behind)} below come from a "
                      f"{STALE_MARK}.*", ""]
        groups: list[str] = []
        for r in mine:
            if r["group"] not in groups:
                groups.append(r["group"])
        for group in groups:
            members = [x for x in mine if x["group"] == group]
            # Headline and abstract claims stay open; the cell-by-cell tables fold away under
            # a title that counts their verdicts (the overview above lists them all).
            folded = bool(group) and not group.startswith(OPEN_GROUPS)
            if folded:
                n = {v: sum(x["verdict"] == v for x in members) for v in order}
                counted = ", ".join(f"{k} {v}" for v, k in n.items() if k)
                lines += [f":::{{dropdown}} {group}: {claims(len(members))} ({counted})", ""]
            elif group:
                lines += [f"#### {group}", ""]
            # A reason shared by several claims of the group is stated once, above its table.
            shared = {key for key, k in Counter((x["verdict"], x["detail"]) for x in members if x["detail"]).items()
                      if k > 1}
            keys = [(x["verdict"], x["detail"]) for x in members]
            whole = len(shared) == 1 and keys.count(next(iter(shared))) == len(members)
            for verdict, detail in sorted(shared, key=keys.index):
                k = keys.count((verdict, detail))
                if whole:
                    lines += [f"All {claims(k)} below are **{verdict}**: {detail}", ""]
                else:
                    lines += [f"{claims(k)} below are **{verdict}** (marked \"reason above\"): {detail}", ""]
            lines += ["| claim | where | published | ours | delta | tolerance | verdict |",
                      "|---|---|---|---|---|---|---|"]
            for r in members:
                unit = f" {r['unit']}" if r["unit"] else ""
                published = f"{r['published']}{unit}" if r["kind"] != "exact" else r["published"]
                if r.get("implied"):
                    published += f" (the source's table implies {r['implied']})"
                ours = f"{r['ours']}{unit}" if r["ours"] != "-" and r["kind"] == "number" else r["ours"]
                tol = "-"
                if r["kind"] == "number":  # a tolerance on a percentage is in percentage points
                    tol = f"±{r['tolerance']:g}{' points' if r['unit'] == '%' else unit}"
                elif r["kind"] == "exact":
                    tol = "exact"
                verdict_text = f"**{r['verdict']}**"
                if (r["verdict"], r["detail"]) in shared:
                    verdict_text += "" if whole else " (reason above)"
                elif r["detail"]:
                    verdict_text += f": {r['detail']}"
                lines.append("| " + " | ".join(_cell(x) for x in (
                    r["claim"], r["location"], published, ours, shown_delta(r["delta"]), tol, verdict_text)) + " |")
            lines.append("")
            if folded:
                lines += [":::", ""]
    return "\n".join(lines)


def write_findings_page(
    book_dir: str | os.PathLike[str],
    claims_path: str | os.PathLike[str] | None = None,
    results_folder: str | os.PathLike[str] | None = None,
) -> Path:
    """Write :func:`findings_markdown` to ``<book_dir>/generated/findings.md``, the headline
    questions alone, with a count of their verdicts, to ``<book_dir>/generated/headlines.md``,
    :func:`build_line` (which parameters this build ran) to ``<book_dir>/generated/build.md``, and
    the "What should I do?" page's body (:mod:`chunkwise.advice`, from ``advice.toml`` beside the
    registry) to ``<book_dir>/generated/advice.md``.

    Parameters
    ----------
    book_dir : path-like
        The Jupyter Book folder.
    claims_path : path-like, optional
        The registry; default ``<repo>/data/findings/claims.csv``, where repo is the repository
        that holds ``book_dir`` (else the one around the current directory).
    results_folder : path-like, optional
        Where the chapters' results files are; default ``<book_dir>/generated/results``.

    Returns
    -------
    pathlib.Path
        The page written.

    Raises
    ------
    FileNotFoundError
        If no repository is found (see :func:`chunkwise._env.repo_root`) or the registry is missing.
    FindingsError
        If the registry is malformed or a chapter's results file lacks a key the registry needs.
    """
    from chunkwise._env import repo_root as find_repo_root

    book = Path(book_dir)
    try:  # the repository the book belongs to; a copy of the book elsewhere: the current one
        root = find_repo_root(book)
    except FileNotFoundError:
        root = find_repo_root()
    claims = load_claims(claims_path if claims_path is not None else root / "data" / "findings" / "claims.csv")
    folder = Path(results_folder) if results_folder is not None else book / "generated" / "results"
    results = load_results(folder)
    runs = load_run_records(folder)
    lacking = missing_keys(claims, results)
    if lacking:
        raise FindingsError(
            "results files lack keys the claims registry needs: "
            + "; ".join(f"{ch}: {', '.join(ks)}" for ch, ks in lacking.items())
            + " (rerun those chapters, or fix data/findings/claims.csv)"
        )
    rows = evaluate(claims, results, _cross_checks(root), runs)
    headline_path = Path(claims_path).with_name("headline.csv") if claims_path is not None else (
        root / "data" / "findings" / "headline.csv")
    plan_file = Path(claims_path).with_name("plan.toml") if claims_path is not None else (
        root / "data" / "findings" / "plan.toml")
    plan = status = None
    if plan_file.is_file():
        from chunkwise.plan import load_plan

        plan = load_plan(plan_file)
        status = robustness_status(plan, load_robustness(folder))
    heads = (headline_rows(load_headlines(headline_path, claims), rows, status, plan)
             if headline_path.is_file() else [])
    out = book / FINDINGS_PAGE
    out.parent.mkdir(parents=True, exist_ok=True)
    expected = sorted({c.chapter for c in claims if c.chapter})  # claims no chapter runs (OpenAI rows) name none
    (book / BUILD_LINE_PAGE).write_text(build_line(sorted(results), runs, expected) + "\n", encoding="utf-8")
    from chunkwise.provenance import load_stale

    stale = load_stale(book / "generated")
    out.write_text(findings_markdown(rows, heads, plan_markdown(plan, status) if plan is not None else "", stale),
                   encoding="utf-8")
    advice_file = plan_file.with_name("advice.toml")
    if plan is not None and advice_file.is_file():
        from chunkwise.advice import advice_markdown, advice_rows, load_advice

        items = load_advice(advice_file, plan)
        (book / ADVICE_PAGE).write_text(
            advice_markdown(advice_rows(items, plan, status, load_robustness(folder), results)) + "\n",
            encoding="utf-8")
    else:
        (book / ADVICE_PAGE).write_text("No analysis plan or advice file is registered.\n", encoding="utf-8")
    counts = {v: sum(h["verdict"] == v for h in heads) for v in (*VERDICTS, "mixed")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    (book / HEADLINE_PAGE).write_text(
        (f"**{len(heads)} headline questions in this build:** {summary}.\n\n"
         + (_stale_note(stale) + "\n\n" if _stale_note(stale) else "") + headline_markdown(heads, stale) + "\n")
        if heads else "No headline questions are registered.\n", encoding="utf-8")
    return out
