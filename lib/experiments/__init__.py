"""One experiment package per chapter: its typed configuration, its runs, readings, figures
and claims.

Each chapter ``chapters/NN_name.md`` has a package ``lib/experiments/chNN_name/`` whose
``__init__`` holds

- ``CHAPTER = "NN_name"``, the chapter file's stem;
- ``Config``, a frozen dataclass that subclasses :class:`ChapterConfig`. Its defaults are
  the ``book`` scale, and every scientific choice (the init rate γ, the learning rates, the
  ratio r) is a field named once, explained in the class docstring. Settings that belong
  together (the runs two chapters share) form a :class:`SubConfig` group;
- ``OVERRIDES = {"ci": {...}, "paper": {...}}``: for each other scale, only the values
  that change there (a dict for a group);

and whose modules hold the chapter's code: the runs (one call returns the results the page
reads), the readings that turn them into glued numbers and tables, the figures, and the
ledger of the chapter's claims. The ``__init__`` imports none of them: the names it offers
from its modules (``ex.fig_sweep``, ``ex.readings``) are imported the first time they are
read (:func:`lazy_exports`), so reading a chapter's settings (``make try`` checks them
before it starts) costs no torch, plotting or statistics. The page keeps the argument: a sentence, a short call, a
figure, a glued number.

A chapter starts with::

    from lib.experiments import announce
    from lib.experiments import ch07_rescaling_and_reduced_dynamics as ex

    cfg, device = announce(ex, cpu_threads=1)

Beside the chapters' packages: ``settings`` (a reader's own settings for ``make try``),
``ranges`` (the range of every setting, by its name),
``expansion`` (the configuration the two expansion chapters share), ``flow_figures``
(the figure layout those two chapters share), ``staircase_runs``
(the staircase's batched training runs, which four chapters share), and the QK/OV
chapters' shared settings, runs and readings, ``qkov_settings``, ``qkov_training``,
``qkov_readings`` and ``qkov_official`` (the official code's saved outputs); Chapter 12's arms and escape times,
``selective_escape``, and its distractor trap, ``selective_trap``; Chapter 5's readings
of its real-text runs (stairs over k, chain controls, order test), ``real_lm_stairs``.

This is the layer that starts training runs: the chapters, their modules here and the
shared runs call :func:`lib.training.engine.train`; the layers below define the models,
the losses, what a run logs and how it is read, and never start a run themselves.

Configs validate themselves: a field given a value of the wrong type or out of its range
(``gamma must be > 0, got -1``), or an override
with an unknown key or one equal to the book default, is refused with one line that
names the key, the chapter and the scale.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import pkgutil
import platform
import sys
import types
import typing
from types import ModuleType
from typing import Any, ClassVar, Literal, Union

from ..env import SCALES, ConfigError, check_scale, get_device, get_scale, perturbation
from .ranges import check_ranges
from .settings import apply_settings, differences, settings_from_env

__all__ = [
    "ChapterConfig",
    "SubConfig",
    "config",
    "announce",
    "modules",
    "module_for",
    "lazy_exports",
    "exported",
]


def _conforms(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the type ``hint`` (the subset of typing that configs use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if origin is Literal:
        return value in args
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(
            _conforms(v, a) for v, a in zip(value, args, strict=True)
        )
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    if hint is float:  # an int is a float; a bool is neither
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, origin or hint)


@dataclasses.dataclass(frozen=True)
class SubConfig:
    """Base class of a named group of settings inside a chapter's ``Config`` (the runs two
    chapters share, a model, a task). A frozen dataclass whose fields are checked like the
    Config's, by the Config that holds it, and named with a dot: ``runs.lr``. In
    ``OVERRIDES`` and in ``make try``'s ``SET`` a group takes a dict of the values that
    change (``runs=dict(lr=2.0)``), or one value at a time (``SET="runs.lr=0.5"``).
    """

    RANGES: ClassVar[dict[str, str]] = {}


def _check_fields(obj, where: str, prefix: str = "") -> None:
    """Raise one line for the first field of ``obj`` (or of a group in it) of the wrong type
    or out of its range."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _conforms(value, hints[f.name]):
            hint = getattr(hints[f.name], "__name__", None) or str(hints[f.name])
            raise ConfigError(
                f"{where}: {prefix}{f.name}={value!r} is a {type(value).__name__}, "
                f"but {prefix}{f.name} must be {hint.replace('typing.', '')}"
            )
        if isinstance(value, SubConfig):
            _check_fields(value, where, f"{prefix}{f.name}.")
    found = check_ranges(obj, obj.RANGES, prefix)
    if found:
        raise ConfigError(f"{where}: {found}")


