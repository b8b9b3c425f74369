"""The tokenizers the book trains on the corpora: characters, and byte-pair encoding.

:class:`CharTokenizer` gives every distinct character of a text an id; :func:`char_split`
tokenizes a corpus's training and held-out documents with it. :func:`train_bpe` trains a
byte-level BPE tokenizer (Hugging Face ``tokenizers``) on a text and caches it by a key
that holds every setting of the trainer (:func:`bpe_settings`, :func:`bpe_cache_path`), so
that a cached tokenizer is the one the settings would train. The corpora are
:mod:`lib.data.corpora`.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import tempfile
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np
import torch

from .corpora import Corpus, split_by_document, validation_documents

__all__ = [
    "CharTokenizer",
    "CharSplit",
    "char_split",
    "BPETokenizer",
    "train_bpe",
    "bpe_settings",
    "bpe_cache_path",
    "DEFAULT_BPE_CACHE",
]


REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


DEFAULT_BPE_CACHE = REPO_ROOT / ".cache" / "bpe"


def _as_id_list(ids: torch.Tensor | Iterable[int]) -> list[int]:
    if isinstance(ids, torch.Tensor):
        return ids.reshape(-1).tolist()
    return [int(i) for i in ids]


class CharTokenizer:
    """Character-level tokenizer: one id per distinct character of the text, in sorted order."""

    def __init__(self, text: str):
        self.chars: list[str] = sorted(set(text))
        self._index = {ch: i for i, ch in enumerate(self.chars)}
        # id of each code point up to the largest one in the vocabulary; -1: not in it
        self._lut = np.full(max(map(ord, self.chars), default=-1) + 1, -1, dtype=np.int64)
        self._lut[[ord(ch) for ch in self.chars]] = np.arange(len(self.chars))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        """``text`` → int64 tensor of ids; a character not seen at construction raises KeyError."""
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        ids = self._lut[np.minimum(codes, len(self._lut) - 1)] if len(self._lut) else codes
        bad = (codes >= len(self._lut)) | (ids < 0) if len(self._lut) else codes >= 0
        if bad.any():
            first = text[int(bad.argmax())]
            raise KeyError(f"character {first!r} is not in the tokenizer's vocabulary")
        return torch.from_numpy(ids.astype(np.int64, copy=False))

    def decode(self, ids: torch.Tensor | Iterable[int]) -> str:
        return "".join(self.chars[i] for i in _as_id_list(ids))

    def id_to_token(self, i: int) -> str:
        return self.chars[int(i)]

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class CharSplit(NamedTuple):
    """A corpus split by whole documents and encoded as characters (:func:`char_split`)."""

    tokenizer: CharTokenizer  # built on the training text
    train: torch.Tensor  # int64 ids of the training text
    val: torch.Tensor  # int64 ids of the validation text that ``val_text`` holds
    val_text: str  # the validation text, characters absent from the training text dropped
    val_documents: list[str]  # names of the held-out documents


def char_split(corpus: Corpus, val_fraction: float = 0.1) -> CharSplit:
    """The character-level data of a corpus: split by whole documents
    (:func:`split_by_document`), a :class:`CharTokenizer` built on the training text, both
    sides encoded. Validation characters that never occur in the training text have no id
    and are dropped from the validation text (Shakespeare: one character)."""
    train_text, val_text = split_by_document(corpus, val_fraction)
    tok = CharTokenizer(train_text)
    known = set(tok.chars)
    val_text = "".join(c for c in val_text if c in known)
    return CharSplit(
        tok,
        tok.encode(train_text),
        tok.encode(val_text),
        val_text,
        validation_documents(corpus, val_fraction),
    )


class BPETokenizer:
    """A trained byte-level BPE (HF ``tokenizers``) with :class:`CharTokenizer`'s interface."""

    def __init__(self, tokenizer, path: pathlib.Path | None = None, from_cache: bool = False):
        self.tokenizer = tokenizer
        self.path = path  # the JSON file on disk
        self.from_cache = from_cache  # True when loaded rather than trained

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str, chunk: int = 1 << 16) -> torch.Tensor:
        """``text`` → int64 tensor of ids.

        Long texts are cut into pieces of about ``chunk`` characters and encoded in parallel.
        The cuts are placed only after a newline with non-whitespace on both sides: the
        byte-level pre-tokenizer splits there in the same way whether or not the text goes on, so the ids equal those of one
        ``encode(text)`` call (tested), just several times faster on a whole corpus.
        """
        if len(text) <= chunk:
            return torch.tensor(self.tokenizer.encode(text).ids, dtype=torch.int64)
        pieces = self.tokenizer.encode_batch(list(_safe_chunks(text, chunk)))
        return torch.tensor([i for p in pieces for i in p.ids], dtype=torch.int64)

    def decode(self, ids: torch.Tensor | Iterable[int]) -> str:
        return self.tokenizer.decode(_as_id_list(ids))

    def id_to_token(self, i: int) -> str:
        """The token as readable text (bytes decoded; ``Ġ`` shown as a space)."""
        return self.tokenizer.decode([int(i)])

    def id_to_raw_token(self, i: int) -> str:
        """The token in byte-level form, e.g. ``'Ġthe'``."""
        return self.tokenizer.id_to_token(int(i))

    def __repr__(self) -> str:
        return f"BPETokenizer(vocab_size={self.vocab_size}, path={self.path})"


