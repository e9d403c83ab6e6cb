"""Where a chapter's numbers came from, and whether the source has moved on since.

A chapter run by ``chunkwise run-notebooks`` records its *provenance* beside its parameters
(``<results>/runs/<stem>.json``): the git commit of the repository and whether the working tree
had uncommitted changes, the chunkwise version, the machine (CPU model, cores, memory, OS,
Python), and fingerprints of what the numbers depend on -- a sha256 per code cell of the source
notebook and a sha256 per module of the ``chunkwise`` package that the chapter imports, directly
or through other modules (found by reading ``import`` statements with :mod:`ast`, including
imports inside functions, so the set is conservative).

The published run (``book/published/``, see :func:`publish_run` and :func:`stage_published`)
is read without executing anything; :func:`stale_reasons` compares its fingerprints with the
current source and names what changed, so a page whose run is older than its code says so
(a banner) instead of passing old numbers off as current ones. Staleness is visible, never
blocking: a cold rerun of the whole book costs hours.
"""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import json
import math
import difflib
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "ChapterComparison",
    "PROVENANCE_TAG",
    "PUBLISHED_DIR",
    "PublishError",
    "annotate_pages",
    "chapter_modules",
    "FINGERPRINT",
    "code_cell_hashes",
    "code_fingerprint",
    "compare_runs",
    "git_state",
    "load_stale",
    "machine_summary",
    "module_hashes",
    "provenance_markdown",
    "value_change",
    "publish_run",
    "run_provenance",
    "stage_published",
    "stale_reasons",
    "staleness_summary",
]

#: Tag of the Markdown cell that states a page's provenance (inserted by the book build).
PROVENANCE_TAG = "run-provenance"
#: Where the committed published run lives, relative to the book folder.
PUBLISHED_DIR = "published"
#: Package name whose modules are fingerprinted.
_PACKAGE = "chunkwise"


