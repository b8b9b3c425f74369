"""Try a chapter with your own settings: ``make try CH=02 SET="gammas=(0.5, 1.0)"``.

A try run executes one chapter with its ``Config`` changed by ``SET`` (``key=value`` pairs,
each value a Python literal; lists are read as the configs' tuples), validated by the
Config's own types: an unknown key is refused with a "did you mean", a value of the wrong
type with one line naming the type it must have. It writes into a folder of its own,
``build/try/<chapter>-<hash>/`` (the executed notebook, its claims, its log and an HTML
page), and never touches the book's outputs or stamps. The page opens with a banner that
names every setting that differs from the book's. Its claims are recorded, not asserted
(:mod:`lib.book.claims`): a try run ends with a table of what no longer holds, and does not
stop at the first.

The chapter's kernel reads the settings from the environment (:data:`SET_ENV`, and
:data:`CHAPTER_ENV` naming the chapter they are for: a chapter that reads another's
config, as Chapter 11 reads Chapter 2's, keeps that one's book values).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ..env import CHAPTER_ENV, SET_ENV, ConfigError
from ..experiments.settings import apply_settings, differences, parse_settings

TRY_DIR = Path("build") / "try"


def folder_for(stem: str, settings_text: str, scale: str, device: str, root: Path) -> Path:
    """The try run's own folder: ``build/try/<stem>-<hash of settings, scale, device>``."""
    settings = parse_settings(settings_text)
    key = repr(sorted(settings.items())) + f"|{scale}|{device}"
    return root / TRY_DIR / f"{stem}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def banner(changed, settings_text: str) -> str:
    """The MyST box that opens a try run's page: the settings that differ from the book's."""
    items = "\n".join(f"- `{k}` = `{v!r}` (the book's: `{b!r}`)" for k, v, b in changed)
    return (
        ":::{admonition} A try run, not the book\n:class: warning\n"
        f'Made by `make try` with `SET="{settings_text}"`. The settings that differ from '
        "the book's:\n\n" + (items or "- none: every setting equals the book's") + "\n\n"
        "Its claims are recorded, not asserted; the table at the end says which still hold.\n:::"
    )


def _stage_one(executed: Path, stem: str, out: Path, root: Path, top: str) -> Path:
    """A one-page book of the try run's executed chapter, with ``top`` (MyST) above its
    title, to build as HTML."""
    import json

    from .fold import stage_notebook
    from .mathjax import stage_mathjax
    from .stage import BOOK_FILES

    if out.exists():
        shutil.rmtree(out)
    for name in BOOK_FILES:
        if name != "_toc.yml" and (root / name).exists():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / name, out / name)
    (out / "_toc.yml").write_text(f"format: jb-book\nroot: chapters/{stem}\n")
    stage_mathjax(out / "_extra" / "mathjax")
    nb = out / "chapters" / f"{stem}.ipynb"
    stage_notebook(executed / f"{stem}.ipynb", nb)
    doc = json.loads(nb.read_text(encoding="utf-8"))
    doc["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": top})
    refs = "## References\n\n```{bibliography}\n```\n"  # the page's citations resolve here
    doc["cells"].append({"cell_type": "markdown", "metadata": {}, "source": refs})
    nb.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return out


def no_longer_holds(claims_file: Path) -> list[tuple[str, str, str]]:
    """``(claim id, what it measured, what the chapter says)`` for every claim of a try run
    whose status is not the chapter's verdict."""
    from .claims import Claim, load

    if not claims_file.is_file():  # a chapter that checks no claim
        return []
    rows = load([claims_file.stem], claims_file.parent)
    return [(c.id, c.status, c.try_verdict) for c in rows if isinstance(c, Claim) and c.try_verdict]


def run_try(only: str, settings_text: str, scale: str, device: str, root: Path, log=print,
            page: bool = True) -> Path:  # fmt: skip
    """Execute one chapter with ``settings_text`` into its own folder and, with ``page``,
    build its page; return the page (without, the executed notebook). Refuses bad settings
    before anything runs."""
    import subprocess
    import sys

    from ..experiments import config, module_for
    from .execute import execute
    from .notebook import select_chapters

    (md,) = select_chapters(only, root) if only else (None,)
    if md is None:
        raise ConfigError('name the chapter to try, e.g. make try CH=02 SET="seeds=(0, 1)"')
    settings = parse_settings(settings_text)
    module = module_for(md.stem)
    book_cfg = config(module, scale)
    tried = apply_settings(book_cfg, settings)
    folder = folder_for(md.stem, settings_text, scale, device, root)
    changed = differences(book_cfg, tried)
    log(f"try {md.stem} at BOOK_SCALE={scale} on {device}, into {folder}:")
    for key, new, old in changed:
        log(f"  {key} = {new!r}   (the book's: {old!r})")
    if not changed:
        log("  (every setting equals the book's)")
    os.environ[SET_ENV], os.environ[CHAPTER_ENV] = settings_text, md.stem
    try:
        execute(folder, scale, device, root, only=[md.stem], workers=1, log=log)
    finally:
        os.environ.pop(SET_ENV, None)
        os.environ.pop(CHAPTER_ENV, None)
    if not page:
        return folder / f"{md.stem}.ipynb"
    book = _stage_one(folder, md.stem, folder / "book", root, banner(changed, settings_text))
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(book), "--quiet",
           "--path-output", str(folder)]  # fmt: skip
    built = subprocess.run(cmd, capture_output=True, text=True)
    html = folder / "_build" / "html" / "chapters" / f"{md.stem}.html"
    if built.returncode != 0 or not html.is_file():
        tail = (built.stdout + built.stderr).strip().splitlines()[-3:]
        raise ConfigError(f"the try page could not be built: {' | '.join(tail)}")
    failed = no_longer_holds(folder / "claims" / f"{md.stem}.json")
    if failed:
        from .page import table_markdown

        log(f"\n{len(failed)} claim(s) no longer hold with these settings:")
        log(table_markdown(failed, ["claim", "measured", "the chapter says"]))
    else:
        log("\nevery claim of the chapter still holds with these settings")
    log(f"\nthe page: {html}")
    return html
