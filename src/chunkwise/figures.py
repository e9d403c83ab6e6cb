"""Figures and HTML drawings shared by the chapters and ``chunkwise evaluate``.

In chunkwise "report" names two things only: Chroma's technical report (the published tables
and the report code's chunk placement) and the *report folder* that ``chunkwise evaluate`` writes;
this module (``chunkwise.report`` until the name was freed) draws for both.

- :func:`plot_metric_vs_cost`: one point per grid cell, a metric against the mean number of
  retrieved tokens per question, with the bootstrap interval of the metric as an error bar.
- :func:`plot_metric_by_k`: the metric against ``top_k``, one line per chunker, one panel per
  retriever.
- :func:`label_points`: names beside the points of a scatter plot, moved apart until none overlap
  (adjustText), points at the same place sharing one label.
- :func:`chunk_boundaries_html`: a standalone HTML page (inline CSS, no script, no network) that
  draws one document once per chunker, with every chunk boundary marked and the gold excerpts
  highlighted, so a reader *sees* where a chunker cuts an answer in two.
- :func:`report_html` and :func:`write_report`: the report folder of a grid result (tables,
  figures, ``report.html``, ``boundaries.html``), as ``chunkwise evaluate --out`` writes it. The
  evaluation engine (:mod:`chunkwise.evaluation.grid`) never imports this module: a result is
  drawn here.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from chunkwise import __version__

#: Written into the head of every HTML page chunkwise writes (report.html, boundaries.html): the
#: document loaders skip a page carrying it, so a report saved inside the documents folder is never
#: read back as a document (:func:`chunkwise.datasets.loaders.is_chunkwise_page`).
GENERATOR_META = f'<meta name="generator" content="chunkwise {__version__}">'

__all__ = [
    "chunk_boundaries_html", "label_points", "plot_metric_by_k", "plot_metric_vs_cost", "series_style", "write_report",
]

_MARKERS = {"dense": "o", "bm25": "s", "hybrid": "^"}


def series_style(i: int) -> dict[str, str]:
    """Colour, line style and marker of the ``i``-th series (0-based), distinct for up to 30.

    matplotlib's default cycle has ten colours, so an eleventh line would repeat the first one's
    colour; from the eleventh on, the colours come round again with another line style and
    marker (``"-"``/``"o"``, then ``"--"``/``"s"``, then ``":"``/``"^"``).

    >>> series_style(0), series_style(10)["color"], series_style(10)["linestyle"]
    ({'color': 'C0', 'linestyle': '-', 'marker': 'o'}, 'C0', '--')
    """
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise ValueError(f"a series index is an int >= 0, got {i!r}.")
    turn = (i // 10) % 3
    return {"color": f"C{i % 10}", "linestyle": ("-", "--", ":")[turn], "marker": ("o", "s", "^")[turn]}


def label_points(ax: Any, x: Sequence[float], y: Sequence[float], labels: Sequence[str], *,
                 fontsize: float = 7, merge_px: float = 8.0) -> list[Any]:
    """Write each point's name beside it on ``ax`` so that no two names overlap.

    Points drawn within ``merge_px`` pixels of each other (they sit on top of one another on the
    page) get one label, their names stacked one per line; the labels are then moved apart with
    adjustText (``adjust_text``), which also keeps them off the points, and joined to their point
    by a thin line where they had to move.

    Parameters
    ----------
    ax : matplotlib Axes
        With the points already drawn and the limits final (they decide the pixel positions).
    x, y : sequence of float
        The points, in data units; same length as ``labels``.
    labels : sequence of str
    fontsize : float, default 7
    merge_px : float, default 8.0
        Distance in display pixels under which two points share a label.

    Returns
    -------
    list of matplotlib Text
        One per group of points, in order of first appearance.

    Raises
    ------
    ValueError
        If ``x``, ``y`` and ``labels`` differ in length.
    """
    from adjustText import adjust_text

    if not len(x) == len(y) == len(labels):
        raise ValueError(f"label_points needs one label per point: got {len(x)} x, {len(y)} y, "
                         f"{len(labels)} labels.")
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    ax.get_xlim(), ax.get_ylim()  # settles matplotlib's lazy autoscaling, so pixels are final
    pixels = ax.transData.transform(np.column_stack([xs, ys])) if xs else np.empty((0, 2))
    groups: list[list[int]] = []
    for i, p in enumerate(pixels):
        for group in groups:
            if np.hypot(*(pixels[group[0]] - p)) <= merge_px:
                group.append(i)
                break
        else:
            groups.append([i])
    texts = [ax.text(xs[g[0]], ys[g[0]], "\n".join(str(labels[i]) for i in g), fontsize=fontsize)
             for g in groups]
    if texts:
        adjust_text(texts, x=xs, y=ys, ax=ax, arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5})
    return texts


def plot_metric_vs_cost(table: pd.DataFrame, boot: Any = None, metric: str = "recall", cost: str = "retrieved_tokens"):
    """A metric (percent) against a cost column, one point per cell.

    Parameters
    ----------
    table : DataFrame
        :attr:`chunkwise.evaluation.grid.GridResult.table` (columns ``cell``, ``chunker``,
        ``retriever``, ``k``, ``metric``, ``cost``).
    boot : BootstrapResult, optional
        Of the same ``metric``: adds each cell's percentile interval as a vertical bar.
    metric, cost : str
        Table columns; ``cost`` defaults to the mean cl100k_base tokens retrieved per question.

    Returns
    -------
    matplotlib.figure.Figure
        Colour = chunker, marker = retriever, marker size grows with k.

    Raises
    ------
    ValueError
        If a column is missing.
    """
    import matplotlib.pyplot as plt

    for col in ("cell", "chunker", "retriever", "k", metric, cost):
        if col not in table.columns:
            raise ValueError(f"table has no column {col!r}; pass GridResult.table.")
    fig, ax = plt.subplots(figsize=(9, 5))
    chunkers = list(dict.fromkeys(table["chunker"]))
    colours = {c: f"C{i % 10}" for i, c in enumerate(chunkers)}
    kmax = max(float(table["k"].max()), 1.0)
    ci = None
    if boot is not None:
        ci = boot.table.reindex(table["cell"])[["mean_low", "mean_high"]].to_numpy()
    for i, (_, r) in enumerate(table.iterrows()):
        x, y = float(r[cost]), 100 * float(r[metric])
        if ci is not None and not np.isnan(ci[i]).any():
            ax.errorbar(x, y, yerr=[[y - 100 * ci[i, 0]], [100 * ci[i, 1] - y]], color=colours[r["chunker"]],
                        alpha=0.35, lw=1, capsize=0)
        ax.scatter(x, y, color=colours[r["chunker"]], marker=_MARKERS.get(r["retriever"], "D"),
                   s=18 + 60 * float(r["k"]) / kmax, alpha=0.85, edgecolor="none")
    for c in chunkers:
        ax.scatter([], [], color=colours[c], marker="o", label=c)
    for ret in dict.fromkeys(table["retriever"]):
        ax.scatter([], [], color="0.4", marker=_MARKERS.get(ret, "D"), label=ret)
    ax.set_xscale("log")
    ax.set_xlabel(f"{cost.replace('_', ' ')} per question (cl100k_base, log scale)" if cost == "retrieved_tokens" else cost)
    ax.set_ylabel(f"{metric} (%)" + (" with 95% bootstrap CI" if boot is not None else ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False,
              title="marker size grows with k", title_fontsize=7)
    fig.tight_layout()
    return fig


def plot_metric_by_k(table: pd.DataFrame, metric: str = "recall"):
    """The metric (percent) against k, one line per chunker, one panel per retriever.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If a column is missing.
    """
    import matplotlib.pyplot as plt

    for col in ("chunker", "retriever", "k", metric):
        if col not in table.columns:
            raise ValueError(f"table has no column {col!r}; pass GridResult.table.")
    rets = list(dict.fromkeys(table["retriever"]))
    fig, axes = plt.subplots(1, len(rets), figsize=(4 * len(rets) + 2, 4), sharey=True, squeeze=False)
    chunkers = list(dict.fromkeys(table["chunker"]))
    for ax, ret in zip(axes[0], rets):
        sub = table[table["retriever"] == ret]
        for i, c in enumerate(chunkers):
            part = sub[sub["chunker"] == c].sort_values("k")
            ax.plot(part["k"], 100 * part[metric], ms=3, label=c, **series_style(i))
        ax.set_title(ret)
        ax.set_xlabel("top_k (chunks retrieved)")
        ax.set_xticks(sorted(table["k"].unique()))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{metric} (%)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    fig.tight_layout()
    return fig


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin-top: 1.6em; }
.legend span { margin-right: 1.2em; }
.doc { white-space: pre-wrap; font-family: ui-monospace, monospace; font-size: 12px; line-height: 1.6;
       border: 1px solid #ccc; padding: 0.8em; max-height: 32em; overflow-y: auto; }
.c0 { background: #e8f0fe; } .c1 { background: #fef3e0; }
.ov { background: #e6d7f5; }
.ref { outline: 2px solid #d93025; background-image: linear-gradient(#fde2e1, #fde2e1); }
.out { color: #888; }
.b { color: #fff; background: #1a73e8; font-size: 9px; padding: 0 2px; border-radius: 2px; margin: 0 1px;
     vertical-align: super; }
"""