class PublishError(ValueError):
    """A run cannot be published or read as the published run (the message says what to do)."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: How the current code computes fingerprints (recorded in every run record as ``fingerprint``).
#: ``"code-v2"``: the code as :func:`ast.unparse` writes it with docstrings removed, so an edit to a
#: comment, a docstring or the layout alone leaves a chapter current (issue #60); code that does
#: not parse (a cell with IPython magics) is hashed as its text without comment-only lines and
#: trailing blanks. ``"bytes-v1"``: the raw text, what records made before ``code-v2`` hold (a
#: record without the key). Each record is checked with its own method, so an older published run
#: keeps its meaning. ``ast.unparse`` may write a construct differently in another Python version;
#: the record's machine names the Python it ran with.
FINGERPRINT = "code-v2"
_FINGERPRINTS = ("bytes-v1", "code-v2")


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
    return tree


def code_fingerprint(code: str, method: str = FINGERPRINT) -> str:
    """sha256 (first 16 hex digits) of Python source under a fingerprint ``method``.

    Parameters
    ----------
    code : str
        A module's or a notebook cell's source.
    method : {"code-v2", "bytes-v1"}
        ``"code-v2"`` ignores comments, docstrings and layout (see :data:`FINGERPRINT`);
        ``"bytes-v1"`` hashes the text as it is.

    Raises
    ------
    ValueError
        For an unknown method (a record written by a newer chunkwise: upgrade to read it).
    """
    if method == "bytes-v1":
        return _sha(code)
    if method != "code-v2":
        raise ValueError(f"unknown fingerprint method {method!r} (known: {', '.join(_FINGERPRINTS)}); "
                         "the run was recorded by a newer chunkwise: upgrade it to compare")
    try:
        text = ast.unparse(_without_docstrings(ast.parse(code)))
    except (SyntaxError, ValueError):
        text = "\n".join(line.rstrip() for line in code.splitlines()
                         if line.strip() and not line.lstrip().startswith("#"))
    return _sha(text)


def _code_cells(notebook: Path) -> list[str]:
    try:
        nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PublishError(f"{notebook} cannot be read as a notebook ({exc})") from None
    out = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = (cell.get("metadata") or {}).get("tags") or []
        if "injected-parameters" in tags:  # papermill's own cell, not part of the source
            continue
        source = cell.get("source", "")
        out.append(source if isinstance(source, str) else "".join(source))
    return out


def code_cell_hashes(notebook: str | os.PathLike[str], method: str = FINGERPRINT) -> list[str]:
    """Fingerprint (:func:`code_fingerprint` under ``method``) of each code cell, in order.

    Works on a source notebook or an executed copy (papermill's ``injected-parameters`` cell is
    skipped, so both give the same list).

    Raises
    ------
    PublishError
        If the file is not a readable notebook.
    """
    return [code_fingerprint(source, method) for source in _code_cells(Path(notebook))]


def _imported_modules(code: str, current: str | None = None) -> set[str]:
    """Names ``chunkwise[.x[.y]]`` that ``code`` imports (``current``: the module's own dotted
    name, to resolve relative imports). Unparsable code (IPython magics) is read line by line."""
    try:
        trees = [ast.parse(code)]
    except SyntaxError:
        trees = []
        for line in code.splitlines():
            stripped = line.strip()
            if stripped.startswith(("import ", "from ")):
                try:
                    trees.append(ast.parse(stripped))
                except SyntaxError:
                    continue
    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == _PACKAGE)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level and current:
                    parts = current.split(".")
                    # a package's __init__ counts as the package itself
                    anchor = parts[: len(parts) - node.level + (1 if current.endswith("__init__") else 0)]
                    anchor = [p for p in anchor if p != "__init__"]
                    base = ".".join(anchor + ([base] if base else []))
                if base.split(".")[0] != _PACKAGE:
                    continue
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return found


def _module_file(name: str, src_root: Path) -> Path | None:
    parts = name.split(".")
    as_module = src_root.joinpath(*parts).with_suffix(".py")
    if as_module.is_file():
        return as_module
    as_package = src_root.joinpath(*parts, "__init__.py")
    return as_package if as_package.is_file() else None


def chapter_modules(notebook: str | os.PathLike[str], src_root: str | os.PathLike[str]) -> list[str]:
    """Files of the package (paths relative to ``src_root``) that a notebook's code imports,
    directly or through other package modules, plus every package ``__init__.py`` on the way.

    Parameters
    ----------
    notebook : path
        A source or executed notebook.
    src_root : path
        The folder holding the ``chunkwise`` package (``<repo>/src``).

    Returns
    -------
    list of str
        Sorted POSIX paths such as ``chunkwise/evaluation/grid.py``.
    """
    root = Path(src_root)
    todo = set()
    for code in _code_cells(Path(notebook)):
        todo |= _imported_modules(code)
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        # every parent package's __init__ runs on import
        parts = name.split(".")
        for i in range(1, len(parts)):
            parent = ".".join(parts[:i])
            if parent not in seen:
                todo.add(parent)
        path = _module_file(name, root)
        if path is None or name in seen:
            continue
        seen[name] = path
        dotted = name + (".__init__" if path.name == "__init__.py" else "")
        todo |= _imported_modules(path.read_text(encoding="utf-8"), dotted) - set(seen)
    return sorted(p.relative_to(root).as_posix() for p in seen.values())


def module_hashes(files: Iterable[str], src_root: str | os.PathLike[str],
                  method: str = FINGERPRINT) -> dict[str, str]:
    """``{relative path: fingerprint}`` of package files under ``method`` (see
    :func:`code_fingerprint`; missing files are left out)."""
    root = Path(src_root)
    out = {}
    for rel in files:
        path = root / rel
        if path.is_file():
            if method == "bytes-v1":  # the raw bytes, as records before code-v2 were made
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            else:
                out[rel] = code_fingerprint(path.read_text(encoding="utf-8"), method)
    return out


def git_state(repo_root: str | os.PathLike[str]) -> dict[str, Any]:
    """``{"commit": full sha or None, "dirty": bool or None}`` of the repository at ``repo_root``
    (None when git or the repository is not available; a run outside git is still recorded)."""
    def _git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", os.fspath(repo_root), *args], capture_output=True,
                                  text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def machine_summary() -> dict[str, Any]:
    """The machine a chapter ran on: CPU model, logical cores, memory (GiB), OS and Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "cores": cores, "memory_gib": memory_gib,
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version()}


