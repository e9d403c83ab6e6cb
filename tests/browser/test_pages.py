"""Every page of the built book, opened in headless Chromium as a reader would (issue #60).

At 1,280 px: no visible table wider than the text column, no visible ``nan`` or ``-0.0``, no raw
snake_case column header in a visible table, no table cell cut short with "...", every figure
with a caption, no sideways page scroll. At 390 px (a phone), the intro and chapter 1: the page
does not scroll sideways and a table wider than the column scrolls in a box of its own.
Screenshots of the intro, the findings page and every chapter's answer box go to
``book/_build/screens/``.

The book is ``book/_build/html`` (``make read`` builds it from the committed published run in
under a minute; ``make book`` from a fresh execution), or ``$CHUNKWISE_BOOK_HTML``. Without a
built book, Playwright's Python package (the ``browser`` extra) or a Chromium executable
(Debian: ``apt-get install chromium``), every test here is skipped with the reason; with
``CHUNKWISE_BROWSER_TESTS=required`` (CI, after the book build) they fail instead.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

import pagecheck as pc

ROOT = Path(__file__).resolve().parents[2]
BOOK_HTML = Path(os.environ.get("CHUNKWISE_BOOK_HTML", ROOT / "book" / "_build" / "html"))
SCREENS = BOOK_HTML.parent / "screens"
REQUIRED = os.environ.get("CHUNKWISE_BROWSER_TESTS", "") == "required"

#: Pages Sphinx makes that carry no content of the book (index.html only redirects to the intro).
NOT_CONTENT = {"index.html", "genindex.html", "search.html"}
#: The chapter also opened at a phone's width.
PHONE_CHAPTER = "generated/01_handbook_boundaries.html"
ANSWER_TITLE = "What this chapter finds"
#: Chapter pages known to fail the 1,280-px check, each with its reason; their 1,280-px test is an
#: expected failure (``xfail(strict=False)``), every other page stays required. Remove a page
#: from this list once its tables fit.
KNOWN_FAILING: dict[str, str] = {}  # chapter 6 passed in the ci-profile build at 6aa9caf (29 passed)


def _missing(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"{why} (CHUNKWISE_BROWSER_TESTS=required)")
    pytest.skip(why)


def _pages() -> list[str]:
    if not (BOOK_HTML / "intro.html").is_file():
        return []
    return sorted(
        rel
        for p in BOOK_HTML.rglob("*.html")
        if not (rel := p.relative_to(BOOK_HTML).as_posix()).startswith("_") and rel not in NOT_CONTENT
    )


PAGES = _pages()
CHAPTERS = [p for p in PAGES if p.startswith("generated/")]


@pytest.fixture(scope="module")
def site():
    """(base URL, browser context) for the built book; skipped when something is missing."""
    if not (BOOK_HTML / "intro.html").is_file():
        _missing(f"no built book at {BOOK_HTML} (run `make read` or `make book`)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _missing("Playwright's Python package is not installed (pip install -e '.[browser]')")
    chromium = pc.find_chromium()
    if chromium is None:
        _missing("no Chromium executable (Debian: apt-get install chromium; or set CHUNKWISE_CHROMIUM)")
    with pc.serve(BOOK_HTML) as base, pc.browser(chromium) as context:
        yield base, context


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_the_book_has_its_pages():
    if not PAGES:
        _missing(f"no built book at {BOOK_HTML} (run `make read` or `make book`)")
    assert "intro.html" in PAGES and "findings.html" in PAGES
    assert len(CHAPTERS) >= 8, CHAPTERS


def _page_params(pages: list[str]) -> list:
    """One parameter per page; a page in KNOWN_FAILING is an expected failure with its reason."""
    if not pages:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no built book"))]
    return [
        pytest.param(p, marks=pytest.mark.xfail(strict=False, reason=KNOWN_FAILING[p]))
        if p in KNOWN_FAILING
        else p
        for p in pages
    ]


@pytest.mark.parametrize("page", _page_params(PAGES))
def test_page_reads_at_1280px(site, page):
    base, context = site
    report = pc.check_page(context, base + page, 1280)
    assert report.column > 400, f"{page}: text column {report.column:.0f} px: the layout did not load"
    assert not report.problems, f"{page} at 1,280 px:\n  " + "\n  ".join(report.problems)


@pytest.mark.parametrize("page", ["intro.html", PHONE_CHAPTER])
def test_page_reads_at_390px(site, page):
    base, context = site
    shot = SCREENS / f"{Path(page).stem}-390px.png"
    report = pc.check_page(context, base + page, 390, tables_must_fit=False, screenshot=shot)
    assert 370 <= _png_size(shot)[0] <= 390  # less the scrollbar
    assert not report.problems, f"{page} at 390 px:\n  " + "\n  ".join(report.problems)


def test_screenshots(site):
    """The intro and findings pages whole, and every chapter's answer box, as PNGs."""
    base, context = site
    for page in ("intro.html", "findings.html"):
        shot = SCREENS / f"{Path(page).stem}.png"
        pc.check_page(context, base + page, 1280, screenshot=shot)
        width, height = _png_size(shot)
        assert 1250 <= width <= 1280 and height >= 900, (shot, width, height)  # less the scrollbar
    missing = []
    for page in CHAPTERS:
        shot = SCREENS / f"answer-{Path(page).stem}.png"
        if not pc.screenshot_element(context, base + page, "div.admonition", shot, has_text=ANSWER_TITLE):
            missing.append(page)
            continue
        width, height = _png_size(shot)
        assert 300 <= width <= 700 and height >= 60, (shot, width, height)
    assert not missing, f"chapters without a visible answer box ({ANSWER_TITLE!r}): {missing}"
