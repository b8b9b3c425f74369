"""The library cites the book's equations and sections by their MyST labels, never by
number, and every label it cites exists in a chapter."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABEL = re.compile(r"``((?:eq|sec)-[a-z0-9-]+)``")


def chapter_labels() -> set[str]:
    found = set()
    for page in (ROOT / "chapters").glob("*.md"):
        text = page.read_text(encoding="utf-8")
        found |= set(re.findall(r"^\((sec-[a-z0-9-]+)\)=$", text, re.M))
        found |= set(re.findall(r"^\$\$ \((eq-[a-z0-9-]+)\)$", text, re.M))
    return found


def test_every_label_the_library_cites_is_in_a_chapter():
    labels = chapter_labels()
    cited = {
        (path.relative_to(ROOT).as_posix(), name)
        for path in (ROOT / "lib").rglob("*.py")
        for name in LABEL.findall(path.read_text(encoding="utf-8"))
    }
    assert cited, "the library cites no label: the pattern no longer matches"
    missing = sorted((path, name) for path, name in cited if name not in labels)
    assert not missing, f"labels cited in lib/ but defined in no chapter: {missing}"


def test_every_equation_reference_on_a_page_has_its_label():
    labels = chapter_labels()
    for page in sorted((ROOT / "chapters").glob("*.md")):
        refs = set(re.findall(r"\{eq\}`(eq-[a-z0-9-]+)`", page.read_text(encoding="utf-8")))
        assert refs <= labels, f"{page.name} refers to missing equations: {sorted(refs - labels)}"


def test_the_library_cites_no_section_by_number():
    numbered = re.compile(r"\bSections? \d")
    hits = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "lib").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if numbered.search(line)
    ]
    assert not hits, f"cite the section's label (``sec-...``), not its number: {hits}"
