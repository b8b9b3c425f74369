"""What a page shows of its numbers: one formatter for every glued value and every table.

A chapter's sentences live in its Markdown; the numbers in them come from the computation
through myst-nb's ``glue``. Everything a reader sees of a number passes through this
module, so that no page shows machine output: no ``nan``, no Python ``repr``, no
fifteen-digit float, no index column.

* :func:`number` writes one value with a few significant figures, ``—`` (:data:`MISSING`)
  where there is none (``None``, NaN) and ``∞`` for an infinite one.
* :func:`interval` writes ``0.38 [0.33, 0.44]``; :func:`count`, :func:`listing` and
  :func:`share` write counts in words: ``1 logged step``, ``no seed``, ``seeds 0 and 2``,
  ``3 of 5``.
* :func:`onset_text`, :func:`onset_range`, :func:`value_range` and :func:`per_seed_text`
  write readings over seeds: ``steps 40, 60 and 90``, ``steps 229–368``, ``0.11–0.14``.
* :func:`glue_figure` glues a figure to be pasted elsewhere on the page (a chapter's key
  figure opens the chapter).
* :func:`glue_all` glues a mapping of values at once; a finite number stays a number (the
  Markdown may give it a format spec, ``{glue:text}`x:.2f```), a missing one becomes
  :data:`MISSING`, and a list, array or mapping is refused: glue the sentence's words
  (:func:`listing`) instead. The book's Sphinx extension renders every glued value with
  :func:`render_glued`, so a format spec never turns a missing value into ``nan``.
* :func:`table` shows rows or a DataFrame as a Markdown table: no index column, ``—`` for
  a missing value, intervals as :func:`interval`, and no list in a cell.
"""

from __future__ import annotations

import math
import numbers
from ast import literal_eval
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

MISSING = "—"
INFINITE = "∞"
SIG = 3  # significant figures of a number written without a format spec


def _scalar(v):
    """numpy scalars and 0-d arrays as Python numbers; anything else unchanged."""
    if isinstance(v, np.generic) or (isinstance(v, np.ndarray) and v.ndim == 0):
        return v.item()
    if hasattr(v, "ndim") and getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        return v.item()  # a 0-d torch tensor
    return v


def is_missing(v) -> bool:
    """``None`` or a NaN."""
    v = _scalar(v)
    return v is None or (isinstance(v, float) and math.isnan(v))


def number(x, sig: int = SIG, unit: str = "", signed: bool = False) -> str:
    """One value for a reader: ``sig`` significant figures (integers in full), ``—`` where
    there is none, ``∞`` where it is infinite, scientific notation only below 1e-3 or from
    1e6 (``3.2e-5``), and ``unit`` after it."""
    x = _scalar(x)
    if is_missing(x):
        return MISSING
    if isinstance(x, bool):
        return "yes" if x else "no"
    if not isinstance(x, numbers.Real):
        raise TypeError(f"number() takes a real number, got {type(x).__name__} {x!r}")
    sign = "+" if signed and x > 0 else ""
    if isinstance(x, numbers.Integral):
        text = f"{sign}{int(x)}"
    elif math.isinf(x):
        text = ("-" if x < 0 else sign) + INFINITE
    elif x == 0:
        text = "0"
    elif 1e-3 <= abs(x) < 1e6:
        if 0.99 < abs(x) < 1:  # a cosine or a probability close to 1 is not written "1"
            while sig < 6 and abs(float(f"{x:.{sig}g}")) == 1:
                sig += 1
        text = f"{x:{'+' if signed else ''}#.{sig}g}".rstrip("0").rstrip(".")
        if "e" in text:  # 'g' switched to exponent notation for a large round value
            text = f"{sign}{round(x):d}"
    else:
        mant, exp = f"{x:{'+' if signed else ''}.{max(sig - 1, 0)}e}".split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        text = f"{mant}e{int(exp)}"
    return f"{text} {unit}".rstrip() if unit else text


def interval(mid, lo, hi, sig: int = SIG, unit: str = "") -> str:
    """``mid [lo, hi]``, e.g. a median and its range or a rate and its Wilson interval."""
    if is_missing(mid):
        return MISSING
    body = f"{number(mid, sig)} [{number(lo, sig)}, {number(hi, sig)}]"
    return f"{body} {unit}".rstrip() if unit else body


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """``noun`` or its plural, for a count of ``n``."""
    return noun if n == 1 else (plural_form or noun + "s")


def count(n, noun: str, plural_form: str | None = None, zero: str = "no") -> str:
    """A count in words: ``1 logged step``, ``3 logged steps``, ``no logged step``."""
    n = int(_scalar(n))
    if n == 0:
        return f"{zero} {noun}"
    return f"{n} {plural(n, noun, plural_form)}"


