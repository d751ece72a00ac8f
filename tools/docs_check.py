"""Load the built documentation site in a real headless browser and check what readers use.

Serves the built site (``mkdocs build`` output, default ``site/``) on 127.0.0.1 only, opens it
in Chromium through Playwright at 1280 x 900, and checks:

1. the landing page loads and names kvpool;
2. a clause URL with its anchor (``spec/segments/#SEG-5``) shows that clause in the window;
3. the search box puts each of ``SEARCH_CLAUSES`` first: the first result is the clause's page
   and its best section is the clause's anchor, with the highest score of all results;
4. the search box finds each name of ``SEARCH_NAMES`` on a page that documents it;
5. the divergence table (``reference/divergences/``) fits its content column: not wider than
   ``.md-content__inner``, no cell wider than it shows, no code word without a space split
   over two lines.

Screenshots of the clause page and of the divergence page are saved in the artifact folder
(default ``.ci/artifacts/``). Exit status 0 when every check passes, 1 otherwise (the failed
check is printed).

    python tools/docs_check.py [--site site] [--artifacts .ci/artifacts]
        [--browser /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CLAUSE, CLAUSE_PAGE = "SEG-5", "spec/segments/"
# Clause ID -> its page: a search for the ID shows that clause first. SWA-1 also has SWA-10..19
# on its page, DATA-1 a page titled "17. KV bytes: the data plane".
SEARCH_CLAUSES = {"SEG-5": "spec/segments/", "UNI-5": "spec/unified/", "DATA-1": "spec/data/",
                  "SWA-1": "spec/hybrid-swa/"}
# API name -> pages that document it; a search for the name finds one of them.
SEARCH_NAMES = {"conformance_test": ("reference/oracle/", "writing-a-target/"),
                "kvpool_capabilities": ("writing-a-target/",),
                "Capabilities": ("reference/oracle/", "writing-a-target/")}
DIVERGENCE_PAGE = "reference/divergences/"
# No network, no profile state, no background traffic: the site must stand alone.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 20_000


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def serve(site: Path) -> ThreadingHTTPServer:
    """Serve ``site`` on a free port of 127.0.0.1 from a daemon thread."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def check(base: str, artifacts: Path, browser_path: str) -> None:
    """Run the checks against the site at ``base``; raises AssertionError on a failure."""
    from playwright.sync_api import expect, sync_playwright

    artifacts.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvpool-docs-profile-") as profile, \
            sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=browser_path, headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))

            response = page.goto(base + "/")
            assert response is not None and response.ok, f"landing page: HTTP {response}"
            expect(page.locator("h1").first).to_contain_text("kvpool")
            print("ok  landing page loads")

            page.goto(f"{base}/{CLAUSE_PAGE}#{CLAUSE}")
            heading = page.locator(f"[id='{CLAUSE}']")
            expect(heading).to_be_visible()
            expect(heading).to_be_in_viewport()
            expect(heading).to_contain_text(CLAUSE)
            body = page.locator(f"[id='{CLAUSE}'] ~ p").first
            expect(body).to_contain_text("Boundary dedup")
            shot = artifacts / f"clause-{CLAUSE}.png"
            page.screenshot(path=str(shot))
            print(f"ok  {CLAUSE_PAGE}#{CLAUSE} shows the clause (screenshot {shot})")

            page.goto(base + "/", wait_until="networkidle")
            for clause, clause_page in SEARCH_CLAUSES.items():
                href = check_first_result(page, base, clause, clause_page)
                print(f"ok  search for {clause} puts it first: {href}")
            for name, pages in SEARCH_NAMES.items():
                href = check_found_on(page, base, name, pages)
                print(f"ok  search for {name} finds {href}")

            shot = artifacts / "divergences.png"
            width = check_table_fits(page, f"{base}/{DIVERGENCE_PAGE}", shot)
            print(f"ok  {DIVERGENCE_PAGE} table fits its column ({width}; screenshot {shot})")
            assert not errors, f"JavaScript errors: {errors}"
        finally:
            context.close()


def search(page: Any, query: str, tries: int = 4) -> Any:
    """Type ``query`` into the search box until results show; the locator of the result items.

    The search index loads in a web worker after the page: a query typed before it is ready
    can go unanswered, so the query is typed again (each try waits up to 5 s). Raises
    AssertionError when no try shows a result.
    """
    from playwright.sync_api import expect

    box = page.locator("input.md-search__input")
    items = page.locator(".md-search-result__item")
    for _ in range(tries):
        page.locator("label.md-search__icon, .md-search__input").first.click()
        box.fill("")
        box.press_sequentially(query, delay=50)
        try:
            expect(items.first).to_be_attached(timeout=5_000)
            return items
        except AssertionError:
            page.keyboard.press("Escape")
    raise AssertionError(f"the search box showed no result for {query!r} in {tries} tries")


