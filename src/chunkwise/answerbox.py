"""A chapter's answer box: a short lead a practitioner can act on, the intervals folded below it.

Every chapter opens with an admonition titled "What this chapter finds" whose body is glued from
the chapter's ``chapter_answer``. Issue #60 asked that a reader who stops there knows what to do
and how sure the book is, so the body has two parts:

* a **lead** of at most :data:`MAX_LEAD_WORDS` words (what to do, how sure: the verdict and its
  robustness class), and
* the **details** (every estimate with its interval, the scope, the amendments) in a collapsed
  sphinx-design ``dropdown`` the reader opens on demand.

:func:`answer_box` is the one place that shape is built and its word limit checked. A lead's length
must be bounded by construction, whatever the run gives: :func:`robustness_words` states a verdict's
robustness class in at most :data:`MAX_ROBUSTNESS_WORDS` words (no list of alternatives),
:func:`verdict_with_class` joins it to the verdict word, and :func:`capped` puts a free-text piece
(a label, a verdict word) in a lead only when it is short.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: The lead's word limit (issue #60). Words are counted as whitespace-separated tokens after the
#: MyST markup (``**``, ``{term}`` roles, link targets) is removed, the way a reader sees them.
MAX_LEAD_WORDS = 60

#: The dropdown's title, the same in every chapter so a reader learns where the numbers are.
DETAILS_TITLE = "Details: every interval behind this answer"

#: The most visible words :func:`robustness_words` returns, whatever the panel.
MAX_ROBUSTNESS_WORDS = 15


def visible_words(markdown: str) -> int:
    """Number of words a reader sees in a MyST Markdown string.

    Roles such as ``{term}`glossary entry``` count as their text, links ``[text](target)`` as their
    text, emphasis markers are dropped; the rest is split on whitespace.

    Parameters
    ----------
    markdown : str

    Returns
    -------
    int
    """
    text = re.sub(r"\{[a-z:]+\}`([^`<]*)(?:<[^>]*>)?`", r"\1", markdown)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.replace("**", " ").replace("`", " ")
    return len([w for w in text.split() if any(ch.isalnum() for ch in w)])


def answer_box(lead: str, details: str, *, max_lead_words: int = MAX_LEAD_WORDS) -> str:
    """Join a chapter answer's lead and its collapsed details into the box's Markdown body.

    Parameters
    ----------
    lead : str
        What to do and how sure, in at most ``max_lead_words`` visible words
        (see :func:`visible_words`). MyST Markdown, no dropdown of its own.
    details : str
        Everything behind the lead: the estimates with their intervals, the scope, what the
        run cannot settle. MyST Markdown; may be several paragraphs or a list.
    max_lead_words : int, default :data:`MAX_LEAD_WORDS`

    Returns
    -------
    str
        ``lead``, a blank line, then a ``:::{dropdown}`` titled :data:`DETAILS_TITLE` holding
        ``details``. Rendered inside the chapter's ``admonition`` by ``{glue:md}``.

    Raises
    ------
    ValueError
        If the lead is empty, longer than ``max_lead_words`` visible words, or already holds a
        dropdown; the message gives the count so the chapter's wording can be shortened.
    """
    lead, details = lead.strip(), details.strip()
    if not lead:
        raise ValueError("an answer box needs a lead: one or two sentences saying what to do and how sure.")
    if ":::" in lead:
        raise ValueError("the lead of an answer box holds no dropdown; pass the folded text as `details`.")
    n = visible_words(lead)
    if n > max_lead_words:
        raise ValueError(
            f"the answer box's lead has {n} words, more than {max_lead_words}; move the intervals and "
            f"scope into `details` and keep what to do and how sure. Lead: {lead!r}")
    if not details:
        return lead + "\n"
    return f"{lead}\n\n:::{{dropdown}} {DETAILS_TITLE}\n\n{details}\n\n:::\n"


def capped(text: str, max_words: int, fallback: str) -> str:
    """``text`` when it has at most ``max_words`` visible words, else ``fallback``.

    For a piece of a lead that comes from the run or the caller (a chunker's label, a verdict
    word): the lead stays within its limit whatever that piece is.

    Parameters
    ----------
    text : str
    max_words : int
    fallback : str
        Used instead of a longer ``text``; should itself have at most ``max_words`` words.

    Returns
    -------
    str
    """
    return text if visible_words(text) <= max_words else fallback


def robustness_words(robustness: Any) -> str:
    """A verdict's robustness class in a few words, for a lead.

    Unlike :meth:`chunkwise.evaluation.robustness.Robustness.describe`, which names every
    alternative that disagrees, this gives counts only, so it has at most
    :data:`MAX_ROBUSTNESS_WORDS` visible words for any panel, e.g. ``"fragile: 2 of 3 declared
    alternatives disagree"`` or ``"cannot tell: the run could detect about 10.0 points"``.

    Parameters
    ----------
    robustness : Robustness
        :func:`chunkwise.evaluation.robustness.classify`'s result (``cls``, ``primary``,
        ``alternatives``, ``flips``, ``delta``, ``unit``, ``not_run``).

    Returns
    -------
    str
    """
    n = len(robustness.alternatives)
    unit = capped(str(getattr(robustness, "unit", "points") or "points"), 2, "points")
    cls = robustness.cls
    if cls == "robust":
        text = f"robust: all {n} declared alternatives agree"
    elif cls == "fragile":
        text = f"fragile: {len(robustness.flips)} of {n} declared alternatives disagree"
    elif cls == "cannot tell":
        mde = float(robustness.primary.mde)
        text = (f"cannot tell: the run could detect about {mde:.1f} {unit}" if math.isfinite(mde)
                else "cannot tell: no sampling interval to size a detectable effect")
    elif cls == "no effect larger than delta":
        text = f"no effect larger than {robustness.delta:g} {unit}; all {n} alternatives agree"
    elif cls == "not assessed":
        text = "not assessed: no declared alternative could run here"
    else:
        text = capped(str(cls), 4, "robustness class in the details")
    not_run = len(getattr(robustness, "not_run", ()) or ())
    return text + (f"; {not_run} not run here" if not_run else "")


def verdict_with_class(verdict: str, robustness: Any, *, max_words: int = 4) -> str:
    """The verdict in bold with its robustness class, for a lead: ``"**no** (fragile: 1 of 2
    declared alternatives disagree)"``; a class that repeats the verdict is not repeated
    (``"**cannot tell** (the run could detect about 10.0 points)"``).

    At most ``max_words`` + :data:`MAX_ROBUSTNESS_WORDS` visible words: a verdict longer than
    ``max_words`` words is replaced by ``"see the details"``.

    Parameters
    ----------
    verdict : str
        The verdict's words (a plan entry's word, e.g. ``"no"``).
    robustness : Robustness
        As for :func:`robustness_words`.
    max_words : int, default 4

    Returns
    -------
    str
    """
    verdict = capped(str(verdict), max_words, "see the details")
    words = robustness_words(robustness)
    if words.startswith(f"{verdict}: "):
        words = words[len(verdict) + 2:]
    return f"**{verdict}** ({words})"