def merge(cfg, changes: dict, where: str, refuse_defaults_of=None):
    """``cfg`` with ``changes`` applied; a dict for a group (:class:`SubConfig`) changes only
    the values it names. An unknown key gets a "did you mean"; with ``refuse_defaults_of``
    (the book's config), a change equal to its book value is refused."""
    names = [f.name for f in dataclasses.fields(cfg) if f.name != "scale"]
    out = {}
    for key, value in changes.items():
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; its keys are: {', '.join(names)}"
            raise ConfigError(f"{where}: unknown config key {key!r}{hint}")
        current = getattr(cfg, key)
        if isinstance(current, SubConfig) and isinstance(value, dict):
            book = getattr(refuse_defaults_of, key) if refuse_defaults_of is not None else None
            value = merge(current, value, f"{where}, in {key}", book)
        elif refuse_defaults_of is not None:
            book = getattr(refuse_defaults_of, key)
            if value == book and type(value) is type(book):
                raise ConfigError(
                    f"{where}: the override {key}={value!r} equals the book default; drop it"
                )
        out[key] = value
    return dataclasses.replace(cfg, **out)


@dataclasses.dataclass(frozen=True)
class ChapterConfig:
    """Base class of every chapter's ``Config``: the scale it is for, and type checks.

    Subclasses are frozen dataclasses; lists are written as tuples, so a config is
    immutable and hashable. Every value must also lie in its range (:mod:`.ranges`: a rule
    by the field's name, or the Config's own in ``RANGES``, ``{field: rule}``). Settings
    may be grouped in :class:`SubConfig` fields, checked the same way.
    """

    RANGES: ClassVar[dict[str, str]] = {}
    scale: str = "book"

    def __post_init__(self) -> None:
        where = f"chapter {self.chapter()} at scale {self.scale!r}"
        if self.scale not in SCALES:
            raise ConfigError(f"{where}: unknown scale; valid values are: {', '.join(SCALES)}")
        _check_fields(self, where)

    @classmethod
    def chapter(cls) -> str:
        """The chapter this config belongs to (its module's ``CHAPTER``)."""
        module = importlib.import_module(cls.__module__)
        return getattr(module, "CHAPTER", cls.__module__)


def config(module: ModuleType, scale: str | None = None) -> ChapterConfig:
    """The ``Config`` of an experiment module at ``scale`` (default: ``BOOK_SCALE``)."""
    scale = get_scale() if scale is None else scale
    chapter = getattr(module, "CHAPTER", module.__name__)
    if scale not in SCALES:
        raise ConfigError(
            f"chapter {chapter}: unknown scale {scale!r}; valid values are: {', '.join(SCALES)}"
        )
    cls = module.Config
    overrides = getattr(module, "OVERRIDES", {})
    unknown_scales = set(overrides) - (set(SCALES) - {"book"})
    if unknown_scales:
        raise ConfigError(
            f"chapter {chapter}: OVERRIDES has scale(s) {sorted(unknown_scales)}; the book "
            f"defaults are the Config's own, and the overrides are for: ci, paper"
        )
    where = f"chapter {chapter} at scale {scale!r}"
    defaults = cls()
    changes = dict(overrides.get(scale, {}))
    cfg = merge(dataclasses.replace(defaults, scale=scale), changes, where, defaults)
    tried = settings_from_env(chapter)  # a try run of this chapter (bookbuild.trying)
    return apply_settings(cfg, tried) if tried else cfg


def modules() -> dict[str, ModuleType]:
    """Every experiment module, by chapter stem."""
    out = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("ch"):
            m = importlib.import_module(f"{__name__}.{info.name}")
            out[m.CHAPTER] = m
    return out


def module_for(chapter: str) -> ModuleType:
    """The experiment module of ``chapter`` (a chapter file's stem)."""
    try:  # its own file, ``ch<stem>.py``, without importing every other chapter's
        module = importlib.import_module(f"{__name__}.ch{chapter}")
        if getattr(module, "CHAPTER", None) == chapter:
            return module
    except ImportError:
        pass
    found = modules()
    if chapter not in found:
        raise ConfigError(
            f"no experiment module for chapter {chapter!r}; known chapters: "
            f"{', '.join(sorted(found))}. Add the package lib/experiments/ch{chapter}/"
        )
    return found[chapter]