def listing(items: Iterable, noun: str = "seed", plural_form: str | None = None,
            none: str | None = None) -> str:  # fmt: skip
    """Items in words: ``seed 2``, ``seeds 0, 2 and 3``, and ``none`` (default ``no
    seed``) when there are none; the noun is dropped when it is empty."""
    items = [number(i) if isinstance(_scalar(i), numbers.Number) else str(i) for i in items]
    if not items:
        return none if none is not None else f"no {noun}".strip()
    head = f"{plural(len(items), noun, plural_form)} " if noun else ""
    body = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return head + body


def share(k, n) -> str:
    """``k of n``."""
    return f"{int(_scalar(k))} of {int(_scalar(n))}"


# --------------------------------------------------------------------------- glue


def glueable(v):
    """A value as it is glued: a finite number stays a number (rounded to 6 significant
    figures, so that no format spec shows more), a missing one becomes :data:`MISSING`,
    an infinite one :data:`INFINITE`, a string stays; a list, array or mapping raises."""
    v = _scalar(v)
    if isinstance(v, str | bool):
        return v
    if v is None:
        return MISSING
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        v = float(v)
        if math.isnan(v):
            return MISSING
        if math.isinf(v):
            return INFINITE if v > 0 else "-" + INFINITE
        return float(f"{v:.6g}")
    raise TypeError(
        f"glue a number or a sentence's words, not a {type(v).__name__} ({v!r:.60}): "
        "use lib.book.page.listing, interval or number"
    )


def glue_all(values: Mapping[str, object], prefix: str = "") -> None:
    """``glue(prefix + key, glueable(value), display=False)`` for every item of ``values``."""
    from myst_nb import glue

    for key, v in values.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"glue key {key!r} is not an identifier")
        try:
            value = glueable(v)
        except TypeError as e:
            raise TypeError(f"glue key {prefix + key!r}: {e}") from None
        glue(prefix + key, value, display=False)


def glue_figure(name: str, fig) -> None:
    """Glue ``fig`` under ``name`` without showing it where it was drawn, so that the page
    can paste it elsewhere (``{glue:figure} name``): a chapter's key figure opens the
    chapter, right after its box, though its runs come later."""
    import matplotlib.pyplot as plt
    from myst_nb import glue

    if not name.isidentifier():
        raise ValueError(f"glue key {name!r} is not an identifier")
    glue(name, fig, display=False)
    plt.close(fig)


def render_glued(text: str, spec: str) -> str:
    """How a page shows a glued value (its ``text/plain``) with a format spec: as Python's
    ``format`` would, except that a missing or infinite value is written as such whatever
    the spec, and a number without a spec gets :func:`number`. Used by the book's Sphinx
    extension in place of myst-nb's own formatter."""
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("nan", "none", MISSING):
            return MISSING
        if low in ("inf", INFINITE):
            return INFINITE
        if low in ("-inf", "-" + INFINITE):
            return "-" + INFINITE
        if spec == "" or spec[-1] == "s":
            return format(value, spec)
    if value is None:
        return MISSING
    if spec == "":
        return number(value) if isinstance(value, float) else str(value)
    kind = spec[-1]
    if kind == "s":
        return format(str(value), spec)
    if kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
        if math.isnan(value):
            return MISSING
        if math.isinf(value):
            return INFINITE if value > 0 else "-" + INFINITE
        if kind in "eE":  # 3.2e-05 -> 3.2e-5, and a zero without its exponent
            return "0" if value == 0 else _short_exponent(format(value, spec))
    return format(value, spec)


def _short_exponent(text: str) -> str:
    mant, _, exp = text.replace("E", "e").partition("e")
    return f"{mant}e{int(exp)}" if exp else text


# --------------------------------------------------------------------------- tables


def cell(v, sig: int = SIG) -> str:
    """One table cell: a number by :func:`number`, a ``(mid, lo, hi)`` triple by
    :func:`interval`, a string as it is (``|`` escaped), a missing value as ``—``."""
    v = _scalar(v)
    if isinstance(v, tuple) and len(v) == 3:
        return interval(*v, sig=sig)
    if isinstance(v, str):
        return v.replace("|", "\\|") if v.strip() else MISSING
    if v is None or isinstance(v, numbers.Number):
        return number(v, sig)
    raise TypeError(f"a table cell holds a number, a string or a (mid, lo, hi) triple, "
                    f"not {type(v).__name__} ({v!r:.60})")  # fmt: skip


