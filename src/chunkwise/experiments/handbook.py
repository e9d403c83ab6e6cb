"""The handbook boundary experiment: which semantic-chunking settings find real topic shifts.

Setup (after the source article; see ``data/handbook/README.md``): an 18-sentence handbook
excerpt with three six-sentence topics and an 18-sentence single-topic control, chunked by
:class:`~chunkwise.chunkers.SemanticChunker` under a grid of settings, every result scored
against the gold boundaries with :func:`~chunkwise.evaluation.boundary_scores`.

Functions here turn the package's pieces into the chapter's tables and figures; the
algorithms themselves live in :mod:`chunkwise.chunkers` and :mod:`chunkwise.evaluation`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from chunkwise.chunk import Chunk
from chunkwise.chunkers.fixed import FixedTokenChunker
from chunkwise.chunkers.semantic import (
    BREAKPOINT_DEFAULTS,
    MemoEmbedder,
    SemanticAnalysis,
    find_breakpoints,
    semantic_sweep,
)
from chunkwise.evaluation.boundaries import boundaries_from_chunks, boundary_scores
from chunkwise.text import split_sentences


def project_root() -> Path:
    """The repository root (the folder holding ``pyproject.toml`` above this file)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists() and (parent / "data").is_dir():
            return parent
    raise FileNotFoundError(
        "Could not find the chunkwise repository root above the installed package; "
        "pass data_dir explicitly."
    )


@dataclass(frozen=True)
class HandbookText:
    """One text of the experiment with its reference sentences and gold boundaries.

    Attributes
    ----------
    name : str
    text : str
    sentences : list of Chunk
        Reference sentences (``split_sentences(text, mode="robust")``).
    gold : list of int
        Gold boundaries over the reference sentences (``i`` = split after sentence ``i``).
    topics : list of str
    """

    name: str
    text: str
    sentences: list[Chunk]
    gold: list[int]
    topics: list[str]

    @property
    def n_sentences(self) -> int:
        return len(self.sentences)


