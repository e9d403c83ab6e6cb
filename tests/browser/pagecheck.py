"""The book as a reader sees it: built pages opened in a real (headless) Chromium and measured.

Used by ``tests/browser/test_pages.py`` (every page of the built book) and
``tests/browser/test_pagecheck.py`` (the checks themselves, on small synthetic pages).

- :func:`serve` serves a folder on 127.0.0.1 (an ``http.server`` on a thread, shut down on
  every path out of the ``with`` block);
- :func:`browser` starts Debian's Chromium headless through Playwright's Python package
  (``executable_path``: no browser download), in a fresh profile folder, closed on every path;
- :func:`check_page` opens one URL at one viewport width and returns the problems a reader
  would see: a visible table wider than the text column, a visible ``nan`` or ``-0.0``, a raw
  snake_case column header in a visible table, a table cell cut short with "...", a figure
  (image or framed drawing) without a caption, a page that scrolls sideways. An empty list
  means the page passed.

Nothing here is timed: a page is measured after its ``load`` event and MathJax's typesetting.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Where the system browser is looked for (CHUNKWISE_CHROMIUM overrides).
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")

#: Chromium as the machine notes say it runs here: headless, as root, with no network besides
#: localhost (the background-networking flags stop its refused connections to Google's hosts).
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

#: A table may be this many CSS pixels wider than the column (sub-pixel rounding of borders).
TOLERANCE_PX = 1.0

#: The page height a viewport is given; widths are what the checks are about.
VIEWPORT_HEIGHT = 900


def find_chromium() -> str | None:
    """The Chromium executable: ``$CHUNKWISE_CHROMIUM`` or the first of :data:`CHROMIUM_CANDIDATES`."""
    env = os.environ.get("CHUNKWISE_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for path in CHROMIUM_CANDIDATES:
        if Path(path).is_file():
            return path
    return shutil.which("chromium")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve(folder: str | os.PathLike[str]) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 at a free port; yields the base URL (ending in ``/``)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="book-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def browser(executable: str) -> Iterator[Any]:
    """A headless Chromium (Playwright, system executable) in a fresh profile; yields a context.

    The context, the browser, Playwright's driver process and the profile folder are closed and
    removed on every path out of the ``with`` block. Playwright reads the browser's output
    itself; its driver writes to this process's stderr (captured by pytest).
    """
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="chunkwise-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=executable,
                headless=True,
                args=list(CHROMIUM_ARGS),
                # Playwright hides scrollbars in headless mode; a reader's browser shows one, and
                # it takes its width from the page (1,280 px leaves 1,265 for the layout).
                ignore_default_args=["--hide-scrollbars"],
                viewport={"width": 1280, "height": VIEWPORT_HEIGHT},
                device_scale_factor=1,
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


# What the page reports about itself. Visible: rendered with a box (not display:none, not in a
# closed <details> or a folded solution) and not visibility:hidden.
_PROBE_JS = r"""
() => {
  const visible = el => {
    if (!el.getClientRects().length) return false;
    if (el.checkVisibility && !el.checkVisibility({visibilityProperty: true})) return false;
    const closed = el.closest('details:not([open])');
    if (closed && !el.closest('summary')) return false;
    for (let a = el; a; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.visibility === 'hidden' || s.display === 'none') return false;
    }
    return true;
  };
  const clean = t => (t || '').replace(/\s+/g, ' ').trim();
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const acs = getComputedStyle(article);
  const column = article.getBoundingClientRect().width
      - parseFloat(acs.paddingLeft) - parseFloat(acs.paddingRight);
  const heading = el => {
    // the nearest heading before el in document order
    const hs = [...article.querySelectorAll('h1, h2, h3, h4')];
    let best = '';
    for (const h of hs) {
      if (h.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) best = clean(h.textContent).replace(/#$/, '');
    }
    return best;
  };
  const tables = [];
  let n = 0;
  for (const t of article.querySelectorAll('table')) {
    if (!visible(t)) continue;
    n += 1;
    const headers = [...t.querySelectorAll('thead th')].map(th => clean(th.textContent));
    const cells = [...t.querySelectorAll('td, th')].map(c => clean(c.textContent));
    let scrollBox = false;
    for (let a = t.parentElement; a && a !== article; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if ((ox === 'auto' || ox === 'scroll') && a.getBoundingClientRect().width <= column + 1) { scrollBox = true; break; }
    }
    tables.push({
      index: n,
      width: t.getBoundingClientRect().width,
      scrollBox: scrollBox,
      heading: heading(t),
      headers: headers,
      cells: cells,
    });
  }
  // Visible text outside code listings (a chapter's code cells may say np.nan).
  const texts = [];
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || !clean(node.textContent)) continue;
    if (el.closest('.cell_input, script, style, mjx-container, .MathJax')) continue;
    if (el.closest('pre, code') && !el.closest('.cell_output')) continue;
    if (el.closest('table')) continue;  // tables are read cell by cell above
    if (!visible(el)) continue;
    texts.push({text: clean(node.textContent), heading: heading(el)});
  }
  const figures = [];
  for (const media of article.querySelectorAll('img, iframe')) {
    if (!visible(media)) continue;
    const fig = media.closest('figure');
    let caption = fig ? clean((fig.querySelector('figcaption') || {}).textContent) : '';
    if (!caption) {
      // chunkwise.book.html_frame: <div><iframe ...><p class="caption">...</p></div>
      const box = media.parentElement;
      const p = box && box.querySelector(':scope > p.caption');
      caption = p ? clean(p.textContent) : '';
    }
    figures.push({
      kind: media.tagName.toLowerCase(),
      src: (media.getAttribute('src') || media.getAttribute('title') || '').slice(-60),
      caption: caption,
      heading: heading(media),
    });
  }
  const root = document.documentElement;
  return {
    column: column,
    viewport: window.innerWidth,
    pageWidth: Math.max(root.scrollWidth, document.body.scrollWidth),
    clientWidth: root.clientWidth,
    tables: tables,
    texts: texts,
    figures: figures,
  };
}
"""

#: A missing value as pandas, numpy or an f-string prints it.
NAN = re.compile(r"(?<![A-Za-z])(?:nan|NaN|NAN|<NA>)(?![A-Za-z])")
#: A negative zero: "-0", "-0.0", "-0.000" (ASCII or Unicode minus), not "-0.05" nor "2026-01".
NEG_ZERO = re.compile(r"(?<![\w.])[-\u2212]0(?:\.0+)?(?![.\d])")
#: A raw code name as a column header: lower or mixed case words joined by underscores.
SNAKE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$")


@dataclass
class PageReport:
    """What :func:`check_page` measured on one page, and the problems found."""

    url: str
    width: int
    column: float
    page_width: float
    client_width: float
    tables: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _where(heading: str) -> str:
    return f"under {heading!r}" if heading else "before the first heading"


def problems_from_probe(probe: dict[str, Any], *, width: int, tables_must_fit: bool = True) -> list[str]:
    """Turn the page's measurements (:data:`_PROBE_JS`'s result) into readable problems."""
    problems: list[str] = []
    column = float(probe["column"])
    if probe["pageWidth"] > probe["clientWidth"] + TOLERANCE_PX:
        problems.append(
            f"the page scrolls sideways at {width} px: {probe['pageWidth']:.0f} px of content in "
            f"a {probe['clientWidth']:.0f}-px window"
        )
    for t in probe["tables"]:
        label = f"table {t['index']} {_where(t['heading'])}"
        cols = ", ".join(t["headers"][:8]) + (", ..." if len(t["headers"]) > 8 else "")
        if t["width"] > column + TOLERANCE_PX:
            if tables_must_fit:
                problems.append(
                    f"{label} is {t['width']:.0f} px wide, the text column {column:.0f} px (columns: {cols})"
                )
            elif not t["scrollBox"]:
                problems.append(
                    f"{label} is {t['width']:.0f} px wide, the text column {column:.0f} px, and no box "
                    f"around it scrolls (columns: {cols})"
                )
        cut = [c for c in t["cells"] if c.endswith(("...", "\u2026")) and len(c) > 3]
        if cut:
            problems.append(f"{label} cuts {len(cut)} cell(s) short, e.g. {cut[0][-60:]!r}")
        snake = sorted({h for h in t["headers"] if SNAKE.match(h)})
        if snake:
            problems.append(f"{label} has raw snake_case column headers: {', '.join(snake)}")
        nan = [c for c in t["cells"] if NAN.search(c)]
        if nan:
            problems.append(f"{label} shows nan in {len(nan)} cell(s), e.g. {nan[0]!r}")
        negz = [c for c in t["cells"] if NEG_ZERO.search(c)]
        if negz:
            problems.append(f"{label} shows a negative zero in {len(negz)} cell(s), e.g. {negz[0]!r}")
    for x in probe["texts"]:
        for name, pat in (("nan", NAN), ("a negative zero", NEG_ZERO)):
            m = pat.search(x["text"])
            if m:
                s = x["text"]
                snippet = s[max(0, m.start() - 40): m.end() + 40]
                problems.append(f"text {_where(x['heading'])} shows {name}: ...{snippet}...")
    for f in probe["figures"]:
        if not f["caption"]:
            problems.append(f"{f['kind']} {f['src']!r} {_where(f['heading'])} has no caption")
    return problems


def _settle(page: Any) -> None:
    """Wait for the load event, web fonts and MathJax's first typesetting (no timers)."""
    page.wait_for_load_state("load")
    page.evaluate("() => document.fonts ? document.fonts.ready.then(() => true) : true")
    page.evaluate(
        "() => (window.MathJax && MathJax.startup && MathJax.startup.promise) "
        "? MathJax.startup.promise.then(() => true) : true"
    )