def table_markdown(rows, columns: Sequence[str] | None = None, sig: int = SIG,
                   align: Sequence[str] | None = None) -> str:  # fmt: skip
    """A Markdown table of ``rows`` (a DataFrame, a list of mappings or a list of
    sequences with ``columns``): no index column, every cell through :func:`cell`.
    A DataFrame's index is kept as its first column only when it is named."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a DataFrame
        df = rows.reset_index() if any(n is not None for n in rows.index.names) else rows
        columns = [str(c) for c in df.columns] if columns is None else list(columns)
        body = [list(r) for r in df.itertuples(index=False, name=None)]
    else:
        rows = list(rows)
        if rows and isinstance(rows[0], Mapping):
            columns = list(rows[0]) if columns is None else list(columns)
            body = [[r.get(c) for c in columns] for r in rows]
        else:
            if columns is None:
                raise ValueError("rows of sequences need their column names")
            body = [list(r) for r in rows]
    if any(len(r) != len(columns) for r in body):
        raise ValueError(f"every row needs {len(columns)} cells")
    if align is None:
        num = [all(isinstance(_scalar(r[j]), numbers.Number | type(None)) for r in body)
               for j in range(len(columns))]  # fmt: skip
        align = ["r" if n and body else "l" for n in num]
    rule = {"l": "---", "r": "---:", "c": ":---:"}
    lines = [
        "| " + " | ".join(str(c).replace("|", "\\|") for c in columns) + " |",
        "|" + "|".join(rule[a] for a in align) + "|",
    ]
    lines += ["| " + " | ".join(cell(v, sig) for v in r) + " |" for r in body]
    return "\n".join(lines)


def table(rows, columns: Sequence[str] | None = None, sig: int = SIG,
          align: Sequence[str] | None = None):  # fmt: skip
    """:func:`table_markdown`, displayed (the page renders it as a table)."""
    from IPython.display import Markdown

    return Markdown(table_markdown(rows, columns, sig, align))


def onset_text(x, seeds) -> str:
    """Onsets over ``seeds`` in words, in seed order: ``steps 40, 60 and
    90`` where every seed has a stair, ``steps 40 and 90 (seeds 0 and 2); none in seed 1``
    where some have none, ``none in any seed`` where none has."""
    x = np.asarray(x, dtype=float)
    have = np.isfinite(x)
    if not have.any():
        return "none in any seed"
    text = listing([round(v) for v in x[have]], noun="step")
    if have.all():
        return text
    seeds = np.asarray(seeds)
    return f"{text} ({listing(seeds[have])}); none in {listing(seeds[~have])}"


def onset_range(x) -> str:
    """The onsets of a stair over seeds as a range in words: ``step 2``,
    ``steps 229–368``, or ``no step`` where no seed has one."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return "no step"
    lo, hi = round(x.min()), round(x.max())
    return f"step {number(lo)}" if lo == hi else f"steps {number(lo)}–{number(hi)}"


def value_range(x, fmt: str = "{:.2f}") -> str:
    """Values over seeds as a range in words: ``0.11–0.14``, ``-0.04 to 0.01`` (a negative
    end), one value, or ``—``."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not len(x):
        return MISSING
    lo, hi = fmt.format(x.min()), fmt.format(x.max())
    return lo if lo == hi else f"{lo}{' to ' if x.min() < 0 else '–'}{hi}"


def per_seed_text(x, fmt: str = "{:.1f}") -> str:
    """Values over seeds in words, in seed order: ``0.8, 1.1 and 0.9``,
    with :data:`MISSING` for a missing one."""
    return listing([MISSING if is_missing(v) else fmt.format(v) for v in x], noun="")


# The claims' words (lib.book.claims): a chapter's verdict line, and each claim's status.
def counts_line(counts: dict[str, int]) -> str:
    """The counts in words, tiers apart, categories with no claim left out: ``37 claims: 12
    checks; 4 findings (3 reproduced, 1 new result); 21 measured``."""
    words = {"reproduced": "reproduced", "new": ("new result", "new results"),
             "partly": "partly reproduced", "not_reproduced": "not reproduced"}  # fmt: skip
    parts = []
    if counts["checks"]:
        parts.append(count(counts["checks"], "check"))
    found = []
    for key, word in words.items():
        n = counts[key]
        if n:
            found.append(f"{n} {word[n != 1] if isinstance(word, tuple) else word}")
    if found:
        parts.append(f"{count(counts['findings'], 'finding')} ({', '.join(found)})")
    if counts["measured"]:
        parts.append(f"{counts['measured']} measured")
    return f"{count(counts['n'], 'claim')}: " + "; ".join(parts)


def glue_key(claim_id: str) -> str:
    """The glue name of a claim's status (``claim_<id>``, non-alphanumerics as ``_``)."""
    return "claim_" + "".join(ch if ch.isalnum() else "_" for ch in claim_id)


def status_glue(rows) -> dict[str, str]:
    """Each claim's computed status and the seeds it held in, for the prose: ``claim_<id>``
    (e.g. ``partly``) and ``claim_<id>_held`` (e.g. ``3 of 4``; for a rate, its cases)."""
    out = {}
    for c in rows:
        out[glue_key(c.id)] = c.status
        k, n = c.cases or (sum(c.holds), len(c.holds))  # a rate: its cases, not its one verdict
        out[glue_key(c.id) + "_held"] = f"{k} of {n}"
    return out
