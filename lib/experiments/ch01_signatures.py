"""Chapter 1, probability signatures: the tasks' repetitions and the corpus' size."""

from __future__ import annotations

from dataclasses import dataclass

from . import ChapterConfig

CHAPTER = "01_signatures"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """Chapter 1 at book scale.

    t1_reps, t3_reps: repetitions of the composite-addition (T1) and gated-addition (T3)
        datasets, which set how many samples each signature is counted from.
    corpus_chars: how much of the training corpus the signatures are counted from (None:
        all of it).
    bpe_vocab: the byte-pair tokenizer's vocabulary size.
    top_tokens: how many of the most frequent tokens the corpus similarity maps show.
    """

    t1_reps: int = 2
    t3_reps: int = 4
    corpus_chars: int | None = None
    bpe_vocab: int = 1024
    top_tokens: int = 100


OVERRIDES = {
    "ci": dict(t1_reps=1, t3_reps=2, corpus_chars=400_000, bpe_vocab=512, top_tokens=60),
    "paper": dict(t1_reps=4, t3_reps=8, bpe_vocab=4096, top_tokens=200),
}