def _check_spans(name: str, spans: Sequence[Sequence[int]], n: int) -> list[tuple[int, int]]:
    out = []
    for i, sp in enumerate(spans):
        try:
            s, e = int(sp[0]), int(sp[1])
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"{name}[{i}] = {sp!r} is not a (start, end) pair of character offsets.") from None
        if not 0 <= s <= e <= n:
            raise ValueError(f"{name}[{i}] = ({s}, {e}) is outside the text (0 to {n} characters).")
        out.append((s, e))
    return out


def _draw(text: str, chunks: list[tuple[int, int]], refs: list[tuple[int, int]], lo: int, hi: int) -> str:
    """HTML of text[lo:hi] with chunk colours, boundary markers and reference highlights (a sweep)."""
    events = {lo, hi}
    for s, e in chunks + refs:
        events.update(p for p in (s, e) if lo <= p <= hi)
    cuts = sorted(events)
    opens: dict[int, list[int]] = {}
    closes: dict[int, list[int]] = {}
    active: set[int] = set()
    for i, (s, e) in enumerate(chunks):
        if s == e:
            continue
        if s <= lo < e:
            active.add(i)
        opens.setdefault(s, []).append(i)
        closes.setdefault(e, []).append(i)
    ref_delta: dict[int, int] = {}
    n_ref = 0
    for s, e in refs:
        if s == e:
            continue
        if s <= lo < e:
            n_ref += 1
        ref_delta[s] = ref_delta.get(s, 0) + 1
        ref_delta[e] = ref_delta.get(e, 0) - 1
    parts = []
    for a, b in zip(cuts, cuts[1:]):
        if a > lo:
            active.difference_update(closes.get(a, ()))
            active.update(opens.get(a, ()))
            n_ref += ref_delta.get(a, 0)
        for i in opens.get(a, ()):
            parts.append(f'<span class="b" title="chunk {i + 1}: characters {chunks[i][0]}-{chunks[i][1]}">{i + 1}</span>')
        if not active:
            cls = ["out"]
        elif len(active) > 1:
            cls = ["ov"]
        else:
            cls = [f"c{next(iter(active)) % 2}"]
        if n_ref > 0:
            cls.append("ref")
        parts.append(f'<span class="{" ".join(cls)}">{html.escape(text[a:b])}</span>')
    return "".join(parts)