def run_provenance(source: str | os.PathLike[str], repo_root: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything :func:`stale_reasons` needs later, taken before a chapter's kernel starts.

    Returns
    -------
    dict
        ``commit``, ``dirty``, ``chunkwise_version``, ``machine`` (:func:`machine_summary`),
        ``recorded_utc`` (ISO 8601), ``notebook`` (path relative to the repository),
        ``fingerprint`` (the method, :data:`FINGERPRINT`), ``code_cells``
        (:func:`code_cell_hashes`) and ``modules`` (:func:`module_hashes` of
        :func:`chapter_modules`).
    """
    from chunkwise import __version__

    source, root = Path(source).resolve(), Path(repo_root).resolve()
    src_root = root / "src"
    try:
        rel = source.relative_to(root).as_posix()
    except ValueError:
        rel = source.name
    files = chapter_modules(source, src_root) if src_root.is_dir() else []
    return {
        **git_state(root),
        "chunkwise_version": __version__,
        "machine": machine_summary(),
        "recorded_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "notebook": rel,
        "fingerprint": FINGERPRINT,
        "code_cells": code_cell_hashes(source),
        "modules": module_hashes(files, src_root),
    }


def _changed_cells(old: Sequence[str], new: Sequence[str]) -> str | None:
    if list(old) == list(new):
        return None
    changed = [i + 1 for i in range(max(len(old), len(new)))
               if i >= len(old) or i >= len(new) or old[i] != new[i]]
    shown = ", ".join(map(str, changed[:8])) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
    size = f" ({len(old)} code cells then, {len(new)} now)" if len(old) != len(new) else ""
    return f"code cell{'s' if len(changed) > 1 else ''} {shown}{size}"


def stale_reasons(provenance: Mapping[str, Any], repo_root: str | os.PathLike[str]) -> list[str]:
    """What changed in the source since a recorded run (empty: the run matches the source).

    Compares the source notebook's code cells, the package modules the chapter imports now
    and then (content, added, removed) and the chunkwise version. Markdown cells are not
    compared: prose does not change numbers. The current source is fingerprinted with the
    record's own method (``fingerprint``; ``"bytes-v1"`` when the record predates the key), so
    under ``"code-v2"`` an edit to comments or docstrings alone is not a reason.

    Raises
    ------
    PublishError
        If the record has no fingerprints (a run recorded before provenance existed).
    """
    from chunkwise import __version__

    if "code_cells" not in provenance or "modules" not in provenance:
        raise PublishError("the run record has no provenance fingerprints; rerun the chapter "
                           "with `chunkwise run-notebooks` to record them")
    root = Path(repo_root)
    reasons = []
    notebook = root / provenance["notebook"]
    if not notebook.is_file():
        return [f"{provenance['notebook']} no longer exists"]
    method = provenance.get("fingerprint", "bytes-v1")
    cells = _changed_cells(provenance["code_cells"], code_cell_hashes(notebook, method))
    if cells:
        reasons.append(f"{cells} of {provenance['notebook']} changed")
    src_root = root / "src"
    now = module_hashes(chapter_modules(notebook, src_root), src_root, method)
    then = dict(provenance["modules"])
    changed = sorted(k for k in then.keys() & now.keys() if then[k] != now[k])
    added, removed = sorted(now.keys() - then.keys()), sorted(then.keys() - now.keys())
    if changed:
        reasons.append("changed since: " + ", ".join(f"src/{c}" for c in changed))
    if added:
        reasons.append("now also imported: " + ", ".join(f"src/{c}" for c in added))
    if removed:
        reasons.append("no longer imported: " + ", ".join(f"src/{c}" for c in removed))
    if provenance.get("chunkwise_version") != __version__:
        reasons.append(f"chunkwise {provenance.get('chunkwise_version')} then, {__version__} now")
    return reasons


def _describe_machine(machine: Mapping[str, Any]) -> str:
    memory = f", {machine['memory_gib']:.0f} GiB" if machine.get("memory_gib") else ""
    return f"{machine.get('cores')} cores ({machine.get('cpu')}){memory}, {machine.get('os')}, Python {machine.get('python')}"


def provenance_markdown(record: Mapping[str, Any], reasons: Sequence[str] | None, published: bool) -> str:
    """The Markdown a page shows about its run: commit, profile, machine, and, when ``reasons``
    is non-empty, a warning that the run is older than the source, naming what changed.

    ``record`` is a run record (``parameters``, ``origin``, ``provenance``).
    """
    prov = record.get("provenance") or {}
    commit = prov.get("commit")
    short = f"`{commit[:10]}`" if commit else "an unknown commit (no git)"
    dirty = " with uncommitted changes" if prov.get("dirty") else ""
    params = record.get("parameters") or {}
    if params:
        origins = sorted(set((record.get("origin") or {}).values()))
        profile = f"parameters {', '.join(f'`{k}`' for k in params)} from {', '.join(origins)}"
    else:
        profile = "the chapter's default parameters"
    when = str(prov.get("recorded_utc", ""))[:10]
    which = "The published run of this page" if published else "This page's run"
    text = (f"{which}: commit {short}{dirty}, {when}, {profile}, on "
            f"{_describe_machine(prov.get('machine') or {})}.")
    if reasons:
        text += ("\n\n```{warning}\nThe published run is older than this source: "
                 + "; ".join(reasons)
                 + ". Its numbers are those of the commit above; `make book` reruns the chapter.\n```")
    return text


def _insert_provenance_cell(notebook: Path, markdown: str) -> None:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = [c for c in nb.get("cells", []) if PROVENANCE_TAG not in ((c.get("metadata") or {}).get("tags") or [])]
    cell = {"cell_type": "markdown", "id": "run-provenance", "metadata": {"tags": [PROVENANCE_TAG]},
            "source": markdown}
    # after the title cell, so the page keeps its heading first
    at = 1 if cells and cells[0].get("cell_type") == "markdown" else 0
    cells.insert(at, cell)
    nb["cells"] = cells
    tmp = notebook.with_name(f".{notebook.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(notebook)


def _read_record(results: Path, stem: str) -> dict[str, Any] | None:
    path = results / "runs" / f"{stem}.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PublishError(f"{path} is not valid JSON ({exc})") from None


def annotate_pages(generated: str | os.PathLike[str], repo_root: str | os.PathLike[str],
                   published: bool) -> dict[str, list[str]]:
    """Put the provenance cell on every executed chapter in ``generated`` that has a run record
    with provenance; return ``{chapter stem: stale reasons}`` (reasons are only computed for the
    published run: a fresh build runs the current source by construction)."""
    folder = Path(generated)
    stale: dict[str, list[str]] = {}
    for notebook in sorted(folder.glob("*.ipynb")):
        if notebook.name.startswith(".") or notebook.name.endswith(".failed.ipynb"):
            continue
        record = _read_record(folder / "results", notebook.stem)
        if not record or "provenance" not in record:
            continue
        reasons = stale_reasons(record["provenance"], repo_root) if published else []
        stale[notebook.stem] = reasons
        _insert_provenance_cell(notebook, provenance_markdown(record, reasons, published))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STALE_FILE).write_text(json.dumps(stale, indent=1) + "\n", encoding="utf-8")
    return stale


#: Where :func:`annotate_pages` leaves ``{chapter stem: stale reasons}`` for the pages built
#: after it (the intro's status table and the findings page mark a stale chapter's rows).
STALE_FILE = "stale.json"


def load_stale(generated: str | os.PathLike[str]) -> dict[str, list[str]]:
    """``{chapter stem: stale reasons}`` written by the last :func:`annotate_pages` into
    ``generated`` (empty dict when there is none: a build that staged nothing).

    Raises
    ------
    PublishError
        If the file exists but is not the JSON object :func:`annotate_pages` writes.
    """
    path = Path(generated) / STALE_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise PublishError(f"{path} is not valid JSON ({exc}); rebuild the book to rewrite it") from None
    if not isinstance(data, dict):
        raise PublishError(f"{path} holds no {{chapter: reasons}} object; rebuild the book to rewrite it")
    return {str(k): [str(r) for r in v] for k, v in data.items()}


def publish_run(run_dir: str | os.PathLike[str], book_dir: str | os.PathLike[str],
                chapters: Sequence[str], repo_root: str | os.PathLike[str]) -> list[Path]:
    """Copy a full default run into ``<book_dir>/published/`` (notebooks with outputs, their
    results files and run records), replacing what was there for those chapters.

    Parameters
    ----------
    run_dir : path
        A ``chunkwise run-notebooks --out`` folder.
    chapters : sequence of str
        Notebook stems to publish (each must be in ``run_dir`` with a run record).

    Raises
    ------
    PublishError
        A chapter is missing, has no run record with provenance, ran with parameters (the
        published run is the defaults), ran from uncommitted changes, or stores an error output.
    """
    run, dest = Path(run_dir), Path(book_dir) / PUBLISHED_DIR
    checked = []
    for stem in chapters:
        notebook = run / f"{stem}.ipynb"
        if not notebook.is_file():
            raise PublishError(f"{notebook} does not exist; run `chunkwise run-notebooks --only {stem} "
                               f"--out {run}` first")
        record = _read_record(run / "results", stem)
        if not record or "provenance" not in record:
            raise PublishError(f"{stem}: no run record with provenance in {run / 'results' / 'runs'}; "
                               "rerun it with this version of `chunkwise run-notebooks`")
        if record.get("parameters"):
            raise PublishError(f"{stem} ran with parameters {sorted(record['parameters'])}; the published "
                               "run is the chapters' defaults (run without --profile or -p)")
        if record["provenance"].get("dirty") or not record["provenance"].get("commit"):
            raise PublishError(f"{stem} ran from uncommitted changes (or outside git); commit, then rerun it")
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        if any(o.get("output_type") == "error" for c in nb.get("cells", []) for o in c.get("outputs", []) or []):
            raise PublishError(f"{notebook} stores an error output; fix the chapter and rerun it")
        checked.append(stem)
    (dest / "results" / "runs").mkdir(parents=True, exist_ok=True)
    written = []
    for stem in checked:
        for src, out in ((run / f"{stem}.ipynb", dest / f"{stem}.ipynb"),
                         (run / "results" / f"{stem}.json", dest / "results" / f"{stem}.json"),
                         (run / "results" / "runs" / f"{stem}.json", dest / "results" / "runs" / f"{stem}.json")):
            if src.is_file():
                shutil.copyfile(src, out)
                written.append(out)
    return written


def stage_published(book_dir: str | os.PathLike[str], repo_root: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Replace ``<book_dir>/generated/`` chapters and results by the committed published run and
    mark each page with its provenance (and a stale banner where the source changed since).

    Returns
    -------
    dict
        ``{chapter stem: stale reasons}`` (empty list: the run matches the current source).

    Raises
    ------
    PublishError
        If ``<book_dir>/published/`` holds no executed chapter.
    """
    book, src = Path(book_dir), Path(book_dir) / PUBLISHED_DIR
    notebooks = sorted(src.glob("*.ipynb"))
    if not notebooks:
        raise PublishError(f"{src} holds no published chapter; `chunkwise publish` copies a full run there")
    generated = book / "generated"
    if (generated / "results").is_dir():
        shutil.rmtree(generated / "results")
    for old in generated.glob("*.ipynb") if generated.is_dir() else []:
        old.unlink()
    (generated / "results").mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "results", generated / "results", dirs_exist_ok=True)
    for notebook in notebooks:
        shutil.copyfile(notebook, generated / notebook.name)
    return annotate_pages(generated, repo_root, published=True)


