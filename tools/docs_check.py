"""Load the built documentation site in a real headless browser and check what readers use.

Serves the built site (``mkdocs build`` output, default ``site/``) on 127.0.0.1 only, opens it
in Chromium through Playwright, and checks:

1. the landing page loads and names kvpool;
2. a clause URL with its anchor (``spec/segments/#SEG-5``) shows that clause in the window;
3. the search box finds SEG-5 and its result links to that clause.

A screenshot of the clause page is saved in the artifact folder (default ``.ci/artifacts/``).
Exit status 0 when every check passes, 1 otherwise (the failed check is printed).

    python tools/docs_check.py [--site site] [--artifacts .ci/artifacts]
        [--browser /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CLAUSE, CLAUSE_PAGE = "SEG-5", "spec/segments/"
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
    """Run the three checks against the site at ``base``; raises AssertionError on a failure."""
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
            result = find_in_search(page, CLAUSE)
            href = result.get_attribute("href") or ""
            assert CLAUSE_PAGE.rstrip("/") in href, f"search's {CLAUSE} result links to {href}"
            print(f"ok  search for {CLAUSE} finds {href}")
            assert not errors, f"JavaScript errors: {errors}"
        finally:
            context.close()


def find_in_search(page: Any, query: str, tries: int = 4) -> Any:
    """Type ``query`` into the search box until a result links to ``#query``; the result.

    The search index loads in a web worker after the page: a query typed before it is ready
    can go unanswered, so the query is typed again (each try waits up to 5 s). Raises
    AssertionError when no try shows such a result.
    """
    from playwright.sync_api import expect

    box = page.locator("input.md-search__input")
    result = page.locator(f".md-search-result__item a[href*='#{query}']").first
    for _ in range(tries):
        page.locator("label.md-search__icon, .md-search__input").first.click()
        box.fill("")
        box.press_sequentially(query, delay=50)
        try:
            expect(result).to_be_attached(timeout=5_000)
            return result
        except AssertionError:
            page.keyboard.press("Escape")
    raise AssertionError(f"the search box found no result linking to #{query} in {tries} tries")


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