def check_first_result(page: Any, base: str, clause: str, clause_page: str) -> str:
    """Search ``clause``: the first result is ``clause_page`` and the first section it shows
    (not folded away) is the clause's anchor, the highest-scored result of all; its href."""
    from playwright.sync_api import expect

    first = search(page, clause).first.locator(":scope > a.md-search-result__link")
    wanted = re.compile(rf"^{re.escape(base)}/{re.escape(clause_page)}(\?[^#]*)?#{clause}$")
    try:  # the results of the keystrokes before the last one may still be showing
        expect(first.nth(1)).to_have_attribute("href", wanted, timeout=5_000)
    except AssertionError:
        shown = [first.nth(k).get_attribute("href") for k in range(min(first.count(), 3))]
        raise AssertionError(f"search for {clause}: the first result shows {shown}, "
                             f"not {clause_page}#{clause} first") from None
    scores = page.eval_on_selector_all(
        ".md-search-result__link",
        "links => links.map(a => [a.getAttribute('href'), "
        "Number(a.querySelector('[data-md-score]').dataset.mdScore)])")
    best = max(scores, key=lambda item: item[1])
    assert best[0].endswith(f"#{clause}"), f"search for {clause}: {best[0]} scores highest"
    href: str = first.nth(1).get_attribute("href") or ""
    page.keyboard.press("Escape")
    return href


def check_found_on(page: Any, base: str, name: str, pages: tuple[str, ...]) -> str:
    """Search ``name``: some result links to one of ``pages``; that link's href."""
    items = search(page, name)
    links = items.locator("a.md-search-result__link")
    hrefs = [links.nth(k).get_attribute("href") or "" for k in range(links.count())]
    found = [h for h in hrefs if any(h.startswith(f"{base}/{p}") for p in pages)]
    assert found, f"search for {name}: no result on {pages}; results: {hrefs[:6]}"
    page.keyboard.press("Escape")
    return next((h for h in found if "#" in h), found[0])  # a section, where one is found


# The widest table of the page against the content column: their widths (px), the cells whose
# content is wider than the cell, the code words without a space that span two lines.
_TABLE_FIT = """() => {
  const column = document.querySelector('.md-content__inner').getBoundingClientRect();
  const tables = [...document.querySelectorAll('.md-content__inner table')];
  const table = tables.sort((a, b) => b.scrollWidth - a.scrollWidth)[0];
  const box = table.getBoundingClientRect();
  const cells = [...table.querySelectorAll('th, td')]
    .filter(c => c.scrollWidth > c.clientWidth).map(c => c.textContent.trim().slice(0, 40));
  const split = [...table.querySelectorAll('code')]
    .filter(c => !/\\s/.test(c.textContent))
    .filter(c => new Set([...c.getClientRects()].map(r => Math.round(r.top))).size > 1)
    .map(c => c.textContent);
  return {table: [box.left, box.right, box.width], column: [column.left, column.right,
          column.width], cells, split};
}"""


def check_table_fits(page: Any, url: str, shot: Path) -> str:
    """The widest table at ``url`` fits the content column (see ``_TABLE_FIT``); a screenshot
    of the page's top in ``shot``. Returns the widths, for the report."""
    page.goto(url, wait_until="networkidle")
    fit = page.evaluate(_TABLE_FIT)
    page.screenshot(path=str(shot))
    (left, right, width), (col_left, col_right, col_width) = fit["table"], fit["column"]
    assert width <= col_width + 0.5 and left >= col_left - 0.5 and right <= col_right + 0.5, \
        f"{url}: the table is {width:.0f} px wide, its column {col_width:.0f} px"
    assert not fit["cells"], f"{url}: cells whose content is cut off: {fit['cells'][:5]}"
    assert not fit["split"], f"{url}: code words split over two lines: {fit['split'][:5]}"
    return f"{width:.0f} px in a {col_width:.0f} px column"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=Path("site"))
    parser.add_argument("--artifacts", type=Path, default=Path(".ci/artifacts"))
    parser.add_argument("--browser", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"docs_check: no built site in {args.site} (run mkdocs build first)")
        return 1
    server = serve(args.site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        check(base, args.artifacts, args.browser)
    except AssertionError as exc:
        print(f"FAIL {exc}")
        return 1
    finally:
        server.shutdown()
    print("docs_check: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