def staleness_summary(stale: Mapping[str, Sequence[str]]) -> str:
    """One line per chapter for ``make read``: current, or what changed since its published run."""
    lines = []
    for stem, reasons in stale.items():
        lines.append(f"  {stem}: " + ("matches the source" if not reasons else "OLDER THAN THE SOURCE: " + "; ".join(reasons)))
    return "\n".join(lines)



#: What differs between two runs of the same code without changing a number: durations and rates
#: ("12 s", "3.2 min", "1.01answer/s", "00:18"), memory addresses, pandas Styler ids and timestamps.
_VOLATILE = re.compile(
    r"\d+(\.\d+)? ?s/\w+"
    r"|\d+(\.\d+)?\s*(answers?|it|texts?|calls?)/s"
    r"|\d[\d,]*(\.\d+)? ?(s|ms|min|h|seconds?|minutes?|hours?)\b"
    r"|\d+:\d\d(:\d\d)?"
    r"|0x[0-9a-f]+"
    r"|T_[0-9a-f]{5}"
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?"
)


@dataclass
class ChapterComparison:
    """How one chapter's executed run ``b`` differs from run ``a`` (see :func:`compare_runs`).

    Attributes
    ----------
    stem : str
        The notebook's stem, e.g. ``"02_chroma_recall"``.
    cells : int
        Cells in ``a``'s notebook.
    differing_cells : list of int
        0-based indices of the cells whose outputs differ once volatile text is masked.
    diffs : list of str
        A short unified diff per differing output (at most ``context_lines`` changed lines each).
    differing_values : list of (str, object, object)
        ``(key, value in a, value in b)`` for each key of the chapter's results file
        (the ``results`` mapping of ``results/<stem>.json``) whose value differs or exists on one side only.
    problem : str or None
        Why the chapter could not be compared cell by cell (a missing notebook, a different
        number of cells), else ``None``.
    answer_changed : bool or None
        Whether the chapter's answer box (the glued ``*_answer`` Markdown) reads differently in
        ``b`` (numbers within ``rtol`` count as equal); None when either run records no answer.
    """

    stem: str
    cells: int = 0
    differing_cells: list[int] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)
    differing_values: list[tuple[str, Any, Any]] = field(default_factory=list)
    problem: str | None = None
    answer_changed: bool | None = None

    @property
    def same(self) -> bool:
        """True when nothing differs and the chapter could be compared."""
        return self.problem is None and not self.differing_cells and not self.differing_values

    def summary(self) -> str:
        """One line: the chapter, its cells, and how many cells and results values differ."""
        answer = {True: "; answer box changed", False: "; answer box unchanged", None: ""}[self.answer_changed]
        if self.problem:
            return (f"{self.stem}: cells not compared ({self.problem}); "
                    f"{len(self.differing_values)} differing results values{answer}")
        return (f"{self.stem}: {self.cells} cells, {len(self.differing_cells)} with differing outputs, "
                f"{len(self.differing_values)} differing results values{answer}")


