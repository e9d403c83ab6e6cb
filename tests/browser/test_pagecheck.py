"""The browser checks themselves (issue #60): small synthetic pages they must fail, and one they pass.

Each page imitates the book's layout (an ``article.bd-article`` of 676 px, the text column of the
theme at 1,280 px) and is served and opened in headless Chromium like the book's pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pagecheck as pc

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; }} article.bd-article {{ max-width: 696px; box-sizing: border-box; padding: 0 10px; }}
.output {{ overflow-x: auto; }} td, th {{ padding: 2px 8px; }}
</style></head><body><article class="bd-article"><h2>Section</h2>{body}</article></body></html>"""

GOOD = """<p>A table that fits, and a figure with a caption.</p>
<div class="output"><table><thead><tr><th>chunker</th><th>recall (%)</th></tr></thead>
<tbody><tr><td>Fixed 200</td><td>0.0</td></tr><tr><td>Semantic</td><td>–</td></tr></tbody></table></div>
<figure><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="100" height="50">
<figcaption>Fig. 1: what it shows</figcaption></figure>
<div class="cell_input"><pre>x = np.nan; y = -0.0</pre></div>"""


def _wide_table(px: int) -> str:
    return (f'<div class="output"><table style="width: {px}px"><thead><tr><th>chunker</th><th>recall</th></tr>'
            "</thead><tbody><tr><td>Fixed</td><td>80.1</td></tr></tbody></table></div>")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("Playwright's Python package is not installed (pip install -e '.[browser]')")
    chromium = pc.find_chromium()
    if chromium is None:
        pytest.skip("no Chromium executable (Debian: apt-get install chromium)")
    folder: Path = tmp_path_factory.mktemp("pages")
    pages = {
        "good.html": GOOD,
        "wide.html": "<p>Too wide.</p>" + _wide_table(1200),
        "nan.html": "<table><thead><tr><th>a</th></tr></thead><tbody><tr><td>nan</td></tr></tbody></table>"
                    "<p>The interval is [nan, 0.3].</p>",
        "negzero.html": "<table><thead><tr><th>delta</th></tr></thead><tbody><tr><td>-0.0</td></tr></tbody></table>",
        "snake.html": "<table><thead><tr><th>worst_mean</th><th>n</th></tr></thead>"
                      "<tbody><tr><td>1</td><td>2</td></tr></tbody></table>",
        "nocaption.html": '<div><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" width="100" height="50"></div>',
        "scroll.html": '<div style="width: 2000px; height: 10px"></div>',
        "cut.html": "<table><thead><tr><th>claim</th></tr></thead><tbody><tr><td>Semantic chunking costs...</td></tr>"
                    "</tbody></table>",
        "hidden.html": '<details><summary>more</summary>' + _wide_table(1200) + "</details>",
        "noscrollbox.html": '<div style="overflow: visible">' + _wide_table(600).replace('class="output"', "") + "</div>",
    }
    for name, body in pages.items():
        (folder / name).write_text(PAGE.format(body=body), encoding="utf-8")
    with pc.serve(folder) as base, pc.browser(chromium) as context:
        yield base, context


def test_a_clean_page_passes(site):
    base, context = site
    report = pc.check_page(context, base + "good.html")
    assert report.problems == []
    assert report.column == pytest.approx(676, abs=1)
    assert [t["headers"] for t in report.tables] == [["chunker", "recall (%)"]]


def test_a_too_wide_table_fails(site):
    base, context = site
    report = pc.check_page(context, base + "wide.html")
    assert len(report.problems) == 1, report.problems
    assert "table 1 under 'Section' is 1200 px wide, the text column 676 px" in report.problems[0]
    # The page itself does not scroll: the table scrolls inside its own box.
    assert report.page_width <= report.client_width


def test_a_too_wide_table_in_a_scrolling_box_passes_only_on_a_phone(site):
    base, context = site
    assert pc.check_page(context, base + "wide.html", 390, tables_must_fit=False).problems == []
    problems = pc.check_page(context, base + "noscrollbox.html", 390, tables_must_fit=False).problems
    assert any("no box around it scrolls" in p for p in problems), problems


@pytest.mark.parametrize(("page", "expected"), [
    ("nan.html", ["table 1 under 'Section' shows nan in 1 cell(s), e.g. 'nan'",
                  "text under 'Section' shows nan: ...The interval is [nan, 0.3]...."]),
    ("negzero.html", ["table 1 under 'Section' shows a negative zero in 1 cell(s), e.g. '-0.0'"]),
    ("snake.html", ["table 1 under 'Section' has raw snake_case column headers: worst_mean"]),
    ("cut.html", ["table 1 under 'Section' cuts 1 cell(s) short, e.g. 'Semantic chunking costs...'"]),
])
def test_each_kind_of_problem_is_named(site, page, expected):
    base, context = site
    assert pc.check_page(context, base + page).problems == expected


def test_a_figure_without_a_caption_fails(site):
    base, context = site
    problems = pc.check_page(context, base + "nocaption.html").problems
    assert len(problems) == 1 and problems[0].startswith("img ") and problems[0].endswith("has no caption"), problems


def test_a_page_that_scrolls_sideways_fails(site):
    base, context = site
    problems = pc.check_page(context, base + "scroll.html").problems
    assert len(problems) == 1 and problems[0].startswith("the page scrolls sideways at 1280 px"), problems


def test_a_table_in_a_closed_details_is_not_visible(site):
    base, context = site
    report = pc.check_page(context, base + "hidden.html")
    assert report.tables == [] and report.problems == []


def test_a_missing_page_is_a_problem(site):
    base, context = site
    problems = pc.check_page(context, base + "nowhere.html").problems
    assert problems == [f"{base}nowhere.html answered HTTP 404"]


def test_screenshot_of_an_element(site, tmp_path):
    base, context = site
    shot = tmp_path / "fig.png"
    assert pc.screenshot_element(context, base + "good.html", "figure", shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not pc.screenshot_element(context, base + "good.html", "div.admonition", tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()
