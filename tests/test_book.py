"""Scale and device selection, and the build plumbing that keeps the book honest."""

from pathlib import Path

import pytest
import torch
import yaml

from bookbuild.cli import main
from bookbuild.fold import fold_plumbing
from bookbuild.notebook import BuildError, check_chapter, select_chapters
from lib import experiments
from lib.env import SCALES, ConfigError, get_device, get_scale

ROOT = Path(__file__).resolve().parent.parent


def test_scale_default_and_validation(monkeypatch):
    monkeypatch.delenv("BOOK_SCALE", raising=False)
    assert get_scale() in ("book", "paper")
    for s in SCALES:
        monkeypatch.setenv("BOOK_SCALE", s)
        assert get_scale() == s
    monkeypatch.setenv("BOOK_SCALE", "huge")
    with pytest.raises(ConfigError, match="ci, book, paper"):
        get_scale()


def test_device_override(monkeypatch):
    monkeypatch.setenv("BOOK_DEVICE", "cpu")
    assert get_device().type == "cpu"
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for bad in ("toaster", "mps", "meta", f"cuda:{n}", "cuda:7" if n < 8 else "cuda:99"):
        monkeypatch.setenv("BOOK_DEVICE", bad)
        with pytest.raises(ConfigError, match="BOOK_DEVICE=cpu"):  # the fix is named
            get_device()
    if n == 0:
        monkeypatch.setenv("BOOK_DEVICE", "cuda")
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            get_device()


def _no_execute(monkeypatch) -> list:
    """The command line's execute, recorded instead of run."""
    calls = []
    monkeypatch.setattr("bookbuild.cli.execute", lambda *a, **kw: calls.append(kw) or {})
    return calls