def chunk_boundaries_html(
    text: str,
    chunkings: Mapping[str, Sequence[Sequence[int]]],
    references: Sequence[Sequence[int]] = (),
    *,
    title: str = "document",
    window: tuple[int, int] | None = None,
) -> str:
    """A standalone HTML page drawing one document once per chunking.

    Parameters
    ----------
    text : str
        The document.
    chunkings : mapping label -> sequence of (start, end)
        Each chunker's chunk spans (half-open character offsets into ``text``).
    references : sequence of (start, end), optional
        Gold excerpts, outlined in red.
    title : str
        Page heading (escaped).
    window : (start, end), optional
        Draw only ``text[start:end]`` (long documents); default the whole text.

    Returns
    -------
    str
        A complete HTML document: inline CSS, no scripts, no external resources, marked with
        :data:`GENERATOR_META` (so the loaders never read it as a document); every piece
        of ``text`` and every label is HTML-escaped. Chunks alternate between two background
        colours, characters in two overlapping chunks are purple, characters outside every chunk
        grey; a numbered blue tag marks each chunk's start (hover: its character span).

    Raises
    ------
    ValueError
        For a span outside the text or a malformed span or window.
    """
    n = len(text)
    lo, hi = (0, n) if window is None else (int(window[0]), int(window[1]))
    if not 0 <= lo <= hi <= n:
        raise ValueError(f"window ({lo}, {hi}) is outside the text (0 to {n} characters).")
    refs = _check_spans("references", references, n)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{n} characters; showing {lo}-{hi}. {len(refs)} gold excerpt(s), outlined in red.</p>",
        '<p class="legend"><span class="c0">chunk</span><span class="c1">next chunk</span>'
        '<span class="ov">two chunks overlap</span><span class="out">in no chunk</span>'
        '<span class="ref">gold excerpt</span><span class="b">n</span> chunk n starts</p>',
    ]
    for label, spans in chunkings.items():
        chunks = _check_spans(f"chunkings[{label!r}]", spans, n)
        cut = sum(
            1 for s, e in refs if any(s < cs < e or s < ce < e for cs, ce in chunks)
        )
        body.append(
            f"<h2>{html.escape(str(label))}: {len(chunks)} chunks"
            + (f"; {cut} of {len(refs)} excerpts cut by a boundary" if refs else "")
            + "</h2>"
        )
        body.append(f'<div class="doc">{_draw(text, chunks, refs, lo, hi)}</div>')
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" + GENERATOR_META +
        f"<title>{html.escape(title)}: chunk boundaries</title><style>{_CSS}</style></head>"
        f"<body>{''.join(body)}</body></html>\n"
    )


