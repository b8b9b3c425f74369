"""The browser the page tests share: one headless Chromium at the reader's window size,
which opens each page of the built book once (:func:`visit`) and reads everything the
tests check on it. MathJax typesetting makes a page's load the costly part of these tests.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

WINDOW = (1400, 900)  # a reader's laptop


@pytest.fixture(scope="session")
def browser():
    """Chromium at the reader's window size, headless and offline, keeping the console log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        raise FileNotFoundError("chromedriver is missing: apt-get install chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--force-device-scale-factor=1"):  # fmt: skip
        opts.add_argument(arg)
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_script_timeout(60)
    driver.set_window_size(*WINDOW)
    yield driver
    driver.quit()


_TYPESET = """
const done = arguments[arguments.length - 1];
if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
  MathJax.startup.promise.then(() => done('typeset'), (e) => done('error: ' + e));
} else { done(document.querySelector('script[src*="mathjax"]') ? 'not loaded' : 'no math'); }
"""

# What the offline checks read (test_pages.py): the whole text, the prose outside code,
# images that did not load and cross-references left unresolved.
_OFFLINE = """
const b = document.body.cloneNode(true);
b.querySelectorAll('pre, code, script, .highlight').forEach(e => e.remove());
return {body: document.body.innerText, prose: b.innerText,
  broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
  unresolved: [...document.querySelectorAll('span.xref, span.pending_xref')]
    .filter(e => !e.closest('a')).map(e => e.textContent)};
"""

_READY = """
const done = arguments[arguments.length - 1];
const imgs = [...document.images].map(i => i.complete ? null :
  new Promise(r => { i.onload = i.onerror = r; }));
const math = (window.MathJax && MathJax.startup && MathJax.startup.promise) ?
  MathJax.startup.promise : Promise.resolve();
Promise.all([math, ...imgs.filter(Boolean)]).then(() => done('ready'), e => done('error ' + e));
"""

# The page as a reader sees it: the article's visible text, without code cells (innerText
# leaves out closed folds), and the measurements the checks of test_reading.py read.
_MEASURE = """
const art = document.querySelector('article') || document.querySelector('main') || document.body;
const clone = art.cloneNode(true);
clone.querySelectorAll('.cell_input, .highlight, pre, code, script, style, .headerlink')
  .forEach(e => e.remove());
const y = window.scrollY;
const figs = [...art.querySelectorAll('img, .book-slider-figure svg, figure')]
  .filter(e => e.getBoundingClientRect().height > 20);
const first = figs.length ? figs[0].getBoundingClientRect().top + y : null;
const images = [...art.querySelectorAll('img')].map(i => ({
  src: i.currentSrc || i.src, natural: i.naturalWidth,
  shown: i.getBoundingClientRect().width}));
const svgText = [...art.querySelectorAll('svg text')].map(t => {
  const svg = t.ownerSVGElement; const vb = svg.viewBox && svg.viewBox.baseVal;
  const scale = (vb && vb.width) ? svg.getBoundingClientRect().width / vb.width : 1;
  return {text: t.textContent, px: parseFloat(getComputedStyle(t).fontSize) * scale};
}).filter(t => t.text.trim());
const equations = [...art.querySelectorAll('mjx-container[display="true"]')].map(m => ({
  width: m.scrollWidth, column: m.clientWidth,
  tex: (m.getAttribute('aria-label') || m.textContent).slice(0, 60)}));
const boxes = [...art.querySelectorAll('div.admonition.finding')].map(b => ({
  words: b.innerText.replace(/^\\s*[^\\n]*\\n/, '').split(/\\s+/).filter(Boolean).length,
  bullets: b.querySelectorAll(':scope > ul > li, :scope > ol > li').length}));
return {text: clone.innerText, first: first, images: images, svgText: svgText,
        equations: equations, boxes: boxes,
        height: document.documentElement.scrollHeight};
"""

_SLIDERS = """
const out = [];
for (const fig of document.querySelectorAll('.book-slider-figure')) {
  const s = fig.querySelector('input[type=range]');
  const live = () => [...fig.querySelectorAll('path[stroke-width]')].map(p => p.getAttribute('d'));
  const label = () => fig.querySelector('output').textContent;
  const move = v => { s.value = v; s.dispatchEvent(new Event('input')); return [live(), label()]; };
  const [a, la] = move(s.min), [b, lb] = move(s.max);
  out.push({changed: JSON.stringify(a) !== JSON.stringify(b) && la !== lb,
            positions: +s.max - +s.min + 1, title: fig.innerText.split('\\n')[0]});
}
return out;
"""


@pytest.fixture(scope="session")
def visit(browser):
    """``visit(page)``: the page opened once, when its images have loaded and its math is
    typeset, as a dict: ``typeset`` (MathJax's state), the offline checks' readings
    (:data:`_OFFLINE`), ``errors`` (severe console messages), ``measured``
    (:data:`_MEASURE`) and ``sliders`` (:data:`_SLIDERS`, read last: it moves them)."""
    cache: dict[Path, dict] = {}

    def get(page: Path) -> dict:
        if page not in cache:
            browser.get_log("browser")  # drop what earlier pages left
            browser.get(page.as_uri())
            state = browser.execute_async_script(_READY)
            assert state == "ready", f"{page.name}: {state}"
            seen = browser.execute_script(_OFFLINE)
            seen["typeset"] = browser.execute_async_script(_TYPESET)
            seen["measured"] = browser.execute_script(_MEASURE)
            seen["sliders"] = browser.execute_script(_SLIDERS)
            log = browser.get_log("browser")
            seen["errors"] = [e["message"] for e in log if e["level"] == "SEVERE"]
            cache[page] = seen
        return cache[page]

    return get