def _masked_outputs(cell: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for o in cell.get("outputs", []) or []:
        if "text" in o:
            text = o["text"]
            out.append((o.get("name", "text"), "".join(text) if isinstance(text, list) else str(text)))
        for mime, value in (o.get("data") or {}).items():
            if mime.startswith("image/"):
                continue  # rendered pictures: their bytes carry renderer metadata; the numbers drawn are in the results
            out.append((mime, "".join(value) if isinstance(value, list) else json.dumps(value, sort_keys=True)))
    return [(kind, _VOLATILE.sub("<T>", text)) for kind, text in out]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise PublishError(f"{path} is not valid JSON ({exc}); is it an executed notebook or results file?") from exc


def _results_values(doc: Any) -> dict[str, Any]:
    """The published values of a results file: its ``results`` mapping (``written_utc`` left out)."""
    if isinstance(doc, dict) and isinstance(doc.get("results"), dict):
        return doc["results"]
    return {k: v for k, v in doc.items() if k != "written_utc"} if isinstance(doc, dict) else {"(file)": doc}


def _close(x: Any, y: Any, rtol: float | None) -> bool:
    """Equal, or (with ``rtol``) numbers within ``rtol`` of each other, walking lists and mappings alike."""
    if x == y:
        return True
    if rtol is None:
        return False
    if isinstance(x, bool) or isinstance(y, bool):
        return False
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        if x != x or y != y:  # nan equals only nan
            return x != x and y != y
        return math.isclose(x, y, rel_tol=rtol, abs_tol=1e-12)
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_close(u, v, rtol) for u, v in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_close(x[k], y[k], rtol) for k in x)
    return False


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _texts_close(x: str, y: str, rtol: float | None) -> bool:
    """Two printed outputs that differ only in numbers within ``rtol`` (the words must be the same)."""
    if x == y:
        return True
    if rtol is None or _NUMBER.split(x) != _NUMBER.split(y):
        return False
    nx, ny = _NUMBER.findall(x), _NUMBER.findall(y)
    try:
        return all(math.isclose(float(u.replace(",", "")), float(v.replace(",", "")), rel_tol=rtol, abs_tol=1e-12)
                   for u, v in zip(nx, ny))
    except ValueError:
        return False