def check_page(context: Any, url: str, width: int = 1280, *, tables_must_fit: bool = True,
               screenshot: str | os.PathLike[str] | None = None) -> PageReport:
    """Open ``url`` at ``width`` CSS pixels and return what a reader would find wrong.

    Parameters
    ----------
    context : playwright BrowserContext
        From :func:`browser`.
    url : str
    width : int
        Viewport width in CSS pixels (1,280: a laptop; 390: a phone).
    tables_must_fit : bool
        Whether a visible table wider than the text column is a problem. False (a phone's
        width): such a table must sit in a box of its own that scrolls sideways, and the page
        itself still must not.
    screenshot : path, optional
        Save the whole page as a PNG there.
    """
    page = context.new_page()
    try:
        page.set_viewport_size({"width": width, "height": VIEWPORT_HEIGHT})
        response = page.goto(url, wait_until="load")
        if response is None or not response.ok:
            status = None if response is None else response.status
            return PageReport(url, width, 0.0, 0.0, 0.0, problems=[f"{url} answered HTTP {status}"])
        _settle(page)
        probe = page.evaluate(_PROBE_JS)
        if screenshot is not None:
            Path(screenshot).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        return PageReport(
            url=url,
            width=width,
            column=float(probe["column"]),
            page_width=float(probe["pageWidth"]),
            client_width=float(probe["clientWidth"]),
            tables=[{k: t[k] for k in ("index", "width", "heading", "headers", "scrollBox")} for t in probe["tables"]],
            problems=problems_from_probe(probe, width=width, tables_must_fit=tables_must_fit),
        )
    finally:
        page.close()


def screenshot_element(context: Any, url: str, selector: str, path: str | os.PathLike[str],
                       width: int = 1280, has_text: str | None = None) -> bool:
    """Save a PNG of the first visible element matching ``selector`` (and containing ``has_text``).

    Returns False (and saves nothing) when the page has no such visible element.
    """
    page = context.new_page()
    try:
        page.set_viewport_size({"width": width, "height": VIEWPORT_HEIGHT})
        page.goto(url, wait_until="load")
        _settle(page)
        loc = page.locator(selector)
        if has_text is not None:
            loc = loc.filter(has_text=has_text)
        loc = loc.first
        if loc.count() == 0 or not loc.is_visible():
            return False
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        loc.screenshot(path=str(path))
        return True
    finally:
        page.close()
