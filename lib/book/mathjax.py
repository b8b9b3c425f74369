"""MathJax for pages that show math offline: found in the installed django-static-mathjax
package and copied into the staged book.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from .notebook import BuildError


def mathjax_dir() -> Path:
    """MathJax 3's ``es5`` folder inside the installed django-static-mathjax package.

    Found without importing the package (it is a Django app; only its files are used).
    """
    import importlib.util

    spec = importlib.util.find_spec("mathjax")
    path = Path(spec.submodule_search_locations[0]) / "static" / "mathjax" / "es5" if spec else None
    if path is None or not (path / "tex-chtml.js").is_file():
        raise BuildError(
            "MathJax is not installed, so the pages could not show math offline; "
            "install it with: pip install django-static-mathjax==3.2.2.1"
        )
    return path


def stage_mathjax(dest: Path) -> None:
    src = mathjax_dir()
    if (
        not (dest / "tex-chtml.js").is_file()
        or (dest / "tex-chtml.js").read_bytes() != (src / "tex-chtml.js").read_bytes()
    ):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest)
