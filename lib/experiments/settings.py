"""A reader's own settings for one chapter (``make try``; :mod:`bookbuild.trying` runs it).

``SET`` holds ``key=value`` pairs, each value a Python literal; :func:`apply_settings`
validates them by the chapter's ``Config`` (a "did you mean" for an unknown key, one line
naming the type for a wrong value). A chapter's kernel reads them from the environment
(:data:`lib.env.SET_ENV`, for the chapter named by :data:`lib.env.CHAPTER_ENV` only).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import os
import re

from ..env import CHAPTER_ENV, SET_ENV, ConfigError

_PAIR = re.compile(r"(?:^|\s)([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\s*=")


def _tuples(value):
    if isinstance(value, list | tuple):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def parse_settings(text: str) -> dict:
    """``"gammas=(0.5, 1.0) seeds=(0, 1)"`` -> ``{"gammas": (0.5, 1.0), "seeds": (0, 1)}``.

    Each value is a Python literal (a number, a string in quotes, a tuple or list, a dict);
    lists become tuples. A key given twice is refused. Raises :class:`ConfigError` with one line for anything else."""
    text = (text or "").strip()
    if not text:
        raise ConfigError('SET is empty: name at least one setting, e.g. SET="seeds=(0, 1)"')
    keys = list(_PAIR.finditer(text))
    if not keys or text[: keys[0].start()].strip():
        raise ConfigError(f'SET={text!r}: write key=value pairs, e.g. SET="gammas=(0.5, 1.0)"')
    out = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(text)
        raw = text[m.end() : end].strip()
        if m.group(1) in out:
            raise ConfigError(f"SET names {m.group(1)} twice: give each setting once")
        try:
            out[m.group(1)] = _tuples(ast.literal_eval(raw))
        except (ValueError, SyntaxError):
            raise ConfigError(
                f"SET: the value of {m.group(1)} ({raw!r}) is not a Python literal; write "
                f"e.g. {m.group(1)}=(0.5, 1.0), {m.group(1)}=0.3 or {m.group(1)}='adam'"
            ) from None
    return out


def _nest(settings: dict) -> dict:
    """``{"runs.lr": 0.5, "seeds": (0,)}`` -> ``{"runs": {"lr": 0.5}, "seeds": (0,)}``."""
    out: dict = {}
    for key, value in settings.items():
        group, dot, name = key.partition(".")
        if dot:
            if not isinstance(out.setdefault(group, {}), dict):
                raise ConfigError(f"SET names {group} and {key}: give one of them")
            out[group][name] = value
        elif group in out:
            raise ConfigError(
                f"SET names {group} and {group}.{next(iter(out[group]))}: give one of them"
            )
        else:
            out[group] = value
    return out


def _apply(cfg, settings: dict, chapter: str, prefix: str = ""):
    names = [f.name for f in dataclasses.fields(cfg) if f.name != "scale"]
    changes = {}
    for key, value in settings.items():
        if key not in names:
            inside = [  # the key of a group's setting, without its group or as group_key
                f"{n}.{name}"
                for n in names
                if dataclasses.is_dataclass(getattr(cfg, n))
                for name in (key, key.removeprefix(f"{n}_"))
                if name in {f.name for f in dataclasses.fields(getattr(cfg, n))}
            ][:1]
            near = [prefix + n for n in inside + difflib.get_close_matches(key, names, n=1)]
            hint = (
                f"did you mean {near[0]!r}?"
                if near
                else f"its keys are: {', '.join(prefix + n for n in names)}"
            )
            raise ConfigError(f"chapter {chapter} has no setting {prefix + key!r}; {hint}")
        group = getattr(cfg, key)
        if dataclasses.is_dataclass(group) and isinstance(value, dict):
            value = _apply(group, value, chapter, f"{prefix}{key}.")
        changes[key] = value
    return dataclasses.replace(cfg, **changes)


def apply_settings(cfg, settings: dict):
    """``cfg`` with ``settings`` applied, validated: an unknown key gets a "did you mean",
    a value of the wrong type one line naming the type (the Config's own check). A key
    ``group.name`` (or a dict given for ``group``) sets values inside a group of settings."""
    return _apply(cfg, _nest(settings), cfg.chapter())


def settings_from_env(chapter: str) -> dict | None:
    """The try run's settings when this process runs a try of ``chapter``, else None."""
    if os.environ.get(CHAPTER_ENV) != chapter or not os.environ.get(SET_ENV):
        return None
    return parse_settings(os.environ[SET_ENV])


def differences(book_cfg, tried_cfg, prefix: str = "") -> list[tuple[str, object, object]]:
    """``(key, tried value, book value)`` for every setting that differs (``group.name``
    inside a group of settings)."""
    out = []
    for f in dataclasses.fields(book_cfg):
        tried, book = getattr(tried_cfg, f.name), getattr(book_cfg, f.name)
        if tried == book:
            continue
        if dataclasses.is_dataclass(book) and dataclasses.is_dataclass(tried):
            out += differences(book, tried, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, tried, book))
    return out
