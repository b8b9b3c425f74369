"""What a person types, through the project's Makefile: ``CH`` and ``SET`` arrive as written
(make and the shell expand nothing in them), bad inputs are refused with one line before the
build waits on the lock, and a failed try says how to run the try again.

Run by ``make faults`` and ``make test`` (a make and a Python start per case, seconds each).
"""

from __future__ import annotations

import fcntl
import os

import pytest
from toybook import make, make_toy, toy_module

from bookbuild import trying
from bookbuild.notebook import BuildError

PWN = "$(shell touch {mark})"


def _run(toy, *args, env=None, timeout=120) -> tuple[int, str]:
    p = make(toy, *args, env=env)
    out, _ = p.communicate(timeout=timeout)
    return p.returncode, out


def _errors(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("how", ["command line", "environment"])
def test_ch_and_set_arrive_as_written_and_make_runs_nothing_in_them(tmp_path, how):
    """``SET='gamma=$(shell touch pwned)' make try CH=02`` created the file: make expanded
    SET when it exported it. A CH holding a quote broke the recipe's quoting."""
    toy = make_toy(tmp_path / "toy")
    mark = tmp_path / "pwned"
    value = PWN.format(mark=mark) + " $$HOME ${HOME} `touch " + f"{mark}`"
    cases = [
        ({"CH": "01", "SET": f"gamma={value}"}, f"the value of gamma ({value!r})"),
        ({"CH": "0'2\" " + PWN.format(mark=mark), "SET": "x=1"}, "no chapter '0\\'2\"'"),
    ]
    for given, says in cases:
        if how == "command line":
            code, out = _run(toy, "try", *(f"{k}={v}" for k, v in given.items()))
        else:
            code, out = _run(toy, "try", env=given)
        assert code != 0 and not mark.exists(), out
        assert len(_errors(out)) == 1 and says in _errors(out)[0], out


@pytest.mark.parametrize(
    "args, env, says",
    [
        (["chapter", "CH=13"], {}, "no chapter '13'"),
        (["chapter", "CH=-h"], {}, "no chapter '-h'"),
        (["chapter", "CH=01"], {"BOOK_SCALE": "huge"}, "BOOK_SCALE='huge' is not a known scale"),
        (["book"], {"BOOK_SCALE": "huge"}, "BOOK_SCALE='huge' is not a known scale"),
    ],
)
def test_bad_inputs_are_refused_before_the_lock(tmp_path, args, env, says):
    """While another build held the lock, ``make chapter CH=13`` first printed "waiting for
    .book.lock" and named the bad chapter only once the other build ended."""
    toy = make_toy(tmp_path / "toy")
    fd = os.open(toy / ".book.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another build holds it
        code, out = _run(toy, *args, env=env, timeout=60)
    finally:
        os.close(fd)
    assert code != 0 and "waiting" not in out, out
    assert len(_errors(out)) == 1 and says in _errors(out)[0], out


def test_a_failed_try_says_how_to_run_the_try_again(tmp_path, monkeypatch):
    """It said to run ``make chapter``, which runs the book's settings, not the try's."""
    toy = make_toy(tmp_path / "toy")
    (toy / "chapters" / "01_a.md").write_text(
        (toy / "chapters" / "01_a.md").read_text() + '\n```{code-cell} ipython3\nraise ValueError("boom")\n```\n'
    )  # fmt: skip

    toy_module(monkeypatch, steps=10)
    monkeypatch.setattr("bookbuild.execute.known_seconds", lambda scale: {"01_a": 30})
    monkeypatch.setenv("BOOK_SCALE", "ci")
    lines: list[str] = []
    with pytest.raises(BuildError) as err:
        trying.run_try("1", "steps=20", "ci", "cpu", toy, log=lines.append, page=False)
    assert (
        "estimated time: about 60 s (30 s, its ci run on the reference machine; x 2 for steps)"
        in lines
    )
    line = str(err.value)
    assert "\n" not in line and "ValueError: boom" in line and "make chapter" not in line, line
    assert line.endswith("rerun it with: BOOK_SCALE=ci make try CH=01 SET=steps=20"), line
