"""A chapter's answer box: a short lead a practitioner can act on, the intervals folded below it.

Every chapter opens with an admonition titled "What this chapter finds" whose body is glued from
the chapter's ``chapter_answer``. Issue #60 asked that a reader who stops there knows what to do
and how sure the book is, so the body has two parts:

* a **lead** of at most :data:`MAX_LEAD_WORDS` words (what to do, how sure: the verdict and its
  robustness class), and
* the **details** (every estimate with its interval, the scope, the amendments) in a collapsed
  sphinx-design ``dropdown`` the reader opens on demand.

:func:`answer_box` is the one place that shape is built and its word limit checked.
"""

from __future__ import annotations

import re

#: The lead's word limit (issue #60). Words are counted as whitespace-separated tokens after the
#: MyST markup (``**``, ``{term}`` roles, link targets) is removed, the way a reader sees them.
MAX_LEAD_WORDS = 60

#: The dropdown's title, the same in every chapter so a reader learns where the numbers are.
DETAILS_TITLE = "Details: every interval behind this answer"


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