def _chunk_text(text: str, start: int, end: int, refs: Sequence[tuple[int, int]]) -> str:
    """A retrieved chunk with the characters of the gold excerpts marked (HTML-escaped)."""
    out, pos = [], start
    marks = sorted((max(a, start), min(b, end)) for a, b in refs if a < end and start < b)
    for a, b in marks:
        if a > pos:
            out.append(html.escape(text[pos:a]))
        out.append(f"<mark>{html.escape(text[max(a, pos):b])}</mark>")
        pos = max(pos, b)
    out.append(html.escape(text[pos:end]))
    return "".join(out)  # chunks are shown whole: they are what the reader gets


def report_html(result: Any, docs: Mapping[str, str], diagnostics: pd.DataFrame | None = None, *,
                cell: str | None = None, title: str = "chunkwise report", groups: pd.DataFrame | None = None) -> str:
    """A standalone HTML page: the grid table, the chunk diagnostics, and one section per question
    showing which cells found it and the chunks that ``cell`` retrieved, gold characters marked.

    Parameters
    ----------
    result : GridResult
        From :func:`chunkwise.evaluation.grid.run_grid` (its ``rankings`` and ``chunk_objects``).
    docs : mapping name -> text
        A :class:`~chunkwise.datasets.loaders.Documents` from ``load_documents`` also gives each
        PDF's page map: every excerpt and retrieved chunk of a PDF is then labelled with its
        page ("p. 3", "pp. 3-4").
    diagnostics : DataFrame, optional
        :meth:`GridResult.diagnostics`; omitted when None.
    cell : str, optional
        The cell whose retrieved chunks are shown (default the cell with the highest mean
        recall).
    groups : DataFrame, optional
        :meth:`GridResult.group_table <chunkwise.evaluation.grid.GridResult.group_table>`: a
        "Per question group" section (each group's best cell and every cell's mean and
        difference to the baseline with its interval, percent).
    title : str

    Returns
    -------
    str
        A complete HTML document: inline CSS, no scripts, nothing loaded from the network, every
        text HTML-escaped, marked with :data:`GENERATOR_META` (so the loaders never read it as a
        document).

    Raises
    ------
    ValueError
        If ``cell`` is not a cell of the result.
    """
    table = result.table
    if cell is None:
        cell = str(table.sort_values(["recall", "precision"], ascending=False, kind="stable").iloc[0]["cell"])
    if cell not in set(table["cell"]):
        raise ValueError(f"cell {cell!r} is not in the result.")
    row = table[table["cell"] == cell].iloc[0]
    k = int(row["k"])
    label, ranked_all = result.ranking_of(cell)
    chunks = [c for cs in result.chunk_objects[label].values() for c in cs]
    doc_of = [d for d, cs in result.chunk_objects[label].items() for _ in cs]
    recall = result.per_question.pivot(index="question_id", columns="cell", values="recall")
    from chunkwise.evaluation.cells import PUBLIC_METRICS

    cols = ["cell", *PUBLIC_METRICS, "retrieved_tokens"]
    shown = table[[c for c in cols if c in table.columns]].copy()
    for c in PUBLIC_METRICS:
        if c in shown.columns:
            shown[c] = (100 * shown[c]).round(1)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>" + GENERATOR_META
        + "<title>" + html.escape(title) + "</title><style>"
        "body{font-family:sans-serif;max-width:70em;margin:1em auto;line-height:1.4} table{border-collapse:collapse;"
        "font-size:90%} td,th{border:1px solid #ccc;padding:2px 6px} mark{background:#fde68a} .miss{color:#b91c1c}"
        " .hit{color:#15803d} .chunk{border-left:3px solid #93c5fd;padding:2px 8px;margin:4px 0;white-space:pre-wrap}"
        " details{margin:0.6em 0}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        "<h2>Cells (percent)</h2>", shown.to_html(index=False, escape=True),
    ]
    if diagnostics is not None:
        parts += ["<h2>Chunk diagnostics</h2>", diagnostics.to_html(escape=True)]
    if groups is not None and len(groups):
        g = groups.copy()
        for c in ("mean", "mean_low", "mean_high", "diff", "diff_low", "diff_high"):
            g[c] = (100 * g[c]).round(1)
        parts += ["<h2>Per question group</h2><p>Groups are the questions' tags; differences are against the "
                  "baseline cell, with paired bootstrap intervals over the group's questions (percent).</p>",
                  g.to_html(index=False, escape=True, na_rep="")]
    from chunkwise.datasets.loaders import page_label

    pages: Mapping[str, list[int]] = getattr(docs, "page_starts", {}) or {}
    parts.append(f"<h2>Questions</h2><p>Retrieved chunks of <b>{html.escape(cell)}</b>; gold characters are "
                 "marked. Each question lists the cells that found any of its answer (recall &gt; 0).</p>")
    for i, q in enumerate(result.questions.itertuples()):
        qid = str(q.question_id)
        refs = [(int(r["start_index"]), int(r["end_index"])) if isinstance(r, Mapping) else (int(r[0]), int(r[1]))
                for r in q.references]
        found = [c for c in recall.columns if recall.loc[qid, c] > 0] if qid in recall.index else []
        r_here = float(recall.loc[qid, cell]) if qid in recall.index else float("nan")
        status = "hit" if r_here > 0 else "miss"
        parts.append(f"<details><summary><span class='{status}'>recall {100 * r_here:.0f}%</span> "
                     f"{html.escape(qid)}: {html.escape(str(q.question))}</summary>")
        starts = pages.get(str(q.corpus_id))
        where = f" ({', '.join(page_label(starts, a, b) for a, b in refs)})" if starts and refs else ""
        parts.append(f"<p>document {html.escape(str(q.corpus_id))}{where}; found by {len(found)} of {len(recall.columns)} "
                     f"cells{': ' + html.escape(', '.join(found[:12])) + (' ...' if len(found) > 12 else '') if found else ''}</p>")
        for rank, j in enumerate(ranked_all[i][:k], 1):
            c, d = chunks[j], doc_of[j]
            mine = refs if d == str(q.corpus_id) else []
            page = f" {page_label(pages[d], c.start, c.end)}" if d in pages else ""
            parts.append(f"<div class='chunk'><small>#{rank} {html.escape(d)}{page} [{c.start}, {c.end})</small>\n"
                         f"{_chunk_text(docs[d], c.start, c.end, mine)}</div>")
        parts.append("</details>")
    parts.append("</body></html>")
    return "".join(parts)


