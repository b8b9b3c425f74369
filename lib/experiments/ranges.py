"""The range of every chapter setting, checked by :class:`lib.experiments.ChapterConfig`.

A field's rule comes from its name (:data:`RULES`, the first pattern that matches), unless
its Config names one in ``RANGES`` (a class variable, ``{field: rule}``). A rule is one of

- ``"> 0"``, ``">= 1"``, ``"in (0, 1)"``, ``"in [0, 1]"``...: a bound on the number, or on
  every number of a tuple (a tuple must then be non-empty);
- ``"seeds"``: a non-empty tuple of distinct ints >= 0;
- ``"in FIELD"``: a value (or each value) among those of the Config's field ``FIELD``;
- ``"any"``: no check.

Every number must also be finite. None (an optional setting left out), strings and bools are
not checked here: their types are.
"""

from __future__ import annotations

import dataclasses
import math
import re

from ..env import ConfigError

# (pattern searched in the field's name, rule): the first that matches applies.
RULES: tuple[tuple[str, str], ...] = (
    (r"^log\d*_", "any"),  # exponents: log2_ratios
    (r"^n_|_n$", ">= 1"),  # counts: n_logs, n_gd_seeds, eval_n
    (r"(^|_)seeds$", "seeds"),
    (r"seed\d*$", ">= 0"),
    (r"(^|_)steps$", ">= 1"),
    (r"(^|_)(tol|eps|rel|clip)$", ">= 0"),  # tolerances, perturbations, gradient clips
    (r"(^|_)q$|quantiles$|(^|_)alpha$", "in (0, 1)"),  # quantiles and test levels
    (r"(^|_)p(_mod)?$", ">= 2"),  # moduli
    (r"gamma|(^|_)lr(_|$)|(^|_)r(_|$)|ratio|_mults$|factor|speedup|_over_|_step$|losses$", "> 0"),
    (r"lengths$|fraction$|_frac$|_keep$|_alphas$", "in (0, 1]"),  # shares of a whole
    (r"_min$|_max$|_acc$|_target$|^saturated$|_theta$", "in [0, 1]"),  # thresholds on shares
    (
        r"(^|_)(d|width|widths|hidden|vocab|context|len|batch|batch_size|layers|modes|reps|copies"
        r"|logs|every|anchors|top|tokens|chars|perm|boot|rows|points|skips|offsets|orders|keys"
        r"|rates|ahead|early|probe|chains)$|(^|_)d_|^top_|^t_",
        ">= 1",
    ),  # sizes and counts
    (r"weight|decay|delta|deltas|_from$|_below$|_mlp$", ">= 0"),
)

_BOUND = re.compile(r"^(>=|>) (-?[\d.]+)$|^in ([(\[])(-?[\d.]+), (-?[\d.]+)([)\]])$")


def rule_for(name: str, overrides: dict[str, str] | None = None) -> str | None:
    """The rule of the field ``name``: its Config's own, else the first of :data:`RULES`."""
    if overrides and name in overrides:
        return overrides[name]
    return next((rule for pattern, rule in RULES if re.search(pattern, name)), None)


def _numbers(value) -> list[float]:
    if isinstance(value, tuple):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [value]
    return []


def _within(x: float, rule: str) -> bool:
    m = _BOUND.match(rule)
    if m is None:
        raise ConfigError(f"unknown range rule {rule!r}: write e.g. '> 0', '>= 1', 'in (0, 1]'")
    if m.group(1):
        lo = float(m.group(2))
        return x > lo if m.group(1) == ">" else x >= lo
    lo, hi = float(m.group(4)), float(m.group(5))
    above = x > lo if m.group(3) == "(" else x >= lo
    below = x < hi if m.group(6) == ")" else x <= hi
    return above and below


def problem(cfg, name: str, rule: str | None, prefix: str = "") -> str | None:
    """What is wrong with the field ``name`` of ``cfg`` under ``rule`` (None: nothing); the
    field is named ``prefix + name`` (a group's fields: ``shk.steps``)."""
    value = getattr(cfg, name)
    name = prefix + name
    numbers = _numbers(value)
    if any(isinstance(x, float) and not math.isfinite(x) for x in numbers):
        return f"{name} must be finite, got {value!r}"
    if rule is None or rule == "any" or value is None or isinstance(value, str | bool):
        return None
    if isinstance(value, tuple) and not value:
        return f"{name} must not be empty"
    if rule == "seeds":
        ok = isinstance(value, tuple) and all(isinstance(s, int) and s >= 0 for s in value)
        if not ok or len(set(value)) != len(value):
            return f"{name} must be a tuple of distinct seeds, ints >= 0, got {value!r}"
        return None
    if rule.startswith("in ") and rule[3:].isidentifier():
        among = getattr(cfg, rule[3:])  # a field of the same config (or group)
        among = among if isinstance(among, tuple) else (among,)
        items = value if isinstance(value, tuple) else (value,)
        if all(v in among for v in items):
            return None
        return f"{name} must be one of {prefix}{rule[3:]} {among!r}, got {value!r}"
    bad = [x for x in numbers if not _within(x, rule)]
    if not bad:
        return None
    each = "each of " if isinstance(value, tuple) else ""
    return f"{each}{name} must be {rule}, got {value!r}"


def check_ranges(cfg, overrides: dict[str, str] | None = None, prefix: str = "") -> str | None:
    """The first problem of ``cfg``'s fields (one line), or None when every one is in range;
    the fields are named with ``prefix`` (a group's: ``shk.``)."""
    names = {f.name for f in dataclasses.fields(cfg)}
    for name in set(overrides or ()) - names:
        return f"RANGES names {name!r}, which is no field of the Config"
    for f in dataclasses.fields(cfg):
        if f.name != "scale":
            found = problem(cfg, f.name, rule_for(f.name, overrides), prefix)
            if found:
                return found
    return None
