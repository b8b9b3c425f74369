"""Stamps: the hash of everything a chapter's outputs depend on (see :mod:`lib.book`),
and the ``lib`` modules a chapter imports, transitively, found by parsing the imports.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import json
import os
import platform
from pathlib import Path

from .notebook import ROOT, STAMP_KEY, BuildError, check_chapter

PACKAGE = "lib"


def _module_file(pkg: Path, name: str) -> Path | None:
    """The file of module ``name`` (dotted, relative to the package; "" is the package)."""
    base = pkg.joinpath(*name.split(".")) if name else pkg
    for f in (base.with_suffix(".py") if name else None, base / "__init__.py"):
        if f is not None and f.is_file():
            return f
    return None


def _imported_modules(
    source: str,
    package: str = PACKAGE,
    current: str | None = None,
    is_package: bool = False,
    pkg: Path | None = None,
) -> set[str]:
    """Dotted names (relative to ``package``; "" is the package itself) of the package
    modules that ``source`` imports, with every parent package they import on the way.

    ``current`` is the importing module's dotted name inside the package (None for code
    outside it, such as a chapter); relative imports are resolved against it.
    """
    pkg = ROOT / package if pkg is None else pkg
    found: set[str] = set()

    def add(parts: list[str]) -> None:
        for i in range(len(parts) + 1):
            found.add(".".join(parts[:i]))

    here = current.split(".") if current else []
    if current is not None and not is_package:
        here = here[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == package:
                    add(parts[1:])
        elif isinstance(node, ast.ImportFrom):
            mod = [p for p in (node.module or "").split(".") if p]
            if node.level == 0:
                if not mod or mod[0] != package:
                    continue
                base = mod[1:]
            elif current is None:
                continue
            else:
                base = here[: len(here) - (node.level - 1)] + mod
            add(base)
            for a in node.names:  # from lib import engine  /  from . import ch07
                sub = ".".join(base + [a.name])
                if _module_file(pkg, sub) is not None:
                    add(base + [a.name])
    return found


def lib_closure(source: str, root: Path = ROOT, package: str = PACKAGE) -> list[Path]:
    """The ``package`` module files that ``source`` imports, transitively, sorted."""
    pkg = root / package
    seen: set[str] = set()
    files: set[Path] = set()
    todo = _imported_modules(source, package, pkg=pkg)
    while todo:
        name = todo.pop()
        f = _module_file(pkg, name)
        if name in seen or f is None:
            continue
        seen.add(name)
        files.add(f)
        text = f.read_text(encoding="utf-8")
        is_pkg = f.name == "__init__.py"
        todo |= _imported_modules(text, package, current=name, is_package=is_pkg, pkg=pkg) - seen
    return sorted(files)


def environment_fingerprint() -> str:
    """Python version and every installed distribution with its version."""
    metas = [d.metadata for d in importlib.metadata.distributions()]  # each parsed once
    dists = sorted({f"{m['Name']}=={m['Version']}".lower() for m in metas})
    return f"python {platform.python_version()}\n" + "\n".join(dists)


def chapter_stamp(
    md: Path, scale: str, device: str, root: Path = ROOT, env: str | None = None
) -> str:
    """Hash of everything the outputs of chapter ``md`` depend on (see the module docstring)."""
    source = md.read_text(encoding="utf-8")
    nb = check_chapter(md)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    try:
        modules = lib_closure(code, root)
    except SyntaxError as err:
        raise BuildError(
            f"{md}: a code cell is not valid Python ({err.msg}, line {err.lineno})"
        ) from None
    pkg = root / PACKAGE
    data = [f for f in sorted(pkg.rglob("*")) if f.is_file() and f.suffix not in (".py", ".pyc")]
    extra = [root / n for n in ("pyproject.toml", "requirements.txt", "requirements-data.txt")]
    h = hashlib.sha256()
    h.update(source.encode())
    for f in modules + data + extra:
        if f.exists() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    h.update((env if env is not None else environment_fingerprint()).encode())
    h.update(f"scale={scale};device={device}".encode())
    perturb = os.environ.get("BOOK_PERTURB", "").strip()
    if perturb:  # a perturbed run's numbers are its own (lib.env.perturbation)
        h.update(f";perturb={perturb}".encode())
    return h.hexdigest()


def notebook_stamp(path: Path) -> str | None:
    """The stamp stored in an executed notebook, or None (missing or unreadable)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))["metadata"].get(STAMP_KEY)
    except (OSError, ValueError, KeyError):
        return None
