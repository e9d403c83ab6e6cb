"""Links into the book's chapter pages: a section's MyST anchor and a chapter's short name.

The findings page (:mod:`chunkwise.findings`) and the advice page (:mod:`chunkwise.advice`) both
point readers to a chapter's section; both take the link from here, so neither imports the other
for it.
"""

from __future__ import annotations

import re

__all__ = ["chapter_number", "heading_anchor", "section_link"]


def heading_anchor(heading: str) -> str:
    """The anchor MyST gives a heading (``myst_heading_anchors``): lower case, punctuation dropped,
    spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def section_link(chapter: str, section: str) -> str:
    """A MyST link to a section of a chapter page (``generated/<chapter>.ipynb#<anchor>``)."""
    target = f"/generated/{chapter}.ipynb" + (f"#{heading_anchor(section)}" if section else "")
    label = chapter_number(chapter)
    return f"[{label}{': ' + section if section else ''}]({target})"


def chapter_number(chapter: str) -> str:
    """``"03b_crud_chunk_size"`` -> ``"chapter 3b"``; a stem without a leading number stays as it is."""
    m = re.match(r"(\d+)([a-z]?)_", chapter)
    return f"chapter {int(m.group(1))}{m.group(2)}" if m else chapter
