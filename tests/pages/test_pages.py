"""Every page of the built book, opened offline in headless Chromium, reads as it should.

Run by ``make pages`` (part of ``make test``) on the strict build's HTML, named by the
environment variable ``BOOK_HTML``; it is never skipped. On every page: the math is
typeset (no raw ``\\(``, ``\\[``, ``$$`` or ``$x$`` left in the text outside code), every image loads, no
cross-reference is left unresolved, every script and stylesheet is served by the book
itself (no CDN), and the browser console shows no errors.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

HTML = Path(os.environ.get("BOOK_HTML", "build/ci_book/_build/html")).resolve()
SKIP_PAGES = {"genindex.html", "search.html"}  # Sphinx's own index and search pages


def pages() -> list[Path]:
    if not (HTML / "index.html").is_file():
        raise FileNotFoundError(
            f"no built book at {HTML}: run `make strict` first, or set BOOK_HTML to a built book"
        )
    return sorted(
        p for p in HTML.rglob("*.html") if p.name not in SKIP_PAGES and "_static" not in p.parts
    )


_TYPESET = """
const done = arguments[arguments.length - 1];
if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
  MathJax.startup.promise.then(() => done('typeset'), (e) => done('error: ' + e));
} else { done(document.querySelector('script[src*="mathjax"]') ? 'not loaded' : 'no math'); }
"""


def test_the_book_has_pages():
    assert len(pages()) >= 2


@pytest.mark.parametrize("page", pages() if (HTML / "index.html").is_file() else [None],
                         ids=lambda p: str(p.relative_to(HTML)) if p else "no-book")  # fmt: skip
def test_page_reads_offline(visit, page):
    if page is None:
        pages()  # raises, naming the missing build
    html = page.read_text(encoding="utf-8")
    remote = re.findall(r'<(?:script|link)[^>]+(?:src|href)="((?:https?:)?//[^"]+)"', html)
    remote = [u for u in remote if not u.startswith(("https://github.com", "http://github.com"))]
    assert not remote, f"{page.name} loads from the network: {remote}"

    seen = visit(page)
    assert seen["typeset"] in ("typeset", "no math"), f"{page.name}: MathJax {seen['typeset']}"
    raw = [m for m in ("\\(", "\\[", "$$") if m in seen["body"]]
    assert not raw, f"{page.name}: untypeset math {raw} in the rendered text"
    dollars = re.findall(r"\$[^$\s][^$\n]{0,40}\$", seen["prose"])
    assert not dollars, (
        f"{page.name}: dollar math left as text (e.g. in a glued sentence): {dollars[:3]}"
    )
    assert not seen["broken"], f"{page.name}: images that do not load: {seen['broken']}"
    assert not seen["unresolved"], f"{page.name}: unresolved references {seen['unresolved']}"
    assert not seen["errors"], f"{page.name}: console errors {seen['errors']}"
