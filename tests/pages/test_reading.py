"""Every page of the built book shows its findings to a reader: checked in headless Chromium
at 1400 x 900, the size a reader's laptop shows, with every fold closed.

* A chapter (and the index) shows a figure on its first screens: its first figure starts
  above :data:`FIRST_FIGURE_PX`.
* No machine output in the reading path: no ``nan`` or ``None`` as a value, no Python dict,
  list or array ``repr``, no float with more than six significant digits, no raw TeX, no
  "1 seeds".
* No display equation is wider than its column.
* The text of every figure shows at :data:`MIN_TEXT_PX` CSS px or more at its displayed
  size: each PNG records the size of its smallest text in its own pixels
  (``lib.book.style.figure_png``), scaled here by the width the page gives the image.
* A chapter opens with one box of at most three bullets and :data:`BOX_WORDS` words.
* No page is taller than :data:`PAGE_PX`, the report no taller than :data:`REPORT_PX`.

``BOOK_HTML`` names the built book (the strict ``ci`` build by default; ``make book``'s
``_build/html`` for the book at its default scale).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from lib.book.style import MIN_FONT_KEY

from .test_pages import HTML, pages

FIRST_FIGURE_PX = 1800
MIN_TEXT_PX = 10.0
BOX_WORDS = 110
BOX_BULLETS = 3
PAGE_PX = 20_000
REPORT_PX = 15_000
MAX_SIGNIFICANT = 6


def reading_pages() -> list[Path]:
    return [p for p in pages() if p.name != "genindex.html"]


def _id(p):
    return str(p.relative_to(HTML)) if p else "no-book"


def is_chapter(page: Path) -> bool:
    return page.parent.name == "chapters" and not page.name.startswith("99_")


def is_report(page: Path) -> bool:
    return page.parent.name == "chapters" and page.name.startswith("99_")


# --------------------------------------------------------------------------- text rules

_RULES = [
    ("nan as a value", re.compile(r"\bnan\b", re.I)),
    ("None as a value", re.compile(r"\bNone\b(?! of)")),
    ("a dict repr", re.compile(r"\{\s*(?:'[^']*'|\"[^\"]*\"|-?\d+)\s*:")),
    ("a list repr", re.compile(r"\[\s*-?\d[\d.e+-]*\s*(?:,\s*-?\d[\d.e+-]*\s*){2,}\]")),
    ("a list of strings", re.compile(r"\[\s*'[^']*'\s*,")),
    ("an array or tensor repr", re.compile(r"\b(?:array|tensor|np\.\w+)\(|dtype=|object at 0x")),
    ("raw TeX", re.compile(r"\\(?:[A-Za-z]{2,}|[{}_^])")),
    (
        "a singular count with a plural noun",
        re.compile(
            r"(?<![\d.,\-])\b1 (?:logged |training |Adam |perturbed )?"
            r"(?:steps|seeds|claims|runs|instances|copies|chapters|cases)\b"
        ),
    ),
]


def significant_digits(number: str) -> int:
    digits = number.replace(".", "").lstrip("0")
    return len(digits)


_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def machine_output(text: str) -> list[str]:
    """What in ``text`` is machine output, as ``'<rule>: <excerpt>'``."""
    found = []
    for name, rule in _RULES:
        for m in rule.finditer(text):
            a, b = max(0, m.start() - 30), min(len(text), m.end() + 30)
            found.append(f"{name}: …{text[a:b]}…".replace("\n", " "))
    for m in _DECIMAL.finditer(text):
        if significant_digits(m.group()) > MAX_SIGNIFICANT:
            a, b = max(0, m.start() - 30), min(len(text), m.end() + 10)
            found.append(f"a {significant_digits(m.group())}-digit float: …{text[a:b]}…"
                         .replace("\n", " "))  # fmt: skip
    return found


def test_the_text_rules_find_machine_output_and_pass_prose():
    """The rules above, on planted machine output and on the book's own ways of writing."""
    planted = [
        "the leave step +nan [+nan, +nan]",
        "verdicts change in seeds None",
        "{'two': {0: 0.224}}",
        "final D [0.2010993, 0.3, 0.4]",
        "array([False, True])",
        "cosine 1.000000000000000",
        "moved by 1 logged steps",
        "a link to the \\gamma sweep",
    ]
    for text in planted:
        assert machine_output(text), text
    prose = ("None of the seeds moves. The rate is 0.38 [0.33, 0.44] over 3 of 5 seeds; "
             "1 logged step, 2 seeds, 0.1 seeds, 12345 steps, 3.2e-5, 0.123456, "
             "the value is — here, and γ = 1.")  # fmt: skip
    assert machine_output(prose) == []