# A newline with non-whitespace on both sides is a pre-token of its own in the ByteLevel
# (GPT-2) split, both in the middle of a text and at its end, so it is a safe cut point.
# (After "\n\n" it is not: at the end of a string "\n\n" is one pre-token, before a
# letter it is two.)
_SAFE_CUT = re.compile(r"(?<=\S)\n(?=\S)")


def _safe_chunks(text: str, chunk: int) -> Iterator[str]:
    """Cut ``text`` into pieces of at least ``chunk`` chars, only just after a newline that
    has non-whitespace characters on both sides (see :meth:`BPETokenizer.encode`)."""
    start = 0
    while start < len(text):
        m = _SAFE_CUT.search(text, start + chunk)
        end = m.end() if m else len(text)
        yield text[start:end]
        start = end


def _lines(text: str, chunk: int = 1 << 16) -> Iterator[str]:
    """Cut ``text`` at newlines into pieces of about ``chunk`` characters (newlines kept)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + chunk)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


BPE_FORMAT = 2  # bump when train_bpe's recipe changes in a way its settings do not show


def bpe_settings(vocab_size: int) -> dict:
    """Everything that decides what :func:`train_bpe` trains, besides the text."""
    import tokenizers

    return {
        "format": BPE_FORMAT,
        "tokenizers": tokenizers.__version__,
        "model": "BPE",
        "pre_tokenizer": "ByteLevel(add_prefix_space=False)",
        "decoder": "ByteLevel",
        "initial_alphabet": "ByteLevel.alphabet()",
        "vocab_size": int(vocab_size),
        "line_chunk": 1 << 16,
    }


def bpe_cache_path(text: str, vocab_size: int, cache_dir: str | os.PathLike | None = None):
    """The cache file for ``text`` and ``vocab_size``: keyed by the text's hash and by
    every trainer setting, including the installed ``tokenizers`` version."""
    cache = pathlib.Path(cache_dir) if cache_dir is not None else DEFAULT_BPE_CACHE
    key = hashlib.sha256(
        (
            hashlib.sha256(text.encode("utf-8")).hexdigest()
            + json.dumps(bpe_settings(vocab_size), sort_keys=True)
        ).encode()
    ).hexdigest()
    return cache / f"{key[:16]}_v{vocab_size}.json"


def train_bpe(
    text: str, vocab_size: int, cache_dir: str | os.PathLike | None = None
) -> BPETokenizer:
    """Train (or load from cache) a byte-level BPE of ``vocab_size`` tokens on ``text``.

    ByteLevel pre-tokenizer (GPT-2 style, no prefix space) and decoder; the initial
    alphabet is all 256 bytes, so any string encodes and ``decode(encode(s)) == s``.
    Training is offline. The result is cached as JSON in ``cache_dir`` (default
    ``<repo>/.cache/bpe``, removed by ``make clean``) under a key of the text and of every
    trainer setting (:func:`bpe_settings`, the ``tokenizers`` version included), so a
    changed setting retrains. The file is written atomically and readable by all; a file
    that does not load (truncated, say) is named, removed and trained again.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    path = bpe_cache_path(text, vocab_size, cache_dir)
    cache = path.parent
    if path.is_file():
        try:
            return BPETokenizer(Tokenizer.from_file(str(path)), path, from_cache=True)
        except Exception as err:  # tokenizers raises a bare Exception on bad JSON
            print(f"the BPE cache file {path} is corrupt ({err}); training it again")
            path.unlink()

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_lines(text, bpe_settings(vocab_size)["line_chunk"]), trainer=trainer)

    # Write atomically: a half-written cache file from an interrupted run must never load.
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, suffix=".tmp")
    os.close(fd)
    try:
        tok.save(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return BPETokenizer(tok, path, from_cache=False)
