"""Try a chapter with your own settings: ``make try CH=02 SET="gammas=(0.5, 1.0)"``.

A try run executes one chapter with its ``Config`` changed by ``SET`` (``key=value`` pairs,
each value a Python literal; lists are read as the configs' tuples), validated by the
Config's own types and ranges: an unknown key is refused with a "did you mean", a value of
the wrong type or out of its range with one line, a key given twice too. ``CH`` must name
one chapter that has settings. Before it runs, a try prints its estimated time
(:func:`estimate`) and refuses one above an hour unless ``BOOK_TRY_LONG=1``; a try that
fails says how to run it again. It writes into a folder of its own,
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

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
from pathlib import Path

from lib.env import CHAPTER_ENV, SET_ENV, ConfigError
from lib.experiments.settings import apply_settings, differences, parse_settings

TRY_DIR = Path("build") / "try"
SMOKE_SUMMARY = Path("build") / "paper-smoke" / "summary.json"  # make paper-smoke's estimates


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
    from .mathjax import Copies, stage_mathjax
    from .stage import BOOK_FILES

    if out.exists():
        shutil.rmtree(out)
    copies = Copies(out)  # each copy verified against its source; a failed write is named
    for name in BOOK_FILES:
        if name != "_toc.yml" and (root / name).exists():
            copies.file(root / name, out / name)
    (out / "_toc.yml").write_text(f"format: jb-book\nroot: chapters/{stem}\n")
    stage_mathjax(out / "_extra" / "mathjax", copies)
    copies.save()
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
    from lib.book.claims import Claim, load

    if not claims_file.is_file():  # a chapter that checks no claim
        return []
    rows = load([claims_file.stem], claims_file.parent)
    return [(c.id, c.status, c.try_verdict) for c in rows if isinstance(c, Claim) and c.try_verdict]


LONG_ENV = "BOOK_TRY_LONG"  # =1: start a try estimated at more than LONG_SECONDS
LONG_SECONDS = 3600


def chapter_to_try(only: str | None, root: Path) -> Path:
    """The one chapter that ``only`` (``CH``) names; one line naming the problem otherwise."""
    from .notebook import select_chapters

    if not (only or "").strip():
        raise ConfigError('name the chapter to try, e.g. make try CH=02 SET="seeds=(0, 1)"')
    found = select_chapters(only, root)
    if len(found) != 1:
        raise ConfigError(
            f"make try runs one chapter, and CH={only!r} names {len(found)}: "
            f"{', '.join(md.stem for md in found)}; name one, e.g. CH={found[0].stem[:2]}"
        )
    return found[0]


def _factor(key: str, new, old) -> float:
    """How much longer a changed setting makes the chapter (the rule of :func:`estimate`)."""
    if isinstance(new, tuple) and isinstance(old, tuple) and old:
        return len(new) / len(old)
    counts = isinstance(new, int) and isinstance(old, int) and not isinstance(new, bool)
    if counts and old > 0 and re.search(r"(steps|seeds)$", key):
        return new / old
    return 1.0


def estimate(stem: str, scale: str, changed, root: Path) -> tuple[float | None, str]:
    """The try's estimated seconds and how they were reckoned.

    The rule: the chapter's recorded seconds at ``scale`` (``docs/chapter_seconds.json``, the
    reference machine; at ``paper``, ``make paper-smoke``'s estimate where it made one, else
    the ``book`` seconds), times, for every changed setting, the ratio of its new value to
    the book's when it counts steps or seeds (``two.steps``, ``gd.n_seeds``), and of their
    lengths when it is a tuple (seeds, grids). The whole chapter is scaled by each, as if
    every run of it changed: a rough figure, long rather than short. None in the smoke mode."""
    from lib.env import smoke

    from .execute import known_seconds

    if smoke():
        return None, "the smoke mode: every training run makes 2 steps"
    base, where = known_seconds(scale).get(stem), f"its {scale} run on the reference machine"
    if scale == "paper":
        try:
            rows = json.loads((root / SMOKE_SUMMARY).read_text())
            base = {r["chapter"]: float(r["estimate_s"]) for r in rows}[stem]
            where = f"make paper-smoke's estimate ({SMOKE_SUMMARY})"
        except (OSError, ValueError, KeyError, TypeError):
            where = "its book run on the reference machine (paper takes longer)"
    if base is None:
        return None, "no time is recorded for this chapter"
    seconds, why = float(base), [f"{base:,.0f} s, {where}"]
    for key, new, old in changed:
        f = _factor(key, new, old)
        if f != 1.0:
            seconds *= f
            why.append(f"x {f:.3g} for {key}")
    return seconds, "; ".join(why)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:,.1f} hours"


def check_long(seconds: float | None, why: str) -> None:
    """Refuse a try estimated above :data:`LONG_SECONDS` unless ``BOOK_TRY_LONG=1``."""
    opt_in = os.environ.get(LONG_ENV, "").strip()
    if opt_in not in ("", "0", "1"):
        raise ConfigError(f"{LONG_ENV}={opt_in!r}: set {LONG_ENV}=1, or unset it")
    if seconds is not None and seconds > LONG_SECONDS and opt_in != "1":
        raise ConfigError(
            f"this try would take about {_duration(seconds)} ({why}); ask for fewer steps, "
            f"seeds or grid points, or set {LONG_ENV}=1 to start it anyway"
        )


def prepare(only: str | None, settings_text: str, scale: str, root: Path):
    """Everything a try checks before it runs: ``(chapter, book config, tried config,
    changed settings, estimated seconds, how they were reckoned)``; one line for the first
    problem (the chapter, the settings, their ranges, a run estimated too long)."""
    from lib.experiments import config, module_for

    md = chapter_to_try(only, root)
    settings = parse_settings(settings_text)
    module = module_for(md.stem)
    book_cfg = config(module, scale)
    if len(dataclasses.fields(book_cfg)) == 1:  # the scale alone: nothing to try
        from lib.experiments import modules

        have = [s for s, m in sorted(modules().items()) if len(dataclasses.fields(m.Config)) > 1]
        raise ConfigError(
            f"chapter {md.stem} has no settings to try; try one of: {', '.join(have)}"
        )
    tried = apply_settings(book_cfg, settings)
    changed = differences(book_cfg, tried)
    seconds, why = estimate(md.stem, scale, changed, root)
    check_long(seconds, why)
    return md, book_cfg, tried, changed, seconds, why


def rerun_command(stem: str, settings_text: str) -> str:
    """The command that runs this try again."""
    scale = os.environ.get("BOOK_SCALE", "").strip()
    prefix = f"BOOK_SCALE={shlex.quote(scale)} " if scale else ""
    return f"{prefix}make try CH={stem.partition('_')[0]} SET={shlex.quote(settings_text)}"


def run_try(only: str, settings_text: str, scale: str, device: str, root: Path, log=print,
            page: bool = True) -> Path:  # fmt: skip
    """Execute one chapter with ``settings_text`` into its own folder and, with ``page``,
    build its page; return the page (without, the executed notebook). Refuses bad settings,
    and a run estimated above an hour (:func:`check_long`), before anything runs."""
    import subprocess
    import sys

    from .execute import execute
    from .notebook import BuildError, failed_reason

    md, _, _, changed, seconds, why = prepare(only, settings_text, scale, root)
    folder = folder_for(md.stem, settings_text, scale, device, root)
    log(f"try {md.stem} at BOOK_SCALE={scale} on {device}, into {folder}:")
    for key, new, old in changed:
        log(f"  {key} = {new!r}   (the book's: {old!r})")
    if not changed:
        log("  (every setting equals the book's)")
    if seconds is not None:
        log(f"estimated time: about {_duration(seconds)} ({why})")
    os.environ[SET_ENV], os.environ[CHAPTER_ENV] = settings_text, md.stem
    try:
        about = {md.stem: seconds} if seconds else None  # its progress lines say of how long
        execute(folder, scale, device, root, only=[md.stem], workers=1, log=log, expected=about)
    except BuildError:
        reason = failed_reason(folder / f"{md.stem}.ipynb") or "see its log"
        raise BuildError(
            f"the try of {md.stem} failed: {reason} (its log: {folder / md.stem}.log); "
            f"rerun it with: {rerun_command(md.stem, settings_text)}"
        ) from None
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
        from lib.book.page import table_markdown

        log(f"\n{len(failed)} claim(s) no longer hold with these settings:")
        log(table_markdown(failed, ["claim", "measured", "the chapter says"]))
    else:
        log("\nevery claim of the chapter still holds with these settings")
    log(f"\nthe page: {html}")
    return html
