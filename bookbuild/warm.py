"""Compile, once at install, the bytecode of what every chapter and build step imports.

The environment keeps bytecode in ``.venv/pycache`` as modules are first imported (the
Makefile's ``book_env.pth``). Left to the first build, the two chapters that start side
by side would both compile torch, and the strict build and the page tests each the Sphinx
stack, at the same moment. Here two processes compile the two stacks once, side by side:
the science (torch, scipy, pandas, matplotlib, seaborn) and the build (Jupyter, Sphinx,
pytest, selenium). A module that fails to import is left to the build, which names it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

STACKS = {
    "science": ("torch", "torch.nn.functional", "numpy", "scipy.stats", "scipy.optimize",
                "scipy.linalg", "scipy.special", "scipy.sparse", "scipy.integrate", "pandas",
                "matplotlib.pyplot", "matplotlib.backends.backend_agg", "seaborn", "tqdm"),
    "build": ("IPython", "ipykernel.kernelapp", "ipykernel.ipkernel", "jupyter_client",
              "nbclient", "nbformat", "jupytext", "jupyter_book.cli.main", "sphinx.application",
              "sphinx.builders.html", "sphinx.domains.python", "sphinx.ext.mathjax",
              "docutils.parsers.rst", "myst_parser", "myst_nb", "sphinx_book_theme",
              "pydata_sphinx_theme", "sphinxcontrib.bibtex", "pytest", "xdist", "nbmake",
              "selenium.webdriver", "bs4"),
}  # fmt: skip


def compile_stack(name: str) -> None:
    """Import every module of stack ``name`` (writing its bytecode)."""
    for module in STACKS[name]:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the build that needs it will say why
            pass


def main(argv: list[str]) -> int:
    if argv:
        compile_stack(argv[0])
        return 0
    procs = [subprocess.Popen([sys.executable, "-m", "bookbuild.warm", s]) for s in STACKS]
    return max(p.wait() for p in procs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
