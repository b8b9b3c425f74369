"""lib.data.tokenizers.char_split: a corpus split by whole documents and encoded as characters."""

from __future__ import annotations

import pytest
import torch

from lib.data import corpora as C
from lib.data import tokenizers


def _corpus(docs: dict[str, str]) -> C.Corpus:
    text, spans, start = "", [], 0
    for name, body in docs.items():
        if text:
            text += "\n\n"
            start = len(text)
        text += body
        spans.append((name, start, start + len(body)))
    return C.Corpus("toy", text, spans, "")


def test_char_split_encodes_both_sides_with_the_training_vocabulary():
    docs = {f"d{i}": "abc" * (i + 1) for i in range(10)}
    val_names = C.validation_documents(_corpus(docs), 0.2)
    docs[val_names[0]] += "xyz"  # characters that occur in no training document
    corpus = _corpus(docs)
    split = tokenizers.char_split(corpus, 0.2)
    train_text, val_text = C.split_by_document(corpus, 0.2)
    assert split.val_documents == val_names == C.validation_documents(corpus, 0.2)
    assert split.tokenizer.chars == sorted(set(train_text))
    assert split.tokenizer.decode(split.train) == train_text
    assert split.val_text == val_text.replace("x", "").replace("y", "").replace("z", "")
    assert split.tokenizer.decode(split.val) == split.val_text
    assert split.train.dtype == split.val.dtype == torch.int64


def test_char_split_keeps_every_validation_character_the_training_text_has():
    corpus = _corpus({f"d{i}": "ab\ncd" for i in range(5)})
    split = tokenizers.char_split(corpus)
    assert split.val_text == C.split_by_document(corpus)[1]  # nothing to drop


@pytest.mark.parametrize("val_fraction", [-0.1, 1.0])
def test_char_split_refuses_a_bad_fraction(val_fraction):
    with pytest.raises(ValueError, match="val_fraction"):
        tokenizers.char_split(_corpus({"a": "x", "b": "y"}), val_fraction)


def test_shakespeare_char_split_is_the_chapters_old_recipe():
    """Chapters 7 and 9 built this by hand: the tokenizer of the training plays, and the
    validation plays less the one character the training plays lack."""
    corpus = C.load_shakespeare()
    split = tokenizers.char_split(corpus)
    train_text, val_text = C.split_by_document(corpus)
    tok = tokenizers.CharTokenizer(train_text)
    assert split.tokenizer.chars == tok.chars
    assert torch.equal(split.train, tok.encode(train_text))
    dropped = set(val_text) - set(tok.chars)
    assert len(dropped) == 1
    assert len(split.val_text) == len(val_text) - sum(val_text.count(c) for c in dropped)
    assert len(split.val_documents) == 4