def write_report(result: Any, out_dir: str | Path, boot: Any = None, docs: Mapping[str, str] | None = None,
                 document: str | None = None, max_chars: int = 40_000,
                 groups: pd.DataFrame | None = None) -> dict[str, Path]:
    """Write the report folder of a grid result (what ``chunkwise evaluate --out`` writes).

    ``result`` is a :class:`~chunkwise.evaluation.grid.GridResult`, ``boot`` its
    :meth:`~chunkwise.evaluation.grid.GridResult.bootstrap` (optional: the figures then have no
    error bars and the metric is recall).

    Files: ``table.csv`` (one row per cell), ``per_question.csv``, ``report.json``,
    ``recall_vs_tokens.png`` and ``recall_by_k.png`` (:func:`plot_metric_vs_cost`,
    :func:`plot_metric_by_k`), and with ``docs`` given ``diagnostics.csv``
    (:meth:`GridResult.diagnostics <chunkwise.evaluation.grid.GridResult.diagnostics>`),
    ``report.html`` (the table, the diagnostics and a per-question view: which cells found
    each question, the best cell's retrieved chunks with the gold marked;
    :func:`report_html`) and ``boundaries.html``: one document
    (``document``, default the one with the most questions) with every chunker's boundaries
    and the gold excerpts; a document longer than ``max_chars`` characters is drawn from a
    quarter window before its first excerpt, ``max_chars`` characters long. With ``groups``
    (:meth:`GridResult.group_table <chunkwise.evaluation.grid.GridResult.group_table>`),
    ``groups.csv`` and a per-group section of ``report.html``.

    Returns
    -------
    dict of str -> Path
        What was written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    paths["table"] = out / "table.csv"
    result.table.to_csv(paths["table"], index=False)
    paths["per_question"] = out / "per_question.csv"
    result.per_question_table().to_csv(paths["per_question"], index=False)
    if groups is not None:
        paths["groups"] = out / "groups.csv"
        groups.to_csv(paths["groups"], index=False)
    paths["report"] = out / "report.json"
    paths["report"].write_text(json.dumps(result.to_dict(boot), indent=2, ensure_ascii=False), encoding="utf-8")
    metric = boot.metric if boot is not None else "recall"
    fig = plot_metric_vs_cost(result.table, boot, metric=metric)
    paths["figure_cost"] = out / f"{metric}_vs_tokens.png"
    fig.savefig(paths["figure_cost"], dpi=120, bbox_inches="tight")
    fig2 = plot_metric_by_k(result.table, metric=metric)
    paths["figure_k"] = out / f"{metric}_by_k.png"
    fig2.savefig(paths["figure_k"], dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    plt.close(fig2)
    if docs is not None:
        if document is None:
            document = str(result.questions["corpus_id"].astype(str).value_counts().index[0])
        if document not in docs:
            raise ValueError(f"document {document!r} is not among the documents.")
        q = result.questions[result.questions["corpus_id"].astype(str) == document]
        refs = [(r["start_index"], r["end_index"]) if isinstance(r, Mapping) else (int(r[0]), int(r[1]))
                for refs in q["references"] for r in refs]
        chunkings = {label: spans.get(document, []) for label, spans in result.chunks.items()}
        text = docs[document]
        window = None
        if len(text) > max_chars:  # a long document: draw the part around its first excerpts
            first = min((s for s, _ in refs), default=0)
            lo = max(0, first - max_chars // 4)
            window = (lo, min(len(text), lo + max_chars))
        page = chunk_boundaries_html(text, chunkings, refs, title=document, window=window)
        paths["boundaries"] = out / "boundaries.html"
        paths["boundaries"].write_text(page, encoding="utf-8")
        paths["diagnostics"] = out / "diagnostics.csv"
        diag = result.diagnostics(docs)
        diag.to_csv(paths["diagnostics"])
        paths["html"] = out / "report.html"
        paths["html"].write_text(report_html(result, docs, diag, groups=groups), encoding="utf-8")
    return paths