#: How :func:`compare_runs` writes the side of a results key that one run lacks.
_ABSENT = "(absent)"


def _answer_text(cells: Sequence[Mapping[str, Any]]) -> str | None:
    """The glued ``*_answer`` Markdown of an executed chapter (papermill's scrapbook record)."""
    for cell in cells:
        for out in cell.get("outputs", []) or []:
            name = ((out.get("metadata") or {}).get("scrapbook") or {}).get("name", "")
            text = (out.get("data") or {}).get("application/papermill.record/text/markdown")
            if text is not None and str(name).endswith("_answer"):
                return "".join(text) if isinstance(text, list) else str(text)
    return None


def value_change(x: Any, y: Any) -> str:
    """How a results value moved, in words: ``"number, by 0.3"``, ``"numbers, largest move 0.12"``,
    ``"added"`` / ``"removed"`` (the key exists in one run only: :func:`compare_runs` writes the
    other side as ``"(absent)"``) or ``"text"`` (a verdict, a sentence, a label: anything not
    numeric), for cross-machine reports."""
    if isinstance(x, str) and x == _ABSENT:
        return "added"
    if isinstance(y, str) and y == _ABSENT:
        return "removed"
    def numbers(v: Any) -> list[float] | None:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return None
        if isinstance(v, (int, float)):
            return [float(v)]
        if isinstance(v, list):
            out: list[float] = []
            for u in v:
                n = numbers(u)
                if n is None:
                    return None
                out.extend(n)
            return out
        if isinstance(v, dict):
            return numbers(list(v.values())) if all(isinstance(k, str) for k in v) else None
        return None

    nx, ny = numbers(x), numbers(y)
    if nx is None or ny is None or len(nx) != len(ny) or (isinstance(x, dict) and isinstance(y, dict)
                                                           and x.keys() != y.keys()):
        return "text"
    moves = [abs(u - v) for u, v in zip(nx, ny) if not (u != u and v != v)]
    largest = max(moves) if moves else 0.0
    return f"number, by {largest:.3g}" if len(nx) == 1 else f"numbers, largest move {largest:.3g}"