def _read_input(path: Path, parameter: str) -> str:
    """Read a UTF-8 text file given as ``parameter``; one clear line when it cannot be used."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{parameter} {str(path)!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); pass a plain-text file saved as UTF-8"
        ) from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{parameter} {str(path)!r} is a folder; pass a file") from None
    except FileNotFoundError:
        pass
    where = Path.cwd()
    hint = "pass an absolute path or one relative to that folder"
    if not path.is_absolute():
        try:
            root = project_root()
        except FileNotFoundError:
            root = None
        if root is not None and (root / path).is_file() and where.resolve() != root.resolve():
            hint = f"from the repository root it is {os.path.relpath(root / path, where)!r}: pass that or an absolute path"
    raise FileNotFoundError(
        f"{parameter} {str(path)!r} not found; relative paths resolve from the working directory "
        f"{where} (run-notebooks and Jupyter run a chapter in notebooks/): {hint}"
    )


def load_handbook(
    handbook_path: str | Path | None = None,
    control_path: str | Path | None = None,
    gold_path: str | Path | None = None,
) -> dict[str, HandbookText]:
    """Load the handbook and control texts with their gold boundaries.

    Parameters
    ----------
    handbook_path, control_path, gold_path : path, optional
        Default to ``data/handbook/{handbook.txt, control.txt, gold.json}`` in the repository.

    Returns
    -------
    dict
        ``{"handbook": HandbookText, "control": HandbookText}``.

    Raises
    ------
    FileNotFoundError
        If a file is missing (the message names the parameter, the folder relative paths
        resolve from, and the right relative path when the file exists from the repository root).
    ValueError
        If a file is not UTF-8 text (or the gold file not JSON), or the gold file's sentence count disagrees with the robust split of the text
        (the gold boundaries would then point at the wrong sentences).
    """
    base = None
    if handbook_path is None or control_path is None or gold_path is None:
        base = project_root() / "data" / "handbook"
    paths = {
        "handbook": Path(handbook_path) if handbook_path else base / "handbook.txt",  # type: ignore[operator]
        "control": Path(control_path) if control_path else base / "control.txt",  # type: ignore[operator]
    }
    gpath = Path(gold_path) if gold_path else base / "gold.json"  # type: ignore[operator]
    try:
        gold = json.loads(_read_input(gpath, "gold_path"))
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"gold_path {str(gpath)!r}: not JSON (line {exc.lineno}: {exc.msg}); pass the gold file "
            f"data/handbook/gold.json or one of the same form"
        ) from None
    out: dict[str, HandbookText] = {}
    for name, path in paths.items():
        text = _read_input(path, f"{name}_path")
        sents = split_sentences(text, mode="robust")
        g = gold[name]
        if g["n_sentences"] != len(sents):
            raise ValueError(
                f"{gpath} says {name} has {g['n_sentences']} sentences but the robust splitter finds "
                f"{len(sents)} in {path}; update the gold file after editing the text."
            )
        out[name] = HandbookText(name, text, sents, list(g["boundaries"]), list(g["topics"]))
    return out


def threshold_grid(
    percentiles: Iterable[float] = (80, 90, 95),
    standard_deviations: Iterable[float] = (1.0, 1.5, 2.0, 3.0),
    interquartiles: Iterable[float] = (0.5, 1.0, 1.5),
    gradients: Iterable[float] = (80, 90, 95),
) -> list[tuple[str, float]]:
    """The ``(breakpoint_threshold_type, breakpoint_threshold_amount)`` pairs of a sweep."""
    return (
        [("percentile", float(a)) for a in percentiles]
        + [("standard_deviation", float(a)) for a in standard_deviations]
        + [("interquartile", float(a)) for a in interquartiles]
        + [("gradient", float(a)) for a in gradients]
    )


def sweep_settings(
    buffer_sizes: Sequence[int],
    thresholds: Sequence[tuple[str, float]],
    min_chunk_sizes: Sequence[int | None] = (None,),
    sentence_split_regex: str | None = r"(?<=[.?!])\s+",
    max_chunk_tokens: int | None = None,
) -> list[dict[str, Any]]:
    """All combinations as keyword dicts for :class:`SemanticChunker`.

    Raises
    ------
    ValueError
        If a list is empty (there would be nothing to run).
    """
    for name, values in (("buffer_sizes", buffer_sizes), ("thresholds", thresholds), ("min_chunk_sizes", min_chunk_sizes)):
        if len(values) == 0:
            raise ValueError(f"{name} is empty; give at least one value (e.g. buffer_sizes=[0, 1]).")
    return [
        {
            "buffer_size": b,
            "breakpoint_threshold_type": t,
            "breakpoint_threshold_amount": a,
            "min_chunk_size": m,
            "sentence_split_regex": sentence_split_regex,
            "max_chunk_tokens": max_chunk_tokens,
        }
        for b in buffer_sizes
        for t, a in thresholds
        for m in min_chunk_sizes
    ]


def score_chunks(chunks: Sequence[Chunk], text: HandbookText) -> dict[str, Any]:
    """Score chunks against a text's gold boundaries (cuts mapped onto its reference sentences).

    Returns
    -------
    dict
        ``chunks``, ``shifts_found`` ("k of n"), ``extra_splits``, ``mid_sentence_cuts``,
        ``precision``, ``recall``, ``f1``, ``pk``, ``windowdiff``, ``boundaries``.
    """
    bounds, mid = boundaries_from_chunks([c.span for c in chunks], [s.span for s in text.sentences])
    sc = boundary_scores(bounds, text.gold, text.n_sentences)
    return {
        "chunks": len(chunks),
        "shifts_found": f"{sc.shifts_found} of {sc.n_gold}",
        "extra_splits": sc.extra_splits,
        "mid_sentence_cuts": mid,
        "precision": sc.precision,
        "recall": sc.recall,
        "f1": sc.f1,
        "pk": sc.pk,
        "windowdiff": sc.windowdiff,
        "boundaries": bounds,
    }


def run_sweep(
    texts: dict[str, HandbookText],
    embedder: Any,
    settings: Sequence[dict[str, Any]],
) -> tuple[pd.DataFrame, dict[tuple[str, int], SemanticAnalysis], MemoEmbedder]:
    """Chunk every text under every setting and score it.

    Parameters
    ----------
    texts : dict of HandbookText
    embedder : Embedder
        Wrapped in one :class:`MemoEmbedder` shared by all texts and settings, so each
        distinct sentence window is embedded once.
    settings : list of dict
        From :func:`sweep_settings`.

    Returns
    -------
    table : pandas.DataFrame
        One row per (text, setting): the settings, then the columns of :func:`score_chunks`.
    analyses : dict
        ``(text name, setting index) -> SemanticAnalysis`` for plots.
    memo : MemoEmbedder
        Its ``n_embedded`` is the number of texts the model embedded for the whole sweep.
    """
    memo = MemoEmbedder(embedder)
    rows = []
    analyses: dict[tuple[str, int], SemanticAnalysis] = {}
    for name, text in texts.items():
        for i, (s, analysis) in enumerate(semantic_sweep(text.text, memo, settings)):
            analyses[(name, i)] = analysis
            rows.append(
                {
                    "text": name,
                    "buffer_size": s["buffer_size"],
                    "threshold": s["breakpoint_threshold_type"],
                    "amount": s["breakpoint_threshold_amount"],
                    "min_chunk_size": s.get("min_chunk_size"),
                    "sentences_seen": len(analysis.sentences),
                    **score_chunks(analysis.chunks, text),
                }
            )
    return pd.DataFrame(rows), analyses, memo


def fixed_window_cuts(text: str, chunk_size: int = 60, encoding_name: str = "cl100k_base") -> pd.DataFrame:
    """Where fixed token windows cut the text, and whether each cut falls inside a sentence.

    Returns
    -------
    pandas.DataFrame
        One row per cut: ``chunk`` (index of the chunk the cut ends), ``char``, ``before``
        (last 30 characters), ``after`` (next 30), ``inside_sentence`` (bool).
    """
    chunks = FixedTokenChunker(chunk_size, 0, encoding_name=encoding_name).split(text)
    sents = split_sentences(text, mode="robust")
    rows = []
    for i, c in enumerate(chunks[:-1]):
        cut = c.end
        inside = any(s.start < cut < s.end for s in sents)
        rows.append(
            {
                "chunk": i,
                "char": cut,
                "before": text[max(0, cut - 30) : cut],
                "after": text[cut : cut + 30],
                "inside_sentence": inside,
            }
        )
    return pd.DataFrame(rows)


def percentile_break_table(
    gap_counts: Sequence[int] = (17, 18, 100),
    percentiles: Sequence[float] = (80, 90, 95),
    trials: int = 200,
    seed: int = 0,
) -> pd.DataFrame:
    """Breaks produced by percentile thresholds on random distances, against the rank formula.

    For ``m`` distinct distances, ``np.percentile(d, p)`` interpolates at rank
    ``r = p/100 * (m - 1)`` and exactly ``m - 1 - floor(r)`` distances lie strictly above it,
    whatever the values: the number of chunks is fixed by ``m`` and ``p`` alone.

    Returns
    -------
    pandas.DataFrame
        Columns ``gaps``, ``percentile``, ``predicted_breaks`` (formula), ``min_breaks``,
        ``max_breaks`` (over ``trials`` random distance vectors), ``chunks``.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for m in gap_counts:
        for p in percentiles:
            counts = [len(find_breakpoints(rng.random(m), "percentile", p)) for _ in range(trials)]
            predicted = m - 1 - int(np.floor(p / 100 * (m - 1)))
            rows.append(
                {
                    "gaps": m,
                    "percentile": p,
                    "predicted_breaks": predicted,
                    "min_breaks": min(counts),
                    "max_breaks": max(counts),
                    "chunks": predicted + 1,
                }
            )
    return pd.DataFrame(rows)


ARTICLE_RESULTS_COLUMNS = (
    "id", "source", "settings_published", "label", "text", "buffer_size", "percentile",
    "chunks", "shifts_found", "extra_splits", "note",
)
ARTICLE_SETTINGS_COLUMNS = ("id", "text", "buffer_size", "threshold", "amount", "min_chunk_size", "basis")
SWEEP_COLUMNS = ("text", "buffer_size", "threshold", "amount", "min_chunk_size", "chunks", "shifts_found", "extra_splits")