def _names_first(clashes: dict[str, tuple[str, str]]) -> type:
    """The class of a package that offers names its modules also have: when the import
    system binds such a module to the package, the package keeps the name the module
    defines, as ``from .gather import gather`` in its ``__init__`` would."""

    class NamesFirst(ModuleType):
        def __setattr__(self, name: str, value) -> None:
            if name in clashes and getattr(value, "__name__", None) == f"{self.__name__}.{name}":
                value = getattr(value, clashes[name][1])
            super().__setattr__(name, value)

    return NamesFirst


def exported(names: dict[str, tuple[str, ...]]) -> list[str]:
    """The names that :func:`lazy_exports` offers for ``names``, in order (an alias where
    one renames), for a package's ``__all__``."""
    return [entry.partition(" as ")[2] or entry for found in names.values() for entry in found]


def lazy_exports(package: str, names: dict[str, tuple[str, ...]]):
    """``(__getattr__, __dir__)`` for the package ``package`` (PEP 562): it offers, for each
    of its modules, the names ``names[module]`` (``"readout as smollm2_readout"`` renames
    one), and each of its modules by name, each imported the first time it is read.

    A chapter's ``__init__`` ends its imports with
    ``__getattr__, __dir__ = lazy_exports(__name__, {"figures": ("fig_sweep",), ...})``;
    ``ex.fig_sweep`` then imports ``figures`` and ``ex.readings`` the module ``readings``. A
    name that is also a module's (``ex.model``, the function of the module ``model``) is
    the name, as an import in the ``__init__`` would have made it.
    """
    where = {}
    for module, found in names.items():
        for entry in found:
            name, _, alias = entry.partition(" as ")
            where[alias or name] = (module, name)
    own = sys.modules[package]
    modules_of = {m.name for m in pkgutil.iter_modules(own.__path__)}
    clashes = {n: where[n] for n in where if n in modules_of}
    if clashes:  # a name that is also a module's (``gather`` of ``gather``): the name wins
        own.__class__ = _names_first(clashes)

    def __getattr__(name: str):
        if name in where:
            module, attr = where[name]
            value = getattr(importlib.import_module(f"{package}.{module}"), attr)
        elif name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        else:
            try:
                value = importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as err:
                if err.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(sys.modules[package], name, value)  # read once
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__


def announce(module: ModuleType, cpu_threads: int | None = None):
    """Set the chapter up: seed torch, cap its CPU threads, print the chapter, scale, device
    and versions; return ``(cfg, device)``.

    Called in every chapter's first code cell, so the first output of the page says at what
    scale and on what device its numbers were made. Every model and tensor of the chapter
    goes to the returned device. Side effects on the process: torch's global generator is
    seeded with 0 (``torch.manual_seed(0)``), and, when ``cpu_threads`` is given and the
    device is the CPU, torch's intra-op threads are capped at ``cpu_threads``
    (``torch.set_num_threads``; tiny models run faster on one thread of a shared machine; on
    a GPU the cap would only starve the host side).
    """
    import torch

    cfg = config(module)
    dev = get_device()
    check_scale(cfg.scale, dev)  # paper scale on a CPU: refused unless asked for
    torch.manual_seed(0)
    if cpu_threads is not None and dev.type == "cpu":
        torch.set_num_threads(int(cpu_threads))
    print(
        f"chapter {module.CHAPTER} | BOOK_SCALE={cfg.scale} | device={dev} | "
        f"torch {torch.__version__} | python {platform.python_version()}"
    )
    if settings_from_env(module.CHAPTER):
        _try_banner(module, cfg)
    perturbed = perturbation()
    if perturbed:
        print(f"a perturbed run, not the book: every initial parameter of every training run "
              f"is multiplied by 1 + {perturbed[0]:g} z, z ~ N(0, 1) from seed {perturbed[1]} "
              f"(BOOK_PERTURB)")  # fmt: skip
    return cfg, dev


def _try_banner(module: ModuleType, cfg: ChapterConfig) -> None:
    """A try run's first output says which settings differ from the book's."""
    rows = differences(_book_config(module, cfg.scale), cfg)
    print("a try run, not the book: " + ("; ".join(f"{k}={v!r} (book: {b!r})" for k, v, b in rows)
                                         or "every setting equals the book's"))  # fmt: skip


def _book_config(module: ModuleType, scale: str) -> ChapterConfig:
    """The chapter's config at ``scale`` as the book runs it (no try settings)."""
    import os

    from ..env import SET_ENV

    saved = os.environ.pop(SET_ENV, None)
    try:
        return config(module, scale)
    finally:
        if saved is not None:
            os.environ[SET_ENV] = saved
