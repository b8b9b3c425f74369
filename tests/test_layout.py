"""The library's layout: every module does one job in at most 500 lines, no two modules
import each other (directly or around a circle), the layers import only downward, and
training runs start in one layer.

The imports are read with ``ast``, at module level and inside functions alike (an import
moved into a function to dodge a circle is still a circle). :func:`layout_problems` takes
a package folder, so the tests below plant a circle and a long module in a toy package and
watch the check fail.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "lib"
MAX_LINES = 500
# Bottom up, each layer ranked strictly: a module imports from its own layer and the layers
# before it, never from a later one. What a page shows (``book``: claims, the formatter,
# the style) imports no science layer, so it comes first; the experiments, which draw with
# it and start the runs, come last. The modules beside the layers (lib.env, lib.process)
# import no layer. The build of the book is a package of its own, ``bookbuild``, which
# imports ``lib`` and is never imported by it.
LAYERS = ("book", "data", "training", "measure", "theory", "experiments")
BUILD = "bookbuild"
# Where training runs start: the chapters' experiment modules (and the chapters above them).
RUN_STARTERS = ("experiments",)


def _modules(root: Path) -> dict[str, Path]:
    """Dotted name of every module of the package folder ``root`` (packages by their
    ``__init__.py``), e.g. ``lib.measure.onsets``."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


@functools.cache
def _parse(source: str) -> ast.Module:
    """The syntax tree of a module's source (the library's modules are read by several tests;
    a source that changes is parsed again)."""
    return ast.parse(source)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    here = module.split(".") if is_package else module.split(".")[:-1]
    here = here[: len(here) - (node.level - 1)]
    return ".".join(here + ([node.module] if node.module else []))


def module_imports(root: Path) -> dict[str, dict[str, set[str]]]:
    """For every module under ``root``: the modules of the package it imports (a name
    imported from a package counts as an import of the package, unless it is a module of
    it), and the names it takes from each, wherever in the file the import stands."""
    mods = _modules(root)
    out: dict[str, dict[str, set[str]]] = {}
    for name, path in mods.items():
        deps: dict[str, set[str]] = {}
        for node in ast.walk(_parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods:
                        deps.setdefault(a.name, set())
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, name, path.name == "__init__.py")
                for a in node.names:
                    if f"{base}.{a.name}" in mods:
                        deps.setdefault(f"{base}.{a.name}", set())
                    elif base in mods:
                        deps.setdefault(base, set()).add(a.name)
        deps.pop(name, None)
        out[name] = deps
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan), as the list of
    modules along it, the first repeated at the end."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(set(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    circles = []
    for group in groups:
        start = min(group)
        path, seen = [start], {start}
        while True:  # walk inside the group until it comes back to a module on the path
            nxt = min(w for w in graph[path[-1]] if w in group)
            if nxt in seen:
                circles.append(path[path.index(nxt) :] + [nxt])
                break
            path.append(nxt)
            seen.add(nxt)
    return circles


def layout_problems(root: Path, max_lines: int = MAX_LINES) -> list[str]:
    """Every module of the package folder ``root`` longer than ``max_lines`` lines, and every
    circle of imports, named module by module."""
    problems = []
    for name, path in _modules(root).items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > max_lines:
            problems.append(f"{name} has {n} lines (at most {max_lines})")
    graph = {m: set(d) for m, d in module_imports(root).items()}
    for circle in _cycles(graph):
        problems.append("import circle: " + " -> ".join(circle))
    return problems


def layer_problems(root: Path, layers=LAYERS) -> list[str]:
    """Every import of a module from a later layer than its own (a module beside the
    layers, such as ``lib.env``, ranks below every layer)."""
    pkg = root.name
    rank = {f"{pkg}.{layer}": i for i, layer in enumerate(layers)}

    def rank_of(module):
        parts = module.split(".")
        return rank.get(".".join(parts[:2]), -1 if len(parts) <= 2 else None)

    out = []
    for module, deps in module_imports(root).items():
        mine = rank_of(module)
        for dep in deps:
            theirs = rank_of(dep)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{module} imports {dep}, a layer above it")
    return sorted(out)