def _read_table(path: str | Path | None, default_name: str, columns: Sequence[str], what: str) -> pd.DataFrame:
    p = Path(path) if path else project_root() / "data" / "handbook" / default_name
    if not p.is_file():
        raise FileNotFoundError(f"{what} file {p} does not exist; pass the path of {default_name}.")
    df = pd.read_csv(p, dtype={"id": str, "text": str})
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{p} lacks column(s) {', '.join(missing)}; expected {', '.join(columns)}.")
    if df["id"].duplicated().any():
        dup = sorted(set(df.loc[df["id"].duplicated(), "id"]))
        raise ValueError(f"{p} has duplicate id(s) {', '.join(dup)}; every row needs its own id.")
    return df


def load_article_results(path: str | Path | None = None) -> pd.DataFrame:
    """The source article's reported handbook results: facts only, no inference.

    Reads ``data/handbook/article_results.csv``: the five rows of the article's results table
    (``id`` ``table-1`` ... ``table-5``, in the published order) and the "tuned" run its prose
    describes (``prose-tuned``). ``settings_published`` is the settings cell as it survived
    (empty where it was lost), ``label`` says whether it was published, lost, or named only in
    the prose, and ``buffer_size`` / ``percentile`` hold values only where the article states
    them. ``chunks`` and ``shifts_found`` ("k of n") are the reported outcome;
    ``extra_splits`` is ``chunks - 1`` minus the shifts found (an arithmetic consequence).
    Our own choices for matching these rows to the sweep live in a separate file
    (:func:`load_article_settings`).

    Returns
    -------
    pandas.DataFrame
        One row per reported result, columns :data:`ARTICLE_RESULTS_COLUMNS`.

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ValueError
        If a column is missing or an ``id`` repeats.
    """
    return _read_table(path, "article_results.csv", ARTICLE_RESULTS_COLUMNS, "article results")


def load_article_settings(path: str | Path | None = None) -> pd.DataFrame:
    """Our settings for each article row (inference, kept apart from the article's facts).

    Reads ``data/handbook/article_settings_ours.csv``: for each ``id`` of
    :func:`load_article_results`, the setting of our sweep that we compare it with
    (``buffer_size``, ``threshold``, ``amount``, ``min_chunk_size`` in characters) and the
    ``basis`` of that choice. Rows whose article label is lost have no setting (empty cells):
    they are compared by outcome only (:func:`settings_with_outcome`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ARTICLE_SETTINGS_COLUMNS`.

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ValueError
        If a column is missing or an ``id`` repeats.
    """
    return _read_table(path, "article_settings_ours.csv", ARTICLE_SETTINGS_COLUMNS, "article settings")


def _check_sweep_table(table: pd.DataFrame) -> None:
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"table must be the pandas DataFrame returned by run_sweep, got {type(table).__name__}.")
    missing = [c for c in SWEEP_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(
            f"table lacks column(s) {', '.join(missing)}; pass the table returned by run_sweep."
        )


def _parse_shifts(value: str) -> tuple[int, int]:
    """``"k of n"`` -> ``(k, n)``; one clear error line otherwise."""
    parts = str(value).split(" of ")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"shifts_found must read 'k of n' (e.g. '1 of 2'), got {value!r}.")
    return int(parts[0]), int(parts[1])


def describe_setting(buffer_size: Any, threshold: Any, amount: Any, min_chunk_size: Any = None) -> str:
    """One setting in words, e.g. ``"buffer 1, percentile 95"`` or ``"..., min 150 chars"``."""
    rule = {"standard_deviation": "std", "interquartile": "iqr"}.get(str(threshold), str(threshold))
    text = f"buffer {int(buffer_size)}, {rule} {float(amount):g}"
    if min_chunk_size is not None and not pd.isna(min_chunk_size):
        text += f", min {int(min_chunk_size)} chars"
    return text


def settings_with_outcome(table: pd.DataFrame, text: str, chunks: int, shifts_found: str) -> pd.DataFrame:
    """Every setting of a sweep that gives one outcome on one text.

    Used for the article rows whose settings label was lost: instead of guessing a label,
    list all settings that reproduce the reported outcome on our text.

    Parameters
    ----------
    table : pandas.DataFrame
        The sweep table of :func:`run_sweep`.
    text : str
        ``"handbook"`` or ``"control"`` (a value of ``table["text"]``).
    chunks : int
        Number of chunks of the outcome.
    shifts_found : str
        ``"k of n"``, as in the article and in ``table["shifts_found"]``.

    Returns
    -------
    pandas.DataFrame
        The matching rows' ``buffer_size``, ``threshold``, ``amount``, ``min_chunk_size``
        (characters; NaN = none), ``chunks``, ``shifts_found``, ``extra_splits``, in the sweep's
        order with a fresh index; empty if no setting gives the outcome.

    Raises
    ------
    ValueError
        If ``table`` is not a sweep table, ``text`` is not in it, ``chunks`` is not a positive
        int or ``shifts_found`` does not read ``"k of n"``.
    """
    _check_sweep_table(table)
    texts = sorted(set(table["text"]))
    if text not in texts:
        raise ValueError(f"text {text!r} is not in the sweep table; choose one of {', '.join(map(repr, texts))}.")
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
        raise ValueError(f"chunks must be an int >= 1, got {chunks!r}.")
    _parse_shifts(shifts_found)
    sel = table[(table["text"] == text) & (table["chunks"] == int(chunks)) & (table["shifts_found"] == shifts_found)]
    cols = ["buffer_size", "threshold", "amount", "min_chunk_size", "chunks", "shifts_found", "extra_splits"]
    return sel[cols].reset_index(drop=True)


def summarize_settings(rows: pd.DataFrame) -> pd.DataFrame:
    """Fold a list of settings into one line per threshold rule, amount and minimum size.

    Parameters
    ----------
    rows : pandas.DataFrame
        Columns ``buffer_size``, ``threshold``, ``amount``, ``min_chunk_size`` (e.g. from
        :func:`settings_with_outcome`).

    Returns
    -------
    pandas.DataFrame
        Columns ``rule``, ``amount``, ``min_chunk_size`` (characters, ``"none"`` when unset) and
        ``buffer_sizes`` (the buffer sizes with that rule and amount, e.g. ``"0, 2"``), sorted by
        rule, amount and minimum size; empty (same columns) for no rows.

    Raises
    ------
    ValueError
        If a column is missing.
    """
    need = ["buffer_size", "threshold", "amount", "min_chunk_size"]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise ValueError(f"rows lack column(s) {', '.join(missing)}; pass the output of settings_with_outcome.")
    out_cols = ["rule", "amount", "min_chunk_size", "buffer_sizes"]
    if rows.empty:
        return pd.DataFrame(columns=out_cols)
    df = rows[need].copy()
    df["min_key"] = df["min_chunk_size"].fillna(-1).astype(int)
    groups = []
    for (rule, amount, mk), g in df.groupby(["threshold", "amount", "min_key"], sort=True):
        groups.append(
            {
                "rule": rule,
                "amount": float(amount),
                "min_chunk_size": "none" if mk < 0 else str(mk),
                "buffer_sizes": ", ".join(str(int(b)) for b in sorted(set(g["buffer_size"]))),
            }
        )
    return pd.DataFrame(groups, columns=out_cols)


