"""Staging on a disk that fills: the toy book (tests/toybook.py) staged into a 3 MiB tmpfs
mounted over its build folder, in a user and mount namespace of its own (``unshare``, as in
tests/test_faults.py); skipped where the system allows none.

Run by ``make faults`` and ``make test``, not by ``make unit``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from test_faults import _namespace_tmpfs
from toybook import PROJECT, make_toy

from bookbuild.mathjax import mathjax_dir

# Runs inside the namespace, where DISK (the toy's build folder) is a 3 MiB tmpfs: stages the
# toy there, enlarges the disk, stages again and builds the HTML; prints what it saw as JSON.
DRIVER = """
import contextlib, io, json, subprocess, sys
from pathlib import Path
from bookbuild.cli import main
from bookbuild.mathjax import mathjax_dir

toy, disk = Path(sys.argv[1]), Path(sys.argv[2])
staged, source = disk / "book", mathjax_dir()
seen = {}

def stage(name):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["stage", str(disk / "executed"), str(staged), "--root", str(toy),
                         "--partial"])
        except BaseException as exc:  # what escaped the command line: a traceback
            code = f"{type(exc).__name__}: {exc}"
    copies = {p: staged / "_extra" / "mathjax" / p.relative_to(source)
              for p in source.rglob("*") if p.is_file()}
    short = sorted(str(c) for p, c in copies.items()
                   if c.is_file() and c.read_bytes() != p.read_bytes())
    seen[name] = dict(code=code, err=err.getvalue(), short=short,
                      copied=sum(c.is_file() for c in copies.values()), total=len(copies))

stage("full")
subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
stage("enlarged")
book = Path(sys.executable).parent / "jupyter-book"
built = subprocess.run([str(book), "build", str(staged), "--path-output", str(toy), "-n",
                        "--keep-going", "--quiet"], capture_output=True, text=True)
seen["build"] = built.returncode
print(json.dumps(seen))
"""


def test_a_disk_that_fills_while_staging_is_named_and_the_next_build_repairs_every_copy(tmp_path):
    """A 3 MiB tmpfs over build/ said ``error: cannot write a file: Error`` and left 105 of
    MathJax's 106 files truncated; the check compared tex-chtml.js alone, so the next build,
    on a larger disk, published 0-byte fonts into _build/html. Now the one line names the
    file and the cause, no copy is left short, and the next build repairs every copy."""
    why = _namespace_tmpfs()
    if why:
        pytest.skip(why)
    toy = make_toy(tmp_path / "toy")
    with (toy / "_config.yml").open("a") as fh:  # the book's own setting: _extra -> the site
        fh.write('sphinx:\n  config:\n    html_extra_path: ["_extra"]\n')
    disk = toy / "build"
    disk.mkdir()
    (tmp_path / "driver.py").write_text(DRIVER)
    script = (f"mount -t tmpfs -o size=3m tmpfs {disk} && "
              f"exec {sys.executable} {tmp_path / 'driver.py'} {toy} {disk}")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                       capture_output=True, text=True, timeout=300, cwd=PROJECT, env=env)  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    seen = json.loads(p.stdout.strip().splitlines()[-1])

    full = seen["full"]
    mathjax = re.escape(f"{disk}/book/_extra/mathjax/")
    line = rf"error: cannot write {mathjax}\S+: the disk is full \(No space left on device\)\n"
    assert full["code"] == 2 and re.fullmatch(line, full["err"]), full
    assert 0 < full["copied"] < full["total"] and full["short"] == [], full  # none half-written

    enlarged = seen["enlarged"]
    assert enlarged["code"] == 0 and enlarged["err"] == "", enlarged
    assert enlarged["copied"] == enlarged["total"] and enlarged["short"] == [], enlarged
    assert seen["build"] == 0, seen

    source = mathjax_dir()
    site = toy / "_build" / "html" / "mathjax"
    files = [p for p in source.rglob("*") if p.is_file()]
    bad = [p for p in files if (site / p.relative_to(source)).read_bytes() != p.read_bytes()]
    assert not bad, f"{len(bad)} of {len(files)} MathJax files differ in _build/html: {bad[:3]}"


def test_a_staged_copy_that_was_damaged_is_made_again(tmp_path):
    """A copy cut short or emptied after staging (its size differs, or its bytes with the
    same size) is found on the next run and copied again; the others are not read."""
    from bookbuild.mathjax import MANIFEST, Copies

    src = tmp_path / "src"
    (src / "fonts").mkdir(parents=True)
    (src / "a.js").write_text("a" * 1000)
    (src / "fonts" / "b.woff").write_bytes(b"b" * 2000)
    out = tmp_path / "out"
    copies = Copies(out)
    assert copies.tree(src, out / "m") == 2
    copies.save()
    assert json.loads((out / MANIFEST).read_text())["m/a.js"][:2] == [
        1000,
        "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3",
    ]
    (out / "m" / "fonts" / "b.woff").write_bytes(b"")  # a 0-byte font
    (out / "m" / "stray.tmp").write_text("left by a killed run")
    again = Copies(out)
    assert again.tree(src, out / "m") == 1
    again.save()
    assert (out / "m" / "fonts" / "b.woff").read_bytes() == b"b" * 2000
    assert not (out / "m" / "stray.tmp").exists()
    (out / "m" / "a.js").write_text("x" * 1000)  # same size, other bytes: a stale manifest entry
    assert Copies(out).tree(src, out / "m") == 1 and (out / "m" / "a.js").read_text() == "a" * 1000


def test_a_failed_copy_names_its_target_and_cause_and_leaves_no_partial_file(tmp_path, monkeypatch):
    """The line was ``cannot write a file: Error``: ``copytree`` gathers its failures in a
    ``shutil.Error``, which has no errno and no file name; a copy's own error names the
    source it read, not the file it could not write."""
    import errno
    import shutil

    from bookbuild import mathjax
    from bookbuild.notebook import BuildError, write_error

    full = "[Errno 28] No space left on device: '/src/a.woff'"
    assert write_error(shutil.Error([("/src/a.woff", "/out/a.woff", full)])) == (
        "cannot write /out/a.woff: the disk is full (No space left on device)"
    )
    err = OSError(errno.ENOSPC, "No space left on device", "/src/a.woff", None, "/out/a.woff")
    assert write_error(err).startswith("cannot write /out/a.woff: the disk is full")

    def half(src, dst, length=0):
        dst.write(src.read(10))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mathjax.shutil, "copyfileobj", half)
    (tmp_path / "a.woff").write_bytes(b"x" * 100)
    with pytest.raises(BuildError) as caught:
        mathjax.copy_file(tmp_path / "a.woff", tmp_path / "out" / "a.woff")
    assert str(caught.value) == (
        f"cannot write {tmp_path / 'out' / 'a.woff'}: the disk is full (No space left on device)"
    )
    assert list((tmp_path / "out").iterdir()) == []