def _stems(a: Path, b: Path, chapters: Sequence[str] | None) -> list[str]:
    """The chapters to compare: ``chapters``, else every notebook of ``a``; refuses a missing folder."""
    for folder in (a, b):
        if not folder.is_dir():
            raise PublishError(f"{folder} is not a folder; pass two `chunkwise run-notebooks --out` folders")
    stems = list(chapters) if chapters else sorted(p.stem for p in a.glob("*.ipynb"))
    if not stems:
        raise PublishError(f"{a} holds no executed notebook (*.ipynb)")
    return stems


def compare_runs(a: str | os.PathLike[str], b: str | os.PathLike[str], chapters: Sequence[str] | None = None,
                 context_lines: int = 12, rtol: float | None = None) -> list[ChapterComparison]:
    """Compare two executed runs of the book cell by cell, with volatile text masked.

    Two runs of unchanged code on the same inputs must agree everywhere except in durations,
    rates, timestamps and memory addresses, which are masked (``<T>``) before comparing. Use it
    to show that a change (a backend, a device, a refactor) moved no published number: compare a
    run made before with one made after, e.g. ``book/published`` with a new ``--out`` folder.
    Pictures (``image/*`` outputs) are not compared byte for byte; the values they draw are in the
    chapter's results file, which is compared key by key (exact equality after a JSON round trip).

    Parameters
    ----------
    a, b : path
        Folders as written by ``chunkwise run-notebooks --out`` (or ``book/published``): executed
        ``<stem>.ipynb`` files and ``results/<stem>.json``.
    chapters : sequence of str, optional
        Stems to compare. Default: every notebook in ``a``.
    context_lines : int, default 12
        Changed lines kept per differing output in :attr:`ChapterComparison.diffs`.
    rtol : float, optional
        A relative tolerance for numbers (default: none, exact equality). Results values (numbers
        inside lists and mappings too) within ``rtol`` count as the same, and so do printed outputs
        whose words are identical and whose numbers are within ``rtol``. Use it to show that a
        change of float arithmetic (a backend, a CPU) moved no value, e.g. ``rtol=1e-6``.

    Returns
    -------
    list of ChapterComparison
        One per chapter, in the order of ``chapters`` (or sorted).

    Raises
    ------
    PublishError
        If ``a`` or ``b`` is not a folder, ``a`` holds no notebook, or a file is not valid JSON.

    See Also
    --------
    chunkwise.crossmachine.compare_runs_cross_machine : for a run made on another CPU: each moved value
        with its size, and whether any verdict or answer-box sentence changed its words.
    """
    a, b = Path(a), Path(b)
    stems = _stems(a, b, chapters)
    report = []
    for stem in stems:
        cmp = ChapterComparison(stem)
        report.append(cmp)
        na, nb = a / f"{stem}.ipynb", b / f"{stem}.ipynb"
        missing = [str(p) for p in (na, nb) if not p.is_file()]
        if missing:
            cmp.problem = "missing " + ", ".join(missing)
            continue
        cells_a, cells_b = _read_json(na).get("cells", []), _read_json(nb).get("cells", [])
        cmp.cells = len(cells_a)
        answers = _answer_text(cells_a), _answer_text(cells_b)
        if None not in answers:
            cmp.answer_changed = not _texts_close(answers[0], answers[1], rtol)
        if len(cells_a) != len(cells_b):
            # the cells cannot be paired, but the results files still can
            cmp.problem = f"{len(cells_a)} cells against {len(cells_b)}: the source notebooks differ"
            cells_a = cells_b = []
        for i, (ca, cb) in enumerate(zip(cells_a, cells_b)):
            oa, ob = _masked_outputs(ca), _masked_outputs(cb)
            if oa == ob or (len(oa) == len(ob) and all(
                    ka == kb and _texts_close(x, y, rtol) for (ka, x), (kb, y) in zip(oa, ob))):
                continue
            cmp.differing_cells.append(i)
            pairs = list(zip(oa, ob)) or [(("", ""), ("", ""))]
            if len(oa) != len(ob):
                cmp.diffs.append(f"cell {i}: {len(oa)} outputs against {len(ob)}")
            for (kind, x), (_, y) in pairs:
                if x != y:
                    lines = list(difflib.unified_diff(x.splitlines(), y.splitlines(), lineterm="", n=0))[2:]
                    cmp.diffs.append(f"cell {i} ({kind}):\n" + "\n".join(lines[:context_lines]))
        ra, rb = a / "results" / f"{stem}.json", b / "results" / f"{stem}.json"
        va, vb = (_results_values(_read_json(r)) if r.is_file() else {} for r in (ra, rb))
        for key in sorted(set(va) | set(vb)):
            if key not in va or key not in vb or not _close(va[key], vb[key], rtol):
                cmp.differing_values.append((key, va.get(key, _ABSENT), vb.get(key, _ABSENT)))
    return report