def _ours_for(table: pd.DataFrame, s: pd.Series) -> pd.Series | None:
    """The sweep row of one of our settings (a row of :func:`load_article_settings`), or None."""
    if pd.isna(s["buffer_size"]) or pd.isna(s["threshold"]) or pd.isna(s["amount"]):
        return None
    sel = table[
        (table["text"] == s["text"])
        & (table["buffer_size"] == int(s["buffer_size"]))
        & (table["threshold"] == s["threshold"])
        & (table["amount"] == float(s["amount"]))
        & (
            table["min_chunk_size"].isna()
            if pd.isna(s["min_chunk_size"])
            else table["min_chunk_size"] == float(s["min_chunk_size"])
        )
    ]
    return sel.iloc[0] if len(sel) else None


def _stated_settings(a: pd.Series) -> str | None:
    """The settings an article row states (table or prose), e.g. ``"buffer_size=0, percentile 80"``."""
    parts = []
    if not pd.isna(a["buffer_size"]):
        parts.append(f"buffer_size={int(a['buffer_size'])}")
    if not pd.isna(a["percentile"]):
        parts.append(f"percentile {float(a['percentile']):g}")
    return ", ".join(parts) or None


def article_comparison(
    table: pd.DataFrame, article: pd.DataFrame, settings: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Put every result the article reports beside ours.

    Parameters
    ----------
    table : pandas.DataFrame
        The sweep table of :func:`run_sweep`.
    article : pandas.DataFrame
        :func:`load_article_results` (facts).
    settings : pandas.DataFrame, optional
        :func:`load_article_settings` (our matching); read from the repository when omitted.

    Returns
    -------
    pandas.DataFrame
        One row per article result, in the article's order: ``id``, ``source``,
        ``settings_published``, ``label``, ``stated_settings`` (what the article states, table or
        prose, e.g. ``"buffer_size=0, percentile 80"``; missing if nothing), ``text``, ``article_chunks``,
        ``article_shifts_found``, ``article_extra_splits``; then ours: ``our_setting``
        (:func:`describe_setting`; missing where the article's label is lost and we chose none),
        ``ours_chunks``, ``ours_shifts_found``, ``ours_extra_splits``, ``delta_chunks`` (ours
        minus the article's; None without a setting or when the sweep did not run it), and
        ``n_with_outcome`` / ``n_settings``: how many settings of the sweep on that text give the
        article's outcome (same chunks and shifts found), out of how many.

    Raises
    ------
    ValueError
        If ``table`` is not a sweep table, or an article ``id`` has no row in ``settings``.
    """
    _check_sweep_table(table)
    if settings is None:
        settings = load_article_settings()
    by_id = settings.set_index("id")
    missing = [i for i in article["id"] if i not in by_id.index]
    if missing:
        raise ValueError(
            f"article row(s) {', '.join(missing)} have no row in the settings table; add them to "
            "article_settings_ours.csv (with empty settings if none is chosen)."
        )
    rows = []
    for _, a in article.iterrows():
        s = by_id.loc[a["id"]].copy()
        s["text"] = a["text"]
        ours = _ours_for(table, s)
        has_setting = not pd.isna(s["buffer_size"])
        on_text = table[table["text"] == a["text"]]
        n_with = len(settings_with_outcome(table, a["text"], int(a["chunks"]), a["shifts_found"])) if len(on_text) else 0
        rows.append(
            {
                "id": a["id"],
                "source": a["source"],
                "settings_published": None if pd.isna(a["settings_published"]) else a["settings_published"],
                "label": a["label"],
                "stated_settings": _stated_settings(a),
                "text": a["text"],
                "article_chunks": int(a["chunks"]),
                "article_shifts_found": a["shifts_found"],
                "article_extra_splits": int(a["extra_splits"]),
                "our_setting": describe_setting(s["buffer_size"], s["threshold"], s["amount"], s["min_chunk_size"])
                if has_setting
                else None,
                "ours_chunks": int(ours["chunks"]) if ours is not None else None,
                "ours_shifts_found": ours["shifts_found"] if ours is not None else None,
                "ours_extra_splits": int(ours["extra_splits"]) if ours is not None else None,
                "delta_chunks": int(ours["chunks"]) - int(a["chunks"]) if ours is not None else None,
                "n_with_outcome": n_with,
                "n_settings": len(on_text),
            }
        )
    return pd.DataFrame(rows)


def _row_name(row_id: str) -> str:
    if row_id.startswith("table-"):
        return f"row {row_id.split('-', 1)[1]}"
    if row_id == "prose-tuned":
        return "tuned (prose)"
    return row_id


def article_metric_table(comparison: pd.DataFrame, metric: str = "chunks") -> pd.DataFrame:
    """One metric of :func:`article_comparison` as a narrow table: published, ours, delta.

    Parameters
    ----------
    comparison : pandas.DataFrame
        The output of :func:`article_comparison`.
    metric : {"chunks", "shifts_found", "extra_splits"}
        The metric to show.

    Returns
    -------
    pandas.DataFrame
        Columns ``row`` ("row 1" ... "row 5" for the article's results table, "tuned (prose)"),
        ``settings (article)`` (the surviving label; "(label lost)" where it did not survive, with
        the settings the prose gives for that outcome if it gives any),
        ``our setting`` (for a lost label: how many of our settings give the article's
        outcome instead of one chosen setting), ``published``, ``ours`` and ``delta`` (ours
        minus published; for ``shifts_found`` the difference in shifts found). Cells without a
        value of ours hold ``"-"``.

    Raises
    ------
    ValueError
        If ``metric`` is not one of the three.
    """
    metrics = ("chunks", "shifts_found", "extra_splits")
    if metric not in metrics:
        raise ValueError(f"metric must be one of {', '.join(metrics)}, got {metric!r}.")
    rows = []
    for _, r in comparison.iterrows():
        published, ours = r[f"article_{metric}"], r[f"ours_{metric}"]
        has_ours = ours is not None and not pd.isna(ours)
        if metric == "shifts_found":
            delta = _parse_shifts(ours)[0] - _parse_shifts(published)[0] if has_ours else None
        else:
            published = int(published)
            ours = int(ours) if has_ours else None
            delta = ours - published if has_ours else None
        if r["our_setting"] is not None and not pd.isna(r["our_setting"]):
            setting = r["our_setting"]
        else:
            setting = f"none chosen; {int(r['n_with_outcome'])} of {int(r['n_settings'])} give this outcome"
        label = r["settings_published"]
        if label is None or pd.isna(label):
            stated = r.get("stated_settings")
            label = "(label lost)" if stated is None or pd.isna(stated) else f"(label lost; prose: {stated})"
        rows.append(
            {
                "row": _row_name(r["id"]),
                "settings (article)": label,
                "our setting": setting,
                "published": published,
                "ours": ours if has_ours else "-",
                "delta": f"{delta:+d}" if delta is not None else "-",
            }
        )
    return pd.DataFrame(rows)


def setting_kwargs(row: Mapping[str, Any] | pd.Series, **extra: Any) -> dict[str, Any]:
    """:class:`~chunkwise.chunkers.SemanticChunker` keyword arguments of one named setting.

    Parameters
    ----------
    row : mapping or pandas.Series
        A row of :func:`load_article_settings` or of the sweep table: ``buffer_size``,
        ``threshold``, ``amount`` and ``min_chunk_size`` (characters; empty/NaN = none).
    **extra
        Further keyword arguments, e.g. ``sentence_split_regex`` or ``max_chunk_tokens``.

    Returns
    -------
    dict
        ``buffer_size``, ``breakpoint_threshold_type``, ``breakpoint_threshold_amount``,
        ``min_chunk_size`` (int or None) and the ``extra`` ones.

    Raises
    ------
    ValueError
        If the row has no setting (an article row whose label is lost) or lacks a column.
    """
    try:
        b, t, a, m = row["buffer_size"], row["threshold"], row["amount"], row["min_chunk_size"]
    except KeyError as exc:
        raise ValueError(f"row lacks column {exc}; pass a row of load_article_settings() or of the sweep table.") from None
    if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in (b, t, a)):
        raise ValueError(
            f"row {dict(row)!r} names no setting (the article's label is lost); "
            "use settings_with_outcome to list the settings that give its outcome."
        )
    kw = {
        "buffer_size": int(b),
        "breakpoint_threshold_type": str(t),
        "breakpoint_threshold_amount": float(a),
        "min_chunk_size": None if m is None or pd.isna(m) else int(m),
    }
    kw.update(extra)
    return kw


def shift_marks(text: HandbookText) -> list[tuple[int, int]]:
    """Character spans that mark the gold topic shifts in a chunk-boundary drawing.

    Each span runs from the last character of the sentence before a shift to the first
    character of the sentence after it, so a chunk boundary placed at the shift (anywhere in
    the whitespace between the two sentences) falls strictly inside the span. Passed as
    ``references`` to :func:`chunkwise.figures.chunk_boundaries_html`, whose "excerpts cut by a
    boundary" count then reads as "shifts with a boundary on them".

    Returns
    -------
    list of (int, int)
        One half-open ``(start, end)`` span per gold boundary, in order; empty for a text
        without shifts.

    Raises
    ------
    ValueError
        If a gold boundary does not lie between two of the text's reference sentences.
    """
    out = []
    n = text.n_sentences
    for g in text.gold:
        if not 0 <= g < n - 1:
            raise ValueError(
                f"gold boundary {g} of {text.name!r} is not between two of its {n} sentences; "
                "fix gold.json (boundary i means a split after sentence i)."
            )
        before, after = text.sentences[g], text.sentences[g + 1]
        out.append((before.end - 1, after.start + 1))
    return out


def boundary_chunkings(
    text: HandbookText,
    embedder: Any,
    semantic: Mapping[str, Mapping[str, Any]],
    fixed_chunk_size: int | None = 60,
    encoding_name: str = "cl100k_base",
) -> dict[str, list[tuple[int, int]]]:
    """Chunk spans of one text under named semantic settings and fixed token windows.

    The input of :func:`chunkwise.figures.chunk_boundaries_html` for the chapter's drawing.

    Parameters
    ----------
    text : HandbookText
    embedder : Embedder
        For :class:`~chunkwise.chunkers.SemanticChunker` (each distinct window embedded once).
    semantic : mapping label -> dict
        Keyword arguments of :class:`~chunkwise.chunkers.SemanticChunker` (all but the embedder),
        one entry per drawing, in the order to draw.
    fixed_chunk_size : int or None
        Adds a last drawing of fixed windows of this many tokens (no overlap), labelled
        ``"fixed {n}-token windows"``; None leaves it out.
    encoding_name : str
        tiktoken encoding of the fixed windows.

    Returns
    -------
    dict
        ``label -> [(start, end), ...]``: each chunk's half-open character span in ``text.text``.

    Raises
    ------
    ValueError, TypeError
        As :class:`~chunkwise.chunkers.SemanticChunker` or
        :class:`~chunkwise.chunkers.fixed.FixedTokenChunker` for an invalid setting (all
        semantic settings are checked before anything is embedded).
    """
    out: dict[str, list[tuple[int, int]]] = {}
    runs = semantic_sweep(text.text, embedder, [dict(s) for s in semantic.values()])
    for label, (_, analysis) in zip(semantic, runs):
        out[str(label)] = [c.span for c in analysis.chunks]
    if fixed_chunk_size is not None:
        fixed = FixedTokenChunker(fixed_chunk_size, 0, encoding_name=encoding_name).split(text.text)
        out[f"fixed {fixed_chunk_size}-token windows"] = [c.span for c in fixed]
    return out


def gold_cuts(text: HandbookText) -> list[int]:
    """Character offsets of the gold boundaries: the end of each reference sentence before a shift."""
    return [text.sentences[g].end for g in text.gold]


def gaps_at(sentences: Sequence[Chunk], cuts: Sequence[int]) -> list[int]:
    """Gap indices (``i`` = between sentences ``i`` and ``i + 1``) of character cuts.

    A cut maps to the gap after the last sentence that ends at or before it, so the gold
    boundaries land on the right gap of whatever sentences a chunker used.
    """
    out = []
    for cut in cuts:
        ends = [i for i, s in enumerate(sentences[:-1]) if s.end <= cut]
        if ends:
            out.append(ends[-1])
    return out


def plot_distances(
    analyses: Sequence[tuple[str, SemanticAnalysis]],
    cuts: Sequence[int],
    title: str = "",
):
    """One panel per analysis: distances between consecutive windows, threshold, gold shifts.

    Parameters
    ----------
    analyses : sequence of (label, SemanticAnalysis)
    cuts : sequence of int
        Character offsets of the true shifts (:func:`gold_cuts`); each panel draws them at the
        gap of its own sentences (:func:`gaps_at`), so they sit correctly even when the
        chunker's sentence split differs from the reference one.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(analyses), 1, figsize=(8, 2.2 * len(analyses)), sharex=True, squeeze=False)
    for ax, (label, an) in zip(axes[:, 0], analyses):
        x = np.arange(len(an.distances))
        ax.plot(x, an.distances, marker="o", lw=1.2, color="C0", label="cosine distance")
        if an.threshold is not None and np.array_equal(an.compared, an.distances):
            ax.axhline(an.threshold, color="C3", ls="--", lw=1, label="threshold")
        for j, b in enumerate(an.breakpoints):
            ax.axvline(b, color="C3", alpha=0.25, lw=3, label="split" if j == 0 else None)
        for j, g in enumerate(gaps_at(an.sentences, cuts)):
            ax.axvspan(g - 0.4, g + 0.4, color="C2", alpha=0.25, lw=0, label="true shift" if j == 0 else None)
        ax.set_ylabel("distance")
        ax.set_title(label, fontsize=9, loc="left")
    axes[-1, 0].set_xlabel("gap index i (between sentence i and i + 1)")
    axes[0, 0].legend(loc="lower left", fontsize=8, ncol=4)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def findings_results(
    table: pd.DataFrame,
    comparison: pd.DataFrame,
    texts: Mapping[str, HandbookText],
    fixed_chunk_size: int = 60,
    claim_percentiles: Sequence[float] = (80, 90, 95),
) -> dict[str, Any]:
    """The chapter's numbers for the findings page (:func:`chunkwise.findings.write_results`).

    Parameters
    ----------
    table : pandas.DataFrame
        The sweep table of :func:`run_sweep`.
    comparison : pandas.DataFrame
        :func:`article_comparison` of that table.
    texts : mapping
        :func:`load_handbook`'s texts (``"handbook"`` and ``"control"``).
    fixed_chunk_size : int
        Fixed window size in cl100k_base tokens for the hotel-sentence check.
    claim_percentiles : sequence of float
        The percentiles of the guide's "5, 3 and 2 chunks" claim.

    Returns
    -------
    dict
        Keys (``<row>`` is an article row id with ``-`` as ``_``, e.g. ``table_1``):

        - ``<row>_chunks``, ``<row>_shifts_found`` (``"k of n"``), ``<row>_extra_splits``: ours
          for the article's rows we can rerun, None for the others;
        - ``<row>_n_with_outcome``, ``<row>_n_settings``: settings of the sweep on that text with
          the article's outcome, out of how many;
        - ``defaults_extra_break_topics``: the topics (gold.json's labels) of the handbook
          sentences after which the defaults (buffer 1, percentile 95, no minimum) cut away from a
          real shift, ``", "``-joined, ``"none"`` if none;
        - ``pct_counts``: chunks at ``claim_percentiles`` (no minimum size) as ``"5, 3, 2"`` when
          every buffer size on both texts gives the same counts, else each case
          (``"handbook b0: 5, 3, 2; ..."``); None if the sweep lacks one of the percentiles;
          ``pct_cases``: how many (text, buffer size) cases that covers;
        - ``bedrock_chunks``: chunks for 101 sentences (100 gaps) at the 90th percentile by the
          rank formula (before any size check);
        - ``am_split``: ``"yes"`` if LangChain's sentence regex splits the handbook text after
          "a.m."; ``lc_pieces`` / ``robust_sentences``: the two splitters' sentence counts;
        - ``hotel_cut``: where the fixed windows cut the sentence that starts "Hotel stays",
          as ``"<text before> | <first five words after>"``, or ``"not cut"``;
          ``fixed_cuts_inside``, ``fixed_cuts``: cuts inside a sentence, of all cuts.
    """
    out: dict[str, Any] = {}
    for _, r in comparison.iterrows():
        rid = str(r["id"]).replace("-", "_")
        has = pd.notna(r.get("delta_chunks"))
        out[f"{rid}_chunks"] = int(r["ours_chunks"]) if has else None
        out[f"{rid}_shifts_found"] = str(r["ours_shifts_found"]) if has else None
        out[f"{rid}_extra_splits"] = int(r["ours_extra_splits"]) if has else None
        out[f"{rid}_n_with_outcome"] = int(r["n_with_outcome"])
        out[f"{rid}_n_settings"] = int(r["n_settings"])

    hand = texts["handbook"]
    d = table[(table.text == "handbook") & (table.buffer_size == 1) & (table.threshold == "percentile")
              & (table.amount == 95) & table.min_chunk_size.isna()]
    if len(d):
        extra = [b for b in d.iloc[0]["boundaries"] if b not in hand.gold]
        topics = [hand.topics[sum(g < b for g in hand.gold)] for b in extra]
        out["defaults_extra_break_topics"] = ", ".join(topics) if topics else "none"
    else:
        out["defaults_extra_break_topics"] = None

    pct = table[(table.threshold == "percentile") & table.min_chunk_size.isna()]
    cases: dict[str, str] = {}
    for (name, b), rows in pct.groupby(["text", "buffer_size"], sort=True):
        by_p = {float(a): int(c) for a, c in zip(rows.amount, rows.chunks)}
        if any(float(p) not in by_p for p in claim_percentiles):
            cases = {}
            break
        cases[f"{name} b{b}"] = ", ".join(str(by_p[float(p)]) for p in claim_percentiles)
    distinct = set(cases.values())
    out["pct_counts"] = (
        None if not cases else next(iter(distinct)) if len(distinct) == 1
        else "; ".join(f"{k}: {v}" for k, v in cases.items())
    )
    out["pct_cases"] = len(cases)
    m = 100
    out["bedrock_chunks"] = m - int(np.floor(90 / 100 * (m - 1)))  # breaks + 1 = chunks

    lc = [s for s in split_sentences(hand.text, mode="langchain") if s.text.strip()]
    out["am_split"] = "yes" if any(s.text.rstrip().endswith("a.m.") for s in lc) else "no"
    out["lc_pieces"] = len(lc)
    out["robust_sentences"] = hand.n_sentences

    cuts = fixed_window_cuts(hand.text, fixed_chunk_size)
    out["fixed_cuts"] = len(cuts)
    out["fixed_cuts_inside"] = int(cuts.inside_sentence.sum()) if len(cuts) else 0
    out["hotel_cut"] = "not cut"
    for s in hand.sentences:
        if s.text.startswith("Hotel stays"):
            inside = [int(c) for c in cuts.char if s.start < c < s.end]
            if inside:
                c = inside[0]
                after = " ".join(hand.text[c:s.end].split()[:5])
                out["hotel_cut"] = f"{hand.text[s.start:c].strip()} | {after}"
            break
    return out


def chapter_answer(table: pd.DataFrame, n_sentences: int, n_gold: int, n_control_sentences: int) -> str:
    """Chapter 1's answer, built from its sweep (so it stays right when the sweep or the texts change).

    Parameters
    ----------
    table : DataFrame
        :func:`run_sweep` over both texts: ``text`` ("handbook" / "control"), ``buffer_size``,
        ``threshold``, ``amount``, ``min_chunk_size`` (NaN for none), ``chunks``,
        ``shifts_found``, ``recall``, ``extra_splits``, ``windowdiff``.
    n_sentences, n_gold : int
        The handbook's sentences and real topic shifts.
    n_control_sentences : int
        The control text's sentences.

    Returns
    -------
    str
        Markdown (:func:`chunkwise.answerbox.answer_box`): a lead of at most 60 words (what to do
        with the defaults, what the sweep found about finding every shift while leaving the
        control whole, and why there is no interval: exact counts of a deterministic chunker),
        then the folded details: LangChain's defaults' outcome, how many settings find every
        shift and the best of them by WindowDiff, what a percentile threshold does to the
        control text, whether a setting that leaves the control whole finds the shifts, and the
        scope of the counts.
    """
    from chunkwise.answerbox import answer_box

    key = ["buffer_size", "threshold", "amount", "min_chunk_size"]
    hand_rows = table[table.text == "handbook"].set_index(key)
    ctrl_rows = table[table.text == "control"].set_index(key)
    both = hand_rows[hand_rows.recall == 1.0][["chunks", "extra_splits", "windowdiff"]]
    both = both.join(ctrl_rows[["chunks"]].rename(columns={"chunks": "control_chunks"}))
    d_key = (1, "percentile", 95.0, np.nan)
    d = hand_rows.loc[d_key] if d_key in hand_rows.index else None
    best = both.sort_values(["windowdiff", "extra_splits"]).head(1)
    sentences = [
        f"On the {n_sentences}-sentence handbook text with {n_gold} real topic shifts, "
        + (f"LangChain's defaults (`buffer_size=1`, 95th percentile) make {d.chunks} chunks and "
           f"find {d.shifts_found} shifts." if d is not None
           else "LangChain's defaults (`buffer_size=1`, 95th percentile) were not in this sweep.")
    ]
    if len(best):
        (b, rule, amount, mcs), r = best.index[0], best.iloc[0]
        size = "no min_chunk_size" if pd.isna(mcs) else f"min_chunk_size {int(mcs)} characters"
        n_extra = int(r.extra_splits)
        sentences.append(
            f"{len(both)} of the {len(hand_rows)} settings of the sweep find every shift; the best of "
            f"them by WindowDiff (buffer_size {b}, {rule.replace('_', ' ')} {amount:g}, {size}) "
            f"pays {n_extra} extra split{'' if n_extra == 1 else 's'} for it and still cuts the "
            f"single-topic control text into {int(r.control_chunks)} chunks.")
    else:
        sentences.append(f"None of the {len(hand_rows)} settings of the sweep finds every shift.")
    pct_all = table[table.threshold == "percentile"].assign(
        min_chunk_size=table.min_chunk_size.fillna(0)).pivot_table(
        index=["buffer_size", "amount", "min_chunk_size"], columns="text", values="chunks", aggfunc="first")
    n_pct, n_same = len(pct_all), int((pct_all["control"] == pct_all["handbook"]).sum())
    n_whole = int((pct_all["control"] == 1).sum())
    pct_lo, pct_hi = int(pct_all["control"].min()), int(pct_all["control"].max())
    sentences.append(
        (f"A percentile threshold never leaves a text whole: in all {n_pct} percentile settings it "
         f"cuts the control, where there is nothing to find, into {pct_lo} to {pct_hi} chunks"
         if n_whole == 0 else
         f"A percentile threshold leaves the control, where there is nothing to find, whole in only "
         f"{n_whole} of its {n_pct} settings and cuts it into up to {pct_hi} chunks")
        + f", as many as the handbook in {n_same} of them: the number of cuts follows from the "
        "number of sentences and the percentile, not from the meaning.")
    ctrl_whole = ctrl_rows[ctrl_rows.chunks == 1].index
    agree = hand_rows.loc[ctrl_whole]
    whole_rules = sorted(set(agree.index.get_level_values("threshold")))
    n_whole_both = int((agree.recall == 1.0).sum())
    if len(ctrl_whole):
        sentences.append(
            f"Of the {len(ctrl_whole)} settings that do leave the control whole (rules: "
            f"{', '.join(w.replace('_', ' ') for w in whole_rules)}), "
            + ("none finds every handbook shift." if n_whole_both == 0
               else f"{n_whole_both} find{'s' if n_whole_both == 1 else ''} every handbook shift."))
    else:
        sentences.append("No setting of the sweep leaves the control text whole.")
    sizes = (f"of {n_sentences} sentences each" if n_sentences == n_control_sentences
             else f"({n_sentences} and {n_control_sentences} sentences)")
    sentences.append(
        f"These are exact counts on two short texts {sizes} with one embedding model, not estimates: "
        "the chunker is deterministic, so there is no interval to give, and the run cannot say how "
        "often the same happens on other documents.")
    # The lead: fixed words and counts only, so its length is bounded whatever the sweep gives.
    n_settings = len(hand_rows)
    if d is None:
        action = "**Test any semantic-chunker setting on a text without a topic shift before trusting it**"
        defaults = "LangChain's defaults were not in this sweep"
    else:
        counts = re.fullmatch(r"\s*(\d+) of (\d+)\s*", str(d.shifts_found))  # "k of n", as in the details
        found, n_found = ((int(counts[1]), int(counts[2])) if counts else
                          (int(round(float(d.recall) * n_gold)) if pd.notna(d.recall) else 0, n_gold))
        action = ("**LangChain's semantic-chunker defaults find the topic shifts here; still test any setting "
                  "on a text without one**" if found == n_found else
                  "**Do not trust LangChain's semantic-chunker defaults to find topic shifts, and test any "
                  "setting on a text without one**")
        defaults = (f"the defaults find {found} of {n_found} shifts in the {n_sentences}-sentence handbook "
                    "text")
    if not len(ctrl_whole):
        both_ways = f"none of {n_settings} settings leaves the single-topic control whole"
    elif n_whole_both == 0:
        both_ways = (f"of {n_settings} settings, none finds every shift and leaves the single-topic control "
                     "whole")
    else:
        one = n_whole_both == 1
        both_ways = (f"of {n_settings} settings, {n_whole_both} find{'s' if one else ''} every shift and "
                     f"leave{'s' if one else ''} the single-topic control whole")
    lead = (f"{action}: {defaults}; {both_ways}. Exact counts on two short texts, not estimates: no "
            "interval, other documents untested.")
    return answer_box(lead, " ".join(sentences))


# --------------------------------------------------------------------------------------
# tables as the chapter shows them
# --------------------------------------------------------------------------------------

#: The sweep table's columns in :func:`compact_sweep_table`, in order.
COMPACT_COLUMNS = ("buffer_size", "threshold", "amount", "min_chunk_size", "chunks", "shifts_found",
                   "extra_splits", "mid_sentence_cuts", "f1", "pk", "windowdiff")
#: Short headers of :func:`compact_sweep_table` (the columns not named here keep their names).
COMPACT_NAMES = {"buffer_size": "buffer", "threshold": "rule", "min_chunk_size": "min size",
                 "shifts_found": "found", "extra_splits": "extra", "mid_sentence_cuts": "mid-sent.",
                 "windowdiff": "WD", "pk": "Pk"}
#: Short names of the threshold rules in :func:`compact_sweep_table`.
COMPACT_RULES = {"standard_deviation": "std", "interquartile": "iqr"}


def format_number(x: float, digits: int = 2) -> str:
    """A number as a table cell shows it: a whole number without decimals, else ``digits`` decimals.

    Parameters
    ----------
    x : float
        Any real number (an int, a float or a numpy scalar).
    digits : int, default 2
        Decimals of a number that is not whole.

    Returns
    -------
    str
        ``f"{x:g}"`` when ``x`` is whole (``3.0`` -> ``"3"``; note ``1e6`` -> ``"1e+06"``), else
        ``x`` with ``digits`` decimals (``0.5`` -> ``"0.50"``).

    Raises
    ------
    TypeError, ValueError
        If ``x`` cannot be converted to a float.
    """
    return f"{x:g}" if float(x).is_integer() else f"{x:.{digits}f}"


def show_table(df: pd.DataFrame, digits: int = 2) -> Any:
    """A table as the chapter displays it: no index, readable headers, numbers by :func:`format_number`.

    Parameters
    ----------
    df : pandas.DataFrame
        Any shape; its headers are relabelled with :func:`chunkwise.labels.labelled`.
    digits : int, default 2
        Decimals of the float cells that are not whole numbers (whole ones show none).

    Returns
    -------
    pandas.io.formats.style.Styler
        The relabelled table without its index, float columns formatted by
        :func:`format_number`, ``"-"`` for a missing value, and the HTML class ``dataframe``
        (the book theme's table style). Other columns are shown as they are.

    Raises
    ------
    TypeError
        If ``df`` is not a pandas DataFrame.
    """
    from chunkwise.labels import labelled

    df = labelled(df)
    floats = df.select_dtypes("float").columns
    styled = df.style.format(lambda x: format_number(x, digits), subset=list(floats),
                             na_rep="-").hide(axis="index")
    return styled.set_table_attributes('class="dataframe"')


def compact_sweep_table(rows: pd.DataFrame, digits: int = 2) -> Any:
    """The sweep's rows under short headers, so that the whole table fits the page.

    Parameters
    ----------
    rows : pandas.DataFrame
        Rows of the table of :func:`run_sweep` (any subset, e.g. one text's): it must hold
        every column of :data:`COMPACT_COLUMNS`; others are left out.
    digits : int, default 2
        Passed to :func:`show_table`.

    Returns
    -------
    pandas.io.formats.style.Styler
        :data:`COMPACT_COLUMNS` renamed by :data:`COMPACT_NAMES`, the threshold rules shortened
        by :data:`COMPACT_RULES`, one row per row of ``rows`` in its order, shown by
        :func:`show_table`.

    Raises
    ------
    KeyError
        If ``rows`` lacks a column of :data:`COMPACT_COLUMNS`.
    """
    out = rows[list(COMPACT_COLUMNS)].rename(columns=COMPACT_NAMES).reset_index(drop=True)
    out["rule"] = out["rule"].replace(COMPACT_RULES)
    return show_table(out, digits)


__all__ = [
    "BREAKPOINT_DEFAULTS",
    "chapter_answer",
    "compact_sweep_table",
    "format_number",
    "HandbookText",
    "ARTICLE_RESULTS_COLUMNS",
    "ARTICLE_SETTINGS_COLUMNS",
    "COMPACT_COLUMNS",
    "COMPACT_NAMES",
    "COMPACT_RULES",
    "article_comparison",
    "article_metric_table",
    "boundary_chunkings",
    "describe_setting",
    "findings_results",
    "fixed_window_cuts",
    "load_article_results",
    "load_article_settings",
    "load_handbook",
    "percentile_break_table",
    "gaps_at",
    "gold_cuts",
    "plot_distances",
    "run_sweep",
    "score_chunks",
    "setting_kwargs",
    "settings_with_outcome",
    "shift_marks",
    "show_table",
    "summarize_settings",
    "sweep_settings",
    "threshold_grid",
]