def imports_of(root: Path, package: str) -> list[str]:
    """Every import of ``package`` (or a module in it) by a module of the folder ``root``."""
    out = []
    for module, path in _modules(root).items():
        for node in ast.walk(_parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            out += [f"{module} imports {n}" for n in names if n.split(".")[0] == package]
    return sorted(out)


def run_starters(root: Path, engine: str = "lib.training.engine") -> set[str]:
    """The modules that start a training run: they take ``train`` from ``engine``, or call
    ``train`` on a name bound to it."""
    out = set()
    for module, deps in module_imports(root).items():
        if module == engine:
            continue
        if "train" in deps.get(engine, set()):
            out.add(module)
            continue
        if engine not in deps:  # then no name can be bound to it: the file is not read again
            continue
        tree = _parse(_modules(root)[module].read_text(encoding="utf-8"))
        aliases = {
            a.asname or a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for a in node.names
            if a.name == engine.rsplit(".", 1)[1]
        }
        if any(
            isinstance(n, ast.Attribute)
            and n.attr == "train"
            and getattr(n.value, "id", None) in aliases
            for n in ast.walk(tree)
        ):
            out.add(module)
    return out


# --- the library ---------------------------------------------------------------------------


def test_no_module_is_longer_than_500_lines_and_no_imports_go_round_a_circle():
    problems = layout_problems(LIB)
    assert not problems, "\n".join(problems)


def test_the_layers_import_only_downward():
    problems = layer_problems(LIB)
    assert not problems, "\n".join(problems)


def test_the_library_never_imports_the_build_and_the_build_lives_outside_it():
    assert not (LIB / "book" / "cli.py").exists() and (ROOT / BUILD / "cli.py").exists()
    problems = imports_of(LIB, BUILD)
    assert not problems, "\n".join(problems)
    assert imports_of(ROOT / BUILD, "lib"), (
        "the build no longer imports the library: check the test"
    )


def test_training_runs_start_in_the_experiments_layer_only():
    starters = run_starters(LIB)
    outside = {m for m in starters if m.split(".")[1] not in RUN_STARTERS}
    assert not outside, f"modules below lib.experiments that start a training run: {outside}"
    assert "lib.experiments.staircase_runs" in starters  # the check sees a run


# --- the checks fail when they should -------------------------------------------------------


def _toy(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_planted_circle_is_named_even_through_a_function_local_import(tmp_path):
    root = _toy(
        tmp_path,
        {
            "a.py": "from . import b\n",
            "b.py": "def f():\n    from .c import g\n    return g\n",
            "c.py": "from .a import X\n",
            "d.py": "from . import a\n",  # imports into the circle, not part of it
        },
    )
    assert layout_problems(root) == ["import circle: pkg.a -> pkg.b -> pkg.c -> pkg.a"]
    (root / "c.py").write_text("X = 1\n")
    assert layout_problems(root) == []


def test_a_circle_through_subpackages_and_absolute_imports_is_found(tmp_path):
    root = _toy(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/x.py": "import pkg.high.y\n",
            "high/__init__.py": "",
            "high/y.py": "from ..low.x import NAME\n",
        },
    )
    assert layout_problems(root) == ["import circle: pkg.high.y -> pkg.low.x -> pkg.high.y"]


def test_a_501_line_module_is_named_and_500_lines_pass(tmp_path):
    root = _toy(tmp_path, {"long.py": "x = 1\n" * 501, "fine.py": "y = 2\n" * 500})
    assert layout_problems(root) == ["pkg.long has 501 lines (at most 500)"]


def test_an_import_from_a_layer_above_is_named(tmp_path):
    root = _toy(
        tmp_path,
        {
            "data/__init__.py": "",
            "data/a.py": "def f():\n    from ..measure import m\n",
            "measure/__init__.py": "",
            "measure/m.py": "from ..data import a\n",
        },
    )
    assert layer_problems(root, layers=("data", "measure")) == [
        "pkg.data.a imports pkg.measure.m, a layer above it"
    ]


def test_the_library_planted_with_an_upward_import_fails_the_layer_check(tmp_path):
    """A copy of ``lib`` itself, with one upward import planted in its book layer (the
    presentation importing the experiments) and one import of the build: both are named."""
    import shutil

    copy = tmp_path / "lib"
    shutil.copytree(LIB, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert layer_problems(copy) == [] and imports_of(copy, BUILD) == []
    page = copy / "book" / "page.py"
    page.write_text(
        page.read_text() + "\n\ndef _planted():\n    from ..experiments import ranges\n"
    )
    env = copy / "env.py"
    env.write_text(env.read_text() + "\n\ndef _planted():\n    import bookbuild.cli\n")
    assert layer_problems(copy) == [
        "lib.book.page imports lib.experiments.ranges, a layer above it"
    ]
    assert imports_of(copy, BUILD) == ["lib.env imports bookbuild.cli"]


def test_a_training_run_is_seen_however_train_is_imported(tmp_path):
    root = _toy(
        tmp_path,
        {
            "engine.py": "def train():\n    pass\n",
            "direct.py": "from .engine import train\n",
            "attribute.py": "from . import engine\n\ndef run():\n    engine.train()\n",
            "reader.py": "from .engine import History\n",
        },
    )
    assert run_starters(root, engine="pkg.engine") == {"pkg.direct", "pkg.attribute"}
