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
from collections.abc import Iterable, Sequence
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


def load_article_results(path: str | Path | None = None) -> pd.DataFrame:
    """The source article's reported results (facts only), from ``data/handbook/article_results.csv``."""
    p = Path(path) if path else project_root() / "data" / "handbook" / "article_results.csv"
    return pd.read_csv(p)


def article_comparison(table: pd.DataFrame, article: pd.DataFrame) -> pd.DataFrame:
    """Put the article's rows beside the matching rows of our sweep.

    The article's rows name a text and settings (buffer size, percentile, min_chunk_size);
    the matching row of ``table`` supplies our chunks / shifts found / extra splits.
    ``delta_chunks`` is ours minus the article's.
    """
    rows = []
    for _, a in article.iterrows():
        sel = table[
            (table["text"] == a["text"])
            & (table["buffer_size"] == a["buffer_size"])
            & (table["threshold"] == "percentile")
            & (table["amount"] == float(a["percentile"]))
            & (
                table["min_chunk_size"].isna()
                if pd.isna(a["min_chunk_size"])
                else table["min_chunk_size"] == a["min_chunk_size"]
            )
        ]
        ours = sel.iloc[0] if len(sel) else None
        rows.append(
            {
                "settings": a["settings"],
                "text": a["text"],
                "article_chunks": int(a["chunks"]),
                "ours_chunks": int(ours["chunks"]) if ours is not None else None,
                "delta_chunks": (int(ours["chunks"]) - int(a["chunks"])) if ours is not None else None,
                "article_shifts_found": a["shifts_found"],
                "ours_shifts_found": ours["shifts_found"] if ours is not None else None,
                "article_extra_splits": a["extra_splits"],
                "ours_extra_splits": int(ours["extra_splits"]) if ours is not None else None,
            }
        )
    return pd.DataFrame(rows)


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


__all__ = [
    "BREAKPOINT_DEFAULTS",
    "HandbookText",
    "article_comparison",
    "fixed_window_cuts",
    "load_article_results",
    "load_handbook",
    "percentile_break_table",
    "gaps_at",
    "gold_cuts",
    "plot_distances",
    "run_sweep",
    "score_chunks",
    "sweep_settings",
    "threshold_grid",
]