# --------------------------------------------------------------------------- page checks


@pytest.fixture(scope="module")
def measured(visit):
    """The page as a reader sees it (:data:`conftest._MEASURE`), from its one visit."""
    return lambda page: visit(page)["measured"]


_PAGES = reading_pages() if (HTML / "index.html").is_file() else [None]


def _need(page):
    if page is None:
        pages()  # raises, naming the missing build


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_no_machine_output_in_the_reading_path(measured, page):
    _need(page)
    found = machine_output(measured(page)["text"])
    assert not found, f"{page.name}: " + "; ".join(found[:8])


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_a_figure_on_the_first_screens(measured, page):
    _need(page)
    if not (is_chapter(page) or page.name == "index.html"):
        pytest.skip("only chapters and the index open with a figure")
    first = measured(page)["first"]
    assert first is not None, f"{page.name} has no figure"
    assert first <= FIRST_FIGURE_PX, (
        f"{page.name}: the first figure starts at {first:.0f} px, below {FIRST_FIGURE_PX}: "
        "paste the chapter's key figure ({glue:figure}) right after its opening box"
    )


def _png_min_font(src: str) -> float | None:
    from PIL import Image

    path = Path(unquote(urlparse(src).path))
    with Image.open(path) as im:
        value = im.info.get(MIN_FONT_KEY) or getattr(im, "text", {}).get(MIN_FONT_KEY)
    return float(value) if value is not None else None


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_figure_text_is_readable_at_its_displayed_size(measured, page):
    _need(page)
    m = measured(page)
    small = []
    for img in m["images"]:
        src = img["src"]
        if not src.startswith("file:") or not src.lower().endswith(".png"):
            continue
        font = _png_min_font(src)
        if font is None:
            small.append(
                f"{Path(src).name}: no record of its text size (draw it with lib.book.style)"
            )
            continue
        shown = font * img["shown"] / img["natural"]
        if shown < MIN_TEXT_PX:
            small.append(f"{Path(src).name}: text at {shown:.1f} px")
    small += [f"slider text {t['text']!r} at {t['px']:.1f} px"
              for t in m["svgText"] if t["px"] < MIN_TEXT_PX]  # fmt: skip
    assert not small, f"{page.name}: figure text under {MIN_TEXT_PX} CSS px: " + "; ".join(small)


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_display_equations_fit_the_column(measured, page):
    _need(page)
    wide = [e for e in measured(page)["equations"] if e["width"] > e["column"] + 1]
    assert not wide, f"{page.name}: equations wider than the column: " + "; ".join(
        f"{e['width']} px in {e['column']} ({e['tex']!r})" for e in wide
    )


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_a_chapter_opens_with_one_short_box(measured, page):
    _need(page)
    if not is_chapter(page):
        pytest.skip("only chapters open with a box")
    boxes = measured(page)["boxes"]
    assert len(boxes) == 1, f"{page.name}: {len(boxes)} opening boxes (class 'finding'), want 1"
    (box,) = boxes
    assert box["words"] <= BOX_WORDS, f"{page.name}: the box has {box['words']} words"
    assert 1 <= box["bullets"] <= BOX_BULLETS, f"{page.name}: the box has {box['bullets']} bullets"


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_pages_are_not_too_tall(measured, page):
    _need(page)
    limit = REPORT_PX if is_report(page) else PAGE_PX
    height = measured(page)["height"]
    assert height <= limit, f"{page.name} is {height} px tall with its folds closed (limit {limit})"


@pytest.mark.parametrize("page", _PAGES, ids=_id)
def test_every_slider_moves_its_curves(visit, page):
    """A slider figure (lib.book.interactive) redraws its curves and its label when moved, in the
    built page, offline."""
    _need(page)
    sliders = visit(page)["sliders"]
    if not sliders:
        pytest.skip("no slider on this page")
    still = [s["title"] for s in sliders if s["positions"] > 1 and not s["changed"]]
    assert not still, f"{page.name}: sliders that do not redraw: {still}"