def test_paper_scale_on_a_cpu_is_refused_naming_the_opt_in_and_the_time(
    tmp_path, monkeypatch, capsys
):
    """It warned, then started chapters whose paper runs take hours to thousands of hours
    on a CPU. Now one line, before anything starts; BOOK_PAPER_ON_CPU=1 and the smoke mode
    (make paper-smoke) run it."""
    calls = _no_execute(monkeypatch)
    monkeypatch.setenv("BOOK_SCALE", "paper")
    monkeypatch.setenv("BOOK_DEVICE", "cpu")
    monkeypatch.delenv("BOOK_SMOKE", raising=False)
    monkeypatch.delenv("BOOK_PAPER_ON_CPU", raising=False)
    assert main(["execute", str(tmp_path), "--only=01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BOOK_SCALE=paper on a CPU is refused" in err, err
    assert "BOOK_PAPER_ON_CPU=1" in err and "hours" in err, err
    assert calls == [], "it started"
    with pytest.raises(ConfigError, match="BOOK_PAPER_ON_CPU=1"):  # a chapter run by hand
        experiments.announce(experiments.module_for(CHAPTERS[0].stem))
    for opt_in in ({"BOOK_PAPER_ON_CPU": "1"}, {"BOOK_SMOKE": "1"}):
        with monkeypatch.context() as m:
            for k, v in opt_in.items():
                m.setenv(k, v)
            assert main(["execute", str(tmp_path), "--only=01"]) == 0
    assert len(calls) == 2
    monkeypatch.setenv("BOOK_SCALE", "book")
    assert main(["execute", str(tmp_path)]) == 0
    # where make paper-smoke has measured the chapters asked for, its estimate is named
    from bookbuild.cli import SMOKE_SUMMARY, paper_estimate

    (tmp_path / SMOKE_SUMMARY).parent.mkdir(parents=True)
    (tmp_path / SMOKE_SUMMARY).write_text('[{"chapter": "02_b", "estimate_s": 31320}]')
    assert paper_estimate(["02_b"], tmp_path) == f"about 8.7 hours for 02_b ({SMOKE_SUMMARY})"
    assert paper_estimate(["01_a"], tmp_path) is None


def test_chapters_are_named_exactly_by_number_or_stem(tmp_path, monkeypatch, capsys):
    """``CH=0`` executed 8 chapters (a prefix of their stems) while ``CH=1`` was refused;
    now "2", "02" and the stem name chapter 2, and anything else is refused in one line
    that lists the chapters (the list comes from the files)."""
    second = CHAPTERS[1].stem
    number = second.partition("_")[0]
    for name in (str(int(number)), number, second, f" {number}, "):
        assert select_chapters(name) == [CHAPTERS[1]]
    assert select_chapters(["1", second]) == CHAPTERS[:2]
    assert select_chapters(None) == CHAPTERS
    calls = _no_execute(monkeypatch)
    monkeypatch.setenv("BOOK_SCALE", "ci")
    assert main(["execute", str(tmp_path), f"--only={int(number)}"]) == 0
    assert calls[-1]["only"] == [second]
    for bad in ("0", "-h", "1x", second[:4], "²", f"{number}x"):
        assert main(["execute", str(tmp_path), f"--only={bad}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: no chapter {bad!r}") and err.count("\n") == 1, err
        assert all(md.stem in err for md in CHAPTERS), err
    assert len(calls) == 1


def test_a_chapter_number_shared_by_two_files_is_refused(tmp_path):
    (tmp_path / "chapters").mkdir()
    for stem in ("05_a", "05_b", "06_c"):
        (tmp_path / "chapters" / f"{stem}.md").write_text("")
    with pytest.raises(BuildError, match="'5' is ambiguous: name one of 05_a, 05_b"):
        select_chapters("5", tmp_path)
    assert [m.stem for m in select_chapters("05_b 6", tmp_path)] == ["05_b", "06_c"]


def _make_commands(*args: str, **variables: str) -> list[list[str]]:
    """The commands ``make -n ARGS`` would run, split as the shell splits them (the
    recursive make that a recipe runs is run, printing its own)."""
    import os
    import shlex
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    cmd = ["make", "-n", "--no-print-directory", "-C", str(ROOT), *args]
    cmd += [f"{k}={v}" for k, v in variables.items()]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return [shlex.split(line) for line in out.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.mark.parametrize("target", ["chapter", "paper-smoke"])
def test_make_passes_the_chapter_name_as_one_value(tmp_path, target):
    """``make chapter CH=-h`` printed argparse's help, then built the book without executing
    anything, and exited 0: the Makefile passed ``--only -h``."""
    (tmp_path / "installed").touch()
    commands = _make_commands(target, CH="-h", STAMP=str(tmp_path / "installed"),
                              LOCKFILE=str(tmp_path / "lock"))  # fmt: skip
    tool = "bookbuild" if target == "chapter" else "bookbuild.bench"
    runs = [c for c in commands if tool in c]
    # CH as written, from the environment (tests/test_faults_inputs.py)
    assert runs and "--only=$CH" in runs[0], commands


def test_bad_input_is_one_line_without_a_traceback(tmp_path, monkeypatch, capsys):
    """The command line's entry point, in this process: an exception that escaped it (a
    traceback) would fail the test."""
    monkeypatch.setenv("BOOK_DEVICE", "meta")
    assert main(["execute", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: BOOK_DEVICE='meta'") and err.count("\n") == 1, err


CHAPTERS = sorted((ROOT / "chapters").glob("*.md"))


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_a_valid_config_at_every_scale_and_announces_it(md):
    """Each chapter has its experiment module; its Config builds at every scale (so every
    override names a real key, has the right type and changes a value); the chapter's first
    code cell announces that module."""
    module = experiments.module_for(md.stem)
    for s in SCALES:
        cfg = experiments.config(module, s)
        assert cfg.scale == s and cfg.chapter() == md.stem
    first = [c.source for c in check_chapter(md).cells if c.cell_type == "code"][0]
    name = module.__name__.rsplit(".", 1)[-1]
    assert f"from lib.experiments import {name} as ex" in first and "announce(ex" in first, (
        f"{md.name}: the first code cell must import {name} as ex and call announce(ex)"
    )


def test_a_chapter_without_an_experiment_module_is_named_with_the_fix():
    with pytest.raises(
        ConfigError, match="known chapters.*Add the package lib/experiments/ch99_nonexistent/"
    ):
        experiments.module_for("99_nonexistent")


def test_bad_overrides_are_refused_naming_key_chapter_and_scale(monkeypatch):
    from lib.experiments import ch01_signatures as m

    cases = [
        ({"bpe_vocb": 512}, "chapter 01_signatures at scale 'ci': unknown config key 'bpe_vocb'; did you mean 'bpe_vocab'"),
        ({"bpe_vocab": "512"}, "chapter 01_signatures at scale 'ci': bpe_vocab='512' is a str, but bpe_vocab must be int"),
        ({"t1_reps": 2}, "chapter 01_signatures at scale 'ci': the override t1_reps=2 equals the book default"),
    ]  # fmt: skip
    for override, message in cases:
        monkeypatch.setattr(m, "OVERRIDES", {"ci": override})
        with pytest.raises(ConfigError) as err:
            experiments.config(m, "ci")
        assert str(err.value).startswith(message), str(err.value)
        assert "\n" not in str(err.value)
    monkeypatch.setattr(m, "OVERRIDES", {"book": {"t1_reps": 3}})
    with pytest.raises(ConfigError, match="the overrides are for: ci, paper"):
        experiments.config(m, "ci")
    with pytest.raises(ConfigError, match="unknown scale 'huge'"):
        experiments.config(m, "huge")


def test_configs_are_frozen():
    import dataclasses

    from lib.experiments import ch01_signatures as m

    cfg = experiments.config(m, "ci")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.t1_reps = 5


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_cells_are_short(md):
    """A chapter's code cells are at most 40 lines: the page shows the argument, the
    experiment module holds the plumbing."""
    nb = check_chapter(md)
    for i, c in enumerate(c for c in nb.cells if c.cell_type == "code"):
        n = len(c.source.splitlines())
        assert n <= 40, f"{md.name}: code cell {i} has {n} lines (at most 40)"


def code_lines(md: Path) -> tuple[int, int, int, int]:
    """A page's shown and folded code lines (non-empty), its ``def``/``class`` lines and its
    ``# fmt: skip`` marks. Shown: cells tagged ``show-input``; every other is folded."""
    import re

    shown = folded = defs = skips = 0
    for c in check_chapter(md).cells:
        if c.cell_type != "code":
            continue
        lines = [ln for ln in c.source.splitlines() if ln.strip()]
        if "show-input" in c.metadata.get("tags", []):
            shown += len(lines)
        else:
            folded += len(lines)
        defs += sum(bool(re.match(r"(async\s+)?(def|class)\s", ln)) for ln in lines)
        skips += sum("# fmt: skip" in ln for ln in lines)
    return shown, folded, defs, skips


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_a_page_is_argument_and_its_plumbing_lives_in_its_package(md):
    """Folded plumbing is at most a quarter of a page's code, and no page defines a
    function or class: the chapter's package (``lib/experiments/chNN_name/``) holds them."""
    shown, folded, defs, _ = code_lines(md)
    assert folded <= 0.25 * (shown + folded), (
        f"{md.name}: {folded} of {shown + folded} code lines are folded plumbing (at most "
        f"25%): move them into the chapter's package"
    )
    assert defs == 0, f"{md.name}: {defs} def/class lines; define them in the chapter's package"


def test_the_pages_are_formatted_with_at_most_20_exemptions():
    per_page = {md.stem: code_lines(md)[3] for md in CHAPTERS}
    assert sum(per_page.values()) <= 20, f"'# fmt: skip' on the pages: {per_page}"


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_no_cell_shows_a_claim_record(md):
    """A cell whose last statement is ``claims.check(...)`` would print the Claim's repr
    into the page: the claims table at the end shows them."""
    import ast

    nb = check_chapter(md)
    for i, c in enumerate(c for c in nb.cells if c.cell_type == "code"):
        body = ast.parse(c.source).body
        last = body[-1] if body else None
        shown = isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
        assert not (shown and ast.unparse(last.value.func).endswith(".check")), (
            f"{md.name}: code cell {i} ends with a bare .check(...): write `_ = claims.check(...)`"
        )


def test_chapters_are_runnable_myst_notebooks_and_in_toc():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = {c["file"] for part in toc["parts"] for c in part["chapters"]}
    for md in sorted((ROOT / "chapters").glob("*.md")):
        nb = check_chapter(md)  # raises on a non-MyST header or no code cells
        assert f"chapters/{md.stem}" in files, f"{md} is not in _toc.yml"
        src = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "announce(" in src, f"{md}: the first output must state scale and device"
        last = [c.source for c in nb.cells if c.cell_type == "code"][-1]
        saves = ".save()" in last or ".finish()" in last  # Ledger.finish saves the ledger
        assert "assert " in last or ("Ledger(" in src and saves), (
            f"{md}: a chapter ends by asserting its headline claims"
        )


def test_check_chapter_refuses_markdown_only_header(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text(
        "---\njupytext:\n  text_representation:\n    format_name: markdown\n---\n\n```{code-cell} ipython3\n1\n```\n"
    )
    with pytest.raises(ValueError, match="extension: .md"):
        check_chapter(bad)


def _chapter_calls(md: Path):
    import ast

    nb = check_chapter(md)
    tree = ast.parse("\n".join(c.source for c in nb.cells if c.cell_type == "code"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            yield (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")), node


@pytest.mark.parametrize("md", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.stem)
def test_chapters_put_weights_on_the_announced_device_and_cap_threads_only_there(md):
    """Every chapter trains on the device ``announce`` returns: each weight it creates goes
    through ``build``/``init_params`` with ``device=``, and it never sets torch's thread
    count itself (``announce(..., cpu_threads=n)`` does, on the CPU only)."""
    for name, call in _chapter_calls(md):
        if name in ("build", "init_params"):
            kws = {k.arg for k in call.keywords}
            assert "device" in kws, (
                f"{md.name}, line {call.lineno} of its code: {name}() without device="
            )
        assert name != "set_num_threads", f"{md.name}: use announce(..., cpu_threads=n)"


def test_plumbing_is_folded_and_argument_cells_stay_open():
    nb = {"cells": [
        {"cell_type": "code", "metadata": {}, "source": "x = 1"},
        {"cell_type": "code", "metadata": {"tags": ["show-input"]}, "source": "loss = f(x)"},
        {"cell_type": "code", "metadata": {"tags": ["remove-input"]}, "source": "glue()"},
        {"cell_type": "markdown", "metadata": {}, "source": "text"},
    ]}  # fmt: skip
    tags = [c["metadata"].get("tags") for c in fold_plumbing(nb)["cells"]]
    assert tags == [["hide-input"], ["show-input"], ["remove-input"], None]


@pytest.mark.parametrize("md", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.stem)
def test_every_figure_has_a_caption_and_is_referenced(md):
    nb = check_chapter(md)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for cell in nb.cells:
        if cell.cell_type != "code" or "plt.show()" not in cell.source:
            continue
        fig = cell.metadata.get("mystnb", {}).get("figure", {})
        assert fig.get("caption") and fig.get("name"), f"{md.name}: a figure without caption/name"
        assert fig["name"] in text, f"{md.name}: figure {fig['name']} is never referenced"


@pytest.mark.parametrize("md", sorted((ROOT / "chapters").glob("*.md")), ids=lambda p: p.stem)
def test_every_glued_figure_is_pasted_with_a_caption_and_a_name(md):
    """A figure glued to be shown elsewhere (lib.book.page.glue_figure: a chapter's key figure) is
    pasted once with ``{glue:figure}``, a ``:name:`` and a caption."""
    import re

    nb = check_chapter(md)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for cell in nb.cells:
        for key in re.findall(
            r'glue_figure\(\s*"(\w+)"', cell.source if cell.cell_type == "code" else ""
        ):
            paste = re.search(
                r"```\{glue:figure\} " + key + r"\n:name: ([\w-]+)\n\n(.+?)```", text, re.S
            )
            assert paste, f"{md.name}: glued figure {key} is never pasted with a :name: and caption"
            assert paste.group(2).strip(), f"{md.name}: glued figure {key} has no caption"


def test_every_package_docstring_names_each_of_its_modules():
    """``lib/__init__.py`` names its layers and top modules, and each package's docstring
    names its own modules (the chapters' experiment modules by their pattern)."""
    import importlib
    import pkgutil

    import lib

    missing = []
    packages = ["lib"] + [i.name for i in pkgutil.walk_packages(lib.__path__, "lib.") if i.ispkg]
    for name in packages:
        pkg = importlib.import_module(name)
        for child in pkgutil.iter_modules(pkg.__path__):
            if name == "lib.experiments" and child.name.startswith("ch"):
                continue  # one per chapter: ``experiments.chNN_name``
            if f"``{child.name}``" not in (pkg.__doc__ or ""):
                missing.append(f"{name}.{child.name}")
    assert not missing, f"not named in their package's docstring: {missing}"


def test_no_chapter_brings_its_own_colours_or_figure_sizes():
    """Colours come from lib.book.style's palettes and sizes from style.subplots/figsize: no
    colour literal, hex code or figsize tuple in a chapter's code or experiment module."""
    import re

    bad = re.compile(
        r"""(colou?r|cmap)\s*=\s*["']|["']#[0-9a-fA-F]{6}["']|figsize\s*=\s*\("""
        r"""|plt\.cm\.|\bcm\.\w+\(|palette\("""
    )
    sources = {md.name: "\n".join(c.source for c in check_chapter(md).cells
                                  if c.cell_type == "code") for md in CHAPTERS}  # fmt: skip
    sources |= {str(p): p.read_text() for p in (ROOT / "lib" / "experiments").rglob("*.py")}
    for name, src in sources.items():
        hits = [ln.strip() for ln in src.splitlines() if bad.search(ln)]
        assert not hits, f"{name}: use lib.book.style's palettes and sizes instead of {hits[:3]}"


def test_one_name_per_concept_no_g_and_no_clash_dodging_names():
    """``g`` once meant gamma, gradient, gain, group and generator; ``Kk``/``Vv`` dodged a
    clash. Neither kind of name is used in the library or in a chapter's code."""
    import io
    import tokenize

    sources = {p.name: p.read_text() for p in (ROOT / "lib").rglob("*.py")}
    sources |= {md.name: "\n".join(c.source for c in check_chapter(md).cells
                                   if c.cell_type == "code") for md in CHAPTERS}  # fmt: skip
    for name, src in sources.items():
        toks = tokenize.generate_tokens(io.StringIO(src).readline)
        bad = sorted({(t.string, t.start[0]) for t in toks
                      if t.type == tokenize.NAME and t.string in ("g", "Kk", "Vv")})  # fmt: skip
        assert not bad, f"{name}: name these for what they are: {bad[:5]}"


def test_an_old_python_is_refused_before_anything_is_installed(tmp_path):
    """On Python 3.10 the installer resolved 159 packages (gigabytes with CUDA torch) and
    failed only at the last step. A stand-in for Python 3.10 records every call that
    would create or fill an environment."""
    import os
    import subprocess

    fake = tmp_path / "python3.10"
    fake.write_text(
        '#!/bin/sh\ncase "$1" in\n  --version) echo "Python 3.10.12" ;;\n  -c) exit 1 ;;\n'
        '  *) echo "$@" >> "$(dirname "$0")/calls" ;;\nesac\n'
    )
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    p = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "venv", f"PYTHON={fake}",
         f"VENV={tmp_path / 'venv'}"], env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "needs Python 3.11 or newer" in out, out
    assert "Python 3.10.12" in out and "PYTHON=python3" in out, out
    assert not (tmp_path / "calls").exists(), (tmp_path / "calls").read_text()
    assert not (tmp_path / "venv").exists()


def test_the_readme_says_which_torch_a_fresh_machine_gets_and_how_to_choose():
    """A fresh Linux machine got the CUDA build of torch with about 20 nvidia-* packages,
    and the README did not say so, nor how to get the CPU build."""
    text = (ROOT / "README.md").read_text()
    for needed in ("PIP_FIND_LINKS", "nvidia-", "https://download.pytorch.org/whl/cpu"):
        assert needed in text, f"the README does not mention {needed}"


def test_the_timings_page_reads_the_last_runs_and_invents_none(tmp_path):
    """docs/timings.md: the last make test's phases and notebooks, the last make book's
    total and chapters, with commit, date and machine; a run not recorded says so."""
    from bookbuild.timing import BOOK_TIME, timings_markdown

    empty = timings_markdown(tmp_path)
    assert "`make test`: no run recorded" in empty and "`make book`: no run recorded" in empty
    times, executed = tmp_path / "build" / "test-times", tmp_path / "build" / "executed"
    times.mkdir(parents=True)
    executed.mkdir(parents=True)
    (times / "phases.txt").write_text("environment 39000\nchapters 372000\n")
    (times / "chapters.xml").write_text(
        '<testsuite><testcase name="chapters/01_a.ipynb" time="9.4"/>'
        '<testcase name="chapters/02_b.ipynb" time="120"><failure/></testcase></testsuite>'
    )
    (executed / "durations.json").write_text('{"01_a": 40.2, "02_b": 286.0}')
    (tmp_path / BOOK_TIME).write_text("980 book\n")
    text = timings_markdown(tmp_path)
    assert "`make test`: **411 s** on the wall clock (every chapter run)" in text
    assert "| chapters | 372 |" in text
    assert "`make book` at `book`: **980 s**" in text
    assert "| 01_a | 9 | 40 |" in text and "| 02_b | 120 (failure) | 286 |" in text


def test_the_first_build_orders_every_chapter_longest_first():
    """docs/chapter_seconds.json lists every chapter at ci and at book (a fresh checkout
    starts its longest chapters first); paper scale reads the book's order."""
    from bookbuild.execute import known_seconds

    stems = {p.stem for p in (ROOT / "chapters").glob("*.md")}
    for scale in ("ci", "book"):
        assert set(known_seconds(scale)) == stems, scale
    assert known_seconds("paper") == known_seconds("book")
