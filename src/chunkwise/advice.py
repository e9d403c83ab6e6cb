"""The "What should I do?" page: advice built only on verdicts that survive their alternatives.

``data/findings/advice.toml`` lists recommendations by situation, each resting on one or more
entries of the analysis plan (:mod:`chunkwise.plan`). A recommendation is given as advice only
when every entry it rests on is classed ``robust`` or ``no effect larger than delta`` by its
chapter's robustness panel in this build (:func:`chunkwise.findings.robustness_status`);
otherwise it is listed as an open question with each entry's class, and its advice sentence is not
shown. Its sentence is filled from the chapter's results file, so the numbers are the run's.

Strength of a given recommendation:

- ``strong``: every entry robust, and each primary interval clears the plan's margin (its near end
  lies beyond +/- delta);
- ``moderate``: every entry robust or an equivalence, but some primary interval reaches inside the
  margin;
- an entry whose primary has no sampling interval (one timing) caps the strength at ``weak``.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.links import section_link

__all__ = ["Advice", "AdviceError", "advice_markdown", "advice_rows", "load_advice"]

#: Classes under which a recommendation is given.
GIVEN = ("robust", "no effect larger than delta")


class AdviceError(ValueError):
    """The advice file is malformed or names an entry the plan does not declare."""


@dataclass(frozen=True)
class Advice:
    """One recommendation: its situation, the advice sentence (a template over the chapter's
    results), the question it answers, the plan entries it rests on, the settings the evidence
    covers and where the evidence is (chapter and section)."""

    advice_id: str
    situation: str
    advice: str
    question: str
    entries: tuple[str, ...]
    covers: str
    chapter: str
    section: str


def load_advice(path: str | os.PathLike[str], plan: Any = None) -> list[Advice]:
    """Read ``advice.toml``.

    Parameters
    ----------
    path : path-like
    plan : chunkwise.plan.Plan, optional
        When given, every entry an item names must be declared there.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    AdviceError
        Naming the item: a missing field, a repeated id, or an entry the plan lacks.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise AdviceError(f"{p} is not valid TOML: {exc}") from None
    out: list[Advice] = []
    seen: set[str] = set()
    fields = ("id", "situation", "advice", "question", "entries", "covers", "chapter", "section")
    for n, item in enumerate(data.get("advice", []), start=1):
        missing = [f for f in fields if not item.get(f)]
        if missing:
            raise AdviceError(f"{p}: advice item {n} lacks {', '.join(missing)}")
        if item["id"] in seen:
            raise AdviceError(f"{p}: advice id {item['id']!r} is repeated")
        seen.add(item["id"])
        entries = tuple(item["entries"])
        if plan is not None:
            unknown = [e for e in entries if e not in plan.entries]
            if unknown:
                raise AdviceError(f"{p}: advice {item['id']!r} rests on {', '.join(unknown)}, which the analysis "
                                  "plan does not declare")
        out.append(Advice(item["id"], item["situation"], item["advice"], item["question"], entries, item["covers"],
                          item["chapter"], item["section"]))
    if not out:
        raise AdviceError(f"{p} lists no [[advice]] items")
    return out


def _strength(entries: Sequence[str], panels: Mapping[str, Mapping[str, Any]], plan: Any) -> str:
    words = []
    for e in entries:
        prim = panels.get(e, {}).get("primary", {})
        low, high = prim.get("low"), prim.get("high")
        delta = plan[e].delta
        if low is None or high is None or low == high:
            words.append("weak")
        elif low > delta or high < -delta:
            words.append("strong")
        else:
            words.append("moderate")
    for w in ("weak", "moderate", "strong"):
        if w in words:
            return w
    return "moderate"


def _fill(template: str, values: Mapping[str, Any]) -> str:
    class Missing(dict):
        def __missing__(self, key: str) -> str:
            return "(not measured in this build)"

    clean = {k: ("n/a" if isinstance(v, float) and math.isnan(v) else v) for k, v in values.items()}
    return template.format_map(Missing(clean))


def advice_rows(advice: Sequence[Advice], plan: Any, status: Mapping[str, Mapping[str, str]],
                panels: Mapping[str, Mapping[str, Any]],
                results: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each item judged against this build.

    Returns
    -------
    list of dict
        One per item: ``given`` (bool), ``strength`` (``strong`` / ``moderate`` / ``weak``, or ``""``
        when not given), ``text`` (the filled advice sentence when given, else ``""``), ``classes``
        (``[(entry, class, sentence)]``) and the item's fields.
    """
    rows = []
    for a in advice:
        classes = [(e, status.get(e, {}).get("class", "not assessed"), status.get(e, {}).get("text", ""))
                   for e in a.entries]
        given = all(c in GIVEN for _, c, _ in classes)
        rows.append({**a.__dict__, "classes": classes, "given": given,
                     "strength": _strength(a.entries, panels, plan) if given else "",
                     "text": _fill(a.advice, results.get(a.chapter, {})) if given else ""})
    return rows


def advice_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The page's body: the recommendations given (situation, advice, strength, what the evidence
    covers, a link), then the open questions with each entry's class."""
    given = [r for r in rows if r["given"]]
    open_ = [r for r in rows if not r["given"]]
    lines = [f"**{len(given)} of {len(rows)} recommendations rest on verdicts that survive every declared "
             f"alternative in this build; the other {len(open_)} are open questions.**", ""]
    lines += ["## Recommendations", ""]
    if not given:
        lines += ["None in this build: no verdict the advice rests on survives all of its declared alternatives. "
                  "The open questions below say which alternative each one fails under.", ""]
    for r in given:
        lines += [f"- **{r['situation']}.** {r['text']} *Strength: {r['strength']}.* Covers: {r['covers']}. "
                  f"Evidence: {section_link(r['chapter'], r['section'])}.", ""]
    lines += ["## Open questions (not advice)", ""]
    for r in open_:
        why = "; ".join(f"`{e}`: " + (t if t.startswith(c) else f"{c} ({t})" if t else c) for e, c, t in r["classes"])
        lines += [f"- **{r['question']}** *{r['situation']}.* Class: {why}. "
                  f"Evidence: {section_link(r['chapter'], r['section'])}.", ""]
    return "\n".join(lines)
